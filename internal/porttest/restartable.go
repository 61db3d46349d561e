package porttest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"testing"
)

// Restartable returns "127.0.0.1:PORT", a loopback address free now whose port lies outside
// the system's ephemeral port range (/proc/sys/net/ipv4/ip_local_port_range), for a server
// a test stops and starts again on the same address. The system hands out ephemeral ports
// only (a listener on port 0, an outgoing connection), so while the server is down no
// other socket of this machine is given its port: a port from a closed listener on port 0
// could be given to any other process (a parallel package's server, a client's connection)
// in that window, and the restart then failed to bind. Only a socket binding that exact
// port could take it. When the range cannot be read or leaves no room below it, the port
// is an ephemeral one, as a listener on port 0 gives.
func Restartable(t testing.TB) string {
	t.Helper()
	addr, err := RestartableAddr()
	if err != nil {
		t.Fatalf("porttest: %v", err)
	}
	return addr
}

// RestartableAddr is Restartable for code without a testing.TB (a helper that starts a
// server process, as internal/pgtest does).
func RestartableAddr() (string, error) {
	if low, ok := ephemeralLow(); ok && low > restartableMin+1000 {
		for range 100 {
			addr := fmt.Sprintf("127.0.0.1:%d", restartableMin+rand.N(low-restartableMin))
			if l, err := net.Listen("tcp", addr); err == nil {
				l.Close()
				return addr, nil
			}
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("listen: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// restartableMin is the lowest port Restartable picks: well above the ports services are
// given by convention (below 10000 as a rule).
const restartableMin = 10000

// ephemeralLow is the first port of the system's ephemeral range.
func ephemeralLow() (int, bool) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, false
	}
	var low, high int
	if _, err := fmt.Sscan(string(b), &low, &high); err != nil {
		return 0, false
	}
	return low, true
}
