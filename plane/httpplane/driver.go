package httpplane

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// blockMargin is how much earlier than the caller's deadline the server is asked to end
// a blocked submit, so its answer (queue_full) arrives before the caller gives up.
func blockMargin(left time.Duration) time.Duration {
	return min(left/10, 100*time.Millisecond)
}

// repeatMin is the least time before the caller's deadline for which a blocked submit the
// server's long-poll limit ended is sent again (submitNow).
const repeatMin = 100 * time.Millisecond

// InvocationSubmitMany implements plane.Driver. Invocations without an ID get a ULID made
// here, so the call is retried safely. A submit blocked by a full queue (on_full=block)
// waits until ctx ends, repeating the request when the server's long-poll limit ends it
// first.
//
// Concurrent calls to one queue coalesce: while one submit request of the queue is in
// flight, the submits of later callers queue up and go out together in the next request
// (see submitGroup); each caller gets its own results or error.
func (d *Driver) InvocationSubmitMany(ctx context.Context, params *plane.SubmitManyParams) ([]plane.SubmitResult, error) {
	if err := params.Validate(); err != nil {
		return nil, err
	}
	// The ids are made before grouping, so every repeat (of the coalesced request, or of
	// one caller's submit alone after it failed) carries the same ones.
	withIDs := &plane.SubmitManyParams{Namespace: params.Namespace, Queue: params.Queue,
		Invocations: make([]plane.SubmitParams, len(params.Invocations))}
	copy(withIDs.Invocations, params.Invocations)
	now := d.cfg.Now()
	for i := range withIDs.Invocations {
		if withIDs.Invocations[i].ID == "" {
			withIDs.Invocations[i].ID = d.ids.New(now)
		}
	}
	return d.submits.do(ctx, d, withIDs)
}

// submitNow is one submit request of params (whose invocations all have ids), repeated
// as InvocationSubmitMany says.
func (d *Driver) submitNow(ctx context.Context, params *plane.SubmitManyParams) ([]plane.SubmitResult, error) {
	req := &api.SubmitBatchRequest{Invocations: make([]api.SubmitInvocation, len(params.Invocations))}
	for i := range params.Invocations {
		req.Invocations[i] = api.NewSubmitInvocation(&params.Invocations[i])
	}
	// The request must outlive the caller's deadline a little: the server ends the block
	// just before it and answers queue_full, which the caller must see rather than its
	// own deadline. An explicit cancel still ends the request at once.
	reqCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	defer context.AfterFunc(ctx, func() {
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			cancel()
		}
	})()
	for {
		left, hasDeadline := remaining(ctx)
		req.MaxWait = 0
		wait := d.cfg.LongPollMax
		if hasDeadline {
			wait = min(wait, max(left-blockMargin(left), time.Millisecond))
		}
		req.MaxWait = api.Seconds(wait)
		var out api.SubmitBatchResponse
		// Every invocation carries its id: a repeated submit finds it and adds nothing, so
		// the submit rides out an outage until ctx's deadline.
		err := d.do(ctx, &call{method: "POST", path: queuePath(params.Namespace, params.Queue) + "/invocations/batch", body: req, out: &out, safe: true,
			wait: wait, ctx: reqCtx, until: d.deadline(ctx)})
		var ae *plane.AdmissionError
		if errors.As(err, &ae) && errors.Is(ae.Cause, context.DeadlineExceeded) && ctx.Err() == nil {
			// The server's limit ended the block, not the caller's deadline: ask again while
			// the time left holds a request and the server's first transaction. With less
			// (repeatMin), the queue_full just answered is the answer: a repeat sent with a
			// few milliseconds left ended in the server's own context error, not queue_full
			// (seen under the race detector on a loaded machine).
			if left, ok := remaining(ctx); !ok || left > repeatMin {
				continue
			}
		}
		if err != nil {
			return nil, err
		}
		if len(out.Results) != len(params.Invocations) {
			return nil, fmt.Errorf("submit: the server answered %d results for %d invocations", len(out.Results), len(params.Invocations))
		}
		res := make([]plane.SubmitResult, len(out.Results))
		for i, r := range out.Results {
			res[i] = plane.SubmitResult{ID: r.ID, Existing: r.Existing}
		}
		return res, nil
	}
}

