package main

// `lakeshore serve`: options, validation, the loopback rule and the graceful shutdown.
// Signals reach it through the app (the first cancels the command's context, which shuts
// the server down gracefully; the second exits at once).

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"gocloud.dev/blob"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/lakestore"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/plane/pgplane"
	"github.com/lakeshore-dev/lakeshore/plane/sqliteplane"
	"github.com/lakeshore-dev/lakeshore/server"
)

// Defaults of `lakeshore serve`.
const (
	// AddrDefault is the fixed default address: loopback only, port 7077.
	AddrDefault = "127.0.0.1:7077"
	// EnvAdminToken names the environment variable holding the admin token.
	EnvAdminToken = "LAKESHORE_ADMIN_TOKEN"
	// ReadHeaderTimeout bounds reading a request's headers (no slowloris).
	ReadHeaderTimeout = 10 * time.Second
	// ReadTimeout bounds reading a whole request (bodies up to 17 MiB).
	ReadTimeout = 2 * time.Minute
	// IdleTimeout closes keep-alive connections idle for longer.
	IdleTimeout = 2 * time.Minute
	// ShutdownTimeoutDefault bounds the graceful shutdown.
	ShutdownTimeoutDefault = 15 * time.Second
	// MaxHeaderBytes bounds request headers.
	MaxHeaderBytes = 64 << 10
)

// newHTTPServer is the one http.Server setup of every listener the CLI opens (serve, the
// daemon, provider run's --metrics-addr): the timeouts and header bound above, and the
// server's own error lines (a TLS handshake, a bad request line) logged at warn through
// logger.
func newHTTPServer(h http.Handler, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}

