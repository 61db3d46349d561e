package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/plane/httpplane"
)

func TestCheckBind(t *testing.T) {
	t.Parallel()
	cases := []struct {
		addr           string
		auth, insecure bool
		ok             bool
	}{
		{"127.0.0.1:7077", false, false, true},
		{"localhost:7077", false, false, true},
		{"[::1]:7077", false, false, true},
		{"0.0.0.0:7077", false, false, false},
		{":7077", false, false, false},
		{"[::]:7077", false, false, false},
		{"10.1.2.3:7077", false, false, false},
		{"0.0.0.0:7077", true, false, true},
		{"0.0.0.0:7077", false, true, true},
	}
	for _, tc := range cases {
		err := CheckBind(tc.addr, tc.auth, tc.insecure)
		if tc.ok {
			require.NoError(t, err, tc.addr)
		} else {
			require.ErrorContains(t, err, "--insecure-no-auth", tc.addr)
		}
	}
}

func TestServeRefusesOpenNonLoopback(t *testing.T) {
	t.Parallel()
	err := RunServe(t.Context(), &ServeOpts{Addr: "0.0.0.0:0", Target: ":memory:"},
		slog.New(slog.DiscardHandler), func(string) string { return "" })
	require.ErrorContains(t, err, "refusing to serve")
	require.Error(t, (&ServeOpts{TLSCert: "c.pem"}).Validate(), "a cert without a key")
}

// TestServeRefusesAnUnreadableCertificate: a --tls-cert that does not exist, or a
// certificate and key given the wrong way round, is a usage error naming the flags, before
// the plane is opened or anything listens; before, serve logged "serving … url=https://…",
// then exited 5 with "serve: open nope.pem: …".
func TestServeRefusesAnUnreadableCertificate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key := filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(key, []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"), 0o600))
	db := filepath.Join(dir, "l.db")
	for _, files := range [][2]string{{filepath.Join(dir, "nope.pem"), key}, {key, key}} {
		ready := false
		err := RunServe(t.Context(), &ServeOpts{Addr: "127.0.0.1:0", Target: db, TLSCert: files[0], TLSKey: files[1],
			Ready: func(net.Addr) { ready = true }},
			slog.New(slog.DiscardHandler), func(string) string { return "" })
		var invalid *plane.InvalidError
		require.ErrorAs(t, err, &invalid, "%v", files)
		require.Equal(t, "--tls-cert/--tls-key", invalid.Field)
		require.False(t, ready, "nothing served")
		_, statErr := os.Stat(db)
		require.True(t, os.IsNotExist(statErr), "the plane was not opened")
	}
}

