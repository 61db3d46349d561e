package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/fabric"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/provider"
	"github.com/lakeshore-dev/lakeshore/provider/execprovider"
	"github.com/lakeshore-dev/lakeshore/provider/localprovider"
	"github.com/lakeshore-dev/lakeshore/provider/slurmprovider"
	"github.com/lakeshore-dev/lakeshore/provider/sshprovider"
)

func newProviderCmd(a *app) *cobra.Command {
	c := &cobra.Command{
		Use:   "provider",
		Short: "Supply workers to queues that have a provider attached",
		Long: `A queue with a provider attached ('lakeshore queue set Q --provider NAME …') gets its
workers from a supervisor: 'lakeshore provider run' (or 'lakeshore serve --providers')
watches each such queue's backlog and live workers and launches or stops workers through
the provider (local, slurm, exec:PROGRAM, ssh:NAME or kubernetes:NAME) to follow the queue's launch policy.
See docs/providers.md.`,
		Args: exactArgs(0),
		RunE: unknownSubcommand,
	}
	c.AddCommand(newProviderRunCmd(a))
	return c
}

func newProviderRunCmd(a *app) *cobra.Command {
	var (
		o           supervisorFlags
		metricsAddr string
	)
	c := &cobra.Command{
		Use:   "run [--dry-run] [--tick 1s] [--metrics-addr HOST:PORT]",
		Short: "Run the provider supervisor until interrupted",
		Long: `Run the supervisor over every queue with a provider in --namespace (every namespace
when not set) of the plane named by --target (or $LAKESHORE_URL, else the embedded plane).
One supervisor acts per queue at a time (a lease in the plane), so several may run for
availability. Every decision is logged on stderr; --dry-run logs them and launches and
stops nothing, and takes no lease (a real supervisor beside it still acts). A provider
that cannot work (SLURM not reachable, an exec program missing) is an error line at
start-up; the supervisor keeps running. Workers keep running when the supervisor stops;
the next one adopts them.

Launched workers reach the plane through their environment: LAKESHORE_URL for an
http(s):// or postgres:// plane, LAKESHORE_HOME for the embedded one (a SQLite file named
lakeshore.db), plus LAKESHORE_LAUNCH_ID, LAKESHORE_PROVIDER, LAKESHORE_QUEUE and
LAKESHORE_NAMESPACE. SIGINT/SIGTERM stop the supervisor.`,
		Example: `  lakeshore provider run --dry-run
  LAKESHORE_URL=postgres://lakeshore@db.internal/jobs lakeshore provider run --tick 2s`,
		Args: exactArgs(0),
		RunE: func(c *cobra.Command, args []string) error {
			target, err := supervisorTarget(a.planeURL(), os.Getenv)
			if err != nil {
				return usageError(err)
			}
			logger := a.logger()
			if !a.verbose {
				logger = slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
			}
			drv, err := lakeshore.OpenDriver(c.Context(), target, &lakeshore.Config{Logger: logger})
			if err != nil {
				return fmt.Errorf("open plane: %w", err)
			}
			defer drv.Close()
			reg := prometheus.NewRegistry()
			s, err := newSupervisor(drv, target, a.namespace, &o, logger, provider.NewMetrics(reg), os.Getenv)
			if err != nil {
				return err
			}
			if metricsAddr != "" {
				stop, err := serveMetrics(metricsAddr, reg, logger)
				if err != nil {
					return err
				}
				defer stop()
			}
			logger.Info("provider supervisor running", "target", plane.RedactURL(target), "holder", s.Holder(), "dry_run", o.dryRun)
			return s.Run(c.Context())
		},
	}
	o.register(c, "")
	c.Flags().StringVar(&metricsAddr, "metrics-addr", "", "serve the supervisor's Prometheus metrics at http://HOST:PORT/metrics (default: not served)")
	return c
}

// serveMetrics serves reg at addr/metrics until the returned stop is called.
func serveMetrics(addr string, reg *prometheus.Registry, logger *slog.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	hs := newHTTPServer(mux, logger)
	go func() { _ = hs.Serve(ln) }()
	logger.Info("serving metrics", "url", "http://"+ln.Addr().String()+"/metrics")
	return func() { _ = hs.Close() }, nil
}

// supervisorFlags are the flags of 'provider run', shared with 'serve --providers'.
type supervisorFlags struct {
	dryRun    bool
	tick      time.Duration
	stopGrace time.Duration
	timeout   time.Duration
	leaseTTL  time.Duration
}

