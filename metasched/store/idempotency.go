package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/metasched/metasched/metasched/store/kv"
)

// Idempotency keys of submissions (docs/reference/http.md, "Idempotency keys";
// the bucket in docs/internals/store.md, "The buckets"): a client that sends a
// job again after a timeout, with the same key, gets the job its first request
// made instead of a second one. The key is recorded in the transaction that
// records the job, so that a crash never keeps one without the other.
//
// The bucket "idempotency" holds two nested buckets:
//
//	keys     key → 8-byte big-endian Unix nanoseconds of the first request,
//	         the 32-byte SHA-256 of its body, then the job's ID
//	created  the same 8 bytes, then the key → empty: the keys in the order
//	         they were made, so that the expired ones are dropped from the
//	         front without reading the others

var (
	bucketIdem    = []byte("idempotency")
	bucketKeys    = []byte("keys")
	bucketCreated = []byte("created")
)

// DefaultKeyRetention is Options.KeyRetention when it is not set.
const DefaultKeyRetention = 24 * time.Hour

// MaxKeyBytes bounds an idempotency key as the store records it.
const MaxKeyBytes = 256

// dropPerSubmit bounds the expired keys SubmitJobOnce drops in its
// transaction: more than one per new key, so that the expired keys never
// pile up, and few, so that a submission stays cheap.
const dropPerSubmit = 8

// ErrKeyReused is returned (wrapped) by SubmitJobOnce and LookupKey for an
// idempotency key that a request with another body made.
var ErrKeyReused = errors.New("idempotency key used with another request")

// IdempotencyKey identifies a submission for SubmitJobOnce.
type IdempotencyKey struct {
	// Key is the key as the store records it: the daemon makes it of the
	// caller's credentials and the key the caller sent (1 to MaxKeyBytes
	// bytes, opaque to the store).
	Key []byte
	// Body is the SHA-256 of the request's body: a repeat must send the
	// same one.
	Body [32]byte
}

func (k IdempotencyKey) check() error {
	if len(k.Key) == 0 || len(k.Key) > MaxKeyBytes {
		return fmt.Errorf("idempotency key of %d bytes: must be 1 to %d: %w", len(k.Key), MaxKeyBytes, ErrInvalid)
	}
	return nil
}

// keyRecord is the value of a key in bucket keys.
type keyRecord struct {
	created time.Time
	body    [32]byte
	job     string
}

func (r keyRecord) encode() []byte {
	v := make([]byte, 0, 40+len(r.job))
	v = binary.BigEndian.AppendUint64(v, uint64(r.created.UnixNano()))
	v = append(v, r.body[:]...)
	return append(v, r.job...)
}

func decodeKeyRecord(v []byte) (keyRecord, bool) {
	if len(v) <= 40 {
		return keyRecord{}, false
	}
	var r keyRecord
	r.created = time.Unix(0, int64(binary.BigEndian.Uint64(v[:8])))
	copy(r.body[:], v[8:40])
	r.job = string(v[40:])
	return r, true
}

func createdKey(at time.Time, key []byte) []byte {
	return append(binary.BigEndian.AppendUint64(nil, uint64(at.UnixNano())), key...)
}

// retention is how long a key is kept.
func (s *Store) retention() time.Duration {
	if s.keyRetention <= 0 {
		return DefaultKeyRetention
	}
	return s.keyRetention
}

// findKey reads key's record in tx: the job it made, when the key has not
// expired and that job exists. A record for another body is ErrKeyReused.
func (s *Store) findKey(tx kv.Tx, k IdempotencyKey, now time.Time) (Job, bool, error) {
	b := tx.Bucket(bucketIdem)
	if b == nil {
		return Job{}, false, nil
	}
	r, ok := decodeKeyRecord(b.Bucket(bucketKeys).Get(k.Key))
	if !ok || !now.Before(r.created.Add(s.retention())) {
		return Job{}, false, nil
	}
	j, err := getJob(tx, r.job)
	if errors.Is(err, ErrNotFound) {
		return Job{}, false, nil // the job's record is gone: the key made nothing that remains
	}
	if err != nil {
		return Job{}, false, err
	}
	if r.body != k.Body {
		return j, true, fmt.Errorf("the key made job %s with another body at %s: %w", r.job, r.created.UTC().Format(time.RFC3339), ErrKeyReused)
	}
	return j, true, nil
}

// LookupKey returns the job that a submission with key k made, and true,
// when the key is known and has not expired; ErrKeyReused (with that job)
// when the key was made with another body.
func (s *Store) LookupKey(ctx context.Context, k IdempotencyKey) (Job, bool, error) {
	if err := k.check(); err != nil {
		return Job{}, false, fmt.Errorf("look up key: %w", err)
	}
	var (
		j     Job
		found bool
		kerr  error
	)
	err := s.view(ctx, func(tx kv.Tx) error {
		var err error
		j, found, err = s.findKey(tx, k, s.stamp())
		if errors.Is(err, ErrKeyReused) {
			kerr, err = err, nil
		}
		return err
	})
	if err != nil {
		return Job{}, false, fmt.Errorf("look up key: %w", err)
	}
	return j, found, kerr
}

