package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/plane/sqliteplane"
	"github.com/lakeshore-dev/lakeshore/server"
)

// racingSet is a plane on which another set of the same queue's admission block lands
// right after each set (as a racing PUT would, between a set and a read back).
type racingSet struct {
	plane.Driver
	racing plane.Admission
}

func (r *racingSet) QueueAdmissionSet(ctx context.Context, p *plane.AdmissionParams) (*plane.Admission, error) {
	stored, err := r.Driver.QueueAdmissionSet(ctx, p)
	if err == nil {
		_, err = r.Driver.QueueAdmissionSet(ctx, &plane.AdmissionParams{Namespace: p.Namespace, Queue: p.Queue, Admission: r.racing})
	}
	return stored, err
}

// TestAdmissionSetAnswersItsOwnBlock: PUT …/admission answers the block it stored, and its
// ETag, even when another set lands right after it. Before, the server read the block back
// after the set and answered the racing set's block (max_depth 99) with its tag.
func TestAdmissionSetAnswersItsOwnBlock(t *testing.T) {
	back, err := sqliteplane.Open(t.Context(), ":memory:", nil)
	require.NoError(t, err)
	t.Cleanup(func() { back.Close() })
	ts, _ := serveDriver(t, &racingSet{Driver: back, racing: plane.Admission{MaxDepth: 99}}, server.Config{})
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, ts.URL+"/v1/namespaces/default/queues/jobs/admission",
		strings.NewReader(`{"max_depth": 5, "rate_limit": 2}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := ts.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	var out struct {
		Admission struct {
			MaxDepth  int64   `json:"max_depth"`
			RateLimit float64 `json:"rate_limit"`
			Burst     int64   `json:"burst"`
		} `json:"admission"`
	}
	require.NoError(t, json.Unmarshal(body, &out), string(body))
	require.Equal(t, int64(5), out.Admission.MaxDepth, string(body))
	require.Equal(t, 2.0, out.Admission.RateLimit)
	require.Equal(t, int64(2), out.Admission.Burst, "a burst that follows the rate, filled in as stored")
	own := plane.Admission{MaxDepth: 5, OnFull: plane.OnFullReject, RateLimit: 2, Burst: 2}
	require.Equal(t, `"`+plane.AdmissionTag(&own)+`"`, resp.Header.Get("ETag"))
}
