// Package credentials is the daemon's subsystem of API credentials: the
// operator token (DATA_DIR/token), the tokens the operator makes (their
// hashes, kept by the store), and the dashboard's sessions that were
// logged out. It owns its state and its lock: a request's authentication
// reads it under a read lock and never waits for the daemon's own lock
// (docs/internals/daemon.md, "Subsystems").
//
// A Book is loaded from the store once (Load) and keeps a copy in memory
// for the check on every request; each change goes to the store first and
// into memory once the store has it, so a restart forgets nothing. Every
// change closes the channel Changed handed out: an event stream opened
// with a credential checks it again then.
package credentials
