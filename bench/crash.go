package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"
)

// childEnv names the environment variable that turns this binary (or the test binary)
// into a crash-workload worker process; its value is a JSON childSpec.
const childEnv = "LAKESHORE_BENCH_CHILD"

// childSpec tells a worker process what to work and where to record what it ran.
type childSpec struct {
	System      string        `json:"system"`
	Dir         string        `json:"dir"`
	Sync        string        `json:"sync"`
	RedisAddr   string        `json:"redis_addr"`
	LeaseTTL    time.Duration `json:"lease_ttl"`
	HTTPURL     string        `json:"http_url"`
	PGAddr      string        `json:"pg_addr"`
	Concurrency int           `json:"concurrency"`
	// Log is the file each handler appends its job's seq to (8 bytes, big endian) when it
	// runs: a write(2) per job, which survives the process's SIGKILL.
	Log string `json:"log"`
	// UntilDone makes the process stop its workers and exit 0 once no job is pending.
	UntilDone bool `json:"until_done"`
}

// childMain runs a worker process if this process is one, and reports whether it was.
func childMain() bool {
	raw := os.Getenv(childEnv)
	if raw == "" {
		return false
	}
	var spec childSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "bench child:", err)
		os.Exit(2)
	}
	if err := runChild(context.Background(), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "bench child:", spec.System+":", err)
		os.Exit(1)
	}
	os.Exit(0)
	return true
}

func runChild(ctx context.Context, spec *childSpec) error {
	var sys system
	for _, s := range systems() {
		if s.name() == spec.System {
			sys = s
		}
	}
	if sys == nil {
		return fmt.Errorf("unknown system %q", spec.System)
	}
	log, err := os.OpenFile(spec.Log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	e := &env{dir: spec.Dir, sync: spec.Sync, redisAddr: spec.RedisAddr, leaseTTL: spec.LeaseTTL, httpURL: spec.HTTPURL, pgAddr: spec.PGAddr}
	s, err := sys.open(ctx, e)
	if err != nil {
		return err
	}
	defer s.close()
	var writeErr atomic.Pointer[error]
	stop, err := s.work(ctx, workParams{concurrency: spec.Concurrency, handle: func(ref jobRef) {
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], uint64(ref.Seq))
		if _, err := log.Write(b[:]); err != nil {
			writeErr.CompareAndSwap(nil, &err)
		}
	}})
	if err != nil {
		return err
	}
	if !spec.UntilDone {
		select {} // until SIGKILL
	}
	for {
		time.Sleep(20 * time.Millisecond)
		n, err := s.pending(ctx)
		if err != nil {
			stop(ctx)
			return err
		}
		if n == 0 {
			break
		}
	}
	if err := stop(ctx); err != nil {
		return err
	}
	if err := writeErr.Load(); err != nil {
		return *err
	}
	return nil
}

// runCrash pre-inserts o.crashJobs jobs, starts a worker process, SIGKILLs it once a third
// of the jobs ran, starts a second one at once and waits until no job is pending. It returns
// the jobs that never ran, the jobs that ran more than once, and the seconds from the kill
// until every job was terminal.
func runCrash(ctx context.Context, h *harness, sys system, e *env) ([]float64, error) {
	if hs, ok := sys.(hoster); ok {
		stop, err := hs.host(ctx, e)
		if err != nil {
			return nil, err
		}
		defer stop()
	}
	s, err := openWorking(ctx, sys, e, "leases")
	if err != nil {
		return nil, err
	}
	n := h.o.crashJobs
	if err := fill(ctx, s, n); err != nil {
		s.close()
		return nil, err
	}
	if err := s.close(); err != nil {
		return nil, err
	}
	spec := childSpec{System: sys.name(), Dir: e.dir, Sync: e.sync, RedisAddr: e.redisAddr, LeaseTTL: e.leaseTTL,
		HTTPURL: e.httpURL, PGAddr: e.pgAddr, Concurrency: h.o.crashConcurrency}
	logs := []string{filepath.Join(e.dir, "ran-1.log"), filepath.Join(e.dir, "ran-2.log")}

	spec.Log = logs[0]
	first, err := startChild(&spec)
	if err != nil {
		return nil, err
	}
	defer first.Process.Kill()
	firstDone := make(chan error, 1)
	go func() { firstDone <- first.Wait() }()
	for deadline := time.Now().Add(2 * time.Minute); ; {
		st, err := os.Stat(logs[0])
		if err == nil && st.Size()/8 >= int64(n/3) {
			break
		}
		select {
		case err := <-firstDone:
			return nil, fmt.Errorf("first worker process ended before the kill: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			return nil, errors.New("a third of the jobs did not run within 2 minutes")
		}
		time.Sleep(2 * time.Millisecond)
	}
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		return nil, err
	}
	killed := time.Now()
	<-firstDone

	spec.Log, spec.UntilDone = logs[1], true
	second, err := startChild(&spec)
	if err != nil {
		return nil, err
	}
	secondDone := make(chan error, 1)
	go func() { secondDone <- second.Wait() }()
	select {
	case err := <-secondDone:
		if err != nil {
			return nil, fmt.Errorf("second worker process: %w", err)
		}
	case <-time.After(h.o.crashTimeout):
		second.Process.Kill()
		<-secondDone
		return nil, fmt.Errorf("jobs still pending %s after the kill", h.o.crashTimeout)
	case <-ctx.Done():
		second.Process.Kill()
		<-secondDone
		return nil, ctx.Err()
	}
	recovered := time.Since(killed)

	runs := make([]int, n)
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		for r := bytes.NewReader(b); r.Len() >= 8; {
			var seq uint64
			binary.Read(r, binary.BigEndian, &seq)
			if seq < uint64(n) {
				runs[seq]++
			}
		}
	}
	var lost, twice int
	for _, c := range runs {
		switch {
		case c == 0:
			lost++
		case c > 1:
			twice++
		}
	}
	return []float64{float64(lost), float64(twice), recovered.Seconds()}, nil
}

// startChild starts this binary as a worker process for spec.
func startChild(spec *childSpec) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start worker process: %w", err)
	}
	return cmd, nil
}
