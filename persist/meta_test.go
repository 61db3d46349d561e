package persist

import (
	"strings"
	"testing"
	"time"
)

// TestWaitDurationsRounded: a wait's timeout and a measured wait are said to the
// millisecond in messages: the HTTP store sends the time left of its caller's 1.5 s
// (1.499999259 s), which the timeout's message quoted as "within 1.499999259s".
func TestWaitDurationsRounded(t *testing.T) {
	r := &MetaRequest{BatchSize: 2, Fields: []string{"x"}, Task: "t", Partition: DefaultPartition, Wait: true,
		Timeout: 1499999259 * time.Nanosecond}
	if msg := r.TimeoutError().Error(); !strings.Contains(msg, "within 1.5s") {
		t.Errorf("TimeoutError = %q; want it to say within 1.5s", msg)
	}
	e := &BackpressureError{Partition: "p", Unconsumed: 3, Records: 1, Limit: 3, Waited: 2000123456 * time.Nanosecond}
	if msg := e.Error(); !strings.Contains(msg, "(waited 2s)") {
		t.Errorf("BackpressureError = %q; want it to say waited 2s", msg)
	}
	r.Timeout = 500 * time.Microsecond
	if msg := r.TimeoutError().Error(); !strings.Contains(msg, "within 500µs") {
		t.Errorf("TimeoutError = %q; a wait under a millisecond is said as it is", msg)
	}
}