func (o *supervisorFlags) register(c *cobra.Command, prefix string) {
	f := c.Flags()
	f.BoolVar(&o.dryRun, prefix+"dry-run", false, "log and count every decision, but launch and stop nothing and take no lease")
	f.DurationVar(&o.tick, prefix+"tick", provider.TickDefault, "how often the supervisor looks at its queues")
	f.DurationVar(&o.stopGrace, prefix+"stop-grace", provider.StopGraceDefault, "how long a stopped worker may drain before it is killed")
	f.DurationVar(&o.leaseTTL, prefix+"lease-ttl", provider.LeaseTTLDefault, "per-queue lease: another supervisor takes a queue over within it when this one dies")
	f.DurationVar(&o.timeout, prefix+"call-timeout", provider.CallTimeoutDefault, "bound on each provider call (launch, stop, list, an exec program)")
}

// supervisorTarget resolves where the supervisor's plane is: the target, else the
// embedded default. ":memory:" is refused: no worker process could reach it.
func supervisorTarget(target string, getenv func(string) string) (string, error) {
	if target == ":memory:" || strings.EqualFold(target, "sqlite://:memory:") {
		return "", plane.Invalid("target", target, "use a plane other processes can reach: a file, http(s):// or postgres://")
	}
	return serveTarget(target, getenv)
}

// workerEnv is how a launched worker reaches the plane at target: its URL and, for a
// server, the supervisor's $LAKESHORE_TOKEN; the embedded plane's directory otherwise, with
// LAKESHORE_BIN = this executable when $LAKESHORE_BIN is not set (a Python worker starts the
// plane's daemon with it; one the supervisor has, its workers inherit).
func workerEnv(target string, getenv func(string) string, logger *slog.Logger) map[string]string {
	lower := strings.ToLower(target)
	switch {
	case strings.HasPrefix(lower, "http://"), strings.HasPrefix(lower, "https://"):
		// The token too: the SSH and Kubernetes providers give a worker the launch's
		// environment, not the supervisor's process environment.
		env := map[string]string{lakeshore.EnvURL: target}
		if token := getenv(lakeshore.EnvToken); token != "" {
			env[lakeshore.EnvToken] = token
		}
		return env
	case plane.IsPostgresURL(target):
		return map[string]string{lakeshore.EnvURL: target}
	}
	path := strings.TrimPrefix(target, "sqlite://")
	if filepath.Base(path) != lakeshore.DefaultDBName {
		logger.Warn("provider supervisor: launched workers find the embedded plane through LAKESHORE_HOME, which names a directory holding "+
			lakeshore.DefaultDBName+"; this plane's file has another name, so give the worker command its --target", "target", plane.RedactURL(target))
	}
	env := map[string]string{lakeshore.EnvHome: filepath.Dir(path)}
	if getenv(provider.EnvBinary) == "" {
		if self, err := os.Executable(); err == nil {
			env[provider.EnvBinary] = self
		}
	}
	return env
}

// newSupervisor builds the supervisor with the providers this build has.
func newSupervisor(drv plane.Driver, target, namespace string, o *supervisorFlags, logger *slog.Logger,
	metrics *provider.Metrics, getenv func(string) string) (*provider.Supervisor, error) {
	home, err := supervisorHome(target, getenv)
	if err != nil {
		return nil, err
	}
	// A bad LAKESHORE_LOCAL_GPUS ("0,0": one GPU handed to two workers) stops the start, not
	// only each tick's first use of the local provider (a warning per tick).
	if v := getenv(localprovider.EnvGPUs); strings.TrimSpace(v) != "" {
		if _, err := localprovider.ParseGPUs(v); err != nil {
			return nil, err
		}
	}
	return provider.NewSupervisor(provider.SupervisorConfig{
		Driver: drv, Resolve: newResolver(home, o.timeout, getenv), Namespace: namespace, Tick: o.tick,
		StopGrace: o.stopGrace, CallTimeout: o.timeout, LeaseTTL: o.leaseTTL, DryRun: o.dryRun,
		WorkerEnv: workerEnv(target, getenv, logger), Logger: logger, Metrics: metrics,
	})
}

// supervisorHome is where the local provider keeps its launch records: beside the
// embedded plane's file, else under $LAKESHORE_HOME (~/.lakeshore).
func supervisorHome(target string, getenv func(string) string) (string, error) {
	lower := strings.ToLower(target)
	if !strings.Contains(lower, "://") || strings.HasPrefix(lower, "sqlite://") {
		return filepath.Dir(strings.TrimPrefix(target, "sqlite://")), nil
	}
	if home := getenv(lakeshore.EnvHome); home != "" {
		return home, nil
	}
	h, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find the local provider's directory: set %s: %w", lakeshore.EnvHome, err)
	}
	return filepath.Join(h, ".lakeshore"), nil
}

