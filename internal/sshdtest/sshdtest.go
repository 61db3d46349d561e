// Package sshdtest starts real OpenSSH servers for tests: /usr/sbin/sshd in the
// foreground (-D -e) as a child of the test process, on a free port of a loopback address,
// with its own host key, config, pid file and authorized_keys in a temporary directory
// (UsePAM no, StrictModes no, public keys only). Nothing depends on a system sshd service.
//
// Sessions get SHLVL=1 (SetEnv): Debian's bash, the login shell that runs each session's
// command, sources ~/.bashrc when run by sshd at shell level 1, and a slow .bashrc (on the
// test machines root's runs `pyenv init`, whose rehash serialises on a lock) would make
// every call of a test wait on it. At level 2 bash skips it.
//
// A test calls Start for each "host" (give each its own loopback address, 127.0.0.1,
// 127.0.0.2…, so the hosts are told apart), then writes KnownHostsLine of each server to
// a known_hosts file and logs in as the current user with KeyFile. Kill drops a server as a
// host that dies: SIGKILL to sshd and to every connection process it forked.
//
// Where sshd is missing the test skips with the install command; with CI=true in the
// environment it fails instead.
package sshdtest

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// SSHD is the server the tests run.
const SSHD = "/usr/sbin/sshd"

// InstallHint is what a skipped test says when sshd is missing.
const InstallHint = "OpenSSH's server is not installed (" + SSHD + "): install it with `apt-get install -y openssh-server`"

// Server is one running sshd.
type Server struct {
	// Address is the loopback address it listens on; Port its port.
	Address string
	Port    int
	// Dir holds its config, keys and log.
	Dir string
	// KeyFile is an unencrypted ed25519 private key whose public half is authorized for
	// every user (AuthorizedKeysFile is Dir/authorized_keys).
	KeyFile string
	// HostKey is the server's host public key.
	HostKey ssh.PublicKey

	cmd  *exec.Cmd
	once sync.Once
	done chan struct{}
}

// KnownHostsLine is the known_hosts line for the server ("[ADDR]:PORT ssh-ed25519 …").
func (s *Server) KnownHostsLine() string {
	return knownhosts.Line([]string{net.JoinHostPort(s.Address, strconv.Itoa(s.Port))}, s.HostKey)
}

// Start runs sshd on address (a loopback address such as 127.0.0.1 or 127.0.0.2) and a free
// port until the test ends. It skips the test when sshd is missing (fails with CI=true).
func Start(t testing.TB, address string) *Server {
	t.Helper()
	if _, err := os.Stat(SSHD); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s (CI=true: not skipped)", InstallHint)
		}
		t.Skip(InstallHint)
	}
	if os.Geteuid() == 0 {
		// sshd run by root needs its privilege separation directory.
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			t.Fatalf("sshd: create /run/sshd: %v", err)
		}
	}
	dir := t.TempDir()
	_, hostPub := writeKey(t, filepath.Join(dir, "host_ed25519"))
	userKey := filepath.Join(dir, "user_ed25519")
	_, userPub := writeKey(t, userKey)
	if err := os.WriteFile(filepath.Join(dir, "authorized_keys"), ssh.MarshalAuthorizedKey(userPub), 0o600); err != nil {
		t.Fatal(err)
	}
	var lastErr error
	for range 5 { // a free port may be taken between finding it and sshd binding it
		port := freePort(t, address)
		s := &Server{Address: address, Port: port, Dir: dir, KeyFile: userKey, HostKey: hostPub, done: make(chan struct{})}
		if lastErr = s.start(); lastErr == nil {
			t.Cleanup(s.Kill)
			return s
		}
	}
	t.Fatalf("sshd: %v", lastErr)
	return nil
}

