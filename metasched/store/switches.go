package store

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/metasched/metasched/metasched/store/kv"
)

// The switches of hosts between pools (layout 3). The switch coordinator's
// records are each the whole state of one switch, so the store keeps the
// last one of each switch, by number, instead of a journal of every step:
// a step costs one write whatever the number of past switches, a restart
// reads the switches still open and the last switch of each host, and a
// listing reads its page. Finished switches are kept until TrimSwitches
// drops them.
var (
	// number (8 bytes) → the last record (encodeSwitch); the bucket's
	// sequence is the highest number ever put, kept when switches are
	// trimmed, so that numbers continue after a restart.
	bucketSwitches = []byte("switches")
	// number → empty, for the switches that are open.
	bucketSwitchOpen = []byte("switches-open")
	// end time (8 bytes, Unix nanoseconds) and number → empty, for the
	// closed switches, oldest end first: what TrimSwitches drops first.
	bucketSwitchEnded = []byte("switches-ended")
	// host → the number of the last switch that moved it.
	bucketSwitchHost = []byte("switches-host")
	// meta: how many closed switches are kept (8 bytes).
	keySwitchesClosed = []byte("switches-closed")
)

// SwitchRecord is the last record of one switch.
type SwitchRecord struct {
	// Num numbers the switch (the daemon's s-000042 is 42); > 0.
	Num uint64
	// Host is the host the switch moves, once chosen.
	Host string
	// Open says the switch still matters to a restart: in flight, or a
	// host stranded and not cleared. A switch that is not open is closed:
	// it ended at Ended, and TrimSwitches may drop it.
	Open  bool
	Ended time.Time
	// Data is the record itself, opaque to the store.
	Data []byte
}

// encodeSwitch: a version byte (1), an open byte, the end in Unix
// nanoseconds (8 bytes), the host's length (2 bytes) and the host, the
// data.
func encodeSwitch(r SwitchRecord) []byte {
	v := make([]byte, 0, 12+len(r.Host)+len(r.Data))
	v = append(v, 1, 0)
	if r.Open {
		v[1] = 1
	}
	var ended uint64
	if !r.Open {
		ended = uint64(r.Ended.UnixNano())
	}
	v = binary.BigEndian.AppendUint64(v, ended)
	v = binary.BigEndian.AppendUint16(v, uint16(len(r.Host)))
	v = append(v, r.Host...)
	return append(v, r.Data...)
}

func decodeSwitch(num uint64, v []byte) (SwitchRecord, error) {
	bad := func(why string) (SwitchRecord, error) {
		return SwitchRecord{}, fmt.Errorf("switch %d: %s: %w", num, why, ErrCorrupt)
	}
	if len(v) < 12 || v[0] != 1 || v[1] > 1 {
		return bad("not a switch record")
	}
	n := int(binary.BigEndian.Uint16(v[10:12]))
	if len(v) < 12+n {
		return bad("its host is cut")
	}
	r := SwitchRecord{Num: num, Open: v[1] == 1, Host: string(v[12 : 12+n]), Data: slices.Clone(v[12+n:])}
	if !r.Open {
		r.Ended = time.Unix(0, int64(binary.BigEndian.Uint64(v[2:10]))).UTC()
	}
	return r, nil
}

func endedKey(at time.Time, num uint64) []byte {
	k := binary.BigEndian.AppendUint64(nil, uint64(at.UnixNano()))
	return binary.BigEndian.AppendUint64(k, num)
}

// PutSwitch records r as the last record of switch r.Num, in place of the
// one before, and returns once it is on disk.
func (s *Store) PutSwitch(ctx context.Context, r SwitchRecord) error {
	if err := checkSwitch(r); err != nil {
		return fmt.Errorf("put switch: %w", err)
	}
	r.Data = slices.Clone(r.Data)
	if err := s.batch(ctx, func(tx kv.Tx) error { return putSwitch(tx, r) }); err != nil {
		return fmt.Errorf("put switch %d: %w", r.Num, err)
	}
	return nil
}

func checkSwitch(r SwitchRecord) error {
	switch {
	case r.Num == 0:
		return fmt.Errorf("switch number 0: %w", ErrInvalid)
	case !r.Open && r.Ended.IsZero():
		return fmt.Errorf("switch %d: closed without an end time: %w", r.Num, ErrInvalid)
	case !r.Open && r.Ended.UnixNano() <= 0:
		return fmt.Errorf("switch %d: end time %v before 1970: %w", r.Num, r.Ended, ErrInvalid)
	case len(r.Host) > 1<<16-1:
		return fmt.Errorf("switch %d: host name of %d bytes: %w", r.Num, len(r.Host), ErrInvalid)
	}
	return nil
}