// ServeOpts are the options of `lakeshore serve`.
type ServeOpts struct {
	// Addr is the listen address. Defaults to AddrDefault.
	Addr string
	// Target is the plane to serve (as lakeshore.Open takes it). Defaults to the embedded
	// SQLite plane $LAKESHORE_HOME/lakeshore.db; never $LAKESHORE_URL, which clients of this
	// server often export in the same shell (serving it would proxy to itself). An http(s)
	// target naming the server's own address is refused.
	Target string
	// AdminTokenFile holds the admin token (first line). Defaults to $LAKESHORE_ADMIN_TOKEN.
	AdminTokenFile string
	// InsecureNoAuth allows a non-loopback address without an admin token (logged as a
	// warning at start).
	InsecureNoAuth bool
	// TLSCert and TLSKey serve HTTPS when both are set.
	TLSCert, TLSKey string
	// ShutdownTimeout bounds the graceful shutdown. Defaults to ShutdownTimeoutDefault.
	ShutdownTimeout time.Duration
	// LongPollMax, MaxLongPolls and MaxLongPollsPerTenant are server.Config's (0: its
	// defaults).
	LongPollMax           time.Duration
	MaxLongPolls          int
	MaxLongPollsPerTenant int
	// MaxOpenDataQueues, MaxDataQueuesPerTenant and DataQueueIdle are server.Config's (0:
	// its defaults).
	MaxOpenDataQueues      int
	MaxDataQueuesPerTenant int
	DataQueueIdle          time.Duration
	// MaxSchedulesPerNamespace is the cap on schedules one namespace holds, given to the
	// SQLite or PostgreSQL plane served (sqliteplane.Config and pgplane.Config
	// MaxSchedulesPerNamespace; `--max-schedules-per-namespace`): 0 the plane's default
	// (plane.SchedulesPerNamespaceDefault, 10,000), negative no cap. An http(s) target
	// applies its own server's cap, so a value other than 0 is refused with one.
	MaxSchedulesPerNamespace int
	// MaxTopicsPerQueue and MaxWorkersPerNamespace are the plane's caps on topics per queue
	// and registered workers per namespace, given to the plane as MaxSchedulesPerNamespace
	// is (`--max-topics-per-queue`, `--max-workers-per-namespace`): 0 the plane's defaults
	// (plane.TopicsPerQueueDefault, plane.WorkersPerNamespaceDefault, 100,000 each),
	// negative no cap; refused with an http(s) target as it is.
	MaxTopicsPerQueue      int
	MaxWorkersPerNamespace int
	// Retention is how long the SQLite or PostgreSQL plane served keeps terminal
	// invocations, idle topics, silent workers' registrations and stopped tokens before its
	// maintenance deletes them (`--retention`; sqliteplane.Config and pgplane.Config
	// Retention): 0 the plane's default (plane.RetentionDefault, 7 days), negative keeps
	// them for ever. A postgres:// target's retention= parameter must agree with it; an
	// http(s) target keeps its own server's, so a value other than 0 is refused with one.
	Retention time.Duration
	// MaxDataQueuesPerNamespace, MaxCodeBytesPerNamespace and MaxAdmissionBlocksPerNamespace
	// are server.Config's per-namespace caps (`--max-data-queues-per-namespace`,
	// `--max-code-bytes-per-namespace`, `--max-admission-blocks-per-namespace`): 0 the
	// server's defaults, negative no cap.
	MaxDataQueuesPerNamespace      int
	MaxCodeBytesPerNamespace       int64
	MaxAdmissionBlocksPerNamespace int
	// NoUI turns the web dashboard at /ui/ off (`--no-ui`; docs/dashboard.md).
	NoUI bool
	// DataDir is the root of the data queues the server serves
	// (/v1/namespaces/{ns}/data/{queue}, package persist): DataDir/{ns}/{queue}/.
	// Defaults to $LAKESHORE_HOME/data (~/.lakeshore/data).
	DataDir string
	// Data, when set, is the distributed store the data queues live in instead of
	// DataDir: "postgres://…?blob=<bucket URL>" (persist/lakestore; `--data`). Any
	// number of servers given the same Data serve the same queues.
	Data string
	// CodeStore is where the code archives shipped with runs are kept (docs/fabric.md):
	// a directory, or a bucket URL (s3://…, file:///…, mem://; `--code-store`). Defaults
	// to the bucket of Data when Data is set (servers sharing a PostgreSQL plane then
	// share the archives), else $LAKESHORE_HOME/code.
	CodeStore string
	// LogRequests logs one line per request (method, path, status, bytes, duration) at
	// level Info: `serve -v`.
	LogRequests bool
	// Providers runs the provider supervisor inside the server (`--providers`;
	// docs/providers.md), configured by Supervisor.
	Providers  bool
	Supervisor supervisorFlags

	// Ready, when set, is called with the listening address once the server accepts
	// connections (tests).
	Ready func(addr net.Addr)
}

