package planekit

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// ScheduleColumns are the columns of a stored schedule, in ScanSchedule's order.
const ScheduleColumns = `namespace, name, spec, paused, next_ms, last_ms, last_id, created_ms, updated_ms`

// ScanSchedule reads a row of ScheduleColumns.
func ScanSchedule(s Scanner) (*ScheduleRow, error) {
	var r ScheduleRow
	if err := s.Scan(&r.Namespace, &r.Name, &r.Spec, &r.Paused, &r.NextMS, &r.LastMS, &r.LastID, &r.CreatedMS, &r.UpdatedMS); err != nil {
		return nil, err
	}
	return &r, nil
}

// ScheduleSet implements plane.Driver. A conditional set (Replacing) and a set that keeps
// the plane's state (KeepState) read the stored row locked in the same transaction; with
// none found, a row inserted meanwhile makes the insert do nothing: a conditional set
// answers plane.ErrScheduleChanged, a KeepState set reads that row and keeps its state.
func (v Verbs) ScheduleSet(ctx context.Context, s *plane.Schedule) (*plane.Schedule, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	var out *plane.Schedule
	err := write(ctx, v.db, func(t Tx) (error, error) {
		for try := 0; ; try++ {
			row, err := ScheduleSetRow(s, t.Now())
			if err != nil {
				return err, nil
			}
			set := v.st.ScheduleUpsert
			found, getErr := ScanSchedule(t.QueryRow(v.st.ScheduleGet, s.Namespace, s.Name))
			missing := NoRows(getErr)
			if getErr != nil && !missing {
				return nil, fmt.Errorf("read schedule: %w", getErr)
			}
			if missing { // a creation: the namespace's cap applies
				if logical, err := v.checkScheduleCap(t, s.Namespace); logical != nil || err != nil {
					return logical, err
				}
			}
			if s.Replacing != nil || s.KeepState {
				queue, exists, err := storedScheduleQueue(found, getErr, missing)
				if err != nil {
					return nil, err
				}
				if err := plane.CheckReplacing(s, queue, exists); err != nil {
					return err, nil
				}
				if !exists {
					set = v.st.ScheduleInsert
				} else if s.KeepState {
					if err := ScheduleKeepRow(row, s, found, t.Now()); err != nil {
						return err, nil
					}
				}
			}
			if !s.KeepState && getErr == nil {
				if err := ScheduleKeepDue(row, s, found, t.Now()); err != nil {
					return err, nil
				}
			}
			ms := t.Now().UnixMilli()
			stored, err := ScanSchedule(t.QueryRow(set, row.Namespace, row.Name, row.Spec, row.Paused, row.NextMS, ms))
			if NoRows(err) {
				if s.Replacing == nil && try == 0 { // KeepState: created meanwhile; keep its state
					continue
				}
				return plane.ErrScheduleChanged, nil
			}
			if err != nil {
				return nil, fmt.Errorf("set schedule: %w", err)
			}
			out, err = stored.Schedule()
			return nil, err
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// nameAbove is a string above every valid name (plane.NameRule: bytes below '~').
const nameAbove = "~"

// ScheduleListBounds is the range of (namespace, name) keys, both ends inclusive, that a
// schedule listing reads: one namespace's (namespace "" every one), one name's (name ""
// every one), after the cursor (afterNamespace, afterName) when given. A name is never
// empty and holds only bytes of plane.NameRule, so (ns, "") is below every key of ns,
// (ns, "~") above every one, and afterName + "-" (the least of those bytes) is the least
// name above afterName: the range is one index range, a page O(limit).
func ScheduleListBounds(namespace, name, afterNamespace, afterName string) (lo, hi [2]string) {
	lo, hi = [2]string{namespace, ""}, [2]string{nameAbove, ""}
	switch {
	case name != "":
		lo, hi = [2]string{namespace, name}, [2]string{namespace, name}
	case namespace != "":
		hi = [2]string{namespace, nameAbove}
	}
	if afterNamespace != "" {
		if after := [2]string{afterNamespace, afterName + "-"}; after[0] > lo[0] || after[0] == lo[0] && after[1] > lo[1] {
			lo = after
		}
	}
	return lo, hi
}

// checkScheduleCap applies plane.CheckScheduleCount to the creation of a schedule in
// namespace, in t: after CapLock, so concurrent creations count one another.
func (v Verbs) checkScheduleCap(t Tx, namespace string) (logical, err error) {
	if v.p.MaxSchedules < 0 {
		return nil, nil
	}
	n, err := CapCount(t, v.st, "lakeshore-schedules/"+namespace, v.st.ScheduleCount, namespace)
	if err != nil {
		return nil, fmt.Errorf("set schedule: %w", err)
	}
	return plane.CheckScheduleCount(namespace, int(n), v.p.MaxSchedules), nil
}

// CapCount takes, in t, the lock of a cap's key (Statements.CapLock), then runs count
// with args: the number of objects the cap counts, which no other transaction creating
// one under the same key changes until t ends.
func CapCount(t Tx, st *Statements, key, count string, args ...any) (int64, error) {
	if st.CapLock != "" {
		var ignored any
		if err := t.QueryRow(st.CapLock, key).Scan(&ignored); err != nil {
			return 0, err
		}
	}
	var n int64
	err := t.QueryRow(count, args...).Scan(&n)
	return n, err
}

// ScheduleList implements plane.Driver: one page, read with one more row than the limit to
// know whether another page follows. With NamespaceMatch it reads only the namespaces
// starting with the pattern's literal prefix; with it or QueueMatch it keeps the rows they match,
// reading on until the page holds limit of them and one more shows a next page (or the
// rows end): its page and cursor depend on the matched namespaces only.
func (v Verbs) ScheduleList(ctx context.Context, params *plane.ScheduleListParams) (*plane.SchedulePage, error) {
	limit, afterNamespace, afterName, err := params.Validate()
	if err != nil {
		return nil, err
	}
	page := &plane.SchedulePage{Schedules: make([]plane.Schedule, 0, min(limit, 64))}
	for {
		lo, hi := ScheduleListBounds(params.Namespace, params.Name, afterNamespace, afterName)
		if params.NamespaceMatch != "" {
			if prefix := plane.NamespaceMatchPrefix(params.NamespaceMatch); prefix != "" {
				if lo[0] < prefix {
					lo = [2]string{prefix, ""}
				}
				if up := prefix + nameAbove; hi[0] > up {
					hi = [2]string{up, ""}
				}
			}
		}
		if lo[0] > hi[0] || lo[0] == hi[0] && lo[1] > hi[1] {
			return page, nil
		}
		rows, err := read(ctx, v, "list schedules", ScanSchedule, v.st.ScheduleList, lo[0], lo[1], hi[0], hi[1], limit+1)
		if err != nil {
			return nil, err
		}
		for _, row := range rows {
			s, err := row.Schedule()
			if err != nil {
				return nil, err
			}
			afterNamespace, afterName = s.Namespace, s.Name
			if !params.Matches(s) {
				continue
			}
			if len(page.Schedules) == limit {
				last := &page.Schedules[limit-1]
				page.Next = plane.ScheduleCursor(last.Namespace, last.Name)
				return page, nil
			}
			page.Schedules = append(page.Schedules, *s)
		}
		if len(rows) <= limit || !params.Filtered() {
			return page, nil
		}
	}
}

// ScheduleDelete implements plane.Driver.
func (v Verbs) ScheduleDelete(ctx context.Context, namespace, name string) (bool, error) {
	if err := validSchedule(namespace, name); err != nil {
		return false, err
	}
	return exec(ctx, v.db, "delete schedule", v.st.ScheduleDelete, func(Tx) []any { return []any{namespace, name} })
}

// SchedulePause implements plane.Driver. A resume fires next at the first tick after now.
func (v Verbs) SchedulePause(ctx context.Context, namespace, name string, paused bool) (*plane.Schedule, bool, error) {
	if err := validSchedule(namespace, name); err != nil {
		return nil, false, err
	}
	var out *plane.Schedule
	changed := false
	err := write(ctx, v.db, func(t Tx) (error, error) {
		changed = false // a retried transaction starts again
		row, err := ScanSchedule(t.QueryRow(v.st.ScheduleGet, namespace, name))
		if NoRows(err) {
			return plane.ScheduleNotFound(namespace, name), nil
		}
		if err != nil {
			return nil, fmt.Errorf("pause schedule: %w", err)
		}
		if row.Paused != paused {
			next, err := ScheduleResume(row, paused, t.Now())
			if err != nil {
				return err, nil
			}
			ms := t.Now().UnixMilli()
			if _, err := t.Exec(v.st.SchedulePause, paused, next, ms, namespace, name); err != nil {
				return nil, fmt.Errorf("pause schedule: %w", err)
			}
			row.Paused, row.NextMS, row.UpdatedMS = paused, next, ms
			changed = true
		}
		out, err = row.Schedule()
		return nil, err
	})
	if err != nil {
		return nil, false, err
	}
	return out, changed, nil
}

// FireSchedules submits the due ticks of up to limit schedules (next_ms at or before the
// transaction's clock) and moves each to its next tick, in t: the fire and the move commit
// together or not at all. Each fire is keyed by plane.ScheduleKey, so a tick submitted
// before (by a former leader) cannot enqueue twice. The queue's depth limit decides which
// ticks fit (Fire.Admit); a schedule whose stored rule no longer reads is left unfired and
// logged. It returns how many schedules were due and how many invocations it submitted.
func FireSchedules(t Tx, st *Statements, limit int, log *slog.Logger) (due, fired int, _ error) {
	rs, err := t.Query(st.ScheduleDue, t.Now().UnixMilli(), limit)
	if err != nil {
		return 0, 0, fmt.Errorf("schedules: %w", err)
	}
	rows, err := Collect(rs, "schedules", ScanSchedule)
	if err != nil {
		return 0, 0, err
	}
	for _, row := range rows {
		f, err := ScheduleFire(row, t.Now())
		if err != nil {
			log.Warn("schedule left unfired", "err", err)
			continue
		}
		ns, queue := row.Namespace, f.Schedule.Queue
		if len(f.Submits) > 0 {
			a, err := t.Admission(ns, queue)
			if err != nil {
				return 0, 0, err
			}
			if err := f.Admit(a, func() (int64, error) { return t.Queued(ns, queue) }); err != nil {
				return 0, 0, err
			}
			if f.Skipped > 0 {
				log.Warn("schedule tick skipped", "namespace", ns, "schedule", row.Name, "skipped", f.Skipped, "reason", f.SkipReason)
			}
		}
		lastMS, lastID := row.LastMS, row.LastID
		if len(f.Submits) > 0 {
			out := make([]plane.SubmitResult, len(f.Submits))
			if err := t.SubmitUnadmitted(&plane.SubmitManyParams{Namespace: ns, Queue: queue, Invocations: f.Submits}, out); err != nil {
				return 0, 0, err
			}
			fired += len(out)
			lastMS, lastID = f.Last.UnixMilli(), out[len(out)-1].ID
		}
		if _, err := t.Exec(st.ScheduleFired, f.NextMS, lastMS, lastID, ns, row.Name, f.Spec); err != nil {
			return 0, 0, fmt.Errorf("schedules: %w", err)
		}
	}
	return len(rows), fired, nil
}

func validSchedule(namespace, name string) error {
	if err := plane.ValidateNamespace(namespace); err != nil {
		return err
	}
	return plane.ValidateName("schedule name", name)
}
