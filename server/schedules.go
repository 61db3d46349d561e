package server

import (
	"errors"
	"net/http"

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
		return "", forbidden("namespace "+namespace, plane.PermissionSubmit)
	}
	list, err := s.drv.ScheduleList(r.Context(), namespace)
	if err != nil {
		return "", err
	}
	for i := range list {
		if list[i].Name == name {
			if p.allows(namespace, list[i].Queue, plane.PermissionSubmit) {
				return list[i].Queue, nil
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

func (s *Server) handleScheduleList(w http.ResponseWriter, r *http.Request, p *principal) error {
	ns := r.URL.Query().Get("namespace")
	if ns != "" {
		if err := plane.ValidateNamespace(ns); err != nil {
			return err
		}
	}
	list, err := s.drv.ScheduleList(r.Context(), ns)
	if err != nil {
		return err
	}
	out := &api.SchedulesResponse{Schedules: make([]api.Schedule, 0, len(list))}
	for i := range list {
		if p.allows(list[i].Namespace, list[i].Queue, anyPerms...) {
			out.Schedules = append(out.Schedules, api.NewSchedule(&list[i]))
		}
	}
	s.write(w, r, http.StatusOK, out)
	return nil
}
