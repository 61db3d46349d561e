package plane

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Provider kinds: the names a ProviderRef may carry. "exec:PROGRAM" names an external
// program that speaks the exec provider's JSON protocol (docs/providers.md).
const (
	// ProviderLocal runs workers as processes on the supervisor's machine.
	ProviderLocal = "local"
	// ProviderSlurm submits workers as SLURM batch jobs (sbatch, scancel, squeue).
	ProviderSlurm = "slurm"
	// ProviderExecPrefix starts the name of an exec provider: "exec:" then the program.
	ProviderExecPrefix = "exec:"
	// ProviderSSHPrefix starts the name of an ssh provider: "ssh:" then the name of a
	// provider of type ssh declared in the supervisor's project file (lakeshore.yaml),
	// whose hosts run the workers.
	ProviderSSHPrefix = "ssh:"
	// ProviderKubernetesPrefix starts the name of a Kubernetes provider: "kubernetes:"
	// then the name of a provider of type kubernetes declared in the supervisor's project
	// file; its workers are Pods.
	ProviderKubernetesPrefix = "kubernetes:"
)

// Defaults of LaunchPolicy, applied by WithDefaults.
const (
	// MaxWorkersDefault is LaunchPolicy.MaxWorkers when 0.
	MaxWorkersDefault = 1
	// JobsPerWorkerDefault is LaunchPolicy.JobsPerWorker when 0: one worker per queued job,
	// up to MaxWorkers.
	JobsPerWorkerDefault = 1
	// CooldownDefault is LaunchPolicy.Cooldown when 0.
	CooldownDefault = 5 * time.Second
	// IdleTimeoutDefault is LaunchPolicy.IdleTimeout when 0.
	IdleTimeoutDefault = time.Minute
	// RegisterTimeoutDefault is LaunchPolicy.RegisterTimeout when 0.
	RegisterTimeoutDefault = 2 * time.Minute
)

// ProviderRef attaches a provider to a queue: who supplies its workers, and the launch
// policy it follows. A queue without one (nil, the default) runs on whatever workers were
// started by hand; attaching one changes who supplies the workers, not how jobs behave.
// It is stored in the plane beside the queue's admission block.
type ProviderRef struct {
	// Name is the provider: ProviderLocal, ProviderSlurm, ProviderExecPrefix followed by
	// the program's path ("exec:/opt/bin/k8s-workers"), or ProviderSSHPrefix or
	// ProviderKubernetesPrefix followed by a provider declared in the supervisor's
	// project file ("ssh:gpu-hosts").
	Name string `json:"name" msgpack:"name"`
	// Policy is how many workers to run and how to launch each.
	Policy LaunchPolicy `json:"policy" msgpack:"policy"`
}

