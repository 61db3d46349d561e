package localprovider

import (
	"path/filepath"
	"testing"

	"github.com/lakeshore-dev/lakeshore/fabric"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestExampleModesAreLaunchable: every mode of examples/fabric/lakeshore.yaml that names
// the local provider (by "local" or a declared provider of type local) asks for what the
// local provider can launch, so a supervisor serves the example's queue as run.py's
// docstring says. Before, mode "cpu" asked for a label, which the local provider never
// offers: its runs waited for a worker started by hand. (Fails on the old example.)
func TestExampleModesAreLaunchable(t *testing.T) {
	c, err := fabric.LoadFile(filepath.Join("..", "..", "examples", "fabric", "lakeshore.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p := newProvider(t)
	local := 0
	for name, m := range c.Modes {
		if d := c.Providers[m.Provider]; m.Provider != plane.ProviderLocal && (d == nil || d.Type != plane.ProviderLocal) {
			continue
		}
		local++
		if err := p.CanOffer(m.Resources.Requirement()); err != nil {
			t.Errorf("mode %q names the local provider, which cannot launch it: %v", name, err)
		}
	}
	if local == 0 {
		t.Error("no mode of the example names the local provider")
	}
}