func putSwitch(tx kv.Tx, r SwitchRecord) error {
	b := tx.Bucket(bucketSwitches)
	key := u64(r.Num)
	closed := switchesClosed(tx)
	if prev := b.Get(key); prev != nil {
		if p, err := decodeSwitch(r.Num, prev); err == nil && !p.Open {
			if err := tx.Bucket(bucketSwitchEnded).Delete(endedKey(p.Ended, r.Num)); err != nil {
				return err
			}
			closed--
		}
	}
	if err := b.Put(key, encodeSwitch(r)); err != nil {
		return err
	}
	if r.Num > b.Sequence() {
		if err := b.SetSequence(r.Num); err != nil {
			return err
		}
	}
	open := tx.Bucket(bucketSwitchOpen)
	if r.Open {
		if err := open.Put(key, nil); err != nil {
			return err
		}
	} else {
		if err := open.Delete(key); err != nil {
			return err
		}
		if err := tx.Bucket(bucketSwitchEnded).Put(endedKey(r.Ended, r.Num), nil); err != nil {
			return err
		}
		closed++
	}
	if r.Host != "" {
		hosts := tx.Bucket(bucketSwitchHost)
		if cur := hosts.Get([]byte(r.Host)); len(cur) != 8 || binary.BigEndian.Uint64(cur) <= r.Num {
			if err := hosts.Put([]byte(r.Host), key); err != nil {
				return err
			}
		}
	}
	return tx.Bucket(bucketMeta).Put(keySwitchesClosed, u64(closed))
}

