package planekit

import (
	"fmt"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// A submit's windows, the same on both SQL planes: a key whose dedup window has passed is
// given up (DedupFree), and a debounced submit folds into its key's holder or takes the key
// over (Debounce). Each reads the holder with its row locked, so concurrent submits of one
// key serialize on it.

// DedupFree frees the key of the invocation holding it when plane.DedupFrees says so for a
// window with cutoff; the insert that follows takes it.
func DedupFree(t Tx, st *Statements, namespace, queue, key string, cutoff time.Time) error {
	var id string
	var created int64
	var metadata []byte
	err := t.QueryRow(st.KeyHolder, namespace, queue, key).Scan(&id, &created, &metadata)
	if NoRows(err) {
		return nil
	}
	if err == nil && plane.DedupFrees(DecodeMetadata(metadata), time.UnixMilli(created), cutoff) {
		_, err = t.Exec(st.KeyFree, id)
	}
	if err != nil {
		return fmt.Errorf("submit: dedup window: %w", err)
	}
	return nil
}

// Debounce decides what the debounced submit s does about the invocation holding its key
// (plane.Debounce, at now) and does it: a fold gives the holder s's payload, metadata and
// due time (DebounceFold), a take-over frees the key for the insert that follows. It returns
// the holder's id and the action (plane.DebounceInsert when no invocation holds the key).
func Debounce(t Tx, st *Statements, namespace, queue string, s *plane.SubmitParams, now time.Time) (string, plane.DebounceAction, error) {
	var id string
	var metadata []byte
	var waiting bool
	var attempt int
	var due int64
	err := t.QueryRow(st.DebounceHolder, namespace, queue, s.Key).Scan(&id, &metadata, &waiting, &attempt, &due)
	if NoRows(err) {
		return "", plane.DebounceInsert, nil
	}
	if err != nil {
		return "", 0, fmt.Errorf("submit: debounce: %w", err)
	}
	action := plane.Debounce(DecodeMetadata(metadata), waiting, attempt, due > now.UnixMilli())
	switch action {
	case plane.DebounceFold:
		err = DebounceFold(t, st, id, s, now)
	case plane.DebounceTakeOver:
		if _, err = t.Exec(st.KeyFree, id); err != nil {
			err = fmt.Errorf("submit: debounce: %w", err)
		}
	}
	return id, action, err
}

// DebounceFold gives the waiting invocation id the payload and metadata of the debounced
// submit s and its due time, counted from now, and wakes the invocation's waiters.
func DebounceFold(t Tx, st *Statements, id string, s *plane.SubmitParams, now time.Time) error {
	if _, err := t.Exec(st.DebounceFold, id, Payload(s.Payload), EncodeMetadata(plane.DebounceMetadata(s)), s.DueAt(now).UnixMilli()); err != nil {
		return fmt.Errorf("submit: debounce: %w", err)
	}
	t.Wake(InvocationKey(id))
	return nil
}

// Windows applies the windows of the submit s of a key before its insert: a debounced s
// folds into its key's holder or takes the key over (Debounce, at now); then a key whose
// dedup window has passed, by t's clock, is given up (DedupFree). It returns the holder and
// plane.DebounceFold or plane.DebounceExisting when s resolves to it (s is not inserted),
// else "" and plane.DebounceInsert. (A later submit of the key in the same batch is
// StageSubmit's.)
func Windows(t Tx, st *Statements, namespace, queue string, s *plane.SubmitParams, now time.Time) (string, plane.DebounceAction, error) {
	if s.Debounce > 0 {
		id, action, err := Debounce(t, st, namespace, queue, s, now)
		if err != nil {
			return "", 0, err
		}
		if action == plane.DebounceFold || action == plane.DebounceExisting {
			return id, action, nil
		}
	}
	if cutoff := plane.DedupCutoff(t.Now(), s.UniqueFor); !cutoff.IsZero() {
		// The window has passed for a holder submitted with a window and created at or
		// before cutoff (plane.DedupFrees): it gives the key up, and the insert takes it.
		if err := DedupFree(t, st, namespace, queue, s.Key, cutoff); err != nil {
			return "", 0, err
		}
	}
	return "", plane.DebounceInsert, nil
}

// Unshared splits a group of submits (params gives each one's parameters) into those
// that share the group's insert and those that run alone after it (apart): a submit
// sharing an idempotency key (in its queue) or a caller's id with an earlier submit of
// the group.
func Unshared[T any](reqs []T, params func(T) *plane.SubmitManyParams) (group, apart []T) {
	type keyOf struct{ namespace, queue, key string }
	keys := map[keyOf]bool{}
	ids := map[string]bool{}
	for _, r := range reqs {
		p := params(r)
		clash := false
		for _, s := range p.Invocations {
			clash = clash || s.Key != "" && keys[keyOf{p.Namespace, p.Queue, s.Key}] || s.ID != "" && ids[s.ID]
		}
		if clash {
			apart = append(apart, r)
			continue
		}
		for _, s := range p.Invocations {
			if s.Key != "" {
				keys[keyOf{p.Namespace, p.Queue, s.Key}] = true
			}
			if s.ID != "" {
				ids[s.ID] = true
			}
		}
		group = append(group, r)
	}
	return group, apart
}

// Queues are the queues of a group of submits (params gives each one's parameters), each
// once, in the order they first come, as a statement's arrays.
func Queues[T any](reqs []T, params func(T) *plane.SubmitManyParams) (namespaces, queues []string) {
	seen := map[[2]string]bool{}
	for _, r := range reqs {
		p := params(r)
		if k := [2]string{p.Namespace, p.Queue}; !seen[k] {
			seen[k] = true
			namespaces, queues = append(namespaces, p.Namespace), append(queues, p.Queue)
		}
	}
	return namespaces, queues
}

// AnswerDuplicates gives each later submit of a batch that shares the key or id of an
// earlier one (dupOf[i] ≥ 0: that one's index; -1: none) the earlier one's answer.
func AnswerDuplicates(out []plane.SubmitResult, dupOf []int) {
	for i, first := range dupOf {
		if first >= 0 {
			out[i] = plane.SubmitResult{ID: out[first].ID, Existing: true}
		}
	}
}
