// Command bench runs identical workloads against Lakeshore (embedded, and over HTTP once
// that plane exists) and the systems users would pick instead — River on SQLite, goqite,
// asynq on Redis — plus the raw SQLite ceiling, and on PostgreSQL Lakeshore's PostgreSQL
// plane (lakeshore-pg) against River on pgx (river-pg), on a PostgreSQL the harness starts
// itself, on this machine, in one run, at the same durability, and prints a markdown table
// of medians with min–max and Lakeshore ÷ peer.
//
//	cd bench && go run . -quick                      # smoke sizes, seconds
//	cd bench && go run . -out ../docs/table.md       # full sizes
//	cd bench && go run . -systems lakeshore,river -workloads burndown-8 -runs 5
//	cd bench && go run . -systems lakeshore-pg,river-pg -workloads enqueue-64,burndown-64
//	cd bench && go run . -workloads latency,latency-80   # open loop at 1,000/s and at 80% of peak
//	cd bench && go run . memory                       # RSS of lakeshore serve and a worker process
//
// It is its own Go module so the peers never enter Lakeshore's dependencies.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
)

func main() {
	if childMain() {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(runMain(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// runMain parses args, runs the harness and prints the table; it returns the exit code.
func runMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "memory" {
		return runMemory(ctx, args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	var systemsFlag, workloadsFlag, cpuprofile, peaksFlag string
	fs.BoolVar(&o.quick, "quick", false, "tiny sizes (a smoke test taking seconds; the figures mean nothing)")
	fs.StringVar(&systemsFlag, "systems", "", "comma-separated systems (default all): "+strings.Join(systemNames(), ","))
	fs.StringVar(&workloadsFlag, "workloads", "", "comma-separated workloads (default all): "+workloadNames())
	fs.IntVar(&o.runs, "runs", 0, "runs per workload and system (default 3; quick 1)")
	fs.IntVar(&o.crashRuns, "crash-runs", 0, "runs of the crash workload, at most -runs (default -runs)")
	fs.StringVar(&o.out, "out", "", "also write the markdown report to this file")
	fs.IntVar(&o.n, "n", 0, "jobs per enqueue, batch and burn-down run (default 100000; quick 300)")
	fs.DurationVar(&o.maxTime, "max-time", 0, "cap on one run of an enqueue, batch or burn-down workload (default 20s; quick 2s)")
	fs.IntVar(&o.rate, "rate", 0, "latency workload: jobs per second (default 1000; quick 200)")
	fs.DurationVar(&o.latencyDuration, "latency-duration", 0, "latency workload: how long to enqueue (default 20s; quick 1s)")
	fs.IntVar(&o.latencyConcurrency, "latency-workers", 0, "latency workload: workers (default 8)")
	fs.IntVar(&o.peakWorkers, "peak-workers", 0, "latency-80 workload: workers of the peak run and of the open loop at 80% of it (default 64; quick 8)")
	fs.DurationVar(&o.peakDuration, "peak-duration", 0, "latency-80 workload: length of the closed-loop peak run (default 4s; quick 1s)")
	fs.StringVar(&peaksFlag, "peak", "", "latency-80 workload: take these peaks instead of measuring them, e.g. lakeshore=20000,river=3000 (jobs/s)")
	fs.IntVar(&o.crashJobs, "crash-jobs", 0, "crash workload: jobs (default 10000; quick 300)")
	fs.IntVar(&o.crashConcurrency, "crash-workers", 0, "crash workload: workers per process (default 8)")
	fs.DurationVar(&o.crashTimeout, "crash-timeout", 0, "crash workload: how long to wait for every job to be terminal (default 3m)")
	fs.DurationVar(&o.leaseTTL, "lease", 0, "recovery window after a worker dies, given to every system (default 5s; quick 1s)")
	fs.StringVar(&o.sync, "sync", "", "SQLite synchronous mode for every SQLite system, FULL or NORMAL (Redis: appendfsync always or everysec) (default FULL)")
	fs.StringVar(&o.dir, "dir", "", "directory for the stores (default a fresh temporary directory, removed after)")
	fs.StringVar(&cpuprofile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "bench: unexpected arguments %q\n", fs.Args())
		return 2
	}
	peaks, err := parsePeaks(peaksFlag)
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	o.peaks = peaks
	o.systems = splitList(systemsFlag)
	o.workloads = splitList(workloadsFlag)
	if cpuprofile != "" {
		f, err := os.Create(cpuprofile)
		if err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	rep, err := run(ctx, o, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	fmt.Fprint(stdout, rep.markdown)
	if o.out != "" {
		if err := os.WriteFile(o.out, []byte(rep.markdown), 0o644); err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
	}
	if rep.errors > 0 {
		fmt.Fprintf(stderr, "bench: %d run(s) failed; see the table\n", rep.errors)
		return 1
	}
	return 0
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func workloadNames() string {
	var names []string
	for _, w := range workloads() {
		names = append(names, w.name)
	}
	return strings.Join(names, ",")
}