// InvocationClaimMany implements plane.Driver. A claim is not repeated once sent (a lost
// answer leaves its jobs leased until the lease expires); a Wait longer than LongPollMax
// is several requests. A claim whose ctx ends takes no job: its request's connection
// closes, and the server gives back what it claimed for a request whose context ended or
// whose answer could not be sent; jobs answered after ctx ended are given back here (see
// claimed), and ctx's error is returned.
func (d *Driver) InvocationClaimMany(ctx context.Context, params *plane.ClaimParams) ([]*plane.Job, error) {
	if err := params.Validate(); err != nil {
		return nil, err
	}
	end := time.Now().Add(params.Wait)
	for {
		wait := max(min(time.Until(end), d.cfg.LongPollMax), 0)
		if params.Wait == 0 {
			wait = 0
		}
		req := &api.ClaimRequest{Kind: string(params.Kind),
			Temperature: params.Temperature, Max: params.Max, LeaseTTL: api.Seconds(params.LeaseTTL),
			Wait: api.Seconds(wait), Worker: params.Worker, Queues: params.Queues, Offers: api.NewOffers(params.Offers),
			WarmHostKeys: params.WarmHostKeys}
		var out api.ClaimResponse
		if err := d.do(ctx, &call{method: "POST", path: queuePath(params.Namespace, params.Queue) + "/claim", body: req, out: &out, wait: wait, claims: true}); err != nil {
			return nil, err
		}
		if len(out.Jobs) > 0 || wait == 0 || !time.Now().Before(end) {
			jobs := d.claimed(ctx, out.Jobs, params.LeaseTTL)
			if len(out.Jobs) > 0 && ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return jobs, nil
		}
	}
}

// claimed turns a claim's answer into jobs. When ctx ended while the answer was on its way
// (the caller went away: it is not a claimer), the jobs are given back at once
// (plane.ReleaseAbandoned) and none is returned, instead of staying held until their
// lease expires.
//
// Each job's lease is reckoned to end leaseTTL (0: the default) after the answer arrived
// (leaseBook).
func (d *Driver) claimed(ctx context.Context, answer []api.Job, leaseTTL time.Duration) []*plane.Job {
	arrived := time.Now()
	jobs := make([]*plane.Job, len(answer))
	for i := range answer {
		jobs[i] = answer[i].Plane()
		d.leases.note(jobs[i].ID, plane.LeaseHeldUntil(arrived, leaseTTL))
	}
	if len(jobs) > 0 && ctx.Err() != nil {
		plane.ReleaseAbandoned(ctx, d, jobs) //nolint:errcheck // a failed release leaves the jobs to their lease's expiry
		return nil
	}
	return jobs
}

// InvocationSettleMany implements plane.Driver. A settle is fenced by its lease token, so
// repeating it is harmless: it is retried after connection failures and 502/503/504 until
// ctx ends or the latest lease of its jobs would have expired (see leaseEnd). A settle that
// reached the server before the failure answers lease_lost for that job on the repeat.
//
// Concurrent calls coalesce: while one settle request is in flight, the settles of later
// callers queue up and go out together in the next request (see settleGroup).
func (d *Driver) InvocationSettleMany(ctx context.Context, params []plane.SettleParams) ([]error, error) {
	if len(params) > plane.SettleManyMax {
		return inTurns(ctx, params, d.InvocationSettleMany)
	}
	for i := range params {
		if err := params[i].Validate(); err != nil {
			return nil, err
		}
	}
	out, err := d.outOfScope(ctx, len(params), func(i int) (string, plane.Scope) { return params[i].ID, params[i].Scope })
	if err != nil {
		return nil, err
	}
	send, at := inScope(params, out)
	if at == nil {
		return d.settles.do(ctx, d, params)
	}
	if len(send) > 0 {
		errs, err := d.settles.do(ctx, d, send)
		if err != nil {
			return nil, err
		}
		for k, e := range errs {
			out[at[k]] = e
		}
	}
	return out, nil
}

