package lakeshore

import (
	"fmt"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// Defaults of the option structs. A nil options pointer, or a zero field, means these.
const (
	// FromStart is the cursor that reads a journal from its first frame: pass it as since to
	// Queue.Stream, Topic.Stream or Topic.Listen. Cursors are frame seqs, and seq 0 is a real
	// frame, so "from the start" is -1, not 0. To resume, pass the Seq of the last frame seen.
	FromStart int64 = -1

	// ResultTimeoutDefault is how long Result and Call wait when neither opts.Timeout nor
	// ctx's deadline says otherwise.
	ResultTimeoutDefault = 30 * time.Second
	// StreamTimeoutDefault is how long Queue.Stream waits in silence before ErrTimeout.
	StreamTimeoutDefault = 30 * time.Second
	// TopicTimeoutDefault is how long Topic.Listen and Topic.Stream wait in silence.
	TopicTimeoutDefault = 5 * time.Second
	// TemperatureDefault is the boltzmann temperature of a queue handle that names none.
	TemperatureDefault = 1.0
	// LeaseTTLDefault is the lease of a claim that names none (30 s).
	LeaseTTLDefault = plane.LeaseTTLDefault
	// MaxAttemptsDefault bounds the claims of an invocation submitted without MaxAttempts.
	MaxAttemptsDefault = plane.MaxAttemptsDefault
	// MaxAttemptsMax is the largest MaxAttempts a submit or schedule takes (10,000); a
	// larger one is refused as ErrInvalid.
	MaxAttemptsMax = plane.MaxAttemptsMax
	// NamespaceDefault is the namespace when neither Config, QueueOptions nor
	// $LAKESHORE_NAMESPACE names one.
	NamespaceDefault = plane.NamespaceDefault
	// MaxValueBytes is the largest encoded payload, result or frame value (16 MiB).
	MaxValueBytes = plane.MaxValueBytes
)

// Kind is the claim order a queue handle asks for (an alias of plane.Kind). It is chosen
// per handle at Dispatch.Queue, not stored on the queue: submits only attach a priority.
type Kind = plane.Kind

// The claim orders.
const (
	// KindFIFO claims the oldest submit first.
	KindFIFO = plane.KindFIFO
	// KindFILO claims the newest submit first.
	KindFILO = plane.KindFILO
	// KindPriority claims the highest priority first, ties oldest first.
	KindPriority = plane.KindPriority
	// KindBoltzmann draws a job of priority p with probability ∝ exp(p/T) (T is
	// QueueOptions.Temperature), oldest first within a priority level: T → 0 behaves like
	// KindPriority, large T like a uniform draw.
	KindBoltzmann = plane.KindBoltzmann
)

// ParseKind returns the Kind named s ("" means fifo). Errors: *InvalidError naming the kinds.
func ParseKind(s string) (Kind, error) { return plane.ParseKind(s) }

// ParseState returns the State named s. Errors: *InvalidError naming the states.
func ParseState(s string) (State, error) { return plane.ParseState(s) }

// QueueOptions configure a queue handle (Dispatch.Queue). A nil *QueueOptions means all
// defaults. The kind and temperature are the handle's claim order, not stored on the queue:
// two handles on one queue may claim in different orders.
type QueueOptions struct {
	// Kind is the claim order of Claim, ClaimMany and Working: KindFIFO, KindFILO,
	// KindPriority or KindBoltzmann. Defaults to KindFIFO.
	Kind Kind

	// LeaseTTL is how long a claim's lease lives without a heartbeat; ClaimOptions.LeaseTTL
	// overrides it per claim. Defaults to LeaseTTLDefault (30 s).
	LeaseTTL time.Duration

	// Namespace scopes the queue, its keys and its topics. Defaults to Config.Namespace.
	Namespace string

	// Temperature is the boltzmann temperature T: a job of priority p is drawn with
	// probability ∝ exp(p/T). It must be finite and > 0. Used by KindBoltzmann only.
	// Defaults to TemperatureDefault (1.0).
	Temperature float64
}

func (o *QueueOptions) withDefaults(namespace string) QueueOptions {
	var out QueueOptions
	if o != nil {
		out = *o
	}
	if out.Kind == "" {
		out.Kind = KindFIFO
	}
	if out.Namespace == "" {
		out.Namespace = namespace
	}
	if out.Temperature == 0 {
		out.Temperature = TemperatureDefault
	}
	if out.LeaseTTL == 0 {
		out.LeaseTTL = LeaseTTLDefault
	}
	return out
}

func (o *QueueOptions) validate() error {
	if err := plane.ValidateNamespace(o.Namespace); err != nil {
		return err
	}
	if _, err := plane.ParseKind(string(o.Kind)); err != nil {
		return err
	}
	if err := plane.ValidateTemperature(o.Temperature); err != nil {
		return err
	}
	if o.LeaseTTL < 0 {
		return plane.Invalid("lease TTL", o.LeaseTTL, "use a duration > 0, or 0 for the default (30s)")
	}
	return nil
}

// SubmitOptions are the envelope of one submit. A nil *SubmitOptions means all defaults.
type SubmitOptions struct {
	// AttemptTimeout bounds one running attempt: an attempt running longer is treated as
	// failed (retried while attempts remain, else the invocation ends as timeout).
	// Defaults to 0: no bound beyond the lease.
	AttemptTimeout time.Duration

	// Deadline ends the invocation as timeout, without running it, if it is still queued
	// then. Defaults to the zero time: none.
	Deadline time.Time

	// ID is a client-chosen invocation id (a ULID, e.g. from plane.IDGenerator) that makes
	// a submit safe to retry after an error: a second submit with the same ID returns it and
	// enqueues nothing. Defaults to "": the plane makes the id.
	ID string

	// Key is the idempotency key, unique per (namespace, queue): 1–512 bytes of UTF-8
	// without NUL. Submitting an existing key returns the existing id, whatever its state,
	// until that invocation is trimmed. Defaults to "": none.
	Key string

	// MaxAttempts bounds the claims of the invocation (1 means no retry), at most
	// MaxAttemptsMax (10,000; more is ErrInvalid). Defaults to MaxAttemptsDefault (3).
	MaxAttempts int

	// NotBefore delays the invocation: it is queued at once (Count, List and Get see it)
	// but not claimable before this time, as measured by the plane's clock. Defaults to the
	// zero time: claimable at once.
	NotBefore time.Time

	// Delay delays the invocation by this long from the plane's clock at submit; with
	// NotBefore too, the later of the two wins. Must not be negative. Defaults to 0: no
	// delay.
	Delay time.Duration

	// UniqueFor is the dedup window of Key (docs/semantics.md, "Dedup windows"): within it
	// a second submit of the key returns the first id (the first wins, "unique_for" or
	// throttle); once it has passed, the submit enqueues a new invocation that takes the key
	// over. Needs Key; at most 366 days. Defaults to 0: the key holds until its invocation
	// is trimmed.
	UniqueFor time.Duration

	// Debounce makes a submit of Key wait for quiet (docs/semantics.md, "Dedup windows"):
	// the invocation is due Debounce after the submit, and a later debounced submit of the
	// key while it still waits replaces its payload and metadata and pushes it back (the
	// last wins; Submit returns its id). Needs Key; not with UniqueFor; at most 366 days.
	// Defaults to 0: no debounce.
	Debounce time.Duration
	// ConcurrencyKey groups the invocation with others of its queue (a tenant, a user, a
	// model) for the queue's concurrency limits and fair share (docs/semantics.md,
	// "Concurrency keys and fair share"; Admission's ConcurrencyLimit, ConcurrencyLimits,
	// KeyWeights): at most the key's limit of its invocations run at once, and claims
	// rotate across keys. 1–256 bytes of UTF-8 without NUL. Defaults to "": none (never
	// limited).
	ConcurrencyKey string

	// Requirement is what the invocation needs from the worker that runs it
	// (docs/semantics.md, "Placement"): only a claim whose offers satisfy it takes it
	// (WorkerOptions.Offers, ClaimOptions.Offers); Invocation.Requirement and Shape show it
	// while it waits. Not with ConcurrencyKey. Defaults to nil: the default shape, which
	// every claim takes.
	Requirement *Requirement

	// Mode names a compute mode of the project file (lakeshore.yaml, found from the working
	// directory up, or $LAKESHORE_CONFIG; docs/fabric.md, "Submitting a mode"). The submit
	// then carries the mode's run declaration and host key in Metadata (over the caller's
	// keys of the same name), its time limit as AttemptTimeout and its resources as
	// Requirement (each unless set here); a mode that ships code adds the code's digest and
	// git context, its archive uploaded once per digest to the server's code store — which
	// needs a dispatch on an http(s):// target. The project file is read, and each mode's
	// code snapshotted, once per SubmitMany batch. Errors: *fabric.ConfigError (no file, no
	// such mode), *fabric.CodeError (the code cannot be shipped), *InvalidError (a mode
	// that ships code on a plane that keeps none), the upload's. Defaults to "": none.
	Mode string

	// Function names the Python function a run of a code-shipping Mode imports from the
	// shipped code (fabric.MetaFunction, docs/fabric.md): "module:qualname", or
	// "directory/module:qualname" for a module imported from a directory of the code (the
	// src layout). A Python worker serving the queue by name then runs it with the
	// payload's fields (a JSON object) as keyword arguments. Needs a Mode that ships code,
	// and the module must be a file of that code (module/path.py or
	// module/path/__init__.py, below the directory): checked before anything is uploaded,
	// as the worker checks it again. Errors: *InvalidError naming function. Defaults to
	// "": the worker's own function for the queue (its @udf).
	Function string

	// Metadata are free-form string headers carried with the invocation (Job.Metadata,
	// Invocation.Metadata). Defaults to none.
	Metadata map[string]string

	// Priority orders KindPriority and KindBoltzmann claims, higher first; finite.
	// Defaults to 0.
	Priority float64
}

// Submission is one invocation of a Queue.SubmitMany batch: a payload and its envelope.
type Submission struct {
	// Payload is the value to encode with the wire codec.
	Payload any
	SubmitOptions
}

// ResultOptions configure Queue.Result and Queue.ResultValue. A nil *ResultOptions means all
// defaults.
type ResultOptions struct {
	// Timeout bounds the wait for the invocation to become terminal; ErrTimeout when it
	// passes first. Negative waits until ctx ends. Defaults to ctx's deadline when ctx has
	// one, else ResultTimeoutDefault (30 s).
	Timeout time.Duration
}

func (o *ResultOptions) timeout() time.Duration {
	if o == nil {
		return 0
	}
	return o.Timeout
}

// CallOptions configure Queue.Call and Queue.CallValue: the submit's envelope and the wait.
// A nil *CallOptions means all defaults.
type CallOptions struct {
	SubmitOptions

	// Timeout bounds the wait for the result, as ResultOptions.Timeout. Defaults to ctx's
	// deadline when ctx has one, else ResultTimeoutDefault (30 s).
	Timeout time.Duration
}

// StreamOptions configure Queue.Stream and Topic.Stream. A nil *StreamOptions means all
// defaults.
type StreamOptions struct {
	// Timeout is how long the stream may stay silent (no new frame) before it yields
	// ErrTimeout; each frame restarts it. Negative waits until ctx ends. Defaults to
	// StreamTimeoutDefault (30 s) for Queue.Stream and TopicTimeoutDefault (5 s) for
	// Topic.Stream.
	Timeout time.Duration
}

func (o *StreamOptions) timeout(def time.Duration) time.Duration {
	if o == nil || o.Timeout == 0 {
		return def
	}
	return o.Timeout
}

// ListenOptions configure Topic.Listen. A nil *ListenOptions means all defaults.
type ListenOptions struct {
	// Timeout is how long Listen waits for a value; it then returns ok=false. Negative
	// waits until ctx ends. Defaults to TopicTimeoutDefault (5 s).
	Timeout time.Duration
}

// ClaimOptions configure Queue.Claim and Queue.ClaimMany. A nil *ClaimOptions means all
// defaults.
type ClaimOptions struct {
	// LeaseTTL is how long the lease lives without a heartbeat. Defaults to the queue
	// handle's QueueOptions.LeaseTTL (30 s unless set).
	LeaseTTL time.Duration

	// Wait is how long to wait for a job when none is claimable; the claim returns nothing
	// (not an error) when none came. Negative waits until ctx ends. Defaults to 0: return at
	// once.
	Wait time.Duration

	// Offers is what the claimer offers (docs/semantics.md, "Placement"): the claim takes
	// only jobs whose SubmitOptions.Requirement it satisfies. Defaults to nil: only jobs
	// without a requirement.
	Offers *Offers

	// WarmHostKeys are host keys the claimer is warm for: their jobs go first, within
	// plane.WarmHeadStart of the order (docs/semantics.md, "Placement"). At most 16.
	// Defaults to nil: no preference.
	WarmHostKeys []string
}

func (o *ClaimOptions) validate() error {
	if o != nil && o.LeaseTTL < 0 {
		return plane.Invalid("lease TTL", o.LeaseTTL, "use a duration > 0, or 0 for the queue's default")
	}
	return nil
}

// WorkingOptions configure Queue.Working. A nil *WorkingOptions means all defaults.
type WorkingOptions struct {
	// ClaimOptions configure the claim: how long to wait for a job and its lease.
	ClaimOptions

	// HeartbeatInterval is how often the lease is extended while the handler runs; it must
	// be shorter than the lease. Negative disables heartbeats (the handler must finish
	// within the lease). Defaults to a third of the lease.
	HeartbeatInterval time.Duration
}

// validate checks o against lease, the lease its claim will get. Errors: *InvalidError.
func (o *WorkingOptions) validate(lease time.Duration) error {
	if err := o.ClaimOptions.validate(); err != nil {
		return err
	}
	if o.LeaseTTL > 0 {
		lease = o.LeaseTTL
	}
	if o.HeartbeatInterval > 0 && o.HeartbeatInterval >= lease {
		return &InvalidError{Field: "heartbeat interval", Value: o.HeartbeatInterval,
			Rule: fmt.Sprintf("use a duration shorter than the lease (%s), 0 for a third of it, or < 0 for none", lease)}
	}
	return nil
}
