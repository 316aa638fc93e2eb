
// after text.js (ui/viewer/text.js: 'use strict', $, vis, el), which the page puts first
const DATA = JSON.parse(document.getElementById('data').textContent);
const META = DATA.meta || {}, EV = DATA.events || [];
const N = EV.length, ROW = 20;
function textNode(s) { return document.createTextNode(vis(s)); }
function show(s) { return JSON.stringify(s === undefined || s === null ? '' : String(s)); }
function label(s) { return "'" + s + "'"; }
function fix(p, d) { return (typeof p === 'number') ? p.toFixed(d === undefined ? 3 : d) : '-'; }
function clip(s, n) { s = String(s); return s.length > n ? s.slice(0, n) + '\u2026' : s; }
function num(n) { return (typeof n === 'number') ? n.toLocaleString('en-US') : String(n); }

// ---- one pass over the stream: turns, rounds, positions, indexes -------------------------
const turnOf = new Int32Array(N), convOf = new Int32Array(N), roundOf = new Int32Array(N).fill(-1);
const cutTok = new Uint8Array(N);  // a token a rewind cut: part of a branch the turn left
const rounds = [], calls = [], stops = [], tokens = [], spans = [];
let turn = 0, conv = 0, round = null, firstPrompt = -1;
for (let i = 0; i < N; i++) {
  const e = EV[i], k = e.event;
  if (k === 'prompt') {
    turn++; round = null;
    if (firstPrompt < 0) firstPrompt = i;
    if (!(e.context > e.tokens)) conv++;          // the whole prompt: a new conversation, positions from 0
    const sp = (e.spans && e.spans.length) ? e.spans
      : [[(e.context || e.tokens) - e.tokens, e.context || e.tokens, 'prompt']];
    for (const s of sp) spans.push({start: s[0], end: s[1], source: String(s[2]), at: i});
  }
  turnOf[i] = turn; convOf[i] = conv;
  if (k === 'token') {
    tokens.push(i); round = null;
    const pos = e.context - 1, last = spans[spans.length - 1];
    if (last && last.source === 'model' && last.end === pos) last.end = pos + 1;
    else spans.push({start: pos, end: pos + 1, source: 'model', at: i});
  } else if (k === 'done' || k === 'prompt') {
    round = null;
  } else if (k === 'tool_call' || k === 'tool_error' || (k === 'stop' && e.reason === 'tool_call')) {
    if (!round) { round = {events: []}; rounds.push(round); }
  }
  // a nested turn (a sampling request's) stays out of the round's chain: its request and reply are in it
  if (round && k !== 'token' && k !== 'nested') { round.events.push(i); roundOf[i] = rounds.length - 1; }
  if (k === 'tool_call' || k === 'tool_error') calls.push(i);
  if (k === 'stop') stops.push(i);
  if (k === 'rewind' || k === 'rewrite') cutSpans(k === 'rewind' ? e.position : e.at);
  if (k === 'rewind') {  // a fork (the studio): the tokens after the position are a branch left behind
    for (let n = tokens.length - 1; n >= 0 && convOf[tokens[n]] === conv; n--) {
      if (EV[tokens[n]].context > e.position) cutTok[tokens[n]] = 1;
      else if (!cutTok[tokens[n]]) break;  // an earlier branch's tokens lie between: look past them
    }
  }
  if (k === 'inject') for (const s of (e.spans || [])) spans.push({start: s[0], end: s[1], source: String(s[2]), at: i});
}
// the context was cut back to `position` (a rewind, or a message written back as the template renders it):
// spans of this conversation past it end there
function cutSpans(position) {
  for (let n = spans.length - 1; n >= 0; n--) {
    const sp = spans[n];
    if (convOf[sp.at] !== conv) break;
    if (sp.start >= position) spans.splice(n, 1);
    else if (sp.end > position) sp.end = position;
  }
}
// a round's inject closes it: events after it up to the next token stay in it only if they are notices
const tokenOrd = new Int32Array(N).fill(-1);
tokens.forEach((i, n) => { tokenOrd[i] = n; });

// ---- which distribution the probabilities are of ------------------------------------------
// Token events carry the sampling settings (temperature; top_k, top_p, min_p when they cut): their
// probabilities are those of the distribution the token was drawn from, or at T = 0 the model's own
// softmax at temperature 1. A trace whose tokens carry no temperature says nothing of it.
const sampleT = (typeof META.temperature === 'number') ? META.temperature : null;
function cuts(e) {
  const c = [];
  for (const [key, name] of [['top_k', 'top-k'], ['top_p', 'top-p'], ['min_p', 'min-p']])
    if (typeof e[key] === 'number') c.push(name + ' ' + e[key]);
  return c;
}
function distName(e) {
  if (!e || typeof e.temperature !== 'number') return null;
  if (e.temperature === 0) return 'the model\u2019s softmax at temperature 1 (greedy, T = 0)';
  const c = cuts(e);
  return 'softmax(logits / ' + e.temperature + ')' + (c.length ? ' cut to ' + c.join(', ') + ', renormalised' : '');
}
function probNote() {
  const tok = tokens.length ? EV[tokens[0]] : null;
  if (tok && typeof tok.temperature === 'number') {
    if (tok.temperature === 0)
      return 'Sampling was greedy (T = 0): the most likely token is taken. The probabilities shown are the model\u2019s own distribution, softmax(logits) at temperature 1.';
    const c = cuts(tok);
    return 'Probabilities are those of the distribution each token was drawn from: softmax(logits / ' + tok.temperature + '), T = ' + tok.temperature +
      (c.length ? ', cut to ' + c.join(', ') + ' and renormalised over the tokens kept (a token cut has probability 0)' : '') + '.';
  }
  let s = 'The token events do not record which distribution their probabilities are of (no temperature on them)';
  if (sampleT === null) s += '; nor does the page know the sampling temperature.';
  else s += '; the run sampled at T = ' + sampleT + (sampleT === 0 ? ' (greedy).' : '.');
  return s;
}

