package api

import (
	"time"

	"github.com/metasched/metasched/gramvm"
)

// TuningRecord is one evaluated bandwidth tuning candidate and what became
// of it (GET /v1/tuning).
type TuningRecord struct {
	Seq int `json:"seq"`
	gramvm.TuningDecision
	At time.Time `json:"at"`
	// Outcome: "rejected", "not chosen", "carried out", or "failed: ...".
	Outcome string `json:"outcome"`
}