// inTurns calls f on params in turns of at most plane.SettleManyMax (what the server takes
// in one request) and joins the answers, item by item.
func inTurns[P, R any](ctx context.Context, params []P, f func(context.Context, []P) ([]R, error)) ([]R, error) {
	out := make([]R, 0, len(params))
	for len(params) > 0 {
		n := min(len(params), plane.SettleManyMax)
		res, err := f(ctx, params[:n])
		if err != nil {
			return nil, err
		}
		out, params = append(out, res...), params[n:]
	}
	return out, nil
}

// settleNow is one POST /v1/settle of params, retried as InvocationSettleMany says.
func (d *Driver) settleNow(ctx context.Context, params []plane.SettleParams) ([]error, error) {
	req := &api.SettlesRequest{Settles: make([]api.Settle, len(params))}
	ids := make([]string, len(params))
	for i := range params {
		req.Settles[i] = api.NewSettle(&params[i])
		ids[i] = params[i].ID
	}
	var out api.SettlesResponse
	if err := d.do(ctx, &call{method: "POST", path: "/v1/settle", body: req, out: &out, safe: true, until: d.leaseEnd(ctx, ids)}); err != nil {
		return nil, err
	}
	for _, id := range ids {
		d.leases.forget(id)
	}
	if len(out.Results) != len(params) {
		return nil, fmt.Errorf("settle: the server answered %d results for %d settles", len(out.Results), len(params))
	}
	errs := make([]error, len(out.Results))
	for i, r := range out.Results {
		if r.Error != nil {
			errs[i] = r.Error.Err()
		}
	}
	return errs, nil
}

// InvocationHeartbeatMany implements plane.Driver. Heartbeats are fenced, so they are
// retried like settles: until ctx ends or the leases would have expired.
func (d *Driver) InvocationHeartbeatMany(ctx context.Context, params []plane.HeartbeatParams) ([]plane.HeartbeatResult, error) {
	if len(params) > plane.SettleManyMax {
		return inTurns(ctx, params, d.InvocationHeartbeatMany)
	}
	denied, err := d.outOfScope(ctx, len(params), func(i int) (string, plane.Scope) { return params[i].ID, params[i].Scope })
	if err != nil {
		return nil, err
	}
	if send, at := inScope(params, denied); at != nil {
		out := make([]plane.HeartbeatResult, len(params))
		for i, e := range denied {
			out[i].Err = e
		}
		if len(send) > 0 {
			for k := range send {
				send[k].Scope = plane.Scope{} // checked
			}
			res, err := d.InvocationHeartbeatMany(ctx, send)
			if err != nil {
				return nil, err
			}
			for k, r := range res {
				out[at[k]] = r
			}
		}
		return out, nil
	}
	req := &api.HeartbeatsRequest{Heartbeats: make([]api.Heartbeat, len(params))}
	ids := make([]string, len(params))
	for i, p := range params {
		req.Heartbeats[i] = api.Heartbeat{ID: p.ID, Token: p.Token, LeaseTTL: api.Seconds(p.LeaseTTL)}
		ids[i] = p.ID
	}
	var out api.HeartbeatsResponse
	c := &call{method: "POST", path: "/v1/heartbeat", body: req, out: &out, safe: true, until: d.leaseEnd(ctx, ids)}
	if err := d.do(ctx, c); err != nil {
		return nil, err
	}
	if len(out.Results) != len(params) {
		return nil, fmt.Errorf("heartbeat: the server answered %d results for %d heartbeats", len(out.Results), len(params))
	}
	res := make([]plane.HeartbeatResult, len(out.Results))
	for i, r := range out.Results {
		res[i] = plane.HeartbeatResult{LeaseExpiresAt: r.LeaseExpiresAt}
		if r.Error != nil {
			res[i].Err = r.Error.Err()
			d.leases.forget(params[i].ID)
		} else {
			d.leases.note(params[i].ID, plane.LeaseHeldUntil(c.sent, params[i].LeaseTTL))
		}
	}
	return res, nil
}

