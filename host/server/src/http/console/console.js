// The ebb browser console: SQL, tables, plugins and handlers over the
// /v1 HTTP API of the server that serves this file. No framework, no build
// step; works under the server's Content-Security-Policy (no inline code or
// style). User data only ever reaches the page through textContent.
'use strict';

const TOKEN_KEY = 'ebb.token'; // sessionStorage only: never persisted
const HISTORY_KEY = 'ebb.history'; // localStorage
const HISTORY_MAX = 100;
const STREAM_DISPLAY_LIMIT = 10000;
const CHART_MAX_ROWS = 50;
const DEAD_LETTER_PAGE = 50;
const VIEWS = ['query', 'tables', 'plugins', 'handlers'];
const NUMERIC_TYPES = new Set(['integer', 'float', 'real', 'double']);
const SVG_NS = 'http://www.w3.org/2000/svg';

const $ = (id) => document.getElementById(id);

/** Creates an element; `props` may hold className, text, title, type,
 * href, hidden; children are nodes or strings (added as text). */
function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  if (props.className) node.className = props.className;
  if (props.text !== undefined) node.textContent = String(props.text);
  if (props.title) node.title = props.title;
  if (props.type) node.type = props.type;
  if (props.href) node.href = props.href;
  if (props.hidden) node.hidden = true;
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(typeof child === 'string' ? document.createTextNode(child) : child);
  }
  return node;
}

function svg(tag, attrs = {}) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
  return node;
}

function formatBytes(n) {
  if (typeof n !== 'number') return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return i === 0 ? `${n} B` : `${n.toFixed(1)} ${units[i]}`;
}

function formatCount(n) {
  return typeof n === 'number' ? n.toLocaleString('en-US') : '—';
}

function formatMs(ms) {
  if (ms === null || ms === undefined) return '—';
  if (ms < 1000) return `${ms} ms`;
  if (ms < 120000) return `${(ms / 1000).toFixed(1)} s`;
  return `${(ms / 60000).toFixed(1)} min`;
}

function formatTime(ms) {
  return typeof ms === 'number' ? new Date(ms).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z') : '—';
}

/**
 * JSON.parse that keeps integers past 2^53 exact (SQL integers are i64):
 * where the browser hands the reviver the number's source text (JSON.parse
 * source text access), such a number becomes a BigInt instead of a rounded
 * float. Elsewhere it stays a (rounded) number.
 */
function parseJson(text) {
  return JSON.parse(text, (key, value, context) => {
    if (typeof value === 'number' && !Number.isSafeInteger(value) && context
      && /^-?\d+$/.test(context.source)) {
      return BigInt(context.source);
    }
    return value;
  });
}

/** JSON.stringify that writes a BigInt as its digits. */
function toJson(value) {
  return JSON.stringify(value, (key, v) => (typeof v === 'bigint' ? v.toString() : v));
}

const isNumber = (v) => typeof v === 'number' || typeof v === 'bigint';

/* ------------------------------------------------------------------ */
/* Errors                                                              */
/* ------------------------------------------------------------------ */

/** An error in the API's shape: `code`, `message` and any extra fields. */
class ApiError extends Error {
  constructor(code, message, status = 0, details = {}) {
    super(message);
    this.code = code;
    this.status = status;
    this.details = details;
  }
}

/** Shows an error (an ApiError or anything thrown) in #error. */
function showError(error) {
  const err = error instanceof ApiError ? error : new ApiError('client', String(error && error.message || error));
  const box = $('error');
  box.dataset.code = err.code;
  box.textContent = `${err.code}: ${err.message}`;
  const extra = Object.entries(err.details || {})
    .map(([k, v]) => `${k}: ${typeof v === 'string' ? v : toJson(v)}`);
  $('error-details').textContent = extra.join(' · ');
  $('error-details').hidden = extra.length === 0;
  box.hidden = false;
  $('error-box').hidden = false;
}

function clearError() {
  $('error').hidden = true;
  $('error-box').hidden = true;
  $('error').textContent = '';
  delete $('error').dataset.code;
}

/* ------------------------------------------------------------------ */
/* Auth and requests                                                   */
/* ------------------------------------------------------------------ */

// Used only when sessionStorage is unavailable (then the token lasts as
// long as the page).
let memoryToken = null;

function getToken() {
  try { return sessionStorage.getItem(TOKEN_KEY); } catch { return memoryToken; }
}

function setToken(token) {
  try {
    if (token) sessionStorage.setItem(TOKEN_KEY, token);
    else sessionStorage.removeItem(TOKEN_KEY);
  } catch {
    memoryToken = token || null;
  }
  $('logout').hidden = !token;
}

// While the login form is up, requests that got 401 wait on this promise;
// submitting the form resolves it and they retry.
let loginWaiters = null;

/** Shows the login form; resolves once the user submitted a token. */
function waitForLogin(refused) {
  $('login-message').textContent = refused
    ? 'The server refused this token. Enter another one.'
    : 'This server needs a token.';
  if (!loginWaiters) {
    loginWaiters = [];
    $('login').hidden = false;
    $('token').value = '';
    $('token').focus();
  }
  return new Promise((resolve) => loginWaiters.push(resolve));
}

