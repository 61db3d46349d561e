package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// Defaults of the exec worker.
const (
	graceDefault      = 10 * time.Second
	stdoutCapDefault  = 64 << 10
	stderrTailDefault = 4 << 10
)

// execSpec is how the exec worker runs a command once per job.
type execSpec struct {
	argv       []string
	timeout    time.Duration // per job; 0: none
	grace      time.Duration // SIGTERM to SIGKILL
	stdoutCap  int           // bytes of stdout kept in the result
	stderrTail int           // bytes of stderr kept (the last ones)
	frames     bool          // post each stdout line as a VALUE frame
	// rateLimitedExit is the exit code that means "slow down" (0: none): the job goes back
	// to its queue after rateLimitedDelay, its attempt kept and its concurrency key held
	// back as long (lakeshore.RateLimited).
	rateLimitedExit  int
	rateLimitedDelay time.Duration
}

// checkCommand fails early, before anything is claimed, when the command cannot run or a
// limit of its runs is out of range.
func (s *execSpec) checkCommand() error {
	switch {
	case s.timeout < 0:
		return usageError(plane.Invalid("--timeout", s.timeout, "use a duration ≥ 0 (0: none)"))
	case s.grace < 0:
		return usageError(plane.Invalid("--grace", s.grace, "use a duration ≥ 0 (0: SIGKILL right after SIGTERM)"))
	case s.stdoutCap < 0:
		return usageError(plane.Invalid("--stdout-cap", s.stdoutCap, "use a number of bytes ≥ 0 (0: keep none)"))
	case s.stderrTail < 0:
		return usageError(plane.Invalid("--stderr-tail", s.stderrTail, "use a number of bytes ≥ 0 (0: keep none)"))
	}
	if len(s.argv) == 0 {
		return usagef("no command: put it after --, e.g. lakeshore worker QUEUE -- ./work.sh {}")
	}
	argv := splitEnvS(s.argv)
	if by, ok := placeholderProgram(argv); ok {
		return usagef("{} is the program %s: a job's payload would name the executable run on this machine (anyone who may "+
			"submit to the queue could run any program here); name the program and pass {} as its argument, "+
			"e.g. lakeshore worker QUEUE -- timeout 5 ./work.sh {}", by)
	}
	if _, err := exec.LookPath(s.argv[0]); err != nil {
		return usagef("command %q cannot run: %w", s.argv[0], err)
	}
	if prog := stdinProgram(argv); prog != "" {
		return usagef("%q reads its program from stdin, where the worker writes a job's payload: the payload would be run as code "+
			"(anyone who may submit to the queue could run commands on this machine); give it a script file or inline code, "+
			"e.g. sh ./work.sh {} or python3 work.py {}", prog)
	}
	if interp, code := inlineCode(argv); strings.Contains(code, "{}") {
		return usagef("{} inside the code of %q: a job's payload would be run as code there (anyone who may submit to the queue "+
			"could run commands on this machine); pass it as an argument after the code and read that instead, e.g. "+
			"sh -c 'convert \"$1\" out.png' _ {}", interp)
	}
	return nil
}

