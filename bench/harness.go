package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"
)

// options are the harness's flags.
type options struct {
	quick              bool
	systems            []string
	workloads          []string
	runs               int
	crashRuns          int
	out                string
	n                  int
	maxTime            time.Duration
	rate               int
	latencyDuration    time.Duration
	latencyConcurrency int
	// peakWorkers and peakDuration shape latency-80's closed-loop peak run (and its
	// workers in the open loop after it); peaks, from -peak, skip that run for the
	// systems it names (jobs/s).
	peakWorkers      int
	peakDuration     time.Duration
	peaks            map[string]float64
	crashJobs        int
	crashConcurrency int
	crashTimeout     time.Duration
	leaseTTL         time.Duration
	sync             string
	dir              string
}

// withDefaults fills zero fields: full sizes, or tiny ones with quick.
func (o options) withDefaults() options {
	def := options{runs: 3, n: 100_000, maxTime: 20 * time.Second, rate: 1000, latencyDuration: 20 * time.Second,
		latencyConcurrency: 8, peakWorkers: 64, peakDuration: 4 * time.Second, crashJobs: 10_000, crashConcurrency: 8, crashTimeout: 3 * time.Minute,
		leaseTTL: 5 * time.Second, sync: "FULL"}
	if o.quick {
		def = options{runs: 1, n: 300, maxTime: 2 * time.Second, rate: 200, latencyDuration: time.Second,
			latencyConcurrency: 8, peakWorkers: 8, peakDuration: time.Second, crashJobs: 300, crashConcurrency: 8, crashTimeout: 2 * time.Minute,
			leaseTTL: time.Second, sync: "FULL"}
	}
	pick := func(v, d int) int {
		if v == 0 {
			return d
		}
		return v
	}
	pickD := func(v, d time.Duration) time.Duration {
		if v == 0 {
			return d
		}
		return v
	}
	o.runs = pick(o.runs, def.runs)
	o.crashRuns = min(pick(o.crashRuns, o.runs), o.runs)
	o.n = pick(o.n, def.n)
	o.maxTime = pickD(o.maxTime, def.maxTime)
	o.rate = pick(o.rate, def.rate)
	o.latencyDuration = pickD(o.latencyDuration, def.latencyDuration)
	o.latencyConcurrency = pick(o.latencyConcurrency, def.latencyConcurrency)
	o.peakWorkers = pick(o.peakWorkers, def.peakWorkers)
	o.peakDuration = pickD(o.peakDuration, def.peakDuration)
	o.crashJobs = pick(o.crashJobs, def.crashJobs)
	o.crashConcurrency = pick(o.crashConcurrency, def.crashConcurrency)
	o.crashTimeout = pickD(o.crashTimeout, def.crashTimeout)
	o.leaseTTL = pickD(o.leaseTTL, def.leaseTTL)
	if o.sync == "" {
		o.sync = def.sync
	}
	o.sync = strings.ToUpper(o.sync)
	return o
}

func (o options) validate() error {
	if o.sync != "FULL" && o.sync != "NORMAL" {
		return fmt.Errorf("-sync %q: use FULL or NORMAL", o.sync)
	}
	if o.runs < 1 || o.n < 1 || o.rate < 1 || o.crashJobs < 3 {
		return errors.New("-runs, -n and -rate must be ≥ 1, -crash-jobs ≥ 3")
	}
	return nil
}

// harness runs the selected workloads against the selected systems.
type harness struct {
	o      options
	stderr io.Writer
}

// report is what a harness run produced.
type report struct {
	markdown string
	errors   int // runs that failed (not "n/a")
}

