//go:build race

package planetest

// raceSlowdown scales the suite's latency bounds under the race detector (see wakeLatency).
const raceSlowdown = 5
