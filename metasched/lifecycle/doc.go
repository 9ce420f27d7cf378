// Package lifecycle is the job lifecycle of the metasched daemon: its
// states and the transitions between them.
package lifecycle
