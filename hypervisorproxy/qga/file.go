package qga

import (
	"encoding/base64"
	"fmt"
)

// The file calls of the guest agent: guest-file-open returns a handle,
// guest-file-read, guest-file-write and guest-file-seek use it, and
// guest-file-close releases it. The agent keeps a handle until it is
// closed: whoever opens one must close it on every path. The agent
// creates a file it opens for writing with mode 0600 (other modes need a
// chmod in the guest).

// FileOpen is guest-file-open of path in mode ("r", "w", "a", as
// fopen(3)).
func FileOpen(path, mode string) string {
	return command("guest-file-open", struct {
		Path string `json:"path"`
		Mode string `json:"mode"`
	}{path, mode})
}

// ParseFileOpen reads the reply of guest-file-open: the handle.
func ParseFileOpen(text string) (int64, error) {
	var h *int64
	if err := reply("guest-file-open", text, &h); err != nil {
		return 0, err
	}
	if h == nil || *h < 0 {
		return 0, fmt.Errorf("guest agent: guest-file-open reply has no handle: %s", clip(text))
	}
	return *h, nil
}

// FileClose is guest-file-close of a handle.
func FileClose(handle int64) string {
	return command("guest-file-close", struct {
		Handle int64 `json:"handle"`
	}{handle})
}

// ParseFileClose reads the reply of guest-file-close.
func ParseFileClose(text string) error { return reply("guest-file-close", text, nil) }

// FileSeek is guest-file-seek of a handle to offset from the file's start.
func FileSeek(handle, offset int64) string {
	return command("guest-file-seek", struct {
		Handle int64  `json:"handle"`
		Offset int64  `json:"offset"`
		Whence string `json:"whence"`
	}{handle, offset, "set"})
}

// ParseFileSeek reads the reply of guest-file-seek: the new position.
func ParseFileSeek(text string) (int64, error) {
	var r struct {
		Position *int64 `json:"position"`
	}
	if err := reply("guest-file-seek", text, &r); err != nil {
		return 0, err
	}
	if r.Position == nil {
		return 0, fmt.Errorf("guest agent: guest-file-seek reply has no position: %s", clip(text))
	}
	return *r.Position, nil
}

// FileRead is guest-file-read of at most count bytes of a handle.
func FileRead(handle int64, count int) string {
	return command("guest-file-read", struct {
		Handle int64 `json:"handle"`
		Count  int   `json:"count"`
	}{handle, count})
}

// ParseFileRead reads the reply of guest-file-read: the bytes read and
// whether the read met the file's end.
func ParseFileRead(text string) ([]byte, bool, error) {
	var r struct {
		Count *int   `json:"count"`
		Buf   string `json:"buf-b64"`
		EOF   bool   `json:"eof"`
	}
	if err := reply("guest-file-read", text, &r); err != nil {
		return nil, false, err
	}
	if r.Count == nil {
		return nil, false, fmt.Errorf("guest agent: guest-file-read reply has no count: %s", clip(text))
	}
	data, err := base64.StdEncoding.DecodeString(r.Buf)
	if err != nil {
		return nil, false, fmt.Errorf("guest agent: guest-file-read buf-b64: %w", err)
	}
	if len(data) != *r.Count {
		return nil, false, fmt.Errorf("guest agent: guest-file-read reply counts %d bytes but carries %d", *r.Count, len(data))
	}
	return data, r.EOF, nil
}

// FileWrite is guest-file-write of data to a handle.
func FileWrite(handle int64, data []byte) string {
	return command("guest-file-write", struct {
		Handle int64  `json:"handle"`
		Buf    string `json:"buf-b64"`
	}{handle, base64.StdEncoding.EncodeToString(data)})
}

// ParseFileWrite reads the reply of guest-file-write: how many bytes
// were written.
func ParseFileWrite(text string) (int, error) {
	var r struct {
		Count *int `json:"count"`
	}
	if err := reply("guest-file-write", text, &r); err != nil {
		return 0, err
	}
	if r.Count == nil || *r.Count < 0 {
		return 0, fmt.Errorf("guest agent: guest-file-write reply has no count: %s", clip(text))
	}
	return *r.Count, nil
}
