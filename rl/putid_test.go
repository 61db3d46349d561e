package rl_test

import (
	"os"
	"strings"
	"testing"

	"github.com/lakeshore-dev/lakeshore/rl"
)

// TestRolloutPutIDSameInPython: a rollout job's put ids are made in both SDKs (Go's
// RolloutPutID, Python's @rollout in python/src/lakeshore/rl.py) and must be the same
// text, "rollout.{job id}.{k}", so that a job retried by a worker of the other language
// repeats, not duplicates, the puts an earlier attempt committed.
func TestRolloutPutIDSameInPython(t *testing.T) {
	if got := rl.RolloutPutID("01JOBID", 3); got != "rollout.01JOBID.3" {
		t.Fatalf("RolloutPutID = %q", got)
	}
	src, err := os.ReadFile("../python/src/lakeshore/rl.py")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(src), `f"rollout.{job_id}.{next(numbers)}"`) {
		t.Fatal(`python/src/lakeshore/rl.py no longer makes put ids as f"rollout.{job_id}.{next(numbers)}": keep it equal to rl.RolloutPutID`)
	}
}
