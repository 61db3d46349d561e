package planekit

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// QueueProviderSet implements plane.Driver.
func (v Verbs) QueueProviderSet(ctx context.Context, p *plane.ProviderParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	ref, err := json.Marshal(p.Provider)
	if err != nil {
		return fmt.Errorf("set provider: %w", err)
	}
	_, err = exec(ctx, v.db, "set provider", v.st.ProviderSet, func(t Tx) []any {
		return []any{p.Namespace, p.Queue, string(ref), t.Now().UnixMilli()}
	})
	return err
}

// QueueProviderGet implements plane.Driver.
func (v Verbs) QueueProviderGet(ctx context.Context, namespace, queue string) (*plane.ProviderRef, error) {
	if err := ValidateQueue(namespace, queue); err != nil {
		return nil, err
	}
	if err := v.p.CheckOpen(); err != nil {
		return nil, err
	}
	var text string
	err := v.db.QueryRow(ctx, v.st.ProviderGet, namespace, queue).Scan(&text)
	if NoRows(err) {
		return nil, nil
	}
	if err != nil {
		return nil, v.db.Failure(ctx, fmt.Errorf("get provider: %w", err))
	}
	var ref plane.ProviderRef
	if err := json.Unmarshal([]byte(text), &ref); err != nil {
		return nil, fmt.Errorf("get provider of %s/%s: stored reference unreadable: %w", namespace, queue, err)
	}
	return &ref, nil
}

// QueueProviderDelete implements plane.Driver.
func (v Verbs) QueueProviderDelete(ctx context.Context, namespace, queue string) (bool, error) {
	if err := ValidateQueue(namespace, queue); err != nil {
		return false, err
	}
	return exec(ctx, v.db, "delete provider", v.st.ProviderDelete, func(Tx) []any { return []any{namespace, queue} })
}

// QueueProviderList implements plane.Driver.
func (v Verbs) QueueProviderList(ctx context.Context, namespace string) ([]plane.QueueProvider, error) {
	if err := ValidateOptionalNamespace(namespace); err != nil {
		return nil, err
	}
	return read(ctx, v, "list providers", func(s Scanner) (plane.QueueProvider, error) {
		var qp plane.QueueProvider
		var text string
		if err := s.Scan(&qp.Namespace, &qp.Queue, &text); err != nil {
			return qp, err
		}
		if err := json.Unmarshal([]byte(text), &qp.Provider); err != nil {
			return qp, fmt.Errorf("the reference of %s/%s is unreadable: %w", qp.Namespace, qp.Queue, err)
		}
		return qp, nil
	}, v.st.ProviderList, namespace)
}

// LeaseAcquire implements plane.Driver: one upsert that takes the row only when it is free,
// expired or already the holder's. Concurrent upserts of one row serialize on its lock, and
// the condition is checked against the latest version, so two holders never both succeed.
func (v Verbs) LeaseAcquire(ctx context.Context, p *plane.LeaseParams) (bool, error) {
	if err := p.Validate(); err != nil {
		return false, err
	}
	return exec(ctx, v.db, "acquire lease", v.st.LeaseAcquire, func(t Tx) []any {
		ms := t.Now().UnixMilli()
		return []any{p.Namespace, p.Name, p.Holder, ms + p.TTL.Milliseconds(), ms}
	})
}

// LeaseRelease implements plane.Driver.
func (v Verbs) LeaseRelease(ctx context.Context, namespace, name, holder string) error {
	if err := plane.ValidateLease(namespace, name, holder); err != nil {
		return err
	}
	_, err := exec(ctx, v.db, "release lease", v.st.LeaseRelease, func(Tx) []any { return []any{namespace, name, holder} })
	return err
}
