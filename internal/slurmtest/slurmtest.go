// Package slurmtest starts a private single-node SLURM cluster for the tests of one test
// binary: its own munged (own socket and key), a slurm.conf in a temporary directory with
// its own ports, state and spool directories, slurmctld and slurmd in the foreground as
// children of the test process, and one node (this machine, named by its short host name,
// CPUs=2) in one partition. Nothing depends on a system service or on /etc/slurm, and the
// whole cluster is stopped when the binary's tests end; a watchdog stops it too when the
// test process dies first, and the next run kills what a killed run left behind.
//
// A package that uses it calls Main from TestMain and Shared from each test:
//
//	func TestMain(m *testing.M) { os.Exit(slurmtest.Main(m)) }
//
//	func TestSomething(t *testing.T) {
//		c := slurmtest.Shared(t)
//		cmd := exec.Command("sbatch", "--wrap", "true")
//		cmd.Env = c.Env() // SLURM_CONF names the private cluster
//		…
//	}
//
// Where SLURM is not installed (or the tests do not run as root, which slurmd needs to run
// jobs) the tests skip with a line saying how to install it; with CI=true in the
// environment they fail instead.
//
// Accounting storage is off: reconcile with squeue and scontrol, not sacct.
package slurmtest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// InstallHint is what a skipped test says when SLURM is missing.
const InstallHint = "SLURM is not installed: install it with `apt-get install -y slurm-wlm munge`; " +
	"the tests look for munged, slurmctld, slurmd, sbatch, squeue, scancel, scontrol and sinfo on PATH and in /usr/sbin"

// Partition is the name of the cluster's only partition (the default one).
const Partition = "lakeshore"

// GPUs is how many GPUs the node declares (backed by /dev/null: enough for SLURM to
// schedule --gres=gpu:N, not to run CUDA).
const GPUs = 2

// GPUType is the type of the node's GPUs (--gres=gpu:GPUType:N).
const GPUType = "a100"

// Feature is the node's one feature (--constraint=Feature).
const Feature = "east"

// Environment variables that mark every process of a test cluster, so that a later run can
// find and kill what a killed run left behind.
const (
	envDir   = "SLURMTEST_DIR"
	envOwner = "SLURMTEST_OWNER"
	dirGlob  = "slurmtest-*"
)

var (
	// ErrNotInstalled is returned by Start when a SLURM or munge program cannot be found.
	ErrNotInstalled = errors.New("SLURM is not installed")
	// ErrNotRoot is returned by Start when the test process is not root: slurmd runs jobs
	// as their submitting user and needs root to do so.
	ErrNotRoot = errors.New("a private SLURM needs root (slurmd runs jobs as their user): run the tests as root")
)

// Cluster is a running private SLURM.
type Cluster struct {
	// Dir is the temporary directory holding the configuration, state, spool and logs.
	Dir string
	// Conf is the path of slurm.conf; SLURM's commands find the cluster through
	// SLURM_CONF=Conf (see Env).
	Conf string
	// Node is the node's name (this machine's short host name).
	Node string
	// ControllerPort and NodePort are slurmctld's and slurmd's loopback ports.
	ControllerPort, NodePort int
	// MemoryMB is the node's RealMemory in MiB.
	MemoryMB int64

	bin      map[string]string // program name → path
	munged   *exec.Cmd
	ctld     *exec.Cmd
	slurmd   *exec.Cmd
	watchdog *os.Process
}

var (
	mu       sync.Mutex
	cluster  *Cluster
	startErr error
	started  bool
)

// Main runs the tests of m and then stops the cluster if one was started. Use it from
// TestMain: os.Exit(slurmtest.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	StopShared()
	return code
}

// StopShared stops the cluster Shared started, if any (for a TestMain that wraps m.Run
// in another helper's Main, such as pgtest.Main, and so cannot use Main).
func StopShared() {
	mu.Lock()
	defer mu.Unlock()
	if cluster != nil {
		if err := cluster.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "slurmtest: stop: %v\n", err)
		}
		cluster = nil
	}
}

