package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/plane/httpplane"
)

// memoryOptions are the flags of `bench memory`.
type memoryOptions struct {
	longPolls         int
	queued            int
	workerConcurrency int
	workerJobs        int
	bin               string
	sync              string
	out               string
	phases            []string
}

// memoryQueue is the queue every memory phase uses, in the default namespace.
const memoryQueue = "bench"

// runMemory is `bench memory`: the resident memory of real `lakeshore serve` processes
// holding long-polls and queued jobs, and of a worker process at concurrency 64 under load,
// read from /proc/PID/status. It prints a markdown table and returns the exit code.
func runMemory(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench memory", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o memoryOptions
	quick := fs.Bool("quick", false, "tiny sizes (a smoke test taking seconds; the figures mean nothing)")
	fs.IntVar(&o.longPolls, "long-polls", 10_000, "claim long-polls and result waits held open at once (each phase)")
	fs.IntVar(&o.queued, "queued", 1_000_000, "jobs queued in the server for the queued phase")
	fs.IntVar(&o.workerConcurrency, "worker-concurrency", 64, "concurrency of the worker process")
	fs.IntVar(&o.workerJobs, "worker-jobs", 100_000, "jobs the worker process works (at concurrency 1: a tenth)")
	fs.StringVar(&o.bin, "lakeshore", "", "lakeshore binary to serve with (default: built from ../cmd/lakeshore)")
	fs.StringVar(&o.out, "out", "", "also write the markdown report to this file")
	phases := fs.String("phases", "claims,waits,queued,worker", "phases to run, comma-separated: claims (claim long-polls), "+
		"waits (result waits), queued (queued jobs), worker (a worker process under load)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	o.phases = splitList(*phases)
	for _, p := range o.phases {
		if _, ok := memoryPhases[p]; !ok {
			fmt.Fprintf(stderr, "bench memory: -phases: unknown phase %q (have claims,waits,queued,worker)\n", p)
			return 2
		}
	}
	if *quick {
		o.longPolls, o.queued, o.workerJobs = min(o.longPolls, 200), min(o.queued, 2000), min(o.workerJobs, 500)
	}
	if fs.NArg() > 0 || o.longPolls < 1 || o.queued < 1 || o.workerConcurrency < 1 || o.workerJobs < 10 {
		fmt.Fprintln(stderr, "bench memory: -long-polls, -queued, -worker-concurrency must be ≥ 1, -worker-jobs ≥ 10, no arguments")
		return 2
	}
	o.sync = "FULL" // lakeshore serve's default; the figures are about memory, not commits
	md, err := measureMemory(ctx, &o, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "bench memory:", err)
		return 1
	}
	fmt.Fprint(stdout, md)
	if o.out != "" {
		if err := os.WriteFile(o.out, []byte(md), 0o644); err != nil {
			fmt.Fprintln(stderr, "bench memory:", err)
			return 1
		}
	}
	return 0
}

// memoryPhase measures one state of a process and returns its rows.
type memoryPhase func(ctx context.Context, o *memoryOptions, bin, dir string, stderr io.Writer) ([]memoryRow, error)

// memoryPhases are the phases of `bench memory` by -phases name.
var memoryPhases = map[string]memoryPhase{
	"claims": memoryClaims, "waits": memoryWaits, "queued": memoryQueued, "worker": memoryWorker,
}

// memoryRow is one line of the memory report.
type memoryRow struct {
	process, state       string
	baseKB, rssKB, hwmKB int64
	count                int
	unit                 string // "per connection", "per job", …
	note                 string // e.g. the rate the phase ran at
}