// LaunchPolicy is how a supervisor follows a queue's backlog with workers. Durations are
// time.Duration (seconds on the HTTP API).
type LaunchPolicy struct {
	// MinWorkers is kept running even when the queue is empty. Defaults to 0 (scale to zero).
	MinWorkers int `json:"min_workers,omitempty" msgpack:"min_workers,omitempty"`
	// MaxWorkers caps the workers running or launching. Defaults to MaxWorkersDefault (1).
	MaxWorkers int `json:"max_workers,omitempty" msgpack:"max_workers,omitempty"`
	// JobsPerWorker is the target work per worker: the supervisor wants
	// ceil((queued + running) ÷ JobsPerWorker) workers, within [MinWorkers, MaxWorkers]
	// (provider.Decide). Queued counts delayed jobs not due yet. Defaults to
	// JobsPerWorkerDefault (1).
	JobsPerWorker int `json:"jobs_per_worker,omitempty" msgpack:"jobs_per_worker,omitempty"`
	// Buffer is how many idle workers to keep beyond the backlog, per shape: the
	// supervisor wants ceil((queued + running) ÷ JobsPerWorker) + Buffer workers of a
	// shape while it has queued or running jobs (and of the default shape always), within
	// [MinWorkers, MaxWorkers] (provider.Decide). Defaults to 0: none.
	Buffer int `json:"buffer,omitempty" msgpack:"buffer,omitempty"`
	// ScaleUpStep caps the launches of one tick. Defaults to 0: no cap (up to MaxWorkers).
	ScaleUpStep int `json:"scale_up_step,omitempty" msgpack:"scale_up_step,omitempty"`
	// Cooldown is the least time from the supervisor's last change of the queue's workers
	// (a launch, or a stop of an idle worker) to its next stop of an idle worker. Launches
	// are never delayed by it (backlog is served at once), and a launch that failed or
	// expired does not restart it. Defaults to CooldownDefault (5 s).
	Cooldown time.Duration `json:"cooldown,omitempty" msgpack:"cooldown,omitempty"`
	// IdleTimeout is how long a worker runs no job before the supervisor stops it (never
	// below MinWorkers). Defaults to IdleTimeoutDefault (1 min).
	IdleTimeout time.Duration `json:"idle_timeout,omitempty" msgpack:"idle_timeout,omitempty"`
	// RegisterTimeout is how long a launch may take to register in the worker registry
	// before it counts as failed (stopped, and replaced while there is work). Defaults to
	// RegisterTimeoutDefault (2 min).
	RegisterTimeout time.Duration `json:"register_timeout,omitempty" msgpack:"register_timeout,omitempty"`
	// Command is the worker's argv, run by the provider (for example
	// ["lakeshore", "worker", "thumbnails", "--", "convert", "{}", "{}.png"] or
	// ["python", "worker.py"]). Required.
	Command []string `json:"command" msgpack:"command"`
	// Env is added to the worker's environment, beside the LAKESHORE_* variables the
	// provider sets (docs/providers.md). Defaults to none.
	Env map[string]string `json:"env,omitempty" msgpack:"env,omitempty"`
	// Resources are asked for each launch (honoured by slurm and exec providers; the local
	// provider ignores all but none).
	Resources Resources `json:"resources,omitzero" msgpack:"resources,omitempty"`
}

// Resources are what one launch asks of its provider. Zero values ask for nothing.
type Resources struct {
	// CPUs per worker, at most RequirementCPUsMax.
	CPUs int `json:"cpus,omitempty" msgpack:"cpus,omitempty"`
	// GPUs per worker, at most RequirementGPUsMax.
	GPUs int `json:"gpus,omitempty" msgpack:"gpus,omitempty"`
	// MemoryMB is memory per worker, in MiB, at most RequirementMemoryMax (1 PiB).
	MemoryMB int64 `json:"memory_mb,omitempty" msgpack:"memory_mb,omitempty"`
	// TimeLimit is the longest a worker may run (SLURM --time). 0: the provider's default.
	TimeLimit time.Duration `json:"time_limit,omitempty" msgpack:"time_limit,omitempty"`
	// Partition is the SLURM partition (or the exec provider's pool).
	Partition string `json:"partition,omitempty" msgpack:"partition,omitempty"`
}

// WithDefaults returns p with MaxWorkers, JobsPerWorker, Cooldown, IdleTimeout and
// RegisterTimeout filled in.
func (p LaunchPolicy) WithDefaults() LaunchPolicy {
	if p.MaxWorkers == 0 {
		p.MaxWorkers = max(MaxWorkersDefault, p.MinWorkers)
	}
	if p.JobsPerWorker == 0 {
		p.JobsPerWorker = JobsPerWorkerDefault
	}
	if p.Cooldown == 0 {
		p.Cooldown = CooldownDefault
	}
	if p.IdleTimeout == 0 {
		p.IdleTimeout = IdleTimeoutDefault
	}
	if p.RegisterTimeout == 0 {
		p.RegisterTimeout = RegisterTimeoutDefault
	}
	return p
}