// ---- colours of sources ---------------------------------------------------------------
const SERVERS = [];
function sourceColor(src) {
  if (src === 'model') return 'var(--model)';
  if (src === 'reasoning') return 'var(--reasoning)';
  if (src === 'system') return 'var(--system)';
  if (src === 'user') return 'var(--user)';
  if (src.startsWith('tool:') || src.startsWith('resource:') || src.startsWith('prompt:')) {
    // a server's colour, whether its text is a tool result, a resource or a prompt
    const server = src.slice(src.indexOf(':') + 1).split('/')[0];
    let n = SERVERS.indexOf(server);
    if (n < 0) { SERVERS.push(server); n = SERVERS.length - 1; }
    return 'hsl(' + ((30 + 47 * n) % 360) + ',75%,45%)';
  }
  return 'var(--chat)';
}
function sourceName(src) {
  if (src.startsWith('tool:')) {
    const [server, tool] = src.slice(5).split('/');
    return 'tool result of server ' + server + (tool ? ' (' + tool + ')' : '');
  }
  if (src.startsWith('resource:')) {
    const rest = src.slice(9), cut = rest.indexOf('/');
    return 'resource of server ' + (cut < 0 ? rest : rest.slice(0, cut) + ' (' + rest.slice(cut + 1) + ')');
  }
  if (src.startsWith('prompt:')) {
    const rest = src.slice(7), cut = rest.indexOf('/');
    return 'prompt of server ' + (cut < 0 ? rest : rest.slice(0, cut) + ' (' + rest.slice(cut + 1) + ')');
  }
  return {chat: 'chat markup', system: 'system prompt', user: 'user', model: 'model (sampled)',
          reasoning: 'the model\u2019s reasoning (sampled, never the answer)'}[src] || src;
}

// ---- header ---------------------------------------------------------------------------
function header() {
  $('title').textContent = vis(META.title || 'decodeloop trace');
  const bits = [];
  for (const key of ['model', 'temperature', 'top_p', 'top_k', 'min_p', 'seed', 'constrain', 'source'])
    if (META[key] !== undefined && META[key] !== null) bits.push(key.replace('_', '-') + ' ' + META[key]);
  const done = EV.filter(e => e.event === 'done');
  bits.push(num(tokens.length) + ' tokens', calls.length + ' call(s)', rounds.length + ' call round(s)',
            turn + ' turn(s)', num(N) + ' events');
  if (done.length) bits.push('ended: ' + done.map(d => d.reason).join(', '));
  $('meta').textContent = vis(bits.join(' \u00b7 '));
  $('probnote').textContent = probNote();
  const seen = [];
  for (const s of spans) if (!seen.includes(s.source)) seen.push(s.source);
  for (const src of seen) {
    const sw = el('span', 'sw'), i = el('i');
    i.style.background = sourceColor(src);
    sw.append(i, textNode(src + ': ' + sourceName(src)));
    $('legend').append(sw);
  }
}