function onLoginSubmit(event) {
  event.preventDefault();
  const token = $('token').value.trim();
  if (!token) { $('token').focus(); return; }
  setToken(token);
  $('login').hidden = true;
  const waiters = loginWaiters || [];
  loginWaiters = null;
  waiters.forEach((resolve) => resolve());
}

function onLogout() {
  setToken(null);
  clearError();
  // Ask the server again: if it needs a token the login form comes up.
  probeAuth();
}

/** Turns a failed response into an ApiError, from its JSON error body
 * when there is one. */
async function errorFromResponse(response) {
  let text = '';
  try { text = await response.text(); } catch { /* body lost */ }
  try {
    const { error } = parseJson(text);
    if (error && error.code) {
      const { code, message, ...details } = error;
      return new ApiError(code, message || '', response.status, details);
    }
  } catch { /* not JSON */ }
  return new ApiError(`http_${response.status}`, text.slice(0, 500) || response.statusText, response.status);
}

/**
 * Sends a request to the API. `options.json` is sent as a JSON body,
 * `options.body` as is; `options.raw` returns the Response (for streaming)
 * instead of parsed JSON. A 401 shows the login form and retries once a
 * token is entered; any other failure throws an ApiError.
 */
async function api(method, path, options = {}) {
  for (;;) {
    const headers = { ...(options.headers || {}) };
    const token = getToken();
    if (token) headers.Authorization = `Bearer ${token}`;
    let body = options.body;
    if (options.json !== undefined) {
      headers['Content-Type'] = 'application/json';
      body = toJson(options.json);
    }
    let response;
    try {
      response = await fetch(path, { method, headers, body, signal: options.signal, cache: 'no-store' });
    } catch (e) {
      if (e.name === 'AbortError') throw e;
      throw new ApiError('network', `could not reach the server (${e.message})`);
    }
    if (response.status === 401) {
      await response.body?.cancel();
      await waitForLogin(Boolean(token));
      continue;
    }
    if (!response.ok) throw await errorFromResponse(response);
    if (options.raw) return response;
    const text = await response.text();
    return text ? parseJson(text) : null;
  }
}

/** On load and after logout: finds out whether a token is needed (a 401
 * brings up the login form). Other failures are left to the views. */
async function probeAuth() {
  try { await api('GET', '/v1/cluster'); } catch { /* shown when a view needs it */ }
}

/** Header: the server's version when /health gives one, else its status. */
async function loadServerInfo() {
  try {
    const response = await fetch('/health', { cache: 'no-store' });
    const health = await response.json();
    const parts = [];
    if (!response.ok) parts.push(health.error?.code || `HTTP ${response.status}`);
    if (health.version) parts.push(`v${health.version}`);
    if (health.status) parts.push(health.status);
    if (health.node_id) parts.push(health.node_id);
    $('server-info').textContent = parts.join(' · ');
  } catch {
    $('server-info').textContent = 'server unreachable';
  }
}

/* ------------------------------------------------------------------ */
/* Navigation                                                          */
/* ------------------------------------------------------------------ */

