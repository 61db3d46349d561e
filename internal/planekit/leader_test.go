package planekit

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLeadPassesAgainAtOnceWhileBehind: after a pass that left work behind, Lead runs the
// next at once rather than at the next beat. The beats are the test's: one beat starts a
// backlog of four passes, and all four run before any other beat comes. A Lead that waited
// for a beat after a pass left work behind runs one pass and fails at the wait's bound (a
// minute, for something that takes microseconds when right), whatever the machine's load.
func TestLeadPassesAgainAtOnceWhileBehind(t *testing.T) {
	t.Parallel()
	stop := make(chan struct{})
	beat := make(chan time.Time)
	passes := make(chan int, 16)
	count := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		Lead(stop, beat, time.Hour, func(context.Context) (bool, error) { return true, nil },
			func(context.Context) (bool, error) {
				count++
				passes <- count
				return count < 4, nil // the first three leave work behind
			},
			func(what string, err error) { t.Errorf("%s: %v", what, err) })
	}()
	beat <- time.Now()
	wait := time.NewTimer(time.Minute)
	defer wait.Stop()
	for want := 1; want <= 4; want++ {
		select {
		case got := <-passes:
			require.Equal(t, want, got)
		case <-wait.C:
			t.Fatalf("%d passes of a backlog of four after one beat: the next pass waited for a beat", want-1)
		}
	}
	// The fourth left nothing behind: the next pass waits for a beat.
	select {
	case got := <-passes:
		t.Fatalf("pass %d without a beat after a pass that left nothing behind", got)
	default:
	}
	beat <- time.Now() // taken only once Lead waits for a beat again
	require.Equal(t, 5, <-passes)
	close(stop)
	<-done
}
