"""The question explorer's page: one HTML file, its data (``explorer.data_json``), style and script inline, no
network. Plain JavaScript, written here because the page must open from a file with nothing fetched and no build
step; it filters an array in memory and draws one page of rows at a time, so whole PROST (18,736 questions) for
three runs opens and filters in well under a second.

The view lives in the address's fragment (``explorer.link``): ``config`` (a comma list), ``group``, ``status`` and
``run`` (that run's status; any run without ``run``), ``a``/``b`` with ``discordant`` (``ab``: A right and B wrong,
``ba``: the reverse, ``both``: either; questions both answered, neither undecided nor excluded), ``q`` (a text
search over prompt, options, gold and generated text) and ``page``. ``#count`` holds the number of questions shown
(its ``data-count``).
"""

from __future__ import annotations

import html

from physprobe.report.explorer import Explorer, data_json

CSS = """body{font-family:system-ui,sans-serif;margin:1em;color:#222;font-size:14px}
header{display:flex;flex-wrap:wrap;gap:.6em 1.2em;align-items:end;margin-bottom:.6em}
#pair:not([hidden]){display:flex;gap:.6em 1.2em;align-items:end}
label{display:flex;flex-direction:column;font-size:12px;color:#555}select,input{font-size:14px;padding:2px}
#count{font-weight:bold;font-size:15px}table{border-collapse:collapse;width:100%}
th,td{border:1px solid #ccc;padding:4px 6px;vertical-align:top;text-align:left}th{background:#f2f2f2;position:sticky;top:0}
td.prompt{white-space:pre-wrap;max-width:32em;overflow-wrap:anywhere}ol{margin:0;padding-left:1.4em}li.gold{font-weight:bold}
.s-R{background:#e3f4e8}.s-W{background:#fbe3e3}.s-U{background:#fdf1d6}.s-D,.s-X{background:#eee;color:#555}
span.score{color:#555;font-size:12px}span.each{display:block;margin-left:1em;color:#444}pre{white-space:pre-wrap;margin:.3em 0 0;font-size:12px;color:#333}
nav{margin:.6em 0}button{font-size:14px}p.rules{font-size:12px;color:#555}a.back{font-size:13px}"""

