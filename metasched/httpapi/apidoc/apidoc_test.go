package apidoc_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metasched/metasched/metasched/httpapi"
	"github.com/metasched/metasched/metasched/httpapi/apidoc"
)

var update = flag.Bool("update", false, "write "+apidoc.Page+" from the OpenAPI document")

// moduleRoot is the directory of the module's go.mod, above the test's.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = up
	}
}

// The page in the repository is the one the OpenAPI document gives; with
// -update (make docs), the test writes it.
func TestAPIReference(t *testing.T) {
	got, err := apidoc.Markdown(httpapi.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(moduleRoot(t), filepath.FromSlash(apidoc.Page))
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", apidoc.Page)
		return
	}
	want, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale: run %s", apidoc.Page, apidoc.Command)
	}
}

// The page's links and anchors are checked with every other Markdown
// page of the repository's (cmd/metasched's TestDocsLinks), by the same
// slugs as Slug's.

// The page says it is generated and how, describes every operation and
// every schema once, and is the same each time.
func TestAPIReferenceContent(t *testing.T) {
	page, err := apidoc.Markdown(httpapi.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	again, err := apidoc.Markdown(httpapi.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(page, again) {
		t.Error("two renderings of the document differ")
	}
	s := string(page)
	for _, want := range []string{"DO NOT EDIT", apidoc.Command, apidoc.UpdateCommand, "## Servers", "## Authentication", "## Schemas",
		"### POST /v1/jobs\n", "### GET /v1/jobs/{id}/outputs/{name}\n", "### APIError\n", "| 431 |"} {
		if !strings.Contains(s, want) {
			t.Errorf("the page has no %q", want)
		}
	}
	for _, rt := range httpapi.Routes {
		method, path, _ := strings.Cut(rt.Pattern, " ")
		path = strings.TrimSuffix(path, "{$}")
		path = strings.ReplaceAll(path, "...}", "}")
		if c := strings.Count(s, "\n### "+method+" "+path+"\n"); c != 1 {
			t.Errorf("route %s: %d headings, want 1", rt.Pattern, c)
		}
	}
}

func TestSlug(t *testing.T) {
	for text, want := range map[string]string{
		"GET /v1/jobs/{id}":            "get-v1jobsid",
		"Tag: jobs":                    "tag-jobs",
		"APIError":                     "apierror",
		"GET /v1/openapi.json":         "get-v1openapijson",
		"Snake_case and kebab-case é!": "snake_case-and-kebab-case-é",
	} {
		if got := apidoc.Slug(text); got != want {
			t.Errorf("Slug(%q) = %q, want %q", text, got, want)
		}
	}
}

// A document that is not JSON, or whose links do not resolve, is an error.
func TestMarkdownErrors(t *testing.T) {
	for _, doc := range []string{`{`, `[]`, `{"openapi":"3.1.0"} {}`} {
		if _, err := apidoc.Markdown([]byte(doc)); err == nil {
			t.Errorf("Markdown(%s): no error", doc)
		}
	}
	if _, err := apidoc.Markdown([]byte(`{"openapi":"3.1.0","info":{"title":"t","version":"1"},"paths":{}}`)); err != nil {
		t.Errorf("a document without operations: %v", err)
	}
}
