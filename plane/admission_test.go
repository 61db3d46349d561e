package plane

import (
	"math"
	"testing"
)

// TestDefaultBurst: a rate's default bucket is the rate rounded up, at least 1, and a rate
// too large for an int64 saturates (1e308 gave a bucket of 1 when the conversion wrapped).
func TestDefaultBurst(t *testing.T) {
	for _, c := range []struct {
		rate float64
		want int64
	}{{0.1, 1}, {1, 1}, {2.5, 3}, {1e9, 1e9}, {1e308, 1 << 62}, {math.MaxFloat64, 1 << 62}} {
		if got := defaultBurst(c.rate); got != c.want {
			t.Errorf("defaultBurst(%g) = %d, want %d", c.rate, got, c.want)
		}
		a := Admission{RateLimit: c.rate, KeyRateLimit: c.rate}.WithDefaults()
		if a.Burst != c.want || a.KeyBurst != c.want {
			t.Errorf("rate %g: bursts %d and %d, want %d", c.rate, a.Burst, a.KeyBurst, c.want)
		}
		if _, b := a.KeyRate("k"); b != c.want {
			t.Errorf("rate %g: KeyRate burst %d, want %d", c.rate, b, c.want)
		}
	}
}
