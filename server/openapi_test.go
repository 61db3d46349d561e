package server_test

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
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
