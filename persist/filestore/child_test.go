package filestore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/persisttest"
)

// Child processes for the crash and multi-process tests. The test binary re-executes
// itself with PERSIST_TEST_CHILD=<role>; the queue directory comes in PERSIST_TEST_DIR
// and role parameters in PERSIST_TEST_ARG.

func runChild(role string) int {
	ctx := context.Background()
	dir := os.Getenv(persisttest.ChildDirEnv)
	arg := os.Getenv(persisttest.ChildArgEnv)
	switch role {
	case "producer":
		return childProducer(ctx, dir, arg)
	case "flushkill":
		return childFlushKill(ctx, dir, arg)
	case "compactkill":
		return childCompactKill(ctx, dir, arg)
	case "producer2":
		return childProducer2(ctx, dir, arg)
	case "consumer":
		return childConsumer(ctx, dir, arg)
	case "rankaware":
		return childRankAware(ctx, dir, arg)
	case "trainer":
		return childTrainer(ctx, dir, arg)
	}
	fmt.Fprintln(os.Stderr, "unknown role", role)
	return 2
}

// producerValue is the record a producer puts for sequence number k.
func producerValue(k int64) persist.Record {
	return persist.Record{"k": k, "sq": float64(k) * 1.5, "s": "v" + strconv.FormatInt(k, 10)}
}

