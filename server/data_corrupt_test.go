package server_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
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

			b2 := setup(t, &server.Config{DataDir: dir})
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
