package planekit

import (
	"fmt"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// Stager is what a driver does with the invocations of one submit as StageSubmit walks
// them: the shape of its insert (SQLite's multi-row statements, PostgreSQL's arrays for one
// INSERT from unnest). Each may be nil.
type Stager struct {
	// Holder looks up, before the insert, the invocation holding the caller's id of s
	// (byKey false) or its key (byKey true): its id ("" when none), or refused
	// (plane.IDTaken) when an invocation of another queue holds the id, which ends the
	// submit. nil for a driver whose insert resolves conflicts itself (PostgreSQL's ON
	// CONFLICT DO NOTHING, then its look-ups of the rows not inserted).
	Holder func(s *plane.SubmitParams, byKey bool) (id string, refused, err error)
	// Stage stages invocation i of the submit, new, under id, for the insert. (Without
	// it, the staged invocations are those StageSubmit answers with an id, not Existing,
	// and no dupOf.)
	Stage func(i int, id string)
	// Restage gives the staged invocation first the payload, metadata and due time of the
	// later debounced submit s of its key (the later payload of a key wins).
	Restage func(first int, s *plane.SubmitParams)
	// Folded notes that the debounced s folded into its key's waiting holder: the
	// holder's due time is now s's (SQLite's writer sets its alarm by it). nil: nothing.
	Folded func(s *plane.SubmitParams)
}

// StageSubmit walks the invocations of p, in t at now, and answers each as far as the
// walk can before the insert: the caller's id held already (stager.Holder; Holder for an
// invocation with a key when stager.Holder is nil) answers that invocation (Existing); an invocation of a key applies the key's windows (Windows: a
// debounced one folds into its key's waiting holder, a passed dedup window frees the key)
// and answers the holder it resolves to; one that may be new gets its id (the caller's,
// else a new one from ids) in out and is staged (stager.Stage). A later invocation of the
// batch with the key or the caller's id of an earlier one is not staged: dupOf[i] is that
// one's index (-1: none), whose answer it gets after the insert (AnswerDuplicates); a
// later debounced one gives its payload to the earlier one (stager.Restage, or folded
// again into the holder the earlier one resolved to). dupOf has an entry per invocation.
// It returns the caller's error of stager.Holder (refused) or a storage failure.
func StageSubmit(t Tx, st *Statements, p *plane.SubmitManyParams, out []plane.SubmitResult, dupOf []int, now time.Time,
	ids *plane.IDGenerator, stager Stager) (refused, err error) {
	var firstOfKey, firstOfID map[string]int // the index of the first invocation with a key, a caller's id
	for i := range p.Invocations {
		s := &p.Invocations[i]
		dupOf[i] = -1
		if s.ID != "" && (stager.Holder != nil || s.Key != "") {
			// The caller's id held answers the invocation before its key's windows run
			// (a retry by id changes nothing, a debounced one included): a driver whose
			// insert resolves ids (no Holder) looks it up here for a keyed invocation.
			holder := stager.Holder
			if holder == nil {
				holder = func(s *plane.SubmitParams, byKey bool) (string, error, error) { return Holder(t, st, p, s, byKey) }
			}
			id, refused, err := holder(s, false)
			if refused != nil || err != nil {
				return refused, err
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
						return nil, err
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
				return nil, err
			}
			if action == plane.DebounceFold && stager.Folded != nil {
				stager.Folded(s)
			}
			if action == plane.DebounceInsert && stager.Holder != nil {
				if id, _, err = stager.Holder(s, true); err != nil {
					return nil, err
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
			id = ids.New(t.Now()) // unique: not recorded
		} else if first, ok := firstOfID[id]; ok {
			dupOf[i] = first
			continue
		} else {
			if firstOfID == nil {
				firstOfID = map[string]int{}
			}
			firstOfID[id] = i
		}
		out[i].ID = id
		if stager.Stage != nil {
			stager.Stage(i, id)
		}
	}
	return nil, nil
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

// Holder looks up the invocation holding the caller's id of s (byKey false) or its key in
// p's queue (byKey true): its id, "" when none; refused (plane.IDTaken) when an invocation
// of another queue than p's holds the id (Statements.IDHolder, KeyHolderID). It serves as a
// Stager's Holder.
func Holder(t Tx, st *Statements, p *plane.SubmitManyParams, s *plane.SubmitParams, byKey bool) (id string, refused, err error) {
	what := "key"
	if byKey {
		err = t.QueryRow(st.KeyHolderID, p.Namespace, p.Queue, s.Key).Scan(&id)
	} else {
		var namespace, queue string
		what, err = "id", t.QueryRow(st.IDHolder, s.ID).Scan(&namespace, &queue)
		if err == nil && (namespace != p.Namespace || queue != p.Queue) {
			return "", plane.IDTaken(s.ID), nil
		}
		id = s.ID
	}
	if NoRows(err) {
		return "", nil, nil
	}
	if err != nil {
		return "", nil, fmt.Errorf("submit: look up %s: %w", what, err)
	}
	return id, nil, nil
}

// Resolve looks up the invocation holding the caller's id or the key of s (Holder): of an
// invocation an insert did not take. An invocation with a key is resolved by its key only:
// StageSubmit (without a Stager.Holder) looked its caller's id up before the insert, so it
// is not read again. An id another transaction took since then leaves the key's look-up
// without a holder unless one holds the key too, and the caller runs the submit again.
func Resolve(t Tx, st *Statements, p *plane.SubmitManyParams, s *plane.SubmitParams) (id string, refused, err error) {
	switch {
	case s.Key != "":
		return Holder(t, st, p, s, true)
	case s.ID != "":
		return Holder(t, st, p, s, false)
	}
	return "", nil, nil
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
