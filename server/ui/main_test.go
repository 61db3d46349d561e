package ui_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine they started (servers, planes, the
// browser's connection) is still running.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
