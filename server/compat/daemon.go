package compat

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/wire"
)

// LeaseQueue is the queue whose topics hold the lease records of jobs claimed through
// /v1/daemon/poll: topic <invocation id> of the job's namespace, one frame per claim
// (leaseRecord). They are ordinary topics, trimmed by retention like any other; a token
// that may read that queue's topics may read the lease tokens of that namespace's
// compatibility jobs (docs/http-api.md).
const LeaseQueue = "_leases"

// leaseRecord is one claim's lease, as stored in the plane.
type leaseRecord struct {
	Token   string `msgpack:"token"`
	Worker  string `msgpack:"worker"`
	Attempt int    `msgpack:"attempt"`
}

func leaseJournal(namespace, id string) plane.Journal {
	return plane.Journal{Namespace: namespace, Queue: LeaseQueue, Topic: id}
}

// record stores the lease of job, claimed by worker, in the plane and in this replica's
// memory.
func (h *handlers) record(ctx context.Context, job *plane.Job, worker string) error {
	h.leases.put(job.ID, held{token: job.Token, worker: worker, namespace: job.Namespace, queue: job.Queue, expiresAt: job.LeaseExpiresAt})
	v, err := wire.Marshal(leaseRecord{Token: job.Token, Worker: worker, Attempt: job.Attempt})
	if err != nil {
		return fmt.Errorf("encode lease record: %w", err)
	}
	_, err = h.cfg.Driver.FramePost(ctx, &plane.FramePostParams{Journal: leaseJournal(job.Namespace, job.ID), Value: v})
	return err
}

// leaseOf returns the lease of the running attempt of inv that a poll of any replica
// recorded; ok is false when none did (a job claimed otherwise, or an attempt not claimed
// through poll).
func (h *handlers) leaseOf(ctx context.Context, inv *plane.Invocation) (held, bool, error) {
	var last []byte
	since := int64(-1)
	for {
		res, err := h.cfg.Driver.FrameRead(ctx, &plane.FrameReadParams{Journal: leaseJournal(inv.Namespace, inv.ID), Since: since})
		if err != nil {
			if errors.Is(err, plane.ErrNotFound) {
				return held{}, false, nil
			}
			return held{}, false, err
		}
		if len(res.Frames) == 0 {
			break
		}
		last = res.Frames[len(res.Frames)-1].Value
		since = res.Frames[len(res.Frames)-1].Seq
	}
	if last == nil {
		return held{}, false, nil
	}
	var rec leaseRecord
	if err := wire.Unmarshal(last, &rec); err != nil {
		return held{}, false, fmt.Errorf("decode lease record of %s: %w", inv.ID, err)
	}
	if rec.Attempt != inv.Attempt {
		return held{}, false, nil
	}
	return held{token: rec.Token, worker: rec.Worker}, true, nil
}

// held is the lease of one job claimed through /v1/daemon/poll.
type held struct {
	token  string
	worker string
	// namespace and queue are the job's: a worker id is the client's choice, so a poll
	// extends only the leases of its namespace that its token may consume (leases.ofWorker).
	namespace, queue string
	expiresAt        time.Time
}

// leases keeps, in this replica's memory, the fencing token of every job claimed through
// it, by invocation id, for extending a worker's leases on its next poll. The token a
// settle or a post uses is the lease record in the plane (leaseOf), which every replica
// reads: the real package's ack names only the invocation, never a token, and may reach any
// replica behind a load balancer.
type leases struct {
	mu   sync.Mutex
	byID map[string]held
	now  func() time.Time // the plane's clock, on which a held's expiresAt was stamped
}

func newLeases(now func() time.Time) *leases { return &leases{byID: map[string]held{}, now: now} }

func (l *leases) put(id string, h held) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
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

// ofWorker returns the ids of the jobs worker holds through this replica in namespace, of
// queues p may consume, and their tokens: another tenant's poll naming the same worker id
// extends nothing of this one's.
func (l *leases) ofWorker(p Principal, namespace, worker string) (ids, tokens []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, h := range l.byID {
		if h.worker == worker && h.namespace == namespace && p.Allows(h.namespace, h.queue, plane.PermissionConsume) {
			ids, tokens = append(ids, id), append(tokens, h.token)
		}
	}
	return ids, tokens
}

// extend heartbeats the leases of ids, as held, to LeaseTTL from now; a lease found lost is
// forgotten. Failures are not the request's: the next settle reports them.
func (h *handlers) extend(r *http.Request, ids []string, tokens []string) {
	if len(ids) == 0 {
		return
	}
	params := make([]plane.HeartbeatParams, 0, len(ids))
	for i, id := range ids {
		params = append(params, plane.HeartbeatParams{ID: id, Token: tokens[i], LeaseTTL: h.cfg.LeaseTTL})
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
		if x, ok := h.leases.get(params[i].ID); ok && x.token == params[i].Token {
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
	ids, tokens := h.leases.ofWorker(p, namespace, req.WorkerID)
	h.extend(r, ids, tokens)
	ctx, wait, release, err := h.longPoll(r, p, seconds(req.TimeoutS))
	if err != nil {
		return err
	}
	defer release()
	jobs, err := h.cfg.Driver.InvocationClaimMany(ctx, &plane.ClaimParams{
		Namespace: namespace, Queue: req.Queue, Kind: plane.KindFIFO, Max: 1,
		LeaseTTL: h.cfg.LeaseTTL, Wait: wait, Worker: req.WorkerID,
	})
	if err != nil {
		return stopped(ctx, r, err)
	}
	if len(jobs) > 0 {
		// A token revoked or expired while the poll waited gets no job: given back at once,
		// unrun (its attempt not counted), as our claim does.
		if err := h.recheck(r, p); err != nil {
			_ = plane.ReleaseAbandoned(r.Context(), h.cfg.Driver, jobs)
			return err
		}
	}
	commands := []map[string]any{}
	for _, job := range jobs {
		if err := h.record(r.Context(), job, req.WorkerID); err != nil {
			// Without its record no replica could settle the job: give it back at once, unrun
			// (its attempt not counted).
			_, _ = h.cfg.Driver.InvocationSettleMany(context.WithoutCancel(r.Context()), []plane.SettleParams{{
				ID: job.ID, Token: job.Token, Outcome: plane.OutcomeReleased,
				Error: &plane.ErrorInfo{Type: "unavailable", Message: "the lease record could not be stored"}}})
			return err
		}
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
	inv, err := h.invocation(r.Context(), p, "", req.InvocationID, plane.PermissionConsume)
	if err != nil {
		return err
	}
	x, ok, err := h.leaseOf(r.Context(), inv)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: no worker polled invocation %s's attempt %d", plane.ErrLeaseLost, req.InvocationID, inv.Attempt)
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