// InvocationGet implements plane.Driver.
func (d *Driver) InvocationGet(ctx context.Context, id string) (*plane.Invocation, error) {
	if err := plane.ValidateID(id); err != nil {
		return nil, err
	}
	var out api.Invocation
	if err := d.do(ctx, &call{method: "GET", path: "/v1/invocations/" + pathID(id), out: &out, safe: true, until: d.deadline(ctx)}); err != nil {
		return nil, err
	}
	return out.Plane(), nil
}

// InvocationWait implements plane.Driver. A Timeout longer than LongPollMax is several
// requests.
func (d *Driver) InvocationWait(ctx context.Context, params *plane.WaitParams) (*plane.Invocation, error) {
	if err := plane.ValidateID(params.ID); err != nil {
		return nil, err
	}
	if params.Timeout < 0 {
		return nil, plane.Invalid("wait timeout", params.Timeout, "use a duration ≥ 0")
	}
	end := time.Now().Add(params.Timeout)
	for {
		wait := max(min(time.Until(end), d.cfg.LongPollMax), 0)
		if params.Timeout == 0 {
			wait = 0
		}
		var out api.WaitResponse
		err := d.do(ctx, &call{method: "GET", path: "/v1/invocations/" + pathID(params.ID) + "/wait",
			query: url.Values{"timeout": {strconv.FormatFloat(api.Seconds(wait), 'g', -1, 64)}}, out: &out, safe: true, wait: wait,
			waitParam: "timeout", until: d.waitDeadline(ctx, params.Timeout > 0, end)})
		if err != nil {
			return nil, err
		}
		if out.Done && out.Invocation != nil {
			return out.Invocation.Plane(), nil
		}
		if wait > 0 && time.Now().Before(end) {
			continue
		}
		return nil, plane.ErrTimeout
	}
}

// InvocationCancel implements plane.Driver. Not repeated once sent (a second cancel
// would answer false).
func (d *Driver) InvocationCancel(ctx context.Context, id string) (bool, error) {
	return d.changed(ctx, "POST", "/v1/invocations/"+pathID(id)+"/cancel", id)
}

// InvocationKill implements plane.Driver. Not repeated once sent.
func (d *Driver) InvocationKill(ctx context.Context, id string) (bool, error) {
	return d.changed(ctx, "POST", "/v1/invocations/"+pathID(id)+"/kill", id)
}

func (d *Driver) changed(ctx context.Context, method, path, id string) (bool, error) {
	if err := plane.ValidateID(id); err != nil {
		return false, err
	}
	var out api.ChangedResponse
	if err := d.do(ctx, &call{method: method, path: path, out: &out}); err != nil {
		return false, err
	}
	return out.Changed, nil
}

func queuePath(namespace, queue string) string {
	return "/v1/namespaces/" + pathID(namespace) + "/queues/" + pathID(queue)
}

// InvocationCount implements plane.Driver.
func (d *Driver) InvocationCount(ctx context.Context, params *plane.CountParams) (int64, error) {
	if err := plane.ValidateNamespace(params.Namespace); err != nil {
		return 0, err
	}
	if err := plane.ValidateName("queue name", params.Queue); err != nil {
		return 0, err
	}
	var out api.CountResponse
	err := d.do(ctx, &call{method: "GET", path: queuePath(params.Namespace, params.Queue) + "/count",
		query: url.Values{"state": {string(params.State)}}, out: &out, safe: true, until: d.deadline(ctx)})
	return out.Count, err
}

