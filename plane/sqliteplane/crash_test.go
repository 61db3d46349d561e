package sqliteplane

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/stretchr/testify/require"
)

const (
	childRoleEnv = "LAKESHORE_TEST_CHILD"
	childPathEnv = "LAKESHORE_TEST_DB"
	childArgEnv  = "LAKESHORE_TEST_ARG"
)

// startChild re-executes the test binary in a child role on the database at path.
func startChild(t *testing.T, role, path, arg string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childRoleEnv+"="+role, childPathEnv+"="+path, childArgEnv+"="+arg)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	// The child exits when this pipe closes: when the test ends or its process dies.
	lifeline, err := cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		lifeline.Close()
		_ = cmd.Process.Kill()
	})
	return cmd, bufio.NewScanner(out)
}

func runChild(role string) int {
	go func() { // the parent holds our stdin open while it lives
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(4)
	}()
	ctx := context.Background()
	d, err := Open(ctx, os.Getenv(childPathEnv), &Config{MaintenanceInterval: 50 * time.Millisecond})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		return 2
	}
	defer d.Close()
	arg := os.Getenv(childArgEnv)
	switch role {
	case "crash":
		return crashChild(ctx, d, arg)
	case "busy":
		return busyChild(ctx, d)
	case "waiter":
		return waiterChild(ctx, d, arg)
	case "hold":
		return holdChild(ctx, d)
	case "depth":
		return depthChild(ctx, d)
	}
	return 3
}

// crashChild submits keyed jobs and works them at once, printing "submitted KEY ID" after
// each submit returns and "acked ID" after each ack returns, until it is killed.
func crashChild(ctx context.Context, d *Driver, round string) int {
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		fmt.Printf(format+"\n", args...)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(2)
		go func() { // producer
			defer wg.Done()
			for i := 0; ; i++ {
				key := fmt.Sprintf("r%s-g%d-%d", round, g, i)
				res, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "crash",
					Invocations: []plane.SubmitParams{{Key: key, Payload: []byte(key), MaxAttempts: 1000}}})
				if err != nil {
					say("error %v", err)
					return
				}
				say("submitted %s %s", key, res[0].ID)
			}
		}()
		go func() { // worker
			defer wg.Done()
			for {
				jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "crash",
					Max: 8, LeaseTTL: 300 * time.Millisecond, Wait: 100 * time.Millisecond})
				if err != nil {
					say("error %v", err)
					return
				}
				settles := make([]plane.SettleParams, len(jobs))
				for i, j := range jobs {
					settles[i] = plane.SettleParams{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeSucceeded, Result: j.Payload}
				}
				if len(settles) == 0 {
					continue
				}
				errs, err := d.InvocationSettleMany(ctx, settles)
				if err != nil {
					say("error %v", err)
					return
				}
				for i, e := range errs {
					if e == nil {
						say("acked %s", settles[i].ID)
					}
				}
			}
		}()
	}
	wg.Wait()
	return 1
}

