package porttest

import (
	"errors"
	"net"
	"strconv"
	"strings"
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

// TestRestartable: the address is free (a listener binds it, and binds it again once
// closed), and its port lies below the system's ephemeral range, which no listener on port 0
// or outgoing connection is given.
func TestRestartable(t *testing.T) {
	addr := Restartable(t)
	for range 2 {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("listen on %s: %v", addr, err)
		}
		ln.Close()
	}
	low, ok := ephemeralLow()
	if !ok || low <= restartableMin+1000 {
		t.Skip("no room below the ephemeral range (or no /proc/sys/net/ipv4/ip_local_port_range): the port is an ephemeral one")
	}
	port := addr[strings.LastIndex(addr, ":")+1:]
	if n, err := strconv.Atoi(port); err != nil || n < restartableMin || n >= low {
		t.Fatalf("port %s: want one in [%d, %d), below the ephemeral range", port, restartableMin, low)
	}
}
