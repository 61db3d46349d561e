package lakeshore

import (
	"context"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/wire"
)

type (
	// Schedule is a durable periodic submit as the plane stores it: its queue, rule (cron
	// expression in a time zone, or interval), payload and options, catch-up policy, whether
	// it is paused, and its last and next fire. An alias of plane.Schedule, whose doc says
	// how fires happen (once per tick, by the plane's maintenance, keyed by ScheduleKey).
	Schedule = plane.Schedule
	// CatchUp is what a schedule does with the ticks it missed while no maintenance ran (an
	// alias of plane.CatchUp).
	CatchUp = plane.CatchUp
)

// The catch-up policies.
const (
	// CatchUpOnce fires the latest missed tick once and skips the rest (the default).
	CatchUpOnce = plane.CatchUpOnce
	// CatchUpSkip fires only ticks at most plane.ScheduleGrace (1 min) old.
	CatchUpSkip = plane.CatchUpSkip
	// CatchUpAll fires every missed tick, oldest first.
	CatchUpAll = plane.CatchUpAll
)

// ScheduleKey is the idempotency key of the fire of schedule name at tick (an alias of
// plane.ScheduleKey): a worker can tell which tick it runs from Job.Key or the metadata
// "schedule" and "schedule_tick".
func ScheduleKey(name string, tick time.Time) string { return plane.ScheduleKey(name, tick) }

// ScheduleOptions are the rule and options of Queue.Schedule. Exactly one of Cron and Every
// is required.
type ScheduleOptions struct {
	// Cron is a five-field cron expression ("0 3 * * *": minute, hour, day of month, month,
	// day of week) or @hourly, @daily, @weekly, @monthly, @yearly.
	Cron string
	// Every is an interval (at least 1s): ticks at its multiples since the Unix epoch.
	Every time.Duration
	// TimeZone is the IANA zone Cron is read in ("Europe/Paris"). Defaults to UTC.
	TimeZone string
	// CatchUp is the missed-tick policy. Defaults to CatchUpOnce.
	CatchUp CatchUp
	// Paused stores the schedule paused: it fires nothing until resumed.
	Paused bool
	// KeepState declares the schedule (as a program does at each start): when it exists,
	// its paused flag, skip record and — with the same rule — next fire are kept, and Paused
	// applies only when the schedule is created (plane.Schedule.KeepState).
	KeepState bool
	// Priority, MaxAttempts, AttemptTimeout, Metadata and ConcurrencyKey are those of every
	// fire, as in SubmitOptions (the plane adds metadata "schedule" and "schedule_tick"): with
	// ConcurrencyKey (a tenant, say) the queue's per-key limits, weights and rates apply to
	// the fires (plane.Schedule.ConcurrencyKey).
	Priority       float64
	MaxAttempts    int
	AttemptTimeout time.Duration
	Metadata       map[string]string
	ConcurrencyKey string
}

// Schedule stores the durable schedule name in the queue's namespace, replacing any of that
// name: at each tick of opts' rule the plane submits payload to this queue, once, whatever
// the number of processes, restarts or (PostgreSQL) leader changes. The first fire is the
// first tick after now. Returns the schedule as stored (NextFire set). Errors:
// *InvalidError naming the bad field (a cron expression, time zone, interval, name or
// option) and what is allowed; an encoding error for payload; nothing is stored.
func (q *Queue) Schedule(ctx context.Context, name string, payload any, opts *ScheduleOptions) (*Schedule, error) {
	var o ScheduleOptions
	if opts != nil {
		o = *opts
	}
	b, err := wire.Marshal(payload)
	if err != nil {
		return nil, encodeError("payload", payload, err)
	}
	return q.d.drv.ScheduleSet(ctx, &plane.Schedule{Namespace: q.opts.Namespace, Name: name, Queue: q.name,
		Cron: o.Cron, Every: o.Every, TimeZone: o.TimeZone, Payload: b, Priority: o.Priority,
		MaxAttempts: o.MaxAttempts, AttemptTimeout: o.AttemptTimeout, Metadata: o.Metadata, ConcurrencyKey: o.ConcurrencyKey,
		CatchUp: o.CatchUp, Paused: o.Paused, KeepState: o.KeepState})
}

// Schedules lists the schedules of namespace ("" for every namespace the caller may see),
// ordered by namespace then name, with their last and next fire: every page, following the
// plane's cursor (SchedulePage reads one). Errors: *InvalidError for a bad namespace name.
func (d *Dispatch) Schedules(ctx context.Context, namespace string) ([]Schedule, error) {
	return plane.ListSchedules(ctx, d.drv, namespace)
}

// SchedulePage reads one page of the schedules of namespace ("" for every namespace the
// caller may see), ordered by namespace then name: at most limit (0: 100, at most 1000)
// after the cursor after ("" from the first), and the cursor of the next page ("" on the
// last). Through a scoped token a page may hold fewer than limit with a next cursor.
// Errors: *InvalidError for a bad namespace, cursor or limit.
func (d *Dispatch) SchedulePage(ctx context.Context, namespace, after string, limit int) (schedules []Schedule, next string, err error) {
	page, err := d.drv.ScheduleList(ctx, &plane.ScheduleListParams{Namespace: namespace, After: after, Limit: limit})
	if err != nil {
		return nil, "", err
	}
	return page.Schedules, page.Next, nil
}

// RemoveSchedule deletes schedule name of the handle's namespace and reports whether there
// was one. Invocations it already submitted stay.
func (d *Dispatch) RemoveSchedule(ctx context.Context, name string) (bool, error) {
	return d.drv.ScheduleDelete(ctx, d.cfg.Namespace, name)
}

// PauseSchedule pauses (paused true) or resumes schedule name of the handle's namespace,
// returns it and reports whether that changed it (false: it already was paused, or was not
// paused, as Queue.Pause and Queue.Resume report). A resumed schedule fires from its first
// tick after now; the ticks that passed while paused are skipped. Errors: ErrNotFound when
// there is no such schedule.
func (d *Dispatch) PauseSchedule(ctx context.Context, name string, paused bool) (*Schedule, bool, error) {
	return d.drv.SchedulePause(ctx, d.cfg.Namespace, name, paused)
}
