package httpapi

import (
	_ "embed"
	"io"
	"net/http"
	"strconv"
)

// openAPIDocument is httpapi/openapi.json, the OpenAPI 3.1 description of
// every route of this package, built into the binary so that the running
// service describes exactly the API it serves. A string, so nothing can
// change it once built.
//
//go:embed openapi.json
var openAPIDocument string

// openAPIPath is where the document is served.
const openAPIPath = "/openapi.json"

// serveOpenAPI serves GET /openapi.json. The document is public: it tells
// nothing that the API's own refusals would not, so it needs no token.
func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(openAPIDocument)))
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, openAPIDocument)
}