// Shared returns the cluster of this test binary, starting it on first use. Where SLURM is
// missing or the tests do not run as root it skips t (fails it with CI=true); a cluster
// that does not start fails t.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if !started {
		started = true
		cluster, startErr = Start()
	}
	if errors.Is(startErr, ErrNotInstalled) || errors.Is(startErr, ErrNotRoot) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("slurmtest: %v (CI=true: a missing SLURM fails the run)", startErr)
		}
		if errors.Is(startErr, ErrNotInstalled) {
			t.Skipf("%s (%v)", InstallHint, startErr)
		}
		t.Skipf("slurmtest: %v", startErr)
	}
	if startErr != nil {
		t.Fatalf("slurmtest: %v", startErr)
	}
	return cluster
}

// Env returns this process's environment with SLURM_CONF naming the cluster, for SLURM's
// commands (and, through sbatch's --export=ALL, for the jobs they submit). It also carries
// the marker by which leftovers of a killed run are found.
func (c *Cluster) Env() []string {
	env := make([]string, 0, len(os.Environ())+2)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SLURM_CONF=") && !strings.HasPrefix(kv, envDir+"=") {
			env = append(env, kv)
		}
	}
	return append(env, "SLURM_CONF="+c.Conf, envDir+"="+c.Dir)
}