func measureMemory(ctx context.Context, o *memoryOptions, stderr io.Writer) (string, error) {
	// Each long-poll holds a socket in this process and one in the server: raise the
	// open-file limit of this process (the server, a Go program, raises its own soft
	// limit to its hard one at start).
	if err := raiseOpenFiles(uint64(o.longPolls) + 1024); err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "lakeshore-bench-memory-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	bin := o.bin
	if bin == "" {
		if bin, err = buildLakeshore(ctx, dir); err != nil {
			return "", err
		}
	}
	started := time.Now()
	var rows []memoryRow
	for _, name := range o.phases {
		r, err := memoryPhases[name](ctx, o, bin, dir, stderr)
		if err != nil {
			return "", err
		}
		rows = append(rows, r...)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "## Memory: %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "Resident set size (VmRSS) and its peak (VmHWM) from /proc/PID/status of real processes: "+
		"`lakeshore serve` (a fresh process and SQLite file, synchronous=%s, per state) and a worker process (the SDK's "+
		"`lakeshore.Worker` over `httpplane` to that server, a no-op handler). \"Before\" is the same process just "+
		"before the state was built; per item = (RSS − before) ÷ count. Harness time %s.\n\n",
		o.sync, time.Since(started).Round(time.Second))
	b.WriteString("| process | state | count | RSS before (MiB) | RSS (MiB) | peak RSS (MiB) | per item | note |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|--:|---|\n")
	for _, r := range rows {
		per := "—"
		if r.count > 0 && r.unit != "" {
			per = fmt.Sprintf("%s KiB %s", formatValue(float64(r.rssKB-r.baseKB)/float64(r.count)), r.unit)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", r.process, r.state, thousands(int64(r.count)),
			mib(r.baseKB), mib(r.rssKB), mib(r.hwmKB), per, r.note)
	}
	return b.String(), nil
}

func mib(kb int64) string {
	if kb == 0 {
		return "—"
	}
	return formatValue(float64(kb) / 1024)
}

// raiseOpenFiles raises this process's soft limit on open files to at least need (and the
// hard limit too when allowed), or says what to do.
func raiseOpenFiles(need uint64) error {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return err
	}
	if l.Cur >= need {
		return nil
	}
	if l.Max < need {
		l.Max = need // allowed as root (CAP_SYS_RESOURCE) only
	}
	l.Cur = need
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return fmt.Errorf("raise the open-file limit to %d: %w (run `ulimit -Hn %d` as root, or lower -long-polls)", need, err, need)
	}
	return nil
}

// raiseOpenFilesBestEffort raises this process's open-file limit towards want, as far as
// it is allowed to, and ignores a refusal: the open-loop latency workloads hold a socket
// per submit and result wait in flight, both ends in this process for lakeshore-http, and
// a system that falls behind the offered rate can hold thousands.
func raiseOpenFilesBestEffort(want uint64) {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) != nil || l.Cur >= want {
		return
	}
	if err := raiseOpenFiles(want); err != nil {
		l.Cur = l.Max
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
}

// buildLakeshore builds cmd/lakeshore of the repository this module sits in into dir.
func buildLakeshore(ctx context.Context, dir string) (string, error) {
	root, err := filepath.Abs("..")
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(root, "cmd", "lakeshore")); err != nil {
		return "", fmt.Errorf("no ../cmd/lakeshore (run from bench/ or pass -lakeshore): %w", err)
	}
	bin := filepath.Join(dir, "lakeshore")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/lakeshore")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build lakeshore: %w: %s", err, out)
	}
	return bin, nil
}

// serveProcess is a `lakeshore serve` child on a loopback port over a fresh SQLite file.
type serveProcess struct {
	cmd *exec.Cmd
	url string
}

func startServe(ctx context.Context, bin, dir, sync string, longPolls int) (*serveProcess, error) {
	db := filepath.Join(dir, "lakeshore.db") // synchronous=FULL, the plane's default
	limit := strconv.Itoa(longPolls + 100)
	return runServe(ctx, bin, dir, db, "--long-poll-max", "10m", "--max-long-polls", limit,
		"--max-long-polls-per-tenant", limit)
}

