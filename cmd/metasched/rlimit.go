package main

import (
	"syscall"

	"github.com/rs/zerolog"
)

// fileRoom is how many open files serve and agent want beyond their cap on
// unproven connections: the store, the hosts, the proven connections.
const fileRoom = 256

// warnFileLimit warns when the process's limit of open files leaves fewer
// than fileRoom files beyond maxUnproven. Go has already raised the soft
// limit to the hard one (docs/guide/daemon.md, "Slow clients"): only the hard
// limit, or a lower cap, can make room.
func warnFileLimit(log zerolog.Logger, maxUnproven int) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return
	}
	if l.Cur < uint64(maxUnproven)+fileRoom {
		log.Warn().Uint64("open_files_limit", l.Cur).Int("max_unproven_connections", maxUnproven).
			Msgf("the limit of open files leaves fewer than %d beyond the cap on unauthenticated connections: raise the hard limit (ulimit -Hn, systemd's LimitNOFILE) or lower max_unproven_connections", fileRoom)
	}
}
