// Package slurmprovider supplies a queue's workers as SLURM batch jobs: each launch is one
// `sbatch` job named PREFIX+launch id (default "lakeshore-<id>") whose batch step is the
// worker itself, Stop drains it with `scancel --signal=TERM` and cancels it after the
// grace, and List reads `squeue` (accounting may be off on small clusters, so it never
// needs sacct). A job that SLURM kills, that hits its time limit or that is cancelled by
// hand leaves squeue and so leaves List: the supervisor sees one worker fewer and launches
// a replacement.
//
// The provider runs SLURM's client commands, so the supervisor must run on a machine that
// can submit jobs (a login node), and the launch's log directory must be on a filesystem
// the compute nodes share. docs/providers.md ("SLURM") describes the deployment.
package slurmprovider

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/provider"
)

// Defaults of Config.
const (
	// JobNamePrefixDefault starts the name of every job the provider submits; List sees
	// only the jobs whose names start with it.
	JobNamePrefixDefault = "lakeshore-"
	// CommandTimeoutDefault bounds each run of sbatch, scancel, squeue or scontrol.
	CommandTimeoutDefault = 30 * time.Second
	// PollIntervalDefault is how often Stop looks whether a draining job has ended.
	PollIntervalDefault = 500 * time.Millisecond
	// DrainBeforeTimeLimitDefault is how long before a job's time limit SLURM sends its
	// worker SIGTERM (sbatch --signal=B:TERM@SECONDS), so that it drains rather than being
	// killed mid-job. Only for launches with a time limit of more than twice this.
	DrainBeforeTimeLimitDefault = time.Minute
)

// Errors, each wrapped by a *CommandError that names the command and what SLURM said.
var (
	// ErrNotInstalled: a SLURM command (sbatch, scancel, squeue) is not on this machine.
	ErrNotInstalled = errors.New("SLURM's commands are not installed here")
	// ErrUnreachable: SLURM did not answer (slurmctld down or unreachable, munge not
	// running, SLURM_CONF missing, or the command timed out). Also matches
	// plane.ErrUnavailable.
	ErrUnreachable = errors.New("SLURM is not reachable")
	// ErrRejected: SLURM refused the request (an unknown partition, resources no node
	// has, a time limit above the partition's). Also matches plane.ErrInvalid.
	ErrRejected = errors.New("SLURM refused the job")
)

// CommandError is a SLURM command that failed: which, what SLURM said, and how to fix it.
// errors.Is matches its Kind (ErrNotInstalled, ErrUnreachable or ErrRejected).
type CommandError struct {
	// Command is the command line, program first (without the environment).
	Command string
	// Kind is ErrNotInstalled, ErrUnreachable or ErrRejected; nil for another failure.
	Kind error
	// Output is what the command wrote to its standard error (trimmed).
	Output string
	// Hint says how to fix it.
	Hint string
}

func (e *CommandError) Error() string {
	var b strings.Builder
	b.WriteString("slurm provider: ")
	if e.Kind != nil {
		b.WriteString(e.Kind.Error())
		b.WriteString(": ")
	}
	b.WriteString(e.Command)
	if e.Output != "" {
		b.WriteString(": ")
		b.WriteString(e.Output)
	}
	if e.Hint != "" {
		b.WriteString(" (")
		b.WriteString(e.Hint)
		b.WriteString(")")
	}
	return b.String()
}

// Unwrap returns Kind and the plane error it corresponds to.
func (e *CommandError) Unwrap() []error {
	switch e.Kind {
	case ErrUnreachable:
		return []error{e.Kind, plane.ErrUnavailable}
	case ErrRejected:
		return []error{e.Kind, plane.ErrInvalid}
	case nil:
		return nil
	}
	return []error{e.Kind}
}

