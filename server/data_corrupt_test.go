package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/server"
)

// TestCorruptDataStoreAnswersTypedError: a data queue whose store files are damaged on disk
// (its meta.db overwritten, or a flushed fragment) answers 500 with the typed corrupt error
// and a message that says what is wrong in words, never the store's own text (a file's
// path, SQLite's or the Parquet reader's errors); the server's log keeps that. On the old
// code a damaged meta.db answered 500 internal, "internal error", and a damaged fragment
// 500 corrupt, "internal error": neither said what was wrong.
func TestCorruptDataStoreAnswersTypedError(t *testing.T) {
	t.Parallel()
	for _, damaged := range []string{"meta.db", "fragment"} {
		t.Run(damaged, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			b := setup(t, &server.Config{DataDir: dir})
			r := b.do(t, "POST", D+"/records", api.ContentTypeJSON, []byte(`{"records": [{"x": 1}, {"x": 2}]}`), "")
			require.Equal(t, 200, r.status, "%s", r.body)
			require.NoError(t, b.srv.Close(context.Background())) // flushed: a fragment on disk
			queueDir := filepath.Join(dir, "default", "rollouts")
			target := filepath.Join(queueDir, "meta.db")
			if damaged == "fragment" {
				frags, err := filepath.Glob(filepath.Join(queueDir, "data", "*.parquet"))
				require.NoError(t, err)
				require.NotEmpty(t, frags)
				target = frags[0]
			}
			require.NoError(t, os.WriteFile(target, []byte("this is not what the store wrote"), 0o600))

			// The job plane is b's (no part of this test): opening one for each page under
			// the race detector was most of the test's 66–93 s in CI's race pass.
			b2 := serveOn(t, b.back, b.back, &server.Config{DataDir: dir})
			t.Cleanup(func() { _ = b2.srv.Close(context.Background()) })
			r = b2.do(t, "POST", D+"/data", api.ContentTypeJSON, []byte(`{"indexes": [0, 1]}`), "")
			require.Equal(t, 500, r.status, "%s", r.body)
			var body api.DataErrorBody
			require.NoError(t, json.Unmarshal(r.body, &body), "%s", r.body)
			require.Equal(t, "corrupt", body.Code, "%s", r.body)
			require.Contains(t, body.Message, "stored state is damaged")
			for _, internal := range []string{dir, "meta.db", ".parquet", "sqlite", "database", "parquet:", "persist", "%!"} {
				require.NotContains(t, body.Message, internal)
			}
			require.Contains(t, b2.logs.String(), "corrupt", "the log keeps the store's text")
		})
	}
}

// TestDamagedMetaDBPageAnswersCorrupt: a data queue whose meta.db has one page damaged
// (each in turn: open passes over most of them, and a read of the schema, the manifest,
// the tail or the consumption meets the damage mid-query) answers 500 with the typed
// corrupt error and its message in words, wherever the damage is met. Before, only the
// errors of opening meta.db were typed: SQLite's "database disk image is malformed" met
// by a later query answered 500 internal, "internal error" (persist's IsCorrupt now
// recognises it in one place, record.Code).
func TestDamagedMetaDBPageAnswersCorrupt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := setup(t, &server.Config{DataDir: dir})
	var records strings.Builder
	records.WriteString(`{"records": [`)
	for i := range 500 {
		if i > 0 {
			records.WriteString(",")
		}
		fmt.Fprintf(&records, `{"x": %d, "s": "text enough to fill a few pages of the catalog"}`, i)
	}
	records.WriteString(`]}`)
	r := b.do(t, "POST", D+"/records", api.ContentTypeJSON, []byte(records.String()), "")
	require.Equal(t, 200, r.status, "%s", r.body)
	require.NoError(t, b.srv.Close(context.Background()))
	path := filepath.Join(dir, "default", "rollouts", "meta.db")
	clean, err := os.ReadFile(path)
	require.NoError(t, err)

	const page = 4096
	refused := 0
	for p := 1; p*page < len(clean); p++ {
		damaged := append([]byte(nil), clean...)
		for i := p * page; i < min((p+1)*page, len(damaged)); i++ {
			damaged[i] = 0xa5
		}
		require.NoError(t, os.WriteFile(path, damaged, 0o600))
		// The job plane is b's (no part of this test): opening one for each page under
		// the race detector was most of the test's 66–93 s in CI's race pass.
		b2 := serveOn(t, b.back, b.back, &server.Config{DataDir: dir})
		for _, call := range []struct{ path, body string }{
			{"/data", `{"indexes": [0, 1]}`},
			{"/meta", `{"task": "t", "fields": ["x"], "batch_size": 4}`},
			{"/records", `{"records": [{"x": 1, "s": "a"}]}`},
		} {
			r := b2.do(t, "POST", D+call.path, api.ContentTypeJSON, []byte(call.body), "")
			if r.status == 200 {
				continue
			}
			refused++
			var body api.DataErrorBody
			require.NoError(t, json.Unmarshal(r.body, &body), "%s", r.body)
			require.Equal(t, "corrupt", body.Code, "page %d damaged, %s: %s", p, call.path, r.body)
			require.Equal(t, 500, r.status)
			require.Contains(t, body.Message, "stored state is damaged")
		}
		_ = b2.srv.Close(context.Background()) // its close may meet the damage too
	}
	require.NotZero(t, refused, "some damage is met")
}
