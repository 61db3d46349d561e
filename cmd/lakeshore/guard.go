package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
)

// guardArg, as the first argument, makes the lakeshore binary run as the exec worker's
// process-group guard instead of the command line.
const guardArg = "__lakeshore-exec-guard"

// runGuard is the guard process: it reads "+PGID" and "-PGID" lines (a command's process
// group started, ended) from in, which is a pipe from its worker, and when the pipe closes —
// the worker exited or died, even by SIGKILL — it sends SIGKILL to every group still
// registered, so no command (nor anything it started) runs on, unfenced, beside the retry
// of its job. It ignores terminal signals: it must outlive its worker.
func runGuard(in io.Reader) int {
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
	groups := map[int]bool{}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		line := sc.Text()
		if len(line) < 2 {
			continue
		}
		pgid, err := strconv.Atoi(line[1:])
		if err != nil || pgid <= 1 {
			continue
		}
		switch line[0] {
		case '+':
			groups[pgid] = true
		case '-':
			delete(groups, pgid)
		}
	}
	for pgid := range groups {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	killMarked(os.Getenv(guardOfEnv))
	return 0
}

// guardEnv is the environment variable every command of an exec worker carries, set to its
// guard's mark (and inherited by whatever the command starts). It closes the one gap the
// process groups leave: a worker killed between starting a command and registering its
// group (a few microseconds, but a loaded machine can stretch them) left the command's
// children running (TestExecCommandDiesWithWorker).
const guardEnv = "LAKESHORE_EXEC_GUARD"

// guardOfEnv gives the guard process the mark to look for (a name apart from guardEnv, so
// that the guard never matches itself).
const guardOfEnv = "LAKESHORE_EXEC_GUARD_OF"

// killMarked sends SIGKILL to every process whose environment has guardEnv=mark, reading
// /proc (Linux; elsewhere it finds nothing), and scans again while it finds any, so that a
// process forked during a scan is found by the next. A killed process's environment reads
// empty once it is a zombie.
func killMarked(mark string) {
	if mark == "" {
		return
	}
	entry := []byte(guardEnv + "=" + mark + "\x00") // the first variable of an environment
	inner := append([]byte{0}, entry...)            // any later one
	self := os.Getpid()
	for range 50 {
		dirs, err := os.ReadDir("/proc")
		if err != nil {
			return
		}
		found := false
		for _, d := range dirs {
			pid, err := strconv.Atoi(d.Name())
			if err != nil || pid == self {
				continue
			}
			env, err := os.ReadFile("/proc/" + d.Name() + "/environ")
			if err != nil {
				continue
			}
			if bytes.HasPrefix(env, entry) || bytes.Contains(env, inner) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				found = true
			}
		}
		if !found {
			return
		}
	}
}

// groupGuard is this process's connection to its guard process, started with the first
// command. Without a guard (the executable cannot be found or started) commands still run;
// on Linux the parent-death signal then covers each command itself.
type groupGuard struct {
	once sync.Once
	mu   sync.Mutex
	w    io.WriteCloser // nil when no guard runs
	mark string         // the guard's mark (guardEnv), "" when no guard runs
}

// guard is the process's guard of command process groups.
var guard groupGuard

func (g *groupGuard) start() {
	exe, err := os.Executable()
	if err != nil {
		return
	}
	random := make([]byte, 8)
	_, _ = rand.Read(random) // never fails (crypto/rand)
	mark := strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(random)
	cmd := exec.Command(exe, guardArg)
	cmd.Env = append(os.Environ(), guardOfEnv+"="+mark)
	// Its own process group: a Ctrl-C to the worker's group does not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	w, err := cmd.StdinPipe()
	if err != nil {
		return
	}
	if err := cmd.Start(); err != nil {
		return
	}
	// Never waited for: it ends only when this process does (the pipe closes).
	g.w, g.mark = w, mark
}

// environ is the environment entry that marks a command for the guard (none without a
// guard). It starts the guard if it is not running yet.
func (g *groupGuard) environ() []string {
	g.ready()
	if g.mark == "" {
		return nil
	}
	return []string{guardEnv + "=" + g.mark}
}

// ready starts the guard process if it is not running yet, so that a register right after a
// command starts is one write to a pipe.
func (g *groupGuard) ready() { g.once.Do(g.start) }

// register asks the guard to kill process group pgid if this process dies.
func (g *groupGuard) register(pgid int) { g.send('+', pgid) }

// unregister tells the guard that process group pgid ended.
func (g *groupGuard) unregister(pgid int) { g.send('-', pgid) }

func (g *groupGuard) send(op byte, pgid int) {
	g.ready()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.w != nil {
		if _, err := fmt.Fprintf(g.w, "%c%d\n", op, pgid); err != nil {
			g.w = nil // the guard is gone: carry on without it
		}
	}
}
