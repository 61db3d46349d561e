package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore"
)

// execSetup opens a ":memory:" plane with a queue "x" for exec worker tests.
func execSetup(t *testing.T) (*lakeshore.Dispatch, *lakeshore.Queue) {
	t.Helper()
	d, err := lakeshore.Open(t.Context(), ":memory:", nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, d.Close()) })
	q, err := d.Queue("x", nil)
	require.NoError(t, err)
	return d, q
}

func testSpec(argv ...string) *execSpec {
	return &execSpec{argv: argv, grace: 300 * time.Millisecond, stdoutCap: stdoutCapDefault, stderrTail: stderrTailDefault, frames: true}
}

// runOnce runs the exec worker on one job of q.
func runOnce(t *testing.T, d *lakeshore.Dispatch, spec *execSpec, o *lakeshore.WorkerOptions) {
	t.Helper()
	if o == nil {
		o = &lakeshore.WorkerOptions{}
	}
	o.Once = true
	require.NoError(t, lakeshore.RunWorker(t.Context(), d, []lakeshore.Handler{lakeshore.Handle("x", spec.handle)}, o))
}

func TestExecWorker(t *testing.T) {
	t.Parallel()

	t.Run("StdinEnvArgsAndFrames", func(t *testing.T) {
		t.Parallel()
		d, q := execSetup(t)
		id, err := q.Submit(t.Context(), "héllo world", nil)
		require.NoError(t, err)
		runOnce(t, d, testSpec("sh", "-c",
			`cat; echo "$LAKESHORE_JOB_ID $LAKESHORE_QUEUE $LAKESHORE_ATTEMPT $LAKESHORE_NAMESPACE"; echo '{"k": [1, 2]}'; echo "arg=$1"; printf 'no newline'`,
			"_", "<{}>"), nil)
		v, err := q.ResultValue(t.Context(), id, nil)
		require.NoError(t, err)
		res := v.(map[string]any)
		require.Equal(t, int64(0), res["exit_code"])
		require.Equal(t, "\"héllo world\"\n"+id+" x 1 default\n{\"k\": [1, 2]}\narg=<héllo world>\nno newline", res["stdout"])

		var frames []any
		for f, err := range q.Stream(t.Context(), id, lakeshore.FromStart, nil) {
			require.NoError(t, err)
			frames = append(frames, f.Value)
		}
		require.Equal(t, []any{
			"héllo world", // the stdin JSON line parses as a JSON string
			id + " x 1 default",
			map[string]any{"k": []any{int64(1), int64(2)}},
			"arg=<héllo world>",
			"no newline",
		}, frames)
	})

	t.Run("NonStringPayloadOnStdinOnly", func(t *testing.T) {
		t.Parallel()
		d, q := execSetup(t)
		id, err := q.Submit(t.Context(), map[string]any{"n": 1}, nil)
		require.NoError(t, err)
		runOnce(t, d, testSpec("sh", "-c", `cat; echo "$1"`, "_", "{}"), nil)
		v, err := q.ResultValue(t.Context(), id, nil)
		require.NoError(t, err)
		require.Equal(t, "{\"n\":1}\n{}\n", v.(map[string]any)["stdout"])
	})

	t.Run("ExitCodeAndStderrTail", func(t *testing.T) {
		t.Parallel()
		d, q := execSetup(t)
		id, err := q.Submit(t.Context(), nil, &lakeshore.SubmitOptions{MaxAttempts: 2})
		require.NoError(t, err)
		spec := testSpec("sh", "-c", `i=0; while [ $i -lt 500 ]; do echo "noise $i" >&2; i=$((i+1)); done; echo "the last words" >&2; exit 3`)
		spec.stderrTail = 64
		runOnce(t, d, spec, nil)
		inv, err := q.Get(t.Context(), id)
		require.NoError(t, err)
		require.Equal(t, lakeshore.StateQueued, inv.State, "a non-zero exit is retried while attempts remain")
		require.Equal(t, "exit", inv.Error.Type)
		require.Contains(t, inv.Error.Message, "exited with code 3")
		require.Contains(t, inv.Error.Message, "the last words")
		require.NotContains(t, inv.Error.Message, "noise 1\n", "only the tail is kept")
		require.Less(t, len(inv.Error.Message), 250)
	})

	t.Run("StdoutCapped", func(t *testing.T) {
		t.Parallel()
		d, q := execSetup(t)
		id, err := q.Submit(t.Context(), nil, nil)
		require.NoError(t, err)
		spec := testSpec("sh", "-c", `i=0; while [ $i -lt 300 ]; do echo "line $i"; i=$((i+1)); done`)
		spec.stdoutCap = 100
		spec.frames = false
		runOnce(t, d, spec, nil)
		v, err := q.ResultValue(t.Context(), id, nil)
		require.NoError(t, err)
		res := v.(map[string]any)
		require.Len(t, res["stdout"], 100)
		require.Equal(t, true, res["stdout_truncated"])
	})

	t.Run("Timeout", func(t *testing.T) {
		t.Parallel()
		d, q := execSetup(t)
		id, err := q.Submit(t.Context(), nil, &lakeshore.SubmitOptions{MaxAttempts: 1})
		require.NoError(t, err)
		spec := testSpec("sleep", "30")
		spec.timeout = 200 * time.Millisecond
		start := time.Now()
		runOnce(t, d, spec, nil)
		require.Less(t, time.Since(start), 5*time.Second)
		// semantics: a per-attempt timeout on the last attempt ends the job as timeout
		err = q.Result(t.Context(), id, nil, nil)
		require.ErrorIs(t, err, lakeshore.ErrTimedOut)
		require.Contains(t, err.Error(), "job timeout 200ms passed")
	})

	t.Run("MissingCommandFailsWithoutRetry", func(t *testing.T) {
		t.Parallel()
		d, q := execSetup(t)
		id, err := q.Submit(t.Context(), nil, &lakeshore.SubmitOptions{MaxAttempts: 5})
		require.NoError(t, err)
		runOnce(t, d, testSpec(filepath.Join(t.TempDir(), "gone")), nil)
		inv, err := q.Get(t.Context(), id)
		require.NoError(t, err)
		require.Equal(t, lakeshore.StateFailed, inv.State)
		require.Contains(t, inv.Error.Message, "no such file")
	})

	t.Run("KillStopsTheProcessGroup", func(t *testing.T) {
		t.Parallel()
		d, q := execSetup(t)
		dir := t.TempDir()
		id, err := q.Submit(t.Context(), nil, nil)
		require.NoError(t, err)
		// The command starts a grandchild that ignores SIGTERM (only SIGKILL ends it) and one
		// that does not, records their pids, and waits.
		spec := testSpec("sh", "-c", `
			sh -c 'trap "" TERM; exec sleep 300' & echo $! > "$0/stubborn"
			sleep 300 & echo $! > "$0/plain"
			echo $$ > "$0/leader"
			touch "$0/ready"
			wait`, dir)
		// The kill is learnt at a heartbeat (every 100 ms); the lease, a minute, cannot run
		// out first on a loaded machine (a 600 ms one could, 400 ms of delay re-queuing the job).
		done := make(chan error, 1)
		go func() {
			done <- lakeshore.RunWorker(t.Context(), d, []lakeshore.Handler{lakeshore.Handle("x", spec.handle)},
				&lakeshore.WorkerOptions{Once: true, LeaseTTL: time.Minute, HeartbeatInterval: 100 * time.Millisecond})
		}()
		waitFile(t, filepath.Join(dir, "ready"))
		pids := map[string]int{}
		for _, name := range []string{"stubborn", "plain", "leader"} {
			b, err := os.ReadFile(filepath.Join(dir, name))
			require.NoError(t, err)
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			require.NoError(t, err)
			require.True(t, alive(pid), name)
			pids[name] = pid
		}
		killed, err := q.Kill(t.Context(), id)
		require.NoError(t, err)
		require.True(t, killed)
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Fatal("the worker did not stop the killed job")
		}
		for name, pid := range pids {
			waitGone(t, name, pid)
		}
		inv, err := q.Get(t.Context(), id)
		require.NoError(t, err)
		require.Equal(t, lakeshore.StateKilled, inv.State)
	})
}

