package store

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCalibrationOfAnOlderStore: a store written before the calibration
// bucket existed (testdata/layout2.db) reads as no figure, takes figures,
// keeps them across a reopen, and stays at its layout; an empty key is
// refused and nothing is written.
func TestCalibrationOfAnOlderStore(t *testing.T) {
	ctx := context.Background()
	path := copyFile(t, filepath.Join("testdata", "layout2.db"))
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Calibrations(ctx)
	if err != nil || len(got) != 0 {
		t.Fatalf("an older store's calibration: %v %v, want none", got, err)
	}
	if err := s.SetCalibration(ctx, "", []byte("x")); !errors.Is(err, ErrInvalid) {
		t.Errorf("an empty key: %v, want ErrInvalid", err)
	}
	want := map[string][]byte{"perf/spain/debian": []byte(`{"ops_per_vcpu":1e8}`), "lan/spain": []byte(`{"mbps":70}`)}
	for k, v := range want {
		if err := s.SetCalibration(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetCalibration(ctx, "link/a/b", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if err := s.SetCalibration(ctx, "link/a/b", nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close() // every write is committed: closing loses nothing
	got, err = s.Calibrations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("figures after a reopen (-want +got):\n%s", diff)
	}
	if v, err := s.Layout(); err != nil || v != Layout {
		t.Errorf("layout %d %v, want %d", v, err, Layout)
	}
}
