// The page of `plait serve`: the repository's runs, one run's tasks (live from the run's
// events), and one task to review and decide on. Plain DOM, no framework, no build step.
// Everything the API returns is untrusted text (agent output, file contents, comments): it
// only ever reaches the page through text nodes, never as HTML.
'use strict';

// ---------- small helpers ----------

const enc = encodeURIComponent;

/** The content of meta tag `name`, or "" when the server left its placeholder. */
function meta(name) {
  const value = document.querySelector(`meta[name="${name}"]`)?.content || '';
  return /^\{\{.*\}\}$/.test(value) ? '' : value;
}

const TOKEN = meta('plait-token');
const START_RUN = meta('plait-run');

/** Builds an element: `h('a', {href, class, dataset: {...}, onclick}, child, ...)`. */
function h(tag, props, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v == null || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'dataset') for (const [d, dv] of Object.entries(v)) { if (dv != null) el.dataset[d] = String(dv); }
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'value' || k === 'checked' || k === 'disabled' || k === 'open') el[k] = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  add(el, kids);
  return el;
}

/** Appends children: nodes as they are, anything else as text. */
function add(el, kids) {
  for (const kid of [kids].flat(Infinity)) {
    if (kid == null || kid === false) continue;
    el.append(kid instanceof Node ? kid : String(kid));
  }
  return el;
}

/** Text with `backticked` spans as code elements. */
const withCode = (text) => String(text ?? '').split(/(`[^`\n]+`)/).map((bit, i) => (i % 2 ? h('code', null, bit.slice(1, -1)) : bit));
const fill = (el, ...kids) => { el.replaceChildren(); return add(el, kids); };
const count = (n, one, many = one + 's') => `${n} ${n === 1 ? one : many}`;
const short = (sha) => (sha ? String(sha).slice(0, 7) : '');

function fmtTokens(n) {
  if (n == null) return '—';
  if (n < 1000) return String(n);
  if (n < 1e6) return (n / 1e3).toFixed(n < 1e4 ? 1 : 0) + 'k';
  return (n / 1e6).toFixed(1) + 'M';
}

function fmtCost(usd) {
  if (usd == null) return '—';
  if (usd === 0) return '$0';
  return '$' + (usd < 0.1 ? usd.toFixed(4) : usd.toFixed(2));
}


// Rounds as the agent counts them (PLAIT_ROUND): 0 is the first try, then round 1, 2, ...
function roundName(round) {
  return round === 0 ? 'first try' : `round ${round}`;
}

// Beside a failing check that fails on the base too: context, never a pass.
function baseNote(c) {
  if (c.passed) return '';
  if (c.as_on_base) return ' · also fails on the base, the same way';
  if (c.at_base) return ' · also fails on the base, otherwise';
  return '';
}

function fmtMs(ms) {
  if (ms == null || ms < 0) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${String(Math.round(s % 60)).padStart(2, '0')}s`;
  return `${Math.floor(m / 60)}h ${String(m % 60).padStart(2, '0')}m`;
}

function fmtDate(ms) {
  if (!ms) return '';
  const d = new Date(ms);
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}`;
}

function fmtAgo(ms) {
  if (!ms) return '—';
  const s = (Date.now() - ms) / 1000;
  if (s < 0 || s > 7 * 86400) return fmtDate(ms);
  if (s < 60) return 'just now';
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86400)} d ago`;
}

const taskElapsed = (t) => (t.started_at ? (t.finished_at || Date.now()) - t.started_at : null);

// ---------- the API ----------

class ApiError extends Error {
  constructor(status, body) {
    super(body?.error || `the server answered ${status}`);
    this.status = status;
  }
}

async function getJSON(url) {
  const res = await fetch(url, { headers: { accept: 'application/json' }, cache: 'no-store' });
  const body = await res.json().catch(() => null);
  if (!res.ok || body == null) throw new ApiError(res.status, body);
  return body;
}

/** POSTs `body` with the page's token; resolves to {ok, status, data} (never throws). */
async function post(url, body) {
  try {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'X-Plait-Token': TOKEN },
      body: JSON.stringify(body || {}),
    });
    const data = await res.json().catch(() => ({}));
    return { ok: res.ok, status: res.status, data: data || {} };
  } catch (e) {
    return { ok: false, status: 0, data: { error: `could not reach the server: ${e.message}` } };
  }
}

const runUrl = (run) => `/api/runs/${enc(run)}`;
const taskUrl = (run, task) => `${runUrl(run)}/tasks/${enc(task)}`;
const runHref = (run) => `#/runs/${enc(run)}`;
const taskHref = (run, task) => `${runHref(run)}/tasks/${enc(task)}`;
const fileHref = (run, task, path) => `${taskHref(run, task)}/files/${enc(path)}`;

// ---------- shared bits of the run and task pages ----------

const STATES = ['done', 'running', 'preparing', 'collecting', 'reviewing', 'pending',
  'failed', 'rejected', 'stopped', 'interrupted', 'blocked'];
const VERDICTS = { approve: 'approve', request_changes: 'changes requested', reject: 'reject' };

const stateBadge = (state) => h('span', { class: `badge state s-${state}` }, state || '?');

function verdictBadge(verdict, extra) {
  if (!verdict) return null;
  return h('span', { class: `badge verdict v-${verdict}${extra ? ' ' + extra : ''}` }, VERDICTS[verdict] || verdict);
}

function phaseBadge(phase) {
  return h('span', { class: `badge phase p-${phase}` }, phase);
}

const liveBadge = () => h('span', { class: 'badge live-badge', title: 'its plait process is running' }, 'live');

/** A stacked bar and chips of task counts by state. */
function stateSummary(states, total) {
  const entries = STATES.filter((s) => states?.[s]).map((s) => [s, states[s]]);
  for (const [s, n] of Object.entries(states || {})) if (!STATES.includes(s)) entries.push([s, n]);
  const sum = total || entries.reduce((a, [, n]) => a + n, 0) || 1;
  return h('span', { class: 'states' },
    h('span', { class: 'bar', 'aria-hidden': 'true' },
      entries.map(([s, n]) => h('span', { class: `seg s-${s}`, style: `width:${(100 * n) / sum}%` }))),
    entries.map(([s, n]) => h('span', { class: `chip s-${s}` }, `${n} ${s}`)));
}

/** The verdict that counts, with the review's beside it when a person overruled it. */
function verdictCell(t) {
  const review = t.review?.verdict;
  const decision = t.decision?.verdict;
  if (!review && !decision) return h('span', { class: 'muted' }, '—');
  if (!decision) return h('span', { class: 'verdicts' }, verdictBadge(review), h('span', { class: 'by' }, t.review.by || 'review'));
  return h('span', { class: 'verdicts' },
    verdictBadge(decision, 'decided'), h('span', { class: 'by' }, 'person'),
    review && h('span', { class: review === decision ? 'muted small' : 'overruled small', title: 'the review\'s verdict, overruled by the person\'s decision' },
      'review: ', VERDICTS[review] || review));
}

function tokensText(usage) {
  if (!usage) return h('span', { class: 'muted' }, '—');
  const title = `input ${usage.input_tokens ?? 0}, output ${usage.output_tokens ?? 0}, cache write ${usage.cache_creation_input_tokens ?? 0}, cache read ${usage.cache_read_input_tokens ?? 0}; ${usage.requests ?? 0} requests, ${usage.turns ?? 0} turns`;
  const about = usage.estimated ? '≈ ' : '';
  return h('span', { title: about ? `${title}; estimated: the server sent no usage` : title }, `${about}${fmtTokens(usage.input_tokens)} / ${fmtTokens(usage.output_tokens)}`);
}

/** The outcome area of an action: `#outcome[data-ok]` with the server's message. */
function showOutcome(el, res) {
  el.hidden = false;
  el.dataset.ok = res.ok ? 'true' : 'false';
  const text = res.data.message || res.data.error || (res.ok ? 'done' : `failed (${res.status})`);
  fill(el, h('span', { class: 'outcome-text' }, withCode(text)));
  const blockers = Array.isArray(res.data.blockers) ? res.data.blockers : [];
  if (blockers.length && !blockers.some((b) => text.includes(b))) {
    el.append(h('ul', { class: 'blockers' }, blockers.map((b) => h('li', null, withCode(b)))));
  }
}

/** Runs an action: disables `buttons`, awaits `request`, shows its outcome, then `after`. */
async function act(buttons, outcome, request, after) {
  const seq = navSeq;
  for (const b of buttons) b.disabled = true;
  setReady(false);
  outcome.hidden = false;
  delete outcome.dataset.ok;
  fill(outcome, h('span', { class: 'muted' }, 'Working…'));
  const res = await request();
  showOutcome(outcome, res);
  try {
    await after(res);
  } catch (e) {
    console.warn('refresh after action failed', e);
  } finally {
    for (const b of buttons) b.disabled = false;
    if (seq === navSeq) setReady(true);
  }
  return res;
}

/** A page section: `<section id>` with a heading and a body that updates replace. */
function section(id, title) {
  const badge = h('span', { class: 'count' });
  const body = h('div', { class: 'body' });
  const el = h('section', { id, class: 'panel' }, h('h2', null, title, badge), body);
  return { el, body, badge };
}

/** Remembers whether a collapsible was open across re-renders (keyed per page). */
function details(openState, key, defaultOpen, summary, ...content) {
  const open = openState.has(key) ? openState.get(key) : defaultOpen;
  const el = h('details', { open }, h('summary', null, summary), ...content);
  el.addEventListener('toggle', () => openState.set(key, el.open));
  return el;
}

function emptyNote(text) {
  return h('p', { class: 'muted empty' }, withCode(text));
}

// ---------- syntax colouring: a compact tokenizer for the common languages ----------

