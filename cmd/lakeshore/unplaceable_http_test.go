package main

import (
	"strings"
	"testing"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestWorkerNoteOverHTTPCountsItsOwnOffers: over HTTP the demand rows carry the server's
// count of capable workers (GET /v1/demand's capable_workers); the start note of
// `lakeshore worker` is about the jobs THIS worker leaves, so another live worker that
// could place them does not silence it, and `queues` says nothing while that one is live.
func TestWorkerNoteOverHTTPCountsItsOwnOffers(t *testing.T) {
	c, drv := newHTTPCLIWithDriver(t)
	c.ok("submit", "q", `"gpu"`, "--requires", "gpus=1")
	if err := drv.WorkerRegister(t.Context(), &plane.WorkerInfo{ID: "w-gpu", Namespace: "default", Host: "h", PID: 1,
		Queues: []string{"q"}, StartedAt: time.Now(), Offers: &plane.Offers{GPUs: 1}}); err != nil {
		t.Fatal(err)
	}
	if _, errs, code := c.run("", "queues"); code != 0 || strings.Contains(errs, "note:") {
		t.Errorf("a live worker places the job, yet queues says: exit %d\n%s", code, errs)
	}
	if _, errs, code := c.run("", "worker", "q", "--exit-when-idle", "--", "true"); code != 0 ||
		!strings.Contains(errs, "lakeshore worker: 1 queued job of q needs offers this worker does not declare (e.g. gpus=1)") {
		t.Errorf("a worker without offers does not say what it leaves: exit %d\n%s", code, errs)
	}
}
