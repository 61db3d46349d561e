package lakeshore

import (
	"context"
	"fmt"
	"iter"
	"path"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

type (
	// QueueStats are one queue's counts by state and its admission block (an alias of
	// plane.QueueStats).
	QueueStats = plane.QueueStats
	// WorkerInfo is one live worker of the registry: id, namespace, host, pid, queues,
	// start and last heartbeat (an alias of plane.WorkerInfo).
	WorkerInfo = plane.WorkerInfo
	// TokenInfo is a stored access token, without its secret (an alias of plane.TokenInfo).
	TokenInfo = plane.TokenInfo
	// Permission is what an access token allows (an alias of plane.Permission).
	Permission = plane.Permission
)

// The permissions of access tokens.
const (
	// PermissionSubmit: submit, and read what one submitted.
	PermissionSubmit = plane.PermissionSubmit
	// PermissionConsume: claim, settle, heartbeat, post; register as a worker.
	PermissionConsume = plane.PermissionConsume
	// PermissionRead: get, result, stream, count, list, listen.
	PermissionRead = plane.PermissionRead
	// PermissionAdmin: everything, including tokens and admission.
	PermissionAdmin = plane.PermissionAdmin
)

// QueueStats returns the counts by state (and the admission block) of every queue of
// namespace; "" lists every namespace the caller may see. Errors: *InvalidError for a bad
// namespace name.
func (d *Dispatch) QueueStats(ctx context.Context, namespace string) ([]QueueStats, error) {
	if namespace != "" {
		if err := plane.ValidateNamespace(namespace); err != nil {
			return nil, err
		}
	}
	return d.drv.QueueStatsList(ctx, namespace)
}

// Unplaceable is one queue's queued work that no live worker can place (an alias of
// plane.Unplaceable): jobs with a requirement no live worker of the queue offers.
type Unplaceable = plane.Unplaceable

// Unplaceable returns, per queue of namespace ("" for every namespace the caller may see),
// the queued jobs with a requirement that no live registered worker of the queue offers
// (plane.UnplaceableWork): they wait, since a worker without offers never takes them
// (docs/fabric.md). It reads the demand counters (Driver.DemandList) and the registry
// (Driver.WorkerList), never the jobs themselves, and nothing on the claim path. Queues
// whose work every shape can be placed are left out. Errors: *InvalidError for a bad
// namespace name; the planes' errors of the two reads.
func (d *Dispatch) Unplaceable(ctx context.Context, namespace string) ([]Unplaceable, error) {
	if namespace != "" {
		if err := plane.ValidateNamespace(namespace); err != nil {
			return nil, err
		}
	}
	demand, err := d.drv.DemandList(ctx, namespace)
	if err != nil {
		return nil, err
	}
	if len(demand) == 0 {
		return nil, nil
	}
	workers, err := d.drv.WorkerList(ctx, &plane.WorkerListParams{Namespace: namespace})
	if err != nil {
		return nil, err
	}
	return plane.UnplaceableWork(demand, workers), nil
}

// WorkersOptions configure Dispatch.Workers. A nil *WorkersOptions means all defaults.
type WorkersOptions struct {
	// AllNamespaces lists the workers of every namespace instead of the Dispatch's.
	// Defaults to false.
	AllNamespaces bool
	// SeenWithin hides workers whose last heartbeat is older. Defaults to 1 minute
	// (plane.WorkerSeenWithinDefault).
	SeenWithin time.Duration
}

// Workers lists the live workers of the Dispatch's namespace (every namespace with
// opts.AllNamespaces), oldest start first. Errors: *InvalidError for a negative SeenWithin.
func (d *Dispatch) Workers(ctx context.Context, opts *WorkersOptions) ([]WorkerInfo, error) {
	var o WorkersOptions
	if opts != nil {
		o = *opts
	}
	if o.SeenWithin < 0 {
		return nil, plane.Invalid("seen within", o.SeenWithin, "use a duration ≥ 0 (0: the default, 1m)")
	}
	p := &plane.WorkerListParams{Namespace: d.cfg.Namespace, SeenWithin: o.SeenWithin}
	if o.AllNamespaces {
		p.Namespace = ""
	}
	return d.drv.WorkerList(ctx, p)
}

// ListOptions filter and order Queue.List. A nil *ListOptions means all defaults.
type ListOptions struct {
	// State keeps only invocations in this state. Defaults to "": every state.
	State State
	// KeyPrefix keeps only invocations whose idempotency key starts with it. Defaults to
	// "": all.
	KeyPrefix string
	// After is the cursor of the previous page (ListPage.Next). Defaults to "": the first
	// page.
	After string
	// Limit caps one page: 1–1000. Defaults to 100 (plane.ListLimitDefault).
	Limit int
	// Oldest lists oldest first. Defaults to false: newest first.
	Oldest bool
}

// ListPage is one page of Queue.List.
type ListPage struct {
	// Invocations are the page's invocations. Listing may leave payloads and results out:
	// Get one by id for its whole record.
	Invocations []*Invocation
	// Next is the cursor of the following page (pass it as ListOptions.After); "" when this
	// page is the last.
	Next string
}

// List returns one page of the queue's invocations, newest first (oldest first with
// opts.Oldest), filtered by state and key prefix. Pages are cursor-based: pass Next as
// opts.After for the following page; invocations submitted meanwhile never shift a page.
// A page costs O(Limit) whatever the queue's size. Errors: *InvalidError for a bad state,
// limit or cursor.
func (q *Queue) List(ctx context.Context, opts *ListOptions) (*ListPage, error) {
	var o ListOptions
	if opts != nil {
		o = *opts
	}
	if o.State != "" {
		if _, err := plane.ParseState(string(o.State)); err != nil {
			return nil, err
		}
	}
	if o.Limit < 0 || o.Limit > plane.ListLimitMax {
		return nil, plane.Invalid("limit", o.Limit, fmt.Sprintf("use 1–%d, or 0 for the default (%d)", plane.ListLimitMax, plane.ListLimitDefault))
	}
	page, err := q.d.drv.InvocationList(ctx, &plane.ListParams{
		Namespace: q.opts.Namespace, Queue: q.name, State: o.State, KeyPrefix: o.KeyPrefix,
		After: o.After, Limit: o.Limit, Oldest: o.Oldest,
	})
	if err != nil {
		return nil, err
	}
	out := &ListPage{Invocations: make([]*Invocation, len(page.Invocations)), Next: page.Next}
	for i, inv := range page.Invocations {
		out.Invocations[i] = &Invocation{Invocation: *inv}
	}
	return out, nil
}

// All iterates over every invocation List finds from opts on, page after page; an error
// is the last element.
func (q *Queue) All(ctx context.Context, opts *ListOptions) iter.Seq2[*Invocation, error] {
	return func(yield func(*Invocation, error) bool) {
		var o ListOptions
		if opts != nil {
			o = *opts
		}
		for {
			page, err := q.List(ctx, &o)
			if err != nil {
				yield(nil, err)
				return
			}
			for _, inv := range page.Invocations {
				if !yield(inv, nil) {
					return
				}
			}
			if page.Next == "" {
				return
			}
			o.After = page.Next
		}
	}
}

// Admin is the administration handle of a plane: access tokens, trims across queues and
// maintenance passes. Over HTTP its calls need an admin token. Make one with
// Dispatch.Admin; it is cheap and safe for concurrent use.
type Admin struct {
	d *Dispatch
}

// Admin returns the administration handle of d's plane.
func (d *Dispatch) Admin() *Admin { return &Admin{d: d} }

// TokenSecretPrefix starts every token secret, so that secrets are easy to spot in a leak.
const TokenSecretPrefix = plane.TokenSecretPrefix

// TokenOptions describe a token to create. Namespace, Queue and Permissions are required:
// a token never covers every tenant by accident.
type TokenOptions struct {
	// ID names the token for listing and revoking. Defaults to a fresh ULID.
	ID string
	// Namespace is a glob (path.Match syntax, e.g. "team-a" or "team-*") of the namespaces
	// the token covers; "*" covers every namespace. Required.
	Namespace string
	// Queue is a glob of the queues the token covers; "*" covers every queue. Required.
	Queue string
	// Permissions are what the token allows. At least one is required.
	Permissions []Permission
	// TTL is how long the token lives. Defaults to 0: it never expires.
	TTL time.Duration
}

func (o *TokenOptions) validate() error {
	if len(o.Permissions) == 0 {
		return plane.Invalid("permissions", nil, "name at least one of submit, consume, read, admin")
	}
	for _, p := range o.Permissions {
		switch p {
		case PermissionSubmit, PermissionConsume, PermissionRead, PermissionAdmin,
			plane.PermissionDataPut, plane.PermissionDataRead:
		default:
			return plane.Invalid("permission", string(p), "use submit, consume, read, admin, data:put or data:read")
		}
	}
	for _, g := range []struct{ field, glob string }{{"namespace glob", o.Namespace}, {"queue glob", o.Queue}} {
		if _, err := path.Match(g.glob, ""); err != nil || g.glob == "" {
			return plane.Invalid(g.field, g.glob, `use a name or a glob such as "train-*" ("*" for all)`)
		}
	}
	if o.TTL < 0 {
		return plane.Invalid("token TTL", o.TTL, "use a duration ≥ 0 (0: never expires)")
	}
	return nil
}

// CreateToken makes a random secret, stores its SHA-256 hash in the plane as a token
// described by opts, and returns the secret with the stored token. The secret is returned
// once: only its hash is stored. Clients send it as $LAKESHORE_TOKEN.
// Errors: *InvalidError for missing or bad options; the plane's (an existing id).
func (a *Admin) CreateToken(ctx context.Context, opts *TokenOptions) (secret string, tok *TokenInfo, err error) {
	if opts == nil {
		return "", nil, plane.Invalid("token options", nil, "name the namespace and queue globs and the permissions")
	}
	if err := opts.validate(); err != nil {
		return "", nil, err
	}
	now := a.d.cfg.Now()
	secret, hash := plane.NewTokenSecret()
	tok = &TokenInfo{ID: opts.ID, Hash: hash, Namespace: opts.Namespace, Queue: opts.Queue,
		Permissions: append([]Permission(nil), opts.Permissions...), CreatedAt: now}
	if tok.ID == "" {
		tok.ID = a.d.topics.New(now)
	}
	if opts.TTL > 0 {
		tok.ExpiresAt = now.Add(opts.TTL)
	}
	if err := a.d.drv.TokenCreate(ctx, tok); err != nil {
		return "", nil, fmt.Errorf("create token: %w", err)
	}
	return secret, tok, nil
}

// Tokens returns every stored token, revoked ones included, oldest first (never secrets).
func (a *Admin) Tokens(ctx context.Context) ([]TokenInfo, error) { return a.d.drv.TokenList(ctx) }

// RevokeToken revokes token id and reports whether it was live. Errors: ErrNotFound.
func (a *Admin) RevokeToken(ctx context.Context, id string) (bool, error) {
	return a.d.drv.TokenRevoke(ctx, id)
}

// TrimOptions select what Admin.Trim deletes. A nil *TrimOptions means all defaults.
type TrimOptions struct {
	// Namespace restricts the trim to one namespace. Defaults to "": every namespace.
	Namespace string
	// Queue restricts the trim to one queue (of Namespace). Defaults to "": every queue.
	Queue string
	// OlderThan keeps invocations that finished more recently. Defaults to 0: every
	// terminal invocation.
	OlderThan time.Duration
}

// Trim deletes the terminal invocations (with their journals) that opts selects, freeing
// their keys, and returns how many it deleted; one still holding its key for a dedup
// window (SubmitOptions.UniqueFor) is kept until the window ends, not counted. Queue.Trim
// is the one-queue form.
// Errors: *InvalidError for a negative OlderThan or a bad name.
func (a *Admin) Trim(ctx context.Context, opts *TrimOptions) (int64, error) {
	var o TrimOptions
	if opts != nil {
		o = *opts
	}
	if o.OlderThan < 0 {
		return 0, plane.Invalid("trim age", o.OlderThan, "use a duration ≥ 0")
	}
	if o.Namespace != "" {
		if err := plane.ValidateNamespace(o.Namespace); err != nil {
			return 0, err
		}
	}
	if o.Queue != "" {
		if err := plane.ValidateName("queue name", o.Queue); err != nil {
			return 0, err
		}
	}
	return a.d.drv.InvocationTrim(ctx, &plane.TrimParams{Namespace: o.Namespace, Queue: o.Queue,
		FinishedBefore: trimCutoff(a.d.cfg.Now(), o.OlderThan)})
}

// trimCutoff is the FinishedBefore of a trim of what finished more than olderThan ago.
func trimCutoff(now time.Time, olderThan time.Duration) time.Time {
	if olderThan == 0 {
		// Every terminal invocation, including one that finished in this millisecond or by
		// the clock of another process running slightly ahead.
		return time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	return now.Add(-olderThan)
}

// Maintain runs one maintenance pass of the plane now (lease expiry, attempt timeouts,
// deadlines, retention) instead of waiting for its timer.
func (a *Admin) Maintain(ctx context.Context) error { return a.d.drv.Maintain(ctx) }