func TestServeAndTokens(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "l.db")
	const admin = "admin-secret-for-test"
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ready := make(chan net.Addr, 1)
	done := make(chan error, 1)
	var logs bytes.Buffer
	go func() {
		done <- RunServe(ctx, &ServeOpts{Addr: "127.0.0.1:0", Target: db, Ready: func(a net.Addr) { ready <- a }},
			slog.New(slog.NewTextHandler(&logs, nil)), func(k string) string {
				if k == EnvAdminToken {
					return admin
				}
				return ""
			})
	}()
	var addr net.Addr
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatal(err)
	}
	url := "http://" + addr.String()

	// A token made next to the plane's file works over HTTP at once.
	var out bytes.Buffer
	require.NoError(t, RunTokenCreate(t.Context(), &TokenCreateOpts{Target: db, ID: "producer",
		Namespace: "default", Queue: "jobs", Can: []string{"submit"}, TTL: time.Hour}, &out, io.Discard))
	secret := regexp.MustCompile(`token:\s+(\S+)`).FindStringSubmatch(out.String())[1]
	drv, err := httpplane.New(url, &httpplane.Config{Token: secret})
	require.NoError(t, err)
	defer drv.Close()
	_, err = drv.InvocationSubmitMany(t.Context(), &plane.SubmitManyParams{Namespace: "default", Queue: "jobs", Invocations: []plane.SubmitParams{{}}})
	require.NoError(t, err)
	_, err = drv.InvocationSubmitMany(t.Context(), &plane.SubmitManyParams{Namespace: "default", Queue: "other", Invocations: []plane.SubmitParams{{}}})
	require.ErrorIs(t, err, httpplane.ErrForbidden)

	out.Reset()
	require.NoError(t, RunTokenList(t.Context(), db, false, &out))
	require.Contains(t, out.String(), "producer")
	require.NotContains(t, out.String(), secret)
	out.Reset()
	require.NoError(t, RunTokenRevoke(t.Context(), db, "producer", false, &out))
	_, err = drv.InvocationSubmitMany(t.Context(), &plane.SubmitManyParams{Namespace: "default", Queue: "jobs", Invocations: []plane.SubmitParams{{}}})
	require.ErrorIs(t, err, httpplane.ErrUnauthorized)

	// A long-poll open at shutdown ends; the server then stops cleanly.
	adminDrv, err := httpplane.New(url, &httpplane.Config{Token: admin, MaxRetries: -1})
	require.NoError(t, err)
	defer adminDrv.Close()
	polled := make(chan error, 1)
	go func() {
		_, err := adminDrv.InvocationClaimMany(context.Background(), &plane.ClaimParams{Namespace: "default", Queue: "idle", Kind: plane.KindFIFO, Wait: 30 * time.Second})
		polled <- err
	}()
	time.Sleep(100 * time.Millisecond) // let the claim park; the outcome does not depend on it
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not shut down")
	}
	err = <-polled
	require.Error(t, err, "the open claim ended with the shutdown")
	require.NotContains(t, logs.String(), secret)
	require.NotContains(t, logs.String(), admin)
}

// TestServeDefaultTargetIgnoresURL: with $LAKESHORE_URL naming the server itself (clients
// export it in the same shell), serve's default target is still the SQLite file under
// $LAKESHORE_HOME, named in the start log; the server does not proxy to itself.
func TestServeDefaultTargetIgnoresURL(t *testing.T) {
	home := t.TempDir()
	t.Setenv("LAKESHORE_HOME", home)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	var logs syncBuffer
	var addr string
	// The server must listen on the address $LAKESHORE_URL names, so the address is chosen
	// before the server binds it: a port probed free can be taken by another process in
	// between, and the start is then tried again on another (as internal/pgtest does).
	for attempt := 0; ; attempt++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr = ln.Addr().String()
		require.NoError(t, ln.Close())
		t.Setenv("LAKESHORE_URL", "http://"+addr)
		getenv := func(k string) string {
			switch k {
			case "LAKESHORE_URL":
				return "http://" + addr
			case "LAKESHORE_HOME":
				return home
			}
			return ""
		}
		ready := make(chan net.Addr, 1)
		go func() {
			done <- RunServe(ctx, &ServeOpts{Addr: addr, Ready: func(a net.Addr) { ready <- a }},
				slog.New(slog.NewTextHandler(&logs, nil)), getenv)
		}()
		select {
		case <-ready:
		case err := <-done:
			if errors.Is(err, syscall.EADDRINUSE) && attempt < 4 {
				continue
			}
			t.Fatal(err)
		}
		break
	}
	db := filepath.Join(home, "lakeshore.db")
	require.Contains(t, logs.String(), "target="+db, "the start log names the resolved file")

	drv, err := httpplane.New("http://"+addr, &httpplane.Config{MaxRetries: -1})
	require.NoError(t, err)
	defer drv.Close()
	sctx, scancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer scancel()
	_, err = drv.InvocationSubmitMany(sctx, &plane.SubmitManyParams{Namespace: "default", Queue: "jobs", Invocations: []plane.SubmitParams{{}}})
	require.NoError(t, err)
	require.FileExists(t, db)
	cancel()
	require.NoError(t, <-done)
}

