package pgplane

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
)

// TestMain runs the tests, stops the test server, and then fails the run when a goroutine
// outlived its test: the plane owns LISTEN loops, settle and claim groupers and maintenance,
// and Close must end every one of them.
func TestMain(m *testing.M) {
	code := pgtest.Main(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
