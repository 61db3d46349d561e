package porttest

import (
	"errors"
	"net"
	"syscall"
	"testing"
)

// TestRefused: a dial to the address is refused, and while the test runs no listener can
// take its port (the race of a closed listener's port this package exists to remove).
func TestRefused(t *testing.T) {
	addr := Refused(t)
	for range 3 {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			t.Fatalf("a dial to %s connected", addr)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("a dial to %s: %v, want connection refused", addr, err)
		}
	}
	if ln, err := net.Listen("tcp", addr); err == nil {
		ln.Close()
		t.Fatalf("another socket could listen on %s", addr)
	}
}
