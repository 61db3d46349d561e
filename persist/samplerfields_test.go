package persist

import (
	"os"
	"regexp"
	"testing"
)

// TestSamplerFieldsSameInPython: the Python SDK warns about a misspelt field a built-in
// sampler reads from its own copy of samplerFieldParams (python/src/lakeshore/data.py,
// _SAMPLER_FIELD_PARAMS and _SAMPLER_FIELD_EFFECT: it reads over HTTP and logs in the
// caller's process). The two tables must say the same: the same parameters of the same
// samplers, in order, with the same effect in words, so a user reads one warning whichever
// SDK reads. A parameter added in one language only fails here.
func TestSamplerFieldsSameInPython(t *testing.T) {
	src, err := os.ReadFile("../python/src/lakeshore/data.py")
	if err != nil {
		t.Fatal(err)
	}
	block := func(name string) []byte {
		m := regexp.MustCompile(`(?s)\n` + name + ` = \{\n(.*?)\n\}`).FindSubmatch(src)
		if m == nil {
			t.Fatalf("%s = { … } not found in python/src/lakeshore/data.py", name)
		}
		return m[1]
	}
	python := map[string][][2]string{}
	effects := map[string]string{}
	for _, m := range regexp.MustCompile(`"([^"]+)": "([^"]+)"`).FindAllSubmatch(block("_SAMPLER_FIELD_EFFECT"), -1) {
		effects[string(m[1])] = string(m[2])
	}
	for _, m := range regexp.MustCompile(`"([^"]+)": \(([^)]*)\)`).FindAllSubmatch(block("_SAMPLER_FIELD_PARAMS"), -1) {
		for _, p := range regexp.MustCompile(`"([^"]+)"`).FindAllSubmatch(m[2], -1) {
			python[string(m[1])] = append(python[string(m[1])], [2]string{string(p[1]), effects[string(p[1])]})
		}
	}
	if len(python) != len(samplerFieldParams) {
		t.Fatalf("samplers: Python %v, Go %v", python, samplerFieldParams)
	}
	for sampler, params := range samplerFieldParams {
		got := python[sampler]
		if len(got) != len(params) {
			t.Fatalf("%s: Python %v, Go %v", sampler, got, params)
		}
		for i := range params {
			if got[i] != params[i] {
				t.Errorf("%s parameter %d: Python %q, Go %q", sampler, i, got[i], params[i])
			}
		}
	}
}