// shells run their -c operand as shell code (-o and -O take the next argument, as
// --rcfile and --init-file do).
var shells = []string{"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "fish", "csh", "tcsh"}

// interpreter is how an interpreter's command line gives it a program inline.
type interpreter struct {
	code   string   // the short options whose value is the program (python's c, perl's e and E)
	long   []string // the long options whose value is the program (node's --eval)
	longV  []string // the other long options that take the next argument (node --inspect-port 9229)
	valued string   // the other short options that take the next argument (python -W ignore)
	module string   // a short option after which the rest are a module's arguments (python -m)
}

// nodeValued are node's long options that may take their value as the next argument.
var nodeValued = []string{"--inspect-port", "--debug-port", "--require", "--import", "--loader", "--experimental-loader",
	"--conditions", "--title", "--input-type", "--env-file", "--stack-size", "--max-old-space-size"}

// interpreters by name (python3.12 and pypy3 are python; nodejs is node).
var interpreters = map[string]interpreter{
	"python": {code: "c", valued: "WX", module: "m"},
	"pypy":   {code: "c", valued: "WX", module: "m"},
	"perl":   {code: "eE"},
	"ruby":   {code: "e", valued: "IrCE"},
	"node":   {code: "ep", long: []string{"--eval", "--print"}, valued: "rC", longV: nodeValued},
	"nodejs": {code: "ep", long: []string{"--eval", "--print"}, valued: "rC", longV: nodeValued},
	"php":    {code: "r", valued: "cdz"},
}

// inlineCode returns the code a command runs inline — a shell's -c script, an
// interpreter's -c or -e program — and how it was given ("sh -c"), or "" when it runs
// none. The exec worker's {} is a plain substitution: inside such code a payload is code
// (a payload `x; rm -rf ~` in sh -c 'wc {}'), where after it it is a value ("$1").
// Every argument is looked at as a command's start, so that whatever runs a command
// (env -i, xargs, find -exec, timeout, nice, sudo, busybox) is looked through without a
// list of them; an argument that only names a shell ("echo sh -c '{}'") is refused with
// them, which is the safe side. Options are read as the programs read them: clustered
// (bash -lc, perl -ne, python -Bc), the program joined to its option (perl -e'…',
// python -c'…'), options taking a value skipped (bash -O extglob, python -W ignore).
func inlineCode(argv []string) (interp, code string) {
	for i := range argv {
		base := filepath.Base(argv[i])
		if slices.Contains(shells, base) {
			if code, ok, _ := shellCode(argv[i+1:]); ok && strings.Contains(code, "{}") {
				return base + " -c", code
			}
			continue
		}
		name := strings.TrimRight(base, "0123456789.")
		if in, ok := interpreters[name]; ok {
			if flag, code, ok, _ := in.program(argv[i+1:]); ok && strings.Contains(code, "{}") {
				return base + " " + flag, code
			}
		}
	}
	return "", ""
}

// stdinProgram returns the command ("sh", "python3") when it reads its program from
// stdin, where the exec worker writes a job's payload (sh or bash -s alone, python3 or
// python3 -, perl, node…): the payload would be run as code. Only the command's own start
// is read, through env and its options and assignments.
func stdinProgram(argv []string) string {
	for _, p := range programs(argv) {
		if !p.stdin {
			continue
		}
		base := filepath.Base(argv[p.at])
		if slices.Contains(shells, base) {
			if _, _, stdin := shellCode(argv[p.at+1:]); stdin {
				return base
			}
		} else if in, ok := interpreters[strings.TrimRight(base, "0123456789.")]; ok {
			if _, _, _, stdin := in.program(argv[p.at+1:]); stdin {
				return base
			}
		}
	}
	return ""
}

// placeholderProgram reports whether {} is (in) the name of a program the command runs —
// the command itself, or what a runner at its start runs (timeout 5 {}, env {}, xargs {},
// find -exec {}) — and how it is run ("itself", `run by "timeout"`): the payload would
// choose the executable.
func placeholderProgram(argv []string) (by string, ok bool) {
	for _, p := range programs(argv) {
		if strings.Contains(argv[p.at], "{}") {
			if p.by < 0 {
				return "itself", true
			}
			return fmt.Sprintf("run by %q", filepath.Base(argv[p.by])), true
		}
	}
	return "", false
}

// runner is how a program that runs a command (env, timeout, xargs…) reads its own
// arguments before the command's.
type runner struct {
	valued   string   // short options that take the next argument (timeout -s KILL)
	long     []string // long options that take the next argument unless joined by =
	operands int      // its own operands before the command (timeout's DURATION)
	assigns  bool     // NAME=VALUE arguments before the command are its own (env)
	stdin    bool     // the command reads the worker's stdin (xargs gives it none)
}

// runners by name: what the command's start is read through (programs). find's -exec
// is read apart.
var runners = map[string]runner{
	"env":     {valued: "uCS", long: []string{"--unset", "--chdir", "--split-string"}, assigns: true, stdin: true},
	"timeout": {valued: "sk", long: []string{"--signal", "--kill-after"}, operands: 1, stdin: true},
	"nice":    {valued: "n", long: []string{"--adjustment"}, stdin: true},
	"nohup":   {stdin: true},
	"setsid":  {stdin: true},
	"stdbuf":  {valued: "ioe", long: []string{"--input", "--output", "--error"}, stdin: true},
	"ionice":  {valued: "cnpPu", long: []string{"--class", "--classdata", "--pid", "--pgid", "--uid"}, stdin: true},
	"time":    {valued: "fo", long: []string{"--format", "--output"}, stdin: true},
	"sudo":    {valued: "ugpCDhrtTUR", long: []string{"--user", "--group", "--prompt", "--chdir"}, stdin: true},
	"doas":    {valued: "uC", stdin: true},
	"busybox": {stdin: true},
	"xargs": {valued: "adEILnPs", long: []string{"--arg-file", "--delimiter", "--max-args", "--max-lines",
		"--max-procs", "--max-chars", "--process-slot-var"}},
}

// program is a command run by a command line: argv's index of its name, the index of
// the runner that runs it (-1 for the command itself), and whether the worker's stdin (a
// job's payload) reaches it.
type program struct {
	at, by int
	stdin  bool
}

// programs returns the programs a command line runs: the command, and through each
// runner at its start (env with its options and assignments, timeout DURATION, nice,
// xargs, sudo, busybox…) the command that runner runs, and each of find's -exec commands.
func programs(argv []string) []program {
	var out []program
	stdin, by := true, -1
	for i := 0; i < len(argv); {
		out = append(out, program{at: i, by: by, stdin: stdin})
		base := filepath.Base(argv[i])
		if base == "find" {
			for j := i + 1; j+1 < len(argv); j++ {
				if a := argv[j]; a == "-exec" || a == "-execdir" || a == "-ok" || a == "-okdir" {
					for _, p := range programs(argv[j+1:]) {
						if p.by < 0 {
							p.by = i - j - 1 // find itself
						}
						out = append(out, program{at: j + 1 + p.at, by: j + 1 + p.by, stdin: false})
					}
				}
			}
			return out
		}
		r, ok := runners[base]
		if !ok {
			return out
		}
		stdin, by = stdin && r.stdin, i
		i++
	options:
		for i < len(argv) {
			a := argv[i]
			switch {
			case a == "--":
				i++
				break options
			case r.assigns && !strings.HasPrefix(a, "-") && strings.Contains(a, "="):
			case a == "-" || !strings.HasPrefix(a, "-"):
				break options
			case strings.HasPrefix(a, "--"):
				if name, _, joined := strings.Cut(a, "="); !joined && slices.Contains(r.long, name) {
					i++ // its value
				}
			default:
				for j, c := range a[1:] {
					if strings.ContainsRune(r.valued, c) {
						if a[2+j:] == "" {
							i++ // its value is the next argument
						}
						break // the rest of the cluster is its value
					}
				}
			}
			i++
		}
		i += r.operands
	}
	return out
}

// splitEnvS returns argv with each `env -S STRING` (--split-string) replaced by env and
// the arguments STRING splits into, as env splits them (words apart at blanks, quoted
// with '…' or "…", \ escaping), so that what it runs is read as any command's is.
func splitEnvS(argv []string) []string {
	for i := range argv {
		if filepath.Base(argv[i]) != "env" {
			continue
		}
		for j := i + 1; j < len(argv) && strings.HasPrefix(argv[j], "-") && argv[j] != "--"; j++ {
			a, value, next := argv[j], "", j+1
			switch {
			case a == "--split-string" || a == "-S":
				if j+1 == len(argv) {
					return argv
				}
				value, next = argv[j+1], j+2
			case strings.HasPrefix(a, "--split-string="):
				value = strings.TrimPrefix(a, "--split-string=")
			case !strings.HasPrefix(a, "--") && strings.Contains(a, "S"):
				k := strings.IndexByte(a, 'S')
				if strings.ContainsAny(a[1:k], "uC") {
					continue // S is in -u's or -C's value
				}
				if value = a[k+1:]; value == "" {
					if j+1 == len(argv) {
						return argv
					}
					value, next = argv[j+1], j+2
				}
			default:
				if a == "-u" || a == "-C" || a == "--unset" || a == "--chdir" {
					j++ // its value
				}
				continue
			}
			out := append(slices.Clone(argv[:j]), envWords(value)...)
			return splitEnvS(append(out, argv[next:]...))
		}
	}
	return argv
}

// envWords splits env -S's string into its words.
func envWords(s string) []string {
	var words []string
	var w strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				w.WriteByte(c)
			}
		case c == '\\' && i+1 < len(s):
			i++
			w.WriteByte(s[i])
			in = true
		case quote == '"':
			if c == '"' {
				quote = 0
			} else {
				w.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == ' ' || c == '\t' || c == '\n':
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		default:
			w.WriteByte(c)
			in = true
		}
	}
	if in {
		words = append(words, w.String())
	}
	return words
}

