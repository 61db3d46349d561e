package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/fabric"
	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/plane/pgplane"
	"github.com/lakeshore-dev/lakeshore/wire"
)

// Exit codes that scripts can trust (docs/cli.md).
const (
	exitOK          = 0
	exitJobFailed   = 1 // failed, cancelled, killed or timed out; cancel/kill changed nothing
	exitUsage       = 2 // bad flags, arguments or input
	exitNotFound    = 3
	exitWaitTimeout = 4
	exitError       = 5 // anything else: the plane, I/O
	exitInterrupted = 130
)

// app is one run of the command line: its streams, global flags and signals.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer

	target    string
	namespace string
	json      bool
	verbose   bool

	// worker is the Worker of a running `worker` or `map`, which SIGINT/SIGTERM stop: the
	// first drains it (Stop), the second cancels its running jobs (StopAndCancel). Without
	// one, the first signal cancels the command's context and the second exits at once.
	// Signals are handled here only: the SDK installs no signal handler.
	worker atomic.Pointer[lakeshore.Worker]
	// interrupted names the signal (SIGINT, SIGTERM) that cancelled the command, once one
	// did: its error then says so instead of Go's "context canceled".
	interrupted atomic.Pointer[string]

	// rideOut marks a verb that waits (worker, map, result, stream, listen, submit --wait,
	// whose submit the plane retries as long as a wait): it rides out a plane outage with
	// the HTTP plane's long retries. Other verbs, kill --wait included (its kill request is
	// retried only briefly), fail within about two seconds when the server refuses
	// connections (reach); kill's wait then rides an outage out as result's does.
	rideOut bool
	reach   reachability
}

// run runs the command line with args, without signal handling (tests).
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runApp(ctx, args, stdin, stdout, stderr, nil)
}

// runApp runs the command line; signals (nil: none) are SIGINT/SIGTERM as they arrive.
func runApp(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, signals <-chan os.Signal) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr,
		reach: dialCheck{noticeAfter: reachNoticeAfter, giveUp: reachGiveUp, every: reachRetryEvery}}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	defer close(done)
	if signals != nil {
		go a.watchSignals(signals, cancel, done)
	}
	root := a.rootCmd()
	if c, _, err := root.Find(args); err == nil && longRunning[c.CommandPath()] {
		warnSecretArgs(args, stderr)
	}
	root.SetArgs(args)
	start := time.Now()
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	err = a.rideOutError(err, time.Since(start))
	code := exitCode(err)
	var ce *codeError
	if !errors.As(err, &ce) || ce.err != nil {
		// The message may quote a job's error or a client's key: escaped as the tables are,
		// line breaks of multi-line messages kept.
		msg := err.Error()
		if sig := a.interrupted.Load(); sig != nil && code == exitInterrupted {
			// "result 01J…: context canceled" (Go's words) says what stopped, not why.
			msg = strings.ReplaceAll(msg, context.Canceled.Error(), "interrupted by "+*sig)
		}
		lines := strings.Split(msg, "\n")
		for i, l := range lines {
			lines[i] = printable(l)
		}
		fmt.Fprintf(stderr, "lakeshore: %s\n", strings.Join(lines, "\n"))
		if code == exitUsage && !badInput(err) {
			// The help of the verb that refused ("lakeshore queue set --help"): the root's
			// lists verbs, not the flags and arguments the user got wrong.
			path := root.CommandPath()
			if cmd != nil {
				path = cmd.CommandPath()
			}
			fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", path)
		}
	}
	return code
}