// Validate checks o. Errors: *plane.InvalidError naming the option.
func (o *ServeOpts) Validate() error {
	if (o.TLSCert == "") != (o.TLSKey == "") {
		return plane.Invalid("--tls-cert/--tls-key", nil, "give both or neither")
	}
	if o.Data != "" && o.DataDir != "" {
		return plane.Invalid("--data/--data-dir", nil, "give one: --data-dir for file stores on this machine, --data for a distributed store")
	}
	if plane.IsMiscasedPostgresURL(o.Data) {
		return plane.Invalid("--data", plane.RedactURL(o.Data), plane.PostgresURLRule)
	}
	if o.Data != "" && !plane.IsPostgresURL(o.Data) {
		return plane.Invalid("--data", plane.RedactURL(o.Data), "postgres://…?blob=<bucket URL>, e.g. postgres://db/lakeshore?blob=s3%3A%2F%2Fbucket")
	}
	if _, _, err := net.SplitHostPort(cmp.Or(o.Addr, AddrDefault)); err != nil {
		return plane.Invalid("--addr", o.Addr, "use host:port, e.g. "+AddrDefault)
	}
	if targetIsAddr(o.Target, cmp.Or(o.Addr, AddrDefault)) {
		return plane.Invalid("--target", plane.RedactURL(o.Target), "it is this server's own address (--addr "+cmp.Or(o.Addr, AddrDefault)+
			"), so every request would be proxied back to itself; serve a SQLite file (the default) or another server")
	}
	for _, c := range []struct {
		flag  string
		value int
	}{{maxSchedulesFlag, o.MaxSchedulesPerNamespace}, {maxTopicsFlag, o.MaxTopicsPerQueue}, {maxWorkersFlag, o.MaxWorkersPerNamespace}} {
		if c.value != 0 && isHTTPTarget(o.Target) {
			return plane.Invalid("--"+c.flag, c.value,
				"it applies to a SQLite or PostgreSQL --target; the server at "+plane.RedactURL(o.Target)+" applies its own cap")
		}
	}
	if o.Retention != 0 && isHTTPTarget(o.Target) {
		return plane.Invalid("--"+retentionFlag, o.Retention,
			"it applies to a SQLite or PostgreSQL --target; the server at "+plane.RedactURL(o.Target)+" keeps its own retention")
	}
	if o.Retention != 0 && plane.IsPostgresURL(o.Target) {
		// The plane refuses a URL parameter that contradicts its Config (pgplane.ParseURL),
		// in words of Go ("the Config value"); a serve user gave a flag, which is named.
		if _, fromURL, err := pgplane.ParseURL(o.Target, nil); err == nil && fromURL.Retention != 0 && fromURL.Retention != o.Retention {
			return plane.Invalid("--"+retentionFlag, o.Retention, "the --target's retention="+fromURL.Retention.String()+
				" says otherwise: give one of them, or the same value in both")
		}
	}
	if o.ShutdownTimeout < 0 || o.LongPollMax < 0 || o.MaxLongPolls < 0 || o.MaxLongPollsPerTenant < 0 ||
		o.MaxOpenDataQueues < 0 || o.MaxDataQueuesPerTenant < 0 || o.DataQueueIdle < 0 {
		return plane.Invalid("timeouts and limits", nil, "use values ≥ 0")
	}
	return nil
}

// adminToken reads the admin token from the file, else the environment.
func (o *ServeOpts) adminToken(getenv func(string) string) (string, error) {
	if o.AdminTokenFile != "" {
		b, err := os.ReadFile(o.AdminTokenFile)
		if err != nil {
			return "", fmt.Errorf("read admin token: %w", err)
		}
		tok, _, _ := strings.Cut(string(b), "\n")
		tok = strings.TrimSpace(tok)
		if tok == "" {
			return "", plane.Invalid("--admin-token-file", o.AdminTokenFile, "put the token on the first line")
		}
		return tok, nil
	}
	return strings.TrimSpace(getenv(EnvAdminToken)), nil
}

// IsLoopback reports whether a listen host binds loopback only ("localhost", 127.0.0.0/8,
// ::1). An empty host, 0.0.0.0 and :: bind every interface.
func IsLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// CheckBind applies the rule of an unauthenticated server: loopback only, unless
// insecureNoAuth. Errors name the way out.
func CheckBind(addr string, authOn, insecureNoAuth bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return plane.Invalid("--addr", addr, "use host:port")
	}
	if authOn || IsLoopback(host) || insecureNoAuth {
		return nil
	}
	return fmt.Errorf("refusing to serve %s without authentication: set %s (or --admin-token-file), bind loopback (default %s), or pass --insecure-no-auth",
		addr, EnvAdminToken, AddrDefault)
}

// AdminTokenMin is the shortest admin token serve accepts on an address that is not
// loopback (16 bytes): a short one is guessed.
const AdminTokenMin = 16

// CheckAdminToken refuses an admin token shorter than AdminTokenMin on a non-loopback
// address. An empty token (auth off) is CheckBind's matter.
func CheckAdminToken(addr, admin string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return plane.Invalid("--addr", addr, "use host:port")
	}
	if admin == "" || IsLoopback(host) || len(admin) >= AdminTokenMin {
		return nil
	}
	return plane.Invalid("admin token", fmt.Sprintf("of %d bytes", len(admin)),
		fmt.Sprintf("use at least %d bytes on a non-loopback address, e.g. the output of `openssl rand -hex 32`", AdminTokenMin))
}

