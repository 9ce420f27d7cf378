// Package jobfile decodes a job file sent to the daemon's API (POST
// /v1/jobs, POST /v1/plan) once, at the HTTP edge, into the typed request
// the daemon takes: the job, whether the file gave its VM, the hash of the
// exact bytes sent (an idempotency key's repeat is the same body byte for
// byte), or the 400 answer naming each field of a file that is not a valid
// job and its problem.
//
// The server (package httpapi) decodes, the daemon (package metasched)
// checks what only it knows (a registered type, a VM some cluster can hold,
// a plan on the whole grid) and records the job; neither parses the body
// again. Decoding is pure: the same bytes give the same request.
package jobfile
