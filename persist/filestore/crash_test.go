package filestore

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/persisttest"
)

// startChild re-executes the test binary in a child role (child_test.go). Its stdout is
// returned as a scanner; stderr goes to the test log at the end.
func startChild(t *testing.T, role, dir, arg string, env ...string) (*exec.Cmd, *bufio.Scanner, *strings.Builder) {
	t.Helper()
	cmd := persisttest.ChildCommand(role, dir, arg, env...)
	sc, stderr := persisttest.StartChild(t, cmd)
	return cmd, sc, stderr
}

// crashAt runs, for each of points in a parallel subtest of its own, a kill child
// (childFlushKill, childCompactKill) in role over a fresh directory until it SIGKILLs
// itself at the point, then recovered with the directory, the point and how many lines
// the child printed.
func crashAt(t *testing.T, role string, points []string, recovered func(t *testing.T, dir, point string, printed int)) {
	for _, point := range points {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cmd, sc, stderr := startChild(t, role, dir, point)
			printed := 0
			for sc.Scan() {
				printed++
			}
			err := cmd.Wait()
			require.Error(t, err)
			require.Contains(t, err.Error(), "killed", "stderr: %s", stderr.String())
			recovered(t, dir, point, printed)
		})
	}
}

// requireRecovered checks, after a kill child's crash, that q holds the 500 records
// it put (producerValue) and no orphan file, and, after next (the interrupted flush
// or compaction, run again), still all 500 and no orphan.
func requireRecovered(t *testing.T, q *fileQueue, next func(context.Context) error) {
	t.Helper()
	ctx := context.Background()
	checkNoOrphans(t, q)
	rows, err := persist.New(q).Get(ctx, 0, 1000, nil)
	require.NoError(t, err)
	require.Len(t, rows, 500)
	for i, r := range rows {
		require.Equal(t, producerValue(int64(i)), r.Fields)
	}
	require.NoError(t, next(ctx))
	checkNoOrphans(t, q)
	rows, err = persist.New(q).Get(ctx, 0, 1000, nil)
	require.NoError(t, err)
	require.Len(t, rows, 500)
}

type childProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// startChildStdin is startChild with a pipe to the child's stdin.
func startChildStdin(t *testing.T, role, dir, arg string, env ...string) (*childProc, *bufio.Scanner, *strings.Builder) {
	t.Helper()
	cmd := persisttest.ChildCommand(role, dir, arg, env...)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	sc, stderr := persisttest.StartChild(t, cmd)
	return &childProc{cmd: cmd, stdin: stdin}, sc, stderr
}

