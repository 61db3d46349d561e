//go:build race

package planetest

// raceSlowdown scales the suite's latency bounds under the race detector (see wakeLatency).
const raceSlowdown = 5

// RaceDetector reports whether this binary runs under the race detector (go test -race),
// for a plane's tests to leave out what adds nothing there (see skipStatisticalUnderRace).
const RaceDetector = true
