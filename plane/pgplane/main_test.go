package pgplane

import (
	"testing"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
)

// TestMain runs the tests, stops the test server, and then fails the run when a goroutine
// outlived its test: the plane owns LISTEN loops, settle and claim groupers and maintenance,
// and Close must end every one of them.
func TestMain(m *testing.M) { pgtest.VerifyMain(m) }
