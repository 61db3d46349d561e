package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// mapOptions are the flags of lakeshore map.
type mapOptions struct {
	input       string
	out         string
	completed   bool
	workers     int
	queue       string
	maxAttempts int
	lease       time.Duration
	progress    string
	interval    time.Duration
	noFrames    bool
	spec        execSpec
}

func newMapCmd(a *app) *cobra.Command {
	o := &mapOptions{}
	c := &cobra.Command{
		Use:   "map [flags] -- COMMAND [ARGS…]",
		Short: "Run COMMAND over every input line as durable jobs; re-running skips what succeeded",
		Long: `Read inputs, one per line (from --input or stdin; blank lines are skipped), submit
each as a job whose idempotency key is derived from the command and the input, run
--workers exec workers in this process (see 'lakeshore worker': "{}" in ARGS is
the input, stdin gets it as JSON), and write one JSON line per input:

  {"input": …, "id": …, "state": "succeeded", "result": {"exit_code": 0, "stdout": …, "stderr": …}}
  {"input": …, "id": …, "state": "failed", "error": {"type": …, "message": …, "attempt": …}}

to stdout or --out, in input order (or as they complete with --completed). --out
is written to a temporary file and renamed at the end, so it is complete or absent.
Progress goes to stderr (a bar on a terminal, periodic lines otherwise), then a
summary. Keys are durable: running the same command again after a crash or
Ctrl-C re-runs nothing that succeeded (jobs that failed are run again). Exit 0
when every input succeeded, 1 when some failed, 2 for bad input, 130 when
interrupted (re-run to finish).`,
		Example: `  find . -name '*.go' | lakeshore map -- sh -c 'sha256sum "$1" | cut -d" " -f1; wc -l < "$1"' _ {}
  lakeshore map --input urls.txt --out pages.jsonl --workers 16 -- curl -fsS {}`,
		Args: func(c *cobra.Command, args []string) error {
			if c.ArgsLenAtDash() != 0 || len(args) == 0 {
				return usagef("usage: lakeshore map [flags] -- COMMAND [ARGS…]")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			a.rideOut = true // waits: rides out an outage
			o.spec.argv = args
			o.spec.frames = !o.noFrames
			return a.runMap(c.Context(), o)
		},
	}
	f := c.Flags()
	f.StringVarP(&o.input, "input", "i", "-", "file of inputs, one per line (- for stdin)")
	f.StringVarP(&o.out, "out", "o", "", "write the JSON lines to this file (atomically) instead of stdout")
	f.BoolVar(&o.completed, "completed", false, "write lines as jobs complete instead of in input order")
	f.IntVarP(&o.workers, "workers", "w", runtime.NumCPU(), "commands run at once in this process")
	f.StringVar(&o.queue, "queue", "", "queue of the jobs (default: map-<hash of the command>)")
	f.IntVar(&o.maxAttempts, "max-attempts", 1, "runs of a failing input before it counts as failed")
	f.DurationVar(&o.lease, "lease", 10*time.Second, "lease of each job: how soon another run takes over a crashed one")
	f.StringVar(&o.progress, "progress", "auto", "progress on stderr: auto|bar|lines|none")
	f.DurationVar(&o.interval, "progress-interval", 2*time.Second, "period of the progress lines")
	f.BoolVar(&o.noFrames, "no-frames", false, "do not post stdout lines as VALUE frames")
	f.DurationVar(&o.spec.timeout, "timeout", 0, "per-job timeout (0: none)")
	f.DurationVar(&o.spec.grace, "grace", graceDefault, "time between SIGTERM and SIGKILL when a command is stopped")
	f.IntVar(&o.spec.stdoutCap, "stdout-cap", stdoutCapDefault, "bytes of stdout kept in each result")
	f.IntVar(&o.spec.stderrTail, "stderr-tail", stderrTailDefault, "bytes of stderr (the last ones) kept")
	positive(c, "workers")
	return c
}

// mapInput is one input line and its job.
type mapInput struct {
	text  string
	id    string
	gen   int             // key generation of id
	state lakeshore.State // at resolve time
}

// mapQueue is the default queue of a command template: jobs of different commands never
// share a queue, so this process's workers run only its own command.
func mapQueue(argv []string) string {
	h := sha256.Sum256([]byte(strings.Join(argv, "\x00")))
	return "map-" + hex.EncodeToString(h[:8])
}

// mapKey is the idempotency key of input under command argv, generation gen: a re-run
// finds the job of every input it submitted before. gen grows when an earlier job of the
// input ended without success, so that a re-run runs it again.
func mapKey(argv []string, input string, gen int) string {
	h := sha256.New()
	for _, a := range argv {
		h.Write([]byte(a))
		h.Write([]byte{0})
	}
	h.Write([]byte{0})
	h.Write([]byte(input))
	return hex.EncodeToString(h.Sum(nil)) + "." + strconv.Itoa(gen)
}

// readInputs reads one input per line, rejecting non-UTF-8 and skipping blank lines.
func readInputs(r io.Reader, name string) ([]string, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var inputs []string
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if !utf8.Valid(line) {
			i := 0
			for i < len(line) {
				r, size := utf8.DecodeRune(line[i:])
				if r == utf8.RuneError && size <= 1 {
					break
				}
				i += size
			}
			return nil, inputf("%s: line %d is not valid UTF-8 (bad byte 0x%02x at column %d); map takes text inputs, one per line — nothing was submitted",
				name, n, line[i], i+1)
		}
		s := strings.TrimSuffix(string(line), "\r")
		if strings.TrimSpace(s) == "" {
			continue
		}
		inputs = append(inputs, s)
	}
	if err := sc.Err(); err != nil {
		return nil, usagef("read %s: %w", name, err)
	}
	return inputs, nil
}