// QueueStatsList implements plane.Driver.
func (d *Driver) QueueStatsList(ctx context.Context, namespace string) ([]plane.QueueStats, error) {
	var q url.Values
	if namespace != "" {
		q = url.Values{"namespace": {namespace}}
	}
	var out api.QueuesResponse
	if err := d.do(ctx, &call{method: "GET", path: "/v1/queues", query: q, out: &out, safe: true, until: d.deadline(ctx)}); err != nil {
		return nil, err
	}
	res := make([]plane.QueueStats, len(out.Queues))
	for i := range out.Queues {
		res[i] = out.Queues[i].Plane()
	}
	return res, nil
}

// DemandList implements plane.Driver (GET /v1/demand).
func (d *Driver) DemandList(ctx context.Context, namespace string) ([]plane.ShapeDemand, error) {
	var q url.Values
	if namespace != "" {
		q = url.Values{"namespace": {namespace}}
	}
	var out api.DemandResponse
	if err := d.do(ctx, &call{method: "GET", path: "/v1/demand", query: q, out: &out, safe: true, until: d.deadline(ctx)}); err != nil {
		return nil, err
	}
	res := make([]plane.ShapeDemand, len(out.Demand))
	for i := range out.Demand {
		res[i] = out.Demand[i].Plane()
	}
	return res, nil
}

// InvocationTrim implements plane.Driver.
func (d *Driver) InvocationTrim(ctx context.Context, params *plane.TrimParams) (int64, error) {
	var out api.TrimResponse
	err := d.do(ctx, &call{method: "POST", path: "/v1/trim", body: &api.TrimRequest{Namespace: params.Namespace,
		Queue: params.Queue, FinishedBefore: params.FinishedBefore}, out: &out, safe: true})
	return out.Deleted, err
}

// FramePost implements plane.Driver. Not repeated once sent (it would append twice).
func (d *Driver) FramePost(ctx context.Context, params *plane.FramePostParams) (int64, error) {
	if err := params.Journal.Validate(); err != nil {
		return 0, err
	}
	if err := plane.ValidateValueSize("frame value", len(params.Value)); err != nil {
		return 0, err
	}
	j := params.Journal
	path := "/v1/invocations/" + pathID(j.InvocationID) + "/frames"
	if j.InvocationID == "" {
		path = queuePath(j.Namespace, j.Queue) + "/topics/" + pathID(j.Topic) + "/frames"
	}
	req := &api.PostRequest{Token: params.Token, Value: api.Value{Wire: params.Value}, Final: params.Final}
	if j.InvocationID == "" {
		req.Token = ""
	}
	var out api.PostResponse
	err := d.do(ctx, &call{method: "POST", path: path, body: req, out: &out})
	return out.Seq, err
}

// FrameRead implements plane.Driver. A Wait longer than LongPollMax is several requests.
func (d *Driver) FrameRead(ctx context.Context, params *plane.FrameReadParams) (*plane.FrameReadResult, error) {
	j := params.Journal
	if err := j.Validate(); err != nil {
		return nil, err
	}
	path := "/v1/invocations/" + pathID(j.InvocationID) + "/frames"
	if j.InvocationID == "" {
		path = queuePath(j.Namespace, j.Queue) + "/topics/" + pathID(j.Topic) + "/frames"
	}
	end := time.Now().Add(params.Wait)
	for {
		wait := max(min(time.Until(end), d.cfg.LongPollMax), 0)
		if params.Wait == 0 {
			wait = 0
		}
		q := url.Values{"since": {strconv.FormatInt(params.Since, 10)}}
		if params.Limit != 0 {
			q.Set("limit", strconv.Itoa(params.Limit))
		}
		var out api.FramesResponse
		c := &call{method: "GET", path: path, query: q, out: &out, safe: true, wait: wait,
			until: d.waitDeadline(ctx, params.Wait > 0, end)}
		if wait > 0 {
			q.Set("wait", strconv.FormatFloat(api.Seconds(wait), 'g', -1, 64))
			c.waitParam = "wait"
		}
		if err := d.do(ctx, c); err != nil {
			return nil, err
		}
		if len(out.Frames) > 0 || out.Closed || wait == 0 || !time.Now().Before(end) {
			return out.Plane(), nil
		}
	}
}

