package store

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/metasched/metasched/metasched/store/kv"
)

// Where a job's log stands in the output of its attempt
// (docs/internals/store.md, "The buckets"): the command executor keeps an
// attempt's output in a file, which the daemon copies to the job's log as it
// grows, and after a restart reads again from where the log stands; the
// position is recorded with each copy, in its transaction, so that no byte is
// taken twice.
//
// The bucket "outputs" holds: job ID → the attempt (8 bytes big-endian),
// then how many bytes of its output the log took (8 bytes).
var bucketOutputs = []byte("outputs")

// outputAt reads the position of job id's log in attempt's output.
func outputAt(tx kv.Tx, id string, attempt int) int64 {
	b := tx.Bucket(bucketOutputs)
	if b == nil {
		return 0
	}
	v := b.Get([]byte(id))
	if len(v) != 16 || int(binary.BigEndian.Uint64(v[:8])) != attempt {
		return 0
	}
	return int64(binary.BigEndian.Uint64(v[8:]))
}

// OutputTaken returns how many bytes of the output of attempt the log of
// job id took (AppendLogAt); 0 when it took none of that attempt.
func (s *Store) OutputTaken(ctx context.Context, id string, attempt int) (int64, error) {
	var n int64
	err := s.view(ctx, func(tx kv.Tx) error {
		n = outputAt(tx, id, attempt)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("output of job %s: %w", id, err)
	}
	return n, nil
}

// AppendLogAt adds to job id's log the bytes of chunk that it has not
// taken yet, chunk being the output of attempt from byte offset on, and
// records in the same transaction how far the log took that output: a
// chunk sent again (after a restart) adds nothing twice. A chunk that
// begins beyond the position (bytes never sent) is added as it is. The
// log keeps the last Options.MaxLogBytes as AppendLog does.
func (s *Store) AppendLogAt(ctx context.Context, id string, attempt int, offset int64, chunk []byte) error {
	if offset < 0 || attempt < 0 {
		return fmt.Errorf("append log of job %s: attempt %d, offset %d: %w", id, attempt, offset, ErrInvalid)
	}
	if len(chunk) == 0 {
		return nil
	}
	chunk = slices.Clone(chunk)
	var missing error
	err := s.batch(ctx, func(tx kv.Tx) error {
		missing = nil
		if tx.Bucket(bucketJobs).Get([]byte(id)) == nil {
			missing = fmt.Errorf("job %q: %w", id, ErrNotFound)
			return nil
		}
		end := offset + int64(len(chunk))
		at := outputAt(tx, id, attempt)
		if end <= at {
			return nil // taken already
		}
		if err := s.appendLogTx(tx, id, chunk[max(at-offset, 0):]); err != nil {
			return err
		}
		v := binary.BigEndian.AppendUint64(nil, uint64(attempt))
		return tx.Bucket(bucketOutputs).Put([]byte(id), binary.BigEndian.AppendUint64(v, uint64(end)))
	})
	if err != nil {
		return fmt.Errorf("append log of job %s: %w", id, err)
	}
	return missing
}
