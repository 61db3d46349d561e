package pgplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

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
	return d.do(ctx, func(t *tx) error {
		t.exec(`INSERT INTO `+d.schema+`.queue_providers (namespace, queue, provider, updated_ms) VALUES ($1, $2, $3, $4)
			ON CONFLICT (namespace, queue) DO UPDATE SET provider = $3, updated_ms = $4`,
			p.Namespace, p.Queue, string(ref), t.ms)
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
	err := d.pool.QueryRow(ctx, `SELECT provider FROM `+d.schema+`.queue_providers WHERE namespace = $1 AND queue = $2`,
		namespace, queue).Scan(&text)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, d.failure(ctx, fmt.Errorf("get provider: %w", err))
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
	err := d.do(ctx, func(t *tx) error {
		if err := t.flush(); err != nil {
			return err
		}
		tag, err := t.tx.Exec(t.ctx, `DELETE FROM `+d.schema+`.queue_providers WHERE namespace = $1 AND queue = $2`, namespace, queue)
		if err != nil {
			return fmt.Errorf("delete provider: %w", err)
		}
		deleted = tag.RowsAffected() > 0
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
	rs, err := d.pool.Query(ctx, `SELECT namespace, queue, provider FROM `+d.schema+`.queue_providers
		WHERE $1 = '' OR namespace = $1 ORDER BY namespace COLLATE "C", queue COLLATE "C"`, namespace)
	if err != nil {
		return nil, d.failure(ctx, fmt.Errorf("list providers: %w", err))
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
	return out, d.failure(ctx, rs.Err())
}

// LeaseAcquire implements plane.Driver: one upsert that takes the row only when it is free,
// expired or already ours. Concurrent upserts of one row serialize on its lock, and the
// condition is checked against the latest version, so two holders never both succeed.
func (d *Driver) LeaseAcquire(ctx context.Context, p *plane.LeaseParams) (bool, error) {
	if err := p.Validate(); err != nil {
		return false, err
	}
	var took bool
	err := d.do(ctx, func(t *tx) error {
		if err := t.flush(); err != nil {
			return err
		}
		tag, err := t.tx.Exec(t.ctx, `INSERT INTO `+d.schema+`.named_leases AS l (namespace, name, holder, expires_ms)
			VALUES ($1, $2, $3, $4) ON CONFLICT (namespace, name) DO UPDATE SET holder = $3, expires_ms = $4
			WHERE l.holder = $3 OR l.expires_ms <= $5`,
			p.Namespace, p.Name, p.Holder, t.ms+p.TTL.Milliseconds(), t.ms)
		if err != nil {
			return fmt.Errorf("acquire lease: %w", err)
		}
		took = tag.RowsAffected() > 0
		return nil
	})
	return took, err
}

// LeaseRelease implements plane.Driver.
func (d *Driver) LeaseRelease(ctx context.Context, namespace, name, holder string) error {
	if err := plane.ValidateLease(namespace, name, holder); err != nil {
		return err
	}
	return d.do(ctx, func(t *tx) error {
		t.exec(`DELETE FROM `+d.schema+`.named_leases WHERE namespace = $1 AND name = $2 AND holder = $3`, namespace, name, holder)
		return nil
	})
}

func validQueue(namespace, queue string) error {
	if err := plane.ValidateNamespace(namespace); err != nil {
		return err
	}
	return plane.ValidateName("queue name", queue)
}
