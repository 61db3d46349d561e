package planekit

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// scheduleSpec is the stored form of a schedule's rule and submit options (the column
// spec, JSON): what ScheduleSet was given, without the plane's fields.
type scheduleSpec struct {
	Queue          string            `json:"queue"`
	Cron           string            `json:"cron,omitempty"`
	EveryMS        int64             `json:"every_ms,omitempty"`
	TimeZone       string            `json:"time_zone,omitempty"`
	Payload        []byte            `json:"payload,omitempty"`
	Priority       float64           `json:"priority,omitempty"`
	MaxAttempts    int               `json:"max_attempts,omitempty"`
	AttemptTimeout int64             `json:"attempt_timeout_ms,omitempty"`
	Metadata       map[string]string `json:"metadata,omitempty"`
	ConcurrencyKey string            `json:"concurrency_key,omitempty"`
	CatchUp        plane.CatchUp     `json:"catch_up,omitempty"`
	// The plane's skip record (plane.Schedule.Skipped, LastSkip, LastSkipReason): kept in
	// the spec, so a replacing ScheduleSet starts it again.
	Skipped        int64  `json:"skipped,omitempty"`
	LastSkipMS     int64  `json:"last_skip_ms,omitempty"`
	LastSkipReason string `json:"last_skip_reason,omitempty"`
}

// EncodeSchedule is the stored spec of s (its queue, rule and submit options, and its skip
// record).
func EncodeSchedule(s *plane.Schedule) []byte {
	b, _ := json.Marshal(scheduleSpec{Queue: s.Queue, Cron: s.Cron, EveryMS: s.Every.Milliseconds(),
		TimeZone: s.TimeZone, Payload: s.Payload, Priority: s.Priority, MaxAttempts: s.MaxAttempts,
		AttemptTimeout: s.AttemptTimeout.Milliseconds(), Metadata: s.Metadata, ConcurrencyKey: s.ConcurrencyKey, CatchUp: s.CatchUp,
		Skipped: s.Skipped, LastSkipMS: ToMS(s.LastSkip), LastSkipReason: s.LastSkipReason})
	return b // plain fields always encode
}

// ScheduleRow is a stored schedule as a driver reads it.
type ScheduleRow struct {
	Namespace, Name string
	Spec            []byte
	Paused          bool
	// NextMS, LastMS, CreatedMS, UpdatedMS are Unix milliseconds (0: none).
	NextMS, LastMS, CreatedMS, UpdatedMS int64
	LastID                               string
}

// Schedule decodes the row. Errors: a spec that does not decode (named, with the schedule).
func (r *ScheduleRow) Schedule() (*plane.Schedule, error) {
	var sp scheduleSpec
	if err := json.Unmarshal(r.Spec, &sp); err != nil {
		return nil, fmt.Errorf("schedule %s/%s: stored spec unreadable: %w", r.Namespace, r.Name, err)
	}
	return &plane.Schedule{Namespace: r.Namespace, Name: r.Name, Queue: sp.Queue, Cron: sp.Cron,
		Every: time.Duration(sp.EveryMS) * time.Millisecond, TimeZone: sp.TimeZone, Payload: sp.Payload,
		Priority: sp.Priority, MaxAttempts: sp.MaxAttempts,
		AttemptTimeout: time.Duration(sp.AttemptTimeout) * time.Millisecond, Metadata: sp.Metadata,
		ConcurrencyKey: sp.ConcurrencyKey, CatchUp: sp.CatchUp, Paused: r.Paused, NextFire: FromMS(r.NextMS).UTC(), LastFire: utc(FromMS(r.LastMS)),
		LastID: r.LastID, CreatedAt: utc(FromMS(r.CreatedMS)), UpdatedAt: utc(FromMS(r.UpdatedMS)),
		Skipped: sp.Skipped, LastSkip: utc(FromMS(sp.LastSkipMS)), LastSkipReason: sp.LastSkipReason}, nil
}

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}

