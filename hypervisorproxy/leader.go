package hypervisorproxy

import (
	"fmt"
	"net/http"
	"strconv"
)

// Several daemons may share a grid's state (in etcd), one of them leading.
// The agent follows the leader by a fencing token: the leader sends its
// epoch with every request (LeaderEpochHeader: the etcd revision at which
// it won its election, which grows with every new leader), and the agent
// refuses a request of an epoch lower than the highest it has seen (409
// stale_leader), so a daemon that lost the lead and still sends (it stalled,
// or was cut off from etcd) cannot change a host or a VM once its successor
// has spoken to the agent. The epoch is kept in the agent's record
// (DATA_DIR/agent.json), so a restart of the agent keeps it. A request
// without the header (a daemon with a store of its own, an operator's call)
// is served as ever.

// LeaderEpochHeader carries the epoch of the leading daemon that sends a
// request.
const LeaderEpochHeader = "Metasched-Leader-Epoch"

// followLeader refuses the requests of a daemon that no longer leads.
func (a *Agent) followLeader(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := r.Header.Get(LeaderEpochHeader)
		if v == "" {
			next.ServeHTTP(w, r)
			return
		}
		epoch, err := strconv.ParseInt(v, 10, 64)
		if err != nil || epoch < 1 {
			writeError(w, http.StatusBadRequest, "invalid", fmt.Sprintf("%s: must be a positive integer, not %q", LeaderEpochHeader, v))
			return
		}
		a.mu.Lock()
		switch {
		case epoch < a.epoch:
			seen := a.epoch
			a.mu.Unlock()
			a.log.Warn().Int64("epoch", epoch).Int64("leader_epoch", seen).Str("method", r.Method).Str("path", r.URL.Path).
				Msg("refused a request of a daemon that no longer leads")
			writeError(w, http.StatusConflict, "stale_leader",
				fmt.Sprintf("the daemon of epoch %d no longer leads: the agent follows the leader of epoch %d", epoch, seen))
			return
		case epoch > a.epoch:
			prev := a.epoch
			a.epoch = epoch
			if err := a.saveSyncedLocked(); err != nil {
				a.epoch = prev
				a.mu.Unlock()
				writeError(w, http.StatusInternalServerError, "internal", "cannot record the leader's epoch: "+err.Error())
				return
			}
			a.log.Info().Int64("epoch", epoch).Int64("previous", prev).Msg("a new leader: the agent follows it")
		}
		a.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}
