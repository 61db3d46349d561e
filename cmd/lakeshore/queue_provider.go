package main

import (
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"
	"mvdan.cc/sh/v3/shell"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// providerFlags are the flags of `lakeshore queue set` that attach a provider and set its
// launch policy. As with the admission flags, the flags given replace those fields of the
// queue's current provider only.
type providerFlags struct {
	name            string
	policy          lakeshore.LaunchPolicy
	command, memory string
	env             []string
}

// providerFlagNames are the flags providerFlags registers, --provider first.
var providerFlagNames = []string{"provider", "min-workers", "max-workers", "jobs-per-worker", "scale-up-step",
	"cooldown", "idle-timeout", "register-timeout", "worker-command", "worker-env", "cpus", "gpus", "memory",
	"time-limit", "partition"}

func (pf *providerFlags) register(c *cobra.Command) {
	f := c.Flags()
	f.StringVar(&pf.name, "provider", "", "attach a provider that launches the queue's workers: local, slurm, exec:PROGRAM, ssh:NAME or kubernetes:NAME (NAME declared in the supervisor's lakeshore.yaml); none detaches it")
	f.IntVar(&pf.policy.MinWorkers, "min-workers", 0, "workers kept running even when the queue is empty (0: scale to zero)")
	f.IntVar(&pf.policy.MaxWorkers, "max-workers", 0, "most workers running or launching (0: the default, 1)")
	f.IntVar(&pf.policy.JobsPerWorker, "jobs-per-worker", 0, "target work per worker: want ceil((queued + running) ÷ this) workers (0: the default, 1)")
	f.IntVar(&pf.policy.Buffer, "buffer", 0, "idle workers kept beyond the backlog, per shape (0: none)")
	f.IntVar(&pf.policy.ScaleUpStep, "scale-up-step", 0, "most launches per supervisor tick (0: no cap)")
	f.DurationVar(&pf.policy.Cooldown, "cooldown", 0, "least time from the last launch or idle stop to the next idle stop; launches never wait for it (0: the default, 5s)")
	f.DurationVar(&pf.policy.IdleTimeout, "idle-timeout", 0, "stop a worker that ran no job this long (0: the default, 1m)")
	f.DurationVar(&pf.policy.RegisterTimeout, "register-timeout", 0, "a launch not registered within this counts as failed (0: the default, 2m)")
	f.StringVar(&pf.command, "worker-command", "", "the worker's command, split as a shell would, e.g. 'lakeshore worker Q -- ./handle.sh'")
	f.StringArrayVar(&pf.env, "worker-env", nil, "NAME=VALUE added to the worker's environment (repeat for several; replaces the earlier list)")
	f.IntVar(&pf.policy.Resources.CPUs, "cpus", 0, "CPUs per worker (0: the provider's default)")
	f.IntVar(&pf.policy.Resources.GPUs, "gpus", 0, "GPUs per worker (0: none)")
	f.StringVar(&pf.memory, "memory", "", "memory per worker: MiB (4096) or with a unit (4GiB, 512MiB); 0: the provider's default")
	f.DurationVar(&pf.policy.Resources.TimeLimit, "time-limit", 0, "longest a worker may run, e.g. 2h (0: the provider's default)")
	f.StringVar(&pf.policy.Resources.Partition, "partition", "", "SLURM partition (or the exec provider's pool)")
	nonNegative(c, "min-workers", "max-workers", "jobs-per-worker", "buffer", "scale-up-step", "cpus", "gpus")
}

// changed reports whether any provider flag was given.
func (pf *providerFlags) changed(c *cobra.Command) bool { return anyChanged(c, providerFlagNames...) }

// apply attaches, changes or detaches q's provider from the flags given, and warns when the
// worker command's program is not found on this machine (it may exist where workers are
// launched).
func (pf *providerFlags) apply(a *app, c *cobra.Command, q *lakeshore.Queue) error {
	f := c.Flags()
	if pf.name == "none" {
		if others := slices.DeleteFunc(slices.Clone(providerFlagNames[1:]), func(n string) bool { return !f.Changed(n) }); len(others) > 0 {
			return usagef("queue set: --provider none detaches the provider; drop --%s", strings.Join(others, ", --"))
		}
		_, err := q.RemoveProvider(c.Context())
		return err
	}
	var ref lakeshore.ProviderRef
	if old, err := q.Provider(c.Context()); err != nil {
		return err
	} else if old != nil {
		ref = *old
	} else if !f.Changed("provider") {
		return usagef("queue set: queue %s has no provider; give --provider local, slurm, exec:PROGRAM, ssh:NAME or kubernetes:NAME", q.Name())
	}
	p, set := &ref.Policy, &pf.policy
	if f.Changed("provider") {
		ref.Name = pf.name
	}
	for name, apply := range map[string]func(){
		"min-workers":      func() { p.MinWorkers = set.MinWorkers },
		"max-workers":      func() { p.MaxWorkers = set.MaxWorkers },
		"jobs-per-worker":  func() { p.JobsPerWorker = set.JobsPerWorker },
		"scale-up-step":    func() { p.ScaleUpStep = set.ScaleUpStep },
		"buffer":           func() { p.Buffer = set.Buffer },
		"cooldown":         func() { p.Cooldown = set.Cooldown },
		"idle-timeout":     func() { p.IdleTimeout = set.IdleTimeout },
		"register-timeout": func() { p.RegisterTimeout = set.RegisterTimeout },
		"cpus":             func() { p.Resources.CPUs = set.Resources.CPUs },
		"gpus":             func() { p.Resources.GPUs = set.Resources.GPUs },
		"time-limit":       func() { p.Resources.TimeLimit = set.Resources.TimeLimit },
		"partition":        func() { p.Resources.Partition = set.Resources.Partition },
	} {
		if f.Changed(name) {
			apply()
		}
	}
	if f.Changed("worker-command") {
		argv, err := splitCommand(pf.command)
		if err != nil {
			return err
		}
		p.Command = argv
	}
	if f.Changed("worker-env") {
		env, err := parseEnv(pf.env)
		if err != nil {
			return err
		}
		p.Env = env
	}
	if f.Changed("memory") {
		mb, err := parseMemoryMB(pf.memory)
		if err != nil {
			return err
		}
		p.Resources.MemoryMB = mb
	}
	if err := q.SetProvider(c.Context(), ref); err != nil {
		return err
	}
	// The local provider runs its supervisor's own executable for a command whose program is
	// "lakeshore" (localprovider.Provider.SetLakeshore): that one needs no lakeshore on PATH.
	localLakeshore := ref.Name == plane.ProviderLocal && len(p.Command) > 0 && p.Command[0] == "lakeshore"
	if len(p.Command) > 0 && (ref.Name == plane.ProviderLocal || ref.Name == plane.ProviderSlurm) && !localLakeshore {
		if _, err := exec.LookPath(p.Command[0]); err != nil {
			fmt.Fprintf(a.stderr, "lakeshore: warning: the worker command %q is not found on this machine; it must exist where workers are launched (the supervisor reports it otherwise)\n", p.Command[0])
		}
	}
	if prog, ok := strings.CutPrefix(ref.Name, plane.ProviderExecPrefix); ok {
		if _, err := exec.LookPath(prog); err != nil {
			fmt.Fprintf(a.stderr, "lakeshore: warning: the provider program %q is not found on this machine; it must exist where the supervisor runs\n", prog)
		}
	}
	return nil
}

// splitCommand splits a worker command as a POSIX shell splits words (quotes and
// backslashes), without expanding anything: a variable or ~ would be expanded on this
// machine rather than the worker's, so it is refused.
func splitCommand(s string) ([]string, error) {
	var expanded []string
	argv, err := shell.Fields(s, func(name string) string {
		switch name { // consulted for every command, not expansions of its words
		case "IFS":
			return " \t\n"
		case "PWD":
			return ""
		}
		expanded = append(expanded, name)
		return ""
	})
	if err != nil {
		return nil, plane.Invalid("worker command", s, "quote it as a shell would ("+err.Error()+")")
	}
	if len(expanded) > 0 {
		return nil, plane.Invalid("worker command", s, "write it without $VARIABLES or ~ (they would be expanded here, not on the worker's machine); use --worker-env, or sh -c '…' to expand on the worker")
	}
	if len(argv) == 0 {
		return nil, plane.Invalid("worker command", s, "give the worker's command, e.g. lakeshore worker QUEUE -- ./handle.sh")
	}
	return argv, nil
}

// parseEnv reads NAME=VALUE pairs.
func parseEnv(pairs []string) (map[string]string, error) {
	env := make(map[string]string, len(pairs))
	for _, kv := range pairs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, plane.Invalid("worker env", kv, "use NAME=VALUE")
		}
		env[k] = v
	}
	return env, nil
}