// RunServe serves the plane named by o.Target until ctx ends, then shuts down gracefully:
// long-polls end with 503 shutting_down, short requests finish (within ShutdownTimeout),
// and the plane is closed. Logs go to logger.
func RunServe(ctx context.Context, o *ServeOpts, logger *slog.Logger, getenv func(string) string) error {
	if err := o.Validate(); err != nil {
		return err
	}
	addr := cmp.Or(o.Addr, AddrDefault)
	admin, err := o.adminToken(getenv)
	if err != nil {
		return err
	}
	if err := CheckBind(addr, admin != "", o.InsecureNoAuth); err != nil {
		return err
	}
	if err := CheckAdminToken(addr, admin); err != nil {
		return err
	}
	// The certificate is read before anything starts, so a missing or mismatched file is a
	// usage error naming the flags, not a failure after "serving" was logged.
	var certs []tls.Certificate
	if o.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(o.TLSCert, o.TLSKey)
		if err != nil {
			return plane.Invalid("--tls-cert/--tls-key", o.TLSCert+", "+o.TLSKey, err.Error()+
				": give the certificate (PEM, the server's first) and its private key (PEM)")
		}
		certs = []tls.Certificate{cert}
	}
	target, err := serveTarget(o.Target, getenv)
	if err != nil {
		return err
	}
	drv, err := lakeshore.OpenDriver(ctx, target, &lakeshore.Config{Logger: logger,
		SQLite: &sqliteplane.Config{MaxSchedulesPerNamespace: o.MaxSchedulesPerNamespace,
			MaxTopicsPerQueue: o.MaxTopicsPerQueue, MaxWorkersPerNamespace: o.MaxWorkersPerNamespace, Retention: o.Retention},
		Postgres: &pgplane.Config{MaxSchedulesPerNamespace: o.MaxSchedulesPerNamespace,
			MaxTopicsPerQueue: o.MaxTopicsPerQueue, MaxWorkersPerNamespace: o.MaxWorkersPerNamespace, Retention: o.Retention}})
	if err != nil {
		return err
	}
	defer drv.Close()

	var dataDir string
	var dataStores server.DataStores
	if o.Data != "" {
		st, err := lakestore.NewStores(o.Data, &lakestore.Config{Logger: logger})
		if err != nil {
			return err
		}
		// The catalog is reached now, as the plane's target and --data's bucket are: a
		// password it refuses or a database it lacks exits here, named, rather than after
		// "serving", at every data request (as 502s).
		catalog, _, err := lakestore.ParseTarget(o.Data)
		if err != nil {
			return err
		}
		if _, err := lakestore.ListQueues(ctx, catalog, persist.NamespaceDefault); err != nil {
			return fmt.Errorf("--data's catalog: %w", err)
		}
		dataStores, dataDir = st, "(distributed store)"
	} else if dataDir, err = serveDataDir(o.DataDir, getenv); err != nil {
		return err
	}
	codeDir, codeBucket, err := serveCodeStore(ctx, o, getenv)
	if err != nil {
		return err
	}
	if codeBucket != nil {
		defer codeBucket.Close()
	}
	reg := prometheus.NewRegistry()
	if o.Providers {
		stop, err := runSupervisorIn(ctx, drv, target, &o.Supervisor, logger, reg, getenv)
		if err != nil {
			return fmt.Errorf("--providers: %w", err)
		}
		defer stop()
	}
	srv := server.New(drv, &server.Config{AdminToken: admin, Logger: logger, LogRequests: o.LogRequests, Registerer: reg,
		LongPollMax: o.LongPollMax, MaxLongPolls: o.MaxLongPolls, MaxLongPollsPerTenant: o.MaxLongPollsPerTenant, DisableUI: o.NoUI,
		MaxOpenDataQueues: o.MaxOpenDataQueues, MaxDataQueuesPerTenant: o.MaxDataQueuesPerTenant, DataQueueIdle: o.DataQueueIdle,
		DataDir: dataDir, DataConfig: &persist.Config{Logger: logger}, DataStores: dataStores, CodeDir: codeDir, CodeBucket: codeBucket,
		MaxDataQueuesPerNamespace: o.MaxDataQueuesPerNamespace, MaxCodeBytesPerNamespace: o.MaxCodeBytesPerNamespace,
		MaxAdmissionBlocksPerNamespace: o.MaxAdmissionBlocksPerNamespace})
	defer func() {
		// After the http.Server's shutdown: flush and close the data queues.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cmp.Or(o.ShutdownTimeout, ShutdownTimeoutDefault))
		defer cancel()
		if err := srv.Close(cctx); err != nil {
			logger.Error("closing the data queues", "error", err)
		}
	}()
	hs := newHTTPServer(srv, logger)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv.StartUIHistory() // the dashboard's rates cover the time since start
	defer srv.Stop()     // ends the history on every return (Stop is safe to repeat)
	host, _, _ := net.SplitHostPort(addr)
	if admin == "" && !IsLoopback(host) {
		logger.Warn("serving without authentication on a non-loopback address (--insecure-no-auth): anyone who can reach it can submit, claim and read", "addr", ln.Addr().String())
	}
	scheme := "http"
	if o.TLSCert != "" {
		scheme = "https"
	}
	code := codeDir // where shipped code archives are kept, said at start-up
	if codeBucket != nil {
		code = cmp.Or(plane.RedactURL(o.CodeStore), "--data's bucket")
	}
	logger.Info("serving", "addr", ln.Addr().String(), "url", scheme+"://"+ln.Addr().String(), "auth", admin != "", "target", plane.RedactURL(target), "data", dataDir, "code", code)

	errc := make(chan error, 1)
	go func() {
		if certs != nil {
			if hs.TLSConfig == nil {
				hs.TLSConfig = &tls.Config{}
			}
			hs.TLSConfig.Certificates = certs
			errc <- hs.ServeTLS(ln, "", "")
		} else {
			errc <- hs.Serve(ln)
		}
	}()
	if o.Ready != nil {
		o.Ready(ln.Addr())
	}
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	srv.Stop()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cmp.Or(o.ShutdownTimeout, ShutdownTimeoutDefault))
	defer cancel()
	err = hs.Shutdown(sctx)
	if e := <-errc; !errors.Is(e, http.ErrServerClosed) && err == nil {
		err = e
	}
	if err != nil {
		hs.Close()
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// serveDataDir resolves the data queues' root: dir as given (made absolute), else
// $LAKESHORE_HOME/data (~/.lakeshore/data), created with mode 0700.
func serveDataDir(dir string, getenv func(string) string) (string, error) {
	return homeSubdir(dir, "data", getenv)
}

// serveCodeStore opens the code store of o (ServeOpts.CodeStore): a directory, or a
// bucket the caller closes. Errors: *persist.InvalidError for a bucket URL this build
// cannot open; the bucket's or the directory's, naming where it came from (--code-store,
// --data's blob, the code store).
func serveCodeStore(ctx context.Context, o *ServeOpts, getenv func(string) string) (string, *blob.Bucket, error) {
	field, store := "--code-store", o.CodeStore
	if store == "" && o.Data != "" {
		_, bucketURL, err := lakestore.ParseTarget(o.Data)
		if err != nil {
			return "", nil, err
		}
		field, store = "--data's blob", bucketURL
	}
	if strings.Contains(store, "://") {
		b, err := lakestore.OpenBucket(ctx, field, store)
		return "", b, err
	}
	dir, err := serveCodeDir(store, getenv)
	if err != nil {
		if store == "" {
			field = "the code store"
		}
		return "", nil, fmt.Errorf("%s: %w", field, err)
	}
	return dir, nil, nil
}

// serveCodeDir returns the code archives' directory (server.Config.CodeDir, created with
// mode 0700): dir when given, else $LAKESHORE_HOME/code (~/.lakeshore/code when unset).
func serveCodeDir(dir string, getenv func(string) string) (string, error) {
	return homeSubdir(dir, "code", getenv)
}

// homeSubdir returns dir made absolute, else $LAKESHORE_HOME/name, created.
func homeSubdir(dir, name string, getenv func(string) string) (string, error) {
	if dir == "" {
		home := getenv(lakeshore.EnvHome)
		if home == "" {
			h, err := os.UserHomeDir()
			if err != nil {
				return "", fmt.Errorf("find the data directory: set %s or pass --data-dir: %w", lakeshore.EnvHome, err)
			}
			home = filepath.Join(h, ".lakeshore")
		}
		dir = filepath.Join(home, name)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return "", fmt.Errorf("create %s: %w", abs, err)
	}
	return abs, nil
}

// serveTarget resolves the plane serve opens: o.Target as given, else the embedded SQLite
// default $LAKESHORE_HOME/lakeshore.db (~/.lakeshore when unset, created with mode 0700).
// Unlike lakeshore.Open's "" it never reads $LAKESHORE_URL: clients export it to reach this
// very server, so serving it would loop requests back to it. A relative file path is made
// absolute, so the start log names the file.
func serveTarget(target string, getenv func(string) string) (string, error) {
	if target == "" {
		home := getenv(lakeshore.EnvHome)
		if home == "" {
			h, err := os.UserHomeDir()
			if err != nil {
				return "", fmt.Errorf("find the default plane: set %s or pass --target: %w", lakeshore.EnvHome, err)
			}
			home = filepath.Join(h, ".lakeshore")
		}
		if err := os.MkdirAll(home, 0o700); err != nil {
			return "", fmt.Errorf("create %s: %w", home, err)
		}
		target = filepath.Join(home, lakeshore.DefaultDBName)
	}
	if target != ":memory:" && !strings.Contains(target, "://") && !filepath.IsAbs(target) && strings.TrimSpace(target) == target {
		if abs, err := filepath.Abs(target); err == nil {
			target = abs
		}
	}
	return target, nil
}

// isHTTPTarget reports whether target is an http(s) URL (or a list of them): a server, as
// the plane serve proxies or a token's create is sent to.
func isHTTPTarget(target string) bool {
	scheme, _, ok := strings.Cut(strings.TrimSpace(target), "://")
	return ok && (strings.EqualFold(scheme, "http") || strings.EqualFold(scheme, "https"))
}

// targetIsAddr reports whether target is an http(s) URL that names the listen address addr
// itself: the same port and the same host, both loopback, or a loopback or unspecified host
// while addr listens on every interface.
func targetIsAddr(target, addr string) bool {
	u, err := url.Parse(target)
	if err != nil || (!strings.EqualFold(u.Scheme, "http") && !strings.EqualFold(u.Scheme, "https")) || u.Host == "" {
		return false
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if strings.EqualFold(u.Scheme, "https") {
			port = "443"
		}
	}
	lhost, lport, err := net.SplitHostPort(addr)
	if err != nil || lport != port {
		return false
	}
	thost := u.Hostname()
	switch {
	case strings.EqualFold(thost, lhost):
		return true
	case IsLoopback(thost) && IsLoopback(lhost):
		return true
	case isUnspecified(lhost):
		return IsLoopback(thost) || isUnspecified(thost) || isLocalIP(thost)
	}
	return false
}

func isUnspecified(host string) bool {
	if host == "" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsUnspecified()
}

// isLocalIP reports whether host is an IP address of one of this machine's interfaces.
func isLocalIP(host string) bool {
	ip := net.ParseIP(host)
	if ip == nil {
		return false
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true
		}
	}
	return false
}

