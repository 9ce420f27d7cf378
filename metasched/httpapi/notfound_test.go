package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/httpapi"
)

// counts are the reads of jobs the server makes: the owner checks of its
// authentication (Auth) and the views of its job routes (Jobs), counted
// by fakes of those two parts around a real daemon.
type counts struct{ owners, views atomic.Int64 }

type countingAuth struct {
	httpapi.Auth
	c *counts
}

func (a countingAuth) OwnsJob(ctx context.Context, owner, id string) (bool, error) {
	a.c.owners.Add(1)
	return a.Auth.OwnsJob(ctx, owner, id)
}

// jobsPart names the embedded part otherwise than its method Jobs.
type jobsPart = httpapi.Jobs

type countingJobs struct {
	jobsPart
	c *counts
}

func (j countingJobs) Job(ctx context.Context, id string) (api.Job, error) {
	j.c.views.Add(1)
	return j.jobsPart.Job(ctx, id)
}

// notFoundSetup starts a daemon behind a server that counts its reads of
// jobs, with alice's job and bob's token.
func notFoundSetup(t testing.TB) (srv *httptest.Server, c *counts, aliceJob, bob string) {
	td := startDaemon(t, metasched.Options{}, nil)
	ctx := context.Background()
	tokens := map[string]string{}
	for _, name := range []string{"alice", "bob"} {
		tc, err := td.d.CreateToken(ctx, api.TokenRequest{Name: name, Role: api.RoleUser})
		if err != nil {
			t.Fatal(err)
		}
		tokens[name] = tc.Secret
	}
	c = &counts{}
	parts := httpapi.All(td.d)
	parts.Auth, parts.Jobs = countingAuth{td.d, c}, countingJobs{td.d, c}
	srv = httptest.NewServer(httpapi.New(parts, zerolog.Nop()))
	t.Cleanup(srv.Close)
	req, err := http.NewRequest("POST", srv.URL+"/v1/jobs", strings.NewReader(apiSimJob))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tokens["alice"])
	req.Header.Set("Content-Type", "application/yaml")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var j api.Job
	if err := json.NewDecoder(resp.Body).Decode(&j); err != nil || resp.StatusCode != 201 {
		t.Fatalf("alice's submission: %d (%v)", resp.StatusCode, err)
	}
	return srv, c, j.ID, tokens["bob"]
}

func getAs(t testing.TB, srv *httptest.Server, token, path string) (int, string) {
	req, err := http.NewRequest("GET", srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// Another user's job and no job answer a user alike, by the same work:
// each path makes one seek in the owners' index (OwnsJob) and reads no
// job, and the
// two answers differ only by the ID they name. (Their times are in
// BenchmarkNotFound, not asserted.)
func TestNotFoundPathsAlike(t *testing.T) {
	srv, c, alices, bob := notFoundSetup(t)
	missing := "j-999999999999"
	for _, route := range []string{"/v1/jobs/%s", "/v1/jobs/%s/logs", "/v1/jobs/%s/outputs"} {
		var answers []string
		for _, id := range []string{alices, missing} {
			c.owners.Store(0)
			c.views.Store(0)
			path := strings.Replace(route, "%s", id, 1)
			code, body := getAs(t, srv, bob, path)
			if code != 404 {
				t.Errorf("GET %s as bob: %d %s, want 404", path, code, body)
			}
			if o, v := c.owners.Load(), c.views.Load(); o != 1 || v != 0 {
				t.Errorf("GET %s as bob: %d seeks in the owners' index and %d reads of the job, want 1 and 0", path, o, v)
			}
			answers = append(answers, strings.ReplaceAll(body, id, "ID"))
		}
		if answers[0] != answers[1] {
			t.Errorf("%s: another's job answers %q, no job %q", route, answers[0], answers[1])
		}
	}
}

// Another user's job answers 404 under every spelling of its ID, as a
// missing job does, and none of the spellings reaches it: upper case,
// padded, percent-encoded, with a trailing slash or dot segments, a
// prefix, a NUL; the owner reaches it by its ID alone.
func TestOthersJobUnderEverySpelling(t *testing.T) {
	srv, _, alices, bob := notFoundSetup(t)
	digits := strings.TrimPrefix(alices, "j-")
	spellings := []string{
		alices, strings.ToUpper(alices), " " + alices, alices + " ", "%20" + alices,
		strings.Replace(alices, "-", "%2D", 1), "%6A-" + digits, alices + "/", "./" + alices,
		"x/../" + alices, digits, "j-0" + digits, alices + "%00", alices + "%2F", "J-" + digits,
	}
	for _, sp := range spellings {
		code, body := getAs(t, srv, bob, "/v1/jobs/"+sp)
		if code == 200 || strings.Contains(body, `"owner"`) {
			t.Errorf("GET /v1/jobs/%s as bob: %d %s, want no job of alice's", sp, code, body)
		}
		for _, sub := range []string{"/logs", "/outputs", "/cancel"} {
			method := "GET"
			if sub == "/cancel" {
				method = "POST"
			}
			req, err := http.NewRequest(method, srv.URL+"/v1/jobs/"+sp+sub, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+bob)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode < 300 {
				t.Errorf("%s /v1/jobs/%s%s as bob: %d %s", method, sp, sub, resp.StatusCode, b)
			}
		}
	}
}

// BenchmarkNotFound times a user's 404 for another user's job and for no
// job: the figure the timing of the two paths is read from.
func BenchmarkNotFound(b *testing.B) {
	srv, _, alices, bob := notFoundSetup(b)
	for _, tc := range []struct{ name, id string }{{"another's job", alices}, {"no job", "j-999999999999"}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if code, body := getAs(b, srv, bob, "/v1/jobs/"+tc.id); code != 404 {
					b.Fatalf("%d %s", code, body)
				}
			}
		})
	}
}
