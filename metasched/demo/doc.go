// Package demo is the daemon's built-in demo, what `metasched serve` runs
// with no flags: the bundled three-site grid of Bertogna et al. (Config),
// three job types, a stream of jobs with a demand shift (Stream), and a
// client that submits the stream to a daemon at its times and sums up
// what the daemon did with it (Run, Summary).
//
// Run is a client of the daemon like any other: it uses only the daemon's
// exported methods, through the interface Daemon that it declares
// (*metasched.Daemon implements it).
//
// The design is described in docs/guide/demo.md of the repository.
package demo
