package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"image/png"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/client"
	"github.com/metasched/metasched/metasched/httpapi"
)

// screenshotDir, when set, is where TestDashboardInBrowser also writes its
// screenshots: login.png (the login card), dashboard.png (during the
// demo: the README's image) and dashboard-after-demo.png (once every job
// of the demo has ended): make screenshot, or
// go test ./cmd/metasched -run TestDashboardInBrowser -screenshots ../../docs.
var screenshotDir = flag.String("screenshots", "", "write the dashboard's screenshots into this directory too")

// browser starts headless Chromium (Debian's chromium, which make test
// installs) and returns a tab's context.
func browser(t *testing.T) context.Context {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: drives Chromium; make test runs it")
	}
	exe, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("no chromium on PATH (make test installs Debian's chromium): %v", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox, // root in CI: Chromium's sandbox refuses to run as root
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1440, 1700),
		// Chromium makes directories of its own under TMPDIR
		// (org.chromium.Chromium.*): the test's, removed with it.
		chromedp.Env("TMPDIR="+t.TempDir()),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// page drives the dashboard in the browser.
type page struct {
	t   *testing.T
	ctx context.Context
	// step is the wait or action under way: a failed test names it again
	// as its last line, below the page's text and the daemons' logs.
	step string
}

// newPage drives the browser of ctx for t.
func newPage(t *testing.T, ctx context.Context) *page {
	p := &page{t: t, ctx: ctx}
	t.Cleanup(func() {
		if t.Failed() && p.step != "" {
			t.Logf("failed at the step: %s", p.step)
		}
	})
	return p
}

// eval evaluates a JavaScript expression that yields a string (awaiting
// a promise).
func (p *page) eval(js string) (string, error) {
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
}

