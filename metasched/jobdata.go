package metasched

import (
	"encoding/json"
	"time"

	"github.com/metasched/metasched/gramvm"
	"github.com/metasched/metasched/metasched/api"
)

// jobData is the daemon's own record of a job, kept in the store beside it
// (store.Job.Data) so that a restart can resume the job.
type jobData struct {
	Placement *gramvm.Placement `json:"placement,omitempty"`
	VMs       []api.JobVM       `json:"vms,omitempty"`
	// Predicted is the scaled run time; Started when it began running.
	Predicted float64   `json:"predicted_s,omitempty"`
	Started   time.Time `json:"started,omitzero"`
	Finished  time.Time `json:"finished,omitzero"`
	Attempts  int       `json:"attempts,omitempty"`
}

func decodeJobData(raw json.RawMessage) jobData {
	var d jobData
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &d) // written by this daemon; a bad record reads as empty
	}
	return d
}
