package server

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// scheduleRoutes are the routes of durable schedules (issue 27). A schedule submits to its
// queue, so changing one needs submit on that queue; a scoped token sees and touches only
// the schedules of the queues it covers (others answer not_found, as unknown names).
func (s *Server) scheduleRoutes() map[string]handlerFunc {
	return map[string]handlerFunc{
		"GET /v1/schedules":                    s.handleScheduleList,
		"PUT " + api.SchedulePath:              s.handleScheduleSet,
		"DELETE " + api.SchedulePath:           s.handleScheduleDelete,
		"POST " + api.SchedulePath + "/pause":  s.handleSchedulePause(true),
		"POST " + api.SchedulePath + "/resume": s.handleSchedulePause(false),
	}
}

// scheduleOf reads and validates the namespace and name of a schedule route.
func scheduleOf(r *http.Request) (namespace, name string, err error) {
	namespace, name = r.PathValue("namespace"), r.PathValue("name")
	if err := plane.ValidateNamespace(namespace); err != nil {
		return "", "", err
	}
	if err := plane.ValidateName("schedule name", name); err != nil {
		return "", "", err
	}
	return namespace, name, nil
}

// authorizeSchedule checks that p may change the stored schedule (namespace, name): submit
// on its queue. A schedule p's scope does not cover answers plane.ErrNotFound, like one that
// does not exist, so a token cannot learn which names exist elsewhere; with creating (a PUT),
// a name that does not exist yet is allowed (nil), while an existing schedule of a queue
// outside p's scope still answers plane.ErrNotFound, exactly as pause does, and is not
// replaced.
func (s *Server) authorizeSchedule(r *http.Request, p *principal, namespace, name string, creating bool) error {
	if p.all {
		return nil
	}
	queue, err := s.storedScheduleQueue(r, p, namespace, name)
	if err != nil {
		return err
	}
	if queue == "" && !creating {
		return plane.ScheduleNotFound(namespace, name)
	}
	return nil
}

// storedScheduleQueue returns the queue of the stored schedule (namespace, name), "" when
// there is none, after checking that p may submit to it (plane.ErrNotFound when not).
func (s *Server) storedScheduleQueue(r *http.Request, p *principal, namespace, name string) (string, error) {
	if !p.allowsNamespace(namespace, plane.PermissionSubmit) {
		return "", forbidden(p, "namespace "+namespace, plane.PermissionSubmit)
	}
	page, err := s.drv.ScheduleList(r.Context(), &plane.ScheduleListParams{Namespace: namespace, Name: name, Limit: 1})
	if err != nil {
		return "", err
	}
	for i := range page.Schedules {
		if page.Schedules[i].Name == name {
			if p.allows(namespace, page.Schedules[i].Queue, plane.PermissionSubmit) {
				return page.Schedules[i].Queue, nil
			}
			return "", plane.ScheduleNotFound(namespace, name)
		}
	}
	return "", nil
}

func (s *Server) handleScheduleSet(w http.ResponseWriter, r *http.Request, p *principal) error {
	ns, name, err := scheduleOf(r)
	if err != nil {
		return err
	}
	var req api.Schedule
	if err := s.readBody(w, r, &req); err != nil {
		return err
	}
	if err := everySeconds(req.Every); err != nil {
		return err
	}
	if _, err := seconds("attempt_timeout", req.AttemptTimeout); err != nil {
		return err
	}
	payload, err := s.value("payload", req.Payload)
	if err != nil {
		return err
	}
	sc := req.Plane()
	sc.Namespace, sc.Name, sc.Payload = ns, name, payload
	if err := sc.Validate(); err != nil {
		return err
	}
	if err := authorizeQueue(p, ns, sc.Queue, plane.PermissionSubmit); err != nil {
		return err
	}
	// Replacing a schedule of a queue the token does not cover is not allowed either: it
	// answers not_found, as pause does, and the stored schedule stays. The set is
	// conditional on the schedule the check read (Schedule.Replacing), so a concurrent
	// create or replace of the name is checked again, never overwritten unchecked.
	var stored *plane.Schedule
	for try := 0; ; try++ {
		if !p.all {
			queue, err := s.storedScheduleQueue(r, p, ns, name) // "" when none: the set then creates it
			if err != nil {
				return err
			}
			sc.Replacing = &queue
		}
		stored, err = s.drv.ScheduleSet(r.Context(), sc)
		if errors.Is(err, plane.ErrScheduleChanged) && try < 3 {
			continue
		}
		if errors.Is(err, plane.ErrScheduleChanged) { // changing under us every time: answer as for a foreign one
			return plane.ScheduleNotFound(ns, name)
		}
		if err != nil {
			return err
		}
		break
	}
	out := api.NewSchedule(stored)
	s.write(w, r, http.StatusOK, &out)
	return nil
}

