// Package httpapi is the daemon's HTTP server: the jobs API under /v1 (the
// wire types are package api's), the dashboard (package dashboard), the
// Prometheus metrics and the OpenAPI document of every route.
//
// New builds the server of a daemon; the daemon serves it (Daemon.Run of
// package metasched takes it as its handler):
//
//	d, err := metasched.NewWithGrid(ctx, cfg, grid, opt)
//	...
//	err = d.Run(ctx, ln, httpapi.New(d, log))
//
// The server uses only the daemon's exported methods, through the
// interface Daemon that it declares; *metasched.Daemon implements it, and
// a test can serve a fake.
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
//     answered with its status, code and fields; the store's not found and
//     conflict errors are 404 and 409, an ended context 503, anything else
//     500. A known path with another method is 405 with Allow, an unknown
//     one 404.
//   - Every request is logged and timed in the daemon's Prometheus
//     registry (metasched_api_request_duration_seconds, by method, route
//     pattern and status).
//
// The design is described in docs/design.md of the repository, section
// "HTTP APIs".
package httpapi
