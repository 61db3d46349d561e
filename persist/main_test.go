package persist

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test of the SDK leaves a goroutine behind (the SDK starts
// none of its own; each store's package checks its own with goleak too).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
