package pgplane

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// QueueAdmissionSet implements plane.Driver. Setting a block refills its token bucket.
func (d *Driver) QueueAdmissionSet(ctx context.Context, p *plane.AdmissionParams) error {
	if err := planekit.ValidateQueue(p.Namespace, p.Queue); err != nil {
		return err
	}
	if err := p.Admission.Validate(); err != nil {
		return err
	}
	a := p.Admission.WithDefaults()
	return d.do(ctx, func(t *tx) error {
		t.exec(`INSERT INTO `+d.schema+`.queues (namespace, queue, max_depth, on_full, rate_limit,
			burst, deadline_cutoff_ms, tokens, tokens_ms, concurrency) VALUES ($1, $2, $3, $4, $5, $6, $7, $9, $8, $10)
			ON CONFLICT (namespace, queue) DO UPDATE SET max_depth = $3, on_full = $4, rate_limit = $5, burst = $6,
			deadline_cutoff_ms = $7, tokens = $9, tokens_ms = $8, concurrency = $10`,
			p.Namespace, p.Queue, a.MaxDepth, string(a.OnFull), a.RateLimit, a.Burst, a.DeadlineCutoff.Milliseconds(), t.ms, float64(a.Burst),
			planekit.EncodeConcurrency(a))
		t.setKeyLimits(p.Namespace, p.Queue, a.KeyLimits())
		t.wake(planekit.RoomKey(p.Namespace, p.Queue)) // a raised limit makes room
		return nil
	})
}

// QueueAdmissionGet implements plane.Driver.
func (d *Driver) QueueAdmissionGet(ctx context.Context, namespace, queue string) (*plane.Admission, error) {
	if err := planekit.ValidateQueue(namespace, queue); err != nil {
		return nil, err
	}
	var a *admission
	err := d.do(ctx, func(t *tx) error {
		var err error
		a, err = t.admission(namespace, queue, false)
		return err
	})
	if err != nil || a == nil {
		return nil, err
	}
	return &a.Admission, nil
}

// QueueAdmissionDelete implements plane.Driver.
func (d *Driver) QueueAdmissionDelete(ctx context.Context, namespace, queue string) (bool, error) {
	if err := planekit.ValidateQueue(namespace, queue); err != nil {
		return false, err
	}
	var deleted bool
	err := d.do(ctx, func(t *tx) error {
		if err := t.flush(); err != nil {
			return err
		}
		tag, err := t.tx.Exec(t.ctx, `DELETE FROM `+d.schema+`.queues WHERE namespace = $1 AND queue = $2`, namespace, queue)
		if err != nil {
			return fmt.Errorf("delete admission: %w", err)
		}
		deleted = tag.RowsAffected() > 0
		t.setKeyLimits(namespace, queue, nil)
		t.wake(planekit.RoomKey(namespace, queue))
		return nil
	})
	return deleted, err
}

// WorkerRegister implements plane.Driver.
func (d *Driver) WorkerRegister(ctx context.Context, info *plane.WorkerInfo) error {
	if err := info.Validate(); err != nil {
		return err
	}
	ns := cmp.Or(info.Namespace, plane.NamespaceDefault)
	queues := info.Queues
	if queues == nil {
		queues = []string{}
	}
	return d.do(ctx, func(t *tx) error {
		t.exec(`INSERT INTO `+d.schema+`.workers (namespace, id, host, pid, queues, started_ms, seen_ms,
			provider, launch_id, running, idle_ms)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (namespace, id) DO UPDATE SET seen_ms = $7,
			queues = $5, provider = $8, launch_id = $9, running = $10, idle_ms = $11`,
			ns, info.ID, info.Host, info.PID, queues, cmp.Or(planekit.ToMS(info.StartedAt), t.ms), t.ms,
			info.Provider, info.LaunchID, info.Running, planekit.ToMS(info.IdleSince))
		return nil
	})
}

// WorkerList implements plane.Driver.
func (d *Driver) WorkerList(ctx context.Context, p *plane.WorkerListParams) ([]plane.WorkerInfo, error) {
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	since := d.cfg.Now().Add(-cmp.Or(p.SeenWithin, plane.WorkerSeenWithinDefault)).UnixMilli()
	rs, err := d.pool.Query(ctx, `SELECT id, namespace, host, pid, queues, started_ms, seen_ms,
		provider, launch_id, running, idle_ms FROM `+d.schema+`.workers
		WHERE seen_ms >= $1 AND ($2 = '' OR namespace = $2) ORDER BY started_ms, id`, since, p.Namespace)
	if err != nil {
		return nil, d.failure(ctx, fmt.Errorf("list workers: %w", err))
	}
	defer rs.Close()
	var out []plane.WorkerInfo
	for rs.Next() {
		var w plane.WorkerInfo
		var started, seen, idle int64
		if err := rs.Scan(&w.ID, &w.Namespace, &w.Host, &w.PID, &w.Queues, &started, &seen,
			&w.Provider, &w.LaunchID, &w.Running, &idle); err != nil {
			return nil, fmt.Errorf("list workers: %w", err)
		}
		w.StartedAt, w.LastSeen, w.IdleSince = planekit.FromMS(started), planekit.FromMS(seen), planekit.FromMS(idle)
		out = append(out, w)
	}
	return out, d.failure(ctx, rs.Err())
}

// WorkerRemove implements plane.Driver.
func (d *Driver) WorkerRemove(ctx context.Context, namespace, id string) error {
	if err := (&plane.WorkerInfo{ID: id, Namespace: namespace}).Validate(); err != nil {
		return err
	}
	ns := cmp.Or(namespace, plane.NamespaceDefault)
	return d.do(ctx, func(t *tx) error {
		t.exec(`DELETE FROM `+d.schema+`.workers WHERE namespace = $1 AND id = $2`, ns, id)
		return nil
	})
}

