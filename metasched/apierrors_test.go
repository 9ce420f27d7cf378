package metasched

import (
	"errors"
	"fmt"
	"testing"

	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/store"
	"github.com/metasched/metasched/metasched/store/kv"
)

// The daemon's boundary marks the store's errors with the API's kinds,
// keeping their text and cause; other errors pass unchanged.
func TestAPIError(t *testing.T) {
	other := errors.New("disk full")
	for _, tc := range []struct {
		err  error
		kind error // nil: unmarked
	}{
		{fmt.Errorf("job %q: %w", "j-1", store.ErrNotFound), api.ErrNotFound},
		{fmt.Errorf("commit: %w", store.ErrConflict), api.ErrConflict},
		{fmt.Errorf("submit: %w", kv.ErrNoAnswer), api.ErrUnavailable},
		{fmt.Errorf("commit: %w", kv.ErrFenced), api.ErrUnavailable},
		{other, nil},
		{&api.RequestError{Status: 404, Code: api.CodeNotFound, Msg: "no job"}, nil},
	} {
		err := tc.err
		apiError(&err)
		if err.Error() != tc.err.Error() || !errors.Is(err, tc.err) {
			t.Errorf("%v: marked as %v, which lost the text or the cause", tc.err, err)
		}
		for _, k := range []error{api.ErrNotFound, api.ErrConflict, api.ErrUnavailable} {
			if errors.Is(err, k) != (k == tc.kind) {
				t.Errorf("%v: errors.Is(%v) %t, want %t", tc.err, k, errors.Is(err, k), k == tc.kind)
			}
		}
	}
	var none error
	if apiError(&none); none != nil {
		t.Errorf("nil marked as %v", none)
	}
}
