package main

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/fabric"
)

// TestServeNamespaceCaps: serve's per-namespace caps reach the server it runs, on a SQLite
// file with file stores and a code directory, and on PostgreSQL with the distributed data
// store and its bucket's code store, where two servers count what both stored. With each
// cap at its smallest, a second data queue, a second admission block and any code archive
// of a namespace answer 409 limit_exceeded naming the flag that raises the cap, and a
// namespace keeps using what it holds. A value the flags cannot take (0, not a whole
// number) exits 2 before anything listens, naming the flag.
func TestServeNamespaceCaps(t *testing.T) {
	t.Parallel()
	caps := []string{"--max-data-queues-per-namespace", "1", "--max-admission-blocks-per-namespace", "1", "--max-code-bytes-per-namespace", "1"}
	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "main.py"), []byte("print(1)\n"), 0o644))
	hashed, err := fabric.HashFiles(root, []string{"main.py"})
	require.NoError(t, err)
	var archive bytes.Buffer
	require.NoError(t, fabric.WriteArchive(&archive, root, hashed))

	for name, servers := range map[string]func(t *testing.T) (first, second *servedProcess){
		"sqlite": func(t *testing.T) (*servedProcess, *servedProcess) {
			p := startServe(t, filepath.Join(t.TempDir(), "plane.db"), append(caps, "--data-dir", t.TempDir(), "--code-store", t.TempDir())...)
			return p, p
		},
		"postgres": func(t *testing.T) (*servedProcess, *servedProcess) {
			target, db, _ := distributedTarget(t)
			return startServe(t, db, append(caps, "--data", target)...), startServe(t, db, append(caps, "--data", target)...)
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			first, second := servers(t)
			do := func(p *servedProcess, method, path, contentType string, body []byte) (int, string) {
				t.Helper()
				req, err := http.NewRequestWithContext(t.Context(), method, p.url+path, bytes.NewReader(body))
				require.NoError(t, err)
				req.Header.Set("Content-Type", contentType)
				resp, err := http.DefaultClient.Do(req)
				require.NoError(t, err)
				defer resp.Body.Close()
				data, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				return resp.StatusCode, string(data)
			}
			refused := func(flag string, status int, body string) {
				t.Helper()
				require.Equal(t, http.StatusConflict, status, body)
				require.Contains(t, body, `"limit_exceeded"`)
				require.Contains(t, body, "--"+flag)
			}
			const records = `{"records": [{"x": 1}]}`
			status, body := do(first, "POST", "/v1/namespaces/default/data/a/records", "application/json", []byte(records))
			require.Equal(t, http.StatusOK, status, body)
			status, body = do(second, "POST", "/v1/namespaces/default/data/b/records", "application/json", []byte(records))
			refused("max-data-queues-per-namespace", status, body)
			status, body = do(second, "POST", "/v1/namespaces/default/data/a/records", "application/json", []byte(records))
			require.Equal(t, http.StatusOK, status, "the queue held takes puts: %s", body)
			status, body = do(second, "GET", "/v1/namespaces/default/data", "", nil)
			require.Equal(t, http.StatusOK, status, body)
			require.JSONEq(t, `{"queues": ["a"]}`, body, "the refused queue was not created")

			const block = `{"max_depth": 10}`
			status, body = do(first, "PUT", "/v1/namespaces/default/queues/a/admission", "application/json", []byte(block))
			require.Equal(t, http.StatusOK, status, body)
			status, body = do(second, "PUT", "/v1/namespaces/default/queues/b/admission", "application/json", []byte(block))
			refused("max-admission-blocks-per-namespace", status, body)
			status, body = do(second, "PUT", "/v1/namespaces/default/queues/a/admission", "application/json", []byte(`{"max_depth": 20}`))
			require.Equal(t, http.StatusOK, status, "a replace is never refused: %s", body)

			code := "/v1/namespaces/default/queues/a/code/" + fabric.Digest(hashed)
			status, body = do(first, "PUT", code, "application/gzip", archive.Bytes())
			refused("max-code-bytes-per-namespace", status, body)
			status, body = do(second, "GET", code, "", nil)
			require.Equal(t, http.StatusNotFound, status, "nothing stored: %s", body)
		})
	}

	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		db := filepath.Join(t.TempDir(), "plane.db")
		for _, tc := range []struct{ flag, value, says string }{
			{"max-data-queues-per-namespace", "0", "invalid --max-data-queues-per-namespace 0: use a number of data queues ≥ 1, or a negative number for no cap (default 1000)"},
			{"max-code-bytes-per-namespace", "0", "invalid --max-code-bytes-per-namespace 0: use a number of bytes ≥ 1, or a negative number for no cap (default 10737418240)"},
			{"max-admission-blocks-per-namespace", "0", "invalid --max-admission-blocks-per-namespace 0: use a number of admission blocks ≥ 1, or a negative number for no cap (default 10000)"},
			{"max-data-queues-per-namespace", "many", `invalid --max-data-queues-per-namespace "many": use a whole number`},
			{"max-code-bytes-per-namespace", "1.5", `invalid --max-code-bytes-per-namespace "1.5": use a whole number`},
		} {
			c := &cli{t: t, target: db}
			_, errs, code := c.run("", "serve", "--addr", "127.0.0.1:0", "--"+tc.flag, tc.value)
			require.Equal(t, exitUsage, code, "%s %s: %s", tc.flag, tc.value, errs)
			require.Contains(t, errs, tc.says)
			require.False(t, strings.Contains(errs, "--help"), "a bad value, not a bad command line")
		}
		require.NoFileExists(t, db, "refused before the plane was opened")
	})
}
