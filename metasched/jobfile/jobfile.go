package jobfile

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"

	"github.com/metasched/metasched/internal/yamlx"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/selection"
)

// Request is a job file as the daemon takes it.
type Request struct {
	// Job is the job the file gives, the defaults of the fields it left
	// out filled in; nil when Err is set.
	Job *selection.Job
	// VMGiven says the file gave vm: a job without one gets its type's VM
	// shape, which only the daemon knows.
	VMGiven bool
	// BodyHash is the SHA-256 of the bytes sent, which an idempotency
	// key's repeat must match.
	BodyHash [sha256.Size]byte
	// Err is the answer to a body that is not a valid job file (400
	// invalid, each problem a field error). The daemon answers it where it
	// would read the job: after it checks who may submit and, for a
	// submission with an idempotency key, the key, so that a caller gets
	// the answer it got when the daemon parsed the body itself.
	Err *api.RequestError
}

// Decode decodes a request body. The body's problems are in Err, never a
// panic: the body is anyone's bytes.
func Decode(body []byte) Request {
	r := Request{BodyHash: sha256.Sum256(body)}
	if len(strings.TrimSpace(string(body))) == 0 {
		r.Err = Invalid(api.FieldError{Problem: "the body is empty: send a job file (YAML or JSON)"})
		return r
	}
	j, given, err := selection.ParseJobFields("body", body)
	if err != nil {
		r.Err = Invalid(FieldErrors(err)...)
		return r
	}
	for i, in := range j.Inputs {
		if in.From != "" {
			r.Err = Invalid(api.FieldError{Field: fmt.Sprintf("inputs[%d].from", i), Problem: fmt.Sprintf(
				"%q is a file of the submitting machine, which the daemon does not read: send its bytes as data (base64), as metasched submit does", in.From)})
			return r
		}
	}
	r.Job, r.VMGiven = j, slices.Contains(given, "vm")
	return r
}

// Invalid is the 400 answer to a job that is not valid, with its problems.
func Invalid(fields ...api.FieldError) *api.RequestError {
	return &api.RequestError{Status: 400, Code: api.CodeInvalid, Msg: "the job is not valid", Fields: fields}
}

// FieldErrors turns the problems of a job file's parse error (each a
// *yamlx.Error, with the field's path) into field errors. The field is the
// path as the decoder found it, never read back from the error's text: a
// key may hold ": ", a space or a line break.
func FieldErrors(err error) []api.FieldError {
	var out []api.FieldError
	var walk func(e error)
	walk = func(e error) {
		if ye, ok := e.(*yamlx.Error); ok {
			out = append(out, api.FieldError{Field: ye.Path, Problem: ye.Msg})
			return
		}
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, c := range j.Unwrap() {
				walk(c)
			}
			return
		}
		out = append(out, api.FieldError{Problem: e.Error()})
	}
	walk(err)
	return out
}
