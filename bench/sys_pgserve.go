package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/plane/httpplane"
)

// lakeshorePGServeSystem is Lakeshore's SDK over HTTP to `replicas` real `lakeshore serve
// --target postgres://…` processes (built from ../cmd/lakeshore) on the harness's
// PostgreSQL: the stateless scale-out deployment of issue 12. The producers' submits go to
// the replicas in turn, and the workers are spread evenly over them (a job submitted on
// one replica is claimed on another). At close it prints, on stderr, the CPU time
// (utime+stime from /proc/PID/stat) each replica and PostgreSQL (the postmaster, its
// exited children and its live backends) spent while the store was open, per 1,000 jobs
// submitted.
type lakeshorePGServeSystem struct{ replicas int }

func (s lakeshorePGServeSystem) name() string {
	if s.replicas == 1 {
		return "lakeshore-pg-serve"
	}
	return "lakeshore-pg-serve" + strconv.Itoa(s.replicas)
}
func (lakeshorePGServeSystem) skip() string  { return "" }
func (lakeshorePGServeSystem) usesPostgres() {}

func (s lakeshorePGServeSystem) settings(e *env) string {
	return fmt.Sprintf("the same SDK calls as `lakeshore`, through `httpplane.New` to %d `lakeshore serve --target "+
		"postgres://… --no-ui` process(es) (built from ../cmd/lakeshore, pgxpool of 8 connections each) on the harness's "+
		"PostgreSQL 15 (fsync=on, synchronous_commit=on); submits go to the replicas in turn, workers are split evenly "+
		"over them; queue lease %s; CPU per replica and of PostgreSQL printed on stderr at close", s.replicas, e.leaseTTL)
}

// serveBinary guards the build of cmd/lakeshore: once per harness run, into the run's
// base directory (removed with it).
var serveBinary sync.Mutex

