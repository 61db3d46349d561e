package sshprovider_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/lakeshore-dev/lakeshore/fabric"
	"github.com/lakeshore-dev/lakeshore/internal/sshdtest"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/provider"
	"github.com/lakeshore-dev/lakeshore/provider/sshprovider"
)

// wait bounds every wait for an event (generous: the machine is shared).
const wait = 60 * time.Second

// fixture is an inventory of real sshd servers, one per loopback address.
type fixture struct {
	servers []*sshdtest.Server
	cfg     sshprovider.Config
}

// newFixture starts one sshd per address and an inventory of them, each host with its own
// directory and workers slots.
func newFixture(t testing.TB, workers int, addrs ...string) *fixture {
	t.Helper()
	f := &fixture{}
	for _, a := range addrs {
		f.servers = append(f.servers, sshdtest.Start(t, a))
	}
	known := filepath.Join(t.TempDir(), "known_hosts")
	sshdtest.WriteKnownHosts(t, known, f.servers...)
	f.cfg = sshprovider.Config{Name: "test", KnownHosts: []string{known}, HostRetry: time.Minute}
	for _, s := range f.servers {
		dir := filepath.Join(t.TempDir(), "remote")
		f.cfg.Hosts = append(f.cfg.Hosts, sshprovider.Host{Address: s.Address, Port: s.Port, KeyFile: s.KeyFile, Dir: dir, Workers: workers})
		t.Cleanup(func() { killLaunches(dir) })
	}
	return f
}