func (a *app) watchSignals(signals <-chan os.Signal, cancel context.CancelFunc, done <-chan struct{}) {
	n := 0
	for {
		select {
		case <-done:
			return
		case sig := <-signals:
			n++
			if w := a.worker.Load(); w != nil && n <= 2 {
				if n == 1 {
					fmt.Fprintf(a.stderr, "lakeshore: %s: draining: running jobs finish, nothing new is claimed; signal again to stop them\n", sig)
					go w.Stop(context.Background()) //nolint:errcheck // the command returns the worker's Err
				} else {
					fmt.Fprintf(a.stderr, "lakeshore: %s: stopping running jobs (they will be retried)\n", sig)
					go w.StopAndCancel(context.Background()) //nolint:errcheck // as above
				}
				continue
			}
			if n == 1 {
				name := sig.String()
				if s, ok := sig.(syscall.Signal); ok {
					name = map[syscall.Signal]string{syscall.SIGINT: "SIGINT", syscall.SIGTERM: "SIGTERM"}[s]
					if name == "" {
						name = sig.String()
					}
				}
				a.interrupted.Store(&name)
				cancel()
				continue
			}
			fmt.Fprintf(a.stderr, "lakeshore: %s again: exiting now\n", sig)
			os.Exit(exitInterrupted)
		}
	}
}

// longRunning are the commands whose command line stays in the process table (ps) for as
// long as they run, by their cobra command path: warnSecretArgs warns of theirs. A one-shot
// verb's lasts milliseconds, and scripts run many.
var longRunning = map[string]bool{"lakeshore serve": true, "lakeshore worker": true, "lakeshore provider run": true,
	"lakeshore daemon": true}

// warnSecretArgs writes a warning to stderr for each argument holding a URL with a password
// or a secret query parameter (plane.RedactURL changes it), whole or after the first "="
// (--target=URL, a handler's NAME=URL argument), shown redacted: a process's command line is
// readable by every user of the machine (ps, /proc/PID/cmdline), its environment only by
// its own user. The command still runs: a refusal would break the scripts that work today.
func warnSecretArgs(args []string, stderr io.Writer) {
	for _, arg := range args {
		shown := plane.RedactURL(arg)
		if shown == arg {
			name, after, ok := strings.Cut(arg, "=")
			redacted := plane.RedactURL(after)
			if !ok || redacted == after {
				continue
			}
			shown = name + "=" + redacted
		}
		fmt.Fprintf(stderr, "lakeshore: warning: the argument %s holds a password, which every user of this machine can read "+
			"in this process's command line (ps): give a PostgreSQL password through PGPASSWORD or ~/.pgpass and leave it out "+
			"of the URL, or the plane through $%s (not read by serve)\n", printable(shown), lakeshore.EnvURL)
	}
}

func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "lakeshore",
		Short: "Lakeshore: a durable job queue for ML work",
		Long: `lakeshore talks to a dispatch plane: the embedded SQLite file
($LAKESHORE_HOME/lakeshore.db, ~/.lakeshore by default), ":memory:", a file
path, or the plane named by --target or $LAKESHORE_URL.

Exit codes: 0 ok; 1 a job failed, was cancelled/killed or timed out (cancel and
kill: nothing changed); 2 usage or bad input; 3 not found; 4 a wait timed out;
5 other errors; 130 interrupted.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.Args = cobra.ArbitraryArgs
	root.RunE = unknownSubcommand
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetFlagErrorFunc(flagError)
	pf := root.PersistentFlags()
	pf.StringVar(&a.target, "target", "", `plane to use: a file path, sqlite://path, ":memory:", http(s)://…, postgres://… (default $`+lakeshore.EnvURL+`, else $`+lakeshore.EnvHome+`/lakeshore.db)`)
	pf.StringVar(&a.namespace, "namespace", "", "namespace of queues (default $"+lakeshore.EnvNamespace+", else \"default\")")
	pf.BoolVar(&a.json, "json", false, "print JSON (one object per line) instead of tables")
	pf.BoolVarP(&a.verbose, "verbose", "v", false, "log debug lines to stderr")
	for _, c := range commands() {
		root.AddCommand(c(a))
	}
	return root
}

// runWorker starts w under ctx, lets signals stop it while it runs, and returns its Err once
// it has stopped.
func (a *app) runWorker(ctx context.Context, w *lakeshore.Worker) error {
	a.worker.Store(w)
	defer a.worker.Store(nil)
	if err := w.Start(ctx); err != nil {
		return err
	}
	<-w.Done()
	return w.Err()
}

func (a *app) logger() *slog.Logger {
	level := slog.LevelWarn
	if a.verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: level}))
}

