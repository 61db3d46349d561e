package sqliteplane

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the child-process roles of the crash and multi-process tests when the
// environment asks for one (the test binary re-executes itself), else the tests under goleak.
func TestMain(m *testing.M) {
	if role := os.Getenv(childRoleEnv); role != "" {
		os.Exit(runChild(role))
	}
	goleak.VerifyTestMain(m)
}
