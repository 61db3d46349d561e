package provider_test

import (
	"maps"
	"testing"

	"github.com/lakeshore-dev/lakeshore/provider"
)

// TestUsePlaneURL: a launch given a plane URL of its own (an SSH host's or a Kubernetes
// provider's plane_url) loses what only reaches the supervisor's embedded plane on its
// machine, LAKESHORE_HOME and LAKESHORE_BIN (a path to the supervisor's executable, which a
// Python worker elsewhere would run and find missing), and keeps the rest.
func TestUsePlaneURL(t *testing.T) {
	env := map[string]string{"LAKESHORE_HOME": "/home/me/.lakeshore", provider.EnvBinary: "/home/me/bin/lakeshore",
		provider.EnvQueue: "q", "HF_TOKEN": "hf_x"}
	provider.UsePlaneURL(env, "http://head:7077")
	want := map[string]string{"LAKESHORE_URL": "http://head:7077", provider.EnvQueue: "q", "HF_TOKEN": "hf_x"}
	if !maps.Equal(env, want) {
		t.Errorf("UsePlaneURL: %v; want %v", env, want)
	}
}
