package localprovider

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestGPUsRefusesDuplicates: LAKESHORE_LOCAL_GPUS naming a device twice ("0,0"), an empty
// entry, an entry CUDA_VISIBLE_DEVICES cannot name or too many devices makes New fail with
// an invalid error naming the variable and what it takes, and creates nothing. Before,
// "0,0" was two GPUs, both device 0: two one-GPU workers were launched on the same device
// at once (and empty entries were dropped silently).
func TestGPUsRefusesDuplicates(t *testing.T) {
	if !strings.Contains(GPUsRule, strconv.Itoa(plane.RequirementGPUsMax)) {
		t.Fatalf("GPUsRule %q does not state plane.RequirementGPUsMax", GPUsRule)
	}
	for v, mention := range map[string]string{
		"0,0":                            `device "0" is named twice`,
		"0,1,2,1":                        `device "1" is named twice`,
		" 3 , 3":                         `device "3" is named twice`,
		"0,,1":                           "entry 2 is empty",
		"0,1,":                           "entry 3 is empty",
		"-1":                             "the count is out of range",
		"0,-1":                           `entry 2 ("-1") is not a device id`,
		"0;1":                            `entry 1 ("0;1") is not a device id`,
		"gpu 0":                          "is not a device id",
		"1025":                           "the count is out of range",
		strings.Repeat("0,", 1025) + "0": "too many",
	} {
		dir := filepath.Join(t.TempDir(), "local")
		t.Setenv(EnvGPUs, v)
		p, err := New(dir)
		if err == nil {
			t.Fatalf("%s=%q: New took it (%v)", EnvGPUs, v, p.gpus)
		}
		var ie *plane.InvalidError
		if !errors.Is(err, plane.ErrInvalid) || !errors.As(err, &ie) || ie.Field != EnvGPUs {
			t.Fatalf("%s=%q: want an invalid error naming %s, got %v", EnvGPUs, v, EnvGPUs, err)
		}
		for _, want := range []string{mention, "distinct device ids"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s=%q: %q does not say %q", EnvGPUs, v, err, want)
			}
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s=%q: a refused start created its directory (%v)", EnvGPUs, v, err)
		}
	}
}

// TestGPUsAccepted: a count, a list of distinct indices or UUIDs (spaces around entries
// trimmed) are the devices handed out, each once; the supervisor's own
// CUDA_VISIBLE_DEVICES, read when LAKESHORE_LOCAL_GPUS is unset, counts a device named
// twice once.
func TestGPUsAccepted(t *testing.T) {
	for v, want := range map[string][]string{
		"0":       {},
		"4":       {"0", "1", "2", "3"},
		"0,2,3":   {"0", "2", "3"},
		" 1 , 0 ": {"1", "0"},
		"GPU-8932f937-d72c-4106-c12f-20bd9faed9f6,MIG-GPU-8932f937-d72c-4106-c12f-20bd9faed9f6/1/0": {
			"GPU-8932f937-d72c-4106-c12f-20bd9faed9f6", "MIG-GPU-8932f937-d72c-4106-c12f-20bd9faed9f6/1/0"},
	} {
		t.Setenv(EnvGPUs, v)
		p, err := New(filepath.Join(t.TempDir(), "local"))
		if err != nil {
			t.Fatalf("%s=%q: %v", EnvGPUs, v, err)
		}
		if !slices.Equal(p.gpus, want) {
			t.Errorf("%s=%q: devices %q, want %q", EnvGPUs, v, p.gpus, want)
		}
	}
	t.Setenv(EnvGPUs, "")
	t.Setenv("CUDA_VISIBLE_DEVICES", "0,1,0")
	p, err := New(filepath.Join(t.TempDir(), "local"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.gpus, []string{"0", "1"}) {
		t.Errorf("CUDA_VISIBLE_DEVICES=0,1,0: devices %q, want [0 1]", p.gpus)
	}
	p.SetGPUs([]string{"2", "2", "3"}, "")
	if !slices.Equal(p.gpus, []string{"2", "3"}) {
		t.Errorf("SetGPUs 2,2,3: devices %q, want [2 3]", p.gpus)
	}
}
