package qga

import (
	"strings"
	"testing"
)

func TestFileCommands(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{FileOpen("/run/a b", "r"), `{"execute":"guest-file-open","arguments":{"path":"/run/a b","mode":"r"}}`},
		{FileClose(7), `{"execute":"guest-file-close","arguments":{"handle":7}}`},
		{FileSeek(7, 4096), `{"execute":"guest-file-seek","arguments":{"handle":7,"offset":4096,"whence":"set"}}`},
		{FileRead(7, 1025), `{"execute":"guest-file-read","arguments":{"handle":7,"count":1025}}`},
		{FileWrite(7, []byte("hi")), `{"execute":"guest-file-write","arguments":{"handle":7,"buf-b64":"aGk="}}`},
	} {
		if tc.got != tc.want {
			t.Errorf("got  %s\nwant %s", tc.got, tc.want)
		}
	}
}

func TestFileReplies(t *testing.T) {
	if h, err := ParseFileOpen(`{"return": 1000}`); err != nil || h != 1000 {
		t.Errorf("ParseFileOpen = %d, %v", h, err)
	}
	if _, err := ParseFileOpen(`{"error": {"class": "GenericError", "desc": "failed to open file '/x' (mode: 'r'): No such file or directory"}}`); err == nil ||
		!strings.Contains(err.Error(), "No such file or directory") {
		t.Errorf("open error: %v", err)
	}
	if err := ParseFileClose(`{"return": {}}`); err != nil {
		t.Error(err)
	}
	if p, err := ParseFileSeek(`{"return": {"position": 12, "eof": false}}`); err != nil || p != 12 {
		t.Errorf("ParseFileSeek = %d, %v", p, err)
	}
	data, eof, err := ParseFileRead(`{"return": {"count": 3, "buf-b64": "YWJj", "eof": true}}`)
	if err != nil || string(data) != "abc" || !eof {
		t.Errorf("ParseFileRead = %q, %v, %v", data, eof, err)
	}
	if data, eof, err := ParseFileRead(`{"return": {"count": 0, "buf-b64": "", "eof": true}}`); err != nil || len(data) != 0 || !eof {
		t.Errorf("ParseFileRead of nothing = %q, %v, %v", data, eof, err)
	}
	if n, err := ParseFileWrite(`{"return": {"count": 5, "eof": false}}`); err != nil || n != 5 {
		t.Errorf("ParseFileWrite = %d, %v", n, err)
	}
	for _, tc := range []struct {
		what string
		err  error
		want string
	}{
		{"open without handle", second(ParseFileOpen(`{"return": null}`)), "guest-file-open reply has no handle"},
		{"open negative", second(ParseFileOpen(`{"return": -1}`)), "guest-file-open reply has no handle"},
		{"seek without position", second(ParseFileSeek(`{"return": {}}`)), "guest-file-seek reply has no position"},
		{"read without count", third(ParseFileRead(`{"return": {"buf-b64": ""}}`)), "guest-file-read reply has no count"},
		{"read bad base64", third(ParseFileRead(`{"return": {"count": 1, "buf-b64": "!!"}}`)), "guest-file-read buf-b64: illegal base64"},
		{"read count mismatch", third(ParseFileRead(`{"return": {"count": 4, "buf-b64": "YWJj"}}`)), "counts 4 bytes but carries 3"},
		{"write without count", second(ParseFileWrite(`{"return": {}}`)), "guest-file-write reply has no count"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.what, tc.err, tc.want)
		}
	}
}

func second[T any](_ T, err error) error        { return err }
func third[T, U any](_ T, _ U, err error) error { return err }
