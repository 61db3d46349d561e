package api

//go:generate go run github.com/tinylib/msgp -file schedules.go -o schedules_gen.go -io=false -tests=false -unexported=false

//msgp:newtime
//msgp:limit arrays:1000000 maps:100000

import (
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// Schedule is plane.Schedule on the wire: the body of PUT
// /v1/namespaces/{namespace}/schedules/{name} (namespace and name from the path) and the
// answer of the schedule routes. Durations are seconds. NextFire, LastFire, LastID,
// CreatedAt, UpdatedAt and the skip record are the plane's (ignored in a request).
type Schedule struct {
	Namespace string `json:"namespace,omitzero" msg:"namespace,omitempty"`
	Name      string `json:"name,omitzero" msg:"name,omitempty"`
	// Queue receives the fires. Required.
	Queue string `json:"queue" msg:"queue"`
	// Cron is a five-field cron expression or @hourly/@daily/@weekly/@monthly/@yearly;
	// Every an interval in seconds (≥ 1). Exactly one.
	Cron     string  `json:"cron,omitzero" msg:"cron,omitempty"`
	Every    float64 `json:"every,omitzero" msg:"every,omitempty"`
	TimeZone string  `json:"time_zone,omitzero" msg:"time_zone,omitempty"`
	// Payload is every fire's payload (a JSON value in JSON bodies).
	Payload        Value             `json:"payload,omitzero" msg:"payload,omitzero"`
	Priority       float64           `json:"priority,omitzero" msg:"priority,omitempty"`
	MaxAttempts    int               `json:"max_attempts,omitzero" msg:"max_attempts,omitempty"`
	AttemptTimeout float64           `json:"attempt_timeout,omitzero" msg:"attempt_timeout,omitempty"`
	Metadata       map[string]string `json:"metadata,omitzero" msg:"metadata,omitempty"`
	// ConcurrencyKey is every fire's concurrency key ("" or absent: none;
	// plane.Schedule.ConcurrencyKey).
	ConcurrencyKey string `json:"concurrency_key,omitzero" msg:"concurrency_key,omitempty"`
	// CatchUp is once (default), skip or all.
	CatchUp string `json:"catch_up,omitzero" msg:"catch_up,omitempty"`
	Paused  bool   `json:"paused,omitzero" msg:"paused,omitempty"`
	// KeepState (a request's, never answered): when the schedule exists, keep its paused
	// flag, skip record and — with the same rule — its next fire (plane.Schedule.KeepState).
	KeepState bool `json:"keep_state,omitzero" msg:"keep_state,omitempty"`

	NextFire  time.Time `json:"next_fire,omitzero" msg:"next_fire,omitzero"`
	LastFire  time.Time `json:"last_fire,omitzero" msg:"last_fire,omitzero"`
	LastID    string    `json:"last_id,omitzero" msg:"last_id,omitempty"`
	CreatedAt time.Time `json:"created_at,omitzero" msg:"created_at,omitzero"`
	UpdatedAt time.Time `json:"updated_at,omitzero" msg:"updated_at,omitzero"`
	// Skipped counts the ticks skipped because the queue was at its max depth since the
	// schedule was last set; LastSkip is the last one and LastSkipReason why. The plane's.
	Skipped        int64     `json:"skipped,omitzero" msg:"skipped,omitempty"`
	LastSkip       time.Time `json:"last_skip,omitzero" msg:"last_skip,omitzero"`
	LastSkipReason string    `json:"last_skip_reason,omitzero" msg:"last_skip_reason,omitempty"`
	// Changed is in the answers of …/pause and …/resume only: whether the call paused (or
	// resumed) the schedule, false when it already was (ignored in a request).
	Changed *bool `json:"changed,omitzero" msg:"changed,omitempty"`
}

// SchedulesResponse answers GET /v1/schedules: a page ordered by namespace then name, and
// Next, the cursor to pass as after= for the following page ("" or absent on the last).
type SchedulesResponse struct {
	Schedules []Schedule `json:"schedules" msg:"schedules"`
	Next      string     `json:"next,omitzero" msg:"next,omitempty"`
}

// NewSchedule converts s to its wire form.
func NewSchedule(s *plane.Schedule) Schedule {
	return Schedule{Namespace: s.Namespace, Name: s.Name, Queue: s.Queue, Cron: s.Cron, Every: Seconds(s.Every),
		TimeZone: s.TimeZone, Payload: Value{Wire: s.Payload}, Priority: s.Priority, MaxAttempts: s.MaxAttempts,
		AttemptTimeout: Seconds(s.AttemptTimeout), Metadata: s.Metadata, ConcurrencyKey: s.ConcurrencyKey, CatchUp: string(s.CatchUp), Paused: s.Paused,
		KeepState: s.KeepState, NextFire: s.NextFire, LastFire: s.LastFire, LastID: s.LastID, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt,
		Skipped: s.Skipped, LastSkip: s.LastSkip, LastSkipReason: s.LastSkipReason}
}

// Plane converts s back to a plane.Schedule (the plane's fields included).
func (s *Schedule) Plane() *plane.Schedule {
	return &plane.Schedule{Namespace: s.Namespace, Name: s.Name, Queue: s.Queue, Cron: s.Cron, Every: Duration(s.Every),
		TimeZone: s.TimeZone, Payload: s.Payload.Wire, Priority: s.Priority, MaxAttempts: s.MaxAttempts,
		AttemptTimeout: Duration(s.AttemptTimeout), Metadata: s.Metadata, ConcurrencyKey: s.ConcurrencyKey, CatchUp: plane.CatchUp(s.CatchUp), Paused: s.Paused,
		KeepState: s.KeepState, NextFire: s.NextFire, LastFire: s.LastFire, LastID: s.LastID, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt,
		Skipped: s.Skipped, LastSkip: s.LastSkip, LastSkipReason: s.LastSkipReason}
}
