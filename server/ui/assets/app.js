// Lakeshore dashboard. Plain JavaScript, no build step, nothing loaded from elsewhere.
//
// Safety rules of this file: text from the server (payloads, keys, errors, names) only ever
// reaches the page through textContent / createTextNode / attribute setters of safe
// attributes; no API that parses a string as HTML is ever called (a test greps for them).
// The token lives in sessionStorage and travels only in the Authorization header of fetch
// calls (live streams are read with fetch too, not the browser's SSE client, which cannot
// send headers: no token in a URL).
'use strict';

const TOKEN_KEY = 'lakeshore.token';
const STATES = ['queued', 'running', 'succeeded', 'failed', 'cancelled', 'killed', 'timeout'];
const $main = document.getElementById('main');

let session = null;     // answer of /ui/api/session
let page = null;        // AbortController of the page on screen

// ---------- DOM helpers ----------

// el builds an element. attrs: class, text, href, title, type, value, placeholder, on*
// handlers, dataset entries (data-*), and a few booleans; children are nodes or strings
// (strings become text nodes).
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = String(v);
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k.startsWith('data-')) e.setAttribute(k, String(v));
    else if (k === 'href') e.setAttribute('href', safeHref(v));
    else if (['checked', 'disabled', 'hidden', 'selected'].includes(k)) e[k] = true;
    else e.setAttribute(k, String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    e.appendChild(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
  }
  return e;
}

// safeHref keeps links inside the dashboard (fragment links only).
function safeHref(h) { return String(h).startsWith('#') ? String(h) : '#/'; }

function svg(tag, attrs) {
  const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  return e;
}

function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }

function toast(msg) {
  const t = document.getElementById('toast');
  t.textContent = msg;
  t.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.hidden = true; }, 3500);
}

// confirmDialog shows an in-page confirmation and resolves true on OK.
function confirmDialog(message, okLabel) {
  return new Promise(resolve => {
    const done = v => { back.remove(); resolve(v); };
    const back = el('div', { class: 'modal-back', id: 'confirm' },
      el('div', { class: 'modal', role: 'dialog' },
        el('p', { text: message }),
        el('div', { class: 'actions' },
          el('button', { class: 'danger', id: 'confirm-ok', onclick: () => done(true) }, okLabel || 'Confirm'),
          el('button', { id: 'confirm-cancel', onclick: () => done(false) }, 'Cancel'))));
    document.body.appendChild(back);
  });
}

function badge(state) { return el('span', { class: 'badge st-' + state, 'data-state': state }, state); }

function fmtTime(s) {
  if (!s) return '';
  const d = new Date(s);
  return isNaN(d) ? String(s) : d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}

function fmtAge(ms) {
  if (ms === null || ms === undefined || isNaN(ms)) return '—';
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return s + 's';
  if (s < 3600) return Math.floor(s / 60) + 'm ' + (s % 60) + 's';
  if (s < 86400) return Math.floor(s / 3600) + 'h ' + Math.floor(s % 3600 / 60) + 'm';
  return Math.floor(s / 86400) + 'd ' + Math.floor(s % 86400 / 3600) + 'h';
}

function fmtNum(n) { return (n || 0).toLocaleString('en-US'); }

function fmtRate(r) { return r >= 100 ? r.toFixed(0) : r >= 1 ? r.toFixed(1) : r.toFixed(2); }

function seg(s) { return encodeURIComponent(s); }

// ---------- API ----------

class APIError extends Error {
  constructor(status, code, message) {
    super(message || ('HTTP ' + status));
    this.status = status;
    this.code = code || '';
  }
}

function token() { return sessionStorage.getItem(TOKEN_KEY) || ''; }

function headers(extra) {
  const h = Object.assign({ Accept: 'application/json' }, extra || {});
  const t = token();
  if (t) h.Authorization = 'Bearer ' + t;
  return h;
}

async function api(method, path, body, signal) {
  const init = { method, headers: headers(), cache: 'no-store', signal: signal || (page && page.signal) };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const res = await fetch(path, init);
  let data = null;
  const text = await res.text();
  if (text) {
    try { data = JSON.parse(text); } catch (e) { data = null; }
  }
  if (!res.ok) {
    const err = new APIError(res.status, data && data.code, data && data.message);
    if (res.status === 401) onUnauthorized(err);
    throw err;
  }
  return data;
}

function onUnauthorized(err) {
  const had = token() !== '';
  sessionStorage.removeItem(TOKEN_KEY);
  session = null;
  showLogin(had ? 'The server refused the token: ' + err.message : '');
}

// describeError turns an API error into a sentence for the page.
function describeError(err, what) {
  if (err instanceof APIError) {
    switch (err.code) {
      case 'not_found': return what + ' does not exist, or your token may not read it.';
      case 'forbidden': return 'Your token may not do this: ' + err.message;
      case 'unauthorized': return 'The server refused the token: ' + err.message;
      case 'invalid': return 'Not valid: ' + err.message;
    }
    return err.message + (err.code ? ' (' + err.code + ')' : '');
  }
  return 'Could not reach the server: ' + (err && err.message ? err.message : String(err));
}

function errorBox(title, err, what) {
  return el('div', { class: 'error', role: 'alert', 'data-error': err && err.code ? err.code : 'error' },
    el('strong', { text: title }), describeError(err, what));
}

function isAbort(err) { return err && (err.name === 'AbortError' || (page && page.signal.aborted)); }

// can reports whether the token holds perm on the queue (from a session answer with
// queue_permissions).
function canOn(qs, perm) {
  return !!qs && Array.isArray(qs.queue_permissions) && (qs.queue_permissions.includes(perm) || qs.queue_permissions.includes('admin'));
}

async function queueSession(ns, q) {
  return api('GET', '/ui/api/session?namespace=' + seg(ns) + '&queue=' + seg(q));
}

// streamFrames follows a journal live: it reads the SSE body of …/stream with fetch (the
// token in the Authorization header), calls onFrame for each frame, reconnects from the
// last seq after a silence timeout or a dropped connection, and returns once the journal
// is closed (END or ERROR frame) or the page goes away.
async function streamFrames(path, since, onFrame, onStatus) {
  const signal = page.signal;
  while (!signal.aborted) {
    let res;
    try {
      res = await fetch(path + '?since=' + since + '&timeout=55', { headers: headers({ Accept: 'text/event-stream' }), cache: 'no-store', signal });
    } catch (err) {
      if (isAbort(err)) return;
      onStatus(false);
      await sleep(2000);
      continue;
    }
    if (!res.ok) {
      let body = null;
      try { body = await res.json(); } catch (e) { body = null; }
      const err = new APIError(res.status, body && body.code, body && body.message);
      if (res.status === 401) { onUnauthorized(err); return; }
      if (res.status === 503) { await sleep(1000); continue; }
      throw err;
    }
    onStatus(true);
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buf = '';
    let closed = false;
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += decoder.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          let event = 'message', data = '';
          for (const line of block.split('\n')) {
            if (line.startsWith('event: ')) event = line.slice(7);
            else if (line.startsWith('data: ')) data += line.slice(6);
          }
          if (!data) continue;
          const obj = JSON.parse(data);
          if (event === 'frame') {
            since = obj.seq;
            onFrame(obj);
            if (obj.kind === 'END' || obj.kind === 'ERROR') closed = true;
          } else if (event === 'error' && obj.code !== 'timeout' && obj.code !== 'shutting_down') {
            throw new APIError(0, obj.code, obj.message);
          }
        }
      }
    } catch (err) {
      if (isAbort(err)) return;
      if (err instanceof APIError) throw err;
    }
    onStatus(false);
    if (closed) return;
    await sleep(300);
  }
}

function sleep(ms) {
  return new Promise(resolve => {
    const t = setTimeout(resolve, ms);
    if (page) page.signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
  });
}

// every runs fn now and then every ms until the page goes away.
function every(ms, fn) {
  const signal = page.signal;
  (async () => {
    while (!signal.aborted) {
      try { await fn(); } catch (err) { if (!isAbort(err)) console.warn(err); }
      await sleep(ms);
    }
  })();
}

// ---------- values (wire values as JSON, docs/http-api.md) ----------