// ScheduleSetRow is the row ScheduleSet writes for s at the plane's clock reading now:
// the spec, and the next fire (the first tick after now; none while paused; a replace then
// keeps a due tick: ScheduleKeepDue). A replaced
// schedule keeps its created time, last fire and last id (the driver's upsert leaves them).
// Errors: *plane.InvalidError (s.Validate, or a rule with no tick ahead).
func ScheduleSetRow(s *plane.Schedule, now time.Time) (*ScheduleRow, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	set := *s // the skip record is the plane's: a set starts it again
	set.Skipped, set.LastSkip, set.LastSkipReason = 0, time.Time{}, ""
	row := &ScheduleRow{Namespace: s.Namespace, Name: s.Name, Spec: EncodeSchedule(&set), Paused: s.Paused,
		CreatedMS: now.UnixMilli(), UpdatedMS: now.UnixMilli()}
	if !s.Paused {
		next, err := s.FirstFire(now)
		if err != nil {
			return nil, err
		}
		row.NextMS = next.UnixMilli()
	}
	return row, nil
}

// ScheduleKeepRow is row (ScheduleSetRow's for s) kept to the plane's state of the stored
// schedule found, for a set with s.KeepState: found's paused flag and skip record, and its
// next fire when the rule is unchanged (plane.Schedule.SameRule); a changed rule fires
// next at its first tick after now, none while paused. Errors: found's spec unreadable, a
// rule with no tick ahead.
func ScheduleKeepRow(row *ScheduleRow, s *plane.Schedule, found *ScheduleRow, now time.Time) error {
	stored, err := found.Schedule()
	if err != nil {
		return err
	}
	keep := *s
	keep.Paused = found.Paused
	keep.Skipped, keep.LastSkip, keep.LastSkipReason = stored.Skipped, stored.LastSkip, stored.LastSkipReason
	row.Spec, row.Paused = EncodeSchedule(&keep), found.Paused
	switch {
	case found.Paused:
		row.NextMS = 0
	case found.NextMS > 0 && stored.SameRule(s):
		row.NextMS = found.NextMS
	default:
		next, err := s.FirstFire(now)
		if err != nil {
			return err
		}
		row.NextMS = next.UnixMilli()
	}
	return nil
}

// ScheduleKeepDue keeps, in row (ScheduleSetRow's for a plain set of s at now), the next
// fire of the stored schedule found when that tick is due (at or before now: maintenance
// has not fired it yet), found is not paused, s is not paused and the rule is unchanged
// (plane.Schedule.SameRule): a replace made at a tick's instant, or after it within the
// maintenance interval, then fires that tick (and the ticks missed before it, by s's
// CatchUp) instead of dropping it, which the first tick after now did. Only a fresh tick
// is owed: a due tick more than plane.ScheduleGrace old (the plane was down, or its
// maintenance stalled) is not kept, and the set keeps instead the rule's first tick within
// that grace, when one is due, else starts at the first tick after now as any plain set —
// so a plain set after long downtime never replays the backlog (with CatchUpAll, every
// missed tick), which only a KeepState set asks for. Errors: found's spec unreadable.
func ScheduleKeepDue(row *ScheduleRow, s *plane.Schedule, found *ScheduleRow, now time.Time) error {
	if s.Paused || found.Paused || found.NextMS <= 0 || found.NextMS > now.UnixMilli() {
		return nil
	}
	stored, err := found.Schedule()
	if err != nil {
		return err
	}
	if !stored.SameRule(s) {
		return nil
	}
	due := FromMS(found.NextMS)
	if now.Sub(due) > plane.ScheduleGrace {
		rule, err := s.Rule()
		if err != nil {
			return err
		}
		// The first tick at or after now-ScheduleGrace (Next is strictly after).
		if due = rule.Next(now.Add(-plane.ScheduleGrace - time.Millisecond)); due.IsZero() || due.After(now) {
			return nil
		}
	}
	row.NextMS = due.UnixMilli()
	return nil
}