// shellCode returns a shell's -c script among its arguments: the first operand when an
// option before it holds c (-c, -ec, -lc); and whether the shell reads its script from
// stdin instead (no -c, and no script file or -s).
func shellCode(args []string) (code string, inline, stdin bool) {
	fromStdin := false // -s
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--" || a == "-": // a lone - ends the options as -- does
			if inline && i+1 < len(args) {
				return args[i+1], true, false
			}
			return "", false, !inline && (fromStdin || i+1 == len(args))
		case a == "--rcfile" || a == "--init-file":
			i++ // its file
		case strings.HasPrefix(a, "--"):
		case strings.HasPrefix(a, "-") || strings.HasPrefix(a, "+"):
			if strings.Contains(a, "c") {
				inline = true
			}
			if strings.HasPrefix(a, "-") && strings.Contains(a, "s") {
				fromStdin = true
			}
			i += strings.Count(a, "o") + strings.Count(a, "O") // -o pipefail, -O extglob
		default:
			return a, inline, !inline && fromStdin
		}
	}
	return "", false, !inline
}

// program returns the program given inline among an interpreter's arguments and its
// option: the rest of a short cluster after a code option (-c'…', -ne'…') or else the
// next argument, or a code long option's value (--eval=… or the next argument). None once
// a script file (the first operand) or a module names what runs; stdin when the program
// is read from stdin (no script, or "-").
func (in interpreter) program(args []string) (flag, code string, ok, stdin bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-":
			return "", "", false, true
		case a == "--":
			return "", "", false, i+1 == len(args) || args[i+1] == "-"
		case !strings.HasPrefix(a, "-"):
			return "", "", false, false // a script: what follows is its arguments
		case strings.HasPrefix(a, "--"):
			name, value, joined := strings.Cut(a, "=")
			if slices.Contains(in.long, name) {
				if joined {
					return name, value, true, false
				}
				if i+1 < len(args) {
					return name, args[i+1], true, false
				}
			} else if !joined && slices.Contains(in.longV, name) {
				i++ // its value
			}
		default:
		cluster:
			for j, r := range a[1:] {
				switch {
				case strings.ContainsRune(in.code, r):
					if rest := a[2+j:]; rest != "" {
						return "-" + string(r), rest, true, false
					}
					if i+1 < len(args) {
						return "-" + string(r), args[i+1], true, false
					}
					return "", "", false, false
				case strings.ContainsRune(in.module, r):
					return "", "", false, false
				case strings.ContainsRune(in.valued, r):
					if a[2+j:] == "" {
						i++ // its value is the next argument
					}
					break cluster // the rest of the cluster is its value
				}
			}
		}
	}
	return "", "", false, true
}