func (s *Server) handleScheduleDelete(w http.ResponseWriter, r *http.Request, p *principal) error {
	ns, name, err := scheduleOf(r)
	if err != nil {
		return err
	}
	if err := s.authorizeSchedule(r, p, ns, name, false); err != nil {
		if errors.Is(err, plane.ErrNotFound) {
			s.write(w, r, http.StatusOK, &api.ChangedResponse{Changed: false})
			return nil
		}
		return err
	}
	ok, err := s.drv.ScheduleDelete(r.Context(), ns, name)
	if err != nil {
		return err
	}
	s.write(w, r, http.StatusOK, &api.ChangedResponse{Changed: ok})
	return nil
}

func (s *Server) handleSchedulePause(paused bool) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, p *principal) error {
		ns, name, err := scheduleOf(r)
		if err != nil {
			return err
		}
		if err := s.authorizeSchedule(r, p, ns, name, false); err != nil {
			return err
		}
		sc, changed, err := s.drv.SchedulePause(r.Context(), ns, name, paused)
		if err != nil {
			return err
		}
		out := api.NewSchedule(sc)
		out.Changed = &changed
		s.write(w, r, http.StatusOK, &out)
		return nil
	}
}

// seesEverySchedule reports whether p is shown every schedule of every namespace (auth off,
// the admin token, or a token for every namespace and queue with a permission the listing
// shows): only then is the listing's cursor given in the clear.
func (p *principal) seesEverySchedule() bool {
	return p.all || !p.scoped() && p.has(anyPerms)
}

// scheduleListPages bounds the plane pages one GET /v1/schedules reads to fill its page
// with the schedules a scoped token covers; past it the answer is shorter, with a cursor.
const scheduleListPages = 8

// handleScheduleList answers GET /v1/schedules?namespace=&name=&after=&limit=: a page of
// at most limit schedules the token covers, and next, the cursor of the following page. A
// scoped token's page skips the schedules of queues it does not cover; it reads up to
// scheduleListPages plane pages to fill the page, so it may answer fewer than limit (even
// none) with a next cursor: follow next until it is absent.
func (s *Server) handleScheduleList(w http.ResponseWriter, r *http.Request, p *principal) error {
	query := r.URL.Query()
	limit, err := queryInt(r, "limit", 0)
	if err != nil {
		return err
	}
	if limit < 0 || limit > plane.ListLimitMax {
		return plane.Invalid("limit", limit, fmt.Sprintf("use 1–%d (0 or absent: %d)", plane.ListLimitMax, plane.ListLimitDefault))
	}
	after, ok := s.openCursor(query.Get("after"))
	if !ok {
		return plane.Invalid("after", query.Get("after"), "use the next cursor of the previous page")
	}
	params := &plane.ScheduleListParams{Namespace: query.Get("namespace"), Name: query.Get("name"), After: after, Limit: int(limit)}
	size, _, _, err := params.Validate()
	if err != nil {
		return err
	}
	out := &api.SchedulesResponse{Schedules: make([]api.Schedule, 0, min(size, 64))}
	if !p.seesEverySchedule() {
		// A scoped token's pages skip what it does not cover, and a page that read
		// scheduleListPages plane pages answers a (sealed) cursor: over a namespace the
		// token covers nothing of, that cursor told it that the namespace held more than
		// scheduleListPages × limit schedules, and following it counted them. So the
		// listing reads only where the token may see: nothing of a namespace it does not
		// cover, only its own namespace when its token names one, and only the namespaces
		// its pattern matches when it is a glob (plane.ScheduleListParams.NamespaceMatch:
		// before, a team-* token's listing of every namespace read the others' rows, and
		// its cursor counted them).
		switch {
		case params.Namespace != "" && !p.allowsNamespace(params.Namespace, anyPerms...), !p.has(anyPerms):
			s.write(w, r, http.StatusOK, out)
			return nil
		case params.Namespace == "" && p.tok != nil && !strings.ContainsAny(p.tok.Namespace, globChars):
			params.Namespace = p.tok.Namespace
		case params.Namespace == "" && p.tok != nil:
			params.NamespaceMatch = p.tok.Namespace
		}
		// Within a namespace the same holds of queues: a token scoped to some queues reads
		// only their schedules (before, a team-a/q1 token's cursor counted team-a/q2's).
		if p.tok != nil && p.tok.Queue != "*" {
			params.QueueMatch = p.tok.Queue
		}
	}
	for range scheduleListPages {
		page, err := s.drv.ScheduleList(r.Context(), params)
		if err != nil {
			return err
		}
		out.Next = page.Next
		for i := range page.Schedules {
			sc := &page.Schedules[i]
			if !p.allows(sc.Namespace, sc.Queue, anyPerms...) {
				continue
			}
			out.Schedules = append(out.Schedules, api.NewSchedule(sc))
			if len(out.Schedules) == size {
				if i < len(page.Schedules)-1 { // more on this page: go on after this one
					out.Next = plane.ScheduleCursor(sc.Namespace, sc.Name)
				}
				break
			}
		}
		if len(out.Schedules) == size || page.Next == "" {
			break
		}
		params.After = page.Next
	}
	if !p.seesEverySchedule() {
		// The cursor names the last schedule read, which may be one the token does not
		// cover: sealed, it tells nothing (cursor.go).
		out.Next = s.sealCursor(out.Next)
	}
	s.write(w, r, http.StatusOK, out)
	return nil
}
