package provider_test

import (
	"strings"
	"testing"

	"github.com/lakeshore-dev/lakeshore/provider"
)

// TestLaunchIDValid holds the launch id rule the local, ssh and kubernetes providers share:
// 1 to max ASCII letters and digits.
func TestLaunchIDValid(t *testing.T) {
	for _, c := range []struct {
		id   string
		max  int
		want bool
	}{
		{"01J9Z3K8X4Q2W5E6R7T8Y9U0IA", 64, true},
		{"a", 1, true},
		{strings.Repeat("a", 64), 64, true},
		{strings.Repeat("a", 65), 64, false},
		{strings.Repeat("a", 41), 40, false},
		{"", 64, false},
		{"a-b", 64, false},
		{"a.b", 64, false},
		{"a b", 64, false},
		{"../x", 64, false},
		{"é", 64, false},
	} {
		if got := provider.LaunchIDValid(c.id, c.max); got != c.want {
			t.Errorf("LaunchIDValid(%q, %d) = %v, want %v", c.id, c.max, got, c.want)
		}
	}
}
