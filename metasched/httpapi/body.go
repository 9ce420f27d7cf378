package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/jobfile"
)

// withJobBody reads a size-limited job file body, decodes it once (the
// daemon takes the decoded job, or answers the decoding's field errors)
// and calls f.
func withJobBody(f func(r *http.Request, job jobfile.Request) (any, int, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if ct := r.Header.Get("Content-Type"); ct != "" && !acceptedType(ct) {
			writeError(w, http.StatusUnsupportedMediaType, api.APIError{Code: api.CodeUnsupported,
				Error: fmt.Sprintf("Content-Type %q: send the job file as application/json, application/yaml or text/plain", ct)})
			return
		}
		body, err := readBody(w, r)
		if err != nil {
			replyErr(w, err)
			return
		}
		out, status, err := f(r, jobfile.Decode(body))
		reply(w, status, out, err)
	}
}

func acceptedType(ct string) bool {
	ct, _, _ = strings.Cut(ct, ";")
	switch strings.TrimSpace(strings.ToLower(ct)) {
	case "application/json", "application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml", "text/plain", "application/octet-stream":
		return true
	}
	return false
}

// readBody reads a body of at most MaxBodyBytes.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, api.MaxBodyBytes))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, &api.RequestError{Status: http.StatusRequestEntityTooLarge, Code: api.CodeTooLarge,
			Msg: fmt.Sprintf("the body is larger than %d bytes", api.MaxBodyBytes)}
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil, &api.RequestError{Status: 400, Code: api.CodeInvalid,
			Msg: "the body did not arrive within the server's read timeout: the request is dropped"}
	}
	if err != nil {
		return nil, &api.RequestError{Status: 400, Code: api.CodeInvalid, Msg: "cannot read the body: " + err.Error()}
	}
	return b, nil
}

// strictJSON decodes a JSON body with no unknown fields.
func strictJSON(body []byte, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var ute *json.UnmarshalTypeError
		switch {
		case errors.As(err, &ute):
			return invalidField(ute.Field, fmt.Sprintf("must be %s, not a JSON %s", ute.Type, ute.Value))
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			f := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
			return invalidField(f, "unknown field")
		}
		return &api.RequestError{Status: 400, Code: api.CodeInvalid, Msg: "the body is not valid JSON: " + err.Error()}
	}
	if _, err := dec.Token(); err != io.EOF {
		return &api.RequestError{Status: 400, Code: api.CodeInvalid, Msg: "the body holds more than one JSON value: it must be one object"}
	}
	return nil
}

// invalidField is a 400 for one field of the request.
func invalidField(field, problem string) *api.RequestError {
	return &api.RequestError{Status: 400, Code: api.CodeInvalid, Msg: "invalid request", Fields: []api.FieldError{{Field: field, Problem: problem}}}
}
