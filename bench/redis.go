package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// redisInstallHint tells how to get redis-server when it is missing.
const redisInstallHint = "install it with `apt-get install redis-server` (Debian) and run again"

// redisServer is a redis-server child process on a free loopback port, started by the
// harness for asynq and stopped after.
type redisServer struct {
	cmd  *exec.Cmd
	addr string
	dir  string
}

// startRedis starts redis-server in dir: AOF on with appendfsync always (the durable table)
// or everysec (sync NORMAL), no RDB snapshots.
func startRedis(ctx context.Context, dir, sync string) (*redisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server not found: %s", redisInstallHint)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	fsync := "always"
	if sync == "NORMAL" {
		fsync = "everysec"
	}
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--appendonly", "yes", "--appendfsync", fsync, "--save", "", "--daemonize", "no",
		"--protected-mode", "yes", "--logfile", "redis.log")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	r := &redisServer{cmd: cmd, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := r.ping(); err == nil {
			return r, nil
		} else if time.Now().After(deadline) {
			r.stop()
			return nil, fmt.Errorf("redis-server on %s did not answer: %w", r.addr, err)
		}
		select {
		case <-ctx.Done():
			r.stop()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// version returns redis-server's version line.
func redisVersion() string {
	out, err := exec.Command("redis-server", "--version").Output()
	if err != nil {
		return "not installed"
	}
	return strings.TrimSpace(string(out))
}

func (r *redisServer) ping() error { return r.command("PING", "+PONG") }

// flush empties the server between runs.
func (r *redisServer) flush() error { return r.command("FLUSHALL", "+OK") }

// command sends one inline command and checks the reply line.
func (r *redisServer) command(cmd, want string) error {
	c, err := net.DialTimeout("tcp", r.addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write([]byte(cmd + "\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != want {
		return fmt.Errorf("redis %s: %q", cmd, strings.TrimSpace(line))
	}
	return nil
}

func (r *redisServer) stop() error {
	if r.cmd.Process == nil {
		return nil
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- r.cmd.Wait() }()
	select {
	case <-done:
		return nil
	case <-time.After(10 * time.Second):
		_ = r.cmd.Process.Kill()
		<-done
		return errors.New("redis-server did not stop on SIGTERM; killed")
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
