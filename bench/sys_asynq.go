package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
)

// asynqSystem is asynq on the harness's redis-server.
type asynqSystem struct{}

func (asynqSystem) name() string { return "asynq" }

func (asynqSystem) skip() string { return "" } // decided by the harness: it starts redis-server

func (asynqSystem) settings(e *env) string {
	fsync := "always"
	if e.sync == "NORMAL" {
		fsync = "everysec"
	}
	return fmt.Sprintf("redis-server started by the harness on a loopback port, appendonly yes, appendfsync %s, "+
		"no RDB snapshots (Redis's default is no AOF); `Client.EnqueueContext` per job (asynq has no batch "+
		"enqueue); `Server` with Concurrency = concurrency, TaskCheckInterval 20 ms (default 1 s: an idle "+
		"worker sleeps that long, which would dominate the latency workload; 20 ms matches River's poll), "+
		"its lease (30 s) is fixed; latency workload only: `Retention(1h)` and `ResultWriter` store the "+
		"result, which the producer polls with `Inspector.GetTaskInfo` every 1 ms", fsync)
}

func (asynqSystem) open(ctx context.Context, e *env) (store, error) {
	if e.redisAddr == "" {
		return nil, errors.New("no redis-server")
	}
	opt := asynq.RedisClientOpt{Addr: e.redisAddr}
	c := asynq.NewClient(opt)
	if err := c.Ping(); err != nil {
		c.Close()
		return nil, err
	}
	return &asynqStore{opt: opt, client: c, insp: asynq.NewInspector(opt)}, nil
}

type asynqStore struct {
	opt    asynq.RedisClientOpt
	client *asynq.Client
	insp   *asynq.Inspector
}

func (s *asynqStore) enqueue(ctx context.Context, ref jobRef) error {
	_, err := s.client.EnqueueContext(ctx, asynq.NewTask("bench", ref.bytes()))
	return err
}

// fill enqueues jobs 0..n-1 for the burn-down and crash workloads, untimed. asynq has no
// batch enqueue, so it uses a client with a 256-connection pool and 256 goroutines (the
// timed workloads use asynq's default pool) to keep the untimed setup short.
func (s *asynqStore) fill(ctx context.Context, n int) error {
	c := asynq.NewClient(asynq.RedisClientOpt{Addr: s.opt.Addr, PoolSize: 256})
	defer c.Close()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 256)
	for range 256 {
		wg.Go(func() {
			for seq := next.Add(1) - 1; seq < int64(n); seq = next.Add(1) - 1 {
				if _, err := c.EnqueueContext(ctx, asynq.NewTask("bench", newRef(seq).bytes())); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func (s *asynqStore) enqueueBatch(context.Context, []jobRef) error { return errNoBatch }

func (s *asynqStore) enqueueTracked(ctx context.Context, ref jobRef) (func(context.Context) error, error) {
	info, err := s.client.EnqueueContext(ctx, asynq.NewTask("bench", ref.bytes()), asynq.Retention(time.Hour))
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			ti, err := s.insp.GetTaskInfo(info.Queue, info.ID)
			if err == nil && ti.State == asynq.TaskStateCompleted {
				if len(ti.Result) != 8 || int64(binary.BigEndian.Uint64(ti.Result)) != ref.Seq {
					return fmt.Errorf("result %x, want seq %d", ti.Result, ref.Seq)
				}
				return nil
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
			}
		}
	}, nil
}

func (s *asynqStore) work(ctx context.Context, p workParams) (func(context.Context) error, error) {
	srv := asynq.NewServer(s.opt, asynq.Config{
		Concurrency:       p.concurrency,
		TaskCheckInterval: 20 * time.Millisecond,
		LogLevel:          asynq.FatalLevel,
	})
	h := asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		ref, err := parseRef(t.Payload())
		if err != nil {
			return err
		}
		p.handle(ref)
		if p.result {
			b := make([]byte, 8)
			binary.BigEndian.PutUint64(b, uint64(ref.Seq))
			if _, err := t.ResultWriter().Write(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err := srv.Start(h); err != nil {
		return nil, err
	}
	return func(context.Context) error {
		srv.Shutdown()
		return nil
	}, nil
}

func (s *asynqStore) pending(context.Context) (int64, error) {
	qi, err := s.insp.GetQueueInfo("default")
	if errors.Is(err, asynq.ErrQueueNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return int64(qi.Pending + qi.Active + qi.Scheduled + qi.Retry + qi.Aggregating), nil
}

func (s *asynqStore) close() error {
	return errors.Join(s.insp.Close(), s.client.Close())
}