// Config configures a Provider. The zero value works where SLURM's commands are on PATH
// and find their cluster by themselves.
type Config struct {
	// Sbatch, Scancel and Squeue are the paths of SLURM's commands. Default: the names,
	// looked up on PATH.
	Sbatch, Scancel, Squeue string
	// SlurmConf, when set, is the slurm.conf the commands use (SLURM_CONF); the jobs
	// inherit it too. Default: SLURM's own lookup (SLURM_CONF, else /etc/slurm).
	SlurmConf string
	// JobNamePrefix starts every job's name; List adopts only jobs whose name starts with
	// it. Give each Lakeshore deployment sharing a SLURM user its own prefix. Default:
	// JobNamePrefixDefault.
	JobNamePrefix string
	// LogDir receives each launch's output (PREFIX+ID.log: the worker's standard output
	// and error). It must be on a filesystem the compute nodes share. Created if missing.
	// Default: $LAKESHORE_HOME/run/providers/slurm ($LAKESHORE_HOME defaults to
	// ~/.lakeshore).
	LogDir string
	// ExtraArgs are more sbatch options for every launch, e.g. ["--account=ml",
	// "--qos=normal", "--constraint=a100"]. Default: none.
	ExtraArgs []string
	// User is whose jobs List reads and Stop cancels (squeue and scancel --user), a name
	// or a uid. Default: the user running the provider.
	User string
	// CommandTimeout bounds each run of a SLURM command. Default: CommandTimeoutDefault.
	CommandTimeout time.Duration
	// PollInterval is how often Stop looks whether a draining job ended. Default:
	// PollIntervalDefault.
	PollInterval time.Duration
	// DrainBeforeTimeLimit: see DrainBeforeTimeLimitDefault; negative turns it off.
	DrainBeforeTimeLimit time.Duration
	// ConstraintLabels are the label keys of a shape whose values are node features: a
	// launch for a shape with label KEY=VALUE, KEY listed, asks --constraint=VALUE (several
	// joined with &). A shape with a label not listed cannot be launched (CanOffer).
	// Default: none.
	ConstraintLabels []string
}

// Environment variables ConfigFromEnv reads. SLURM's own variables work as usual beside
// them: SLURM_CONF names the cluster, and sbatch's input variables (SBATCH_ACCOUNT,
// SBATCH_QOS, SBATCH_CONSTRAINT, SBATCH_PARTITION…) set options for every launch.
const (
	// EnvLogDir sets Config.LogDir.
	EnvLogDir = "LAKESHORE_SLURM_LOG_DIR"
	// EnvJobNamePrefix sets Config.JobNamePrefix.
	EnvJobNamePrefix = "LAKESHORE_SLURM_JOB_PREFIX"
	// EnvConstraintLabels sets Config.ConstraintLabels (comma-separated keys).
	EnvConstraintLabels = "LAKESHORE_SLURM_CONSTRAINT_LABELS"
)

// ConfigFromEnv returns the Config a supervisor uses by default: the zero Config with
// LogDir, JobNamePrefix and ConstraintLabels from EnvLogDir, EnvJobNamePrefix and
// EnvConstraintLabels when set.
func ConfigFromEnv() Config {
	var labels []string
	for _, k := range strings.Split(os.Getenv(EnvConstraintLabels), ",") {
		if k = strings.TrimSpace(k); k != "" {
			labels = append(labels, k)
		}
	}
	return Config{LogDir: os.Getenv(EnvLogDir), JobNamePrefix: os.Getenv(EnvJobNamePrefix), ConstraintLabels: labels}
}

// CanOffer implements provider.ShapeChecker: every label of r must be one of
// ConstraintLabels (a node feature); counts and GPU types are SLURM's to refuse (sbatch
// rejects resources no node has, and the launch fails).
func (p *Provider) CanOffer(r *plane.Requirement) error {
	for _, k := range slices.Sorted(maps.Keys(r.Labels)) {
		if !slices.Contains(p.cfg.ConstraintLabels, k) {
			return fmt.Errorf("slurm provider: the shape asks for label %s, which is not a node feature here (list it in %s)", k, EnvConstraintLabels)
		}
	}
	return checkFeatures(r)
}