func lakeshoreBinary(ctx context.Context, e *env) (string, error) {
	serveBinary.Lock()
	defer serveBinary.Unlock()
	dir := filepath.Join(filepath.Dir(e.dir), "lakeshore-serve-bin")
	if bin := filepath.Join(dir, "lakeshore"); fileExists(bin) {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return buildLakeshore(ctx, dir)
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// pgServeProcess is one `lakeshore serve --target postgres://…` child.
type pgServeProcess struct {
	serve *serveProcess
	cpu0  time.Duration
}

func startPGServe(ctx context.Context, bin, dir, url string) (*serveProcess, error) {
	return runServe(ctx, bin, dir, url)
}

func (s lakeshorePGServeSystem) open(ctx context.Context, e *env) (store, error) {
	url, err := runDatabase(ctx, e)
	if err != nil {
		return nil, err
	}
	bin, err := lakeshoreBinary(ctx, e)
	if err != nil {
		return nil, err
	}
	st := &pgServeStore{name: s.name()}
	if st.postmaster, err = postmasterPID(ctx, url); err != nil {
		return nil, err
	}
	fail := func(err error) (store, error) {
		st.close()
		return nil, err
	}
	for i := range s.replicas {
		p, err := startPGServe(ctx, bin, filepath.Join(e.dir, "serve"+strconv.Itoa(i)), url)
		if err != nil {
			return fail(err)
		}
		st.procs = append(st.procs, &pgServeProcess{serve: p})
		drv, err := httpplane.New(p.url, nil)
		if err != nil {
			return fail(err)
		}
		ls, err := newLakeshoreStore(lakeshore.New(drv, &lakeshore.Config{Logger: quietLogger()}), e)
		if err != nil {
			drv.Close()
			return fail(err)
		}
		st.stores = append(st.stores, ls)
	}
	// CPU counted from here: the replicas' start-up and migration are not the workload's.
	for _, p := range st.procs {
		p.cpu0, _ = processCPU(p.serve.cmd.Process.Pid, false)
	}
	st.pgCPU0, _ = postgresCPU(st.postmaster)
	return st, nil
}

// pgServeStore spreads a workload over the replicas' clients.
type pgServeStore struct {
	name       string
	procs      []*pgServeProcess
	stores     []*lakeshoreStore
	next       atomic.Uint64
	jobs       atomic.Int64 // submitted through the store
	postmaster int
	pgCPU0     time.Duration
}

func (s *pgServeStore) pick() *lakeshoreStore {
	return s.stores[s.next.Add(1)%uint64(len(s.stores))]
}

func (s *pgServeStore) enqueue(ctx context.Context, ref jobRef) error {
	s.jobs.Add(1)
	return s.pick().enqueue(ctx, ref)
}

func (s *pgServeStore) enqueueBatch(ctx context.Context, refs []jobRef) error {
	s.jobs.Add(int64(len(refs)))
	return s.pick().enqueueBatch(ctx, refs)
}

func (s *pgServeStore) enqueueTracked(ctx context.Context, ref jobRef) (func(context.Context) error, error) {
	s.jobs.Add(1)
	return s.pick().enqueueTracked(ctx, ref)
}

func (s *pgServeStore) work(ctx context.Context, p workParams) (func(context.Context) error, error) {
	var stops []func(context.Context) error
	stopAll := func(ctx context.Context) error {
		var errs []error
		for _, stop := range stops {
			errs = append(errs, stop(ctx))
		}
		return errors.Join(errs...)
	}
	n := len(s.stores)
	for i, ls := range s.stores {
		share := p
		share.concurrency = p.concurrency / n
		if i < p.concurrency%n {
			share.concurrency++
		}
		if share.concurrency == 0 {
			continue
		}
		stop, err := ls.work(ctx, share)
		if err != nil {
			stopAll(ctx)
			return nil, err
		}
		stops = append(stops, stop)
	}
	return stopAll, nil
}

func (s *pgServeStore) pending(ctx context.Context) (int64, error) {
	return s.stores[0].pending(ctx)
}

// close prints the CPU figures, then closes the clients and stops the replicas.
func (s *pgServeStore) close() error {
	if jobs := s.jobs.Load(); jobs > 0 && len(s.procs) == len(s.stores) {
		var b strings.Builder
		fmt.Fprintf(&b, "%s: CPU over %d jobs (utime+stime, /proc/PID/stat), per 1,000 jobs:", s.name, jobs)
		var total time.Duration
		for i, p := range s.procs {
			cpu, err := processCPU(p.serve.cmd.Process.Pid, false)
			if err != nil {
				continue
			}
			d := cpu - p.cpu0
			total += d
			fmt.Fprintf(&b, " replica %d %.3f s;", i+1, d.Seconds()*1000/float64(jobs))
		}
		fmt.Fprintf(&b, " replicas together %.3f s;", total.Seconds()*1000/float64(jobs))
		if pg, err := postgresCPU(s.postmaster); err == nil {
			fmt.Fprintf(&b, " PostgreSQL %.3f s", (pg-s.pgCPU0).Seconds()*1000/float64(jobs))
		}
		fmt.Fprintln(os.Stderr, b.String())
	}
	var errs []error
	for _, ls := range s.stores {
		errs = append(errs, ls.close())
	}
	for _, p := range s.procs {
		p.serve.stop()
	}
	return errors.Join(errs...)
}

// postmasterPID reads the PostgreSQL server's process id from postmaster.pid in its data
// directory (the harness's server runs on this machine).
func postmasterPID(ctx context.Context, url string) (int, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	var dir string
	if err := conn.QueryRow(ctx, `SHOW data_directory`).Scan(&dir); err != nil {
		return 0, err
	}
	raw, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	first, _, _ := strings.Cut(string(raw), "\n")
	return strconv.Atoi(strings.TrimSpace(first))
}

// clockTick is the unit of /proc/PID/stat's times (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// processCPU is pid's utime+stime, and with children also the cutime+cstime of the children
// it has waited for.
func processCPU(pid int, children bool) (time.Duration, error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The fields after the command name (in parentheses, which may hold spaces): state is
	// field 3, utime 14, stime 15, cutime 16, cstime 17.
	s := string(raw)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 15 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields))
	}
	last := 13 // fields[k-3] is field k: utime and stime are fields[11:13]
	if children {
		last = 15
	}
	var ticks int64
	for _, f := range fields[11:last] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}

// postgresCPU is the CPU time of the PostgreSQL server: the postmaster with its exited
// children, and its live children (backends, checkpointer, WAL writer, autovacuum).
func postgresCPU(postmaster int) (time.Duration, error) {
	total, err := processCPU(postmaster, true)
	if err != nil {
		return 0, err
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(raw)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) < 2 || fields[1] != strconv.Itoa(postmaster) { // ppid is field 4, fields[1]
			continue
		}
		if cpu, err := processCPU(pid, false); err == nil {
			total += cpu
		}
	}
	return total, nil
}