function b64bytes(s) {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

const DTYPES = {
  float64: [8, 'getFloat64'], float32: [4, 'getFloat32'], int64: [8, 'getBigInt64'], uint64: [8, 'getBigUint64'],
  int32: [4, 'getInt32'], uint32: [4, 'getUint32'], int16: [2, 'getInt16'], uint16: [2, 'getUint16'],
  int8: [1, 'getInt8'], uint8: [1, 'getUint8'], bool: [1, 'getUint8'],
};

// arrayPreview returns the first values of an ndarray's data as text.
function arrayPreview(a) {
  const d = DTYPES[a.dtype];
  if (!d) return '(no preview for dtype ' + a.dtype + ')';
  let bytes;
  try { bytes = b64bytes(a.data || ''); } catch (e) { return '(data is not base64)'; }
  const view = new DataView(bytes.buffer);
  const n = Math.floor(bytes.length / d[0]);
  const out = [];
  for (let i = 0; i < Math.min(n, 16); i++) {
    let v = view[d[1]](i * d[0], true);
    if (typeof v === 'number' && !Number.isInteger(v)) v = Number(v.toPrecision(6));
    out.push(String(v));
  }
  return '[' + out.join(', ') + (n > 16 ? ', … ' + (n - 16) + ' more' : '') + ']';
}

const IMAGE_TYPES = { png: 'image/png', jpeg: 'image/jpeg', jpg: 'image/jpeg', gif: 'image/gif', webp: 'image/webp', bmp: 'image/bmp' };

function tagBox(title, ...rest) { return el('span', { class: 'tag' }, el('span', { class: 't', text: title }), ...rest); }

// renderValue renders one JSON-mapped wire value as DOM nodes (text only).
function renderValue(v, depth) {
  depth = depth || 0;
  if (v === null || v === undefined) return el('span', { class: 'n', text: 'null' });
  if (typeof v === 'string') return el('span', { class: 's', text: JSON.stringify(v) });
  if (typeof v === 'number' || typeof v === 'boolean') return el('span', { class: 'n', text: String(v) });
  const indent = '  '.repeat(depth + 1), close = '  '.repeat(depth);
  if (Array.isArray(v)) {
    if (v.length === 0) return document.createTextNode('[]');
    const f = document.createDocumentFragment();
    f.appendChild(document.createTextNode('[\n'));
    v.forEach((x, i) => {
      f.appendChild(document.createTextNode(indent));
      f.appendChild(renderValue(x, depth + 1));
      f.appendChild(document.createTextNode(i < v.length - 1 ? ',\n' : '\n'));
    });
    f.appendChild(document.createTextNode(close + ']'));
    return f;
  }
  const keys = Object.keys(v);
  if (keys.length === 1 && keys[0].startsWith('$')) {
    const t = keys[0], x = v[t];
    switch (t) {
      case '$ndarray': case '$tensor':
        return tagBox((t === '$tensor' ? 'tensor ' : 'ndarray ') + x.dtype + ' shape [' + (x.shape || []).join(', ') + ']',
          el('div', { class: 'mono', text: arrayPreview(x) }));
      case '$image': {
        const type = IMAGE_TYPES[String(x.format).toLowerCase()];
        const box = tagBox('image ' + x.format);
        if (type) {
          try {
            const url = URL.createObjectURL(new Blob([b64bytes(x.data || '')], { type }));
            const img = el('img', { alt: 'image payload (' + x.format + ')', src: url });
            page.signal.addEventListener('abort', () => URL.revokeObjectURL(url), { once: true });
            box.appendChild(img);
          } catch (e) { box.appendChild(el('div', { text: '(data is not base64)' })); }
        } else box.appendChild(el('div', { class: 'muted', text: '(format not shown)' }));
        return box;
      }
      case '$bytes': {
        let n = 0, hex = '';
        try {
          const b = b64bytes(x);
          n = b.length;
          hex = Array.from(b.slice(0, 32), c => c.toString(16).padStart(2, '0')).join(' ') + (n > 32 ? ' …' : '');
        } catch (e) { hex = '(not base64)'; }
        return tagBox('bytes (' + n + ')', el('div', { class: 'mono', text: hex }));
      }
      case '$float': return el('span', { class: 'n', text: String(x) });
      case '$timestamp': return tagBox('timestamp ' + String(x));
      case '$tuple': {
        const f = document.createDocumentFragment();
        f.appendChild(el('span', { class: 't', text: 'tuple ' }));
        f.appendChild(renderValue(Array.isArray(x) ? x : [], depth));
        return f;
      }
      case '$thunk': return tagBox('thunk ' + x.language + ' (' + ((x.data || '').length * 3 / 4 | 0) + ' bytes)');
      case '$msgpack': return tagBox('a stored value that does not decode (raw msgpack, ' + ((String(x).length * 3 / 4) | 0) + ' bytes)');
      case '$map': return renderObject(x, depth);
    }
  }
  return renderObject(v, depth);
}

function renderObject(v, depth) {
  const keys = Object.keys(v || {});
  if (keys.length === 0) return document.createTextNode('{}');
  const indent = '  '.repeat(depth + 1), close = '  '.repeat(depth);
  const f = document.createDocumentFragment();
  f.appendChild(document.createTextNode('{\n'));
  keys.forEach((k, i) => {
    f.appendChild(document.createTextNode(indent));
    f.appendChild(el('span', { class: 'k', text: JSON.stringify(k) }));
    f.appendChild(document.createTextNode(': '));
    f.appendChild(renderValue(v[k], depth + 1));
    f.appendChild(document.createTextNode(i < keys.length - 1 ? ',\n' : '\n'));
  });
  f.appendChild(document.createTextNode(close + '}'));
  return f;
}

// hasTag reports whether v holds a tagged value ({"$ndarray": …} and the like) anywhere.
function hasTag(v) {
  if (v === null || typeof v !== 'object') return false;
  if (Array.isArray(v)) return v.some(hasTag);
  const keys = Object.keys(v);
  if (keys.length === 1 && keys[0].startsWith('$')) return true;
  return keys.some(k => hasTag(v[k]));
}

// compactValue renders a short plain value on one line, anything else as renderValue.
function compactValue(v) {
  const text = JSON.stringify(v === undefined ? null : v);
  if (text.length <= 120 && !hasTag(v)) return el('span', { class: 'mono compact', text });
  return el('div', { class: 'json' }, renderValue(v));
}

function jsonBlock(v, id) { return el('div', { class: 'json', id }, renderValue(v)); }

// ---------- charts (SVG built node by node) ----------

const SERIES = ['submitted', 'succeeded', 'failed'];

function lineChart(points, opts) {
  const w = opts.width, h = opts.height, pad = opts.axes ? 28 : 2;
  const s = svg('svg', { viewBox: '0 0 ' + w + ' ' + h, class: opts.class, preserveAspectRatio: 'none', role: 'img' });
  // The x axis spans the last hour, or less while the history is younger (at least 1 min).
  const now = Date.now();
  const first = points.length ? Date.parse(points[0].t) : now;
  const span = Math.min(3600e3, Math.max(60e3, now - first));
  const t0 = now - span;
  let top = 0;
  for (const p of points) for (const k of SERIES) top = Math.max(top, p[k]);
  top = top > 0 ? top * 1.1 : 1;
  const x = t => pad + (w - pad - 4) * Math.max(0, (t - t0)) / (now - t0);
  const y = v => h - (opts.axes ? 16 : 2) - (h - (opts.axes ? 24 : 4)) * v / top;
  if (opts.axes) {
    s.appendChild(svg('line', { x1: pad, y1: y(0), x2: w - 4, y2: y(0), class: 'axis' }));
    const lbl = (tx, ty, text, anchor) => { const t = svg('text', { x: tx, y: ty, 'text-anchor': anchor || 'start' }); t.textContent = text; s.appendChild(t); };
    lbl(2, y(top / 1.1) + 4, fmtRate(top / 1.1) + '/s');
    lbl(2, y(0), '0');
    lbl(pad, h - 2, '−' + Math.round(span / 60e3) + ' min');
    lbl(w - 4, h - 2, 'now', 'end');
  }
  for (const k of SERIES) {
    if (points.length === 0) continue;
    const d = points.map((p, i) => (i ? 'L' : 'M') + x(Date.parse(p.t)).toFixed(1) + ' ' + y(p[k]).toFixed(1)).join(' ');
    s.appendChild(svg('path', { d, fill: 'none', class: 'c-' + k, 'stroke-width': opts.axes ? 1.6 : 1.2 }));
  }
  return s;
}

function legend() {
  return el('div', { class: 'legend' }, SERIES.map(k => el('span', {}, el('i', { class: 'c-' + k }), k + '/s')));
}

// sumSeries adds the points of several queues by time bucket.
function sumSeries(series) {
  const by = new Map();
  for (const q of series) for (const p of q.points) {
    const key = Math.round(Date.parse(p.t) / 1000);
    const a = by.get(key) || { t: p.t, submitted: 0, succeeded: 0, failed: 0 };
    for (const k of SERIES) a[k] += p[k];
    by.set(key, a);
  }
  return [...by.values()].sort((a, b) => Date.parse(a.t) - Date.parse(b.t));
}

// ---------- login and session ----------

function showLogin(message) {
  if (page) page.abort();
  page = new AbortController();
  renderWho();
  document.getElementById('nav').hidden = true;
  clear($main);
  const input = el('input', { type: 'password', id: 'token', autocomplete: 'off', placeholder: 'lks_… or the admin token' });
  const form = el('form', { class: 'card login', id: 'login', onsubmit: async ev => {
    ev.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, input.value.trim());
    await boot();
  } },
  el('h1', { text: 'Sign in' }),
  message ? el('div', { class: 'error', role: 'alert', id: 'login-error' }, message) : null,
  el('p', { class: 'muted', text: 'Paste an access token. It stays in this tab only (session storage) and is sent in the Authorization header.' }),
  input,
  el('button', { class: 'primary', type: 'submit' }, 'Sign in'));
  $main.appendChild(form);
  input.focus();
}

function renderWho() {
  const who = document.getElementById('who');
  clear(who);
  if (!session) return;
  if (!session.auth) who.appendChild(el('span', { text: 'no authentication (loopback)' }));
  else {
    const what = session.admin ? 'admin' : (session.permissions.join(', ') + ' on ' + session.namespace + '/' + session.queue);
    who.appendChild(el('span', { id: 'who-token', text: (session.token_id ? 'token ' + session.token_id.slice(-6) + ': ' : '') + what }));
    who.appendChild(el('button', { id: 'signout', onclick: () => { sessionStorage.removeItem(TOKEN_KEY); session = null; showLogin(); } }, 'Sign out'));
  }
}

async function boot() {
  try {
    session = await api('GET', '/ui/api/session', undefined, new AbortController().signal);
  } catch (err) {
    if (err instanceof APIError && err.status === 401) return; // showLogin already ran
    clear($main);
    $main.appendChild(errorBox('The server did not answer', err, 'The session'));
    return;
  }
  if (!session.signed_in) {
    session = null;
    showLogin();
    return;
  }
  renderWho();
  document.getElementById('nav').hidden = false;
  route();
}

// ---------- router ----------

