package main

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/internal/porttest"
	"github.com/lakeshore-dev/lakeshore/provider"
)

// TestSecretsNotPrinted (issue 29, item 1): `serve --target postgres://user:pw@…` (with the
// provider supervisor beside it), the daemon's log and its /v1/daemon handshake, and the
// CLI's "refuses connections" messages name the target without its password.
func TestSecretsNotPrinted(t *testing.T) {
	db := pgtest.Database(t) // postgres://user:lakeshore-test@…
	require.Contains(t, db, ":"+pgtest.Password+"@")

	t.Run("serve", func(t *testing.T) {
		out := serveStartLogs(t, &ServeOpts{Addr: "127.0.0.1:0", Target: db, Providers: true,
			Supervisor: supervisorFlags{dryRun: true, tick: time.Hour, stopGrace: time.Second, timeout: time.Second, leaseTTL: provider.LeaseTTLDefault},
			DataDir:    t.TempDir()})
		require.Contains(t, out, "msg=serving")
		require.Contains(t, out, ":xxxxx@", "the target is logged, redacted")
		require.NotContains(t, out, pgtest.Password)
	})

	t.Run("daemon", func(t *testing.T) {
		var logs syncBuffer
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		ready := make(chan DaemonInfo, 1)
		done := make(chan error, 1)
		home := t.TempDir()
		go func() {
			done <- RunDaemon(ctx, &DaemonOpts{Socket: filepath.Join(home, "run", "d.sock"), Target: db,
				Ready: func(i DaemonInfo) { ready <- i }}, slog.New(slog.NewTextHandler(&logs, nil)),
				func(k string) string {
					if k == "LAKESHORE_HOME" {
						return home
					}
					return ""
				})
		}()
		var info DaemonInfo
		select {
		case info = <-ready:
		case err := <-done:
			t.Fatal(err)
		}
		require.NotContains(t, info.Target, pgtest.Password, "the /v1/daemon handshake")
		require.Contains(t, info.Target, ":xxxxx@")
		cancel()
		<-done
		require.Contains(t, logs.String(), "daemon ready")
		require.NotContains(t, logs.String(), pgtest.Password)
	})

	t.Run("provider settings", func(t *testing.T) {
		c := newCLI(t)
		_, errs, code := c.run("", "queue", "set", "a", "--provider", "local", "--worker-command", "sh -c true postgres://u:hunter2@db/x",
			"--worker-env", "DATABASE_URL=postgres://u:hunter2@db/x?sslpassword=hunter2")
		require.Zero(t, code, errs)
		text := c.ok("queue", "get", "a")
		require.Contains(t, text, "DATABASE_URL=postgres://u:xxxxx@db/x")
		require.Contains(t, text, "postgres://u:xxxxx@db/x")
		require.NotContains(t, text, "hunter2")
	})

	t.Run("refuses connections", func(t *testing.T) {
		addr := porttest.Refused(t) // a port nothing listens on: the dial is refused
		var notes bytes.Buffer
		err := dialCheck{noticeAfter: 0, giveUp: 300 * time.Millisecond, every: 50 * time.Millisecond}.
			check(t.Context(), "http://user:hunter2@"+addr+"/?token=hunter2", &notes)
		require.Error(t, err)
		require.Contains(t, notes.String(), "refuses connections")
		for _, s := range []string{err.Error(), notes.String()} {
			require.NotContains(t, s, "hunter2")
			require.True(t, strings.Contains(s, "user:xxxxx@"), s)
		}
	})
}
