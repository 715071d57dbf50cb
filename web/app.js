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
    view: 'tree',       /* tree, inverted, functions, callers, callees */
    viewFunc: '',       /* F of callers/callees */
    search: '',
    tid: null,          /* --tid, or null */
    pid: null,          /* --only-pid, or null */
    range: null,        /* [from, to] in seconds, or null */
    activity: null,     /* the last --format activity answer */
    lines: null,        /* the function whose per-line costs show, or null */
    paused: false,
    data: null,         /* the last JSON tree */
    roots: [],          /* nodes built from it */
    rowNodes: new Map(), /* key -> node of the table's rows (not of every node: trees
                            have 100 k+ of them and their keys are long) */
    expanded: new Set(),
    autoExpand: true,   /* expand the heavy nodes on the next load */
    selected: null,     /* node key */
    zoom: null,         /* node key at the flame graph's top, or null */
    frames: null,       /* the flame graph's drawn boxes (layout's columns) */
    menuNode: null,
    inflight: false,
    queued: null,       /* {undo}: a load asked for while one ran */
    stickyError: false, /* the error shown is a refused change's */
    refreshes: 0,
    treeSlot: {},       /* fetchJSON's ETag caches of the tree and the activity data */
    actSlot: {},
  };

  /* ---- talking to the server ------------------------------------------------------ */

  /* The page's query as QUERY words: the starting query, the transforms, the thread and
   * range, the search (a transform, applied after the others as the Firefox Profiler
   * applies it), then the view. withView false: for lines and the activity graph. */
  function filterArgs() {
    const a = state.info.args.slice();
    for (const t of state.stack) a.push(...t.args);
    if (state.tid !== null) a.push('--tid', String(state.tid));
    if (state.pid !== null) a.push('--only-pid', String(state.pid));
    if (state.range) a.push('--from', state.range[0].toFixed(3), '--to', state.range[1].toFixed(3));
    if (state.search) a.push('-t', 'search:' + state.search);
    return a;
  }

  /* The tree the page asks for leaves out call nodes under 0.01% of the total (with their
   * subtrees): a flame graph could not draw them below 10 000 pixels of width, and a tree of
   * 100 k stacks is then a few thousand nodes, not 150 k, every second. Downloads are whole. */
  const PRUNE = ['--min-percent', '0.01'];

  function queryArgs(whole) {
    const a = filterArgs();
    if (!whole) a.push(...PRUNE);
    if (state.view === 'inverted') a.push('--invert');
    else if (state.view === 'functions') a.push('--functions');
    else if (state.view === 'callers') a.push('--callers', state.viewFunc);
    else if (state.view === 'callees') a.push('--callees', state.viewFunc);
    return a;
  }

  /* The activity graph: the samples the transforms and the search keep, for the thread
   * picked, over the whole profile (the range is drawn on it, not applied). */
  function activityArgs() {
    const a = state.info.args.slice();
    for (const t of state.stack) a.push(...t.args);
    if (state.tid !== null) a.push('--tid', String(state.tid));
    if (state.pid !== null) a.push('--only-pid', String(state.pid));
    if (state.search) a.push('-t', 'search:' + state.search);
    a.push('--format', 'activity');
    return a;
  }

  function apiURL(path, args, extra) {
    const p = new URLSearchParams();
    p.append('token', token);
    for (const [k, v] of extra || []) p.append(k, v);
    for (const a of args || []) p.append('arg', a);
    return path + '?' + p.toString();
  }

  /* parts (optional) gets the request's timings in ms since t0: headers, body, parsed.
   * slot (optional): the last answer of this URL is kept there with its ETag and sent as
   * If-None-Match; a 304 (the same bytes) returns that answer again, with slot.same set. */
  async function fetchJSON(path, args, extra, parts, t0, slot) {
    const url = apiURL(path, args, extra);
    const headers = slot && slot.url === url && slot.etag ? { 'If-None-Match': slot.etag } : {};
    const r = await fetch(url, { cache: 'no-store', headers: headers });
    if (parts) parts.headers = performance.now() - t0;
    if (slot) slot.same = r.status === 304 && slot.url === url;
    if (slot && slot.same) return slot.body;
    if (slot) Object.assign(slot, { url: url, etag: r.ok && r.headers.get('ETag'), body: null });
    const text = await r.text();
    if (parts) parts.body = performance.now() - t0;
    const body = JSON.parse(text);
    if (parts) parts.parsed = performance.now() - t0;
    if (!r.ok) throw new Error(body && body.error ? body.error : 'HTTP ' + r.status);
    if (slot) slot.body = body;
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
      const t0 = performance.now();
      /* The activity graph depends on the transforms, search and thread (not on the range
       * or the view): asked again when they change, or at each refresh of a live source. */
      const actKey = JSON.stringify(activityArgs());
      const reuse = !state.info.live && state.activityKey === actKey;
      const tp = {}, ap = {};
      const ts = state.treeSlot, as = state.actSlot;
      const [data, act] = await Promise.all([
        fetchJSON('/api/tree', args, null, tp, t0, ts),
        state.info.diff ? null : reuse ? state.activity /* kept when a refresh's fails */
          : fetchJSON('/api/tree', activityArgs(), null, ap, t0, as).catch(() => state.activityKey === actKey ? state.activity : null),
      ]);
      state.activityKey = actKey;
      if (current()) {
        if (!state.stickyError) showError('');
        const tSet = performance.now();
        if (ts.same && data === state.data) { /* 304: nothing to parse or lay out again */
          state.unchanged = (state.unchanged || 0) + 1;
          document.body.dataset.unchanged = String(state.unchanged); /* for the tests */
          if (act !== state.activity) {
            state.activity = act;
            renderThreads();
            drawActivity();
          }
        } else {
          state.activity = act;
          setData(data);
        }
        const tDone = performance.now();
        if (state.info.live) await remapHeld(args);
        /* timed to the frame after it, so style, layout and paint count too */
        await new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
        state.lastLoadMs = performance.now() - t0;
        /* where the time went, for bench/web_speed.sh (nothing here reads it) */
        document.body.dataset.loadParts = JSON.stringify({
          tree_headers: tp.headers, tree_body: tp.body, tree_parsed: tp.parsed,
          act_parsed: ap.parsed, set_start: tSet - t0, set_ms: tDone - tSet,
          frame_ms: state.lastLoadMs - (tDone - t0), ...state.renderParts });
        document.body.dataset.loadMs = state.lastLoadMs.toFixed(1);
        if (!document.body.dataset.firstPaintMs) /* since navigation started */
          document.body.dataset.firstPaintMs = performance.now().toFixed(1);
        saveURL();
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

  /* ---- held call node paths across symbolication (docs/calltree.md §4.3) ------------ */

  /* Keys of the nodes a walk along the expanded set reaches (the table's rows). */
  function reachedKeys() {
    const seen = new Set();
    const walk = (nodes) => {
      for (const n of nodes) {
        const k = keyOf(n);
        seen.add(k);
        if (state.expanded.has(k)) walk(n.children);
      }
    };
    walk(state.roots);
    return seen;
  }

  const REMAP_AGAIN = 5; /* refreshes before a held path that is still missing is asked again */

  /* A live tree changes shape as symbols arrive: `LIB+0xOFFSET` frames become functions,
   * and the expanded set and the selection hold paths that no longer exist. The engine's
   * rename map says where they went (cn_agg_remap_transform), and the renderer remaps the
   * transforms of every query with it and echoes them: so each missing path is sent as a
   * `focus:PATH` transform of a tiny query, and its echo is the path's new name. A path
   * still missing (a node that is gone, or whose symbols have not arrived) is asked about
   * again after REMAP_AGAIN refreshes. */
  async function remapHeld(args) {
    const seen = reachedKeys();
    const asked = state.remapAsked || (state.remapAsked = new Map());
    const held = [...state.expanded];
    if (state.selected) held.push(state.selected);
    const gone = held.filter((k) => !seen.has(k) && !(asked.get(k) > state.refreshes - REMAP_AGAIN));
    const names = new Map();
    for (const k of new Set(gone)) {
      const v = keyNames(k);
      if (v && v.length && v.every((x) => !x.includes(';')) && v.join(';').length < 4000)
        names.set(k, v);
    }
    if (!names.size) return;
    const map = new Map();
    const keys = [...names.keys()];
    for (let i = 0; i < keys.length; i += 30) { /* a query holds at most 64 words */
      const chunk = keys.slice(i, i + 30);
      const q = [];
      for (const k of chunk) q.push('-t', 'focus:' + names.get(k).join(';'));
      q.push('--min-percent', '100');
      let d;
      try {
        d = await fetchJSON('/api/tree', q);
      } catch (e) {
        return; /* asked again at the next refresh */
      }
      chunk.forEach((k, j) => {
        asked.set(k, state.refreshes);
        const t = d.transforms && d.transforms[j];
        if (typeof t !== 'string' || !t.startsWith('focus:')) return;
        const v = t.slice(6).split(';');
        const nk = v.map((x) => x.length + ':' + x).join('/');
        if (nk !== k) map.set(k, v);
      });
    }
    if (!map.size || JSON.stringify(args) !== JSON.stringify(queryArgs())) return;
    for (const [k, v] of map) {
      if (state.expanded.delete(k)) /* the new chain is open down to its last function */
        for (let i = 1; i <= v.length; i++)
          state.expanded.add(v.slice(0, i).map((x) => x.length + ':' + x).join('/'));
      if (state.selected === k) state.selected = v.map((x) => x.length + ':' + x).join('/');
    }
    render();
  }

  function showError(msg) {
    const e = $('error');
    e.textContent = msg;
    e.hidden = !msg;
  }

  /* ---- the tree ------------------------------------------------------------------- */

  /* A node's key: its call node path, each name length-prefixed (so no name can fake a
   * separator). Built from the parent's: no per-node array (trees have 100 k+ nodes). */
  function childKey(parent, name) {
    return (parent ? keyOf(parent) + '/' : '') + name.length + ':' + name;
  }

  /* A node's key, computed when first asked for (the table's rows, the selection). */
  function keyOf(n) {
    if (n._key === undefined) n._key = childKey(n.parent, n.name);
    return n._key;
  }

  /* The names of a key (childKey's inverse), or null if it is malformed. */
  function keyNames(key) {
    const names = [];
    let i = 0;
    while (i < key.length) {
      const c = key.indexOf(':', i);
      const len = c > i ? Number(key.slice(i, c)) : NaN;
      if (!Number.isInteger(len) || c + 1 + len > key.length) return null;
      names.push(key.slice(c + 1, c + 1 + len));
      i = c + 1 + len;
      if (i < key.length && key[i++] !== '/') return null;
    }
    return names;
  }

  /* The node with that key in the current tree, or null: a walk from the roots. */
  function findNode(key) {
    const names = key ? keyNames(key) : null;
    if (!names || !names.length) return null;
    let list = state.roots, n = null;
    for (const name of names) {
      n = list.find((c) => c.name === name);
      if (!n) return null;
      list = n.children;
    }
    return n;
  }

  function pathOf(n) {
    const p = [];
    for (let x = n; x; x = x.parent) p.push(x.name);
    return p.reverse();
  }

  /* The JSON's nodes become the page's, in place (a copy of a 100 k-node tree doubled
   * the garbage of every refresh): each gets its parent, depth and colour. */
  function build(list, parent) {
    const nodes = list || [];
    const depth = parent ? parent.depth + 1 : 0;
    for (const n of nodes) {
      n.parent = parent;
      n.depth = depth;
      n.pal = -1;
      if (n.lib === undefined) n.lib = '';
      n.children = build(n.children, n);
    }
    return nodes;
  }

  function setData(data) {
    state.data = data;
    /* --functions (as a starting query) has rows instead of roots: a flat list. */
    state.roots = build(data.roots || data.functions || [], null);
    if (state.autoExpand) {
      autoExpand(state.roots);
      state.autoExpand = false;
    }
    if (state.zoom && !findNode(state.zoom)) state.zoom = null;
    if (state.revealSelected && findNode(state.selected)) { /* restored from the URL */
      reveal(findNode(state.selected));
      state.revealSelected = false;
    }
    render();
  }

  /* A box's width: the running weight, or in a differential tree NEW's (the tree's total
   * is a difference, often near 0), as flamegraph's difffolded draws it. */
  function weight(n) {
    return state.data && state.data.diff ? Math.abs(n.new || 0) : Math.abs(n.total);
  }

  /* Opens the nodes that hold at least 10% of the total, so the hot paths show. */
  function autoExpand(nodes) {
    const total = (state.data.diff ? Math.abs(state.data.new_total) : Math.abs(state.data.total)) || 1;
    for (const n of nodes) {
      if (weight(n) / total >= 0.1 && n.children.length) {
        state.expanded.add(keyOf(n));
        autoExpand(n.children);
      }
    }
  }

  function fmt(v) {
    const unit = state.data ? state.data.unit : 'samples';
    if (v === 0) return '0';
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

  /* A share of the total; in a differential tree of NEW's total, as canopy diff shows it. */
  function pct(v) {
    const d = state.data;
    const t = d ? Math.abs(d.diff ? d.new_total : d.total) : 0;
    return t ? (100 * v / t).toFixed(1) + '%' : '';
  }

  /* ---- rendering: header, crumbs ---------------------------------------------------- */

  function render() {
    const t = [performance.now()];
    renderStatus();
    renderCrumbs();
    t.push(performance.now());
    drawFlame();
    t.push(performance.now());
    renderThreads();
    drawActivity();
    renderLinks();
    t.push(performance.now());
    renderTable(); /* last: its window depends on where the rest left it */
    t.push(performance.now());
    state.renderParts = { flame_ms: t[2] - t[1], other_ms: t[1] - t[0] + t[3] - t[2], table_ms: t[4] - t[3] };
  }

  function renderStatus() {
    const d = state.data;
    const time = d.unit === 'ns' || d.unit === 'us' || d.unit === 'ms';
    let s = 'total ' + fmt(d.total) + (time ? '' : ' ' + (d.unit || ''));
    if (d.diff) s = 'diff: base ' + fmt(d.base_total) + ' → new ' + fmt(d.new_total) +
      (d.normalized ? ' (base scaled ×' + Number(d.factor).toFixed(3) + ')' : '') + ' · red grew, blue shrank';
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
    if (state.view === 'callers' || state.view === 'callees') {
      const v = document.createElement('span');
      v.className = 'viewcrumb';
      v.textContent = (state.view === 'callers' ? 'callers of ' : 'callees of ') + state.viewFunc;
      nav.append(v);
    }
  }

  /* ---- downloads, the Firefox Profiler link, the URL ----------------------------------- */

  const FORMATS = ['json', 'text', 'folded', 'pprof', 'speedscope', 'chrome-trace', 'svg', 'firefox', 'otlp', 'canopy'];

  function exportURL(format) {
    return apiURL('/api/export', queryArgs(true), [['format', format]]);
  }

  function renderLinks() {
    const box = $('downloads');
    box.replaceChildren();
    /* a differential profile has only these (canopy diff's formats) */
    const formats = state.info.diff ? ['json', 'text', 'folded', 'svg', 'canopy'] : FORMATS;
    for (const f of formats) {
      const a = document.createElement('a');
      a.href = exportURL(f);
      a.download = '';
      a.textContent = f;
      a.className = 'dl';
      a.dataset.format = f;
      box.append(a, ' ');
    }
    const ffp = $('ffp');
    ffp.hidden = !!state.info.diff;
    /* The profiler fetches the export itself: this works only where the browser can reach
     * this server (the same machine, or an SSH tunnel to it). */
    ffp.href = 'https://profiler.firefox.com/from-url/' +
      encodeURIComponent(new URL(exportURL('firefox'), location.href).href);
  }

  /* The view in the URL's fragment (the token stays in the query): reload and bookmarks
   * restore it. */
  function saveURL() {
    const v = { s: state.stack, v: state.view, f: state.viewFunc, q: state.search,
                t: state.tid, p: state.pid, r: state.range, sel: state.selected };
    const h = '#' + encodeURIComponent(JSON.stringify(v));
    if (location.hash !== h) history.replaceState(null, '', location.pathname + location.search + h);
  }

  function restoreURL() {
    if (location.hash.length < 2) return;
    let v;
    try {
      v = JSON.parse(decodeURIComponent(location.hash.slice(1)));
    } catch (e) {
      return;
    }
    const str = (x) => typeof x === 'string' ? x : '';
    const num = (x) => Number.isInteger(x) && x >= 0 ? x : null;
    if (Array.isArray(v.s))
      state.stack = v.s.filter((t) => t && typeof t.label === 'string' && Array.isArray(t.args) &&
                                      t.args.every((a) => typeof a === 'string'))
                       .map((t) => ({ label: t.label, args: t.args }));
    if (['tree', 'inverted', 'functions', 'callers', 'callees'].includes(v.v)) state.view = v.v;
    state.viewFunc = str(v.f);
    state.search = str(v.q);
    state.tid = num(v.t);
    state.pid = num(v.p);
    if (Array.isArray(v.r) && v.r.length === 2 && v.r.every((x) => typeof x === 'number' && x >= 0) && v.r[1] > v.r[0])
      state.range = v.r;
    if (typeof v.sel === 'string') { state.selected = v.sel; state.revealSelected = true; }
    $('search').value = state.search;
    syncViewControls();
  }

  /* ---- the thread picker ----------------------------------------------------------------- */

  function renderThreads() {
    const sel = $('thread');
    const a = state.activity;
    const threads = a && a.threads ? a.threads : [];
    const want = state.tid !== null ? 't' + state.tid : state.pid !== null ? 'p' + state.pid : '';
    const sig = JSON.stringify(threads.map((t) => [t.pid, t.tid, t.name])) + want;
    if (sel.dataset.sig === sig) return;
    sel.dataset.sig = sig;
    const opts = [new Option('all', '')];
    const pids = [...new Set(threads.map((t) => t.pid))];
    for (const pid of pids) {
      const main = threads.find((t) => t.pid === pid && t.tid === pid) || threads.find((t) => t.pid === pid);
      opts.push(new Option('process ' + pid + (main.name ? ' ' + main.name : ''), 'p' + pid));
      for (const t of threads.filter((x) => x.pid === pid))
        opts.push(new Option('  thread ' + t.tid + (t.name ? ' ' + t.name : ''), 't' + t.tid));
    }
    if (want && !opts.some((o) => o.value === want)) opts.push(new Option(want, want));
    sel.replaceChildren(...opts);
    sel.value = want;
    sel.parentElement.hidden = threads.length === 0 && !want; /* no threads known (folded, diff) */
  }

  function setThread(value) {
    const old = [state.tid, state.pid];
    state.tid = value[0] === 't' ? Number(value.slice(1)) : null;
    state.pid = value[0] === 'p' ? Number(value.slice(1)) : null;
    resetView();
    load(() => { [state.tid, state.pid] = old; $('thread').dataset.sig = ''; });
  }

  /* ---- the activity graph and the range --------------------------------------------------- */

  function drawActivity() {
    const a = state.activity;
    const box = $('activity-box');
    box.hidden = !a || !a.buckets || !a.buckets.length;
    if (box.hidden) return;
    const canvas = $('activity');
    const dpr = window.devicePixelRatio || 1;
    const width = canvas.clientWidth || 800, height = 48;
    sizeCanvas(canvas, width, height, dpr);
    const g = canvas.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, width, height);
    const max = Math.max(...a.buckets.map(Math.abs)) || 1;
    const bw = width / a.buckets.length;
    g.fillStyle = '#5a8f3c';
    a.buckets.forEach((w, i) => {
      const h = (height - 2) * Math.abs(w) / max;
      g.fillRect(i * bw, height - h, Math.max(bw - 0.5, 0.5), h);
    });
    const r = state.drag || state.range;
    if (r) {
      const x0 = width * r[0] / a.end, x1 = width * r[1] / a.end;
      g.fillStyle = 'rgba(0,0,0,0.35)';
      g.fillRect(0, 0, x0, height);
      g.fillRect(x1, 0, width - x1, height);
      g.strokeStyle = '#1a5';
      g.strokeRect(x0 + 0.5, 0.5, Math.max(x1 - x0 - 1, 1), height - 1);
    }
    canvas.dataset.end = String(a.end);
    canvas.dataset.sum = String(a.buckets.reduce((s, w) => s + w, 0));
    $('range').hidden = !state.range;
    if (state.range)
      $('range-text').textContent = 'range ' + state.range[0].toFixed(3) + ' – ' + state.range[1].toFixed(3) + ' s';
  }

  function activityTime(ev) {
    const r = $('activity').getBoundingClientRect();
    const x = Math.min(Math.max(ev.clientX - r.left, 0), r.width);
    return state.activity.end * x / r.width;
  }

  function setRange(range) {
    const old = state.range;
    state.range = range;
    resetView();
    load(() => { state.range = old; });
  }

  function wireActivity() {
    const c = $('activity');
    c.addEventListener('mousedown', (ev) => {
      if (!state.activity) return;
      const t = activityTime(ev);
      state.drag = [t, t];
      state.dragStart = t;
      ev.preventDefault();
    });
    window.addEventListener('mousemove', (ev) => {
      if (!state.drag) return;
      const t = activityTime(ev);
      state.drag = [Math.min(t, state.dragStart), Math.max(t, state.dragStart)];
      drawActivity();
    });
    window.addEventListener('mouseup', () => {
      if (!state.drag) return;
      const r = state.drag;
      state.drag = null;
      /* a click without a drag (under 0.5% of the width) clears the range */
      if (r[1] - r[0] < state.activity.end / 200) setRange(null);
      else setRange([Math.floor(r[0] * 1000) / 1000, Math.ceil(r[1] * 1000) / 1000]);
    });
    $('range-clear').addEventListener('click', () => setRange(null));
  }

  /* ---- per-line costs ------------------------------------------------------------------ */

  async function showLines(func) {
    state.lines = func;
    const box = $('lines-box');
    box.hidden = false;
    $('lines-title').textContent = 'per-line costs of ' + func;
    $('lines-note').textContent = 'loading…';
    $('lines-rows').replaceChildren();
    $('addrs-rows').replaceChildren();
    let d;
    try {
      d = await fetchJSON('/api/lines', filterArgs(), [['func', func]]);
    } catch (e) {
      $('lines-note').textContent = e.message;
      return;
    }
    if (state.lines !== func) return;
    const total = d.addresses.reduce((s, x) => s + x.self, 0) || d.lines.reduce((s, x) => s + x.self, 0);
    const fill = (tbody, list, key, show) => {
      for (const x of list) {
        const tr = document.createElement('tr');
        cell(tr, show(x[key]), 'key');
        cell(tr, fmt(x.self), 'self');
        cell(tr, total ? (100 * x.self / total).toFixed(1) + '%' : '', 'pct');
        tbody.append(tr);
      }
    };
    fill($('lines-rows'), d.lines, 'line', (v) => String(v));
    fill($('addrs-rows'), d.addresses, 'offset', (v) => '0x' + v.toString(16));
    $('lines').hidden = !d.lines.length;
    $('addrs').hidden = !d.addresses.length;
    $('lines-note').textContent = (d.file ? d.file + ' · ' : '') + (d.lib ? d.lib + ' · ' : '') +
      (d.lines.length ? '' : d.addresses.length ? 'no line info (no debug info for its library, or a format without lines): per-address costs only'
                                                : 'no line or address info: no sample has it innermost at a known address');
  }

  /* ---- the call tree table ---------------------------------------------------------- */

  function visibleRows() {
    const out = [];
    const walk = (nodes) => {
      for (const n of nodes) {
        out.push(n);
        if (state.expanded.has(keyOf(n))) walk(n.children);
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

  /* Long tables are windowed: only the rows near the window's view are in the document
   * (a 2000-row table cost more to lay out than everything else of a refresh); two empty
   * bodies around #rows hold the place of the others. Rows are ROW_PX high. */
  const ROW_PX = 20, WINDOWED = 300, OVERSCAN = 800;

  function pad(body, px) {
    if (!px) return body.replaceChildren();
    const tr = document.createElement('tr');
    const td = document.createElement('td');
    td.colSpan = 5;
    tr.style.height = px + 'px';
    tr.append(td);
    body.replaceChildren(tr);
  }

  function tableWindow(n) {
    if (n <= WINDOWED) return [0, n];
    const top = $('pad-top').getBoundingClientRect().top + window.scrollY;
    const first = Math.floor((window.scrollY - top - OVERSCAN) / ROW_PX);
    const last = Math.ceil((window.scrollY + window.innerHeight - top + OVERSCAN) / ROW_PX);
    return [Math.max(0, Math.min(first, n)), Math.max(0, Math.min(last, n))];
  }

  function renderTable() {
    const body = $('rows');
    const all = visibleRows();
    const [first, last] = tableWindow(all.length);
    const rows = all.slice(first, last);
    state.tableRows = all.length;
    state.tableWin = [first, last];
    pad($('pad-top'), first * ROW_PX);
    pad($('pad-bottom'), (all.length - last) * ROW_PX);
    const frag = document.createDocumentFragment();
    state.rowNodes = new Map();
    for (const n of rows) {
      state.rowNodes.set(keyOf(n), n);
      const tr = document.createElement('tr');
      tr.dataset.key = keyOf(n);
      tr.dataset.depth = String(n.depth);
      if (keyOf(n) === state.selected) tr.className = 'sel';
      cell(tr, fmt(n.total), 'total');
      cell(tr, pct(n.total), 'total-pct');
      cell(tr, fmt(n.self), 'self');
      cell(tr, pct(n.self), 'self-pct');
      const name = cell(tr, '', 'name');
      name.style.paddingLeft = (6 + 14 * Math.min(n.depth, 60)) + 'px';
      const tw = document.createElement('span');
      tw.className = 'twisty';
      tw.textContent = n.children.length ? (state.expanded.has(keyOf(n)) ? '▾' : '▸') : '';
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
    if (scroll && !state.rowNodes.has(key)) { /* outside the window: move it there */
      const i = visibleRows().findIndex((n) => keyOf(n) === key);
      if (i >= 0) {
        const top = $('pad-top').getBoundingClientRect().top + window.scrollY;
        window.scrollTo(0, top + i * ROW_PX - window.innerHeight / 2);
        renderTable();
      }
    }
    for (const tr of $('rows').children)
      tr.classList.toggle('sel', tr.dataset.key === key);
    if (scroll) {
      const tr = [...$('rows').children].find((r) => r.dataset.key === key);
      if (tr) tr.scrollIntoView({ block: 'nearest' });
    }
  }

  /* A windowed table follows the scrolling (at most once a frame). */
  function onScroll() {
    if (state.scrollQueued || !state.tableRows || state.tableRows <= WINDOWED) return;
    state.scrollQueued = true;
    requestAnimationFrame(() => {
      state.scrollQueued = false;
      const [a, b] = tableWindow(state.tableRows);
      const [x, y] = state.tableWin;
      if (a < x || b > y) renderTable();
    });
  }

  function toggle(n) {
    if (!n || !n.children.length) return;
    if (state.expanded.has(keyOf(n))) state.expanded.delete(keyOf(n));
    else state.expanded.add(keyOf(n));
    renderTable();
  }

  function expandAll(nodes) {
    for (const n of nodes) {
      if (n.children.length) state.expanded.add(keyOf(n));
      expandAll(n.children);
    }
  }

  /* Opens the ancestors of n so its row shows. */
  function reveal(n) {
    for (let p = n.parent; p; p = p.parent) state.expanded.add(keyOf(p));
  }

  function onKey(ev) {
    const rows = visibleRows();
    if (!rows.length) return;
    let i = rows.findIndex((n) => keyOf(n) === state.selected);
    const cur = i >= 0 ? rows[i] : null;
    switch (ev.key) {
      case 'ArrowDown': i = Math.min(rows.length - 1, i + 1); break;
      case 'ArrowUp': i = Math.max(0, i - 1); break;
      case 'ArrowRight':
        if (cur && cur.children.length && !state.expanded.has(keyOf(cur))) { toggle(cur); ev.preventDefault(); return; }
        if (cur && cur.children.length) i = rows.indexOf(cur.children[0]);
        break;
      case 'ArrowLeft':
        if (cur && state.expanded.has(keyOf(cur))) { toggle(cur); ev.preventDefault(); return; }
        if (cur && cur.parent) i = rows.indexOf(cur.parent);
        break;
      case 'Enter': toggle(cur); ev.preventDefault(); return;
      case '*':
        expandAll(cur ? [cur] : state.roots);
        renderTable();
        ev.preventDefault();
        return;
      default:
        if (cur && KEY_OPS[ev.key] && !ev.ctrlKey && !ev.metaKey && !ev.altKey &&
            opAllowed(KEY_OPS[ev.key], cur)) {
          ev.preventDefault();
          push(KEY_OPS[ev.key], cur);
        }
        return;
    }
    ev.preventDefault();
    if (i < 0) i = 0;
    select(keyOf(rows[i]), true);
  }

  function rowNode(ev) {
    const tr = ev.target.closest('tr');
    return tr ? state.rowNodes.get(tr.dataset.key) || null : null;
  }

  /* ---- the flame graph ---------------------------------------------------------------- */

  function hue(name) {
    let h = 0;
    for (let i = 0; i < name.length; i++) h = (h * 31 + name.charCodeAt(i)) >>> 0;
    return h;
  }

  /* The flame graph's colours: 48 warm ones picked by a hash of the name; for a
   * differential tree canopy diff's, red where NEW grew, blue where it shrank, 16 shades
   * each by the change's size, grey for no change. */
  const WARM = [], DIFF = [];
  for (let i = 0; i < 48; i++)
    WARM.push('hsl(' + (10 + (i * 7) % 45) + ',' + (70 + (i * 3) % 20) + '%,' + (55 + (i * 5) % 15) + '%)');
  for (let i = 0; i < 16; i++) DIFF.push('hsl(0,75%,' + (92 - 42 * (i + 1) / 16) + '%)');
  for (let i = 0; i < 16; i++) DIFF.push('hsl(220,75%,' + (92 - 42 * (i + 1) / 16) + '%)');
  DIFF.push('hsl(0,0%,88%)');

  function palette() { return state.data && state.data.diff ? DIFF : WARM; }

  function colorIndex(n) {
    if (state.data && state.data.diff) {
      if (!n.total) return 32;
      const t = Math.min(15, Math.floor(16 * Math.abs(n.total) / (state.diffMax || 1)));
      return (n.total > 0 ? 0 : 16) + t;
    }
    return hue(n.name) % WARM.length;
  }

  /* Boxes in [0,1]: the zoomed node's ancestors full width, then its subtree (or every
   * root) in proportion to running weight. Columns, not an object per box (50 k objects a
   * draw were most of its garbage): box i is node n[i] from x0[i] to x1[i] at depth d[i]. */
  function layout(width) {
    const F = { n: [], x0: [], x1: [], d: [] };
    const add = (n, x0, x1, d) => { F.n.push(n); F.x0.push(x0); F.x1.push(x1); F.d.push(d); };
    const z = state.zoom ? findNode(state.zoom) : null;
    const min = 0.5 / width; /* narrower boxes are not drawn, nor are their children */
    let depth = 0;
    const lay = (nodes, x0, scale, d) => {
      let x = x0;
      for (const n of nodes) {
        const w = weight(n) * scale;
        if (w >= min) {
          add(n, x, x + w, d);
          lay(n.children, x, scale, d + 1);
        }
        x += w;
      }
    };
    if (z) {
      const chain = [];
      for (let p = z; p; p = p.parent) chain.unshift(p);
      for (const p of chain.slice(0, -1)) add(p, 0, 1, depth++);
      lay([z], 0, 1 / (weight(z) || 1), depth);
    } else {
      const sum = state.roots.reduce((s, n) => s + weight(n), 0) || 1;
      lay(state.roots, 0, 1 / sum, 0);
    }
    return F;
  }

  /* Sizes a canvas's backing store only when it changes: setting width or height, even to
   * the same value, allocates a new one (and the caller clears it anyway). */
  function sizeCanvas(canvas, width, height, dpr) {
    const w = Math.round(width * dpr), h = Math.round(height * dpr);
    if (canvas.style.height !== height + 'px') canvas.style.height = height + 'px';
    if (canvas.width !== w) canvas.width = w;
    if (canvas.height !== h) canvas.height = h;
  }

  function drawFlame() {
    const t0 = performance.now();
    const canvas = $('flame');
    const dpr = window.devicePixelRatio || 1;
    const width = canvas.clientWidth || 800;
    const F = layout(width);
    const count = F.n.length;
    let maxDepth = 0, diffMax = 0;
    for (let i = 0; i < count; i++) {
      if (F.d[i] > maxDepth) maxDepth = F.d[i];
      if (Math.abs(F.n[i].total) > diffMax) diffMax = Math.abs(F.n[i].total);
    }
    state.diffMax = diffMax;
    const height = Math.max(ROW_H, (maxDepth + 1) * ROW_H);
    sizeCanvas(canvas, width, height, dpr);
    const g = canvas.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, width, height);
    g.font = '11px system-ui, sans-serif';
    g.textBaseline = 'middle';
    /* One path per colour: tens of thousands of boxes cost one fill per palette entry
     * instead of a fillStyle change per box. */
    const pal = palette();
    const paths = pal.map(() => new Path2D());
    const sel = new Path2D();
    const labels = [];
    const selNode = state.selected ? findNode(state.selected) : null; /* no key per box */
    /* Boxes under a pixel wide that touch at one depth are painted as one rect of up to
     * RUN_PX, in the first one's colour: they stay in frames (hover, click), but the
     * canvas rasterizes a few thousand rects instead of 50 k slivers (most of a refresh's
     * paint in bench/web_speed.sh). runs[d] = [x0, x1, colour] of the open run. */
    const RUN_PX = 2;
    const runs = [];
    const flush = (d) => {
      const r = runs[d];
      if (r) paths[r[2]].rect(r[0], d * ROW_H, Math.max(r[1] - r[0] - 0.5, 0.5), ROW_H - 1);
      runs[d] = null;
    };
    for (let i = 0; i < count; i++) {
      const x = F.x0[i] * width, w = (F.x1[i] - F.x0[i]) * width, d = F.d[i];
      const n = F.n[i];
      const pi = n === selNode ? -1 : n.pal >= 0 && !state.data.diff ? n.pal : (n.pal = colorIndex(n));
      if (w < 1 && pi >= 0) {
        const r = runs[d];
        if (r && x - r[1] < 0.01 && x + w - r[0] <= RUN_PX) { r[1] = x + w; continue; }
        flush(d);
        runs[d] = [x, x + w, pi];
        continue;
      }
      (pi < 0 ? sel : paths[pi]).rect(x, d * ROW_H, Math.max(w - 0.5, 0.5), ROW_H - 1);
      if (w > 20) labels.push(i);
    }
    for (let d = 0; d < runs.length; d++) flush(d);
    pal.forEach((c, i) => { g.fillStyle = c; g.fill(paths[i]); });
    g.fillStyle = '#6aa9ff';
    g.fill(sel);
    g.fillStyle = '#000';
    for (const i of labels) {
      const x = F.x0[i] * width, w = (F.x1[i] - F.x0[i]) * width, y = F.d[i] * ROW_H;
      g.fillText(fit(g, F.n[i].name, w - 6), x + 3, y + ROW_H / 2);
    }
    state.frames = F;
    state.flameWidth = width;
    /* timings for bench/web_speed.sh, as data attributes (nothing reads them here) */
    document.body.dataset.drawMs = (performance.now() - t0).toFixed(1);
    document.body.dataset.drawn = String(count);
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
    const F = state.frames;
    if (!F) return null;
    for (let i = 0; i < F.n.length; i++)
      if (F.d[i] === d && x >= F.x0[i] && x < F.x1[i]) return { n: F.n[i] };
    return null;
  }

  function showTooltip(ev) {
    const f = frameAt(ev);
    const tip = $('tooltip');
    if (!f) { tip.hidden = true; return; }
    const n = f.n;
    tip.textContent = n.name + (n.lib ? '  (' + n.lib + ')' : '') +
      '\nrunning: ' + fmt(n.total) + ' (' + pct(n.total) + ')' +
      '\nself: ' + fmt(n.self) + ' (' + pct(n.self) + ')' +
      (n.base !== undefined ? '\nbase ' + fmt(n.base) + ' → new ' + fmt(n.new) : '');
    const box = $('flame-box').getBoundingClientRect();
    tip.style.left = Math.min(ev.clientX - box.left + 12, box.width - 200) + 'px';
    tip.style.top = (ev.clientY - box.top + 14) + 'px';
    tip.hidden = false;
  }

  function onFlameClick(ev) {
    const f = frameAt(ev);
    if (!f) return;
    /* A click zooms to the box; on the zoomed box itself, one level out. */
    if (keyOf(f.n) === state.zoom) state.zoom = f.n.parent ? keyOf(f.n.parent) : null;
    else state.zoom = keyOf(f.n);
    reveal(f.n);
    state.selected = keyOf(f.n);
    renderTable();
    select(keyOf(f.n), true);
    drawFlame();
  }

  /* ---- transforms ------------------------------------------------------------------- */

  /* The transform of a menu entry, as the SPEC `canopy tree -t` takes (docs/cli.md). */
  function transformFor(op, n) {
    const path = pathOf(n).join(';');
    switch (op) {
      case 'focus':
        return state.view === 'inverted' ? { label: 'focus ↑ ' + path, spec: 'focus-inverted:' + path }
                                         : { label: 'focus ' + path, spec: 'focus:' + path };
      case 'focus-func': return { label: 'focus on ' + n.name, spec: 'focus-func:' + n.name };
      case 'focus-lib': return { label: 'focus on library ' + n.lib, spec: 'focus-lib:' + n.lib };
      case 'merge': return { label: 'merge ' + n.name, spec: 'merge:' + n.name };
      case 'merge-node': return { label: 'merge node ' + path, spec: 'merge-node:' + path };
      case 'collapse': return { label: 'collapse ' + n.name, spec: 'collapse:' + n.name };
      case 'collapse-rec': return { label: 'collapse recursion ' + n.name, spec: 'collapse-rec:' + n.name };
      case 'collapse-direct-rec':
        return { label: 'collapse direct recursion ' + n.name, spec: 'collapse-direct-rec:' + n.name };
      case 'collapse-lib': return { label: 'collapse library ' + n.lib, spec: 'collapse-lib:' + n.lib };
      case 'drop': return { label: 'drop ' + n.name, spec: 'drop:' + n.name };
    }
    return null;
  }

  /* The transforms' keys in the call tree, the Firefox Profiler's (also in the menu). */
  const KEY_OPS = { f: 'focus', F: 'focus-func', L: 'focus-lib', m: 'merge', M: 'merge-node',
                    c: 'collapse', r: 'collapse-rec', R: 'collapse-direct-rec', C: 'collapse-lib',
                    d: 'drop' };

  /* Whether a menu entry applies to node n in the current view. */
  function opAllowed(op, n) {
    const tree = state.view === 'tree' || state.view === 'inverted';
    if (op === 'merge-node') return state.view === 'tree';
    if (op === 'focus') return tree;
    if (op === 'focus-lib' || op === 'collapse-lib') return !!n.lib;
    if (op === 'lines') return !!state.info.lines;
    return true;
  }

  function menuOp(op, n) {
    if (op === 'callers' || op === 'callees') return setView(op, n.name);
    if (op === 'lines') return showLines(n.name);
    push(op, n);
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

  function syncViewControls() {
    $('invert').setAttribute('aria-pressed', String(state.view === 'inverted'));
    $('view').value = state.view;
  }

  /* Switches the view; callers and callees need a function (the selected node's). */
  function setView(view, func) {
    if ((view === 'callers' || view === 'callees') && !func) {
      const n = state.selected && findNode(state.selected);
      if (!n) {
        showError('select a function first (callers and callees are of the selected function)');
        syncViewControls();
        return;
      }
      func = n.name;
    }
    const old = [state.view, state.viewFunc];
    state.view = view;
    state.viewFunc = func || '';
    syncViewControls();
    resetView();
    load(() => {
      [state.view, state.viewFunc] = old;
      syncViewControls();
    });
  }

  function setSearch(text) {
    if (text === state.search) return;
    state.search = text;
    resetView();
    load();
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
    for (const li of m.querySelectorAll('li[data-op]')) li.hidden = !opAllowed(li.dataset.op, n);
    m.hidden = false;
    /* kept inside the window: a menu opened near the bottom would be cut off */
    const r = m.getBoundingClientRect();
    m.style.left = Math.max(0, Math.min(ev.clientX, window.innerWidth - r.width - 2)) + 'px';
    m.style.top = Math.max(0, Math.min(ev.clientY, window.innerHeight - r.height - 2)) + 'px';
  }

  /* ---- wiring ------------------------------------------------------------------------- */

  function wire() {
    const rows = $('rows');
    rows.addEventListener('click', (ev) => {
      const n = rowNode(ev);
      if (!n) return;
      if (ev.target.classList.contains('twisty')) toggle(n);
      select(keyOf(n), false);
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
      if (li && li.dataset.op && state.menuNode) menuOp(li.dataset.op, state.menuNode);
    });
    document.addEventListener('click', (ev) => {
      if (!$('menu').contains(ev.target)) $('menu').hidden = true;
    });
    document.addEventListener('keydown', (ev) => { if (ev.key === 'Escape') $('menu').hidden = true; });
    $('invert').addEventListener('click', () => setView(state.view === 'inverted' ? 'tree' : 'inverted'));
    $('view').addEventListener('change', () => setView($('view').value));
    let searchTimer = null;
    $('search').addEventListener('input', () => {
      clearTimeout(searchTimer);
      searchTimer = setTimeout(() => setSearch($('search').value), 250);
    });
    $('thread').addEventListener('change', () => setThread($('thread').value));
    $('lines-close').addEventListener('click', () => { state.lines = null; $('lines-box').hidden = true; });
    wireActivity();
    $('pause').addEventListener('click', () => {
      state.paused = !state.paused;
      $('pause').setAttribute('aria-pressed', String(state.paused));
      $('pause').textContent = state.paused ? 'Resume' : 'Pause';
      if (state.data) renderStatus();
    });
    window.addEventListener('resize', () => { if (state.data) drawFlame(); });
    window.addEventListener('scroll', onScroll, { passive: true });
  }

  async function start() {
    wire();
    try {
      const info = await fetchJSON('/api/info');
      state.info = { title: info.title, live: info.live, diff: info.diff, lines: info.lines,
                     args: info.args || [] };
    } catch (e) {
      showError(e.message);
      return;
    }
    $('title').textContent = state.info.title;
    document.title = 'canopy: ' + state.info.title;
    $('pause').hidden = !state.info.live;
    restoreURL();
    await load();
    if (state.info.live)
      setInterval(() => { if (!state.paused) load(); }, 1000);
  }

  start();
})();
