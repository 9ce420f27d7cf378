package metasched

import (
	"context"
	"io"
)

// Backup writes a consistent copy of the daemon's store to w while the
// daemon runs (GET /v1/backup, metasched store backup); size hears its
// length first. "metasched store restore" puts such a copy back.
func (d *Daemon) Backup(ctx context.Context, size func(n int64), w io.Writer) (err error) {
	defer apiError(&err)
	var n int64
	err = d.st.Backup(ctx, func(m int64) {
		n = m
		if size != nil {
			size(m)
		}
	}, w)
	if err != nil {
		d.log.Warn().Err(err).Msg("store backup broke off")
		return err
	}
	d.log.Info().Int64("bytes", n).Msg("store backed up")
	return nil
}
