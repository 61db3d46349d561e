package planetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// testDedup checks dedup windows (SubmitParams.UniqueFor, plane/dedup.go): within the window
// a second submit of the key returns the first invocation; once it has passed, the submit
// takes the key over (the earlier invocation's Key reads "") and enqueues a new one; a
// submit without a window still finds the key's current holder. Debounce: the last submit
// wins and the start waits for quiet.
func testDedup(t *testing.T, s *suite) {
	t.Run("UniqueFor", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		window := 30 * time.Second
		first := b.submit(t, plane.SubmitParams{Key: "report", UniqueFor: window, Payload: []byte("1")})[0]
		require.False(t, first.Existing)
		b.advance(10 * time.Second)
		again := b.submit(t, plane.SubmitParams{Key: "report", UniqueFor: window, Payload: []byte("2")})[0]
		require.Equal(t, plane.SubmitResult{ID: first.ID, Existing: true}, again, "within the window: the first wins")

		b.advance(20 * time.Second) // 30 s since the first: the window has passed
		next := b.submit(t, plane.SubmitParams{Key: "report", UniqueFor: window, Payload: []byte("3")})[0]
		require.False(t, next.Existing, "after the window a new invocation")
		require.NotEqual(t, first.ID, next.ID)
		require.Equal(t, "report", b.get(t, next.ID).Key)
		require.Empty(t, b.get(t, first.ID).Key, "the earlier invocation gave its key up")
		require.Equal(t, []byte("1"), b.get(t, first.ID).Payload, "and is otherwise untouched")

		plain := b.submit(t, plane.SubmitParams{Key: "report"})[0]
		require.Equal(t, plane.SubmitResult{ID: next.ID, Existing: true}, plain, "without a window the key's holder answers")
		b.advance(time.Hour)
		plain = b.submit(t, plane.SubmitParams{Key: "report"})[0]
		require.Equal(t, next.ID, plain.ID, "a key without a window holds until trimmed")
		b.requireCounts(t, map[plane.State]int64{plane.StateQueued: 2})
	})

	t.Run("UniqueForLeavesOrdinaryHolder", func(t *testing.T) {
		// A new user's trial: a key held by an ordinary submit (no window) is not taken over
		// by a later submit with a window, however old the holder: the first client's retry
		// of its keyed submit still finds its own invocation. A holder submitted with a
		// window is marked so (plane.MetaUniqueFor) and gives the key up as before.
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		first := b.submitOne(t, plane.SubmitParams{Key: "plain1", Payload: []byte("first"), Metadata: map[string]string{"m": "1"}})
		b.advance(2 * time.Second)
		second := b.submit(t, plane.SubmitParams{Key: "plain1", UniqueFor: time.Second, Payload: []byte("second")})[0]
		require.Equal(t, plane.SubmitResult{ID: first, Existing: true}, second, "the ordinary holder keeps its key")
		retry := b.submit(t, plane.SubmitParams{Key: "plain1", Payload: []byte("first")})[0]
		require.Equal(t, plane.SubmitResult{ID: first, Existing: true}, retry, "the first client's retry finds its own invocation")
		inv := b.get(t, first)
		require.Equal(t, "plain1", inv.Key)
		require.Equal(t, []byte("first"), inv.Payload)
		require.Equal(t, map[string]string{"m": "1"}, inv.Metadata, "an ordinary invocation carries no window mark")
		b.advance(time.Hour)
		again := b.submit(t, plane.SubmitParams{Key: "plain1", UniqueFor: time.Minute})[0]
		require.Equal(t, plane.SubmitResult{ID: first, Existing: true}, again, "an hour on: still held")

		windowed := b.submitOne(t, plane.SubmitParams{Key: "w", UniqueFor: 2 * time.Second, Metadata: map[string]string{"m": "1"}})
		require.Equal(t, map[string]string{"m": "1", plane.MetaUniqueFor: "2"}, b.get(t, windowed).Metadata, "marked with its window")
		b.advance(2 * time.Second)
		next := b.submit(t, plane.SubmitParams{Key: "w", UniqueFor: 2 * time.Second})[0]
		require.False(t, next.Existing, "a windowed holder gives its key up once the window passed")
		require.Empty(t, b.get(t, windowed).Key)
		b.requireCounts(t, map[plane.State]int64{plane.StateQueued: 3})
	})

	t.Run("WindowOutlivesTrim", func(t *testing.T) {
		// "At most once per 30 days": a holder submitted with a window is not trimmed —
		// neither by InvocationTrim nor by the retention pass — while its window lasts
		// (created + its UniqueFor), so a submit within the window still finds it however
		// long ago it finished. Once the window has passed it is trimmed as any finished
		// invocation; a holder whose key a later submit took over is trimmed at once.
		t.Parallel()
		retention := time.Hour
		b := s.setup(t, config{noMaintenance: true, retention: retention})
		window := 720 * time.Hour
		first := b.submitOne(t, plane.SubmitParams{Key: "daily", UniqueFor: window, Payload: []byte("x")})
		b.ack(t, b.claimID(t, first), "done")
		plain := b.submitOne(t, plane.SubmitParams{Key: "plain"})
		b.ack(t, b.claimID(t, plain), "done")
		cutoff := b.advance(time.Minute)
		require.EqualValues(t, 1, b.trim(t, plane.TrimParams{FinishedBefore: cutoff}), "only the ordinary invocation is trimmed")
		b.requireGone(t, plain)
		require.Equal(t, "daily", b.requireState(t, first, plane.StateSucceeded, 1).Key, "the holder is kept within its window")
		again := b.submit(t, plane.SubmitParams{Key: "daily", UniqueFor: window, Payload: []byte("y")})[0]
		require.Equal(t, plane.SubmitResult{ID: first, Existing: true}, again, "within the window after a trim: the first wins")

		b.advance(retention + time.Hour) // past retention, within the window
		b.maintain(t)
		b.requireState(t, first, plane.StateSucceeded, 1)
		again = b.submit(t, plane.SubmitParams{Key: "daily", UniqueFor: window, Payload: []byte("z")})[0]
		require.Equal(t, plane.SubmitResult{ID: first, Existing: true}, again, "within the window after retention: the first wins")
		b.requireCounts(t, map[plane.State]int64{plane.StateSucceeded: 1})

		// A holder whose key is taken over (a later submit's shorter window passed) gives
		// its hold up with its key.
		taken := b.submitOne(t, plane.SubmitParams{Key: "weekly", UniqueFor: window})
		b.ack(t, b.claimID(t, taken), "done")
		b.advance(2 * time.Second)
		next := b.submit(t, plane.SubmitParams{Key: "weekly", UniqueFor: time.Second})[0]
		require.False(t, next.Existing, "a shorter window that passed takes the key over")
		require.EqualValues(t, 1, b.trim(t, plane.TrimParams{FinishedBefore: b.advance(time.Minute)}), "the holder that gave its key up is trimmed")
		b.requireGone(t, taken)

		b.advance(window) // the first's window has passed: it is trimmed as usual
		b.maintain(t)
		b.requireGone(t, first)
		fresh := b.submit(t, plane.SubmitParams{Key: "daily", UniqueFor: window})[0]
		require.False(t, fresh.Existing, "after the window a new invocation")
		require.NotEqual(t, first, fresh.ID)
	})

	t.Run("OneBatch", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		res := b.submit(t, plane.SubmitParams{Key: "k", UniqueFor: time.Minute}, plane.SubmitParams{Key: "k", UniqueFor: time.Minute})
		require.False(t, res[0].Existing)
		require.Equal(t, plane.SubmitResult{ID: res[0].ID, Existing: true}, res[1], "one invocation per key and window in a batch")
	})

	t.Run("Debounce", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		quiet := 10 * time.Second
		first := b.submit(t, plane.SubmitParams{Key: "index", Debounce: quiet, Payload: []byte("1")})[0]
		require.False(t, first.Existing)
		b.requireNothingClaimable(t)
		b.advance(3 * time.Second)
		again := b.submit(t, plane.SubmitParams{Key: "index", Debounce: quiet, Payload: []byte("2"), Metadata: map[string]string{"m": "2"}})[0]
		require.Equal(t, plane.SubmitResult{ID: first.ID, Existing: true}, again, "while it waits, the submit folds into it")
		inv := b.get(t, first.ID)
		require.Equal(t, []byte("2"), inv.Payload, "the last payload wins")
		require.Equal(t, map[string]string{"m": "2", plane.MetaDebounce: "10"}, inv.Metadata, "its metadata, marked as debounced")
		require.True(t, inv.AvailableAt.Equal(b.now().Add(quiet).Truncate(time.Millisecond)), "due %v after the last submit, got %v", quiet, inv.AvailableAt)
		b.advance(9 * time.Second) // 12 s after the first submit, 9 s after the last: not quiet yet
		b.requireNothingClaimable(t)
		b.advance(time.Second)
		j := b.claimOne(t)
		require.Equal(t, first.ID, j.ID)
		require.Equal(t, []byte("2"), j.Payload)

		// Once it started, a debounced submit of the key starts a new wait with a new
		// invocation; the running one gives the key up and is otherwise untouched.
		next := b.submit(t, plane.SubmitParams{Key: "index", Debounce: quiet, Payload: []byte("3")})[0]
		require.False(t, next.Existing)
		require.Empty(t, b.get(t, first.ID).Key)
		require.Equal(t, "index", b.get(t, next.ID).Key)
		b.ack(t, j, "done")
		b.requireNothingClaimable(t)
		plain := b.submit(t, plane.SubmitParams{Key: "index"})[0]
		require.Equal(t, plane.SubmitResult{ID: next.ID, Existing: true}, plain, "a submit without debounce finds the holder")
		require.Equal(t, []byte("3"), b.get(t, next.ID).Payload)

		// A holder that is due but not claimed yet has had its quiet: it runs, and the
		// submit waits anew with its own invocation.
		b.advance(quiet)
		late := b.submit(t, plane.SubmitParams{Key: "index", Debounce: quiet, Payload: []byte("4")})[0]
		require.False(t, late.Existing)
		require.Equal(t, next.ID, b.claimOne(t).ID)
		b.requireNothingClaimable(t)
		b.requireCounts(t, map[plane.State]int64{plane.StateQueued: 1, plane.StateRunning: 1, plane.StateSucceeded: 1})
	})

	t.Run("DebounceRetriedByID", func(t *testing.T) {
		// A debounced submit sent again with its caller's id (a client's retry) is the
		// submit made already: answered as existing, its payload and due time unchanged,
		// whatever it carries. (PostgreSQL folded the retry into the waiting invocation,
		// pushing its start back, while SQLite changed nothing.)
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		id := plane.NewIDGenerator().New(b.now())
		first := b.submit(t, plane.SubmitParams{ID: id, Key: "kc", Debounce: time.Hour, Payload: []byte("1")})[0]
		require.Equal(t, plane.SubmitResult{ID: id}, first)
		due := b.get(t, id).AvailableAt
		b.advance(time.Minute)
		again := b.submit(t, plane.SubmitParams{ID: id, Key: "kc", Debounce: time.Hour, Payload: []byte("2")})[0]
		require.Equal(t, plane.SubmitResult{ID: id, Existing: true}, again)
		inv := b.get(t, id)
		require.Equal(t, []byte("1"), inv.Payload, "a retry by id changes nothing")
		require.True(t, due.Equal(inv.AvailableAt), "nor pushes the start back: due %v, got %v", due, inv.AvailableAt)
		b.requireCounts(t, map[plane.State]int64{plane.StateQueued: 1})
	})

	t.Run("DebounceLeavesOrdinaryHolder", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		id := b.submitOne(t, plane.SubmitParams{Key: "z", Delay: time.Hour, Payload: []byte("orig")})
		due := b.get(t, id).AvailableAt
		res := b.submit(t, plane.SubmitParams{Key: "z", Debounce: 2 * time.Second, Payload: []byte("other")})[0]
		require.Equal(t, plane.SubmitResult{ID: id, Existing: true}, res, "an ordinary holder answers as for any keyed submit")
		inv := b.get(t, id)
		require.Equal(t, []byte("orig"), inv.Payload, "its payload is not rewritten")
		require.True(t, due.Equal(inv.AvailableAt), "nor its delay shortened")
		require.Equal(t, "z", inv.Key)
		_, err := b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: b.ns, Queue: b.q, Invocations: []plane.SubmitParams{
			{Key: "k", Payload: []byte("a")}, {Key: "k", Debounce: time.Second, Payload: []byte("b")}}})
		requireIs(t, err, plane.ErrInvalid, "a batch mixing debounced and ordinary submits of one key")
		b.requireCounts(t, map[plane.State]int64{plane.StateQueued: 1})
	})

	t.Run("WindowMarksReserved", func(t *testing.T) {
		// An attacker's trial: an ordinary submit whose own metadata carries the plane's mark
		// of a debounced (or windowed) one. It was stored marked, so a later debounced submit
		// of its key rewrote its payload and cut its hour's delay to a second, and a unique_for
		// submit took its key. Refused now, on every plane, for a submit, a batch and a
		// schedule alike, and nothing is stored.
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		for _, mark := range []string{plane.MetaDebounce, plane.MetaUniqueFor} {
			_, err := b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: b.ns, Queue: b.q, Invocations: []plane.SubmitParams{
				{Key: "z", Delay: time.Hour, Payload: []byte("orig"), Metadata: map[string]string{mark: "5"}}}})
			requireInvalid(t, err, mark, "lakeshore.debounce")
			_, err = b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: b.ns, Queue: b.q, Invocations: []plane.SubmitParams{
				{Key: "y", Payload: []byte("a")}, {Key: "z", Debounce: time.Second, Payload: []byte("b"), Metadata: map[string]string{mark: "1"}}}})
			requireInvalid(t, err, mark)
			_, err = b.drv.ScheduleSet(b.ctx, &plane.Schedule{Namespace: b.ns, Name: "s", Queue: b.q, Every: time.Minute, Metadata: map[string]string{mark: "1"}})
			requireInvalid(t, err, mark)
		}
		b.requireCounts(t, map[plane.State]int64{})
		page, err := b.drv.ScheduleList(b.ctx, &plane.ScheduleListParams{Namespace: b.ns})
		require.NoError(t, err)
		require.Empty(t, page.Schedules)
	})

	t.Run("RefusedSubmitKeepsTheHolder", func(t *testing.T) {
		// A new user's trial: a submit of a key whose window passed, refused because the
		// queue is full, changed the holder anyway — it gave its key up (a later keyed
		// submit then enqueued a second job of the key) — and a batch refused for depth
		// still folded its debounced item into the waiting holder. A refused submit changes
		// nothing, on every plane.
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		b.setAdmission(t, plane.Admission{MaxDepth: 2})
		debounced := b.submitOne(t, plane.SubmitParams{Key: "d", Debounce: time.Second, Payload: []byte("d1")})
		unique := b.submitOne(t, plane.SubmitParams{Key: "u", UniqueFor: time.Second, Payload: []byte("u1")})
		b.advance(2 * time.Second) // both windows passed: a submit of either key takes it over

		_, err := b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: b.ns, Queue: b.q, Invocations: []plane.SubmitParams{
			{Key: "d", Debounce: time.Second, Payload: []byte("d2")}}})
		requireIs(t, err, plane.ErrQueueFull, "a debounced take-over of a full queue")
		_, err = b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: b.ns, Queue: b.q, Invocations: []plane.SubmitParams{
			{Key: "u", UniqueFor: time.Second, Payload: []byte("u2")}}})
		requireIs(t, err, plane.ErrQueueFull, "a dedup take-over of a full queue")
		for key, id := range map[string]string{"d": debounced, "u": unique} {
			require.Equal(t, key, b.get(t, id).Key, "the refused submit left %s's key with its holder", key)
			require.Equal(t, []byte(key+"1"), b.get(t, id).Payload)
			require.Equal(t, plane.SubmitResult{ID: id, Existing: true}, b.submit(t, plane.SubmitParams{Key: key})[0],
				"a keyed submit still finds the holder")
		}
		b.requireCounts(t, map[plane.State]int64{plane.StateQueued: 2})

		// A batch refused for depth folds nothing into a waiting debounced holder.
		b.setAdmission(t, plane.Admission{MaxDepth: 3})
		waiting := b.submitOne(t, plane.SubmitParams{Key: "w", Debounce: time.Minute, Payload: []byte("w1")})
		due := b.get(t, waiting).AvailableAt
		b.advance(time.Second)
		_, err = b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: b.ns, Queue: b.q, Invocations: []plane.SubmitParams{
			{Key: "w", Debounce: time.Minute, Payload: []byte("w2")}, {Payload: []byte("new")}}})
		requireIs(t, err, plane.ErrQueueFull, "a batch over the depth")
		inv := b.get(t, waiting)
		require.Equal(t, []byte("w1"), inv.Payload, "the refused batch did not fold into the holder")
		require.True(t, due.Equal(inv.AvailableAt), "nor pushed its start back: due %v, got %v", due, inv.AvailableAt)
		b.requireCounts(t, map[plane.State]int64{plane.StateQueued: 3})
	})

	t.Run("DebounceOneBatch", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		res := b.submit(t,
			plane.SubmitParams{Key: "k", Debounce: time.Second, Payload: []byte("a")},
			plane.SubmitParams{Key: "k", Debounce: time.Second, Payload: []byte("b")})
		require.False(t, res[0].Existing)
		require.Equal(t, plane.SubmitResult{ID: res[0].ID, Existing: true}, res[1])
		require.Equal(t, []byte("b"), b.get(t, res[0].ID).Payload, "the later payload of a batch wins")
		res = b.submit(t,
			plane.SubmitParams{Key: "k", Debounce: time.Second, Payload: []byte("c")},
			plane.SubmitParams{Key: "k", Debounce: time.Second, Payload: []byte("d")})
		require.Equal(t, []plane.SubmitResult{{ID: res[0].ID, Existing: true}, {ID: res[0].ID, Existing: true}}, res)
		require.Equal(t, []byte("d"), b.get(t, res[0].ID).Payload, "folded into the waiting one, the later payload wins")
		b.requireCounts(t, map[plane.State]int64{plane.StateQueued: 1})
	})

	t.Run("Invalid", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{noMaintenance: true})
		for what, p := range map[string]plane.SubmitParams{
			"no key":                  {UniqueFor: time.Minute},
			"negative":                {Key: "k", UniqueFor: -time.Second},
			"too long":                {Key: "k", UniqueFor: plane.UniqueForMax + time.Second},
			"debounce without key":    {Debounce: time.Minute},
			"negative debounce":       {Key: "k", Debounce: -time.Second},
			"debounce too long":       {Key: "k", Debounce: plane.UniqueForMax + time.Second},
			"debounce and unique_for": {Key: "k", Debounce: time.Second, UniqueFor: time.Second},
		} {
			_, err := b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: b.ns, Queue: b.q, Invocations: []plane.SubmitParams{p}})
			requireIs(t, err, plane.ErrInvalid, what)
		}
	})
}