// TestServeRefusesItselfAsTarget: an explicit http(s) --target naming serve's own --addr
// is refused before anything listens.
func TestServeRefusesItselfAsTarget(t *testing.T) {
	t.Parallel()
	cases := []struct {
		addr, target string
		refused      bool
	}{
		{"127.0.0.1:7077", "http://127.0.0.1:7077", true},
		{"127.0.0.1:7077", "http://localhost:7077/", true},
		{"", "http://127.0.0.1:7077", true},
		{"0.0.0.0:7077", "http://127.0.0.1:7077", true},
		{"127.0.0.1:80", "http://localhost", true},
		{"127.0.0.1:7077", "http://127.0.0.1:7078", false},
		{"127.0.0.1:7077", "http://10.9.9.9:7077", false},
		{"127.0.0.1:7077", "/tmp/x.db", false},
	}
	for _, tc := range cases {
		err := (&ServeOpts{Addr: tc.addr, Target: tc.target}).Validate()
		if tc.refused {
			require.ErrorIs(t, err, plane.ErrInvalid, "%s %s", tc.addr, tc.target)
			require.ErrorContains(t, err, "own address")
		} else {
			require.NoError(t, err, "%s %s", tc.addr, tc.target)
		}
	}
	err := RunServe(t.Context(), &ServeOpts{Addr: "127.0.0.1:0", Target: "http://127.0.0.1:0"},
		slog.New(slog.DiscardHandler), func(string) string { return "" })
	require.ErrorIs(t, err, plane.ErrInvalid)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestCheckAdminToken: a short admin token is refused on a public address, accepted on
// loopback.
func TestCheckAdminToken(t *testing.T) {
	require.Error(t, CheckAdminToken("0.0.0.0:7077", "a"))
	require.ErrorIs(t, CheckAdminToken("10.0.0.1:7077", "fifteen-bytes!!"), plane.ErrInvalid)
	require.NoError(t, CheckAdminToken("0.0.0.0:7077", "sixteen-bytes!!!"))
	require.NoError(t, CheckAdminToken("127.0.0.1:7077", "a"))
	require.NoError(t, CheckAdminToken("0.0.0.0:7077", ""))
	ctx := t.Context()
	err := RunServe(ctx, &ServeOpts{Addr: "0.0.0.0:0", Target: ":memory:"}, nil, func(k string) string {
		if k == EnvAdminToken {
			return "a"
		}
		return ""
	})
	require.ErrorIs(t, err, plane.ErrInvalid)
	require.Contains(t, err.Error(), "16 bytes")
}

// TestServeCodeStore: serve keeps code archives in --code-store (a directory or a bucket
// URL), by default in --data's bucket (servers of one PostgreSQL plane share them), else
// in $LAKESHORE_HOME/code; a bucket scheme this build does not open is refused by name.
func TestServeCodeStore(t *testing.T) {
	home := t.TempDir()
	getenv := func(k string) string {
		if k == lakeshore.EnvHome {
			return home
		}
		return ""
	}
	ctx := t.Context()
	if err := os.Mkdir(filepath.Join(home, "blobs"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		opts      ServeOpts
		dir       string
		bucket    bool
		errSubstr string
	}{
		{name: "default", dir: filepath.Join(home, "code")},
		{name: "directory", opts: ServeOpts{CodeStore: filepath.Join(home, "elsewhere")}, dir: filepath.Join(home, "elsewhere")},
		{name: "bucket", opts: ServeOpts{CodeStore: "mem://"}, bucket: true},
		{name: "data's bucket", opts: ServeOpts{Data: "postgres://127.0.0.1:1/db?blob=" + url.QueryEscape("file://"+home+"/blobs")}, bucket: true},
		{name: "unknown scheme", opts: ServeOpts{CodeStore: "ftp://host/dir"}, errSubstr: `invalid --code-store "ftp://host/dir"`},
		// A directory or bucket that cannot be used names the flag it came from.
		{name: "a file", opts: ServeOpts{CodeStore: filepath.Join(home, "file")}, errSubstr: "--code-store: create " + filepath.Join(home, "file")},
		{name: "a secret in a bucket URL it cannot open", opts: ServeOpts{CodeStore: "s3://b?region=x&token=s3cr3t"}, errSubstr: `--code-store: open bucket s3://b?region=x&token=xxxxx: unknown query parameter "token"`},
		{name: "a secret in a URL inside a bucket URL", opts: ServeOpts{CodeStore: "s3://b?endpoint=http://u:s3cr3t@127.0.0.1:1&token=x"},
			errSubstr: `--code-store: open bucket s3://b?endpoint=http://u:xxxxx@127.0.0.1:1&token=xxxxx`},
		{name: "a secret in a URL inside --data's bucket URL", opts: ServeOpts{Data: "postgres://127.0.0.1:1/db?blob=" + url.QueryEscape("s3://b?endpoint=http://u:s3cr3t@127.0.0.1:1&bogus=1")},
			errSubstr: `--data's blob: open bucket s3://b?endpoint=http://u:xxxxx@127.0.0.1:1&bogus=1: unknown query parameter "bogus"`},
		{name: "a file's bucket", opts: ServeOpts{CodeStore: "file://" + filepath.Join(home, "file")}, errSubstr: "--code-store: open bucket file://" + filepath.Join(home, "file")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, bucket, err := serveCodeStore(ctx, &tc.opts, getenv)
			if tc.errSubstr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errSubstr) || strings.Contains(err.Error(), "s3cr3t") {
					t.Fatalf("err %v, want %q and no secret", err, tc.errSubstr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if bucket != nil {
				bucket.Close()
			}
			if (bucket != nil) != tc.bucket || dir != tc.dir {
				t.Fatalf("dir %q, bucket %v; want dir %q, bucket %v", dir, bucket != nil, tc.dir, tc.bucket)
			}
		})
	}
}

// TestServeLogsCodeStore: the start-up line says where code archives are kept, a bucket
// URL's secret redacted, and so a secret of a URL inside it (an endpoint's password).
func TestServeLogsCodeStore(t *testing.T) {
	for store, want := range map[string]string{
		"s3://AKID:s3cr3t@bucket?region=us-east-1":                             `code="s3://AKID:xxxxx@bucket`,
		"s3://bucket?region=us-east-1&endpoint=http://user:s3cr3t@127.0.0.1:1": `code="s3://bucket?region=us-east-1&endpoint=http://user:xxxxx@127.0.0.1:1"`,
	} {
		out := serveStartLogs(t, &ServeOpts{Addr: "127.0.0.1:0", Target: ":memory:", DataDir: t.TempDir(), CodeStore: store, NoUI: true})
		require.Contains(t, out, "msg=serving")
		require.Contains(t, out, want)
		require.NotContains(t, out, "s3cr3t")
	}
}

// serveStartLogs runs RunServe with opts until it is ready, stops it, and returns what it
// logged (text handler).
func serveStartLogs(t *testing.T, opts *ServeOpts) string {
	t.Helper()
	var logs syncBuffer
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ready := make(chan net.Addr, 1)
	done := make(chan error, 1)
	opts.Ready = func(a net.Addr) { ready <- a }
	go func() {
		done <- RunServe(ctx, opts, slog.New(slog.NewTextHandler(&logs, nil)), func(string) string { return "" })
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatal(err)
	}
	cancel()
	require.NoError(t, <-done)
	return logs.String()
}

// TestServeScheduleCap: `serve --max-schedules-per-namespace 2` gives the plane served that
// cap (on the SQLite file and on PostgreSQL): a third schedule in one namespace answers 409
// limit_exceeded and is not stored, another namespace has its own two, and replacing one
// is never refused. A value the flag cannot take — 0, not a number, or any value with an
// http(s) target, whose server applies its own cap — exits 2 before anything listens,
// naming the flag.
func TestServeScheduleCap(t *testing.T) {
	t.Parallel()
	targets := map[string]func(t *testing.T) string{
		"sqlite":   func(t *testing.T) string { return filepath.Join(t.TempDir(), "plane.db") },
		"postgres": func(t *testing.T) string { return pgtest.Database(t) },
	}
	for name, target := range targets {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := startServe(t, target(t), "--max-schedules-per-namespace", "2")
			put := func(namespace, schedule string) (int, string) {
				t.Helper()
				req, err := http.NewRequestWithContext(t.Context(), "PUT", p.url+"/v1/namespaces/"+namespace+"/schedules/"+schedule,
					strings.NewReader(`{"queue": "q", "every": 60}`))
				require.NoError(t, err)
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				require.NoError(t, err)
				defer resp.Body.Close()
				body, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				return resp.StatusCode, string(body)
			}
			for _, s := range []string{"a", "b"} {
				status, body := put("default", s)
				require.Equal(t, http.StatusOK, status, body)
			}
			status, body := put("default", "c")
			require.Equal(t, http.StatusConflict, status, body)
			require.Contains(t, body, `"limit_exceeded"`)
			require.Contains(t, body, "namespace default holds 2 schedules, its maximum (2)")
			status, body = put("default", "a")
			require.Equal(t, http.StatusOK, status, "a replace is never refused: %s", body)
			status, body = put("other", "c")
			require.Equal(t, http.StatusOK, status, "each namespace has its own cap: %s", body)

			c := &cli{t: t, target: p.url}
			var list []map[string]any
			require.NoError(t, json.Unmarshal([]byte(c.ok("--json", "schedule", "list")), &list))
			require.Len(t, list, 2, "the refused schedule was not stored")
		})
	}

	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		db := filepath.Join(t.TempDir(), "plane.db")
		for _, tc := range []struct {
			target, value, says string
		}{
			{db, "0", "invalid --max-schedules-per-namespace 0: use a number of schedules ≥ 1, or a negative number for no cap (default 10000)"},
			{db, "many", `invalid --max-schedules-per-namespace "many": use a whole number`},
			{db, "2.5", `invalid --max-schedules-per-namespace "2.5": use a whole number`},
			{"http://127.0.0.1:9", "5", "invalid --max-schedules-per-namespace 5: it applies to a SQLite or PostgreSQL --target; the server at http://127.0.0.1:9 applies its own cap"},
		} {
			c := &cli{t: t, target: tc.target}
			_, errs, code := c.run("", "serve", "--addr", "127.0.0.1:0", "--max-schedules-per-namespace", tc.value)
			require.Equal(t, exitUsage, code, "%s %s: %s", tc.target, tc.value, errs)
			require.Contains(t, errs, tc.says)
			require.NotContains(t, errs, "--help", "a bad value, not a bad command line")
		}
		require.NoFileExists(t, db, "refused before the plane was opened")
	})
}

// TestServeDataMiscasedSchemeSaysSo: serve --data with the PostgreSQL scheme in upper case
// is refused naming --data with plane.PostgresURLRule (write it in lower case), as every
// other target is since plane.IsMiscasedPostgresURL, not with --data's generic "postgres://…
// ?blob=" rule, which did not say what was wrong, quoting the URL with its scheme lower-cased
// (as if written right); the password stays hidden.
func TestServeDataMiscasedSchemeSaysSo(t *testing.T) {
	t.Parallel()
	err := (&ServeOpts{Data: "POSTGRES://u:hunter22secret@db/lake?blob=file%3A%2F%2F%2Ftmp%2Fb"}).Validate()
	require.ErrorContains(t, err, "--data")
	require.ErrorContains(t, err, "write the scheme in lower case")
	require.ErrorContains(t, err, `"POSTGRES://u:xxxxx@db/lake?`, "the URL as written, its password hidden")
	require.NotContains(t, err.Error(), "hunter22secret")
}