func switchesClosed(tx kv.Tx) uint64 {
	if v := tx.Bucket(bucketMeta).Get(keySwitchesClosed); len(v) == 8 {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// SwitchSeq returns the highest switch number ever put (0: none), trimmed
// switches included.
func (s *Store) SwitchSeq(ctx context.Context) (uint64, error) {
	var n uint64
	err := s.view(ctx, func(tx kv.Tx) error {
		n = tx.Bucket(bucketSwitches).Sequence()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("switch sequence: %w", err)
	}
	return n, nil
}

// RestoreSwitches returns, in number order, what a restart needs: the
// open switches, and the last switch of each host (whose final
// notification the crash may have cut). It reads no other switch, so a
// restart costs the same however many switches are kept.
func (s *Store) RestoreSwitches(ctx context.Context) ([]SwitchRecord, error) {
	var out []SwitchRecord
	err := s.view(ctx, func(tx kv.Tx) error {
		var nums []uint64
		if err := tx.Bucket(bucketSwitchOpen).ForEach(func(k, _ []byte) error {
			nums = append(nums, binary.BigEndian.Uint64(k))
			return nil
		}); err != nil {
			return err
		}
		if err := tx.Bucket(bucketSwitchHost).ForEach(func(_, v []byte) error {
			if len(v) == 8 {
				nums = append(nums, binary.BigEndian.Uint64(v))
			}
			return nil
		}); err != nil {
			return err
		}
		slices.Sort(nums)
		b := tx.Bucket(bucketSwitches)
		for _, n := range slices.Compact(nums) {
			v := b.Get(u64(n))
			if v == nil {
				continue // a host's last switch, trimmed
			}
			r, err := decodeSwitch(n, v)
			if err != nil {
				return err
			}
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("restore switches: %w", err)
	}
	return out, nil
}

// Switches returns at most limit switches (0: every one) numbered below
// before (0: from the newest), newest first. A record that cannot be
// decoded is left out and reported to Options.OnCorrupt.
func (s *Store) Switches(ctx context.Context, before uint64, limit int) ([]SwitchRecord, error) {
	if limit < 0 {
		return nil, fmt.Errorf("list switches: negative limit %d: %w", limit, ErrInvalid)
	}
	out := []SwitchRecord{}
	err := s.view(ctx, func(tx kv.Tx) error {
		c := tx.Bucket(bucketSwitches).Cursor()
		var k, v []byte
		if before == 0 {
			k, v = c.Last()
		} else if k, v = c.Seek(u64(before)); k == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
		for ; k != nil && (limit == 0 || len(out) < limit); k, v = c.Prev() {
			n := binary.BigEndian.Uint64(k)
			s.visits.Add(1)
			r, err := decodeSwitch(n, v)
			if err != nil {
				s.corrupt(fmt.Sprintf("switch %d", n), err)
				continue
			}
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list switches: %w", err)
	}
	return out, nil
}

// SwitchTrim says which closed switches TrimSwitches drops.
type SwitchTrim struct {
	// EndedBefore drops the switches that ended before it (zero: none
	// for their age).
	EndedBefore time.Time
	// MaxCount drops the oldest ones beyond this many (0: none for their
	// number).
	MaxCount int
	// Keep keeps, whatever the rest says, the switches that ended at or
	// after it (the daemon: those whose final notification may still be
	// carried out).
	Keep time.Time
}

// TrimSwitches drops the closed switches t selects, those that ended first
// first, and returns how many it dropped. Open switches are never dropped,
// nor the sequence. It costs what it drops.
func (s *Store) TrimSwitches(ctx context.Context, t SwitchTrim) (int, error) {
	if t.MaxCount < 0 {
		return 0, fmt.Errorf("trim switches: negative count %d: %w", t.MaxCount, ErrInvalid)
	}
	total := 0
	for {
		dropped := 0
		err := s.batch(ctx, func(tx kv.Tx) error {
			dropped = 0
			closed := switchesClosed(tx)
			var drop [][]byte
			c := tx.Bucket(bucketSwitchEnded).Cursor()
			for k, _ := c.First(); k != nil && len(drop) < s.txnItems; k, _ = c.Next() {
				if len(k) != 16 {
					continue
				}
				ended := time.Unix(0, int64(binary.BigEndian.Uint64(k[:8])))
				if !t.Keep.IsZero() && !ended.Before(t.Keep) {
					break
				}
				old := !t.EndedBefore.IsZero() && ended.Before(t.EndedBefore)
				many := t.MaxCount > 0 && closed-uint64(len(drop)) > uint64(t.MaxCount)
				if !old && !many {
					break // the rest ended later still
				}
				drop = append(drop, slices.Clone(k))
			}
			b, ends, hosts := tx.Bucket(bucketSwitches), tx.Bucket(bucketSwitchEnded), tx.Bucket(bucketSwitchHost)
			for _, k := range drop {
				num := k[8:]
				if v := b.Get(num); v != nil {
					if r, err := decodeSwitch(binary.BigEndian.Uint64(num), v); err == nil && r.Host != "" {
						if cur := hosts.Get([]byte(r.Host)); string(cur) == string(num) {
							if err := hosts.Delete([]byte(r.Host)); err != nil {
								return err
							}
						}
					}
				}
				if err := b.Delete(num); err != nil {
					return err
				}
				if err := ends.Delete(k); err != nil {
					return err
				}
			}
			dropped = len(drop)
			return tx.Bucket(bucketMeta).Put(keySwitchesClosed, u64(closed-uint64(len(drop))))
		})
		if err != nil {
			return total, fmt.Errorf("trim switches: %w", err)
		}
		total += dropped
		if dropped < s.txnItems {
			return total, nil
		}
	}
}

// ClosedSwitches returns how many closed switches are kept.
func (s *Store) ClosedSwitches(ctx context.Context) (int, error) {
	var n uint64
	err := s.view(ctx, func(tx kv.Tx) error {
		n = switchesClosed(tx)
		return nil
	})
	return int(n), err
}

// JournalRecord is one record of the journal of layout 2, in which the
// switch coordinator appended a record at every step.
type JournalRecord struct {
	Seq  uint64 // 1 for the first record ever appended, increasing
	Data []byte // opaque to the store
}

// Journal returns the records of a journal of layout 2 that ConvertJournal
// has not converted yet, in append order.
func (s *Store) Journal(ctx context.Context) ([]JournalRecord, error) {
	var out []JournalRecord
	err := s.view(ctx, func(tx kv.Tx) error {
		out = journal(tx)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read journal: %w", err)
	}
	return out, nil
}

func journal(tx kv.Tx) []JournalRecord {
	var out []JournalRecord
	_ = tx.Bucket(bucketJournal).ForEach(func(k, v []byte) error {
		if len(k) == 8 {
			out = append(out, JournalRecord{Seq: binary.BigEndian.Uint64(k), Data: slices.Clone(v)})
		}
		return nil
	})
	return out
}

// ConvertJournal converts a journal of layout 2 into switch records in one
// transaction: convert gets every journal record, in append order, and
// returns the switches they leave (the last record of each); they are put
// and the journal emptied. It returns how many journal records it
// converted (0 when there are none, as in every store written by this
// layout). A convert that fails changes nothing.
func (s *Store) ConvertJournal(ctx context.Context, convert func([]JournalRecord) ([]SwitchRecord, error)) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	n := 0
	err := s.update(ctx, func(tx kv.Tx) error {
		recs := journal(tx)
		if len(recs) == 0 {
			return nil
		}
		sws, err := convert(recs)
		if err != nil {
			return err
		}
		for _, r := range sws {
			if err := checkSwitch(r); err != nil {
				return err
			}
			if err := putSwitch(tx, r); err != nil {
				return err
			}
		}
		b := tx.Bucket(bucketJournal)
		for _, r := range recs {
			if err := b.Delete(u64(r.Seq)); err != nil {
				return err
			}
		}
		n = len(recs)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("convert the switch journal: %w", err)
	}
	return n, nil
}
