//go:build race

package lakeshore_test

// raceEnabled: this test binary runs under the race detector, which makes the embedded
// SQLite plane roughly ten times slower.
const raceEnabled = true