// ---- timeline rows (only the visible ones exist) ---------------------------------------
function state(e) {
  if (e.stop) return '\u2192 ' + e.stop;
  if (e.in_call) return '\u00b7 in call';
  if (e.in_reasoning || e.reasoning) return '\u00b7 reasoning';
  if (e.held) return '\u00b7 holding ' + show(e.held);
  return '';
}
function summary(i) { return summaryOf(EV[i], turnOf[i]); }
// a sampling request's steps, and its nested turn: its own context, told apart from the conversation's
const PHASES = {request: 'asks the model', denied: 'denied', reply: 'the model\u2019s reply', sent: 'reply sent', failed: 'failed'};
function samplingHead(e) {
  return 'sampling #' + e.sampling_id + ' from ' + e.server + ((e.calls || []).length ? ' (call ' + e.calls.join(', ') + ')' : '') +
    ': ' + (PHASES[e.phase] || e.phase) + (e.phase === 'reply' && e.stop_reason ? ', ' + e.stop_reason : '');
}
function summaryOf(e, turnNo) {
  switch (e.event) {
    case 'sampling': return '\u21c4 ' + samplingHead(Object.assign({sampling_id: e.id}, e)) + ': ' + clip(e.text, 300);
    case 'nested':
      if (!e.inner || typeof e.inner !== 'object') return '  #' + e.sampling + ' \u2506 ?';
      if (e.inner.event === 'prompt') return '  #' + e.sampling + ' \u2506 \u2500\u2500 nested turn: prompt, ' + e.inner.tokens + ' tokens (a context of its own)';
      return '  #' + e.sampling + ' \u2506 ' + summaryOf(e.inner, turnNo);
    case 'token':
      return String(e.index).padStart(5) + ' ' + label(e.text).padEnd(9) + ' ' + fix(e.prob) +
        '  fwd +' + e.computed + (e.cached ? ' (' + e.cached + ' cached)' : '') + '  ctx ' + e.context +
        (e.masked !== undefined ? '  \u2298 masked ' + label(e.masked) : '') +
        (e.forced ? '  forced (no forward: the grammar left no choice)' : '') + '  ' + state(e);
    case 'prompt': return '\u2500\u2500 turn ' + turnNo + ': prompt, ' + e.tokens + ' tokens, context ' + e.context;
    case 'stop': return '\u25a0 stop: ' + e.reason;
    case 'tool_call': return '\u2699 call ' + e.name + ' on ' + e.server + shapeNote(e) + ': ' + e.text;
    case 'tool_error': return '\u2717 ' + e.stage + ' error: ' + e.message;
    case 'policy': return '\u2696 policy: ' + e.verdict + ' ' + e.name + ' on ' + e.server + ' (' + e.tool_class + '): ' + e.reason;
    case 'rpc': return '  ' + (e.direction === 'send' ? '\u2192 ' : '\u2190 ') + e.server + ' ' + rpcLabel(e.message);
    case 'tool_result': return (e.is_error ? '\u2717 error result: ' : '\u2713 result: ') + e.text;
    case 'inject': return '\u21e2 inject ' + e.tokens + ' tokens, context ' + e.context;
    case 'rewind': return '\u27f2 rewound to position ' + e.position + ': ' + num(e.cut) + ' token(s) cut, written again from there';
    case 'edit': return '\u270e yours (' + e.what + '): ' + e.tool + ' ' + clip(JSON.stringify(e.before), 150) + ' \u2192 ' + clip(JSON.stringify(e.after), 300);
    case 'rewrite': return '\u27f2 history: the call as the template renders it (' + e.written_tokens + ' tokens written, ' + e.rendered_tokens + ' rendered)';
    case 'server': return '\u25cf ' + e.server + ': MCP ' + e.protocol_version + ', tools ' + (e.tools || []).join(', ');
    case 'notice': return '\u00b7 ' + e.source + ': ' + e.message;
    case 'progress': return '    \u00b7 ' + progressOf(e) + ': ' + progressText(e);   // indented: a line under its call
    case 'task': return '    \u25f7 ' + progressOf(e) + ': ' + taskText(e);
    case 'app': return '\u25a3 app of ' + e.server + '/' + e.tool + ': ' + e.uri + ' (' + num(String(e.html).length) + ' characters of HTML, shown in its step)';
    case 'tools_changed': return '\u27f3 ' + e.server + ': tools changed';
    case 'elicitation':
      return '? ' + e.server + ' asked ' + (e.mode === 'url' ? 'to open ' + e.url : 'for input') + ': ' + e.action +
        ', ' + e.reason;
    case 'done': return '\u2500\u2500 done: ' + e.reason + ', ' + e.tokens + ' tokens, ' + e.tool_calls + ' call(s)';
    default: return '\u00b7 ' + e.event + ' ' + clip(JSON.stringify(rest(e)), 300);
  }
}
// a progress notification of a call: "progress 2/3: message", the server's message on one line (it is only ever
// text: el() sets textContent, and vis() spells control characters as escapes)
function progressText(e) {
  const amount = num(e.progress) + (e.total !== null && e.total !== undefined ? '/' + num(e.total) : '');
  const message = (e.message === null || e.message === undefined) ? '' : String(e.message).replace(/\r?\n/g, '\\n');
  return 'progress ' + amount + (message ? ': ' + message : '');
}
function progressOf(e) { return e.server + (e.tool ? '/' + e.tool : ''); }
// a call the server runs as a task (MCP Tasks): "task 1a2b: working: message", the server's text on one line
function taskText(e) {
  const message = e.message === null || e.message === undefined ? '' : String(e.message).replace(/\s+/g, ' ');
  return 'task ' + clip(e.task_id, 40) + ': ' + e.status + (message ? ': ' + message : '');
}
function rest(e) { const r = Object.assign({}, e); delete r.event; return r; }  // an event kind this page does not know
function rpcLabel(m) {
  if (!m || typeof m !== 'object') return String(m);
  const id = (m.id !== undefined) ? ' #' + m.id : '';
  if (m.method) return m.method + id;
  if (m.error) return 'error' + id + ': ' + (m.error.message || '');
  return 'result' + id;
}
function rowClass(i) {
  const e = EV[i];
  let c = 'row k-' + e.event;
  if (e.event === 'token' && e.stop) c += ' stopped';
  if ((e.event === 'tool_result' && e.is_error) || (e.event === 'done' && e.error) ||
      (e.event === 'policy' && e.verdict !== 'allow') ||
      (e.event === 'rpc' && e.message && e.message.error) ||
      (e.event === 'sampling' && (e.phase === 'denied' || e.phase === 'failed'))) c += ' err';
  if (i === cursor) c += ' cur';
  if (matchSet.has(i)) c += ' match';
  return c;
}
const timeline = $('timeline'), rowsEl = $('rows');
rowsEl.style.height = (N * ROW) + 'px';
let drawn = [-1, -1];
function drawRows(force) {
  const top = timeline.scrollTop, h = timeline.clientHeight || 600;
  const a = Math.max(0, Math.floor(top / ROW) - 10), b = Math.min(N, Math.ceil((top + h) / ROW) + 10);
  if (!force && a === drawn[0] && b === drawn[1]) return;
  drawn = [a, b];
  const frag = document.createDocumentFragment();
  for (let i = a; i < b; i++) {
    const r = el('div', rowClass(i), summary(i));
    r.style.top = (i * ROW) + 'px';
    r.dataset.i = i;
    frag.append(r);
  }
  rowsEl.replaceChildren(frag);
}
timeline.addEventListener('scroll', () => drawRows(false));
rowsEl.addEventListener('click', ev => {
  const r = ev.target.closest('.row');
  if (r) go(+r.dataset.i);
});

