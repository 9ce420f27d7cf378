package client

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzDecodeError decodes answers outside 2xx, as the daemon or a proxy in
// front of it may send them: every answer is a *RemoteError with its
// status; the API's error keeps its code, message and fields; any other
// body becomes a message of at most 200 bytes of it (and "…"), valid UTF-8
// when the body is.
func FuzzDecodeError(f *testing.F) {
	for _, tc := range remoteErrors {
		body, ok := tc.answer.(string)
		if !ok {
			data, err := json.Marshal(tc.answer)
			if err != nil {
				f.Fatal(err)
			}
			body = string(data)
		}
		f.Add(tc.status, []byte(body))
	}
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		e := decodeError(status, body)
		if e == nil || e.Status != status {
			t.Fatalf("decodeError(%d, %q) = %+v", status, body, e)
		}
		text := e.Error()
		if text == "" {
			t.Fatalf("decodeError(%d, %q): an error without a text", status, body)
		}
		if e.Code != "" || len(e.Fields) > 0 {
			return // the API's error, as it came
		}
		if rest, ok := strings.CutSuffix(e.Message, "…"); ok && len(rest) > 0 {
			if _, msg, _ := strings.Cut(rest, ": "); len(msg) > 200 {
				t.Errorf("the message keeps %d bytes of the body, over 200", len(msg))
			}
		}
		if utf8.Valid(body) && !utf8.ValidString(text) {
			t.Fatalf("decodeError(%d, %q): the text %q is not UTF-8, the body was", status, body, text)
		}
	})
}
