//go:build !race

package planetest

// raceSlowdown scales the suite's latency bounds under the race detector (see wakeLatency):
// 1 in a normal build, where the bounds are asserted as written.
const raceSlowdown = 1

// raceDetector: this binary runs under the race detector (see skipStatisticalUnderRace).
const raceDetector = false