func (a *app) runMap(ctx context.Context, o *mapOptions) error {
	start := time.Now()
	if err := o.spec.checkCommand(); err != nil {
		return err
	}
	if o.workers < 1 {
		return plane.Invalid("--workers", o.workers, "use a number of workers ≥ 1 (default: the number of CPUs)")
	}
	switch o.progress {
	case "auto", "bar", "lines", "none":
	default:
		return plane.Invalid("--progress", o.progress, "use auto|bar|lines|none")
	}
	// Inputs first: bad input stops everything before anything is submitted.
	in, name := a.stdin, "stdin"
	if o.input != "-" {
		f, err := os.Open(o.input)
		if err != nil {
			return usagef("open inputs: %w", err)
		}
		defer f.Close()
		in, name = f, o.input
	}
	texts, err := readInputs(in, name)
	if err != nil {
		return err
	}
	// Then the output: an unwritable --out fails before any job runs.
	out, err := newMapOutput(a.stdout, o.out)
	if err != nil {
		return err
	}
	defer out.abort()

	d, err := a.openServing(ctx)
	if err != nil {
		return err
	}
	defer d.Close()
	qname := o.queue
	if qname == "" {
		qname = mapQueue(o.spec.argv)
	}
	q, err := d.Queue(qname, nil)
	if err != nil {
		return err
	}
	inputs, err := resolveInputs(ctx, d, q, o.spec.argv, texts, nil, o.maxAttempts)
	if err != nil {
		return fmt.Errorf("submit inputs: %w", err)
	}

	// Workers in this process.
	w, err := lakeshore.NewWorker(d, []lakeshore.Handler{lakeshore.Handle(qname, o.spec.handle)},
		&lakeshore.WorkerOptions{Concurrency: o.workers, LeaseTTL: o.lease, Logger: a.logger()})
	if err != nil {
		return err
	}
	workerCtx, stopWorkers := context.WithCancel(ctx)
	defer stopWorkers()
	a.worker.Store(w) // signals stop it from now on
	defer a.worker.Store(nil)
	if err := w.Start(workerCtx); err != nil {
		return err
	}
	workerDone := make(chan error, 1)
	go func() {
		<-w.Done()
		workerDone <- w.Err()
	}()
	stopWorker := func() error {
		_ = w.Stop(context.Background())
		return <-workerDone
	}

	// Waiters: each takes the next input in order and waits for its job to end.
	waitCtx, stopWaiting := context.WithCancel(ctx)
	defer stopWaiting()
	type outcome struct {
		idx int
		inv *plane.Invocation
		err error
	}
	next := make(chan int)
	results := make(chan outcome)
	var waiters sync.WaitGroup
	for range max(16, 2*o.workers) {
		waiters.Go(func() {
			for i := range next {
				inv, err := waitTerminal(waitCtx, q, inputs[i].id)
				if err == nil && inv.State != lakeshore.StateSucceeded && inputs[i].state == lakeshore.StateRunning {
					// Another process held this job when we started (a run that crashed, most
					// likely) and it ended without success, e.g. its lease expired: run it
					// again under the next key generation.
					inv, err = rerunInput(waitCtx, d, q, o, &inputs[i])
				}
				select {
				case results <- outcome{i, inv, err}:
				case <-waitCtx.Done():
					return
				}
			}
		})
	}
	go func() {
		defer close(next)
		for i := range inputs {
			select {
			case next <- i:
			case <-waitCtx.Done():
				return
			}
		}
	}()
	defer waiters.Wait()
	defer stopWaiting()

	prog := newProgress(a.stderr, o.progress, o.interval, len(inputs))
	for _, in := range inputs {
		if in.state == lakeshore.StateSucceeded {
			prog.reused++
		}
	}
	lines := make([][]byte, len(inputs))
	written := 0
	var failed int
	ticker := time.NewTicker(prog.period())
	defer ticker.Stop()
	for done := 0; done < len(inputs); {
		select {
		case r := <-results:
			if r.err != nil {
				stopWaiting()
				_ = stopWorker()
				return fmt.Errorf("wait for %s: %w", inputs[r.idx].id, r.err)
			}
			line, ok := mapLine(inputs[r.idx], r.inv)
			if !ok {
				failed++
			}
			done++
			prog.update(done, failed)
			if o.completed {
				if err := out.write(line); err != nil {
					return err
				}
				continue
			}
			lines[r.idx] = line
			for written < len(lines) && lines[written] != nil {
				if err := out.write(lines[written]); err != nil {
					return err
				}
				lines[written] = nil
				written++
			}
		case <-ticker.C:
			prog.tick()
		case err := <-workerDone:
			// The workers stopped before every input was done: interrupted.
			workerDone <- err
			prog.finish()
			fmt.Fprintf(a.stderr, "lakeshore map: interrupted with %d of %d inputs done; run the same command again to finish (nothing that succeeded runs again)\n",
				done, len(inputs))
			return silentExit(exitInterrupted)
		}
	}
	stopWaiting()
	if err := stopWorker(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	if err := out.commit(); err != nil {
		return err
	}
	prog.finish()
	wall := time.Since(start)
	// The rate counts what this run executed, not what an earlier run had already done.
	ran := len(inputs) - prog.reused
	sum := map[string]any{
		"jobs": len(inputs), "succeeded": len(inputs) - failed, "failed": failed,
		"already_done": prog.reused, "ran": ran, "wall_s": wall.Seconds(),
		"jobs_per_s": float64(ran) / wall.Seconds(),
	}
	if a.json {
		b, _ := json.Marshal(sum)
		fmt.Fprintf(a.stderr, "%s\n", b)
	} else {
		fmt.Fprintf(a.stderr, "map: %d jobs, %d succeeded, %d failed (%d already done before this run), ran %d in %s, %.1f jobs/s\n",
			len(inputs), len(inputs)-failed, failed, prog.reused, ran, wall.Round(time.Millisecond), sum["jobs_per_s"])
	}
	if failed > 0 {
		return silentExit(exitJobFailed)
	}
	return nil
}

// resolveInputs submits every input with its key and returns its job. An input whose
// earlier job ended without success (failed, killed, timed out, cancelled) gets a job of
// the next key generation, so a re-run runs it again; one that succeeded keeps its job.
// gens, when not nil, are the generations to start from.
func resolveInputs(ctx context.Context, d *lakeshore.Dispatch, q *lakeshore.Queue, argv, texts []string, gens []int, maxAttempts int) ([]mapInput, error) {
	inputs := make([]mapInput, len(texts))
	if gens == nil {
		gens = make([]int, len(texts))
	}
	todo := make([]int, len(texts))
	for i := range todo {
		todo[i] = i
	}
	const batch = 500
	for len(todo) > 0 {
		var again []int
		for lo := 0; lo < len(todo); lo += batch {
			idx := todo[lo:min(lo+batch, len(todo))]
			batch := make([]lakeshore.Submission, len(idx))
			for j, i := range idx {
				batch[j] = lakeshore.Submission{Payload: texts[i],
					SubmitOptions: lakeshore.SubmitOptions{Key: mapKey(argv, texts[i], gens[i]), MaxAttempts: maxAttempts}}
			}
			res, err := q.SubmitManyResults(ctx, batch)
			if err != nil {
				return nil, err
			}
			for j, i := range idx {
				inputs[i] = mapInput{text: texts[i], id: res[j].ID, gen: gens[i], state: lakeshore.StateQueued}
				if !res[j].Existing {
					continue
				}
				inv, err := q.Get(ctx, res[j].ID)
				if err != nil {
					return nil, err
				}
				inputs[i].state = inv.State
				if inv.State.Terminal() && inv.State != lakeshore.StateSucceeded {
					gens[i]++
					again = append(again, i)
				}
			}
		}
		todo = again
	}
	return inputs, nil
}

// rerunInput submits in under its next key generation and waits for that job.
func rerunInput(ctx context.Context, d *lakeshore.Dispatch, q *lakeshore.Queue, o *mapOptions, in *mapInput) (*plane.Invocation, error) {
	res, err := resolveInputs(ctx, d, q, o.spec.argv, []string{in.text}, []int{in.gen + 1}, o.maxAttempts)
	if err != nil {
		return nil, err
	}
	in.id, in.gen = res[0].id, res[0].gen
	return waitTerminal(ctx, q, in.id)
}

// waitTerminal waits, without limit, until invocation id is terminal.
func waitTerminal(ctx context.Context, q *lakeshore.Queue, id string) (*plane.Invocation, error) {
	err := q.Result(ctx, id, nil, &lakeshore.ResultOptions{Timeout: -1})
	var terr *lakeshore.TerminalError
	if err != nil && !errors.As(err, &terr) {
		return nil, err
	}
	inv, err := q.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return &inv.Invocation, nil
}

// mapLine is the output line of one input; ok is false when its job did not succeed.
func mapLine(in mapInput, inv *plane.Invocation) ([]byte, bool) {
	m := map[string]any{"input": in.text, "id": inv.ID, "state": inv.State}
	ok := inv.State == lakeshore.StateSucceeded
	if ok {
		v, err := decodeValue(inv.Result)
		if err != nil {
			v = map[string]any{"undecodable_result": err.Error()}
		}
		m["result"] = jsonValue(v)
	} else if inv.Error != nil {
		m["error"] = inv.Error
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		buf.Reset()
		fmt.Fprintf(&buf, "{\"input\":%q,\"id\":%q,\"state\":%q,\"error\":%q}\n", in.text, inv.ID, inv.State, err.Error())
	}
	return buf.Bytes(), ok
}

// mapOutput writes the JSON lines to stdout, or to a temporary file renamed to --out at
// the end (so --out is complete or absent).
type mapOutput struct {
	w    *bufio.Writer
	f    *os.File
	path string
}

func newMapOutput(stdout io.Writer, path string) (*mapOutput, error) {
	if path == "" {
		return &mapOutput{w: bufio.NewWriter(stdout)}, nil
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return nil, plane.Invalid("--out", path, "it is a directory; give a file path")
	}
	removeStaleOutputs(path)
	// The temporary file's name carries this process's pid, so that the next run can tell
	// a file left by a killed run (removed) from one another run is still writing.
	f, err := os.CreateTemp(filepath.Dir(path), fmt.Sprintf(".%s.%d.*.tmp", filepath.Base(path), os.Getpid()))
	if err != nil {
		return nil, plane.Invalid("--out", path, "its directory is not writable ("+pathReason(err)+"); give a file in a writable directory")
	}
	return &mapOutput{w: bufio.NewWriterSize(f, 256<<10), f: f, path: path}, nil
}

// pathReason is the system's reason of a failed file operation, without the operation and
// path *fs.PathError prefixes it with (the caller's message names the path): "not a
// directory", "permission denied".
func pathReason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// removeStaleOutputs removes the temporary files of --out path left by runs that died
// before committing (SIGKILL, a crash): those whose process no longer exists.
func removeStaleOutputs(path string) {
	prefix := "." + filepath.Base(path) + "."
	matches, _ := filepath.Glob(filepath.Join(filepath.Dir(path), prefix+"*.tmp"))
	for _, m := range matches {
		rest := strings.TrimPrefix(filepath.Base(m), prefix)
		pidText, _, ok := strings.Cut(rest, ".")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid <= 0 {
			continue // not ours
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.Remove(m)
		}
	}
}

func (m *mapOutput) write(line []byte) error {
	if _, err := m.w.Write(line); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	if m.f == nil && m.w.Buffered() > 0 {
		return m.w.Flush() // stdout: line by line, for pipes
	}
	return nil
}

func (m *mapOutput) commit() error {
	if err := m.w.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	if m.f == nil {
		return nil
	}
	if err := m.f.Sync(); err != nil {
		return fmt.Errorf("write %s: %w", m.path, err)
	}
	if err := m.f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", m.path, err)
	}
	if err := os.Rename(m.f.Name(), m.path); err != nil {
		return fmt.Errorf("write %s: %w", m.path, err)
	}
	m.f = nil
	return nil
}

// abort removes the temporary file when commit did not run.
func (m *mapOutput) abort() {
	if m.f != nil {
		name := m.f.Name()
		m.f.Close()
		os.Remove(name)
		m.f = nil
	}
}