// alive reports whether pid runs (a zombie counts as gone).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || (s[i+2] != 'Z' && s[i+2] != 'X')
}

func waitGone(t *testing.T, name string, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %s (%d) still runs", name, pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestExecRefusesThePayloadInInlineCode: {} inside a shell's -c script (or an interpreter's
// -c/-e program) is refused before anything is claimed: the substitution would make a
// payload code there, so the submit right would run commands on the worker (a payload
// `x; touch pwned` to `sh -c 'wc -c {}'`). Given after the code ("$1") it is a value, and
// accepted. Before, checkCommand took both.
func TestExecRefusesThePayloadInInlineCode(t *testing.T) {
	for _, argv := range [][]string{
		{"sh", "-c", "wc -c {}"},
		{"bash", "-ec", "echo {}.png"},
		{"sh", "-o", "pipefail", "-c", "cat {} | wc"},
		{"env", "A=1", "sh", "-c", "echo {}"},
		{"/bin/sh", "-c", "--", "echo {}"},
		{"python3", "-u", "-c", "print('{}')"},
		{"perl", "-e", "print '{}'"},
	} {
		err := testSpec(argv...).checkCommand()
		if _, interp := exec.LookPath(argv[0]); interp != nil && argv[0] != "env" {
			continue // not installed here: LookPath's error comes first
		}
		require.Error(t, err, "%q", argv)
		require.Contains(t, err.Error(), "{} inside the code of", "%q", argv)
		require.Contains(t, err.Error(), `sh -c 'convert "$1" out.png' _ {}`)
	}
	for _, argv := range [][]string{
		{"sh", "-c", `wc -c "$1"`, "_", "{}"},
		{"sh", "./work.sh", "{}"},
		{"echo", "-c", "{}"},
		{"python3", "work.py", "-c", "{}"},
		{"env", "sh", "-c", `echo "$1"`, "sh", "{}"},
	} {
		if _, err := exec.LookPath(argv[0]); err != nil {
			continue
		}
		require.NoError(t, testSpec(argv...).checkCommand(), "%q", argv)
	}
}

// TestInlineCodeLooksThroughRunnersAndOptions: {} in inline code is found whatever runs
// the shell or interpreter (env with its options, xargs, find -exec, timeout, busybox) and
// however its options are written (bash -O extglob / --rcfile FILE before -c, perl -ne,
// python -Bc and -W ignore, a program joined to its option, node --eval/-p). Before,
// only `env NAME=VALUE…` and a lone -c/-e before any option's value were read, so each of
// the first list ran a payload as code. The second list stays accepted: {} as a value.
func TestInlineCodeLooksThroughRunnersAndOptions(t *testing.T) {
	for _, argv := range [][]string{
		{"env", "-i", "sh", "-c", "echo {}"},
		{"env", "-u", "HOME", "bash", "-c", "echo {}"},
		{"xargs", "sh", "-c", "echo {}"},
		{"find", ".", "-name", "*.png", "-exec", "sh", "-c", "echo {}", ";"},
		{"timeout", "5", "bash", "-lc", "echo {}"},
		{"busybox", "sh", "-c", "echo {}"},
		{"bash", "-O", "extglob", "-c", "echo {}"},
		{"bash", "--rcfile", "/dev/null", "-c", "echo {}"},
		{"bash", "-eo", "pipefail", "-c", "echo {}"},
		{"perl", "-ne", "print '{}'"},
		{"perl", "-lane", "print '{}'"},
		{"perl", "-e", "print '{}'"},
		{"perl", "-e print '{}'"},
		{"python3", "-Bc", "print('{}')"},
		{"python3", "-W", "ignore", "-c", "print('{}')"},
		{"python3.12", "-cprint('{}')"},
		{"node", "--eval", "console.log('{}')"},
		{"node", "--eval=console.log('{}')"},
		{"node", "-p", "'{}'"},
		{"node", "-r", "dotenv/config", "-e", "console.log('{}')"},
		{"ruby", "-I", "lib", "-e", "puts '{}'"},
	} {
		if interp, code := inlineCode(argv); !strings.Contains(code, "{}") {
			t.Errorf("%q: no inline code found (%q, %q)", argv, interp, code)
		}
	}
	for _, argv := range [][]string{
		{"sh", "-c", `wc -c "$1"`, "_", "{}"},
		{"env", "-i", "sh", "-c", `echo "$1"`, "sh", "{}"},
		{"xargs", "-0", "convert", "{}"},
		{"find", ".", "-exec", "convert", "{}", "{}.png", ";"},
		{"bash", "-O", "extglob", "-c", `echo "$1"`, "_", "{}"},
		{"convert", "{}", "-resize", "256x256", "{}.thumb.png"},
		{"python3", "-W", "ignore", "work.py", "-c", "{}"},
		{"python3", "-m", "tool", "-c", "{}"},
		{"perl", "-Ilib", "work.pl", "-e", "{}"},
		{"node", "--max-old-space-size=512", "work.js", "--eval", "{}"},
		{"ruby", "work.rb", "{}"},
	} {
		if interp, code := inlineCode(argv); strings.Contains(code, "{}") {
			t.Errorf("%q: refused (%q, %q)", argv, interp, code)
		}
	}
	// Through checkCommand with what is installed here (LookPath's error comes first).
	for _, argv := range [][]string{{"env", "-i", "sh", "-c", "echo {}"}, {"xargs", "sh", "-c", "echo {}"}} {
		if _, err := exec.LookPath(argv[0]); err != nil {
			continue
		}
		err := testSpec(argv...).checkCommand()
		require.Error(t, err, "%q", argv)
		require.Contains(t, err.Error(), `{} inside the code of "sh -c"`)
	}
}

// TestExecRefusesAProgramReadFromStdin: a shell or interpreter that reads its program from
// stdin (no script, no -c; bash -s; python3 -) is refused at start: stdin is the job's
// payload, so the payload would be its program (a string payload "$(touch pwned)" is JSON
// `"$(touch pwned)"`, which sh runs). Before, checkCommand took these. One with a script
// file or inline code stays accepted.
func TestExecRefusesAProgramReadFromStdin(t *testing.T) {
	for _, argv := range [][]string{
		{"sh"}, {"bash", "-s", "x"}, {"bash", "-e"}, {"env", "-i", "A=1", "sh"}, {"sh", "--"}, {"sh", "-"},
		{"python3"}, {"python3", "-u", "-"}, {"perl", "-w"}, {"node", "--"},
	} {
		if prog := stdinProgram(argv); prog == "" {
			t.Errorf("%q: not seen to read its program from stdin", argv)
		}
	}
	for _, argv := range [][]string{
		{"sh", "./work.sh", "{}"}, {"bash", "-e", "work.sh"}, {"sh", "-c", `echo "$1"`, "_", "{}"}, {"env", "A=1", "sh", "w.sh"},
		{"python3", "work.py"}, {"python3", "-m", "tool"}, {"python3", "-c", "import sys"}, {"perl", "-ne", "print"},
		{"cat"}, {"jq", "."}, {"xargs", "sh"},
	} {
		if prog := stdinProgram(argv); prog != "" {
			t.Errorf("%q: refused as reading %q's program from stdin", argv, prog)
		}
	}
	err := testSpec("sh").checkCommand()
	require.Error(t, err)
	require.Contains(t, err.Error(), `"sh" reads its program from stdin`)
}

// TestExecRefusesThePayloadAsTheProgram: {} as the program itself (-- {}) or as what a
// runner at the command's start runs (timeout 5 {}, env {}, xargs {}, find -exec {},
// env -S '{} x') lets whoever submits a job choose the executable run on the worker: it is
// refused at start (exit 2, saying why and the safe form). {} as an argument stays
// accepted. Before, -- {} failed only as a command not found (no reason given) and the
// runners' forms were accepted.
func TestExecRefusesThePayloadAsTheProgram(t *testing.T) {
	for _, argv := range [][]string{
		{"{}"}, {"./{}"}, {"timeout", "5", "{}"}, {"timeout", "-s", "KILL", "5", "{}", "x"}, {"env", "{}"},
		{"env", "-i", "A=1", "{}"}, {"xargs", "{}"}, {"xargs", "-n", "1", "{}"}, {"nice", "-n", "5", "{}"},
		{"env", "timeout", "5", "{}"}, {"find", ".", "-exec", "{}", ";"}, {"env", "-S", "{} x"},
		{"env", "-S", "timeout 5 {}"}, {"env", "-S{}"},
	} {
		if _, ok := placeholderProgram(splitEnvS(argv)); !ok {
			t.Errorf("%q: {} not seen as the program", argv)
		}
	}
	for _, argv := range [][]string{
		{"./work.sh", "{}"}, {"timeout", "5", "./work.sh", "{}"}, {"env", "A={}", "./work.sh"}, {"xargs", "-I", "{}", "cp", "{}", "/tmp"},
		{"convert", "{}", "out.png"}, {"find", ".", "-exec", "convert", "{}", ";"}, {"env", "-S", "./work.sh {}"},
	} {
		if by, ok := placeholderProgram(splitEnvS(argv)); ok {
			t.Errorf("%q: refused as {} the program %s", argv, by)
		}
	}
	for _, argv := range [][]string{{"{}"}, {"timeout", "5", "{}"}, {"env", "{}"}, {"xargs", "{}"}} {
		err := testSpec(argv...).checkCommand()
		require.Error(t, err, "%q", argv)
		require.Equal(t, 2, exitCode(err), "%q: a usage error", argv)
		require.Contains(t, err.Error(), "{} is the program", "%q", argv)
		require.Contains(t, err.Error(), "timeout 5 ./work.sh {}")
	}
}

// TestInlineCodeThroughEnvSplitStringAndNodeValues: env -S splits its string into the
// command it runs (env -S 'sh -c "echo {}"' runs sh -c 'echo {}'), and node's
// --inspect-port takes the next argument as its value: both are read through, so {} in
// their inline code is refused. Before, env -S's string was one argument and node's
// --inspect-port value was taken for a script, so both were accepted.
func TestInlineCodeThroughEnvSplitStringAndNodeValues(t *testing.T) {
	for _, argv := range [][]string{
		{"env", "-S", `sh -c "echo {}"`},
		{"env", "-iS", `sh -c 'echo {}'`},
		{"env", "--split-string=bash -c 'echo {}'"},
		{"node", "--inspect-port", "9229", "-e", "console.log('{}')"},
	} {
		if interp, code := inlineCode(splitEnvS(argv)); !strings.Contains(code, "{}") {
			t.Errorf("%q: no inline code found (%q, %q)", argv, interp, code)
		}
	}
	if interp, code := inlineCode(splitEnvS([]string{"env", "-S", `sh -c 'echo "$1"' _`, "{}"})); strings.Contains(code, "{}") {
		t.Errorf("{} as a value after env -S's code refused (%q, %q)", interp, code)
	}
	if _, err := exec.LookPath("sh"); err == nil {
		err := testSpec("env", "-S", `sh -c "echo {}"`).checkCommand()
		require.Error(t, err)
		require.Contains(t, err.Error(), `{} inside the code of "sh -c"`)
	}
	require.Equal(t, "sh", stdinProgram(splitEnvS([]string{"timeout", "5", "sh"})), "timeout 5 sh reads the payload as its program")
}
