package sqliteplane

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// WorkerRegister implements plane.Driver.
func (d *Driver) WorkerRegister(ctx context.Context, info *plane.WorkerInfo) error {
	if err := info.Validate(); err != nil {
		return err
	}
	ns := cmp.Or(info.Namespace, plane.NamespaceDefault)
	queues, _ := json.Marshal(info.Queues)
	return d.do(ctx, func(t *wtx) error {
		_, err := t.w.conn.ExecContext(t.ctx, `INSERT INTO workers (id, namespace, host, pid, queues, started_ms, seen_ms,
			provider, launch_id, running, idle_ms)
			VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) ON CONFLICT (namespace, id) DO UPDATE SET seen_ms = ?7,
			queues = ?5, host = ?3, pid = ?4, provider = ?8, launch_id = ?9, running = ?10, idle_ms = ?11`,
			info.ID, ns, info.Host, info.PID, string(queues), cmp.Or(planekit.ToMS(info.StartedAt), t.ms), t.ms,
			info.Provider, info.LaunchID, info.Running, planekit.ToMS(info.IdleSince))
		if err != nil {
			return fmt.Errorf("register worker: %w", err)
		}
		return nil
	})
}

// WorkerList implements plane.Driver.
func (d *Driver) WorkerList(ctx context.Context, p *plane.WorkerListParams) ([]plane.WorkerInfo, error) {
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	since := d.cfg.Now().Add(-cmp.Or(p.SeenWithin, plane.WorkerSeenWithinDefault)).UnixMilli()
	rs, err := d.readDB.QueryContext(ctx, `SELECT id, namespace, host, pid, queues, started_ms, seen_ms,
		provider, launch_id, running, idle_ms FROM workers
		WHERE seen_ms >= ?1 AND (?2 = '' OR namespace = ?2) ORDER BY started_ms, id`, since, p.Namespace)
	if err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	defer rs.Close()
	var out []plane.WorkerInfo
	for rs.Next() {
		var w plane.WorkerInfo
		var queues string
		var started, seen, idle int64
		if err := rs.Scan(&w.ID, &w.Namespace, &w.Host, &w.PID, &queues, &started, &seen,
			&w.Provider, &w.LaunchID, &w.Running, &idle); err != nil {
			return nil, fmt.Errorf("list workers: %w", err)
		}
		_ = json.Unmarshal([]byte(queues), &w.Queues)
		w.StartedAt, w.LastSeen, w.IdleSince = planekit.FromMS(started), planekit.FromMS(seen), planekit.FromMS(idle)
		out = append(out, w)
	}
	return out, rs.Err()
}

// WorkerRemove implements plane.Driver.
func (d *Driver) WorkerRemove(ctx context.Context, namespace, id string) error {
	namespace = cmp.Or(namespace, plane.NamespaceDefault)
	if err := (&plane.WorkerInfo{ID: id, Namespace: namespace}).Validate(); err != nil {
		return err
	}
	return d.do(ctx, func(t *wtx) error {
		if _, err := t.w.conn.ExecContext(t.ctx, `DELETE FROM workers WHERE namespace = ? AND id = ?`, namespace, id); err != nil {
			return fmt.Errorf("remove worker: %w", err)
		}
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
	var exists error
	err := d.do(ctx, func(t *wtx) error {
		var n int
		if err := t.w.conn.QueryRowContext(t.ctx, `SELECT count(*) FROM tokens WHERE id = ? OR hash = ?`, tok.ID, tok.Hash).Scan(&n); err != nil {
			return fmt.Errorf("create token: %w", err)
		}
		if n > 0 {
			exists = plane.ErrTokenExists(tok.ID)
			return nil
		}
		_, err := t.w.conn.ExecContext(t.ctx, `INSERT INTO tokens (id, hash, namespace, queue, permissions, created_ms, expires_ms)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, tok.ID, tok.Hash, tok.Namespace, tok.Queue, strings.Join(perms, ","),
			cmp.Or(planekit.ToMS(tok.CreatedAt), t.ms), planekit.ToMS(tok.ExpiresAt))
		if err != nil {
			return fmt.Errorf("create token: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return exists
}

const tokenColumns = `id, hash, namespace, queue, permissions, created_ms, expires_ms, revoked_ms`

func scanToken(s scanner) (*plane.TokenInfo, error) {
	var tok plane.TokenInfo
	var perms string
	var created, expires, revoked int64
	if err := s.Scan(&tok.ID, &tok.Hash, &tok.Namespace, &tok.Queue, &perms, &created, &expires, &revoked); err != nil {
		return nil, err
	}
	for _, p := range strings.Split(perms, ",") {
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
	tok, err := scanToken(d.readDB.QueryRowContext(ctx, `SELECT `+tokenColumns+` FROM tokens WHERE hash = ?`, hash))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, plane.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get token: %w", err)
	}
	return tok, nil
}

// TokenList implements plane.Driver.
func (d *Driver) TokenList(ctx context.Context) ([]plane.TokenInfo, error) {
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	rs, err := d.readDB.QueryContext(ctx, `SELECT `+tokenColumns+` FROM tokens ORDER BY created_ms, id`)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
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
	return out, rs.Err()
}

// TokenRevoke implements plane.Driver.
func (d *Driver) TokenRevoke(ctx context.Context, id string) (bool, error) {
	var revoked bool
	var logical error
	err := d.do(ctx, func(t *wtx) error {
		revoked, logical = false, nil
		var at int64
		err := t.w.conn.QueryRowContext(t.ctx, `SELECT revoked_ms FROM tokens WHERE id = ?`, id).Scan(&at)
		if errors.Is(err, sql.ErrNoRows) {
			logical = plane.ErrNotFound
			return nil
		}
		if err != nil {
			return fmt.Errorf("revoke token: %w", err)
		}
		if at != 0 {
			return nil
		}
		if _, err := t.w.conn.ExecContext(t.ctx, `UPDATE tokens SET revoked_ms = ? WHERE id = ?`, t.ms, id); err != nil {
			return fmt.Errorf("revoke token: %w", err)
		}
		revoked = true
		return nil
	})
	if err != nil {
		return false, err
	}
	return revoked, logical
}