// Command returns SLURM's program name (sbatch, squeue, scontrol…) with args, set up to
// talk to the cluster.
func (c *Cluster) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	path := name
	if p, ok := c.bin[name]; ok {
		path = p
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = c.Env()
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// Logs returns the tail of the daemons' logs, for a failing test's message.
func (c *Cluster) Logs() string {
	var b strings.Builder
	for _, name := range []string{"munged.log", "slurmctld.log", "slurmd.log"} {
		data, _ := os.ReadFile(filepath.Join(c.Dir, "log", name))
		fmt.Fprintf(&b, "--- %s\n%s\n", name, tail(string(data), 1500))
	}
	return b.String()
}

var programs = []string{"munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "scontrol", "sinfo"}

// FindPrograms returns the paths of SLURM's and munge's programs, looked up on PATH and in
// /usr/sbin and /usr/bin. Errors: ErrNotInstalled naming the missing ones.
func FindPrograms() (map[string]string, error) {
	found := map[string]string{}
	var missing []string
	for _, name := range programs {
		if p, err := exec.LookPath(name); err == nil {
			found[name] = p
			continue
		}
		for _, dir := range []string{"/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"} {
			if st, err := os.Stat(filepath.Join(dir, name)); err == nil && !st.IsDir() {
				found[name] = filepath.Join(dir, name)
				break
			}
		}
		if found[name] == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: %s not found", ErrNotInstalled, strings.Join(missing, ", "))
	}
	return found, nil
}

// Start starts a new private cluster and waits until its node is idle (up to two minutes:
// the machine may be loaded). Stop it with Stop. Errors: ErrNotInstalled, ErrNotRoot, or
// what a daemon said (with its log's tail).
func Start() (*Cluster, error) {
	bin, err := FindPrograms()
	if err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	reapLeftovers()
	c := &Cluster{bin: bin, Node: shortHostname(), MemoryMB: nodeMemoryMB()}
	if c.Dir, err = os.MkdirTemp("", dirGlob); err != nil {
		return nil, err
	}
	if err := c.start(); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) start() error {
	if err := os.Chmod(c.Dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(c.Dir, "owner"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return err
	}
	for _, sub := range []string{"state", "spool", "log"} {
		if err := os.Mkdir(filepath.Join(c.Dir, sub), 0o755); err != nil {
			return err
		}
	}
	c.watch()
	if err := c.startMunge(); err != nil {
		return err
	}
	var lastErr error
	for range 3 { // a free port may be taken between the probe and the daemon's bind
		if lastErr = c.startSlurm(); lastErr == nil {
			return nil
		}
		logs := c.Logs()
		c.stopSlurm()
		if !strings.Contains(logs, "in use") {
			break
		}
	}
	return lastErr
}

// startMunge starts a private munged: its own key (128 random bytes), socket, pid, seed and
// log files, run as the user munge when it exists (munged refuses a key it does not own).
func (c *Cluster) startMunge() error {
	dir := filepath.Join(c.Dir, "munge")
	if err := os.Mkdir(dir, 0o711); err != nil {
		return err
	}
	key := make([]byte, 128)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	keyFile := filepath.Join(dir, "munge.key")
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		return err
	}
	var cred *syscall.Credential
	if u, err := user.Lookup("munge"); err == nil {
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		for _, p := range []string{dir, keyFile} {
			if err := os.Chown(p, uid, gid); err != nil {
				return err
			}
		}
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	socket := c.mungeSocket()
	cmd := exec.Command(c.bin["munged"], "--foreground", "--force",
		"--socket="+socket, "--key-file="+keyFile, "--pid-file="+filepath.Join(dir, "munged.pid"),
		"--seed-file="+filepath.Join(dir, "munged.seed"), "--log-file="+filepath.Join(dir, "munged.log"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
	cmd.Env = c.daemonEnv()
	if err := c.startDaemon(cmd, "munged.out"); err != nil {
		return fmt.Errorf("start munged: %w", err)
	}
	c.munged = cmd
	if err := waitFor(30*time.Second, func() bool { _, err := os.Stat(socket); return err == nil }); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "munged.log"))
		out, _ := os.ReadFile(filepath.Join(c.Dir, "log", "munged.out"))
		return fmt.Errorf("munged did not create its socket within 30s:\n%s%s", tail(string(log), 1500), out)
	}
	return nil
}

func (c *Cluster) mungeSocket() string { return filepath.Join(c.Dir, "munge", "munge.socket") }

// startSlurm writes slurm.conf on fresh ports and starts slurmctld and slurmd, then waits
// until the node is idle.
func (c *Cluster) startSlurm() error {
	var err error
	if c.ControllerPort, err = freePort(); err != nil {
		return err
	}
	if c.NodePort, err = freePort(); err != nil {
		return err
	}
	for c.NodePort == c.ControllerPort {
		if c.NodePort, err = freePort(); err != nil {
			return err
		}
	}
	c.Conf = filepath.Join(c.Dir, "slurm.conf")
	if err := os.WriteFile(c.Conf, []byte(c.config()), 0o644); err != nil {
		return err
	}
	// gres.conf sits beside slurm.conf; the GPUs are /dev/null so that --gres=gpu:N can be
	// scheduled (and checked) on a machine without GPUs.
	// They are of type GPUType, so --gres=gpu:TYPE:N is scheduled too.
	gres := fmt.Sprintf("NodeName=%s Name=gpu Type=%s File=/dev/null\n", c.Node, GPUType)
	for i := 1; i < GPUs; i++ {
		gres += fmt.Sprintf("NodeName=%s Name=gpu Type=%s File=/dev/zero\n", c.Node, GPUType)
	}
	if err := os.WriteFile(filepath.Join(c.Dir, "gres.conf"), []byte(gres), 0o644); err != nil {
		return err
	}
	ctld := exec.Command(c.bin["slurmctld"], "-D", "-f", c.Conf)
	ctld.Env = c.daemonEnv()
	ctld.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.startDaemon(ctld, "slurmctld.out"); err != nil {
		return fmt.Errorf("start slurmctld: %w", err)
	}
	c.ctld = ctld
	slurmd := exec.Command(c.bin["slurmd"], "-D", "-f", c.Conf, "-N", c.Node)
	slurmd.Env = c.daemonEnv()
	slurmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.startDaemon(slurmd, "slurmd.out"); err != nil {
		return fmt.Errorf("start slurmd: %w", err)
	}
	c.slurmd = slurmd
	var state string
	resumed := false
	err = waitFor(2*time.Minute, func() bool {
		if exited(c.ctld) || exited(c.slurmd) {
			return true
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		out, _ := c.Command(ctx, "sinfo", "--noheader", "--nodes="+c.Node, "--format=%T").Output()
		state = strings.TrimSpace(string(out))
		if !resumed && (strings.HasPrefix(state, "drain") || strings.HasPrefix(state, "down") || strings.HasPrefix(state, "inval")) {
			// A node registering late is drained or down at first; resume it once.
			resumed = true
			_ = c.Command(ctx, "scontrol", "update", "nodename="+c.Node, "state=resume").Run()
		}
		return state == "idle"
	})
	if exited(c.ctld) || exited(c.slurmd) || err != nil {
		return fmt.Errorf("the node did not become idle within 2 minutes (sinfo: %q):\n%s", state, c.Logs())
	}
	return nil
}

func (c *Cluster) config() string {
	d := c.Dir
	return fmt.Sprintf(`# A private single-node cluster for Lakeshore's tests (internal/slurmtest).
ClusterName=lakeshoretest
SlurmctldHost=%[1]s(127.0.0.1)
SlurmctldPort=%[2]d
SlurmdPort=%[3]d
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=%[4]s
StateSaveLocation=%[5]s/state
SlurmdSpoolDir=%[5]s/spool
SlurmctldPidFile=%[5]s/slurmctld.pid
SlurmdPidFile=%[5]s/slurmd.pid
SlurmctldLogFile=%[5]s/log/slurmctld.log
SlurmdLogFile=%[5]s/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SlurmdParameters=config_overrides
MpiDefault=none
ReturnToService=2
KillWait=5
DefMemPerCPU=100
MinJobAge=60
SlurmdTimeout=60
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
GresTypes=gpu
NodeName=%[1]s NodeAddr=127.0.0.1 CPUs=2 RealMemory=%[6]d Gres=gpu:%[9]s:%[7]d Feature=%[10]s State=UNKNOWN
PartitionName=%[8]s Nodes=%[1]s Default=YES MaxTime=INFINITE State=UP
`, c.Node, c.ControllerPort, c.NodePort, c.mungeSocket(), d, c.MemoryMB, GPUs, Partition, GPUType, Feature)
}

// daemonEnv is the daemons' environment: this process's, with SLURM_CONF and the markers.
func (c *Cluster) daemonEnv() []string {
	return append(c.Env(), envOwner+"="+strconv.Itoa(os.Getpid()))
}

func (c *Cluster) startDaemon(cmd *exec.Cmd, logName string) error {
	out, err := os.Create(filepath.Join(c.Dir, "log", logName))
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		out.Close()
		return err
	}
	go func() {
		_ = cmd.Wait()
		out.Close()
	}()
	return nil
}

// Stop cancels the cluster's jobs, stops slurmd, slurmctld and munged (SIGTERM, then
// SIGKILL after 10 s), kills any process left with the cluster's marker (job steps), and
// removes its directory.
func (c *Cluster) Stop() error {
	if c.ctld != nil && !exited(c.ctld) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		_ = c.Command(ctx, "scancel", "--partition="+Partition).Run()
		_ = waitFor(15*time.Second, func() bool {
			out, err := c.Command(ctx, "squeue", "--noheader", "--format=%i").Output()
			return err != nil || len(bytes.TrimSpace(out)) == 0
		})
		cancel()
	}
	c.stopSlurm()
	stop(c.munged)
	killMarked(func(dir string, owner int) bool { return dir == c.Dir })
	if c.watchdog != nil {
		_ = c.watchdog.Kill()
	}
	return os.RemoveAll(c.Dir)
}

func (c *Cluster) stopSlurm() {
	stop(c.slurmd)
	stop(c.ctld)
	c.slurmd, c.ctld = nil, nil
}

// stop sends SIGTERM to cmd's process group and SIGKILL after 10 s.
func stop(cmd *exec.Cmd) {
	if cmd == nil || cmd.Process == nil || exited(cmd) {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	if waitFor(10*time.Second, func() bool { return exited(cmd) }) != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = waitFor(10*time.Second, func() bool { return exited(cmd) })
	}
}

// exited reports whether cmd's process has ended (a zombie not yet reaped counts).
func exited(cmd *exec.Cmd) bool {
	if cmd == nil || cmd.Process == nil {
		return true
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
	if err != nil {
		return true
	}
	// The state follows the command name's closing parenthesis.
	s := string(data)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] == 'Z' || s[i+2] == 'X'
	}
	return false
}

