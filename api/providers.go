package api

//go:generate go run github.com/tinylib/msgp -file providers.go -o providers_gen.go -io=false -tests=false -unexported=false

//msgp:limit arrays:1000000 maps:100000

import (
	"github.com/lakeshore-dev/lakeshore/plane"
)

// Provider is plane.ProviderRef on the wire: the provider attached to a queue and its launch
// policy (durations in seconds).
type Provider struct {
	// Name is local, slurm, exec:PROGRAM, ssh:NAME or kubernetes:NAME.
	Name   string       `json:"name" msg:"name"`
	Policy LaunchPolicy `json:"policy" msg:"policy"`
}

// LaunchPolicy is plane.LaunchPolicy on the wire; zero members take the plane's defaults
// (max_workers 1, jobs_per_worker 1, cooldown 5 s, idle_timeout 60 s, register_timeout 120 s).
type LaunchPolicy struct {
	MinWorkers      int               `json:"min_workers,omitzero" msg:"min_workers,omitempty"`
	MaxWorkers      int               `json:"max_workers,omitzero" msg:"max_workers,omitempty"`
	JobsPerWorker   int               `json:"jobs_per_worker,omitzero" msg:"jobs_per_worker,omitempty"`
	ScaleUpStep     int               `json:"scale_up_step,omitzero" msg:"scale_up_step,omitempty"`
	Buffer          int               `json:"buffer,omitzero" msg:"buffer,omitempty"`
	Cooldown        float64           `json:"cooldown,omitzero" msg:"cooldown,omitempty"`
	IdleTimeout     float64           `json:"idle_timeout,omitzero" msg:"idle_timeout,omitempty"`
	RegisterTimeout float64           `json:"register_timeout,omitzero" msg:"register_timeout,omitempty"`
	Command         []string          `json:"command" msg:"command"`
	Env             map[string]string `json:"env,omitzero" msg:"env,omitempty"`
	Resources       Resources         `json:"resources,omitzero" msg:"resources,omitempty"`
}

// Resources is plane.Resources on the wire (time_limit in seconds, memory_mb in MiB).
type Resources struct {
	CPUs      int     `json:"cpus,omitzero" msg:"cpus,omitempty"`
	GPUs      int     `json:"gpus,omitzero" msg:"gpus,omitempty"`
	MemoryMB  int64   `json:"memory_mb,omitzero" msg:"memory_mb,omitempty"`
	TimeLimit float64 `json:"time_limit,omitzero" msg:"time_limit,omitempty"`
	Partition string  `json:"partition,omitzero" msg:"partition,omitempty"`
}

// ProviderResponse answers the provider routes of a queue; Provider is null when the queue
// has none.
type ProviderResponse struct {
	Provider *Provider `json:"provider" msg:"provider"`
}

// QueueProvider is plane.QueueProvider on the wire.
type QueueProvider struct {
	Namespace string   `json:"namespace" msg:"namespace"`
	Queue     string   `json:"queue" msg:"queue"`
	Provider  Provider `json:"provider" msg:"provider"`
}

// QueueProvidersResponse answers GET /v1/providers, ordered by namespace then queue.
type QueueProvidersResponse struct {
	Queues []QueueProvider `json:"queues" msg:"queues"`
}

// LeaseRequest is the body of POST /v1/namespaces/{namespace}/leases/acquire (TTL in
// seconds, > 0) and of …/leases/release (TTL unused).
type LeaseRequest struct {
	// Name is what the lease guards, e.g. provider/QUEUE.
	Name string `json:"name" msg:"name"`
	// Holder identifies the process taking it (a ULID).
	Holder string  `json:"holder" msg:"holder"`
	TTL    float64 `json:"ttl,omitzero" msg:"ttl,omitempty"`
}

// LeaseResponse answers POST …/leases/acquire: whether the holder has the lease now.
type LeaseResponse struct {
	Acquired bool `json:"acquired" msg:"acquired"`
}

// NewProvider converts r to its wire form (nil for nil).
func NewProvider(r *plane.ProviderRef) *Provider {
	if r == nil {
		return nil
	}
	p := r.Policy
	return &Provider{Name: r.Name, Policy: LaunchPolicy{
		MinWorkers: p.MinWorkers, MaxWorkers: p.MaxWorkers, JobsPerWorker: p.JobsPerWorker, ScaleUpStep: p.ScaleUpStep, Buffer: p.Buffer,
		Cooldown: Seconds(p.Cooldown), IdleTimeout: Seconds(p.IdleTimeout), RegisterTimeout: Seconds(p.RegisterTimeout),
		Command: p.Command, Env: p.Env,
		Resources: Resources{CPUs: p.Resources.CPUs, GPUs: p.Resources.GPUs, MemoryMB: p.Resources.MemoryMB,
			TimeLimit: Seconds(p.Resources.TimeLimit), Partition: p.Resources.Partition},
	}}
}

// Plane converts p back to a plane.ProviderRef (nil for nil). Negative or NaN durations
// convert to negative ones, which ProviderRef.Validate refuses.
func (p *Provider) Plane() *plane.ProviderRef {
	if p == nil {
		return nil
	}
	l := p.Policy
	return &plane.ProviderRef{Name: p.Name, Policy: plane.LaunchPolicy{
		MinWorkers: l.MinWorkers, MaxWorkers: l.MaxWorkers, JobsPerWorker: l.JobsPerWorker, ScaleUpStep: l.ScaleUpStep, Buffer: l.Buffer,
		Cooldown: Duration(l.Cooldown), IdleTimeout: Duration(l.IdleTimeout), RegisterTimeout: Duration(l.RegisterTimeout),
		Command: l.Command, Env: l.Env,
		Resources: plane.Resources{CPUs: l.Resources.CPUs, GPUs: l.Resources.GPUs, MemoryMB: l.Resources.MemoryMB,
			TimeLimit: Duration(l.Resources.TimeLimit), Partition: l.Resources.Partition},
	}}
}
