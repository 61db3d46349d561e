package server_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/wire"
)

// BenchmarkSubmitBody compares one submit of the payload {"x": 1, "tags": ["a", "b"]} with
// a JSON body and with a msgpack body, over loopback HTTP to a ":memory:" plane.
// go test ./server -run '^$' -bench SubmitBody -benchtime 3000x
func BenchmarkSubmitBody(b *testing.B) {
	payload, err := api.JSONToWire([]byte(`{"x": 1, "tags": ["a", "b"]}`))
	if err != nil {
		b.Fatal(err)
	}
	msgBody, err := api.Msgpack.Marshal(&api.SubmitRequest{Payload: api.Value{Wire: payload}})
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name, contentType string
		body              []byte
	}{
		{"JSON", api.ContentTypeJSON, []byte(`{"payload": {"x": 1, "tags": ["a", "b"]}}`)},
		{"Msgpack", api.ContentTypeMsgpack, msgBody},
	} {
		b.Run(tc.name, func(b *testing.B) {
			postLoop(b, setup(b, nil), Q+"/invocations", tc.contentType, tc.body)
		})
	}
}

// BenchmarkDataPutWireRecords is the Python SDK's put: one POST D/records with a msgpack
// body of 1,000 wire records {"reward": float, "step": int, "tag": str}, into a data queue
// in a directory (each put committed, synced, before its answer). One op is one request.
// go test ./server -run '^$' -bench DataPutWireRecords -benchtime 200x
func BenchmarkDataPutWireRecords(b *testing.B) {
	recs := make([]api.Value, 1000)
	for i := range recs {
		w, err := wire.Marshal(map[string]any{"reward": float64(i) / 10, "step": int64(i), "tag": fmt.Sprintf("t%d", i)})
		if err != nil {
			b.Fatal(err)
		}
		recs[i] = api.Value{Wire: w}
	}
	body, err := api.Msgpack.Marshal(&api.DataPutRequest{Records: recs})
	if err != nil {
		b.Fatal(err)
	}
	postLoop(b, dataSetup(b, nil), D+"/records", api.ContentTypeMsgpack, body)
	b.ReportMetric(float64(b.N*len(recs))/b.Elapsed().Seconds(), "records/s")
}

// postLoop POSTs body to path of the bundle's server once per benchmark iteration, failing
// on any answer but 200.
func postLoop(b *testing.B, bundle *testBundle, path, contentType string, body []byte) {
	client := bundle.ts.Client()
	for b.Loop() {
		req, _ := http.NewRequest("POST", bundle.ts.URL+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body) //nolint:errcheck
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatal(resp.Status)
		}
	}
}
