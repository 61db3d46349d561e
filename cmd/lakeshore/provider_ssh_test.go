package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/internal/sshdtest"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/plane/httpplane"
	"github.com/lakeshore-dev/lakeshore/provider"
)

// sshInventory starts one real sshd per address and writes a lakeshore.yaml declaring an
// ssh provider "lab" over them (one worker per host, the test's lakeshore binary); it
// returns the file, the servers and each host's directory. Launches left on the hosts are
// killed when the test ends.
func sshInventory(t *testing.T, addrs ...string) (string, []*sshdtest.Server, []string) {
	t.Helper()
	var servers []*sshdtest.Server
	for _, a := range addrs {
		servers = append(servers, sshdtest.Start(t, a))
	}
	root := t.TempDir()
	known := filepath.Join(root, "known_hosts")
	sshdtest.WriteKnownHosts(t, known, servers...)
	var b strings.Builder
	fmt.Fprintf(&b, "providers:\n  lab:\n    type: ssh\n    known_hosts: %s\n    lakeshore: %s\n    host_retry: 1m\n    hosts:\n", known, binary)
	var dirs []string
	for _, s := range servers {
		dir := filepath.Join(t.TempDir(), "host")
		dirs = append(dirs, dir)
		t.Cleanup(func() { sshdtest.KillLaunches(dir) })
		fmt.Fprintf(&b, "      - {host: %s, port: %d, key_file: %s, dir: %s}\n", s.Address, s.Port, s.KeyFile, dir)
	}
	file := filepath.Join(root, "lakeshore.yaml")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return file, servers, dirs
}

