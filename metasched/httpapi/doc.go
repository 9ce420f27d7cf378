// Package httpapi is the daemon's HTTP server: the jobs API under /v1 (the
// wire types are package api's), the dashboard (package dashboard), the
// Prometheus metrics and the OpenAPI document of every route.
//
// New builds the server of a daemon; the daemon serves it (Daemon.Run of
// package metasched takes it as its handler):
//
//	d, err := metasched.NewWithGrid(ctx, cfg, grid, opt)
//	...
//	err = d.Run(ctx, ln, httpapi.New(httpapi.All(d), log))
//
// The server uses only the daemon's exported methods, through small
// interfaces it declares, one per group of routes (Health, Auth, Tokens,
// Jobs, Outputs, Hosts, Pools, Grid, Backups, and what the dashboard
// reads): New takes the implementation of each (Parts), and All makes
// them of one value that implements them all (Daemon), as
// *metasched.Daemon does. A test can serve a fake of one group beside a
// real daemon's others. Job bodies are decoded here, once
// (jobfile.Decode); the daemon takes the decoded request.
//
// What the server does around the daemon's methods:
//
//   - Routes lists every route, each public or not; the others want the
//     bearer token or the dashboard's session cookie (POST /login with the
//     token sets it; a request the cookie authenticates that changes state
//     must send CSRFHeader).
//   - Bodies are at most api.MaxBodyBytes; JSON bodies are decoded
//     strictly (no unknown field); job files are YAML or JSON.
//   - Errors are api.APIError bodies: an *api.RequestError (errors.As) is
//     answered with its status, code and fields; the daemon's
//     api.ErrNotFound and api.ErrConflict are 404 and 409, an ended context
//     503, api.ErrUnavailable 503 with Retry-After, anything else 500. The
//     daemon marks its store's errors with those kinds, so the server
//     imports neither the store nor its engines. A known path with another
//     method is 405 with Allow, an unknown one 404.
//   - Every request is logged and timed in the daemon's Prometheus
//     registry (metasched_api_request_duration_seconds, by method, route
//     pattern and status).
//
// The design is described in docs/reference/http.md of the
// repository; every route is in docs/reference/api.md.
package httpapi
