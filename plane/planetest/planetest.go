// Package planetest is the conformance suite every dispatch plane must pass: the contract of
// the semantics contract (docs/semantics.md in this repository), checked the same way for the SQLite file
// plane, ":memory:", the HTTP plane and PostgreSQL (the shape of River's riverdrivertest).
//
// A driver's test calls Run with a Factory that opens a fresh, empty plane:
//
//	func TestConformance(t *testing.T) {
//		planetest.Run(t, func(t *testing.T, opts planetest.Options) plane.Driver {
//			drv, err := sqliteplane.Open(t.Context(), filepath.Join(t.TempDir(), "l.db"),
//				&sqliteplane.Config{Now: opts.Now, Seed: opts.Seed, Backoff: opts.Backoff,
//					MaintenanceInterval: opts.MaintenanceInterval, MaxSchedulesPerNamespace: opts.MaxSchedulesPerNamespace,
//					MaxTopicsPerQueue: opts.MaxTopicsPerQueue, MaxWorkersPerNamespace: opts.MaxWorkersPerNamespace})
//			require.NoError(t, err)
//			t.Cleanup(func() { drv.Close() })
//			return drv
//		})
//	}
//
// Every subtest runs in parallel on its own driver. Where time matters the suite drives the
// plane's clock (Options.Now) and runs maintenance on demand (Driver.Maintain); real
// durations are used only for waits, and waiting is always done through the driver's own
// waiting calls with bounded timeouts. A subtest is skipped only when the driver answers
// plane.ErrNotImplemented.
package planetest

import (
	"testing"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// Factory returns a fresh, empty driver for one subtest, configured from opts. It registers
// the driver's Close with t.Cleanup and fails t when the driver cannot be opened.
type Factory func(t *testing.T, opts Options) plane.Driver

// Options are what a plane must make injectable for the suite. The suite always fills every
// field it cares about; a factory passes them on to the plane's configuration unchanged.
type Options struct {
	// Now is the plane's clock for every stored time (created, started, finished, lease
	// expiry, available_at, deadline checks, frame times) and for maintenance. nil: real
	// time. Waits (InvocationWait, FrameRead and claim with Wait) still run on real timers.
	Now func() time.Time
	// Seed seeds the plane's random source (boltzmann draw, backoff jitter). 0: random.
	Seed uint64
	// Backoff is the retry backoff. The suite sets a short one unless a test needs another.
	Backoff plane.Backoff
	// MaintenanceInterval is how often the plane runs maintenance by itself (lease expiry,
	// attempt timeouts, deadlines, retention). The suite sets it short (20 ms) unless a test
	// needs maintenance to run only when it calls Driver.Maintain.
	MaintenanceInterval time.Duration
	// MaxSchedulesPerNamespace is the plane's cap on schedules per namespace
	// (plane.CheckScheduleCount); 0: the plane's default. The suite sets a small one where
	// it checks the cap.
	MaxSchedulesPerNamespace int
	// MaxTopicsPerQueue and MaxWorkersPerNamespace are the plane's caps on topics per
	// queue (plane.CheckTopicCount) and registered workers per namespace
	// (plane.CheckWorkerCount); 0: the plane's defaults. The suite sets small ones where it
	// checks the caps.
	MaxTopicsPerQueue, MaxWorkersPerNamespace int
	// Retention is the plane's retention (how long maintenance keeps finished jobs, idle
	// topics, silent workers' registrations and stopped tokens); 0: the plane's default,
	// plane.RetentionDefault. The suite sets a short one where it checks what a short
	// retention must still keep.
	Retention time.Duration
}

// Run runs the whole conformance suite against the driver that factory makes, one
// parallel subtest per subject.
func Run(t *testing.T, factory Factory) {
	t.Helper()
	s := &suite{factory: factory}
	subjects := []struct {
		name string
		run  func(*testing.T, *suite)
	}{
		{"Submit", testSubmit},
		{"Validation", testValidation},
		{"Claim", testClaim},
		{"Boltzmann", testBoltzmann},
		{"Lease", testLease},
		{"Settle", testSettle},
		{"SettleAndClaim", testSettleAndClaim},
		{"Queues", testQueues},
		{"Cancel", testCancel},
		{"Deadline", testDeadline},
		{"Journal", testJournal},
		{"Topic", testTopic},
		{"Wait", testWait},
		{"Count", testCount},
		{"Trim", testTrim},
		{"Errors", testErrors},
		{"Admission", testAdmission},
		{"Delayed", testDelayed},
		{"List", testList},
		{"Workers", testWorkers},
		{"Tokens", testTokens},
		{"Providers", testProviders},
		{"Leases", testLeases},
		{"Pause", testPause},
		{"Schedules", testSchedules},
		{"Dedup", testDedup},
		{"Concurrency", testConcurrency},
		{"RateLimits", testRateLimits},
		{"Placement", testPlacement},
		{"Demand", testDemand},
		{"Warm", testWarm},
		{"PlacementTrim", testPlacementTrim},
	}
	for _, sub := range subjects {
		t.Run(sub.name, func(t *testing.T) {
			t.Parallel()
			sub.run(t, s)
		})
	}
}

type suite struct {
	factory Factory
}
