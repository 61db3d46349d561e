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
	"path/filepath"
	"strings"
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
	// EnvShape carries the shape key the worker was launched for (plane.Requirement.Shape);
	// absent for the default shape.
	EnvShape = "LAKESHORE_SHAPE"
	// EnvOffers carries what the worker offers, in `lakeshore worker --offers` form
	// (plane.FormatOffers: "cpus=8000m,memory=68719476736,gpus=1,gpu_type=a100,label.zone=east");
	// absent for the default shape. `lakeshore worker` reads it when --offers is not given,
	// and the supervisor also adds --offers to a `lakeshore worker` command.
	EnvOffers = "LAKESHORE_OFFERS"
	// EnvBinary is the lakeshore binary a worker's SDK runs to reach an embedded plane (the
	// Python SDK starts the plane's daemon with it). Over the embedded plane, a supervisor
	// whose own environment does not set it gives its launches its own executable
	// (`lakeshore provider run`, `lakeshore serve --providers`).
	EnvBinary = "LAKESHORE_BIN"
	// EnvToken is the worker's bearer token for an http(s):// plane. The supervisor gives
	// each launch a token of its own (LaunchTokenID), never its own admin token, unless the
	// policy's Env sets one (docs/providers.md, "The token a launched worker holds").
	EnvToken = "LAKESHORE_TOKEN"
)

// LaunchTokenPrefix starts the id of the token a supervisor mints for a launch
// (LaunchTokenID).
const LaunchTokenPrefix = "launch-"

// LaunchTokenID is the id of the token minted for launch id: a function of the launch, so
// that whichever supervisor sees the launch end (its own, or one that adopted it) revokes it.
func LaunchTokenID(id string) string { return LaunchTokenPrefix + id }

// LaunchTokenPermissions are what a launch's token grants on its queue's namespace (every
// queue of it): what a worker does (consume: claim, settle, register; read) and what its
// jobs may do with the worker's token (submit further jobs, the data plane) — everything
// but admin (tokens, providers, admission, pause), and nothing of another namespace.
var LaunchTokenPermissions = []plane.Permission{plane.PermissionConsume, plane.PermissionRead, plane.PermissionSubmit,
	plane.PermissionDataPut, plane.PermissionDataRead}

// UsePlaneURL makes env, a launch's environment, reach the plane at url (LAKESHORE_URL)
// rather than the supervisor's embedded plane: what only reaches that plane on the
// supervisor's machine (LAKESHORE_HOME, EnvBinary) is dropped. For a provider whose workers
// run elsewhere and are given a plane URL of their own (an SSH host's or a Kubernetes
// provider's plane_url).
func UsePlaneURL(env map[string]string, url string) {
	env["LAKESHORE_URL"] = url
	delete(env, "LAKESHORE_HOME")
	delete(env, EnvBinary)
}

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
	// Shape is the shape key the worker is launched for ("" for the default shape), and
	// Requirement its requirement (nil for the default shape): the worker offers exactly
	// that (EnvOffers, and --offers on a `lakeshore worker` command), and a provider asks
	// its host, job or Pod for it (docs/providers.md, "Launching by shape").
	Shape       string             `json:"shape,omitempty"`
	Requirement *plane.Requirement `json:"requirement,omitempty"`
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
	// Shape is the shape key the launch was made for, when the provider keeps it ("" for
	// the default shape or unknown): a supervisor started later counts an adopted launch
	// under it.
	Shape string `json:"shape,omitempty"`
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

// ShapeChecker is a Provider that can tell whether it can launch a worker offering a shape
// at all (a host, a GPU type, enough GPUs). The supervisor asks before launching for a shape
// and, on an error, launches nothing for it: the shape is reported (log, the
// lakeshore_provider_shape_unlaunchable gauge) instead of failing launch after launch.
// Errors: what the provider lacks, e.g. "no host offers gpus=2".
type ShapeChecker interface {
	CanOffer(r *plane.Requirement) error
}

// LogLocator is a Provider that can say where a launch's output (the worker's standard
// output and error) goes: a file on the supervisor's machine (an absolute path: the local
// provider's, SLURM's on a shared file system) or elsewhere ("HOST:PATH" of an SSH host).
// When a launch ends without being stopped, the supervisor's "worker failed failure=ended"
// line names it, and quotes its last line when the file is on the supervisor's machine:
// why a worker exited (unauthorized, a command not found, a Python traceback) is there.
// "" when it does not know.
type LogLocator interface {
	LogPath(id string) string
}

// ExitReporter is a Provider that knows how a launch's process ended: the local provider,
// whose launches are its children (their wait status). When a launch ends without being
// stopped, the supervisor's "worker failed failure=ended" line adds exit_code=CODE, or
// exit_signal=NAME for a process a signal ended (the OOM killer's SIGKILL). Providers that
// learn no exit status of their own (SLURM, SSH, Kubernetes) do not implement it.
type ExitReporter interface {
	// ExitStatus returns launch id's exit code, or -1 and the name of the signal that
	// ended it ("SIGKILL"); ok false when it does not know (still running, started by
	// another process, or already reported: each is reported once).
	ExitStatus(id string) (code int, signal string, ok bool)
}

// WithOffers returns command with `--offers OFFERS` added when it runs `lakeshore worker`
// (its program's base name is lakeshore and its first argument worker) and gives no
// --offers itself: before a `--` that ends the worker's options, else at the end. Other
// commands are returned unchanged (they read EnvOffers). offers "" changes nothing.
func WithOffers(command []string, offers string) []string {
	if offers == "" || len(command) < 2 || filepath.Base(command[0]) != "lakeshore" || command[1] != "worker" {
		return command
	}
	at := len(command)
	for i, a := range command[2:] {
		if a == "--" {
			at = i + 2
			break
		}
		if a == "--offers" || strings.HasPrefix(a, "--offers=") {
			return command
		}
	}
	out := make([]string, 0, len(command)+2)
	out = append(out, command[:at]...)
	out = append(out, "--offers", offers)
	return append(out, command[at:]...)
}

// LaunchIDValid reports whether id is a launch id the local, ssh and kubernetes providers
// accept: 1 to max ASCII letters and digits (max is each provider's: what it names with the
// id, a file, a remote path, a Pod and its label, must hold it). They refuse any other with
// "use letters and digits only".
func LaunchIDValid(id string, max int) bool {
	if id == "" || len(id) > max {
		return false
	}
	for _, c := range id {
		if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z') {
			return false
		}
	}
	return true
}
