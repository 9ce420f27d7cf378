package kv_test

import (
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/metasched/metasched/metasched/store/kv"
	"github.com/metasched/metasched/metasched/store/kv/kvtest"
)

func TestBolt(t *testing.T) {
	kvtest.Run(t, func(t *testing.T) kv.DB {
		db, err := bolt.Open(filepath.Join(t.TempDir(), "kv.db"), 0o600, &bolt.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return kv.NewBolt(db)
	})
}
