package wire

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	registerReferenceExts() // vmihailenco/msgpack handlers for the reference checks (interop_test.go)
	goleak.VerifyTestMain(m)
}