// commandEnv is the environment of a command: the worker's, with PYTHONUNBUFFERED=1 unless
// it sets PYTHONUNBUFFERED itself, so that a Python command's prints reach stdout (and
// become frames) as they happen instead of when its 8 KiB buffer fills. Other languages
// buffer a pipe too: flush after each line (C: setvbuf(stdout, NULL, _IOLBF, 0); Node and
// Go write unbuffered; Ruby: $stdout.sync = true; `stdbuf -oL cmd` for most C programs).
func commandEnv(env []string) []string {
	for _, kv := range env {
		if strings.HasPrefix(kv, "PYTHONUNBUFFERED=") {
			return env
		}
	}
	return append(env, "PYTHONUNBUFFERED=1")
}

// commandError is a command that exited non-zero (or was killed by a signal).
type commandError struct {
	exitCode int
	signal   string
	stderr   string // the tail
}

func (e *commandError) Error() string {
	var b strings.Builder
	if e.signal != "" {
		fmt.Fprintf(&b, "command killed by %s", e.signal)
	} else {
		fmt.Fprintf(&b, "command exited with code %d", e.exitCode)
	}
	if s := strings.TrimSpace(e.stderr); s != "" {
		fmt.Fprintf(&b, "; stderr: %s", s)
	}
	return b.String()
}

