package hypervisorproxy

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/metasched/metasched/internal/httpsrv"
)

// Serve serves the agent's API on ln (over TLS with the agent's
// certificate, every client presenting one, when it has one) until ctx is done, then stops
// accepting and gives the requests in flight up to 10 s to finish. The
// server has the timeouts of httpsrv (Config.HTTP overrides them) and caps
// the connections no request has authenticated yet at the site file's
// max_unproven_connections and max_unproven_per_address.
func (a *Agent) Serve(ctx context.Context, ln net.Listener) error {
	cfg := httpsrv.Config{Timeouts: a.httpTimeouts, Logger: a.log,
		Limits: httpsrv.Limits{MaxUnproven: a.site.MaxUnproven, MaxUnprovenPerAddress: a.site.MaxUnprovenPerAddress}}
	if a.tls != nil {
		cfg.TLS = a.tls.ServerConfig(tls.RequireAndVerifyClientCert)
	}
	srv := httpsrv.New(a.Handler(), cfg)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}
