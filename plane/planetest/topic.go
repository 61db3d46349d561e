package planetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// topicPost posts value to the subtest queue's topic and returns its seq.
func (b *bundle) topicPost(t *testing.T, topic, value string, final bool) int64 {
	t.Helper()
	seq, err := b.postErr(b.topicJournal(topic), "", value, final)
	must(t, err, "topic post")
	return seq
}

func testTopic(t *testing.T, s *suite) {
	t.Run("PostReadAndEnd", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		topic := "topic-" + plane.NewIDGenerator().New(b.now()) // the shape of an auto-named topic
		var times []time.Time
		for i, v := range []string{"a", "b", "c"} {
			times = append(times, b.advance(time.Second))
			require.EqualValues(t, i, b.topicPost(t, topic, v, false))
		}
		frames, closed := b.frames(t, b.topicJournal(topic))
		require.False(t, closed)
		require.Len(t, frames, 3)
		times = append(times, b.advance(time.Second))
		require.EqualValues(t, 3, b.topicPost(t, topic, "bye", true), "a final post appends END")
		frames, closed = b.frames(t, b.topicJournal(topic))
		require.True(t, closed, "END closes the topic")
		requireDense(t, frames)
		require.Equal(t, []plane.FrameKind{plane.FrameValue, plane.FrameValue, plane.FrameValue, plane.FrameEnd}, frameKinds(frames))
		for i, f := range frames[:3] {
			require.Equal(t, []byte{"abc"[i]}, f.Value)
		}
		for i, f := range frames {
			require.Zero(t, f.Attempt, "topic frames have no attempt")
			requireTime(t, times[i], f.Time, "frame time")
		}
		_, err := b.postErr(b.topicJournal(topic), "", "late", false)
		requireIs(t, err, plane.ErrJournalClosed, "post to a closed topic")
		_, err = b.postErr(b.topicJournal(topic), "", "late final", true)
		requireIs(t, err, plane.ErrJournalClosed, "final post to a closed topic")
		after, _ := b.frames(t, b.topicJournal(topic))
		require.Equal(t, frames, after)
	})

	t.Run("UnpostedTopicIsEmpty", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{realClock: true})
		res := b.read(t, plane.FrameReadParams{Journal: b.topicJournal("never-posted"), Since: -1})
		require.Empty(t, res.Frames)
		require.False(t, res.Closed)
		start := time.Now()
		res = b.read(t, plane.FrameReadParams{Journal: b.topicJournal("never-posted"), Since: -1, Wait: shortWait})
		require.Empty(t, res.Frames, "a listen on a silent topic returns nothing on timeout")
		require.False(t, res.Closed)
		require.GreaterOrEqual(t, time.Since(start), shortWait*9/10)
	})

	t.Run("ReadWaitWokenByPost", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{realClock: true})
		j := b.topicJournal("news")
		read := b.readAsync(plane.FrameReadParams{Journal: j, Since: -1, Wait: longWait})
		<-time.After(headStart) // let the reader park; correctness does not depend on it
		at := time.Now()
		b.topicPost(t, "news", "first", false)
		r := <-read
		must(t, r.err, "read")
		require.Len(t, r.res.Frames, 1, "a reader of a topic not yet posted to is woken by the first post")
		require.Equal(t, []byte("first"), r.res.Frames[0].Value)
		require.Less(t, r.at.Sub(at), wakeLatency)

		read = b.readAsync(plane.FrameReadParams{Journal: j, Since: 0, Wait: longWait})
		<-time.After(headStart)
		at = time.Now()
		b.topicPost(t, "news", "", true)
		r = <-read
		must(t, r.err, "read")
		require.Len(t, r.res.Frames, 1)
		require.Equal(t, plane.FrameEnd, r.res.Frames[0].Kind)
		require.True(t, r.res.Closed)
		require.Less(t, r.at.Sub(at), wakeLatency)
	})

	t.Run("TopicsScopedByNamespaceAndQueue", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		journals := []plane.Journal{
			{Namespace: "default", Queue: "q1", Topic: "t"},
			{Namespace: "default", Queue: "q2", Topic: "t"},
			{Namespace: "other", Queue: "q1", Topic: "t"},
		}
		seq, err := b.postErr(journals[0], "", "one", true)
		must(t, err, "post")
		require.Zero(t, seq)
		for _, j := range journals[1:] {
			frames, closed := b.frames(t, j)
			require.Empty(t, frames, "%v is another topic", j)
			require.False(t, closed, "closing a topic in one queue closes no other")
			seq, err := b.postErr(j, "", "own", false)
			must(t, err, "post")
			require.Zero(t, seq, "each topic has its own seqs")
		}
	})

	t.Run("RetentionTrimsIdleTopics", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		// Retention is per topic: a topic last posted to more than the retention period ago
		// (plane.RetentionDefault) is trimmed by maintenance with every frame, open or
		// closed, and is then a topic never posted to; a topic posted to since keeps every
		// frame, the old ones included (its seqs stay dense for cursors).
		b.topicPost(t, "idle", "a", false)
		b.topicPost(t, "idle", "b", false)
		b.topicPost(t, "ended", "last", true)
		b.topicPost(t, "busy", "old", false)
		b.advance(plane.RetentionDefault / 2)
		b.topicPost(t, "busy", "recent", false)
		b.advance(plane.RetentionDefault/2 - time.Minute)
		b.maintain(t)
		for _, topic := range []string{"idle", "ended", "busy"} {
			frames, _ := b.frames(t, b.topicJournal(topic))
			require.NotEmpty(t, frames, "%s is kept for the retention period", topic)
		}

		b.advance(2 * time.Minute)
		b.maintain(t)
		for _, topic := range []string{"idle", "ended"} {
			res := b.read(t, plane.FrameReadParams{Journal: b.topicJournal(topic), Since: -1})
			require.Empty(t, res.Frames, "%s, idle past retention, is trimmed", topic)
			require.False(t, res.Closed, "%s: a trimmed topic is not closed", topic)
		}
		frames, closed := b.frames(t, b.topicJournal("busy"))
		require.False(t, closed)
		require.Equal(t, []string{"old", "recent"}, frameValues(frames), "a topic posted to within retention keeps every frame")
		requireDense(t, frames)

		require.Zero(t, b.topicPost(t, "idle", "again", false), "a trimmed topic starts again at seq 0")
		require.Zero(t, b.topicPost(t, "ended", "again", false), "a trimmed closed topic takes posts again")
		frames, closed = b.frames(t, b.topicJournal("ended"))
		require.False(t, closed)
		require.Equal(t, []string{"again"}, frameValues(frames))
		require.EqualValues(t, 2, b.topicPost(t, "busy", "more", false))
	})

	t.Run("CursorResumesExactlyOnce", func(t *testing.T) {
		t.Parallel()
		b := s.setup(t, config{})
		for i := range 10 {
			b.topicPost(t, "ticks", fmt.Sprint(i), false)
		}
		var got []string
		since := int64(-1)
		for range 20 {
			res := b.read(t, plane.FrameReadParams{Journal: b.topicJournal("ticks"), Since: since, Limit: 3})
			require.LessOrEqual(t, len(res.Frames), 3)
			if len(res.Frames) == 0 {
				break
			}
			for _, f := range res.Frames {
				got = append(got, string(f.Value))
			}
			since = res.Frames[len(res.Frames)-1].Seq
		}
		require.Equal(t, []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}, got)
	})

	t.Run("CapPerQueue", func(t *testing.T) {
		// A queue holds at most the plane's MaxTopicsPerQueue topics: the first post to one
		// more is refused (limit_exceeded, naming the cap and the flag that raises it) and
		// stores nothing, not even the topic (a second try is refused again); posts to the
		// topics it holds, a final one included, go on; another queue or namespace has its
		// own count. (Before the cap every topic was stored.)
		t.Parallel()
		b := s.setup(t, config{maxTopics: 2})
		b.topicPost(t, "t1", "a", false)
		b.topicPost(t, "t2", "a", false)
		for _, final := range []bool{false, true, false} {
			_, err := b.postErr(b.topicJournal("t3"), "", "a", final)
			requireIs(t, err, plane.ErrLimitExceeded, "a third topic in a queue capped at 2")
			require.Equal(t, "limit_exceeded", plane.Code(err), "its stable code")
			require.Contains(t, err.Error(), "holds 2 topics, its maximum (2)")
			require.Contains(t, err.Error(), plane.MaxTopicsPerQueueFlag)
		}
		frames, closed := b.frames(t, b.topicJournal("t3"))
		require.Empty(t, frames, "a refused post stores nothing")
		require.False(t, closed)
		require.Equal(t, int64(1), b.topicPost(t, "t1", "b", false), "a topic held takes posts")
		require.Equal(t, int64(1), b.topicPost(t, "t2", "b", true), "and a final one")
		for _, j := range []plane.Journal{{Namespace: b.ns, Queue: "other", Topic: "t3"}, {Namespace: "tenant-b", Queue: b.q, Topic: "t3"}} {
			seq, err := b.postErr(j, "", "a", false)
			must(t, err, "another queue's or namespace's topic")
			require.Zero(t, seq)
		}
	})
}

// frameValues returns the values of frames as strings.
func frameValues(frames []plane.Frame) []string {
	out := make([]string, len(frames))
	for i, f := range frames {
		out[i] = string(f.Value)
	}
	return out
}
