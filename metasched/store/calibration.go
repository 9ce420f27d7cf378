package store

import (
	"context"
	"fmt"
	"slices"

	"github.com/metasched/metasched/metasched/store/kv"
)

// The calibration's figures (docs/internals/daemon.md, "Calibration"): what the
// daemon measured in VMs of the grid (a site's operations per second per
// vCPU for an image, its LAN, a link VM to VM), with when, so that a
// restarted daemon plans on them at once and knows which are due.
//
// The bucket "calibration" holds: the figure's key (the daemon's: its
// kind, site or link, and image) → the daemon's record of it, opaque
// here. It is made by the first write: a store of an older metasched has
// none and reads as no figure (a bucket older code ignores: no new
// layout).
var bucketCalibration = []byte("calibration")

// SetCalibration records v for the figure key; a nil v deletes it.
func (s *Store) SetCalibration(ctx context.Context, key string, v []byte) error {
	if key == "" {
		return fmt.Errorf("set calibration: empty key: %w", ErrInvalid)
	}
	v = slices.Clone(v)
	err := s.batch(ctx, func(tx kv.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketCalibration)
		if err != nil {
			return err
		}
		if v == nil {
			return b.Delete([]byte(key))
		}
		return b.Put([]byte(key), v)
	})
	if err != nil {
		return fmt.Errorf("set calibration %s: %w", key, err)
	}
	return nil
}

// Calibrations returns every recorded figure by key; none for a store
// that never had one.
func (s *Store) Calibrations(ctx context.Context) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := s.view(ctx, func(tx kv.Tx) error {
		b := tx.Bucket(bucketCalibration)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			out[string(k)] = slices.Clone(v)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("read calibration: %w", err)
	}
	return out, nil
}