// QueueAdmissionSet implements plane.Driver.
func (d *Driver) QueueAdmissionSet(ctx context.Context, params *plane.AdmissionParams) (*plane.Admission, error) {
	if err := params.Admission.Validate(); err != nil {
		return nil, err
	}
	var out api.AdmissionResponse
	if err := d.do(ctx, &call{method: "PUT", path: queuePath(params.Namespace, params.Queue) + "/admission",
		body: api.NewAdmission(&params.Admission), out: &out, safe: true, ifMatch: params.IfMatch}); err != nil {
		return nil, err
	}
	return out.Admission.Plane(), nil
}

// QueueAdmissionGet implements plane.Driver.
func (d *Driver) QueueAdmissionGet(ctx context.Context, namespace, queue string) (*plane.Admission, error) {
	var out api.AdmissionResponse
	if err := d.do(ctx, &call{method: "GET", path: queuePath(namespace, queue) + "/admission", out: &out, safe: true, until: d.deadline(ctx)}); err != nil {
		return nil, err
	}
	return out.Admission.Plane(), nil
}

// QueueAdmissionDelete implements plane.Driver. Not repeated once sent.
func (d *Driver) QueueAdmissionDelete(ctx context.Context, namespace, queue string) (bool, error) {
	var out api.ChangedResponse
	err := d.do(ctx, &call{method: "DELETE", path: queuePath(namespace, queue) + "/admission", out: &out})
	return out.Changed, err
}

func workerPath(namespace, id string) string {
	return "/v1/namespaces/" + pathID(namespace) + "/workers/" + pathID(id)
}

// WorkerRegister implements plane.Driver.
func (d *Driver) WorkerRegister(ctx context.Context, info *plane.WorkerInfo) error {
	if err := plane.ValidateNamespace(info.Namespace); err != nil {
		return err
	}
	if info.ID == "" {
		return plane.Invalid("worker id", info.ID, "use 1–128 bytes (a ULID)")
	}
	return d.do(ctx, &call{method: "PUT", path: workerPath(info.Namespace, info.ID), body: &api.WorkerRegisterRequest{
		Host: info.Host, PID: info.PID, Queues: info.Queues, StartedAt: info.StartedAt,
		Provider: info.Provider, LaunchID: info.LaunchID, Running: info.Running, IdleSince: info.IdleSince,
		Offers: api.NewOffers(info.Offers), WarmHostKeys: info.WarmHostKeys}, safe: true})
}

// WorkerList implements plane.Driver.
func (d *Driver) WorkerList(ctx context.Context, params *plane.WorkerListParams) ([]plane.WorkerInfo, error) {
	q := url.Values{}
	if params.Namespace != "" {
		q.Set("namespace", params.Namespace)
	}
	if params.SeenWithin > 0 {
		q.Set("seen_within", strconv.FormatFloat(api.Seconds(params.SeenWithin), 'g', -1, 64))
	}
	var out api.WorkersResponse
	if err := d.do(ctx, &call{method: "GET", path: "/v1/workers", query: q, out: &out, safe: true, until: d.deadline(ctx)}); err != nil {
		return nil, err
	}
	res := make([]plane.WorkerInfo, len(out.Workers))
	for i := range out.Workers {
		res[i] = out.Workers[i].Plane()
	}
	return res, nil
}

// WorkerRemove implements plane.Driver.
func (d *Driver) WorkerRemove(ctx context.Context, namespace, id string) error {
	if err := plane.ValidateNamespace(namespace); err != nil {
		return err
	}
	if id == "" {
		return plane.Invalid("worker id", id, "use 1–128 bytes (a ULID)")
	}
	return d.do(ctx, &call{method: "DELETE", path: workerPath(namespace, id), safe: true})
}