const Highlight = (() => {
  const words = (s) => new Set(s.split(' '));
  const DQ = { o: '"', e: '"', esc: true };
  const SQ = { o: "'", e: "'", esc: true };
  const C_BLOCK = [['/*', '*/', 'com']];
  const NUM = /(?:0[xX][\da-fA-F_]+|0[bBoO][0-7_]+|\d[\d_]*(?:\.\d[\d_]*)?(?:[eE][+-]?\d+)?)\w*/y;
  const IDENT = /[A-Za-z_$][\w$]*/y;
  const HASH_COMMENT = [/(?<=^|\s)#.*/y, 'com'];
  const JS_KW = 'async await break case catch class const continue debugger default delete do else export extends finally for from function if import in instanceof let new of return static super switch throw try typeof var void while with yield';
  const js = { line: ['//'], block: C_BLOCK, str: [{ o: '`', e: '`', esc: true, multi: true }, DQ, SQ],
    kw: words(JS_KW), lit: words('true false null undefined NaN Infinity this'), caps: true, calls: true };
  const L = {
    rust: { line: ['//'], block: C_BLOCK, str: [{ ...DQ, multi: true }], caps: true, calls: true, macros: true,
      kw: words('as async await break const continue crate dyn else enum extern fn for if impl in let loop match mod move mut pub ref return static struct super trait type unsafe use where while yield'),
      lit: words('true false self Self None Some Ok Err'),
      ty: words('u8 u16 u32 u64 u128 usize i8 i16 i32 i64 i128 isize f32 f64 bool char str'),
      extra: [[/#!?\[[^\]]*\]?/y, 'meta'], [/'(?:\\.|[^\\'])'/y, 'str'], [/'[A-Za-z_]\w*/y, 'ty']] },
    python: { line: ['#'], caps: true, calls: true,
      str: [{ o: '"""', e: '"""', esc: true, multi: true }, { o: "'''", e: "'''", esc: true, multi: true }, DQ, SQ],
      kw: words('and as assert async await break class continue def del elif else except finally for from global if import in is lambda nonlocal not or pass raise return try while with yield match case'),
      lit: words('True False None self cls'),
      ty: words('int str float bool list dict set tuple bytes object'),
      extra: [[/@[\w.]+/y, 'meta']] },
    js,
    ts: { ...js, kw: words(JS_KW + ' interface type enum implements namespace declare abstract readonly private public protected keyof as is satisfies'),
      ty: words('string number boolean any unknown never void object bigint symbol') },
    go: { line: ['//'], block: C_BLOCK, str: [{ o: '`', e: '`', multi: true }, DQ, SQ], caps: true, calls: true,
      kw: words('break case chan const continue default defer else fallthrough for func go goto if import interface map package range return select struct switch type var'),
      lit: words('true false nil iota'),
      ty: words('bool byte complex64 complex128 error float32 float64 int int8 int16 int32 int64 rune string uint uint8 uint16 uint32 uint64 uintptr any') },
    c: { line: ['//'], block: C_BLOCK, str: [DQ, SQ], caps: true, calls: true,
      kw: words('auto break case const continue default do else enum extern for goto if inline register restrict return sizeof static struct switch typedef union volatile while class namespace template typename public private protected virtual override new delete using try catch throw final import package extends implements interface fun val var when'),
      lit: words('true false NULL nullptr null this'),
      ty: words('void char short int long float double signed unsigned bool size_t uint8_t uint16_t uint32_t uint64_t int8_t int16_t int32_t int64_t String'),
      extra: [[/^\s*#\s*\w+/y, 'meta']] },
    sh: { str: [{ ...DQ, multi: true }, { o: "'", e: "'", multi: true }], calls: false,
      kw: words('if then else elif fi for while until do done case esac in function return local export readonly set unset shift exit break continue source'),
      lit: words('true false'),
      extra: [HASH_COMMENT, [/\$(?:\{[^}]*\}|[\w@#?*!$-]+|\(\(?)/y, 'var']] },
    toml: { line: ['#'], lit: words('true false'),
      str: [{ o: '"""', e: '"""', esc: true, multi: true }, { o: "'''", e: "'''", multi: true }, DQ, { o: "'", e: "'" }],
      extra: [[/^\s*\[\[?[^\]]*\]\]?/y, 'head'], [/[\w.-]+(?=\s*=)/y, 'key']] },
    yaml: { str: [DQ, { o: "'", e: "'" }], lit: words('true false null yes no on off'),
      extra: [[/^(?:---|\.\.\.)\s*$/y, 'meta'], HASH_COMMENT, [/^\s*(?:-\s+)?[^\s#:'"-][^:#]*?(?=:(?:\s|$))/y, 'key'], [/[&*][\w-]+/y, 'meta']] },
    json: { str: [DQ], lit: words('true false null'), extra: [[/"(?:[^"\\]|\\.)*"(?=\s*:)/y, 'key']] },
    md: { words: false, block: [['```', '```', 'str'], ['<!--', '-->', 'com']],
      extra: [[/^#{1,6}\s.*/y, 'head'], [/^\s*>.*/y, 'com'], [/^\s*(?:[-*+]|\d+[.)])(?=\s)/y, 'kw'], [/`[^`]+`/y, 'str'],
        [/\*\*[^*]+\*\*|__[^_]+__/y, 'strong'], [/\*[^*\s][^*]*\*/y, 'em'], [/!?\[[^\]]*\]\([^)]*\)/y, 'link']] },
    html: { words: false, block: [['<!--', '-->', 'com']], str: [DQ, SQ],
      extra: [[/<\/?[A-Za-z][\w:.-]*|\/?>/y, 'kw'], [/[\w:-]+(?==)/y, 'key'], [/&#?\w+;/y, 'lit']] },
    css: { words: false, block: C_BLOCK, str: [DQ, SQ],
      extra: [[/#[\da-fA-F]{3,8}\b/y, 'num'], [/@[\w-]+/y, 'kw'], [/--[\w-]+|[a-z-]+(?=\s*:(?!:))/y, 'key']] },
  };
  const EXT = { rs: 'rust', py: 'python', pyi: 'python', js: 'js', mjs: 'js', cjs: 'js', jsx: 'js', ts: 'ts', tsx: 'ts', mts: 'ts',
    go: 'go', c: 'c', h: 'c', cc: 'c', cpp: 'c', cxx: 'c', hpp: 'c', java: 'c', kt: 'c', cs: 'c', swift: 'c', scala: 'c',
    sh: 'sh', bash: 'sh', zsh: 'sh', toml: 'toml', lock: 'toml', yml: 'yaml', yaml: 'yaml', json: 'json', jsonl: 'json',
    md: 'md', markdown: 'md', html: 'html', htm: 'html', xml: 'html', svg: 'html', vue: 'html', css: 'css', scss: 'css' };
  const NAMES = { Makefile: 'sh', Dockerfile: 'sh', '.gitignore': 'sh', '.env': 'sh', 'Cargo.lock': 'toml' };

  function langOf(path) {
    const name = path.split('/').pop();
    if (NAMES[name]) return NAMES[name];
    const dot = name.lastIndexOf('.');
    return dot >= 0 ? EXT[name.slice(dot + 1).toLowerCase()] || null : null;
  }

  /** Where a delimited token ending in `end` ends (just past it), or -1. */
  function findEnd(text, from, end, esc) {
    for (let i = from; i < text.length; i++) {
      if (esc && text[i] === '\\') i++;
      else if (text.startsWith(end, i)) return i + end.length;
    }
    return -1;
  }

  /**
   * Splits one line into [class, text] pieces. `state` carries a token left open by the
   * line before (a block comment, a multi-line string); returns [pieces, state after].
   */
  function tokenize(lang, text, state) {
    const spec = L[lang];
    if (!spec || text.length > 2000) return [[['', text]], null];
    const out = [];
    const push = (cls, s) => {
      if (!s) return;
      const last = out[out.length - 1];
      if (last && last[0] === cls) last[1] += s;
      else out.push([cls, s]);
    };
    let pos = 0;
    // A token with delimiters: closes on this line, or stays open as the next state.
    const delimited = (open, end, cls, esc, multi) => {
      const stop = findEnd(text, pos + open.length, end, esc);
      if (stop < 0) {
        push(cls, text.slice(pos));
        pos = text.length;
        return multi ? { e: end, esc, cls } : null;
      }
      push(cls, text.slice(pos, stop));
      pos = stop;
      return null;
    };
    if (state) {
      const stop = findEnd(text, 0, state.e, state.esc);
      if (stop < 0) return [[[state.cls, text]], state];
      push(state.cls, text.slice(0, stop));
      pos = stop;
      state = null;
    }
    scan: while (pos < text.length) {
      for (const [re, cls] of spec.extra || []) {
        re.lastIndex = pos;
        const m = re.exec(text);
        if (m && m[0]) { push(cls, m[0]); pos += m[0].length; continue scan; }
      }
      for (const c of spec.line || []) {
        if (text.startsWith(c, pos)) { push('com', text.slice(pos)); break scan; }
      }
      for (const [o, e, cls] of spec.block || []) {
        if (text.startsWith(o, pos)) {
          const open = delimited(o, e, cls, false, true);
          if (open) return [out, open];
          continue scan;
        }
      }
      for (const s of spec.str || []) {
        if (text.startsWith(s.o, pos)) {
          const open = delimited(s.o, s.e, 'str', !!s.esc, !!s.multi);
          if (open) return [out, open];
          continue scan;
        }
      }
      IDENT.lastIndex = pos;
      const id = IDENT.exec(text);
      if (id) {
        const w = id[0];
        pos += w.length;
        if (spec.words === false) { push('', w); continue; }
        const next = text[pos];
        let cls = '';
        if (spec.kw?.has(w)) cls = 'kw';
        else if (spec.lit?.has(w)) cls = 'lit';
        else if (spec.ty?.has(w)) cls = 'ty';
        else if (spec.macros && next === '!') cls = 'fn';
        else if (spec.calls && next === '(') cls = 'fn';
        else if (spec.caps && /^[A-Z][A-Z0-9_]+$/.test(w)) cls = 'lit';
        else if (spec.caps && /^[A-Z]/.test(w)) cls = 'ty';
        push(cls, w);
        continue;
      }
      NUM.lastIndex = pos;
      const num = NUM.exec(text);
      if (num) { push('num', num[0]); pos += num[0].length; continue; }
      push('', text[pos]);
      pos += 1;
    }
    return [out, null];
  }

  /** Appends one line's coloured pieces to `el`; returns the state for the next line. */
  function line(el, lang, text, state) {
    const [pieces, next] = tokenize(lang, text, state);
    for (const [cls, s] of pieces) el.append(cls ? h('span', { class: 'tok-' + cls }, s) : s);
    return next;
  }

  /** The state after a line, without colouring it (the other side of a context line). */
  const advance = (lang, text, state) => tokenize(lang, text, state)[1];

  return { langOf, line, advance };
})();

// ---------- routing and the live connection ----------

let current = null;   // the view shown: {kind, run, task, refresh(), onEvent(), showFile(), leave()}
let navSeq = 0;       // bumps on every navigation; late answers of older ones are dropped
const runPrefs = new Map();   // run id -> {filter, search, scroll}: kept while the page lives

function setReady(ready) {
  document.body.dataset.ready = ready ? 'true' : 'false';
}

function parseHash() {
  const parts = location.hash.replace(/^#\/?/, '').split('/').filter(Boolean).map((p) => {
    try { return decodeURIComponent(p); } catch { return p; }
  });
  if (parts[0] === 'runs' && parts[1]) {
    if (parts[2] === 'tasks' && parts[3]) {
      return { view: 'task', run: parts[1], task: parts[3], file: parts[4] === 'files' ? parts[5] || null : null };
    }
    return { view: 'run', run: parts[1] };
  }
  return { view: 'runs' };
}

function setCrumbs(items) {
  const nav = document.getElementById('crumbs');
  fill(nav, items.map((item, i) => [
    h('span', { class: 'sep', 'aria-hidden': 'true' }, '/'),
    item.href && i < items.length - 1 ? h('a', { href: item.href }, item.text) : h('span', { class: 'here' }, item.text),
  ]));
  document.title = items.length ? `${items.map((i) => i.text).join(' / ')} · plait` : 'plait';
}

function mount(el) {
  fill(document.getElementById('main'), el);
}

async function route() {
  if ((location.hash === '' || location.hash === '#') && START_RUN) {
    location.replace(runHref(START_RUN));
    return;
  }
  const want = parseHash();
  if (current?.kind === 'task' && want.view === 'task' && current.run === want.run && current.task === want.task) {
    if (want.file) current.showFile(want.file);
    return;
  }
  const seq = ++navSeq;
  if (current?.leave) current.leave();
  if (want.view === 'runs' || (current && current.run !== want.run)) Live.close();
  current = null;
  setReady(false);
  if (want.view !== 'runs') Live.open(want.run);
  try {
    const view = want.view === 'runs' ? await runsPage(seq)
      : want.view === 'run' ? await runPage(seq, want.run)
        : await taskPage(seq, want.run, want.task, want.file);
    if (seq !== navSeq || !view) return;
    current = view;
  } catch (e) {
    if (seq !== navSeq) return;
    console.warn(e);
    mount(h('div', { class: 'panel error-page' },
      h('h1', null, e.status === 404 ? 'Not found' : 'Could not load this page'),
      h('p', null, e.message),
      h('p', null, h('a', { href: '#/' }, 'All runs'), ' · ', h('a', { href: location.hash, onclick: (ev) => { ev.preventDefault(); route(); } }, 'Retry'))));
  }
  setReady(true);
}

/** The run's event stream while one of its pages is shown. */
const Live = (() => {
  let es = null;
  let run = null;
  let opened = false;
  let timer = null;
  const el = () => document.getElementById('live');

  function show(connected) {
    const live = el();
    live.hidden = false;
    live.dataset.connected = connected ? 'true' : 'false';
    live.title = connected ? 'receiving the run\'s events' : 'not connected to the run\'s events (retrying)';
    live.querySelector('.live-text').textContent = connected ? 'live updates' : 'disconnected';
  }

  function dispatch(kind, ev) {
    let data;
    try { data = JSON.parse(ev.data); } catch { return; }
    kind = kind || data?.event;
    if (!data || !current || current.run !== run) return;
    current.onEvent?.(kind, data);
    // A `state` the page can apply itself (its version, or the rows that changed) needs
    // no reading again.
    if (kind === 'state' && !current.onState?.(data)) refreshSoon();
  }

  /** Refetches the shown page once events calm down (~300 ms). */
  function refreshSoon() {
    clearTimeout(timer);
    timer = setTimeout(() => { if (current?.run === run) current.refresh?.(); }, 300);
  }

  function open(id) {
    if (es && run === id) return;
    close();
    run = id;
    opened = false;
    show(false);
    es = new EventSource(`${runUrl(id)}/events`);
    es.onopen = () => {
      show(true);
      if (opened) refreshSoon();   // a reconnection: events may have been missed
      opened = true;
    };
    es.onerror = () => show(es && es.readyState === EventSource.OPEN);
    for (const kind of ['task', 'group', 'bisect', 'state']) es.addEventListener(kind, (ev) => dispatch(kind, ev));
    es.onmessage = (ev) => dispatch(null, ev);
  }

  function close() {
    clearTimeout(timer);
    if (es) es.close();
    es = null;
    run = null;
    const live = el();
    live.hidden = true;
    live.dataset.connected = 'false';
  }

  return { open, close, refreshSoon };
})();

// ---------- the runs list ----------

async function runsPage(seq) {
  const data = await getJSON('/api/runs');
  if (seq !== navSeq) return null;
  const runs = [...(data.runs || [])].sort((a, b) => (b.created_at || 0) - (a.created_at || 0));
  const row = (r) => h('tr', { dataset: { run: r.id }, class: 'clickable', onclick: (ev) => { if (!ev.target.closest('a')) location.hash = runHref(r.id); } },
    h('td', { class: 'mono' }, h('a', { href: runHref(r.id) }, r.id)),
    h('td', { class: 'goal' }, r.goal),
    h('td', { class: 'nowrap' }, phaseBadge(r.phase), r.live && liveBadge(), r.landed && h('span', { class: 'badge landed' }, 'landed')),
    h('td', null, stateSummary(r.states, r.tasks)),
    h('td', { class: 'num' }, r.tasks),
    h('td', { class: 'num' }, fmtCost(r.cost_usd)),
    h('td', { class: 'num nowrap', title: fmtDate(r.created_at) }, fmtAgo(r.created_at)),
    h('td', { class: 'num' }, r.finished_at ? fmtMs(r.finished_at - r.created_at) : '—'));
  const list = runs.length
    ? h('table', { class: 'grid' },
      h('thead', null, h('tr', null, ['Run', 'Goal', 'Phase', 'States', 'Tasks', 'Cost', 'Started', 'Took'].map((c) => h('th', null, c)))),
      h('tbody', null, runs.map(row)))
    : emptyNote('No runs in this repository yet: `plait run PLAN` starts one.');
  setCrumbs([{ text: 'runs' }]);
  mount(h('div', { id: 'runs' },
    h('div', { class: 'page-head' }, h('h1', null, 'Runs'), h('span', { class: 'muted mono' }, data.repo || '')),
    h('div', { class: 'panel flush' }, list)));
  window.scrollTo(0, 0);
  return { kind: 'runs' };
}

// ---------- a run ----------

// The run page reads the run's summary (a row's worth of each task), then what git says of
// its branches (+/− lines, branches moved or merged by hand, the target's move), shown as
// "…" until it comes. A long list is windowed: only the rows in view (and a margin) are in
// the page, so 10,000 tasks cost what 100 do.

const FILTERS = [['all', 'All'], ['attention', 'Needs attention'], ['rejected', 'Rejected'], ['conflicts', 'Conflicts'], ['failed', 'Failed']];
const COLUMNS = ['Task', 'State', 'Lines', 'Files', 'Viol.', 'Checks', 'Verdict', 'Tokens in / out', 'Cost', 'Time'];
const WINDOWED_FROM = 300;   // rows from which the list is windowed
const OVERSCAN = 25;         // rows rendered beyond the view on each side

/** A blocker's line; one naming hundreds of tasks is folded after its first ones. */
function blockerText(text) {
  if (text.length <= 320) return withCode(text);
  const cut = text.lastIndexOf(', ', 280);
  const shownPart = text.slice(0, cut > 0 ? cut : 280);
  const rest = text.slice(shownPart.length).split(', ').filter(Boolean).length;
  return h('details', { class: 'long' }, h('summary', null, withCode(shownPart), h('span', { class: 'muted' }, ` … and ${rest} more`)), h('p', { class: 'small' }, withCode(text)));
}

function matchesFilter(filter, t) {
  const rejected = t.state === 'rejected' || t.verdict === 'reject';
  switch (filter) {
    case 'failed': return t.state === 'failed' || t.state === 'blocked';
    case 'rejected': return rejected;
    case 'conflicts': return !!t.conflict;
    // As the gate decides it (the server's `attention`): a task a person rejected needs nobody.
    case 'attention': return !!t.attention;
    default: return true;
  }
}

/** A row's verdict: the one that counts, and the reviewer's when a person overruled it. */
function rowVerdictCell(t) {
  if (!t.verdict) return h('span', { class: 'muted' }, '—');
  const person = t.by === 'person';
  return h('span', { class: 'verdicts' },
    verdictBadge(t.verdict, person ? 'decided' : null), h('span', { class: 'by' }, t.by || 'review'),
    t.overruled && h('span', { class: 'overruled small', title: 'the review\'s verdict, overruled by the person\'s decision' },
      'review: ', VERDICTS[t.overruled] || t.overruled));
}

function rowChecksCell(t) {
  const [passed, total] = t.checks || [0, 0];
  if (!total) return h('span', { class: 'muted' }, '—');
  const failed = total - passed;
  return h('span', { class: failed ? 'checks fail' : 'checks pass', title: (t.failed || []).map((c) => `✗ ${c}`).join('\n') || 'all passed' },
    failed ? `✗ ${failed} failed` : '✓', h('span', { class: 'muted' }, ` ${passed}/${total}`));
}

function rowTokens(t) {
  if (!t.tokens) return h('span', { class: 'muted' }, '—');
  const about = t.tokens_estimated ? '≈ ' : '';
  return h('span', { title: `input ${t.tokens[0]}, output ${t.tokens[1]}${about ? '; estimated: the server sent no usage' : ''}` }, `${about}${fmtTokens(t.tokens[0])} / ${fmtTokens(t.tokens[1])}`);
}

/** +added −removed of a task's branch against the base, "…" until git has said. */
function linesCell(git, id) {
  const lines = git?.lines?.[id];
  if (!git) return h('span', { class: 'muted lines-pending', title: 'counting the lines of the branches…' }, '…');
  if (!lines) return h('span', { class: 'muted', title: 'git cannot read this task\'s commit' }, '—');
  return h('span', { class: 'lines', title: `${lines[0]} added, ${lines[1]} removed against the run's base` },
    h('span', { class: 'plus' }, `+${lines[0]}`), ' ', h('span', { class: 'minus' }, `−${lines[1]}`));
}

/** Whether landing `l` is the one the server says holds the run's merge as it is now. */
function isCurrent(d, l) {
  const now = d.gate?.landed;
  return !!now && now.at === l.at && now.to === l.to && now.branch === l.branch;
}

/** What the target branch did since the run's base, in one line (null when nothing). */
function targetNote(run, git) {
  const t = git?.target;
  if (!t) return null;
  const landing = (run.landed || []).filter((l) => l.branch === t.branch).pop();
  if (landing) {
    return landing.to === t.tip ? null
      : h('span', { id: 'target', class: 'warn-text', dataset: { moved: 'true' } }, h('code', null, t.branch), ` moved since the run landed into it (now ${short(t.tip)})`);
  }
  if (!t.ahead && !t.behind) return h('span', { id: 'target', dataset: { moved: 'false' } }, h('code', null, t.branch), ' has not moved since the base');
  return h('span', { id: 'target', class: 'warn-text', dataset: { moved: 'true', ahead: t.ahead, behind: t.behind },
    title: `${t.branch} is at ${short(t.tip)}` },
  h('code', null, t.branch), ` moved since the base: ${count(t.ahead, 'new commit')}`,
  t.behind ? `, and ${count(t.behind, 'commit')} of the base gone (reset or rewritten)` : '',
  git.merged?.length ? ` · ${count(git.merged.length, 'task')} merged into it by hand` : '');
}

async function runPage(seq, runId) {
  const data = await getJSON(`${runUrl(runId)}/summary`);
  if (seq !== navSeq) return null;
  const view = runView(runId);
  view.update(data);
  setCrumbs([{ text: 'runs', href: '#/' }, { text: runId }]);
  mount(view.el);
  window.scrollTo(0, runPrefs.get(runId).scroll || 0);
  view.start();
  return view;
}

function runView(runId) {
  if (!runPrefs.has(runId)) runPrefs.set(runId, { filter: 'all', search: '', scroll: 0 });
  const prefs = runPrefs.get(runId);
  let data = null;             // the summary: {run, tasks, gate, attention, totals, live, version}
  let byId = new Map();        // task id -> its row in data.tasks
  let git = null;              // what git says of the branches, once it has
  let gitSeq = 0;
  let busy = false;
  let seq = 0;
  let items = [];              // what the list shows: {group} heads and {task} rows, filtered
  let shownCount = 0;
  let found = null;            // the server's search: {q, ids: Set}
  let searchTimer = null;
  const details = new Map();   // task id -> last detail line from events
  const rendered = new Map();  // task id -> its <tr>, for the rows in the page
  let win = { first: -1, last: -1 };
  let rowH = 45;               // a row's height, measured once rows are in the page
  let frame = 0;

  const head = h('div', { class: 'page-head' });
  const totals = h('div', { id: 'totals', class: 'totals' });
  const gate = h('div', { id: 'gate', class: 'gate', dataset: { green: 'false' } });
  const attentionEl = h('div', { id: 'attention' });
  const extras = h('div', { class: 'run-extras' });
  const tasks = h('div', { id: 'tasks', class: 'panel flush', dataset: { lines: 'pending' } });
  const shown = h('span', { class: 'muted shown' });
  const activity = h('ol', { id: 'activity', class: 'activity' });
  const outcome = h('div', { id: 'outcome', class: 'outcome', hidden: true, role: 'status' });

  const tbody = h('tbody');
  const topPad = h('tr', { class: 'pad', 'aria-hidden': 'true' }, h('td', { colspan: COLUMNS.length }));
  const bottomPad = h('tr', { class: 'pad', 'aria-hidden': 'true' }, h('td', { colspan: COLUMNS.length }));
  const table = h('table', { class: 'grid tasks' },
    h('colgroup', null, COLUMNS.map((c, i) => h('col', { class: `c-${i}` }))),
    h('thead', null, h('tr', null, COLUMNS.map((c) => h('th', null, c)))), tbody);
  const empty = h('div');

  const search = h('input', { id: 'search', type: 'search', placeholder: 'Search tasks, paths, errors', value: prefs.search, autocomplete: 'off',
    oninput: () => { prefs.search = search.value; askServer(); renderTasks(); } });
  const filterButtons = FILTERS.map(([key, label]) => h('button', { type: 'button', dataset: { filter: key },
    onclick: () => { prefs.filter = key; renderTasks(); } }, label, h('span', { class: 'count' })));

  const into = h('input', { id: 'land-into', type: 'text', spellcheck: 'false', 'aria-label': 'branch to land into' });
  const partial = h('input', { id: 'land-partial', type: 'checkbox', onchange: () => updateLand() });
  const landButton = h('button', { type: 'button', class: 'btn primary', dataset: { action: 'land' }, onclick: () => land() }, 'Land');
  const landForm = h('form', { class: 'land', onsubmit: (ev) => { ev.preventDefault(); if (!landButton.disabled) land(); } },
    h('label', { for: 'land-into' }, 'Land into'), into,
    h('label', { class: 'tick' }, partial, ' partial', h('span', { class: 'muted' }, ' (only the clean tasks)')),
    landButton);

  const el = h('div', { id: 'run', dataset: { run: runId } },
    head, totals,
    h('div', { class: 'gate-row' }, h('div', { class: 'panel gate-panel' }, gate, attentionEl, landForm, outcome), extras),
    h('div', { class: 'toolbar' }, h('div', { class: 'seg filters', role: 'group', 'aria-label': 'filter' }, filterButtons), search, shown),
    tasks,
    h('section', { class: 'activity-panel', hidden: true }, h('h2', null, 'Live events'), activity));
  add(tasks, table, empty);

  function updateLand() {
    const green = !!data?.gate?.green;
    // Landed: the target holds the merge as it is now; nothing is left to land until a
    // decision changes the merge (then the server no longer says `landed`).
    const landed = !!data?.gate?.landed;
    landForm.hidden = landed;
    landButton.disabled = busy || landed || !(green || partial.checked);
    landButton.title = landed ? 'landed: the target holds this merge' : green ? 'land the merged branch' : partial.checked
      ? 'try a partial landing (the server checks its own gate)' : 'the gate is not green';
  }

  async function land() {
    busy = true;
    await act([landButton], outcome,
      () => post(`${runUrl(runId)}/land`, { into: into.value.trim() || data.run.base_name, partial: partial.checked }),
      () => refresh());
    busy = false;
    updateLand();
  }

  async function decideGroup(group, action, buttons) {
    await act(buttons, outcome, () => post(`${taskUrl(runId, group)}/${action}`, {}), () => refresh());
  }

  function renderHead(d) {
    const run = d.run;
    fill(head,
      h('h1', null, h('span', { class: 'mono' }, run.id), ' ', phaseBadge(run.phase), d.live && liveBadge(),
        d.gate?.landed ? h('span', { class: 'badge landed' }, d.gate.landed.partial ? 'landed in part' : 'landed') : null),
      h('p', { class: 'goal-line' }, run.goal),
      h('p', { class: 'meta-line muted' },
        h('span', null, 'base ', h('code', null, run.base_name), ' @ ', h('code', null, short(run.base))),
        targetNote(run, git),
        h('span', { title: fmtDate(run.created_at) }, 'started ', fmtAgo(run.created_at)),
        run.merge && h('span', null, 'merged into ', h('code', null, run.merge.branch)),
        (run.landed || []).map((l) => h('span', { class: isCurrent(d, l) ? 'ok' : 'muted', dataset: { landing: isCurrent(d, l) ? 'current' : 'earlier' } },
          `landed into ${l.branch} ${fmtAgo(l.at)}${l.fast_forward ? ' (fast-forward)' : ''}${l.partial ? ', in part' : ''}${isCurrent(d, l) ? '' : ', an earlier merge'}`))));
  }

  function renderTotals(d) {
    const t = d.totals || {};
    const stat = (label, value, cls) => h('div', { class: `stat ${cls || ''}` }, h('div', { class: 'value' }, value), h('div', { class: 'label' }, label));
    const budget = d.run.max_cost != null ? ` of ${fmtCost(d.run.max_cost)}` : '';
    const elapsed = d.run.finished_at ? d.run.finished_at - d.run.created_at : Date.now() - d.run.created_at;
    fill(totals,
      stat('tasks', [String(t.tasks ?? d.tasks.length), ' ', stateSummary(t.states, t.tasks)], 'wide'),
      stat('files changed', t.changed_files ?? '—'),
      stat('violations', t.violations ?? '—', t.violations ? 'warn' : ''),
      stat(t.usage_estimated ? 'tokens in / out (≈ estimated)' : 'tokens in / out', `${t.usage_estimated ? '≈ ' : ''}${fmtTokens(t.input_tokens)} / ${fmtTokens(t.output_tokens)}`),
      stat('cost', fmtCost(t.cost_usd) + budget),
      stat('time', fmtMs(elapsed)));
  }

  function renderGate(d) {
    const g = { green: !!d.gate?.green, blockers: d.gate?.blockers || [], landed: d.gate?.landed || null };
    const attention = new Set(d.attention || []);
    gate.dataset.green = g.green ? 'true' : 'false';
    gate.dataset.landed = g.landed ? 'true' : 'false';
    // One verdict from the server's record: landed (the blockers then are what a partial
    // landing left out), else ready or not.
    const [title, note] = g.landed
      ? [h('span', null, 'Landed into ', h('code', null, g.landed.branch)),
        g.blockers.length ? ' — in part, leaving out:' : ` — ${fmtAgo(g.landed.at)}`]
      : g.green ? ['Ready to land', ' — the gate is green'] : ['Not ready to land', ` — ${count(g.blockers.length, 'blocker')}`];
    fill(gate,
      h('h2', null, h('span', { class: 'gate-light', 'aria-hidden': 'true' }), title, h('span', { class: 'muted small' }, note)),
      g.blockers.length ? h('ul', { class: 'blockers' }, g.blockers.map((b) => h('li', { class: attention.has(b) ? 'attention' : '' }, blockerText(b)))) : null);
    const more = (d.attention || []).filter((a) => !g.blockers.includes(a));
    fill(attentionEl, more.length ? [h('h3', null, 'Needs attention'), h('ul', { class: 'blockers' }, more.map((a) => h('li', { class: 'attention' }, blockerText(a))))] : null);
    if (!into.value) into.value = d.run.base_name || '';
    updateLand();
  }

  function renderExtras(d) {
    const run = d.run;
    const parts = [];
    if (run.merged_checks?.length) {
      parts.push(h('div', { class: 'panel' }, h('h2', null, 'Merged checks'),
        h('ul', { class: 'check-list' }, run.merged_checks.map((c) => h('li', { class: c.passed ? 'pass' : 'fail', title: c.tail || '' },
          h('span', { class: 'icon' }, c.passed ? '✓' : '✗'), h('code', null, c.command), h('span', { class: 'muted' }, ` ${fmtMs(c.ms)}${baseNote(c)}`))))));
    }
    const conflicts = run.merge?.conflicts || [];
    if (conflicts.length) {
      parts.push(h('div', { class: 'panel' }, h('h2', null, 'Conflicts'),
        h('ul', { class: 'plain' }, conflicts.map((c) => h('li', null, h('code', null, c.path), ' ', h('span', { class: 'badge warn' }, c.kind), ' ',
          (c.tasks || []).map((id, i) => [i ? ', ' : '', h('a', { href: taskHref(run.id, id) }, id)]))))));
    }
    const cul = run.culprits;
    if (cul && (cul.sets?.length || cul.base_fails?.length || cul.flaky?.length)) {
      const q = (xs) => xs.map((x, i) => [i ? ', ' : '', h('code', null, x)]);
      parts.push(h('div', { class: 'panel' }, h('h2', null, 'Culprit search', h('span', { class: 'count' }, cul.runs != null ? `${cul.runs} runs` : '')),
        h('ul', { class: 'plain' },
          (cul.sets || []).map((s) => h('li', null, h('span', { class: 'badge bad' }, 'culprit'), ' ',
            s.tasks.map((id, i) => [i ? ', ' : '', h('a', { href: taskHref(run.id, id) }, id)]), ' breaks ', q(s.checks || []),
            s.partners?.length ? [' together with ', q(s.partners)] : null,
            s.tail && h('pre', { class: 'tail' }, s.tail))),
          cul.base_fails?.length ? h('li', null, 'failing on the base alone: ', q(cul.base_fails)) : null,
          cul.flaky?.length ? h('li', null, 'flaky: ', q(cul.flaky)) : null,
          cul.reworked?.length ? h('li', null, 'sent back for rework: ', q(cul.reworked)) : null)));
    }
    fill(extras, parts);
  }

  function taskRow(t) {
    const tr = h('tr', { class: 'task-row', dataset: { task: t.id, state: t.state } });
    fillRow(tr, t);
    return tr;
  }

  function fillRow(tr, t) {
    tr.dataset.state = t.state;
    const moved = git?.moved?.[t.id];
    const merged = git?.mergedSet?.has(t.id);
    tr.dataset.moved = moved ? 'true' : 'false';
    tr.dataset.merged = merged ? 'true' : 'false';
    const tags = [
      t.conflict && h('span', { class: 'tag warn' }, 'conflict'),
      t.culprit && h('span', { class: 'tag bad' }, 'culprit'),
      t.excluded && h('span', { class: 'tag' }, 'left out'),
      t.after?.length > 0 && h('span', { class: 'tag after', title: 'it starts from the merged result of the tasks it comes after (after)' }, `after ${t.after.join(', ')}`),
      t.blocked_by?.length > 0 && h('span', { class: 'tag bad', title: 'it never started: these did not end well' }, `blocked by ${t.blocked_by.join(', ')}`),
      t.waiting && h('span', { class: 'tag warn', title: 'left out of the merge: a task it comes after is not in it' }, 'waits'),
      t.rounds > 0 && h('span', { class: 'tag', title: 'rounds of changes after the first try (the agent\'s PLAIT_ROUND)' }, `round ${t.rounds}`),
      t.sent_back > 0 && h('span', { class: 'tag', title: 'sent back by a person' }, count(t.sent_back, 'send-back')),
      moved && h('span', { class: 'tag warn moved', title: `its branch was moved by hand since the run's commit (now ${short(moved)}); plait land collects the new commits if they change only what the task owns` }, 'moved by hand'),
      merged && h('span', { class: 'tag warn merged', title: `${git.target.branch} already has its commit, merged by hand` }, 'merged by hand'),
      t.adopted && h('span', { class: 'tag', title: `commits made by hand on its branch were collected (${t.adopted})` }, 'fixed by hand'),
      t.nothing_to_do && h('span', { class: 'tag ok', title: `its agent said: ${t.nothing_to_do}` }, 'nothing to do'),
      t.attempts > 0 && h('span', { class: t.chosen ? 'tag ok attempts' : 'tag attempts', title: t.chosen ? `run as ${t.attempts} attempts; attempt ${t.chosen} chosen by ${t.chosen_by}` : `run as ${t.attempts} attempts; none chosen yet` },
        t.chosen ? `#${t.chosen} of ${t.attempts}` : `${t.attempts} attempts`),
    ];
    const detail = t.error || (t.nothing_to_do && `nothing to do: ${t.nothing_to_do}`) || details.get(t.id);
    fill(tr,
      h('td', { class: 'task-id' }, h('a', { href: taskHref(runId, t.id) }, t.id), ' ', tags,
        detail && h('div', { class: t.error ? 'detail err' : 'detail muted', title: detail }, detail)),
      h('td', null, stateBadge(t.state)),
      h('td', { class: 'num nowrap lines-cell' }, linesCell(git, t.id)),
      h('td', { class: 'num' }, t.files || h('span', { class: 'muted' }, '0')),
      h('td', { class: t.violations ? 'num warn-text' : 'num muted' }, t.violations),
      h('td', null, rowChecksCell(t)),
      h('td', null, rowVerdictCell(t)),
      h('td', { class: 'num nowrap' }, rowTokens(t)),
      h('td', { class: 'num' }, fmtCost(t.cost_usd)),
      h('td', { class: 'num nowrap' }, fmtMs(taskElapsed(t))));
  }

  function groupHead(g, rows) {
    const acceptB = h('button', { type: 'button', class: 'btn small', dataset: { action: 'accept-group', group: g.id } }, 'Accept');
    const rejectB = h('button', { type: 'button', class: 'btn small danger', dataset: { action: 'reject-group', group: g.id } }, 'Reject');
    acceptB.onclick = () => decideGroup(g.id, 'accept', [acceptB, rejectB]);
    rejectB.onclick = () => decideGroup(g.id, 'reject', [acceptB, rejectB]);
    if (g.loose) return h('tr', { class: 'group-head', dataset: { group: '' } }, h('td', { colspan: COLUMNS.length }, h('strong', null, 'not in a group')));
    const total = g.tasks;
    return h('tr', { class: 'group-head', dataset: { group: g.id } }, h('td', { colspan: COLUMNS.length },
      h('div', { class: 'group-line' },
        h('strong', { class: 'mono' }, g.id),
        h('span', { class: 'muted' }, rows === total ? count(total, 'task') : `${rows} of ${count(total, 'task')}`),
        g.supervised ? verdictCell({ review: g.review ? { ...g.review, by: 'supervisor' } : null, decision: g.decision })
          : h('span', { class: 'muted' }, 'not supervised'),
        g.conflicts ? h('span', { class: 'tag warn' }, count(g.conflicts, 'conflict')) : null,
        h('span', { class: g.merged_up ? 'tag ok' : 'tag' }, g.merged_up ? 'in the top merge' : 'held out of the top merge'),
        h('span', { class: 'spacer' }),
        g.supervised && acceptB, g.supervised && rejectB)));
  }

  /** The head of a wave's rows: its number, and what its tasks start from. */
  function waveHead(w) {
    const what = w.wave === 0 ? 'from the base' : 'each from the merged work of the tasks it comes after';
    return h('tr', { class: 'group-head wave-head', dataset: { wave: String(w.wave) } }, h('td', { colspan: COLUMNS.length },
      h('div', { class: 'group-line' },
        h('strong', null, `wave ${w.wave + 1}`),
        h('span', { class: 'muted' }, w.rows === w.tasks ? count(w.tasks, 'task') : `${w.rows} of ${count(w.tasks, 'task')}`),
        h('span', { class: 'muted' }, what))));
  }

  /** Asks the server which tasks the search finds in what the rows leave out (paths). */
  function askServer() {
    clearTimeout(searchTimer);
    const q = prefs.search.trim();
    if (!q) { found = null; return; }
    searchTimer = setTimeout(async () => {
      try {
        const res = await getJSON(`${runUrl(runId)}/search?q=${enc(q)}`);
        if (prefs.search.trim() !== q || current?.el !== el) return;
        found = { q, ids: new Set(res.tasks || []) };
        renderTasks();
      } catch (e) {
        console.warn('search failed', e);
      }
    }, 150);
  }

  function matchesSearch(q, t) {
    if (!q) return true;
    if (found && found.q.toLowerCase() === q && found.ids.has(t.id)) return true;
    const detail = details.get(t.id);
    return [t.id, t.error, detail].some((s) => s && String(s).toLowerCase().includes(q));
  }

  /** Filters the rows into the list's items (group heads and rows), then shows them. */
  function renderTasks() {
    if (!data) return;
    const run = data.run;
    const q = prefs.search.trim().toLowerCase();
    const visible = (t) => matchesFilter(prefs.filter, t) && matchesSearch(q, t);
    for (const b of filterButtons) {
      const key = b.dataset.filter;
      b.setAttribute('aria-pressed', key === prefs.filter ? 'true' : 'false');
      b.querySelector('.count').textContent = String(data.counts[key] ?? 0);
    }
    items = [];
    let n = 0;
    const groups = run.groups?.length ? [...run.groups] : [];
    const waves = !groups.length && data.tasks.some((t) => t.wave > 0);
    if (waves) {
      // A run in waves: its tasks in the order their work flows, under a head per wave.
      const byWave = [];
      for (const t of data.tasks) (byWave[t.wave || 0] ||= []).push(t);
      byWave.forEach((members, k) => {
        if (!members) return;
        const rows = members.filter(visible);
        n += rows.length;
        if (!rows.length && prefs.filter !== 'all') return;
        items.push({ wave: k, rows: rows.length, tasks: members.length });
        for (const t of rows) items.push({ task: t });
      });
    } else if (!groups.length) {
      for (const t of data.tasks) if (visible(t)) { items.push({ task: t }); n++; }
    } else {
      const members = new Map(groups.map((g) => [g.id, []]));
      const loose = [];
      for (const t of data.tasks) (members.get(t.group) || loose).push(t);
      if (loose.length) groups.push({ id: '', loose: true, tasks: loose.length });
      members.set('', loose);
      for (const g of groups) {
        const rows = members.get(g.id).filter(visible);
        n += rows.length;
        if (!rows.length && prefs.filter !== 'all') continue;
        items.push({ group: g, rows: rows.length });
        for (const t of rows) items.push({ task: t });
      }
    }
    shownCount = n;
    table.classList.toggle('windowed', items.length >= WINDOWED_FROM);
    fill(empty, n ? null : emptyNote(data.tasks.length ? 'No task matches this filter.' : 'This run has no tasks.'));
    shown.textContent = n === data.tasks.length ? count(n, 'task') : `${n} of ${count(data.tasks.length, 'task')}`;
    win = { first: -1, last: -1 };
    renderWindow();
  }

  function itemEl(item) {
    if (item.group) return groupHead(item.group, item.rows);
    if (item.wave !== undefined) return waveHead(item);
    const tr = taskRow(item.task);
    rendered.set(item.task.id, tr);
    return tr;
  }

  /** Puts the items in view (all of them for a short list) into the table. */
  function renderWindow() {
    frame = 0;
    let first = 0;
    let last = items.length;
    if (items.length >= WINDOWED_FROM) {
      const top = tbody.getBoundingClientRect().top;
      first = Math.max(0, Math.floor(-top / rowH) - OVERSCAN);
      last = Math.min(items.length, Math.ceil((window.innerHeight - top) / rowH) + OVERSCAN);
      first = Math.min(first, Math.max(0, last - OVERSCAN));
    }
    if (first === win.first && last === win.last) return;
    win = { first, last };
    rendered.clear();
    topPad.firstChild.style.height = `${first * rowH}px`;
    bottomPad.firstChild.style.height = `${(items.length - last) * rowH}px`;
    topPad.hidden = first === 0;
    bottomPad.hidden = last === items.length;
    const rows = items.slice(first, last).map(itemEl);
    tbody.replaceChildren(topPad, ...rows, bottomPad);
    tasks.dataset.first = String(first);
    tasks.dataset.rendered = String(rows.length);
    if (items.length >= WINDOWED_FROM && rows.length) {
      // The rows' real height, so the padding stands for the rows left out.
      const measured = rows.reduce((a, r) => a + r.offsetHeight, 0) / rows.length;
      if (measured > 10 && Math.abs(measured - rowH) > 0.5) { rowH = measured; win = { first: -1, last: -1 }; schedule(); }
    }
  }

  function schedule() {
    if (!frame) frame = requestAnimationFrame(renderWindow);
  }

  function countFilters(d) {
    d.counts = {};
    for (const [key] of FILTERS) d.counts[key] = 0;
    for (const t of d.tasks) for (const [key] of FILTERS) if (matchesFilter(key, t)) d.counts[key]++;
  }

  function update(d) {
    data = d;
    byId = new Map(d.tasks.map((t) => [t.id, t]));
    countFilters(d);
    renderHead(d);
    renderTotals(d);
    renderGate(d);
    renderExtras(d);
    renderTasks();
  }

  /** Reads what git says of the branches, then shows the lines and the moves. */
  async function readBranches() {
    const mine = ++gitSeq;
    try {
      const g = await getJSON(`${runUrl(runId)}/branches`);
      if (mine !== gitSeq || current?.el !== el && current !== null) return;
      g.mergedSet = new Set(g.merged || []);
      git = g;
      if (data) renderHead(data);
      for (const [id, tr] of rendered) { const t = byId.get(id); if (t) fillRow(tr, t); }
      tasks.dataset.lines = 'all';
    } catch (e) {
      console.warn('reading the branches failed', e);
      tasks.dataset.lines = 'failed';
    }
  }

  function start() {
    window.addEventListener('scroll', schedule, { passive: true });
    window.addEventListener('resize', schedule);
    schedule();   // the list was first laid out before it was in the page
    readBranches();
  }

  async function refresh() {
    const mine = ++seq;
    try {
      const d = await getJSON(`${runUrl(runId)}/summary`);
      if (mine === seq && current?.el === el) { update(d); readBranches(); }
    } catch (e) {
      console.warn('refresh failed', e);
    }
  }

  /** A `state` event: patches the rows it names when it follows the version shown. */
  function onState(msg) {
    if (!data || !msg.version) return false;
    if (msg.version === data.version) return true;
    if (msg.since !== data.version || !Array.isArray(msg.tasks) || !msg.head) return false;
    for (const row of msg.tasks) {
      const t = byId.get(row.id);
      if (!t) return false;
      for (const k of Object.keys(t)) if (!(k in row)) delete t[k];
      Object.assign(t, row);
    }
    Object.assign(data, msg.head, { version: msg.version });
    countFilters(data);
    renderHead(data);
    renderTotals(data);
    renderGate(data);
    renderExtras(data);
    renderTasks();
    clearTimeout(onState.timer);
    onState.timer = setTimeout(readBranches, 300);
    return true;
  }

  function logEvent(text) {
    activity.closest('section').hidden = false;
    activity.prepend(h('li', null, h('time', null, new Date().toTimeString().slice(0, 8)), ' ', text));
    while (activity.children.length > 8) activity.lastChild.remove();
  }

  function onEvent(kind, msg) {
    if (kind === 'task' && msg.task && data) {
      const ev = msg.task;
      const t = byId.get(ev.task);
      const said = ev.detail && ev.detail !== ev.state ? ev.detail : null;
      logEvent(`${ev.task} → ${ev.state}${said ? `: ${said}` : ''}`);
      if (!t) { Live.refreshSoon(); return; }
      t.state = ev.state;
      if (ev.usage) { t.tokens = [ev.usage.input_tokens ?? 0, ev.usage.output_tokens ?? 0]; t.tokens_estimated = !!ev.usage.estimated; t.cost_usd = ev.usage.cost_usd; }
      if (said) details.set(t.id, said); else details.delete(t.id);
      const tr = rendered.get(t.id);
      if (tr) {
        fillRow(tr, t);
        tr.classList.remove('flash');
        void tr.offsetWidth;   // restart the animation
        tr.classList.add('flash');
      }
    } else if (kind === 'group' && msg.group) {
      logEvent(`${msg.group.group} ${msg.group.stage}${msg.group.detail ? `: ${msg.group.detail}` : ''}`);
    } else if (kind === 'bisect' && msg.step) {
      logEvent(`culprit search: ${msg.step.detail || (msg.step.passed ? 'passed' : 'failed')}`);
    }
  }

  function leave() {
    prefs.scroll = window.scrollY;
    window.removeEventListener('scroll', schedule);
    window.removeEventListener('resize', schedule);
    if (frame) cancelAnimationFrame(frame);
  }

  return { kind: 'run', run: runId, el, update, refresh, onEvent, onState, leave, start, shown: () => shownCount };
}

// ---------- a task ----------

async function taskPage(seq, runId, taskId, file) {
  const [data, diff] = await Promise.all([
    getJSON(taskUrl(runId, taskId)),
    getJSON(`${taskUrl(runId, taskId)}/diff`).catch((e) => ({ files: [], error: e.message })),
  ]);
  if (seq !== navSeq) return null;
  const view = taskView(runId, taskId);
  view.update(data, diff);
  setCrumbs([{ text: 'runs', href: '#/' }, { text: runId, href: runHref(runId) }, { text: taskId }]);
  mount(view.el);
  window.scrollTo(0, 0);
  if (file) view.showFile(file);
  return view;
}

function taskView(runId, taskId) {
  const open = new Map();   // collapsibles' open state across refreshes
  let data = null;
  let tip = null;
  let seq = 0;

  const head = h('div', { class: 'page-head' });
  const banners = h('div', { class: 'banners' });
  const prompt = section('prompt', 'Prompt');
  const review = section('review', 'Review');
  const checks = section('checks', 'Checks');
  const rounds = section('rounds', 'Rounds');
  const violations = section('violations', 'Violations');
  const conflicts = section('conflicts', 'Conflicts');
  const transcript = section('transcript', 'Transcript');
  const log = section('log', 'Agent log');
  const diffView = DiffView(runId, taskId);
  const attempts = AttemptsView(runId, open);
  const steer = SteerView(runId, taskId, () => refresh());

  const decision = h('div', { id: 'decision', class: 'decision-status' });
  const comment = h('textarea', { id: 'comment', rows: 3, placeholder: 'What should change? The comment becomes the task\'s feedback for one more round.' });
  const outcome = h('div', { id: 'outcome', class: 'outcome', hidden: true, role: 'status' });
  const acceptB = h('button', { type: 'button', class: 'btn ok', dataset: { action: 'accept' } }, '✓ Accept');
  const rejectB = h('button', { type: 'button', class: 'btn danger', dataset: { action: 'reject' } }, '✗ Reject');
  const sendB = h('button', { type: 'button', class: 'btn', dataset: { action: 'send-back' } }, '↩ Send back');
  const buttons = [acceptB, rejectB, sendB];
  const decide = (action, body) => act(buttons, outcome, () => post(`${taskUrl(runId, taskId)}/${action}`, body), async (res) => {
    if (res.ok && action === 'send-back') comment.value = '';
    await refresh();
  });
  acceptB.onclick = () => decide('accept', {});
  rejectB.onclick = () => decide('reject', {});
  sendB.onclick = () => {
    const text = comment.value.trim();
    comment.classList.toggle('invalid', !text);
    if (!text) {
      showOutcome(outcome, { ok: false, data: { error: 'Write a comment first: it tells the agent what to change.' } });
      comment.focus();
      return;
    }
    decide('send-back', { comment: text });
  };
  comment.addEventListener('input', () => comment.classList.remove('invalid'));

  const actions = h('section', { id: 'actions', class: 'panel actions' },
    h('h2', null, 'Decision'), decision,
    h('div', { class: 'action-row' }, acceptB, rejectB),
    h('label', { for: 'comment', class: 'small muted' }, 'Send back with a comment'), comment,
    h('div', { class: 'action-row' }, sendB), outcome);

  const jump = (id, label, sec) => h('button', { type: 'button', class: 'linklike', onclick: () => document.getElementById(id)?.scrollIntoView({ behavior: 'smooth', block: 'start' }) }, label, sec && sec.badge);
  const attemptsJump = jump('attempts', 'Attempts', attempts);
  const nav = h('nav', { class: 'jump' },
    attemptsJump, jump('prompt', 'Prompt'), jump('review', 'Review'), jump('checks', 'Checks', checks), jump('rounds', 'Rounds', rounds), jump('violations', 'Violations', violations),
    jump('conflicts', 'Conflicts', conflicts), jump('diff', 'Diff', diffView), jump('transcript', 'Transcript', transcript), jump('log', 'Log'));

  const el = h('div', { id: 'task', dataset: { task: taskId, state: '' } },
    head, banners, nav, attempts.el,
    h('div', { class: 'task-grid' },
      h('div', { class: 'task-main' }, prompt.el, review.el, checks.el, rounds.el),
      h('div', { class: 'task-side' }, steer.el, actions, violations.el, conflicts.el)),
    diffView.el, transcript.el, log.el);

  function renderHead(d) {
    const t = d.task;
    el.dataset.state = t.state;
    const u = t.usage;
    fill(head,
      h('h1', null, h('span', { class: 'mono' }, t.id), ' ', h('span', { class: 'task-state' }, stateBadge(t.state))),
      h('p', { class: 'meta-line muted' },
        h('span', null, h('code', null, t.branch)),
        t.commit ? h('span', null, 'commit ', h('code', null, short(t.commit))) : h('span', null, 'no commit'),
        d.group && h('span', null, 'in ', h('a', { href: runHref(runId) }, d.group)),
        t.after?.length > 0 && h('span', { title: t.start ? `its diff is its own work, from ${short(t.start)}` : '' }, 'after ', t.after.join(', '),
          t.start ? h('span', null, ' · starts from ', h('code', null, short(t.start))) : null),
        t.rounds > 0 && h('span', null, count(t.rounds, 'extra round')),
        t.attempts?.length > 0 && h('span', { class: 'attempts-line' }, t.pick ? `attempt ${t.pick.attempt} of ${t.attempts.length}, chosen by ${t.pick.by}` : `${count(t.attempts.length, 'attempt')}, none chosen`),
        t.started_at && h('span', { title: fmtDate(t.started_at) }, fmtMs(taskElapsed(t))),
        u && h('span', null, tokensText(u), ' tokens'),
        u?.cost_usd != null && h('span', null, fmtCost(u.cost_usd)),
        t.exit_code != null && h('span', null, `exit ${t.exit_code}`),
        t.sandbox && h('span', { title: (t.sandbox.refused || []).join('\n') }, t.sandbox.confined ? 'confined: ' : 'not confined: ', t.sandbox.how)));
    fill(banners,
      // A stopped task's error is why it was stopped (a person, or another attempt chosen).
      t.error && t.state === 'stopped' && h('div', { id: 'stopped', class: 'banner warn' }, withCode(t.error[0].toUpperCase() + t.error.slice(1))),
      t.error && t.state !== 'stopped' && h('div', { id: 'error', class: 'banner bad' }, h('strong', null, 'Error: '), withCode(t.error)),
      t.nothing_to_do && !t.commit && h('div', { id: 'nothing', class: 'banner info' }, h('strong', null, 'Nothing to do: '), withCode(t.nothing_to_do)),
      d.culprit && h('div', { class: 'banner bad' }, 'Held out of the merge by the culprit search: this task breaks the merged checks.'),
      d.branch?.moved && h('div', { id: 'moved', class: 'banner warn' }, 'Its branch was moved by hand since the run\'s commit: it is now at ',
        h('code', null, short(d.branch.tip)), '. `plait land` collects the new commits if they change only what the task owns.'),
      d.branch?.merged && h('div', { id: 'merged', class: 'banner warn' }, h('code', null, d.branch.target), ' already has this task\'s commit: it was merged by hand.'),
      d.adopted && h('div', { id: 'adopted', class: 'banner info' }, 'Commits made by hand on its branch were collected (',
        h('code', null, d.adopted), '); its checks ran on them.'),
      d.conflicts?.length > 0 && h('div', { class: 'banner warn' }, `In ${count(d.conflicts.length, 'conflict')} of the merge; see Conflicts below.`),
      t.summary && h('div', { class: 'banner info' }, h('strong', null, 'Agent\'s summary: '), t.summary));
  }

  function renderPrompt(d) {
    fill(prompt.body,
      h('div', { class: 'prose' }, d.prompt ? paragraphs(d.prompt) : emptyNote('No prompt recorded.')),
      h('dl', { class: 'facts' },
        h('dt', null, 'agent'), h('dd', null, h('code', null, d.agent || '—')),
        h('dt', null, 'owns'), h('dd', null, (d.owns || []).length ? d.owns.map((o) => h('code', { class: 'own' }, o)) : '—'),
        h('dt', null, 'files held'), h('dd', null, String(d.task.owned ?? '—'))));
  }

  function renderReview(d) {
    const r = d.task.review;
    // What people said when they sent the task back, each with the round it started.
    const sent = (d.task.sent_back || []).length ? h('ul', { class: 'comments sent-back' }, d.task.sent_back.map((c) => h('li', null,
      h('span', { class: 'muted' }, `sent back by a person for ${roundName(c.round)}`),
      h('div', { class: 'comment-body' }, withCode(c.comment))))) : null;
    if (!r) { fill(review.body, emptyNote(d.task.state === 'reviewing' ? 'Being reviewed…' : 'Not reviewed.'), sent); return; }
    fill(review.body, sent,
      h('div', { class: 'review-head' }, verdictBadge(r.verdict), h('span', { class: 'muted' }, ` by ${r.by || 'reviewer'} · ${roundName(r.round ?? 0)}`),
        d.task.decision && d.task.decision.verdict !== r.verdict ? h('span', { class: 'overruled' }, ' overruled by the person\'s decision') : null),
      r.summary && h('p', { class: 'prose summary' }, withCode(r.summary)),
      r.note && h('p', { class: 'note' }, r.note),
      r.comments?.length ? h('ul', { class: 'comments' }, r.comments.map((c) => h('li', null,
        c.path ? h('a', { class: 'place mono', href: fileHref(runId, taskId, c.path),
          onclick: (ev) => { ev.preventDefault(); diffView.showFile(c.path, c.line); } }, c.line != null ? `${c.path}:${c.line}` : c.path) : null,
        h('div', { class: 'comment-body' }, withCode(c.body))))) : null);
    review.badge.textContent = r.comments?.length ? String(r.comments.length) : '';
  }

  function renderDecision(d) {
    const t = d.task;
    const dec = t.decision;
    const said = (v) => (v === 'approve' ? 'accepted' : v === 'reject' ? 'rejected' : v);
    fill(decision, dec
      ? h('p', null, verdictBadge(dec.verdict, 'decided'), ` You ${said(dec.verdict)} this task ${dec.at ? fmtAgo(dec.at) : ''}.`,
        t.review && t.review.verdict !== dec.verdict ? h('span', { class: 'muted' }, ` This overrules the review (${VERDICTS[t.review.verdict] || t.review.verdict}).`) : null)
      : h('p', { class: 'muted' }, t.review ? `No decision yet: the review's verdict (${VERDICTS[t.review.verdict] || t.review.verdict}) counts.` : 'No decision yet.'));
    acceptB.setAttribute('aria-pressed', dec?.verdict === 'approve' ? 'true' : 'false');
    rejectB.setAttribute('aria-pressed', dec?.verdict === 'reject' ? 'true' : 'false');
  }

  function renderChecks(d) {
    const list = d.checks?.length ? d.checks : (d.task.checks || []).map((c) => ({ ...c, output: c.tail }));
    const failed = list.filter((c) => !c.passed).length;
    checks.badge.textContent = list.length ? (failed ? `${failed} failed` : `${list.length} passed`) : '';
    checks.badge.className = failed ? 'count bad' : 'count';
    fill(checks.body, list.length ? list.map((c, i) => h('div', { class: `check ${c.passed ? 'pass' : 'fail'}` },
      details(open, `check-${i}`, !c.passed,
        [h('span', { class: 'icon' }, c.passed ? '✓' : '✗'), h('code', null, c.command),
          h('span', { class: 'muted small' }, ` ${c.exit_code != null ? `exit ${c.exit_code} · ` : ''}${fmtMs(c.ms)}${baseNote(c)}`)],
        h('pre', { class: 'output' }, c.output || '(no output)')))) : emptyNote('No checks ran.'));
  }

  function renderRounds(d) {
    const list = d.rounds || [];
    rounds.badge.textContent = list.length ? String(list.length) : '';
    fill(rounds.body, list.length ? list.map((r) => roundView(r, d, open)) : emptyNote('No round has run yet.'));
  }

  function renderViolations(d) {
    const v = d.task.violations || [];
    const diffs = new Map((d.violation_diffs || []).map((f) => [f.path, f]));
    violations.badge.textContent = v.length ? String(v.length) : '';
    violations.badge.className = v.length ? 'count warn' : 'count';
    // Each path with what the agent tried to write there, against what the task started from.
    fill(violations.body, v.length
      ? [h('p', { class: 'muted small' }, 'Changed outside what the task owns; left uncommitted in its worktree. Each with the change the agent tried to make:'),
        h('ul', { class: 'plain violations' }, v.map((c) => {
          const f = diffs.get(c.path);
          return h('li', { class: 'violation', dataset: { path: c.path } },
            details(open, `violation-${c.path}`, v.length <= 5 && !f?.large,
              [h('span', { class: `kind k-${c.kind}` }, c.kind[0].toUpperCase()), ' ', h('code', null, c.path),
                f && !f.binary ? h('span', { class: 'delta' }, ' ', h('span', { class: 'plus' }, `+${f.added ?? 0}`), ' ', h('span', { class: 'minus' }, `−${f.removed ?? 0}`)) : null],
              violationDiff(f)));
        }))]
      : emptyNote('None.'));
  }

  function renderConflicts(d) {
    const list = d.conflicts || [];
    conflicts.badge.textContent = list.length ? String(list.length) : '';
    conflicts.badge.className = list.length ? 'count warn' : 'count';
    fill(conflicts.body, list.length ? list.map((c) => h('div', { class: 'conflict' },
      h('div', { class: 'conflict-head' }, h('code', null, c.path), ' ', h('span', { class: 'badge warn' }, c.kind), ' ',
        h('span', { class: 'muted' }, 'between '), (c.tasks || []).map((id, i) => [i ? ', ' : '', id === taskId ? h('strong', null, id) : h('a', { href: taskHref(runId, id) }, id)])),
      c.message && h('p', { class: 'muted small' }, c.message),
      c.hunks ? conflictHunks(c.hunks) : null)) : emptyNote('None.'));
  }

  function renderTranscript(d) {
    const turns = d.transcript || [];
    transcript.badge.textContent = turns.length ? String(turns.length) : '';
    fill(transcript.body, turns.length ? transcriptView(turns, open) : emptyNote('No transcript: the agent is not a model agent, or it has not run yet.'));
  }

  function renderLog(d) {
    const text = d.log || '';
    const lines = text ? text.split('\n').length : 0;
    fill(log.body, text ? details(open, 'log', lines <= 12, `agent log · ${count(lines, 'line')}`, h('pre', { class: 'output log' }, text)) : emptyNote('Empty.'));
  }

  function update(d, diff) {
    data = d;
    renderHead(d);
    attempts.update(d);
    attemptsJump.hidden = !d.attempts;
    renderPrompt(d);
    renderReview(d);
    renderDecision(d);
    steer.update(d);
    renderChecks(d);
    renderRounds(d);
    renderViolations(d);
    renderConflicts(d);
    renderTranscript(d);
    renderLog(d);
    if (diff) {
      tip = d.task.commit || null;
      diffView.update(diff, d.task.review?.comments || []);
    }
  }

  async function refresh() {
    const mine = ++seq;
    try {
      const d = await getJSON(taskUrl(runId, taskId));
      let diff = null;
      if ((d.task.commit || null) !== tip) diff = await getJSON(`${taskUrl(runId, taskId)}/diff`).catch(() => null);
      if (mine === seq && current?.el === el) update(d, diff);
    } catch (e) {
      console.warn('refresh failed', e);
    }
  }

  function onEvent(kind, msg) {
    if (kind === 'task' && msg.task?.task === taskId && data) {
      data.task.state = msg.task.state;
      if (msg.task.usage) data.task.usage = msg.task.usage;
      renderHead(data);
      Live.refreshSoon();
    } else if (kind === 'task' && String(msg.task?.task).startsWith(`${taskId}~`)) {
      // One of its attempts moved on.
      Live.refreshSoon();
    }
  }

  return { kind: 'task', run: runId, task: taskId, el, update, refresh, onEvent, showFile: diffView.showFile };
}

/** A violation's diff as collect kept it, or why there is none to show. */
function violationDiff(f) {
  if (!f) return emptyNote('Its diff was not kept here (the task ran on another machine, or before plait kept them).');
  if (f.binary) return emptyNote('Binary file; not shown.');
  if (f.large && !f.hunks?.length) return emptyNote('Too large: its diff was not kept.');
  if (!f.hunks?.length) return emptyNote(f.kind === 'deleted' ? 'Deleted (an empty file).' : 'No changes in the text.');
  return h('div', { class: 'violation-diff' }, diffTable(f, 'unified', []));
}

/** One round of a task: what it was told, the checks and review that judged it, its end. */
function roundView(r, d, open) {
  const told = r.told || {};
  const when = told.at ? ` ${fmtAgo(told.at)}` : '';
  const quoted = (said) => [h('span', { class: 'muted' }, said), h('blockquote', { class: 'told-text' }, withCode(told.text || ''))];
  const toldEl = told.kind === 'person' ? quoted(`sent back by a person${when}:`)
    : told.kind === 'steer' ? quoted(`what a person said while ${roundName(r.round - 1)} ran${when}:`)
      : told.kind === 'prompt' ? h('span', { class: 'muted' }, 'the task\'s prompt')
        : h('span', { class: 'muted' }, `the feedback on ${roundName(r.round - 1)}: its failed checks' output and the reviewer's request for changes`);
  const checks = (r.checks || []).map((c, i) => h('li', { class: c.passed === true ? 'pass' : c.passed === false ? 'fail' : '' },
    details(open, `round-${r.round}-check-${i}`, c.passed === false,
      [h('span', { class: 'icon' }, c.passed === true ? '✓' : c.passed === false ? '✗' : '·'), h('code', null, c.command),
        c.exit_code != null ? h('span', { class: 'muted small' }, ` exit ${c.exit_code}`) : null],
      h('pre', { class: 'output' }, c.output || '(no output)'))));
  const rv = r.review;
  const review = rv && h('div', { class: 'round-review' },
    h('span', { class: 'muted' }, 'review: '), rv.verdict ? verdictBadge(rv.verdict) : h('span', { class: 'muted' }, 'the reviewer said'),
    rv.by && h('span', { class: 'muted small' }, ` by ${rv.by}`),
    rv.summary && h('p', { class: 'prose summary' }, withCode(rv.summary)),
    rv.comments?.length ? h('ul', { class: 'comments' }, rv.comments.map((c) => h('li', null,
      c.path ? h('span', { class: 'place mono' }, c.line != null ? `${c.path}:${c.line}` : c.path) : null,
      h('div', { class: 'comment-body' }, withCode(c.body))))) : null,
    rv.output && h('pre', { class: 'output' }, rv.output));
  return h('div', { class: 'round', dataset: { round: r.round, told: told.kind } },
    h('h3', null, roundName(r.round), h('span', { class: 'muted small round-outcome' }, ` — ${r.outcome}`)),
    h('div', { class: 'told' }, h('strong', null, 'Told: '), toldEl),
    checks.length ? h('ul', { class: 'round-checks check-list' }, checks) : null,
    review);
}

/** Text as paragraphs: blank lines split them, ``` fences make code blocks, `x` is code. */
function paragraphs(text) {
  const out = [];
  const parts = String(text).split(/^```[^\n]*\n?/m);
  parts.forEach((part, i) => {
    if (i % 2 === 1) { out.push(h('pre', { class: 'code' }, part.replace(/\n$/, ''))); return; }
    for (const para of part.split(/\n\s*\n/)) {
      if (!para.trim()) continue;
      const p = h('p');
      para.split(/(`[^`\n]+`)/).forEach((bit, j) => add(p, j % 2 ? h('code', null, bit.slice(1, -1)) : bit));
      out.push(p);
    }
  });
  return out;
}

/** A conflict's hunks with git's markers and the two (or three) sides told apart. */
function conflictHunks(text) {
  const pre = h('pre', { class: 'conflict-hunks' });
  let side = '';
  for (const line of text.split('\n')) {
    let cls = side;
    if (line.startsWith('<<<<<<<')) { cls = 'marker'; side = 'ours'; }
    else if (line.startsWith('|||||||')) { cls = 'marker'; side = 'base'; }
    else if (line.startsWith('=======') && side) { cls = 'marker'; side = 'theirs'; }
    else if (line.startsWith('>>>>>>>')) { cls = 'marker'; side = ''; }
    pre.append(h('span', { class: `cl ${cls}` }, line + '\n'));
  }
  return pre;
}

const ROLE_NAMES = { user: 'User', assistant: 'Assistant', tool: 'Tool', system: 'System' };
const BLOCK_KEYS = ['file_text', 'old_str', 'new_str', 'insert_text', 'content', 'patch', 'command', 'script'];

/** Model turns and tool calls, readable: role headings, prose, tool calls with their input. */
function transcriptView(turns, open) {
  const out = [];
  let round = null;
  turns.forEach((turn, i) => {
    if (turn.round != null && turn.round !== round) {
      round = turn.round;
      out.push(h('h3', { class: 'turn-round' }, roundName(round)));
    }
    const role = turn.role || 'assistant';
    const kind = turn.kind || 'text';
    const label = kind === 'tool_call' ? 'tool call' : kind === 'tool_result' ? (turn.error ? 'tool error' : 'tool result') : ROLE_NAMES[role] || role;
    const headLine = h('div', { class: 'turn-head' }, h('span', { class: `role r-${role}` }, label), turn.tool && h('code', { class: 'tool-name' }, turn.tool));
    const body = [];
    if (kind === 'tool_call') {
      const input = turn.input && typeof turn.input === 'object' ? { ...turn.input } : turn.input;
      if (input && typeof input === 'object') {
        const summary = ['command', 'path', 'glob', 'pattern'].filter((k) => typeof input[k] === 'string' && !input[k].includes('\n'));
        if (summary.length) body.push(h('div', { class: 'tool-args' }, summary.map((k) => [h('span', { class: 'muted' }, `${k} `), h('code', null, input[k]), ' '])));
        for (const k of summary) delete input[k];
        for (const k of BLOCK_KEYS) {
          if (typeof input[k] === 'string') {
            body.push(h('div', { class: 'arg-label muted small' }, k), h('pre', { class: `arg ${k === 'old_str' ? 'old' : k === 'new_str' || k === 'file_text' || k === 'insert_text' ? 'new' : ''}` }, input[k]));
            delete input[k];
          }
        }
        if (Object.keys(input).length) body.push(h('pre', { class: 'json' }, JSON.stringify(input, null, 2)));
      } else if (input != null) {
        body.push(h('pre', { class: 'json' }, JSON.stringify(input, null, 2)));
      }
      if (turn.text) body.push(h('div', { class: 'prose' }, paragraphs(turn.text)));
    } else if (kind === 'tool_result') {
      const text = turn.text || '';
      const lines = text.split('\n').length;
      body.push(details(open, `turn-${i}`, lines <= 3 || !!turn.error, h('span', { class: 'muted' }, count(lines, 'line')), h('pre', { class: 'output' }, text || '(empty)')));
    } else {
      body.push(h('div', { class: 'prose' }, paragraphs(turn.text || '')));
    }
    out.push(h('div', { class: `turn t-${role} k-${kind}${turn.error ? ' error' : ''}` }, headLine, body));
  });
  return out;
}

// ---------- the diff ----------

const MODE_KEY = 'plait.diffMode';

function savedMode() {
  try { return localStorage.getItem(MODE_KEY) === 'split' ? 'split' : 'unified'; } catch { return 'unified'; }
}

/** The task's diff: toolbar, file list, then each file, unified or side by side. */
function DiffView(runId, taskId) {
  let mode = savedMode();
  let files = [];
  let comments = new Map();    // path -> [comment]
  const fileState = new Map(); // path -> {el, body, collapsed, rendered}
  const badge = h('span', { class: 'count' });
  const stats = h('span', { class: 'muted diff-stats' });
  const modeButtons = ['unified', 'split'].map((m) => h('button', { type: 'button', dataset: { diffMode: m },
    onclick: () => setMode(m) }, m === 'unified' ? 'Unified' : 'Split'));
  const list = h('ul', { id: 'files', class: 'file-list' });
  const body = h('div', { class: 'files' });
  const el = h('section', { id: 'diff', class: 'panel diff-panel' },
    h('div', { class: 'diff-toolbar' }, h('h2', null, 'Diff', badge), stats, h('span', { class: 'spacer' }),
      h('button', { type: 'button', class: 'btn small', onclick: () => setAll(false) }, 'Expand all'),
      h('button', { type: 'button', class: 'btn small', onclick: () => setAll(true) }, 'Collapse all'),
      h('div', { class: 'seg', role: 'group', 'aria-label': 'diff layout' }, modeButtons)),
    list, body);

  function setMode(m) {
    mode = m;
    try { localStorage.setItem(MODE_KEY, m); } catch { /* private mode: just not remembered */ }
    for (const b of modeButtons) b.setAttribute('aria-pressed', b.dataset.diffMode === mode ? 'true' : 'false');
    for (const f of files) {
      const st = fileState.get(f.path);
      if (st.rendered) renderFile(f, st);
    }
  }

  function setAll(collapsed) {
    for (const f of files) setCollapsed(f, fileState.get(f.path), collapsed);
  }

  function setCollapsed(f, st, collapsed) {
    st.collapsed = collapsed;
    st.el.classList.toggle('collapsed', collapsed);
    st.toggle.setAttribute('aria-expanded', collapsed ? 'false' : 'true');
    if (!collapsed && !st.rendered) renderFile(f, st);
  }

  function renderFile(f, st) {
    st.rendered = true;
    if (f.binary) { fill(st.body, emptyNote('Binary file; not shown.')); return; }
    if (!f.hunks?.length) { fill(st.body, emptyNote(f.kind === 'deleted' ? 'Deleted (empty file).' : 'No changes in the text.')); return; }
    fill(st.body, diffTable(f, mode, comments.get(f.path) || []));
  }

  function fileEl(f) {
    const old = fileState.get(f.path);
    const st = { collapsed: old ? old.collapsed : !!f.large, rendered: false };
    const notes = comments.get(f.path) || [];
    st.toggle = h('button', { type: 'button', class: 'fold', 'aria-label': 'fold or unfold this file' }, h('span', { class: 'chev', 'aria-hidden': 'true' }));
    st.body = h('div', { class: 'file-body' });
    const headEl = h('div', { class: 'file-head' },
      st.toggle, h('span', { class: `kind k-${f.kind}`, title: f.kind }, (f.kind || '?')[0].toUpperCase()),
      h('span', { class: 'path mono' }, f.path),
      h('span', { class: 'delta' }, f.binary ? h('span', { class: 'muted' }, 'binary') : [h('span', { class: 'plus' }, `+${f.added ?? 0}`), ' ', h('span', { class: 'minus' }, `−${f.removed ?? 0}`)]),
      notes.length ? h('span', { class: 'tag', title: 'review comments on this file' }, count(notes.length, 'comment')) : null,
      f.large ? h('span', { class: 'tag' }, 'large') : null);
    headEl.addEventListener('click', () => setCollapsed(f, st, !st.collapsed));
    const fold = f.large ? h('button', { type: 'button', class: 'linklike folded-note', onclick: () => setCollapsed(f, st, false) },
      `Large diff (${(f.added ?? 0) + (f.removed ?? 0)} changed lines) folded — show it`) : null;
    st.el = h('div', { class: 'file', dataset: { path: f.path, kind: f.kind } }, headEl, fold, st.body);
    fileState.set(f.path, st);
    setCollapsed(f, st, st.collapsed);
    return st.el;
  }

  function update(diff, reviewComments) {
    files = diff.files || [];
    comments = new Map();
    for (const c of reviewComments) if (c.path) comments.set(c.path, [...(comments.get(c.path) || []), c]);
    const added = files.reduce((a, f) => a + (f.added || 0), 0);
    const removed = files.reduce((a, f) => a + (f.removed || 0), 0);
    badge.textContent = String(files.length);
    fill(stats, diff.base ? ['against ', h('code', null, short(diff.base)), diff.tip ? [' → ', h('code', null, short(diff.tip))] : null, ' · '] : null,
      h('span', { class: 'plus' }, `+${added}`), ' ', h('span', { class: 'minus' }, `−${removed}`));
    for (const b of modeButtons) b.setAttribute('aria-pressed', b.dataset.diffMode === mode ? 'true' : 'false');
    fill(list, files.map((f) => h('li', null,
      h('a', { href: fileHref(runId, taskId, f.path), title: f.path },
        h('span', { class: `kind k-${f.kind}` }, (f.kind || '?')[0].toUpperCase()), h('span', { class: 'path mono' }, f.path),
        h('span', { class: 'delta' }, f.binary ? 'binary' : [h('span', { class: 'plus' }, `+${f.added ?? 0}`), ' ', h('span', { class: 'minus' }, `−${f.removed ?? 0}`)]),
        deltaBar(f)))));
    fill(body, files.length ? files.map(fileEl)
      : emptyNote(diff.error ? `Could not load the diff: ${diff.error}` : 'No changes: the task made no commit.'));
  }

  function showFile(path, line) {
    const f = files.find((x) => x.path === path);
    const st = fileState.get(path);
    if (!f || !st) return;
    setCollapsed(f, st, false);
    let target = st.el;
    if (line != null) target = st.body.querySelector(`tr[data-new="${line}"]`) || target;
    target.scrollIntoView({ block: line != null ? 'center' : 'start' });
    if (target !== st.el) { target.classList.remove('flash'); void target.offsetWidth; target.classList.add('flash'); }
  }

  return { el, badge, update, showFile };
}

/** Five little squares showing the share of added and removed lines, as GitHub does. */
function deltaBar(f) {
  const total = (f.added || 0) + (f.removed || 0);
  const plus = total ? Math.round((5 * f.added) / total) : 0;
  const minus = total ? Math.min(5 - plus, Math.max(f.removed ? 1 : 0, Math.round((5 * f.removed) / total))) : 0;
  return h('span', { class: 'dbar', 'aria-hidden': 'true' },
    [...Array(5)].map((_, i) => h('i', { class: i < plus ? 'p' : i < plus + minus ? 'm' : '' })));
}

function commentRow(c, span) {
  return h('tr', { class: 'note-row' }, h('td', { colspan: span, class: 'note-cell' },
    h('div', { class: 'inline-note' }, h('span', { class: 'muted small' }, `review comment${c.line != null ? ` on line ${c.line}` : ''}`), h('div', null, withCode(c.body)))));
}

/** One file's hunks as a table: unified (old, new, code) or split (old | new). */
function diffTable(f, mode, notes) {
  const lang = Highlight.langOf(f.path);
  const tbody = h('tbody');
  const span = mode === 'split' ? 4 : 3;
  const atLine = new Map();
  for (const c of notes) {
    if (c.line == null) tbody.append(commentRow(c, span));
    else atLine.set(c.line, [...(atLine.get(c.line) || []), c]);
  }
  const code = (l, side, stateRef) => {
    const td = h('td', { class: `code ${side}` });
    stateRef.s = Highlight.line(td, lang, l.text ?? '', stateRef.s);
    return td;
  };
  const ln = (n, side) => h('td', { class: `ln ${side}`, dataset: { n: n ?? '' } });
  const notesAfter = (l) => (l.new != null && l.op !== '-' ? atLine.get(l.new) || [] : []).map((c) => commentRow(c, span));

  for (const hunk of f.hunks) {
    tbody.append(h('tr', { class: 'hunk' }, h('td', { class: 'ln', colspan: mode === 'split' ? 1 : 2 }), h('td', { class: 'code', colspan: mode === 'split' ? 3 : 1 }, hunk.header)));
    const oldS = { s: null };
    const newS = { s: null };
    if (mode !== 'split') {
      for (const l of hunk.lines) {
        const cls = l.op === '+' ? 'add' : l.op === '-' ? 'del' : 'ctx';
        const ref = cls === 'del' ? oldS : newS;
        if (cls === 'ctx') oldS.s = Highlight.advance(lang, l.text ?? '', oldS.s);
        const tr = h('tr', { class: cls, dataset: { new: l.new ?? null, old: l.old ?? null } }, ln(l.old, cls), ln(l.new, cls), code(l, cls, ref));
        tbody.append(tr, ...notesAfter(l));
      }
      continue;
    }
    let dels = [];
    let adds = [];
    const flush = () => {
      for (let i = 0; i < Math.max(dels.length, adds.length); i++) {
        const d = dels[i];
        const a = adds[i];
        tbody.append(h('tr', { class: 'pair', dataset: { new: a?.new ?? null, old: d?.old ?? null } },
          d ? [ln(d.old, 'del'), code(d, 'del', oldS)] : [h('td', { class: 'ln empty' }), h('td', { class: 'code empty' })],
          a ? [ln(a.new, 'add'), code(a, 'add', newS)] : [h('td', { class: 'ln empty' }), h('td', { class: 'code empty' })]),
        ...(a ? notesAfter(a) : []));
      }
      dels = [];
      adds = [];
    };
    for (const l of hunk.lines) {
      if (l.op === '-') { if (adds.length) flush(); dels.push(l); continue; }
      if (l.op === '+') { adds.push(l); continue; }
      flush();
      tbody.append(h('tr', { class: 'ctx', dataset: { new: l.new, old: l.old } },
        ln(l.old, 'ctx'), code(l, 'ctx', oldS), ln(l.new, 'ctx'), code(l, 'ctx', newS)), ...notesAfter(l));
    }
    flush();
  }
  const cols = mode === 'split'
    ? [h('col', { class: 'c-ln' }), h('col', { class: 'c-code' }), h('col', { class: 'c-ln' }), h('col', { class: 'c-code' })]
    : [h('col', { class: 'c-ln' }), h('col', { class: 'c-ln' }), h('col')];
  return h('table', { class: `diff ${mode}` }, h('colgroup', null, cols), tbody);
}

// ---------- start ----------

window.addEventListener('hashchange', () => route());
window.addEventListener('pagehide', () => Live.close());
route();
