package planetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// lateRead is what readLater reports.
type lateRead struct {
	res *plane.FrameReadResult
	err error
	at  time.Time // when the read returned
}

// readAsync starts a FrameRead on its own goroutine and reports on the channel.
func (b *bundle) readAsync(p plane.FrameReadParams) <-chan lateRead {
	ch := make(chan lateRead, 1)
	go func() {
		res, err := b.drv.FrameRead(b.ctx, &p)
		ch <- lateRead{res: res, err: err, at: time.Now()}
	}()
	return ch
}

func testJournal(t *testing.T, s *suite) {
	t.Run("PostAppendsDenseFramesThenAckEnds", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		id := b.submitOne(t, plane.SubmitParams{})
		j := b.claimID(t, id)
		var times []time.Time
		for i, v := range []string{"a", "b", "c"} {
			times = append(times, b.advance(time.Second))
			require.EqualValues(t, i, b.post(t, j, v), "post returns the frame's seq, dense from 0")
		}
		frames, closed := b.frames(t, invJournal(id))
		require.False(t, closed, "open while the job runs")
		require.Len(t, frames, 3)
		times = append(times, b.advance(time.Second))
		b.ack(t, j, "result")
		frames, closed = b.frames(t, invJournal(id))
		require.True(t, closed, "END closes the journal")
		requireDense(t, frames)
		require.Equal(t, []plane.FrameKind{plane.FrameValue, plane.FrameValue, plane.FrameValue, plane.FrameEnd}, frameKinds(frames))
		for i, want := range []string{"a", "b", "c", "result"} {
			require.Equal(t, []byte(want), frames[i].Value)
			require.Equal(t, 1, frames[i].Attempt)
			requireTime(t, times[i], frames[i].Time, "frame time (the plane's clock)")
		}
		_, err := b.postErr(invJournal(id), j.Token, "after END", false)
		requireIs(t, err, plane.ErrJournalClosed, "post after END")
		_, err = b.postErr(invJournal(id), j.Token, "second result", true)
		requireIs(t, err, plane.ErrJournalClosed, "final post after END")
		after, _ := b.frames(t, invJournal(id))
		require.Equal(t, frames, after, "nothing appended after END")
		require.Equal(t, []byte("result"), b.get(t, id).Result)
	})

	// A final post ends the journal, not the job (issue 24, semantics 1; before, it acked
	// the job with its value, and an ack after it was refused as ErrLeaseLost): the END
	// frame is stored with the post's value, the journal reads closed while that attempt
	// runs, and the ack that follows settles the job with its own result and appends no
	// second END.
	t.Run("PostFinalEndsJournalAckSettles", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		id := b.submitOne(t, plane.SubmitParams{})
		j := b.claimID(t, id)
		b.post(t, j, "partial")
		seq, err := b.postErr(invJournal(id), j.Token, "end value", true)
		must(t, err, "post final")
		require.EqualValues(t, 1, seq)
		b.requireState(t, id, plane.StateRunning, 1)
		b.requireCounts(t, map[plane.State]int64{plane.StateRunning: 1})
		frames, closed := b.frames(t, invJournal(id))
		require.True(t, closed, "END closes the journal while the job still runs")
		require.Equal(t, []plane.FrameKind{plane.FrameValue, plane.FrameEnd}, frameKinds(frames))
		require.Equal(t, []byte("end value"), frames[1].Value)
		require.Equal(t, 1, frames[1].Attempt)
		_, err = b.postErr(invJournal(id), j.Token, "after END", false)
		requireIs(t, err, plane.ErrJournalClosed, "post after a final post")
		_, err = b.postErr(invJournal(id), j.Token, "second END", true)
		requireIs(t, err, plane.ErrJournalClosed, "final post after a final post")
		res := b.read(t, plane.FrameReadParams{Journal: invJournal(id), Since: 1, Wait: longWait})
		require.True(t, res.Closed, "a read past END returns at once")
		require.Empty(t, res.Frames)
		b.ack(t, j, "the result")
		inv := b.requireState(t, id, plane.StateSucceeded, 1)
		require.Equal(t, []byte("the result"), inv.Result, "the ack's result, not the END frame's value")
		after, closed := b.frames(t, invJournal(id))
		require.True(t, closed)
		require.Equal(t, frames, after, "the ack appends no second END")
		require.Equal(t, []byte("the result"), b.waitTerminal(t, id).Result)
	})

	t.Run("PostFinalByStaleHolderRefused", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		id := b.submitOne(t, plane.SubmitParams{})
		j := b.claimID(t, id)
		_, err := b.postErr(invJournal(id), plane.NewToken(b.now()), "not mine", true)
		requireIs(t, err, plane.ErrLeaseLost, "a final post needs the lease token")
		frames, closed := b.frames(t, invJournal(id))
		require.False(t, closed)
		require.Empty(t, frames)
		b.ack(t, j, "r")
	})

	t.Run("PostFinalThenFailureKeepsEnd", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		id := b.submitOne(t, plane.SubmitParams{})
		j := b.claimID(t, id)
		_, err := b.postErr(invJournal(id), j.Token, "", true)
		must(t, err, "post final")
		b.nack(t, j, false, "failed after END")
		inv := b.requireState(t, id, plane.StateFailed, 1)
		require.Equal(t, "failed after END", inv.Error.Message, "the outcome is the invocation's")
		frames, closed := b.frames(t, invJournal(id))
		require.True(t, closed)
		require.Equal(t, []plane.FrameKind{plane.FrameEnd}, frameKinds(frames), "no ERROR after the attempt's own END")
	})

	t.Run("PostFinalThenRetryReopens", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		id := b.submitOne(t, plane.SubmitParams{MaxAttempts: 3})
		j := b.claimID(t, id)
		b.post(t, j, "first try")
		_, err := b.postErr(invJournal(id), j.Token, "", true)
		must(t, err, "post final")
		b.nack(t, j, true, "flaky after END")
		frames, closed := b.frames(t, invJournal(id))
		require.False(t, closed, "a retry opens the journal again")
		require.Equal(t, []plane.FrameKind{plane.FrameValue, plane.FrameEnd}, frameKinds(frames))
		b.advance(pastBackoff)
		j2 := b.claimID(t, id)
		require.EqualValues(t, 2, b.post(t, j2, "second try"), "the next attempt continues the seqs")
		b.ack(t, j2, "ok")
		frames, closed = b.frames(t, invJournal(id))
		require.True(t, closed)
		requireDense(t, frames)
		require.Equal(t, []plane.FrameKind{plane.FrameValue, plane.FrameEnd, plane.FrameValue, plane.FrameEnd}, frameKinds(frames))
		require.Equal(t, []byte("ok"), frames[3].Value, "the settling attempt posted no END: its ack derives one")
		require.Equal(t, 2, frames[3].Attempt)
	})

	t.Run("FailureEndsWithErrorFrame", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		id := b.submitOne(t, plane.SubmitParams{})
		j := b.claimID(t, id)
		b.post(t, j, "v0")
		b.post(t, j, "v1")
		b.nack(t, j, false, "it broke")
		info := b.requireErrorFrame(t, id, 1)
		require.Equal(t, plane.ErrorInfo{Type: "error", Message: "it broke", Attempt: 1}, info)
		frames, _ := b.frames(t, invJournal(id))
		require.Equal(t, []plane.FrameKind{plane.FrameValue, plane.FrameValue, plane.FrameError}, frameKinds(frames))
		_, err := b.postErr(invJournal(id), j.Token, "after ERROR", false)
		requireIs(t, err, plane.ErrJournalClosed, "post after ERROR")
		after, _ := b.frames(t, invJournal(id))
		require.Equal(t, frames, after)
	})

	t.Run("RetryContinuesJournal", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		id := b.submitOne(t, plane.SubmitParams{MaxAttempts: 3})
		j := b.claimID(t, id)
		b.post(t, j, "first try 0")
		b.post(t, j, "first try 1")
		b.nack(t, j, true, "flaky")
		frames, closed := b.frames(t, invJournal(id))
		require.False(t, closed, "a retry does not close the journal")
		require.Equal(t, []plane.FrameKind{plane.FrameValue, plane.FrameValue}, frameKinds(frames), "a retry appends nothing")
		b.advance(pastBackoff)
		j2 := b.claimID(t, id)
		require.EqualValues(t, 2, b.post(t, j2, "second try"), "the next attempt continues the seqs")
		b.ack(t, j2, "ok")
		frames, closed = b.frames(t, invJournal(id))
		require.True(t, closed)
		requireDense(t, frames)
		require.Equal(t, []plane.FrameKind{plane.FrameValue, plane.FrameValue, plane.FrameValue, plane.FrameEnd}, frameKinds(frames))
		var attempts []int
		for _, f := range frames {
			attempts = append(attempts, f.Attempt)
		}
		require.Equal(t, []int{1, 1, 2, 2}, attempts, "frames carry their attempt")
	})

	t.Run("CursorResumesExactlyOnce", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		id := b.submitOne(t, plane.SubmitParams{})
		j := b.claimID(t, id)
		for i := range 25 {
			b.post(t, j, fmt.Sprintf("v%d", i))
		}
		var got []plane.Frame
		since := int64(-1)
		for range 100 {
			res := b.read(t, plane.FrameReadParams{Journal: invJournal(id), Since: since, Limit: 4})
			require.LessOrEqual(t, len(res.Frames), 4, "Limit caps a read")
			if len(res.Frames) == 0 {
				require.False(t, res.Closed)
				break
			}
			got = append(got, res.Frames...)
			since = res.Frames[len(res.Frames)-1].Seq // reconnect with the last seq seen
		}
		require.Len(t, got, 25, "every frame once")
		requireDense(t, got)
		for i, f := range got {
			require.Equal(t, fmt.Sprintf("v%d", i), string(f.Value))
		}
		res := b.read(t, plane.FrameReadParams{Journal: invJournal(id), Since: 10})
		require.Len(t, res.Frames, 14)
		require.EqualValues(t, 11, res.Frames[0].Seq)
		b.ack(t, j, "end")
		res = b.read(t, plane.FrameReadParams{Journal: invJournal(id), Since: 24})
		require.True(t, res.Closed)
		require.Len(t, res.Frames, 1)
		require.Equal(t, plane.FrameEnd, res.Frames[0].Kind)
		require.EqualValues(t, 25, res.Frames[0].Seq)
		res = b.read(t, plane.FrameReadParams{Journal: invJournal(id), Since: 25})
		require.Empty(t, res.Frames)
		require.True(t, res.Closed)
	})

	t.Run("LiveReaderSeesEveryFrameOnce", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{realClock: true})
		id := b.submitOne(t, plane.SubmitParams{})
		j := b.claimID(t, id)
		const n = 40
		type readerResult struct {
			frames []plane.Frame
			err    error
		}
		done := make(chan readerResult, 1)
		go func() {
			var r readerResult
			since := int64(-1)
			for {
				res, err := b.drv.FrameRead(b.ctx, &plane.FrameReadParams{Journal: invJournal(id), Since: since, Limit: 3, Wait: 5 * time.Second})
				if err != nil {
					r.err = err
					break
				}
				if len(res.Frames) > 0 && res.Frames[0].Seq <= since {
					r.err = fmt.Errorf("read after seq %d returned seq %d", since, res.Frames[0].Seq)
					break
				}
				r.frames = append(r.frames, res.Frames...)
				if len(res.Frames) > 0 {
					since = res.Frames[len(res.Frames)-1].Seq
					if res.Frames[len(res.Frames)-1].Kind == plane.FrameEnd {
						break
					}
				} else if res.Closed {
					break
				}
			}
			done <- r
		}()
		for i := range n {
			b.post(t, j, fmt.Sprintf("live %d", i))
		}
		b.ack(t, j, "done")
		r := <-done
		must(t, r.err, "live read")
		require.Len(t, r.frames, n+1, "every frame exactly once")
		requireDense(t, r.frames)
		for i := range n {
			require.Equal(t, fmt.Sprintf("live %d", i), string(r.frames[i].Value))
		}
		require.Equal(t, plane.FrameEnd, r.frames[n].Kind)
	})

	t.Run("ReadWaitWokenByJournalEvents", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct {
			name  string
			event func(*testing.T, *bundle, *plane.Job)
			want  plane.FrameKind
		}{
			{"Post", func(t *testing.T, b *bundle, j *plane.Job) { b.post(t, j, "news") }, plane.FrameValue},
			{"Ack", func(t *testing.T, b *bundle, j *plane.Job) { b.ack(t, j, "res") }, plane.FrameEnd},
			{"Nack", func(t *testing.T, b *bundle, j *plane.Job) { b.nack(t, j, false, "bad") }, plane.FrameError},
			{"Kill", func(t *testing.T, b *bundle, j *plane.Job) { require.True(t, b.kill(t, j.ID)) }, plane.FrameError},
		} {
			t.Run(c.name, func(t *testing.T) {
				b := s.setup(t, config{realClock: true})
				id := b.submitOne(t, plane.SubmitParams{MaxAttempts: 1})
				j := b.claimID(t, id)
				read := b.readAsync(plane.FrameReadParams{Journal: invJournal(id), Since: -1, Wait: longWait})
				<-time.After(headStart) // let the reader park; correctness does not depend on it
				c.event(t, b, j)
				ended := time.Now() // the bound starts when the event is done, as in Wait/WokenByEveryWayToEnd
				r := <-read
				must(t, r.err, c.name+": read")
				require.Len(t, r.res.Frames, 1, "%s: the waiting read returns the new frame", c.name)
				require.Equal(t, c.want, r.res.Frames[0].Kind, c.name)
				require.Equal(t, c.want != plane.FrameValue, r.res.Closed, c.name)
				require.Less(t, r.at.Sub(ended), wakeLatency, "%s: the reader is woken, not polling", c.name)
			})
		}
	})

	t.Run("ReadWaitWokenByLeaseExpiry", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		id := b.submitOne(t, plane.SubmitParams{MaxAttempts: 1})
		b.claimID(t, id)
		read := b.readAsync(plane.FrameReadParams{Journal: invJournal(id), Since: -1, Wait: longWait})
		<-time.After(headStart)
		b.advance(plane.LeaseTTLDefault + time.Second)
		b.maintain(t)
		ended := time.Now() // measured from the end of Maintain, whose own duration is not the reader's latency
		r := <-read
		must(t, r.err, "read")
		require.Len(t, r.res.Frames, 1)
		require.Equal(t, plane.FrameError, r.res.Frames[0].Kind)
		require.True(t, r.res.Closed)
		require.Less(t, r.at.Sub(ended), wakeLatency, "a reader is woken by maintenance's ERROR frame")
	})

	t.Run("ReadWaitReturnsEmptyWhenNothingCame", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{realClock: true})
		id := b.submitOne(t, plane.SubmitParams{})
		j := b.claimID(t, id)
		b.post(t, j, "only")
		start := time.Now()
		res := b.read(t, plane.FrameReadParams{Journal: invJournal(id), Since: 0, Wait: shortWait})
		elapsed := time.Since(start)
		require.Empty(t, res.Frames)
		require.False(t, res.Closed)
		require.GreaterOrEqual(t, elapsed, shortWait*9/10, "the read waited")
		require.Less(t, elapsed, shortWait+wakeLatency)
	})

	t.Run("ReadOfClosedJournalDoesNotWait", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{realClock: true})
		id := b.submitOne(t, plane.SubmitParams{})
		b.ack(t, b.claimID(t, id), "r")
		start := time.Now()
		res := b.read(t, plane.FrameReadParams{Journal: invJournal(id), Since: 0, Wait: longWait})
		require.Empty(t, res.Frames)
		require.True(t, res.Closed, "nothing will ever follow END")
		require.Less(t, time.Since(start), wakeLatency, "a reader past END is not kept waiting")
	})

	t.Run("ReadOfCancelledInvocationIsClosed", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{realClock: true})
		id := b.submitOne(t, plane.SubmitParams{})
		read := b.readAsync(plane.FrameReadParams{Journal: invJournal(id), Since: -1, Wait: longWait})
		<-time.After(headStart) // let the reader park; correctness does not depend on it
		at := time.Now()
		require.True(t, b.cancel(t, id))
		r := <-read
		must(t, r.err, "read")
		// The semantics page does not say whether a cancel appends an ERROR frame; if it
		// does, it is the only frame.
		require.LessOrEqual(t, len(r.res.Frames), 1, "a cancel appends at most its ERROR frame")
		if len(r.res.Frames) == 1 {
			require.Equal(t, plane.FrameError, r.res.Frames[0].Kind)
			require.Zero(t, decodeErrorInfo(t, r.res.Frames[0].Value).Attempt, "cancelled before any attempt")
		}
		require.True(t, r.res.Closed, "nothing will ever be posted to a cancelled invocation")
		require.Less(t, r.at.Sub(at), wakeLatency, "a reader of a cancelled invocation is not kept waiting")
		start := time.Now()
		res := b.read(t, plane.FrameReadParams{Journal: invJournal(id), Since: -1, Wait: longWait})
		require.True(t, res.Closed)
		require.Less(t, time.Since(start), wakeLatency)
	})

	t.Run("ReadOfQueuedInvocationIsEmpty", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		id := b.submitOne(t, plane.SubmitParams{})
		res := b.read(t, plane.FrameReadParams{Journal: invJournal(id), Since: -1})
		require.Empty(t, res.Frames)
		require.False(t, res.Closed)
		_, err := b.postErr(invJournal(id), plane.NewToken(b.now()), "not claimed", false)
		requireIs(t, err, plane.ErrLeaseLost, "post to a queued invocation")
	})

	t.Run("ReadWaitEndsWithContext", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{realClock: true})
		id := b.submitOne(t, plane.SubmitParams{})
		ctx, cancel := context.WithTimeout(b.ctx, shortWait)
		defer cancel()
		start := time.Now()
		_, err := b.drv.FrameRead(ctx, &plane.FrameReadParams{Journal: invJournal(id), Since: -1, Wait: longWait})
		skipUnimplemented(t, err)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Less(t, time.Since(start), shortWait+wakeLatency)
	})
}