// storedScheduleQueue reads the queue of a stored schedule for a conditional ScheduleSet
// (plane.CheckReplacing) from the scan of its row: exists is false when the scan found no
// row (missing).
func storedScheduleQueue(r *ScheduleRow, err error, missing bool) (queue string, exists bool, _ error) {
	if err != nil {
		if missing {
			return "", false, nil
		}
		return "", false, fmt.Errorf("read schedule: %w", err)
	}
	s, err := r.Schedule()
	if err != nil {
		return "", false, err
	}
	return s.Queue, true, nil
}

// ScheduleResume is the next fire of a schedule resumed at now (the first tick after now),
// in Unix milliseconds; 0 when paused. Errors: a stored rule that no longer reads.
func ScheduleResume(r *ScheduleRow, paused bool, now time.Time) (int64, error) {
	if paused {
		return 0, nil
	}
	s, err := r.Schedule()
	if err != nil {
		return 0, err
	}
	next, err := s.FirstFire(now)
	if err != nil {
		return 0, err
	}
	return next.UnixMilli(), nil
}

// Fire is what a maintenance pass does to one due schedule: the submits of its fires (each
// keyed by plane.ScheduleKey, none when the catch-up policy skips), the last tick fired
// (zero: none) and the next tick to store.
type Fire struct {
	Schedule *plane.Schedule
	Submits  []plane.SubmitParams
	Last     time.Time
	NextMS   int64
	// ticks are the ticks of Submits.
	ticks []time.Time
	// Skipped is how many ticks Admit skipped (the queue was full); then Spec is the
	// schedule's spec with its skip record moved on, for the driver to store (nil: keep the
	// stored spec), and SkipReason says why, for the driver's log line.
	Skipped    int
	Spec       []byte
	SkipReason string
}

// ScheduleFire decides the fires of the due schedule r at now by plane.ScheduleFires.
// Errors: a stored spec or rule that no longer reads (the driver leaves the row and reports
// it).
func ScheduleFire(r *ScheduleRow, now time.Time) (*Fire, error) {
	s, err := r.Schedule()
	if err != nil {
		return nil, err
	}
	rule, err := s.Rule()
	if err != nil {
		return nil, fmt.Errorf("schedule %s/%s: stored rule unreadable: %w", r.Namespace, r.Name, err)
	}
	ticks, after := plane.ScheduleFires(rule, s.CatchUp, FromMS(r.NextMS), now)
	f := &Fire{Schedule: s, NextMS: ToMS(after)}
	for _, tick := range ticks {
		f.Submits = append(f.Submits, s.FireParams(tick))
		f.ticks = append(f.ticks, tick)
		f.Last = tick
	}
	return f, nil
}

// Admit applies the queue's depth limit (a; nil: the queue has no admission block) to f's
// fires by plane.ScheduleAdmit: the oldest that fit stay in Submits (Last their last tick,
// zero when none), the rest are skipped and recorded in the schedule (Skipped, LastSkip,
// LastSkipReason) and in Spec. queued is the queue's queued count in the driver's
// transaction; it is called only under a depth limit. Errors: those of queued.
func (f *Fire) Admit(a *Admission, queued func() (int64, error)) error {
	if a == nil || a.MaxDepth <= 0 || len(f.Submits) == 0 {
		return nil
	}
	n, err := queued()
	if err != nil {
		return err
	}
	s := f.Schedule
	fit, reason := plane.ScheduleAdmit(a.Admission, s.Namespace+"/"+s.Queue, n, len(f.Submits))
	if fit == len(f.Submits) {
		return nil
	}
	f.Skipped = len(f.Submits) - fit
	s.Skipped += int64(f.Skipped)
	s.LastSkip, s.LastSkipReason = f.ticks[len(f.ticks)-1], reason
	f.Submits, f.ticks = f.Submits[:fit], f.ticks[:fit]
	f.Last = time.Time{}
	if fit > 0 {
		f.Last = f.ticks[fit-1]
	}
	f.Spec, f.SkipReason = EncodeSchedule(s), reason
	return nil
}
