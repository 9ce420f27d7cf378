// Package lifecycle is the job lifecycle of the metasched daemon: its
// states and the transitions between them.
//
// The design is described in docs/design.md of the repository, section
// "The job lifecycle".
package lifecycle
