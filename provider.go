package lakeshore

import (
	"context"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

type (
	// ProviderRef attaches a provider to a queue: who supplies its workers (local, slurm,
	// exec:PROGRAM) and the launch policy it follows. An alias of plane.ProviderRef;
	// docs/semantics.md says what attaching one changes (who starts workers, not how jobs
	// behave).
	ProviderRef = plane.ProviderRef
	// LaunchPolicy is how a supervisor follows a queue's backlog with workers: min and
	// max workers, jobs per worker, scale-up step, cooldown, idle and register timeouts,
	// the worker command, its environment and per-launch resources. An alias of
	// plane.LaunchPolicy; its fields document their defaults.
	LaunchPolicy = plane.LaunchPolicy
	// Resources are what one launch asks of its provider (CPUs, GPUs, memory, time limit,
	// partition). An alias of plane.Resources.
	Resources = plane.Resources
	// QueueProvider is a queue with a provider attached (an alias of plane.QueueProvider).
	QueueProvider = plane.QueueProvider
)

// The provider names a ProviderRef may carry.
const (
	// ProviderLocal runs workers as processes on the supervisor's machine.
	ProviderLocal = plane.ProviderLocal
	// ProviderSlurm submits workers as SLURM batch jobs.
	ProviderSlurm = plane.ProviderSlurm
	// ProviderExecPrefix starts the name of an exec provider: "exec:" then the program.
	ProviderExecPrefix = plane.ProviderExecPrefix
	// ProviderSSHPrefix starts the name of an ssh provider: "ssh:" then a provider of type
	// ssh declared in the supervisor's lakeshore.yaml.
	ProviderSSHPrefix = plane.ProviderSSHPrefix
	// ProviderKubernetesPrefix starts the name of a Kubernetes provider: "kubernetes:" then
	// a provider of type kubernetes declared in the supervisor's lakeshore.yaml.
	ProviderKubernetesPrefix = plane.ProviderKubernetesPrefix
)

// SetProvider attaches ref to the queue, replacing any earlier provider: from then on a
// supervisor (lakeshore provider run, or lakeshore serve --providers) launches and stops
// the queue's workers to follow ref.Policy. It does not check that the worker command
// exists: it runs on the launching machine. Errors: *InvalidError naming the bad field and
// what is allowed; over HTTP, ErrForbidden unless the client holds the server's admin token
// (a tenant token may not choose the command a supervisor runs); nothing is stored.
func (q *Queue) SetProvider(ctx context.Context, ref ProviderRef) error {
	return q.d.drv.QueueProviderSet(ctx, &plane.ProviderParams{Namespace: q.opts.Namespace, Queue: q.name, Provider: ref})
}

// Provider returns the queue's provider, or nil when it has none (its workers are started
// by hand).
func (q *Queue) Provider(ctx context.Context) (*ProviderRef, error) {
	return q.d.drv.QueueProviderGet(ctx, q.opts.Namespace, q.name)
}

// RemoveProvider detaches the queue's provider and reports whether there was one. Workers
// already running keep running until they exit or are stopped by hand; no supervisor acts
// for the queue any more. Over HTTP it needs the server's admin token, as SetProvider does.
func (q *Queue) RemoveProvider(ctx context.Context) (bool, error) {
	return q.d.drv.QueueProviderDelete(ctx, q.opts.Namespace, q.name)
}

// QueueProviders lists the queues of namespace that have a provider, ordered by namespace
// then queue; "" lists every namespace the caller may see. Errors: *InvalidError for a bad
// namespace name.
func (d *Dispatch) QueueProviders(ctx context.Context, namespace string) ([]QueueProvider, error) {
	return d.drv.QueueProviderList(ctx, namespace)
}

// AcquireLease takes the named lease (namespace, name) for holder, or renews it when holder
// has it already, for ttl from now on the plane's clock; it reports whether holder has it
// now (false: another holder's lease has not expired). One process at a time acts for a
// name this way: the provider supervisor takes "provider/QUEUE" before acting for a queue.
// Errors: *InvalidError (plane.LeaseNameRule, plane.LeaseHolderRule, ttl in (0, 7 days]).
func (a *Admin) AcquireLease(ctx context.Context, namespace, name, holder string, ttl time.Duration) (bool, error) {
	return a.d.drv.LeaseAcquire(ctx, &plane.LeaseParams{Namespace: namespace, Name: name, Holder: holder, TTL: ttl})
}

// ReleaseLease frees the named lease if holder has it (so another process may take it at
// once); otherwise it changes nothing. Errors: *InvalidError.
func (a *Admin) ReleaseLease(ctx context.Context, namespace, name, holder string) error {
	return a.d.drv.LeaseRelease(ctx, namespace, name, holder)
}