// TokenCreate implements plane.Driver.
func (d *Driver) TokenCreate(ctx context.Context, tok *plane.TokenInfo) error {
	if err := tok.Validate(); err != nil {
		return err
	}
	perms := make([]string, len(tok.Permissions))
	for i, p := range tok.Permissions {
		perms[i] = string(p)
	}
	err := d.do(ctx, func(t *tx) error {
		if err := t.flush(); err != nil {
			return err
		}
		_, err := t.tx.Exec(t.ctx, `INSERT INTO `+d.schema+`.tokens (id, hash, namespace, queue, permissions, created_ms, expires_ms)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`, tok.ID, tok.Hash, tok.Namespace, tok.Queue, perms,
			cmp.Or(planekit.ToMS(tok.CreatedAt), t.ms), planekit.ToMS(tok.ExpiresAt))
		return err
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return plane.ErrTokenExists(tok.ID)
	}
	if err != nil {
		return fmt.Errorf("create token: %w", err)
	}
	return nil
}

const tokenColumns = `id, hash, namespace, queue, permissions, created_ms, expires_ms, revoked_ms`

func scanToken(s scanner) (*plane.TokenInfo, error) {
	var tok plane.TokenInfo
	var perms []string
	var created, expires, revoked int64
	if err := s.Scan(&tok.ID, &tok.Hash, &tok.Namespace, &tok.Queue, &perms, &created, &expires, &revoked); err != nil {
		return nil, err
	}
	for _, p := range perms {
		tok.Permissions = append(tok.Permissions, plane.Permission(p))
	}
	tok.CreatedAt, tok.ExpiresAt, tok.RevokedAt = planekit.FromMS(created), planekit.FromMS(expires), planekit.FromMS(revoked)
	return &tok, nil
}

// TokenGet implements plane.Driver.
func (d *Driver) TokenGet(ctx context.Context, hash []byte) (*plane.TokenInfo, error) {
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	tok, err := scanToken(d.pool.QueryRow(ctx, `SELECT `+tokenColumns+` FROM `+d.schema+`.tokens WHERE hash = $1`, hash))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, plane.ErrNotFound
	}
	if err != nil {
		return nil, d.failure(ctx, fmt.Errorf("get token: %w", err))
	}
	return tok, nil
}

// TokenList implements plane.Driver.
func (d *Driver) TokenList(ctx context.Context) ([]plane.TokenInfo, error) {
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	rs, err := d.pool.Query(ctx, `SELECT `+tokenColumns+` FROM `+d.schema+`.tokens ORDER BY created_ms, id`)
	if err != nil {
		return nil, d.failure(ctx, fmt.Errorf("list tokens: %w", err))
	}
	defer rs.Close()
	var out []plane.TokenInfo
	for rs.Next() {
		tok, err := scanToken(rs)
		if err != nil {
			return nil, fmt.Errorf("list tokens: %w", err)
		}
		out = append(out, *tok)
	}
	return out, d.failure(ctx, rs.Err())
}

// TokenRevoke implements plane.Driver.
func (d *Driver) TokenRevoke(ctx context.Context, id string) (bool, error) {
	var revoked bool
	err := d.do(ctx, func(t *tx) error {
		revoked = false
		var at int64
		err := t.queryRow(`SELECT revoked_ms FROM `+d.schema+`.tokens WHERE id = $1 FOR UPDATE`, id).Scan(&at)
		if errors.Is(err, pgx.ErrNoRows) {
			return plane.ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("revoke token: %w", err)
		}
		if at != 0 {
			return nil
		}
		t.exec(`UPDATE `+d.schema+`.tokens SET revoked_ms = $1 WHERE id = $2`, t.ms, id)
		revoked = true
		return nil
	})
	return revoked, err
}

// setKeyLimits replaces the stored concurrency limits of a queue (plane.Admission's
// KeyLimits; nil: none) and applies them to the queue's key counters at once. A raised
// limit may make keys claimable, so the queue's claimers are woken.
func (t *tx) setKeyLimits(namespace, queue string, limits []plane.KeyLimit) {
	keys := make([]string, len(limits))
	counts := make([]int64, len(limits))
	weights := make([]float64, len(limits))
	for i, l := range limits {
		keys[i], counts[i], weights[i] = l.Key, l.Limit, l.Weight
	}
	t.exec(`DELETE FROM `+t.d.schema+`.concurrency_limits WHERE namespace = $1 AND queue = $2`, namespace, queue)
	t.exec(`INSERT INTO `+t.d.schema+`.concurrency_limits (namespace, queue, concurrency_key, limit_n, weight)
		SELECT $1, $2, u.k, u.n, u.w FROM unnest($3::text[], $4::bigint[], $5::float8[]) AS u(k, n, w)`,
		namespace, queue, keys, counts, weights)
	t.exec(`UPDATE `+t.d.schema+`.concurrency_keys AS k SET
		limit_n = COALESCE((SELECT l.limit_n FROM `+t.d.schema+`.concurrency_limits l WHERE l.namespace = $1 AND l.queue = $2 AND l.concurrency_key = k.concurrency_key),
			(SELECT l.limit_n FROM `+t.d.schema+`.concurrency_limits l WHERE l.namespace = $1 AND l.queue = $2 AND l.concurrency_key = ''), $3),
		weight = COALESCE((SELECT l.weight FROM `+t.d.schema+`.concurrency_limits l WHERE l.namespace = $1 AND l.queue = $2 AND l.concurrency_key = k.concurrency_key), 1)
		WHERE k.namespace = $1 AND k.queue = $2`, namespace, queue, plane.ConcurrencyUnlimited)
	t.wakeQueue(namespace, queue)
}