// SubmitJobOnce is SubmitJobBy with an idempotency key. When the key is
// known (made less than Options.KeyRetention ago) with the same body, it
// returns the job the key made, and false; with another body, that job and
// an error wrapping ErrKeyReused. Otherwise it records the job and the key
// in one transaction and returns the job, and true. Concurrent calls with
// one key make one job. It also drops a few expired keys.
func (s *Store) SubmitJobOnce(ctx context.Context, owner, typ string, spec json.RawMessage, reason string, k IdempotencyKey) (Job, bool, error) {
	if err := k.check(); err != nil {
		return Job{}, false, fmt.Errorf("submit job: %w", err)
	}
	if typ == "" {
		return Job{}, false, fmt.Errorf("submit job: empty type: %w", ErrInvalid)
	}
	if !json.Valid(spec) {
		return Job{}, false, fmt.Errorf("submit job: spec is not valid json: %w", ErrInvalid)
	}
	spec = slices.Clone(spec)
	key := IdempotencyKey{Key: slices.Clone(k.Key), Body: k.Body}
	var (
		j       Job
		made    bool
		refusal error // reported without failing the shared transaction
	)
	err := s.batch(ctx, func(tx kv.Tx) error {
		j, made, refusal = Job{}, false, nil
		now := s.stamp()
		old, found, err := s.findKey(tx, key, now)
		switch {
		case errors.Is(err, ErrKeyReused):
			j, refusal = old, err
			return nil
		case err != nil:
			return err
		case found:
			j = old
			return nil
		}
		if err := s.dropExpired(tx, now, dropPerSubmit); err != nil {
			return err
		}
		if j, err = s.putNewJob(tx, owner, typ, spec, reason, now); err != nil {
			return err
		}
		keys, created := tx.Bucket(bucketIdem).Bucket(bucketKeys), tx.Bucket(bucketIdem).Bucket(bucketCreated)
		if prev, ok := decodeKeyRecord(keys.Get(key.Key)); ok { // expired, or its job is gone
			if err := created.Delete(createdKey(prev.created, key.Key)); err != nil {
				return err
			}
		}
		if err := keys.Put(key.Key, keyRecord{created: now, body: key.Body, job: j.ID}.encode()); err != nil {
			return err
		}
		if err := created.Put(createdKey(now, key.Key), nil); err != nil {
			return err
		}
		made = true
		return nil
	})
	if err != nil {
		return Job{}, false, fmt.Errorf("submit job: %w", err)
	}
	if refusal != nil {
		return j, false, fmt.Errorf("submit job: %w", refusal)
	}
	if made {
		s.count(Queued, 1)
	}
	return j, made, nil
}

// DropExpiredKeys drops every idempotency key made Options.KeyRetention
// ago or earlier (by the store's clock) and returns how many it dropped.
func (s *Store) DropExpiredKeys(ctx context.Context) (int, error) {
	total := 0
	now := s.stamp()
	for {
		var n int
		err := s.batch(ctx, func(tx kv.Tx) error {
			var err error
			n, err = s.dropExpiredCount(tx, now, s.txnItems)
			return err
		})
		if err != nil {
			return total, fmt.Errorf("drop expired keys: %w", err)
		}
		total += n
		if n < s.txnItems {
			return total, nil
		}
	}
}

// Keys returns how many idempotency keys the store holds, expired ones
// not yet dropped included.
func (s *Store) Keys(ctx context.Context) (int, error) {
	var n int
	err := s.view(ctx, func(tx kv.Tx) error {
		return tx.Bucket(bucketIdem).Bucket(bucketKeys).ForEach(func(_, _ []byte) error {
			n++
			return nil
		})
	})
	if err != nil {
		return 0, fmt.Errorf("count keys: %w", err)
	}
	return n, nil
}

func (s *Store) dropExpired(tx kv.Tx, now time.Time, most int) error {
	_, err := s.dropExpiredCount(tx, now, most)
	return err
}

// dropExpiredCount drops up to most (all when negative) of the keys that
// expired by now, oldest first.
func (s *Store) dropExpiredCount(tx kv.Tx, now time.Time, most int) (int, error) {
	keys, created := tx.Bucket(bucketIdem).Bucket(bucketKeys), tx.Bucket(bucketIdem).Bucket(bucketCreated)
	limit := createdKey(now.Add(-s.retention()), nil) // created at or before: expired
	var drop [][]byte
	c := created.Cursor()
	for k, _ := c.First(); k != nil && len(k) > 8 && bytes.Compare(k[:8], limit) <= 0 && (most < 0 || len(drop) < most); k, _ = c.Next() {
		drop = append(drop, slices.Clone(k))
	}
	for _, k := range drop {
		if err := created.Delete(k); err != nil {
			return 0, err
		}
		// The key may have been made again since (an expired key reused):
		// its record then names a later time and stays.
		if r, ok := decodeKeyRecord(keys.Get(k[8:])); ok && r.created.UnixNano() == int64(binary.BigEndian.Uint64(k[:8])) {
			if err := keys.Delete(k[8:]); err != nil {
				return 0, err
			}
		}
	}
	return len(drop), nil
}

// createNested creates the buckets of the idempotency keys and of the
// output positions (Open's transaction): buckets older code ignores, so no
// new layout.
func createNested(tx kv.Tx) error {
	if _, err := tx.CreateBucketIfNotExists(bucketOutputs); err != nil {
		return fmt.Errorf("create bucket %s: %w", bucketOutputs, err)
	}
	b, err := tx.CreateBucketIfNotExists(bucketIdem)
	if err != nil {
		return fmt.Errorf("create bucket %s: %w", bucketIdem, err)
	}
	for _, n := range [][]byte{bucketKeys, bucketCreated} {
		if _, err := b.CreateBucketIfNotExists(n); err != nil {
			return fmt.Errorf("create bucket %s/%s: %w", bucketIdem, n, err)
		}
	}
	return nil
}