SCRIPT = r"""
const D = JSON.parse(document.getElementById('data').textContent);
const Q = D.questions, R = D.runs, PAGE = 50;
const $ = id => document.getElementById(id);
const esc = s => String(s).replace(/[&<>"]/g, c => ({'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;'}[c]));
let text = null;  // each question's searchable text, made on the first search
function searchable() {
  if (!text) text = Q.map(q => [q.p, ...q.ps, q.o.join(' '), q.g.join(' '), ...q.a.map(a => a && a[3] ? a[3] : '')].join(' ').toLowerCase());
  return text;
}
function fill(id, values, any) {
  $(id).innerHTML = (any ? `<option value="">${any}</option>` : '') + values.map(([v, t]) => `<option value="${esc(v)}">${esc(t)}</option>`).join('');
}
function setup() {
  const groups = [...new Set(Q.flatMap(q => q.g))].sort();
  fill('config', D.configs.map(c => [c, c]), 'every config');
  fill('group', groups.map(g => [g, g]), 'every group');
  fill('status', Object.entries(D.status), 'any status');
  fill('run', R.map((r, i) => [i, r.name]), 'any run');
  fill('a', R.map((r, i) => [i, r.name]), '');
  fill('b', R.map((r, i) => [i, r.name]), '');
  if (R.length > 1) $('b').value = '1';
  $('pair').hidden = R.length < 2;
  $('rules').textContent = R.map(r => `${r.name} (${r.protocol}): unparsed: ${r.rules.U}; undecided: ${r.rules.D}; excluded: ${r.rules.X}` +
    (r.rules.F ? `; fallback: ${r.rules.F}` : '')).join(' · ');
  for (const id of ['config', 'group', 'status', 'run', 'a', 'b', 'discordant']) $(id).onchange = () => { view.page = 0; changed(); };
  $('q').oninput = () => { view.page = 0; changed(); };
  $('prev').onclick = () => { view.page = Math.max(0, view.page - 1); changed(); };
  $('next').onclick = () => { view.page += 1; changed(); };
  window.onhashchange = () => { read(); draw(); };
}
const view = {page: 0};
function read() {
  const h = new URLSearchParams(location.hash.slice(1));
  const config = h.get('config') || '';
  if (config && ![...$('config').options].some(o => o.value === config)) {  // a pooled figure's configs together
    $('config').insertAdjacentHTML('beforeend', `<option value="${esc(config)}">${esc(config.split(',').join(' + '))}</option>`);
  }
  $('config').value = config;
  for (const id of ['group', 'status', 'run', 'discordant', 'q']) $(id).value = h.get(id) || '';
  if (h.get('a')) $('a').value = h.get('a');
  if (h.get('b')) $('b').value = h.get('b');
  view.page = +(h.get('page') || 0);
}
function changed() {
  const h = new URLSearchParams();
  for (const id of ['config', 'group', 'status', 'run', 'discordant', 'q']) if ($(id).value) h.set(id, $(id).value);
  if ($('discordant').value) { h.set('a', $('a').value); h.set('b', $('b').value); }
  if (view.page) h.set('page', view.page);
  history.replaceState(null, '', '#' + h.toString().replace(/%2C/g, ','));
  draw();
}
const counted = s => s && (s[0] === 'R' || s[0] === 'W' || s[0] === 'U');
const right = s => s[0] === 'R';
function shown() {
  const configs = new Set($('config').value.split(',').filter(Boolean).map(c => D.configs.indexOf(c)));
  const group = $('group').value, status = $('status').value, run = $('run').value, mode = $('discordant').value;
  const a = +$('a').value, b = +$('b').value, words = $('q').value.trim().toLowerCase();
  const found = [], search = words ? searchable() : null;
  for (let i = 0; i < Q.length; i++) {
    const q = Q[i];
    if (configs.size && !configs.has(q.c)) continue;
    if (group && !q.g.includes(group)) continue;
    if (status && !(run === '' ? q.a.some(x => x && x[0][0] === status) : q.a[+run] && q.a[+run][0][0] === status)) continue;
    if (mode) {
      const x = q.a[a] && q.a[a][0], y = q.a[b] && q.a[b][0];
      if (!counted(x) || !counted(y) || right(x) === right(y)) continue;
      if ((mode === 'ab' && !right(x)) || (mode === 'ba' && right(x))) continue;
    }
    if (search && !search[i].includes(words)) continue;
    found.push(i);
  }
  return found;
}
function answer(q, x, r) {
  if (!x) return '<td>—</td>';
  const code = x[0][0], fell = x[0].length > 1;
  const what = x[1] === null ? '' : esc(q.o[x[1]] !== undefined && !R[r].grouped ? `${x[1]}: ${q.o[x[1]]}` : `answer ${x[1]}`);
  const rule = code === 'U' || code === 'D' || code === 'X' ? ` (${esc(R[r].rules[code])})` : fell ? ` (fallback: ${esc(R[r].rules.F)})` : '';
  const gen = x[3] ? `<pre>${esc(x[3])}</pre>` : '';
  const prompt = x[4] ? `<pre>read: ${esc(x[4])}</pre>` : '';
  return `<td class="s-${code}"><b>${D.status[code]}</b>${rule}<br>${what}${gen}${prompt}</td>`;
}
function row(i) {
  const q = Q[i];
  const gold = new Set(q.gold);
  const options = q.o.map((o, k) => `<li class="${gold.has(k) ? 'gold' : ''}">${esc(o)} ` +
    q.a.map((x, r) => x && x[2][k] !== undefined && x[2][k] !== null ? `<span class="score">${esc(R[r].name)} ${x[2][k]}</span>` : '').join(' ') + '</li>').join('');
  const goldText = q.gold.map(k => q.o[k] !== undefined ? `${k}: ${q.o[k]}` : `answer ${k}`).join(', ');
  return `<tr data-row="${q.r}"><td>${esc(D.configs[q.c])}</td><td>${q.r}</td><td>${esc(q.g.join(', '))}</td>` +
    `<td class="prompt">${esc(q.p)}${q.ps.map(x => `<span class="each">…${esc(x)}</span>`).join('')}</td><td><ol start="0">${options}</ol></td><td>${esc(goldText)}</td>` +
    q.a.map((x, r) => answer(q, x, r)).join('') + '</tr>';
}
function draw() {
  const found = shown(), pages = Math.max(1, Math.ceil(found.length / PAGE));
  view.page = Math.min(view.page, pages - 1);
  $('count').textContent = `${found.length} of ${Q.length} questions`;
  $('count').dataset.count = found.length;
  $('where').textContent = `page ${view.page + 1} of ${pages}`;
  $('rows').innerHTML = found.slice(view.page * PAGE, (view.page + 1) * PAGE).map(row).join('');
}
$('head').innerHTML = '<th>Config</th><th>Row</th><th>Group</th><th>Prompt as read</th><th>Options (gold bold), each run\'s score</th><th>Gold</th>' +
  R.map(r => `<th>${esc(r.name)}</th>`).join('');
setup(); read(); draw();
document.body.dataset.ready = '1';
"""

BODY = """<h1>{title}: every question</h1>
<p><a class="back" href="../report.html">↑ back to the report</a> · {runs}</p>
<header>
<label>Config<select id="config"></select></label><label>Group<select id="group"></select></label>
<label>Status<select id="status"></select></label><label>of run<select id="run"></select></label>
<span id="pair"><label>Discordant<select id="discordant"><option value="">—</option><option value="ab">A right, B wrong</option>
<option value="ba">A wrong, B right</option><option value="both">either (b + c)</option></select></label>
<label>A<select id="a"></select></label><label>B<select id="b"></select></label></span>
<label>Search<input id="q" type="search" placeholder="prompt, option, generated text"></label>
<span id="count"></span>
</header>
<p class="rules" id="rules"></p>{missing}
<nav><button id="prev">← previous</button> <span id="where"></span> <button id="next">next →</button></nav>
<table><thead><tr id="head"></tr></thead><tbody id="rows"></tbody></table>"""


def page(found: Explorer, title: str) -> str:
    """The explorer of ``found`` as one HTML page (``title``: the benchmark's)."""
    runs = "; ".join(f"{r['name']}: {r['protocol']} ({r['method']}), {r['answered']} rows" for r in found.data["runs"])
    missing = "".join(f'<p class="rules">Not read: {html.escape(why)}</p>' for why in found.missing)
    body = BODY.format(title=html.escape(title), runs=html.escape(runs), missing=missing)
    return "\n".join(['<!DOCTYPE html>', '<html lang="en">', '<head>', '<meta charset="utf-8">',
                      f"<title>{html.escape(title)}: every question (physprobe)</title>", f"<style>{CSS}</style>", "</head>",
                      "<body>", body, f'<script type="application/json" id="data">{data_json(found)}</script>',
                      f"<script>{SCRIPT}</script>", "</body>", "</html>", ""])  # fmt: skip
