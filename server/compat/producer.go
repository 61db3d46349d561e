package compat

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// submitRequest is the body of POST …/producer/submit.
type submitRequest struct {
	InvocationID string          `msgpack:"invocation_id"`
	Queue        string          `msgpack:"queue"`
	ArgsBlob     []byte          `msgpack:"args_blob"`
	RunConfig    submitRunConfig `msgpack:"run_config"`
}

// submitRunConfig is the part of run_config the plane stores; the rest (host_key, runner,
// image, resources, …) is accepted and not kept.
type submitRunConfig struct {
	Queue    string  `msgpack:"queue"`
	Priority float64 `msgpack:"priority"`
	Key      *string `msgpack:"key"`
}

// submit enqueues args_blob byte-exact as the payload, with the client's invocation id.
func (h *handlers) submit(w http.ResponseWriter, r *http.Request, p Principal) error {
	namespace := r.PathValue("namespace")
	if err := plane.ValidateNamespace(namespace); err != nil {
		return err
	}
	var req submitRequest
	if err := h.readBody(w, r, &req); err != nil {
		return err
	}
	queue := req.Queue
	if queue == "" {
		queue = req.RunConfig.Queue
	}
	if err := plane.ValidateName("queue name", queue); err != nil {
		return err
	}
	if !p.Allows(namespace, queue, plane.PermissionSubmit) {
		return forbidden(namespace, queue, plane.PermissionSubmit)
	}
	one := plane.SubmitParams{ID: req.InvocationID, Payload: req.ArgsBlob, Priority: req.RunConfig.Priority}
	if req.RunConfig.Key != nil {
		one.Key = *req.RunConfig.Key
	}
	if one.Payload == nil {
		one.Payload = []byte{0xc0} // msgpack nil: the plane stores bytes
	}
	res, err := h.submitBounded(r, p, &plane.SubmitManyParams{Namespace: namespace, Queue: queue, Invocations: []plane.SubmitParams{one}})
	if err != nil {
		return err
	}
	return writeBody(w, map[string]any{"invocation_id": res[0].ID, "existing": res[0].Existing})
}

// submitBounded is Config.Submit: a submit blocked by a full queue waits as ours do, no
// longer (before, it waited as long as its client stayed connected). Without one, it waits
// at most waitMax and ends when the server stops.
func (h *handlers) submitBounded(r *http.Request, p Principal, params *plane.SubmitManyParams) ([]plane.SubmitResult, error) {
	if h.cfg.Submit != nil {
		return h.cfg.Submit(r, p, params)
	}
	untilStop, cancel := h.untilStop(r)
	defer cancel()
	ctx, cancelWait := context.WithTimeout(untilStop, waitMax)
	defer cancelWait()
	params.Recheck = func() error { return h.recheck(r, p) }
	res, err := h.cfg.Driver.InvocationSubmitMany(ctx, params)
	return res, stopped(untilStop, r, err)
}

// awaitRequest is the body of POST …/producer/await.
type awaitRequest struct {
	InvocationID string  `msgpack:"invocation_id"`
	TimeoutS     float64 `msgpack:"timeout_s"`
}

// await waits up to timeout_s for the invocation to end and answers its state: "pending"
// while queued, "running", or the terminal state with result_blob or error. Our "timeout"
// state answers "failed" (the real client knows no "timeout").
func (h *handlers) await(w http.ResponseWriter, r *http.Request, p Principal) error {
	namespace := r.PathValue("namespace")
	var req awaitRequest
	if err := h.readBody(w, r, &req); err != nil {
		return err
	}
	inv, err := h.invocation(r.Context(), p, namespace, req.InvocationID, plane.PermissionRead, plane.PermissionSubmit)
	if err != nil {
		return err
	}
	if !inv.State.Terminal() && req.TimeoutS > 0 {
		ctx, wait, release, err := h.longPoll(r, p, seconds(req.TimeoutS))
		if err != nil {
			return err
		}
		got, err := h.cfg.Driver.InvocationWait(ctx, &plane.WaitParams{ID: inv.ID, Timeout: wait})
		err = stopped(ctx, r, err)
		release()
		if err == nil || errors.Is(err, plane.ErrTimeout) {
			// Revoked or expired while it waited: not the state that came meanwhile.
			if rerr := h.recheck(r, p); rerr != nil {
				return rerr
			}
		}
		switch {
		case err == nil:
			inv = got
		case errors.Is(err, plane.ErrTimeout):
			if inv, err = h.cfg.Driver.InvocationGet(r.Context(), inv.ID); err != nil {
				return err
			}
		default:
			return err
		}
	}
	out := map[string]any{"invocation_id": inv.ID, "state": string(inv.State), "attempt": inv.Attempt}
	switch inv.State {
	case plane.StateQueued:
		out["state"] = "pending"
	case plane.StateSucceeded:
		out["result_blob"] = inv.Result
	case plane.StateTimeout:
		out["state"] = "failed"
	}
	if inv.State.Terminal() && inv.State != plane.StateSucceeded {
		info := plane.ErrorInfo{Type: string(inv.State), Message: string(inv.State)}
		if inv.Error != nil {
			info = *inv.Error
		}
		out["error"] = map[string]any{"type": info.Type, "message": info.Message}
	}
	return writeBody(w, out)
}

// stream answers the journal of an invocation (or, when id names no invocation, of the topic
// of that name) as application/x-msgpack-stream: the frames after since, re-framed as the
// real package's [kind, seq, body, meta], then live ones, ending after the closing frame.
func (h *handlers) stream(w http.ResponseWriter, r *http.Request, p Principal) error {
	namespace, id := r.PathValue("namespace"), r.PathValue("id")
	if err := plane.ValidateNamespace(namespace); err != nil {
		return err
	}
	since := int64(-1)
	if s := r.URL.Query().Get("since"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < -1 {
			return plane.Invalid("since", s, "an integer ≥ -1")
		}
		since = n
	}
	journal, err := h.journalOf(r, p, namespace, id, plane.PermissionRead, plane.PermissionSubmit, plane.PermissionConsume)
	if err != nil {
		return err
	}
	return h.writeStream(w, r, p, journal, since)
}

// journalOf resolves the name the real client sends in place of an invocation id: an
// invocation of namespace p may use, else the topic of that name on TopicQueue.
func (h *handlers) journalOf(r *http.Request, p Principal, namespace, id string, perms ...plane.Permission) (plane.Journal, error) {
	if plane.ValidateID(id) == nil {
		inv, err := h.invocation(r.Context(), p, namespace, id, perms...)
		if err == nil {
			return plane.Journal{InvocationID: inv.ID}, nil
		}
		if !errors.Is(err, plane.ErrNotFound) {
			return plane.Journal{}, err
		}
	}
	if err := plane.ValidateName("topic name", id); err != nil {
		return plane.Journal{}, err
	}
	if !p.Allows(namespace, TopicQueue, perms...) {
		return plane.Journal{}, fmt.Errorf("%w: topic %s", plane.ErrNotFound, id)
	}
	return plane.Journal{Namespace: namespace, Queue: TopicQueue, Topic: id}, nil
}
