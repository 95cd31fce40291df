/* Petrel console: a hash-routed single page over the documented REST API.
 * No build step and no third-party code. Every piece of server data goes
 * through esc() before it reaches innerHTML, and every path segment through
 * encodeURIComponent. After a route's data is fetched and drawn the page calls
 * performance.mark('petrel:rendered:<route>') and sets body[data-rendered]. */
'use strict';

(function () {
  /* ================================================================ */
  /* Helpers                                                            */
  /* ================================================================ */

  const ESC = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

  function esc(v) {
    if (v === null || v === undefined) return '';
    return String(v).replace(/[&<>"']/g, c => ESC[c]);
  }

  const enc = encodeURIComponent;

  const NUM = new Intl.NumberFormat('en-US');

  function fmtNum(n) {
    if (n === null || n === undefined || Number.isNaN(n)) return '—';
    return NUM.format(n);
  }

  function fmtBytes(n) {
    if (n === null || n === undefined) return '—';
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    let v = Number(n);
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return (i === 0 ? String(v) : v.toFixed(v >= 100 ? 0 : 1)) + ' ' + units[i];
  }

  function pad2(n) { return String(n).padStart(2, '0'); }

  /* Local time as YYYY-MM-DD HH:MM:SS; 0/absent is a dash. */
  function fmtTime(ms) {
    if (!ms) return '—';
    const d = new Date(ms);
    return d.getFullYear() + '-' + pad2(d.getMonth() + 1) + '-' + pad2(d.getDate()) + ' ' +
      pad2(d.getHours()) + ':' + pad2(d.getMinutes()) + ':' + pad2(d.getSeconds());
  }

  /* Value for <input type="datetime-local" step="1">. */
  function toLocalInput(ms) {
    return fmtTime(ms).replace(' ', 'T');
  }

  function fromLocalInput(s) {
    if (!s) return NaN;
    return new Date(s).getTime();
  }

  function fmtDuration(ms) {
    let s = Math.floor(ms / 1000);
    const d = Math.floor(s / 86400); s -= d * 86400;
    const h = Math.floor(s / 3600); s -= h * 3600;
    const m = Math.floor(s / 60); s -= m * 60;
    if (d) return d + 'd ' + h + 'h ' + m + 'm';
    if (h) return h + 'h ' + m + 'm ' + s + 's';
    if (m) return m + 'm ' + s + 's';
    return s + 's';
  }

  function yesNo(b) { return b ? 'yes' : 'no'; }

  function $(sel, root) { return (root || document).querySelector(sel); }

  /* ================================================================ */
  /* REST client                                                        */
  /* ================================================================ */

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  /* Calls the broker; resolves with the parsed JSON body, rejects with an
   * ApiError carrying the error body's message (or a plain description). */
  async function api(method, path, body) {
    const init = { method, cache: 'no-store', headers: { Accept: 'application/json' } };
    if (body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let res;
    try {
      res = await fetch(path, init);
    } catch (e) {
      throw new ApiError(0, 'NETWORK', 'cannot reach the broker (' + e.message + ')');
    }
    const text = await res.text();
    let data = null;
    if (text) {
      try { data = JSON.parse(text); } catch (e) { data = null; }
    }
    if (!res.ok) {
      const e = data && data.error;
      throw new ApiError(res.status, (e && e.code) || 'HTTP_' + res.status,
        (e && e.message) || method + ' ' + path + ' answered HTTP ' + res.status);
    }
    return data;
  }

  function errorHtml(err, what) {
    const code = err && err.code ? ' <span class="code">(' + esc(err.code) +
      (err.status ? ', HTTP ' + esc(err.status) : '') + ')</span>' : '';
    return '<div class="error" role="alert">' + (what ? esc(what) + ': ' : '') +
      '<span class="msg">' + esc(err && err.message ? err.message : String(err)) + '</span>' +
      code + '</div>';
  }

  let brokerCache = null;
  function brokerInfo() {
    if (!brokerCache) brokerCache = api('GET', '/v1/broker').catch(e => { brokerCache = null; throw e; });
    return brokerCache;
  }

  /* ================================================================ */
  /* Toast, dialogs                                                     */
  /* ================================================================ */

  let toastTimer = 0;
  function toast(text, kind) {
    const t = $('#toast');
    t.textContent = text;
    t.className = 'toast ' + (kind || 'ok');
    t.hidden = false;
    clearTimeout(toastTimer);
    toastTimer = setTimeout(() => { t.hidden = true; }, 5000);
  }

  /* Asks a yes/no question in a modal; resolves true only on the OK button
   * (Escape and Cancel resolve false). */
  function confirmDialog(title, text, okLabel) {
    const dlg = $('#confirm-dialog');
    const opener = document.activeElement;
    $('#confirm-title').textContent = title;
    $('#confirm-text').textContent = text;
    $('#confirm-ok').textContent = okLabel || 'Delete';
    dlg.returnValue = '';
    return new Promise(resolve => {
      dlg.addEventListener('close', () => {
        if (opener && opener.isConnected) opener.focus();
        resolve(dlg.returnValue === 'ok');
      }, { once: true });
      dlg.showModal();
      $('#confirm-cancel').focus();
    });
  }

  /* Opens the form dialog with 'html' (which holds one <form>); 'onSubmit'
   * gets the form and may throw: its message is shown inside the dialog,
   * which stays open. Resolves when the dialog closes. */
  function formDialog(title, html, onSubmit) {
    const dlg = $('#form-dialog');
    const opener = document.activeElement;
    $('#form-dialog-title').textContent = title;
    const box = $('#form-dialog-content');
    box.innerHTML = html;
    const form = box.querySelector('form');
    const errBox = form.querySelector('.form-error');
    form.addEventListener('submit', async ev => {
      ev.preventDefault();
      const btn = form.querySelector('[type=submit]');
      btn.disabled = true;
      errBox.innerHTML = '';
      try {
        await onSubmit(form);
        dlg.close();
      } catch (e) {
        errBox.innerHTML = errorHtml(e);
      } finally {
        btn.disabled = false;
      }
    });
    return new Promise(resolve => {
      dlg.addEventListener('close', () => {
        box.innerHTML = '';
        if (opener && opener.isConnected) opener.focus();
        resolve();
      }, { once: true });
      dlg.showModal();
      const first = form.querySelector('input:not([readonly]):not([type=hidden]), select, textarea');
      if (first) first.focus();
    });
  }

  $('#form-dialog-close').addEventListener('click', () => $('#form-dialog').close());

  /* ================================================================ */
  /* Router                                                             */
  /* ================================================================ */

  const view = $('#view');
  let ctx = { id: 0, timers: [] };
  let firstRoute = true;

  const ROUTES = [
    [/^\/?$/, 'dashboard', renderDashboard],
    [/^\/topics\/?$/, 'topics', renderTopics],
    [/^\/topics\/([^/]+)$/, 'topic', renderTopic],
    [/^\/groups\/?$/, 'groups', renderGroups],
    [/^\/groups\/([^/]+)$/, 'group', renderGroup],
    [/^\/messages\/?$/, 'messages', renderMessages],
    [/^\/messages\/([^/]+)$/, 'message', renderMessage],
    [/^\/transactions\/?$/, 'transactions', renderTransactions],
  ];

  const NAV_OF = { topic: 'topics', group: 'groups', message: 'messages' };

  function safeDecode(s) {
    try { return decodeURIComponent(s); } catch (e) { return s; }
  }

  function parseHash() {
    let h = location.hash.replace(/^#/, '');
    if (!h) h = '/';
    const q = h.indexOf('?');
    const path = q < 0 ? h : h.slice(0, q);
    const params = new URLSearchParams(q < 0 ? '' : h.slice(q + 1));
    return { path, params };
  }

  function markRendered(name) {
    performance.mark('petrel:rendered:' + name);
    document.body.dataset.rendered = name;
  }

  function every(c, ms, fn) {
    const tick = async () => {
      if (!c.alive()) return;
      await fn();
      if (c.alive()) c.timers.push(setTimeout(tick, ms));
    };
    c.timers.push(setTimeout(tick, ms));
  }

  async function route() {
    for (const t of ctx.timers) clearTimeout(t);
    const id = ctx.id + 1;
    ctx = { id, timers: [], alive: () => ctx.id === id };
    delete document.body.dataset.rendered;
    const { path, params } = parseHash();
    let match = null;
    for (const [re, name, fn] of ROUTES) {
      const m = re.exec(path);
      if (m) { match = { name, fn, arg: m[1] !== undefined ? safeDecode(m[1]) : undefined }; break; }
    }
    const navName = match ? (NAV_OF[match.name] || match.name) : '';
    for (const a of document.querySelectorAll('[data-nav]')) {
      if (a.dataset.nav === navName) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
    if (!match) {
      document.title = 'Not found · Petrel console';
      view.innerHTML = '<h1>Page not found</h1><p>There is no console page at <code>' +
        esc(location.hash) + '</code>. Go to the <a href="#/">dashboard</a>.</p>';
      markRendered('notfound');
      return;
    }
    const c = ctx;
    try {
      await match.fn(c, match.arg, params);
    } catch (e) {
      if (!c.alive()) return;
      view.innerHTML = '<h1>Something went wrong</h1>' + errorHtml(e) +
        '<p><button type="button" class="btn" id="retry-route">Try again</button></p>';
      $('#retry-route').addEventListener('click', route);
    }
    if (!c.alive()) return;
    markRendered(match.name);
    if (!firstRoute) {
      const h1 = view.querySelector('h1');
      if (h1) { h1.tabIndex = -1; h1.focus({ preventScroll: true }); }
    }
    firstRoute = false;
  }

  function setTitle(t) { document.title = t + ' · Petrel console'; }

  /* ================================================================ */
  /* Table helpers                                                      */
  /* ================================================================ */

  /* cols: [[label, className]] ; rows: array of '<tr>…</tr>' strings */
  function tableHtml(caption, cols, rows, empty, cls) {
    if (!rows.length) return '<div class="empty">' + empty + '</div>';
    let h = '<div class="table-wrap' + (cls ? ' ' + cls : '') + '"><table><caption class="sr-only">' + esc(caption) +
      '</caption><thead><tr>';
    for (const [label, cls] of cols) h += '<th scope="col"' + (cls ? ' class="' + cls + '"' : '') + '>' + esc(label) + '</th>';
    return h + '</tr></thead><tbody>' + rows.join('') + '</tbody></table></div>';
  }

  /* Draws 'list' (objects with .html, one <tr> each) into 'box' as one table
   * of at most PAGE_ROWS rows; "Show more" / "Show all" append the rest, so a
   * list of thousands stays quick to lay out. */
  const PAGE_ROWS = 100;
  function pagedTable(box, caption, cols, list, emptyHtml) {
    let shown = Math.min(PAGE_ROWS, list.length);
    box.innerHTML = tableHtml(caption, cols, list.slice(0, shown).map(r => r.html), emptyHtml) +
      '<div class="more" hidden><span class="muted"></span>' +
      '<button type="button" class="btn small" data-more="page"></button>' +
      '<button type="button" class="btn small" data-more="all">Show all</button></div>';
    const more = box.querySelector('.more');
    const update = () => {
      more.hidden = shown >= list.length;
      more.querySelector('span').textContent = 'Showing ' + fmtNum(shown) + ' of ' + fmtNum(list.length) + '.';
      more.querySelector('[data-more=page]').textContent = 'Show ' + Math.min(PAGE_ROWS, list.length - shown) + ' more';
    };
    more.addEventListener('click', ev => {
      const b = ev.target.closest('button[data-more]');
      if (!b) return;
      const next = b.dataset.more === 'all' ? list.length : Math.min(list.length, shown + PAGE_ROWS);
      const tbody = box.querySelector('tbody');
      const first = shown;
      tbody.insertAdjacentHTML('beforeend', list.slice(shown, next).map(r => r.html).join(''));
      shown = next;
      update();
      if (more.hidden) {
        const target = tbody.rows[first] && tbody.rows[first].querySelector('a, button');
        if (target) target.focus();
      }
    });
    update();
  }

  function td(v, cls) {
    return '<td' + (cls ? ' class="' + cls + '"' : '') + '>' + v + '</td>';
  }

  function dl(pairs) {
    let h = '<dl class="kv">';
    for (const [k, v] of pairs) h += '<dt>' + esc(k) + '</dt><dd>' + v + '</dd>';
    return h + '</dl>';
  }

  /* ================================================================ */
  /* Dashboard                                                          */
  /* ================================================================ */

  const RATE_WINDOW_MS = 5 * 60 * 1000;
  const rates = { samples: [], since: null, intervalMs: 1000, now: 0 };

  function mergeRates(r) {
    rates.intervalMs = r.intervalMs || 1000;
    rates.now = r.now || Date.now();
    for (const s of r.samples || []) {
      if (rates.since === null || s.timestamp > rates.since) {
        rates.samples.push(s);
        rates.since = s.timestamp;
      }
    }
    const keep = rates.now - 10 * 60 * 1000;
    let drop = 0;
    while (drop < rates.samples.length && rates.samples[drop].timestamp < keep) drop++;
    if (drop) rates.samples.splice(0, drop);
  }

  function perSec(count) { return count * 1000 / rates.intervalMs; }

  /* Mean of the last 10 s of a field, as messages/s. */
  function recentRate(field) {
    const from = rates.now - 10000;
    let sum = 0;
    for (const s of rates.samples) if (s.timestamp > from) sum += s[field];
    return sum / 10;
  }

  function drawRates() {
    const box = $('#rate-chart');
    if (!box) return;
    const pin = [];
    const pout = [];
    for (const s of rates.samples) {
      pin.push([s.timestamp, perSec(s.messagesIn)]);
      pout.push([s.timestamp, perSec(s.messagesOut)]);
    }
    const rin = recentRate('messagesIn');
    const rout = recentRate('messagesOut');
    box.innerHTML = window.PetrelChart.svg({
      now: rates.now, windowMs: RATE_WINDOW_MS,
      width: box.clientWidth, height: box.clientWidth < 500 ? 160 : 220,
      label: 'Messages per second over the last 5 minutes: produce ' + rin.toFixed(1) +
        ', consume ' + rout.toFixed(1) + ' (10 s average)',
      series: [{ name: 'produce', cls: 'in', points: pin },
               { name: 'consume', cls: 'out', points: pout }],
    });
    $('#rate-in').textContent = rin.toFixed(1);
    $('#rate-out').textContent = rout.toFixed(1);
  }

  function drawBroker(b, groupCount) {
    const box = $('#dash-stats');
    if (!box) return;
    const used = b.disk && b.disk.usedRatio !== null && b.disk.usedRatio !== undefined
      ? b.disk.usedRatio : null;
    const pct = used === null ? null : Math.round(used * 1000) / 10;
    const tile = (label, value, sub) => '<div class="tile"><div class="tile-label">' + esc(label) +
      '</div><div class="tile-value">' + value + '</div>' + (sub ? '<div class="tile-sub">' + sub + '</div>' : '') + '</div>';
    const cl = b.commitLog || {};
    box.innerHTML =
      tile('Disk used', pct === null ? 'unknown' : esc(pct.toFixed(1)) + ' %',
        (pct === null ? '' : '<div class="bar' + (pct >= 85 ? ' hot' : pct >= 75 ? ' warm' : '') +
          '" role="presentation"><span style="width:' + Math.min(100, pct).toFixed(1) + '%"></span></div>') +
        esc(fmtBytes(b.disk && b.disk.availableBytes)) + ' free of ' + esc(fmtBytes(b.disk && b.disk.totalBytes))) +
      tile('Commit log', esc(fmtBytes(cl.sizeBytes)),
        esc(fmtNum(cl.segments)) + ' segment(s), write offset ' + esc(fmtNum(cl.writeOffset))) +
      tile('Topics', '<a href="#/topics">' + esc(fmtNum(b.topics)) + '</a>') +
      tile('Groups', groupCount === null ? '—' : '<a href="#/groups">' + esc(fmtNum(groupCount)) + '</a>') +
      tile('Version', esc(b.version), esc(b.mode) + ', ' + esc(b.brokerName) + ' (' + esc(b.brokerRole) + ')') +
      tile('Uptime', esc(fmtDuration(b.uptimeMs || 0)), 'since ' + esc(fmtTime(b.startTime)));
  }

  async function renderDashboard(c) {
    setTitle('Dashboard');
    view.innerHTML =
      '<div class="page-head"><h1>Dashboard</h1></div>' +
      '<div id="dash-error"></div>' +
      '<section class="card" aria-labelledby="rates-h"><div class="card-head"><h2 id="rates-h">Message rates</h2>' +
      '<ul class="legend"><li><span class="swatch in"></span>Produce <strong id="rate-in">–</strong> msg/s</li>' +
      '<li><span class="swatch out"></span>Consume <strong id="rate-out">–</strong> msg/s</li></ul></div>' +
      '<div id="rate-chart" class="chart-box"></div>' +
      '<p class="hint">Messages per second over the last 5 minutes, refreshed every 2 s; the figures are 10 s averages.</p></section>' +
      '<section aria-label="Broker figures"><div id="dash-stats" class="tiles"></div></section>';
    /* /v1/broker carries the topic and group counts: no list is fetched. */
    const refresh = async () => {
      const [b, r] = await Promise.allSettled([
        api('GET', '/v1/broker'),
        api('GET', '/v1/broker/rates' + (rates.since !== null ? '?since=' + rates.since : '')),
      ]);
      if (!c.alive()) return;
      const errs = [];
      if (r.status === 'fulfilled') mergeRates(r.value); else errs.push(errorHtml(r.reason, 'Rates'));
      if (b.status === 'fulfilled') drawBroker(b.value, b.value.groups); else errs.push(errorHtml(b.reason, 'Broker'));
      $('#dash-error').innerHTML = errs.join('');
      drawRates();
    };
    await refresh();
    every(c, 2000, refresh);
  }

  /* ================================================================ */
  /* Topics and groups: shared list page, forms, delete                 */
  /* ================================================================ */

  /* TOPIC and GROUP (below) describe one kind of resource each: 'kind' and
   * 'plural' name it in ids, texts and paths (/v1/<plural>/<name>), nameOf()
   * reads an item's name, formHtml()/formBody() draw and read its form,
   * deleteText() asks before a delete; the list page takes 'heading' (h1
   * and table caption), 'listPath', 'refresh' (a Refresh button), 'cols',
   * cells() (the row's cells between the name and the actions) and
   * 'emptyHtml'. */

  function cap(s) { return s.charAt(0).toUpperCase() + s.slice(1); }

  function checkField(id, name, label, on) {
    return '<div class="field check"><input id="' + id + '" name="' + name +
      '" type="checkbox"' + (on ? ' checked' : '') + '><label for="' + id + '">' + label + '</label></div>';
  }

  /* The create/edit form of 'spec': a name field ('p' is the id prefix,
   * read-only when editing 'item'), then 'fields', an error box and submit. */
  function resourceFormHtml(spec, item, p, maxLen, hint, fields) {
    return '<form id="' + spec.kind + '-form" class="form" novalidate>' +
      '<div class="field"><label for="' + p + '-name">Name</label>' +
      '<input id="' + p + '-name" name="name" required maxlength="' + maxLen + '" autocomplete="off" spellcheck="false"' +
      (item ? ' readonly value="' + esc(spec.nameOf(item)) + '"' : '') +
      (hint ? ' aria-describedby="' + p + '-name-hint"><small id="' + p + '-name-hint">' + hint + '</small></div>' : '></div>') +
      fields +
      '<div class="form-error"></div>' +
      '<div class="actions"><button type="submit" class="btn primary">' + (item ? 'Save' : 'Create ' + spec.kind) + '</button></div></form>';
  }

  /* Creates (item null) or edits 'item' through the form dialog with a PUT. */
  async function editResource(spec, item, after) {
    const kind = spec.kind;
    await formDialog((item ? 'Edit ' : 'New ') + kind, spec.formHtml(item), async form => {
      const name = form.name.value.trim();
      if (!name) throw new Error('Enter a ' + kind + ' name.');
      const res = await api('PUT', '/v1/' + spec.plural + '/' + enc(name), spec.formBody(form));
      toast((item ? 'Saved ' : 'Created ') + kind + ' ' + spec.nameOf(res));
      if (after) await after(res);
    });
  }

  /* Asks, then deletes 'name'; the outcome is a toast. */
  async function deleteResource(spec, name, after) {
    const kind = spec.kind;
    if (!await confirmDialog('Delete ' + kind + '?', spec.deleteText(name), 'Delete ' + kind)) return;
    try {
      await api('DELETE', '/v1/' + spec.plural + '/' + enc(name));
      toast('Deleted ' + kind + ' ' + name);
      if (after) await after();
    } catch (e) {
      toast('Cannot delete ' + kind + ' ' + name + ': ' + e.message, 'bad');
    }
  }

  /* The list page: "New" button, a search box that filters without fetching
   * again, a count, and a paged table with Edit and Delete on each row. */
  async function renderResourceList(c, spec) {
    const { kind, plural } = spec;
    setTitle(cap(plural));
    view.innerHTML =
      '<div class="page-head"><h1>' + esc(spec.heading) + '</h1><div class="head-actions">' +
      (spec.refresh ? '<button type="button" class="btn" id="' + plural + '-refresh">Refresh</button>' : '') +
      '<button type="button" class="btn primary" id="new-' + kind + '">New ' + kind + '</button></div></div>' +
      '<div class="toolbar"><label for="' + kind + '-search">Search ' + plural + '</label>' +
      '<input type="search" id="' + kind + '-search" placeholder="Filter by name" autocomplete="off">' +
      '<span id="' + kind + '-count" class="muted" aria-live="polite"></span></div>' +
      '<div id="' + plural + '-error"></div><div id="' + plural + '-table"></div>';
    const search = $('#' + kind + '-search');
    const count = $('#' + kind + '-count');
    const errBox = $('#' + plural + '-error');
    const table = $('#' + plural + '-table');
    let rows = [];
    const draw = () => {
      const q = search.value.trim().toLowerCase();
      const list = q ? rows.filter(r => r.key.includes(q)) : rows;
      pagedTable(table, spec.heading, spec.cols, list,
        rows.length ? 'No ' + kind + ' matches "' + esc(search.value.trim()) + '". Clear the search to see all ' + rows.length + '.'
          : spec.emptyHtml);
      count.textContent = (list.length === rows.length ? '' : fmtNum(list.length) + ' of ') +
        fmtNum(rows.length) + ' ' + (rows.length === 1 ? kind : plural);
    };
    const load = async () => {
      let list;
      try {
        list = await api('GET', spec.listPath);
      } catch (e) {
        errBox.innerHTML = errorHtml(e, 'Cannot list ' + plural);
        return;
      }
      if (!c.alive()) return;
      errBox.innerHTML = '';
      rows = list.map(item => ({ name: spec.nameOf(item), item }));
      rows.sort((a, b) => a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
      for (const r of rows) {
        const n = esc(r.name);
        r.key = r.name.toLowerCase();
        r.html = '<tr><td><a href="#/' + plural + '/' + esc(enc(r.name)) + '">' + n + '</a></td>' + spec.cells(r.item) +
          '<td class="act"><button type="button" class="btn small" data-act="edit" data-name="' + n +
          '">Edit</button> <button type="button" class="btn small danger" data-act="delete" data-name="' + n +
          '">Delete</button></td></tr>';
      }
      draw();
    };
    search.addEventListener('input', draw);
    if (spec.refresh) $('#' + plural + '-refresh').addEventListener('click', load);
    $('#new-' + kind).addEventListener('click', () => editResource(spec, null, load));
    table.addEventListener('click', ev => {
      const b = ev.target.closest('button[data-act]');
      if (!b) return;
      const row = rows.find(r => r.name === b.dataset.name);
      if (b.dataset.act === 'edit' && row) editResource(spec, row.item, load);
      if (b.dataset.act === 'delete') deleteResource(spec, b.dataset.name, load);
    });
    await load();
  }

  /* An item page's breadcrumb under its list page. */
  function crumbsHtml(spec, name) {
    return '<nav class="crumbs" aria-label="Breadcrumb"><a href="#/' + spec.plural + '">' + cap(spec.plural) +
      '</a> / <span>' + esc(name) + '</span></nav>';
  }

  /* An item page whose item cannot be read: the error, and on a 404 where to create it. */
  function missingItemHtml(spec, name, err) {
    return crumbsHtml(spec, name) + '<div class="page-head"><h1>' + cap(spec.kind) + ' ' + esc(name) + '</h1></div>' +
      errorHtml(err) + (err.status === 404 ? '<p class="empty">This ' + spec.kind + ' does not exist. Create it from the <a href="#/' +
      spec.plural + '">' + spec.plural + ' page</a>.</p>' : '');
  }

  /* An item page's heading with 'extra' then Refresh, Edit and Delete
   * (ids <kind>-refresh, -edit, -delete; wireItemHead() makes them work). */
  function itemHeadHtml(spec, name, extra) {
    const k = spec.kind;
    return crumbsHtml(spec, name) +
      '<div class="page-head"><h1>' + cap(k) + ' <span class="name">' + esc(name) + '</span></h1><div class="head-actions">' +
      (extra || '') +
      '<button type="button" class="btn" id="' + k + '-refresh">Refresh</button>' +
      '<button type="button" class="btn" id="' + k + '-edit">Edit</button>' +
      '<button type="button" class="btn danger" id="' + k + '-delete">Delete</button></div></div>';
  }

  function wireItemHead(spec, item, name) {
    const k = spec.kind;
    $('#' + k + '-refresh').addEventListener('click', route);
    $('#' + k + '-edit').addEventListener('click', () => editResource(spec, item, route));
    $('#' + k + '-delete').addEventListener('click', () => deleteResource(spec, name, () => { location.hash = '#/' + spec.plural; }));
  }
  /* ================================================================ */
  /* Topics                                                             */
  /* ================================================================ */

  const TOPIC = {
    kind: 'topic', plural: 'topics', heading: 'Topics', listPath: '/v1/topics', refresh: false,
    nameOf: t => t.topic,
    formHtml: topicFormHtml,
    formBody: form => {
      const queues = Number(form.queues.value);
      if (!Number.isInteger(queues)) throw new Error('Queues must be a whole number.');
      return { queues, perm: form.perm.value, order: form.order.checked };
    },
    deleteText: name => 'Delete topic "' + name + '" and its queues? Messages can no longer be consumed from it.',
    cols: [['Name'], ['Queues (r/w)', 'num'], ['Perm'], ['Ordered', 'opt'], ['Updated', 'opt'], ['Actions', 'act']],
    cells: t => td(esc(t.readQueues) + ' / ' + esc(t.writeQueues), 'num') + td(esc(t.perm)) +
      td(yesNo(t.order), 'opt') + td(esc(fmtTime(t.updatedTimestamp)), 'time opt'),
    emptyHtml: 'No topics yet. Create one with <strong>New topic</strong>, or produce to a new name when auto-create is on.',
  };

  function topicFormHtml(t) {
    const v = t || { queues: 8, perm: 'RW', order: false };
    const perm = p => '<option value="' + p + '"' + (v.perm === p ? ' selected' : '') + '>' + p + '</option>';
    return resourceFormHtml(TOPIC, t, 'tf', 127, 'Letters, digits, _ and -, at most 127.',
      '<div class="field"><label for="tf-queues">Queues</label>' +
      '<input id="tf-queues" name="queues" type="number" min="1" max="1024" required value="' + esc(v.queues) + '"></div>' +
      '<div class="field"><label for="tf-perm">Permission</label><select id="tf-perm" name="perm">' +
      perm('RW') + perm('R') + perm('W') + '</select></div>' +
      checkField('tf-order', 'order', 'Ordered topic', v.order));
  }

  function renderTopics(c) { return renderResourceList(c, TOPIC); }

  function delayOptions(levels) {
    let h = '<option value="">No delay</option>';
    levels.forEach((d, i) => { h += '<option value="' + (i + 1) + '">Level ' + (i + 1) + ' (' + esc(d) + ')</option>'; });
    return h;
  }

  async function renderTopic(c, name) {
    setTitle('Topic ' + name);
    const [t, g, b] = await Promise.allSettled([
      api('GET', '/v1/topics/' + enc(name)),
      api('GET', '/v1/topics/' + enc(name) + '/groups'),
      brokerInfo(),
    ]);
    if (!c.alive()) return;
    if (t.status === 'rejected') {
      view.innerHTML = missingItemHtml(TOPIC, name, t.reason);
      return;
    }
    const topic = t.value;
    const levels = b.status === 'fulfilled' && b.value.config && b.value.config.messageDelayLevel
      ? b.value.config.messageDelayLevel.split(/\s+/).filter(Boolean)
      : '1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h'.split(' ');
    const brokers = ((topic.route || {}).brokerDatas || []).map(bd =>
      esc(bd.brokerName) + ' @ ' + esc(Object.values(bd.brokerAddrs || {}).join(', '))).join('<br>') || '—';
    const qRows = (topic.queueStats || []).map(q =>
      '<tr>' + td(esc(q.queueId), 'num') + td(esc(fmtNum(q.minOffset)), 'num opt') + td(esc(fmtNum(q.maxOffset)), 'num') +
      td(esc(fmtNum(q.maxOffset - q.minOffset)), 'num') + td(esc(fmtTime(q.lastUpdateTimestamp)), 'time') + '</tr>');
    let groupsHtml;
    if (g.status === 'rejected') groupsHtml = errorHtml(g.reason, 'Cannot list consumer groups');
    else {
      groupsHtml = tableHtml('Consumer groups of ' + name, [['Group'], ['Lag', 'num'], ['In flight', 'num'], ['Consumers', 'num']],
        g.value.groups.map(x => '<tr><td><a href="#/groups/' + esc(enc(x.group)) + '">' + esc(x.group) + '</a></td>' +
          td(esc(fmtNum(x.totalLag)), 'num') + td(esc(fmtNum(x.inflight)), 'num') + td(esc(fmtNum(x.consumerCount)), 'num') + '</tr>'),
        'No consumer group reads this topic yet. A group appears here once it receives from it or commits an offset.');
    }
    view.innerHTML = itemHeadHtml(TOPIC, name,
      '<a class="btn" href="#/messages?topic=' + esc(enc(name)) + '&amp;begin=' + (Date.now() - 3600000) + '&amp;end=' + (Date.now() + 60000) + '">Browse messages</a>') +
      '<div class="grid2">' +
      '<section class="card" aria-labelledby="cfg-h"><h2 id="cfg-h">Configuration</h2>' + dl([
        ['Queues (read / write)', esc(topic.readQueues) + ' / ' + esc(topic.writeQueues)],
        ['Permission', esc(topic.perm)], ['Ordered', yesNo(topic.order)],
        ['Created', esc(fmtTime(topic.createdTimestamp))], ['Updated', esc(fmtTime(topic.updatedTimestamp))],
        ['Brokers', brokers]]) + '</section>' +
      '<section class="card" aria-labelledby="grp-h"><h2 id="grp-h">Consumer groups</h2>' + groupsHtml + '</section></div>' +
      '<section class="card" aria-labelledby="q-h"><h2 id="q-h">Queues</h2>' +
      tableHtml('Queues of ' + name, [['Queue', 'num'], ['Min offset', 'num opt'], ['Max offset', 'num'], ['Messages', 'num'], ['Last update']],
        qRows, 'This topic has no read queues.', 'compact wide') + '</section>' +
      '<section class="card" aria-labelledby="send-h"><h2 id="send-h">Send a test message</h2>' +
      '<form id="send-form" class="form cols" novalidate>' +
      '<div class="field wide"><label for="sf-body">Body</label><textarea id="sf-body" name="body" rows="3" spellcheck="false"></textarea></div>' +
      '<div class="field"><label for="sf-tags">Tag</label><input id="sf-tags" name="tags" autocomplete="off" placeholder="TagA"></div>' +
      '<div class="field"><label for="sf-keys">Keys</label><input id="sf-keys" name="keys" autocomplete="off" placeholder="order-1, customer-7" aria-describedby="sf-keys-hint"><small id="sf-keys-hint">Comma-separated.</small></div>' +
      '<div class="field wide"><label for="sf-props">Properties</label><textarea id="sf-props" name="props" rows="2" spellcheck="false" placeholder="name=value" aria-describedby="sf-props-hint"></textarea><small id="sf-props-hint">One name=value per line.</small></div>' +
      '<div class="field"><label for="sf-delay">Delay level</label><select id="sf-delay" name="delayLevel">' + delayOptions(levels) + '</select></div>' +
      '<div class="field"><label for="sf-delayms">Or delay (ms)</label><input id="sf-delayms" name="delayMs" type="number" min="0" step="1" placeholder="0"></div>' +
      '<div class="form-error wide"></div>' +
      '<div class="actions wide"><button type="submit" class="btn primary">Send message</button></div>' +
      '<div id="send-result" class="wide" role="status" aria-live="polite"></div></form></section>';

    wireItemHead(TOPIC, topic, name);
    const form = $('#send-form');
    form.addEventListener('submit', async ev => {
      ev.preventDefault();
      const errBox = form.querySelector('.form-error');
      const out = $('#send-result');
      errBox.innerHTML = '';
      out.innerHTML = '';
      const msg = { body: form.body.value };
      const tags = form.tags.value.trim();
      if (tags) msg.tags = tags;
      const keys = form.keys.value.split(',').map(s => s.trim()).filter(Boolean);
      if (keys.length) msg.keys = keys;
      const props = {};
      let bad = null;
      for (const line of form.props.value.split('\n')) {
        if (!line.trim()) continue;
        const i = line.indexOf('=');
        if (i <= 0) { bad = line; break; }
        props[line.slice(0, i).trim()] = line.slice(i + 1).trim();
      }
      if (bad !== null) { errBox.innerHTML = errorHtml(new Error('Property line "' + bad + '" is not name=value.')); return; }
      if (Object.keys(props).length) msg.properties = props;
      if (form.delayLevel.value && form.delayMs.value) {
        errBox.innerHTML = errorHtml(new Error('Choose a delay level or a delay in ms, not both.'));
        return;
      }
      if (form.delayLevel.value) msg.delayLevel = Number(form.delayLevel.value);
      if (form.delayMs.value) msg.delayMs = Number(form.delayMs.value);
      const btn = form.querySelector('[type=submit]');
      btn.disabled = true;
      try {
        const r = await api('POST', '/v1/topics/' + enc(name) + '/messages', msg);
        out.innerHTML = '<p class="ok">' + esc(r.status) + ': message <a class="mono" href="#/messages/' + esc(enc(r.msgId)) + '">' +
          esc(r.msgId) + '</a> on queue ' + esc(r.queueId) + ', offset ' + esc(r.queueOffset) +
          (msg.delayLevel || msg.delayMs ? ' (scheduled; it reaches the topic when due)' : '') + '.</p>';
      } catch (e) {
        errBox.innerHTML = errorHtml(e, 'Not sent');
      } finally {
        btn.disabled = false;
      }
    });
  }

  /* ================================================================ */
  /* Groups                                                             */
  /* ================================================================ */

  function groupMode(g) { return (g.broadcast ? 'broadcast' : 'clustering') + (g.orderly ? ', orderly' : ''); }

  const GROUP = {
    kind: 'group', plural: 'groups', heading: 'Consumer groups', listPath: '/v1/groups?lag=true', refresh: true,
    nameOf: g => g.name,
    formHtml: groupFormHtml,
    formBody: form => {
      const body = { consumeEnable: form.consumeEnable.checked, broadcast: form.broadcast.checked,
        orderly: form.orderly.checked };
      if (form.retryMaxTimes.value !== '') body.retryMaxTimes = Number(form.retryMaxTimes.value);
      if (form.retryQueueNums.value !== '') body.retryQueueNums = Number(form.retryQueueNums.value);
      return body;
    },
    deleteText: name => 'Delete consumer group "' + name + '" and its committed offsets?',
    cols: [['Name'], ['Consumers', 'num opt'], ['Lag', 'num'], ['Mode', 'opt'], ['Max retries', 'num opt'], ['Consuming', 'opt'], ['Actions', 'act']],
    cells: g => td(esc(fmtNum(g.consumerCount)), 'num opt') +
      td(g.totalLag ? '<strong class="lag">' + esc(fmtNum(g.totalLag)) + '</strong>' : esc(fmtNum(g.totalLag)), 'num') +
      td(esc(groupMode(g)), 'opt') + td(esc(g.retryMaxTimes), 'num opt') + td(yesNo(g.consumeEnable), 'opt'),
    emptyHtml: 'No consumer groups yet. Create one with <strong>New group</strong>; receiving with a new group name also creates it when auto-create is on.',
  };

  function groupFormHtml(g) {
    const v = g || { consumeEnable: true, broadcast: false, orderly: false, retryMaxTimes: 16, retryQueueNums: 1 };
    return resourceFormHtml(GROUP, g, 'gf', 255, '',
      checkField('gf-enable', 'consumeEnable', 'Consuming enabled', v.consumeEnable) +
      checkField('gf-broadcast', 'broadcast', 'Broadcast (each consumer reads every message)', v.broadcast) +
      checkField('gf-orderly', 'orderly', 'Orderly (one message of a queue in flight at a time)', v.orderly) +
      '<div class="field"><label for="gf-retry">Max retries before the DLQ</label>' +
      '<input id="gf-retry" name="retryMaxTimes" type="number" min="0" max="1000" value="' + esc(v.retryMaxTimes) + '"></div>' +
      '<div class="field"><label for="gf-rq">Retry queues</label>' +
      '<input id="gf-rq" name="retryQueueNums" type="number" min="1" max="64" value="' + esc(v.retryQueueNums) + '"></div>');
  }

  function renderGroups(c) { return renderResourceList(c, GROUP); }
  function progressHtml(p) {
    if (!p.topics.length) {
      return '<div class="empty">This group has no committed offsets and no live consumers yet. ' +
        'Consumers show up after they receive (POST /v1/groups/{group}/receive) or send a heartbeat; ' +
        'you can also set a starting point with <strong>Reset offsets</strong> below.</div>';
    }
    return p.topics.map(t => '<h3 class="sub"><a href="#/topics/' + esc(enc(t.topic)) + '">' + esc(t.topic) +
      '</a> <span class="muted">lag <strong class="lag" data-topic-lag="' + esc(t.topic) + '">' + esc(fmtNum(t.totalLag)) + '</strong></span></h3>' +
      tableHtml('Progress on ' + t.topic, [['Queue', 'num'], ['Broker offset', 'num'], ['Consumer offset', 'num'],
        ['Lag', 'num'], ['In flight', 'num opt'], ['Last message', 'opt']],
        t.queues.map(q => '<tr>' + td(esc(q.queueId), 'num') + td(esc(fmtNum(q.brokerOffset)), 'num') +
          td(q.hasOffset === false ? '<span class="muted" title="no committed offset">—</span>' : esc(fmtNum(q.consumerOffset)), 'num') +
          td(esc(fmtNum(q.lag)), 'num') + td(esc(fmtNum(q.inflight)), 'num opt') + td(esc(fmtTime(q.lastTimestamp)), 'time opt') + '</tr>'),
        'The topic has no read queues.')).join('');
  }

  async function renderGroup(c, name) {
    setTitle('Group ' + name);
    const [g, p] = await Promise.allSettled([
      api('GET', '/v1/groups/' + enc(name)),
      api('GET', '/v1/groups/' + enc(name) + '/progress'),
    ]);
    if (!c.alive()) return;
    if (g.status === 'rejected') {
      view.innerHTML = missingItemHtml(GROUP, name, g.reason);
      return;
    }
    const grp = g.value;
    const retryTopic = grp.retryTopic || '%RETRY%' + name;
    const dlqTopic = grp.dlqTopic || '%DLQ%' + name;
    const consumers = tableHtml('Consumers of ' + name, [['Client'], ['Kind'], ['Strategy'], ['Subscriptions'], ['Last seen']],
      (grp.consumers || []).map(x => '<tr>' + td('<span class="mono">' + esc(x.clientId) + '</span>') + td(esc(x.kind)) +
        td(esc(x.strategy || '—')) +
        td((x.subscriptions || []).map(s => esc(s.topic) + (s.expression ? ' <span class="muted">(' + esc(s.expression) + ')</span>' : '')).join('<br>') || '—') +
        td(esc(fmtTime(x.lastHeartbeat)), 'time') + '</tr>'),
      'No live consumers. A client appears here while it receives or sends heartbeats (dropped after 120 s of silence).');
    /* 'n': messages stored in the topic, null while it does not exist. */
    const sysRow = (label, topic, n) => {
      const count = n === null || n === undefined ? '<span class="muted">none yet</span>' : esc(fmtNum(n));
      const browse = n !== null && n !== undefined
        ? '<a href="#/messages?topic=' + esc(enc(topic)) + '&amp;begin=0&amp;end=' + (Date.now() + 60000) + '">Browse</a>' : '';
      return '<tr>' + td(esc(label)) + td('<span class="mono">' + esc(topic) + '</span>') + td(count, 'num') + td(browse) + '</tr>';
    };
    const progress = p.status === 'rejected' ? errorHtml(p.reason, 'Cannot read progress') : progressHtml(p.value);
    const topics = p.status === 'fulfilled' ? p.value.topics.map(t => t.topic) : [];
    const totalLag = p.status === 'fulfilled' ? p.value.totalLag : null;
    view.innerHTML = itemHeadHtml(GROUP, name) +
      '<div class="grid2"><section class="card" aria-labelledby="gcfg-h"><h2 id="gcfg-h">Configuration</h2>' + dl([
        ['Total lag', '<strong class="lag" id="group-total-lag">' + esc(fmtNum(totalLag)) + '</strong>'],
        ['Mode', esc(groupMode(grp))], ['Consuming', yesNo(grp.consumeEnable)],
        ['Max retries', esc(grp.retryMaxTimes)], ['Retry queues', esc(grp.retryQueueNums)],
        ['Created', esc(fmtTime(grp.createdTimestamp))], ['Updated', esc(fmtTime(grp.updatedTimestamp))]]) + '</section>' +
      '<section class="card" aria-labelledby="sys-h"><h2 id="sys-h">Retry and dead-letter topics</h2>' +
      tableHtml('Retry and dead-letter topics', [['Kind'], ['Topic'], ['Messages', 'num'], ['']],
        [sysRow('Retry', retryTopic, grp.retryMessages), sysRow('Dead letter', dlqTopic, grp.dlqMessages)], '') +
      '<p class="hint">"none yet" means no message of this group was retried or dead-lettered so far.</p></section></div>' +
      '<section class="card" aria-labelledby="cons-h"><h2 id="cons-h">Live consumers</h2>' + consumers + '</section>' +
      '<section class="card" aria-labelledby="prog-h"><h2 id="prog-h">Progress and lag</h2>' + progress + '</section>' +
      '<section class="card" aria-labelledby="reset-h"><h2 id="reset-h">Reset offsets to a time</h2>' +
      '<form id="reset-form" class="form cols" novalidate>' +
      '<div class="field"><label for="rf-topic">Topic</label><input id="rf-topic" name="topic" list="rf-topics" required autocomplete="off" spellcheck="false" value="' +
      esc(topics[0] || '') + '"><datalist id="rf-topics">' + topics.map(t => '<option value="' + esc(t) + '"></option>').join('') + '</datalist></div>' +
      '<div class="field"><label for="rf-time">Time (local)</label><input id="rf-time" name="time" type="datetime-local" step="1" required value="' +
      esc(toLocalInput(Date.now() - 3600000)) + '" aria-describedby="rf-hint"></div>' +
      '<p id="rf-hint" class="hint wide">Every queue of the topic moves to its first message stored at or after this time; ' +
      'messages after it are consumed again, earlier ones skipped.</p>' +
      '<div class="form-error wide"></div>' +
      '<div class="actions wide"><button type="submit" class="btn primary">Reset offsets</button></div>' +
      '<div id="reset-result" class="wide" role="status" aria-live="polite"></div></form></section>';

    wireItemHead(GROUP, grp, name);
    const form = $('#reset-form');
    form.addEventListener('submit', async ev => {
      ev.preventDefault();
      const errBox = form.querySelector('.form-error');
      errBox.innerHTML = '';
      $('#reset-result').innerHTML = '';
      const topic = form.topic.value.trim();
      const ts = fromLocalInput(form.time.value);
      if (!topic) { errBox.innerHTML = errorHtml(new Error('Enter the topic whose offsets to reset.')); return; }
      if (!Number.isFinite(ts) || ts < 0) { errBox.innerHTML = errorHtml(new Error('Enter a valid date and time.')); return; }
      if (!await confirmDialog('Reset offsets?', 'Move group "' + name + '" on topic "' + topic + '" to ' +
        fmtTime(ts) + '? Consumers will continue from there.', 'Reset offsets')) return;
      try {
        const r = await api('POST', '/v1/groups/' + enc(name) + '/offsets/reset', { topic, timestamp: ts });
        if (!c.alive()) return;
        toast('Offsets of ' + name + ' on ' + topic + ' reset');
        await route();
        const out = $('#reset-result');
        if (out) {
          out.innerHTML = '<p class="ok">Reset to ' + esc(fmtTime(ts)) + '. New offsets:</p>' +
            tableHtml('New offsets', [['Queue', 'num'], ['Offset', 'num']],
              r.map(o => '<tr>' + td(esc(o.queueId), 'num') + td(esc(fmtNum(o.offset)), 'num') + '</tr>'), 'No queues.');
        }
      } catch (e) {
        errBox.innerHTML = errorHtml(e, 'Not reset');
      }
    });
  }

  /* ================================================================ */
  /* Messages                                                           */
  /* ================================================================ */

  function messageRows(list) {
    return list.map(m => '<tr><td><a class="mono" href="#/messages/' + esc(enc(m.msgId)) + '">' + esc(m.msgId) + '</a></td>' +
      td(esc(m.topic)) + td(esc(m.queueId), 'num') + td(esc(m.queueOffset), 'num') + td(esc(m.tags || '')) +
      td(esc((m.keys || []).join(', '))) + td(esc(fmtTime(m.storeTimestamp)), 'time') +
      td('<span class="preview">' + esc(m.bodyEncoding === 'base64' ? '(binary, ' + m.body.length + ' base64 chars)'
        : (m.body || '').slice(0, 80)) + '</span>') + '</tr>');
  }

  async function renderMessages(c, _arg, params) {
    setTitle('Messages');
    const topic = params.get('topic') || '';
    const key = params.get('key') || '';
    const now = Date.now();
    const begin = params.has('begin') ? Number(params.get('begin')) : now - 3600000;
    const end = params.has('end') ? Number(params.get('end')) : now + 60000;
    const max = params.get('max') || '32';
    const byKey = !!key;
    const byTime = !key && params.has('begin') && params.has('end') && topic;
    view.innerHTML =
      '<div class="page-head"><h1>Messages</h1></div>' +
      '<div class="grid3">' +
      '<section class="card" aria-labelledby="qt-h"><h2 id="qt-h">By topic and time</h2><form id="q-time" class="form" novalidate>' +
      '<div class="field"><label for="qt-topic">Topic</label><input id="qt-topic" name="topic" list="topic-names" required autocomplete="off" spellcheck="false" value="' + esc(topic) + '"></div>' +
      '<div class="field"><label for="qt-begin">From (local)</label><input id="qt-begin" name="begin" type="datetime-local" step="1" value="' + esc(toLocalInput(begin || 1)) + '"></div>' +
      '<div class="field"><label for="qt-end">To (local)</label><input id="qt-end" name="end" type="datetime-local" step="1" value="' + esc(toLocalInput(end)) + '"></div>' +
      '<div class="field"><label for="qt-max">At most</label><input id="qt-max" name="max" type="number" min="1" max="2000" value="' + esc(max) + '"></div>' +
      '<div class="actions"><button type="submit" class="btn primary">Search by time</button></div></form></section>' +
      '<section class="card" aria-labelledby="qk-h"><h2 id="qk-h">By key</h2><form id="q-key" class="form" novalidate>' +
      '<div class="field"><label for="qk-topic">Topic</label><input id="qk-topic" name="topic" list="topic-names" required autocomplete="off" spellcheck="false" value="' + esc(topic) + '"></div>' +
      '<div class="field"><label for="qk-key">Key</label><input id="qk-key" name="key" required autocomplete="off" spellcheck="false" value="' + esc(key) + '"></div>' +
      '<div class="actions"><button type="submit" class="btn primary">Search by key</button></div></form></section>' +
      '<section class="card" aria-labelledby="qi-h"><h2 id="qi-h">By message ID</h2><form id="q-id" class="form" novalidate>' +
      '<div class="field"><label for="qi-id">Message ID</label><input id="qi-id" name="id" required autocomplete="off" spellcheck="false" placeholder="32 hex digits" class="mono"></div>' +
      '<div class="actions"><button type="submit" class="btn primary">Open message</button></div></form></section></div>' +
      '<datalist id="topic-names"></datalist>' +
      '<div id="q-error"></div>' +
      '<section class="card" aria-labelledby="res-h"><h2 id="res-h">Results</h2><div id="q-results"></div></section>';

    const err = $('#q-error');
    $('#q-time').addEventListener('submit', ev => {
      ev.preventDefault();
      const f = ev.target;
      const t = f.topic.value.trim();
      const b = fromLocalInput(f.begin.value);
      const e = fromLocalInput(f.end.value);
      if (!t) { err.innerHTML = errorHtml(new Error('Enter a topic to search.')); return; }
      if (!Number.isFinite(b) || !Number.isFinite(e)) { err.innerHTML = errorHtml(new Error('Enter both times.')); return; }
      location.hash = '#/messages?topic=' + enc(t) + '&begin=' + b + '&end=' + e + '&max=' + enc(f.max.value || '32');
    });
    $('#q-key').addEventListener('submit', ev => {
      ev.preventDefault();
      const f = ev.target;
      const t = f.topic.value.trim();
      const k = f.key.value.trim();
      if (!t || !k) { err.innerHTML = errorHtml(new Error('Enter a topic and a key.')); return; }
      location.hash = '#/messages?topic=' + enc(t) + '&key=' + enc(k);
    });
    $('#q-id').addEventListener('submit', ev => {
      ev.preventDefault();
      const id = ev.target.id.value.trim();
      if (!id) { err.innerHTML = errorHtml(new Error('Enter a message ID.')); return; }
      location.hash = '#/messages/' + enc(id);
    });

    const jobs = [api('GET', '/v1/topics')];
    if (byKey) jobs.push(api('GET', '/v1/topics/' + enc(topic) + '/messages?key=' + enc(key) +
      (params.has('begin') ? '&begin=' + enc(params.get('begin')) : '') + (params.has('end') ? '&end=' + enc(params.get('end')) : '')));
    else if (byTime) jobs.push(api('GET', '/v1/topics/' + enc(topic) + '/messages?begin=' + enc(params.get('begin')) +
      '&end=' + enc(params.get('end')) + '&max=' + enc(max)));
    const [tl, q] = await Promise.allSettled(jobs);
    if (!c.alive()) return;
    if (tl.status === 'fulfilled') {
      $('#topic-names').innerHTML = tl.value.map(t => '<option value="' + esc(t.topic) + '"></option>').join('');
    }
    const out = $('#q-results');
    if (!q) {
      out.innerHTML = '<div class="empty">Choose a topic and a time range, a topic and a key, or paste a message ID, then search.</div>';
      return;
    }
    if (q.status === 'rejected') {
      out.innerHTML = errorHtml(q.reason, 'Search failed');
      return;
    }
    const list = q.value.messages || [];
    const what = byKey ? 'key "' + esc(key) + '" on ' + esc(topic)
      : esc(topic) + (begin > 0 ? ' between ' + esc(fmtTime(begin)) + ' and ' : ' stored until ') + esc(fmtTime(end));
    out.innerHTML = '<p class="muted">' + list.length + ' message(s) for ' + what + '.</p>' +
      tableHtml('Messages found', [['Message ID'], ['Topic'], ['Queue', 'num'], ['Offset', 'num'], ['Tag'], ['Keys'], ['Stored'], ['Body']],
        messageRows(list), 'No messages match. Widen the time range, check the key (it must match whole), or pick another topic.');
  }

  function base64Bytes(b64) {
    const s = atob(b64);
    const a = new Uint8Array(s.length);
    for (let i = 0; i < s.length; i++) a[i] = s.charCodeAt(i);
    return a;
  }

  function hexDump(bytes) {
    const lines = [];
    for (let i = 0; i < bytes.length; i += 16) {
      const chunk = bytes.subarray(i, i + 16);
      let hex = '';
      let asc = '';
      for (let j = 0; j < 16; j++) {
        if (j < chunk.length) {
          hex += chunk[j].toString(16).padStart(2, '0') + ' ';
          asc += chunk[j] >= 0x20 && chunk[j] < 0x7f ? String.fromCharCode(chunk[j]) : '.';
        } else hex += '   ';
        if (j === 7) hex += ' ';
      }
      lines.push(i.toString(16).padStart(8, '0') + '  ' + hex + ' ' + asc);
    }
    return lines.join('\n') || '(empty body)';
  }

  const TRACK_LABEL = { CONSUMED: 'consumed', IN_FLIGHT: 'in flight', NOT_CONSUMED_YET: 'not consumed yet' };

  async function renderMessage(c, id) {
    setTitle('Message ' + id);
    const [m, tr] = await Promise.allSettled([
      api('GET', '/v1/messages/' + enc(id)),
      api('GET', '/v1/messages/' + enc(id) + '/track'),
    ]);
    if (!c.alive()) return;
    const head = '<nav class="crumbs" aria-label="Breadcrumb"><a href="#/messages">Messages</a> / <span class="mono">' + esc(id) + '</span></nav>';
    if (m.status === 'rejected') {
      view.innerHTML = head + '<div class="page-head"><h1>Message</h1></div>' + errorHtml(m.reason) +
        '<p class="empty">Check the ID (32 hex digits, the <code>msgId</code> of a send result) or search on the <a href="#/messages">messages page</a>.</p>';
      return;
    }
    const msg = m.value;
    const bytes = msg.bodyEncoding === 'base64' ? base64Bytes(msg.body || '') : new TextEncoder().encode(msg.body || '');
    const isText = msg.bodyEncoding !== 'base64';
    const isDlq = msg.topic.startsWith('%DLQ%');
    let track;
    if (tr.status === 'rejected') track = errorHtml(tr.reason, 'Cannot read the track');
    else {
      track = tableHtml('Consumption by group', [['Group'], ['State'], ['Consumer offset', 'num']],
        (tr.value.tracks || []).map(t => '<tr><td><a href="#/groups/' + esc(enc(t.group)) + '">' + esc(t.group) + '</a></td>' +
          td('<span class="state ' + esc(String(t.trackType).toLowerCase()) + '">' + esc(TRACK_LABEL[t.trackType] || t.trackType) + '</span>') +
          td(esc(fmtNum(t.consumerOffset)), 'num') + '</tr>'),
        'No consumer group reads this topic, so nobody has consumed this message.');
    }
    const props = Object.entries(msg.properties || {});
    const topicLink = msg.topic.startsWith('%')
      ? '<span class="mono">' + esc(msg.topic) + '</span>'
      : '<a href="#/topics/' + esc(enc(msg.topic)) + '">' + esc(msg.topic) + '</a>';
    view.innerHTML = head +
      '<div class="page-head"><h1>Message <span class="name mono">' + esc(msg.msgId) + '</span></h1><div class="head-actions">' +
      (isDlq ? '<button type="button" class="btn primary" id="msg-resend">Resend to its topic</button>' : '') +
      '</div></div><div id="resend-result" role="status" aria-live="polite"></div>' +
      '<div class="grid2"><section class="card" aria-labelledby="md-h"><h2 id="md-h">Details</h2>' + dl([
        ['Topic', topicLink], ['Queue', esc(msg.queueId)], ['Queue offset', esc(fmtNum(msg.queueOffset))],
        ['Commit log offset', esc(fmtNum(msg.commitLogOffset))], ['Tag', esc(msg.tags || '—')],
        ['Keys', esc((msg.keys || []).join(', ') || '—')], ['Stored', esc(fmtTime(msg.storeTimestamp))],
        ['Born', esc(fmtTime(msg.bornTimestamp))], ['Reconsume times', esc(msg.reconsumeTimes)],
        ['Size', esc(fmtBytes(msg.storeSize))]]) + '</section>' +
      '<section class="card" aria-labelledby="mt-h"><h2 id="mt-h">Track</h2>' + track + '</section></div>' +
      '<section class="card" aria-labelledby="mb-h"><div class="card-head"><h2 id="mb-h">Body <span class="muted">(' + bytes.length + ' bytes)</span></h2>' +
      '<div class="seg" role="group" aria-label="Body view">' +
      '<button type="button" class="btn small" id="body-text" aria-pressed="' + isText + '"' + (isText ? '' : ' disabled') + '>Text</button>' +
      '<button type="button" class="btn small" id="body-hex" aria-pressed="' + !isText + '">Hex</button></div></div>' +
      '<pre id="msg-body" class="body" tabindex="0" aria-labelledby="mb-h"></pre></section>' +
      '<section class="card" aria-labelledby="mp-h"><h2 id="mp-h">Properties</h2>' +
      tableHtml('Properties', [['Name'], ['Value']], props.map(([k, v]) => '<tr>' + td(esc(k)) + td(esc(v)) + '</tr>'),
        'This message has no user properties.') + '</section>';
    const pre = $('#msg-body');
    const show = hex => {
      pre.textContent = hex ? hexDump(bytes) : (msg.body || '(empty body)');
      $('#body-text').setAttribute('aria-pressed', String(!hex));
      $('#body-hex').setAttribute('aria-pressed', String(hex));
    };
    show(!isText);
    $('#body-text').addEventListener('click', () => show(false));
    $('#body-hex').addEventListener('click', () => show(true));
    if (isDlq) {
      $('#msg-resend').addEventListener('click', async ev => {
        const btn = ev.currentTarget;
        btn.disabled = true;
        const out = $('#resend-result');
        out.innerHTML = '';
        try {
          const r = await api('POST', '/v1/messages/' + enc(msg.msgId) + '/resend', {});
          out.innerHTML = '<p class="ok">Resent to <a href="#/topics/' + esc(enc(r.topic)) + '">' + esc(r.topic) +
            '</a> as <a class="mono" href="#/messages/' + esc(enc(r.msgId)) + '">' + esc(r.msgId) + '</a> (queue ' +
            esc(r.queueId) + ', offset ' + esc(r.queueOffset) + ').</p>';
        } catch (e) {
          out.innerHTML = errorHtml(e, 'Not resent');
        } finally {
          btn.disabled = false;
        }
      });
    }
  }

  /* ================================================================ */
  /* Transactions and delays                                            */
  /* ================================================================ */

  async function renderTransactions(c) {
    setTitle('Transactions');
    const [tx, dl2] = await Promise.allSettled([
      api('GET', '/v1/transactions?limit=500'),
      api('GET', '/v1/delays'),
    ]);
    if (!c.alive()) return;
    let txHtml;
    let pending = '—';
    if (tx.status === 'rejected') txHtml = errorHtml(tx.reason, 'Cannot list transactions');
    else {
      pending = fmtNum(tx.value.pending);
      const list = tx.value.transactions || [];
      txHtml = (tx.value.pending > list.length ? '<p class="muted">Showing the ' + list.length + ' next due of ' + esc(pending) + '.</p>' : '') +
        tableHtml('Pending transactions', [['Transaction'], ['Topic'], ['Half message'], ['Checks', 'num'], ['Created'], ['Next check'], ['Check URL']],
          list.map(t => '<tr>' + td('<span class="mono">' + esc(t.transactionId) + '</span>') +
            td('<a href="#/topics/' + esc(enc(t.topic)) + '">' + esc(t.topic) + '</a>') +
            td('<a class="mono" href="#/messages/' + esc(enc(t.halfMsgId)) + '">' + esc(t.halfMsgId) + '</a>') +
            td(esc(t.checkTimes), 'num') + td(esc(fmtTime(t.createdAt)), 'time') + td(esc(fmtTime(t.nextCheckAt)), 'time') +
            td('<span class="mono">' + esc(t.checkUrl || '—') + '</span>') + '</tr>'),
          'No pending half messages. A transactional producer sends one with POST /v1/topics/{topic}/transactions, then commits or rolls it back.');
    }
    let dHtml;
    let dTotal = '—';
    if (dl2.status === 'rejected') dHtml = errorHtml(dl2.reason, 'Cannot read delayed messages');
    else {
      const d = dl2.value;
      dTotal = fmtNum(d.totalPending);
      dHtml = dl([['Waiting in the timer (delayMs / deliverAt)', esc(fmtNum(d.timer && d.timer.pending))],
                  ['Waiting on delay levels', esc(fmtNum((d.levels || []).reduce((s, l) => s + l.pending, 0)))]]) +
        tableHtml('Delay levels', [['Level', 'num'], ['Delay'], ['Pending', 'num']],
          (d.levels || []).map(l => '<tr' + (l.pending ? ' class="hi"' : '') + '>' + td(esc(l.level), 'num') + td(esc(l.delay)) +
            td(esc(fmtNum(l.pending)), 'num') + '</tr>'), 'The broker reports no delay levels.', 'compact');
    }
    view.innerHTML =
      '<div class="page-head"><h1>Transactions and delays</h1><div class="head-actions">' +
      '<button type="button" class="btn" id="tx-refresh">Refresh</button></div></div>' +
      '<section class="card" aria-labelledby="tx-h"><h2 id="tx-h">Pending half messages <span class="count">' + esc(pending) + '</span></h2>' + txHtml + '</section>' +
      '<section class="card" aria-labelledby="dl-h"><h2 id="dl-h">Delayed messages <span class="count">' + esc(dTotal) + '</span></h2>' + dHtml + '</section>';
    $('#tx-refresh').addEventListener('click', route);
  }

  /* ================================================================ */
  /* Health badge and start                                             */
  /* ================================================================ */

  async function health() {
    const badge = $('#badge');
    try {
      const h = await api('GET', '/healthz');
      badge.textContent = h.status;
      badge.className = 'badge ' + (h.status === 'UP' ? 'up' : 'down');
      badge.title = 'GET /healthz: ' + h.status;
    } catch (e) {
      badge.textContent = e.status ? 'DOWN' : 'UNREACHABLE';
      badge.className = 'badge down';
      badge.title = e.message;
    }
  }

  $('#skip-link').addEventListener('click', ev => {
    ev.preventDefault();
    $('#main').focus();
  });
  let resizeTimer = 0;
  window.addEventListener('resize', () => {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(drawRates, 150);
  });
  window.addEventListener('hashchange', route);
  health();
  setInterval(health, 10000);
  route();
}());
