package planetest

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// ulidPattern is a ULID as the semantics page has it: 26 characters of upper-case Crockford
// base32, the first 0–7.
var ulidPattern = regexp.MustCompile(`^[0-7][0-9A-HJKMNP-TV-Z]{25}$`)

func testSubmit(t *testing.T, s *suite) {
	t.Run("IDsAreULIDsInSubmitOrder", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		var ids []string
		for i := range 10 {
			ids = append(ids, b.submitOne(t, plane.SubmitParams{Payload: fmt.Appendf(nil, "p%d", i)}))
			if i%3 == 0 {
				b.advance(time.Millisecond)
			}
		}
		var batch []plane.SubmitParams
		for i := range 10 {
			batch = append(batch, plane.SubmitParams{Payload: fmt.Appendf(nil, "b%d", i)})
		}
		for _, r := range b.submit(t, batch...) {
			require.False(t, r.Existing)
			ids = append(ids, r.ID)
		}
		for i, id := range ids {
			require.Regexp(t, ulidPattern, id, "id %d is a ULID", i)
			require.NoError(t, plane.ValidateID(id))
			if i > 0 {
				require.Less(t, ids[i-1], id, "ids sort in submit order")
			}
		}
	})

	t.Run("SubmitStoresTheInvocation", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		created := b.advance(1500 * time.Millisecond)
		deadline := created.Add(time.Hour)
		id := b.submitOne(t, plane.SubmitParams{
			Payload: []byte("payload \x00\xff bytes"), Key: "key-1", Priority: -2.5, MaxAttempts: 5,
			AttemptTimeout: 90 * time.Second, Deadline: deadline, Metadata: map[string]string{"trace": "abc", "user": "u1"},
		})
		inv := b.get(t, id)
		require.Equal(t, b.ns, inv.Namespace)
		require.Equal(t, b.q, inv.Queue)
		require.Equal(t, "key-1", inv.Key)
		require.Equal(t, plane.StateQueued, inv.State)
		require.Equal(t, -2.5, inv.Priority)
		require.Equal(t, []byte("payload \x00\xff bytes"), inv.Payload)
		require.Equal(t, map[string]string{"trace": "abc", "user": "u1"}, inv.Metadata)
		require.Equal(t, 0, inv.Attempt, "attempt counts claims: none yet")
		require.Equal(t, 5, inv.MaxAttempts)
		require.Equal(t, 90*time.Second, inv.AttemptTimeout)
		requireTime(t, deadline, inv.Deadline, "deadline")
		requireTime(t, created, inv.CreatedAt, "created at (the plane's clock)")
		require.True(t, inv.FinishedAt.IsZero(), "not finished")
		require.Nil(t, inv.Error)
		require.Empty(t, inv.Result)

		j := b.claimID(t, id)
		require.Equal(t, plane.Job{
			ID: id, Namespace: b.ns, Queue: b.q, Key: "key-1", Payload: []byte("payload \x00\xff bytes"),
			Metadata: map[string]string{"trace": "abc", "user": "u1"}, Priority: -2.5, Attempt: 1, MaxAttempts: 5,
			AttemptTimeout: 90 * time.Second, Deadline: j.Deadline, Token: j.Token, LeaseExpiresAt: j.LeaseExpiresAt,
		}, *j, "the claimed job carries the invocation's envelope")
		requireTime(t, deadline, j.Deadline, "the job's deadline")
	})

	t.Run("MaxAttemptsDefaultsToThree", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		id := b.submitOne(t, plane.SubmitParams{Payload: []byte("x")})
		require.Equal(t, plane.MaxAttemptsDefault, b.get(t, id).MaxAttempts)
		require.Equal(t, 3, plane.MaxAttemptsDefault, "the semantics page says 3")
		require.Equal(t, 3, b.claimID(t, id).MaxAttempts)
	})

	t.Run("SubmitManyAnswersInOrder", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		var batch []plane.SubmitParams
		for i := range 5 {
			batch = append(batch, plane.SubmitParams{Payload: fmt.Appendf(nil, "payload-%d", i), Priority: float64(i)})
		}
		res := b.submit(t, batch...)
		for i, r := range res {
			inv := b.get(t, r.ID)
			require.Equal(t, batch[i].Payload, inv.Payload, "result %d names invocation %d", i, i)
			require.Equal(t, batch[i].Priority, inv.Priority)
		}
		b.requireCounts(t, map[plane.State]int64{plane.StateQueued: 5})
	})

	t.Run("IDsUniqueUnderConcurrentSubmits", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{realClock: true})
		const goroutines, each = 8, 20
		ids := make([][]string, goroutines)
		errs := make([]error, goroutines)
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Go(func() {
				for i := range each {
					res, err := b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: b.ns, Queue: b.q,
						Invocations: []plane.SubmitParams{{Payload: fmt.Appendf(nil, "%d-%d", g, i)}}})
					if err != nil {
						errs[g] = err
						return
					}
					ids[g] = append(ids[g], res[0].ID)
				}
			})
		}
		wg.Wait()
		seen := map[string]bool{}
		for g := range goroutines {
			must(t, errs[g], "concurrent submit")
			for i, id := range ids[g] {
				require.False(t, seen[id], "id %s given twice", id)
				seen[id] = true
				if i > 0 {
					require.Less(t, ids[g][i-1], id, "one goroutine's ids sort in its submit order")
				}
			}
		}
		require.Len(t, seen, goroutines*each)
		require.EqualValues(t, goroutines*each, b.count(t, plane.StateQueued))
	})

	t.Run("KeyReturnsExistingID", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		id := b.submitOne(t, plane.SubmitParams{Payload: []byte("first"), Key: "order-17", Priority: 1})
		again := b.submit(t, plane.SubmitParams{Payload: []byte("second"), Key: "order-17", Priority: 9})[0]
		require.Equal(t, plane.SubmitResult{ID: id, Existing: true}, again)
		inv := b.get(t, id)
		require.Equal(t, []byte("first"), inv.Payload, "the existing invocation is not changed")
		require.Equal(t, 1.0, inv.Priority)
		b.requireCounts(t, map[plane.State]int64{plane.StateQueued: 1})
	})

	t.Run("KeyReturnsExistingIDWhateverItsState", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		keys := map[plane.State]string{}
		// running
		keys[plane.StateRunning] = b.submitOne(t, plane.SubmitParams{Key: "running"})
		b.claimID(t, keys[plane.StateRunning])
		// succeeded
		keys[plane.StateSucceeded] = b.submitOne(t, plane.SubmitParams{Key: "succeeded"})
		b.ack(t, b.claimID(t, keys[plane.StateSucceeded]), "r")
		// failed
		keys[plane.StateFailed] = b.submitOne(t, plane.SubmitParams{Key: "failed"})
		b.nack(t, b.claimID(t, keys[plane.StateFailed]), false, "boom")
		// cancelled
		keys[plane.StateCancelled] = b.submitOne(t, plane.SubmitParams{Key: "cancelled"})
		ok, err := b.drv.InvocationCancel(b.ctx, keys[plane.StateCancelled])
		must(t, err, "cancel")
		require.True(t, ok)
		for state, id := range keys {
			res := b.submit(t, plane.SubmitParams{Key: string(state), Payload: []byte("again")})[0]
			require.Equal(t, plane.SubmitResult{ID: id, Existing: true}, res, "key of a %s invocation", state)
			require.Equal(t, state, b.get(t, id).State, "resubmitting the key changes nothing")
		}
		b.requireCounts(t, map[plane.State]int64{plane.StateRunning: 1, plane.StateSucceeded: 1, plane.StateFailed: 1, plane.StateCancelled: 1})
	})

	t.Run("KeyConcurrentSubmittersGetOneID", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{realClock: true})
		const submitters = 32
		for round := range 4 {
			key := fmt.Sprintf("race-%d", round)
			results := make([]plane.SubmitResult, submitters)
			errs := make([]error, submitters)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range submitters {
				wg.Go(func() {
					<-start
					res, err := b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: b.ns, Queue: b.q,
						Invocations: []plane.SubmitParams{{Key: key, Payload: fmt.Appendf(nil, "submitter %d", i)}}})
					errs[i] = err
					if err == nil && len(res) == 1 {
						results[i] = res[0]
					}
				})
			}
			close(start)
			wg.Wait()
			fresh := 0
			for i := range submitters {
				must(t, errs[i], "a submit racing on one key must not fail")
				require.Equal(t, results[0].ID, results[i].ID, "every submitter of key %q gets the same id", key)
				if !results[i].Existing {
					fresh++
				}
			}
			require.Equal(t, 1, fresh, "exactly one submit of key %q created the invocation", key)
			require.NoError(t, plane.ValidateID(results[0].ID))
		}
		b.requireCounts(t, map[plane.State]int64{plane.StateQueued: 4})
	})

	t.Run("KeyTwiceInOneBatch", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		res := b.submit(t,
			plane.SubmitParams{Key: "dup", Payload: []byte("a")},
			plane.SubmitParams{Key: "other", Payload: []byte("b")},
			plane.SubmitParams{Key: "dup", Payload: []byte("c")},
		)
		require.False(t, res[0].Existing)
		require.False(t, res[1].Existing)
		require.Equal(t, plane.SubmitResult{ID: res[0].ID, Existing: true}, res[2])
		require.Equal(t, []byte("a"), b.get(t, res[0].ID).Payload)
		b.requireCounts(t, map[plane.State]int64{plane.StateQueued: 2})
	})

	t.Run("KeyScopedByNamespaceAndQueue", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		a := b.submitTo(t, "default", "q1", plane.SubmitParams{Key: "k"})[0]
		c := b.submitTo(t, "default", "q2", plane.SubmitParams{Key: "k"})[0]
		d := b.submitTo(t, "team-b", "q1", plane.SubmitParams{Key: "k"})[0]
		for _, r := range []plane.SubmitResult{a, c, d} {
			require.False(t, r.Existing, "a key is unique per (namespace, queue) only")
		}
		require.NotEqual(t, a.ID, c.ID)
		require.NotEqual(t, a.ID, d.ID)
		require.NotEqual(t, c.ID, d.ID)
		again := b.submitTo(t, "team-b", "q1", plane.SubmitParams{Key: "k"})[0]
		require.Equal(t, plane.SubmitResult{ID: d.ID, Existing: true}, again)
		for _, r := range []struct {
			ns, q string
			id    string
		}{{"default", "q1", a.ID}, {"default", "q2", c.ID}, {"team-b", "q1", d.ID}} {
			require.EqualValues(t, 1, b.countIn(t, r.ns, r.q, plane.StateQueued))
			inv := b.get(t, r.id)
			require.Equal(t, r.ns, inv.Namespace)
			require.Equal(t, r.q, inv.Queue)
		}
	})

	t.Run("ClientIDRetriedReturnsExisting", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		id := plane.NewIDGenerator().New(b.now())
		first := b.submit(t, plane.SubmitParams{ID: id, Payload: []byte("once")})[0]
		require.Equal(t, plane.SubmitResult{ID: id}, first, "a client-chosen id is used as given")
		second := b.submit(t, plane.SubmitParams{ID: id, Payload: []byte("twice")})[0]
		require.Equal(t, plane.SubmitResult{ID: id, Existing: true}, second)
		require.Equal(t, []byte("once"), b.get(t, id).Payload)
		b.requireCounts(t, map[plane.State]int64{plane.StateQueued: 1})
		// Also once it has run.
		b.ack(t, b.claimID(t, id), "done")
		third := b.submit(t, plane.SubmitParams{ID: id, Payload: []byte("thrice")})[0]
		require.Equal(t, plane.SubmitResult{ID: id, Existing: true}, third)
		b.requireCounts(t, map[plane.State]int64{plane.StateSucceeded: 1})
	})

	t.Run("ClientIDTwiceInOneBatch", func(t *testing.T) {
		// A batch naming one new id twice makes one invocation: the later item answers the
		// earlier one's id, as a retry of it would (SQLite refused the batch on its unique
		// index before planekit.StageSubmit).
		t.Parallel()
		b := s.setup(t, config{})
		id := plane.NewIDGenerator().New(b.now())
		got := b.submit(t, plane.SubmitParams{ID: id, Payload: []byte("first")}, plane.SubmitParams{ID: id, Payload: []byte("second")})
		require.Equal(t, []plane.SubmitResult{{ID: id}, {ID: id, Existing: true}}, got)
		require.Equal(t, []byte("first"), b.get(t, id).Payload)
		b.requireCounts(t, map[plane.State]int64{plane.StateQueued: 1})
	})

	t.Run("ClientIDsHeldInABatchOfMany", func(t *testing.T) {
		// A batch of many caller's ids (SQLite looks them up together, eight a statement):
		// the ones held answer as retries, wherever they fall in the batch, the others are
		// new; one held by another queue refuses the whole batch.
		t.Parallel()
		b := s.setup(t, config{})
		gen := plane.NewIDGenerator()
		held, elsewhere := gen.New(b.now()), gen.New(b.now())
		b.submit(t, plane.SubmitParams{ID: held, Payload: []byte("held")})
		b.submitTo(t, b.ns, "mine-too", plane.SubmitParams{ID: elsewhere})
		batch := make([]plane.SubmitParams, 11)
		want := make([]plane.SubmitResult, len(batch))
		for i := range batch {
			batch[i] = plane.SubmitParams{ID: gen.New(b.now()), Payload: []byte("new")}
			want[i] = plane.SubmitResult{ID: batch[i].ID}
		}
		batch[9].ID, want[9] = held, plane.SubmitResult{ID: held, Existing: true}
		require.Equal(t, want, b.submit(t, batch...))
		require.Equal(t, []byte("held"), b.get(t, held).Payload)
		b.requireCounts(t, map[plane.State]int64{plane.StateQueued: 11})
		refused := []plane.SubmitParams{{ID: gen.New(b.now())}, {ID: held}, {ID: elsewhere}}
		_, err := b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: b.ns, Queue: b.q, Invocations: refused})
		requireInvalid(t, err, "id")
		b.requireCounts(t, map[plane.State]int64{plane.StateQueued: 11})
	})

	t.Run("ClientIDOfAnotherQueueRevealsNothing", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		gen := plane.NewIDGenerator()
		sameNS, otherNS := gen.New(b.now()), gen.New(b.now())
		b.submitTo(t, b.ns, "mine-too", plane.SubmitParams{ID: sameNS})
		b.submitTo(t, "other-tenant", "secret", plane.SubmitParams{ID: otherNS})
		submit := func(id string) error {
			_, err := b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: b.ns, Queue: b.q,
				Invocations: []plane.SubmitParams{{ID: id}}})
			return err
		}
		errSame, errOther := submit(sameNS), submit(otherNS)
		requireInvalid(t, errSame, "id")
		requireInvalid(t, errOther, "id")
		// The answer for another tenant's id is the answer for an id of one's own namespace:
		// it names neither the queue nor the namespace.
		require.Equal(t, strings.ReplaceAll(errSame.Error(), sameNS, "ID"), strings.ReplaceAll(errOther.Error(), otherNS, "ID"))
		var ie *plane.InvalidError
		require.ErrorAs(t, errOther, &ie)
		require.Equal(t, "id", ie.Field, "the field as on the wire")
		require.NotContains(t, errOther.Error(), "queue", "the answer does not say where the id is used")
		require.NotContains(t, errOther.Error(), "other-tenant")
		require.NotContains(t, errOther.Error(), "secret")
		// Nor that an invocation has the id: the rule is what a client id is for, the same
		// as for any id the queue cannot take.
		require.Equal(t, plane.IDUnusableRule, ie.Rule)
		for _, says := range []string{"already", "another invocation", "exists", "taken", "namespace"} {
			require.NotContains(t, errOther.Error(), says, "the answer does not say the id is used elsewhere")
		}
		require.Zero(t, b.count(t, plane.StateQueued), "nothing was submitted to this queue")
	})
}
