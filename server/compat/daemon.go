package compat

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// held is the lease of one job claimed through /v1/daemon/poll.
type held struct {
	token     string
	worker    string
	expiresAt time.Time
}

// leases keeps the fencing token of every job claimed through this server, by invocation
// id: the real package's ack names only the invocation, never a token. It lives in memory:
// an ack or frame that reaches another replica (or this one after a restart) answers
// lease_lost, and the job comes back when its lease expires — at least once, never settled
// by a stale worker. Run one replica behind real-package workers (docs/http-api.md).
type leases struct {
	mu   sync.Mutex
	byID map[string]held
}

func newLeases() *leases { return &leases{byID: map[string]held{}} }

func (l *leases) put(id string, h held) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	for other, x := range l.byID { // forget leases long expired (their workers are gone)
		if now.After(x.expiresAt.Add(time.Hour)) {
			delete(l.byID, other)
		}
	}
	l.byID[id] = h
}

func (l *leases) get(id string) (held, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.byID[id]
	return h, ok
}

func (l *leases) drop(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.byID, id)
}

// ofWorker returns the ids of the jobs worker holds.
func (l *leases) ofWorker(worker string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ids []string
	for id, h := range l.byID {
		if h.worker == worker {
			ids = append(ids, id)
		}
	}
	return ids
}

// extend heartbeats the held leases of ids to LeaseTTL from now; a lease found lost is
// forgotten. Failures are not the request's: the next settle reports them.
func (h *handlers) extend(r *http.Request, ids []string) {
	if len(ids) == 0 {
		return
	}
	params := make([]plane.HeartbeatParams, 0, len(ids))
	for _, id := range ids {
		if x, ok := h.leases.get(id); ok {
			params = append(params, plane.HeartbeatParams{ID: id, Token: x.token, LeaseTTL: h.cfg.LeaseTTL})
		}
	}
	res, err := h.cfg.Driver.InvocationHeartbeatMany(r.Context(), params)
	if err != nil {
		return
	}
	for i, hb := range res {
		if hb.Err != nil {
			h.leases.drop(params[i].ID)
			continue
		}
		if x, ok := h.leases.get(params[i].ID); ok {
			x.expiresAt = hb.LeaseExpiresAt
			h.leases.put(params[i].ID, x)
		}
	}
}

// pollRequest is the body of POST /v1/daemon/poll.
type pollRequest struct {
	WorkerID string  `msgpack:"worker_id"`
	TimeoutS float64 `msgpack:"timeout_s"`
	Queue    string  `msgpack:"queue"`
}

// poll extends the leases worker_id holds, then claims one job of queue in the daemon
// namespace, waiting up to timeout_s, and answers it as a run command with its payload
// byte-exact as args_blob.
func (h *handlers) poll(w http.ResponseWriter, r *http.Request, p Principal) error {
	var req pollRequest
	if err := h.readBody(w, r, &req); err != nil {
		return err
	}
	if req.WorkerID == "" {
		return plane.Invalid("worker_id", req.WorkerID, "name the worker")
	}
	namespace := daemonNamespace(p)
	if err := plane.ValidateName("queue name", req.Queue); err != nil {
		return err
	}
	if !p.Allows(namespace, req.Queue, plane.PermissionConsume) {
		return forbidden(namespace, req.Queue, plane.PermissionConsume)
	}
	h.extend(r, h.leases.ofWorker(req.WorkerID))
	ctx, cancel := h.untilStop(r)
	defer cancel()
	jobs, err := h.cfg.Driver.InvocationClaimMany(ctx, &plane.ClaimParams{
		Namespace: namespace, Queue: req.Queue, Kind: plane.KindFIFO, Max: 1,
		LeaseTTL: h.cfg.LeaseTTL, Wait: seconds(req.TimeoutS), Worker: req.WorkerID,
	})
	if err != nil {
		return stopped(ctx, r, err)
	}
	commands := []map[string]any{}
	for _, job := range jobs {
		h.leases.put(job.ID, held{token: job.Token, worker: req.WorkerID, expiresAt: job.LeaseExpiresAt})
		commands = append(commands, map[string]any{"kind": "run", "body": map[string]any{
			"invocation_id": job.ID, "args_blob": job.Payload, "attempt": job.Attempt,
			"queue": job.Queue, "namespace": job.Namespace,
		}})
	}
	return writeBody(w, map[string]any{"commands": commands})
}

// ackRequest is the body of POST /v1/daemon/ack.
type ackRequest struct {
	InvocationID string    `msgpack:"invocation_id"`
	State        string    `msgpack:"state"`
	ResultBlob   []byte    `msgpack:"result_blob"`
	Error        *ackError `msgpack:"error"`
}

type ackError struct {
	Type    string `msgpack:"type"`
	Message string `msgpack:"message"`
	Retry   *bool  `msgpack:"retry"`
}

// ack settles a job claimed through poll with the token this server holds for it:
// "succeeded" acks with result_blob byte-exact; "failed" nacks, retrying while attempts
// remain when error.retry is true (the default) and failing at once otherwise.
func (h *handlers) ack(w http.ResponseWriter, r *http.Request, p Principal) error {
	var req ackRequest
	if err := h.readBody(w, r, &req); err != nil {
		return err
	}
	if _, err := h.invocation(r.Context(), p, "", req.InvocationID, plane.PermissionConsume); err != nil {
		return err
	}
	x, ok := h.leases.get(req.InvocationID)
	if !ok {
		return fmt.Errorf("%w: no worker of this server holds invocation %s", plane.ErrLeaseLost, req.InvocationID)
	}
	settle := plane.SettleParams{ID: req.InvocationID, Token: x.token}
	switch req.State {
	case "succeeded":
		settle.Outcome, settle.Result = plane.OutcomeSucceeded, req.ResultBlob
		if settle.Result == nil {
			settle.Result = []byte{0xc0}
		}
	case "failed":
		settle.Outcome = plane.OutcomeRetry
		info := plane.ErrorInfo{Type: "WorkerError", Message: "failed"}
		if req.Error != nil {
			if req.Error.Retry != nil && !*req.Error.Retry {
				settle.Outcome = plane.OutcomeFailed
			}
			if req.Error.Type != "" {
				info.Type = req.Error.Type
			}
			if req.Error.Message != "" {
				info.Message = req.Error.Message
			}
		}
		settle.Error = &info
	default:
		return plane.Invalid("state", req.State, "use succeeded|failed")
	}
	res, err := h.cfg.Driver.InvocationSettleMany(r.Context(), []plane.SettleParams{settle})
	if err != nil {
		return err
	}
	h.leases.drop(req.InvocationID) // settled, or the lease is gone: either way not ours
	if res[0] != nil {
		return res[0]
	}
	return writeBody(w, map[string]any{"invocation_id": req.InvocationID, "state": req.State})
}
