package provider_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine running (a supervisor, a
// launch watcher, a provider call).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
