package api

//go:generate go run github.com/tinylib/msgp -file demand.go -o demand_gen.go -io=false -tests=false -unexported=false

//msgp:limit arrays:1000000 maps:100000

import (
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// ShapeDemand is plane.ShapeDemand on the wire: the demand of one shape of one queue, what
// an autoscaler (a KEDA metrics-api scaler, the provider supervisor) follows to start
// workers that offer it (docs/providers.md, "Launching by shape").
type ShapeDemand struct {
	Namespace string `json:"namespace" msg:"namespace"`
	Queue     string `json:"queue" msg:"queue"`
	// Shape is the requirement's shape key; "" for the default shape (jobs without a
	// requirement).
	Shape string `json:"shape" msg:"shape"`
	// Requirement is what a worker must offer for the shape; absent for the default shape.
	Requirement *Requirement `json:"requirement,omitzero" msg:"requirement,omitempty"`
	// Queued counts the shape's queued invocations (delayed ones included).
	Queued int64 `json:"queued" msg:"queued"`
	// Running counts the shape's running invocations.
	Running int64 `json:"running" msg:"running"`
	// OldestReady is how long, in seconds, the shape's first claimable job by id has been
	// claimable; 0 when none is.
	OldestReady float64 `json:"oldest_ready" msg:"oldest_ready"`
	// CapableWorkers counts the queue's live registered workers (seen within
	// plane.WorkerSeenWithinDefault) whose offers satisfy the shape's requirement
	// (plane.CapableWorkers); for the default shape, every live worker of the queue. The
	// server fills it from its worker registry; absent when the plane keeps none. Queued
	// jobs with 0 have no capable worker: they wait until one registers or a provider
	// launches one (docs/semantics.md, "Placement").
	CapableWorkers *int64 `json:"capable_workers,omitempty" msg:"capable_workers,omitempty"`
	// Paused is true while the queue is paused: no worker claims its jobs until it
	// resumes (queued still counts them); absent otherwise.
	Paused bool `json:"paused,omitzero" msg:"paused,omitempty"`
}

// DemandResponse answers GET /v1/demand: the demand of every (queue, shape) the token may
// see, ordered by namespace, queue, then shape (the default shape first).
type DemandResponse struct {
	Demand []ShapeDemand `json:"demand" msg:"demand"`
}

// NewShapeDemand converts d to its wire form.
func NewShapeDemand(d *plane.ShapeDemand) ShapeDemand {
	return ShapeDemand{Namespace: d.Namespace, Queue: d.Queue, Shape: d.Shape, Requirement: NewRequirement(d.Requirement),
		Queued: d.Queued, Running: d.Running, OldestReady: d.OldestReady.Seconds(), CapableWorkers: d.CapableWorkers, Paused: d.Paused}
}

// Plane converts d back to plane.ShapeDemand.
func (d *ShapeDemand) Plane() plane.ShapeDemand {
	return plane.ShapeDemand{Namespace: d.Namespace, Queue: d.Queue, Shape: d.Shape, Requirement: d.Requirement.Plane(),
		Queued: d.Queued, Running: d.Running, OldestReady: time.Duration(d.OldestReady * float64(time.Second)),
		CapableWorkers: d.CapableWorkers, Paused: d.Paused}
}
