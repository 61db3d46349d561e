//go:build race

package planetest

// raceSlowdown scales the suite's latency bounds under the race detector (see wakeLatency).
const raceSlowdown = 5

// raceDetector: this binary runs under the race detector (see skipStatisticalUnderRace).
const raceDetector = true
