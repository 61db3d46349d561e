package plane

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestUnplaceableWork(t *testing.T) {
	gpu := &Requirement{GPUs: 1}
	a100 := &Requirement{GPUs: 2, GPUType: "a100"}
	cpu := &Requirement{MilliCPUs: 2000}
	demand := []ShapeDemand{
		{Namespace: "default", Queue: "train", Shape: "", Queued: 9},
		{Namespace: "default", Queue: "train", Shape: gpu.Shape(), Requirement: gpu, Queued: 2},
		{Namespace: "default", Queue: "train", Shape: a100.Shape(), Requirement: a100, Queued: 5},
		{Namespace: "default", Queue: "train", Shape: cpu.Shape(), Requirement: cpu, Queued: 4},
		{Namespace: "default", Queue: "eval", Shape: gpu.Shape(), Requirement: gpu, Queued: 0, Running: 1},
		{Namespace: "other", Queue: "train", Shape: gpu.Shape(), Requirement: gpu, Queued: 1},
	}
	workers := []WorkerInfo{
		{Namespace: "default", Queues: []string{"train"}},                                           // no offers
		{Namespace: "default", Queues: []string{"train"}, Offers: &Offers{MilliCPUs: 8000}},         // cpu only
		{Namespace: "default", Queues: []string{"eval"}, Offers: &Offers{GPUs: 2, GPUType: "a100"}}, // another queue
	}
	got := UnplaceableWork(demand, workers)
	require.Equal(t, []Unplaceable{
		{Namespace: "default", Queue: "train", Queued: 7, Example: a100},
		{Namespace: "other", Queue: "train", Queued: 1, Example: gpu},
	}, got, "the default shape and shapes a live worker of the queue offers are placeable; nothing queued is nothing to say")
	require.Empty(t, UnplaceableWork(demand[:1], nil), "jobs without a requirement: no note, even with no worker")

	// A row a server counted (GET /v1/demand's capable_workers, over its whole registry)
	// is decided by that count, not by the workers the caller's token may list.
	one, zero := int64(1), int64(0)
	counted := []ShapeDemand{
		{Namespace: "default", Queue: "train", Shape: gpu.Shape(), Requirement: gpu, Queued: 2, CapableWorkers: &one},
		{Namespace: "default", Queue: "eval", Shape: gpu.Shape(), Requirement: gpu, Queued: 3, CapableWorkers: &zero},
	}
	require.Equal(t, []Unplaceable{{Namespace: "default", Queue: "eval", Queued: 3, Example: gpu}},
		UnplaceableWork(counted, workers[2:]), "train: a worker the caller does not see places it; eval: the server counted none")
}
