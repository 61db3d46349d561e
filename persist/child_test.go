package persist

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Child processes for the crash and multi-process tests. The test binary re-executes
// itself with PERSIST_TEST_CHILD=<role>; the queue directory comes in PERSIST_TEST_DIR
// and role parameters in PERSIST_TEST_ARG.

func runChild(role string) int {
	ctx := context.Background()
	dir := os.Getenv("PERSIST_TEST_DIR")
	arg := os.Getenv("PERSIST_TEST_ARG")
	switch role {
	case "producer":
		return childProducer(ctx, dir, arg)
	case "flushkill":
		return childFlushKill(ctx, dir, arg)
	}
	fmt.Fprintln(os.Stderr, "unknown role", role)
	return 2
}

// producerValue is the record a producer puts for sequence number k.
func producerValue(k int64) Record {
	return Record{"k": k, "sq": float64(k) * 1.5, "s": "v" + strconv.FormatInt(k, 10)}
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
	q, err := Open(ctx, "q", &Config{Dir: dir, FlushRows: 150, FlushInterval: 5 * time.Millisecond, CompactFragments: 4,
		CompactInterval: 20 * time.Millisecond})
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 1
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
				recs := make([]Record, n)
				for i := range recs {
					recs[i] = producerValue(base + k0 + int64(i))
				}
				idx, err := q.PutBatch(ctx, recs)
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
		fmt.Fprintln(os.Stderr, "close:", err)
		return 1
	}
	return 0
}

// childFlushKill puts 500 records, prints their indexes, then flushes and SIGKILLs
// itself at the flush point named by arg.
func childFlushKill(ctx context.Context, dir, point string) int {
	q, err := Open(ctx, "q", &Config{Dir: dir, FlushRows: -1, FlushInterval: -1, CompactFragments: -1})
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 1
	}
	recs := make([]Record, 500)
	for i := range recs {
		recs[i] = producerValue(int64(i))
	}
	idx, err := q.PutBatch(ctx, recs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "put:", err)
		return 1
	}
	for i, x := range idx {
		fmt.Printf("%d %d\n", x, i)
	}
	q.testHook = func(p string) {
		if p == point {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
	}
	q.Flush(ctx)
	fmt.Fprintln(os.Stderr, "flush point not reached:", point)
	return 1
}