// open connects to the plane named by --target (else $LAKESHORE_URL, else the default), for
// a verb that does one thing and exits: a PostgreSQL plane's pool opens connections as they
// are used (pgplane.Config.OnDemand), not the warm pool a long-running process wants.
func (a *app) open(ctx context.Context) (*lakeshore.Dispatch, error) {
	return a.openPlane(ctx, true)
}

// openServing is open for a verb that runs jobs for a while (worker, map): a PostgreSQL
// plane's pool is warmed before the first job (pgplane.Open).
func (a *app) openServing(ctx context.Context) (*lakeshore.Dispatch, error) {
	return a.openPlane(ctx, false)
}

func (a *app) openPlane(ctx context.Context, onDemand bool) (*lakeshore.Dispatch, error) {
	if !a.rideOut {
		if err := a.reach.check(ctx, a.planeURL(), a.stderr); err != nil {
			return nil, fmt.Errorf("open plane: %w", err)
		}
	}
	d, err := lakeshore.Open(ctx, a.target, &lakeshore.Config{Namespace: a.namespace, Logger: a.logger(),
		Postgres: &pgplane.Config{OnDemand: onDemand}})
	if err != nil {
		return nil, fmt.Errorf("open plane: %w", err)
	}
	return d, nil
}

// queue opens the plane and a handle on queue name (or on any queue, for id verbs).
func (a *app) queue(ctx context.Context, name string) (*lakeshore.Dispatch, *lakeshore.Queue, error) {
	d, err := a.open(ctx)
	if err != nil {
		return nil, nil, err
	}
	q, err := d.Queue(name, nil)
	if err != nil {
		d.Close()
		return nil, nil, err
	}
	return d, q, nil
}

// anyQueue is the queue handle used by verbs that take an invocation id: ids are global.
const anyQueue = "_"

func (a *app) printJSON(v any) error {
	b, err := json.Marshal(jsonValue(v))
	if err != nil {
		return fmt.Errorf("print JSON: %w", err)
	}
	_, err = fmt.Fprintf(a.stdout, "%s\n", b)
	return err
}

// table returns the aligned, terminal-safe writer of human-readable output to stdout.
func (a *app) table() *table {
	return newTable(a.stdout)
}

// codeError carries an exit code; err nil means the command already said what happened.
type codeError struct {
	code int
	err  error
}

