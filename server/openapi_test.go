package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	verrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/server"
)

// TestOpenAPI checks that /v1/openapi.json names exactly the registered routes, with their
// methods, and that every $ref resolves.
func TestOpenAPI(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	r := b.do(t, "GET", "/v1/openapi.json", "", nil, "")
	require.Equal(t, 200, r.status)
	var doc struct {
		OpenAPI    string                                `json:"openapi"`
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(r.body, &doc))
	require.Equal(t, "3.1.0", doc.OpenAPI)

	var inDoc, registered []string
	for path, ops := range doc.Paths {
		for method := range ops {
			if method == "parameters" {
				continue
			}
			inDoc = append(inDoc, strings.ToUpper(method)+" "+path)
		}
	}
	for _, rt := range b.srv.Routes() {
		registered = append(registered, rt.Method+" "+rt.Path)
	}
	sort.Strings(inDoc)
	sort.Strings(registered)
	require.Equal(t, registered, inDoc, "the OpenAPI document and the router disagree")

	for _, ref := range refs(r.body) {
		name := strings.TrimPrefix(ref, "#/components/schemas/")
		require.Contains(t, doc.Components.Schemas, name, "dangling $ref %s", ref)
	}
}

func refs(doc []byte) []string {
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		panic(err)
	}
	var out []string
	var walk func(any)
	walk = func(x any) {
		switch x := x.(type) {
		case map[string]any:
			for k, e := range x {
				if k == "$ref" {
					out = append(out, fmt.Sprint(e))
				}
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return out
}

// TestOpenAPIValid checks the generated document with an independent validator
// (pb33f/libopenapi-validator): the document itself, then real JSON requests and answers
// of a whole lifecycle against it, so every route, parameter and field the server uses is
// one the document describes.
func TestOpenAPIValid(t *testing.T) {
	t.Parallel()
	doc, err := libopenapi.NewDocument(api.OpenAPI())
	require.NoError(t, err)
	v, errs := validator.NewValidator(doc)
	require.Empty(t, errs)
	ok, verrs := v.ValidateDocument()
	require.True(t, ok, "%v", verrs)

	b := setup(t, &server.Config{AdminToken: adminSecret})
	call := func(method, path, body string) map[string]any {
		t.Helper()
		req, err := http.NewRequest(method, b.ts.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		if body != "" {
			req.Header.Set("Content-Type", api.ContentTypeJSON)
		}
		req.Header.Set("Authorization", "Bearer "+adminSecret)
		resp, err := b.ts.Client().Do(req)
		require.NoError(t, err)
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		// Validate a copy of the exchange against the document.
		vreq, err := http.NewRequest(method, "http://localhost"+path, strings.NewReader(body))
		require.NoError(t, err)
		vreq.Header = req.Header.Clone()
		resp.Body = io.NopCloser(bytes.NewReader(data))
		var ok bool
		var verrs []*verrors.ValidationError
		if resp.StatusCode == 200 {
			ok, verrs = v.ValidateHttpRequestResponse(vreq, resp)
		} else {
			// A refused request is one the document refuses too; its answer is described.
			ok, verrs = v.ValidateHttpResponse(vreq, resp)
			if reqOK, _ := v.ValidateHttpRequest(vreq); reqOK {
				t.Errorf("%s %s: the server refused a request the document allows: %s", method, path, data)
			}
		}
		var msgs []string
		for _, e := range verrs {
			msgs = append(msgs, e.Message+": "+e.Reason)
			for _, se := range e.SchemaValidationErrors {
				msgs = append(msgs, "  "+se.Reason+" at "+se.FieldPath)
			}
		}
		require.True(t, ok, "%s %s → %d %s\n%s", method, path, resp.StatusCode, data, strings.Join(msgs, "\n"))
		var out map[string]any
		require.NoError(t, json.Unmarshal(data, &out))
		return out
	}
	sub := call("POST", Q+"/invocations", `{"payload": {"x": 1}, "key": "k", "priority": 1, "delay": 0, "metadata": {"a": "b"}}`)
	id := sub["id"].(string)
	call("POST", Q+"/invocations/batch", `{"invocations": [{"payload": [1, 2]}, {}]}`)
	call("GET", "/v1/invocations/"+id, "")
	call("GET", "/v1/invocations/"+id+"/wait?timeout=0", "")
	cl := call("POST", Q+"/claim", `{"max": 1, "lease_ttl": 30, "wait": 1, "worker": "w1"}`)
	job := cl["jobs"].([]any)[0].(map[string]any)
	tok := job["token"].(string)
	call("POST", "/v1/invocations/"+id+"/heartbeat", `{"token": "`+tok+`"}`)
	call("POST", "/v1/heartbeat", `{"heartbeats": [{"id": "`+id+`", "token": "`+tok+`"}]}`)
	call("POST", "/v1/invocations/"+id+"/frames", `{"token": "`+tok+`", "value": "half"}`)
	call("POST", "/v1/settle", `{"settles": [{"id": "`+id+`", "token": "`+tok+`", "outcome": "succeeded", "result": 2}]}`)
	call("GET", "/v1/invocations/"+id+"/wait?timeout=1", "")
	call("GET", "/v1/invocations/"+id+"/frames?since=-1&limit=10", "")
	call("POST", Q+"/topics/news/frames", `{"value": {"n": 1}}`)
	call("GET", Q+"/topics/news/frames?since=-1&wait=0", "")
	call("GET", Q+"/count?state=queued", "")
	call("GET", Q+"/stats", "")
	call("PUT", Q+"/admission", `{"max_depth": 10, "on_full": "reject"}`)
	call("GET", Q+"/admission", "")
	call("DELETE", Q+"/admission", "")
	call("GET", "/v1/queues", "")
	call("PUT", "/v1/namespaces/default/workers/w1", `{"host": "h", "pid": 1, "queues": ["jobs"], "started_at": "2026-12-01T05:00:00Z"}`)
	call("GET", "/v1/workers?seen_within=60", "")
	call("DELETE", "/v1/namespaces/default/workers/w1", "")
	call("POST", "/v1/invocations/"+sub["id"].(string)+"/cancel", "")
	call("POST", "/v1/maintain", "")
	call("POST", "/v1/trim", `{"finished_before": "2020-01-01T00:00:00Z"}`)
	tc := call("POST", "/v1/tokens", `{"namespace": "default", "queue": "*", "permissions": ["read"], "ttl": 60}`)
	call("GET", "/v1/tokens", "")
	call("DELETE", "/v1/tokens/"+tc["token"].(map[string]any)["id"].(string), "")
	// An error body is described too.
	call("POST", Q+"/invocations", `{"priority": "high"}`)
}
