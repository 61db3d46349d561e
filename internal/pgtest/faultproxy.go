package pgtest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Fault is what a FaultProxy does to the next COMMIT that passes through it.
type Fault int

// The faults of a FaultProxy.
const (
	// FaultNone passes everything on.
	FaultNone Fault = iota
	// FaultTerminateBeforeCommit terminates the connection's backend
	// (pg_terminate_backend, waiting for it to exit) once the client has sent COMMIT and
	// before the server reads it: the transaction's statements ran, its commit never does.
	FaultTerminateBeforeCommit
	// FaultLoseCommitAnswer lets COMMIT through, waits for the server's answer (the commit
	// is done) and drops the connection instead of passing the answer on: the client cannot
	// know that its transaction committed.
	FaultLoseCommitAnswer
)

// FaultProxy is a TCP proxy between a client (a plane, a data store) and PostgreSQL that
// reads the wire protocol's message framing in both directions, so that a test can break a
// connection at one exact point of a transaction: deterministic faults on a real server,
// with nothing in the client made for the test. It sees COMMITs sent as simple queries (pgx's
// Tx.Commit) and as the extended protocol's Execute of a statement whose text is COMMIT (a
// COMMIT sent in a pipeline, behind the transaction's last statements).
type FaultProxy struct {
	t      testing.TB
	ln     net.Listener
	target string // host:port of the server
	admin  *pgx.Conn

	mu    sync.Mutex
	armed Fault
	fired chan Fault // one value per fault done
}

// NewFaultProxy starts a proxy in front of the server of rawURL (a postgres:// URL) and
// returns it with the URL rewritten to go through it; the proxy stops when t ends. Its
// admin connection, direct to the server, terminates backends.
func NewFaultProxy(t testing.TB, rawURL string) (*FaultProxy, string) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatalf("pgtest: fault proxy: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("pgtest: fault proxy: %v", err)
	}
	admin, err := pgx.Connect(context.Background(), rawURL)
	if err != nil {
		ln.Close()
		t.Fatalf("pgtest: fault proxy: connect: %v", err)
	}
	p := &FaultProxy{t: t, ln: ln, target: u.Host, admin: admin, fired: make(chan Fault, 4)}
	t.Cleanup(func() {
		ln.Close()
		admin.Close(context.Background())
	})
	go p.serve()
	via := *u
	via.Host = ln.Addr().String()
	return p, via.String()
}

// Arm makes the next COMMIT of any connection meet f.
func (p *FaultProxy) Arm(f Fault) {
	p.mu.Lock()
	p.armed = f
	p.mu.Unlock()
}

// take returns the armed fault and disarms it.
func (p *FaultProxy) take() Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.armed
	p.armed = FaultNone
	return f
}

// Await waits for the armed fault to have been done (failing t after 10 s) and returns it.
func (p *FaultProxy) Await() Fault {
	p.t.Helper()
	select {
	case f := <-p.fired:
		return f
	case <-time.After(10 * time.Second):
		p.t.Fatal("the armed fault never fired: no COMMIT passed the proxy")
		return FaultNone
	}
}

func (p *FaultProxy) serve() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		c := &proxiedConn{p: p, client: client, server: server, pid: make(chan uint32, 1)}
		go c.fromServer()
		go c.fromClient()
	}
}

// proxiedConn is one client connection and its server connection.
type proxiedConn struct {
	p              *FaultProxy
	client, server net.Conn
	pid            chan uint32 // the backend's process id, from BackendKeyData

	mu         sync.Mutex
	loseAnswer bool // the COMMIT passed on; drop the connection at its answer
}

func (c *proxiedConn) close() {
	c.client.Close()
	c.server.Close()
}

// readMessage reads one message: typed (a type byte, then a length that counts itself) or,
// for the client's first message, untyped (the startup message).
func readMessage(r io.Reader, typed bool) ([]byte, error) {
	head := 4
	if typed {
		head = 5
	}
	buf := make([]byte, head)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(buf[head-4:]))
	if n < 4 || n > 1<<30 {
		return nil, errors.New("pgtest: fault proxy: bad message length")
	}
	msg := make([]byte, head+n-4)
	copy(msg, buf)
	_, err := io.ReadFull(r, msg[head:])
	return msg, err
}

func (c *proxiedConn) fromClient() {
	defer c.close()
	first := true
	statements := map[string]string{} // the extended protocol's prepared statements: name → SQL
	portals := map[string]string{}    // its portals: name → statement name
	for {
		msg, err := readMessage(c.client, !first)
		if err != nil {
			return
		}
		var commit bool
		if !first {
			switch msg[0] {
			case 'Q': // Query: the SQL
				commit = isCommit(string(msg[5:]))
			case 'P': // Parse: statement name, SQL, …
				if f := cstrings(msg[5:], 2); len(f) == 2 {
					statements[f[0]] = f[1]
				}
			case 'B': // Bind: portal name, statement name, …
				if f := cstrings(msg[5:], 2); len(f) == 2 {
					portals[f[0]] = f[1]
				}
			case 'E': // Execute: portal name, row limit
				if f := cstrings(msg[5:], 1); len(f) == 1 {
					stmt, ok := portals[f[0]]
					commit = ok && isCommit(statements[stmt])
				}
			}
		}
		first = false
		if commit {
			switch c.p.take() {
			case FaultTerminateBeforeCommit:
				pid := <-c.pid
				c.pid <- pid
				var gone bool
				err := c.p.admin.QueryRow(context.Background(), `SELECT pg_terminate_backend($1, 10000)`, int32(pid)).Scan(&gone)
				if err != nil || !gone {
					c.p.t.Errorf("pgtest: fault proxy: terminate backend %d: %v (gone %v)", pid, err, gone)
				}
				c.p.fired <- FaultTerminateBeforeCommit
				// The backend is gone: the COMMIT goes nowhere, and the client reads the
				// server's FATAL and the end of the connection.
			case FaultLoseCommitAnswer:
				c.mu.Lock()
				c.loseAnswer = true
				c.mu.Unlock()
			}
		}
		if _, err := c.server.Write(msg); err != nil {
			return
		}
	}
}

// isCommit reports whether sql is COMMIT alone.
func isCommit(sql string) bool {
	return strings.EqualFold(strings.Trim(sql, "\x00 ;\n\t"), "commit")
}

// cstrings reads the first n NUL-terminated strings of b (fewer: b ended before them).
func cstrings(b []byte, n int) []string {
	var out []string
	for len(out) < n {
		i := bytes.IndexByte(b, 0)
		if i < 0 {
			break
		}
		out = append(out, string(b[:i]))
		b = b[i+1:]
	}
	return out
}

func (c *proxiedConn) fromServer() {
	defer c.close()
	for {
		msg, err := readMessage(c.server, true)
		if err != nil {
			return
		}
		if msg[0] == 'K' && len(msg) >= 9 { // BackendKeyData: process id, secret key
			c.pid <- binary.BigEndian.Uint32(msg[5:9])
		}
		c.mu.Lock()
		lose := c.loseAnswer
		c.mu.Unlock()
		if lose {
			if msg[0] == 'Z' { // ReadyForQuery: the COMMIT is done, its answer swallowed
				c.p.fired <- FaultLoseCommitAnswer
				return
			}
			continue
		}
		if _, err := c.client.Write(msg); err != nil {
			return
		}
	}
}