// featurePattern is one node feature's name: the value of a constraint label. It keeps out
// the operators of --constraint's expressions (& | , * [ ] ( ) !) and spaces, so a
// submitter's label value names one feature and cannot widen, count or negate the
// constraint; an empty value (which dropped the constraint) is refused too.
var featurePattern = regexp.MustCompile(`^[A-Za-z0-9_.+-]{1,255}$`)

// checkFeatures checks the values of r's constraint labels (featurePattern). Errors:
// *plane.InvalidError.
func checkFeatures(r *plane.Requirement) error {
	for _, k := range slices.Sorted(maps.Keys(r.Labels)) {
		if v := r.Labels[k]; !featurePattern.MatchString(v) {
			return plane.Invalid("label "+k, v, "a node feature's name for --constraint: 1–255 bytes of [A-Za-z0-9_.+-] (no &, |, *, brackets or spaces)")
		}
	}
	return nil
}

// Provider launches workers as SLURM batch jobs. It keeps no state of its own: SLURM's
// queue is the record, so a restarted supervisor adopts the jobs of the one before. Safe
// for concurrent use.
type Provider struct {
	cfg Config
	env []string // the commands' environment (this process's, with SLURM_CONF)
}

var (
	_ provider.Provider = (*Provider)(nil)
	_ provider.Checker  = (*Provider)(nil) // a supervisor checks SLURM answers at start-up
)

// New returns a provider for cfg, creating its log directory. It does not contact SLURM
// (Check does). Errors: a missing SlurmConf file or an uncreatable log directory.
func New(cfg Config) (*Provider, error) {
	if cfg.Sbatch == "" {
		cfg.Sbatch = "sbatch"
	}
	if cfg.Scancel == "" {
		cfg.Scancel = "scancel"
	}
	if cfg.Squeue == "" {
		cfg.Squeue = "squeue"
	}
	if cfg.JobNamePrefix == "" {
		cfg.JobNamePrefix = JobNamePrefixDefault
	}
	if cfg.CommandTimeout <= 0 {
		cfg.CommandTimeout = CommandTimeoutDefault
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = PollIntervalDefault
	}
	if cfg.DrainBeforeTimeLimit == 0 {
		cfg.DrainBeforeTimeLimit = DrainBeforeTimeLimitDefault
	}
	if cfg.User == "" {
		if u, err := user.Current(); err == nil {
			cfg.User = u.Username
		} else {
			cfg.User = strconv.Itoa(os.Getuid()) // squeue and scancel take a uid too
		}
	}
	if cfg.LogDir == "" {
		home := os.Getenv("LAKESHORE_HOME")
		if home == "" {
			dir, err := os.UserHomeDir()
			if err != nil {
				return nil, fmt.Errorf("slurm provider: no log directory: set LAKESHORE_HOME or the provider's log directory: %w", err)
			}
			home = filepath.Join(dir, ".lakeshore")
		}
		cfg.LogDir = filepath.Join(home, "run", "providers", "slurm")
	}
	if err := os.MkdirAll(cfg.LogDir, 0o755); err != nil {
		return nil, fmt.Errorf("slurm provider: create the log directory: %w", err)
	}
	p := &Provider{cfg: cfg}
	if cfg.SlurmConf != "" {
		if _, err := os.Stat(cfg.SlurmConf); err != nil {
			return nil, &CommandError{Command: "SLURM_CONF=" + cfg.SlurmConf, Kind: ErrUnreachable,
				Output: "the file does not exist", Hint: "name the cluster's slurm.conf, or leave it empty for SLURM's default"}
		}
	}
	for _, kv := range os.Environ() {
		if cfg.SlurmConf == "" || !strings.HasPrefix(kv, "SLURM_CONF=") {
			p.env = append(p.env, kv)
		}
	}
	if cfg.SlurmConf != "" {
		p.env = append(p.env, "SLURM_CONF="+cfg.SlurmConf)
	}
	return p, nil
}

// Name returns plane.ProviderSlurm.
func (p *Provider) Name() string { return plane.ProviderSlurm }

