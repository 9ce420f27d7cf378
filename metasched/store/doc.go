// Package store is the metasched daemon's durable state: jobs and their
// lifecycle, each job's captured output, the switch coordinator's journal,
// the host pool assignments and the API token, kept in one embedded bbolt
// file.
//
// # Bucket layout
//
// The file holds six top-level buckets:
//
//	jobs     ID → Job as JSON (spec, state, every transition, exit code, data).
//	         The bucket's sequence numbers the jobs: ID "j-000000000042" is
//	         the 42nd job, so byte order is submission order.
//	states   "<state>/<ID>" → empty: an index of the jobs in each state, so
//	         that listing the queue does not read every finished job.
//	logs     ID → nested bucket of chunks, key 8-byte big-endian chunk
//	         number → bytes as appended, plus the key "size" holding the
//	         total; the oldest chunks are dropped (the oldest kept one cut)
//	         so that at most Options.MaxLogBytes per job are kept.
//	journal  8-byte big-endian sequence → opaque record of the switch
//	         coordinator, in append order.
//	hosts    host name → opaque value (pool assignment, stranded mark).
//	meta     "token" → the API token.
//	idempotency  the idempotency keys of submissions, recorded with their
//	         job (see SubmitJobOnce): nested "keys" (key → when it was
//	         made, the body's SHA-256, the job's ID) and "created" (that
//	         time and the key, in time order, for expiry).
//
// # Durability
//
// Every write returns only after its transaction has been committed and the
// file fsync'd (unless Options.NoSync, which is for tests only). A job that
// SubmitJob returned, a transition that Transition returned and a journal
// record whose sequence AppendJournal returned survive a crash of the
// process or of the machine; a restart with Open sees exactly the state of
// the last acknowledged write. Nothing is kept only in memory: the daemon
// resumes by listing the non-terminal jobs, reading the journal and the
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
// The design is described in docs/design.md of the repository, section
// "The store".
package store