// ErrorType is the ErrorInfo type of a failed command: "exit".
func (e *commandError) ErrorType() string { return "exit" }

// handle runs the command on one job: the payload as JSON on stdin ({} in the arguments
// replaced by it when it is a string), LAKESHORE_JOB_ID/QUEUE/ATTEMPT/NAMESPACE in the
// environment, each stdout line a VALUE frame; exit 0 acks {exit_code, stdout, stderr},
// non-zero nacks with the code and stderr tail. When ctx ends (kill, lease lost, timeout,
// shutdown) the process group gets SIGTERM, then SIGKILL after the grace period.
func (s *execSpec) handle(ctx context.Context, job *lakeshore.Job) (any, error) {
	payload, err := job.Payload()
	if err != nil {
		return nil, lakeshore.Permanent(err)
	}
	stdin, err := json.Marshal(jsonValue(payload))
	if err != nil {
		return nil, lakeshore.Permanent(fmt.Errorf("payload as JSON: %w", err))
	}
	args := append([]string(nil), s.argv[1:]...)
	if str, ok := payload.(string); ok {
		for i := range args {
			args[i] = strings.ReplaceAll(args[i], "{}", str)
		}
	}
	if s.timeout > 0 {
		var cancel context.CancelFunc
		// The cause matches ErrTimedOut, so the nack ends the attempt as a timeout.
		ctx, cancel = context.WithTimeoutCause(ctx, s.timeout, fmt.Errorf("job timeout %s passed: %w", s.timeout, lakeshore.ErrTimedOut))
		defer cancel()
	}

	cmd := exec.Command(s.argv[0], args...)
	cmd.Stdin = bytes.NewReader(append(stdin, '\n'))
	cmd.Env = append(commandEnv(os.Environ()),
		"LAKESHORE_JOB_ID="+job.ID,
		"LAKESHORE_QUEUE="+job.Queue,
		"LAKESHORE_NAMESPACE="+job.Namespace,
		"LAKESHORE_ATTEMPT="+strconv.Itoa(job.Attempt),
	)
	cmd.Env = append(cmd.Env, guard.environ()...) // starts the guard before the command
	cmd.SysProcAttr = commandProcAttr()
	out := &lineWriter{limit: s.stdoutCap}
	if s.frames {
		out.line = func(line string) { _, _ = lakeshore.Emit(ctx, frameValue(line)) }
	}
	errTail := &tailBuffer{limit: s.stderrTail}
	cmd.Stdout, cmd.Stderr = out, errTail
	cmd.WaitDelay = s.grace // a grandchild holding stdout open cannot hold the job forever
	// The guard process already runs (guard.environ started it, before the command): a
	// worker SIGKILLed right after Start dies with the group registered, or, in the
	// microseconds before register, with the command marked in its environment, so the
	// guard still kills the command's children (TestExecCommandDiesWithWorker).
	if err := cmd.Start(); err != nil {
		return nil, lakeshore.Permanent(fmt.Errorf("start %s: %w", s.argv[0], err))
	}
	pgid := cmd.Process.Pid
	guard.register(pgid)
	defer guard.unregister(pgid)
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()

	var waitErr error
	select {
	case waitErr = <-waited:
	case <-ctx.Done():
		waitErr = s.stopGroup(pgid, waited)
	}
	out.flush()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("command stopped (%w): %w", context.Cause(ctx), ctx.Err())
	}
	result := map[string]any{"exit_code": 0, "stdout": out.String(), "stderr": errTail.String()}
	if out.truncated {
		result["stdout_truncated"] = true
	}
	var ee *exec.ExitError
	switch {
	case waitErr == nil, errors.Is(waitErr, exec.ErrWaitDelay):
		return result, nil
	case errors.As(waitErr, &ee):
		ce := &commandError{exitCode: ee.ExitCode(), stderr: errTail.String()}
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			ce.signal = ws.Signal().String()
		}
		if s.rateLimitedExit != 0 && ce.signal == "" && ce.exitCode == s.rateLimitedExit {
			// The command's "slow down": what it calls is rate limited (docs/semantics.md,
			// "Rate limits per key").
			return nil, lakeshore.RateLimited(job.ConcurrencyKey, s.rateLimitedDelay)
		}
		return nil, ce
	}
	return nil, fmt.Errorf("run %s: %w", s.argv[0], waitErr)
}

