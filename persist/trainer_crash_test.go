package persist

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// trainerLease is the lease of the trainer child's batches: short, so that the
// restarted trainer gets the killed one's batch back soon.
const trainerLease = 500 * time.Millisecond

// childTrainer reads leased batches of 4 for task "train" and commits each, printing
// "got i,j,…" before and "committed i,j,…" after the commit, until the task has
// consumed PERSIST_TEST_COUNT samples. With arg -1 it is a restart: it first waits one
// lease period. With arg n ≥ 0, after getting its n-th batch it
// prints "holding" and stops before the commit: the parent SIGKILLs it there, between
// the read and the optimizer step.
func childTrainer(ctx context.Context, dir, arg string) int {
	holdAt, _ := strconv.Atoi(arg)
	q, err := openFile(ctx, "q", &Config{Dir: dir, PollInterval: 10 * time.Millisecond})
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 1
	}
	defer q.Close(ctx)
	total := int64(envInt("PERSIST_TEST_COUNT"))
	r := New(q).Reader()
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	join := func(idx []int64) string {
		s := make([]string, len(idx))
		for i, x := range idx {
			s[i] = strconv.FormatInt(x, 10)
		}
		return strings.Join(s, ",")
	}
	if holdAt < 0 {
		// A restarted trainer waits one lease period, so that a batch its previous
		// run held is ready again and comes first.
		time.Sleep(trainerLease)
	}
	for step := 0; ; {
		b, m, err := r.GetBatchLeased(ctx, &MetaRequest{Fields: []string{"x"}, BatchSize: 4, Task: "train"}, trainerLease)
		if err != nil {
			fmt.Fprintln(os.Stderr, "get:", err)
			return 1
		}
		b.Release()
		if len(m.Indexes) == 0 {
			n, err := q.Consumed(ctx, "train", DefaultPartition)
			if err != nil {
				fmt.Fprintln(os.Stderr, "consumed:", err)
				return 1
			}
			if n >= total {
				return 0
			}
			time.Sleep(trainerLease / 10) // a batch is leased (by a dead trainer): wait for it
			continue
		}
		fmt.Fprintf(out, "got %s\n", join(m.Indexes))
		if step == holdAt {
			fmt.Fprintln(out, "holding")
			out.Flush()
			select {} // killed here, before the commit
		}
		if err := r.Commit(ctx, m); err != nil {
			fmt.Fprintln(os.Stderr, "commit:", err)
			return 1
		}
		fmt.Fprintf(out, "committed %s\n", join(m.Indexes))
		out.Flush()
		step++
	}
}

// TestTrainerSIGKILLBetweenReadAndCommit kills a trainer process (SIGKILL) holding a
// leased, uncommitted batch; the restarted trainer reads exactly that batch first (once
// the lease expires), and over both runs every sample is committed exactly once: none
// lost, none consumed twice.
func TestTrainerSIGKILLBetweenReadAndCommit(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	const total = 40
	q, err := openFile(ctx, "q", &Config{Dir: dir})
	require.NoError(t, err)
	defer q.Close(ctx)
	recs := make([]Record, total)
	for i := range recs {
		recs[i] = Record{"x": i}
	}
	_, err = New(q).PutBatch(ctx, recs)
	require.NoError(t, err)
	env := fmt.Sprintf("PERSIST_TEST_COUNT=%d", total)

	run := func(holdAt int) (lines []string) {
		cmd, sc, stderr := startChild(t, "trainer", dir, strconv.Itoa(holdAt), env)
		for sc.Scan() {
			lines = append(lines, sc.Text())
			if sc.Text() == "holding" {
				require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
				break
			}
		}
		err := cmd.Wait()
		if holdAt < 0 {
			require.NoError(t, err, "stderr: %s", stderr.String())
		}
		return lines
	}
	first := run(3)
	require.Equal(t, "holding", first[len(first)-1])
	held := strings.TrimPrefix(first[len(first)-2], "got ")
	second := run(-1)
	require.Equal(t, "got "+held, second[0], "the restarted trainer reads the killed one's batch first")

	seen := map[string]int{}
	for _, l := range append(first, second...) {
		if c, ok := strings.CutPrefix(l, "committed "); ok {
			for _, x := range strings.Split(c, ",") {
				seen[x]++
			}
		}
	}
	var twice []string
	for x, n := range seen {
		if n > 1 {
			twice = append(twice, x)
		}
	}
	slices.Sort(twice)
	require.Empty(t, twice, "samples committed twice")
	require.Len(t, seen, total, "every sample committed once")
	n, err := New(q).Consumed(ctx, "train", DefaultPartition)
	require.NoError(t, err)
	require.EqualValues(t, total, n)
}
