package planetest

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// list fetches one page of the subtest's queue (unless p names another).
func (b *bundle) list(t *testing.T, p plane.ListParams) *plane.ListPage {
	t.Helper()
	if p.Namespace == "" {
		p.Namespace = b.ns
	}
	if p.Queue == "" {
		p.Queue = b.q
	}
	page, err := b.drv.InvocationList(b.ctx, &p)
	must(t, err, "list")
	require.NotNil(t, page)
	return page
}

// listAll follows Next from p to the last page and returns the ids in order, checking that
// no page is larger than its limit and that the listing ends.
func (b *bundle) listAll(t *testing.T, p plane.ListParams) []string {
	t.Helper()
	var ids []string
	for range 1000 {
		page := b.list(t, p)
		limit := p.Limit
		if limit == 0 {
			limit = plane.ListLimitDefault
		}
		require.LessOrEqual(t, len(page.Invocations), limit, "a page larger than its limit")
		for _, inv := range page.Invocations {
			ids = append(ids, inv.ID)
		}
		if page.Next == "" {
			return ids
		}
		require.NotEqual(t, p.After, page.Next, "the cursor did not move")
		p.After = page.Next
	}
	t.Fatal("the listing never ended")
	return nil
}

func testList(t *testing.T, s *suite) {
	t.Run("NewestFirstInPagesThenOldestFirst", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		var ids []string
		for i := range 7 {
			ids = append(ids, b.submitOne(t, plane.SubmitParams{Payload: []byte{byte(i)}, Key: "k" + string(rune('a'+i))}))
		}
		b.submitTo(t, b.ns, "other", plane.SubmitParams{}) // another queue is never listed
		newest := slices.Clone(ids)
		slices.Reverse(newest)

		page := b.list(t, plane.ListParams{Limit: 3})
		require.Len(t, page.Invocations, 3)
		require.NotEmpty(t, page.Next, "more pages follow")
		require.Equal(t, newest[0], page.Invocations[0].ID)
		inv := page.Invocations[0]
		require.Equal(t, plane.StateQueued, inv.State)
		require.Equal(t, "kg", inv.Key)
		require.Equal(t, b.q, inv.Queue)
		require.Equal(t, b.ns, inv.Namespace)

		require.Equal(t, newest, b.listAll(t, plane.ListParams{Limit: 3}), "newest first across pages")
		require.Equal(t, ids, b.listAll(t, plane.ListParams{Limit: 2, Oldest: true}), "oldest first across pages")
		require.Equal(t, newest, b.listAll(t, plane.ListParams{}), "one default page")
		last := b.list(t, plane.ListParams{Limit: 7})
		require.Len(t, last.Invocations, 7)
		require.Empty(t, last.Next, "an exactly full last page has no Next")
		require.Empty(t, b.listAll(t, plane.ListParams{Queue: "never-used"}))
	})

	t.Run("ByState", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		ids := b.submitPayloads(t, "0", "1", "2", "3")
		delayed := b.submitOne(t, plane.SubmitParams{Delay: time.Hour})
		j0 := b.claimID(t, ids[0])
		j1 := b.claimID(t, ids[1])
		b.ack(t, j0, "ok")
		b.nack(t, j1, false, "no")
		require.True(t, b.cancel(t, ids[2]))
		require.Equal(t, []string{ids[0]}, b.listAll(t, plane.ListParams{State: plane.StateSucceeded}))
		require.Equal(t, []string{ids[1]}, b.listAll(t, plane.ListParams{State: plane.StateFailed}))
		require.Equal(t, []string{ids[2]}, b.listAll(t, plane.ListParams{State: plane.StateCancelled}))
		require.Equal(t, []string{delayed, ids[3]}, b.listAll(t, plane.ListParams{State: plane.StateQueued}),
			"queued lists delayed invocations too, newest first")
		require.Equal(t, []string{ids[3], delayed}, b.listAll(t, plane.ListParams{State: plane.StateQueued, Oldest: true, Limit: 1}))
		require.Empty(t, b.listAll(t, plane.ListParams{State: plane.StateRunning}))
		j3 := b.claimID(t, ids[3])
		require.Equal(t, []string{j3.ID}, b.listAll(t, plane.ListParams{State: plane.StateRunning}))
		all := b.listAll(t, plane.ListParams{Limit: 2})
		require.Equal(t, []string{delayed, ids[3], ids[2], ids[1], ids[0]}, all, "every state, newest first")
	})

	t.Run("ByKeyPrefix", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		var want []string
		for i := range 30 {
			key := "batch-b/" + string(rune('a'+i%26)) + string(rune('0'+i/26))
			if i%3 == 0 {
				key = "batch-a/" + string(rune('a'+i%26)) + string(rune('0'+i/26))
			}
			id := b.submitOne(t, plane.SubmitParams{Key: key})
			if i%3 == 0 {
				want = append(want, id)
			}
		}
		b.submitOne(t, plane.SubmitParams{}) // no key: never matches a prefix
		got := b.listAll(t, plane.ListParams{KeyPrefix: "batch-a/", Limit: 2, Oldest: true})
		require.Equal(t, want, got)
		require.Len(t, b.listAll(t, plane.ListParams{KeyPrefix: "batch-", Limit: 7}), 30)
		require.Empty(t, b.listAll(t, plane.ListParams{KeyPrefix: "nope"}))
	})

	t.Run("PagesAreStableUnderNewSubmits", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		ids := b.submitPayloads(t, "0", "1", "2", "3")
		page := b.list(t, plane.ListParams{Limit: 2, Oldest: true})
		require.Equal(t, []string{ids[0], ids[1]}, []string{page.Invocations[0].ID, page.Invocations[1].ID})
		late := b.submitOne(t, plane.SubmitParams{})
		rest := b.listAll(t, plane.ListParams{Limit: 2, Oldest: true, After: page.Next})
		require.Equal(t, []string{ids[2], ids[3], late}, rest, "the cursor continues after the last id seen")
	})

	t.Run("InvalidParams", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		for name, p := range map[string]plane.ListParams{
			"limit":     {Namespace: b.ns, Queue: b.q, Limit: plane.ListLimitMax + 1},
			"negative":  {Namespace: b.ns, Queue: b.q, Limit: -1},
			"state":     {Namespace: b.ns, Queue: b.q, State: "done"},
			"cursor":    {Namespace: b.ns, Queue: b.q, After: "not-a-cursor"},
			"queue":     {Namespace: b.ns, Queue: "bad queue"},
			"namespace": {Namespace: "", Queue: b.q},
		} {
			_, err := b.drv.InvocationList(b.ctx, &p)
			requireIs(t, err, plane.ErrInvalid, name)
		}
	})
}
