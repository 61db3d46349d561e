package sshprovider

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lakeshore-dev/lakeshore/internal/sshdtest"
)

// TestConnectionLostMidScriptIsNotRunAgain: a script whose connection is lost while it
// runs (here it kills its own sshd session process) may have done its work, so run does
// not send it again over a fresh connection — a launch would otherwise start a second
// worker under the same id — and its error says the outcome is unknown (Launch then counts
// the launch on that host instead of starting it again on the next one).
func TestConnectionLostMidScriptIsNotRunAgain(t *testing.T) {
	servers := []*sshdtest.Server{sshdtest.Start(t, "127.0.0.1"), sshdtest.Start(t, "127.0.0.2")}
	known := filepath.Join(t.TempDir(), "known_hosts")
	sshdtest.WriteKnownHosts(t, known, servers...)
	cfg := Config{Name: "test", KnownHosts: []string{known}, HostRetry: time.Minute}
	for _, s := range servers {
		dir := filepath.Join(t.TempDir(), "remote")
		cfg.Hosts = append(cfg.Hosts, Host{Address: s.Address, Port: s.Port, KeyFile: s.KeyFile, Dir: dir, Workers: 1})
		t.Cleanup(func() { sshdtest.KillLaunches(dir) })
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	h := p.hosts[0]
	if _, err := p.run(ctx, h, "true"); err != nil { // the connection is now an established one
		t.Fatal(err)
	}
	ran := filepath.Join(t.TempDir(), "ran")
	_, err = p.run(ctx, h, "echo ran >> "+quote(ran)+"\nkill -KILL $PPID\nsleep 5\n")
	if !errors.Is(err, ErrUnreachable) || !errors.Is(err, errOutcomeUnknown) {
		t.Errorf("run with its connection lost mid-script: %v, want host not reachable and the outcome unknown", err)
	}
	if b, _ := os.ReadFile(ran); strings.Count(string(b), "ran") != 1 {
		t.Errorf("the script ran %d times, want once", strings.Count(string(b), "ran"))
	}

}