// TestProviderSSHHostDropsMidRun: `lakeshore provider run` launches a real `lakeshore
// worker` over SSH on the first host of a lakeshore.yaml inventory; the host dies mid-job
// (its sshd and the worker SIGKILLed); the job's lease expires, the supervisor sees the
// launch gone, launches on the other host, and the job runs there.
func TestProviderSSHHostDropsMidRun(t *testing.T) {
	p := newProviderPlane(t)
	file, servers, dirs := sshInventory(t, "127.0.0.1", "127.0.0.2")
	started := filepath.Join(t.TempDir(), "started")
	job := fmt.Sprintf(`if [ "$LAKESHORE_SSH_HOST" = 127.0.0.1 ]; then touch %s; exec sleep 600; fi; echo "ran on $LAKESHORE_SSH_HOST in $PWD"`, started)
	err := p.drv.QueueProviderSet(t.Context(), &plane.ProviderParams{Namespace: "default", Queue: "drop",
		Provider: plane.ProviderRef{Name: "ssh:lab", Policy: plane.LaunchPolicy{MaxWorkers: 1, IdleTimeout: time.Hour,
			Command: []string{"lakeshore", "worker", "drop", "--lease", "1500ms", "--", "sh", "-c", job}}}})
	if err != nil {
		t.Fatal(err)
	}
	_, logs := p.startSupervisor([]string{"LAKESHORE_CONFIG=" + file}, "--tick", "200ms", "--lease-ttl", "5s")
	id := p.submit("drop", 1)[0]
	waitFor(t, 2*time.Minute, "the job running on the first host", func() bool {
		_, err := os.Stat(started)
		return err == nil
	})
	servers[0].Kill()
	sshdtest.KillLaunches(dirs[0])
	q, err := p.d.Queue("drop", nil)
	if err != nil {
		t.Fatal(err)
	}
	var result map[string]any
	if err := q.Result(t.Context(), id, &result, &lakeshore.ResultOptions{Timeout: 2 * time.Minute}); err != nil {
		t.Fatalf("the job's result after its host died: %v\nsupervisor:\n%s", err, logs.String())
	}
	out, _ := result["stdout"].(string)
	if !strings.Contains(out, "ran on 127.0.0.2 in "+filepath.Join(dirs[1], "work")) {
		t.Errorf("the job ran %q, want on 127.0.0.2 in a fresh directory under %s", out, dirs[1])
	}
	inv, err := q.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if inv.Attempt != 2 {
		t.Errorf("attempt = %d, want 2 (the first cut off with its host)", inv.Attempt)
	}
	for _, want := range []string{`provider=ssh:lab`, `failure=ended`, `msg="provider supervisor: launched"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the supervisor's log lacks %s:\n%s", want, logs.String())
		}
	}
}

// TestProviderSSHResolve: ssh:NAME and kubernetes:NAME are read from the project file; a
// missing name, a name of another type and a Kubernetes provider in a build without it are
// clear errors.
func TestProviderSSHResolve(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "lakeshore.yaml")
	kubeconfig := filepath.Join(dir, "kubeconfig") // a cluster that is never asked: resolving makes no call
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	badKnownHosts := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(badKnownHosts, []byte("not a known_hosts line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	yaml := "providers:\n  lab:\n    type: ssh\n    known_hosts: /dev/null\n    hosts: [gpu1.internal]\n" +
		"  broken:\n    type: ssh\n    known_hosts: " + badKnownHosts + "\n    hosts: [gpu2.internal]\n  k8s:\n    type: kubernetes\n    image: lakeshore\n    kubeconfig: " + kubeconfig + "\n"
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	getenv := func(k string) string {
		if k == "LAKESHORE_CONFIG" {
			return file
		}
		return ""
	}
	resolve := newResolver(t.TempDir(), time.Second, getenv)
	p, err := resolve("ssh:lab")
	if err != nil || p.Name() != "ssh:lab" {
		t.Fatalf("ssh:lab: %v", err)
	}
	if _, err := resolve("ssh:nope"); !errors.Is(err, provider.ErrUnknownProvider) || !strings.Contains(err.Error(), `no provider "nope" under providers: (its ssh providers: broken, lab)`) {
		t.Errorf("ssh:nope: %v", err)
	}
	if _, err := resolve("ssh:broken"); err == nil || errors.Is(err, provider.ErrUnknownProvider) {
		t.Errorf("ssh:broken (a bad known_hosts file): %v, want an error that is not ErrUnknownProvider", err)
	}
	if _, err := resolve("ssh:k8s"); err == nil || !strings.Contains(err.Error(), "is of type kubernetes, not ssh") {
		t.Errorf("ssh:k8s: %v", err)
	}
	k, err := resolve("kubernetes:k8s")
	if kubernetesBuilt {
		if err != nil || k.Name() != "kubernetes:k8s" {
			t.Errorf("kubernetes:k8s: %v", err)
		}
	} else if err == nil || !strings.Contains(err.Error(), "built without the Kubernetes provider") || !strings.Contains(err.Error(), "-tags lakeshore_kubernetes") {
		t.Errorf("kubernetes:k8s in a build without it: %v", err)
	}
}

// TestDefaultBuildLeavesOutClientGo: the default lakeshore binary links no k8s.io package
// (the Kubernetes provider is built only with -tags lakeshore_kubernetes).
func TestDefaultBuildLeavesOutClientGo(t *testing.T) {
	if testing.Short() || kubernetesBuilt {
		t.Skip("runs go list on the default build")
	}
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for dep := range strings.SplitSeq(string(out), "\n") {
		if strings.HasPrefix(dep, "k8s.io/") {
			t.Errorf("the default build links %s; keep client-go behind the lakeshore_kubernetes build tag", dep)
		}
	}
}

// TestProviderSSHWorkersGetTheSupervisorsToken: `lakeshore provider run` against a
// `lakeshore serve` with tokens, its LAKESHORE_TOKEN in its environment, launches a real
// `lakeshore worker` over SSH that reaches the server with that token and runs the job.
// The SSH provider sends a worker only the launch's environment (never the supervisor's
// process environment), and the supervisor's launches carried LAKESHORE_URL but not
// LAKESHORE_TOKEN: every worker was refused as unauthorized and exited, and the job never
// ran (a Kubernetes Pod likewise got no token without the provider's secret:).
func TestProviderSSHWorkersGetTheSupervisorsToken(t *testing.T) {
	if testing.Short() {
		t.Skip("starts sshd, a server and a supervisor")
	}
	p := newProviderPlane(t)
	const admin = "an-admin-token-long-enough-for-the-server-0123456789"
	adminFile := filepath.Join(t.TempDir(), "admin")
	if err := os.WriteFile(adminFile, []byte(admin+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServe(t, filepath.Join(t.TempDir(), lakeshore.DefaultDBName), "--admin-token-file", adminFile)
	drv, err := httpplane.New(srv.url, &httpplane.Config{Token: admin})
	if err != nil {
		t.Fatal(err)
	}
	d := lakeshore.New(drv, nil)
	t.Cleanup(func() { d.Close() })
	file, _, _ := sshInventory(t, "127.0.0.1")
	err = drv.QueueProviderSet(t.Context(), &plane.ProviderParams{Namespace: "default", Queue: "tok",
		Provider: plane.ProviderRef{Name: "ssh:lab", Policy: plane.LaunchPolicy{MaxWorkers: 1, IdleTimeout: time.Hour,
			Command: []string{"lakeshore", "worker", "tok", "--", "sh", "-c", "echo ran with a token"}}}})
	if err != nil {
		t.Fatal(err)
	}
	q, err := d.Queue("tok", nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := q.Submit(t.Context(), "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, logs := p.startSupervisor([]string{"LAKESHORE_CONFIG=" + file, lakeshore.EnvURL + "=" + srv.url, lakeshore.EnvToken + "=" + admin},
		"--tick", "200ms")
	var result map[string]any
	if err := q.Result(t.Context(), id, &result, &lakeshore.ResultOptions{Timeout: time.Minute}); err != nil {
		t.Fatalf("the job's result: %v\nsupervisor:\n%s", err, logs.String())
	}
	if out, _ := result["stdout"].(string); !strings.Contains(out, "ran with a token") {
		t.Errorf("the job ran %q", out)
	}
	if strings.Contains(logs.String(), admin) {
		t.Errorf("the supervisor's log quotes its token:\n%s", logs.String())
	}
}