// ---- the step panel -------------------------------------------------------------------
function kv(grid, name, ...content) {
  grid.append(el('div', 'n', name));
  const d = el('div');
  for (const c of content) d.append(typeof c === 'string' ? textNode(c) : c);
  grid.append(d);
}
function pre(text, cls) { return el('pre', cls || 'box', text); }
function json(v) { return JSON.stringify(v, null, 2); }
function tokenStep(i, box) {
  const e = EV[i], g = el('div', 'steps');
  const prev = tokenOrd[i] > 0 ? EV[tokens[tokenOrd[i] - 1]] : null;
  // 1 forward
  const bar = el('div', 'kv'), total = Math.max(1, e.computed + e.cached);
  const c1 = el('div', 'cached'), c2 = el('div', 'computed');
  c1.style.width = (100 * e.cached / total) + '%'; c2.style.width = (100 * e.computed / total) + '%';
  c1.title = e.cached + ' cached'; c2.title = e.computed + ' computed';
  bar.append(c1, c2);
  let why = e.computed > 1 ? (e.cached ? 'a prefill of the positions added since the last forward (an injected tool message and the call\u2019s closing token, or a new turn)' : 'the whole prompt, nothing cached yet') : 'one new position: the token sampled last';
  if (NO_KV) kv(g, '1 forward', e.computed + ' position(s) new since the last forward, ' + e.cached + ' of common prefix not re-read. The n-gram has no KV cache: every forward reads only its last ORDER-1 tokens, so \u201ccached\u201d here is not work saved', bar);
  else kv(g, '1 forward', 'computed ' + e.computed + ' position(s), ' + e.cached + ' served from the cache: ' + why, bar);
  // 2 sample
  const bars = el('div', 'bars');
  const top = e.top || [];
  for (const [t, p] of top) {
    bars.append(el('span', 'mono', label(t)));
    const b = el('div', 'bar' + (t === e.text ? ' pick' : '') + (t === e.masked ? ' masked' : ''));
    b.style.width = Math.max(0, Math.min(1, p || 0)) * 100 + '%';
    bars.append(b, el('span', 'mono', fix(p)));
  }
  const sample = [el('span', 'mono', label(e.text) + ' (id ' + e.id + ')' + (e.prob !== null && e.prob !== undefined ? '  p = ' + fix(e.prob) : ''))];
  if (top.length) sample.push(el('div', 'note', 'top ' + top.length + ' of ' + (distName(e) || 'the distribution the events recorded') + ':'), bars);
  else sample.push(el('div', 'note', 'no probabilities recorded for this token'));
  if (BYTE.test(String(e.text)))   // a token that holds part of a character: say what it is, as the trace does
    sample.push(el('div', 'note', label(e.text) + ' holds a byte, not a character: UTF-8 writes a character outside ASCII as 2 to 4 bytes, and the text shows it once its last byte is in'));
  if (e.masked !== undefined && e.masked !== null)
    sample.push(el('div', 'warn', 'the model put ' + label(e.masked) + ' first; the call grammar masked it and allowed ' + e.allowed + ' token(s)'));
  kv(g, '2 sample', ...sample);
  // 3 append
  kv(g, '3 append', 'context is now ' + e.context + ' tokens (this token at position ' + (e.context - 1) + ', source ' + (e.in_reasoning || e.reasoning ? 'reasoning' : 'model') + ')');
  // 4 stop check
  const checks = el('div');
  for (const c of (e.checks || [])) checks.append(el('span', 'check' + (c === e.stop ? ' fired' : ''), c));
  const verdict = [checks];
  if (e.stop) verdict.push(el('div', 'warn', e.stop + ' fired: ' + (STOPWHY[e.stop] || '')));
  else verdict.push(el('div', null, 'none fired'));
  if (e.in_call) verdict.push(el('div', null, 'held back: the model is writing a tool call (' + show(e.held) + '); call text is never shown to the user, it runs when the call closes'));
  else if (e.held) verdict.push(el('div', null, 'held back: ' + show(e.held) + ': ' + heldWhy(e) + ', so it is released only when it no longer can be'));
  if (e.reasoning) verdict.push(el('div', 'note', 'reasoning (never part of the answer): ' + show(e.reasoning)));
  if (e.delta) verdict.push(el('div', null, 'released to the user: ' + show(e.delta)));
  kv(g, '4 stop check', ...verdict);
  box.append(g);
  if (e.attention) attention(e);
}
const BYTE = /\\x[89a-fA-F][0-9a-fA-F]/;   // a label's escape of a byte that is not ASCII (legend.PARTIAL_BYTE)
// the n-gram says at start-up that it keeps no state per position (its `cached` is not a KV cache)
const NO_KV = EV.some(e => e.event === 'notice' && e.source === 'ngram');
// how a call was written, when not in its syntax's own shape (formats/calls/shapes.py)
function shapeNote(e) { return e.shape && e.shape !== 'tool_call' && e.shape !== 'compact' ? ', written as ' + e.shape : ''; }
const OPENERS = ['[call ', '<tool_call>'];   // the call openers of the compact and the JSON syntax
function heldWhy(e) {
  const stops = (e.checks || []).includes('stop_sequence');
  const opener = OPENERS.find(o => o.startsWith(e.held) || e.held.startsWith(o));
  if (opener) return 'it could still be the start of the call opener ' + show(opener) + (stops ? ' (or of a stop string)' : '');
  return stops ? 'it could still be the start of a stop string' : 'it could still be the start of a stop string or of the call opener';
}
const STOPWHY = {eos: 'the model wrote an end-of-turn token', stop_sequence: 'a stop string is complete; it is not shown',
  tool_call: 'a call closed: generation pauses while the harness runs it', max_tokens: 'the token cap of the turn'};
