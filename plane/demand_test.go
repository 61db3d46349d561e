package plane_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestFormatOffers: FormatOffers writes what ParseOffers reads back to the same offers (and
// shape); a label value the comma-separated form cannot carry is reported.
func TestFormatOffers(t *testing.T) {
	o := &plane.Offers{MilliCPUs: 1500, MemoryBytes: 64 << 30, GPUs: 2, GPUType: "a100", Labels: map[string]string{"zone": "us-east", "arch": "x=86"}}
	s, ok := plane.FormatOffers(o)
	require.True(t, ok)
	require.Equal(t, "cpus=1500m,memory=68719476736,gpus=2,gpu_type=a100,label.arch=x=86,label.zone=us-east", s)
	back, err := plane.ParseOffers("--offers", s)
	require.NoError(t, err)
	require.Equal(t, o, back)
	s, ok = plane.FormatOffers(nil)
	require.True(t, ok)
	require.Empty(t, s)
	_, ok = plane.FormatOffers(&plane.Offers{Labels: map[string]string{"k": "a,b"}})
	require.False(t, ok, "a comma in a label value")
}
