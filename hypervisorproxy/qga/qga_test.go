package qga

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCommands(t *testing.T) {
	if got := Ping(); got != `{"execute":"guest-ping"}` {
		t.Errorf("Ping = %s", got)
	}
	if got := ExecStatus(42); got != `{"execute":"guest-exec-status","arguments":{"pid":42}}` {
		t.Errorf("ExecStatus = %s", got)
	}
	got, err := Exec{Path: "/bin/sh", Args: []string{"-c", `echo "$X"`}, Env: []string{"X=a b"}, Input: []byte("hi"), CaptureOutput: true}.Command()
	want := `{"execute":"guest-exec","arguments":{"path":"/bin/sh","arg":["-c","echo \"$X\""],"env":["X=a b"],"input-data":"aGk=","capture-output":true}}`
	if err != nil || got != want {
		t.Errorf("Exec.Command = %s, %v\nwant %s", got, err, want)
	}
	got, err = (Exec{Path: "uname"}).Command()
	if err != nil {
		t.Fatal(err)
	}
	if got != `{"execute":"guest-exec","arguments":{"path":"uname"}}` {
		t.Errorf("bare Exec.Command = %s", got)
	}
	_, err = Exec{Args: []string{"a\x00"}, Env: []string{"NOEQUALS", "=x"}, Input: make([]byte, MaxInput+1)}.Command()
	wantErr := []string{
		"path: must not be empty",
		"args[0]: must not contain NUL",
		`env[0]: must be NAME=value without NUL, not "NOEQUALS"`,
		`env[1]: must be NAME=value without NUL, not "=x"`,
		"input: must be at most 2097152 bytes, not 2097153",
	}
	if err == nil {
		t.Fatal("no error")
	}
	if diff := cmp.Diff(wantErr, strings.Split(err.Error(), "\n")); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

func TestReplies(t *testing.T) {
	if err := ParsePing(`{"return": {}}`); err != nil {
		t.Error(err)
	}
	err := ParsePing(`{"error": {"class": "GenericError", "desc": "no"}}`)
	var qe *Error
	if !errors.As(err, &qe) || qe.Class != "GenericError" || err.Error() != "guest agent: GenericError: no" {
		t.Errorf("error reply: %v", err)
	}
	if pid, err := ParseExec(`{"return": {"pid": 1234}}`); err != nil || pid != 1234 {
		t.Errorf("ParseExec = %d, %v", pid, err)
	}
	for _, bad := range []string{`{"return": {}}`, `{"return": {"pid": 0}}`, `{}`, `not json`, `{"return": {"pid": "x"}}`} {
		if pid, err := ParseExec(bad); err == nil {
			t.Errorf("ParseExec(%s) = %d", bad, pid)
		}
	}

	for _, tc := range []struct {
		text string
		want Status
	}{
		{`{"return": {"exited": false}}`, Status{Stdout: []byte{}, Stderr: []byte{}}},
		{`{"return": {"exited": true, "exitcode": 3, "out-data": "Ni4xLjAK", "err-data": "ZXJy", "out-truncated": true}}`,
			Status{Exited: true, ExitCode: 3, Stdout: []byte("6.1.0\n"), Stderr: []byte("err"), StdoutTruncated: true}},
		{`{"return": {"exited": true, "signal": 9}}`, Status{Exited: true, Signal: 9, Stdout: []byte{}, Stderr: []byte{}}},
	} {
		got, err := ParseExecStatus(tc.text)
		if err != nil {
			t.Errorf("%s: %v", tc.text, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.text, diff)
		}
	}
	for _, tc := range []struct{ text, want string }{
		{`{"return": {}}`, "guest agent: guest-exec-status reply has no exited: "},
		{`{"return": {"exited": true}}`, "guest agent: guest-exec-status reply of an exited process has neither exitcode nor signal"},
		{`{"return": {"exited": true, "exitcode": 0, "out-data": "!!"}}`, "guest agent: guest-exec-status out-data: illegal base64"},
		{`{"error": {"class": "GenericError", "desc": "Invalid parameter 'pid'"}}`, "guest agent: GenericError: Invalid parameter 'pid'"},
		{`{"return": 7}`, "guest agent: guest-exec-status reply: json: cannot unmarshal"},
	} {
		if _, err := ParseExecStatus(tc.text); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.text, err, tc.want)
		}
	}
}
