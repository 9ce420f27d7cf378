// Package taskfarm is the master-worker application of the papers that
// GramVM places: a master holds T tasks and hands them, one at a time, to
// worker processes (one per vCPU of each worker VM), which compute each
// task's operations and send the result back. This file set holds the
// summary the master writes at the end of a run, which the daemon reads
// to account for every task per worker and per site.
package taskfarm
