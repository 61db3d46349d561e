package pgplane

import (
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
	"github.com/stretchr/testify/require"
)

// fault is what a faultProxy does to the next COMMIT that passes through it.
type fault int

const (
	faultNone fault = iota
	// faultTerminateBeforeCommit terminates the connection's backend
	// (pg_terminate_backend, waiting for it to exit) once the client has sent COMMIT and
	// before the server reads it: the transaction's statements ran, its commit never does.
	faultTerminateBeforeCommit
	// faultLoseCommitAnswer lets COMMIT through, waits for the server's answer (the commit
	// is done) and drops the connection instead of passing the answer on: the client cannot
	// know that its transaction committed.
	faultLoseCommitAnswer
)

// faultProxy is a TCP proxy between a plane and PostgreSQL that reads the wire protocol's
// message framing in both directions, so that a test can break a connection at one exact
// point of a transaction: deterministic faults on a real server, with nothing in the plane
// made for the test.
type faultProxy struct {
	t      *testing.T
	ln     net.Listener
	target string // host:port of the server
	admin  *pgx.Conn

	mu    sync.Mutex
	armed fault
	fired chan fault // one value per fault done
}

// newFaultProxy starts a proxy in front of the server of url and returns it with url
// rewritten to go through it. admin is a direct connection used to terminate backends.
func newFaultProxy(t *testing.T, rawURL string) (*faultProxy, string) {
	t.Helper()
	u, err := url.Parse(rawURL)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &faultProxy{t: t, ln: ln, target: u.Host, admin: mustConn(t, rawURL), fired: make(chan fault, 4)}
	t.Cleanup(func() { ln.Close() })
	go p.serve()
	via := *u
	via.Host = ln.Addr().String()
	return p, via.String()
}

// arm makes the next COMMIT of any connection meet f.
func (p *faultProxy) arm(f fault) {
	p.mu.Lock()
	p.armed = f
	p.mu.Unlock()
}

// take returns the armed fault and disarms it.
func (p *faultProxy) take() fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.armed
	p.armed = faultNone
	return f
}

// await waits for the armed fault to have been done.
func (p *faultProxy) await() fault {
	p.t.Helper()
	select {
	case f := <-p.fired:
		return f
	case <-time.After(10 * time.Second):
		p.t.Fatal("the armed fault never fired: no COMMIT passed the proxy")
		return faultNone
	}
}

func (p *faultProxy) serve() {
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
	p              *faultProxy
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
		return nil, errors.New("faultProxy: bad message length")
	}
	msg := make([]byte, head+n-4)
	copy(msg, buf)
	_, err := io.ReadFull(r, msg[head:])
	return msg, err
}

func (c *proxiedConn) fromClient() {
	defer c.close()
	first := true
	for {
		msg, err := readMessage(c.client, !first)
		if err != nil {
			return
		}
		first = false
		if msg[0] == 'Q' && strings.EqualFold(strings.TrimRight(string(msg[5:]), "\x00 ;"), "commit") {
			switch c.p.take() {
			case faultTerminateBeforeCommit:
				pid := <-c.pid
				c.pid <- pid
				var gone bool
				err := c.p.admin.QueryRow(context.Background(), `SELECT pg_terminate_backend($1, 10000)`, int32(pid)).Scan(&gone)
				if err != nil || !gone {
					c.p.t.Errorf("faultProxy: terminate backend %d: %v (gone %v)", pid, err, gone)
				}
				c.p.fired <- faultTerminateBeforeCommit
				// The backend is gone: the COMMIT goes nowhere, and the client reads the
				// server's FATAL and the end of the connection.
			case faultLoseCommitAnswer:
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
				c.p.fired <- faultLoseCommitAnswer
				return
			}
			continue
		}
		if _, err := c.client.Write(msg); err != nil {
			return
		}
	}
}
