package persisttest

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/persist"
)

// LogLines is an io.Writer of log output, safe for concurrent use, for tests that read
// what a Queue logged (NewLogger).
type LogLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (l *LogLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// Lines returns the lines written so far.
func (l *LogLines) Lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.FieldsFunc(l.buf.String(), func(r rune) bool { return r == '\n' })
}

// NewLogger returns a text logger of every level into l.
func (l *LogLines) NewLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// testUnknownFieldWarned: a batch hand-out of a field no record of the queue has (a
// misspelt name) answered an empty batch in silence (and, waiting, ErrTimeout after the
// whole wait). It is still not refused (a later PutFields may add the field), but the
// Queue logs it once per field at level Warn, naming the queue, the field and the queue's
// fields, as the Python SDK does; a field of the queue, and any field of a queue nothing
// was put to yet (no schema to compare with), is not logged.
func testUnknownFieldWarned(t *testing.T, q *persist.Queue) {
	ctx := context.Background()
	var logs LogLines
	q.SetLogger(logs.NewLogger())
	r := q.Reader()

	m, err := r.GetMeta(ctx, &persist.MetaRequest{Fields: []string{"a"}, BatchSize: 2, Task: "t"})
	require.NoError(t, err, "a consumer may start before its producers")
	require.Zero(t, m.Size)
	require.Empty(t, logs.Lines(), "a queue without records has no schema to compare with")

	putN(t, q, persist.DefaultPartition, 4, func(i int) persist.Record { return persist.Record{"a": i} })
	b, m, err := r.GetBatch(ctx, &persist.MetaRequest{Fields: []string{"a"}, BatchSize: 2, Task: "t"})
	require.NoError(t, err)
	b.Release()
	require.Equal(t, 2, m.Size)
	require.Empty(t, logs.Lines(), "a field of the queue is not logged")

	b, m, err = r.GetBatch(ctx, &persist.MetaRequest{Fields: []string{"nope"}, BatchSize: 2, Task: "t"})
	require.NoError(t, err, "not refused: a later PutFields may add the field")
	b.Release()
	require.Zero(t, m.Size)
	m, err = q.Reader().GetMeta(ctx, &persist.MetaRequest{Fields: []string{"nope", "a"}, BatchSize: 2, Task: "u"})
	require.NoError(t, err)
	require.Zero(t, m.Size)
	_, _, err = r.GetBatchLeased(ctx, &persist.MetaRequest{Fields: []string{"nope"}, BatchSize: 2, Task: "t",
		Wait: true, Timeout: 50 * time.Millisecond}, time.Minute)
	require.ErrorIs(t, err, persist.ErrTimeout)

	lines := logs.Lines()
	require.Len(t, lines, 1, "once per queue and field: %q", lines)
	require.Contains(t, lines[0], "level=WARN")
	require.Contains(t, lines[0], "queue="+q.Name())
	require.Contains(t, lines[0], "fields=[nope]")
	require.Contains(t, lines[0], "queue_fields=[a]")

	// Field-level readiness: once a put adds the field, the hand-out serves it.
	require.NoError(t, q.PutFields(ctx, persist.DefaultPartition, []int64{2, 3}, []persist.Record{{"nope": 1}, {"nope": 2}}))
	m, err = r.GetMeta(ctx, &persist.MetaRequest{Fields: []string{"nope"}, BatchSize: 2, Task: "t"})
	require.NoError(t, err)
	require.Equal(t, []int64{2, 3}, m.Indexes)
	_, err = r.GetMeta(ctx, &persist.MetaRequest{Fields: []string{"other"}, BatchSize: 2, Task: "t"})
	require.NoError(t, err)
	lines = logs.Lines()
	require.Len(t, lines, 2, "%q", lines)
	require.Contains(t, lines[1], "fields=[other]")
	require.Contains(t, lines[1], `queue_fields="[a nope]"`)
}