// InvocationList implements plane.Driver.
func (d *Driver) InvocationList(ctx context.Context, params *plane.ListParams) (*plane.ListPage, error) {
	if err := plane.ValidateNamespace(params.Namespace); err != nil {
		return nil, err
	}
	if err := plane.ValidateName("queue name", params.Queue); err != nil {
		return nil, err
	}
	q := url.Values{}
	if params.State != "" {
		q.Set("state", string(params.State))
	}
	if params.KeyPrefix != "" {
		q.Set("key_prefix", params.KeyPrefix)
	}
	if params.After != "" {
		q.Set("after", params.After)
	}
	if params.Limit != 0 {
		q.Set("limit", strconv.Itoa(params.Limit))
	}
	if params.Oldest {
		q.Set("order", "oldest")
	}
	var out api.ListResponse
	if err := d.do(ctx, &call{method: "GET", path: queuePath(params.Namespace, params.Queue) + "/invocations", query: q, out: &out,
		safe: true, until: d.deadline(ctx)}); err != nil {
		return nil, err
	}
	page := &plane.ListPage{Invocations: make([]*plane.Invocation, len(out.Invocations)), Next: out.Next}
	for i := range out.Invocations {
		page.Invocations[i] = out.Invocations[i].Plane()
	}
	return page, nil
}

// TokenCreate implements plane.Driver: it stores tok's hash; the secret never leaves the
// caller. Errors: *plane.InvalidError (also for a token without a hash).
func (d *Driver) TokenCreate(ctx context.Context, tok *plane.TokenInfo) error {
	if len(tok.Hash) == 0 {
		return plane.Invalid("token", tok.ID, "give an id, a hash, namespace and queue globs, and at least one permission")
	}
	t := &api.TokenCreateRequest{ID: tok.ID, Hash: tok.Hash, Namespace: tok.Namespace, Queue: tok.Queue,
		Permissions: make([]string, len(tok.Permissions)), CreatedAt: tok.CreatedAt, ExpiresAt: tok.ExpiresAt}
	for i, p := range tok.Permissions {
		t.Permissions[i] = string(p)
	}
	var out api.TokenCreateResponse
	return d.do(ctx, &call{method: "POST", path: "/v1/tokens", body: t, out: &out})
}

// TokenGet implements plane.Driver.
func (d *Driver) TokenGet(ctx context.Context, hash []byte) (*plane.TokenInfo, error) {
	var out api.Token
	if err := d.do(ctx, &call{method: "POST", path: "/v1/tokens/lookup", body: &api.TokenLookupRequest{Hash: hash}, out: &out, safe: true, until: d.deadline(ctx)}); err != nil {
		return nil, err
	}
	return out.Plane(), nil
}

// TokenList implements plane.Driver. The server does not send hashes: Hash is nil.
func (d *Driver) TokenList(ctx context.Context) ([]plane.TokenInfo, error) {
	var out api.TokensResponse
	if err := d.do(ctx, &call{method: "GET", path: "/v1/tokens", out: &out, safe: true, until: d.deadline(ctx)}); err != nil {
		return nil, err
	}
	res := make([]plane.TokenInfo, len(out.Tokens))
	for i := range out.Tokens {
		res[i] = *out.Tokens[i].Plane()
	}
	return res, nil
}

// TokenRevoke implements plane.Driver. Not repeated once sent.
func (d *Driver) TokenRevoke(ctx context.Context, id string) (bool, error) {
	var out api.ChangedResponse
	err := d.do(ctx, &call{method: "DELETE", path: "/v1/tokens/" + pathID(id), out: &out})
	return out.Changed, err
}

// Maintain implements plane.Driver.
func (d *Driver) Maintain(ctx context.Context) error {
	return d.do(ctx, &call{method: "POST", path: "/v1/maintain", safe: true})
}