// JobName returns the SLURM job name of launch id.
func (p *Provider) JobName(id string) string { return p.cfg.JobNamePrefix + id }

var _ provider.LogLocator = (*Provider)(nil)

// LogPath returns the file receiving launch id's output (provider.LogLocator: the
// supervisor quotes its last line when a launch ends unasked).
func (p *Provider) LogPath(id string) string {
	return filepath.Join(p.cfg.LogDir, p.JobName(id)+".log")
}

// Check implements provider.Checker: it asks SLURM whether it answers (squeue for the
// provider's user), for a clear error at start-up rather than at the first launch (a
// supervisor calls it the first time it uses the provider). Errors: *CommandError
// (ErrUnreachable, ErrNotInstalled).
func (p *Provider) Check(ctx context.Context) error {
	_, err := p.run(ctx, p.cfg.Squeue, "--noheader", "--user="+p.cfg.User, "--format=%i")
	return err
}

var launchIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`)

func validID(id string) error {
	if !launchIDPattern.MatchString(id) {
		return plane.Invalid("launch id", id, "1–100 bytes of [A-Za-z0-9._-]")
	}
	return nil
}

// Launch submits one worker as a batch job:
//
//	sbatch --parsable --job-name PREFIX+ID --comment namespace=…&queue=… --no-requeue
//	       --output LOGDIR/PREFIX+ID.log --export=ALL [resources] [ExtraArgs]
//	       --wrap "exec 'arg0' 'arg1' …"
//
// Resources map to --cpus-per-task, --gres=gpu:N, --mem=NM, --time=MINUTES (rounded up)
// and --partition. A shape's requirement (Launch.Requirement) replaces what it names:
// cpus_milli → --cpus-per-task (rounded up to whole CPUs), memory_bytes → --mem (MiB,
// rounded up), gpus and gpu_type → --gres=gpu[:TYPE]:N, and the labels listed in
// ConstraintLabels → --constraint=VALUE[&VALUE…]; the shape goes in the comment
// (shape=…), so List reports it. The worker's environment is the provider's with the launch's Env added
// (--export=ALL passes it on: values may hold commas or quotes). The batch step execs the
// worker, so a signal to the batch step (Stop's SIGTERM, SLURM's time limit) reaches it.
// It returns once sbatch accepted the job. Errors: *plane.InvalidError for a bad launch;
// *CommandError (ErrRejected for an unknown partition or resources no node has,
// ErrUnreachable, ErrNotInstalled).
func (p *Provider) Launch(ctx context.Context, l *provider.Launch) error {
	if err := validID(l.ID); err != nil {
		return err
	}
	if len(l.Command) == 0 || l.Command[0] == "" {
		return plane.Invalid("worker command", l.Command, "give the worker's command, e.g. lakeshore worker QUEUE -- ./handle.sh")
	}
	if l.Requirement != nil {
		constrained := &plane.Requirement{Labels: map[string]string{}}
		for k, v := range l.Requirement.Labels {
			if slices.Contains(p.cfg.ConstraintLabels, k) {
				constrained.Labels[k] = v
			}
		}
		if err := checkFeatures(constrained); err != nil {
			return err
		}
	}
	for k := range l.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return plane.Invalid("worker environment", k, "use NAME=VALUE with a NAME that has no '=' or NUL")
		}
	}
	args := p.sbatchArgs(l)
	env := append([]string(nil), p.env...)
	keys := make([]string, 0, len(l.Env))
	for k := range l.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+l.Env[k])
	}
	out, err := p.runEnv(ctx, env, p.cfg.Sbatch, args...)
	if err != nil {
		return err
	}
	// --parsable prints "JOBID" or "JOBID;CLUSTER".
	jobID, _, _ := strings.Cut(strings.TrimSpace(string(out)), ";")
	if _, err := strconv.ParseUint(jobID, 10, 64); err != nil {
		return &CommandError{Command: "sbatch", Output: fmt.Sprintf("printed %q where a job id was expected", tail(string(out), 200)),
			Hint: "check that sbatch is SLURM's and accepts --parsable"}
	}
	return nil
}

// sbatchArgs returns sbatch's arguments for l.
func (p *Provider) sbatchArgs(l *provider.Launch) []string {
	values := url.Values{"namespace": {l.Namespace}, "queue": {l.Queue}}
	if l.Shape != "" {
		values.Set("shape", l.Shape)
	}
	comment := values.Encode()
	args := []string{"--parsable",
		"--job-name=" + p.JobName(l.ID),
		"--comment=" + comment,
		"--no-requeue",
		"--output=" + p.LogPath(l.ID),
		"--export=ALL",
	}
	r := l.Resources
	gres := ""
	if r.GPUs > 0 {
		gres = "gpu:" + strconv.Itoa(r.GPUs)
	}
	var constraints []string
	// A shape's requirement takes the place of the policy's resources it names.
	if q := l.Requirement; q != nil {
		if q.MilliCPUs > 0 {
			r.CPUs = int((q.MilliCPUs + 999) / 1000)
		}
		if q.MemoryBytes > 0 {
			r.MemoryMB = (q.MemoryBytes + 1<<20 - 1) >> 20
		}
		if q.GPUs > 0 || q.GPUType != "" {
			n := max(q.GPUs, 1)
			gres = "gpu:" + strconv.FormatInt(n, 10)
			if q.GPUType != "" {
				gres = "gpu:" + q.GPUType + ":" + strconv.FormatInt(n, 10)
			}
		}
		for _, k := range slices.Sorted(maps.Keys(q.Labels)) {
			if slices.Contains(p.cfg.ConstraintLabels, k) {
				constraints = append(constraints, q.Labels[k])
			}
		}
	}
	if r.CPUs > 0 {
		args = append(args, "--cpus-per-task="+strconv.Itoa(r.CPUs))
	}
	if gres != "" {
		args = append(args, "--gres="+gres)
	}
	if r.MemoryMB > 0 {
		args = append(args, "--mem="+strconv.FormatInt(r.MemoryMB, 10)+"M")
	}
	if len(constraints) > 0 {
		args = append(args, "--constraint="+strings.Join(constraints, "&"))
	}
	if r.TimeLimit > 0 {
		minutes := int64((r.TimeLimit + time.Minute - 1) / time.Minute)
		args = append(args, "--time="+strconv.FormatInt(minutes, 10))
		if d := p.cfg.DrainBeforeTimeLimit; d > 0 && time.Duration(minutes)*time.Minute > 2*d {
			args = append(args, fmt.Sprintf("--signal=B:TERM@%d", int64(d/time.Second)))
		}
	}
	if r.Partition != "" {
		args = append(args, "--partition="+r.Partition)
	}
	args = append(args, p.cfg.ExtraArgs...)
	return append(args, "--wrap="+WrapCommand(l.Command))
}

// WrapCommand returns the shell line sbatch --wrap runs for argv: "exec" followed by each
// argument in single quotes (a quote inside one written '\”), so the shell passes every
// argument through unchanged — spaces, quotes, $, globs and newlines included — and the
// worker replaces the shell as the batch step's process.
func WrapCommand(argv []string) string {
	var b strings.Builder
	b.WriteString("exec")
	for _, a := range argv {
		b.WriteString(" '")
		b.WriteString(strings.ReplaceAll(a, "'", `'\''`))
		b.WriteString("'")
	}
	return b.String()
}

// Stop drains launch id and then ends it: a pending job is cancelled at once; a running
// one gets SIGTERM (scancel --signal=TERM --full: the worker and its children), and if it
// has not ended after grace it is killed (scancel --signal=KILL --full, then scancel).
// Stopping a launch SLURM no longer has is not an error. If ctx ends during the grace the
// job is killed at once (so no worker is left behind) and ctx's error returned. Errors:
// *plane.InvalidError for a bad id; *CommandError.
func (p *Provider) Stop(ctx context.Context, id string, grace time.Duration) error {
	if err := validID(id); err != nil {
		return err
	}
	name := "--name=" + p.JobName(id)
	user := "--user=" + p.cfg.User
	if _, err := p.run(ctx, p.cfg.Scancel, name, user, "--state=PENDING"); err != nil {
		return err
	}
	if _, err := p.run(ctx, p.cfg.Scancel, name, user, "--signal=TERM", "--full"); err != nil && !errors.Is(err, ErrRejected) {
		// ErrRejected: it was no longer running (ended, or pending a moment ago); the
		// wait below and the final cancel handle both.
		return err
	}
	deadline := time.Now().Add(grace)
	for {
		statuses, err := p.jobs(ctx, name)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			return err
		}
		if len(statuses) == 0 {
			return nil
		}
		if statuses[0].State == provider.LaunchPending {
			// It was pending when signalled (a moment before it started): cancel it.
			if _, err := p.run(ctx, p.cfg.Scancel, name, user, "--state=PENDING"); err != nil && ctx.Err() == nil {
				return err
			}
		}
		if !time.Now().Before(deadline) {
			break
		}
		wait := min(p.cfg.PollInterval, time.Until(deadline))
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		if ctx.Err() != nil {
			break
		}
	}
	// Past the grace (or ctx ended): kill. With a context of its own, so that a caller
	// giving up does not leave the worker running.
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.CommandTimeout)
	defer cancel()
	_, killErr := p.run(kctx, p.cfg.Scancel, name, user, "--signal=KILL", "--full")
	if _, err := p.run(kctx, p.cfg.Scancel, name, user); err != nil && killErr != nil {
		return err
	}
	return ctx.Err()
}

// List returns the provider's jobs that have not ended (squeue: pending, configuring,
// running, suspended…; a completing job is ending and left out), with the namespace and
// queue recorded in each job's comment. Detail is "slurm job ID STATE (REASON)". Errors:
// *CommandError.
func (p *Provider) List(ctx context.Context) ([]provider.LaunchStatus, error) {
	return p.jobs(ctx)
}

// fieldSeparator separates squeue's fields. Our jobs' names (prefix + [A-Za-z0-9._-]) and
// comments (URL-encoded) never hold it, and the comment, last, is split off whole.
const fieldSeparator = "|"

// jobs runs squeue for the provider's user (and filter args) and returns its launches.
func (p *Provider) jobs(ctx context.Context, filter ...string) ([]provider.LaunchStatus, error) {
	format := strings.Join([]string{"%i", "%T", "%r", "%j", "%k"}, fieldSeparator)
	args := append([]string{"--noheader", "--user=" + p.cfg.User, "--format=" + format}, filter...)
	out, err := p.run(ctx, p.cfg.Squeue, args...)
	if err != nil {
		return nil, err
	}
	var list []provider.LaunchStatus
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.SplitN(line, fieldSeparator, 5)
		if len(f) < 5 || !strings.HasPrefix(f[3], p.cfg.JobNamePrefix) {
			continue
		}
		jobID, state, reason, name, comment := f[0], f[1], f[2], f[3], f[4]
		s := provider.LaunchStatus{ID: strings.TrimPrefix(name, p.cfg.JobNamePrefix), State: launchState(state)}
		if s.State == provider.LaunchExited {
			continue
		}
		if v, err := url.ParseQuery(comment); err == nil {
			s.Namespace, s.Queue, s.Shape = v.Get("namespace"), v.Get("queue"), v.Get("shape")
		}
		s.Detail = "slurm job " + jobID + " " + state
		if reason != "" && reason != "None" {
			s.Detail += " (" + reason + ")"
		}
		list = append(list, s)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].ID < list[j].ID })
	return list, nil
}

// launchState maps a SLURM job state (squeue %T) to a launch state.
func launchState(state string) provider.LaunchState {
	switch state {
	case "PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "SPECIAL_EXIT", "POWER_UP_NODE":
		return provider.LaunchPending
	case "RUNNING", "SUSPENDED", "STOPPED", "RESIZING", "SIGNALING", "STAGE_OUT":
		return provider.LaunchRunning
	}
	// COMPLETING, COMPLETED, CANCELLED, FAILED, TIMEOUT, NODE_FAIL, PREEMPTED, OUT_OF_MEMORY,
	// BOOT_FAIL, DEADLINE, REVOKED: ended or ending.
	return provider.LaunchExited
}

func (p *Provider) run(ctx context.Context, program string, args ...string) ([]byte, error) {
	return p.runEnv(ctx, p.env, program, args...)
}

// runEnv runs program within CommandTimeout and ctx, returning its standard output, or a
// *CommandError classifying what went wrong.
func (p *Provider) runEnv(ctx context.Context, env []string, program string, args ...string) ([]byte, error) {
	line := filepath.Base(program) + " " + strings.Join(args, " ")
	if len(line) > 300 {
		line = line[:300] + "…"
	}
	if conf := p.slurmConf(env); conf != "" {
		// SLURM retries a missing slurm.conf for a minute before failing; say so at once.
		if _, err := os.Stat(conf); err != nil {
			return nil, &CommandError{Command: line, Kind: ErrUnreachable, Output: "SLURM_CONF names " + conf + ", which does not exist",
				Hint: "set SLURM_CONF (or the provider's slurm.conf) to the cluster's configuration file"}
		}
	}
	cctx, cancel := context.WithTimeout(ctx, p.cfg.CommandTimeout)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(cctx, program, args...)
	cmd.Env = env
	cmd.WaitDelay = 2 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err == nil {
		return stdout.Bytes(), nil
	}
	said := strings.TrimSpace(tail(stderr.String(), 1000))
	if said == "" {
		said = strings.TrimSpace(tail(stdout.String(), 1000))
	}
	said = strings.ReplaceAll(said, "\n", "; ") // one line in logs
	switch {
	case errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist):
		return nil, &CommandError{Command: line, Kind: ErrNotInstalled, Output: filepath.Base(program) + " was not found",
			Hint: "install SLURM's client commands on the machine running the supervisor (apt-get install slurm-client), or give their paths in the provider's configuration"}
	case errors.Is(ctx.Err(), context.Canceled):
		return nil, fmt.Errorf("slurm provider: %s: %w", line, ctx.Err())
	case cctx.Err() != nil:
		// The command's timeout, or the caller's deadline (a supervisor's call timeout):
		// either way SLURM did not answer in time.
		return nil, &CommandError{Command: line, Kind: ErrUnreachable,
			Output: fmt.Sprintf("no answer within %s", time.Since(start).Round(100*time.Millisecond)),
			Hint:   "check that slurmctld runs and answers (scontrol ping), or raise the provider's command timeout"}
	case unreachable(said):
		return nil, &CommandError{Command: line, Kind: ErrUnreachable, Output: said,
			Hint: "check that slurmctld runs and answers (scontrol ping), that munged runs on this machine, and that SLURM_CONF names the cluster's slurm.conf"}
	case program == p.cfg.Sbatch || program == p.cfg.Scancel:
		return nil, &CommandError{Command: line, Kind: ErrRejected, Output: said,
			Hint: "check the queue's launch policy (partition, cpus, gpus, memory, time limit) against the cluster's partitions: sinfo lists them"}
	}
	return nil, &CommandError{Command: line, Output: fmt.Sprintf("%s (exit status %d)", said, cmd.ProcessState.ExitCode())}
}

func (p *Provider) slurmConf(env []string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], "SLURM_CONF="); ok {
			return v
		}
	}
	return ""
}

// unreachable reports whether SLURM's message says it could not reach its controller or
// authenticate.
func unreachable(said string) bool {
	lower := strings.ToLower(said)
	for _, s := range []string{"unable to contact slurm controller", "munge", "unable to process configuration file",
		"zero bytes were transmitted", "socket timed out", "connection refused", "communication connection failure"} {
		if strings.Contains(lower, s) {
			return true
		}
	}
	return false
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