function parseHash() {
  const h = location.hash.replace(/^#/, '') || '/';
  const [p, q] = h.split('?');
  const decode = x => { try { return decodeURIComponent(x); } catch (e) { return x; } }; // a malformed %-escape stays as typed
  return { parts: p.split('/').filter(Boolean).map(decode), query: new URLSearchParams(q || '') };
}

function route() {
  if (!session) return;
  if (page) page.abort();
  page = new AbortController();
  clear($main);
  const { parts, query } = parseHash();
  const name = parts[0] || 'overview';
  for (const a of document.querySelectorAll('nav a')) a.classList.toggle('active', a.dataset.page === name);
  const pages = { overview: overviewPage, q: queuePage, i: invocationPage, workers: workersPage, schedules: schedulesPage, providers: providersPage, topics: topicsPage, data: dataListPage, d: dataQueuePage };
  const fn = pages[name];
  if (!fn) {
    $main.appendChild(el('div', { class: 'error', role: 'alert' }, el('strong', { text: 'No such page' }), 'Go back to the overview.'));
    return;
  }
  fn(parts.slice(1), query).catch(err => {
    if (isAbort(err)) return;
    $main.appendChild(errorBox('Something went wrong', err, 'It'));
  });
}

window.addEventListener('hashchange', route);

// ---------- overview ----------

async function overviewPage() {
  $main.appendChild(el('h1', { text: 'Overview' }));
  const chartCard = el('div', { class: 'card' }, el('div', { class: 'chart-head' }, el('h2', { text: 'All queues, last hour' }), legend()));
  const chartHost = el('div', { id: 'chart-total' }, el('p', { class: 'muted loading', text: 'Loading…' }));
  chartCard.appendChild(chartHost);
  const note = el('p', { class: 'muted', id: 'history-note' });
  chartCard.appendChild(note);
  $main.appendChild(chartCard);
  // Until the first answers arrive the overview says so, rather than showing an empty page.
  const tableHost = el('div', { id: 'queues' }, el('div', { class: 'notice loading', id: 'overview-loading', role: 'status' }, 'Loading queues…'));
  $main.appendChild(tableHost);
  const oldest = new Map(); // "ns/q" -> {at, created}
  every(5000, async () => {
    const [qs, hist, ws] = await Promise.all([
      api('GET', '/v1/queues'), api('GET', '/ui/api/history'), api('GET', '/v1/workers?seen_within=60')]);
    const queues = qs.queues;
    const series = new Map(hist.queues.map(s => [s.namespace + '/' + s.queue, s.points]));
    clear(chartHost);
    chartHost.appendChild(lineChart(sumSeries(hist.queues), { width: 900, height: 160, axes: true, class: 'chart' }));
    note.textContent = 'Rates from the server\'s counters, sampled every ' + hist.interval + ' s since the server started (an hour kept).';
    // Oldest queued: one indexed read per queue with queued work (the first page of one).
    await Promise.all(queues.filter(q => (q.counts.queued || 0) > 0).map(async q => {
      const k = q.namespace + '/' + q.queue;
      const cached = oldest.get(k);
      if (cached && Date.now() - cached.at < 15000) return;
      try {
        const l = await api('GET', '/v1/namespaces/' + seg(q.namespace) + '/queues/' + seg(q.queue) + '/invocations?state=queued&order=oldest&limit=1');
        oldest.set(k, { at: Date.now(), created: l.invocations.length ? l.invocations[0].created_at : null });
      } catch (err) {
        if (err instanceof APIError && err.code === 'forbidden') oldest.set(k, { at: Date.now(), created: null });
        else throw err;
      }
    }));
    clear(tableHost);
    if (queues.length === 0) {
      tableHost.appendChild(el('div', { class: 'notice', id: 'no-queues' }, 'No queues your token can read yet. Submit an invocation and it appears here.'));
      return;
    }
    const rows = queues.map(q => {
      const k = q.namespace + '/' + q.queue;
      const active = ws.workers.filter(w => w.namespace === q.namespace && (w.queues || []).includes(q.queue)).length;
      const o = (q.counts.queued || 0) > 0 ? oldest.get(k) : null;
      return el('tr', { 'data-queue': k },
        el('td', {}, el('a', { href: '#/q/' + seg(q.namespace) + '/' + seg(q.queue), class: 'qlink' }, k),
          q.paused ? [' ', el('span', { class: 'badge paused', 'data-paused': k }, 'paused')] : null),
        STATES.map(s => el('td', { class: 'num', 'data-count': s }, fmtNum(q.counts[s]))),
        el('td', { class: 'num' }, o && o.created ? fmtAge(Date.now() - Date.parse(o.created)) : '—'),
        el('td', {}, admissionSummary(q.admission)),
        el('td', { class: 'num' }, String(active)),
        el('td', {}, lineChart(series.get(k) || [], { width: 120, height: 28, class: 'spark' })));
    });
    tableHost.appendChild(el('div', { class: 'table-wrap' }, el('table', { id: 'queue-table' },
      el('thead', {}, el('tr', {}, el('th', { text: 'Queue' }), STATES.map(s => el('th', { class: 'num', text: s })),
        el('th', { class: 'num', text: 'oldest queued' }), el('th', { text: 'admission' }), el('th', { class: 'num', text: 'workers' }),
        el('th', { text: 'last hour' }))),
      el('tbody', {}, rows))));
  });
}

function admissionSummary(a) {
  if (!a) return el('span', { class: 'muted', text: 'none' });
  const parts = [];
  if (a.max_depth) parts.push('max depth ' + a.max_depth + ' (' + (a.on_full || 'reject') + ')');
  if (a.rate_limit) parts.push(a.rate_limit + '/s burst ' + (a.burst || 0));
  if (a.deadline_cutoff) parts.push('cutoff ' + a.deadline_cutoff + 's');
  if (a.concurrency_limit) parts.push(a.concurrency_limit + ' running per concurrency key');
  const overrides = Object.keys(a.concurrency_limits || {}).length, weights = Object.keys(a.key_weights || {}).length;
  if (overrides) parts.push(overrides + ' per-key limit' + (overrides > 1 ? 's' : ''));
  if (weights) parts.push(weights + ' key weight' + (weights > 1 ? 's' : ''));
  if (a.key_rate_limit) parts.push(a.key_rate_limit + '/s per key burst ' + (a.key_burst || 0));
  const rates = Object.keys(a.key_rate_limits || {}).length, bursts = Object.keys(a.key_bursts || {}).length;
  if (rates) parts.push(rates + ' per-key rate' + (rates > 1 ? 's' : ''));
  if (bursts) parts.push(bursts + ' per-key burst' + (bursts > 1 ? 's' : ''));
  return el('span', { class: 'mono', text: parts.join(', ') || 'set' });
}

// ---------- queue page ----------

// ulidAt returns a ULID-shaped cursor for time ms: the smallest id of that millisecond
// (low) or the largest (high), so "created before/after" filters use the id index.
function ulidAt(ms, high) {
  const A = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
  let t = Math.max(0, Math.floor(ms)), s = '';
  for (let i = 0; i < 10; i++) { s = A[t % 32] + s; t = Math.floor(t / 32); }
  return s + (high ? 'ZZZZZZZZZZZZZZZZ' : '0000000000000000');
}

async function queuePage(parts, query) {
  const [ns, q] = parts;
  const base = '/v1/namespaces/' + seg(ns || '') + '/queues/' + seg(q || '');
  $main.appendChild(el('h1', {}, el('a', { href: '#/' }, 'Queues'), ' / ', el('span', { id: 'queue-name', text: (ns || '') + '/' + (q || '') })));
  let qs, stats;
  try {
    qs = await queueSession(ns || '', q || '');
    if (!qs.queue_permissions.length) {
      $main.appendChild(el('div', { class: 'error', role: 'alert', 'data-error': 'not_found' }, el('strong', { text: 'Cannot show this queue' }),
        'This queue does not exist, or your token may not read it.'));
      return;
    }
    stats = await api('GET', base + '/stats');
  } catch (err) {
    if (isAbort(err)) return;
    $main.appendChild(errorBox('Cannot show this queue', err, 'This queue'));
    return;
  }
  if (!stats.admission && STATES.every(s => !stats.counts[s])) {
    $main.appendChild(el('div', { class: 'notice', id: 'queue-empty' }, 'This queue holds no invocation: it does not exist yet, or everything in it was trimmed.'));
  }
  const canSubmit = canOn(qs, 'submit'), canAdmin = canOn(qs, 'admin'), canList = canOn(qs, 'read') || canSubmit;
  const countsHost = el('div', { class: 'counts', id: 'counts' });
  const pauseHost = el('div', { class: 'actions', id: 'pause' });
  const admHost = el('div', { id: 'admission' });
  $main.appendChild(el('div', { class: 'grid' },
    el('div', { class: 'card' }, el('h2', { text: 'Depth by state' }), countsHost, pauseHost),
    el('div', { class: 'card' }, el('h2', { text: 'Admission' }), admHost)));
  // Concurrency keys (docs/semantics.md, "Concurrency keys and fair share"): each key with
  // jobs claimable or running, or held back by a worker's "slow down", its running jobs against its limit, queued, weight, its rate
  // limit and when it may next start a job as far as rates go (rate_wait, seconds from the
  // read: its bucket's next token, or the end of a worker's "slow down" hold).
  const keysHost = el('div', { id: 'concurrency-keys' });
  const showKeys = st => {
    clear(keysHost);
    const keys = st.keys || [];
    if (!keys.length) return;
    keysHost.appendChild(el('div', { class: 'card' }, el('h2', { text: 'Concurrency keys' }),
      el('div', { class: 'table-wrap' }, el('table', { id: 'keys-table' },
        el('thead', {}, el('tr', {}, ['key', 'running / limit', 'queued', 'weight', 'rate limit', 'next start'].map(h => el('th', { text: h })))),
        el('tbody', {}, keys.map(k => el('tr', { 'data-key': k.key, class: [k.limit && k.running >= k.limit ? 'at-limit' : '', k.rate_wait ? 'rate-held' : ''].join(' ').trim() },
          el('td', { class: 'mono', text: k.key }),
          el('td', { class: 'mono', text: fmtNum(k.running) + ' / ' + (k.limit ? fmtNum(k.limit) : '∞') + (k.limit && k.running >= k.limit ? ' (at its limit)' : '') }),
          el('td', { class: 'mono', text: fmtNum(k.queued) }),
          el('td', { class: 'mono', text: String(k.weight || 1) }),
          el('td', { class: 'mono', 'data-rate': '', text: k.rate_limit ? String(k.rate_limit) + '/s, burst ' + fmtNum(k.burst) : '—' }),
          el('td', { class: 'mono', 'data-next-start': '', title: 'when the key may next start a job as far as its rate limit and any worker\'s "slow down" answer go',
            text: !k.rate_wait ? 'now' : k.rate_wait < 1 ? 'in <1s (rate)' : 'in ' + fmtAge(k.rate_wait * 1000) + ' (rate)' }))))))));
  };
  const showCounts = st => {
    clear(countsHost);
    for (const s of STATES) countsHost.appendChild(el('span', { class: 'badge st-' + s, 'data-count': s }, s + ' ' + fmtNum(st.counts[s])));
    showPause(!!st.paused);
    showKeys(st);
  };
  // Pause and resume: a paused queue accepts submits, and no worker claims from it.
  const showPause = paused => {
    clear(pauseHost);
    pauseHost.appendChild(paused ? el('span', { class: 'badge paused', id: 'paused-badge' }, 'paused: submits accepted, no claims')
      : el('span', { class: 'muted', id: 'running-note', text: 'not paused' }));
    if (!canOn(qs, 'admin')) return;
    pauseHost.appendChild(el('button', { class: paused ? 'primary' : 'danger', id: paused ? 'queue-resume' : 'queue-pause', onclick: async () => {
      if (!await confirmDialog(paused ? 'Resume this queue? Workers take its queued invocations at once.'
        : 'Pause this queue? Submits are still accepted; workers claim nothing from it until you resume.', paused ? 'Resume' : 'Pause')) return;
      try {
        await api(paused ? 'DELETE' : 'PUT', base + '/pause');
        toast(paused ? 'Queue resumed' : 'Queue paused');
        showCounts(await api('GET', base + '/stats'));
      } catch (err) { if (!isAbort(err)) pauseHost.appendChild(errorBox(paused ? 'Not resumed' : 'Not paused', err, 'This queue')); }
    } }, paused ? 'Resume' : 'Pause'));
  };
  $main.appendChild(keysHost);
  // Shapes (docs/semantics.md, "Placement"; GET /v1/demand): each requirement with jobs,
  // queued and running, and how many live workers can run it; queued jobs no live worker
  // can run are marked (they wait for a worker that offers the shape).
  const shapesHost = el('div', { id: 'shapes' });
  const showShapes = async () => {
    const d = await api('GET', '/v1/demand?' + new URLSearchParams({ namespace: ns, queue: q }));
    const rows = (d.demand || []).filter(x => x.queued || x.running);
    clear(shapesHost);
    if (!rows.some(x => x.shape)) return;
    const stuck = x => x.queued > 0 && x.capable_workers === 0;
    shapesHost.appendChild(el('div', { class: 'card' }, el('h2', { text: 'Shapes' }),
      el('div', { class: 'table-wrap' }, el('table', { id: 'shapes-table' },
        el('thead', {}, el('tr', {}, ['requires', 'queued', 'running', 'oldest ready', 'capable workers'].map(h => el('th', { text: h })))),
        el('tbody', {}, rows.map(x => el('tr', { 'data-shape': x.shape || 'default', class: stuck(x) ? 'no-capable' : '' },
          el('td', { class: 'mono', text: x.requirement ? fmtRequirement(x.requirement) : '(none: any worker)' }),
          el('td', { class: 'mono', text: fmtNum(x.queued) }),
          el('td', { class: 'mono', text: fmtNum(x.running) }),
          el('td', { class: 'mono', text: x.oldest_ready ? fmtAge(x.oldest_ready * 1000) : '—' }),
          el('td', { class: 'mono', 'data-capable': '', text: x.capable_workers === undefined ? '—'
            : fmtNum(x.capable_workers) + (stuck(x) ? ' (no capable worker)' : '') }))))))));
  };
  $main.appendChild(shapesHost);
  const chartHost = el('div', { id: 'queue-chart' });
  $main.appendChild(el('div', { class: 'card' }, el('div', { class: 'chart-head' }, el('h2', { text: 'Last hour' }), legend()), chartHost));
  showCounts(stats);
  renderAdmission(admHost, base, stats.admission, canAdmin);
  every(3000, async () => showCounts(await api('GET', base + '/stats')));
  every(3000, showShapes);
  every(10000, async () => {
    const hist = await api('GET', '/ui/api/history');
    const mine = hist.queues.find(s => s.namespace === ns && s.queue === q);
    clear(chartHost);
    chartHost.appendChild(lineChart(mine ? mine.points : [], { width: 900, height: 120, axes: true, class: 'chart chart-small' }));
  });
  if (!canList) {
    $main.appendChild(el('div', { class: 'notice', text: 'Your token may not list this queue\'s invocations.' }));
    return;
  }
  const figHost = el('div', { id: 'figures' }, el('p', { class: 'muted loading', text: 'Loading…' }));
  const waitHost = el('div', { id: 'waiting' }, el('p', { class: 'muted loading', text: 'Loading…' }));
  $main.appendChild(el('div', { class: 'grid' },
    el('div', { class: 'card' }, el('h2', { text: 'Run and wait times, throughput (last hour)' }), figHost),
    el('div', { class: 'card' }, el('h2', { text: 'Queued: ready, delayed, retrying' }), waitHost)));
  every(10000, async () => drawFigures(figHost, waitHost,
    await api('GET', '/ui/api/queue?' + new URLSearchParams({ namespace: ns, queue: q }))));

  // Filters live in the hash, so a filtered page can be linked and reloaded.
  const stateSel = el('select', { id: 'f-state' }, el('option', { value: '' }, 'all states'), STATES.map(s => el('option', { value: s, selected: query.get('state') === s }, s)));
  const keyIn = el('input', { id: 'f-key', placeholder: 'key prefix', value: query.get('key') || '' });
  const fromIn = el('input', { id: 'f-from', type: 'datetime-local', step: 1, value: query.get('from') || '' });
  const toIn = el('input', { id: 'f-to', type: 'datetime-local', step: 1, value: query.get('to') || '' });
  const apply = () => {
    const p = new URLSearchParams();
    if (stateSel.value) p.set('state', stateSel.value);
    if (keyIn.value) p.set('key', keyIn.value);
    if (fromIn.value) p.set('from', fromIn.value);
    if (toIn.value) p.set('to', toIn.value);
    location.hash = '#/q/' + seg(ns) + '/' + seg(q) + (p.toString() ? '?' + p : '');
  };
  $main.appendChild(el('form', { class: 'row card', id: 'filters', onsubmit: ev => { ev.preventDefault(); apply(); } },
    el('label', {}, 'State', stateSel), el('label', {}, 'Key prefix', keyIn),
    el('label', {}, 'Created from (UTC)', fromIn), el('label', {}, 'Created to (UTC)', toIn),
    el('button', { class: 'primary', type: 'submit', id: 'f-apply' }, 'Apply')));
  payloadSearch(ns, q, query);

  const actions = el('div', { class: 'actions', id: 'bulk' });
  const tableHost = el('div', { id: 'list' });
  const pager = el('div', { class: 'pager' });
  $main.appendChild(actions);
  $main.appendChild(tableHost);
  $main.appendChild(pager);

  const fromMS = query.get('from') ? Date.parse(query.get('from') + 'Z') : NaN;
  const toMS = query.get('to') ? Date.parse(query.get('to') + 'Z') : NaN;
  const fromID = isNaN(fromMS) ? '' : ulidAt(fromMS, false);
  const cursors = [isNaN(toMS) ? '' : ulidAt(toMS, true)]; // the cursor of each page seen
  let pageNo = 0, rows = [];
  const selected = new Set();

  const load = async () => {
    const p = new URLSearchParams({ limit: '50' });
    if (query.get('state')) p.set('state', query.get('state'));
    if (query.get('key')) p.set('key_prefix', query.get('key'));
    if (cursors[pageNo]) p.set('after', cursors[pageNo]);
    let l;
    try {
      l = await api('GET', base + '/invocations?' + p);
    } catch (err) {
      if (isAbort(err)) return;
      clear(tableHost);
      tableHost.appendChild(errorBox('Cannot list invocations', err, 'This queue'));
      return;
    }
    rows = l.invocations;
    let next = l.next;
    if (fromID) {
      const keep = rows.filter(r => r.id >= fromID);
      if (keep.length < rows.length) next = '';
      rows = keep;
    }
    cursors[pageNo + 1] = next;
    selected.clear();
    drawTable();
    clear(pager);
    pager.appendChild(el('button', { id: 'page-prev', disabled: pageNo === 0, onclick: () => { pageNo--; load(); } }, '← Newer'));
    pager.appendChild(el('span', { class: 'muted', text: 'page ' + (pageNo + 1) }));
    pager.appendChild(el('button', { id: 'page-next', disabled: !next, onclick: () => { pageNo++; load(); } }, 'Older →'));
    pager.appendChild(el('button', { id: 'page-refresh', onclick: () => load() }, 'Refresh'));
  };

  const drawActions = () => {
    clear(actions);
    if (!canSubmit) return;
    const pick = st => rows.filter(r => selected.has(r.id) && st.includes(r.state));
    const bulk = (label, id, states, verb, fn) => {
      const n = pick(states).length;
      actions.appendChild(el('button', { class: 'danger', id, disabled: n === 0, onclick: async () => {
        const targets = pick(states);
        if (!await confirmDialog(verb + ' ' + targets.length + ' invocation' + (targets.length === 1 ? '' : 's') + '?', verb)) return;
        let ok = 0, failed = 0;
        for (const r of targets) {
          try { if (await fn(r)) ok++; } catch (err) { if (isAbort(err)) return; failed++; }
        }
        toast(verb + ': ' + ok + ' done' + (failed ? ', ' + failed + ' failed' : ''));
        await load();
      } }, label + ' (' + n + ')'));
    };
    bulk('Cancel queued', 'bulk-cancel', ['queued'], 'Cancel', r => api('POST', '/v1/invocations/' + seg(r.id) + '/cancel').then(x => x.changed));
    bulk('Retry failed', 'bulk-retry', ['failed', 'timeout', 'killed', 'cancelled'], 'Retry', r => resubmit(r.id).then(() => true));
    bulk('Kill running', 'bulk-kill', ['running'], 'Kill', r => api('POST', '/v1/invocations/' + seg(r.id) + '/kill').then(x => x.changed));
    actions.appendChild(el('span', { class: 'muted', text: selected.size + ' selected' }));
  };

  const drawTable = () => {
    clear(tableHost);
    if (rows.length === 0) {
      tableHost.appendChild(el('div', { class: 'notice', id: 'empty' }, 'No invocations match.'));
      drawActions();
      return;
    }
    const all = el('input', { type: 'checkbox', id: 'select-all', title: 'select the page', onchange: ev => {
      for (const r of rows) ev.target.checked ? selected.add(r.id) : selected.delete(r.id);
      for (const c of tableHost.querySelectorAll('input.pick')) c.checked = ev.target.checked;
      drawActions();
    } });
    tableHost.appendChild(el('div', { class: 'table-wrap' }, el('table', { id: 'inv-table' },
      el('thead', {}, el('tr', {}, canSubmit ? el('th', {}, all) : null,
        ['id', 'key', 'state', 'attempt', 'priority', 'created', 'finished', 'worker', 'error'].map(h => el('th', { text: h })))),
      el('tbody', {}, rows.map(r => el('tr', { 'data-id': r.id },
        canSubmit ? el('td', {}, el('input', { type: 'checkbox', class: 'pick', 'data-id': r.id, onchange: ev => {
          ev.target.checked ? selected.add(r.id) : selected.delete(r.id);
          drawActions();
        } })) : null,
        el('td', { class: 'mono' }, el('a', { href: '#/i/' + seg(r.id) }, r.id)),
        el('td', { class: 'mono trunc key', title: r.key || '', text: r.key || '' }),
        el('td', {}, badge(r.state)),
        el('td', { class: 'num', text: r.attempt + '/' + r.max_attempts }),
        el('td', { class: 'num', text: String(r.priority) }),
        el('td', { class: 'mono', text: fmtTime(r.created_at) }),
        el('td', { class: 'mono', text: fmtTime(r.finished_at) }),
        el('td', { class: 'mono trunc', text: r.worker || '' }),
        el('td', { class: 'trunc', title: r.error ? r.error.message : '', text: r.error ? r.error.type + ': ' + r.error.message : '' })))))));
    drawActions();
  };
  await load();
}

// drawFigures shows /ui/api/queue: run and wait time percentiles and throughput by outcome
// over the last hour, and the queued invocations split into ready, delayed and retrying
// (with the due times of those waiting).
function drawFigures(figHost, waitHost, f) {
  const secs = v => v === undefined || v === null ? '—' : v < 1 ? (v * 1000).toFixed(0) + ' ms' : v < 120 ? v.toFixed(1) + ' s' : fmtAge(v * 1000);
  clear(figHost);
  const pct = (label, id, p) => el('tr', { id }, el('th', { text: label }), el('td', { class: 'num', 'data-p': 'p50', text: secs(p.p50) }),
    el('td', { class: 'num', 'data-p': 'p95', text: secs(p.p95) }), el('td', { class: 'num', text: String(p.count) }));
  figHost.appendChild(el('table', { class: 'figures' },
    el('thead', {}, el('tr', {}, ['', 'p50', 'p95', 'jobs'].map(h => el('th', { class: h ? 'num' : '', text: h })))),
    el('tbody', {}, pct('run time', 'fig-run', f.run_time), pct('wait time', 'fig-wait', f.wait_time))));
  const perHour = el('div', { class: 'counts', id: 'throughput' });
  for (const s of TERMINAL) perHour.appendChild(el('span', { class: 'badge st-' + s, 'data-throughput': s }, s + ' ' + fmtNum(f.throughput[s]) + '/h'));
  figHost.appendChild(el('h3', { text: 'Finished in the last hour, by outcome' }));
  figHost.appendChild(perHour);
  figHost.appendChild(el('p', { class: 'muted', id: 'fig-note', text: 'From the newest ' + f.sample_limit + ' invocations of each finished state (' +
    fmtNum(f.sampled) + ' read' + (f.capped ? '; more exist, so these are the newest only' : '') + '). Wait time: from claimable to started.' }));
  clear(waitHost);
  const split = el('div', { class: 'counts', id: 'queued-split' },
    el('span', { class: 'badge st-queued', 'data-split': 'ready' }, 'ready ' + fmtNum(f.ready)),
    el('span', { class: 'badge st-delayed', 'data-split': 'delayed' }, 'delayed ' + fmtNum(f.delayed)),
    el('span', { class: 'badge st-retrying', 'data-split': 'retrying' }, 'retrying ' + fmtNum(f.retrying)));
  waitHost.appendChild(split);
  waitHost.appendChild(el('p', { class: 'muted', text: 'Of the oldest ' + fmtNum(f.queued) + ' queued' + (f.queued_capped ? ' (the first ' + f.queued_limit + ' read; more exist)' : '') + '.' }));
  if (!f.waiting.length) {
    waitHost.appendChild(el('p', { class: 'muted', id: 'waiting-empty', text: 'Nothing delayed or in retry backoff.' }));
    return;
  }
  const now = Date.parse(f.now);
  waitHost.appendChild(el('div', { class: 'table-wrap' }, el('table', { id: 'waiting-table' },
    el('thead', {}, el('tr', {}, ['id', 'key', 'why', 'attempt', 'due', 'in', 'last error'].map(h => el('th', { text: h })))),
    el('tbody', {}, f.waiting.map(w => el('tr', { 'data-id': w.id, 'data-kind': w.kind },
      el('td', { class: 'mono' }, el('a', { href: '#/i/' + seg(w.id) }, w.id)),
      el('td', { class: 'mono trunc', text: w.key || '' }),
      el('td', {}, el('span', { class: 'badge st-' + w.kind, text: w.kind })),
      el('td', { class: 'num', text: String(w.attempt) }),
      el('td', { class: 'mono', 'data-due': w.due_at, text: fmtTime(w.due_at) }),
      el('td', { class: 'num', text: fmtAge(Date.parse(w.due_at) - now) }),
      el('td', { class: 'trunc', text: w.error ? w.error.type + ': ' + firstLine(w.error.message) : '' })))))));
}

function firstLine(s) { const i = String(s || '').indexOf('\n'); return i < 0 ? String(s || '') : String(s).slice(0, i) + ' …'; }

// payloadSearch is the queue page's search by a JSON path in the payload
// (/ui/api/search): it reads a bounded slice of the queue per request (the newest 200 from
// the cursor) and says so; "Scan older" continues from where it stopped.
function payloadSearch(ns, q, query) {
  const pathIn = el('input', { id: 's-path', placeholder: 'payload path, e.g. input.user', value: query.get('path') || '' });
  const valueIn = el('input', { id: 's-value', placeholder: 'equals (JSON or text; empty: has the path)', value: query.get('value') || '' });
  const results = el('div', { id: 'search-results' });
  let found = [];
  const run = async after => {
    if (!pathIn.value) { clear(results); return; }
    const p = new URLSearchParams({ namespace: ns, queue: q, path: pathIn.value });
    if (valueIn.value) p.set('value', valueIn.value);
    if (query.get('state')) p.set('state', query.get('state'));
    if (query.get('key')) p.set('key_prefix', query.get('key'));
    if (after) p.set('after', after); else found = [];
    clear(results);
    results.appendChild(el('p', { class: 'muted loading', id: 's-loading', text: 'Searching…' }));
    let r;
    try { r = await api('GET', '/ui/api/search?' + p); } catch (err) {
      if (isAbort(err)) return;
      clear(results);
      results.appendChild(errorBox('Cannot search', err, 'This queue'));
      return;
    }
    found = found.concat(r.invocations);
    clear(results);
    results.appendChild(el('p', { id: 's-summary', text: found.length + ' match' + (found.length === 1 ? '' : 'es') + ' in the ' + r.scanned + ' invocations read' + (after ? ' (this page)' : '') + '.' }));
    if (found.length) {
      results.appendChild(el('div', { class: 'table-wrap' }, el('table', { id: 's-table' },
        el('thead', {}, el('tr', {}, ['id', 'key', 'state', 'created'].map(h => el('th', { text: h })))),
        el('tbody', {}, found.map(i => el('tr', { 'data-id': i.id },
          el('td', { class: 'mono' }, el('a', { href: '#/i/' + seg(i.id) }, i.id)),
          el('td', { class: 'mono trunc', text: i.key || '' }), el('td', {}, badge(i.state)),
          el('td', { class: 'mono', text: fmtTime(i.created_at) })))))));
    }
    if (r.next) results.appendChild(el('button', { id: 's-more', onclick: () => run(r.next) }, 'Scan older'));
  };
  $main.appendChild(el('div', { class: 'card', id: 'search' }, el('h2', { text: 'Search payloads' }),
    el('form', { class: 'row', id: 's-form', onsubmit: ev => { ev.preventDefault(); run(''); } },
      el('label', {}, 'JSON path', pathIn), el('label', {}, 'Value', valueIn),
      el('button', { class: 'primary', type: 'submit', id: 's-run' }, 'Search')),
    el('p', { class: 'muted', text: 'Reads the newest 200 invocations per search (with the state and key prefix filters above), not the whole queue; continue with "Scan older".' }),
    results));
}

// resubmit submits a copy of invocation id (payload, priority, max attempts, attempt
// timeout, metadata plus retried_from), without its key (the key names the original).
async function resubmit(id) {
  const inv = await api('GET', '/v1/invocations/' + seg(id));
  const meta = Object.assign({}, inv.metadata || {}, { retried_from: inv.id });
  const body = { payload: inv.payload === undefined ? null : inv.payload, priority: inv.priority, max_attempts: inv.max_attempts, metadata: meta };
  if (inv.attempt_timeout) body.attempt_timeout = inv.attempt_timeout;
  return api('POST', '/v1/namespaces/' + seg(inv.namespace) + '/queues/' + seg(inv.queue) + '/invocations', body);
}

function renderAdmission(host, base, a, canAdmin) {
  clear(host);
  host.appendChild(el('div', { id: 'admission-view' }, admissionSummary(a)));
  if (!canAdmin) return;
  const f = (name, label, v, type) => el('label', {}, label, el('input', { id: 'adm-' + name, name, type: type || 'number', min: 0, step: 'any', value: v === undefined || v === null ? '' : v }));
  const onFull = el('select', { id: 'adm-on_full' }, ['reject', 'block'].map(o => el('option', { value: o, selected: a && a.on_full === o }, o)));
  const msg = el('div', { id: 'adm-msg' });
  const form = el('form', { class: 'row', id: 'admission-form', hidden: true, onsubmit: async ev => {
    ev.preventDefault();
    // The form edits these four fields; the rest of the block (concurrency limits, key
    // weights and rates) is sent back as it is, so saving never drops it.
    const body = Object.assign({}, a || {});
    for (const k of ['max_depth', 'on_full', 'rate_limit', 'burst', 'deadline_cutoff']) delete body[k];
    for (const k of ['max_depth', 'rate_limit', 'burst', 'deadline_cutoff']) {
      const v = form.querySelector('#adm-' + k).value;
      if (v !== '') body[k] = Number(v);
    }
    if (body.max_depth) body.on_full = onFull.value;
    clear(msg);
    try {
      const res = await api('PUT', base + '/admission', body);
      toast('Admission saved');
      renderAdmission(host, base, res.admission, canAdmin);
    } catch (err) {
      if (!isAbort(err)) msg.appendChild(errorBox('Not saved', err, 'This queue'));
    }
  } },
  f('max_depth', 'Max depth', a && a.max_depth), el('label', {}, 'On full', onFull),
  f('rate_limit', 'Rate limit /s', a && a.rate_limit), f('burst', 'Burst', a && a.burst),
  f('deadline_cutoff', 'Deadline cutoff s', a && a.deadline_cutoff),
  el('button', { class: 'primary', type: 'submit', id: 'adm-save' }, 'Save'));
  const edit = el('button', { id: 'adm-edit', onclick: () => { form.hidden = false; edit.hidden = true; } }, 'Edit');
  const actions = el('div', { class: 'actions' }, edit);
  if (a) {
    actions.appendChild(el('button', { class: 'danger', id: 'adm-remove', onclick: async () => {
      if (!await confirmDialog('Remove the admission block of this queue?', 'Remove')) return;
      try { await api('DELETE', base + '/admission'); toast('Admission removed'); renderAdmission(host, base, null, canAdmin); } catch (err) { if (!isAbort(err)) msg.appendChild(errorBox('Not removed', err, 'This queue')); }
    } }, 'Remove'));
  }
  host.appendChild(actions);
  host.appendChild(form);
  host.appendChild(msg);
}

// ---------- invocation page ----------

// fmtRequirement shows a placement requirement as the CLI's --requires does
// (cpus=8,memory=…,gpus=1,gpu_type=a100,label.zone=east).
function fmtRequirement(r) {
  const out = [];
  if (r.cpus_milli) out.push('cpus=' + r.cpus_milli / 1000);
  if (r.memory_bytes) out.push('memory=' + fmtBytes(r.memory_bytes));
  if (r.gpus) out.push('gpus=' + r.gpus);
  if (r.gpu_type) out.push('gpu_type=' + r.gpu_type);
  for (const k of Object.keys(r.labels || {}).sort()) out.push('label.' + k + '=' + r.labels[k]);
  return out.join(',');
}

// runCard shows what an invocation asks of its worker and what it runs (docs/fabric.md):
// its requirement and shape, and the compute mode's declaration carried in its metadata —
// mode, host key, code digest, function, git context. null when it has none of them.
function runCard(inv) {
  const md = inv.metadata || {};
  const rows = [];
  if (inv.requirement) rows.push(['requires', el('span', { class: 'mono', id: 'inv-requirement', text: fmtRequirement(inv.requirement) })]);
  if (inv.shape) rows.push(['shape', el('span', { class: 'mono', id: 'inv-shape', text: inv.shape })]);
  if (md['lakeshore.mode']) rows.push(['mode', el('span', { id: 'inv-mode', text: md['lakeshore.mode'] })]);
  if (md['lakeshore.host_key']) rows.push(['host key', el('span', { class: 'mono', id: 'inv-host-key', text: md['lakeshore.host_key'] })]);
  if (md['lakeshore.code']) rows.push(['code', el('span', { class: 'mono', id: 'inv-code', title: md['lakeshore.code'], text: md['lakeshore.code'].slice(0, 12) + '…' })]);
  if (md['lakeshore.function']) rows.push(['function', el('span', { class: 'mono', id: 'inv-function', text: md['lakeshore.function'] })]);
  if (md['lakeshore.git']) {
    let g = null;
    try { g = JSON.parse(md['lakeshore.git']); } catch (e) { g = null; }
    if (g && typeof g === 'object') {
      const text = (g.branch || '(detached)') + ' @ ' + String(g.commit || '(no commit)').slice(0, 12) + (g.dirty ? ' (dirty)' : '');
      rows.push(['git', el('span', { class: 'mono', id: 'inv-git', text })]);
    }
  }
  if (!rows.length) return null;
  return el('div', { id: 'inv-run' }, el('h2', { text: 'Run' }),
    el('dl', { class: 'props' }, rows.map(([k, v]) => [el('dt', { text: k }), el('dd', {}, v)])));
}

const TERMINAL = ['succeeded', 'failed', 'cancelled', 'killed', 'timeout'];

async function invocationPage(parts) {
  const id = parts[0] || '';
  $main.appendChild(el('h1', {}, 'Invocation ', el('span', { class: 'mono', id: 'inv-id', text: id })));
  let inv, qs;
  try {
    inv = await api('GET', '/v1/invocations/' + seg(id));
    qs = await queueSession(inv.namespace, inv.queue);
  } catch (err) {
    if (isAbort(err)) return;
    $main.appendChild(errorBox('Cannot show this invocation', err, 'This invocation'));
    return;
  }
  const canSubmit = canOn(qs, 'submit');
  const head = el('div', { class: 'card', id: 'inv-head' });
  const bodies = el('div', { class: 'grid' });
  $main.appendChild(head);
  $main.appendChild(bodies);
  const draw = () => {
    clear(head);
    const props = [
      ['state', badge(inv.state)],
      ['queue', el('a', { href: '#/q/' + seg(inv.namespace) + '/' + seg(inv.queue) }, inv.namespace + '/' + inv.queue)],
      ['key', el('span', { class: 'mono', id: 'inv-key', text: inv.key || '—' })],
      ['attempt', inv.attempt + ' of ' + inv.max_attempts],
      ['priority', String(inv.priority)],
      ['attempt timeout', inv.attempt_timeout ? inv.attempt_timeout + ' s' : '—'],
      ['created', fmtTime(inv.created_at)], ['available at', fmtTime(inv.available_at) || '—'],
      ['started', fmtTime(inv.started_at) || '—'], ['finished', fmtTime(inv.finished_at) || '—'],
      ['deadline', fmtTime(inv.deadline) || '—'], ['lease expires', fmtTime(inv.lease_expires_at) || '—'],
      ['worker', el('span', { class: 'mono', text: inv.worker || '—' })],
    ];
    // Placement: what it waits for, and whether a live worker of its queue offers it
    // (capable_workers: the server's count; docs/semantics.md "Placement").
    if (inv.requirement) props.push(['requires', el('span', { class: 'mono', id: 'inv-requires', text: JSON.stringify(inv.requirement) })]);
    if (inv.capable_workers !== undefined) {
      props.push(['workers', el('span', { id: 'inv-capable', class: inv.capable_workers === 0 ? 'error' : '',
        text: inv.capable_workers === 0 ? 'no capable worker: no live worker of the queue offers this' : inv.capable_workers + ' live workers can run it' })]);
    }
    head.appendChild(el('dl', { class: 'props' }, props.map(([k, v]) => [el('dt', { text: k }), el('dd', {}, v)])));
    if (inv.error) {
      // Tracebacks keep their lines: the message is preformatted, not one paragraph.
      head.appendChild(el('div', { class: 'error', id: 'inv-error' }, el('strong', { text: 'Error of attempt ' + inv.error.attempt + ': ' + inv.error.type }),
        el('pre', { class: 'traceback', id: 'inv-traceback', text: inv.error.message })));
    }
    if (canSubmit) {
      const acts = el('div', { class: 'actions' });
      if (inv.state === 'queued') acts.appendChild(el('button', { class: 'danger', id: 'inv-cancel', onclick: () => act('cancel') }, 'Cancel'));
      if (inv.state === 'running') acts.appendChild(el('button', { class: 'danger', id: 'inv-kill', onclick: () => act('kill') }, 'Kill'));
      if (TERMINAL.includes(inv.state) && inv.state !== 'succeeded') acts.appendChild(el('button', { id: 'inv-retry', onclick: retry }, 'Retry (resubmit)'));
      head.appendChild(acts);
    }
    const run = runCard(inv);
    if (run) head.appendChild(run);
    clear(bodies);
    bodies.appendChild(el('div', { class: 'card' }, el('h2', { text: 'Payload' }), jsonBlock(inv.payload, 'payload')));
    bodies.appendChild(el('div', { class: 'card' }, el('h2', { text: 'Result' }),
      inv.state === 'succeeded' ? jsonBlock(inv.result, 'result') : el('p', { class: 'muted', text: 'No result yet.' }),
      inv.metadata ? [el('h2', { text: 'Metadata' }), jsonBlock(inv.metadata, 'metadata')] : null));
  };
  const act = async verb => {
    if (!await confirmDialog((verb === 'kill' ? 'Kill' : 'Cancel') + ' this invocation?', verb === 'kill' ? 'Kill' : 'Cancel it')) return;
    try {
      const r = await api('POST', '/v1/invocations/' + seg(id) + '/' + verb);
      toast(r.changed ? (verb === 'kill' ? 'Killed' : 'Cancelled') : 'Nothing changed (already finished)');
      inv = await api('GET', '/v1/invocations/' + seg(id));
      draw();
    } catch (err) { if (!isAbort(err)) head.appendChild(errorBox('Not done', err, 'This invocation')); }
  };
  const retry = async () => {
    if (!await confirmDialog('Submit a copy of this invocation?', 'Resubmit')) return;
    try {
      const r = await resubmit(id);
      location.hash = '#/i/' + seg(r.id);
    } catch (err) { if (!isAbort(err)) head.appendChild(errorBox('Not resubmitted', err, 'This invocation')); }
  };
  draw();
  every(2000, async () => {
    if (TERMINAL.includes(inv.state)) return;
    const next = await api('GET', '/v1/invocations/' + seg(id));
    if (next.state !== inv.state || next.attempt !== inv.attempt || next.worker !== inv.worker) { inv = next; draw(); }
  });

  // The journal, live.
  const status = el('span', { class: 'live off', id: 'live-dot' });
  const tbody = el('tbody', { id: 'frames' });
  const empty = el('p', { class: 'muted', id: 'frames-empty', text: 'No frames yet.' });
  $main.appendChild(el('h2', {}, status, 'Journal'));
  $main.appendChild(el('div', { class: 'table-wrap' }, el('table', {},
    el('thead', {}, el('tr', {}, ['seq', 'kind', 'attempt', 'time', 'value'].map(h => el('th', { text: h })))), tbody)));
  $main.appendChild(empty);
  const onFrame = f => {
    empty.hidden = true;
    tbody.appendChild(el('tr', { 'data-seq': f.seq },
      el('td', { class: 'num', text: String(f.seq) }), el('td', { text: f.kind }), el('td', { class: 'num', text: f.attempt ? String(f.attempt) : '' }),
      el('td', { class: 'mono', text: fmtTime(f.time) }), el('td', {}, compactValue(f.value))));
  };
  streamFrames('/v1/invocations/' + seg(id) + '/stream', -1, onFrame, on => status.classList.toggle('off', !on)).catch(err => {
    if (!isAbort(err)) $main.appendChild(errorBox('The journal stream stopped', err, 'This journal'));
  });
}

// ---------- workers ----------

async function workersPage() {
  $main.appendChild(el('h1', { text: 'Workers' }));
  const host = el('div', { id: 'workers' });
  $main.appendChild(host);
  every(5000, async () => {
    const ws = (await api('GET', '/v1/workers?seen_within=300')).workers;
    // Running jobs by worker: one page of running invocations per queue that has workers.
    const running = new Map();
    const queues = new Set();
    for (const w of ws) for (const q of w.queues || []) queues.add(w.namespace + '\u0000' + q);
    await Promise.all([...queues].map(async k => {
      const [ns, q] = k.split('\u0000');
      try {
        const l = await api('GET', '/v1/namespaces/' + seg(ns) + '/queues/' + seg(q) + '/invocations?state=running&limit=200');
        for (const inv of l.invocations) {
          const key = ns + '\u0000' + inv.worker;
          if (!running.has(key)) running.set(key, []);
          running.get(key).push(inv);
        }
      } catch (err) { if (!(err instanceof APIError && (err.code === 'forbidden' || err.code === 'not_found'))) throw err; }
    }));
    clear(host);
    if (ws.length === 0) {
      host.appendChild(el('div', { class: 'notice', id: 'no-workers' }, 'No worker seen in the last 5 minutes.'));
      return;
    }
    const now = Date.now();
    host.appendChild(el('div', { class: 'table-wrap' }, el('table', { id: 'worker-table' },
      el('thead', {}, el('tr', {}, ['worker', 'status', 'namespace', 'host', 'pid', 'queues', 'jobs held (age)', 'started', 'last heartbeat'].map(h => el('th', { text: h })))),
      el('tbody', {}, ws.map(w => {
        const jobs = (running.get(w.namespace + '\u0000' + w.id) || []).sort((a, b) => Date.parse(a.started_at) - Date.parse(b.started_at));
        const st = workerStatus(w, jobs, now);
        return el('tr', { 'data-worker': w.id, 'data-status': st.status, class: st.status === 'alive' ? '' : 'stale' },
          el('td', { class: 'mono', text: w.id }),
          el('td', {}, el('span', { class: 'badge w-' + st.status, 'data-worker-status': st.status, title: st.why, text: st.status }),
            st.why ? el('div', { class: 'muted small', text: st.why }) : null),
          el('td', { text: w.namespace }), el('td', { text: w.host }),
          el('td', { class: 'num', text: String(w.pid) }),
          el('td', {}, (w.queues || []).map((q, i) => [i ? ', ' : '', el('a', { href: '#/q/' + seg(w.namespace) + '/' + seg(q) }, q)])),
          el('td', { class: 'held' }, jobs.length ? jobs.slice(0, 10).map(j => el('div', { 'data-held': j.id },
            el('a', { class: 'mono', href: '#/i/' + seg(j.id) }, j.id.slice(-8)), ' ',
            el('span', { class: 'muted', 'data-age': j.id, text: fmtAge(now - Date.parse(j.started_at)) }))) : '—',
            jobs.length > 10 ? el('div', { class: 'muted', text: '+' + (jobs.length - 10) + ' more' }) : null),
          el('td', { class: 'mono', text: fmtTime(w.started_at) }),
          el('td', { text: fmtAge(now - Date.parse(w.last_seen)) + ' ago' }));
      })))));
    host.appendChild(el('p', { class: 'muted', text: 'A worker is stale when its last heartbeat is older than its lease (' + DEFAULT_LEASE_S +
      ' s unless its jobs hold longer leases): it most likely died, and its jobs return to the queue when their leases expire. Dead: it holds jobs whose leases have expired.' }));
  });
}

// DEFAULT_LEASE_S is the plane's default lease (plane.LeaseTTLDefault), in seconds.
const DEFAULT_LEASE_S = 30;

// workerStatus says whether worker w is alive, stale (its last heartbeat is older than its
// lease: the longest lease of the jobs it holds, else the default) or dead (it holds jobs
// whose leases have all expired).
function workerStatus(w, jobs, now) {
  const seen = Date.parse(w.last_seen);
  let lease = DEFAULT_LEASE_S * 1000;
  for (const j of jobs) if (j.lease_expires_at) lease = Math.max(lease, Date.parse(j.lease_expires_at) - seen);
  if (jobs.length && jobs.every(j => j.lease_expires_at && Date.parse(j.lease_expires_at) < now)) {
    return { status: 'dead', why: 'the leases of the ' + jobs.length + ' job' + (jobs.length === 1 ? '' : 's') + ' it holds have expired' };
  }
  if (now - seen > lease) return { status: 'stale', why: 'no heartbeat for ' + fmtAge(now - seen) + ', longer than its ' + fmtAge(lease) + ' lease' };
  return { status: 'alive', why: '' };
}

// ---------- schedules ----------

// schedulesPage lists the durable schedules the token covers (docs/semantics.md,
// "Schedules"): rule, queue, catch-up policy, last fire (linking its job), next fire and the
// ticks skipped because the queue was full (count, last one, why), with pause and resume.
// A page of 100 at a time (GET /v1/schedules pages by cursor), with a pager when there are
// more.
async function schedulesPage() {
  $main.appendChild(el('h1', { text: 'Schedules' }));
  const host = el('div', { id: 'schedules' });
  const pager = el('div', { class: 'pager', id: 'schedule-pager' });
  $main.appendChild(host);
  $main.appendChild(pager);
  const cursors = ['']; // the cursor of each page seen
  let pageNo = 0;
  const act = async (sc, verb) => {
    try {
      await api('POST', '/v1/namespaces/' + seg(sc.namespace) + '/schedules/' + seg(sc.name) + '/' + verb);
      route();
    } catch (err) { if (!isAbort(err)) toast(err.message); }
  };
  // Pause and resume need submit on the schedule's namespace (docs/http-api.md): the
  // buttons are shown to tokens that hold it, asked once per queue for this page.
  const sessions = new Map();
  const maySubmit = sc => {
    const k = sc.namespace + '/' + sc.queue;
    if (!sessions.has(k)) sessions.set(k, queueSession(sc.namespace, sc.queue).then(qs => canOn(qs, 'submit'), () => false));
    return sessions.get(k);
  };
  const load = async () => {
    const p = new URLSearchParams({ limit: '100' });
    if (cursors[pageNo]) p.set('after', cursors[pageNo]);
    const ans = await api('GET', '/v1/schedules?' + p);
    const list = ans.schedules;
    const next = ans.next || '';
    cursors[pageNo + 1] = next;
    const allowed = await Promise.all(list.map(maySubmit));
    clear(host);
    clear(pager);
    if (pageNo > 0 || next) {
      pager.appendChild(el('button', { id: 'sched-prev', disabled: pageNo === 0, onclick: () => { pageNo--; load(); } }, '← Previous'));
      pager.appendChild(el('span', { class: 'muted', text: 'page ' + (pageNo + 1) }));
      pager.appendChild(el('button', { id: 'sched-next', disabled: !next, onclick: () => { pageNo++; load(); } }, 'Next →'));
    }
    if (list.length === 0 && pageNo === 0 && !next) {
      host.appendChild(el('div', { class: 'notice', id: 'no-schedules' }, 'No schedule. Add one with: lakeshore schedule add NAME "0 3 * * *" --queue QUEUE'));
      return;
    }
    host.appendChild(el('div', { class: 'table-wrap' }, el('table', { id: 'schedule-table' },
      el('thead', {}, el('tr', {}, ['schedule', 'rule', 'queue', 'catch-up', 'last fire', 'next fire', 'skipped', ''].map(h => el('th', { text: h })))),
      el('tbody', {}, list.map((sc, i) => {
        const rule = sc.cron ? sc.cron + (sc.time_zone ? ' (' + sc.time_zone + ')' : '') : 'every ' + fmtAge(sc.every * 1000);
        return el('tr', { 'data-schedule': sc.namespace + '/' + sc.name },
          el('td', { text: sc.namespace + '/' + sc.name }),
          el('td', { class: 'mono', text: rule }),
          el('td', { class: 'sched-queue' }, [el('a', { href: '#/q/' + seg(sc.namespace) + '/' + seg(sc.queue) }, sc.queue),
            sc.concurrency_key ? el('div', { class: 'muted', text: 'key ' + sc.concurrency_key }) : '']),
          el('td', { text: sc.catch_up || 'once' }),
          el('td', {}, sc.last_fire ? [el('span', { class: 'mono', text: fmtTime(sc.last_fire) }), ' ',
            sc.last_id ? el('a', { class: 'mono', href: '#/i/' + seg(sc.last_id) }, sc.last_id.slice(-8)) : ''] : '—'),
          el('td', { class: 'mono', text: sc.paused ? 'paused' : fmtTime(sc.next_fire) }),
          el('td', { class: 'sched-skipped' }, sc.skipped
            ? [el('span', { class: 'mono', text: String(sc.skipped) + ' (last ' + fmtTime(sc.last_skip) + ')' }),
              el('div', { class: 'muted', text: sc.last_skip_reason || '' })]
            : '0'),
          el('td', {}, !allowed[i] ? ''
            : sc.paused
              ? el('button', { class: 'sched-resume', onclick: () => act(sc, 'resume') }, 'Resume')
              : el('button', { class: 'sched-pause', onclick: () => act(sc, 'pause') }, 'Pause')));
      })))));
  };
  every(5000, load);
}

// ---------- providers ----------

// LAUNCH_DEFAULTS are the values of a launch policy's members the API leaves out (zero:
// the plane's defaults, plane.LaunchPolicy.WithDefaults; durations in seconds). A test
// (TestLaunchDefaults) checks them against the plane's. max_workers is at least min_workers.
const LAUNCH_DEFAULTS = { "max_workers": 1, "jobs_per_worker": 1, "cooldown": 5, "idle_timeout": 60, "register_timeout": 120 };

// shellJoin quotes a command's arguments so that the line splits back the same (as the
// CLI's queue get prints it).
function shellJoin(argv) {
  return (argv || []).map(a => a !== '' && /^[A-Za-z0-9\-_./=:,@+%]+$/.test(a) ? a : "'" + a.replace(/'/g, "'\\''") + "'").join(' ');
}

// providersPage lists the queues with a provider (GET /v1/providers: the queues the token
// covers; docs/providers.md): the provider, its launch policy's limits and timers, the
// resources asked of each launch, the worker command and env names as the API answers a
// queue's own token (redacted=true: every value "xxxxx" and a URL's password hidden, even
// for the admin token: a screen is no place for HF_TOKEN), and the registered workers the
// provider launched for the queue (GET /v1/workers: provider and launch id, seen in the
// last minute) with the jobs each runs. Refreshed every 5 s.
async function providersPage() {
  $main.appendChild(el('h1', { text: 'Providers' }));
  const host = el('div', { id: 'providers' });
  $main.appendChild(host);
  every(5000, async () => {
    const [ps, ws] = await Promise.all([api('GET', '/v1/providers?redacted=true'), api('GET', '/v1/workers?seen_within=60')]);
    const list = ps.queues;
    clear(host);
    if (list.length === 0) {
      host.appendChild(el('div', { class: 'notice', id: 'no-providers' },
        'No queue with a provider your token can read. Attach one with: lakeshore queue set QUEUE --provider local --max-workers 4 --worker-command "…"'));
      return;
    }
    const now = Date.now();
    host.appendChild(el('div', { class: 'table-wrap' }, el('table', { id: 'provider-table' },
      el('thead', {}, el('tr', {}, ['queue', 'provider', 'workers', 'timers', 'resources', 'command', 'env', 'launched workers'].map(h => el('th', { text: h })))),
      el('tbody', {}, list.map(qp => {
        const pol = qp.provider.policy;
        const min = pol.min_workers || 0;
        const max = pol.max_workers || Math.max(LAUNCH_DEFAULTS.max_workers, min);
        const jobs = pol.jobs_per_worker || LAUNCH_DEFAULTS.jobs_per_worker;
        const secs = (v, k) => fmtAge((v || LAUNCH_DEFAULTS[k]) * 1000);
        const res = pol.resources || {};
        const asked = [res.cpus ? 'cpus=' + res.cpus : '', res.gpus ? 'gpus=' + res.gpus : '', res.memory_mb ? 'memory MiB=' + res.memory_mb : '',
          res.time_limit ? 'time limit ' + fmtAge(res.time_limit * 1000) : '', res.partition ? 'partition=' + res.partition : ''].filter(Boolean);
        const env = Object.keys(pol.env || {}).sort();
        const launched = ws.workers.filter(w => w.namespace === qp.namespace && w.launch_id && w.provider === qp.provider.name && (w.queues || []).includes(qp.queue));
        return el('tr', { 'data-provider': qp.namespace + '/' + qp.queue },
          el('td', {}, el('a', { href: '#/q/' + seg(qp.namespace) + '/' + seg(qp.queue) }, qp.namespace + '/' + qp.queue)),
          el('td', { class: 'mono', 'data-provider-name': '', text: qp.provider.name }),
          el('td', { 'data-limits': '' }, el('div', { text: min + '–' + max + ', ' + jobs + ' job' + (jobs === 1 ? '' : 's') + ' per worker' }),
            el('div', { class: 'muted small', text: 'scale-up ' + (pol.scale_up_step ? pol.scale_up_step + ' per tick' : 'no cap') +
              (pol.buffer ? ', buffer ' + pol.buffer + ' idle per shape' : '') })),
          el('td', { class: 'small', 'data-timers': '' }, el('div', { text: 'cooldown ' + secs(pol.cooldown, 'cooldown') }),
            el('div', { text: 'idle timeout ' + secs(pol.idle_timeout, 'idle_timeout') }),
            el('div', { text: 'register timeout ' + secs(pol.register_timeout, 'register_timeout') })),
          el('td', { 'data-resources': '', text: asked.length ? asked.join(' ') : 'provider defaults' }),
          el('td', { class: 'mono compact', 'data-command': '', text: shellJoin(pol.command) }),
          el('td', { class: 'mono' }, env.length ? env.map(k => el('div', { 'data-env': k }, k + '=' + pol.env[k])) : '—'),
          el('td', { 'data-launched': '' }, el('div', { text: launched.length + ' registered of at most ' + max }),
            launched.map(w => el('div', { class: 'small', 'data-launch': w.launch_id },
              el('span', { class: 'mono', text: w.launch_id }), ' ',
              el('span', { class: 'muted', text: w.running ? 'running ' + w.running + ' job' + (w.running === 1 ? '' : 's')
                : w.idle_since ? 'idle for ' + fmtAge(now - Date.parse(w.idle_since)) : 'idle' })))));
      })))));
    host.appendChild(el('p', { class: 'muted', text: 'Launched workers are the registered workers the provider launched for the queue, seen in the last minute; a launch not yet registered is the supervisor\'s to count. ' +
      'Env values show as the API answers them for your token: hidden (xxxxx) unless it is the server\'s admin token or an admin token of every queue of the namespace.' }));
  });
}

// ---------- topics ----------

async function topicsPage(parts, query) {
  $main.appendChild(el('h1', { text: 'Topics' }));
  const ns = el('input', { id: 't-ns', value: query.get('ns') || 'default', placeholder: 'namespace' });
  const q = el('input', { id: 't-queue', value: query.get('queue') || '', placeholder: 'queue' });
  const t = el('input', { id: 't-topic', value: query.get('topic') || '', placeholder: 'topic' });
  $main.appendChild(el('form', { class: 'row card', id: 'topic-form', onsubmit: ev => {
    ev.preventDefault();
    location.hash = '#/topics?' + new URLSearchParams({ ns: ns.value, queue: q.value, topic: t.value });
  } }, el('label', {}, 'Namespace', ns), el('label', {}, 'Queue', q), el('label', {}, 'Topic', t),
  el('button', { class: 'primary', type: 'submit', id: 't-open' }, 'Open')));
  if (!query.get('queue') || !query.get('topic')) {
    $main.appendChild(el('p', { class: 'muted', text: 'A topic belongs to a queue: name the namespace, queue and topic to follow its recent values live.' }));
    return;
  }
  const base = '/v1/namespaces/' + seg(query.get('ns') || 'default') + '/queues/' + seg(query.get('queue')) + '/topics/' + seg(query.get('topic'));
  const frames = async since => (await api('GET', base + '/frames?since=' + since + '&limit=1')).frames;
  // Find the last seq with a few indexed probes (seqs are dense from 0), then read the
  // last 50 frames: never the whole journal.
  let last = -1;
  try {
    if ((await frames(-1)).length) {
      let lo = 0, step = 1;
      while ((await frames(lo + step - 1)).length) { lo += step; step *= 2; }
      let hi = lo + step; // frames(lo-1) has a frame, frames(hi-1) has none: last in [lo, hi)
      while (hi - lo > 1) {
        const mid = Math.floor((lo + hi) / 2);
        if ((await frames(mid - 1)).length) lo = mid; else hi = mid;
      }
      last = lo;
    }
  } catch (err) {
    if (isAbort(err)) return;
    $main.appendChild(errorBox('Cannot read this topic', err, 'This topic'));
    return;
  }
  const status = el('span', { class: 'live off', id: 'live-dot' });
  const list = el('tbody', { id: 'topic-frames' });
  $main.appendChild(el('h2', {}, status, 'Recent values (newest first)'));
  $main.appendChild(el('div', { class: 'table-wrap' }, el('table', {},
    el('thead', {}, el('tr', {}, ['seq', 'kind', 'time', 'value'].map(h => el('th', { text: h })))), list)));
  const empty = el('p', { class: 'muted', id: 'frames-empty', text: 'No values yet.' });
  $main.appendChild(empty);
  const onFrame = f => {
    empty.hidden = true;
    list.insertBefore(el('tr', { 'data-seq': f.seq }, el('td', { class: 'num', text: String(f.seq) }), el('td', { text: f.kind }),
      el('td', { class: 'mono', text: fmtTime(f.time) }), el('td', {}, compactValue(f.value))), list.firstChild);
    while (list.childNodes.length > 200) list.removeChild(list.lastChild);
  };
  streamFrames(base + '/stream', Math.max(-1, last - 50), onFrame, on => status.classList.toggle('off', !on)).catch(err => {
    if (!isAbort(err)) $main.appendChild(errorBox('The topic stream stopped', err, 'This topic'));
  });
}

// ---------- data queues (served when the server has a data root) ----------

function fmtBytes(n) {
  n = n || 0;
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : String(n)) + ' ' + units[i];
}

function dataBase(ns, q) { return '/v1/namespaces/' + seg(ns) + '/data/' + seg(q); }

// dataUnavailable says so when the server serves no data queues.
function dataUnavailable(err) {
  if (err instanceof APIError && (err.code === 'not_implemented' || err.code === 'route_not_found')) {
    return el('div', { class: 'notice', id: 'no-data' }, 'This server serves no data queues (see lakeshore serve --data-dir).');
  }
  return null;
}

async function dataListPage(parts, query) {
  $main.appendChild(el('h1', { text: 'Data queues' }));
  // Namespaces: the one asked for, the token's own when it names one, and those of the
  // job queues the token can read.
  const names = new Set(['default']);
  if (session.namespace && !/[*?[]/.test(session.namespace)) names.add(session.namespace);
  try { for (const q of (await api('GET', '/v1/queues')).queues) names.add(q.namespace); } catch (err) { if (isAbort(err)) return; }
  const ns = query.get('ns') || [...names][0];
  names.add(ns);
  const pick = el('select', { id: 'd-ns', onchange: () => { location.hash = '#/data?ns=' + seg(pick.value); } },
    [...names].sort().map(n => el('option', { value: n, selected: n === ns }, n)));
  const other = el('input', { id: 'd-ns-other', placeholder: 'another namespace' });
  $main.appendChild(el('form', { class: 'row card', onsubmit: ev => { ev.preventDefault(); if (other.value) location.hash = '#/data?ns=' + seg(other.value); } },
    el('label', {}, 'Namespace', pick), el('label', {}, 'Other', other), el('button', { type: 'submit' }, 'Open')));
  const host = el('div', { id: 'data-queues' });
  $main.appendChild(host);
  every(5000, async () => {
    let list;
    try {
      list = await api('GET', '/v1/namespaces/' + seg(ns) + '/data');
    } catch (err) {
      if (isAbort(err)) return;
      clear(host);
      host.appendChild(dataUnavailable(err) || errorBox('Cannot list the data queues', err, 'This namespace'));
      return;
    }
    const stats = await Promise.all(list.queues.map(q => api('GET', dataBase(ns, q) + '/stats').catch(err => { if (isAbort(err)) throw err; return null; })));
    clear(host);
    if (list.queues.length === 0) {
      host.appendChild(el('div', { class: 'notice', id: 'no-data-queues' }, 'No data queue in namespace ' + ns + '.'));
      return;
    }
    host.appendChild(el('div', { class: 'table-wrap' }, el('table', { id: 'data-table' },
      el('thead', {}, el('tr', {}, ['data queue', 'records', 'partitions', 'tasks', 'fragments', 'size'].map((h, i) => el('th', { class: i ? 'num' : '', text: h })))),
      el('tbody', {}, list.queues.map((q, i) => {
        const st = stats[i];
        return el('tr', { 'data-queue': ns + '/' + q },
          el('td', {}, el('a', { href: '#/d/' + seg(ns) + '/' + seg(q) }, q)),
          el('td', { class: 'num', text: st ? fmtNum(st.len) : '—' }),
          el('td', { class: 'num', text: st ? String(Object.keys(st.partitions || {}).length) : '—' }),
          el('td', { class: 'num', text: st ? String(Object.keys(st.consumed_by_task || {}).length) : '—' }),
          el('td', { class: 'num', text: st ? String(st.fragments) : '—' }),
          el('td', { class: 'num', text: st ? fmtBytes(st.fragment_bytes) : '—' }));
      })))));
  });
}

async function dataQueuePage(parts, query) {
  const [ns, q] = parts;
  const base = dataBase(ns || '', q || '');
  $main.appendChild(el('h1', {}, el('a', { href: '#/data?ns=' + seg(ns || '') }, 'Data queues'), ' / ', el('span', { id: 'data-name', text: (ns || '') + '/' + (q || '') })));
  const top = el('div', { class: 'grid' });
  const partHost = el('div', { id: 'data-partitions' });
  const fieldsHost = el('div', { id: 'data-fields' });
  const recentHost = el('div', { id: 'data-recent' });
  const kvHost = el('div', { id: 'data-kv' });
  const msg = el('div');
  $main.appendChild(msg);
  $main.appendChild(top);
  const partition = query.get('partition') || 'default';
  every(3000, async () => {
    let st, schema;
    try {
      [st, schema] = await Promise.all([api('GET', base + '/stats'), api('GET', base + '/schema')]);
    } catch (err) {
      if (isAbort(err)) return;
      clear(msg); clear(top);
      msg.appendChild(dataUnavailable(err) || errorBox('Cannot show this data queue', err, 'This data queue'));
      return;
    }
    clear(msg);
    if (!top.firstChild) {
      $main.appendChild(el('h2', { text: 'Partitions and consumption' }));
      $main.appendChild(partHost);
      $main.appendChild(el('h2', { text: 'Fields (readiness over the partition\'s latest records)' }));
      $main.appendChild(fieldsHost);
      $main.appendChild(el('h2', { text: 'Latest records of partition ' + partition }));
      $main.appendChild(recentHost);
      $main.appendChild(el('h2', { text: 'KV keys' }));
      $main.appendChild(kvHost);
    }
    clear(top);
    const props = [['records', fmtNum(st.len)], ['next index', fmtNum(st.next_index)], ['cleared', fmtNum(st.cleared)],
      ['in the tail (not yet flushed)', fmtNum(st.tail_rows)], ['in fragments', fmtNum(st.fragment_rows)],
      ['fragments', st.fragments + ' (' + fmtBytes(st.fragment_bytes) + ')'], ['pending fragments', String(st.pending_fragments)],
      ['manifest version', String(st.manifest_version)], ['last flush', st.last_flush ? fmtTime(st.last_flush) + ' (' + (st.last_flush_duration || 0).toFixed(3) + ' s)' : '—']];
    top.appendChild(el('div', { class: 'card', id: 'data-stats' }, el('h2', { text: 'Storage' }),
      el('dl', { class: 'props' }, props.map(([k, v]) => [el('dt', { text: k }), el('dd', { text: v })]))));
    top.appendChild(el('div', { class: 'card' }, el('h2', { text: 'Activity (this server)' }),
      el('dl', { class: 'props' }, [['puts', st.puts], ['gets', st.gets], ['flushes', st.flushes], ['compactions', st.compactions], ['commits', st.commits]]
        .map(([k, v]) => [el('dt', { text: k }), el('dd', { text: fmtNum(v) })]))));

    // Partitions with their consumption by task, as progress bars.
    const parts = Object.entries(st.partitions || {}).sort();
    const byPart = new Map();
    for (const [k, n] of Object.entries(st.consumed_by_task || {})) {
      const i = k.indexOf('/');
      const p = i < 0 ? 'default' : k.slice(0, i), task = i < 0 ? k : k.slice(i + 1);
      if (!byPart.has(p)) byPart.set(p, []);
      byPart.get(p).push([task, n]);
    }
    clear(partHost);
    partHost.appendChild(parts.length === 0 ? el('p', { class: 'muted', text: 'No record yet.' }) :
      el('div', { class: 'table-wrap' }, el('table', { id: 'partition-table' },
        el('thead', {}, el('tr', {}, el('th', { text: 'partition' }), el('th', { class: 'num', text: 'records' }), el('th', { text: 'consumption by task' }))),
        el('tbody', {}, parts.map(([p, n]) => el('tr', { 'data-partition': p },
          el('td', {}, el('a', { href: '#/d/' + seg(ns) + '/' + seg(q) + '?partition=' + seg(p) }, p)),
          el('td', { class: 'num', text: fmtNum(n) }),
          el('td', {}, (byPart.get(p) || []).sort().map(([task, c]) => el('div', { class: 'consumption', 'data-task': task },
            el('span', { class: 'task', text: task }), el('progress', { max: Math.max(n, 1), value: Math.min(c, n) }),
            el('span', { class: 'muted', text: ' ' + fmtNum(c) + ' / ' + fmtNum(n) + (n ? ' (' + Math.round(100 * c / n) + '%)' : '') }))),
          (byPart.get(p) || []).length ? null : el('span', { class: 'muted', text: 'no task yet' }))))))));

    // The latest records of the partition (one bounded read), and each field's readiness
    // over them.
    let rows = [];
    if (st.next_index > 0) {
      const offset = Math.max(0, st.next_index - 50);
      try {
        rows = (await api('GET', base + '/records?offset=' + offset + '&limit=50&partition=' + seg(partition))).rows || [];
      } catch (err) { if (isAbort(err)) return; recentHost.replaceChildren(errorBox('Cannot read records', err, 'This partition')); }
    }
    clear(fieldsHost);
    fieldsHost.appendChild(schema.fields.length === 0 ? el('p', { class: 'muted', text: 'No field yet.' }) :
      el('div', { class: 'table-wrap' }, el('table', { id: 'field-table' },
        el('thead', {}, el('tr', {}, el('th', { text: 'field' }), el('th', { text: 'kind' }), el('th', { text: 'ready' }))),
        el('tbody', {}, schema.fields.map(f => {
          const have = rows.filter(r => r.fields && Object.prototype.hasOwnProperty.call(r.fields, f.name)).length;
          return el('tr', { 'data-field': f.name }, el('td', { class: 'mono', text: f.name }), el('td', { class: 'mono', text: f.kind }),
            el('td', {}, el('progress', { max: Math.max(rows.length, 1), value: have }),
              el('span', { class: 'muted', text: ' ' + have + ' / ' + rows.length })));
        })))));
    clear(recentHost);
    recentHost.appendChild(rows.length === 0 ? el('p', { class: 'muted', text: 'No record in this partition among the latest 50.' }) :
      el('div', { class: 'table-wrap' }, el('table', { id: 'record-table' },
        el('thead', {}, el('tr', {}, el('th', { class: 'num', text: 'index' }), el('th', { text: 'fields' }))),
        el('tbody', {}, rows.slice().reverse().map(r => el('tr', { 'data-index': r.index },
          el('td', { class: 'num', text: String(r.index) }), el('td', {}, compactValue(r.fields))))))));

    // KV keys (the first 200).
    let kv = [];
    try { kv = (await api('GET', base + '/kv?partition=' + seg(partition))).entries || []; } catch (err) { if (isAbort(err)) return; }
    clear(kvHost);
    kvHost.appendChild(kv.length === 0 ? el('p', { class: 'muted', text: 'No key in this partition.' }) :
      el('div', { class: 'table-wrap' }, el('table', { id: 'kv-table' },
        el('thead', {}, el('tr', {}, ['key', 'index', 'tags'].map(h => el('th', { text: h })))),
        el('tbody', {}, kv.slice(0, 200).map(k => el('tr', { 'data-key': k.key },
          el('td', { class: 'mono', text: k.key }), el('td', { class: 'num', text: String(k.index) }),
          el('td', {}, k.tags && Object.keys(k.tags).length ? compactValue(k.tags) : '')))))));
    if (kv.length > 200) kvHost.appendChild(el('p', { class: 'muted', text: (kv.length - 200) + ' more keys not shown.' }));
  });
}

// ---------- start ----------

boot();