// TestCrashRecovery SIGKILLs a producer child at random moments while it puts and
// flushes (and compacts) continuously, then checks after each round: every index the
// child printed (a put that returned) is readable with its values, every row present is
// one the child put (no duplicates, no garbage), and no orphan fragment file remains.
func TestCrashRecovery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	rounds := 6
	if testing.Short() {
		rounds = 3
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	printed := map[int64]int64{} // index → k
	for round := 0; round < rounds; round++ {
		base := int64(round) * 1_000_000
		cmd, sc, stderr := startChild(t, "producer", dir, strconv.FormatInt(base, 10))
		// The kill comes at a random moment after the child's first returned put, so
		// that a slow start on a loaded machine still leaves work to interrupt.
		killAfter := time.Duration(50+rng.IntN(400)) * time.Millisecond
		var timer *time.Timer
		lines := 0
		for sc.Scan() {
			if timer == nil {
				timer = time.AfterFunc(killAfter, func() { cmd.Process.Signal(syscall.SIGKILL) })
			}
			f := strings.Fields(sc.Text())
			require.Len(t, f, 2, "line %q", sc.Text())
			idx, err := strconv.ParseInt(f[0], 10, 64)
			require.NoError(t, err)
			k, err := strconv.ParseInt(f[1], 10, 64)
			require.NoError(t, err)
			_, dup := printed[idx]
			require.False(t, dup, "index %d returned twice", idx)
			printed[idx] = k
			lines++
		}
		err := cmd.Wait()
		if timer != nil {
			timer.Stop()
		}
		require.Error(t, err, "child should have been killed; stderr: %s", stderr.String())
		require.Positive(t, lines, "round %d: child printed nothing before the kill; stderr: %s", round, stderr.String())
		t.Logf("round %d: killed after %v, %d puts returned", round, killAfter, lines)

		q, err := openFile(ctx, "q", &persist.Config{Dir: dir, FlushInterval: -1, FlushRows: -1, CompactFragments: -1})
		require.NoError(t, err)
		checkNoOrphans(t, q)
		st, err := q.Stats(ctx)
		require.NoError(t, err)
		t.Logf("round %d: recovery rolled back %d unfinished flushes/compactions, deleted %d files", round, st.RecoveredFragments, st.OrphansDeleted)
		rows, err := persist.New(q).Get(ctx, 0, 10_000_000, nil)
		require.NoError(t, err)
		seenK := map[int64]bool{}
		for i, r := range rows {
			require.Equal(t, int64(i), r.Index, "indexes are dense")
			k, ok := r.Fields["k"].(int64)
			require.True(t, ok, "row %d: %v", r.Index, r.Fields)
			require.Equal(t, producerValue(k), persist.Record{"k": r.Fields["k"], "sq": r.Fields["sq"], "s": r.Fields["s"]})
			require.False(t, seenK[k], "record k=%d stored twice", k)
			seenK[k] = true
			if want, ok := printed[r.Index]; ok {
				require.Equal(t, want, k, "index %d", r.Index)
			}
		}
		for idx := range printed {
			require.Less(t, idx, int64(len(rows)), "returned index %d is missing after the crash", idx)
		}
		// Unprinted rows are puts in flight at the kill: at most 4 goroutines' worth.
		require.LessOrEqual(t, len(rows)-len(printed), 2*1+2*20)
		// The rows that were put but not printed are now "returned" too for later rounds.
		for _, r := range rows {
			printed[r.Index] = r.Fields["k"].(int64)
		}
		require.NoError(t, q.Close(ctx))
	}
}

// checkNoOrphans asserts that data/ holds exactly the live fragments, no temporary or
// unnamed files, and that no pending fragment is left.
func checkNoOrphans(t *testing.T, q *fileQueue) {
	t.Helper()
	rows, err := q.rdb.Query(`SELECT file, state FROM fragments`)
	require.NoError(t, err)
	live := map[string]bool{}
	for rows.Next() {
		var f string
		var state int
		require.NoError(t, rows.Scan(&f, &state))
		require.Equal(t, 1, state, "fragment %s is not live after recovery", f)
		live[f] = true
	}
	require.NoError(t, rows.Close())
	entries, err := os.ReadDir(filepath.Join(q.Dir(), "data"))
	require.NoError(t, err)
	var files []string
	for _, e := range entries {
		files = append(files, e.Name())
		require.True(t, live[e.Name()], "orphan file %s", e.Name())
	}
	require.Len(t, files, len(live), "files %v, live %v", files, live)
	var claimed int
	require.NoError(t, q.rdb.QueryRow(`SELECT COUNT(*) FROM tail WHERE flush_id IS NOT NULL`).Scan(&claimed))
	require.Zero(t, claimed, "tail entries still claimed by a dead flush")
	_ = fmt.Sprint()
}

// TestCrashMidFlush kills a child at exact points of a flush: after it claimed the tail
// (pending fragment recorded) and after the fragment file was renamed into data/ but
// before the manifest commit. Recovery must roll the flush back: rows still readable
// from the tail, the file deleted, and a new flush works.
func TestCrashMidFlush(t *testing.T) {
	t.Parallel()
	crashAt(t, "flushkill", []string{"flush-claimed", "flush-renamed"}, func(t *testing.T, dir, point string, printed int) {
		ctx := context.Background()
		require.Equal(t, 500, printed)
		if point == "flush-renamed" {
			entries, err := os.ReadDir(filepath.Join(dir, "q", "data"))
			require.NoError(t, err)
			require.Len(t, entries, 1, "the renamed fragment is on disk before recovery")
		}
		q := openTemp(t, &persist.Config{Dir: dir, FlushInterval: -1, FlushRows: -1})
		st, err := q.Stats(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(1), st.RecoveredFragments)
		require.Equal(t, int64(500), st.TailRows)
		requireRecovered(t, q, q.Flush)
	})
}
