/* canopy web: the page. Draws canopy's JSON tree (docs/cli.md "JSON tree") as an icicle
 * flame graph (canvas) and a call tree table, and asks the server (client/web_server.c)
 * for every change: transforms and the inverted view are QUERY options of `canopy tree`,
 * sent as repeated `arg` parameters. Names come from profiled binaries: they are only ever
 * set with textContent or drawn with fillText, never parsed as HTML. No dependencies. */
'use strict';

(function () {
  const token = new URLSearchParams(location.search).get('token') || '';
  const $ = (id) => document.getElementById(id);
  const ROW_H = 16;

  const state = {
    info: { title: '', live: false, args: [] },
    stack: [],          /* transforms: {label, args} */
    inverted: false,
    paused: false,
    data: null,         /* the last JSON tree */
    roots: [],          /* nodes built from it */
    byKey: new Map(),
    expanded: new Set(),
    autoExpand: true,   /* expand the heavy nodes on the next load */
    selected: null,     /* node key */
    zoom: null,         /* node key at the flame graph's top, or null */
    frames: [],         /* the flame graph's drawn boxes */
    menuNode: null,
    inflight: false,
    queued: null,       /* {undo}: a load asked for while one ran */
    stickyError: false, /* the error shown is a refused change's */
    refreshes: 0,
  };

  /* ---- talking to the server ------------------------------------------------------ */

  function queryArgs() {
    const a = state.info.args.slice();
    for (const t of state.stack) a.push(...t.args);
    if (state.inverted) a.push('--invert');
    return a;
  }

  async function fetchJSON(path, args) {
    const p = new URLSearchParams();
    p.append('token', token);
    for (const a of args || []) p.append('arg', a);
    const r = await fetch(path + '?' + p.toString(), { cache: 'no-store' });
    const body = await r.json();
    if (!r.ok) throw new Error(body && body.error ? body.error : 'HTTP ' + r.status);
    return body;
  }

  /* Loads the tree for the current query. One request at a time: a load asked for while
   * one runs is queued (a user's change, with its undo, wins over a refresh), and an answer
   * for a query that is no longer the current one is dropped. On error, undo (when given)
   * restores the query that worked, and the page loads that again. */
  async function load(undo) {
    if (state.inflight) {
      if (!state.queued || undo) state.queued = { undo: undo };
      return;
    }
    state.inflight = true;
    const args = queryArgs();
    const current = () => JSON.stringify(args) === JSON.stringify(queryArgs());
    let retry = false;
    try {
      const data = await fetchJSON('/api/tree', args);
      if (current()) {
        if (!state.stickyError) showError('');
        setData(data);
        state.refreshes++;
        document.body.dataset.refreshes = String(state.refreshes);
      }
    } catch (e) {
      if (current()) {
        showError(e.message);
        if (undo) { /* a refused change: its message stays until the next one */
          undo();
          state.stickyError = true;
          retry = true;
        }
        renderCrumbs();
      }
    } finally {
      state.inflight = false;
      const q = state.queued;
      state.queued = null;
      if (q) load(q.undo);
      else if (retry) load();
    }
  }

  function showError(msg) {
    const e = $('error');
    e.textContent = msg;
    e.hidden = !msg;
  }

  /* ---- the tree ------------------------------------------------------------------- */

  function keyOf(path) { return JSON.stringify(path); }

  function build(list, parent, out) {
    const nodes = [];
    for (const j of list || []) {
      const path = parent ? parent.path.concat([j.name]) : [j.name];
      const n = { name: j.name, lib: j.lib || '', total: j.total, self: j.self, path: path,
                  key: keyOf(path), parent: parent, depth: path.length - 1, children: [] };
      out.set(n.key, n);
      n.children = build(j.children, n, out);
      nodes.push(n);
    }
    return nodes;
  }

  function setData(data) {
    state.data = data;
    state.byKey = new Map();
    /* --functions (as a starting query) has rows instead of roots: a flat list. */
    state.roots = build(data.roots || data.functions || [], null, state.byKey);
    if (state.autoExpand) {
      autoExpand(state.roots);
      state.autoExpand = false;
    }
    if (state.zoom && !state.byKey.has(state.zoom)) state.zoom = null;
    render();
  }

  /* Opens the nodes that hold at least 10% of the total, so the hot paths show. */
  function autoExpand(nodes) {
    const total = Math.abs(state.data.total) || 1;
    for (const n of nodes) {
      if (Math.abs(n.total) / total >= 0.1 && n.children.length) {
        state.expanded.add(n.key);
        autoExpand(n.children);
      }
    }
  }

  function fmt(v) {
    const unit = state.data ? state.data.unit : 'samples';
    if (unit === 'ns' || unit === 'us' || unit === 'ms') {
      const ns = v * (unit === 'ns' ? 1 : unit === 'us' ? 1e3 : 1e6);
      const a = Math.abs(ns);
      if (a >= 1e9) return (ns / 1e9).toFixed(2) + ' s';
      if (a >= 1e6) return (ns / 1e6).toFixed(1) + ' ms';
      if (a >= 1e3) return (ns / 1e3).toFixed(1) + ' µs';
      return ns.toFixed(0) + ' ns';
    }
    return Number.isInteger(v) ? String(v) : v.toFixed(2);
  }

  function pct(v) {
    const t = state.data && state.data.total ? state.data.total : 0;
    return t ? (100 * v / t).toFixed(1) + '%' : '';
  }

  /* ---- rendering: header, crumbs ---------------------------------------------------- */

  function render() {
    renderStatus();
    renderCrumbs();
    renderTable();
    drawFlame();
  }

  function renderStatus() {
    const d = state.data;
    let s = 'total ' + fmt(d.total) + ' ' + (d.unit || '');
    if (d.samples !== undefined) s += ' · ' + d.samples + ' samples, ' + d.lost + ' lost';
    if (state.info.live) s += state.paused ? ' · paused' : ' · live';
    $('status').textContent = s;
    $('status').dataset.total = String(d.total);
  }

  function renderCrumbs() {
    const nav = $('crumbs');
    nav.replaceChildren();
    const add = (label, depth) => {
      if (depth > 0) {
        const sep = document.createElement('span');
        sep.className = 'sep';
        sep.textContent = '›';
        nav.append(sep);
      }
      const c = document.createElement('span');
      c.className = 'crumb';
      c.textContent = label;
      c.addEventListener('click', () => popTo(depth));
      nav.append(c);
    };
    add(state.info.args.length ? 'start: ' + state.info.args.join(' ') : 'whole profile', 0);
    state.stack.forEach((t, i) => add(t.label, i + 1));
  }

  /* ---- the call tree table ---------------------------------------------------------- */

  function visibleRows() {
    const out = [];
    const walk = (nodes) => {
      for (const n of nodes) {
        out.push(n);
        if (state.expanded.has(n.key)) walk(n.children);
      }
    };
    walk(state.roots);
    return out;
  }

  function cell(tr, text, cls) {
    const td = document.createElement('td');
    if (cls) td.className = cls;
    td.textContent = text;
    tr.append(td);
    return td;
  }

  function renderTable() {
    const body = $('rows');
    const rows = visibleRows();
    const frag = document.createDocumentFragment();
    for (const n of rows) {
      const tr = document.createElement('tr');
      tr.dataset.key = n.key;
      tr.dataset.depth = String(n.depth);
      if (n.key === state.selected) tr.className = 'sel';
      cell(tr, fmt(n.total), 'total');
      cell(tr, pct(n.total), 'total-pct');
      cell(tr, fmt(n.self), 'self');
      cell(tr, pct(n.self), 'self-pct');
      const name = cell(tr, '', 'name');
      name.style.paddingLeft = (6 + 14 * Math.min(n.depth, 60)) + 'px';
      const tw = document.createElement('span');
      tw.className = 'twisty';
      tw.textContent = n.children.length ? (state.expanded.has(n.key) ? '▾' : '▸') : '';
      const label = document.createElement('span');
      label.className = 'fn';
      label.textContent = n.name;
      name.append(tw, label);
      if (n.lib) name.title = n.lib;
      frag.append(tr);
    }
    body.replaceChildren(frag);
  }

  function select(key, scroll) {
    state.selected = key;
    for (const tr of $('rows').children)
      tr.classList.toggle('sel', tr.dataset.key === key);
    if (scroll) {
      const tr = [...$('rows').children].find((r) => r.dataset.key === key);
      if (tr) tr.scrollIntoView({ block: 'nearest' });
    }
  }

  function toggle(n) {
    if (!n || !n.children.length) return;
    if (state.expanded.has(n.key)) state.expanded.delete(n.key);
    else state.expanded.add(n.key);
    renderTable();
  }

  function expandAll(nodes) {
    for (const n of nodes) {
      if (n.children.length) state.expanded.add(n.key);
      expandAll(n.children);
    }
  }

  /* Opens the ancestors of n so its row shows. */
  function reveal(n) {
    for (let p = n.parent; p; p = p.parent) state.expanded.add(p.key);
  }

  function onKey(ev) {
    const rows = visibleRows();
    if (!rows.length) return;
    let i = rows.findIndex((n) => n.key === state.selected);
    const cur = i >= 0 ? rows[i] : null;
    switch (ev.key) {
      case 'ArrowDown': i = Math.min(rows.length - 1, i + 1); break;
      case 'ArrowUp': i = Math.max(0, i - 1); break;
      case 'ArrowRight':
        if (cur && cur.children.length && !state.expanded.has(cur.key)) { toggle(cur); ev.preventDefault(); return; }
        if (cur && cur.children.length) i = rows.indexOf(cur.children[0]);
        break;
      case 'ArrowLeft':
        if (cur && state.expanded.has(cur.key)) { toggle(cur); ev.preventDefault(); return; }
        if (cur && cur.parent) i = rows.indexOf(cur.parent);
        break;
      case 'Enter': toggle(cur); ev.preventDefault(); return;
      case '*':
        expandAll(cur ? [cur] : state.roots);
        renderTable();
        ev.preventDefault();
        return;
      default: return;
    }
    ev.preventDefault();
    if (i < 0) i = 0;
    select(rows[i].key, true);
  }

  function rowNode(ev) {
    const tr = ev.target.closest('tr');
    return tr ? state.byKey.get(tr.dataset.key) : null;
  }

  /* ---- the flame graph ---------------------------------------------------------------- */

  function hue(name) {
    let h = 0;
    for (let i = 0; i < name.length; i++) h = (h * 31 + name.charCodeAt(i)) >>> 0;
    return h;
  }

  function color(n) {
    const h = hue(n.name);
    return 'hsl(' + (10 + h % 45) + ',' + (70 + h % 20) + '%,' + (55 + (h >> 8) % 15) + '%)';
  }

  /* Boxes {n, x0, x1, depth} in [0,1]: the zoomed node's ancestors full width, then its
   * subtree (or every root) in proportion to running weight. */
  function layout() {
    const frames = [];
    const z = state.zoom ? state.byKey.get(state.zoom) : null;
    let depth = 0;
    const lay = (nodes, x0, scale, d) => {
      let x = x0;
      for (const n of nodes) {
        const w = Math.abs(n.total) * scale;
        frames.push({ n: n, x0: x, x1: x + w, depth: d });
        lay(n.children, x, scale, d + 1);
        x += w;
      }
    };
    if (z) {
      const chain = [];
      for (let p = z; p; p = p.parent) chain.unshift(p);
      for (const p of chain.slice(0, -1)) frames.push({ n: p, x0: 0, x1: 1, depth: depth++ });
      lay([z], 0, 1 / (Math.abs(z.total) || 1), depth);
    } else {
      const sum = state.roots.reduce((s, n) => s + Math.abs(n.total), 0) || 1;
      lay(state.roots, 0, 1 / sum, 0);
    }
    return frames;
  }

  function drawFlame() {
    const canvas = $('flame');
    const dpr = window.devicePixelRatio || 1;
    const width = canvas.clientWidth || 800;
    const all = layout();
    const frames = all.filter((f) => (f.x1 - f.x0) * width >= 0.5);
    const maxDepth = frames.reduce((m, f) => Math.max(m, f.depth), 0);
    const height = Math.max(ROW_H, (maxDepth + 1) * ROW_H);
    canvas.style.height = height + 'px';
    canvas.width = Math.round(width * dpr);
    canvas.height = Math.round(height * dpr);
    const g = canvas.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, width, height);
    g.font = '11px system-ui, sans-serif';
    g.textBaseline = 'middle';
    for (const f of frames) {
      const x = f.x0 * width, w = (f.x1 - f.x0) * width, y = f.depth * ROW_H;
      g.fillStyle = f.n.key === state.selected ? '#6aa9ff' : color(f.n);
      g.fillRect(x, y, Math.max(w - 0.5, 0.5), ROW_H - 1);
      if (w > 20) {
        g.fillStyle = '#000';
        g.fillText(fit(g, f.n.name, w - 6), x + 3, y + ROW_H / 2);
      }
    }
    state.frames = frames;
    state.flameWidth = width;
  }

  function fit(g, s, w) {
    if (g.measureText(s).width <= w) return s;
    let lo = 0, hi = s.length;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (g.measureText(s.slice(0, mid) + '…').width <= w) lo = mid;
      else hi = mid - 1;
    }
    return lo ? s.slice(0, lo) + '…' : '';
  }

  function frameAt(ev) {
    const r = $('flame').getBoundingClientRect();
    const x = (ev.clientX - r.left) / (state.flameWidth || r.width);
    const d = Math.floor((ev.clientY - r.top) / ROW_H);
    return state.frames.find((f) => f.depth === d && x >= f.x0 && x < f.x1) || null;
  }

  function showTooltip(ev) {
    const f = frameAt(ev);
    const tip = $('tooltip');
    if (!f) { tip.hidden = true; return; }
    const n = f.n;
    tip.textContent = n.name + (n.lib ? '  (' + n.lib + ')' : '') +
      '\nrunning: ' + fmt(n.total) + ' (' + pct(n.total) + ')' +
      '\nself: ' + fmt(n.self) + ' (' + pct(n.self) + ')';
    const box = $('flame-box').getBoundingClientRect();
    tip.style.left = Math.min(ev.clientX - box.left + 12, box.width - 200) + 'px';
    tip.style.top = (ev.clientY - box.top + 14) + 'px';
    tip.hidden = false;
  }

  function onFlameClick(ev) {
    const f = frameAt(ev);
    if (!f) return;
    /* A click zooms to the box; on the zoomed box itself, one level out. */
    if (f.n.key === state.zoom) state.zoom = f.n.parent ? f.n.parent.key : null;
    else state.zoom = f.n.key;
    reveal(f.n);
    state.selected = f.n.key;
    renderTable();
    select(f.n.key, true);
    drawFlame();
  }

  /* ---- transforms ------------------------------------------------------------------- */

  function transformFor(op, n) {
    const path = n.path.join(';');
    switch (op) {
      case 'focus':
        return state.inverted ? { label: 'focus ↑ ' + path, spec: 'focus-inverted:' + path }
                              : { label: 'focus ' + path, spec: 'focus:' + path };
      case 'focus-func': return { label: 'focus on ' + n.name, spec: 'focus-func:' + n.name };
      case 'merge': return { label: 'merge ' + n.name, spec: 'merge:' + n.name };
      case 'merge-node': return { label: 'merge node ' + path, spec: 'merge-node:' + path };
      case 'drop': return { label: 'drop ' + n.name, spec: 'drop:' + n.name };
    }
    return null;
  }

  function push(op, n) {
    const t = transformFor(op, n);
    if (!t) return;
    state.stack.push({ label: t.label, args: ['-t', t.spec] });
    resetView();
    load(() => state.stack.pop());
  }

  function popTo(depth) {
    if (depth === state.stack.length) return;
    const old = state.stack;
    state.stack = state.stack.slice(0, depth);
    resetView();
    load(() => { state.stack = old; });
  }

  function setInverted(on) {
    state.inverted = on;
    $('invert').setAttribute('aria-pressed', String(on));
    resetView();
    load(() => {
      state.inverted = !on;
      $('invert').setAttribute('aria-pressed', String(!on));
    });
  }

  /* After a change of query the paths change: start from the hot paths again. */
  function resetView() {
    state.stickyError = false;
    showError('');
    state.expanded = new Set();
    state.autoExpand = true;
    state.zoom = null;
  }

  function openMenu(ev, n) {
    if (!n) return;
    ev.preventDefault();
    state.menuNode = n;
    const m = $('menu');
    m.querySelector('[data-op="merge-node"]').hidden = state.inverted;
    m.style.left = ev.clientX + 'px';
    m.style.top = ev.clientY + 'px';
    m.hidden = false;
  }

  /* ---- wiring ------------------------------------------------------------------------- */

  function wire() {
    const rows = $('rows');
    rows.addEventListener('click', (ev) => {
      const n = rowNode(ev);
      if (!n) return;
      if (ev.target.classList.contains('twisty')) toggle(n);
      select(n.key, false);
      rows.focus();
      drawFlame();
    });
    rows.addEventListener('dblclick', (ev) => toggle(rowNode(ev)));
    rows.addEventListener('keydown', (ev) => { onKey(ev); drawFlame(); });
    rows.addEventListener('contextmenu', (ev) => openMenu(ev, rowNode(ev)));
    const flame = $('flame');
    flame.addEventListener('mousemove', showTooltip);
    flame.addEventListener('mouseleave', () => { $('tooltip').hidden = true; });
    flame.addEventListener('click', onFlameClick);
    flame.addEventListener('contextmenu', (ev) => { const f = frameAt(ev); openMenu(ev, f && f.n); });
    $('menu').addEventListener('click', (ev) => {
      const li = ev.target.closest('li');
      $('menu').hidden = true;
      if (li && state.menuNode) push(li.dataset.op, state.menuNode);
    });
    document.addEventListener('click', (ev) => {
      if (!$('menu').contains(ev.target)) $('menu').hidden = true;
    });
    document.addEventListener('keydown', (ev) => { if (ev.key === 'Escape') $('menu').hidden = true; });
    $('invert').addEventListener('click', () => setInverted(!state.inverted));
    $('pause').addEventListener('click', () => {
      state.paused = !state.paused;
      $('pause').setAttribute('aria-pressed', String(state.paused));
      $('pause').textContent = state.paused ? 'Resume' : 'Pause';
      if (state.data) renderStatus();
    });
    window.addEventListener('resize', () => { if (state.data) drawFlame(); });
  }

  async function start() {
    wire();
    try {
      const info = await fetchJSON('/api/info');
      state.info = { title: info.title, live: info.live, args: info.args || [] };
    } catch (e) {
      showError(e.message);
      return;
    }
    $('title').textContent = state.info.title;
    document.title = 'canopy: ' + state.info.title;
    $('pause').hidden = !state.info.live;
    await load();
    if (state.info.live)
      setInterval(() => { if (!state.paused) load(); }, 1000);
  }

  start();
})();