// waitJS polls the expression (which yields a string: "" while the
// condition does not hold, else a note) every 100 ms for at most limit.
func (p *page) waitJS(limit time.Duration, what, js string) string {
	p.t.Helper()
	p.step = "wait for " + what
	deadline := time.Now().Add(limit)
	last := ""
	for {
		note, err := p.eval(js)
		if err == nil && note != "" {
			p.step = ""
			return note
		}
		if err != nil {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			body, err := p.eval(`document.body.innerText.slice(0, 3000)`)
			if err != nil {
				body = fmt.Sprintf("(the page's text: %v)", err)
			}
			p.t.Logf("the page shows:\n%s", body)
			p.t.Fatalf("%s: not seen in %s (%s)", what, limit, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// run runs browser actions.
func (p *page) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	p.step = what
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
	p.step = ""
}

// fill empties an input and types text into it.
func (p *page) fill(id, text string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.getElementById(%q).value = ''`, id)),
		chromedp.SendKeys(chromedp.ID(id), text))
}

// squaresPerPool is what the page shows: pool → host → state text.
const squaresJS = `JSON.stringify(Object.fromEntries([...document.querySelectorAll('#pools .pool[data-pool]')].map(p =>
  [p.dataset.pool, Object.fromEntries([...p.querySelectorAll('.host')].map(h => [h.dataset.host, h.querySelector('b').textContent]))])))`

// TestDashboardInBrowser drives the dashboard in headless Chromium against
// the real binary running the demo: log in (a wrong token first), the
// pools with one square per host as the API says, a form submission with
// bad input (the field's error, nothing stored), a job submitted through
// the form that reaches done, an operator's switch seen switching and then
// in the other pool, a screenshot, and a restart of the daemon that the
// page rides out (it reconnects and shows the new daemon's state).
func TestDashboardInBrowser(t *testing.T) {
	// Parallel: the package's longest tests run two at a time once its
	// other tests are done (the QEMU one beside one that boots no guest),
	// each with processes, directories and ports of its own.
	t.Parallel()
	bin := buildBinary(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	d := startServe(t, bin, dir, filepath.Join(dir, "daemon-1.log"), "--listen", addr, "--data-dir", data,
		"--demo-jobs", "60", "--demo-gap", "300ms", "--log-format", "json", "--log-level", "warn")
	defer dumpLogOnFailure(t, filepath.Join(dir, "daemon-1.log"))
	tok, err := os.ReadFile(filepath.Join(data, "token"))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tok))
	c := client.New(d.base, token)
	bg := context.Background()

	p := newPage(t, browser(t))
	p.run("open the dashboard", chromedp.Navigate(d.base+"/"), chromedp.WaitVisible(chromedp.ID("login-token")))
	screenshot(t, p, "login.png")

	// A wrong token: the field says so; the right one: the pools appear.
	p.run("log in with a wrong token", p.fill("login-token", "not-the-token"),
		chromedp.Click(chromedp.CSS(`#login-form button[type=submit]`)))
	p.waitJS(3*time.Minute, "the login error", `document.querySelector('[data-error-for=token]').textContent`)
	p.run("log in", p.fill("login-token", token),
		chromedp.Click(chromedp.CSS(`#login-form button[type=submit]`)))
	p.waitJS(3*time.Minute, "the live dashboard", `document.querySelector('#conn').dataset.state === 'live' && !document.querySelector('#main').hidden ? 'live' : ''`)
	if cookieJS, err := p.eval(`document.cookie`); err != nil || strings.Contains(cookieJS, httpapi.SessionCookie) {
		t.Errorf("the session cookie is readable by scripts (%q, %v): it must be HttpOnly", cookieJS, err)
	}

	checkSquares(t, p, c, "during the demo")
	// The pools' colours (inline styles the page's policy allows).
	if border, err := p.eval(`getComputedStyle(document.querySelector('#pools .pool[data-pool]')).borderTopColor`); err != nil || border != "rgb(31, 119, 180)" {
		t.Errorf("the first pool's colour is %q (%v), want rgb(31, 119, 180)", border, err)
	}

	// Bad input: each field's error under the field, no job stored.
	p.run("fill the form with bad input",
		chromedp.Evaluate[chromedp.Void](`document.getElementById("f-type").value = "sim"`),
		chromedp.SendKeys(chromedp.ID("f-name"), "bad-form-job"),
		chromedp.SendKeys(chromedp.ID("f-tasks"), "many"),
		chromedp.SendKeys(chromedp.ID("f-task-ops"), "-5"),
		chromedp.SendKeys(chromedp.ID("f-task-bytes"), "1e5"),
		chromedp.Click(chromedp.ID("f-submit")))
	tasksErr := p.waitJS(3*time.Minute, "the error of field tasks", `document.querySelector('[data-error-for=tasks]').textContent`)
	opsErr := p.waitJS(3*time.Minute, "the error of field task_ops", `document.querySelector('[data-error-for=task_ops]').textContent`)
	t.Logf("form errors: %q, %q", tasksErr, opsErr)
	if !strings.Contains(tasksErr, "tasks") || !strings.Contains(opsErr, "task_ops") || !strings.Contains(opsErr, "> 0") {
		t.Errorf("field errors %q and %q do not name the fields and the problem", tasksErr, opsErr)
	}
	if invalid, err := p.eval(`[...document.querySelectorAll('#submit-form .invalid')].map(e => e.name).sort().join(',')`); err != nil || invalid != "task_ops,tasks" {
		t.Errorf("inputs marked invalid: %q (%v), want task_ops,tasks", invalid, err)
	}
	if js := jobsNamed(t, c, "bad-form-job"); len(js) != 0 {
		t.Errorf("the bad form stored jobs: %v", js)
	}

	// A good job through the form: it appears and reaches done.
	p.run("fill the form", p.fill("f-name", "form-job"),
		p.fill("f-tasks", "20"),
		p.fill("f-task-ops", "1e10"),
		chromedp.Click(chromedp.ID("f-submit")))
	formJob := p.waitJS(3*time.Minute, "the submitted job's ID", `document.querySelector('#submit-result').dataset.job || ''`)
	if j, err := c.Job(bg, formJob); err != nil || j.Name != "form-job" || j.Type != "sim" || j.Spec.Tasks != 20 {
		t.Fatalf("the form's job %s through the API: %+v, %v", formJob, j, err)
	}
	p.waitJS(3*time.Minute, "the form's job in the list", fmt.Sprintf(`document.querySelector('#jobs tr[data-job=%q]') ? 'listed' : ''`, formJob))

	// An operator's switch from the pool with the most hosts: a square
	// shows it switching, then the host is in the other pool.
	from, to := switchPools(t, c)
	sw, err := switchWhenFree(c, from, to)
	if err != nil {
		t.Fatalf("switch %s → %s: %v", from, to, err)
	}
	host := p.waitJS(3*time.Minute, "a host switching "+from+" → "+to, fmt.Sprintf(
		`(h => h ? h.dataset.host + ' ' + h.querySelector('b').textContent : '')(document.querySelector('#pools .pool[data-pool=%q] .host[data-state=switching][data-from=%q][data-to=%q]'))`, from, from, to))
	name, label, _ := strings.Cut(host, " ")
	if label != "switching "+from+" → "+to {
		t.Errorf("the switching square says %q", label)
	}
	t.Logf("switch %s: %s shown %q", sw.ID, name, label)
	p.waitJS(3*time.Minute, "the switch committed in the list", fmt.Sprintf(
		`(r => r && r.textContent.includes('committed') ? 'committed' : '')(document.querySelector('#switches tr[data-switch=%q]'))`, sw.ID))
	// The host is then in the other pool, unless the demo's live policy
	// has moved it on since: then a later switch of it from there is listed.
	where := p.waitJS(3*time.Minute, name+" in pool "+to+" (or moved on from it)", fmt.Sprintf(`(async () => {
		const h = document.querySelector('#pools .pool[data-pool=%[1]q] .host[data-host=%[2]q]');
		if (h && ['busy','idle'].includes(h.dataset.state)) return 'in ' + %[1]q;
		const r = await fetch('/v1/switches?limit=200', {headers: {'X-Requested-With': 'metasched'}, credentials: 'same-origin'});
		if (!r.ok) return '';
		const later = (await r.json()).switches.find(s => s.id > %[3]q && s.host === %[2]q && s.from === %[1]q);
		return later ? 'moved on by ' + later.id : '';
	})()`, to, name, sw.ID))
	t.Logf("%s after the switch: %s", name, where)

	// The form opened the job's detail: it follows the job to done (the
	// list shows only the newest jobs, and the demo's stream goes on), with
	// the plan's explanation.
	p.waitJS(3*time.Minute, "the form's job done in its detail", fmt.Sprintf(
		`(h => h && h.textContent.includes(%q) && h.querySelector('.badge').textContent === 'done' ? 'done' : '')(document.querySelector('#job-detail h3'))`, formJob))
	expl := p.waitJS(3*time.Minute, "the plan's explanation", `(e => e ? e.textContent : '')(document.querySelector('#job-detail .explanation'))`)
	if !strings.Contains(expl, "master") || !strings.Contains(expl, "predicted") {
		t.Errorf("the explanation shown: %q", expl)
	}
	// The detail and the list show the predicted run time against the
	// measured one, and their ratio.
	times := p.waitJS(3*time.Minute, "the run times in the detail", `(e => e ? e.textContent.replace(/\s+/g, ' ') : '')(document.querySelector('#job-detail p'))`)
	if !regexp.MustCompile(`predicted [0-9.e+-]+ (s|min|h) · measured [0-9.e+-]+ (s|min|h) · ratio [0-9.e+-]+`).MatchString(times) {
		t.Errorf("the detail's run times: %q", times)
	}
	head := p.waitJS(3*time.Minute, "the list's columns", `Array.from(document.querySelectorAll('#jobs thead th')).map((h) => h.textContent).join(',')`)
	if !strings.Contains(head, "predicted,measured,ratio") {
		t.Errorf("the job list's columns: %q", head)
	}
	// The picture: once the charts hold 20 s of the demo.
	p.waitJS(3*time.Minute, "20 s of chart samples", `document.querySelectorAll('#chart-queue polyline').length > 0 &&
	    document.querySelector('#chart-queue polyline').getAttribute('points').split(' ').length >= 20 ? 'yes' : ''`)
	// ... and, for the picture's sake, a host switching if one does within 20 s.
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		sw, err := p.eval(`document.querySelector('#pools .host[data-state=switching]') ? 'yes' : ''`)
		if err != nil {
			t.Fatal(err)
		}
		if sw != "" {
			break
		}
	}
	screenshot(t, p, "dashboard.png")

	// After the demo: every job ended, the charts and tables full.
	waitDemoEnded(t, c)
	p.waitJS(3*time.Minute, "the pools idle on the page", `[...document.querySelectorAll('#pools .host')].every(h => h.dataset.state !== 'busy' && h.dataset.state !== 'switching') ? 'idle' : ''`)
	screenshot(t, p, "dashboard-after-demo.png")

	// Restart: the page says the connection is lost, then shows the new
	// daemon (another instance) with the state it restored.
	before, err := p.eval(`document.querySelector('#daemon').dataset.instance`)
	if err != nil {
		t.Fatal(err)
	}
	if code := d.interrupt(t, 60*time.Second); code != 0 {
		t.Errorf("exit code after SIGINT %d, want 0", code)
	}
	p.waitJS(3*time.Minute, "the connection lost", `document.querySelector('#conn').dataset.state === 'down' ? 'down' : ''`)
	d2 := startServe(t, bin, dir, filepath.Join(dir, "daemon-2.log"), "--listen", addr, "--data-dir", data, "--demo=false",
		"--log-format", "json", "--log-level", "warn")
	defer dumpLogOnFailure(t, filepath.Join(dir, "daemon-2.log"))
	c = client.New(d2.base, token)
	p.waitJS(3*time.Minute, "the page live on the new daemon", fmt.Sprintf(
		`document.querySelector('#conn').dataset.state === 'live' && document.querySelector('#daemon').dataset.instance !== %q ? 'live' : ''`, before))
	if restarted, err := p.eval(`document.querySelector('#daemon').dataset.restarted || ''`); err != nil || restarted != "true" {
		t.Errorf("the page does not say it reconnected after a restart (%q, %v)", restarted, err)
	}
	after, err := c.Job(bg, formJob)
	if err != nil || after.State != api.Done {
		t.Fatalf("the form's job after the restart: %+v, %v", after, err)
	}
	checkJobRows(t, p, c)
	// Any job, listed or not, opens by its ID.
	p.run("find the form's job", p.fill("find-job", formJob), chromedp.Click(chromedp.CSS(`#find-form button[type=submit]`)))
	p.waitJS(3*time.Minute, "the form's job, done, in the detail", fmt.Sprintf(
		`(h => h && h.textContent.includes(%q) && h.textContent.includes('done') ? 'yes' : '')(document.querySelector('#job-detail h3'))`, formJob))
	// A job submitted now (through the API) shows: the page follows the new daemon.
	j, err := c.Submit(bg, []byte("name: after-restart\ntype: etl\ntasks: 5\ntask_ops: 1e9\ntask_bytes: 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	p.waitJS(3*time.Minute, "the job submitted after the restart, done", fmt.Sprintf(`document.querySelector('#jobs tr[data-job=%q][data-state=done]') ? 'done' : ''`, j.ID))
	checkSquares(t, p, c, "after the restart")

	// Cancel from the page: a long job, cancelled by its button.
	long, err := c.Submit(bg, []byte("name: to-cancel\ntype: sim\ntasks: 1000000\ntask_ops: 1e11\ntask_bytes: 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	sel := fmt.Sprintf(`#jobs tr[data-job=%q] button[data-cancel]`, long.ID)
	p.waitJS(3*time.Minute, "the cancel button", fmt.Sprintf(`document.querySelector(%q) ? 'yes' : ''`, sel))
	p.run("cancel the job", chromedp.Click(chromedp.CSS(sel)))
	p.waitJS(3*time.Minute, "the job cancelled", fmt.Sprintf(`document.querySelector('#jobs tr[data-job=%q][data-state=cancelled]') ? 'cancelled' : ''`, long.ID))

	// Log out: the page asks for the token again and the API refuses the browser.
	p.run("log out", chromedp.Click(chromedp.ID("logout")))
	p.waitJS(3*time.Minute, "the login form again", `!document.querySelector('#login-view').hidden ? 'login' : ''`)
	// Logged out, the dashboard is not drawn under the login card.
	if display, err := p.eval(`getComputedStyle(document.querySelector('#main')).display`); err != nil || display != "none" {
		t.Errorf("logged out, the dashboard's main shows (display %q, %v)", display, err)
	}
	status, err := p.eval(`fetch('/v1/pools').then(r => String(r.status))`)
	if err != nil || status != fmt.Sprint(http.StatusUnauthorized) {
		t.Errorf("GET /v1/pools from the page after logging out: %v, want 401", status)
	}

	// A user's dashboard: the pools and its own jobs; the operator's
	// sections hidden, and none of the operator's jobs listed.
	alice, err := c.CreateToken(bg, "alice", "user")
	if err != nil {
		t.Fatal(err)
	}
	p.run("log in as a user", p.fill("login-token", alice.Secret),
		chromedp.Click(chromedp.CSS(`#login-form button[type=submit]`)))
	p.waitJS(3*time.Minute, "alice's dashboard", `document.querySelector('#viewer').textContent.startsWith('alice (user') && document.querySelector('#pools .pool') ? 'alice' : ''`)
	if hidden, err := p.eval(`String([...document.querySelectorAll('[data-role=operator]')].every(s => s.hidden))`); err != nil || hidden != "true" {
		t.Errorf("the operator's sections are shown to a user (%v, %v)", hidden, err)
	}
	if rows, err := p.eval(`String(document.querySelectorAll('#jobs tr[data-job]').length)`); err != nil || rows != "0" {
		t.Errorf("a user's dashboard lists %s jobs of others (%v), want none", rows, err)
	}
	if code := d2.interrupt(t, 60*time.Second); code != 0 {
		t.Errorf("exit code of the restarted daemon after SIGINT %d, want 0", code)
	}
}

// checkSquares waits until the page shows, per pool, the hosts the API
// lists in that pool (both move during the demo), each with its state as
// text.
func checkSquares(t *testing.T, p *page, c *client.Client, when string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		hosts, err := c.Hosts(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]map[string]string{}
		for _, h := range hosts {
			if want[h.Pool] == nil {
				want[h.Pool] = map[string]string{}
			}
			want[h.Pool][h.Name] = h.State
		}
		js, err := p.eval(squaresJS)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]map[string]string{}
		if err := json.Unmarshal([]byte(js), &got); err != nil {
			t.Fatal(err)
		}
		same := len(got) == len(want)
		total := 0
		for pool, hs := range want {
			same = same && len(got[pool]) == len(hs)
			for name, st := range hs {
				label, ok := got[pool][name]
				same = same && ok && strings.HasPrefix(label, st)
			}
			total += len(hs)
		}
		if same {
			t.Logf("%s: %d squares in %d pools match the API", when, total, len(got))
			if total != 16 {
				t.Errorf("%s: %d squares, want the demo grid's 16 hosts", when, total)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the squares per pool never matched the API in 20 s:\npage %v\napi  %v", when, got, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkJobRows waits until every job the page lists is in the state the
// API gives it.
func checkJobRows(t *testing.T, p *page, c *client.Client) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		js, err := p.eval(`JSON.stringify([...document.querySelectorAll('#jobs tr[data-job]')].map(r => [r.dataset.job, r.dataset.state]))`)
		if err != nil {
			t.Fatal(err)
		}
		var rows [][2]string
		if err := json.Unmarshal([]byte(js), &rows); err != nil {
			t.Fatal(err)
		}
		stale := []string{}
		for _, r := range rows {
			j, err := c.Job(context.Background(), r[0])
			if err != nil {
				t.Fatal(err)
			}
			if string(j.State) != r[1] {
				stale = append(stale, fmt.Sprintf("%s shown %s, is %s", r[0], r[1], j.State))
			}
		}
		if len(rows) > 0 && len(stale) == 0 {
			t.Logf("%d job rows, each in the state the API gives", len(rows))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job rows do not follow the daemon (%d rows): %v", len(rows), stale)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// switchPools returns the pool with the most hosts and another one.
func switchPools(t *testing.T, c *client.Client) (from, to string) {
	t.Helper()
	pools, err := c.Pools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	best := 0
	for i, p := range pools {
		if len(p.Hosts) > len(pools[best].Hosts) {
			best = i
		}
	}
	return pools[best].Name, pools[(best+1)%len(pools)].Name
}

// switchWhenFree asks for a switch, retrying while another switch holds
// the pools (409).
func switchWhenFree(c *client.Client, from, to string) (api.SwitchView, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		sw, err := c.RequestSwitch(context.Background(), from, to)
		if err == nil || time.Now().After(deadline) {
			return sw, err
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func jobsNamed(t *testing.T, c *client.Client, name string) []string {
	t.Helper()
	l, err := c.Jobs(context.Background(), client.JobsQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, j := range l.Jobs {
		if j.Name == name {
			out = append(out, j.ID)
		}
	}
	return out
}

// screenshot takes the page as PNG into the test's directory (and
// -screenshot) and checks it is an image of the window's width.
// waitDemoEnded waits until no job is queued or active.
func waitDemoEnded(t *testing.T, c *client.Client) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		l, err := c.Jobs(context.Background(), client.JobsQuery{States: []api.State{api.Queued, api.Planned, api.Provisioning, api.Running}})
		if err == nil && len(l.Jobs) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the demo's jobs have not ended after 5 minutes (%v)", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func screenshot(t *testing.T, p *page, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	buf, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	img, err := png.Decode(bytes.NewReader(buf))
	if err != nil {
		t.Fatalf("the screenshot is no PNG: %v", err)
	}
	if w := img.Bounds().Dx(); w != 1440 {
		t.Errorf("the screenshot is %d pixels wide, want 1440", w)
	}
	paths := []string{filepath.Join(t.TempDir(), name)}
	if *screenshotDir != "" {
		paths = append(paths, filepath.Join(*screenshotDir, name))
	}
	for _, path := range paths {
		if err := os.WriteFile(path, buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("screenshot %s: %d bytes, %v", name, len(buf), img.Bounds())
}

func dumpLogOnFailure(t *testing.T, path string) {
	if !t.Failed() {
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Logf("the log: %v", err)
		return
	}
	if len(b) > 8000 {
		b = b[len(b)-8000:]
	}
	t.Logf("%s (end):\n%s", filepath.Base(path), b)
}

// heatConfig is a daemon with the optimal policy solved at start on a
// grid of two clusters of two hosts and two job types.
const heatConfig = `listen: %s
insecure_http: true
data_dir: data
grid: grid.yaml
job_types:
  - {name: x, vm: {vcpus: 1, memory_mib: 512}, holding_cost: 2}
  - {name: y, vm: {vcpus: 1, memory_mib: 512}, holding_cost: 1}
policy: {name: optimal, solve: true}
executor: {name: emulated, time_scale: 0.01}
min_pool_hosts: 1
`

const heatGrid = `clusters:
  - {name: a, machines: 2, cores: 2, memory_mib: 4096, perf: 1.0e9, lan_mbps: 1000, uplink_mbps: 100}
  - {name: b, machines: 2, cores: 2, memory_mib: 4096, perf: 1.0e9, lan_mbps: 1000, uplink_mbps: 100}
links:
  - {between: [a, b], mbps: 100}
`

// TestDashboardHeatMap: with an optimal table in force the policy panel
// shows a view of it like the papers' tables, one cell per pair of queue
// lengths with its action as text, and the live state outlined.
func TestDashboardHeatMap(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	for name, body := range map[string]string{"metasched.yaml": fmt.Sprintf(heatConfig, addr), "grid.yaml": heatGrid} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	logPath := filepath.Join(dir, "daemon.log")
	d := startServe(t, bin, dir, logPath, "--config", filepath.Join(dir, "metasched.yaml"), "--log-format", "json")
	defer dumpLogOnFailure(t, logPath)
	tok, err := os.ReadFile(filepath.Join(dir, "data", "token"))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tok))
	c := client.New(d.base, token)
	// A job makes the manager decide, which starts the solve.
	if _, err := c.Submit(context.Background(), []byte("name: one\ntype: x\ntasks: 4\ntask_ops: 1.0e9\ntask_bytes: 0\n")); err != nil {
		t.Fatal(err)
	}
	p := newPage(t, browser(t))
	p.run("log in", chromedp.Navigate(d.base+"/"), chromedp.WaitVisible(chromedp.ID("login-token")),
		p.fill("login-token", token), chromedp.Click(chromedp.CSS(`#login-form button[type=submit]`)))
	// The page and the API are read one after the other while the pools
	// may move (the view follows the live allocation): retry until both
	// show the same view.
	deadline := time.Now().Add(90 * time.Second)
	for {
		got := p.waitJS(time.Until(deadline), "the heat map", `(t => t ? JSON.stringify({
	    in_force: document.querySelector('#policy-in-force').textContent,
	    rows: t.querySelectorAll('tbody tr').length,
	    cols: t.querySelectorAll('thead th').length - 1,
	    cells: [...t.querySelectorAll('tbody td')].map(td => td.textContent.trim()),
	    live: t.querySelectorAll('td.live').length}) : '')(document.querySelector('#heatmap-table'))`)
		var hm struct {
			InForce    string `json:"in_force"`
			Rows, Cols int
			Cells      []string
			Live       int
		}
		if err := json.Unmarshal([]byte(got), &hm); err != nil {
			t.Fatal(err)
		}
		pv, err := c.Policy(context.Background())
		if err != nil || pv.TableView == nil {
			t.Fatalf("policy: %+v, %v", pv, err)
		}
		tv := pv.TableView
		var want []string
		for _, row := range tv.Actions {
			for _, a := range row {
				if a == "" {
					a = "·"
				}
				want = append(want, a)
			}
		}
		same := strings.HasPrefix(hm.InForce, "optimal") && hm.Rows == len(tv.Actions) && hm.Cols == len(tv.Actions[0]) &&
			strings.Join(hm.Cells, " ") == strings.Join(want, " ") && (tv.LiveRow >= 0) == (hm.Live == 1)
		if same {
			t.Logf("heat map %d×%d, %s", hm.Rows, hm.Cols, tv.Spec)
			// Each action has its colour (the page's policy allows the cells'
			// inline styles).
			colours, err := p.eval(`JSON.stringify(Object.fromEntries([...document.querySelectorAll('#heatmap-table tbody td')].map(td =>
			    [td.textContent.trim(), getComputedStyle(td).backgroundColor])))`)
			var byAction map[string]string
			if err == nil {
				err = json.Unmarshal([]byte(colours), &byAction)
			}
			seen := map[string]string{}
			for a, c := range byAction {
				if other, dup := seen[c]; dup || err != nil {
					t.Errorf("actions %q and %q share the colour %s (%v)", a, other, c, err)
				}
				seen[c] = a
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("heat map %+v\nwant in force optimal, %d×%d cells %v, live (%d,%d)", hm, len(tv.Actions), len(tv.Actions[0]), want, tv.LiveRow, tv.LiveCol)
		}
		time.Sleep(300 * time.Millisecond)
	}
}
