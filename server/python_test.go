package server_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPythonStandardLibraryClient runs testdata/stdlib_client.py, a client written with
// Python's standard library only (urllib and json, no msgpack), against a real server on
// loopback: submit, claim, post, settle, wait and frames as plain JSON. It is skipped when
// python3 is absent, except under CI=true where its absence fails the test.
func TestPythonStandardLibraryClient(t *testing.T) {
	t.Parallel()
	py, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("python3 is not installed; CI must run the standard-library client test")
		}
		t.Skip("python3 is not installed: skipping the standard-library client test (install python3 to run it)")
	}
	b := setup(t, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, py, "testdata/stdlib_client.py", b.ts.URL).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, "ok", strings.TrimSpace(string(out)))
}
