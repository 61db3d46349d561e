package fabric

import (
	"maps"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// Requirement returns r as the placement requirement of a run (plane.Requirement, the
// same fields and units; docs/semantics.md, "Placement"): only a worker whose offers
// satisfy it takes the run. nil when r asks for nothing (the default shape, which every
// worker takes).
func (r Resources) Requirement() *plane.Requirement {
	if r.MilliCPUs == 0 && r.MemoryBytes == 0 && r.GPUs == 0 && r.GPUType == "" && len(r.Labels) == 0 {
		return nil
	}
	return &plane.Requirement{
		MilliCPUs: r.MilliCPUs, MemoryBytes: r.MemoryBytes, GPUs: r.GPUs, GPUType: r.GPUType,
		Labels: maps.Clone(r.Labels),
	}
}
