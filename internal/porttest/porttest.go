// Package porttest gives tests loopback addresses that no other process takes by chance:
// one whose connections are refused for as long as the test runs (Refused), and one for a
// server the test stops and starts again on the same address (Restartable).
//
// The usual way, listening on port 0 and closing the listener, leaves a free port that any
// other process (a parallel test, another package's server) may take before the test
// dials it: the dial then connects, and a test asserting "refused" fails by chance. Here
// the port stays bound by a socket that never listens: Linux answers every connection to
// it with a reset (ECONNREFUSED), and no other socket can bind it until the test ends.
package porttest

import (
	"fmt"
	"syscall"
	"testing"
)

// Refused returns "127.0.0.1:PORT", an address where nothing listens and whose port no
// other socket can take until t and its subtests end: every dial to it is refused. It
// fails t if the socket cannot be made.
func Refused(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatalf("porttest: socket: %v", err)
	}
	syscall.CloseOnExec(fd)
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("porttest: bind: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatalf("porttest: getsockname: %v", err)
	}
	in4, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		t.Fatalf("porttest: getsockname gave %v", sa)
	}
	return fmt.Sprintf("127.0.0.1:%d", in4.Port)
}