func (f *fixture) provider(t testing.TB) *sshprovider.Provider {
	t.Helper()
	p, err := sshprovider.New(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// killLaunches kills every launch recorded in a host's directory (sshdtest.KillLaunches).
func killLaunches(dir string) { sshdtest.KillLaunches(dir) }

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", wait, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func list(t *testing.T, p *sshprovider.Provider) map[string]provider.LaunchStatus {
	t.Helper()
	ls, err := p.List(context.Background())
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	out := map[string]provider.LaunchStatus{}
	for _, l := range ls {
		out[l.ID] = l
	}
	return out
}

var idSeq int

func newID() string {
	idSeq++
	return "L" + strconv.FormatInt(time.Now().UnixNano(), 36) + strconv.Itoa(idSeq)
}

// loop is a worker that writes its environment and working directory to out, then runs
// until SIGTERM, when it writes "term" to out+".term" and exits.
func loop(out string) []string {
	return []string{"sh", "-c", `env > "$1.tmp"; pwd >> "$1.tmp"; mv "$1.tmp" "$1"; trap 'echo term > "$1.term"; exit 0' TERM; while :; do sleep 0.05; done`, "worker", out}
}

// TestLaunchListStop launches a worker on a real sshd: it runs detached in a fresh
// directory with the launch's environment (LAKESHORE_SSH_HOST, the code cache), List shows
// it with its queue, and Stop's SIGTERM drains it; then List no longer shows it.
func TestLaunchListStop(t *testing.T) {
	f := newFixture(t, 2, "127.0.0.1")
	p := f.provider(t)
	ctx := context.Background()
	if err := p.Check(ctx); err != nil {
		t.Fatalf("Check: %v", err)
	}
	out := filepath.Join(t.TempDir(), "out")
	id := newID()
	l := &provider.Launch{ID: id, Namespace: "ns1", Queue: "q1", Command: loop(out),
		Env: map[string]string{"ODD": "it's a \"value\" with $HOME and\nnewline", provider.EnvQueue: "q1"}}
	if err := p.Launch(ctx, l); err != nil {
		t.Fatalf("Launch: %v", err)
	}
	if got := list(t, p)[id]; got.State != provider.LaunchRunning || got.Namespace != "ns1" || got.Queue != "q1" {
		t.Fatalf("List: %+v", got)
	}
	waitFor(t, "the worker to write its environment", func() bool { _, err := os.Stat(out); return err == nil })
	b, _ := os.ReadFile(out)
	env := string(b)
	for _, want := range []string{"ODD=it's a \"value\" with $HOME and\nnewline\n", "LAKESHORE_SSH_HOST=127.0.0.1\n",
		"LAKESHORE_LAUNCH_ID=" + id + "\n", "LAKESHORE_CODE_CACHE=" + filepath.Join(f.cfg.Hosts[0].Dir, "code-cache") + "\n",
		filepath.Join(f.cfg.Hosts[0].Dir, "work", id) + "\n"} {
		if !strings.Contains(env, want) {
			t.Errorf("the worker's environment lacks %q:\n%s", want, env)
		}
	}
	start := time.Now()
	if err := p.Stop(ctx, id, wait); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if d := time.Since(start); d >= wait {
		t.Errorf("Stop took the whole grace (%s): the worker did not get SIGTERM", d)
	}
	if _, err := os.Stat(out + ".term"); err != nil {
		t.Errorf("the worker did not see SIGTERM: %v", err)
	}
	if _, ok := list(t, p)[id]; ok {
		t.Error("List still shows the stopped worker")
	}
	if _, err := os.Stat(filepath.Join(f.cfg.Hosts[0].Dir, "work", id)); !os.IsNotExist(err) {
		t.Errorf("the stopped worker's directory is left: %v", err)
	}
	if err := p.Stop(ctx, id, time.Second); err != nil {
		t.Errorf("Stop of an ended launch: %v", err)
	}
}

// TestStopKillsAfterGrace: a worker that ignores SIGTERM is killed (its whole group) after
// the grace.
func TestStopKillsAfterGrace(t *testing.T) {
	f := newFixture(t, 1, "127.0.0.1")
	p := f.provider(t)
	ctx := context.Background()
	out := filepath.Join(t.TempDir(), "out")
	id := newID()
	cmd := []string{"sh", "-c", `trap '' TERM; sleep 600 & echo $! > "$1"; while :; do sleep 0.05; done`, "worker", out}
	if err := p.Launch(ctx, &provider.Launch{ID: id, Command: cmd}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the worker's child", func() bool { b, _ := os.ReadFile(out); return len(b) > 0 })
	b, _ := os.ReadFile(out)
	child, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if err := p.Stop(ctx, id, 300*time.Millisecond); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, ok := list(t, p)[id]; ok {
		t.Error("List still shows the killed worker")
	}
	waitFor(t, "the worker's child to be killed with its group", func() bool {
		st, _ := os.ReadFile("/proc/" + strconv.Itoa(child) + "/stat")
		return len(st) == 0 || strings.Contains(string(st), ") Z ")
	})
}

// TestAdoptAfterRestart: a provider made later (a restarted supervisor) lists the launches
// of the one before from the hosts' records, and can stop them.
func TestAdoptAfterRestart(t *testing.T) {
	f := newFixture(t, 2, "127.0.0.1", "127.0.0.2")
	first := f.provider(t)
	ctx := context.Background()
	var ids []string
	for range 3 {
		id := newID()
		if err := first.Launch(ctx, &provider.Launch{ID: id, Namespace: "default", Queue: "q", Command: loop(filepath.Join(t.TempDir(), "o"))}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	_ = first.Close()
	second := f.provider(t)
	got := list(t, second)
	hosts := map[string]int{}
	for _, id := range ids {
		l, ok := got[id]
		if !ok || l.Queue != "q" {
			t.Fatalf("the restarted provider does not list %s: %+v", id, got)
		}
		hosts[strings.Fields(l.Detail)[1]]++
	}
	if hosts["127.0.0.1"] != 2 || hosts["127.0.0.2"] != 1 {
		t.Errorf("launches per host = %v, want the fewest-launches host first (2 on 127.0.0.1, 1 on 127.0.0.2)", hosts)
	}
	for _, id := range ids {
		if err := second.Stop(ctx, id, wait); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(list(t, second)); n != 0 {
		t.Errorf("%d launches left after stopping all", n)
	}
}

// TestPlacement: a host runs at most its workers; a launch goes only to a host of its pool
// with the GPUs it asks left; when none can take it, ErrNoHost says why for each host.
func TestPlacement(t *testing.T) {
	f := newFixture(t, 1, "127.0.0.1", "127.0.0.2")
	f.cfg.Hosts[0].Offers = fabric.Resources{GPUs: 2}
	f.cfg.Hosts[0].Pool = "gpu"
	f.cfg.Hosts[0].Workers = 2
	p := f.provider(t)
	ctx := context.Background()
	launch := func(res plane.Resources) error {
		return p.Launch(ctx, &provider.Launch{ID: newID(), Queue: "q", Command: loop(filepath.Join(t.TempDir(), "o")), Resources: res})
	}
	if err := launch(plane.Resources{GPUs: 1, Partition: "gpu"}); err != nil {
		t.Fatal(err)
	}
	err := launch(plane.Resources{GPUs: 2, Partition: "gpu"})
	if !errors.Is(err, sshprovider.ErrNoHost) || !strings.Contains(err.Error(), "asks 2 GPUs; the host has 1 of 2 left") ||
		!strings.Contains(err.Error(), `not in pool "gpu"`) {
		t.Fatalf("a launch asking more GPUs than are left: %v", err)
	}
	if err := launch(plane.Resources{}); err != nil { // no pool: the host with the fewest launches
		t.Fatal(err)
	}
	where := map[string]int{}
	for _, l := range list(t, p) {
		where[strings.Fields(l.Detail)[1]]++
	}
	if where["127.0.0.1"] != 1 || where["127.0.0.2"] != 1 {
		t.Errorf("launches per host = %v", where)
	}
	if err := launch(plane.Resources{}); err != nil { // 127.0.0.1 has a slot left
		t.Fatal(err)
	}
	if err := launch(plane.Resources{}); !errors.Is(err, sshprovider.ErrNoHost) || !strings.Contains(err.Error(), "full (1 of 1 workers)") {
		t.Fatalf("a launch with every host full: %v", err)
	}
}

// TestHostKeys: a host not in known_hosts, or whose key changed, is refused with the fix;
// there is no way to skip the check.
func TestHostKeys(t *testing.T) {
	f := newFixture(t, 1, "127.0.0.1")
	other := sshdtest.Start(t, "127.0.0.1")
	ctx := context.Background()

	empty := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := f.cfg
	cfg.KnownHosts = []string{empty}
	p, err := sshprovider.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = p.Check(ctx)
	if err == nil || !strings.Contains(err.Error(), "is not in known_hosts") || !strings.Contains(err.Error(), "ssh-keyscan -p") {
		t.Errorf("an unknown host: %v", err)
	}

	// The same address and port with another server's key: a changed key.
	changed := filepath.Join(t.TempDir(), "known_hosts")
	line := knownhosts.Line([]string{net.JoinHostPort("127.0.0.1", strconv.Itoa(f.servers[0].Port))}, other.HostKey)
	if err := os.WriteFile(changed, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.KnownHosts = []string{changed}
	p, err = sshprovider.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = p.Launch(ctx, &provider.Launch{ID: newID(), Command: []string{"true"}})
	if err == nil || !strings.Contains(err.Error(), "differs from the one in "+changed+":1") {
		t.Errorf("a changed host key: %v", err)
	}

	// known_hosts holds a key of another type for the host (an RSA key; the host has only
	// ed25519): refused as a host key problem, not taken for a host that does not answer
	// (before: "host not reachable: … no common algorithm for host key", ErrUnreachable).
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rsaPub, err := ssh.NewPublicKey(&rsaKey.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	otherType := filepath.Join(t.TempDir(), "known_hosts")
	line = knownhosts.Line([]string{net.JoinHostPort("127.0.0.1", strconv.Itoa(f.servers[0].Port))}, rsaPub)
	if err := os.WriteFile(otherType, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.KnownHosts = []string{otherType}
	if p, err = sshprovider.New(cfg); err != nil {
		t.Fatal(err)
	}
	err = p.Launch(ctx, &provider.Launch{ID: newID(), Command: []string{"true"}})
	if err == nil || errors.Is(err, sshprovider.ErrUnreachable) || !strings.Contains(err.Error(), "presented no host key of a type known_hosts") ||
		!strings.Contains(err.Error(), "known: rsa-sha2-512") || !strings.Contains(err.Error(), "the host has: ssh-ed25519") {
		t.Errorf("a host key of another type: %v (unreachable: %v)", err, errors.Is(err, sshprovider.ErrUnreachable))
	}
}

// TestKeyFileNotAKey: a key_file naming a FIFO, a device, a huge file or a key others may
// read fails the call at once with what it is, instead of a supervisor that hangs opening the FIFO (nothing ever
// writes to it: before, Check never returned) or reads /dev/zero until its memory is gone.
func TestKeyFileNotAKey(t *testing.T) {
	f := newFixture(t, 1, "127.0.0.1")
	dir := t.TempDir()
	fifo := filepath.Join(dir, "id_fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "id_huge")
	if err := os.WriteFile(huge, make([]byte, 2<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	// A key others may read (before, used as is; OpenSSH refuses it as an unprotected
	// private key file).
	key, err := os.ReadFile(f.servers[0].KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(dir, "id_open")
	if err := os.WriteFile(open, key, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o644); err != nil { // whatever the umask
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{open, "has permissions 0644: a private key must not be readable by others (chmod 600"},
		{fifo, "is not a regular file (p"},
		{"/dev/zero", "is not a regular file (D"},
		{huge, "has 2097152 bytes: a private key has a few KiB"},
	} {
		cfg := f.cfg
		cfg.Hosts = []sshprovider.Host{cfg.Hosts[0]}
		cfg.Hosts[0].KeyFile = tc.path
		p, err := sshprovider.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- p.Check(context.Background()) }()
		select {
		case err = <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("key_file %s: Check has not returned in 20 s", tc.path)
		}
		if err == nil || !strings.Contains(err.Error(), "read key file: "+tc.path) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("key_file %s: %v; want it to say %q", tc.path, err, tc.want)
		}
	}
	// known_hosts likewise: refused when the provider is made, before any read.
	for _, path := range []string{fifo, "/dev/zero"} {
		cfg := f.cfg
		cfg.KnownHosts = []string{path}
		done := make(chan error, 1)
		go func() { _, err := sshprovider.New(cfg); done <- err }()
		var err error
		select {
		case err = <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("known_hosts %s: New has not returned in 20 s", path)
		}
		if err == nil || !strings.Contains(err.Error(), "known_hosts "+path+" is not a regular file") {
			t.Errorf("known_hosts %s: %v", path, err)
		}
	}
}

// TestErrorsHoldNoSecrets: a failed launch (the command is not on the host), a refused
// login and an unreadable key say what is wrong and never the environment's values or the
// key's content.
func TestErrorsHoldNoSecrets(t *testing.T) {
	f := newFixture(t, 1, "127.0.0.1")
	p := f.provider(t)
	ctx := context.Background()
	const secret = "s3cr3t-token-value"
	err := p.Launch(ctx, &provider.Launch{ID: newID(), Command: []string{"lakeshore", "worker", "q"},
		Env: map[string]string{"LAKESHORE_TOKEN": secret}})
	if err == nil || !strings.Contains(err.Error(), "worker command lakeshore not found on this host") {
		t.Fatalf("a missing worker command: %v", err)
	}
	if strings.Contains(err.Error(), secret) {
		t.Errorf("the error holds the token: %v", err)
	}
	key, _ := os.ReadFile(f.servers[0].KeyFile)

	// A key the server does not know: the login is refused.
	stranger := sshdtest.Start(t, "127.0.0.1")
	cfg := f.cfg
	cfg.Hosts = []sshprovider.Host{cfg.Hosts[0]}
	cfg.Hosts[0].KeyFile = stranger.KeyFile
	p2, err := sshprovider.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = p2.Check(ctx)
	if err == nil || !strings.Contains(err.Error(), "refused the login of user") {
		t.Errorf("a refused login: %v", err)
	}
	other, _ := os.ReadFile(stranger.KeyFile)
	for _, k := range [][]byte{key, other} {
		for _, line := range strings.Split(string(k), "\n")[1:3] {
			if line != "" && strings.Contains(err.Error(), line) {
				t.Errorf("the error holds the key's content: %v", err)
			}
		}
	}

	// A key file that is not a key.
	bad := filepath.Join(t.TempDir(), "id")
	if err := os.WriteFile(bad, []byte("not a key "+secret), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.Hosts[0].KeyFile = bad
	p3, err := sshprovider.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = p3.Check(ctx)
	if err == nil || !strings.Contains(err.Error(), "is not a private key") || strings.Contains(err.Error(), secret) {
		t.Errorf("a bad key file: %v", err)
	}
}

// TestHostDown: a host that does not answer is left out of List (its launches are gone for
// the supervisor) and of launches, which go to the next host; List fails only when no host
// answers.
func TestHostDown(t *testing.T) {
	f := newFixture(t, 1, "127.0.0.1", "127.0.0.2")
	p := f.provider(t)
	ctx := context.Background()
	first := newID()
	if err := p.Launch(ctx, &provider.Launch{ID: first, Command: loop(filepath.Join(t.TempDir(), "o"))}); err != nil {
		t.Fatal(err)
	}
	f.servers[0].Kill()
	killLaunches(f.cfg.Hosts[0].Dir)
	if _, ok := list(t, p)[first]; ok {
		t.Fatal("List shows a launch of a host that died")
	}
	second := newID()
	if err := p.Launch(ctx, &provider.Launch{ID: second, Command: loop(filepath.Join(t.TempDir(), "o"))}); err != nil {
		t.Fatalf("Launch with one host down: %v", err)
	}
	if l := list(t, p)[second]; !strings.Contains(l.Detail, "127.0.0.2") {
		t.Errorf("the launch went to %q, want 127.0.0.2", l.Detail)
	}
	f.servers[1].Kill()
	if _, err := p.List(ctx); !errors.Is(err, plane.ErrUnavailable) || !errors.Is(err, sshprovider.ErrUnreachable) ||
		!strings.Contains(err.Error(), "no host answers") || !strings.Contains(err.Error(), "host not reachable") ||
		strings.Contains(err.Error(), "plane unavailable") {
		t.Errorf("List with every host down: %v, want host not reachable (matching plane.ErrUnavailable), not plane unavailable", err)
	}
	if p.Name() != "ssh:test" {
		t.Errorf("Name() = %q", p.Name())
	}
}

// TestFromConfig reads an inventory from a project file: provider options are the hosts'
// defaults; bad values are errors naming the file, line and field.
func TestFromConfig(t *testing.T) {
	const file = `providers:
  gpus:
    type: ssh
    user: ml
    key_file: /keys/id_ed25519
    known_hosts: /a/known_hosts, /b/known_hosts
    lakeshore: /opt/lakeshore/bin/lakeshore
    hosts:
      - gpu1.internal
      - host: gpu2.internal
        port: 2222
        user: other
        workers: 4
        pool: big
        offers: {gpus: 8, gpu_type: h100, memory: 512GiB}
`
	c, err := fabric.Parse("lakeshore.yaml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := sshprovider.FromConfig(c.File, c.Providers["gpus"])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.KnownHosts, []string{"/a/known_hosts", "/b/known_hosts"}) || len(cfg.Hosts) != 2 {
		t.Fatalf("config %+v", cfg)
	}
	h1, h2 := cfg.Hosts[0], cfg.Hosts[1]
	if h1.Address != "gpu1.internal" || h1.User != "ml" || h1.KeyFile != "/keys/id_ed25519" || h1.Lakeshore != "/opt/lakeshore/bin/lakeshore" || h1.Port != 0 {
		t.Errorf("host 1 %+v", h1)
	}
	if h2.Port != 2222 || h2.User != "other" || h2.Workers != 4 || h2.Pool != "big" || h2.Offers.GPUs != 8 || h2.Offers.MemoryBytes != 512<<30 {
		t.Errorf("host 2 %+v", h2)
	}
	// Relative key and known_hosts paths are the project file's, whatever the working
	// directory (before, they were the supervisor's working directory's).
	rel, err := fabric.Parse("/etc/lakeshore/lakeshore.yaml", []byte("providers:\n  p:\n    type: ssh\n    key_file: keys/id\n"+
		"    known_hosts: known_hosts, ~/.ssh/known_hosts\n    hosts:\n      - {host: a}\n      - {host: b, key_file: /k/id}\n"))
	if err != nil {
		t.Fatal(err)
	}
	relCfg, err := sshprovider.FromConfig(rel.File, rel.Providers["p"])
	if err != nil {
		t.Fatal(err)
	}
	home, _ := os.UserHomeDir()
	if want := []string{"/etc/lakeshore/known_hosts", filepath.Join(home, ".ssh/known_hosts")}; !slices.Equal(relCfg.KnownHosts, want) {
		t.Errorf("known_hosts %v, want %v", relCfg.KnownHosts, want)
	}
	if relCfg.Hosts[0].KeyFile != "/etc/lakeshore/keys/id" || relCfg.Hosts[1].KeyFile != "/k/id" {
		t.Errorf("key files %q, %q: want /etc/lakeshore/keys/id, /k/id", relCfg.Hosts[0].KeyFile, relCfg.Hosts[1].KeyFile)
	}
	for _, tc := range []struct{ yaml, field, contains string }{
		{"providers:\n  p:\n    type: ssh\n", "providers.p.hosts", "missing"},
		{"providers:\n  p:\n    type: ssh\n    usr: x\n    hosts: [a]\n", "providers.p.usr", `unknown key "usr"`},
		{"providers:\n  p:\n    type: ssh\n    hosts:\n      - {host: a, port: 99999}\n", "providers.p.hosts[0].port", "bad port"},
		{"providers:\n  p:\n    type: ssh\n    hosts:\n      - {host: a, workers: 0}\n", "providers.p.hosts[0].workers", "bad worker count"},
		{"providers:\n  p:\n    type: ssh\n    hosts:\n      - {host: ml@a}\n", "providers.p.hosts[0].host", "the user goes in user:"},
		{"providers:\n  p:\n    type: ssh\n    hosts:\n      - {host: \"127.0.0.1:22222\"}\n", "providers.p.hosts[0].host", "the port goes in port:"},
		{"providers:\n  p:\n    type: ssh\n    plane_url: ftp://x/\n    hosts: [a]\n", "providers.p.plane_url", "want an http:// or https:// URL"},
	} {
		c, err := fabric.Parse("lakeshore.yaml", []byte(tc.yaml))
		if err == nil {
			_, err = sshprovider.FromConfig(c.File, c.Providers["p"])
		}
		var ce *fabric.ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field || !strings.Contains(ce.Message, tc.contains) || ce.Line == 0 {
			t.Errorf("%q: %v, want field %s containing %q", tc.yaml, err, tc.field, tc.contains)
		}
	}
}

// docsBlock returns the ```yaml block of docs/providers.md that declares a provider of
// type typ.
func docsBlock(t *testing.T, typ string) string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/providers.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range strings.Split(string(doc), "```yaml\n")[1:] {
		block, _, _ := strings.Cut(part, "```")
		if strings.Contains(block, "type: "+typ+"\n") {
			return block
		}
	}
	t.Fatalf("docs/providers.md has no yaml block of a %s provider", typ)
	return ""
}

// TestDocsInventory: the inventory shown in docs/providers.md reads as it says.
func TestDocsInventory(t *testing.T) {
	c, err := fabric.Parse("docs/providers.md", []byte(docsBlock(t, "ssh")))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := sshprovider.FromConfig(c.File, c.Providers["lab"])
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Hosts) != 2 || cfg.Hosts[0].User != "ml" || cfg.Hosts[1].Workers != 4 || cfg.Hosts[1].Offers.GPUs != 4 ||
		cfg.Hosts[1].Pool != "a100" || cfg.Hosts[1].PlaneURL != "http://head.internal:7077" || cfg.Hosts[0].Lakeshore != "/opt/lakeshore/bin/lakeshore" {
		t.Errorf("the documented inventory reads as %+v", cfg)
	}
}

// TestShapePlacement: a launch for a shape goes only to a host whose offers satisfy it (a
// real sshd on two loopback addresses), takes the shape's GPUs of it, and List reports its
// shape; a shape no host offers is refused by CanOffer and Launch, naming why.
func TestShapePlacement(t *testing.T) {
	f := newFixture(t, 2, "127.0.0.1", "127.0.0.2")
	f.cfg.Hosts[1].Offers = fabric.Resources{GPUs: 2, GPUType: "a100", Labels: map[string]string{"zone": "east"}}
	p := f.provider(t)
	ctx := context.Background()
	a100 := &plane.Requirement{GPUs: 2, GPUType: "a100"}
	if err := p.CanOffer(a100); err != nil {
		t.Fatalf("CanOffer(a100): %v", err)
	}
	h100 := &plane.Requirement{GPUs: 1, GPUType: "h100"}
	if err := p.CanOffer(h100); err == nil || !strings.Contains(err.Error(), "gpus=1,gpu_type=h100") {
		t.Errorf("CanOffer(h100) = %v; want an error naming the shape", err)
	}
	out := filepath.Join(t.TempDir(), "o")
	id := newID()
	if err := p.Launch(ctx, &provider.Launch{ID: id, Queue: "q", Command: loop(out), Shape: a100.Shape(), Requirement: a100}); err != nil {
		t.Fatalf("Launch(a100): %v", err)
	}
	l, ok := list(t, p)[id]
	if !ok || l.Shape != a100.Shape() || strings.Fields(l.Detail)[1] != "127.0.0.2" {
		t.Fatalf("List: %+v (found %v); want the launch on 127.0.0.2 with shape %s", l, ok, a100.Shape())
	}
	// Its two GPUs are taken: another a100 launch finds no host.
	err := p.Launch(ctx, &provider.Launch{ID: newID(), Queue: "q", Command: loop(filepath.Join(t.TempDir(), "o")), Shape: a100.Shape(), Requirement: a100})
	if !errors.Is(err, sshprovider.ErrNoHost) || !strings.Contains(err.Error(), "the host has 0 of 2 left") ||
		!strings.Contains(err.Error(), "127.0.0.1") || !strings.Contains(err.Error(), "do not satisfy the launch's shape") {
		t.Fatalf("a second a100 launch: %v", err)
	}
	err = p.Launch(ctx, &provider.Launch{ID: newID(), Queue: "q", Command: loop(filepath.Join(t.TempDir(), "o")), Shape: h100.Shape(), Requirement: h100})
	if !errors.Is(err, sshprovider.ErrNoHost) {
		t.Fatalf("an h100 launch: %v; want ErrNoHost", err)
	}
}
