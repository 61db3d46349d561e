package planekit

import (
	"cmp"
	"context"
	"fmt"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// ListCodec is how a plane stores a list of names (a token's permissions, a worker's
// queues): Encode is the statement argument of a list, Target the scan destination that
// fills one.
type ListCodec struct {
	Encode func([]string) any
	Target func(*[]string) any
}

// QueuePause implements plane.Driver. A resume makes the queue claimable (Tx.Claimable): its
// parked claimers are served in the same transaction and its waiters woken.
func (v Verbs) QueuePause(ctx context.Context, p *plane.PauseParams) (bool, error) {
	if err := p.Validate(); err != nil {
		return false, err
	}
	var changed bool
	err := v.db.Write(ctx, func(t Tx) error {
		var n int64
		var err error
		if p.Paused {
			n, err = t.Exec(v.st.PauseSet, p.Namespace, p.Queue, t.Now().UnixMilli())
		} else {
			n, err = t.Exec(v.st.PauseDelete, p.Namespace, p.Queue)
		}
		if err != nil {
			return fmt.Errorf("pause queue: %w", err)
		}
		changed = n > 0
		t.PauseChanged(p.Namespace, p.Queue)
		if changed && !p.Paused {
			t.Claimable(p.Namespace, p.Queue)
		}
		return nil
	})
	return changed, err
}

// pausedQueues returns the paused queues of a namespace ("" for all), by (namespace, queue).
func (v Verbs) pausedQueues(ctx context.Context, namespace string) (map[[2]string]bool, error) {
	keys, err := read(ctx, v, "queue stats", scanQueueKey, v.st.PauseList, namespace)
	return pausedSet(keys), err
}

// scanQueueKey scans a (namespace, queue) row.
func scanQueueKey(s Scanner) (key [2]string, err error) { return key, s.Scan(&key[0], &key[1]) }

// pausedSet is the set of the paused queues keys.
func pausedSet(keys [][2]string) map[[2]string]bool {
	out := make(map[[2]string]bool, len(keys))
	for _, k := range keys {
		out[k] = true
	}
	return out
}

// WorkerRegister implements plane.Driver: the worker's row is inserted or refreshed. Under
// a cap on workers a registered worker's row is refreshed by one update (WorkerRefresh),
// which also says whether it is registered; a new one is counted under the namespace's
// CapLock (checkWorkerCap), so concurrent registrations count one another, then inserted
// by the upsert. Without a cap the upsert alone.
func (v Verbs) WorkerRegister(ctx context.Context, info *plane.WorkerInfo) error {
	if err := info.Validate(); err != nil {
		return err
	}
	ns := cmp.Or(info.Namespace, plane.NamespaceDefault)
	list := info.Queues
	if list == nil {
		list = []string{}
	}
	queues := v.st.WorkerQueues.Encode(list)
	return write(ctx, v.db, func(t Tx) (error, error) {
		ms := t.Now().UnixMilli()
		if v.p.MaxWorkers >= 0 {
			// Before: a read of the worker's key, then the upsert (two statements for a
			// registration refreshed, the common one: workers register again as they run).
			n, err := t.Exec(v.st.WorkerRefresh, ns, info.ID, info.Host, info.PID, queues, ms,
				info.Provider, info.LaunchID, info.Running, ToMS(info.IdleSince),
				EncodeOffers(info.Offers), EncodeHostKeys(info.WarmHostKeys))
			if err != nil {
				return nil, fmt.Errorf("register worker: %w", err)
			}
			if n > 0 {
				return nil, nil
			}
			if logical, err := v.checkWorkerCap(t, ns); logical != nil || err != nil {
				return logical, err
			}
		}
		_, err := t.Exec(v.st.WorkerRegister, ns, info.ID, info.Host, info.PID, queues, cmp.Or(ToMS(info.StartedAt), ms), ms,
			info.Provider, info.LaunchID, info.Running, ToMS(info.IdleSince),
			EncodeOffers(info.Offers), EncodeHostKeys(info.WarmHostKeys))
		if err != nil {
			return nil, fmt.Errorf("register worker: %w", err)
		}
		return nil, nil
	})
}

// checkWorkerCap applies plane.CheckWorkerCount to the registration of a worker new to
// namespace, in t: counted under the namespace's CapLock, so concurrent registrations
// count one another.
func (v Verbs) checkWorkerCap(t Tx, namespace string) (logical, err error) {
	n, err := CapCount(t, v.st, "lakeshore-workers/"+namespace, v.st.WorkerCount, namespace)
	if err != nil {
		return nil, fmt.Errorf("register worker: %w", err)
	}
	return plane.CheckWorkerCount(namespace, int(n), v.p.MaxWorkers), nil
}

// WorkerList implements plane.Driver: the workers seen within p.SeenWithin (default
// plane.WorkerSeenWithinDefault) of the plane's clock, now.
func (v Verbs) WorkerList(ctx context.Context, p *plane.WorkerListParams) ([]plane.WorkerInfo, error) {
	since := v.p.Now().UnixMilli() - cmp.Or(p.SeenWithin, plane.WorkerSeenWithinDefault).Milliseconds()
	out, err := read(ctx, v, "list workers", func(s Scanner) (plane.WorkerInfo, error) {
		var w plane.WorkerInfo
		var started, seen, idle int64
		var offers, warm string
		err := s.Scan(&w.ID, &w.Namespace, &w.Host, &w.PID, v.st.WorkerQueues.Target(&w.Queues), &started, &seen,
			&w.Provider, &w.LaunchID, &w.Running, &idle, &offers, &warm)
		w.StartedAt, w.LastSeen, w.IdleSince = FromMS(started), FromMS(seen), FromMS(idle)
		w.Offers, w.WarmHostKeys = DecodeOffers(offers), DecodeHostKeys(warm)
		return w, err
	}, v.st.WorkerList, since, p.Namespace)
	if len(out) == 0 {
		return nil, err
	}
	return out, err
}

// WorkerRemove implements plane.Driver.
func (v Verbs) WorkerRemove(ctx context.Context, namespace, id string) error {
	namespace = cmp.Or(namespace, plane.NamespaceDefault)
	if err := (&plane.WorkerInfo{ID: id, Namespace: namespace}).Validate(); err != nil {
		return err
	}
	_, err := exec(ctx, v.db, "remove worker", v.st.WorkerRemove, func(Tx) []any { return []any{namespace, id} })
	return err
}

// TokenCreate implements plane.Driver. Errors: plane.ErrTokenExists for a token whose id or
// hash is stored already.
func (v Verbs) TokenCreate(ctx context.Context, tok *plane.TokenInfo) error {
	if err := tok.Validate(); err != nil {
		return err
	}
	perms := make([]string, len(tok.Permissions))
	for i, p := range tok.Permissions {
		perms[i] = string(p)
	}
	created, err := exec(ctx, v.db, "create token", v.st.TokenCreate, func(t Tx) []any {
		return []any{tok.ID, tok.Hash, tok.Namespace, tok.Queue, v.st.Permissions.Encode(perms),
			cmp.Or(ToMS(tok.CreatedAt), t.Now().UnixMilli()), ToMS(tok.ExpiresAt)}
	})
	if err == nil && !created {
		return plane.ErrTokenExists(tok.ID)
	}
	return err
}

// TokenColumns are the columns of a stored token, in the order scanToken reads them.
const TokenColumns = `id, hash, namespace, queue, permissions, created_ms, expires_ms, revoked_ms`

func (v Verbs) scanToken(s Scanner) (plane.TokenInfo, error) {
	var tok plane.TokenInfo
	var perms []string
	var created, expires, revoked int64
	if err := s.Scan(&tok.ID, &tok.Hash, &tok.Namespace, &tok.Queue, v.st.Permissions.Target(&perms), &created, &expires, &revoked); err != nil {
		return tok, err
	}
	for _, p := range perms {
		tok.Permissions = append(tok.Permissions, plane.Permission(p))
	}
	tok.CreatedAt, tok.ExpiresAt, tok.RevokedAt = FromMS(created), FromMS(expires), FromMS(revoked)
	return tok, nil
}

// TokenGet implements plane.Driver. Errors: plane.ErrNotFound for an unknown hash.
func (v Verbs) TokenGet(ctx context.Context, hash []byte) (*plane.TokenInfo, error) {
	if err := v.p.CheckOpen(); err != nil {
		return nil, err
	}
	tok, err := v.scanToken(v.db.QueryRow(ctx, v.st.TokenGet, hash))
	if NoRows(err) {
		return nil, plane.ErrNotFound
	}
	if err != nil {
		return nil, v.db.Failure(ctx, fmt.Errorf("get token: %w", err))
	}
	return &tok, nil
}

// TokenList implements plane.Driver.
func (v Verbs) TokenList(ctx context.Context) ([]plane.TokenInfo, error) {
	out, err := read(ctx, v, "list tokens", v.scanToken, v.st.TokenList)
	if len(out) == 0 {
		return nil, err
	}
	return out, err
}

// TokenRevoke implements plane.Driver: false for a token revoked before. Errors:
// plane.ErrNotFound for an unknown id.
func (v Verbs) TokenRevoke(ctx context.Context, id string) (bool, error) {
	var revoked bool
	err := write(ctx, v.db, func(t Tx) (error, error) {
		revoked = false
		var at int64
		err := t.QueryRow(v.st.TokenRevoked, id).Scan(&at)
		if NoRows(err) {
			return plane.ErrNotFound, nil
		}
		if err != nil {
			return nil, fmt.Errorf("revoke token: %w", err)
		}
		if at != 0 {
			return nil, nil
		}
		if _, err := t.Exec(v.st.TokenRevoke, t.Now().UnixMilli(), id); err != nil {
			return nil, fmt.Errorf("revoke token: %w", err)
		}
		revoked = true
		return nil, nil
	})
	return revoked, err
}
