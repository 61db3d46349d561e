//go:build !race

package lakeshore_test

const raceEnabled = false
