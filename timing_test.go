package lakeshore_test

import (
	"time"

	"github.com/lakeshore-dev/lakeshore/plane/planetest"
)

// slow scales a duration of a test that races real leases against real time. Under the race
// detector every plane call is about ten times slower, so a lease that is generous in a normal
// build is tight there; the test's logic and assertions stay the same.
func slow(d time.Duration) time.Duration {
	if planetest.RaceDetector {
		return 10 * d
	}
	return d
}
