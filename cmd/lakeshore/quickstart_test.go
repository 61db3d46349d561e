package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestQuickstart runs scripts/quickstart.sh, the README's first command, over the first
// 150 .go files of GOROOT and checks every result against a direct computation; a second
// run re-executes nothing.
func TestQuickstart(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the command and runs 150 jobs")
	}
	home := t.TempDir()
	script, err := filepath.Abs("../../scripts/quickstart.sh")
	require.NoError(t, err)
	runScript := func() string {
		cmd := exec.Command("sh", script)
		cmd.Env = append(os.Environ(), "LAKESHORE_HOME="+home, "LAKESHORE_QUICKSTART_LIMIT=150")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		return string(out)
	}
	out := runScript()
	require.Contains(t, out, "map: 150 jobs, 150 succeeded, 0 failed (0 already done before this run), wall time")
	require.Regexp(t, `[0-9.]+ jobs/s`, out)

	inputs := strings.Fields(string(must(os.ReadFile(filepath.Join(home, "goroot-files.txt")))))
	require.Len(t, inputs, 150)
	recs := parseMapOutput(t, must(os.ReadFile(filepath.Join(home, "goroot-digests.jsonl"))))
	require.Len(t, recs, 150)
	for i, r := range recs {
		require.Equal(t, inputs[i], r.Input)
		b := must(os.ReadFile(r.Input))
		sum := sha256.Sum256(b)
		require.Equal(t, fmt.Sprintf("%s\n%d\n", hex.EncodeToString(sum[:]), bytes.Count(b, []byte("\n"))), r.Result["stdout"], r.Input)
	}

	out = runScript()
	require.Contains(t, out, "map: 150 jobs, 150 succeeded, 0 failed (150 already done before this run)")
}