// TestCrashRecovery kills a child that submits and works jobs with SIGKILL at random
// moments, several rounds, then drains the queue and checks that no acknowledged submit is
// missing, no acked job runs again, counts match the rows, and every job ends exactly once.
func TestCrashRecovery(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "crash.db")
	submitted := map[string]string{} // id → key
	acked := map[string]bool{}
	rounds := 6
	if testing.Short() {
		rounds = 3
	}
	for round := range rounds {
		cmd, out := startChild(t, "crash", path, strconv.Itoa(round))
		lines := make(chan string)
		go func() {
			for out.Scan() {
				lines <- out.Text()
			}
			close(lines)
		}()
		// The kill comes at a random moment after the child's first ack of the round, so
		// every round is killed mid-work however slow the machine (or the race detector).
		var kill <-chan time.Time
		stuck := time.After(time.Minute)
	read:
		for {
			select {
			case <-stuck:
				t.Fatal("the child acked nothing within a minute")
			case line, ok := <-lines:
				if !ok {
					break read
				}
				f := strings.Fields(line)
				switch f[0] {
				case "submitted":
					submitted[f[2]] = f[1]
				case "acked":
					acked[f[1]] = true
					if kill == nil && stuck != nil {
						kill = time.After(time.Duration(rand.IntN(400)) * time.Millisecond)
						stuck = nil
					}
				default:
					t.Fatalf("child: %s", line)
				}
			case <-kill:
				require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
				kill = nil
			}
		}
		_ = cmd.Wait()
	}
	require.NotEmpty(t, submitted)
	require.NotEmpty(t, acked)
	t.Logf("%d rounds: %d submits and %d acks reported before the kills", rounds, len(submitted), len(acked))

	ctx := context.Background()
	d, err := Open(ctx, path, &Config{MaintenanceInterval: 20 * time.Millisecond})
	require.NoError(t, err)
	defer d.Close()
	// Drain: leases of killed workers expire (300 ms) and their jobs come back.
	ranAgain := 0
	for {
		// Running first: a lease that expires between the two reads moves its job from
		// running to queued, which read in the other order would be missed by both (none
		// running means none can expire before the queued count is read; only this loop
		// claims).
		r, err := d.InvocationCount(ctx, &plane.CountParams{Namespace: "default", Queue: "crash", State: plane.StateRunning})
		require.NoError(t, err)
		n, err := d.InvocationCount(ctx, &plane.CountParams{Namespace: "default", Queue: "crash", State: plane.StateQueued})
		require.NoError(t, err)
		if n+r == 0 {
			break
		}
		// A lease longer than the test: the 100 jobs are settled one call at a time, which
		// under the race detector on a loaded machine outlasted the default lease, and a job
		// whose lease ran out before its settle failed the settle for a reason that is not
		// this test's (the killed workers' leases are the ones that expire here).
		jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "crash", Max: 100, Wait: time.Second, LeaseTTL: plane.LeaseTTLMax})
		require.NoError(t, err)
		for _, j := range jobs {
			if acked[j.ID] {
				ranAgain++
			}
			errs, err := d.InvocationSettleMany(ctx, []plane.SettleParams{{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeSucceeded, Result: j.Payload}})
			require.NoError(t, err)
			require.NoError(t, errs[0])
		}
	}
	require.Zero(t, ranAgain, "an acked job was handed out again")
	for id, key := range submitted {
		inv, err := d.InvocationGet(ctx, id)
		require.NoError(t, err, "submitted %s (%s) is missing", id, key)
		require.Equal(t, plane.StateSucceeded, inv.State)
		require.Equal(t, key, string(inv.Result))
		require.Equal(t, key, inv.Key)
	}
	// Counts agree with the rows: no job counted in two states, none lost.
	rows, err := d.readDB.QueryContext(ctx, `SELECT state, count(*) FROM invocations GROUP BY state`)
	require.NoError(t, err)
	actual := map[int]int64{}
	for rows.Next() {
		var s int
		var n int64
		require.NoError(t, rows.Scan(&s, &n))
		actual[s] = n
	}
	require.NoError(t, rows.Close())
	require.Equal(t, map[int]int64{planekit.StateSucceeded: actual[planekit.StateSucceeded]}, actual, "every job ends succeeded")
	n, err := d.InvocationCount(ctx, &plane.CountParams{Namespace: "default", Queue: "crash", State: plane.StateSucceeded})
	require.NoError(t, err)
	require.Equal(t, actual[planekit.StateSucceeded], n)
	var keys, distinct int64
	require.NoError(t, d.readDB.QueryRowContext(ctx, `SELECT count(*), count(DISTINCT key) FROM invocations`).Scan(&keys, &distinct))
	require.Equal(t, keys, distinct, "one job per key")
}

// TestKilledWorkerJobClaimableAgain: a worker process SIGKILLed mid-job leaves its job
// running under a lease; once the lease runs out the job is claimable again (attempt 2),
// and the dead worker's attempt can no longer settle it.
func TestKilledWorkerJobClaimableAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "worker.db")
	d, err := Open(ctx, path, &Config{MaintenanceInterval: 20 * time.Millisecond})
	require.NoError(t, err)
	defer d.Close()
	res, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "hold",
		Invocations: []plane.SubmitParams{{Payload: []byte("x")}}})
	require.NoError(t, err)
	cmd, out := startChild(t, "hold", path, "")
	require.True(t, out.Scan())
	f := strings.Fields(out.Text())
	require.Equal(t, []string{"claimed", res[0].ID}, f[:2])
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	killed := time.Now()
	jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "hold", Wait: 10 * time.Second})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.Equal(t, 2, jobs[0].Attempt)
	t.Logf("claimable again %s after the kill (lease 300 ms)", time.Since(killed).Round(time.Millisecond))
	errs, err := d.InvocationSettleMany(ctx, []plane.SettleParams{{ID: res[0].ID, Token: f[2], Outcome: plane.OutcomeSucceeded}})
	require.NoError(t, err)
	require.ErrorIs(t, errs[0], plane.ErrLeaseLost)
	errs, err = d.InvocationSettleMany(ctx, []plane.SettleParams{{ID: res[0].ID, Token: jobs[0].Token, Outcome: plane.OutcomeSucceeded}})
	require.NoError(t, err)
	require.NoError(t, errs[0])
}

// holdChild claims one job under a 300 ms lease, prints "claimed ID TOKEN" and blocks.
func holdChild(ctx context.Context, d *Driver) int {
	jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "hold",
		LeaseTTL: 300 * time.Millisecond, Wait: 10 * time.Second})
	if err != nil || len(jobs) == 0 {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("claimed", jobs[0].ID, jobs[0].Token)
	select {}
}