// run runs every selected workload against every selected system and returns the report.
func run(ctx context.Context, o options, stderr io.Writer) (*report, error) {
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	h := &harness{o: o, stderr: stderr}
	raiseOpenFilesBestEffort(1 << 18)
	syss, err := selectSystems(o.systems)
	if err != nil {
		return nil, err
	}
	wls, err := selectWorkloads(o.workloads)
	if err != nil {
		return nil, err
	}
	base := o.dir
	if base == "" {
		if base, err = os.MkdirTemp("", "lakeshore-bench-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(base)
	}

	skipped := map[string]string{}
	var redis *redisServer
	for _, s := range syss {
		if why := s.skip(); why != "" {
			skipped[s.name()] = why
		}
		if s.name() == "asynq" {
			dir := filepath.Join(base, "redis")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, err
			}
			if redis, err = startRedis(ctx, dir, o.sync); err != nil {
				skipped["asynq"] = err.Error()
				redis = nil
			} else {
				defer redis.stop()
			}
		}
	}
	var pg *pgServer
	var pgErr error
	for _, s := range syss {
		if _, ok := s.(postgresSystem); !ok || skipped[s.name()] != "" {
			continue
		}
		if pg == nil && pgErr == nil {
			if pg, pgErr = startPG(); pgErr == nil {
				defer pg.stop()
			}
		}
		if pgErr != nil {
			skipped[s.name()] = pgErr.Error()
		}
	}
	for _, s := range syss {
		if why, ok := skipped[s.name()]; ok {
			fmt.Fprintf(stderr, "%s: skipped: %s\n", s.name(), why)
		}
	}

	e0 := &env{sync: o.sync, leaseTTL: o.leaseTTL}
	if redis != nil {
		e0.redisAddr = redis.addr
	}
	if pg != nil {
		e0.pgAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(pg.port))
	}
	results := map[string]map[string][]measurement{} // workload → system → per metric
	failed := 0
	started := time.Now()
	for _, w := range wls {
		results[w.name] = map[string][]measurement{}
		fmt.Fprintf(stderr, "== %s: %s\n", w.name, w.params(&o))
		for r := range o.runs {
			if w.name == "crash" && r >= o.crashRuns {
				break
			}
			for _, s := range syss {
				if _, skip := skipped[s.name()]; skip {
					continue
				}
				ms := results[w.name][s.name()]
				if ms == nil {
					ms = make([]measurement, len(w.metrics))
					results[w.name][s.name()] = ms
				}
				if ms[0].na != "" {
					continue // n/a or failed before: do not retry
				}
				dir := filepath.Join(base, fmt.Sprintf("%s-%s-%d", w.name, s.name(), r))
				if err := os.MkdirAll(dir, 0o755); err != nil {
					return nil, err
				}
				if redis != nil && s.name() == "asynq" {
					if err := redis.flush(); err != nil {
						return nil, fmt.Errorf("flush redis: %w", err)
					}
				}
				e := *e0
				e.dir = dir
				t0 := time.Now()
				watchdog := time.AfterFunc(h.stallAfter(), func() { h.dumpStall(w.name, s.name(), r) })
				vals, err := w.run(ctx, h, s, &e)
				watchdog.Stop()
				runtime.GC()
				debug.FreeOSMemory()
				os.RemoveAll(dir)
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				switch {
				case errors.Is(err, errNotApplicable):
					for i := range ms {
						ms[i].na = err.Error()
					}
					fmt.Fprintf(stderr, "   %-14s %s\n", s.name(), err)
				case err != nil:
					failed++
					for i := range ms {
						ms[i].na, ms[i].err = "error: "+err.Error(), true
					}
					fmt.Fprintf(stderr, "   %-14s run %d: error: %v\n", s.name(), r+1, err)
				default:
					var parts []string
					for i, v := range vals {
						ms[i].values = append(ms[i].values, v)
						parts = append(parts, w.metrics[i].name+" "+formatValue(v))
					}
					fmt.Fprintf(stderr, "   %-14s run %d: %s (%s)\n", s.name(), r+1, strings.Join(parts, ", "),
						time.Since(t0).Round(time.Millisecond))
				}
			}
		}
	}
	fmt.Fprintf(stderr, "done in %s\n", time.Since(started).Round(time.Second))
	md := h.markdown(syss, wls, results, skipped, e0, time.Since(started))
	return &report{markdown: md, errors: failed}, nil
}

// stallAfter is how long one run may take before the harness dumps its goroutines: far
// longer than any healthy run.
func (h *harness) stallAfter() time.Duration {
	return 2*h.o.maxTime + h.o.latencyDuration + h.o.peakDuration + h.o.crashTimeout + 2*time.Minute
}

// dumpStall writes every goroutine's stack to a file in the temporary directory, for a run
// that takes far longer than it should, and says where.
func (h *harness) dumpStall(workload, system string, run int) {
	f, err := os.CreateTemp("", fmt.Sprintf("bench-stall-%s-%s-%d-*.txt", workload, system, run+1))
	if err != nil {
		return
	}
	defer f.Close()
	pprof.Lookup("goroutine").WriteTo(f, 2)
	fmt.Fprintf(h.stderr, "   %-14s run %d has taken %s; goroutines written to %s\n", system, run+1, h.stallAfter(), f.Name())
}

func selectSystems(names []string) ([]system, error) {
	all := systems()
	if len(names) == 0 {
		return all, nil
	}
	var out []system
	for _, s := range all {
		if slices.Contains(names, s.name()) {
			out = append(out, s)
		}
	}
	for _, n := range names {
		if !slices.ContainsFunc(all, func(s system) bool { return s.name() == n }) {
			return nil, fmt.Errorf("-systems: unknown system %q (have %s)", n, strings.Join(systemNames(), ","))
		}
	}
	return out, nil
}

func systemNames() []string {
	var out []string
	for _, s := range systems() {
		out = append(out, s.name())
	}
	return out
}