// Validate checks r's name and policy. It cannot know whether the program exists on the
// machine that will launch workers; the supervisor reports that in its log and metrics.
// Errors: *InvalidError naming the field and what is allowed.
func (r ProviderRef) Validate() error {
	switch {
	case r.Name == ProviderLocal, r.Name == ProviderSlurm:
	case strings.HasPrefix(r.Name, ProviderExecPrefix):
		if strings.TrimSpace(strings.TrimPrefix(r.Name, ProviderExecPrefix)) == "" {
			return Invalid("provider", r.Name, "name the program after exec:, e.g. exec:/usr/local/bin/my-provider")
		}
	case strings.HasPrefix(r.Name, ProviderSSHPrefix), strings.HasPrefix(r.Name, ProviderKubernetesPrefix):
		_, declared, _ := strings.Cut(r.Name, ":")
		if !declaredNameOK(declared) {
			return Invalid("provider", r.Name, "name a provider declared in the supervisor's lakeshore.yaml after the prefix: 1-63 of [A-Za-z0-9_.-], starting with a letter or digit, e.g. ssh:gpu-hosts")
		}
	default:
		return Invalid("provider", r.Name, "use local, slurm, exec:PROGRAM, ssh:NAME or kubernetes:NAME")
	}
	return r.Policy.Validate()
}

// declaredNameOK reports whether s is a provider name a project file may declare (the rule
// of fabric's provider names).
func declaredNameOK(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for i, c := range s {
		ok := c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && (c == '_' || c == '.' || c == '-')
		if !ok {
			return false
		}
	}
	return true
}

// Validate checks p. Errors: *InvalidError naming the field and what is allowed.
func (p LaunchPolicy) Validate() error {
	d := p.WithDefaults()
	switch {
	case p.MinWorkers < 0:
		return Invalid("min workers", p.MinWorkers, "use a number ≥ 0")
	case p.MaxWorkers < 0:
		return Invalid("max workers", p.MaxWorkers, "use a number ≥ 1, or 0 for the default (1)")
	case d.MaxWorkers < p.MinWorkers:
		return Invalid("max workers", p.MaxWorkers, fmt.Sprintf("use a number ≥ min workers (%d)", p.MinWorkers))
	case p.JobsPerWorker < 0:
		return Invalid("jobs per worker", p.JobsPerWorker, "use a number ≥ 1, or 0 for the default (1)")
	case p.Buffer < 0:
		return Invalid("buffer", p.Buffer, "use a number ≥ 0 (0: no idle workers beyond the backlog)")
	case p.ScaleUpStep < 0:
		return Invalid("scale-up step", p.ScaleUpStep, "use a number ≥ 1, or 0 for no cap")
	case p.Cooldown < 0:
		return Invalid("cooldown", p.Cooldown, "use a duration ≥ 0 (0: the default, 5s)")
	case p.IdleTimeout < 0:
		return Invalid("idle timeout", p.IdleTimeout, "use a duration ≥ 0 (0: the default, 1m)")
	case p.RegisterTimeout < 0:
		return Invalid("register timeout", p.RegisterTimeout, "use a duration ≥ 0 (0: the default, 2m)")
	case len(p.Command) == 0 || strings.TrimSpace(p.Command[0]) == "":
		return Invalid("worker command", p.Command, "give the worker's command, e.g. lakeshore worker QUEUE -- ./handle.sh")
	case p.Resources.CPUs < 0 || p.Resources.CPUs > RequirementCPUsMax:
		return Invalid("cpus", p.Resources.CPUs, fmt.Sprintf("use a number from 0 to %d", RequirementCPUsMax))
	case p.Resources.GPUs < 0 || p.Resources.GPUs > RequirementGPUsMax:
		return Invalid("gpus", p.Resources.GPUs, fmt.Sprintf("use a number from 0 to %d", RequirementGPUsMax))
	case p.Resources.MemoryMB < 0 || p.Resources.MemoryMB > RequirementMemoryMax>>20:
		return Invalid("memory", p.Resources.MemoryMB, fmt.Sprintf("use MiB from 0 to %d (1 PiB)", RequirementMemoryMax>>20))
	case p.Resources.TimeLimit < 0:
		return Invalid("time limit", p.Resources.TimeLimit, "use a duration ≥ 0 (0: the provider's default)")
	}
	for k := range p.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return Invalid("worker environment", k, "use NAME=VALUE with a NAME that has no '=' or NUL")
		}
	}
	return nil
}

// ProviderParams name a queue and, for a set, its provider reference.
type ProviderParams struct {
	Namespace string
	Queue     string
	Provider  ProviderRef
}

