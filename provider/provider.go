// Package provider supplies workers to queues that have a provider attached
// (plane.ProviderRef): a supervisor watches each such queue's backlog and live workers and
// launches or stops workers through a Provider to follow the queue's launch policy.
//
// Providers: local processes (package provider/localprovider), SLURM batch jobs
// (provider/slurmprovider) and external programs speaking JSON on stdin/stdout
// (provider/execprovider). docs/providers.md describes the policy, the supervisor's
// decisions and the exec protocol.
package provider

import (
	"context"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// Environment variables a provider sets for every worker it launches, beside the policy's
// Env and the plane's own (LAKESHORE_URL and LAKESHORE_TOKEN, or LAKESHORE_HOME).
const (
	// EnvLaunchID carries Launch.ID; workers register with it (WorkerInfo.LaunchID).
	EnvLaunchID = "LAKESHORE_LAUNCH_ID"
	// EnvProvider carries the provider's name (WorkerInfo.Provider).
	EnvProvider = "LAKESHORE_PROVIDER"
	// EnvQueue carries the queue the worker was launched for.
	EnvQueue = "LAKESHORE_QUEUE"
	// EnvNamespace carries the queue's namespace.
	EnvNamespace = "LAKESHORE_NAMESPACE"
)

// Launch is one worker a supervisor asks a provider to start.
type Launch struct {
	// ID identifies the launch (a ULID chosen by the supervisor); the worker registers
	// with it, and Stop and List name launches by it.
	ID string `json:"id"`
	// Namespace and Queue are the queue the worker serves.
	Namespace string `json:"namespace"`
	Queue     string `json:"queue"`
	// Command is the worker's argv (LaunchPolicy.Command).
	Command []string `json:"command"`
	// Env is the worker's extra environment: the policy's Env and the LAKESHORE_*
	// variables above.
	Env map[string]string `json:"env"`
	// Resources are the policy's per-launch resources.
	Resources plane.Resources `json:"resources"`
}

// LaunchState is where a launch is in its provider.
type LaunchState string

// The launch states.
const (
	// LaunchPending: accepted, not started yet (a SLURM job waiting for a node).
	LaunchPending LaunchState = "pending"
	// LaunchRunning: the worker's process runs.
	LaunchRunning LaunchState = "running"
	// LaunchExited: it ended (Detail says how); List may omit ended launches.
	LaunchExited LaunchState = "exited"
)

// LaunchStatus is a launch as its provider sees it.
type LaunchStatus struct {
	ID        string      `json:"id"`
	Namespace string      `json:"namespace"`
	Queue     string      `json:"queue"`
	State     LaunchState `json:"state"`
	// Detail is free text: an exit code, a SLURM state, a provider's message.
	Detail string `json:"detail,omitempty"`
}

// Provider starts and stops workers. Implementations are safe for concurrent use, and
// every method returns within its ctx (a provider program that hangs is cut off).
type Provider interface {
	// Name is the provider's name as a ProviderRef carries it ("local", "slurm",
	// "exec:PROGRAM").
	Name() string
	// Launch starts one worker. It returns once the provider accepted the launch, not
	// once the worker registered.
	Launch(ctx context.Context, l *Launch) error
	// Stop stops a launch gracefully: the worker is asked to drain (SIGTERM: it finishes
	// its running jobs and claims nothing new), then killed after grace. Stopping a launch
	// that already ended is not an error.
	Stop(ctx context.Context, id string, grace time.Duration) error
	// List returns the launches of this provider that have not ended, including those of
	// an earlier supervisor (so a restarted supervisor adopts them rather than launching
	// twice).
	List(ctx context.Context) ([]LaunchStatus, error)
}

// Checker is a Provider that can tell, before any launch, whether it can work at all (SLURM
// answers; the exec program exists). A supervisor calls Check the first time it uses the
// provider, so "SLURM is not reachable" is one clear line in its log at start-up rather than
// a failed launch later. Errors: what is wrong and how to fix it.
type Checker interface {
	Check(ctx context.Context) error
}
