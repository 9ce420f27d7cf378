package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// The OpenAPI document is a contract that the tests hold: kin-openapi (the
// Go standard for OpenAPI 3) loads and validates it, its examples
// included.

// loadOpenAPI loads a document with kin-openapi and validates it, every
// example against its schema.
func loadOpenAPI(data []byte) (*openapi3.T, error) {
	l := openapi3.NewLoader()
	doc, err := l.LoadFromData(data)
	if err != nil {
		return nil, fmt.Errorf("load the document: %w", err)
	}
	if err := doc.Validate(context.Background(), openapi3.EnableExamplesValidation(), openapi3.EnableMultiError()); err != nil {
		return nil, fmt.Errorf("the document is not valid: %w", err)
	}
	return doc, nil
}

// kin-openapi loads the document and finds it valid, every example
// matching its schema; the check is live: an example that does not match
// fails it.
func TestOpenAPIValid(t *testing.T) {
	if _, err := loadOpenAPI(OpenAPI); err != nil {
		t.Fatal(err)
	}
	doc := openapiDoc(t)
	openapiObj(t, doc, "paths", "/v1/jobs", "post", "requestBody", "content", "application/yaml", "example")["tasks"] = "many"
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := loadOpenAPI(b); err == nil || !strings.Contains(err.Error(), "example") {
		t.Errorf("a job file example with tasks \"many\": %v, want an invalid example", err)
	}
}