const STOPS = Object.assign({max_retries: 'consecutive failed calls ended the turn', repeated_call: 'calls repeated after their result ended the turn', interrupted: 'interrupted (Ctrl-C)'}, STOPWHY);
let unmountApp = null;  // the app frame of the step shown, if any: its listener goes when the step does
function eventStep(i, box) {
  const e = EV[i], g = el('div', 'steps');
  switch (e.event) {
    case 'app': {
      kv(g, 'app', 'the page ' + e.server + '/' + e.tool + ' brings (MCP Apps, ' + e.uri + '): the server\u2019s HTML, in a frame with no origin of its own, no network and no way to this page; it is given its call\u2019s arguments and result, and nothing it asks for is called (a replay)');
      const frame = el('div', 'app-box');
      unmountApp = mountApp(frame, e, {name: 'decodeloop viewer'});
      kv(g, 'page', frame);
      break;
    }
    case 'prompt':
      kv(g, 'appended', e.tokens + ' tokens; context ' + e.context);
      kv(g, 'tools', (e.tools || []).join(', ') || 'none');
      kv(g, 'spans', spanTable((e.spans || []).map(s => ({start: s[0], end: s[1], source: String(s[2]), at: i}))));
      kv(g, 'text', pre(e.text));
      break;
    case 'stop': kv(g, 'reason', e.reason + ': ' + (STOPS[e.reason] || '')); break;
    case 'tool_call':
      kv(g, 'written', el('span', 'mono', e.text));
      kv(g, 'parsed', el('span', 'mono', e.name + '(' + JSON.stringify(e.arguments) + ')'));
      kv(g, 'server', e.server);
      if (e.origins && Object.keys(e.origins).length) {
        const o = el('div');
        for (const [path, sources] of Object.entries(e.origins))
          o.append(el('div', 'mono', path + ': ' + (sources.length ? 'found in ' + sources.join(', ') : 'in no source: the model wrote it itself')));
        kv(g, 'origins', el('div', 'note', 'where each argument value occurs in the context before the call'), o);
      }
      break;
    case 'tool_error':
      kv(g, 'stage', e.stage + (e.name ? ' (tool ' + e.name + ')' : ''));
      kv(g, 'written', el('span', 'mono', e.text));
      kv(g, 'the model is told', pre('error: ' + e.message));
      break;
    case 'rpc':
      kv(g, 'direction', (e.direction === 'send' ? 'sent to ' : 'received from ') + e.server);
      kv(g, 'message', rpcLabel(e.message));
      kv(g, 'JSON-RPC', pre(json(e.message)));
      break;
    case 'tool_result':
      kv(g, 'tool', e.name + (e.is_error ? ' (an error result)' : ''));
      kv(g, 'content', (e.content || []).length + ' item(s): ' + (e.content || []).map(c => c && c.type).join(', '));
      kv(g, 'tool message', pre(e.text));
      break;
    case 'rewrite':
      kv(g, 'as written', pre(e.written + '  (' + e.written_tokens + ' tokens)'));
      kv(g, 'as the template renders it', pre(e.rendered + '  (' + e.rendered_tokens + ' tokens)'));
      kv(g, 'cache', 'cut back to ' + e.at + ' where the message began; the first ' + e.kept + ' tokens of the rendering are the ones written, so the cache keeps up to ' + (e.at + e.kept));
      break;
    case 'rewind':
      kv(g, 'context', 'cut back to ' + e.position + ' tokens (' + num(e.cut) + ' cut); the cache follows, and the next forward computes only what comes after');
      kv(g, 'branch', 'the tokens cut are a branch the turn left: struck through among the tokens around the cursor');
      break;
    case 'edit':
      kv(g, 'what', 'a person changed ' + (e.what === 'result' ? 'the server\u2019s result' : 'the model\u2019s arguments') + ' for ' + e.tool + ' before the harness used it');
      kv(g, 'before', pre(typeof e.before === 'string' ? e.before : json(e.before)));
      kv(g, 'after', pre(typeof e.after === 'string' ? e.after : json(e.after)));
      break;
    case 'inject':
      if (e.computed !== undefined && e.computed !== null)
        kv(g, 'appended', e.tokens + ' tokens, the model\u2019s message written back with them; context ' + e.context + '; the next forward computes ' + e.computed + ' positions and serves ' + (e.context - e.computed) + ' from the cache');
      else
      kv(g, 'appended', e.tokens + ' tokens; context ' + e.context + '; the next forward computes ' + (e.tokens + 1) + ' positions (these and the call\u2019s closing token) and serves ' + (e.context - e.tokens - 1) + ' from the cache');
      kv(g, 'spans', spanTable((e.spans || []).map(s => ({start: s[0], end: s[1], source: String(s[2]), at: i}))));
      kv(g, 'text', pre(e.text));
      break;
    case 'server':
      kv(g, 'server', e.server + ' (' + show(e.server_name) + '), MCP ' + e.protocol_version);
      kv(g, 'tools', (e.tools || []).join(', ') || 'none');
      break;
    case 'notice': kv(g, 'from', e.source); kv(g, 'message', pre(e.message)); break;
    case 'progress':
      kv(g, 'call', e.tool ? 'the call of ' + e.tool + ' on ' + e.server : 'no call of ' + e.server + '\u2019s in flight carries its token');
      kv(g, 'progress', num(e.progress) + (e.total !== null && e.total !== undefined ? ' of ' + num(e.total) : ' (no total given)'));
      if (e.message !== null && e.message !== undefined) kv(g, 'message', pre(e.message));
      break;
    case 'task':
      kv(g, 'call', 'the call of ' + e.tool + ' on ' + e.server + ', run as a task (MCP Tasks): polled until it is over, then its result comes back as any call\u2019s');
      kv(g, 'task', el('span', 'mono', e.task_id));
      kv(g, 'status', e.status + ({working: ': still running', input_required: ': waiting for an answer', completed: ': done, its result next', failed: ': failed', cancelled: ': cancelled'}[e.status] || ''));
      if (e.message !== null && e.message !== undefined) kv(g, 'message', pre(e.message));
      break;
    case 'policy':
      kv(g, 'verdict', e.verdict + ': ' + e.reason);
      kv(g, 'call', el('span', 'mono', e.name + '(' + JSON.stringify(e.arguments) + ') on ' + e.server));
      kv(g, 'tool class', e.tool_class);
      break;
    case 'tools_changed':
      kv(g, 'server', e.server); kv(g, 'added', (e.added || []).join(', ') || 'none');
      kv(g, 'removed', (e.removed || []).join(', ') || 'none'); kv(g, 'tools now', (e.tools || []).join(', '));
      break;
    case 'elicitation':
      kv(g, 'server', e.server + ' (' + e.mode + ' mode)'); kv(g, 'message', pre(e.message));
      if (e.url !== undefined && e.url !== null) kv(g, 'url', el('span', 'mono', e.url));
      if ((e.fields || []).length) kv(g, 'fields', e.fields.join(', '));
      kv(g, 'answer', e.action + ': ' + e.reason);
      if (e.content !== undefined && e.content !== null) kv(g, 'content sent', pre(json(e.content)));
      break;
    case 'done':
      kv(g, 'reason', e.reason + ': ' + (STOPS[e.reason] || ''));
      kv(g, 'tokens', e.tokens + ' generated, ' + e.tool_calls + ' tool call(s), ' + e.seconds + ' s');
      if (e.error) kv(g, 'error', el('span', 'warn', e.error));
      if (e.reasoning) kv(g, 'reasoning', pre(e.reasoning));
      kv(g, 'answer', pre(e.answer));
      break;
    case 'sampling':
      kv(g, 'request', samplingHead(Object.assign({sampling_id: e.id}, e)));
      if (e.phase === 'request') {
        kv(g, 'used', (e.mapped || []).join('; ') || 'nothing');
        kv(g, 'ignored', (e.ignored || []).join('; ') || 'nothing');
      }
      kv(g, e.phase === 'request' ? 'messages' : e.phase === 'denied' || e.phase === 'failed' ? 'why' : 'reply', pre(e.text));
      break;
    case 'nested':
      kv(g, 'nested turn', 'sampling request #' + e.sampling + ' from ' + e.server + ': a context of its own, not the conversation\u2019s');
      kv(g, 'event', pre(json(e.inner)));
      break;
    default: kv(g, 'event', pre(json(e)));
  }
  box.append(g);
}
function spanTable(list) {
  const t = el('table', 'spans');
  for (const s of list) {
    const tr = el('tr'), sw = el('i');
    const td = el('td', 'sw'); sw.style.background = sourceColor(s.source); td.append(sw, textNode(s.source));
    tr.append(el('td', 'mono', s.start + '\u2013' + s.end), el('td', null, (s.end - s.start) + ' tok'), td,
              el('td', 'note', sourceName(s.source)));
    if (s.at === cursor || (EV[cursor].event === 'token' && EV[cursor].context - 1 >= s.start && EV[cursor].context - 1 < s.end)) tr.className = 'cur';
    tr.addEventListener('click', () => go(s.at));
    t.append(tr);
  }
  return t;
}

