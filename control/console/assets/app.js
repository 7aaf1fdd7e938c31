// veer console: a client of the admin API (/v1/admin/). The token is kept
// in this closure only; every write carries it in an Authorization header,
// an If-Match version and a reason.
'use strict';
(function () {
  const S = { token: '', name: '', role: '', table: null, tableVersion: 0, tableText: '', raw: false, live: null, series: [] };
  const TIERS = ['critical_plus', 'critical', 'sheddable_plus', 'sheddable'];
  const $ = (id) => document.getElementById(id);

  // el builds an element; children are nodes or text (never HTML).
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === false || v == null) continue;
      if (k === 'text') e.textContent = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? '' : v);
    }
    for (const k of kids.flat()) if (k != null) e.append(k.nodeType ? k : String(k));
    return e;
  }
  // put replaces parent's children with kids (nested arrays flattened, null
  // skipped).
  function put(parent, ...kids) {
    parent.replaceChildren(...kids.flat(Infinity).filter((k) => k != null));
  }
  function svg(tag, attrs) {
    const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    return e;
  }
  const canWrite = (role) => ({ viewer: 0, operator: 1, admin: 2 }[S.role] >= { operator: 1, admin: 2 }[role]);

  async function api(method, path, opts) {
    opts = opts || {};
    const h = { Authorization: 'Bearer ' + S.token };
    if (opts.ifMatch) h['If-Match'] = '"' + opts.ifMatch + '"';
    if (opts.reason) h['X-Veer-Reason'] = opts.reason;
    let body = opts.body;
    if (body !== undefined && typeof body !== 'string') { body = JSON.stringify(body); h['Content-Type'] = 'application/json'; }
    let r;
    try {
      r = await fetch(path, { method, headers: h, body, cache: 'no-store', credentials: 'omit', redirect: 'error' });
    } catch (e) {
      return { ok: false, status: 0, data: { error: 'cannot reach the control plane: ' + e.message } };
    }
    const text = await r.text();
    let data = text;
    try { data = text ? JSON.parse(text) : null; } catch (e) { /* not JSON */ }
    return { ok: r.ok, status: r.status, data, text, etag: (r.headers.get('ETag') || '').replace(/"/g, '') };
  }
  const errText = (res) => (res.data && res.data.error) ? res.data.error : (res.status + ' ' + (res.text || ''));

  // checkReason: the reason travels in a header, so printable ASCII only.
  function checkReason(v) {
    if (!v.trim()) return 'a reason is required: it goes into the audit log';
    if (/[^\x20-\x7e]/.test(v)) return 'reason: use printable ASCII (it travels in the X-Veer-Reason header)';
    return '';
  }

  // ---- sign-in and navigation
  $('signin-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    S.token = $('token').value.trim();
    $('token').value = '';
    const res = await api('GET', '/v1/admin/whoami');
    if (!res.ok) { S.token = ''; $('signin-error').textContent = 'Sign-in failed: ' + errText(res); $('token').focus(); return; }
    S.name = res.data.name; S.role = res.data.role;
    $('signin-error').textContent = '';
    $('who').textContent = 'Signed in as ' + S.name + ' (' + S.role + ')';
    $('nav').hidden = false; $('signout').hidden = false;
    document.body.dataset.role = S.role;
    applyRole();
    if (!location.hash || location.hash === '#signin') location.hash = '#rules'; else route();
  });
  $('signout').addEventListener('click', () => { location.hash = ''; location.reload(); });

  // applyRole removes every write control the token may not use.
  function applyRole() {
    for (const e of document.querySelectorAll('.write')) e.hidden = !canWrite('operator');
    for (const e of document.querySelectorAll('.admin-only')) e.hidden = !canWrite('admin');
  }

  const pages = ['signin', 'rules', 'emergency', 'sites', 'criticality', 'limits', 'rollouts', 'docs', 'audit', 'live'];
  function route() {
    let p = (location.hash || '#signin').slice(1);
    if (!S.token || !pages.includes(p)) p = S.token ? 'rules' : 'signin';
    for (const q of pages) $('page-' + q).hidden = q !== p;
    for (const a of document.querySelectorAll('nav a')) {
      if (a.getAttribute('href') === '#' + p) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
    }
    if (p !== 'live') stopLive();
    if (p !== 'rollouts') stopRollouts();
    if (p !== 'sites') stopDNS();
    ({ rules: loadRules, emergency: loadEmergency, sites: loadSites, criticality: loadCrit, limits: loadLimits, rollouts: startRollouts, docs: loadDocs, audit: loadAudit, live: startLive, signin: () => $('token').focus() })[p]();
  }
  window.addEventListener('hashchange', route);

  // ---- routing rules
  async function loadTable() {
    const res = await api('GET', '/v1/admin/docs/routing/table');
    if (res.status === 404) return { none: true };
    if (!res.ok) return { error: errText(res) };
    return { version: Number(res.etag), text: res.text, doc: (typeof res.data === 'object' && res.data) ? res.data : null };
  }

  async function loadRules() {
    clearFieldErrors();
    $('rules-status').textContent = ''; $('rules-moves').textContent = ''; $('rules-conflict').hidden = true;
    const t = await loadTable();
    if (t.error) { $('rules-error').textContent = t.error; return; }
    $('rules-error').textContent = '';
    if (t.none) { $('rules-info').textContent = 'No routing table yet.'; S.table = { rules: [] }; S.tableVersion = 0; renderRules(); return; }
    S.tableVersion = t.version; S.tableText = t.text; S.table = t.doc; S.raw = !t.doc;
    $('rules-info').textContent = 'routing/table version ' + t.version + (S.raw ? ' (stored as YAML: edited as text)' : '') + '.';
    renderRules();
    loadHistory();
  }

  function ruleKind(r) { return r.bucket ? 'bucket' : (r.list ? 'list' : 'ids'); }

  function renderRules() {
    const box = $('rules-list');
    put(box, );
    $('rules-raw-box').hidden = !S.raw;
    $('rule-add').hidden = S.raw || !canWrite('admin');
    if (S.raw) { $('rules-raw').value = S.tableText; $('rules-raw').readOnly = !canWrite('admin'); return; }
    const ro = !canWrite('admin');
    const sites = (S.table.sites || []).map((s) => s.name);
    (S.table.rules || []).forEach((r, i) => {
      const f = (n) => 'rules[' + i + ']' + (n ? '.' + n : '');
      const id = (n) => 'rule-' + i + '-' + n;
      const input = (n, label, value, type) => [
        el('label', { for: id(n), text: label }),
        el('input', { id: id(n), type: type || 'text', value: value == null ? '' : value, 'data-field': f(n), readonly: ro, 'aria-describedby': 'err-' + i }),
      ];
      const kind = ruleKind(r);
      const fs = el('fieldset', { class: 'rule', 'data-rule': i },
        el('legend', { text: 'Rule ' + (i + 1) + ': ' + (r.name || '(unnamed)') }),
        el('div', {}, input('name', 'Name', r.name)),
        el('div', {}, el('label', { for: id('site'), text: 'Site' }),
          el('select', { id: id('site'), 'data-field': f('site'), disabled: ro, 'aria-describedby': 'err-' + i },
            (sites.includes(r.site) ? sites : [r.site || ''].concat(sites)).map((s) => el('option', { value: s, selected: s === r.site, text: s || '(none)' })))),
        el('div', {}, el('label', { for: id('kind'), text: 'Matches' }),
          el('select', { id: id('kind'), disabled: ro, onchange: (e) => { kindChange(i, e.target.value); } },
            [['bucket', 'a share of users (bucket)'], ['ids', 'listed device IDs'], ['list', 'a whitelist document']].map(([v, t]) => el('option', { value: v, selected: v === kind, text: t })))),
        kind === 'bucket' ? [
          el('div', {}, input('bucket.from', 'From %', r.bucket.from, 'number')),
          el('div', {}, input('bucket.to', 'To %', r.bucket.to, 'number')),
          el('div', {}, input('bucket.by', 'By (device or customer)', r.bucket.by || 'device')),
        ] : kind === 'list' ? el('div', {}, input('list', 'Whitelist name', r.list))
          : el('div', {}, input('device_ids', 'Device IDs (comma-separated)', (r.device_ids || []).join(', '))),
        el('div', {}, input('regions', 'Regions (comma-separated, empty: all)', (r.regions || []).join(', '))),
        el('p', { class: 'field-error', id: 'err-' + i, 'data-error-for': f('') }),
        ro ? null : el('div', {}, el('button', { type: 'button', class: 'secondary', text: 'Remove rule ' + (i + 1), onclick: () => { readRules(); S.table.rules.splice(i, 1); renderRules(); } })));
      box.append(fs);
    });
    if (!(S.table.rules || []).length) box.append(el('p', { text: 'No rules: every user gets the site of their region.' }));
  }

  function kindChange(i, kind) {
    readRules();
    const r = S.table.rules[i];
    delete r.bucket; delete r.list; delete r.device_ids; delete r.customer_ids;
    if (kind === 'bucket') r.bucket = { by: 'device', from: 0, to: 10 };
    if (kind === 'list') r.list = '';
    if (kind === 'ids') r.device_ids = [];
    renderRules();
  }

  const splitList = (v) => v.split(',').map((s) => s.trim()).filter(Boolean);

  // readRules copies the form into S.table.rules.
  function readRules() {
    if (S.raw) return;
    const v = (i, n) => { const e = $('rule-' + i + '-' + n); return e ? e.value : undefined; };
    (S.table.rules || []).forEach((r, i) => {
      r.name = v(i, 'name');
      r.site = v(i, 'site');
      const regions = splitList(v(i, 'regions') || '');
      if (regions.length) r.regions = regions; else delete r.regions;
      if (r.bucket) {
        r.bucket = { by: v(i, 'bucket.by') || 'device', from: Number(v(i, 'bucket.from')), to: Number(v(i, 'bucket.to')) };
      } else if (r.list !== undefined) {
        r.list = v(i, 'list');
      } else {
        r.device_ids = splitList(v(i, 'device_ids') || '');
      }
    });
  }

  $('rule-add').addEventListener('click', () => {
    readRules();
    S.table.rules = S.table.rules || [];
    S.table.rules.push({ name: 'rule-' + (S.table.rules.length + 1), site: ((S.table.sites || [])[0] || {}).name || '', bucket: { by: 'device', from: 0, to: 10 } });
    renderRules();
    $('rule-' + (S.table.rules.length - 1) + '-name').focus();
  });

  function candidate() {
    if (S.raw) return $('rules-raw').value;
    readRules();
    return JSON.stringify(S.table, null, 2);
  }

  function clearFieldErrors() {
    for (const e of document.querySelectorAll('[aria-invalid]')) e.removeAttribute('aria-invalid');
    for (const e of document.querySelectorAll('.field-error')) e.textContent = '';
  }

  // parseFieldError splits the API's "key:line: field: problem".
  function parseFieldError(msg) {
    return /^[^:\s]+:(\d+): ([A-Za-z0-9_.[\]/-]+): ([\s\S]*)$/.exec(msg);
  }

  // showFieldError puts "key:line: field: problem" next to that field.
  function showFieldError(msg) {
    clearFieldErrors();
    const m = parseFieldError(msg);
    if (!m) { $('rules-error').textContent = msg; return; }
    const [, line, field, why] = m;
    if (S.raw) {
      $('rules-raw').setAttribute('aria-invalid', 'true');
      document.querySelector('[data-error-for="*"]').textContent = 'line ' + line + ': ' + field + ': ' + why;
      $('rules-error').textContent = '';
      return;
    }
    const all = [...document.querySelectorAll('#rules-list [data-field]')];
    let hit = all.filter((e) => e.dataset.field === field);
    if (!hit.length) hit = all.filter((e) => e.dataset.field.startsWith(field + '.'));
    const rm = /^rules\[(\d+)\]/.exec(field);
    const errBox = rm ? $('err-' + rm[1]) : null;
    if (!errBox) { $('rules-error').textContent = msg; return; }
    for (const e of hit) e.setAttribute('aria-invalid', 'true');
    errBox.textContent = field + ': ' + why;
    $('rules-error').textContent = 'Not published: the API refused the edit (see the field marked below).';
    (hit[0] || errBox).focus && (hit[0] || errBox).focus();
  }

  function movesReport(rep) {
    const pairs = Object.entries(rep.moves || {}).sort((a, b) => b[1] - a[1]);
    const summary = rep.moved + ' of ' + rep.sample + ' sample devices (' + rep.share_percent.toFixed(2) + '%) would change primary domain';
    return { summary, pairs };
  }

  function renderMoves(box, rep) {
    const { summary, pairs } = movesReport(rep);
    put(box, el('p', { class: 'moves-summary', text: summary + (pairs.length ? ':' : '.') }),
      pairs.length ? el('ul', {}, pairs.map(([k, n]) => el('li', { text: k + ': ' + n }))) : null);
  }

  $('rules-preview').addEventListener('click', async () => {
    $('rules-status').textContent = '';
    const res = await api('PUT', '/v1/admin/docs/routing/table?dry_run=true&sample=10000', { body: candidate(), ifMatch: S.tableVersion });
    if (res.status === 400) { $('rules-moves').textContent = ''; showFieldError(errText(res)); return; }
    if (!res.ok) { $('rules-error').textContent = errText(res); return; }
    clearFieldErrors(); $('rules-error').textContent = '';
    renderMoves($('rules-moves'), res.data);
  });

  $('rules-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const reason = $('rules-reason').value;
    const bad = checkReason(reason);
    if (bad) { $('rules-error').textContent = bad; $('rules-reason').setAttribute('aria-invalid', 'true'); $('rules-reason').focus(); return; }
    $('rules-reason').removeAttribute('aria-invalid');
    const res = await api('PUT', '/v1/admin/docs/routing/table', { body: candidate(), ifMatch: S.tableVersion || undefined, reason });
    if (res.status === 400) { showFieldError(errText(res)); return; }
    if (res.status === 409) { showConflict(errText(res)); return; }
    if (!res.ok) { $('rules-error').textContent = errText(res); return; }
    $('rules-reason').value = '';
    await loadRules();
    $('rules-status').textContent = 'Published version ' + res.data.version + '.';
  });

  async function showConflict(msg) {
    const t = await loadTable();
    const box = $('rules-conflict');
    put(box, 
      el('p', { text: 'Not published (409 Conflict): someone else published version ' + t.version + ' after you loaded version ' + S.tableVersion + '. ' + msg }),
      el('p', { text: 'The newer version ' + t.version + ' is below; your edit is still in the form.' }),
      el('pre', { class: 'diff', text: t.doc ? JSON.stringify(t.doc, null, 2) : t.text }),
      el('button', { type: 'button', text: 'Discard my edit and load version ' + t.version, onclick: () => loadRules() }));
    box.hidden = false;
    box.focus && box.setAttribute('tabindex', '-1');
    box.focus();
  }

  async function loadHistory() {
    const res = await api('GET', '/v1/admin/history/routing/table?limit=50');
    const box = $('rules-history');
    if (!res.ok) { box.textContent = errText(res); return; }
    const rows = res.data.map((c) => el('tr', {},
      el('td', { text: String(c.version) }), el('td', { text: new Date(c.time).toLocaleString() }),
      el('td', { text: c.author || '' }), el('td', { text: c.reason || '' }),
      el('td', {},
        el('button', { type: 'button', class: 'secondary', text: 'Diff v' + c.version, onclick: () => showDiff(c) }),
        (canWrite('admin') && !c.deleted && c.version !== S.tableVersion)
          ? el('button', { type: 'button', class: 'secondary rollback', 'data-version': c.version, text: 'Roll back to v' + c.version, onclick: () => rollback(c.version) }) : null)));
    put(box, el('div', { class: 'scroll' }, el('table', {},
      el('thead', {}, el('tr', {}, ['Version', 'Time', 'Author', 'Reason', 'Actions'].map((h) => el('th', { scope: 'col', text: h })))),
      el('tbody', {}, rows))));
  }

  const pretty = (v) => v == null ? '' : (typeof v === 'string' ? v : JSON.stringify(v, null, 2));

  // lineDiff: the longest common subsequence of lines, as +/- lines.
  function lineDiff(a, b) {
    const x = a ? a.split('\n') : [], y = b ? b.split('\n') : [];
    if (x.length * y.length > 4e6) return [['-', a], ['+', b]];
    const n = x.length, m = y.length, L = Array.from({ length: n + 1 }, () => new Int32Array(m + 1));
    for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--) L[i][j] = x[i] === y[j] ? L[i + 1][j + 1] + 1 : Math.max(L[i + 1][j], L[i][j + 1]);
    const out = []; let i = 0, j = 0;
    while (i < n && j < m) {
      if (x[i] === y[j]) { out.push([' ', x[i]]); i++; j++; } else if (L[i + 1][j] >= L[i][j + 1]) out.push(['-', x[i++]]); else out.push(['+', y[j++]]);
    }
    while (i < n) out.push(['-', x[i++]]);
    while (j < m) out.push(['+', y[j++]]);
    return out;
  }

  function showDiff(c) {
    const pre = $('rules-diff');
    const lines = lineDiff(pretty(c.before), pretty(c.after));
    put(pre, el('span', { class: 'same', text: 'version ' + c.version + ' (' + (c.reason || 'no reason') + '): - before, + after' }),
      lines.map(([op, t]) => el('span', { class: op === '+' ? 'add' : op === '-' ? 'del' : 'same', text: op + ' ' + t })));
    pre.hidden = false;
  }

  async function rollback(version) {
    const reason = $('rules-reason').value;
    const bad = checkReason(reason);
    if (bad) { $('rules-error').textContent = 'Roll back: ' + bad + ' (type it in the Reason box)'; $('rules-reason').focus(); return; }
    if (!await confirmDialog('Roll back routing/table to version ' + version + '? Its rules become a new version, published to every control instance at once.')) return;
    const res = await api('POST', '/v1/admin/rollback/routing/table', { body: { version, reason }, ifMatch: S.tableVersion });
    if (res.status === 409) { showConflict(errText(res)); return; }
    if (!res.ok) { $('rules-error').textContent = errText(res); return; }
    $('rules-reason').value = '';
    await loadRules();
    $('rules-status').textContent = 'Rolled back: version ' + res.data.version + ' has the rules of version ' + version + '.';
  }

  // ---- confirmation dialog
  function confirmDialog(text) {
    return new Promise((resolve) => {
      const d = $('confirm');
      $('confirm-text').textContent = text;
      const done = (v) => { d.close(); $('confirm-yes').onclick = $('confirm-no').onclick = null; resolve(v); };
      $('confirm-yes').onclick = () => done(true);
      $('confirm-no').onclick = () => done(false);
      d.oncancel = () => done(false);
      d.showModal();
      $('confirm-no').focus();
    });
  }

  // ---- emergency override
  async function loadEmergency() {
    $('em-error').textContent = '';
    const [t, e] = await Promise.all([loadTable(), api('GET', '/v1/admin/docs/routing/emergency')]);
    const table = (t && t.doc) || {};
    S.emergency = e.ok ? (e.data || {}) : {};
    S.emergencyVersion = e.ok ? Number(e.etag) : 0;
    const cur = $('em-current');
    const desc = (o) => o.site ? 'site ' + o.site : 'primary ' + o.primary + ((o.backups || []).length ? ', backups ' + o.backups.join(', ') : '');
    const items = [];
    if (S.emergency.global) items.push(el('li', { text: 'Global: every device gets ' + desc(S.emergency.global) }));
    for (const [r, o] of Object.entries(S.emergency.regions || {})) items.push(el('li', { text: 'Region ' + r + ': ' + desc(o) }));
    put(cur, el('h3', { text: 'In force' }), items.length
      ? el('ul', { id: 'em-list' }, items)
      : el('p', { id: 'em-none', text: 'No override: the rules decide.' }));
    put($('em-scope'), el('option', { value: '', text: 'Global (every device)' }),
      (table.regions || []).map((r) => el('option', { value: r.name, text: 'Region ' + r.name })));
    put($('em-site'), el('option', { value: '', text: '(a domain instead)' }),
      (table.sites || []).map((s) => el('option', { value: s.name, text: s.name })));
  }

  function emergencyCandidate(region, override) {
    const e = JSON.parse(JSON.stringify(S.emergency || {}));
    if (override) {
      if (region) { e.regions = e.regions || {}; e.regions[region] = override; } else e.global = override;
    } else if (region) { if (e.regions) delete e.regions[region]; } else delete e.global;
    return e;
  }

  async function emergencyAction(set) {
    $('em-error').textContent = ''; $('em-status').textContent = '';
    const region = $('em-scope').value, site = $('em-site').value, primary = $('em-primary').value.trim();
    const reason = $('em-reason').value;
    const bad = checkReason(reason);
    if (bad) { $('em-error').textContent = bad; $('em-reason').focus(); return; }
    let override = null;
    if (set) {
      if (!site === !primary) { $('em-error').textContent = 'Choose a site or type a primary domain (one of the two).'; return; }
      override = site ? { site } : { primary };
    }
    const scope = region ? 'devices in region ' + region : 'every device';
    const dry = await api('PUT', '/v1/admin/docs/routing/emergency?dry_run=true&sample=10000', { body: emergencyCandidate(region, override) });
    if (!dry.ok) { $('em-error').textContent = errText(dry); return; }
    const { summary, pairs } = movesReport(dry.data);
    const what = set ? 'Send ' + scope + ' to ' + (site ? 'site ' + site : primary) : 'Clear the override of ' + scope + ' (the rules decide again)';
    const effect = what + '. Effect: ' + summary + (pairs.length ? ' (' + pairs.map(([k, n]) => k + ': ' + n).join('; ') + ')' : '') + '. Devices pick it up at their next launch.';
    if (!await confirmDialog(effect)) { $('em-status').textContent = 'Cancelled: nothing changed.'; return; }
    const pb = { action: set ? 'emergency_set' : 'emergency_clear', reason };
    if (region) pb.region = region;
    if (override) pb.override = override;
    const res = await api('POST', '/v1/admin/playbook', { body: pb });
    if (!res.ok) { $('em-error').textContent = errText(res); return; }
    $('em-reason').value = '';
    await loadEmergency();
    $('em-status').textContent = (set ? 'Override set' : 'Override cleared') + ' (routing/emergency version ' + res.data.version + ').';
  }
  $('em-form').addEventListener('submit', (ev) => { ev.preventDefault(); emergencyAction(true); });
  $('em-clear').addEventListener('click', () => emergencyAction(false));

  // ---- sites and clusters
  async function loadSites() {
    $('sites-error').textContent = '';
    const [t, st] = await Promise.all([loadTable(), api('GET', '/v1/admin/docs/routing/state')]);
    const table = (t && t.doc) || {};
    const state = st.ok ? (st.data || {}) : {};
    const sitesDown = state.sites_down || [], clDown = state.clusters_down || [];
    const badge = (down) => el('span', { class: 'badge ' + (down ? 'down' : 'up'), text: down ? '✖ down' : '● up' });
    const rows = [];
    for (const s of table.sites || []) {
      const sd = sitesDown.includes(s.name);
      rows.push(el('tr', { 'data-site': s.name }, el('th', { scope: 'row', text: 'site ' + s.name }), el('td', {}, badge(sd)),
        el('td', { text: s.sibling ? 'sibling ' + s.sibling : '' }),
        el('td', { class: 'write' }, el('button', { type: 'button', class: sd ? '' : 'danger', text: (sd ? 'Mark site ' + s.name + ' up' : 'Mark site ' + s.name + ' down') + '…', onclick: () => playbook(sd ? 'site_up' : 'site_down', s.name) }))));
      for (const c of s.clusters || []) {
        const cd = clDown.includes(s.name + '/' + c.name);
        rows.push(el('tr', { 'data-cluster': s.name + '/' + c.name }, el('td', { text: '└ cluster ' + c.name }), el('td', {}, badge(cd || sd)),
          el('td', { text: c.domain }),
          el('td', { class: 'write' }, el('button', { type: 'button', class: cd ? '' : 'danger', text: (cd ? 'Mark ' + c.name + ' up' : 'Mark ' + c.name + ' down') + '…', onclick: () => playbook(cd ? 'cluster_up' : 'cluster_down', s.name, c.name) }))));
      }
    }
    put($('sites-list'), el('div', { class: 'scroll' }, el('table', {},
      el('thead', {}, el('tr', {}, ['Name', 'State', 'Domain / sibling', 'Actions'].map((h) => el('th', { scope: 'col', text: h })))), el('tbody', {}, rows))));
    applyRole();
    loadNodes();
    startDNS();
  }

  // ---- the access nodes as the private DNS servers probe them (GET
  // /ui/dns, asked once a second while the sites page is open)
  let dnsTimer = null;
  function stopDNS() { if (dnsTimer) { clearInterval(dnsTimer); dnsTimer = null; } }
  function startDNS() {
    stopDNS();
    S.dnsSig = '';
    loadDNS();
    dnsTimer = setInterval(() => { if (!$('page-sites').hidden) loadDNS(); else stopDNS(); }, 1000);
  }

  async function loadDNS() {
    const res = await api('GET', '/ui/dns');
    if ($('page-sites').hidden) return;
    if (!res.ok || !res.data || typeof res.data !== 'object') { put($('dns-list'), el('p', { class: 'error', text: 'Not available: ' + errText(res) })); S.dnsSig = ''; return; }
    // the last probe's time is left out of the comparison: the table is
    // rebuilt only when a state changes, never under a keyboard user
    const sig = JSON.stringify(res.data, (k, v) => k === 'checked' ? undefined : v);
    if (sig === S.dnsSig) return;
    S.dnsSig = sig;
    const d = res.data, when = (t) => t ? new Date(t).toLocaleString() : '–';
    if (!d.servers.length) {
      put($('dns-list'), el('p', { id: 'dns-none', text: 'No private DNS server announced: run veer dns with --metrics and a control store (announce_store or control_store) to see its probes here.' + (d.error ? ' ' + d.error : '') }));
      return;
    }
    const rows = d.servers.flatMap((sv) => sv.up
      ? (sv.nodes.length ? sv.nodes : [null]).map((n) => n
        ? el('tr', { 'data-probe': n.addr, 'data-dns': sv.name },
          el('td', { text: sv.name }), el('td', { text: n.domain }), el('td', { text: n.addr + (n.region ? ' (' + n.region + ')' : '') }),
          el('td', { text: n.check || 'none' }),
          el('td', {}, el('span', { class: 'badge ' + (!n.probed ? 'warn' : n.up ? 'up' : 'down'), text: !n.probed ? (n.check ? '◌ not probed yet' : '◌ not probed (no check)') : n.up ? '● up' : '✖ down' }),
            n.error ? el('div', { class: 'error', text: n.error }) : null),
          el('td', { class: 'since', text: n.probed ? when(n.since) : '–' }))
        : el('tr', { 'data-dns': sv.name }, el('td', { text: sv.name }), el('td', { colspan: '5', text: 'no access domains' })))
      : [el('tr', { class: 'gw-down', 'data-dns': sv.name }, el('td', { text: sv.name }),
        el('td', { colspan: '5' }, el('span', { class: 'badge down', text: '✖ server not answering' }), el('div', { class: 'error', text: sv.error })))]);
    put($('dns-list'), el('div', { class: 'scroll' }, el('table', { id: 'dns-table' },
      el('thead', {}, el('tr', {}, ['DNS server', 'Access domain', 'Node', 'Health check', 'State by probe', 'Since (last change)'].map((h) => el('th', { scope: 'col', text: h })))),
      el('tbody', {}, rows))));
  }

  async function loadNodes() {
    const res = await api('GET', '/v1/admin/docs/access/nodes');
    if (res.status === 404) { put($('nodes-list'), el('p', { text: 'No access/nodes document: the scheduling API answers 503 and the private DNS has no access answers.' })); return; }
    if (!res.ok || typeof res.data !== 'object') { put($('nodes-list'), el('p', { text: res.ok ? 'access/nodes is stored as YAML: see it on the Documents page.' : errText(res) })); return; }
    const groups = Object.entries(res.data.regions || {}).map(([r, ns]) => ['region ' + r, ns]);
    if (res.data.default) groups.push(['default (no region)', res.data.default]);
    const rows = groups.flatMap(([g, ns]) => ns.map((n) => el('tr', { 'data-node': n.addr },
      el('td', { text: g }), el('td', { text: n.addr + (n.server_name ? ' (' + n.server_name + ')' : '') }),
      el('td', {}, el('span', { class: 'badge ' + (n.down ? 'down' : 'up'), text: n.down ? '✖ down' : '● in service' })),
      el('td', { text: (n.protocols || []).join(', ') || 'any' }), el('td', { text: String(n.weight || 0) }), el('td', { text: (n.domains || []).join(', ') || 'all' }))));
    put($('nodes-list'), el('div', { class: 'scroll' }, el('table', { id: 'nodes-table' },
      el('thead', {}, el('tr', {}, ['Region', 'Address', 'State', 'Protocols', 'Weight', 'Domains'].map((h) => el('th', { scope: 'col', text: h })))), el('tbody', {}, rows))));
  }

  async function playbook(action, site, cluster) {
    const reason = $('sites-reason').value;
    const bad = checkReason(reason);
    if (bad) { $('sites-error').textContent = bad; $('sites-reason').focus(); return; }
    const what = { site_down: 'Site ' + site + ' down: its users go to its sibling', site_up: 'Site ' + site + ' up: its users come back',
      cluster_down: 'Cluster ' + site + '/' + cluster + ' down: its users go to the next cluster of the site', cluster_up: 'Cluster ' + site + '/' + cluster + ' up' }[action];
    if (!await confirmDialog(what + '. Continue?')) return;
    const res = await api('POST', '/v1/admin/playbook', { body: { action, site, cluster, reason } });
    if (!res.ok) { $('sites-error').textContent = errText(res); return; }
    $('sites-reason').value = '';
    await loadSites();
    $('sites-status').textContent = action + ' done (routing/state version ' + res.data.version + ').';
  }

  // ---- criticality table (gateway/criticality, shed.Config's shape)
  const TIER_NAMES = { critical_plus: 'critical+ (never shed)', critical: 'critical (never shed)', sheddable_plus: 'sheddable+', sheddable: 'sheddable (shed first)' };
  function tierSelect(id, field, value, ro, withDefault) {
    const opts = (withDefault ? [['', '(the gateway default)']] : []).concat(TIERS.map((t) => [t, TIER_NAMES[t]]));
    return el('select', { id, 'data-field': field, disabled: ro }, opts.map(([v, t]) => el('option', { value: v, selected: v === (value || ''), text: t })));
  }

  async function loadCrit() {
    $('crit-error').textContent = ''; $('crit-status').textContent = '';
    const res = await api('GET', '/v1/admin/docs/gateway/criticality');
    if (res.status === 404) { S.crit = { endpoints: [] }; S.critVersion = 0; S.critRaw = false; $('crit-info').textContent = 'No criticality document yet: gateways use their files\' shed sections.'; }
    else if (!res.ok) { $('crit-error').textContent = errText(res); return; }
    else {
      S.critVersion = Number(res.etag); S.critRaw = typeof res.data !== 'object' || !res.data; S.crit = S.critRaw ? null : res.data; S.critText = res.text;
      $('crit-info').textContent = 'gateway/criticality version ' + S.critVersion + '.';
    }
    await loadObserved();
    renderCrit();
  }

  // loadObserved reads the callers the announced gateways saw per endpoint
  // over the last hour (GET /ui/callers, summed over gateways); endpoints
  // the table lacks are added as observed-only ones, which are published
  // only when a tier is picked for one of their callers.
  async function loadObserved() {
    S.observed = {};
    const res = await api('GET', '/ui/callers');
    if (!res.ok || !res.data || typeof res.data !== 'object') { $('crit-observed').textContent = 'Callers the gateways saw: not available (' + errText(res) + ').'; return; }
    const down = (res.data.gateways || []).filter((g) => g.error);
    for (const e of res.data.endpoints || []) S.observed[e.endpoint] = e.callers || [];
    const n = (res.data.gateways || []).length;
    $('crit-observed').textContent = 'Rows marked "(seen)" are callers that ' + n + ' announced gateway' + (n === 1 ? '' : 's') +
      ' saw in the last hour and that the table does not list yet: pick a tier and publish to add them; rows left at "(not in the table)" are not published.' +
      (res.data.error ? ' ' + res.data.error + '.' : '') + down.map((g) => ' ' + g.name + ' not read: ' + g.error + '.').join('');
    if (S.critRaw) return;
    for (const name of Object.keys(S.observed)) {
      if (!S.crit.endpoints.some((ep) => ep.name === name)) S.crit.endpoints.push({ name, callers: {}, observedOnly: true });
    }
  }
  const seenCount = (ep, c) => { const o = (S.observed[ep] || []).find((x) => x.caller === c); return o ? o.count : 0; };

  function renderCrit() {
    const ro = !canWrite('admin');
    $('crit-raw-box').hidden = !S.critRaw;
    $('crit-add').hidden = S.critRaw || ro;
    if (S.critRaw) { $('crit-raw').value = S.critText; $('crit-raw').readOnly = ro; put($('crit-list')); return; }
    const eps = S.crit.endpoints = S.crit.endpoints || [];
    put($('crit-list'), eps.map((ep, i) => {
      const callers = Object.entries(ep.callers || {});
      const f = 'endpoints[' + i + ']';
      return el('fieldset', { class: 'rule', 'data-endpoint': i },
        el('legend', { text: 'Endpoint ' + (ep.name || '(unnamed)') }),
        el('div', {}, el('label', { for: 'crit-' + i + '-name', text: 'Endpoint (route name)' }),
          el('input', { id: 'crit-' + i + '-name', type: 'text', value: ep.name || '', 'data-field': f + '.name', readonly: ro })),
        el('div', {}, el('label', { for: 'crit-' + i + '-default', text: 'Tier of unlisted callers' }), tierSelect('crit-' + i + '-default', f + '.default_tier', ep.default_tier, ro, true)),
        el('div', { class: 'callers' }, el('table', {},
          el('caption', { text: 'Callers of ' + (ep.name || 'this endpoint') }),
          el('thead', {}, el('tr', {}, el('th', { scope: 'col', text: 'Caller (Rpc-Caller)' }), el('th', { scope: 'col', text: 'Tier' }), el('th', { scope: 'col', text: 'Requests seen (last hour)' }), el('th', { scope: 'col', text: 'Actions' }))),
          el('tbody', {}, callers.map(([c, t], j) => el('tr', { 'data-caller': c },
            el('td', {}, el('label', { for: 'crit-' + i + '-c' + j, class: 'sr', text: 'Caller ' + (j + 1) }),
              el('input', { id: 'crit-' + i + '-c' + j, type: 'text', value: c, 'data-field': f + '.callers.' + c, readonly: ro })),
            el('td', {}, el('label', { for: 'crit-' + i + '-t' + j, class: 'sr', text: 'Tier of caller ' + (c || j + 1) }), tierSelect('crit-' + i + '-t' + j, f + '.callers.' + c, t, ro, false)),
            el('td', { class: 'count', text: String(seenCount(ep.name, c)) }),
            el('td', {}, ro ? null : el('button', { type: 'button', class: 'secondary', text: 'Remove ' + (c || 'caller'), onclick: () => { readCrit(); delete S.crit.endpoints[i].callers[c]; renderCrit(); } })))),
          observedRows(ep, i, ro)))),
        ro ? null : el('div', {}, el('button', { type: 'button', class: 'secondary', id: 'crit-' + i + '-add', text: 'Add caller to ' + (ep.name || 'endpoint'), onclick: () => {
          readCrit(); const e = S.crit.endpoints[i]; e.callers = e.callers || {}; let n = 1; while (e.callers['caller-' + n]) n++; e.callers['caller-' + n] = 'sheddable_plus'; renderCrit();
        } })),
        el('p', { class: 'field-error', id: 'crit-err-' + i }));
    }));
  }

  // observedRows: the callers gateways saw on ep that its table lacks, with
  // their counts and a tier picker that starts at "(not in the table)".
  function observedRows(ep, i, ro) {
    const listed = ep.callers || {};
    return (S.observed[ep.name] || []).filter((o) => !(o.caller in listed)).map((o, k) => {
      const now = (o.tiers || []).join(', ');
      if (o.caller === 'other') {
        return el('tr', { class: 'seen' }, el('td', { text: 'other callers (past the 100 a gateway keeps)' }), el('td', {}), el('td', { class: 'count', text: String(o.count) }), el('td', {}));
      }
      return el('tr', { class: 'seen', 'data-seen': o.caller },
        el('td', {}, el('span', { id: 'crit-' + i + '-o' + k, 'data-caller': o.caller, text: o.caller }), el('span', { class: 'hint', text: ' (seen)' })),
        el('td', {}, el('label', { for: 'crit-' + i + '-ot' + k, class: 'sr', text: 'Tier of seen caller ' + o.caller }),
          el('select', { id: 'crit-' + i + '-ot' + k, disabled: ro },
            [el('option', { value: '', selected: true, text: '(not in the table' + (now ? ': gets ' + now : '') + ')' })].concat(TIERS.map((t) => el('option', { value: t, text: TIER_NAMES[t] }))))),
        el('td', { class: 'count', text: String(o.count) }),
        el('td', {}));
    });
  }

  function readCrit() {
    if (S.critRaw) return;
    S.crit.endpoints.forEach((ep, i) => {
      ep.name = $('crit-' + i + '-name').value;
      const d = $('crit-' + i + '-default').value;
      if (d) ep.default_tier = d; else delete ep.default_tier;
      const callers = {};
      Object.keys(ep.callers || {}).forEach((c, j) => { const name = $('crit-' + i + '-c' + j).value.trim(); if (name) callers[name] = $('crit-' + i + '-t' + j).value; });
      for (let k = 0; $('crit-' + i + '-ot' + k); k++) {
        const t = $('crit-' + i + '-ot' + k).value, name = $('crit-' + i + '-o' + k).dataset.caller;
        if (t && !(name in callers)) callers[name] = t;
      }
      ep.callers = callers;
      if (Object.keys(callers).length > 0 || ep.default_tier) delete ep.observedOnly;
    });
  }

  $('crit-add').addEventListener('click', () => { readCrit(); S.crit.endpoints.push({ name: '', callers: {} }); renderCrit(); $('crit-' + (S.crit.endpoints.length - 1) + '-name').focus(); });

  $('crit-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    for (const e of document.querySelectorAll('#crit-list .field-error')) e.textContent = '';
    const reason = $('crit-reason').value, bad = checkReason(reason);
    if (bad) { $('crit-error').textContent = bad; $('crit-reason').focus(); return; }
    readCrit();
    // observed-only endpoints nobody picked a tier for are not published;
    // pub maps a published index back to the page's (for field errors)
    const pub = S.critRaw ? [] : S.crit.endpoints.map((ep, i) => i).filter((i) => !S.crit.endpoints[i].observedOnly);
    const body = S.critRaw ? $('crit-raw').value
      : JSON.stringify(Object.assign({}, S.crit, { endpoints: pub.map((i) => S.crit.endpoints[i]) }), null, 2);
    const res = await api('PUT', '/v1/admin/docs/gateway/criticality', { body, ifMatch: S.critVersion || undefined, reason });
    if (res.status === 400) {
      const m = parseFieldError(errText(res)), em = m && /^endpoints\[(\d+)\]/.exec(m[2]), at = em && (S.critRaw ? em[1] : pub[Number(em[1])]);
      if (em && $('crit-err-' + at)) { $('crit-err-' + at).textContent = m[2] + ': ' + m[3]; $('crit-error').textContent = 'Not published: the API refused the edit (see the endpoint marked below).'; }
      else $('crit-error').textContent = errText(res);
      return;
    }
    if (!res.ok) { $('crit-error').textContent = (res.status === 409 ? 'Not published (409 Conflict): someone else changed it; reload the page to see their version. ' : '') + errText(res); return; }
    $('crit-reason').value = '';
    await loadCrit();
    $('crit-status').textContent = 'Published version ' + res.data.version + '.';
  });

  // ---- limits per dimension (gateway/limits, limit.Config's shape)
  const LIMIT_FIELDS = [['rate', 'Rate (requests/s; 0: none)', 'any'], ['burst', 'Burst (0: one second of rate)', '1'], ['concurrency', 'Concurrency (in flight; 0: none)', '1']];
  const LIMIT_GLOBAL = [['max_keys', true], ['idle_timeout', false], ['concurrency_retry_after', false], ['max_request_body', true], ['max_response_body', true]];

  async function loadLimits() {
    $('lim-error').textContent = ''; $('lim-status').textContent = '';
    const res = await api('GET', '/v1/admin/docs/gateway/limits');
    if (res.status === 404) { S.lim = { dimensions: [] }; S.limVersion = 0; S.limRaw = false; $('lim-info').textContent = 'No gateway/limits document yet: gateways use their files\' limits sections.'; }
    else if (!res.ok) { $('lim-error').textContent = errText(res); return; }
    else {
      S.limVersion = Number(res.etag); S.limRaw = typeof res.data !== 'object' || !res.data; S.lim = S.limRaw ? { dimensions: [] } : res.data;
      $('lim-info').textContent = 'gateway/limits version ' + S.limVersion + (S.limRaw ? ': stored as YAML, edit it as text on the Documents page.' : '.');
    }
    S.lim.dimensions = S.lim.dimensions || [];
    renderLimits();
  }

  // a limit's three numbers, as inputs named by their document field
  function limitInputs(prefix, field, l, ro, labelOf) {
    l = l || {};
    return LIMIT_FIELDS.map(([k, label, step]) => el('div', {},
      el('label', { for: prefix + '-' + k, text: labelOf ? labelOf(label) : label }),
      el('input', { id: prefix + '-' + k, type: 'number', min: '0', step, value: l[k] ? String(l[k]) : '', placeholder: '0', 'data-field': field + '.' + k, readonly: ro })));
  }

  function renderLimits() {
    const ro = !canWrite('admin') || S.limRaw;
    $('lim-add').hidden = ro;
    for (const [k, isNum] of LIMIT_GLOBAL) { const e = $('lim-' + k); const v = S.lim[k]; e.value = v == null || v === 0 ? '' : (isNum ? String(v) : durText(v)); e.readOnly = ro; }
    put($('lim-list'), S.lim.dimensions.map((d, i) => {
      const f = 'dimensions[' + i + ']', id = 'lim-' + i;
      const overrides = Object.entries(d.overrides || {});
      return el('fieldset', { class: 'rule dim', 'data-dimension': d.name || i },
        el('legend', { text: 'Dimension ' + (i + 1) + ': ' + (d.name || '(unnamed)') + ' (the gateway\'s keys[' + i + '])' }),
        el('div', {}, el('label', { for: id + '-name', text: 'Name' }), el('input', { id: id + '-name', type: 'text', value: d.name || '', 'data-field': f + '.name', readonly: ro })),
        limitInputs(id + '-def', f + '.default', d.default, ro, (l) => 'Default ' + l.charAt(0).toLowerCase() + l.slice(1)),
        el('div', { class: 'callers' }, el('table', {},
          el('caption', { text: 'Keys with their own limits (overrides of ' + (d.name || 'this dimension') + ')' }),
          el('thead', {}, el('tr', {}, ['Key', 'Rate', 'Burst', 'Concurrency', 'Actions'].map((h) => el('th', { scope: 'col', text: h })))),
          el('tbody', {}, overrides.map(([key, l], j) => {
            const oid = id + '-o' + j, of = f + '.overrides.' + key;
            return el('tr', { 'data-override': key },
              el('td', {}, el('label', { for: oid + '-key', class: 'sr', text: 'Key of override ' + (j + 1) }),
                el('input', { id: oid + '-key', type: 'text', value: key, 'data-field': of, readonly: ro })),
              LIMIT_FIELDS.map(([k, , step]) => el('td', {}, el('label', { for: oid + '-' + k, class: 'sr', text: k + ' of ' + key }),
                el('input', { id: oid + '-' + k, type: 'number', min: '0', step, value: l && l[k] ? String(l[k]) : '', placeholder: '0', 'data-field': of + '.' + k, readonly: ro }))),
              el('td', {}, ro ? null : el('button', { type: 'button', class: 'secondary', text: 'Remove ' + key, onclick: () => { readLimits(); delete S.lim.dimensions[i].overrides[key]; renderLimits(); } })));
          })))),
        ro ? null : el('div', {},
          el('button', { type: 'button', class: 'secondary', id: id + '-add', text: 'Add key to ' + (d.name || 'dimension'), onclick: () => {
            readLimits(); const dd = S.lim.dimensions[i]; dd.overrides = dd.overrides || {}; let n = 1; while (('key-' + n) in dd.overrides) n++; dd.overrides['key-' + n] = { rate: 1 }; renderLimits(); $(id + '-o' + (Object.keys(dd.overrides).length - 1) + '-key').focus();
          } }),
          el('button', { type: 'button', class: 'danger', id: id + '-remove', text: 'Remove dimension ' + (d.name || i + 1), onclick: () => { readLimits(); S.lim.dimensions.splice(i, 1); renderLimits(); } })),
        el('p', { class: 'field-error', id: 'lim-err-' + i }));
    }));
  }

  // durText shows a stored duration (nanoseconds when the document was
  // written as JSON numbers) as Go duration text.
  function durText(v) {
    if (typeof v !== 'number') return String(v);
    if (v % 1e9 === 0) return (v / 1e9) + 's';
    if (v % 1e6 === 0) return (v / 1e6) + 'ms';
    return v + 'ns';
  }
  const num = (id) => { const v = $(id).value.trim(); return v === '' ? 0 : Number(v); };
  function readLimit(prefix) {
    const l = {};
    for (const [k] of LIMIT_FIELDS) { const v = num(prefix + '-' + k); if (v) l[k] = v; }
    return l;
  }

  // readLimits copies the form into S.lim, keeping fields the form does not
  // show (a newer schema's) as they were.
  function readLimits() {
    if (S.limRaw) return;
    for (const [k, isNum] of LIMIT_GLOBAL) {
      const v = $('lim-' + k).value.trim();
      // durations travel as text ("90s"): a bare number would be
      // nanoseconds, and the API refuses text without a unit
      if (v === '') delete S.lim[k]; else S.lim[k] = isNum ? Number(v) : v;
    }
    S.lim.dimensions.forEach((d, i) => {
      const id = 'lim-' + i;
      d.name = $(id + '-name').value.trim();
      d.default = readLimit(id + '-def');
      const ov = {};
      Object.keys(d.overrides || {}).forEach((_, j) => { const key = $(id + '-o' + j + '-key').value.trim(); if (key) ov[key] = readLimit(id + '-o' + j); });
      if (Object.keys(ov).length) d.overrides = ov; else delete d.overrides;
    });
  }

  $('lim-add').addEventListener('click', () => {
    readLimits();
    S.lim.dimensions.push({ name: '', default: {} });
    renderLimits();
    $('lim-' + (S.lim.dimensions.length - 1) + '-name').focus();
  });

  // showLimitError puts the API's "key:line: field: problem" at the field:
  // the input whose data-field is the field (or the nearest one under it),
  // and the problem in its dimension's box.
  function showLimitError(msg) {
    for (const e of document.querySelectorAll('#page-limits [aria-invalid]')) e.removeAttribute('aria-invalid');
    for (const e of document.querySelectorAll('#page-limits .field-error')) e.textContent = '';
    const m = parseFieldError(msg);
    if (!m) { $('lim-error').textContent = msg; return; }
    const [, , field, why] = m;
    const all = [...document.querySelectorAll('#page-limits [data-field]')];
    let hit = all.filter((e) => e.dataset.field === field);
    if (!hit.length) hit = all.filter((e) => e.dataset.field.startsWith(field + '.'));
    const dm = /^dimensions\[(\d+)\]/.exec(field);
    const box = dm ? $('lim-err-' + dm[1]) : (hit.length ? $('lim-err-global') : null);
    if (!box) { $('lim-error').textContent = msg; return; }
    for (const e of hit) { e.setAttribute('aria-invalid', 'true'); e.setAttribute('aria-describedby', box.id); }
    box.textContent = field + ': ' + why;
    $('lim-error').textContent = 'Not published: the API refused the edit (see the field marked below).';
    if (hit[0]) hit[0].focus();
  }

  async function putLimits(dry) {
    $('lim-status').textContent = ''; $('lim-error').textContent = '';
    const reason = $('lim-reason').value;
    if (!dry) { const bad = checkReason(reason); if (bad) { $('lim-error').textContent = bad; $('lim-reason').focus(); return; } }
    readLimits();
    const res = await api('PUT', '/v1/admin/docs/gateway/limits' + (dry ? '?dry_run=true' : ''), { body: JSON.stringify(S.lim, null, 2), ifMatch: S.limVersion || undefined, reason: dry ? undefined : reason });
    if (res.status === 400) { showLimitError(errText(res)); return; }
    showLimitError('');
    $('lim-error').textContent = '';
    if (!res.ok) { $('lim-error').textContent = (res.status === 409 ? 'Not published (409 Conflict): someone else changed gateway/limits; reload the page to see their version. ' : '') + errText(res); return; }
    if (dry) { $('lim-status').textContent = 'gateway/limits is valid (nothing written).'; return; }
    $('lim-reason').value = '';
    await loadLimits();
    $('lim-status').textContent = 'Published gateway/limits version ' + res.data.version + '.';
  }
  $('lim-validate').addEventListener('click', () => putLimits(true));
  $('lim-form').addEventListener('submit', (ev) => { ev.preventDefault(); putLimits(false); });

  // ---- rollouts (release/<route>, read and driven through
  // /v1/admin/rollouts/{route})
  const DECISIONS = ['continue', 'promote', 'abort'];
  let roTimer = null;
  function stopRollouts() { if (roTimer) { clearInterval(roTimer); roTimer = null; } }
  function startRollouts() {
    stopRollouts();
    loadRollouts();
    roTimer = setInterval(() => { if (!$('page-rollouts').hidden) loadRollouts(); else stopRollouts(); }, 2000);
  }

  function planSteps(p) {
    if (p.blue_green) return [100];
    const rings = (p.rings && p.rings.length) ? p.rings : [1, 10, 50, 100];
    return ((p.canary_tenants || []).length ? ['canary'] : []).concat(rings);
  }
  const pct = (n, d) => d ? (100 * n / d).toFixed(2) + '%' : '–';
  const counts = (c) => (c.requests || 0) + ' requests, ' + (c.errors || 0) + ' errors (' + pct(c.errors || 0, c.requests) + '), ' + (c.slow || 0) + ' slow (' + pct(c.slow || 0, c.requests) + ')';
  const secs = (ns) => ns ? (ns / 1e9) + ' s' : 'default (300 s)';

  async function loadRollouts() {
    const list = await api('GET', '/v1/admin/docs?prefix=release/');
    if (!list.ok) { $('ro-error').textContent = errText(list); return; }
    const routes = list.data.docs.map((d) => d.key.slice('release/'.length)).filter((r) => r && !r.includes('/'));
    const all = await Promise.all(routes.map((r) => api('GET', '/v1/admin/rollouts/' + encodeURIComponent(r)).then((res) => [r, res])));
    if ($('page-rollouts').hidden) return;
    // re-render only what changed, so that a poll never takes the focus
    // from a button someone is on
    const sig = JSON.stringify(all.map(([r, res]) => [r, res.status, res.data]));
    $('ro-updated').textContent = 'Updated ' + new Date().toLocaleTimeString() + '.';
    if (sig === S.roSig && $('ro-list').childElementCount) return;
    S.roSig = sig;
    const op = canWrite('operator');
    const cards = all.map(([route, res]) => {
      if (!res.ok) return el('section', { class: 'card rollout', 'data-rollout': route }, el('h3', { text: route }), el('p', { class: 'error', text: errText(res) }));
      const st = res.data, ro = st.rollout, p = ro.plan, steps = planSteps(p), v = st.verdict || {};
      const stepRows = steps.map((s, i) => el('li', { class: i === ro.step ? 'current' : '', 'aria-current': i === ro.step ? 'step' : false,
        text: 'step ' + i + ': ' + (s === 'canary' ? 'canary tenants ' + p.canary_tenants.join(', ') : s + '% of tenants') + (i < ro.step ? ' (promoted)' : i === ro.step ? ' (current)' : '') }));
      const acts = !op ? [] : [
        ro.status === 'running' ? ['pause', 'Pause'] : null,
        ro.status === 'paused' ? ['resume', 'Resume'] : null,
        (ro.status === 'running' || ro.status === 'paused') ? ['abort', 'Abort'] : null,
      ].filter(Boolean).map(([a, label]) => el('button', { type: 'button', class: a === 'abort' ? 'danger' : '', 'data-action': a, text: label + ' ' + route + '…', onclick: () => rolloutAction(route, a, st.version) }));
      return el('section', { class: 'card rollout', 'data-rollout': route, 'data-status': ro.status, 'data-step': String(ro.step) },
        el('h3', { text: 'Route ' + route + ': ' + p.from + ' (A) → ' + p.to + ' (B)' }),
        el('p', {}, el('span', { class: 'badge ' + ({ running: 'up', paused: 'warn', aborted: 'down', done: 'up' }[ro.status] || 'warn'), text: { running: '▶ running', paused: '❚❚ paused', aborted: '✖ aborted', done: '✔ done' }[ro.status] || ro.status }),
          ' step ' + ro.step + ' of ' + steps.length + ' (serving ' + (ro.status === 'aborted' ? 'A only' : ro.status === 'done' ? 'B only' : (steps[ro.step] === 'canary' ? 'the canary tenants on B' : steps[ro.step] + '% of tenants on B')) + '), rollout ' + ro.id + ', version ' + st.version),
        el('p', { class: 'hint', text: 'Why: ' + (ro.reason || '–') }),
        el('ul', { class: 'steps' }, stepRows),
        el('dl', { class: 'totals' },
          el('dt', { text: 'A this step (pooled over ' + st.gateways + ' gateway' + (st.gateways === 1 ? '' : 's') + ')' }), el('dd', { class: 'count-a', text: counts(st.a || {}) }),
          el('dt', { text: 'B this step' }), el('dd', { class: 'count-b', text: counts(st.b || {}) }),
          el('dt', { text: 'Verdict now' }), el('dd', { class: 'verdict', text: (ro.status === 'running' || ro.status === 'paused') ? DECISIONS[v.decision || 0] + ': ' + (v.reason || '') : '– (' + ro.status + ')' }),
          el('dt', { text: 'Evidence (log-likelihood ratio; abort at ≥ upper, promote at ≤ lower)' }),
          el('dd', { text: 'errors ' + (v.error_llr || 0).toFixed(2) + ', slow ' + (v.slow_llr || 0).toFixed(2) + '; upper ' + (v.upper || 0).toFixed(2) + ', lower ' + (v.lower || 0).toFixed(2) }),
          el('dt', { text: 'SLO' }), el('dd', { text: 'hold ' + secs(p.hold) + '; B may have ' + (100 * ((p.slo || {}).max_error_rate || 0.01)).toFixed(1) + ' points more errors and ' + (100 * ((p.slo || {}).max_slow_rate || 0.02)).toFixed(1) + ' points more slow requests than A; at least ' + ((p.slo || {}).min_samples || 200) + ' B requests to promote' })),
        (ro.verdicts || []).length ? el('details', {}, el('summary', { text: 'Earlier verdicts (' + ro.verdicts.length + ')' }),
          el('ul', {}, ro.verdicts.map((x) => el('li', { text: DECISIONS[x.decision || 0] + ': ' + x.reason })))) : null,
        acts.length ? el('div', { class: 'actions' }, acts) : null);
    });
    put($('ro-list'), cards.length ? cards : el('p', { id: 'ro-none', text: 'No rollout: start one below.' }));
  }

  async function rolloutAction(route, action, version) {
    $('ro-error').textContent = ''; $('ro-status').textContent = '';
    const reason = $('ro-reason').value, bad = checkReason(reason);
    if (bad) { $('ro-error').textContent = bad; $('ro-reason').focus(); return; }
    const what = { pause: 'Pause the rollout of ' + route + ': the step stays and the analysis waits', resume: 'Resume the rollout of ' + route + ' (the step\'s clock restarts)',
      abort: 'Abort the rollout of ' + route + ': every tenant goes back to A at once' }[action];
    if (!await confirmDialog(what + '. Continue?')) return;
    const res = await api('POST', '/v1/admin/rollouts/' + encodeURIComponent(route), { body: { action, reason }, reason });
    if (!res.ok) { $('ro-error').textContent = errText(res); return; }
    $('ro-reason').value = '';
    await loadRollouts();
    $('ro-status').textContent = 'Rollout of ' + route + ': ' + action + ' done (version ' + res.data.version + ').';
  }

  $('ro-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    $('ro-error').textContent = ''; $('ro-plan-error').textContent = ''; $('ro-plan').removeAttribute('aria-invalid');
    const route = $('ro-route').value.trim(), reason = $('ro-reason').value, bad = checkReason(reason);
    if (!route) { $('ro-error').textContent = 'Name the route to release.'; $('ro-route').focus(); return; }
    if (bad) { $('ro-error').textContent = bad; $('ro-reason').focus(); return; }
    let plan;
    try { plan = JSON.parse($('ro-plan').value); } catch (e) {
      $('ro-plan').setAttribute('aria-invalid', 'true'); $('ro-plan-error').textContent = 'plan: not JSON: ' + e.message; $('ro-plan').focus(); return;
    }
    if (plan && typeof plan === 'object' && !plan.route) plan.route = route;
    if (!await confirmDialog('Start a rollout of route ' + route + (plan && plan.from ? ' from ' + plan.from + ' to ' + plan.to : '') + '? Its first step moves tenants to the new version at once.')) return;
    const res = await api('POST', '/v1/admin/rollouts/' + encodeURIComponent(route), { body: { action: 'start', plan, reason }, reason });
    if (res.status === 400) {
      // "plan:LINE: field: problem", or "plan: field: problem" for a
      // field the plan lacks (no line to name)
      const m = /^plan(?::(\d+))?: ([A-Za-z0-9_.[\]-]+): ([\s\S]*)$/.exec(errText(res));
      $('ro-plan').setAttribute('aria-invalid', 'true');
      $('ro-plan-error').textContent = m ? m[2] + ': ' + m[3] + (m[1] ? ' (line ' + m[1] + ')' : '') : errText(res);
      $('ro-plan').focus();
      return;
    }
    if (!res.ok) { $('ro-error').textContent = errText(res); return; }
    $('ro-reason').value = '';
    await loadRollouts();
    $('ro-status').textContent = 'Rollout of ' + route + ' started (version ' + res.data.version + ').';
  });

  // ---- any document, as text
  async function loadDocs() {
    const res = await api('GET', '/v1/admin/docs');
    if (!res.ok) { put($('docs-list'), el('p', { class: 'error', text: errText(res) })); return; }
    put($('docs-list'), el('div', { class: 'scroll' }, el('table', { id: 'docs-table' },
      el('thead', {}, el('tr', {}, ['Key', 'Version', 'Actions'].map((h) => el('th', { scope: 'col', text: h })))),
      el('tbody', {}, res.data.docs.map((d) => el('tr', {}, el('td', { text: d.key }), el('td', { text: 'v' + d.version }),
        el('td', {}, el('button', { type: 'button', class: 'secondary', text: (canWrite('admin') ? 'Edit ' : 'View ') + d.key, onclick: () => openDoc(d.key) }))))))));
    applyRole();
  }

  async function openDoc(key) {
    $('doc-error').textContent = ''; $('doc-status').textContent = ''; $('doc-field-error').textContent = '';
    $('doc-form').hidden = false;
    $('doc-key').value = key; $('doc-key').readOnly = !!key;
    $('doc-text').readOnly = !canWrite('admin');
    S.docVersion = 0; $('doc-text').value = '';
    if (key) {
      const res = await api('GET', '/v1/admin/docs/' + key);
      if (!res.ok) { $('doc-error').textContent = errText(res); return; }
      S.docVersion = Number(res.etag); $('doc-text').value = res.text;
      $('doc-status').textContent = key + ' version ' + S.docVersion + '.';
    }
    $('doc-text').focus();
  }
  $('doc-new').addEventListener('click', () => openDoc(''));

  async function putDoc(dry) {
    $('doc-error').textContent = ''; $('doc-status').textContent = ''; $('doc-field-error').textContent = ''; $('doc-text').removeAttribute('aria-invalid');
    const key = $('doc-key').value.trim(), reason = $('doc-reason').value;
    if (!dry) { const bad = checkReason(reason); if (bad) { $('doc-error').textContent = bad; $('doc-reason').focus(); return; } }
    const res = await api('PUT', '/v1/admin/docs/' + key + (dry ? '?dry_run=true&sample=1000' : ''), { body: $('doc-text').value, ifMatch: S.docVersion || undefined, reason: dry ? undefined : reason });
    if (res.status === 400) {
      const m = parseFieldError(errText(res));
      $('doc-text').setAttribute('aria-invalid', 'true');
      $('doc-field-error').textContent = m ? 'line ' + m[1] + ': ' + m[2] + ': ' + m[3] : errText(res);
      return;
    }
    if (!res.ok) { $('doc-error').textContent = (res.status === 409 ? '409 Conflict: someone else changed ' + key + '; open it again to see their version. ' : '') + errText(res); return; }
    if (dry) { $('doc-status').textContent = res.data.moves ? movesReport(res.data).summary + '.' : key + ' is valid.'; return; }
    $('doc-reason').value = '';
    S.docVersion = res.data.version;
    $('doc-status').textContent = 'Published ' + key + ' version ' + res.data.version + '.';
    loadDocs();
  }
  $('doc-validate').addEventListener('click', () => putDoc(true));
  $('doc-form').addEventListener('submit', (ev) => { ev.preventDefault(); putDoc(false); });

  // ---- audit log
  async function loadAudit() {
    const q = new URLSearchParams();
    if ($('audit-prefix').value) q.set('prefix', $('audit-prefix').value);
    q.set('limit', $('audit-limit').value || '100');
    const res = await api('GET', '/v1/admin/audit?' + q);
    if (!res.ok) { $('audit-error').textContent = errText(res); return; }
    $('audit-error').textContent = '';
    const author = $('audit-author').value.toLowerCase(), text = $('audit-text').value.toLowerCase();
    const rows = res.data.filter((c) => (!author || (c.author || '').toLowerCase().includes(author)) && (!text || (c.reason || '').toLowerCase().includes(text)))
      .map((c) => el('tr', {}, el('td', { text: new Date(c.time).toLocaleString() }), el('td', { text: c.key }), el('td', { text: c.deleted ? 'deleted' : 'v' + c.version }),
        el('td', { text: c.author || '' }), el('td', { text: c.reason || '' })));
    put($('audit-list'), el('p', { text: rows.length + ' entries' }), el('div', { class: 'scroll' }, el('table', { id: 'audit-table' },
      el('thead', {}, el('tr', {}, ['Time', 'Key', 'Version', 'Author', 'Reason'].map((h) => el('th', { scope: 'col', text: h })))), el('tbody', {}, rows))));
  }
  $('audit-form').addEventListener('submit', (ev) => { ev.preventDefault(); loadAudit(); });

  // ---- live traffic (server-sent events read with fetch, which can carry
  // the Authorization header; EventSource cannot)
  function stopLive() { if (S.live) { S.live.abort(); S.live = null; } }

  async function startLive() {
    stopLive();
    const ctl = new AbortController();
    S.live = ctl;
    drawChart();
    $('live-status').textContent = 'Connecting…';
    try {
      const r = await fetch('/ui/live', { headers: { Authorization: 'Bearer ' + S.token }, signal: ctl.signal, cache: 'no-store' });
      if (!r.ok) { $('live-status').textContent = 'Live stream refused: ' + r.status; return; }
      const rd = r.body.getReader(), dec = new TextDecoder();
      let buf = '';
      for (;;) {
        const { value, done } = await rd.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const ev = buf.slice(0, i); buf = buf.slice(i + 2);
          const data = ev.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n');
          if (data) onFrame(JSON.parse(data));
        }
      }
    } catch (e) {
      if (e.name === 'AbortError') return;
    }
    if (S.live === ctl) { $('live-status').textContent = 'Live stream ended; reconnecting…'; setTimeout(() => { if (S.live === ctl) startLive(); }, 1000); }
  }

  const fmt = (v) => v >= 100 ? v.toFixed(0) : v.toFixed(1);
  const kv = (m) => Object.entries(m || {}).filter(([, v]) => v > 0).map(([k, v]) => k + ' ' + fmt(v)).join(', ') || '–';

  function onFrame(f) {
    const up = f.gateways.filter((g) => g.up).length;
    $('live-status').className = (up < f.gateways.length || f.error) ? 'status down-status' : 'status';
    $('live-status').textContent = new Date(f.time).toLocaleTimeString() + ': ' + up + ' of ' + f.gateways.length + ' gateways answering, ' + fmt(f.rps) + ' requests/s' + (f.error ? '; ' + f.error : '');
    put($('live-totals'), el('dt', { text: 'Shed by tier' }), el('dd', { id: 'live-shed', text: kv(f.shed_by_tier) }),
      el('dt', { text: 'Limited by tier' }), el('dd', { id: 'live-limited', text: kv(f.limited_by_tier) }),
      el('dt', { text: 'Limited by dimension' }), el('dd', { text: kv(f.limited_by_dimension) }));
    const tiers = {};
    let tiered = 0;
    for (const t of TIERS) { tiers[t] = (f.admitted_by_tier[t] || 0); tiered += tiers[t]; }
    const sum = (m) => Object.values(m || {}).reduce((a, b) => a + b, 0);
    tiers.shed = sum(f.shed_by_tier);
    tiers.limited = sum(f.limited_by_tier);
    tiers.untiered = Math.max(0, f.rps - tiered - tiers.shed - tiers.limited);
    S.series.push({ t: f.time, v: tiers });
    if (S.series.length > 60) S.series.shift();
    drawChart();
    const rows = f.gateways.map((g) => el('tr', { class: g.up ? 'gw-up' : 'gw-down', 'data-gateway': g.name },
      el('th', { scope: 'row', text: g.name }),
      el('td', {}, el('span', { class: 'badge ' + (g.up ? 'up' : 'down'), text: g.up ? '● up' : '✖ down' }), g.up ? null : el('div', { class: 'error', text: g.error })),
      el('td', { text: fmt(g.rps) }), el('td', { text: kv(g.errors) }),
      el('td', { class: 'shed-tier', text: kv(g.shed_by_tier) }),
      el('td', { class: 'limited-tier', text: kv(g.limited_by_tier) }),
      el('td', { class: 'limited-dim', text: kv(g.limited_by_dimension) }),
      el('td', {}, el('ul', {}, g.routes.map((r) => el('li', { text: r.name + ': ' + fmt(r.rps) + '/s' + (Object.keys(r.errors).length ? ' (errors ' + kv(r.errors) + ')' : '') })))),
      el('td', {}, el('ul', {}, g.clusters.map((c) => el('li', {},
        c.name + ': ' + fmt(c.rps) + '/s',
        c.breaker ? el('span', { class: 'badge ' + (c.breaker === 'closed' ? 'up' : c.breaker === 'open' ? 'down' : 'warn'), text: 'breaker ' + (c.breaker === 'closed' ? '● ' : c.breaker === 'open' ? '✖ ' : '◐ ') + c.breaker }) : null,
        c.out.length ? el('span', { class: 'badge down', text: '✖ ' + c.out.length + '/' + c.backends + ' backends out: ' + c.out.join(', ') }) : el('span', { class: 'badge up', text: '● ' + c.backends + ' backends in' })))))));
    put($('live-gateways'), el('div', { class: 'scroll' }, el('table', { id: 'gw-table' },
      el('thead', {}, el('tr', {}, ['Gateway', 'State', 'Req/s', 'Errors/s by kind', 'Shed/s by tier', 'Limited/s by tier', 'Limited/s by dimension', 'Routes', 'Clusters'].map((h) => el('th', { scope: 'col', text: h })))),
      el('tbody', {}, rows))));
  }

  // The chart: stacked areas; every series has a colour and a pattern, and
  // the legend names it, so colour is never the only cue.
  const SERIES = [
    ['critical_plus', '#1b4f9c', 'solid', 'critical+ (never shed)'],
    ['critical', '#3a7bd5', 'dots', 'critical (never shed)'],
    ['sheddable_plus', '#e0a030', 'hatch', 'sheddable+'],
    ['sheddable', '#f3d27a', 'cross', 'sheddable'],
    ['untiered', '#8c8c8c', 'solid', 'no tier (shedding off)'],
    ['shed', '#c0392b', 'hatch', 'shed (refused, 503)'],
    ['limited', '#6a1b9a', 'dots', 'limited (refused, 429)'],
  ];

  function patternDefs(prefix, only) {
    const defs = svg('defs');
    for (const [name, col, pat] of SERIES) {
      if (only && only !== name) continue;
      const p = svg('pattern', { id: prefix + name, width: 8, height: 8, patternUnits: 'userSpaceOnUse' });
      p.append(svg('rect', { width: 8, height: 8, fill: col }));
      if (pat === 'dots') p.append(svg('circle', { cx: 4, cy: 4, r: 1.5, fill: '#fff' }));
      if (pat === 'hatch') p.append(svg('path', { d: 'M0,8 L8,0', stroke: '#000', 'stroke-width': 1, 'stroke-opacity': 0.5 }));
      if (pat === 'cross') p.append(svg('path', { d: 'M0,0 L8,8 M8,0 L0,8', stroke: '#000', 'stroke-width': 0.8, 'stroke-opacity': 0.45 }));
      defs.append(p);
    }
    return defs;
  }

  function drawChart() {
    const c = $('live-chart');
    const W = 600, H = 220, L = 44, B = 20, T = 8, R = 8;
    const pts = S.series;
    const tot = pts.map((p) => SERIES.reduce((a, [k]) => a + (p.v[k] || 0), 0));
    const max = Math.max(1, ...tot);
    const step = niceStep(max);
    const top = Math.ceil(max / step) * step;
    const x = (i) => L + (W - L - R) * (60 - pts.length + i) / 59;
    const y = (v) => H - B - (H - B - T) * v / top;
    const kids = [patternDefs('pat-')];
    for (let v = 0; v <= top + 1e-9; v += step) {
      kids.push(svg('line', { x1: L, x2: W - R, y1: y(v), y2: y(v), stroke: '#ddd' }));
      const t = svg('text', { x: L - 4, y: y(v) + 4, 'text-anchor': 'end', 'font-size': 11, fill: '#333' }); t.textContent = String(v); kids.push(t);
    }
    const axis = svg('text', { x: L, y: H - 4, 'font-size': 11, fill: '#333' }); axis.textContent = '60 s ago'; kids.push(axis);
    const now = svg('text', { x: W - R, y: H - 4, 'font-size': 11, fill: '#333', 'text-anchor': 'end' }); now.textContent = 'now'; kids.push(now);
    if (pts.length) {
      const base = pts.map(() => 0);
      for (const [k, col, , label] of SERIES) {
        const tops = pts.map((p, i) => base[i] + (p.v[k] || 0));
        if (tops.every((v, i) => v === base[i])) continue;
        let d = '';
        pts.forEach((p, i) => { d += (i ? 'L' : 'M') + x(i).toFixed(1) + ',' + y(tops[i]).toFixed(1); });
        for (let i = pts.length - 1; i >= 0; i--) d += 'L' + x(i).toFixed(1) + ',' + y(base[i]).toFixed(1);
        const a = svg('path', { d: d + 'Z', fill: 'url(#pat-' + k + ')', stroke: col, 'stroke-width': 1, 'data-series': k });
        const ti = svg('title', {}); ti.textContent = label; a.append(ti);
        kids.push(a);
        pts.forEach((p, i) => { base[i] = tops[i]; });
      }
    }
    put(c, ...kids);
    c.dataset.points = String(pts.length);
    c.dataset.last = pts.length ? tot[tot.length - 1].toFixed(1) : '0';
    const lg = $('live-legend');
    if (!lg.childElementCount) {
      for (const [k, col, , label] of SERIES) {
        const sw = svg('svg', { viewBox: '0 0 22 14', 'aria-hidden': 'true' });
        sw.append(patternDefs('lg-', k), svg('rect', { width: 22, height: 14, fill: 'url(#lg-' + k + ')', stroke: col }));
        lg.append(el('li', {}, sw, label));
      }
    }
  }
  function niceStep(max) {
    const raw = max / 4, p = Math.pow(10, Math.floor(Math.log10(raw))), m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  }

  route();
})();
