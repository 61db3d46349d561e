package server_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/server"
)

// TestDemandRoute: GET /v1/demand lists (queue, shape) demand — the default shape as "",
// a shape with its requirement — filtered by namespace, queue and shape ("default" names
// the default shape) and by what the token covers; /metrics has lakeshore_demand_* per
// shape; a queue without a namespace is refused.
func TestDemandRoute(t *testing.T) {
	t.Parallel()
	b := setup(t, &server.Config{AdminToken: adminSecret})
	a100 := map[string]any{"gpus": 1, "gpu_type": "a100"}
	for _, body := range []map[string]any{{}, {"requirement": a100}, {"requirement": a100}} {
		r := b.doJSON(t, "POST", "/v1/namespaces/team/queues/train/invocations", body, adminSecret)
		require.Equal(t, 200, r.status, "%s", r.body)
	}
	r := b.doJSON(t, "POST", "/v1/namespaces/other/queues/hidden/invocations", map[string]any{}, adminSecret)
	require.Equal(t, 200, r.status, "%s", r.body)
	reader, _ := b.mint(t, "team", "train", 0, plane.PermissionRead)

	r = b.doJSON(t, "GET", "/v1/demand", nil, reader)
	require.Equal(t, 200, r.status, "%s", r.body)
	var got api.DemandResponse
	require.NoError(t, json.Unmarshal(r.body, &got))
	require.Len(t, got.Demand, 2, "the default shape and the a100 shape of the covered queue only: %s", r.body)
	require.Equal(t, "", got.Demand[0].Shape)
	require.Equal(t, int64(1), got.Demand[0].Queued)
	shape := (&plane.Requirement{GPUs: 1, GPUType: "a100"}).Shape()
	require.Equal(t, shape, got.Demand[1].Shape)
	require.Equal(t, int64(2), got.Demand[1].Queued)
	require.Equal(t, &api.Requirement{GPUs: 1, GPUType: "a100"}, got.Demand[1].Requirement)

	r = b.doJSON(t, "GET", "/v1/demand?namespace=team&queue=train&shape="+shape, nil, reader)
	require.NoError(t, json.Unmarshal(r.body, &got))
	require.Len(t, got.Demand, 1)
	require.Equal(t, int64(2), got.Demand[0].Queued)
	r = b.doJSON(t, "GET", "/v1/demand?namespace=team&shape=default", nil, reader)
	require.NoError(t, json.Unmarshal(r.body, &got))
	require.Len(t, got.Demand, 1)
	require.Equal(t, "", got.Demand[0].Shape)
	// Capable workers, from the registry: none live, then a worker offering nothing (it
	// can run the default shape only), then one offering an a100.
	capable := func() (def, gpu int64) {
		t.Helper()
		r := b.doJSON(t, "GET", "/v1/demand?namespace=team&queue=train", nil, reader)
		require.Equal(t, 200, r.status, "%s", r.body)
		var got api.DemandResponse
		require.NoError(t, json.Unmarshal(r.body, &got))
		require.Len(t, got.Demand, 2)
		require.NotNil(t, got.Demand[0].CapableWorkers, "%s", r.body)
		require.NotNil(t, got.Demand[1].CapableWorkers, "%s", r.body)
		return *got.Demand[0].CapableWorkers, *got.Demand[1].CapableWorkers
	}
	def, gpu := capable()
	require.Equal(t, [2]int64{0, 0}, [2]int64{def, gpu}, "no live worker: the a100 jobs have no capable worker")
	reg := map[string]any{"host": "h", "pid": 1, "queues": []string{"train"}, "started_at": time.Now()}
	require.Equal(t, 200, b.doJSON(t, "PUT", "/v1/namespaces/team/workers/cpu-1", reg, adminSecret).status)
	def, gpu = capable()
	require.Equal(t, [2]int64{1, 0}, [2]int64{def, gpu})
	reg["offers"] = map[string]any{"gpus": 2, "gpu_type": "a100"}
	require.Equal(t, 200, b.doJSON(t, "PUT", "/v1/namespaces/team/workers/gpu-1", reg, adminSecret).status)
	def, gpu = capable()
	require.Equal(t, [2]int64{2, 1}, [2]int64{def, gpu})

	r = b.doJSON(t, "GET", "/v1/demand?queue=train", nil, reader)
	require.Equal(t, 400, r.status, "%s", r.body)
	require.Contains(t, string(r.body), "namespace")
	r = b.doJSON(t, "GET", "/v1/demand?namespace=team&queue=train&shape=bogus", nil, reader)
	require.Equal(t, 400, r.status, "%s", r.body)
	require.Contains(t, string(r.body), "sh1_ and 32 hex digits")

	// An idle queue's shape has its row at zero (an autoscaler reads demand[0].queued);
	// not for a queue the token does not cover.
	idle := (&plane.Requirement{GPUs: 8}).Shape()
	for _, sh := range []string{"default", idle} {
		r = b.doJSON(t, "GET", "/v1/demand?namespace=team&queue=idle&shape="+sh, nil, adminSecret)
		require.Equal(t, 200, r.status, "%s", r.body)
		var zero api.DemandResponse
		require.NoError(t, json.Unmarshal(r.body, &zero))
		require.Len(t, zero.Demand, 1, "%s", r.body)
		require.Equal(t, int64(0), zero.Demand[0].Queued)
		require.Equal(t, "idle", zero.Demand[0].Queue)
		if sh == idle {
			require.Equal(t, idle, zero.Demand[0].Shape)
			require.Nil(t, zero.Demand[0].CapableWorkers, "an idle shape's requirement is not known")
		} else {
			require.Equal(t, "", zero.Demand[0].Shape)
		}
	}
	r = b.doJSON(t, "GET", "/v1/demand?namespace=other&queue=idle&shape=default", nil, reader)
	require.Equal(t, 200, r.status, "%s", r.body)
	var hidden api.DemandResponse
	require.NoError(t, json.Unmarshal(r.body, &hidden))
	require.Empty(t, hidden.Demand, "a queue the token does not cover has no row")

	r = b.do(t, "GET", "/metrics", "", nil, adminSecret)
	require.Contains(t, string(r.body), `lakeshore_demand_queued{namespace="team",queue="train",shape="`+shape+`"} 2`)
	require.Contains(t, string(r.body), `lakeshore_demand_queued{namespace="team",queue="train",shape="default"} 1`)
}