// ---- the call sequence ------------------------------------------------------------------
function roundView(r) {
  const box = $('round');
  if (r < 0) {
    box.replaceChildren(el('div', 'note', 'The cursor is not in a call. t jumps to the next one (' + calls.length + ' in this trace).'));
    return;
  }
  const chain = el('div', 'chain'), evs = rounds[r].events;
  evs.forEach((i, n) => {
    const e = EV[i];
    let kind = e.event, text = '', err = false;
    switch (e.event) {
      case 'stop': kind = 'stop'; text = e.reason; break;
      case 'tool_call': kind = 'call (parsed' + shapeNote(e) + ')'; text = e.name + ' ' + JSON.stringify(e.arguments); break;
      case 'tool_error': kind = e.stage + ' error'; text = e.message; err = true; break;
      case 'rpc':
        kind = (e.direction === 'send' ? 'JSON-RPC request \u2192 ' : 'JSON-RPC response \u2190 ') + e.server;
        text = rpcLabel(e.message); err = !!(e.message && e.message.error); break;
      case 'tool_result': kind = 'tool message'; text = e.text; err = e.is_error; break;
      case 'inject': kind = 'injected span'; text = (e.spans || []).map(s => s[0] + '\u2013' + s[1] + ' ' + s[2]).join(', ') || e.tokens + ' tokens'; break;
      case 'notice': kind = 'notice'; text = e.message; break;
      case 'progress': kind = 'progress \u2190 ' + progressOf(e); text = progressText(e); break;
      case 'task': kind = 'task \u2190 ' + progressOf(e); text = taskText(e); err = e.status === 'failed' || e.status === 'cancelled'; break;
      case 'app': kind = 'app \u2190 ' + e.server + '/' + e.tool; text = e.uri; break;
      case 'policy': kind = 'policy: ' + e.verdict; text = e.name + ' (' + e.tool_class + '): ' + e.reason; err = e.verdict !== 'allow'; break;
      default: text = JSON.stringify(rest(e));
    }
    if (n) chain.append(el('span', 'arrow', '\u2192'));
    const node = el('div', 'node' + (i === cursor ? ' cur' : '') + (err ? ' err' : ''));
    node.append(el('b', null, kind), el('span', null, clip(text, 200)));
    node.title = vis(clip(text, 2000));
    node.addEventListener('click', () => go(i));
    chain.append(node);
  });
  box.replaceChildren(el('div', 'note', 'round ' + (r + 1) + ' of ' + rounds.length), chain);
}

