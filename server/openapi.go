package server

import (
	"net/http"

	"github.com/lakeshore-dev/lakeshore/api"
)

// OpenAPI returns the OpenAPI 3.1 document of the API (api.OpenAPI: generated from the
// route table and the body types).
func OpenAPI() []byte { return api.OpenAPI() }

func (s *Server) handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(api.OpenAPI()) //nolint:errcheck // the client went away
}