// newResolver maps provider names to this build's providers, making each once. ssh:NAME and
// kubernetes:NAME are read from the project file (lakeshore.yaml in the working directory
// or a parent, or $LAKESHORE_CONFIG) when first used; a failure is tried again at the next
// tick, so a fixed file is picked up without a restart.
func newResolver(home string, timeout time.Duration, getenv func(string) string) provider.Resolver {
	var (
		mu    sync.Mutex
		made  = map[string]provider.Provider{}
		local = filepath.Join(home, "run", "providers", "local")
	)
	return func(name string) (provider.Provider, error) {
		mu.Lock()
		defer mu.Unlock()
		if p, ok := made[name]; ok {
			return p, nil
		}
		var (
			p   provider.Provider
			err error
		)
		switch {
		case name == plane.ProviderLocal:
			var lp *localprovider.Provider
			if lp, err = localprovider.New(local); err == nil {
				if self, serr := os.Executable(); serr == nil {
					lp.SetLakeshore(self) // "lakeshore" in a worker command is this binary
				}
				p = lp
			}
		case name == plane.ProviderSlurm:
			cfg := slurmprovider.ConfigFromEnv()
			cfg.CommandTimeout = timeout
			p, err = slurmprovider.New(cfg)
		case strings.HasPrefix(name, plane.ProviderExecPrefix):
			p, err = execprovider.New(name, timeout)
		case strings.HasPrefix(name, plane.ProviderSSHPrefix):
			var (
				decl *fabric.Provider
				file string
			)
			if decl, file, err = declaredProvider(name, "ssh", getenv); err == nil {
				var cfg sshprovider.Config
				if cfg, err = sshprovider.FromConfig(file, decl); err == nil {
					p, err = sshprovider.New(cfg)
				}
			}
		case strings.HasPrefix(name, plane.ProviderKubernetesPrefix):
			var (
				decl *fabric.Provider
				file string
			)
			if decl, file, err = declaredProvider(name, "kubernetes", getenv); err == nil {
				p, err = newKubernetesProvider(file, decl)
			}
		default:
			err = provider.UnknownProvider(plane.Invalid("provider", name, "use local, slurm, exec:PROGRAM, ssh:NAME or kubernetes:NAME"))
		}
		if err != nil {
			return nil, err
		}
		made[name] = p
		return p, nil
	}
}

// declaredProvider finds the provider a name "TYPE:NAME" refers to in the project file.
// Errors: no project file, no such provider or one of another type (both matching
// provider.ErrUnknownProvider).
func declaredProvider(name, typ string, getenv func(string) string) (*fabric.Provider, string, error) {
	_, declared, _ := strings.Cut(name, ":")
	wd, err := os.Getwd()
	if err != nil {
		return nil, "", err
	}
	c, err := fabric.Load(wd, getenv)
	if err != nil {
		return nil, "", fmt.Errorf("provider %s is declared in the project file, which the supervisor reads: %w", name, err)
	}
	d, ok := c.Providers[declared]
	if !ok {
		var have []string
		for n, p := range c.Providers {
			if p.Type == typ {
				have = append(have, n)
			}
		}
		slices.Sort(have)
		return nil, "", provider.UnknownProvider(fmt.Errorf("%s: no provider %q under providers: (its %s providers: %s)", c.File, declared, typ, strings.Join(have, ", ")))
	}
	if d.Type != typ {
		return nil, "", provider.UnknownProvider(fmt.Errorf("%s:%d: provider %q is of type %s, not %s: name it %s:%s, or attach it by its own type", c.File, d.Line, declared, d.Type, typ, d.Type, declared))
	}
	return d, c.File, nil
}

// runSupervisorIn runs a supervisor beside a server until ctx ends ('serve --providers').
func runSupervisorIn(ctx context.Context, drv plane.Driver, target string, o *supervisorFlags, logger *slog.Logger,
	reg prometheus.Registerer, getenv func(string) string) (func(), error) {
	if _, err := supervisorTarget(target, getenv); err != nil {
		return nil, err
	}
	s, err := newSupervisor(drv, target, "", o, logger, provider.NewMetrics(reg), getenv)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := s.Run(ctx); err != nil {
			logger.Error("provider supervisor stopped", "error", err)
		}
	}()
	logger.Info("provider supervisor running", "holder", s.Holder(), "dry_run", o.dryRun)
	return func() { cancel(); <-done }, nil
}
