package api

import (
	"errors"
	"fmt"
	"testing"
)

func TestMark(t *testing.T) {
	cause := errors.New("store: no job j-1")
	err := Mark(fmt.Errorf("job j-1: %w", cause), ErrNotFound)
	if !errors.Is(err, ErrNotFound) || !errors.Is(err, cause) || errors.Is(err, ErrConflict) {
		t.Errorf("errors.Is: not found %t, the cause %t, conflict %t; want true, true, false",
			errors.Is(err, ErrNotFound), errors.Is(err, cause), errors.Is(err, ErrConflict))
	}
	if got, want := err.Error(), "job j-1: store: no job j-1"; got != want {
		t.Errorf("message %q, want the cause's %q", got, want)
	}
	if Mark(nil, ErrConflict) != nil {
		t.Error("Mark(nil) is not nil")
	}
}
