// Package wire converts the daemon's values to the wire types of its HTTP
// API (package api) and back where something needs it.
//
// Package api imports only the standard library, so that the Go client and
// any program that talks to the daemon link neither the daemon nor its
// solver; its types mirror the domain's (selection's jobs and plans,
// gramvm's placements, links and tuning decisions, the job lifecycle's
// states and VMs, the agents' VMs, the policy's table view) field for
// field, with the same JSON. The conversions live here, on the daemon's
// side of that line: the daemon, its dry run and the command line (which
// prints a daemon's plan as it prints its own) share them, and their tests
// hold the mirror to the domain: a value converted encodes to the same
// bytes as the domain value, and a JSON field added to a domain type fails
// the tests until its mirror has it too.
//
// A conversion copies: the slices and maps of the result are its own (but
// for the bytes of a job's inputs, which nothing changes), and a nil slice
// stays nil (null in JSON) while an empty one stays empty ([]), as the
// domain value encodes.
package wire
