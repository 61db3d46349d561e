package sqliteplane

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// InvocationSubmitMany implements plane.Driver.
func (d *Driver) InvocationSubmitMany(ctx context.Context, p *plane.SubmitManyParams) ([]plane.SubmitResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	out := make([]plane.SubmitResult, len(p.Invocations))
	var logical error
	err := d.do(ctx, func(t *wtx) error {
		logical = nil
		// Client-chosen ids first, so a collision with another queue writes nothing.
		for i, s := range p.Invocations {
			out[i] = plane.SubmitResult{}
			if s.ID == "" {
				continue
			}
			h, ok, err := t.head(s.ID)
			if err != nil {
				return fmt.Errorf("submit: %w", err)
			}
			if !ok {
				continue
			}
			if h.namespace != p.Namespace || h.queue != p.Queue {
				logical = plane.Invalid("invocation id", s.ID, "it already names an invocation of another queue; use a fresh ULID")
				return nil
			}
			out[i] = plane.SubmitResult{ID: s.ID, Existing: true}
		}
		for i := range p.Invocations {
			if out[i].Existing {
				continue
			}
			id, existing, err := t.submit(p.Namespace, p.Queue, &p.Invocations[i])
			if err != nil {
				return err
			}
			out[i] = plane.SubmitResult{ID: id, Existing: existing}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if logical != nil {
		return nil, logical
	}
	return out, nil
}

// submit inserts one invocation, or returns the id its key already names.
func (t *wtx) submit(namespace, queue string, s *plane.SubmitParams) (string, bool, error) {
	var key any
	if s.Key != "" {
		key = s.Key
		var id string
		err := t.w.st.idByKey.QueryRowContext(t.ctx, namespace, queue, s.Key).Scan(&id)
		if err == nil {
			return id, true, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return "", false, fmt.Errorf("submit: look up key: %w", err)
		}
	}
	id := s.ID
	if id == "" {
		id = t.w.d.ids.New(t.now)
	}
	maxAttempts := s.MaxAttempts
	if maxAttempts == 0 {
		maxAttempts = plane.MaxAttemptsDefault
	}
	payload := s.Payload
	if payload == nil {
		payload = []byte{}
	}
	if _, err := t.w.st.insert.ExecContext(t.ctx, id, namespace, queue, key, s.Priority, payload,
		encodeMetadata(s.Metadata), maxAttempts, s.AttemptTimeout.Milliseconds(), toMS(s.Deadline), t.ms, t.ms); err != nil {
		return "", false, fmt.Errorf("submit: insert: %w", err)
	}
	t.count(namespace, queue, stateQueued, s.Priority, +1)
	t.wake(queueKey(namespace, queue))
	return id, false, nil
}
