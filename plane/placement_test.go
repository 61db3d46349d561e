package plane

import (
	"errors"
	"strings"
	"testing"
)

func TestSatisfies(t *testing.T) {
	a100 := &Requirement{GPUs: 1, GPUType: "a100", MilliCPUs: 4000, MemoryBytes: 16 << 30, Labels: map[string]string{"zone": "east"}}
	for _, c := range []struct {
		name string
		o    *Offers
		r    *Requirement
		want bool
	}{
		{"nil offers, default shape", nil, nil, true},
		{"nil offers, zero requirement", nil, &Requirement{}, true},
		{"nil offers, a requirement", nil, &Requirement{GPUs: 1}, false},
		{"zero offers, a requirement", &Offers{}, &Requirement{MilliCPUs: 1}, false},
		{"any offers, default shape", &Offers{GPUs: 8}, nil, true},
		{"enough of everything", &Offers{GPUs: 2, GPUType: "a100", MilliCPUs: 8000, MemoryBytes: 32 << 30, Labels: map[string]string{"zone": "east", "x": "y"}}, a100, true},
		{"exactly enough", (*Offers)(a100), a100, true},
		{"another GPU type", &Offers{GPUs: 2, GPUType: "h100", MilliCPUs: 8000, MemoryBytes: 32 << 30, Labels: map[string]string{"zone": "east"}}, a100, false},
		{"too little memory", &Offers{GPUs: 2, GPUType: "a100", MilliCPUs: 8000, MemoryBytes: 8 << 30, Labels: map[string]string{"zone": "east"}}, a100, false},
		{"a label of another value", &Offers{GPUs: 2, GPUType: "a100", MilliCPUs: 8000, MemoryBytes: 32 << 30, Labels: map[string]string{"zone": "west"}}, a100, false},
		{"a label missing", &Offers{GPUs: 2, GPUType: "a100", MilliCPUs: 8000, MemoryBytes: 32 << 30}, a100, false},
		{"any GPU type asked", &Offers{GPUs: 1, GPUType: "h100"}, &Requirement{GPUs: 1}, true},
	} {
		if got := c.o.Satisfies(c.r); got != c.want {
			t.Errorf("%s: Satisfies = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestShapePinned pins the shape key's text and digest: it is stored with every shaped
// invocation, so a change must bump the "sh1_" version.
func TestShapePinned(t *testing.T) {
	r := &Requirement{MilliCPUs: 500, MemoryBytes: 1 << 30, GPUs: 1, GPUType: "a100", Labels: map[string]string{"zone": "east", "arch": "x86"}}
	const want = "sh1_80401ee9082b60ccff05e037ae3d0ef7"
	if got := r.Shape(); got != want {
		t.Errorf("Shape = %s, want %s", got, want)
	}
}

func TestParseOffers(t *testing.T) {
	o, err := ParseOffers("--offers", "cpus=0.5, memory=64GiB,gpus=2,gpu_type=a100,label.zone=east")
	if err != nil {
		t.Fatal(err)
	}
	if o.MilliCPUs != 500 || o.MemoryBytes != 64<<30 || o.GPUs != 2 || o.GPUType != "a100" || o.Labels["zone"] != "east" {
		t.Errorf("parsed %+v", o)
	}
	for in, want := range map[string]int64{"cpus=8": 8000, "cpus=250m": 250, "cpus=1.25": 1250} {
		if o, err := ParseOffers("x", in); err != nil || o.MilliCPUs != want {
			t.Errorf("%s: %+v, %v", in, o, err)
		}
	}
	for in, want := range map[string]int64{"memory=16GB": 16e9, "memory=512Mi": 512 << 20, "memory=1000": 1000} {
		if o, err := ParseOffers("x", in); err != nil || o.MemoryBytes != want {
			t.Errorf("%s: %+v, %v", in, o, err)
		}
	}
	for _, bad := range []string{"gpus", "gpu=1", "gpus=-1", "gpus=x", "cpus=0.0001", "cpus=2000", "memory=lots", "gpu_type=a 100", "label.-x=1",
		// A name given twice was taken silently, the last one winning; a signed cpus
		// "-0.5" was read as 0.5.
		"gpus=1,gpus=2", "label.zone=east,label.zone=west", "cpus=-0.5", "cpus=+1"} {
		_, err := ParseOffers("--offers", bad)
		var inv *InvalidError
		if !errors.As(err, &inv) || !errors.Is(err, ErrInvalid) {
			t.Errorf("%q: %v, want an *InvalidError", bad, err)
		}
	}
}

// TestParseOffersSaysWhatAValueMayBe: `submit --requires gpus=one` said "a bad gpus value",
// and `--requires colour=red` only the list of names: each now says what was wrong — what
// the name's value may be, or that the name is unknown — before the form.
func TestParseOffersSaysWhatAValueMayBe(t *testing.T) {
	for in, want := range map[string]string{
		"gpus=one":     `invalid --requires "gpus=one": gpus is a whole number (1); use NAME=VALUE pairs`,
		"cpus=lots":    `invalid --requires "cpus=lots": cpus is a number of CPUs with at most three decimals (8, 0.5) or millicpus (500m); use`,
		"memory=64Gb":  `invalid --requires "memory=64Gb": memory is a number of bytes with an optional unit (64GiB, 512MiB, 2G); use`,
		"colour=red":   `invalid --requires "colour=red": unknown name "colour"; use NAME=VALUE pairs separated by commas: cpus, memory, gpus, gpu_type, label.KEY`,
		"gpus=1,x=1.5": `invalid --requires "x=1.5": unknown name "x"; use`,
	} {
		_, err := ParseOffers("--requires", in)
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: %v\nwant the prefix %s", in, err, want)
		}
	}
}
