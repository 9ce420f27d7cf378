package httpapi

import (
	"context"
	"fmt"
	"io"
	"os"
	"reflect"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/dashboard"
	"github.com/metasched/metasched/metasched/jobfile"
)

// What the server needs of the daemon, one small interface per group of
// routes: each handler uses its group's and nothing else, and a test can
// serve a fake of one group beside the real daemon's others (Parts).
// *metasched.Daemon implements them all (Daemon).

// Health is what GET /healthz and GET /metrics read.
type Health interface {
	Version() string
	Started() time.Time
	// Registry is the daemon's Prometheus registry: GET /metrics serves
	// it, and the server adds the duration of the requests it serves.
	Registry() *prometheus.Registry
}

// Auth is who a request is: the bearer tokens, the sessions of POST
// /login and /logout, and a user's access to a job's routes.
type Auth interface {
	// Token is the operator token (DATA_DIR/token); it also keys the
	// sessions.
	Token() string
	// Authenticate says who a bearer token belongs to; Principal who a
	// token name is now and the key of its token now (ok false once its
	// token is revoked); SessionKey the key of a token, which a session
	// opened with it is bound to (a token of the same name made later has
	// another).
	Authenticate(token string) (api.Principal, bool)
	Principal(name string) (p api.Principal, key string, ok bool)
	SessionKey(token string) string
	// RevokeSession ends a session at logout; SessionRevoked says whether
	// one was.
	RevokeSession(ctx context.Context, id string, expires time.Time) error
	SessionRevoked(id string) bool
	// CredentialsChanged is closed at the next token made or revoked or
	// session logged out: an event stream checks its credential again.
	CredentialsChanged() <-chan struct{}
	// OwnsJob reports whether owner submitted a job: the check of a
	// user's access, by the same work whether the job exists or not.
	OwnsJob(ctx context.Context, owner, id string) (bool, error)
}

// Tokens are the routes of the API tokens (an operator's).
type Tokens interface {
	CreateToken(ctx context.Context, r api.TokenRequest) (api.TokenCreated, error)
	Tokens(ctx context.Context) ([]api.Token, error)
	RevokeToken(ctx context.Context, name string) error
}

// Jobs are the routes of jobs: submit (the body decoded by jobfile.Decode),
// list, read, cancel, their logs, a live resize of a job's VM, and the dry
// run of a job file.
type Jobs interface {
	Submit(ctx context.Context, job jobfile.Request) (api.Job, error)
	// SubmitOnce is Submit with the caller's idempotency key (see
	// api.IdempotencyHeader); created is false for a repeat.
	SubmitOnce(ctx context.Context, job jobfile.Request, caller, key string) (_ api.Job, created bool, _ error)
	Jobs(ctx context.Context, f api.JobFilter) (api.JobList, error)
	Job(ctx context.Context, id string) (api.Job, error)
	Cancel(ctx context.Context, id string) (api.Job, error)
	Logs(ctx context.Context, id string) ([]byte, error)
	// ResizeVM changes a job's VM's current vCPUs and memory live.
	ResizeVM(ctx context.Context, job, vm string, r api.ResizeRequest) (api.VM, error)
	DryRun(ctx context.Context, job jobfile.Request) (api.PlanResult, error)
}

// Outputs are the routes of a finished job's output files: Outputs lists
// them, Output opens one (the server closes it).
type Outputs interface {
	Outputs(ctx context.Context, id string) (api.OutputList, error)
	Output(ctx context.Context, id, name string) (*os.File, error)
}

// Hosts are the routes of hosts and their VMs: list, return a stranded
// host to a pool, drain one for maintenance and return it.
type Hosts interface {
	Hosts() []api.HostView
	ClearHost(ctx context.Context, name, pool string) (api.HostView, error)
	DrainHost(ctx context.Context, name string, r api.DrainRequest) (api.HostView, error)
	UndrainHost(ctx context.Context, name string) (api.HostView, error)
	VMs() []api.VM
}

// Pools are the routes of pools, their policy and the switches of hosts
// between them.
type Pools interface {
	Pools() []api.Pool
	Policy() api.PolicyView
	Switches(ctx context.Context, f api.SwitchFilter) (api.SwitchList, error)
	RequestSwitch(ctx context.Context, from, to string) (api.SwitchView, error)
}

// Grid are the routes of what plans rest on: the links' bandwidths, the
// calibration (Calibrate asks for a site's figures, every site's for "",
// to be measured now) and the bandwidth tuning's records.
type Grid interface {
	Links() []api.Link
	Calibration() api.Calibration
	Calibrate(ctx context.Context, site string) (api.Calibration, error)
	Tuning() []api.TuningRecord
}

// Backups is GET /v1/backup: Backup writes a consistent copy of the store
// to w, first telling size its length.
type Backups interface {
	Backup(ctx context.Context, size func(n int64), w io.Writer) error
}

// Parts are the implementations the server serves, one per group of
// routes, and what the dashboard reads.
type Parts struct {
	Health  Health
	Auth    Auth
	Tokens  Tokens
	Jobs    Jobs
	Outputs Outputs
	Hosts   Hosts
	Pools   Pools
	Grid    Grid
	Backups Backups
	Board   dashboard.Daemon
}

// Daemon is every part at once: *metasched.Daemon implements it (asserted
// where the server is wired up, in cmd/metasched).
type Daemon interface {
	Health
	Auth
	Tokens
	Jobs
	Outputs
	Hosts
	Pools
	Grid
	Backups
	dashboard.Daemon
}

// All returns the parts of one value that implements them all.
func All(d Daemon) Parts {
	return Parts{Health: d, Auth: d, Tokens: d, Jobs: d, Outputs: d, Hosts: d, Pools: d, Grid: d, Backups: d, Board: d}
}

// check panics on a part left out: a server without it would fail at its
// first request instead.
func (p Parts) check() {
	v := reflect.ValueOf(p)
	for i := range v.NumField() {
		if v.Field(i).IsNil() {
			panic(fmt.Sprintf("httpapi: no %s in the server's parts", v.Type().Field(i).Name))
		}
	}
}