func (s *Server) start() error {
	conf := filepath.Join(s.Dir, "sshd_config")
	text := fmt.Sprintf(`Port %d
ListenAddress %s
HostKey %s
PidFile %s
AuthorizedKeysFile %s
UsePAM no
StrictModes no
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
PrintMotd no
MaxSessions 100
MaxStartups 100
LogLevel ERROR
SetEnv SHLVL=1
`, s.Port, s.Address, filepath.Join(s.Dir, "host_ed25519"), filepath.Join(s.Dir, "sshd.pid"), filepath.Join(s.Dir, "authorized_keys"))
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(s.Dir, "sshd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	s.cmd = exec.Command(SSHD, "-D", "-e", "-f", conf)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlives the test
	if err := s.cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- s.cmd.Wait(); close(s.done) }()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		if s.answers() {
			return nil
		}
		select {
		case err := <-exited:
			log, _ := os.ReadFile(filepath.Join(s.Dir, "sshd.log"))
			return fmt.Errorf("sshd exited (%v) before it answered on %s:%d: %s", err, s.Address, s.Port, log)
		case <-ctx.Done():
			s.Kill()
			return fmt.Errorf("sshd did not answer on %s:%d within 20s", s.Address, s.Port)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// answers reports whether the server sends its SSH banner.
func (s *Server) answers() bool {
	c, err := net.DialTimeout("tcp", net.JoinHostPort(s.Address, strconv.Itoa(s.Port)), time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "SSH-")
}

// Kill drops the server as a host that dies: SIGKILL to every connection process sshd
// forked, then to sshd. It waits until sshd has exited. Safe to call twice.
func (s *Server) Kill() {
	s.once.Do(func() {
		if s.cmd == nil || s.cmd.Process == nil {
			return
		}
		pid := s.cmd.Process.Pid
		_ = s.cmd.Process.Signal(syscall.SIGSTOP) // forks no more connections while its children go
		for _, c := range descendants(pid) {
			_ = syscall.Kill(c, syscall.SIGKILL)
		}
		_ = s.cmd.Process.Kill()
		<-s.done
	})
}

// Log is sshd's log so far.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "sshd.log"))
	return string(b)
}

// KillLaunches kills what a host that dies takes with it: every launch an ssh provider
// recorded in dir (the host's directory: DIR/run/ID.pid), its process group and every
// process below it (a job a worker runs in a group of its own included), with SIGKILL.
func KillLaunches(dir string) {
	pids, _ := filepath.Glob(filepath.Join(dir, "run", "*.pid"))
	for _, f := range pids {
		b, _ := os.ReadFile(f)
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 1 {
			continue
		}
		_ = syscall.Kill(pid, syscall.SIGSTOP) // starts no more processes while they go
		for _, c := range descendants(pid) {
			_ = syscall.Kill(c, syscall.SIGKILL)
		}
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// descendants lists the processes below pid (children, their children…), from /proc.
func descendants(pid int) []int {
	parent := map[int]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		pp, _ := strconv.Atoi(f[1])
		parent[p] = pp
	}
	var out []int
	below := map[int]bool{pid: true}
	for changed := true; changed; {
		changed = false
		for p, pp := range parent {
			if below[pp] && !below[p] {
				below[p], changed = true, true
				out = append(out, p)
			}
		}
	}
	return out
}

// writeKey writes a fresh unencrypted ed25519 private key to path (OpenSSH format) and
// returns its signer and public key.
func writeKey(t testing.TB, path string) (ssh.Signer, ssh.PublicKey) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return signer, signer.PublicKey()
}

// freePort returns a port free on address now.
func freePort(t testing.TB, address string) int {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(address, "0"))
	if err != nil {
		t.Fatalf("listen on %s: %v", address, err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// WriteKnownHosts writes the known_hosts lines of servers to path.
func WriteKnownHosts(t testing.TB, path string, servers ...*Server) {
	t.Helper()
	var b strings.Builder
	for _, s := range servers {
		b.WriteString(s.KnownHostsLine() + "\n")
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}
