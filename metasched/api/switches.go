package api

import "time"

// SwitchView is one switch of a host between pools.
type SwitchView struct {
	ID       string   `json:"id"`
	From     string   `json:"from"`
	To       string   `json:"to"`
	Host     string   `json:"host,omitempty"`
	Phase    string   `json:"phase"`
	Final    bool     `json:"final"`
	Requeued []string `json:"requeued,omitempty"`
	// LostWorkers are the worker VMs of running elastic jobs the switch
	// took off its host: their jobs went on without them.
	LostWorkers []string  `json:"lost_workers,omitempty"`
	FailedIn    string    `json:"failed_in,omitempty"`
	Reason      string    `json:"reason,omitempty"`
	ClearedTo   string    `json:"cleared_to,omitempty"`
	Started     time.Time `json:"started"`
	Updated     time.Time `json:"updated"`
	Seconds     float64   `json:"seconds"`
}

// SwitchRequest is the body of POST /v1/switches.
type SwitchRequest struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// SwitchList is a page of switches, newest first. Next, when set, is the
// Before of the next page.
type SwitchList struct {
	Switches []SwitchView `json:"switches"`
	Next     string       `json:"next,omitempty"`
}

// SwitchFilter selects switches for GET /v1/switches: with Active, only
// those in flight and the stranded ones not cleared; with Before (a switch
// ID), those started before it; at most Limit (0: DefaultPageSize).
type SwitchFilter struct {
	Active bool
	Before string
	Limit  int
}
