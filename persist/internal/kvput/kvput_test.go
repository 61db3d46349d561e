package kvput

import (
	"errors"
	"testing"

	"github.com/lakeshore-dev/lakeshore/persist"
)

// TestSplit: new keys are put, known keys with fields updated, and known keys' tags merged.
func TestSplit(t *testing.T) {
	stored := map[string]struct {
		idx  int64
		tags string
	}{"old": {7, `{"a":"1","b":"2"}`}, "bare": {9, `{}`}}
	lookup := func(key string) (int64, []byte, bool, error) {
		s, ok := stored[key]
		return s.idx, []byte(s.tags), ok, nil
	}
	items := []*persist.KVItem{
		{Key: "new", Fields: persist.Record{"x": 1}, Tags: map[string]string{"t": "n"}},
		{Key: "old", Fields: persist.Record{"x": 2}, Tags: map[string]string{"b": "3"}},
		{Key: "bare"},
	}
	records := []persist.Record{items[0].Fields, items[1].Fields, nil}
	p, err := Split(items, records, lookup)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.New) != 1 || p.New[0] != 0 || len(p.Update) != 1 || p.Update[0] != 7 || p.Index[1] != 7 || p.Index[2] != 9 {
		t.Fatalf("plan %+v", p)
	}
	write := p.Merged(items)
	if write[0] != nil || string(write[1]) != `{"a":"1","b":"3"}` || write[2] != nil {
		t.Fatalf("merged tags %q", write)
	}
	stored["old"] = struct {
		idx  int64
		tags string
	}{7, `not json`}
	if _, err := Split(items, records, lookup); !errors.Is(err, persist.ErrCorrupt) {
		t.Fatalf("corrupt tags: %v", err)
	}
	_, _, err = Find("p", []string{"bare", "gone", "lost"}, lookup)
	var nf *persist.NotFoundError
	if !errors.As(err, &nf) || len(nf.Keys) != 2 {
		t.Fatalf("missing keys: %v", err)
	}
}
