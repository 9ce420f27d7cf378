// Package store is the metasched daemon's durable state: jobs and their
// lifecycle, each job's captured output, the switch coordinator's records,
// the host pool assignments and the API token, kept in one embedded bbolt
// file.
//
// # Bucket layout
//
// The buckets, and the versions of the layout (Layout), are described in
// docs/internals/store.md, "The buckets" and "Layout versions": jobs (ID → the
// job as JSON), its indexes by state (states: STATE/ID), by type (types:
// TYPE/ID) and by both (statetypes: STATE/TYPE/ID), the jobs' output (logs),
// the last record of each switch by number (switches, switches.go) with its
// indexes of the open ones, of the closed ones by end and of each host's last
// one, the hosts' records, revoked sessions, the idempotency keys of
// submissions (idempotency, recorded with their job), how far each attempt's
// output is in its job's log (outputs), the calibration's figures
// (calibration, calibration.go), and meta (the token and the layout). A
// listing reads one index cursor per state from its After on, and the switches
// newest first from Before on, so that a page costs what it holds; a restart
// reads the open switches and one per host.
//
// # Durability
//
// Every write returns only after its transaction has been committed and the
// file fsync'd (unless Options.NoSync, which is for tests only). A job that
// SubmitJob returned, a transition that Transition returned and a switch's
// record that PutSwitch returned survive a crash of the process or of the
// machine; a restart with Open sees exactly the state of
// the last acknowledged write. Nothing is kept only in memory: the daemon
// resumes by listing the non-terminal jobs, reading the open switches and the
// hosts.
//
// # Group commit
//
// An fsync costs about a millisecond or more, so one transaction per
// submission would cap the store at roughly a thousand writes per second.
// The writes here go through bbolt's DB.Batch: concurrent callers arriving
// within Options.MaxBatchDelay of each other (or until Options.MaxBatchSize
// of them are waiting) are run as one read-write transaction with one
// fsync, and each is acknowledged only when that shared commit has
// succeeded. Throughput therefore grows with the number of concurrent
// callers, at the price of up to MaxBatchDelay of added latency for a lone
// caller. A batched function may be run more than once (bbolt retries the
// others alone when one fails), so each one computes its result afresh and
// reports refusals such as ErrConflict without failing the shared
// transaction.
//
// The context given to a write is checked before the write is queued; once
// queued the write is not abandoned, so that a caller never sees an error
// for a write that was in fact made durable.
//
// The design is described in docs/internals/store.md of the
// repository.
package store