// parseMemoryMB reads a memory size: a plain number is MiB; with a unit (4GiB, 512MiB, 2G)
// it is converted to MiB, rounded up.
func parseMemoryMB(s string) (int64, error) {
	rule := "use MiB (4096) or a size with a unit (4GiB, 512MiB)"
	if n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64); err == nil {
		if n < 0 {
			return 0, plane.Invalid("memory", s, rule)
		}
		return n, nil
	}
	b, err := humanize.ParseBytes(s)
	if err != nil || b > 1<<62 {
		return 0, plane.Invalid("memory", s, rule)
	}
	return int64((b + (1<<20 - 1)) >> 20), nil
}

// printProvider prints a queue's provider after its admission block (text mode).
func (a *app) printProvider(ref *lakeshore.ProviderRef) error {
	if ref == nil {
		return nil
	}
	p := ref.Policy.WithDefaults()
	tw := a.table()
	tw.row("provider", ref.Name)
	tw.row("workers", fmt.Sprintf("%d–%d, %d jobs per worker", p.MinWorkers, p.MaxWorkers, p.JobsPerWorker))
	step := "no cap"
	if p.ScaleUpStep > 0 {
		step = strconv.Itoa(p.ScaleUpStep) + " per tick"
	}
	tw.row("scale-up step", step)
	if p.Buffer > 0 {
		tw.row("buffer", fmt.Sprintf("%d idle per shape", p.Buffer))
	}
	tw.row("cooldown", p.Cooldown)
	tw.row("idle timeout", p.IdleTimeout)
	tw.row("register timeout", p.RegisterTimeout)
	command := make([]string, len(p.Command))
	for i, arg := range p.Command {
		command[i] = plane.RedactURL(arg) // a URL argument's password is not printed
	}
	tw.row("worker command", shellJoin(command))
	for _, k := range slices.Sorted(maps.Keys(p.Env)) {
		tw.row("worker env", fmt.Sprintf("%s=%s", k, plane.RedactEnv(k, p.Env[k]))) // a secret's value is not printed
	}
	r := p.Resources
	var res []string
	for _, x := range []struct {
		name string
		v    int64
	}{{"cpus", int64(r.CPUs)}, {"gpus", int64(r.GPUs)}, {"memory MiB", r.MemoryMB}} {
		if x.v > 0 {
			res = append(res, fmt.Sprintf("%s=%d", x.name, x.v))
		}
	}
	if r.TimeLimit > 0 {
		res = append(res, "time-limit="+r.TimeLimit.String())
	}
	if r.Partition != "" {
		res = append(res, "partition="+r.Partition)
	}
	if len(res) == 0 {
		res = []string{"provider defaults"}
	}
	tw.row("resources", strings.Join(res, " "))
	return tw.Flush()
}

