package planetest

import (
	"bytes"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// badNames break the name rule: 1–128 bytes of [A-Za-z0-9._-], not starting with '.' or '-'.
var badNames = []string{"", ".hidden", "-dash", "has space", "slash/es", "colon:x", "ünïcode", "nul\x00", "tab\t", strings.Repeat("a", 129)}

// goodNames keep the rule, at its edges ("_under" is a good queue and topic name, and a
// bad namespace: plane.NamespaceRule).
var goodNames = []string{"a", "9", "_under", "A.b_c-9", "x-", "x.", strings.Repeat("z", 128)}

// malformedIDs are not 26-character upper-case Crockford base32 ULIDs.
var malformedIDs = []string{
	"",
	"abc",
	"01ARZ3NDEKTSV4RRFFQ69G5FA",   // 25 characters
	"01ARZ3NDEKTSV4RRFFQ69G5FAVV", // 27
	"01ARZ3NDEKTSV4RRFFQ69G5FAU",  // U is not Crockford
	"01arz3ndektsv4rrffq69g5fav",  // lower case
	"81ARZ3NDEKTSV4RRFFQ69G5FAV",  // overflows 128 bits
	"01ARZ3NDEKTSV4RRFFQ69G5FA-",
}

// unknownID is a well-formed id no plane has issued in a fresh subtest.
const unknownID = "01ARZ3NDEKTSV4RRFFQ69G5FAV"

// requireInvalid checks that err is a bad-argument error whose message says what is allowed.
func requireInvalid(t *testing.T, err error, mentions ...string) {
	t.Helper()
	requireIs(t, err, plane.ErrInvalid)
	for _, m := range mentions {
		require.Contains(t, err.Error(), m, "the message says what was wrong and what is allowed")
	}
}

// requireInvalidSomewhere checks that a batch call failed as a whole or for its one item
// with a bad-argument error.
func requireInvalidSomewhere(t *testing.T, callErr, itemErr error, what string) {
	t.Helper()
	skipUnimplemented(t, callErr)
	if callErr != nil {
		require.ErrorIs(t, callErr, plane.ErrInvalid, what)
		return
	}
	require.ErrorIs(t, itemErr, plane.ErrInvalid, what)
}

// requireNothingStored checks that no invocation exists anywhere in the plane.
func (b *bundle) requireNothingStored(t *testing.T) {
	t.Helper()
	stats, err := b.drv.QueueStatsList(b.ctx, "")
	must(t, err, "queue stats")
	for _, qs := range stats {
		for st, n := range qs.Counts {
			require.Zero(t, n, "%s/%s has %d %s invocations; a rejected call writes nothing", qs.Namespace, qs.Queue, n, st)
		}
	}
}

func testValidation(t *testing.T, s *suite) {
	t.Run("BadNamesRejected", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		for _, name := range badNames {
			_, err := b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: b.ns, Queue: name, Invocations: []plane.SubmitParams{{Payload: []byte("x")}}})
			requireInvalid(t, err, "queue name", "[A-Za-z0-9._-]")
			_, err = b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: name, Queue: b.q, Invocations: []plane.SubmitParams{{Payload: []byte("x")}}})
			requireInvalid(t, err, "namespace", "[A-Za-z0-9._-]")
			_, err = b.drv.InvocationClaimMany(b.ctx, &plane.ClaimParams{Namespace: b.ns, Queue: name, Kind: plane.KindFIFO})
			requireInvalid(t, err, "queue name")
			_, err = b.drv.InvocationClaimMany(b.ctx, &plane.ClaimParams{Namespace: name, Queue: b.q, Kind: plane.KindFIFO})
			requireInvalid(t, err, "namespace")
			_, err = b.drv.InvocationCount(b.ctx, &plane.CountParams{Namespace: b.ns, Queue: name, State: plane.StateQueued})
			requireInvalid(t, err, "queue name")
			_, err = b.postErr(b.topicJournal(name), "", "v", false)
			requireInvalid(t, err, "topic name")
			_, err = b.drv.FrameRead(b.ctx, &plane.FrameReadParams{Journal: b.topicJournal(name), Since: -1})
			requireInvalid(t, err, "topic name")
			_, err = b.postErr(plane.Journal{Namespace: b.ns, Queue: name, Topic: "t"}, "", "v", false)
			requireInvalid(t, err, "queue name")
		}
		b.requireNothingStored(t)
		frames, _ := b.frames(t, b.topicJournal("t"))
		require.Empty(t, frames)
	})

	t.Run("GoodNamesAccepted", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		for _, name := range goodNames {
			ns := name
			if strings.HasPrefix(name, "_") { // a good queue or topic name, not a namespace (NamespaceRule)
				ns = b.ns
			}
			id := b.submitTo(t, ns, name, plane.SubmitParams{Payload: []byte(name)})[0].ID
			jobs := b.claim(t, plane.ClaimParams{Namespace: ns, Queue: name, Kind: plane.KindFIFO})
			require.Len(t, jobs, 1, "name %q", name)
			require.Equal(t, id, jobs[0].ID)
			require.Equal(t, name, jobs[0].Queue)
			require.Equal(t, ns, jobs[0].Namespace)
			_, err := b.postErr(plane.Journal{Namespace: ns, Queue: name, Topic: name}, "", "v", false)
			must(t, err, "topic "+name)
		}
	})

	t.Run("UnderscoreNamespacesRejected", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		_, err := b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: "_under", Queue: b.q, Invocations: []plane.SubmitParams{{Payload: []byte("x")}}})
		requireInvalid(t, err, "namespace", "not starting with '.', '_' or '-'")
		_, err = b.drv.InvocationClaimMany(b.ctx, &plane.ClaimParams{Namespace: "_under", Queue: b.q, Kind: plane.KindFIFO})
		requireInvalid(t, err, "namespace")
		b.requireNothingStored(t)
	})

	t.Run("BadKeysRejected", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		for _, key := range []string{strings.Repeat("k", 513), "nul\x00inside", "\xff\xfe not utf-8", "\x00"} {
			_, err := b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: b.ns, Queue: b.q, Invocations: []plane.SubmitParams{{Key: key}}})
			requireInvalid(t, err, "key", "512")
		}
		b.requireNothingStored(t)
		for _, key := range []string{strings.Repeat("k", 512), "ключ 🔑 with spaces/and:punctuation", "x"} {
			r := b.submit(t, plane.SubmitParams{Key: key})[0]
			require.False(t, r.Existing)
			require.Equal(t, key, b.get(t, r.ID).Key)
		}
	})

	t.Run("BadSubmitFieldsRejected", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		for _, c := range []struct {
			name    string
			p       plane.SubmitParams
			mention string
		}{
			{"NaNPriority", plane.SubmitParams{Priority: math.NaN()}, "priority"},
			{"NegativeMaxAttempts", plane.SubmitParams{MaxAttempts: -1}, "attempts"},
			{"MaxAttemptsOverBound", plane.SubmitParams{MaxAttempts: plane.MaxAttemptsMax + 1}, "use 1 to 10000 attempts"},
			{"MaxAttemptsOverflowing", plane.SubmitParams{MaxAttempts: math.MaxInt}, "use 1 to 10000 attempts"},
			{"NegativeAttemptTimeout", plane.SubmitParams{AttemptTimeout: -time.Second}, "timeout"},
			{"MalformedClientID", plane.SubmitParams{ID: "not-a-ulid"}, "id"},
			{"EmptyMetadataKey", plane.SubmitParams{Metadata: map[string]string{"": "x"}}, "metadata"},
			{"NULInMetadataKey", plane.SubmitParams{Metadata: map[string]string{"a\x00b": "x"}}, "metadata"},
			{"InvalidUTF8MetadataValue", plane.SubmitParams{Metadata: map[string]string{"k": "\xff\xfe"}}, "metadata"},
			{"HugeMetadata", plane.SubmitParams{Metadata: map[string]string{"k": strings.Repeat("x", plane.MaxMetadataBytes)}}, "metadata"},
		} {
			_, err := b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: b.ns, Queue: b.q, Invocations: []plane.SubmitParams{c.p}})
			requireInvalid(t, err, c.mention)
		}
		b.requireNothingStored(t)
		// The bound itself is taken and kept.
		id := b.submitOne(t, plane.SubmitParams{MaxAttempts: plane.MaxAttemptsMax})
		require.Equal(t, plane.MaxAttemptsMax, b.get(t, id).MaxAttempts)
	})

	t.Run("PayloadSizeLimit", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		big := bytes.Repeat([]byte{0xAB}, plane.MaxValueBytes+1)
		_, err := b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: b.ns, Queue: b.q, Invocations: []plane.SubmitParams{{Payload: big}}})
		requireInvalid(t, err, "payload", "key")
		require.True(t, strings.Contains(err.Error(), strconv.Itoa(plane.MaxValueBytes)) || strings.Contains(err.Error(), "16 MiB"),
			"the message states the limit: %v", err)
		b.requireNothingStored(t)

		atLimit := big[:plane.MaxValueBytes]
		id := b.submitOne(t, plane.SubmitParams{Payload: atLimit})
		got := b.get(t, id).Payload
		require.Len(t, got, plane.MaxValueBytes, "a payload exactly at the limit is kept whole")
		require.True(t, bytes.Equal(atLimit, got), "a payload at the limit round-trips")
	})

	t.Run("BadBatchWritesNothing", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		_, err := b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: b.ns, Queue: b.q, Invocations: []plane.SubmitParams{
			{Key: "good-1", Payload: []byte("a")},
			{Key: "good-2", Payload: []byte("b")},
			{Key: "bad", Priority: math.NaN()},
		}})
		requireInvalid(t, err, "priority")
		b.requireNothingStored(t)
		r := b.submit(t, plane.SubmitParams{Key: "good-1"})[0]
		require.False(t, r.Existing, "the key of a rejected batch was not taken")
	})

	t.Run("BadClaimRejected", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		id := b.submitOne(t, plane.SubmitParams{Priority: 1})
		claim := func(p plane.ClaimParams) error {
			p.Namespace, p.Queue = b.ns, b.q
			jobs, err := b.drv.InvocationClaimMany(b.ctx, &p)
			require.Empty(t, jobs, "a rejected claim claims nothing")
			return err
		}
		err := claim(plane.ClaimParams{Kind: "x"})
		requireInvalid(t, err, `"x"`, "fifo|priority|filo|boltzmann")
		err = claim(plane.ClaimParams{Kind: "FIFO"})
		requireInvalid(t, err, `"FIFO"`, "fifo|priority|filo|boltzmann")
		for _, temp := range []float64{0, -1, math.NaN(), math.Inf(1), math.Inf(-1)} {
			err := claim(plane.ClaimParams{Kind: plane.KindBoltzmann, Temperature: temp})
			requireInvalid(t, err, "temperature")
		}
		for _, p := range []plane.ClaimParams{
			{Kind: plane.KindFIFO, Max: -1},
			{Kind: plane.KindFIFO, LeaseTTL: -time.Second},
			{Kind: plane.KindFIFO, Wait: -time.Second},
		} {
			requireInvalid(t, claim(p))
		}
		b.requireCounts(t, map[plane.State]int64{plane.StateQueued: 1})
		b.requireState(t, id, plane.StateQueued, 0)
		// The temperature matters only to boltzmann.
		jobs := b.claim(t, plane.ClaimParams{Kind: plane.KindPriority, Temperature: math.NaN()})
		require.Len(t, jobs, 1)
	})

	t.Run("LeaseTTLBounded", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		id := b.submitOne(t, plane.SubmitParams{})
		_, err := b.drv.InvocationClaimMany(b.ctx, &plane.ClaimParams{Namespace: b.ns, Queue: b.q, Kind: plane.KindFIFO,
			LeaseTTL: plane.LeaseTTLMax + time.Second})
		requireIs(t, err, plane.ErrInvalid, "a lease longer than LeaseTTLMax")
		require.Contains(t, err.Error(), "lease")
		b.requireState(t, id, plane.StateQueued, 0)
		jobs := b.claim(t, plane.ClaimParams{Kind: plane.KindFIFO, LeaseTTL: plane.LeaseTTLMax})
		require.Len(t, jobs, 1, "a lease of exactly LeaseTTLMax is allowed")
		requireTime(t, b.now().Add(plane.LeaseTTLMax), jobs[0].LeaseExpiresAt, "lease expiry")
		_, err = b.drv.InvocationHeartbeatMany(b.ctx, []plane.HeartbeatParams{{ID: id, Token: jobs[0].Token, LeaseTTL: 100 * 365 * 24 * time.Hour}})
		requireIs(t, err, plane.ErrInvalid, "a heartbeat asking for a century")
		requireTime(t, b.now().Add(plane.LeaseTTLMax), b.get(t, id).LeaseExpiresAt, "the refused heartbeat changed nothing")
	})

	t.Run("UnknownIDsNotFound", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		b.submitOne(t, plane.SubmitParams{})
		_, err := b.drv.InvocationGet(b.ctx, unknownID)
		requireIs(t, err, plane.ErrNotFound, "get")
		start := time.Now()
		_, err = b.drv.InvocationWait(b.ctx, &plane.WaitParams{ID: unknownID, Timeout: longWait})
		requireIs(t, err, plane.ErrNotFound, "wait")
		require.Less(t, time.Since(start), wakeLatency, "waiting on an unknown id fails at once")
		_, err = b.drv.InvocationCancel(b.ctx, unknownID)
		requireIs(t, err, plane.ErrNotFound, "cancel")
		_, err = b.drv.InvocationKill(b.ctx, unknownID)
		requireIs(t, err, plane.ErrNotFound, "kill")
		_, err = b.drv.FrameRead(b.ctx, &plane.FrameReadParams{Journal: invJournal(unknownID), Since: -1})
		requireIs(t, err, plane.ErrNotFound, "read frames")
		_, err = b.postErr(invJournal(unknownID), "some-token", "v", false)
		requireIs(t, err, plane.ErrNotFound, "post")
		err = b.settle(t, plane.SettleParams{ID: unknownID, Token: "some-token", Outcome: plane.OutcomeSucceeded})
		requireIs(t, err, plane.ErrNotFound, "settle")
		hb := b.heartbeat(t, unknownID, "some-token", 0)
		requireIs(t, hb.Err, plane.ErrNotFound, "heartbeat")
		b.requireCounts(t, map[plane.State]int64{plane.StateQueued: 1})
	})

	t.Run("MalformedIDsInvalid", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		b.submitOne(t, plane.SubmitParams{})
		for _, id := range malformedIDs {
			_, err := b.drv.InvocationGet(b.ctx, id)
			requireInvalid(t, err, "id")
			_, err = b.drv.InvocationWait(b.ctx, &plane.WaitParams{ID: id, Timeout: time.Second})
			requireInvalid(t, err)
			_, err = b.drv.InvocationCancel(b.ctx, id)
			requireInvalid(t, err)
			_, err = b.drv.InvocationKill(b.ctx, id)
			requireInvalid(t, err)
			if id == "" {
				continue // an empty journal id means "a topic", checked with the names
			}
			_, err = b.drv.FrameRead(b.ctx, &plane.FrameReadParams{Journal: invJournal(id), Since: -1})
			requireInvalid(t, err)
			_, err = b.postErr(invJournal(id), "tok", "v", false)
			requireInvalid(t, err)
			errs, err := b.drv.InvocationSettleMany(b.ctx, []plane.SettleParams{{ID: id, Token: "tok", Outcome: plane.OutcomeSucceeded}})
			requireInvalidSomewhere(t, err, firstErr(errs), "settle "+id)
			hbs, err := b.drv.InvocationHeartbeatMany(b.ctx, []plane.HeartbeatParams{{ID: id, Token: "tok"}})
			var hbErr error
			if len(hbs) > 0 {
				hbErr = hbs[0].Err
			}
			requireInvalidSomewhere(t, err, hbErr, "heartbeat "+id)
		}
		b.requireCounts(t, map[plane.State]int64{plane.StateQueued: 1})
	})

	t.Run("BadSettleOutcomeRejected", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		id := b.submitOne(t, plane.SubmitParams{})
		j := b.claimID(t, id)
		for _, o := range []plane.Outcome{0, 42, -1} {
			errs, err := b.drv.InvocationSettleMany(b.ctx, []plane.SettleParams{{ID: j.ID, Token: j.Token, Outcome: o}})
			requireInvalidSomewhere(t, err, firstErr(errs), "outcome")
		}
		b.requireState(t, id, plane.StateRunning, 1)
		b.ack(t, j, "still mine")
	})

	t.Run("OversizeResultAndFrameRejected", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		id := b.submitOne(t, plane.SubmitParams{})
		j := b.claimID(t, id)
		big := bytes.Repeat([]byte{1}, plane.MaxValueBytes+1)
		_, err := b.drv.FramePost(b.ctx, &plane.FramePostParams{Journal: invJournal(id), Token: j.Token, Value: big})
		requireInvalid(t, err, "key")
		_, err = b.drv.FramePost(b.ctx, &plane.FramePostParams{Journal: invJournal(id), Token: j.Token, Value: big, Final: true})
		requireInvalid(t, err, "key")
		errs, err := b.drv.InvocationSettleMany(b.ctx, []plane.SettleParams{{ID: id, Token: j.Token, Outcome: plane.OutcomeSucceeded, Result: big}})
		requireInvalidSomewhere(t, err, firstErr(errs), "oversize result")
		_, err = b.drv.FramePost(b.ctx, &plane.FramePostParams{Journal: b.topicJournal("t"), Value: big})
		requireInvalid(t, err, "key")
		frames, closed := b.frames(t, invJournal(id))
		require.Empty(t, frames)
		require.False(t, closed)
		frames, _ = b.frames(t, b.topicJournal("t"))
		require.Empty(t, frames)
		b.requireState(t, id, plane.StateRunning, 1)
		b.ack(t, j, "small")
	})

	t.Run("BadCountStatsTrimRejected", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		b.submitOne(t, plane.SubmitParams{})
		_, err := b.drv.InvocationCount(b.ctx, &plane.CountParams{Namespace: b.ns, Queue: b.q, State: "bogus"})
		requireInvalid(t, err, "bogus")
		_, err = b.drv.QueueStatsList(b.ctx, "bad name!")
		requireInvalid(t, err, "namespace")
		_, err = b.drv.InvocationTrim(b.ctx, &plane.TrimParams{Queue: "bad name!", FinishedBefore: b.now().Add(time.Hour)})
		requireInvalid(t, err, "queue")
		b.requireCounts(t, map[plane.State]int64{plane.StateQueued: 1})
	})

	t.Run("BoundsRejected", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		// A batch larger than SubmitManyMax is refused whole, naming the bound.
		_, err := b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: b.ns, Queue: b.q,
			Invocations: make([]plane.SubmitParams, plane.SubmitManyMax+1)})
		requireInvalid(t, err, "invocations", strconv.Itoa(plane.SubmitManyMax))
		b.requireNothingStored(t)
		// An item of a batch is named by its index.
		_, err = b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: b.ns, Queue: b.q,
			Invocations: []plane.SubmitParams{{}, {MaxAttempts: -1}}})
		requireInvalid(t, err, "invocations[1].max_attempts")
		// Delays are bounded.
		for _, p := range []plane.SubmitParams{{Delay: plane.DelayMax + time.Second}, {Delay: math.MaxInt64}} {
			_, err = b.drv.InvocationSubmitMany(b.ctx, &plane.SubmitManyParams{Namespace: b.ns, Queue: b.q, Invocations: []plane.SubmitParams{p}})
			requireInvalid(t, err, "delay", "366 days")
		}
		b.requireNothingStored(t)

		id := b.submitOne(t, plane.SubmitParams{Delay: plane.DelayMax})
		b.requireState(t, id, plane.StateQueued, 0)
		id = b.submitOne(t, plane.SubmitParams{})
		// Claim's max and worker are bounded.
		for _, c := range []struct {
			p       plane.ClaimParams
			mention string
		}{
			{plane.ClaimParams{Kind: plane.KindFIFO, Max: plane.ClaimMaxLimit + 1}, "max"},
			{plane.ClaimParams{Kind: plane.KindFIFO, Worker: "evil\x1b[31m\nline2"}, "worker"},
			{plane.ClaimParams{Kind: plane.KindFIFO, Worker: "nul\x00"}, "worker"},
			{plane.ClaimParams{Kind: plane.KindFIFO, Worker: strings.Repeat("w", 129)}, "worker"},
		} {
			c.p.Namespace, c.p.Queue = b.ns, b.q
			jobs, err := b.drv.InvocationClaimMany(b.ctx, &c.p)
			require.Empty(t, jobs)
			requireInvalid(t, err, c.mention)
		}
		b.requireState(t, id, plane.StateQueued, 0)
		j := b.claim(t, plane.ClaimParams{Kind: plane.KindFIFO, Max: plane.ClaimMaxLimit, Worker: "host-1 pid 42"})[0]
		require.Equal(t, id, j.ID)

		// A settle's error type is a short name, its retry delay bounded; a long message is cut.
		for _, p := range []plane.SettleParams{
			{Outcome: plane.OutcomeFailed, Error: &plane.ErrorInfo{Type: strings.Repeat("x", 129), Message: "m"}},
			{Outcome: plane.OutcomeFailed, Error: &plane.ErrorInfo{Type: "two words", Message: "m"}},
			{Outcome: plane.OutcomeRetry, Error: &plane.ErrorInfo{Type: "x", Message: "m"}, RetryDelay: plane.DelayMax + time.Second},
		} {
			p.ID, p.Token = j.ID, j.Token
			errs, err := b.drv.InvocationSettleMany(b.ctx, []plane.SettleParams{p})
			requireInvalidSomewhere(t, err, firstErr(errs), "settle bound")
		}
		b.requireState(t, id, plane.StateRunning, 1)
		long := strings.Repeat("é", plane.MaxErrorMessageBytes)
		must(t, b.settle(t, plane.SettleParams{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeFailed,
			Error: &plane.ErrorInfo{Type: "ValueError", Message: long}}), "settle with a long message")
		inv := b.requireState(t, id, plane.StateFailed, 1)
		require.LessOrEqual(t, len(inv.Error.Message), plane.MaxErrorMessageBytes)
		require.True(t, strings.HasSuffix(inv.Error.Message, plane.ErrorMessageCut), "a cut message says so")
		require.True(t, utf8.ValidString(inv.Error.Message), "a cut message stays UTF-8")
		require.Equal(t, "ValueError", inv.Error.Type)
	})

	t.Run("FrameReadBounded", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		_, err := b.drv.FrameRead(b.ctx, &plane.FrameReadParams{Journal: b.topicJournal("t"), Since: -1, Limit: plane.FrameReadLimitMax + 1})
		requireInvalid(t, err, "limit", strconv.Itoa(plane.FrameReadLimitMax))
		// Three values of just over 8 MiB: a page stops once its values reach
		// FrameReadBytes, so the first page holds two frames and the second the third.
		half := strings.Repeat("v", plane.FrameReadBytes/2+1)
		for range 3 {
			b.topicPost(t, "big", half, false)
		}
		b.topicPost(t, "big", "", true)
		res := b.read(t, plane.FrameReadParams{Journal: b.topicJournal("big"), Since: -1})
		require.Len(t, res.Frames, 2, "a page stops past FrameReadBytes of values")
		res = b.read(t, plane.FrameReadParams{Journal: b.topicJournal("big"), Since: res.Frames[1].Seq})
		require.Len(t, res.Frames, 2, "the rest follows from the cursor: the third value and END")
		require.Equal(t, plane.FrameEnd, res.Frames[1].Kind)
		// One frame larger than the budget still comes alone.
		b.topicPost(t, "one", strings.Repeat("w", plane.FrameReadBytes-1), false)
		b.topicPost(t, "one", "x", false)
		res = b.read(t, plane.FrameReadParams{Journal: b.topicJournal("one"), Since: -1, Limit: 1})
		require.Len(t, res.Frames, 1)
		frames, _ := b.frames(t, b.topicJournal("big"))
		require.Len(t, frames, 4)
	})

	t.Run("JournalNamingBothRejected", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		id := b.submitOne(t, plane.SubmitParams{})
		j := b.claimID(t, id)
		both := plane.Journal{InvocationID: id, Namespace: b.ns, Queue: b.q, Topic: "t"}
		_, err := b.postErr(both, j.Token, "v", false)
		requireInvalid(t, err)
		_, err = b.drv.FrameRead(b.ctx, &plane.FrameReadParams{Journal: both, Since: -1})
		requireInvalid(t, err)
		frames, _ := b.frames(t, invJournal(id))
		require.Empty(t, frames)
	})
}

// firstErr returns the first per-item error of a batch answer, or nil.
func firstErr(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return errs[0]
}
