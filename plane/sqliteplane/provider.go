package sqliteplane

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// QueueProviderSet implements plane.Driver.
func (d *Driver) QueueProviderSet(ctx context.Context, p *plane.ProviderParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	ref, err := json.Marshal(p.Provider)
	if err != nil {
		return fmt.Errorf("set provider: %w", err)
	}
	return d.do(ctx, func(t *wtx) error {
		_, err := t.w.conn.ExecContext(t.ctx, `INSERT INTO queue_providers (namespace, queue, provider, updated_ms)
			VALUES (?1, ?2, ?3, ?4) ON CONFLICT (namespace, queue) DO UPDATE SET provider = ?3, updated_ms = ?4`,
			p.Namespace, p.Queue, string(ref), t.ms)
		if err != nil {
			return fmt.Errorf("set provider: %w", err)
		}
		return nil
	})
}

// QueueProviderGet implements plane.Driver.
func (d *Driver) QueueProviderGet(ctx context.Context, namespace, queue string) (*plane.ProviderRef, error) {
	if err := validQueue(namespace, queue); err != nil {
		return nil, err
	}
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	var text string
	err := d.readDB.QueryRowContext(ctx, `SELECT provider FROM queue_providers WHERE namespace = ? AND queue = ?`,
		namespace, queue).Scan(&text)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get provider: %w", err)
	}
	var ref plane.ProviderRef
	if err := json.Unmarshal([]byte(text), &ref); err != nil {
		return nil, fmt.Errorf("get provider of %s/%s: stored reference unreadable: %w", namespace, queue, err)
	}
	return &ref, nil
}

// QueueProviderDelete implements plane.Driver.
func (d *Driver) QueueProviderDelete(ctx context.Context, namespace, queue string) (bool, error) {
	if err := validQueue(namespace, queue); err != nil {
		return false, err
	}
	var deleted bool
	err := d.do(ctx, func(t *wtx) error {
		res, err := t.w.conn.ExecContext(t.ctx, `DELETE FROM queue_providers WHERE namespace = ? AND queue = ?`, namespace, queue)
		if err != nil {
			return fmt.Errorf("delete provider: %w", err)
		}
		n, _ := res.RowsAffected()
		deleted = n > 0
		return nil
	})
	return deleted, err
}

// QueueProviderList implements plane.Driver.
func (d *Driver) QueueProviderList(ctx context.Context, namespace string) ([]plane.QueueProvider, error) {
	if namespace != "" {
		if err := plane.ValidateNamespace(namespace); err != nil {
			return nil, err
		}
	}
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	rs, err := d.readDB.QueryContext(ctx, `SELECT namespace, queue, provider FROM queue_providers
		WHERE ?1 = '' OR namespace = ?1 ORDER BY namespace, queue`, namespace)
	if err != nil {
		return nil, fmt.Errorf("list providers: %w", err)
	}
	defer rs.Close()
	out := []plane.QueueProvider{}
	for rs.Next() {
		var qp plane.QueueProvider
		var text string
		if err := rs.Scan(&qp.Namespace, &qp.Queue, &text); err != nil {
			return nil, fmt.Errorf("list providers: %w", err)
		}
		if err := json.Unmarshal([]byte(text), &qp.Provider); err != nil {
			return nil, fmt.Errorf("list providers: the reference of %s/%s is unreadable: %w", qp.Namespace, qp.Queue, err)
		}
		out = append(out, qp)
	}
	return out, rs.Err()
}

// LeaseAcquire implements plane.Driver: one upsert that takes the row only when it is
// free, expired or already ours.
func (d *Driver) LeaseAcquire(ctx context.Context, p *plane.LeaseParams) (bool, error) {
	if err := p.Validate(); err != nil {
		return false, err
	}
	var took bool
	err := d.do(ctx, func(t *wtx) error {
		took = false
		res, err := t.w.conn.ExecContext(t.ctx, `INSERT INTO named_leases (namespace, name, holder, expires_ms)
			VALUES (?1, ?2, ?3, ?4) ON CONFLICT (namespace, name) DO UPDATE SET holder = ?3, expires_ms = ?4
			WHERE named_leases.holder = ?3 OR named_leases.expires_ms <= ?5`,
			p.Namespace, p.Name, p.Holder, t.ms+p.TTL.Milliseconds(), t.ms)
		if err != nil {
			return fmt.Errorf("acquire lease: %w", err)
		}
		n, _ := res.RowsAffected()
		took = n > 0
		return nil
	})
	return took, err
}

// LeaseRelease implements plane.Driver.
func (d *Driver) LeaseRelease(ctx context.Context, namespace, name, holder string) error {
	if err := plane.ValidateLease(namespace, name, holder); err != nil {
		return err
	}
	return d.do(ctx, func(t *wtx) error {
		if _, err := t.w.conn.ExecContext(t.ctx, `DELETE FROM named_leases WHERE namespace = ? AND name = ? AND holder = ?`,
			namespace, name, holder); err != nil {
			return fmt.Errorf("release lease: %w", err)
		}
		return nil
	})
}

func validQueue(namespace, queue string) error {
	if err := plane.ValidateNamespace(namespace); err != nil {
		return err
	}
	return plane.ValidateName("queue name", queue)
}