func (e *codeError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func (e *codeError) Unwrap() error { return e.err }

func usageError(err error) error { return &codeError{code: exitUsage, err: err} }

// flagValueError matches pflag's words for a value its flag type cannot parse.
var flagValueError = regexp.MustCompile(`^invalid argument "(.*)" for "(?:-\w, )?(--[\w-]+)" flag: `)

// wholeNumberRange is the annotation of an integer flag whose allowed values are fewer
// than its Go type's: its value is the range flagError names for a value that does not
// parse ("from 0 to 9223372036854775807"), so the message gives the range actually
// allowed rather than the type's (whose negative half is then refused).
const wholeNumberRange = "lakeshore_whole_number_range"

// nonNegative marks the integer flags names of c as taking whole numbers ≥ 0 (their
// values below 0 are refused where they are checked, with that rule's own words).
func nonNegative(c *cobra.Command, names ...string) { wholeFrom(c, 0, names...) }

// positive marks the integer flags names of c as taking whole numbers ≥ 1 (a count of
// records or workers), as nonNegative does for ≥ 0: a value past the type's range then
// says "from 1 to …", not the Go type's range from its most negative value.
func positive(c *cobra.Command, names ...string) { wholeFrom(c, 1, names...) }

// wholeFrom marks the integer flags names of c as taking whole numbers from lo.
func wholeFrom(c *cobra.Command, lo int64, names ...string) {
	for _, name := range names {
		rng := "from " + strconv.FormatInt(lo, 10) + " to " + strconv.FormatInt(math.MaxInt64, 10)
		if err := c.Flags().SetAnnotation(name, wholeNumberRange, []string{rng}); err != nil {
			panic(err) // a flag name misspelt in the code
		}
	}
}

// flagError turns a flag error into a usage error; a value a flag cannot parse becomes
// an *InvalidError saying what the flag takes (exit 2, without the usage hint), never the
// parser's Go words (strconv.ParseFloat: …). An integer flag says the range it allows: its
// wholeNumberRange annotation, else its Go type's.
func flagError(c *cobra.Command, err error) error {
	m := flagValueError.FindStringSubmatch(err.Error())
	if m == nil {
		return usageError(err)
	}
	value, flag := m[1], m[2]
	wholeRange := "from -9223372036854775808 to 9223372036854775807"
	if f := c.Flags().Lookup(strings.TrimPrefix(flag, "--")); f != nil && len(f.Annotations[wholeNumberRange]) == 1 {
		wholeRange = f.Annotations[wholeNumberRange][0]
	}
	var ne *strconv.NumError
	switch {
	case errors.As(err, &ne) && ne.Func == "ParseFloat":
		return plane.Invalid(flag, value, "use a number, e.g. 1.5")
	case errors.As(err, &ne) && ne.Func == "ParseBool":
		return plane.Invalid(flag, value, "use true or false")
	case errors.As(err, &ne) && ne.Func == "ParseUint":
		return plane.Invalid(flag, value, "use a whole number from 0 to 18446744073709551615")
	case errors.As(err, &ne):
		return plane.Invalid(flag, value, "use a whole number (digits, no exponent or fraction) "+wholeRange)
	case strings.Contains(err.Error(), "time: ") && durationForm.MatchString(value):
		// Written as a duration, but past what time.Duration holds (ParseDuration says
		// "invalid duration" for both).
		return plane.Invalid(flag, value, "a duration of at most 2562047h (about 292 years)")
	case strings.Contains(err.Error(), "time: "):
		return plane.Invalid(flag, value, "use a duration such as 500ms, 30s, 5m or 1h")
	}
	return plane.Invalid(flag, value, strings.TrimPrefix(err.Error(), m[0]))
}

// durationForm matches text written as a Go duration (time.ParseDuration's grammar):
// numbers, each with its unit.
var durationForm = regexp.MustCompile(`^[-+]?([0-9]*(\.[0-9]*)?(ns|us|µs|μs|ms|s|m|h))+$`)

func usagef(format string, args ...any) error { return usageError(fmt.Errorf(format, args...)) }

// inputError is bad input read from a file or stdin (a data line that is not JSON): exit
// 2, without the "Run 'lakeshore --help'" line, which cannot help with it.
type inputError struct{ error }

func (e *inputError) Unwrap() error { return e.error }

// inputf is a usage error (exit 2) for bad input read from a file or stdin.
func inputf(format string, args ...any) error {
	return usageError(&inputError{fmt.Errorf(format, args...)})
}

// silentExit ends the command with code after it printed its own outcome.
func silentExit(code int) error { return &codeError{code: code} }

// exitCode maps an error to the documented exit codes.
func exitCode(err error) int {
	var ce *codeError
	if errors.As(err, &ce) {
		return ce.code
	}
	switch {
	case badInput(err):
		return exitUsage
	case errors.Is(err, lakeshore.ErrNotFound):
		return exitNotFound
	case errors.Is(err, lakeshore.ErrFailed), errors.Is(err, lakeshore.ErrCancelled), errors.Is(err, lakeshore.ErrTimedOut):
		return exitJobFailed
	case errors.Is(err, lakeshore.ErrTimeout):
		return exitWaitTimeout
	case errors.Is(err, context.Canceled):
		return exitInterrupted
	}
	return exitError
}

// badInput reports an error of bad input rather than of the command line, which exits 2
// (exitUsage) without the hint to read --help: an invalid argument or value, a data record
// of the wrong type or one with no stored form, lakeshore.yaml, a mode or the code it ships.
func badInput(err error) bool {
	var config *fabric.ConfigError
	var code *fabric.CodeError
	var input *inputError
	return errors.As(err, &config) || errors.As(err, &code) || errors.As(err, &input) || errors.Is(err, fabric.ErrNoConfig) || errors.Is(err, lakeshore.ErrInvalid) ||
		errors.Is(err, persist.ErrSchema) || errors.Is(err, persist.ErrUnsupportedValue)
}

// unknownSubcommand is the RunE of commands that only group others: without a known
// subcommand it is a usage error (exit 2), not help with exit 0.
func unknownSubcommand(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return usagef("%s needs a subcommand", c.CommandPath()) // the hint line after it names c's help
	}
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2 // cobra's default, which only its own path sets
	}
	if s := c.SuggestionsFor(args[0]); len(s) > 0 {
		// A typo of a verb ("sumbit") or another tool's name for one ("watch": stream).
		return usagef("unknown command %q for %q; did you mean %s?", args[0], c.CommandPath(), strings.Join(s, " or "))
	}
	return usagef("unknown command %q for %q", args[0], c.CommandPath())
}

