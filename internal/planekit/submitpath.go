package planekit

import (
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// Stager is what a driver does with the invocations of one submit as StageSubmit walks
// them: the shape of its insert (SQLite's multi-row statements, PostgreSQL's arrays for one
// INSERT from unnest). Only Stage is required.
type Stager struct {
	// Holder looks up, before the insert, the invocation holding the caller's id of s
	// (byKey false) or its key (byKey true): its id ("" when none), or refused
	// (plane.IDTaken) when an invocation of another queue holds the id, which ends the
	// submit. nil for a driver whose insert resolves conflicts itself (PostgreSQL's ON
	// CONFLICT DO NOTHING, then its look-ups of the rows not inserted).
	Holder func(s *plane.SubmitParams, byKey bool) (id string, refused, err error)
	// Stage stages invocation i of the submit, new, under id, for the insert.
	Stage func(i int, id string)
	// Restage gives the staged invocation first the payload, metadata and due time of the
	// later debounced submit s of its key (the later payload of a key wins).
	Restage func(first int, s *plane.SubmitParams)
	// Folded notes that the debounced s folded into its key's waiting holder: the
	// holder's due time is now s's (SQLite's writer sets its alarm by it). nil: nothing.
	Folded func(s *plane.SubmitParams)
}

// StageSubmit walks the invocations of p, in t at now, and answers each as far as the
// walk can before the insert: the caller's id held already (stager.Holder) answers that
// invocation (Existing); an invocation of a key applies the key's windows (Windows: a
// debounced one folds into its key's waiting holder, a passed dedup window frees the key)
// and answers the holder it resolves to; one that may be new gets its id (the caller's,
// else a new one from ids) in out and is staged (stager.Stage). A later invocation of the
// batch with the key or the caller's id of an earlier one is not staged: dupOf[i] is that
// one's index (-1: none), whose answer it gets after the insert (AnswerDuplicates); a
// later debounced one gives its payload to the earlier one (stager.Restage, or folded
// again into the holder the earlier one resolved to). It returns dupOf, the caller's error
// of stager.Holder (refused) or a storage failure.
func StageSubmit(t Tx, st *Statements, p *plane.SubmitManyParams, out []plane.SubmitResult, now time.Time,
	ids *plane.IDGenerator, stager Stager) (dupOf []int, refused, err error) {
	dupOf = make([]int, len(p.Invocations))
	var firstOfKey, firstOfID map[string]int // the index of the first invocation with a key, a caller's id
	for i := range p.Invocations {
		s := &p.Invocations[i]
		dupOf[i] = -1
		if s.ID != "" && stager.Holder != nil {
			id, refused, err := stager.Holder(s, false)
			if refused != nil || err != nil {
				return nil, refused, err
			}
			if id != "" {
				out[i] = plane.SubmitResult{ID: id, Existing: true}
				continue
			}
		}
		if s.Key != "" {
			if first, ok := firstOfKey[s.Key]; ok {
				dupOf[i] = first
				if s.Debounce > 0 {
					if err := restage(t, st, p, out, first, s, now, stager); err != nil {
						return nil, nil, err
					}
				}
				continue
			}
			if firstOfKey == nil {
				firstOfKey = map[string]int{}
			}
			firstOfKey[s.Key] = i
			id, action, err := Windows(t, st, p.Namespace, p.Queue, s, now)
			if err != nil {
				return nil, nil, err
			}
			if action == plane.DebounceFold && stager.Folded != nil {
				stager.Folded(s)
			}
			if action == plane.DebounceInsert && stager.Holder != nil {
				if id, _, err = stager.Holder(s, true); err != nil {
					return nil, nil, err
				}
				if id != "" {
					action = plane.DebounceExisting
				}
			}
			if action != plane.DebounceInsert {
				out[i] = plane.SubmitResult{ID: id, Existing: true}
				continue
			}
		}
		id := s.ID
		if id == "" {
			id = ids.New(t.Now())
		} else if first, ok := firstOfID[id]; ok {
			dupOf[i] = first
			continue
		}
		if firstOfID == nil {
			firstOfID = map[string]int{}
		}
		firstOfID[id] = i
		out[i].ID = id
		stager.Stage(i, id)
	}
	return dupOf, nil, nil
}

// restage gives the invocation first of p, which the later debounced s shares a key with,
// s's payload: the staged one through stager.Restage; the holder it resolved to by folding
// s into it again (Debounce: a holder that is not debounced is left alone).
func restage(t Tx, st *Statements, p *plane.SubmitManyParams, out []plane.SubmitResult, first int, s *plane.SubmitParams,
	now time.Time, stager Stager) error {
	if !out[first].Existing {
		if stager.Restage != nil {
			stager.Restage(first, s)
		}
		return nil
	}
	_, action, err := Debounce(t, st, p.Namespace, p.Queue, s, now)
	if err == nil && action == plane.DebounceFold && stager.Folded != nil {
		stager.Folded(s)
	}
	return err
}

// HasWindow reports whether a submit of p carries a dedup or debounce window (UniqueFor,
// Debounce).
func HasWindow(p *plane.SubmitManyParams) bool {
	for i := range p.Invocations {
		if p.Invocations[i].UniqueFor > 0 || p.Invocations[i].Debounce > 0 {
			return true
		}
	}
	return false
}