// providerJSON is a provider in `--json queue get` (durations as text and seconds).
func providerJSON(ref *lakeshore.ProviderRef) any {
	if ref == nil {
		return nil
	}
	p := ref.Policy
	dur := func(d time.Duration) any { return d.Seconds() }
	return map[string]any{"name": ref.Name, "min_workers": p.MinWorkers, "max_workers": p.MaxWorkers,
		"jobs_per_worker": p.JobsPerWorker, "scale_up_step": p.ScaleUpStep, "buffer": p.Buffer, "cooldown_s": dur(p.Cooldown),
		"idle_timeout_s": dur(p.IdleTimeout), "register_timeout_s": dur(p.RegisterTimeout), "command": p.Command,
		"env": p.Env, "cpus": p.Resources.CPUs, "gpus": p.Resources.GPUs, "memory_mb": p.Resources.MemoryMB,
		"time_limit_s": dur(p.Resources.TimeLimit), "partition": p.Resources.Partition}
}

// shellJoin quotes argv for display so that it splits back the same.
func shellJoin(argv []string) string {
	out := make([]string, len(argv))
	for i, s := range argv {
		if s != "" && strings.IndexFunc(s, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,@+%", r))
		}) < 0 {
			out[i] = s
			continue
		}
		out[i] = "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	return strings.Join(out, " ")
}