// ---- the context: where every span came from, and the tokens around the cursor -------------
function positionOf(i) {
  const e = EV[i];
  if (e.event === 'token') return [e.context - 1, e.context];
  if (e.event === 'prompt' || e.event === 'inject') return [e.context - e.tokens, e.context];
  return null;
}
function contextView() {
  const box = $('context');
  const t = turnOf[cursor], c = convOf[cursor];
  // spans of this turn's context: its conversation up to the end of this turn
  const map = el('div', 'map');
  let last = 0;
  const shown = [];
  for (const s of spans) if (turnOf[s.at] <= t && convOf[s.at] === c) { shown.push(s); last = Math.max(last, s.end); }
  for (const s of shown) {
    const d = el('div', 'seg');
    d.style.width = (100 * (s.end - s.start) / Math.max(1, last)) + '%';
    d.style.background = sourceColor(s.source);
    d.title = vis(s.start + '\u2013' + s.end + ': ' + sourceName(s.source));
    d.addEventListener('click', () => go(s.at));
    map.append(d);
  }
  const pos = positionOf(cursor);
  if (pos && last) {
    const h = el('div', 'here');
    h.style.left = (100 * pos[0] / last) + '%';
    h.style.width = (100 * (pos[1] - pos[0]) / last) + '%';
    map.append(h);
  }
  const parts = [el('div', 'note', 'context of turn ' + t + ': ' + num(last) + ' positions, coloured by source (click a span to go to the event that appended it)'), map];
  // the tokens around the cursor
  let k = tokenOrd[cursor];
  if (k < 0) { for (let j = cursor; j < N; j++) if (tokenOrd[j] >= 0) { k = tokenOrd[j]; break; } }
  if (k < 0) k = tokens.length - 1;
  if (k >= 0) {
    const strip = el('div', 'strip');
    const a = Math.max(0, k - 80), b = Math.min(tokens.length, k + 80);
    for (let n = a; n < b; n++) {
      const i = tokens[n], e = EV[i];
      if (turnOf[i] !== turnOf[tokens[k]]) continue;
      let text = e.text, cls = 't';
      if (text === '\n') { text = '\u21b5\n'; cls += ' nl'; }
      if (i === cursor) cls += ' cur';
      if (matchSet.has(i)) cls += ' match';
      if (cutTok[i]) cls += ' cut';
      if (e.in_call) cls += ' call';
      else if (e.in_reasoning || e.reasoning) cls += ' reasoning';
      const s = el('span', cls, text);
      s.title = vis('#' + e.index + ' ' + label(e.text) + ' p ' + fix(e.prob));
      s.addEventListener('click', () => go(i));
      strip.append(s);
    }
    parts.push(el('div', 'note', 'tokens around the cursor (the generated text, token by token; call text in green, reasoning in grey italics, a branch a rewind left struck through)'), strip);
  }
  const sp = el('details');
  sp.append(el('summary', null, 'every span (' + shown.length + ')'), spanTable(shown));
  parts.push(sp);
  box.replaceChildren(...parts);
}

// ---- attention (events that carry it: the numpy transformer) --------------------------------
function attention(e) {
  const a = e.attention, panel = $('attn-panel'), box = $('attn');
  panel.hidden = false;
  const sel = el('select');
  (a.heads || []).forEach((h, n) => {
    const o = el('option', null, 'layer ' + h.layer + ' head ' + h.head + (h.copy ? ' (the copy head)' : ''));
    o.value = n; sel.append(o);
  });
  if (attnHead < 0 || attnHead >= (a.heads || []).length) attnHead = Math.max(0, (a.heads || []).findIndex(h => h.copy));
  sel.value = attnHead;
  const out = el('div', 'attn');
  function draw() {
    attnHead = +sel.value;
    const h = a.heads[attnHead], keys = a.keys || [];
    out.replaceChildren();
    const max = Math.max(1e-9, ...h.weights);
    h.weights.forEach((w, j) => {
      const s = el('span', null, keys[j] === '\n' ? '\u21b5' : keys[j]);
      s.style.background = 'rgba(47,111,214,' + (w / max).toFixed(3) + ')';
      s.title = vis('position ' + (a.start + j) + ' ' + label(keys[j]) + ': ' + w.toFixed(4));
      out.append(s);
    });
  }
  sel.addEventListener('change', draw);
  draw();
  box.replaceChildren(el('div', 'note', 'where the position that chose ' + label(e.text) + ' looked: one cell per key position in the window, shaded by weight (darkest = this head\u2019s largest weight)'), sel, out);
}
let attnHead = -1;   // the head shown: the copy head until the reader picks another

