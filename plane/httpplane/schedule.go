package httpplane

import (
	"context"
	"net/url"
	"strconv"
	"time"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/plane"
)

func schedulePath(namespace, name string) string {
	return "/v1/namespaces/" + pathID(namespace) + "/schedules/" + pathID(name)
}

// ScheduleSet implements plane.Driver. The schedule is validated here first: a bad one is
// refused without a request. Repeating it stores the same schedule, so it is retried. A
// conditional set (Schedule.Replacing) is the server's own check: plane.ErrNotImplemented.
func (d *Driver) ScheduleSet(ctx context.Context, s *plane.Schedule) (*plane.Schedule, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if s.Replacing != nil {
		return nil, plane.ErrNotImplemented
	}
	body := api.NewSchedule(s)
	body.NextFire, body.LastFire, body.LastID, body.CreatedAt, body.UpdatedAt = time.Time{}, time.Time{}, "", time.Time{}, time.Time{}
	var out api.Schedule
	if err := d.do(ctx, &call{method: "PUT", path: schedulePath(s.Namespace, s.Name), body: &body, out: &out, safe: true}); err != nil {
		return nil, err
	}
	return out.Plane(), nil
}

// ScheduleList implements plane.Driver: GET /v1/schedules with the namespace, name,
// cursor and limit. Through a scoped token a page holds only the schedules of the queues
// the token covers (possibly fewer than the limit, with a cursor to go on). NamespaceMatch
// and QueueMatch are applied here, to each page the server answers (fewer than the limit, with a cursor).
func (d *Driver) ScheduleList(ctx context.Context, params *plane.ScheduleListParams) (*plane.SchedulePage, error) {
	if _, _, _, err := params.Validate(); err != nil {
		return nil, err
	}
	q := url.Values{}
	for k, v := range map[string]string{"namespace": params.Namespace, "name": params.Name, "after": params.After} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if params.Limit > 0 {
		q.Set("limit", strconv.Itoa(params.Limit))
	}
	var out api.SchedulesResponse
	if err := d.do(ctx, &call{method: "GET", path: "/v1/schedules", query: q, out: &out, safe: true, until: d.deadline(ctx)}); err != nil {
		return nil, err
	}
	page := &plane.SchedulePage{Schedules: make([]plane.Schedule, 0, len(out.Schedules)), Next: out.Next}
	for i := range out.Schedules {
		if sc := out.Schedules[i].Plane(); params.Matches(sc) {
			page.Schedules = append(page.Schedules, *sc)
		}
	}
	return page, nil
}

// ScheduleDelete implements plane.Driver. Not repeated once sent (a repeat would report
// false).
func (d *Driver) ScheduleDelete(ctx context.Context, namespace, name string) (bool, error) {
	if err := validSchedule(namespace, name); err != nil {
		return false, err
	}
	var out api.ChangedResponse
	err := d.do(ctx, &call{method: "DELETE", path: schedulePath(namespace, name), out: &out})
	return out.Changed, err
}

// SchedulePause implements plane.Driver. Repeating it changes nothing more, so it is
// retried (a retry after a lost answer may then report false for a change the first call
// made).
func (d *Driver) SchedulePause(ctx context.Context, namespace, name string, paused bool) (*plane.Schedule, bool, error) {
	if err := validSchedule(namespace, name); err != nil {
		return nil, false, err
	}
	verb := "/resume"
	if paused {
		verb = "/pause"
	}
	var out api.Schedule
	if err := d.do(ctx, &call{method: "POST", path: schedulePath(namespace, name) + verb, out: &out, safe: true}); err != nil {
		return nil, false, err
	}
	return out.Plane(), out.Changed != nil && *out.Changed, nil
}

func validSchedule(namespace, name string) error {
	if err := plane.ValidateNamespace(namespace); err != nil {
		return err
	}
	return plane.ValidateName("schedule name", name)
}
