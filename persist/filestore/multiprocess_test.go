package filestore

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/persist"
)

// TestTwoProducersTwoConsumers runs two producer processes and two consumer processes
// on one queue at once: every record is consumed exactly once by the task (no loss, no
// duplicate), with the values that were put; another task (in this process) still
// reads everything.
func TestTwoProducersTwoConsumers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	per := 1500
	if testing.Short() {
		per = 300
	}
	total := 2 * per
	// Create the queue first so that children do not race on creating the directory.
	q := openTemp(t, &persist.Config{Dir: dir, PollInterval: 10 * 1e6})
	count := fmt.Sprintf("PERSIST_TEST_COUNT=%d", per)
	countAll := fmt.Sprintf("PERSIST_TEST_COUNT=%d", total)
	type proc struct {
		name string
		wait func() error
		kill func()
		out  []string
	}
	var procs []*proc
	var wg sync.WaitGroup
	for i, role := range []string{"consumer", "consumer", "producer2", "producer2"} {
		arg := "train"
		env := countAll
		if role == "producer2" {
			arg = fmt.Sprintf("p%d", i)
			env = count
		}
		cmd, sc, stderr := startChild(t, role, dir, arg, env)
		p := &proc{name: fmt.Sprintf("%s-%d", role, i)}
		procs = append(procs, p)
		wg.Go(func() {
			for sc.Scan() {
				p.out = append(p.out, sc.Text())
			}
		})
		p.wait = func() error {
			err := cmd.Wait()
			if err != nil {
				return fmt.Errorf("%s: %w; stderr: %s", p.name, err, stderr.String())
			}
			return nil
		}
		p.kill = func() { cmd.Process.Kill() }
	}
	// Producers first: if one fails, the consumers would wait for its rows forever.
	for _, p := range procs[2:] {
		if err := p.wait(); err != nil {
			procs[0].kill()
			procs[1].kill()
			wg.Wait()
			t.Fatal(err)
		}
	}
	wg.Wait()
	for _, p := range procs[:2] {
		require.NoError(t, p.wait())
	}
	seen := map[int64]string{}
	perConsumer := []int{}
	for _, p := range procs[:2] {
		perConsumer = append(perConsumer, len(p.out))
		for _, line := range p.out {
			f := strings.Fields(line)
			require.Len(t, f, 3)
			idx, _ := strconv.ParseInt(f[0], 10, 64)
			prev, dup := seen[idx]
			require.False(t, dup, "index %d consumed twice (%s and %s)", idx, prev, line)
			seen[idx] = line
		}
	}
	t.Logf("consumers got %v samples", perConsumer)
	require.Len(t, seen, total, "every record consumed once")
	rows, err := persist.New(q).Get(ctx, 0, total+10, nil)
	require.NoError(t, err)
	require.Len(t, rows, total)
	bySrc := map[string]map[int64]bool{}
	for _, r := range rows {
		src, n := r.Fields["src"].(string), r.Fields["n"].(int64)
		require.Equal(t, fmt.Sprintf("%d %s %d", r.Index, src, n), seen[r.Index])
		if bySrc[src] == nil {
			bySrc[src] = map[int64]bool{}
		}
		bySrc[src][n] = true
	}
	require.Len(t, bySrc, 2)
	for src, ns := range bySrc {
		require.Len(t, ns, per, "producer %s", src)
	}
	// Another task still sees every sample.
	b, _, err := persist.New(q).Reader().GetBatch(ctx, &persist.MetaRequest{Fields: []string{"n"}, BatchSize: total + 10, Task: "eval"})
	require.NoError(t, err)
	require.Equal(t, total, b.Len())
	b.Release()
}

// TestRankAwareAcrossProcesses starts four processes: two ranks of data-parallel group
// 0 and two of group 1, released at the same moment. Ranks of one group get identical
// indexes; the groups get disjoint ones.
func TestRankAwareAcrossProcesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	q := openTemp(t, &persist.Config{Dir: dir})
	putN(t, q, persist.DefaultPartition, 40, func(i int) persist.Record { return persist.Record{"x": i} })
	args := []string{"0,0", "1,0", "0,0", "1,0"}
	var stdins []io.WriteCloser
	var results [4]string
	var waits []func() error
	var wg sync.WaitGroup
	for i, arg := range args {
		cmd, sc, stderr := startChildStdin(t, "rankaware", dir, arg)
		stdins = append(stdins, cmd.stdin)
		require.True(t, sc.Scan(), "child %d did not start: %s", i, stderr.String())
		require.Equal(t, "ready", sc.Text())
		wg.Go(func() {
			if sc.Scan() {
				results[i] = sc.Text()
			}
		})
		waits = append(waits, func() error {
			if err := cmd.cmd.Wait(); err != nil {
				return fmt.Errorf("child %s: %w: %s", arg, err, stderr.String())
			}
			return nil
		})
	}
	for _, in := range stdins {
		fmt.Fprintln(in, "go")
		in.Close()
	}
	wg.Wait()
	for _, w := range waits {
		require.NoError(t, w())
	}
	t.Logf("results: %q", results)
	require.Equal(t, results[0], results[2], "both ranks of group 0 agree")
	require.Equal(t, results[1], results[3], "both ranks of group 1 agree")
	require.NotEqual(t, results[0], results[1])
	g0 := parseIdxList(t, results[0])
	g1 := parseIdxList(t, results[1])
	require.Len(t, g0, 8)
	require.Len(t, g1, 8)
	for _, x := range g0 {
		require.NotContains(t, g1, x, "groups are disjoint")
	}
	n, err := q.Consumed(ctx, "train", persist.DefaultPartition)
	require.NoError(t, err)
	require.Equal(t, int64(16), n, "each group's batch consumed once")
}

func parseIdxList(t *testing.T, s string) []int64 {
	t.Helper()
	s = strings.Trim(s, "[]")
	var out []int64
	for _, f := range strings.Fields(s) {
		x, err := strconv.ParseInt(f, 10, 64)
		require.NoError(t, err)
		out = append(out, x)
	}
	return out
}
