package filestore_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/filestore"
	"github.com/lakeshore-dev/lakeshore/persist/httpstore"
	"github.com/lakeshore-dev/lakeshore/persist/persisttest"
)

// TestOpenRefusesUnknownTargets: a target URL whose scheme no linked store serves — a
// postgres:// target in a program without persist/lakestore, an s3:// or file:// URL —
// is refused with *persist.InvalidError naming the fix, and never taken for a directory
// (nothing is created in the working directory).
func TestOpenRefusesUnknownTargets(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv(persist.EnvURL, "")
	ctx := context.Background()
	for _, target := range []string{"postgres://lake:secret@db:5432/lake?blob=s3%3A%2F%2Fb", "postgresql://db/lake", "s3://bucket/q", "file:///tmp/q"} {
		_, err := persist.Open(ctx, "q", &persist.Config{Dir: target}, filestore.Driver())
		require.ErrorIs(t, err, persist.ErrInvalid, target)
		var ie *persist.InvalidError
		require.ErrorAs(t, err, &ie)
		require.Equal(t, "queue option Dir", ie.Field)
		require.Contains(t, err.Error(), persist.LakestorePackage, "the error names the package whose driver serves postgres:// targets")
		require.NotContains(t, err.Error(), "secret", "the password is redacted")
		_, err = filestore.Open(ctx, "q", &persist.Config{Dir: target})
		require.ErrorIs(t, err, persist.ErrInvalid, "the file store refuses a URL too: %s", target)
		_, err = persist.Open(ctx, "q", &persist.Config{URL: target}, filestore.Driver())
		require.ErrorIs(t, err, persist.ErrInvalid, target)
	}
	_, err := persist.Open(ctx, "q", &persist.Config{Dir: "postgres://db/lake"}, filestore.Driver())
	require.Contains(t, err.Error(), "pass lakestore.Driver() (package "+persist.LakestorePackage+") to persist.Open")

	t.Setenv(persist.EnvURL, "postgres://db/lake?blob=mem%3A%2F%2F")
	_, err = persist.Open(ctx, "q", nil, filestore.Driver())
	require.ErrorIs(t, err, persist.ErrInvalid)
	require.Contains(t, err.Error(), "$"+persist.EnvURL)
	t.Setenv(persist.EnvURL, "not-a-url")
	_, err = persist.Open(ctx, "q", &persist.Config{}, filestore.Driver())
	require.ErrorIs(t, err, persist.ErrInvalid, "$LAKESHORE_URL names a server or a registered target, never a directory")

	// No target at all (Dir, URL and $LAKESHORE_URL empty) says what to set, not only
	// that "" is not a directory path.
	t.Setenv(persist.EnvURL, "")
	for _, cfg := range []*persist.Config{nil, {}} {
		_, err = persist.Open(ctx, "q", cfg, filestore.Driver(), httpstore.Driver())
		require.ErrorIs(t, err, persist.ErrInvalid)
		require.ErrorContains(t, err, "none was given: set Config.Dir, or Config.URL or $"+persist.EnvURL)
	}

	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, ents, "no directory was created for a URL")

	// A path, even one holding "://" past its first segment, is still a directory.
	t.Setenv(persist.EnvURL, "")
	q, err := persist.Open(ctx, "q", &persist.Config{Dir: "data/x://y"}, filestore.Driver())
	require.NoError(t, err)
	require.NoError(t, q.Close(ctx))
}

// TestOpenLogsAMisspeltFieldToConfigLogger: persist.Open's Queue tells a batch hand-out
// of a field no record has (a misspelt name) to Config.Logger, once, at level Warn; the
// old Queue answered the empty batch in silence.
func TestOpenLogsAMisspeltFieldToConfigLogger(t *testing.T) {
	ctx := context.Background()
	var logs persisttest.LogRecords
	q, err := persist.Open(ctx, "q", &persist.Config{Dir: t.TempDir(), Logger: logs.NewLogger()}, filestore.Driver())
	require.NoError(t, err)
	defer func() { require.NoError(t, q.Close(ctx)) }()
	_, err = q.PutBatch(ctx, []persist.Record{{"reward": 1.5}})
	require.NoError(t, err)
	for range 2 {
		m, err := q.Reader().GetMeta(ctx, &persist.MetaRequest{Fields: []string{"rewrad"}, BatchSize: 1, Task: "t"})
		require.NoError(t, err)
		require.Zero(t, m.Size)
	}
	logged := logs.Records()
	require.Len(t, logged, 1)
	require.Equal(t, slog.LevelWarn, logged[0].Level)
	require.Contains(t, logged[0].Message, "check the spelling")
	require.Equal(t, map[string]string{"queue": "q", "fields": "[rewrad]", "queue_fields": "[reward]"}, persisttest.Attrs(logged[0]))
}

// TestReaderLogsAMisspeltSamplerField: a field a built-in sampler reads (GRPO's
// group_field, seqlen-balanced's length_field) that no record has is told once, at level
// Warn, saying what a sample without it becomes: group_field "promt" made a trainer's
// wait time out with nothing naming the cause (found by a scratch RL loop, 2026-12-07).
func TestReaderLogsAMisspeltSamplerField(t *testing.T) {
	ctx := context.Background()
	var logs persisttest.LogRecords
	q, err := persist.Open(ctx, "q", &persist.Config{Dir: t.TempDir(), Logger: logs.NewLogger()}, filestore.Driver())
	require.NoError(t, err)
	defer func() { require.NoError(t, q.Close(ctx)) }()
	recs := make([]persist.Record, 8)
	for i := range recs {
		recs[i] = persist.Record{"prompt": fmt.Sprintf("p%d", i/4), "x": int64(i)}
	}
	_, err = q.PutBatch(ctx, recs)
	require.NoError(t, err)
	m, err := q.Reader().GetMeta(ctx, &persist.MetaRequest{Fields: []string{"x"}, BatchSize: 4, Task: "ok",
		Sampler: persist.GRPOGroupN{N: 4, GroupField: "prompt"}.Spec()})
	require.NoError(t, err)
	require.Equal(t, 4, m.Size)
	require.Empty(t, logs.Records(), "a sampler field of the queue is not told")
	for _, task := range []string{"t", "u"} {
		m, err = q.Reader().GetMeta(ctx, &persist.MetaRequest{Fields: []string{"x"}, BatchSize: 4, Task: task,
			Sampler: persist.GRPOGroupN{N: 4, GroupField: "promt"}.Spec()})
		require.NoError(t, err)
		require.Zero(t, m.Size, "not refused")
	}
	_, err = q.Reader().GetMeta(ctx, &persist.MetaRequest{Fields: []string{"x"}, BatchSize: 4, Task: "v",
		Sampler: persist.SeqLenBalanced{LengthField: "lenght", Groups: 2}.Spec()})
	require.NoError(t, err)
	logged := logs.Records()
	require.Len(t, logged, 2)
	require.Equal(t, slog.LevelWarn, logged[0].Level)
	require.Contains(t, logged[0].Message, `group_field="promt": a sample without it is in no group, so is never handed out`)
	require.Equal(t, map[string]string{"queue": "q", "sampler": "grpo-group-n", "queue_fields": "[prompt x]"}, persisttest.Attrs(logged[0]))
	require.Contains(t, logged[1].Message, `length_field="lenght": a sample without it counts length 0`)
}