function currentView() {
  const name = location.hash.replace(/^#/, '');
  return VIEWS.includes(name) ? name : 'query';
}

/** Shows the view named by the hash and loads what it lists. */
function showView() {
  const view = currentView();
  for (const name of VIEWS) $(`view-${name}`).hidden = name !== view;
  for (const link of document.querySelectorAll('nav a')) {
    if (link.getAttribute('href') === `#${view}`) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  if (view === 'tables') loadTables();
  if (view === 'plugins') loadPlugins();
  if (view === 'handlers') loadHandlers();
}

/* ------------------------------------------------------------------ */
/* Query view                                                          */
/* ------------------------------------------------------------------ */

// The result on screen: columns, rows shown, totals over the pages fetched.
let result = null;
// Aborts the request in flight (Cancel, or a new run).
let inFlight = null;
// Streamed rows of the current network chunk, added to the table in one go.
let pendingRows = [];

function setBusy(busy) {
  for (const id of ['run', 'explain', 'stream', 'more']) $(id).disabled = busy;
  $('cancel').hidden = !busy;
}

/** Reads #params: empty means none; anything but a JSON array is a local error. */
function readParams() {
  const text = $('params').value.trim();
  if (!text) return undefined;
  let params;
  try {
    params = parseJson(text);
  } catch (e) {
    throw new ApiError('invalid_params', `parameters are not valid JSON (${e.message}); write a JSON array such as ["user:%", 10]`);
  }
  if (!Array.isArray(params)) {
    throw new ApiError('invalid_params', 'parameters must be a JSON array such as ["user:%", 10]');
  }
  return params;
}

function readPageSize() {
  const size = Number($('page-size').value || 100);
  if (!Number.isInteger(size) || size < 1 || size > 10000) {
    throw new ApiError('invalid_page_size', 'page size must be a whole number from 1 to 10000');
  }
  return size;
}

/** Reads the editor; returns {sql, params, pageSize} or null after showing
 * a local error. */
function readQuery(explain) {
  let sql = $('sql').value.trim();
  if (!sql) { showError(new ApiError('invalid_sql', 'write a query first')); return null; }
  if (explain && !/^explain\b/i.test(sql)) sql = `EXPLAIN ${sql}`;
  try {
    return { sql, params: readParams(), pageSize: readPageSize() };
  } catch (e) {
    showError(e);
    return null;
  }
}

/** Starts an action on the query view: clears the old error and aborts
 * anything still running. */
function beginQuery() {
  clearError();
  if (inFlight) inFlight.abort();
  inFlight = new AbortController();
  setBusy(true);
  return inFlight.signal;
}

function endQuery(signal) {
  if (inFlight && inFlight.signal === signal) {
    inFlight = null;
    setBusy(false);
  }
}

/** Empties the result area before a new query. */
function clearResult() {
  result = null;
  pendingRows = [];
  for (const id of ['result', 'summary', 'result-note', 'more', 'chart-box']) $(id).hidden = true;
}

/** Run (or Explain): the first page of the query. */
async function runQuery(explain) {
  const query = readQuery(explain);
  if (!query) return;
  addHistory($('sql').value.trim(), $('params').value.trim());
  const signal = beginQuery();
  clearResult();
  try {
    const body = { sql: query.sql, page_size: query.pageSize };
    if (query.params) body.params = query.params;
    const page = await api('POST', '/v1/sql', { json: body, signal });
    result = {
      sql: query.sql, columns: page.columns, rows: [], cursor: null,
      pages: 0, scanned: 0, elapsed: 0, streamed: false, hidden: 0,
    };
    renderHeader(page.columns);
    appendPage(page);
  } catch (e) {
    if (e.name !== 'AbortError') showError(e);
  } finally {
    endQuery(signal);
  }
}

/** #more: the next page of the result, appended. */
async function loadMore() {
  if (!result || !result.cursor) return;
  const current = result;
  const signal = beginQuery();
  try {
    const page = await api('POST', '/v1/sql', { json: { cursor: current.cursor }, signal });
    if (result === current) appendPage(page);
  } catch (e) {
    if (e.name !== 'AbortError') showError(e);
  } finally {
    endQuery(signal);
  }
}

/** Adds a page's rows and stats to the result and redraws the rest. */
function appendPage(page) {
  result.cursor = page.cursor || null;
  result.pages += 1;
  result.scanned += page.stats?.scanned || 0;
  result.elapsed += page.stats?.elapsed_ms || 0;
  appendRows(page.rows);
  finishRender();
}

/**
 * #stream: the whole result as NDJSON, rendered as lines arrive. The lines
 * are `{"columns": [...]}`, one JSON array per row, then `{"stats": ...}`
 * or `{"error": ...}` (an error after rows cuts the result short).
 */
async function streamQuery() {
  const query = readQuery(false);
  if (!query) return;
  addHistory($('sql').value.trim(), $('params').value.trim());
  const signal = beginQuery();
  clearResult();
  let current = null;
  try {
    const body = { sql: query.sql };
    if (query.params) body.params = query.params;
    const response = await api('POST', '/v1/sql', {
      json: body, signal, raw: true, headers: { Accept: 'application/x-ndjson' },
    });
    current = {
      sql: query.sql, columns: [], rows: [], cursor: null,
      pages: 0, scanned: 0, elapsed: 0, streamed: true, hidden: 0, state: 'receiving',
    };
    result = current;
    await readLines(response, (line) => onStreamLine(parseJson(line)));
    if (current.state === 'receiving') {
      current.state = 'incomplete';
      throw new ApiError('network', 'the stream ended before its last line: the result is incomplete');
    }
  } catch (e) {
    if (current && current.state === 'receiving') current.state = e.name === 'AbortError' ? 'cancelled' : 'incomplete';
    if (e.name !== 'AbortError') showError(e);
  } finally {
    // Unless a newer query took over the result area meanwhile.
    if (current && result === current) finishRender();
    endQuery(signal);
  }
}

/** Handles one NDJSON line of a streamed result. */
function onStreamLine(message) {
  if (Array.isArray(message)) {
    if (result.rows.length + pendingRows.length < STREAM_DISPLAY_LIMIT) pendingRows.push(message);
    else result.hidden += 1;
  } else if (message.columns) {
    result.columns = message.columns;
    renderHeader(message.columns);
  } else if (message.stats) {
    result.state = 'done';
    result.pages = message.stats.pages || 0;
    result.scanned = message.stats.scanned || 0;
    result.elapsed = message.stats.elapsed_ms || 0;
  } else if (message.error) {
    result.state = 'error';
    const { code, message: text, ...details } = message.error;
    showError(new ApiError(code, `${text} (after ${result.rows.length + pendingRows.length + result.hidden} rows)`, 200, details));
  }
}

function flushRows() {
  const rows = pendingRows;
  pendingRows = [];
  appendRows(rows);
  updateSummary();
}

/** Reads a response body line by line, calling `onLine` for each
 * non-empty line; rows buffered while a chunk is parsed are drawn after it. */
async function readLines(response, onLine) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffered = '';
  for (;;) {
    const { done, value } = await reader.read();
    buffered += decoder.decode(value || new Uint8Array(), { stream: !done });
    const lines = buffered.split('\n');
    buffered = done ? '' : lines.pop();
    for (const line of lines) if (line.trim()) onLine(line);
    flushRows();
    if (done) return;
  }
}

/** Resets #result to the given columns: name plus the type as a hint. */
function renderHeader(columns) {
  const table = $('result');
  const row = el('tr');
  columns.forEach((column, i) => {
    const th = el('th', {}, column.name, ' ', el('span', { className: 'type', text: column.type }));
    if (isNumericColumn(columns, [], i)) th.className = 'num';
    row.append(th);
  });
  table.tHead.replaceChildren(row);
  table.tBodies[0].replaceChildren();
  table.classList.toggle('plan', columns.length === 1 && columns[0].name === 'plan');
  table.hidden = false;
  $('more').hidden = true;
  $('result-note').hidden = true;
  $('chart-box').hidden = true;
}

/** One result cell: strings as text, NULL and bytes dimmed, numbers right-aligned. */
function renderCell(value) {
  const td = el('td');
  if (value === null || value === undefined) {
    td.className = 'null';
    td.textContent = 'NULL';
  } else if (isNumber(value)) {
    td.className = 'num';
    td.textContent = String(value);
  } else if (typeof value === 'boolean') {
    td.className = 'bool';
    td.textContent = String(value);
  } else if (typeof value === 'object' && typeof value.base64 === 'string') {
    td.append(el('span', { className: 'dim', text: 'base64:' }), value.base64);
  } else if (typeof value === 'object') {
    td.textContent = toJson(value);
  } else {
    td.textContent = value;
  }
  return td;
}

function appendRows(rows) {
  if (!rows || !rows.length) return;
  const fragment = document.createDocumentFragment();
  for (const row of rows) {
    const tr = el('tr');
    for (const value of row) tr.append(renderCell(value));
    fragment.append(tr);
  }
  $('result').tBodies[0].append(fragment);
  result.rows.push(...rows);
}

function updateSummary() {
  if (!result) return;
  const parts = [`${formatCount(result.rows.length)} rows shown`];
  if (result.streamed) {
    parts[0] = `${formatCount(result.rows.length + result.hidden)} rows streamed`;
    if (result.hidden) parts.push(`${formatCount(result.rows.length)} shown`);
    parts.push(`${formatCount(result.pages)} scan pages`);
  } else {
    parts.push(`${result.pages} ${result.pages === 1 ? 'page' : 'pages'}`);
  }
  parts.push(`${formatCount(result.scanned)} scanned`, `${result.elapsed.toFixed(2)} ms`);
  if (result.cursor) parts.push('more available');
  const states = { receiving: 'receiving…', error: 'stopped by an error', cancelled: 'cancelled', incomplete: 'incomplete' };
  if (result.streamed && states[result.state]) parts.push(states[result.state]);
  $('summary').textContent = parts.join(' · ');
  $('summary').hidden = false;
}

/** After a page or a stream: summary, #more, the capped-rows note, chart. */
function finishRender() {
  updateSummary();
  $('more').hidden = !result.cursor;
  const note = $('result-note');
  if (result.hidden) {
    note.textContent = `Only the first ${formatCount(STREAM_DISPLAY_LIMIT)} rows are shown: ` +
      `${formatCount(result.hidden)} more rows came and were not shown. Add a LIMIT or use paging (Run) to see them.`;
    note.hidden = false;
  } else {
    note.hidden = true;
  }
  renderChart();
}

/* ------------------------------------------------------------------ */
/* Chart                                                               */
/* ------------------------------------------------------------------ */

/** Values of one column that are not NULL. */
function columnValues(rows, index) {
  return rows.map((row) => row[index]).filter((v) => v !== null && v !== undefined);
}

/** Numeric by type, or by its values when the type is only known per value. */
function isNumericColumn(columns, rows, index) {
  if (NUMERIC_TYPES.has(columns[index].type)) return true;
  if (columns[index].type !== 'any') return false;
  const values = columnValues(rows, index);
  return values.length > 0 && values.every(isNumber);
}

function isTextColumn(columns, rows, index) {
  if (columns[index].type === 'text') return true;
  if (columns[index].type !== 'any') return false;
  const values = columnValues(rows, index);
  return values.length > 0 && values.every((v) => typeof v === 'string');
}

/** Draws a horizontal bar chart of the first text column against the
 * chosen numeric column, or hides the chart when the result has no such pair. */
function renderChart() {
  const box = $('chart-box');
  const chart = $('chart');
  const { columns, rows } = result;
  const indexes = columns.map((_, i) => i);
  const labelIndex = indexes.find((i) => isTextColumn(columns, rows, i));
  const numeric = indexes.filter((i) => isNumericColumn(columns, rows, i));
  if (labelIndex === undefined || numeric.length === 0 || rows.length === 0) {
    box.hidden = true;
    chart.replaceChildren();
    return;
  }

  // Keep the user's column choice while it is still in the result.
  const select = $('chart-column');
  const previous = Number(select.value);
  select.replaceChildren(...numeric.map((i) => {
    const option = el('option', { text: columns[i].name });
    option.value = String(i);
    return option;
  }));
  const valueIndex = numeric.includes(previous) ? previous : numeric[0];
  select.value = String(valueIndex);
  select.disabled = numeric.length < 2;

  const shown = rows.slice(0, CHART_MAX_ROWS);
  const total = rows.length + (result.hidden || 0);
  $('chart-note').textContent = total > CHART_MAX_ROWS
    ? `first ${CHART_MAX_ROWS} of ${formatCount(total)} rows${result.cursor ? ' (more available)' : ''}`
    : `${total} rows`;
  box.hidden = false; // shown first: the drawing is sized to the box's width
  drawBars(chart, shown.map((row) => row[labelIndex]), shown.map((row) => row[valueIndex]));
}

/** Draws one bar per label into the SVG, in user units of one CSS pixel
 * (up to 720 wide), so its text keeps its size on a phone. */
function drawBars(chart, labels, values) {
  const width = Math.round(Math.min(720, Math.max(300, chart.parentElement.clientWidth)));
  const rowHeight = 22;
  const labelWidth = Math.round(width / 4);
  const valueWidth = 90; // room for the number after a bar
  const barArea = width - labelWidth - valueWidth;
  const numbers = values.map((v) => (isNumber(v) ? Number(v) : 0));
  const maxAbs = Math.max(...numbers.map(Math.abs)) || 1;
  // With negative values the zero line sits in the middle of the bar area.
  const hasNegative = numbers.some((v) => v < 0);
  const scale = (hasNegative ? barArea / 2 : barArea) / maxAbs;
  const zero = labelWidth + (hasNegative ? barArea / 2 : 0);
  const height = labels.length * rowHeight + 8;

  chart.setAttribute('viewBox', `0 0 ${width} ${height}`);
  chart.setAttribute('height', String(height));
  const nodes = [];
  labels.forEach((label, i) => {
    const y = 4 + i * rowHeight;
    const value = values[i];
    const text = label === null || label === undefined ? 'NULL' : String(label);
    const labelNode = svg('text', { x: labelWidth - 8, y: y + 15, 'text-anchor': 'end', class: 'chart-label' });
    const maxChars = Math.floor(labelWidth / 7.5); // about 7.2 px per 12 px monospace character
    labelNode.textContent = text.length > maxChars ? `${text.slice(0, maxChars - 1)}…` : text;
    const title = svg('title');
    title.textContent = `${text}: ${value === null ? 'NULL' : value}`;
    const barWidth = Math.abs(numbers[i]) * scale;
    const bar = svg('rect', {
      x: numbers[i] < 0 ? zero - barWidth : zero, y: y + 3,
      width: Math.max(barWidth, 0.5), height: rowHeight - 6,
      class: numbers[i] < 0 ? 'chart-bar negative' : 'chart-bar',
    });
    bar.append(title);
    const valueNode = svg('text', {
      x: numbers[i] < 0 ? zero + 4 : zero + barWidth + 4, y: y + 15, class: 'chart-value',
    });
    valueNode.textContent = value === null || value === undefined ? 'NULL' : formatNumber(value);
    nodes.push(labelNode, bar, valueNode);
  });
  nodes.push(svg('line', { x1: zero, x2: zero, y1: 0, y2: height, class: 'chart-axis' }));
  chart.replaceChildren(...nodes);
}

/** A bar's value: integers whole, floats to 6 significant digits. */
function formatNumber(n) {
  if (typeof n === 'bigint' || Number.isInteger(n)) return String(n);
  return typeof n === 'number' ? String(Number(n.toPrecision(6))) : String(n);
}

/* ------------------------------------------------------------------ */
/* History                                                             */
/* ------------------------------------------------------------------ */

function readHistory() {
  try {
    const list = JSON.parse(localStorage.getItem(HISTORY_KEY) || '[]');
    return Array.isArray(list) ? list.filter((h) => h && typeof h.sql === 'string') : [];
  } catch {
    return [];
  }
}

function writeHistory(list) {
  try { localStorage.setItem(HISTORY_KEY, JSON.stringify(list)); } catch { /* storage full or off */ }
  renderHistory();
}

/** Saves a run query first in the history, dropping an equal older entry. */
function addHistory(sql, params) {
  const list = readHistory().filter((h) => !(h.sql === sql && (h.params || '') === params));
  list.unshift({ sql, params });
  writeHistory(list.slice(0, HISTORY_MAX));
}

function renderHistory() {
  const list = readHistory();
  const items = list.map((entry) => {
    const button = el('button', { type: 'button', className: 'history-entry', title: entry.sql },
      el('code', { text: entry.sql }),
      entry.params ? el('span', { className: 'dim history-params', text: entry.params }) : null);
    button.addEventListener('click', () => {
      $('sql').value = entry.sql;
      $('params').value = entry.params || '';
      $('sql').focus();
    });
    return el('li', {}, button);
  });
  $('history').replaceChildren(...items);
  $('history-empty').hidden = list.length > 0;
  $('history-clear').hidden = list.length === 0;
}

/* ------------------------------------------------------------------ */
/* Tables view                                                         */
/* ------------------------------------------------------------------ */

async function fetchTables() {
  const answer = await api('GET', '/v1/tables');
  return answer.tables || [];
}

/** Fills the body of table `id` with `row(item)` for each item `load`
 * answers, or one row saying `empty` or `failed` (and shows the error). */
async function fillList(id, columns, load, row, empty, failed) {
  const body = $(id).tBodies[0];
  try {
    const items = await load();
    body.replaceChildren(...items.map(row));
    if (!items.length) body.append(emptyRow(columns, empty));
  } catch (e) {
    body.replaceChildren(emptyRow(columns, failed));
    showError(e);
  }
}

function loadTables() {
  return fillList('tables-list', 4, fetchTables, tableRow,
    'No table holds live records.', 'Could not list the tables.');
}

function tableRow(table) {
  const link = el('a', { href: '#query', text: table.name, className: 'table-link' });
  // Fill the editor before the hash change shows the query view.
  link.addEventListener('click', () => {
    $('sql').value = `SELECT key, value, _version_ms FROM ${table.name} LIMIT 100`;
    $('params').value = '';
  });
  return el('tr', {},
    el('td', {}, link),
    el('td', { className: 'num', text: formatCount(table.live_records) }),
    el('td', { className: 'num', text: formatCount(table.tombstones) }),
    el('td', { className: 'num', text: formatBytes(table.memory_bytes), title: `${table.memory_bytes} bytes` }));
}

function emptyRow(span, text) {
  const td = el('td', { className: 'dim', text });
  td.colSpan = span;
  return el('tr', {}, td);
}

/* ------------------------------------------------------------------ */
/* Plugins view                                                        */
/* ------------------------------------------------------------------ */

function loadPlugins() {
  const load = async () => (await api('GET', '/v1/plugins')).plugins || [];
  return fillList('plugins-list', 6, load, pluginRow,
    'No plugin installed.', 'Could not list the plugins.');
}

function pluginRow(plugin) {
  const functions = el('ul', { className: 'functions' }, ...(plugin.functions || []).map((f) =>
    el('li', { title: f.description || '' },
      el('code', { text: `${f.name}/${f.arg_count}` }), ' ',
      el('span', { className: `kind kind-${f.kind}`, text: String(f.kind).replace('_', ' ') }))));
  const remove = el('button', { type: 'button', className: 'danger small', text: 'Delete' });
  remove.addEventListener('click', () => deletePlugin(plugin.name));
  const manifest = plugin.manifest && plugin.manifest.version ? ` (${plugin.manifest.version})` : '';
  return el('tr', { className: 'plugin-row' },
    el('td', {}, el('code', { text: plugin.name })),
    el('td', { text: `${plugin.version}${manifest}`, title: plugin.sha256 ? `sha256 ${plugin.sha256}` : '' }),
    el('td', {}, functions),
    el('td', { className: 'num', text: formatBytes(plugin.size) }),
    el('td', { className: 'nowrap', text: formatTime(plugin.created_ms) }),
    el('td', {}, remove));
}

async function deletePlugin(name) {
  if (!window.confirm(`Delete plugin ${name}? Queries calling it will fail.`)) return;
  clearError();
  try {
    await api('DELETE', `/v1/plugins/${encodeURIComponent(name)}`);
    pluginMessage(`Deleted plugin ${name}.`, false);
  } catch (e) {
    pluginMessage(`${e.code}: ${e.message}`, true);
    showError(e);
  }
  loadPlugins();
}

function pluginMessage(text, isError) {
  const message = $('plugin-message');
  message.textContent = text;
  message.classList.toggle('error', isError);
  message.hidden = false;
}

/** The name a file installs as by default: as `ebb serve --plugin-dir`
 * names it, without `.wasm` and an `ebb_plugin_` prefix. */
function defaultPluginName(fileName) {
  return fileName.replace(/\.wasm$/i, '').replace(/^ebb_plugin_/i, '');
}

function onPluginFileChange() {
  const file = $('plugin-file').files[0];
  if (file && !$('plugin-name').value.trim()) $('plugin-name').placeholder = defaultPluginName(file.name);
}

/** Upload: PUT /v1/plugins/{name} with the module's bytes as the body. */
async function uploadPlugin(event) {
  event.preventDefault();
  clearError();
  const file = $('plugin-file').files[0];
  if (!file) {
    pluginMessage('Choose a .wasm file first.', true);
    return;
  }
  const name = $('plugin-name').value.trim() || defaultPluginName(file.name);
  $('plugin-upload').disabled = true;
  pluginMessage(`Uploading ${name}…`, false);
  try {
    const bytes = await file.arrayBuffer();
    const answer = await api('PUT', `/v1/plugins/${encodeURIComponent(name)}`, {
      body: bytes, headers: { 'Content-Type': 'application/wasm' },
    });
    const functions = (answer.functions || []).map((f) => f.name).join(', ');
    pluginMessage(answer.unchanged
      ? `Plugin ${answer.name} is unchanged: version ${answer.version} already has these bytes.`
      : `Installed plugin ${answer.name} version ${answer.version} (${functions || 'no functions'}).`, false);
    $('plugin-form').reset();
    $('plugin-name').placeholder = 'json';
  } catch (e) {
    pluginMessage(`Upload failed: ${e.code}: ${e.message}`, true);
    showError(e);
  } finally {
    $('plugin-upload').disabled = false;
  }
  loadPlugins();
}

/* ------------------------------------------------------------------ */
/* Handlers view                                                       */
/* ------------------------------------------------------------------ */

// The two handler kinds and their routes under /v1/tables/{t}/.
const HANDLER_KINDS = [
  { kind: 'expiry', title: 'Expiry handler', status: 'expiry-handler', dead: 'expiry/dead-letters' },
  { kind: 'change', title: 'Change handler', status: 'change-handler', dead: 'change/dead-letters' },
];

// Labels of the status fields, in the order shown; other fields follow.
const STATUS_LABELS = {
  outbox_depth: 'outbox depth',
  stored_events: 'stored events',
  in_flight: 'in flight',
  backing_off: 'backing off',
  oldest_pending_age_ms: 'oldest pending age',
  handled: 'handled',
  calls: 'calls',
  attempts: 'attempts',
  failed_calls: 'failed calls',
  failed_events: 'failed events',
  dead_letters: 'dead letters',
  skipped_actions: 'skipped actions',
  lag_ms: 'lag',
  last_error: 'last error',
};

// Tables typed into #handler-table, shown with those that have records.
const extraHandlerTables = [];

function tablePath(table) {
  return `/v1/tables/${encodeURIComponent(table)}`;
}

async function loadHandlers() {
  const list = $('handlers-list');
  let names = [];
  try {
    names = (await fetchTables()).map((t) => t.name);
  } catch (e) {
    showError(e);
  }
  const all = [...extraHandlerTables, ...names.filter((n) => !extraHandlerTables.includes(n))];
  list.replaceChildren(...all.map(handlerCard));
  if (!all.length) list.append(el('p', { className: 'dim', text: 'No table holds records: type a table name above.' }));
}

function onHandlerShow(event) {
  event.preventDefault();
  clearError();
  const name = $('handler-table').value.trim().toLowerCase();
  if (!name) return;
  const at = extraHandlerTables.indexOf(name);
  if (at >= 0) extraHandlerTables.splice(at, 1);
  extraHandlerTables.unshift(name);
  loadHandlers();
}

/** One table's card: its expiry and change handler side by side, each
 * loaded apart, and below them the dead letters the user asked for. */
function handlerCard(table) {
  const blocks = el('div', { className: 'handler-blocks' });
  const output = el('div', { className: 'dead-letters' });
  for (const spec of HANDLER_KINDS) {
    const block = el('div', { className: `handler handler-${spec.kind}` });
    blocks.append(block);
    loadHandler(block, output, table, spec);
  }
  return el('section', { className: 'handler-card' }, el('h3', {}, el('code', { text: table })), blocks, output);
}

async function loadHandler(block, output, table, spec) {
  const title = el('h4', { text: spec.title });
  block.replaceChildren(title, el('p', { className: 'dim', text: 'loading…' }));
  let answer;
  try {
    answer = await api('GET', `${tablePath(table)}/${spec.status}`);
  } catch (e) {
    if (e.status === 404) {
      // 404: nothing bound, pending or dead for this kind.
      block.replaceChildren(title, el('p', { className: 'dim none', text: 'none' }));
    } else {
      block.replaceChildren(title, el('p', { className: 'error', text: `${e.code}: ${e.message}` }));
      showError(e);
    }
    return;
  }
  block.replaceChildren(title, ...renderHandlerStatus(answer), handlerActions(block, output, table, spec));
}

/** The binding (plugin.function and settings) and the status fields. */
function renderHandlerStatus(answer) {
  const nodes = [];
  const binding = answer.binding;
  if (binding) {
    const settings = [`max_batch ${binding.max_batch}`, `max_attempts ${binding.max_attempts}`];
    if (binding.prefix !== undefined && binding.prefix !== null) settings.push(`prefix ${toJson(binding.prefix)}`);
    if (binding.config !== undefined && binding.config !== null) settings.push(`config ${toJson(binding.config)}`);
    nodes.push(el('p', {}, el('code', { text: `${binding.plugin}.${binding.function}` }), ' ',
      el('span', { className: 'dim', text: settings.join(' · ') })));
  } else {
    nodes.push(el('p', { className: 'dim', text: 'not bound (pending events or dead letters remain)' }));
  }
  const status = answer.status || {};
  const keys = [...Object.keys(STATUS_LABELS).filter((k) => k in status),
    ...Object.keys(status).filter((k) => !(k in STATUS_LABELS))];
  const list = el('dl', { className: 'status' });
  for (const key of keys) {
    list.append(el('dt', { text: STATUS_LABELS[key] || key.replace(/_/g, ' ') }),
      el('dd', { text: statusValue(key, status[key]), className: key === 'last_error' && status[key] ? 'error' : '' }));
  }
  nodes.push(list);
  return nodes;
}

function statusValue(key, value) {
  if (value === null || value === undefined) return '—';
  if (key === 'lag_ms' && typeof value === 'object') {
    return `p50 ${formatMs(value.p50)} · p99 ${formatMs(value.p99)} · max ${formatMs(value.max)}`;
  }
  if (key.endsWith('_ms') && typeof value === 'number') return formatMs(value);
  if (typeof value === 'number') return formatCount(value);
  return typeof value === 'string' ? value : toJson(value);
}

/** Dead letters and redrive buttons; the letters go to the card's `output`. */
function handlerActions(block, output, table, spec) {
  const show = el('button', { type: 'button', className: 'small', text: 'Dead letters' });
  const redrive = el('button', { type: 'button', className: 'small', text: 'Redrive all' });
  show.addEventListener('click', () => loadDeadLetters(output, table, spec, null));
  redrive.addEventListener('click', () => redriveAll(block, output, table, spec));
  return el('div', { className: 'row buttons' }, show, redrive);
}

/** One page of dead letters; `after` continues from a `next`, adding rows
 * to the table already shown. */
async function loadDeadLetters(output, table, spec, after) {
  clearError();
  const query = `?limit=${DEAD_LETTER_PAGE}${after ? `&after=${encodeURIComponent(after)}` : ''}`;
  let answer;
  try {
    answer = await api('GET', `${tablePath(table)}/${spec.dead}${query}`);
  } catch (e) {
    showError(e);
    return;
  }
  const letters = answer.dead_letters || [];
  const columns = spec.kind === 'expiry'
    ? ['key', 'value', 'attempts', 'last_error', 'expires_at_ms', 'dead_at_ms', 'id']
    : ['key', 'value', 'deleted', 'attempts', 'last_error', 'written_at_ms', 'dead_at_ms', 'id'];
  let body = output.querySelector('tbody');
  if (!after || !body) {
    const heading = el('h4', { text: `${spec.title}: dead letters` });
    if (!letters.length) {
      output.replaceChildren(heading, el('p', { className: 'dim', text: 'No dead letters.' }));
      return;
    }
    const head = el('tr', {}, ...columns.map((c) => el('th', { text: c.replace(/_ms$/, '').replace(/_/g, ' ') })));
    body = el('tbody');
    output.replaceChildren(heading,
      el('div', { className: 'table-scroll' }, el('table', { className: 'data' }, el('thead', {}, head), body)));
  }
  body.append(...letters.map((letter) => deadLetterRow(letter, columns)));
  if (answer.next) {
    const next = el('button', { type: 'button', className: 'small', text: 'Next page' });
    next.addEventListener('click', () => { next.remove(); loadDeadLetters(output, table, spec, answer.next); });
    output.append(next);
  }
}

function deadLetterRow(letter, columns) {
  return el('tr', {}, ...columns.map((c) => {
    const value = letter[c];
    if (c.endsWith('_ms') && typeof value === 'number') return el('td', { className: 'nowrap', text: formatTime(value) });
    // Ids are 64 hex digits: shown short, whole on hover.
    if (c === 'id' && typeof value === 'string') return el('td', { className: 'nowrap', text: `${value.slice(0, 12)}…`, title: value });
    const td = renderCell(value);
    if (c === 'last_error') td.classList.add('wide');
    return td;
  }));
}

/** POST .../dead-letters/redrive with {} (all, up to 10 000 a request). */
async function redriveAll(block, output, table, spec) {
  clearError();
  try {
    const answer = await api('POST', `${tablePath(table)}/${spec.dead}/redrive`, { json: {} });
    await loadHandler(block, output, table, spec);
    const more = answer.more ? ': more remain, redrive again' : '';
    block.append(el('p', { className: 'message', text: `Redriven: ${answer.redriven}${more}.` }));
    output.replaceChildren();
  } catch (e) {
    block.append(el('p', { className: 'error', text: `${e.code}: ${e.message}` }));
    showError(e);
  }
}

/* ------------------------------------------------------------------ */
/* Wiring                                                              */
/* ------------------------------------------------------------------ */

function onEditorKey(event) {
  if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) {
    event.preventDefault();
    runQuery(false);
  }
}

