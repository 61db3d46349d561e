package persisttest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/persist"
)

// The trainer crash test of leased reads, for every store: a trainer process reading
// leased batches is SIGKILLed between a read and its commit, and restarted. A store's
// test binary runs Trainer in a child process (over its own store) and TrainerCrash in
// the parent.

// TrainerLease is the lease of the trainer's batches: short, so that the restarted
// trainer gets the killed one's batch back soon.
const TrainerLease = 500 * time.Millisecond

// TrainerRecords is how many records TrainerCrash's put puts (field "x").
const TrainerRecords = 40

// Trainer reads leased batches of 4 of q for task "train" and commits each, writing
// "got i,j,…" before and "committed i,j,…" after the commit to out, until the task has
// consumed TrainerRecords samples; it returns the process's exit status. With holdAt
// n ≥ 0, after getting its n-th batch it writes "holding" and blocks before the commit
// (the parent kills it there, between the read and the optimizer step). With holdAt
// < 0 it is a restart: it first waits one lease period, so that a batch the killed run
// held is ready again and comes first.
func Trainer(ctx context.Context, q *persist.Queue, holdAt int, stdout, stderr io.Writer) int {
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	join := func(idx []int64) string {
		s := make([]string, len(idx))
		for i, x := range idx {
			s[i] = strconv.FormatInt(x, 10)
		}
		return strings.Join(s, ",")
	}
	if holdAt < 0 {
		time.Sleep(TrainerLease)
	}
	r := q.Reader()
	for step := 0; ; {
		b, m, err := r.GetBatchLeased(ctx, &persist.MetaRequest{Fields: []string{"x"}, BatchSize: 4, Task: "train"}, TrainerLease)
		if err != nil {
			fmt.Fprintln(stderr, "get:", err)
			return 1
		}
		b.Release()
		if len(m.Indexes) == 0 {
			n, err := q.Consumed(ctx, "train", persist.DefaultPartition)
			if err != nil {
				fmt.Fprintln(stderr, "consumed:", err)
				return 1
			}
			if n >= TrainerRecords {
				return 0
			}
			time.Sleep(TrainerLease / 10) // a batch is leased (by a dead trainer): wait for it
			continue
		}
		fmt.Fprintf(out, "got %s\n", join(m.Indexes))
		if step == holdAt {
			fmt.Fprintln(out, "holding")
			out.Flush()
			select {} // killed here, before the commit
		}
		if err := r.Commit(ctx, m); err != nil {
			fmt.Fprintln(stderr, "commit:", err)
			return 1
		}
		fmt.Fprintf(out, "committed %s\n", join(m.Indexes))
		out.Flush()
		step++
	}
}

// TrainerProcess is a started trainer child: its stdout lines, Kill (SIGKILL) and Wait.
type TrainerProcess struct {
	Lines *bufio.Scanner
	Kill  func() error
	Wait  func() error
}

// TrainerCrash puts TrainerRecords records into q, starts a trainer (start(holdAt) runs
// Trainer with holdAt in a child process over the same queue), SIGKILLs it while it
// holds its 4th batch uncommitted, restarts it, and checks that the restarted trainer
// reads exactly the held batch first and that every sample is committed exactly once
// over both runs.
func TrainerCrash(t *testing.T, q *persist.Queue, start func(holdAt int) *TrainerProcess) {
	t.Helper()
	ctx := context.Background()
	recs := make([]persist.Record, TrainerRecords)
	for i := range recs {
		recs[i] = persist.Record{"x": i}
	}
	_, err := q.PutBatch(ctx, recs)
	require.NoError(t, err)
	run := func(holdAt int) (lines []string) {
		p := start(holdAt)
		for p.Lines.Scan() {
			lines = append(lines, p.Lines.Text())
			if p.Lines.Text() == "holding" {
				require.NoError(t, p.Kill())
				break
			}
		}
		err := p.Wait()
		if holdAt < 0 {
			require.NoError(t, err)
		} else {
			require.ErrorContains(t, err, syscall.SIGKILL.String())
		}
		return lines
	}
	first := run(3)
	require.GreaterOrEqual(t, len(first), 2)
	require.Equal(t, "holding", first[len(first)-1])
	held := strings.TrimPrefix(first[len(first)-2], "got ")
	second := run(-1)
	require.NotEmpty(t, second)
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
	require.Len(t, seen, TrainerRecords, "every sample committed once")
	n, err := q.Consumed(ctx, "train", persist.DefaultPartition)
	require.NoError(t, err)
	require.EqualValues(t, TrainerRecords, n)
}