// watch starts a watchdog process that kills the cluster's processes and removes its
// directory when this test process dies without calling Stop (a panic, a timeout, a
// kill). It runs in its own process group, out of reach of a signal to ours.
func (c *Cluster) watch() {
	script := fmt.Sprintf(`while kill -0 %d 2>/dev/null; do sleep 1; done
for e in /proc/[0-9]*/environ; do
  if tr '\0' '\n' < "$e" 2>/dev/null | grep -qxF -e %q -e %q; then
    p=${e#/proc/}; kill -9 "${p%%/environ}" 2>/dev/null
  fi
done
rm -rf %q`, os.Getpid(), envDir+"="+c.Dir, "SLURM_CONF="+filepath.Join(c.Dir, "slurm.conf"), c.Dir)
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err == nil {
		go cmd.Wait() //nolint:errcheck // reaped when it exits
		c.watchdog = cmd.Process
	}
}

// reapLeftovers kills the processes of clusters whose test process is gone (a run killed
// before its watchdog could act) and removes their directories.
func reapLeftovers() {
	killMarked(func(dir string, owner int) bool {
		if owner == 0 {
			data, _ := os.ReadFile(filepath.Join(dir, "owner"))
			owner, _ = strconv.Atoi(strings.TrimSpace(string(data)))
		}
		return owner == 0 || !alive(owner)
	})
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirGlob))
	for _, dir := range dirs {
		data, err := os.ReadFile(filepath.Join(dir, "owner"))
		if err != nil {
			continue // being created, or not ours
		}
		if owner, _ := strconv.Atoi(strings.TrimSpace(string(data))); owner != 0 && !alive(owner) {
			os.RemoveAll(dir)
		}
	}
}