// retentionFlag is the name of serve's flag of ServeOpts.Retention.
const retentionFlag = "retention"

// The names of serve's flags of the per-namespace and per-queue caps:
// ServeOpts.MaxSchedulesPerNamespace, MaxTopicsPerQueue and MaxWorkersPerNamespace (the
// plane's; its errors name the last two), MaxDataQueuesPerNamespace,
// MaxCodeBytesPerNamespace and MaxAdmissionBlocksPerNamespace (the server's; the server's
// errors name the same flags).
const (
	maxSchedulesFlag       = "max-schedules-per-namespace"
	maxTopicsFlag          = plane.MaxTopicsPerQueueFlag
	maxWorkersFlag         = plane.MaxWorkersPerNamespaceFlag
	maxDataQueuesFlag      = server.MaxDataQueuesPerNamespaceFlag
	maxCodeBytesFlag       = server.MaxCodeBytesPerNamespaceFlag
	maxAdmissionBlocksFlag = server.MaxAdmissionBlocksPerNamespaceFlag
)

// newServeCmd is `lakeshore serve`. The app's stderr receives the logs; -v adds a line per
// request.
func newServeCmd(a *app) *cobra.Command {
	o := &ServeOpts{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve a plane over HTTP (default " + AddrDefault + ")",
		Long: `Serve exposes a plane (the embedded default, or --target) over HTTP for other processes
and machines; clients use LAKESHORE_URL=http://` + AddrDefault + `.

Without an admin token ($` + EnvAdminToken + ` or --admin-token-file) the server has no
authentication and only binds loopback; --insecure-no-auth overrides that (with a warning).
-v logs one line per request (method, path, status, bytes, duration).
The web dashboard is at /ui/ (--no-ui turns it off).
SIGINT/SIGTERM shut it down gracefully; a second signal exits at once.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			// -v adds one line per request at info level (not debug: the server's own debug
			// lines would repeat them).
			o.LogRequests = a.verbose
			logger := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
			o.Target = cmp.Or(o.Target, a.target)
			if !cmd.Flags().Changed(retentionFlag) {
				o.Retention = 0 // the plane's default (or a postgres:// target's retention=), and no refusal with an http(s) target
			} else if o.Retention == 0 {
				return plane.Invalid("--"+retentionFlag, o.Retention, "use a non-zero duration, e.g. 6h or 168h (negative: keep for ever; default "+
					plane.RetentionDefault.String()+")")
			}
			for _, c := range []struct {
				flag, unit string
				value      *int
				def        int
			}{
				{maxSchedulesFlag, "schedules", &o.MaxSchedulesPerNamespace, plane.SchedulesPerNamespaceDefault},
				{maxTopicsFlag, "topics", &o.MaxTopicsPerQueue, plane.TopicsPerQueueDefault},
				{maxWorkersFlag, "workers", &o.MaxWorkersPerNamespace, plane.WorkersPerNamespaceDefault},
			} {
				if !cmd.Flags().Changed(c.flag) {
					*c.value = 0 // the plane's default, and no refusal with an http(s) target
				} else if *c.value == 0 {
					return plane.Invalid("--"+c.flag, 0, fmt.Sprintf(
						"use a number of %s ≥ 1, or a negative number for no cap (default %d)", c.unit, c.def))
				}
			}
			for _, c := range []struct {
				flag, unit string
				zero       bool
				def        int64
			}{
				{maxDataQueuesFlag, "data queues", o.MaxDataQueuesPerNamespace == 0, server.MaxDataQueuesPerNamespaceDefault},
				{maxCodeBytesFlag, "bytes", o.MaxCodeBytesPerNamespace == 0, server.MaxCodeBytesPerNamespaceDefault},
				{maxAdmissionBlocksFlag, "admission blocks", o.MaxAdmissionBlocksPerNamespace == 0, server.MaxAdmissionBlocksPerNamespaceDefault},
			} {
				if c.zero && cmd.Flags().Changed(c.flag) {
					return plane.Invalid("--"+c.flag, 0, fmt.Sprintf("use a number of %s ≥ 1, or a negative number for no cap (default %d)", c.unit, c.def))
				}
			}
			return RunServe(cmd.Context(), o, logger, os.Getenv)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Addr, "addr", AddrDefault, "listen address (host:port)")
	f.StringVar(&o.AdminTokenFile, "admin-token-file", "", "file holding the admin token (default: $"+EnvAdminToken+")")
	f.IntVar(&o.MaxSchedulesPerNamespace, maxSchedulesFlag, plane.SchedulesPerNamespaceDefault,
		"schedules one namespace holds; creating one more answers limit_exceeded (HTTP 409); negative: no cap")
	f.IntVar(&o.MaxTopicsPerQueue, maxTopicsFlag, plane.TopicsPerQueueDefault,
		"topics one queue holds (a topic stays until the plane's retention after its last post); the first post to one more answers limit_exceeded (HTTP 409); negative: no cap")
	f.IntVar(&o.MaxWorkersPerNamespace, maxWorkersFlag, plane.WorkersPerNamespaceDefault,
		"registered workers one namespace holds (a crashed worker's registration stays until the plane's retention); registering one more answers limit_exceeded (HTTP 409); negative: no cap")
	f.IntVar(&o.MaxDataQueuesPerNamespace, maxDataQueuesFlag, server.MaxDataQueuesPerNamespaceDefault,
		"data queues one namespace holds (stored, unlike --max-data-queues-per-tenant's waits); a put creating one more answers limit_exceeded (HTTP 409); "+
			"the default is a queue per run for years of work, while none is ever removed by the server; negative: no cap")
	f.Int64Var(&o.MaxCodeBytesPerNamespace, maxCodeBytesFlag, server.MaxCodeBytesPerNamespaceDefault,
		"bytes of shipped code archives one namespace holds; a new archive past it answers limit_exceeded (HTTP 409); "+
			"the default (10 GiB) is ten thousand uploads of 1 MiB, while none is ever removed by the server; negative: no cap")
	f.IntVar(&o.MaxAdmissionBlocksPerNamespace, maxAdmissionBlocksFlag, server.MaxAdmissionBlocksPerNamespaceDefault,
		"admission blocks (declared queues) one namespace holds; declaring one more answers limit_exceeded (HTTP 409), replacing one never; "+
			"the default is as many as --max-schedules-per-namespace, far more queues than a namespace declares; negative: no cap")
	f.BoolVar(&o.NoUI, "no-ui", false, "do not serve the web dashboard at /ui/")
	f.BoolVar(&o.InsecureNoAuth, "insecure-no-auth", false, "allow a non-loopback address without authentication")
	f.StringVar(&o.TLSCert, "tls-cert", "", "TLS certificate file (PEM)")
	f.StringVar(&o.TLSKey, "tls-key", "", "TLS key file (PEM)")
	f.StringVar(&o.DataDir, "data-dir", "", "root of the data queues (default: $"+lakeshore.EnvHome+"/data)")
	f.StringVar(&o.Data, "data", "", "serve the data queues from a distributed store instead of --data-dir: postgres://…?blob=<bucket URL>")
	f.StringVar(&o.CodeStore, "code-store", "", "where shipped code archives are kept: a directory or a bucket URL (s3://bucket, file:///dir) (default: --data's bucket, else $"+lakeshore.EnvHome+"/code)")
	f.DurationVar(&o.Retention, retentionFlag, plane.RetentionDefault, "how long the plane keeps finished jobs and their journals, "+
		"idle topics, silent workers' registrations and revoked or expired tokens before maintenance deletes them "+
		"(a SQLite or PostgreSQL --target; e.g. 6h; negative: keep for ever)")
	f.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", ShutdownTimeoutDefault, "bound on the graceful shutdown")
	f.DurationVar(&o.LongPollMax, "long-poll-max", server.LongPollMaxDefault, "cap of one long-poll")
	f.IntVar(&o.MaxLongPolls, "max-long-polls", server.MaxLongPollsDefault, "long-polls open at once before 503")
	f.BoolVar(&o.Providers, "providers", false, "run the provider supervisor in the server: launch and stop workers for queues with a provider (docs/providers.md)")
	o.Supervisor.register(cmd, "providers-")
	f.IntVar(&o.MaxOpenDataQueues, "max-open-data-queues", server.MaxOpenDataQueuesDefault, "data queues open at once (the least recently used idle one is closed to open another)")
	f.IntVar(&o.MaxDataQueuesPerTenant, "max-data-queues-per-tenant", 0, "data queues one token (or, without tokens, one namespace) holds at once with waits and streams before 503 (0: a quarter of --max-open-data-queues)")
	f.DurationVar(&o.DataQueueIdle, "data-queue-idle", server.DataQueueIdleDefault, "close a data queue no request has used for this long")
	f.IntVar(&o.MaxLongPollsPerTenant, "max-long-polls-per-tenant", 0, "long-polls one token (or, without tokens, one namespace) holds at once before 503 (0: a quarter of --max-long-polls)")
	return cmd
}
