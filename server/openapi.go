package server

import (
	_ "embed"
	"net/http"
)

// openAPI is the OpenAPI 3.1 description of the API, served at /v1/openapi.json. It is
// written by hand; TestOpenAPI checks that it names exactly the registered routes.
//
//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the OpenAPI 3.1 document of the API.
func OpenAPI() []byte { return append([]byte(nil), openAPI...) }

func (s *Server) handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(openAPI) //nolint:errcheck // the client went away
}
