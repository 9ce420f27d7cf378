package store

import (
	"flag"
	"os"
	"testing"
)

// TestMain stops the etcd cluster the tests shared (-store etcd).
func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if etcdCluster != nil {
		etcdCluster.Stop()
	}
	os.Exit(code)
}