function init() {
  setToken(getToken());
  $('login').addEventListener('submit', onLoginSubmit);
  $('logout').addEventListener('click', onLogout);
  $('error-close').addEventListener('click', clearError);

  $('query-form').addEventListener('submit', (e) => { e.preventDefault(); runQuery(false); });
  $('explain').addEventListener('click', () => runQuery(true));
  $('stream').addEventListener('click', streamQuery);
  $('more').addEventListener('click', loadMore);
  $('cancel').addEventListener('click', () => inFlight && inFlight.abort());
  $('sql').addEventListener('keydown', onEditorKey);
  $('params').addEventListener('keydown', onEditorKey);
  $('chart-column').addEventListener('change', () => result && renderChart());
  $('history-clear').addEventListener('click', () => writeHistory([]));

  $('tables-refresh').addEventListener('click', () => { clearError(); loadTables(); });
  $('plugin-form').addEventListener('submit', uploadPlugin);
  $('plugin-file').addEventListener('change', onPluginFileChange);
  $('handler-form').addEventListener('submit', onHandlerShow);
  $('handlers-refresh').addEventListener('click', () => { clearError(); loadHandlers(); });

  // A new view starts without the last view's error.
  window.addEventListener('hashchange', () => { clearError(); showView(); });
  renderHistory();
  loadServerInfo();
  showView();
  if (currentView() === 'query') probeAuth();
}

document.addEventListener('DOMContentLoaded', init);
