package plane

import (
	"slices"
	"strconv"
	"strings"
	"time"
)

// ShapeDemand is the work waiting for and held by the workers of one shape of one queue
// (Driver.DemandList; docs/providers.md, "Launching by shape"): what a supervisor or an
// external autoscaler follows to start workers that offer the shape.
type ShapeDemand struct {
	// Namespace and Queue are the queue.
	Namespace string
	Queue     string
	// Shape is the requirement's shape key (Requirement.Shape); "" for the default shape,
	// the jobs without a requirement that every worker can run.
	Shape string
	// Requirement is what a worker must offer to take the shape's jobs; nil for the
	// default shape.
	Requirement *Requirement
	// Queued is the shape's queued invocations, delayed ones included (as QueueStats
	// counts them).
	Queued int64
	// Running is the shape's running invocations.
	Running int64
	// OldestReady is how long the first claimable job of the shape in fifo order (the
	// oldest by id) has been claimable; 0 when none is claimable now. For the default
	// shape it reads the jobs without a concurrency key.
	OldestReady time.Duration
	// CapableWorkers, when not nil, counts the live registered workers of the queue whose
	// offers satisfy Requirement, as a server counted them over its whole registry (GET
	// /v1/demand's capable_workers, read by an HTTP plane): a queue-scoped token does not
	// see a worker that also serves a queue it does not cover, yet that worker places
	// the shape's jobs. Nil from a plane that does not count (the count is then made
	// from Driver.WorkerList: UnplaceableWork).
	CapableWorkers *int64
	// Paused is true while the queue is paused (Driver.QueuePause): no worker claims its
	// jobs until it resumes, so they ask for no worker. Queued, Running and OldestReady
	// still count them as for a running queue; the provider supervisor starts no worker
	// for them (provider.Decide).
	Paused bool
}

// SortDemand orders d by namespace, queue, then shape (the default shape, "", first): the
// order of Driver.DemandList.
func SortDemand(d []ShapeDemand) {
	slices.SortFunc(d, func(a, b ShapeDemand) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		if c := strings.Compare(a.Queue, b.Queue); c != 0 {
			return c
		}
		return strings.Compare(a.Shape, b.Shape)
	})
}

// FormatOffers writes o as ParseOffers reads it (the CLI's `--offers` form): cpus in
// millicpus ("8000m"), memory in bytes, gpus, gpu_type, then label.KEY=VALUE by key; ""
// for no offers. ok is false when a label value holds a ',' or starts or ends with white
// space, which the comma-separated form cannot carry (ParseOffers would read other offers).
func FormatOffers(o *Offers) (s string, ok bool) {
	if o.IsZero() {
		return "", true
	}
	var parts []string
	if o.MilliCPUs > 0 {
		parts = append(parts, "cpus="+strconv.FormatInt(o.MilliCPUs, 10)+"m")
	}
	if o.MemoryBytes > 0 {
		parts = append(parts, "memory="+strconv.FormatInt(o.MemoryBytes, 10))
	}
	if o.GPUs > 0 {
		parts = append(parts, "gpus="+strconv.FormatInt(o.GPUs, 10))
	}
	if o.GPUType != "" {
		parts = append(parts, "gpu_type="+o.GPUType)
	}
	ok = true
	for _, k := range slices.Sorted(mapKeys(o.Labels)) {
		v := o.Labels[k]
		if strings.Contains(v, ",") || strings.TrimSpace(v) != v {
			ok = false
		}
		parts = append(parts, "label."+k+"="+v)
	}
	return strings.Join(parts, ","), ok
}
