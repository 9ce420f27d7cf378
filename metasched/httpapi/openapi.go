package httpapi

import (
	_ "embed"
	"net/http"
)

// OpenAPI is the OpenAPI 3 document of the server (every route of
// Routes), served at GET /v1/openapi.json.
//
//go:embed openapi.json
var OpenAPI []byte

func serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(OpenAPI)
}