func selectWorkloads(names []string) ([]workload, error) {
	all := workloads()
	if len(names) == 0 {
		return all, nil
	}
	var out []workload
	for _, w := range all {
		if slices.Contains(names, w.name) {
			out = append(out, w)
		}
	}
	for _, n := range names {
		if !slices.ContainsFunc(all, func(w workload) bool { return w.name == n }) {
			var have []string
			for _, w := range all {
				have = append(have, w.name)
			}
			return nil, fmt.Errorf("-workloads: unknown workload %q (have %s)", n, strings.Join(have, ","))
		}
	}
	return out, nil
}

// role says how a system's row is read against Lakeshore's.
func role(name string) string {
	switch name {
	case "lakeshore", "lakeshore-http", "lakeshore-http-proc", "lakeshore-pg", "lakeshore-pg-serve", "lakeshore-pg-serve3":
		return "ours"
	case "sqlite-raw":
		return "ceiling"
	}
	return "peer"
}

var nan = math.NaN()

// markdown renders the report: parameters, settings, skipped systems and one table.
func (h *harness) markdown(syss []system, wls []workload, results map[string]map[string][]measurement,
	skipped map[string]string, e *env, took time.Duration) string {
	o := h.o
	var b strings.Builder
	fmt.Fprintf(&b, "## Lakeshore and its peers: %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	mode := "full"
	if o.quick {
		mode = "quick (smoke sizes: these figures mean nothing)"
	}
	crash := ""
	if o.crashRuns != o.runs {
		crash = fmt.Sprintf(" (crash: %d)", o.crashRuns)
	}
	fmt.Fprintf(&b, "Mode %s; %d run(s)%s per workload and system, runs of the systems interleaved; "+
		"durability: SQLite synchronous=%s, Redis appendfsync %s; harness time %s.\n\n",
		mode, o.runs, crash, o.sync, map[string]string{"FULL": "always", "NORMAL": "everysec"}[o.sync], took.Round(time.Second))
	b.WriteString("Workloads:\n\n")
	for _, w := range wls {
		fmt.Fprintf(&b, "- `%s`: %s\n", w.name, w.params(&o))
	}
	b.WriteString("\nSystems:\n\n")
	for _, s := range syss {
		if why, ok := skipped[s.name()]; ok {
			fmt.Fprintf(&b, "- `%s`: **skipped: %s**\n", s.name(), why)
			continue
		}
		fmt.Fprintf(&b, "- `%s`: %s\n", s.name(), s.settings(e))
	}
	b.WriteString("\nMedian of the runs, min–max beside it. \"Lakeshore ÷ system\" divides Lakeshore embedded's " +
		"median by the row's: above 1× Lakeshore is faster on jobs/s rows, below 1× it is faster on ms, s and " +
		"count rows. A peer that beats Lakeshore embedded is named in the last column.\n\n")
	b.WriteString("| workload | metric | system | median | min–max | Lakeshore ÷ system | note |\n")
	b.WriteString("|---|---|---|--:|--:|--:|---|\n")
	var wins []string
	for _, w := range wls {
		for mi, m := range w.metrics {
			ours := nan
			if ms, ok := results[w.name]["lakeshore"]; ok && len(ms[mi].values) > 0 && !math.IsNaN(ms[mi].values[0]) {
				ours = median(ms[mi].values)
			}
			for _, s := range syss {
				ms, ok := results[w.name][s.name()]
				if !ok {
					continue
				}
				me := ms[mi]
				row := func(med, rng, rat, note string) {
					fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", w.name, m.name, s.name(), med, rng, rat, note)
				}
				if me.na != "" {
					row("", "", "", me.na)
					continue
				}
				if len(me.values) == 0 || math.IsNaN(me.values[0]) {
					row("", "", "", "n/a: stores no results")
					continue
				}
				med := median(me.values)
				note := ""
				switch role(s.name()) {
				case "ceiling":
					note = "ceiling"
				case "peer":
					if !math.IsNaN(ours) && med != ours && (med > ours) == m.higher {
						note = "**" + s.name() + " wins**"
						wins = append(wins, fmt.Sprintf("%s %s: %s %s vs Lakeshore %s", w.name, m.name, s.name(),
							formatValue(med), formatValue(ours)))
					}
				}
				rat := ratio(ours, med)
				if s.name() == "lakeshore" {
					rat = "1.00×"
				}
				row(formatValue(med), formatRange(me.values), rat, note)
			}
		}
	}
	if len(wins) > 0 {
		b.WriteString("\nWhere a peer wins:\n\n")
		for _, w := range wins {
			fmt.Fprintf(&b, "- %s\n", w)
		}
	} else if len(results) > 0 {
		b.WriteString("\nNo peer beat Lakeshore embedded on a median in this run.\n")
	}
	return b.String()
}
