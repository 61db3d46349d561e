package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore"
)

// digestTemplate is the command the quickstart maps over GOROOT: a file's SHA-256 and its
// line count, one per line.
var digestTemplate = []string{"sh", "-c", `sha256sum "$1" | cut -d" " -f1; wc -l < "$1"`, "_", "{}"}

// goCorpus returns up to n .go files of GOROOT/src, sorted.
func goCorpus(t *testing.T, n int) []string {
	t.Helper()
	var files []string
	root := filepath.Join(runtime.GOROOT(), "src")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if len(files) >= n {
			return fs.SkipAll
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") {
			files = append(files, path)
		}
		return nil
	})
	require.NoError(t, err)
	require.Len(t, files, n, "GOROOT has enough .go files")
	return files
}

type mapRecord struct {
	Input  string         `json:"input"`
	ID     string         `json:"id"`
	State  string         `json:"state"`
	Result map[string]any `json:"result"`
	Error  map[string]any `json:"error"`
}

func parseMapOutput(t *testing.T, out []byte) []mapRecord {
	t.Helper()
	var recs []mapRecord
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r mapRecord
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r), "line %q", sc.Text())
		recs = append(recs, r)
	}
	return recs
}

func TestMap(t *testing.T) {
	t.Parallel()

	t.Run("GoCorpusDigests", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t)
		files := goCorpus(t, 300)
		stdin := strings.Join(files, "\n") + "\n"
		args := append([]string{"map", "--workers", "4", "--progress", "lines", "--"}, digestTemplate...)
		out, errs, code := c.run(stdin, args...)
		require.Zero(t, code, errs)
		require.Contains(t, errs, "map: 300 jobs, 300 succeeded, 0 failed (0 already done before this run)")
		recs := parseMapOutput(t, []byte(out))
		require.Len(t, recs, len(files))
		for i, r := range recs {
			require.Equal(t, files[i], r.Input, "input order")
			require.Equal(t, "succeeded", r.State)
			b, err := os.ReadFile(files[i])
			require.NoError(t, err)
			sum := sha256.Sum256(b)
			want := fmt.Sprintf("%s\n%d\n", hex.EncodeToString(sum[:]), bytes.Count(b, []byte("\n")))
			require.Equal(t, want, r.Result["stdout"], files[i])
			require.Equal(t, float64(0), r.Result["exit_code"])
		}

		// Again, as completed: nothing runs, the same set comes back.
		args = append([]string{"map", "--completed", "--progress", "none", "--"}, digestTemplate...)
		out2, errs, code := c.run(stdin, args...)
		require.Zero(t, code, errs)
		require.Contains(t, errs, "(300 already done before this run)")
		recs2 := parseMapOutput(t, []byte(out2))
		require.ElementsMatch(t, recs, recs2)
	})

	t.Run("Failures", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t)
		out, errs, code := c.run("1\n2\n\n3\n4\n", "map", "--progress", "none", "--",
			"sh", "-c", `[ $(( $1 % 2 )) -eq 0 ] && { echo "odd one out" >&2; exit 9; }; echo ok $1`, "_", "{}")
		require.Equal(t, exitJobFailed, code)
		require.Contains(t, errs, "4 jobs, 2 succeeded, 2 failed")
		recs := parseMapOutput(t, []byte(out))
		require.Len(t, recs, 4, "blank lines are skipped")
		require.Equal(t, "failed", recs[1].State)
		require.Contains(t, recs[1].Error["message"], "exited with code 9; stderr: odd one out")
		require.Equal(t, "ok 3\n", recs[2].Result["stdout"])
	})

	t.Run("DifferentCommandRunsAgain", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t)
		out1 := c.ok("map", "--progress", "none", "--", "echo", "A", "{}")
		_, _, code := c.run("x\n", "map", "--progress", "none", "--", "echo", "A", "{}")
		require.Zero(t, code)
		out, _, code := c.run("x\n", "map", "--progress", "none", "--", "echo", "B", "{}")
		require.Zero(t, code)
		require.Contains(t, out, `"stdout":"B x\n"`)
		require.Empty(t, out1, "no inputs, no lines")
	})

	t.Run("BadInput", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t)
		dir := t.TempDir()
		bad := filepath.Join(dir, "bad.txt")
		require.NoError(t, os.WriteFile(bad, []byte("fine\nnot \xff utf8\n"), 0o600))
		_, errs, code := c.run("", "map", "-i", bad, "--", "echo", "{}")
		require.Equal(t, exitUsage, code)
		require.Contains(t, errs, "line 2 is not valid UTF-8 (bad byte 0xff at column 5)")

		_, errs, code = c.run("a\n", "map", "--", "no-such-command-lakeshore-test", "{}")
		require.Equal(t, exitUsage, code)
		require.Contains(t, errs, `command "no-such-command-lakeshore-test" cannot run`)

		_, errs, code = c.run("a\n", "map", "--out", filepath.Join(dir, "missing", "out.jsonl"), "--", "echo", "{}")
		require.Equal(t, exitUsage, code)
		require.Contains(t, errs, "not writable")

		_, _, code = c.run("a\n", "map", "-i", filepath.Join(dir, "nope.txt"), "--", "echo", "{}")
		require.Equal(t, exitUsage, code)

		// None of these submitted anything.
		require.Empty(t, c.ok("--json", "queues"))

		_, errs, code = c.run("", "worker", "q", "--", "no-such-command-lakeshore-test")
		require.Equal(t, exitUsage, code)
		require.Contains(t, errs, "cannot run")
	})

	t.Run("OutIsAtomic", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t)
		dir := t.TempDir()
		outPath := filepath.Join(dir, "out.jsonl")
		_, errs, code := c.run("a\nb\n", "map", "--out", outPath, "--progress", "none", "--", "echo", "{}")
		require.Zero(t, code, errs)
		recs := parseMapOutput(t, must(os.ReadFile(outPath)))
		require.Len(t, recs, 2)
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		require.Len(t, entries, 1, "no temporary file left")
	})

	t.Run("SIGKILLThenRerun", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		target := filepath.Join(dir, "plane.db")
		runs := filepath.Join(dir, "runs")
		require.NoError(t, os.Mkdir(runs, 0o700))
		const n = 200
		var inputs []string
		for i := range n {
			inputs = append(inputs, fmt.Sprintf("in-%04d", i))
		}
		inFile := filepath.Join(dir, "inputs.txt")
		require.NoError(t, os.WriteFile(inFile, []byte(strings.Join(inputs, "\n")+"\n"), 0o600))
		outPath := filepath.Join(dir, "out.jsonl")
		const workers = 4
		// Each execution appends a line to the input's side-effect file. The last inputs'
		// executions then wait for the file go, which the test makes only for the re-run:
		// the first map cannot finish, whenever the test gets to kill it. Before, a test
		// not run for ~0.7 s after the count it waited for let the map run the rest of
		// the 200 and exit 0 with its output written ('no partial output' failed).
		gated := strings.Join(inputs[n-workers:], "|")
		template := []string{"sh", "-c", `echo run >> "$0/$1"; case $1 in ` + gated + `) while [ ! -e "$0/../go" ]; do sleep 0.01; done;; esac; sleep 0.02; echo "done $1"`, runs, "{}"}
		args := append([]string{"--target", target, "map", "-i", inFile, "--out", outPath,
			"--workers", fmt.Sprint(workers), "--lease", "1s", "--progress", "lines", "--progress-interval", "100ms", "--"}, template...)

		first := exec.Command(binary, args...)
		firstErr := &lockedBuffer{}
		first.Stderr = firstErr
		require.NoError(t, first.Start())
		// SIGKILL at a random moment: after a random number of executions.
		killAfter := 5 + rand.IntN(n/2)
		deadline := time.Now().Add(30 * time.Second)
		for countRuns(t, runs) < killAfter {
			require.True(t, time.Now().Before(deadline), "map made no progress: %s", firstErr.String())
			time.Sleep(2 * time.Millisecond)
		}
		require.NoError(t, first.Process.Signal(syscall.SIGKILL))
		require.Error(t, first.Wait())
		t.Logf("killed after %d executions", countRuns(t, runs))
		_, err := os.Stat(outPath)
		require.ErrorIs(t, err, os.ErrNotExist, "no partial output")

		// The killed map's guard ends the commands it was running soon after, not at once:
		// the counts are taken once none is left (a command's `sh -c` names the runs
		// directory), or one still starting would append its run after them.
		deadline = time.Now().Add(30 * time.Second)
		for processesNaming(runs) > 0 {
			require.True(t, time.Now().Before(deadline), "the killed map's commands still run 30 s after the kill")
			time.Sleep(10 * time.Millisecond)
		}
		// Which inputs had succeeded before the kill.
		succeeded := succeededInputs(t, target, template, inputs)
		t.Logf("%d inputs had succeeded before the kill", len(succeeded))
		before := runCounts(t, runs, inputs)

		require.NoError(t, os.WriteFile(filepath.Join(dir, "go"), nil, 0o600))
		second := exec.Command(binary, args...)
		out, err := second.CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.Contains(t, string(out), fmt.Sprintf("map: %d jobs, %d succeeded, 0 failed", n, n))

		recs := parseMapOutput(t, must(os.ReadFile(outPath)))
		require.Len(t, recs, n)
		for i, r := range recs {
			require.Equal(t, inputs[i], r.Input)
			require.Equal(t, "succeeded", r.State)
			require.Equal(t, "done "+inputs[i]+"\n", r.Result["stdout"])
		}
		after := runCounts(t, runs, inputs)
		twice := 0
		for _, in := range inputs {
			require.GreaterOrEqual(t, after[in], 1, in)
			if succeeded[in] {
				require.Equal(t, 1, after[in], "%s succeeded before the kill and ran again", in)
			}
			if after[in] > 1 {
				twice++
				require.Equal(t, 1, before[in], "%s: only a job in flight at the kill runs again", in)
			}
		}
		require.LessOrEqual(t, twice, workers, "at most the jobs in flight at the kill run twice")
	})
}

// succeededInputs opens the plane a killed map left and returns the inputs whose job had
// succeeded, looked up by their keys as a re-run does.
func succeededInputs(t *testing.T, target string, argv, inputs []string) map[string]bool {
	t.Helper()
	d, err := lakeshore.Open(t.Context(), target, nil)
	require.NoError(t, err)
	defer d.Close()
	q, err := d.Queue(mapQueue(argv), nil)
	require.NoError(t, err)
	res, err := resolveInputs(t.Context(), d, q, argv, inputs, nil, 1)
	require.NoError(t, err)
	out := map[string]bool{}
	for _, r := range res {
		if r.state == lakeshore.StateSucceeded {
			out[r.text] = true
		}
	}
	return out
}

func countRuns(t *testing.T, dir string) int {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	return len(entries)
}

func runCounts(t *testing.T, dir string, inputs []string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, in := range inputs {
		b, err := os.ReadFile(filepath.Join(dir, in))
		if os.IsNotExist(err) {
			continue
		}
		require.NoError(t, err)
		out[in] = bytes.Count(b, []byte("run\n"))
	}
	return out
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