// killMarked sends SIGKILL to every process carrying a cluster's marker (SLURMTEST_DIR, or
// a SLURM_CONF inside a test cluster's directory) for which doomed(dir, owner) is true.
func killMarked(doomed func(dir string, owner int) bool) {
	self := os.Getpid()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		environ, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		var dir string
		owner := 0
		for _, kv := range bytes.Split(environ, []byte{0}) {
			s := string(kv)
			switch {
			case strings.HasPrefix(s, envDir+"="):
				dir = strings.TrimPrefix(s, envDir+"=")
			case strings.HasPrefix(s, "SLURM_CONF=") && dir == "":
				conf := strings.TrimPrefix(s, "SLURM_CONF=")
				if m, _ := filepath.Match(filepath.Join(os.TempDir(), dirGlob, "slurm.conf"), conf); m {
					dir = filepath.Dir(conf)
				}
			case strings.HasPrefix(s, envOwner+"="):
				owner, _ = strconv.Atoi(strings.TrimPrefix(s, envOwner+"="))
			}
		}
		if dir != "" && doomed(dir, owner) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func shortHostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "localhost"
	}
	short, _, _ := strings.Cut(h, ".")
	return short
}

// nodeMemoryMB is the node's RealMemory: three quarters of this machine's memory (at least
// 1 GiB), so that --mem requests are scheduled and never exceed what the machine has.
func nodeMemoryMB() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 1024
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, _ := strconv.ParseInt(fields[1], 10, 64)
			return max(kb/1024*3/4, 1024)
		}
	}
	return 1024
}

func waitFor(timeout time.Duration, done func() bool) error {
	deadline := time.Now().Add(timeout)
	for {
		if done() {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("timed out")
		}
		time.Sleep(100 * time.Millisecond)
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

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
