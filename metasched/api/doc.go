// Package api holds the wire types of the metasched daemon's HTTP API: the
// bodies of its requests and answers and their constants. The daemon
// (package metasched) and its HTTP server (package httpapi) answer with
// them, the Go client (package client) and the command line decode them;
// the OpenAPI document the server serves describes them. Package api imports
// only the standard library: its types are plain structs with the JSON of
// the daemon's own (the job lifecycle's, selection's, gramvm's and the
// agents'), which the daemon converts to them (package wire), so that a
// program that talks to the daemon links neither the daemon nor its
// solver: not its store, Prometheus, libvirt or the agent's server.
//
// # Routes
//
// JSON under /v1, with "Authorization: Bearer TOKEN" or the dashboard's
// session cookie on every route but the public ones:
//
//	GET    /healthz                    public: Health
//	GET    /metrics                    public: Prometheus metrics
//	GET    /v1/openapi.json            public: the OpenAPI 3 document
//	GET    /, GET /assets/{file}       public: the dashboard's page and its files
//	POST   /login, POST /logout        public: LoginRequest → the session cookie; remove it
//	POST   /v1/jobs                    a job file (YAML or JSON) → 201 Job
//	GET    /v1/jobs                    ?state=S[,S]&type=T&after=ID&limit=N → JobList (pages of DefaultPageSize)
//	GET    /v1/jobs/{id}               Job
//	POST   /v1/jobs/{id}/cancel        → Job
//	POST   /v1/jobs/{id}/vms/{vm}/resize  ResizeRequest → VM (a live resize)
//	GET    /v1/jobs/{id}/logs          the job's output, text/plain
//	POST   /v1/plan                    a job file → PlanResult (dry run)
//	GET    /v1/pools                   []Pool
//	GET    /v1/hosts                   []HostView
//	POST   /v1/hosts/{name}/clear      ClearRequest → HostView
//	GET    /v1/vms                     []VM
//	GET    /v1/switches                ?active=true&before=ID&limit=N → SwitchList (newest first, pages of DefaultPageSize)
//	POST   /v1/switches                SwitchRequest → 202 SwitchView (an operator's switch)
//	GET    /v1/policy                  PolicyView
//	GET    /v1/links                   []Link
//	GET    /v1/tuning                  []TuningRecord
//	GET    /v1/dashboard               ?history=true → Dashboard
//	GET    /v1/events                  server-sent events "state": a Dashboard every EventEvery
//
// Errors are APIError with a 4xx or 5xx status; its Code is one of the
// Code constants. The daemon rejects a request with a RequestError, which
// the server answers with its status.
package api