// busyChild submits, claims and acks 300 jobs from 16 goroutines; any error fails it.
func busyChild(ctx context.Context, d *Driver) int {
	var wg sync.WaitGroup
	var mu sync.Mutex
	failures := 0
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				err := func() error {
					if _, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "busy",
						Invocations: []plane.SubmitParams{{Payload: []byte("x")}}}); err != nil {
						return err
					}
					// A lease far longer than the test: under the race detector at load 20 a
					// settle came after the default lease's end ("lease lost"), which is not
					// what this test is about (busy or locked errors).
					jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "busy", Max: 2, LeaseTTL: 10 * time.Minute})
					if err != nil {
						return err
					}
					for _, j := range jobs {
						errs, err := d.InvocationSettleMany(ctx, []plane.SettleParams{{ID: j.ID, Token: j.Token, Outcome: plane.OutcomeSucceeded}})
						if err != nil {
							return err
						}
						if errs[0] != nil {
							return errs[0]
						}
					}
					_, err = d.InvocationCount(ctx, &plane.CountParams{Namespace: "default", Queue: "busy", State: plane.StateQueued})
					return err
				}()
				if err != nil {
					mu.Lock()
					failures++
					fmt.Fprintln(os.Stderr, "busy child:", err)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if failures > 0 {
		return 1
	}
	return 0
}

// TestManyProcessesNeverBusy: several processes with dozens of goroutines each submit,
// claim, settle and count on one file; none ever sees a busy/locked error.
func TestManyProcessesNeverBusy(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "busy.db")
	d, err := Open(context.Background(), path, nil) // create the schema once
	require.NoError(t, err)
	require.NoError(t, d.Close())
	var cmds []*exec.Cmd
	for range 3 {
		cmd, out := startChild(t, "busy", path, "")
		go func() {
			for out.Scan() {
			}
		}()
		cmds = append(cmds, cmd)
	}
	for _, cmd := range cmds {
		require.NoError(t, cmd.Wait(), "a process saw an error")
	}
	d, err = Open(context.Background(), path, nil)
	require.NoError(t, err)
	defer d.Close()
	total := int64(0)
	for _, s := range plane.States() {
		n, err := d.InvocationCount(context.Background(), &plane.CountParams{Namespace: "default", Queue: "busy", State: s})
		require.NoError(t, err)
		total += n
	}
	require.Equal(t, int64(3*16*20), total)
}

// waiterChild waits for the result of the invocation id given as its argument and prints it.
func waiterChild(ctx context.Context, d *Driver, id string) int {
	fmt.Println("waiting")
	inv, err := d.InvocationWait(ctx, &plane.WaitParams{ID: id, Timeout: 20 * time.Second})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("result", inv.State, string(inv.Result))
	return 0
}

// TestSecondProcessSeesSubmitsAndResults: a process waiting on an invocation of the same
// file is woken by another process's ack (noticed through PRAGMA data_version), and a
// submit by one process is claimable by another.
func TestSecondProcessSeesSubmitsAndResults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "two.db")
	d, err := Open(ctx, path, nil)
	require.NoError(t, err)
	defer d.Close()
	res, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "two",
		Invocations: []plane.SubmitParams{{Payload: []byte("p")}}})
	require.NoError(t, err)
	cmd, out := startChild(t, "waiter", path, res[0].ID)
	require.True(t, out.Scan())
	require.Equal(t, "waiting", out.Text())
	jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "two"})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	_, err = d.InvocationSettleMany(ctx, []plane.SettleParams{{ID: jobs[0].ID, Token: jobs[0].Token, Outcome: plane.OutcomeSucceeded, Result: []byte("done")}})
	require.NoError(t, err)
	require.True(t, out.Scan())
	require.Equal(t, "result succeeded done", out.Text())
	require.NoError(t, cmd.Wait())
}

// depthChild submits 100 invocations from 8 goroutines into a queue with max depth 50 and
// prints how many were admitted; refusals must be ErrQueueFull and nothing else.
func depthChild(ctx context.Context, d *Driver) int {
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted, failed := 0, false
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 13 {
				_, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "depth",
					Invocations: []plane.SubmitParams{{Payload: []byte("x")}}})
				mu.Lock()
				switch {
				case err == nil:
					admitted++
				case !errors.Is(err, plane.ErrQueueFull):
					fmt.Fprintln(os.Stderr, "depth child:", err)
					failed = true
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	fmt.Println("admitted", admitted)
	if failed {
		return 1
	}
	return 0
}

// TestMaxDepthAcrossProcesses: two processes submitting at once into one queue of max depth
// 50 admit exactly 50 together, never more.
func TestMaxDepthAcrossProcesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "depth.db")
	d, err := Open(ctx, path, nil)
	require.NoError(t, err)
	defer d.Close()
	_, err = d.QueueAdmissionSet(ctx, &plane.AdmissionParams{Namespace: "default", Queue: "depth",
		Admission: plane.Admission{MaxDepth: 50}})
	require.NoError(t, err)
	var cmds []*exec.Cmd
	var outs []*bufio.Scanner
	for range 2 {
		cmd, out := startChild(t, "depth", path, "")
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	total := 0
	for i, cmd := range cmds {
		require.True(t, outs[i].Scan())
		var n int
		_, err := fmt.Sscanf(outs[i].Text(), "admitted %d", &n)
		require.NoError(t, err)
		total += n
		require.NoError(t, cmd.Wait())
	}
	require.Equal(t, 50, total, "the two processes admitted exactly max depth together")
	n, err := d.InvocationCount(ctx, &plane.CountParams{Namespace: "default", Queue: "depth", State: plane.StateQueued})
	require.NoError(t, err)
	require.Equal(t, int64(50), n)
}