// ---- the cursor -------------------------------------------------------------------------
let cursor = Math.max(0, firstPrompt);
let matchSet = new Set(), matches = [], matchAt = -1;
function render() {
  const e = EV[cursor];
  if (!e) return;
  $('step-title').textContent = e.event === 'token'
    ? 'Token ' + e.index + ' of turn ' + turnOf[cursor] + ': the four steps'
    : 'Event: ' + e.event;
  const box = $('step');
  box.replaceChildren();
  $('attn-panel').hidden = true;
  if (unmountApp) { unmountApp(); unmountApp = null; }
  if (e.event === 'token') tokenStep(cursor, box); else eventStep(cursor, box);
  roundView(roundOf[cursor]);
  contextView();
  $('where').textContent = 'event ' + (cursor + 1) + ' / ' + N + (tokenOrd[cursor] >= 0 ? ' \u00b7 token ' + (tokenOrd[cursor] + 1) + ' / ' + tokens.length : '');
  const y = cursor * ROW;
  if (y < timeline.scrollTop || y + ROW > timeline.scrollTop + timeline.clientHeight)
    timeline.scrollTop = Math.max(0, y - timeline.clientHeight / 2);
  drawRows(true);
  document.body.dataset.cursor = cursor;
}
function go(i) { if (N) { cursor = Math.max(0, Math.min(N - 1, i)); render(); } }
function after(list, dir) {
  if (dir > 0) { for (const i of list) if (i > cursor) return i; }
  else { for (let n = list.length - 1; n >= 0; n--) if (list[n] < cursor) return list[n]; }
  return cursor;
}

// ---- search over tokens ------------------------------------------------------------------
let joined = null, starts = null;
function search(q) {
  matchSet = new Set(); matches = []; matchAt = -1;
  if (q) {
    if (joined === null) {
      starts = new Int32Array(tokens.length);
      const parts = [];
      let at = 0;
      tokens.forEach((i, n) => { starts[n] = at; const t = String(EV[i].text).toLowerCase(); parts.push(t); at += t.length; });
      joined = parts.join('');
    }
    const needle = q.toLowerCase();
    let from = 0, p;
    while ((p = joined.indexOf(needle, from)) >= 0) {
      let lo = 0, hi = tokens.length - 1;          // the token where the match starts
      while (lo < hi) { const mid = (lo + hi + 1) >> 1; if (starts[mid] <= p) lo = mid; else hi = mid - 1; }
      matches.push(tokens[lo]);
      for (let n = lo; n < tokens.length && starts[n] < p + needle.length; n++) matchSet.add(tokens[n]);
      from = p + Math.max(1, needle.length);
      if (matches.length >= 100000) break;
    }
  }
  $('found').textContent = q ? (matches.length ? matches.length + ' match(es)' : 'no match') : '';
  if (matches.length) nextMatch(1); else render();
}
function nextMatch(dir) {
  if (!matches.length) return;
  let n = dir > 0 ? matches.findIndex(i => i > cursor) : -1;
  if (dir < 0) for (let m = matches.length - 1; m >= 0; m--) if (matches[m] < cursor) { n = m; break; }
  if (n < 0) n = dir > 0 ? 0 : matches.length - 1;
  matchAt = n;
  $('found').textContent = (n + 1) + ' / ' + matches.length + ' match(es)';
  go(matches[n]);
}

// ---- keys and buttons ----------------------------------------------------------------------
const input = $('search');
input.addEventListener('input', () => search(input.value));
input.addEventListener('keydown', ev => {
  if (ev.key === 'Enter') { nextMatch(ev.shiftKey ? -1 : 1); ev.preventDefault(); }
  else if (ev.key === 'Escape') input.blur();
  ev.stopPropagation();
});
document.addEventListener('keydown', ev => {
  if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
  const act = {
    ArrowRight: () => go(cursor + 1), ArrowLeft: () => go(cursor - 1),
    ArrowDown: () => go(cursor + 1), ArrowUp: () => go(cursor - 1),
    t: () => go(after(calls, 1)), T: () => go(after(calls, -1)),
    s: () => go(after(stops, 1)), S: () => go(after(stops, -1)),
    End: () => go(N - 1), e: () => go(N - 1), Home: () => go(0),
    n: () => nextMatch(1), N: () => nextMatch(-1), '/': () => input.focus(),
  }[ev.key];
  if (act) { ev.preventDefault(); act(); }
});
$('b-start').onclick = () => go(0);
$('b-prev').onclick = () => go(cursor - 1);
$('b-next').onclick = () => go(cursor + 1);
$('b-call').onclick = () => go(after(calls, 1));
$('b-stop').onclick = () => go(after(stops, 1));
$('b-end').onclick = () => go(N - 1);

header();
if (N) render(); else $('step').textContent = 'This trace has no events.';
document.body.dataset.readyMs = performance.now().toFixed(1);  // since navigation began
document.body.dataset.ready = '1';