// exactArgs is cobra.ExactArgs whose error is a usage error that shows the verb's usage
// line (argsError).
func exactArgs(n int) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if err := cobra.ExactArgs(n)(c, args); err != nil {
			return argsError(c, err)
		}
		return nil
	}
}

// rangeArgs is cobra.RangeArgs whose error is a usage error that shows the verb's usage
// line (argsError).
func rangeArgs(lo, hi int) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if err := cobra.RangeArgs(lo, hi)(c, args); err != nil {
			return argsError(c, err)
		}
		return nil
	}
}

// argsError is a wrong number of arguments as a usage error that says what the verb takes:
// "usage: lakeshore stream ID [flags] (accepts 1 arg(s), received 0)", where cobra's error
// alone named neither the verb nor its arguments.
func argsError(c *cobra.Command, err error) error {
	return usagef("usage: %s (%w)", c.UseLine(), err)
}

// parseJSON decodes JSON text into the generic form the wire codec encodes: integers
// become int64 (uint64 above it), other numbers float64. Errors: an integer beyond 64 bits
// or a number beyond float64's range (1e400), which no value of the codec holds exactly.
func parseJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("more than one JSON value")
	}
	return fromJSON(v)
}

func fromJSON(v any) (any, error) {
	switch x := v.(type) {
	case json.Number:
		return fromJSONNumber(string(x))
	case []any:
		for i := range x {
			var err error
			if x[i], err = fromJSON(x[i]); err != nil {
				return nil, err
			}
		}
		return x, nil
	case map[string]any:
		for k := range x {
			var err error
			if x[k], err = fromJSON(x[k]); err != nil {
				return nil, err
			}
		}
		return x, nil
	}
	return v, nil
}

// fromJSONNumber converts a JSON number: an integer literal to int64, or uint64 above
// MaxInt64; anything else to a finite float64.
func fromJSONNumber(s string) (any, error) {
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i, nil
		}
		if u, err := strconv.ParseUint(s, 10, 64); err == nil {
			return u, nil
		}
		return nil, &numberError{fmt.Sprintf("the integer %s does not fit in 64 bits; pass it as a string (\"%s\")", s, s)}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, &numberError{fmt.Sprintf("the number %s is beyond the range of a float64 (±1.8e308); pass it as a string", s)}
	}
	return f, nil
}

// numberError is valid JSON holding a number the wire codec cannot hold exactly.
type numberError struct{ msg string }

func (e *numberError) Error() string { return e.msg }

// jsonInputError is the usage error of a what (payload, value) that parseJSON refused.
func jsonInputError(what string, err error) error {
	var ne *numberError
	if errors.As(err, &ne) {
		return usagef("%s: %v", what, err)
	}
	return usagef("%s is not JSON (%v); quote a string as '\"text\"' or pass --string", what, err)
}

// jsonValue turns a decoded wire value into something encoding/json prints faithfully:
// NaN and infinities become strings, bytes base64 (as encoding/json does), extension
// types their exported fields.
func jsonValue(v any) any {
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Sprint(x)
		}
	case float32:
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return fmt.Sprint(x)
		}
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = jsonValue(x[i])
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = jsonValue(e)
		}
		return out
	case wire.Tuple:
		return jsonValue([]any(x))
	}
	return v
}

// decodeValue decodes wire bytes for printing.
func decodeValue(b []byte) (any, error) {
	if len(b) == 0 {
		return nil, nil
	}
	return wire.Decode(b)
}

// formatTime prints a time for tables ("-" for zero).
func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

func compactJSON(v any) string {
	b, err := json.Marshal(jsonValue(v))
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
