// Package client is the Go client of the metasched daemon's HTTP API (the
// routes and wire types of package api). It is what the
// command line's submit, jobs, status, cancel, logs, plan, pools, switches
// and hosts commands use, and what a program that drives the daemon should
// use too.
//
// A Client is made with the daemon's address and its bearer token, then
// each method is one route:
//
//	c := client.New("http://127.0.0.1:8080", token)
//	job, err := c.Submit(ctx, jobFile) // the job file's bytes, YAML or JSON
//	if err != nil { ... }
//	fmt.Println(job.ID, job.State)     // j-000000000001 queued
//
// Job files are sent as they are: the daemon parses and validates them, so
// the client never disagrees with it about what a valid job is.
//
// # Submitting once
//
// Every submission carries an idempotency key (api.IdempotencyHeader): a
// random one, or SubmitOptions.IdempotencyKey given to SubmitWith. A
// submission whose answer is lost (the connection failed or timed out, or a
// gateway or a stopping daemon answered 502, 503 or 504) is sent again with
// the same key, up to SubmitOptions.Attempts requests (3 by default, 200 ms
// apart and doubling): the daemon answers a repeat with the job the first
// request made, so that a retry never makes a second job. A key of your own
// lets a later call (after a crash of the program, say) find the job an
// earlier one made.
//
// # Errors
//
// An answer outside 2xx is a *RemoteError carrying the HTTP status, the
// API's error code (api.CodeInvalid, CodeNotFound, ...), its message
// and, for a rejected request body, each field and what is wrong with it:
//
//	var re *client.RemoteError
//	if errors.As(err, &re) && re.Status == http.StatusBadRequest {
//		for _, f := range re.Fields { ... } // tasks: must be an integer >= 1, got 0
//	}
//
// A daemon that cannot be reached gives an error naming its address ("cannot
// reach the metasched daemon at http://127.0.0.1:8080: ..."), which wraps
// the transport's error: errors.Is(err, context.Canceled) still tells an
// interrupted call. The default HTTP client gives up after DefaultTimeout;
// WithHTTPClient replaces it.
//
// The design is described in docs/reference/http.md of the
// repository, "The daemon's client: metasched/client"; the daemon's API is
// in docs/reference/api.md.
package client
