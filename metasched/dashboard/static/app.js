// The metasched dashboard: logs in once with the API token (the daemon
// answers with an HttpOnly session cookie), then follows GET /v1/events,
// one whole state a second, and draws it. Every event replaces what the
// page shows, so after a reconnection (a daemon restart, say) nothing old
// stays on screen.
'use strict';

const HISTORY_SECONDS = 600;
const STALE_AFTER_MS = 5000;
const POOL_COLOURS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#8c564b', '#e377c2', '#17becf'];
const OUTCOMES = {done: 'committed', cancelled: 'cancelled', rolled_back: 'rolled back', stranded: 'stranded'};

const $ = (sel) => document.querySelector(sel);

let source = null;      // the EventSource
let instance = null;    // the daemon instance of the last event
let samples = [];       // the charts' samples, oldest first
let lastEvent = 0;      // time of the last event (ms)
let retryTimer = null;
let state = null;       // the last state
let selectedJob = null; // the job whose detail is open
let detailKey = '';
let detailSeq = 0;       // the newest read of the open job: an older answer is dropped
const drawn = {};       // section → JSON of what it shows now

// ---- helpers ----

function esc(s) {
  return String(s ?? '').replace(/[&<>"']/g, (c) => ({'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'}[c]));
}

function num(x, digits = 3) {
  if (x === undefined || x === null || Number.isNaN(x)) return '–';
  if (x === 0) return '0';
  const a = Math.abs(x);
  if (a >= 1e5 || a < 1e-3) return x.toExponential(2);
  return Number(x.toPrecision(digits)).toString();
}

function secs(x) {
  if (!x) return '–';
  if (x < 60) return num(x) + ' s';
  if (x < 3600) return num(x / 60) + ' min';
  return num(x / 3600) + ' h';
}

// ratio shows measured over predicted run time.
function ratio(x) {
  return x ? num(x) : '–';
}

// time shows a time of day as HH:MM:SS (24 hours, local time), the same
// in every browser; stamp shows a date and time as YYYY-MM-DD HH:MM:SS.
function time(t) {
  if (!t) return '–';
  const d = new Date(t);
  const p = (n) => String(n).padStart(2, '0');
  return `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

function stamp(t) {
  if (!t) return '–';
  const d = new Date(t);
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${time(t)}`;
}

// api calls the daemon with the session cookie; it never throws for an
// HTTP error: {status, ok, data}. A network error gives status 0.
async function api(method, path, body) {
  const headers = {'X-Requested-With': 'metasched'};
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let r;
  try {
    r = await fetch(path, {method, headers, credentials: 'same-origin', body: body === undefined ? undefined : JSON.stringify(body)});
  } catch (e) {
    return {status: 0, ok: false, data: {error: 'the daemon does not answer: ' + e.message}};
  }
  const text = await r.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = {error: text}; }
  return {status: r.status, ok: r.ok, data};
}

// setSection replaces a section's HTML only when what it shows changed, so
// that a button is not replaced under the pointer every second.
function setSection(id, key, html) {
  if (drawn[id] === key) return;
  drawn[id] = key;
  document.getElementById(id).innerHTML = html;
}

// ---- connection ----

function setConn(kind, text) {
  const el = $('#conn');
  el.className = 'conn conn-' + kind;
  el.textContent = text;
  el.dataset.state = kind;
  document.body.classList.toggle('stale', kind !== 'live');
}

function showLogin(message) {
  if (source) { source.close(); source = null; }
  clearTimeout(retryTimer);
  instance = null;
  $('#main').hidden = true;
  $('#logout').hidden = true;
  $('#login-view').hidden = false;
  setConn('login', 'logged out');
  setErrors($('#login-form'), message ? [{field: 'token', problem: message}] : [], '');
  $('#login-token').focus();
}

// start checks the session and follows the events, or asks to log in.
async function start() {
  clearTimeout(retryTimer);
  const r = await api('GET', '/v1/dashboard?history=true');
  if (r.status === 401) { showLogin(); return; }
  if (!r.ok) {
    setConn('down', r.status === 0 ? 'daemon unreachable, retrying…' : 'error ' + r.status + ', retrying…');
    retryTimer = setTimeout(start, 1000);
    return;
  }
  $('#login-view').hidden = true;
  $('#main').hidden = false;
  $('#logout').hidden = false;
  receive(r.data);
  connect();
}

function connect() {
  if (source) source.close();
  source = new EventSource('/v1/events');
  source.addEventListener('state', (e) => receive(JSON.parse(e.data)));
  source.onerror = () => {
    // The browser retries a dropped stream by itself; a refused one (401,
    // or the daemon gone for good) is closed: check why, then start over.
    setConn('down', 'connection lost, reconnecting…');
    if (source && source.readyState === EventSource.CLOSED) {
      source.close();
      source = null;
      retryTimer = setTimeout(start, 1000);
    }
  };
}

// A stream that stays silent (a half-open connection) is dropped.
setInterval(() => {
  if (!source || !lastEvent) return;
  const age = Date.now() - lastEvent;
  if (age > STALE_AFTER_MS) {
    setConn('down', 'no update for ' + Math.round(age / 1000) + ' s, reconnecting…');
    source.close();
    source = null;
    start();
  }
}, 1000);

function receive(db) {
  lastEvent = Date.now();
  if (db.instance !== instance) {
    if (instance !== null) {
      $('#daemon').dataset.restarted = 'true';
    }
    instance = db.instance;
    samples = [];
    for (const k of Object.keys(drawn)) delete drawn[k];
  }
  if (db.history) {
    samples = db.history.slice();
  } else if (db.sample && (!samples.length || samples[samples.length - 1].at !== db.sample.at)) {
    samples.push(db.sample);
  }
  const cut = new Date(db.now).getTime() - HISTORY_SECONDS * 1000;
  while (samples.length && new Date(samples[0].at).getTime() < cut) samples.shift();
  state = db;
  render(db);
  setConn('live', 'live');
}

// ---- drawing ----

function render(db) {
  const el = $('#daemon');
  el.textContent = 'version ' + (db.version || '–') + ' · up since ' + stamp(db.started) +
    ' · updated ' + time(db.now) + (el.dataset.restarted ? ' · reconnected after a restart' : '');
  el.dataset.instance = db.instance;
  renderViewer(db.viewer);
  renderTypes(db.types);
  renderPools(db);
  renderCharts(db);
  renderJobs(db);
  renderSwitches(db.switches || []);
  renderTuning(db.tuning || []);
  renderPolicy(db.policy);
  refreshDetail(db);
}

// renderViewer says who is logged in, and shows an operator's sections to
// operators only (a user's state has no hosts, switches or tuning, and
// only its own jobs).
function renderViewer(v) {
  if (!v) return;
  const operator = v.role === 'operator';
  $('#viewer').textContent = v.name + ' (' + v.role + (operator ? '' : ': your jobs, the pools and the policy') + ')';
  for (const sec of document.querySelectorAll('[data-role="operator"]')) sec.hidden = !operator;
}

function renderTypes(types) {
  const sel = $('#f-type');
  const key = JSON.stringify(types);
  if (sel.dataset.key === key) return;
  const keep = sel.value;
  sel.dataset.key = key;
  sel.innerHTML = types.map((t) => `<option value="${esc(t.name)}">${esc(t.name)} (${t.vcpus} vCPU, ${t.memory_mib} MiB)</option>`).join('');
  if (types.some((t) => t.name === keep)) sel.value = keep;
  typeDefaults();
}

function typeDefaults() {
  const t = (state?.types || []).find((x) => x.name === $('#f-type').value);
  if (!t) return;
  $('#f-vcpus').placeholder = String(t.vcpus);
  $('#f-memory').placeholder = String(t.memory_mib);
}

function hostLabel(h) {
  switch (h.state) {
    case 'switching': return `switching ${h.from} → ${h.to}`;
    case 'stranded': return `stranded (${h.from || '?'} → ${h.to || '?'})`;
    default: return h.state;
  }
}

function renderPools(db) {
  const byPool = {};
  for (const h of db.hosts) (byPool[h.pool] ||= []).push(h);
  const html = db.pools.map((p, i) => {
    const hosts = byPool[p.name] || [];
    const r = p.rates || {};
    const squares = hosts.map((h) => {
      const vms = (h.vms || []).length;
      const title = `${h.name} (${h.site}): ${hostLabel(h)}; ${vms} VM${vms === 1 ? '' : 's'}; ` +
        `${h.free_vcpus}/${h.cpus} vCPUs free${h.reason ? '; ' + h.reason : ''}`;
      return `<div class="host state-${esc(h.state)}" data-host="${esc(h.name)}" data-state="${esc(h.state)}" ` +
        `data-from="${esc(h.from || '')}" data-to="${esc(h.to || '')}" title="${esc(title)}">` +
        `<span class="hn">${esc(h.name)}</span><b>${esc(hostLabel(h))}</b>` +
        (vms ? `<span class="vms">${vms} VM${vms === 1 ? '' : 's'}</span>` : '') + `</div>`;
    }).join('');
    return `<div class="pool" data-pool="${esc(p.name)}" style="border-top-color:${POOL_COLOURS[i % POOL_COLOURS.length]}">
      <h3>${esc(p.name)} <small class="muted">${p.vcpus} vCPU · ${p.memory_mib} MiB · cost ${num(p.holding_cost)}</small></h3>
      <dl class="stats">
        <div><dt>queue</dt><dd data-stat="queued">${p.queued}</dd></div>
        <div><dt>running</dt><dd data-stat="active">${p.active}</dd></div>
        <div><dt>servers</dt><dd data-stat="servers">${p.hosts.length}</dd></div>
        <div><dt>busy / idle</dt><dd>${p.busy} / ${p.idle}</dd></div>
        <div><dt>switching out / in</dt><dd>${p.switching_out} / ${p.switching_in}</dd></div>
        <div><dt>λ (jobs/s)</dt><dd data-stat="lambda">${num(r.arrival_per_s)}</dd></div>
        <div><dt>µ (per host·s)</dt><dd data-stat="mu">${num(r.service_per_host_s)}</dd></div>
        <div><dt>done</dt><dd>${p.completed}</dd></div>
      </dl>
      ${r.prior ? '<p class="muted small">rates: prior (few samples yet)</p>' : ''}
      <div class="hosts" data-count="${hosts.length}">${squares || '<span class="muted">no server</span>'}</div>
    </div>`;
  }).join('');
  const other = db.hosts.filter((h) => !db.pools.some((p) => p.name === h.pool));
  const extra = other.length ? `<div class="pool"><h3>no pool</h3><div class="hosts">${other.map((h) =>
    `<div class="host state-${esc(h.state)}" data-host="${esc(h.name)}" data-state="${esc(h.state)}"><span class="hn">${esc(h.name)}</span><b>${esc(hostLabel(h))}</b></div>`).join('')}</div></div>` : '';
  setSection('pools', JSON.stringify([db.pools, db.hosts]), html + extra);
}

// chart draws lines [{name, colour, points: [[t, v]]}] over the last
// HISTORY_SECONDS as an SVG.
function chart(id, lines, now) {
  const W = 420, H = 160, L = 40, B = 20, T = 8, R = 8;
  // The last HISTORY_SECONDS, or since the first sample (at least a
  // minute) while the daemon is younger.
  let first = now;
  for (const l of lines) if (l.points.length) first = Math.min(first, l.points[0][0]);
  const t1 = now, t0 = Math.max(now - HISTORY_SECONDS * 1000, Math.min(first, now - 60000));
  let vmax = 1;
  for (const l of lines) for (const [, v] of l.points) vmax = Math.max(vmax, v);
  const x = (t) => L + (W - L - R) * (t - t0) / (t1 - t0);
  const y = (v) => H - B - (H - B - T) * v / vmax;
  let svg = `<svg viewBox="0 0 ${W} ${H}" role="img" aria-label="${esc(id)}">`;
  for (const f of [0, 0.5, 1]) {
    const v = vmax * f;
    svg += `<line x1="${L}" x2="${W - R}" y1="${y(v)}" y2="${y(v)}" class="grid"/><text x="${L - 4}" y="${y(v) + 4}" text-anchor="end">${num(v, 2)}</text>`;
  }
  const span = (t1 - t0) / 1000;
  for (const f of [1, 0.5, 0]) {
    const ago = span * f;
    const label = ago === 0 ? 'now' : ago >= 120 ? '−' + num(ago / 60, 2) + ' min' : '−' + Math.round(ago) + ' s';
    svg += `<text x="${x(t1 - ago * 1000)}" y="${H - 4}" text-anchor="${f === 1 ? 'start' : f === 0 ? 'end' : 'middle'}">${label}</text>`;
  }
  for (const l of lines) {
    if (!l.points.length) continue;
    const pts = l.points.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(' ');
    svg += `<polyline fill="none" stroke="${l.colour}" stroke-width="2" points="${pts}"><title>${esc(l.name)}</title></polyline>`;
  }
  svg += '</svg>';
  const legend = lines.length > 1 ? '<div class="chart-legend">' + lines.map((l) =>
    `<span><i style="background:${l.colour}"></i>${esc(l.name)} ${l.points.length ? num(l.points[l.points.length - 1][1]) : ''}</span>`).join('') + '</div>' : '';
  document.getElementById(id).innerHTML = svg + legend;
}

function renderCharts(db) {
  const now = new Date(db.now).getTime();
  const pts = (f) => samples.map((s) => [new Date(s.at).getTime(), f(s)]);
  const perPool = (field) => db.pools.map((p, i) => ({name: p.name, colour: POOL_COLOURS[i % POOL_COLOURS.length],
    points: pts((s) => (s[field] || {})[p.name] || 0)}));
  chart('chart-queue', perPool('queue'), now);
  chart('chart-servers', perPool('servers'), now);
  chart('chart-cost', [{name: 'Σ c·j', colour: '#444', points: pts((s) => s.cost_rate)}], now);
}

const LIVE = ['queued', 'planned', 'provisioning', 'running'];

function renderJobs(db) {
  const c = db.jobs.counts || {};
  $('#job-counts').textContent = Object.keys(c).filter((k) => c[k]).map((k) => `${k} ${c[k]}`).join(' · ') || 'none yet';
  const rows = db.jobs.recent.map((j) => {
    const clusters = (j.clusters || []).filter((x) => x.machines > 0).map((x) => `${esc(x.name)}: ${x.machines}` +
      (x.tasks_predicted ? ` (tasks ${num(x.tasks_predicted)}${x.tasks_done !== undefined ? ' → ' + x.tasks_done : ''})` : '')).join(', ');
    const cancel = LIVE.includes(j.state) ? `<button type="button" class="cancel" data-cancel="${esc(j.id)}">Cancel</button>` : '';
    return `<tr data-job="${esc(j.id)}" data-state="${esc(j.state)}" class="${j.id === selectedJob ? 'selected' : ''}">
      <td><a href="#" data-open="${esc(j.id)}">${esc(j.id)}</a></td><td>${esc(j.name)}</td><td>${esc(j.type)}</td>
      <td><span class="badge job-${esc(j.state)}">${esc(j.state)}</span></td>
      <td>${esc(j.master || '–')}</td><td>${clusters || '–'}</td><td>${j.machines || '–'}</td>
      <td>${secs(j.predicted_s)}</td><td>${secs(j.measured_s)}</td><td>${ratio(j.ratio)}</td>
      <td class="reason">${esc(j.reason)}</td><td>${cancel}</td></tr>`;
  }).join('');
  setSection('jobs', JSON.stringify([db.jobs.recent, selectedJob]),
    `<thead><tr><th>job</th><th>name</th><th>type</th><th>state</th><th>master</th><th>workers per cluster</th><th>machines</th>
    <th>predicted</th><th>measured</th><th>ratio</th><th>reason</th><th></th></tr></thead><tbody>${rows ||
    '<tr><td colspan="12" class="muted">no job yet</td></tr>'}</tbody>`);
}

async function refreshDetail(db) {
  if (!selectedJob) return;
  const j = db.jobs.recent.find((x) => x.id === selectedJob);
  // A job out of the list is read again every few seconds.
  const key = selectedJob + (j ? j.state + j.updated : Math.floor(Date.now() / 5000));
  if (key === detailKey) return;
  detailKey = key;
  await showDetail(selectedJob);
}

async function showDetail(id) {
  const el = $('#job-detail');
  const seq = ++detailSeq;
  const r = await api('GET', '/v1/jobs/' + encodeURIComponent(id));
  // Reads overlap when the job changes fast: an answer that a newer read,
  // or a closed or other detail, has overtaken would show an older state
  // that nothing then corrects.
  if (seq !== detailSeq || id !== selectedJob) return;
  if (!r.ok) {
    el.hidden = false;
    el.innerHTML = `<p class="error">${esc(r.data?.error || 'error ' + r.status)}</p>`;
    return;
  }
  const j = r.data;
  const tr = (j.transitions || []).map((t) => `<li>${time(t.at)} ${esc(t.from || '·')} → <b>${esc(t.to)}</b>: ${esc(t.reason)}</li>`).join('');
  const vms = (j.vms || []).map((v) => `${esc(v.name)} on ${esc(v.host)}${v.master ? ' (master)' : ''}`).join(', ');
  const tasks = (j.clusters || []).map((c) => `${esc(c.name)}: ${num(c.tasks_predicted)} → ${c.tasks_done !== undefined ? c.tasks_done : '–'}`).join(', ');
  el.hidden = false;
  el.innerHTML = `<h3>${esc(j.id)} ${esc(j.name)} <span class="badge job-${esc(j.state)}">${esc(j.state)}</span>
    <button type="button" class="close" data-close="1">Close</button></h3>
    <p>${esc(j.type)} · ${j.spec.tasks} tasks of ${num(j.spec.task_ops)} operations and ${num(j.spec.task_bytes)} bytes ·
    VM ${j.spec.vm.vcpus} vCPU ${j.spec.vm.memory_mib} MiB · predicted ${secs(j.predicted_s)}${j.start_end_s ? ' (' + secs(j.start_end_s) + ' of it to start and end)' : ''} · measured ${secs(j.measured_s)}
    · ratio ${ratio(j.ratio)}
    ${j.attempts ? '· attempts ' + j.attempts : ''}${j.exit_code !== undefined ? ' · exit code ' + j.exit_code : ''}</p>
    <h4>Plan</h4><pre class="explanation">${esc(j.explanation || 'not planned yet: ' + j.reason)}</pre>
    ${tasks ? `<h4>Tasks per cluster (predicted → done)</h4><p>${tasks}</p>` : ''}
    ${vms ? `<h4>VMs</h4><p>${vms}</p>` : ''}
    <h4>Transitions</h4><ul>${tr}</ul>`;
}

function renderSwitches(sws) {
  const rows = sws.map((s) => {
    const outcome = s.final ? (OUTCOMES[s.phase] || s.phase) : 'in flight: ' + s.phase;
    return `<tr data-switch="${esc(s.id)}" data-phase="${esc(s.phase)}"><td>${esc(s.id)}</td><td>${esc(s.host || '–')}</td>
      <td>${esc(s.from)} → ${esc(s.to)}</td><td><span class="badge sw-${s.final ? esc(s.phase) : 'active'}">${esc(outcome)}</span></td>
      <td>${time(s.started)}</td><td>${num(s.seconds)} s</td>
      <td class="reason">${esc([s.failed_in ? 'failed in ' + s.failed_in : '', s.reason, s.cleared_to ? 'cleared to ' + s.cleared_to : '',
        (s.requeued || []).length ? 'requeued ' + s.requeued.join(', ') : ''].filter(Boolean).join('; '))}</td></tr>`;
  }).join('');
  setSection('switches', JSON.stringify(sws.map((s) => [s.id, s.phase, s.host, Math.round(s.seconds)])),
    `<thead><tr><th>switch</th><th>host</th><th>from → to</th><th>outcome</th><th>started</th><th>took</th><th>notes</th></tr></thead>
    <tbody>${rows || '<tr><td colspan="7" class="muted">no switch yet</td></tr>'}</tbody>`);
}

function renderTuning(recs) {
  // A figure measured once a job has ended done, else what it waits for.
  const measured = (state, v) => (state === 'done' ? `${num(v)} s` : state ? `none (${esc(state)})` : 'when it ends');
  const rows = recs.map((r) => {
    const m = r.measured;
    const migs = (r.migrations || []).map((g) => `${esc(g.vm)} ${esc(g.from)} → ${esc(g.to)} ${g.error ? 'failed: ' + esc(g.error) : `in ${num(g.seconds)} s${g.live ? ' live' : ''}`}`);
    const what = [...(r.resizes || []).map((z) => `${esc(z.vm)} to ${z.vcpus} vCPUs on ${esc(z.host)}${z.error ? ' failed: ' + esc(z.error) : ''}`),
      ...migs];
    if (!what.length) {
      what.push(...(r.shrinks || []).map((z) => `${esc(z.vm)} to ${z.vcpus} vCPUs on ${esc(z.host)}`),
        ...(r.moves || []).map((g) => `${esc(g.vm)} ${esc(g.from)} → ${esc(g.to)}`));
    }
    const gain = m ? `<br><small>predicted ${num(m.predicted_gain_s)} s, measured ${measured(m.new_job_state, m.new_job_gain_s)}</small>` : '';
    const loss = m ? `<br><small>predicted ${num(m.predicted_loss_s)} s, measured ${measured(m.target_state, m.target_slowdown_s)}</small>` : '';
    const mig = r.ended && (r.migrations || []).length ? `<br><small>measured ${num(r.migration_s)} s</small>` : '';
    // The figures on one row, what was moved or resized and why on the row
    // below it, across the table: a long reason neither widens the table
    // past its outcome nor makes its rows tall.
    return `<tr data-tuning="${r.seq}" class="tuning-figures"><td>${r.seq}</td><td>${time(r.at)}</td><td>${esc(r.action)}</td><td>${esc(r.target)}</td>
      <td>${esc(r.new_job_id || r.new_job)}</td><td>${esc(r.cluster)}</td><td>${num(r.gain_seconds)} s${gain}</td>
      <td>${num(r.loss_seconds)} s${loss}</td><td>${num(r.migration_seconds)} s${mig}</td>
      <td><span class="badge">${esc(r.outcome)}</span></td></tr>
      <tr class="tuning-details"><td></td><td colspan="9" class="details">${what.join(', ')}${what.length && r.reason ? '; ' : ''}${esc(r.reason)}</td></tr>`;
  }).join('');
  setSection('tuning', JSON.stringify(recs.map((r) => [r.seq, r.outcome, r.measured])),
    `<thead><tr><th>#</th><th>at</th><th>action</th><th>running job</th><th>for job</th><th>cluster</th>
    <th title="how much sooner the new job ends: the plan's seconds; below, in the job's own seconds, predicted and measured">gain</th>
    <th title="how much later the running job ends: the plan's seconds; below, in the job's own seconds, predicted and measured">loss</th>
    <th title="the migrations' predicted time; below, measured">migration</th><th>outcome</th></tr></thead>
    <tbody>${rows || '<tr><td colspan="10" class="muted">no tuning yet: it is tried when a queued job\'s plan is held back by a link or by busy hosts</td></tr>'}</tbody>`);
}

function renderPolicy(p) {
  if (!p) return;
  const pools = (p.pools || []).map((x) => `<tr><td>${esc(x.name)}</td><td>${x.jobs}</td><td>${x.servers}</td>
    <td>${num(x.arrival_per_s)}</td><td>${num(x.service_per_host_s)}</td><td>${num(x.holding_cost)}</td></tr>`).join('');
  const t = p.table;
  const html = `<p><b>In force:</b> <span id="policy-in-force">${esc(p.in_force)}</span>
    ${p.in_force !== p.configured ? ` <span class="muted">(configured: ${esc(p.configured)})</span>` : ''}</p>
    ${p.note ? `<p class="note">${esc(p.note)}</p>` : ''}
    <p class="muted">N = ${p.servers} hosts · ζ = ${num(p.switch_rate_per_s)} /s (${p.switch_samples} switches measured) ·
    ${p.decisions} decisions, ${p.switches} switches</p>
    ${p.last ? `<p class="small">Last switch ${time(p.last_at)}: ${esc(p.last)}</p>` : ''}
    <table class="data"><thead><tr><th>pool</th><th>j</th><th>k</th><th>λ /s</th><th>µ /host·s</th><th>c</th></tr></thead><tbody>${pools}</tbody></table>
    ${t ? `<p class="small">Optimal table: ${esc(t.source)}, ${t.states} states${t.solved_at ? ', solved ' + time(t.solved_at) : ''}${t.solving ? ' (re-solving)' : ''}</p>` : ''}`;
  setSection('policy', JSON.stringify(p), html);
  setSection('heatmap', JSON.stringify(p.table_view || null), heatmap(p.table_view));
}

// heatmap draws a view of the optimal table like the papers' tables: the
// action at each pair of queue lengths, colour by action and its text.
function heatmap(v) {
  if (!v) return '';
  const acts = [...new Set(v.actions.flat().filter(Boolean))].sort();
  const colour = (a) => a ? `hsl(${(acts.indexOf(a) * 137) % 360} 65% 72%)` : '#f4f4f4';
  const rowPool = v.pools[v.rows], colPool = v.pools[v.cols];
  let html = `<h3>Optimal table: ${esc(v.spec)}</h3>
    <p class="small muted">servers in place ${esc(v.pools.map((p, i) => p + '=' + v.servers[i]).join(', '))}; rows: jobs at ${esc(rowPool)}, columns: jobs at ${esc(colPool)}; the outlined cell is the live state.</p>
    <table class="heatmap" id="heatmap-table"><thead><tr><th>${esc(rowPool)} \\ ${esc(colPool)}</th>`;
  for (let c = 0; c < v.actions[0].length; c++) html += `<th>${c}</th>`;
  html += '</tr></thead><tbody>';
  v.actions.forEach((row, r) => {
    html += `<tr><th>${r}</th>` + row.map((a, c) => `<td style="background:${colour(a)}" class="${r === v.live_row && c === v.live_col ? 'live' : ''}"
      title="j(${esc(rowPool)})=${r}, j(${esc(colPool)})=${c}: ${a ? 'switch ' + esc(a) : 'no switch'}">${a ? esc(a) : '·'}</td>`).join('') + '</tr>';
  });
  html += '</tbody></table>';
  return html;
}

// ---- forms ----

function setErrors(form, fields, general) {
  for (const el of form.querySelectorAll('[data-error-for]')) el.textContent = '';
  for (const el of form.querySelectorAll('.invalid')) el.classList.remove('invalid');
  for (const f of fields) {
    const el = form.querySelector(`[data-error-for="${CSS.escape(f.field || '')}"]`) || form.querySelector('[data-error-for=""]');
    if (!el) continue;
    el.textContent = (el.textContent ? el.textContent + '; ' : '') + (f.field ? f.field + ': ' : '') + f.problem;
    const input = form.querySelector(`[name="${CSS.escape(f.field || '')}"]`);
    if (input) input.classList.add('invalid');
  }
  const g = form.querySelector('[data-error-for=""]');
  if (g && general && !fields.length) g.textContent = general;
}

// value reads a number field: a number when it is one, else the text as
// typed (the daemon says what is wrong with it), undefined when empty.
function value(id) {
  const s = $(id).value.trim();
  if (s === '') return undefined;
  const n = Number(s);
  return Number.isFinite(n) ? n : s;
}

async function submitJob(e) {
  e.preventDefault();
  const form = $('#submit-form');
  const job = {type: $('#f-type').value, name: $('#f-name').value.trim(), tasks: value('#f-tasks'),
    task_ops: value('#f-task-ops'), task_bytes: value('#f-task-bytes')};
  const eff = value('#f-efficiency');
  if (eff !== undefined) job.efficiency = eff;
  const vcpus = value('#f-vcpus'), mem = value('#f-memory');
  if (vcpus !== undefined || mem !== undefined) {
    const t = (state?.types || []).find((x) => x.name === job.type) || {};
    job.vm = {vcpus: vcpus ?? t.vcpus, memory_mib: mem ?? t.memory_mib};
  }
  for (const k of Object.keys(job)) if (job[k] === undefined || job[k] === '') delete job[k];
  $('#f-submit').disabled = true;
  const r = await api('POST', '/v1/jobs', job);
  $('#f-submit').disabled = false;
  if (r.status === 401) { showLogin('the session ended: log in again'); return; }
  if (!r.ok) {
    setErrors(form, r.data?.fields || [], r.data?.error || 'error ' + r.status);
    $('#submit-result').textContent = 'not submitted';
    $('#submit-result').dataset.job = '';
    return;
  }
  setErrors(form, [], '');
  $('#submit-result').textContent = `submitted ${r.data.id} (${r.data.state})`;
  $('#submit-result').dataset.job = r.data.id;
  openJob(r.data.id);
}

async function cancelJob(id, button) {
  button.disabled = true;
  button.textContent = 'Cancelling…';
  const r = await api('POST', '/v1/jobs/' + encodeURIComponent(id) + '/cancel');
  if (r.status === 401) { showLogin('the session ended: log in again'); return; }
  if (!r.ok) {
    button.disabled = false;
    button.textContent = 'Cancel';
    alert(`cancel ${id}: ${r.data?.error || r.status}`);
  }
}

function openJob(id) {
  selectedJob = id;
  detailKey = '';
  delete drawn.jobs;
  if (state) { renderJobs(state); refreshDetail(state); }
}

async function login(e) {
  e.preventDefault();
  const r = await api('POST', '/login', {token: $('#login-token').value});
  if (!r.ok) {
    setErrors($('#login-form'), r.data?.fields || [], r.data?.error || 'error ' + r.status);
    return;
  }
  $('#login-token').value = '';
  setErrors($('#login-form'), [], '');
  start();
}

async function logout() {
  await api('POST', '/logout');
  showLogin();
}

document.addEventListener('DOMContentLoaded', () => {
  $('#login-form').addEventListener('submit', login);
  $('#submit-form').addEventListener('submit', submitJob);
  $('#f-type').addEventListener('change', typeDefaults);
  $('#logout').addEventListener('click', logout);
  $('#find-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const id = $('#find-job').value.trim();
    if (id) openJob(id);
  });
  $('#jobs').addEventListener('click', (e) => {
    const b = e.target.closest('[data-cancel]');
    if (b) { cancelJob(b.dataset.cancel, b); return; }
    const a = e.target.closest('[data-open]');
    if (a) { e.preventDefault(); openJob(a.dataset.open); }
  });
  $('#job-detail').addEventListener('click', (e) => {
    if (e.target.closest('[data-close]')) {
      selectedJob = null;
      detailSeq++;
      $('#job-detail').hidden = true;
      delete drawn.jobs;
      if (state) renderJobs(state);
    }
  });
  start();
});