// QueueProvider is a queue with a provider attached, as Driver.QueueProviderList lists it.
type QueueProvider struct {
	Namespace string      `json:"namespace" msgpack:"namespace"`
	Queue     string      `json:"queue" msgpack:"queue"`
	Provider  ProviderRef `json:"provider" msgpack:"provider"`
}

// LeaseParams take or renew a named lease in the plane (Driver.LeaseAcquire): a row with
// a holder and an expiry, so that one process at a time acts for the name (a provider
// supervisor per queue). It works through PgBouncer (no advisory locks) and across
// processes on one SQLite file.
type LeaseParams struct {
	// Namespace scopes the lease (tenants never contend for each other's names).
	Namespace string
	// Name is what the lease guards, e.g. "provider/QUEUE". 1–200 bytes.
	Name string
	// Holder identifies the process taking it (a ULID).
	Holder string
	// TTL is how long the lease holds without a renewal; > 0.
	TTL time.Duration
}

// ProviderRefMaxBytes bounds a stored ProviderRef, as JSON (64 KiB): a worker command and
// environment, not a payload.
const ProviderRefMaxBytes = 64 << 10

// LeaseNameRule is what LeaseParams.Name may be.
const LeaseNameRule = "use 1–200 bytes of UTF-8 without control characters, e.g. provider/QUEUE"

// LeaseHolderRule is what LeaseParams.Holder may be (a worker id's bytes; a holder is never
// part of a path, so WorkerIDRule's slash rule does not apply).
const LeaseHolderRule = "use 1–128 bytes of printable ASCII without spaces"

// Validate checks the namespace, the queue name and the provider reference (its name,
// its policy, and its size: at most ProviderRefMaxBytes as JSON). Errors: *InvalidError
// naming the field and what is allowed.
func (p *ProviderParams) Validate() error {
	if err := ValidateNamespace(p.Namespace); err != nil {
		return err
	}
	if err := ValidateName("queue name", p.Queue); err != nil {
		return err
	}
	if err := p.Provider.Validate(); err != nil {
		return err
	}
	for _, arg := range p.Provider.Policy.Command {
		if strings.IndexByte(arg, 0) >= 0 || !utf8.ValidString(arg) {
			return Invalid("worker command", arg, "use arguments of UTF-8 without NUL")
		}
	}
	for k, v := range p.Provider.Policy.Env {
		if strings.IndexByte(v, 0) >= 0 || !utf8.ValidString(k) || !utf8.ValidString(v) {
			return Invalid("worker environment", k, "use NAME=VALUE of UTF-8 without NUL")
		}
	}
	if b, err := json.Marshal(p.Provider); err != nil || len(b) > ProviderRefMaxBytes {
		return Invalid("provider", fmt.Sprintf("of %d bytes", len(b)), fmt.Sprintf("keep the command, environment and resources under %d bytes as JSON", ProviderRefMaxBytes))
	}
	return nil
}

// Validate checks a lease to take: the namespace, the name (LeaseNameRule), the holder
// (LeaseHolderRule) and a TTL in (0, LeaseTTLMax]. Errors: *InvalidError.
func (p *LeaseParams) Validate() error {
	if err := ValidateLease(p.Namespace, p.Name, p.Holder); err != nil {
		return err
	}
	if p.TTL <= 0 || p.TTL > LeaseTTLMax {
		return Invalid("lease ttl", p.TTL, "use a duration > 0 and at most 7 days")
	}
	return nil
}

// ValidateLease checks the namespace, name and holder of a lease (LeaseParams.Validate and
// Driver.LeaseRelease). Errors: *InvalidError.
func ValidateLease(namespace, name, holder string) error {
	if err := ValidateNamespace(namespace); err != nil {
		return err
	}
	if len(name) == 0 || len(name) > 200 || !utf8.ValidString(name) || strings.IndexFunc(name, unicode.IsControl) >= 0 {
		return Invalid("lease name", name, LeaseNameRule)
	}
	if len(holder) == 0 || len(holder) > 128 {
		return Invalid("lease holder", holder, LeaseHolderRule)
	}
	for i := 0; i < len(holder); i++ {
		if c := holder[i]; c <= ' ' || c > '~' {
			return Invalid("lease holder", holder, LeaseHolderRule)
		}
	}
	return nil
}