// runServe starts `lakeshore serve --target target` with flags on a free loopback port,
// without the dashboard, in dir (its LAKESHORE_HOME, made if missing; its log serve.log),
// and waits for /healthz to answer 200, at most a minute: the one way every bench system
// that measures a served plane starts one (startServe, startPGServe).
func runServe(ctx context.Context, bin, dir, target string, flags ...string) (*serveProcess, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, append([]string{"serve", "--target", target, "--addr", addr, "--no-ui"}, flags...)...)
	cmd.Env = append(os.Environ(), "LAKESHORE_HOME="+dir)
	logFile, err := os.Create(filepath.Join(dir, "serve.log"))
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child holds its own descriptor
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start lakeshore serve: %w", err)
	}
	p := &serveProcess{cmd: cmd, url: "http://" + addr}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get(p.url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			p.stop()
			logged, _ := os.ReadFile(logFile.Name())
			return nil, fmt.Errorf("lakeshore serve not healthy within a minute: %v; its log: %s", err, logged)
		}
	}
}

func (p *serveProcess) stop() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
}

// settledRSS reads pid's VmRSS after it stopped changing by more than 1% over 500 ms (at
// most 10 s), with VmHWM.
func settledRSS(pid int) (rss, hwm int64, err error) {
	prev := int64(-1)
	for deadline := time.Now().Add(10 * time.Second); ; {
		if rss, hwm, err = procMemory(pid); err != nil {
			return 0, 0, err
		}
		if prev >= 0 && (abs(rss-prev)*100 <= prev || time.Now().After(deadline)) {
			return rss, hwm, nil
		}
		prev = rss
		time.Sleep(500 * time.Millisecond)
	}
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// procMemory returns VmRSS and VmHWM of pid, in KiB.
func procMemory(pid int) (rss, hwm int64, err error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("read memory of process %d: %w", pid, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/%d/status %s: %w", pid, name, err)
		}
		if name == "VmRSS" {
			rss = kb
		} else {
			hwm = kb
		}
	}
	if rss == 0 {
		return 0, 0, fmt.Errorf("/proc/%d/status has no VmRSS", pid)
	}
	return rss, hwm, nil
}

// longPollGauge reads lakeshore_http_long_polls_open from the server's metrics.
func longPollGauge(ctx context.Context, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "lakeshore_http_long_polls_open "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int(f), err
		}
	}
	return 0, errors.New("the server's /metrics has no lakeshore_http_long_polls_open")
}

