package lakestore

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/persisttest"
)

// TestKillChild is the child of TestSIGKILLMidFlush: it puts batches forever, printing
// each acknowledged batch, while flushing all the time.
func TestKillChild(t *testing.T) {
	env := os.Getenv("LAKESTORE_KILL_CHILD")
	if env == "" {
		t.Skip("the child process of TestSIGKILLMidFlush")
	}
	catalog, bucket, _ := strings.Cut(env, " ")
	ctx := context.Background()
	s, err := Open(ctx, "q", &Config{Catalog: catalog, Blob: bucket, FlushRows: 30, FlushInterval: 5 * time.Millisecond, SweepInterval: -1,
		FlushTimeout: time.Second})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	q := persist.New(s)
	w := bufio.NewWriter(os.Stdout)
	for i := 0; ; i++ {
		recs := make([]persist.Record, 10)
		for j := range recs {
			recs[j] = persist.Record{"v": int64(i*10 + j)}
		}
		idx, err := q.PutBatch(ctx, recs)
		if err != nil {
			fmt.Fprintln(w, "error", err)
			w.Flush()
			os.Exit(1)
		}
		fmt.Fprintf(w, "ack %d %d\n", idx[0], i*10)
		w.Flush()
		if i%7 == 0 {
			go func() { _ = q.Flush(ctx) }()
		}
	}
}

// TestSIGKILLMidFlush SIGKILLs a process that puts and flushes without pause, several
// times at different moments: every acknowledged record reads back with its value,
// indexes stay unique, and after the sweeper the bucket holds exactly the fragments
// the catalog names.
func TestSIGKILLMidFlush(t *testing.T) {
	ctx := context.Background()
	catalog, dir := pgtest.Database(t), t.TempDir()
	bucket := "file://" + dir
	acked := map[int64]int64{} // index → value
	for round, wait := range []time.Duration{300 * time.Millisecond, 450 * time.Millisecond, 700 * time.Millisecond} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestKillChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), "LAKESTORE_KILL_CHILD="+catalog+" "+bucket)
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		lines := make(chan string, 1024)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		// Wait for the first acknowledgement, then kill a while later.
		first := <-lines
		require.True(t, strings.HasPrefix(first, "ack "), "round %d: %s", round, first)
		time.Sleep(wait)
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()
		for _, l := range append([]string{first}, drain(lines)...) {
			f := strings.Fields(l)
			if len(f) != 3 || f[0] != "ack" {
				continue
			}
			lo, _ := strconv.ParseInt(f[1], 10, 64)
			v, _ := strconv.ParseInt(f[2], 10, 64)
			for j := int64(0); j < 10; j++ {
				acked[lo+j] = v + j
			}
		}
	}
	require.NotEmpty(t, acked)
	s := openTest(t, catalog, bucket, "q", &Config{SweepGrace: time.Nanosecond, SweepInterval: -1})
	q := persist.New(s)
	next, err := q.NextIndex(ctx)
	require.NoError(t, err)
	rows, err := q.Get(ctx, 0, int(next)+1, nil)
	require.NoError(t, err)
	seen := map[int64]bool{}
	byIdx := map[int64]persist.Record{}
	for _, r := range rows {
		require.False(t, seen[r.Index], "index %d read twice", r.Index)
		seen[r.Index] = true
		byIdx[r.Index] = r.Fields
	}
	for idx, v := range acked {
		require.Contains(t, byIdx, idx, "acknowledged index %d lost", idx)
		require.Equal(t, v, byIdx[idx]["v"], "index %d", idx)
	}
	t.Logf("%d acknowledged records over 3 kills, %d rows in the queue", len(acked), len(rows))
	// The killed flushes' objects are swept once their deadline (1 s after their start)
	// passed; named ones never are.
	swept := 0
	waitFor(t, func() bool {
		n, err := s.Sweep(ctx)
		require.NoError(t, err)
		swept += n
		return slices.Equal(namedObjects(t, s), bucketObjects(t, s.bucket, "q/"))
	})
	t.Logf("the sweeper deleted %d orphan fragments", swept)
	require.Equal(t, namedObjects(t, s), bucketObjects(t, s.bucket, "q/"), "no orphan after the sweeper, no named fragment missing")
	require.NoError(t, q.Flush(ctx))
	s.cache.Purge()
	rows2, err := q.Get(ctx, 0, int(next)+1, nil)
	require.NoError(t, err)
	require.Equal(t, len(rows), len(rows2), "every row reads back after the last flush")
}

// drain returns what is left in lines once the writer is gone.
func drain(lines <-chan string) []string {
	var out []string
	for l := range lines {
		out = append(out, l)
	}
	return out
}

// TestTrainerChild is the child of TestTrainerSIGKILLBetweenReadAndCommit: a trainer
// reading leased batches (persisttest.Trainer).
func TestTrainerChild(t *testing.T) {
	env := os.Getenv("LAKESTORE_TRAINER_CHILD")
	if env == "" {
		t.Skip("the child process of TestTrainerSIGKILLBetweenReadAndCommit")
	}
	f := strings.Fields(env)
	holdAt, _ := strconv.Atoi(f[2])
	ctx := context.Background()
	s, err := Open(ctx, "q", &Config{Catalog: f[0], Blob: f[1], SweepInterval: -1})
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(1)
	}
	q := persist.New(s)
	code := persisttest.Trainer(ctx, q, holdAt, os.Stdout, os.Stderr)
	_ = q.Close(ctx)
	os.Exit(code)
}

// TestTrainerSIGKILLBetweenReadAndCommit: a trainer process of the distributed store
// is SIGKILLed holding a leased, uncommitted batch; the restarted one reads exactly
// that batch first, and every sample is committed once (persisttest.TrainerCrash).
func TestTrainerSIGKILLBetweenReadAndCommit(t *testing.T) {
	ctx := context.Background()
	catalog, bucket := pgtest.Database(t), fileBucket(t)
	s, err := Open(ctx, "q", &Config{Catalog: catalog, Blob: bucket, SweepInterval: -1})
	require.NoError(t, err)
	q := persist.New(s)
	defer q.Close(ctx)
	persisttest.TrainerCrash(t, q, func(holdAt int) *persisttest.TrainerProcess {
		cmd := exec.Command(os.Args[0], "-test.run=^TestTrainerChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), fmt.Sprintf("LAKESTORE_TRAINER_CHILD=%s %s %d", catalog, bucket, holdAt))
		return persisttest.StartTrainer(t, cmd)
	})
}