// childProducer puts records from 4 goroutines (single puts and batches), flushing very
// often, and prints "index k" for every put that returned, until it is killed or has
// put PERSIST_TEST_COUNT records.
func childProducer(ctx context.Context, dir, arg string) int {
	base, _ := strconv.ParseInt(arg, 10, 64)
	count, _ := strconv.ParseInt(os.Getenv("PERSIST_TEST_COUNT"), 10, 64)
	if count == 0 {
		count = 1 << 40
	}
	q, err := openFile(ctx, "q", &persist.Config{Dir: dir, FlushRows: 150, FlushInterval: 5 * time.Millisecond, CompactFragments: 4,
		CompactInterval: 20 * time.Millisecond})

	if err != nil {
		return persisttest.ChildFailed("open", err)
	}
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	var next atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Go(func() {
			for {
				n := int64(1)
				if g%2 == 1 {
					n = 20
				}
				k0 := next.Add(n) - n
				if k0 >= count {
					return
				}
				recs := make([]persist.Record, n)
				for i := range recs {
					recs[i] = producerValue(base + k0 + int64(i))
				}
				idx, err := persist.New(q).PutBatch(ctx, recs)
				if err != nil {
					fmt.Fprintln(os.Stderr, "put:", err)
					os.Exit(1)
				}
				mu.Lock()
				for i, x := range idx {
					fmt.Fprintf(out, "%d %d\n", x, base+k0+int64(i))
				}
				out.Flush()
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := q.Close(ctx); err != nil {
		return persisttest.ChildFailed("close", err)
	}
	return 0
}

// childFlushKill puts 500 records, prints their indexes, then flushes and SIGKILLs
// itself at the flush point named by arg.
func childFlushKill(ctx context.Context, dir, point string) int {
	q, err := openManual(ctx, dir)
	if err != nil {
		return persisttest.ChildFailed("open", err)
	}
	recs := make([]persist.Record, 500)
	for i := range recs {
		recs[i] = producerValue(int64(i))
	}
	idx, err := persist.New(q).PutBatch(ctx, recs)
	if err != nil {
		return persisttest.ChildFailed("put", err)
	}
	for i, x := range idx {
		fmt.Printf("%d %d\n", x, i)
	}
	killAt(q, point)
	q.Flush(ctx)
	fmt.Fprintln(os.Stderr, "flush point not reached:", point)
	return 1
}

// openManual opens the queue of dir for a kill child: no background flush or
// compaction, so the child flushes and compacts exactly when it chooses.
func openManual(ctx context.Context, dir string) (*fileQueue, error) {
	return openFile(ctx, "q", &persist.Config{Dir: dir, FlushRows: -1, FlushInterval: -1, CompactFragments: -1})
}

// killAt makes the child SIGKILL itself when q reaches point (q.testHook).
func killAt(q *fileQueue, point string) {
	q.testHook = func(p string) {
		if p == point {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is asynchronous: never run past the point
		}
	}
}

func envInt(name string) int {
	n, _ := strconv.Atoi(os.Getenv(name))
	return n
}

// childProducer2 puts PERSIST_TEST_COUNT records {"src": arg, "n": i} in batches of 10.
func childProducer2(ctx context.Context, dir, src string) int {
	q, err := openFile(ctx, "q", &persist.Config{Dir: dir, FlushRows: 300, FlushInterval: 20 * time.Millisecond})
	if err != nil {
		return persisttest.ChildFailed("open", err)
	}
	count := envInt("PERSIST_TEST_COUNT")
	for i := 0; i < count; i += 10 {
		recs := make([]persist.Record, 10)
		for j := range recs {
			recs[j] = persist.Record{"src": src, "n": i + j}
		}
		if _, err := persist.New(q).PutBatch(ctx, recs); err != nil {
			return persisttest.ChildFailed("put", err)
		}
	}
	if err := q.Close(ctx); err != nil {
		return persisttest.ChildFailed("close", err)
	}
	return 0
}

// childConsumer reads batches for task arg (GetBatch in wait mode, then a partial
// batch on timeout) and prints "index src n" for every sample it got, until the task
// has consumed PERSIST_TEST_COUNT samples in total (by all consumers).
func childConsumer(ctx context.Context, dir, task string) int {
	q, err := openFile(ctx, "q", &persist.Config{Dir: dir, FlushRows: -1, FlushInterval: -1, PollInterval: 10 * time.Millisecond})
	if err != nil {
		return persisttest.ChildFailed("open", err)
	}
	defer q.Close(ctx)
	total := int64(envInt("PERSIST_TEST_COUNT"))
	r := q.fileReader()
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for {
		req := &persist.MetaRequest{Fields: []string{"src", "n"}, BatchSize: 16, Task: task, Wait: true, Timeout: 200 * time.Millisecond}
		b, _, err := persist.New(r.q).Reader().GetBatch(ctx, req)
		if errors.Is(err, persist.ErrTimeout) {
			req.Wait = false
			b, _, err = persist.New(r.q).Reader().GetBatch(ctx, req)
		}
		if err != nil {
			return persisttest.ChildFailed("get", err)
		}
		rows, err := b.Rows()
		if err != nil {
			return persisttest.ChildFailed("rows", err)
		}
		for _, row := range rows {
			fmt.Fprintf(out, "%d %s %d\n", row.Index, row.Fields["src"], row.Fields["n"])
		}
		b.Release()
		if len(rows) == 0 {
			n, err := q.Consumed(ctx, task, persist.DefaultPartition)
			if err != nil {
				return persisttest.ChildFailed("consumed", err)
			}
			if n >= total {
				return 0
			}
		}
	}
}

// childRankAware asks for the RankAware batch of (dp_rank, batch_index) = arg "dp,step"
// once PERSIST_TEST_GO exists, and prints its indexes on one line.
func childRankAware(ctx context.Context, dir, arg string) int {
	var dp, step int
	fmt.Sscanf(arg, "%d,%d", &dp, &step)
	q, err := openFile(ctx, "q", &persist.Config{Dir: dir})
	if err != nil {
		return persisttest.ChildFailed("open", err)
	}
	defer q.Close(ctx)
	fmt.Println("ready")
	var line string
	fmt.Scanln(&line) // the parent releases all ranks at once
	m, err := q.fileReader().GetMeta(ctx, &persist.MetaRequest{Fields: []string{"x"}, BatchSize: 8, Task: "train", Sampler: persist.RankAware{}.Spec(),
		DPRank: dp, BatchIndex: step})
	if err != nil {
		return persisttest.ChildFailed("getmeta", err)
	}
	fmt.Println(m.Indexes)
	return 0
}

// childCompactKill writes 5 fragments of 100 records (and a field update), then
// compacts and SIGKILLs itself at the compaction point named by arg.
func childCompactKill(ctx context.Context, dir, point string) int {
	q, err := openManual(ctx, dir)
	if err != nil {
		return persisttest.ChildFailed("open", err)
	}
	for f := 0; f < 5; f++ {
		recs := make([]persist.Record, 100)
		for i := range recs {
			recs[i] = producerValue(int64(f*100 + i))
		}
		if _, err := persist.New(q).PutBatch(ctx, recs); err != nil {
			return persisttest.ChildFailed("put", err)
		}
		if err := q.Flush(ctx); err != nil {
			return persisttest.ChildFailed("flush", err)
		}
	}
	killAt(q, point)
	q.Compact(ctx)
	fmt.Fprintln(os.Stderr, "compaction point not reached:", point)
	return 1
}