// stopGroup sends SIGTERM to process group pgid, SIGKILL after the grace period (to the
// whole group: grandchildren too), and returns the command's Wait error.
func (s *execSpec) stopGroup(pgid int, waited <-chan error) error {
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	grace := time.NewTimer(s.grace)
	defer grace.Stop()
	var err error
	exited := false
	select {
	case err = <-waited:
		exited = true
		// The leader is gone; give the rest of the group what is left of the grace.
		for syscall.Kill(-pgid, 0) == nil {
			select {
			case <-grace.C:
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
				return err
			case <-time.After(10 * time.Millisecond):
			}
		}
	case <-grace.C:
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	if !exited {
		err = <-waited
	}
	return err
}

// frameValue is a stdout line as a frame value: JSON when it parses, else the string.
func frameValue(line string) any {
	if v, err := parseJSON([]byte(line)); err == nil {
		return v
	}
	return line
}

// lineWriter keeps the first limit bytes of a stream and calls line for every line.
type lineWriter struct {
	limit     int
	line      func(string)
	mu        sync.Mutex
	kept      bytes.Buffer
	partial   []byte
	total     int
	truncated bool
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if room := w.limit - w.kept.Len(); room > 0 {
		w.kept.Write(p[:min(room, len(p))])
	}
	w.total += len(p)
	w.truncated = w.total > w.limit
	if w.line == nil {
		return len(p), nil
	}
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		w.line(string(bytes.TrimSuffix(w.partial[:i], []byte("\r"))))
		w.partial = w.partial[i+1:]
	}
	return len(p), nil
}

func (w *lineWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.line != nil && len(w.partial) > 0 {
		w.line(string(w.partial))
		w.partial = nil
	}
}

// String returns the kept bytes as valid UTF-8 (invalid bytes replaced).
func (w *lineWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.ToValidUTF8(w.kept.String(), "\uFFFD")
}

// tailBuffer keeps the last limit bytes written to it.
type tailBuffer struct {
	limit int
	mu    sync.Mutex
	buf   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.limit {
		t.buf = append(t.buf[:0:0], t.buf[len(t.buf)-t.limit:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buf
	if len(b) > t.limit {
		b = b[len(b)-t.limit:]
		for len(b) > 0 && !utf8.RuneStart(b[0]) {
			b = b[1:]
		}
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