// holdLongPolls issues n requests built by req from n goroutines, each on its own
// connection, waits until the server counts all n open, measures the server, then cancels
// them.
func holdLongPolls(ctx context.Context, p *serveProcess, n int, req func(i int) (*http.Request, error),
	stderr io.Writer, state string) (memoryRow, error) {
	base, _, err := settledRSS(p.cmd.Process.Pid)
	if err != nil {
		return memoryRow{}, err
	}
	tr := &http.Transport{MaxIdleConnsPerHost: -1, DisableKeepAlives: true, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	pctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	for i := range n {
		r, err := req(i)
		if err != nil {
			cancel()
			return memoryRow{}, err
		}
		wg.Go(func() {
			resp, err := client.Do(r.WithContext(pctx))
			if err != nil {
				if pctx.Err() == nil {
					failed.CompareAndSwap(nil, &err)
				}
				return
			}
			if resp.StatusCode != http.StatusOK && pctx.Err() == nil {
				body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
				err := fmt.Errorf("long-poll answered %s: %s", resp.Status, body)
				failed.CompareAndSwap(nil, &err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		})
		if i%500 == 499 {
			time.Sleep(20 * time.Millisecond) // let the listener's backlog drain
		}
	}
	defer func() { cancel(); wg.Wait() }()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if err := failed.Load(); err != nil {
			return memoryRow{}, *err
		}
		open, err := longPollGauge(ctx, p.url)
		if err != nil {
			return memoryRow{}, err
		}
		if open >= n {
			break
		}
		if time.Now().After(deadline) {
			return memoryRow{}, fmt.Errorf("%d of %d long-polls open after two minutes", open, n)
		}
	}
	rss, hwm, err := settledRSS(p.cmd.Process.Pid)
	if err != nil {
		return memoryRow{}, err
	}
	fmt.Fprintf(stderr, "   serve, %d %s: RSS %s MiB (before %s MiB)\n", n, state, mib(rss), mib(base))
	return memoryRow{process: "lakeshore serve", state: fmt.Sprintf("%s open", state), baseKB: base, rssKB: rss,
		hwmKB: hwm, count: n, unit: "per connection"}, nil
}

// memoryClaims holds o.longPolls claim long-polls on an empty queue.
func memoryClaims(ctx context.Context, o *memoryOptions, bin, dir string, stderr io.Writer) ([]memoryRow, error) {
	fmt.Fprintf(stderr, "== memory: %d claim long-polls\n", o.longPolls)
	p, err := startServe(ctx, bin, filepath.Join(dir, "claims"), o.sync, o.longPolls)
	if err != nil {
		return nil, err
	}
	defer p.stop()
	url := p.url + "/v1/namespaces/default/queues/" + memoryQueue + "/claim"
	row, err := holdLongPolls(ctx, p, o.longPolls, func(int) (*http.Request, error) {
		r, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"wait":600,"lease_ttl":30,"max":1}`))
		if err == nil {
			r.Header.Set("Content-Type", "application/json")
		}
		return r, err
	}, stderr, "claim long-polls (empty queue)")
	if err != nil {
		return nil, err
	}
	return []memoryRow{row}, nil
}

// memoryWaits submits o.longPolls jobs (no worker) and holds one result wait on each.
func memoryWaits(ctx context.Context, o *memoryOptions, bin, dir string, stderr io.Writer) ([]memoryRow, error) {
	fmt.Fprintf(stderr, "== memory: %d result waits\n", o.longPolls)
	p, err := startServe(ctx, bin, filepath.Join(dir, "waits"), o.sync, o.longPolls)
	if err != nil {
		return nil, err
	}
	defer p.stop()
	ids, _, err := submitOver(ctx, p.url, o.longPolls, true)
	if err != nil {
		return nil, err
	}
	row, err := holdLongPolls(ctx, p, len(ids), func(i int) (*http.Request, error) {
		return http.NewRequest(http.MethodGet, p.url+"/v1/invocations/"+ids[i]+"/wait?timeout=600", nil)
	}, stderr, "result waits (queued jobs)")
	if err != nil {
		return nil, err
	}
	return []memoryRow{row}, nil
}

// submitOver submits n 16-byte jobs through the SDK over httpplane in batches of 1,000 from
// 4 goroutines and returns their ids (with keep) and the rate.
func submitOver(ctx context.Context, url string, n int, keep bool) ([]string, float64, error) {
	drv, err := httpplane.New(url, nil)
	if err != nil {
		return nil, 0, err
	}
	d := lakeshore.New(drv, &lakeshore.Config{Logger: quietLogger()})
	defer d.Close()
	q, err := d.Queue(memoryQueue, nil)
	if err != nil {
		return nil, 0, err
	}
	var ids []string
	if keep {
		ids = make([]string, n)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	start := time.Now()
	for range 4 {
		wg.Go(func() {
			for {
				from := int(next.Add(1000)) - 1000
				if from >= n {
					return
				}
				batch := make([]lakeshore.Submission, min(1000, n-from))
				for i := range batch {
					batch[i].Payload = newRef(int64(from + i)).bytes()
				}
				got, err := q.SubmitMany(ctx, batch)
				if err != nil {
					errs <- err
					return
				}
				if keep {
					copy(ids[from:], got)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, 0, fmt.Errorf("submit: %w", err)
	}
	return ids, float64(n) / time.Since(start).Seconds(), nil
}

// memoryQueued queues o.queued jobs in a fresh server.
func memoryQueued(ctx context.Context, o *memoryOptions, bin, dir string, stderr io.Writer) ([]memoryRow, error) {
	fmt.Fprintf(stderr, "== memory: %s queued jobs\n", thousands(int64(o.queued)))
	p, err := startServe(ctx, bin, filepath.Join(dir, "queued"), o.sync, 100)
	if err != nil {
		return nil, err
	}
	defer p.stop()
	base, _, err := settledRSS(p.cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	_, rate, err := submitOver(ctx, p.url, o.queued, false)
	if err != nil {
		return nil, err
	}
	rss, hwm, err := settledRSS(p.cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	size := int64(0)
	for _, f := range []string{"lakeshore.db", "lakeshore.db-wal"} {
		if st, err := os.Stat(filepath.Join(dir, "queued", f)); err == nil {
			size += st.Size()
		}
	}
	fmt.Fprintf(stderr, "   serve, %d queued: RSS %s MiB (before %s MiB)\n", o.queued, mib(rss), mib(base))
	return []memoryRow{{process: "lakeshore serve", state: "jobs queued (16-byte payloads)", baseKB: base, rssKB: rss,
		hwmKB: hwm, count: o.queued, unit: "per job",
		note: fmt.Sprintf("submitted over HTTP in batches of 1,000 at %s jobs/s; SQLite file + WAL %s MiB",
			thousands(int64(rate)), mib(size/1024))}}, nil
}

// memoryWorker runs a worker process (this binary as a crash-workload child, system
// lakeshore-http) against a fresh server with o.workerJobs queued, at concurrency 1 and at
// o.workerConcurrency, sampling its memory until it drained the queue.
func memoryWorker(ctx context.Context, o *memoryOptions, bin, dir string, stderr io.Writer) ([]memoryRow, error) {
	var rows []memoryRow
	var idle int64
	for _, c := range []int{1, o.workerConcurrency} {
		jobs := o.workerJobs
		if c == 1 {
			jobs = max(10, o.workerJobs/10)
		}
		fmt.Fprintf(stderr, "== memory: worker process at concurrency %d, %s jobs\n", c, thousands(int64(jobs)))
		sub := filepath.Join(dir, fmt.Sprintf("worker-%d", c))
		p, err := startServe(ctx, bin, sub, o.sync, 1000)
		if err != nil {
			return nil, err
		}
		row, err := func() (memoryRow, error) {
			defer p.stop()
			if _, _, err := submitOver(ctx, p.url, jobs, false); err != nil {
				return memoryRow{}, err
			}
			spec := childSpec{System: lakeshoreHTTPSystem{}.name(), Dir: sub, Sync: o.sync, LeaseTTL: 30 * time.Second,
				HTTPURL: p.url, Concurrency: c, Log: filepath.Join(sub, "ran.log"), UntilDone: true}
			child, err := startChild(&spec)
			if err != nil {
				return memoryRow{}, err
			}
			done := make(chan error, 1)
			go func() { done <- child.Wait() }()
			start := time.Now()
			var peakRSS, hwm, serveRSS int64
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case err := <-done:
					if err != nil {
						return memoryRow{}, fmt.Errorf("worker process: %w", err)
					}
					st, err := os.Stat(spec.Log)
					if err != nil {
						return memoryRow{}, err
					}
					ran := st.Size() / 8
					if ran < int64(jobs) {
						return memoryRow{}, fmt.Errorf("worker process ran %d of %d jobs", ran, jobs)
					}
					note := fmt.Sprintf("%s jobs/s; the server's RSS meanwhile up to %s MiB", thousands(int64(float64(ran)/time.Since(start).Seconds())), mib(serveRSS))
					return memoryRow{process: "worker process", state: fmt.Sprintf("concurrency %d, working %s no-op jobs", c, thousands(int64(jobs))),
						rssKB: peakRSS, hwmKB: hwm, note: note}, nil
				case <-tick.C:
					rss, h, err := procMemory(child.Process.Pid)
					if err == nil {
						peakRSS, hwm = max(peakRSS, rss), max(hwm, h)
					}
					if rss, _, err := procMemory(p.cmd.Process.Pid); err == nil {
						serveRSS = max(serveRSS, rss)
					}
				case <-ctx.Done():
					child.Process.Kill()
					<-done
					return memoryRow{}, ctx.Err()
				}
			}
		}()
		if err != nil {
			return nil, err
		}
		if c == 1 {
			idle = row.rssKB
		} else if c > 1 {
			row.baseKB, row.count, row.unit = idle, c-1, "per extra worker slot (vs concurrency 1)"
		}
		rows = append(rows, row)
	}
	return rows, nil
}
