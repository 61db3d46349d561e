package server_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/lakeshore-dev/lakeshore/api"
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
			bundle := setup(b, nil)
			client := bundle.ts.Client()
			for b.Loop() {
				req, _ := http.NewRequest("POST", bundle.ts.URL+Q+"/invocations", bytes.NewReader(tc.body))
				req.Header.Set("Content-Type", tc.contentType)
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
		})
	}
}
