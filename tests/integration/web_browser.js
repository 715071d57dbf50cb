// web_browser.js — drives Debian's headless chromium through the DevTools protocol over
// --remote-debugging-pipe (fd 3 to the browser, fd 4 from it, NUL-separated JSON), so it
// needs no npm package and no network: node and chromium only.
//   node web_browser.js live URL OUTDIR     a live session of wl_shares_fp (test_web.sh)
//   node web_browser.js hostile URL OUTDIR  a file with a hostile function name
//   node web_browser.js refused URL OUTDIR  a file served with --callers: Invert is refused
//   node web_browser.js views URL OUTDIR    a saved session of wl_shares_fp: views, transforms,
//                                           search, thread, range, URL, downloads
//   node web_browser.js units URL OUTDIR    a wall-mode profile: times, not samples
//   node web_browser.js pid URL OUTDIR      canopy web --pid: live, growing, named
//   node web_browser.js wall URL OUTDIR     a real wall session of waits.c (--functions):
//                                           times; prints the cells of its activities
//   node web_browser.js offcpu URL OUTDIR   the same for an off-cpu session (no compute)
//   node web_browser.js diff URL OUTDIR     canopy web BASE NEW: red grew, blue shrank
//   node web_browser.js long URL OUTDIR     a 2001-row table, windowed
//   node web_browser.js symbols URL OUTDIR  a live session whose symbols arrive late
//                                           (test_web_symbols.sh): expanded and selected
//                                           paths survive the renaming
// Prints one "PASS ..." line per step; exits 1 with "FAIL: ..." at the first failure.
// Every step saves OUTDIR/NN-step.png and checks it is not blank.
'use strict';
const { spawn } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');
const zlib = require('zlib');

const [mode, url, outdir] = process.argv.slice(2);
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';

let browser = null; // killed (and its profile removed) however the script ends
process.on('exit', () => browser && browser.close());

function fail(msg) {
  console.log('FAIL: ' + msg);
  process.exit(1);
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---- the protocol -----------------------------------------------------------------------

class Browser {
  constructor() {
    this.profile = fs.mkdtempSync(path.join(os.tmpdir(), 'canopy-chromium-'));
    const profile = this.profile;
    this.proc = spawn(CHROMIUM, [
      '--headless=new', '--no-sandbox', '--disable-gpu', '--no-first-run',
      '--no-default-browser-check', '--disable-extensions', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--remote-debugging-pipe',
      '--user-data-dir=' + profile, '--window-size=1200,900', 'about:blank',
    ], { stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'] });
    this.proc.stderr.on('data', () => {});
    this.out = this.proc.stdio[3];
    this.id = 0;
    this.pending = new Map();
    this.handlers = [];
    let buf = Buffer.alloc(0);
    this.proc.stdio[4].on('data', (chunk) => {
      buf = Buffer.concat([buf, chunk]);
      let z;
      while ((z = buf.indexOf(0)) >= 0) {
        const msg = JSON.parse(buf.subarray(0, z).toString('utf8'));
        buf = buf.subarray(z + 1);
        this.dispatch(msg);
      }
    });
  }

  dispatch(msg) {
    if (msg.id !== undefined && this.pending.has(msg.id)) {
      const { resolve, reject, method } = this.pending.get(msg.id);
      this.pending.delete(msg.id);
      if (msg.error) reject(new Error(method + ': ' + msg.error.message));
      else resolve(msg.result);
      return;
    }
    for (const h of this.handlers) h(msg);
  }

  send(method, params, sessionId) {
    const id = ++this.id;
    const msg = { id, method, params: params || {} };
    if (sessionId) msg.sessionId = sessionId;
    this.out.write(JSON.stringify(msg) + '\0');
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, method });
      setTimeout(() => reject(new Error(method + ': no answer in 20 s')), 20000).unref();
    });
  }

  close() {
    browser = null;
    this.proc.kill('SIGKILL');
    try { // chromium's children may still write for a moment: test_web.sh's TMPDIR goes anyway
      fs.rmSync(this.profile, { recursive: true, force: true, maxRetries: 3 });
    } catch (e) { /* left to the caller's TMPDIR */ }
  }
}

class Page {
  constructor(b, sessionId) {
    this.b = b;
    this.s = sessionId;
    this.dialogs = [];
    this.exceptions = [];
    b.handlers.push((m) => {
      if (m.sessionId !== sessionId) return;
      if (m.method === 'Page.javascriptDialogOpening') {
        this.dialogs.push(m.params.message);
        this.send('Page.handleJavaScriptDialog', { accept: true }).catch(() => {});
      }
      if (m.method === 'Runtime.exceptionThrown')
        this.exceptions.push(m.params.exceptionDetails.text);
    });
  }

  send(method, params) {
    return this.b.send(method, params, this.s);
  }

  async eval(expr) {
    const r = await this.send('Runtime.evaluate', { expression: expr, returnByValue: true, awaitPromise: true });
    if (r.exceptionDetails) throw new Error('eval: ' + JSON.stringify(r.exceptionDetails));
    return r.result.value;
  }

  async waitFor(expr, what, ms) {
    const end = Date.now() + (ms || 10000);
    for (;;) {
      let v = null;
      try {
        v = await this.eval(expr); /* the document may still be loading */
      } catch (e) {
        v = null;
      }
      if (v) return v;
      if (Date.now() > end) fail('timed out waiting for ' + what);
      await sleep(100);
    }
  }

  async mouse(type, x, y, button, clickCount) {
    await this.send('Input.dispatchMouseEvent', { type, x, y, button: button || 'none', clickCount: clickCount || 0 });
  }

  async click(x, y, button) {
    await this.mouse('mouseMoved', x, y);
    await this.mouse('mousePressed', x, y, button || 'left', 1);
    await this.mouse('mouseReleased', x, y, button || 'left', 1);
  }

  async key(key, code) {
    const text = key.length === 1 ? key : undefined;
    await this.send('Input.dispatchKeyEvent', { type: 'keyDown', key, code: code || key, text,
      windowsVirtualKeyCode: { ArrowDown: 40, ArrowUp: 38, ArrowLeft: 37, ArrowRight: 39, Enter: 13 }[key] || 0 });
    await this.send('Input.dispatchKeyEvent', { type: 'keyUp', key, code: code || key });
  }

  // The centre of the first element matching a selector (and text, if given).
  async centre(selector, text) {
    const r = await this.eval(`(() => {
      const els = [...document.querySelectorAll(${JSON.stringify(selector)})];
      const e = els.find((e) => ${JSON.stringify(text)} === null || e.textContent === ${JSON.stringify(text)});
      if (!e) return null;
      e.scrollIntoView({block: 'center'});
      const b = e.getBoundingClientRect();
      return {x: b.left + b.width / 2, y: b.top + b.height / 2};
    })()`);
    if (!r) fail(`no element ${selector} ${text === null ? '' : JSON.stringify(text)}`);
    return r;
  }

  async shot(name) {
    const r = await this.send('Page.captureScreenshot', { format: 'png' });
    const png = Buffer.from(r.data, 'base64');
    const file = path.join(outdir, name + '.png');
    fs.writeFileSync(file, png);
    const colours = countColours(png);
    if (colours < 16) fail(`screenshot ${name}: ${colours} colours, looks blank`);
    return colours;
  }
}

async function openPage(b, target) {
  const { targetInfos } = await b.send('Target.getTargets');
  const t = targetInfos.find((i) => i.type === 'page');
  if (!t) fail('chromium has no page target');
  const { sessionId } = await b.send('Target.attachToTarget', { targetId: t.targetId, flatten: true });
  const p = new Page(b, sessionId);
  await p.send('Page.enable');
  await p.send('Runtime.enable');
  await p.send('Emulation.setDeviceMetricsOverride', { width: 1200, height: 900, deviceScaleFactor: 1, mobile: false });
  await p.send('Page.navigate', { url: target });
  return p;
}

// ---- PNG: distinct colours of an 8-bit RGB(A) non-interlaced image ----------------------

function countColours(png) {
  let off = 8, width = 0, height = 0, type = 0;
  const idat = [];
  while (off < png.length) {
    const len = png.readUInt32BE(off), kind = png.toString('ascii', off + 4, off + 8);
    const data = png.subarray(off + 8, off + 8 + len);
    if (kind === 'IHDR') {
      width = data.readUInt32BE(0); height = data.readUInt32BE(4); type = data[9];
      if (data[8] !== 8 || data[12] !== 0 || (type !== 2 && type !== 6)) fail('unexpected PNG layout');
    } else if (kind === 'IDAT') idat.push(data);
    off += 12 + len;
  }
  const raw = zlib.inflateSync(Buffer.concat(idat));
  const bpp = type === 6 ? 4 : 3, stride = width * bpp;
  const cur = Buffer.alloc(stride), prev = Buffer.alloc(stride);
  const seen = new Set();
  for (let y = 0; y < height; y++) {
    const f = raw[y * (stride + 1)], row = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    for (let i = 0; i < stride; i++) {
      const a = i >= bpp ? cur[i - bpp] : 0, b = prev[i], c = i >= bpp ? prev[i - bpp] : 0;
      let v = row[i];
      if (f === 1) v += a;
      else if (f === 2) v += b;
      else if (f === 3) v += (a + b) >> 1;
      else if (f === 4) {
        const p = a + b - c, pa = Math.abs(p - a), pb = Math.abs(p - b), pc = Math.abs(p - c);
        v += pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
      }
      cur[i] = v & 255;
    }
    for (let x = 0; x < stride; x += bpp) seen.add((cur[x] << 16) | (cur[x + 1] << 8) | cur[x + 2]);
    cur.copy(prev);
  }
  return seen.size;
}

// ---- what the page shows ------------------------------------------------------------------

const rowsExpr = `[...document.querySelectorAll('#rows tr')].map((tr) => ({
  name: tr.querySelector('.fn').textContent, depth: Number(tr.dataset.depth),
  pct: parseFloat(tr.querySelector('.total-pct').textContent), total: parseFloat(tr.querySelector('.total').textContent)}))`;

async function rows(p) {
  return p.eval(rowsExpr);
}

async function refreshes(p) {
  return Number(await p.eval('document.body.dataset.refreshes || 0'));
}

async function waitRefresh(p, what) {
  const n = await refreshes(p);
  await p.waitFor(`Number(document.body.dataset.refreshes || 0) > ${n}`, what);
}

// Right-clicks the row of name, then picks the context menu entry with label.
async function menu(p, name, label) {
  const at = await p.centre('#rows tr .fn', name);
  await p.click(at.x, at.y, 'right');
  await p.waitFor(`!document.getElementById('menu').hidden`, 'the context menu');
  const item = await p.centre('#menu li', label);
  await p.click(item.x, item.y);
}

async function live(p) {
  await p.waitFor(`Number(document.body.dataset.refreshes || 0) >= 1 && document.querySelectorAll('#rows tr').length > 3`, 'the first tree');
  let c = await p.shot('01-loaded');
  const r0 = await rows(p);
  const a = r0.find((r) => r.name === 'work_a');
  if (!a) fail('no work_a row: ' + JSON.stringify(r0.map((r) => r.name)));
  if (Math.abs(a.pct - 50) > 5) fail(`work_a shows ${a.pct}%, expected 50 ± 5`);
  console.log(`PASS work_a ${a.pct}% (${c} colours)`);

  const t0 = Number(await p.eval(`document.getElementById('status').dataset.total`));
  await waitRefresh(p, 'a refresh');
  await waitRefresh(p, 'another refresh');
  const t1 = Number(await p.eval(`document.getElementById('status').dataset.total`));
  if (!(t1 > t0)) fail(`the total did not grow across refreshes: ${t0} -> ${t1}`);
  c = await p.shot('02-refreshed');
  console.log(`PASS total grows ${t0} -> ${t1} (${c} colours)`);
  // The live session's activity graph and thread picker come with the refreshes.
  await p.waitFor(`!document.getElementById('activity-box').hidden && Number(document.getElementById('activity').dataset.end) > 0`, 'the live activity graph');
  const e0 = Number(await p.eval(`document.getElementById('activity').dataset.end`));
  await waitRefresh(p, 'a refresh of the activity graph');
  const e1 = Number(await p.eval(`document.getElementById('activity').dataset.end`));
  const topts = await p.eval(`[...document.getElementById('thread').options].map((o) => o.textContent)`);
  if (!(e1 > e0) || !topts.some((t) => /thread \d+ wl_shares_fp/.test(t))) fail(`live activity: end ${e0} -> ${e1}, threads ${JSON.stringify(topts)}`);
  console.log(`PASS live activity graph (end ${e0.toFixed(2)} -> ${e1.toFixed(2)} s) and thread picker (${topts.length - 1} entries)`);

  // Expanded nodes survive refreshes: open every node under work_b, wait, count again.
  // A node renamed by symbolization between two refreshes (LIB+0xOFFSET, then its name) has
  // a new path, so it would be collapsed again: wait (at most 10 s) until work_b's subtree
  // has no placeholder left.
  const settled = `fetch('/api/tree?token=' + new URLSearchParams(location.search).get('token')).then((r) => r.json()).then((d) => {
    const find = (l) => { for (const n of l || []) { if (n.name === 'work_b') return n; const x = find(n.children); if (x) return x; } return null; };
    const wb = find(d.roots);
    return !!wb && !JSON.stringify(wb).includes('+0x');
  })`;
  for (let i = 0; i < 50 && !(await p.eval(settled)); i++) await sleep(200);
  const wb = await p.centre('#rows tr .fn', 'work_b');
  await p.click(wb.x, wb.y);
  await p.key('*');
  const n1 = (await rows(p)).length;
  await waitRefresh(p, 'a refresh after *');
  await waitRefresh(p, 'a second refresh after *');
  const after = await rows(p);
  if (after.length < n1 || !after.find((r) => r.name === 'work_b_inner')) fail(`expanded nodes lost on refresh: ${n1} -> ${after.length}`);
  const sel = await p.eval(`document.querySelector('#rows tr.sel .fn')?.textContent`);
  if (sel !== 'work_b') fail(`the selection did not survive the refresh: ${sel}`);
  console.log(`PASS * expands (${n1} rows), kept with the selection across refreshes`);

  // Keyboard: Enter collapses work_b, Enter opens it again, ArrowDown moves to its child.
  await p.key('Enter');
  const collapsed = (await rows(p)).length;
  if (collapsed >= n1) fail(`Enter did not collapse work_b (${n1} -> ${collapsed})`);
  await p.key('Enter');
  await p.key('ArrowDown');
  const sel2 = await p.eval(`document.querySelector('#rows tr.sel .fn')?.textContent`);
  if (sel2 !== 'work_b_inner') fail(`ArrowDown selected ${sel2}, expected work_b_inner`);
  console.log('PASS keyboard: Enter collapses and expands, ArrowDown moves');

  // Flame graph: hover shows a tooltip; a click on a box zooms (its row is selected).
  // (The keys above may have scrolled the table's selected row, and the flame graph away.)
  const box = await p.eval(`(() => { window.scrollTo(0, 0); const b = document.getElementById('flame').getBoundingClientRect(); return {x: b.left, y: b.top, w: b.width}; })()`);
  await p.mouse('mouseMoved', box.x + box.w / 2, box.y + 8);
  const tip = await p.waitFor(`!document.getElementById('tooltip').hidden && document.getElementById('tooltip').textContent`, 'the tooltip');
  if (!/running: .*%/.test(tip) || !/self: /.test(tip)) fail('tooltip: ' + tip);
  // work_b's box lies after work_a's, at its row's depth: a click zooms to it, so work_b
  // then fills the width (its row is selected, and the left edge at that depth is work_b).
  const rb = await rows(p), ra = rb.find((r) => r.name === 'work_a'), rw = rb.find((r) => r.name === 'work_b');
  const y = box.y + 16 * rw.depth + 8;
  await p.click(box.x + box.w * (ra.pct + rw.pct / 2) / 100, y);
  const zoomed = await p.eval(`document.querySelector('#rows tr.sel .fn')?.textContent`);
  if (zoomed !== 'work_b') fail(`a click on work_b's box selected ${zoomed}`);
  // (the selected row is scrolled into view, which may move the flame graph: measure again)
  const flameY = async () => (await p.eval(`document.getElementById('flame').getBoundingClientRect().top`)) + 16 * rw.depth + 8;
  let y2 = await flameY();
  await p.mouse('mouseMoved', box.x + 3, y2);
  await p.waitFor(`document.getElementById('tooltip').textContent.startsWith('work_b')`, 'work_b at the left edge after the zoom');
  c = await p.shot('03-flame-zoom');
  await p.click(box.x + 3, y2); // the zoomed box again: one level out
  y2 = await flameY();
  await p.mouse('mouseMoved', box.x + 3, y2);
  await p.waitFor(`document.getElementById('tooltip').textContent.startsWith('work_a')`, 'work_a at the left edge after zooming out');
  console.log(`PASS flame graph tooltip (${tip.split('\n')[0]}), click zooms to work_b and out (${c} colours)`);

  // Focus on function work_a: one root, work_a, 100%; the breadcrumb says so.
  await menu(p, 'work_a', 'Focus on function');
  await p.waitFor(`document.querySelector('#rows tr .fn')?.textContent === 'work_a'`, 'focus on work_a');
  const rf = await rows(p);
  if (rf[0].pct !== 100 || rf.find((r) => r.name === 'work_b')) fail('focus-func: ' + JSON.stringify(rf.slice(0, 4)));
  const crumbs = await p.eval(`[...document.querySelectorAll('#crumbs .crumb')].map((c) => c.textContent)`);
  if (crumbs.length !== 2 || crumbs[1] !== 'focus on work_a') fail('breadcrumbs: ' + JSON.stringify(crumbs));
  c = await p.shot('04-focus-func');
  console.log(`PASS focus on function work_a (${c} colours)`);

  // Merge burn on top of it: work_a keeps its total as self time.
  await menu(p, 'burn', 'Merge function');
  await p.waitFor(`document.querySelectorAll('#crumbs .crumb').length === 3`, 'the merge crumb');
  await p.waitFor(`![...document.querySelectorAll('#rows tr .fn')].some((e) => e.textContent === 'burn')`, 'burn merged away');
  const selfPct = await p.eval(`parseFloat(document.querySelector('#rows tr .self-pct').textContent)`);
  if (selfPct < 90) fail(`after merge:burn work_a's self is ${selfPct}%`);
  c = await p.shot('05-merge');
  console.log(`PASS merge burn: work_a self ${selfPct}% (${c} colours)`);

  // Back to the whole profile through the first breadcrumb.
  const home = await p.centre('#crumbs .crumb', null);
  await p.click(home.x, home.y);
  await p.waitFor(`[...document.querySelectorAll('#rows tr .fn')].some((e) => e.textContent === 'work_b')`, 'the whole profile again');
  console.log('PASS breadcrumb pops the transforms');

  // Focus on a subtree: work_c's node, by its path.
  await menu(p, 'work_c', 'Focus on subtree');
  await p.waitFor(`document.querySelector('#rows tr .fn')?.textContent === 'work_c' && document.querySelectorAll('#crumbs .crumb').length === 2`, 'focus on the work_c subtree');
  if ((await rows(p)).find((r) => r.name === 'work_a')) fail('focus subtree kept work_a');
  c = await p.shot('06-focus-subtree');
  console.log(`PASS focus on subtree work_c (${c} colours)`);
  const home2 = await p.centre('#crumbs .crumb', null);
  await p.click(home2.x, home2.y);
  await p.waitFor(`document.querySelectorAll('#crumbs .crumb').length === 1 && [...document.querySelectorAll('#rows tr .fn')].some((e) => e.textContent === 'work_a')`, 'popped');

  // Invert: burn, where the samples are, becomes the heaviest root.
  const inv = await p.centre('#invert', null);
  await p.click(inv.x, inv.y);
  await p.waitFor(`document.querySelector('#rows tr .fn')?.textContent === 'burn'`, 'the inverted tree (burn first)');
  const ri = await rows(p);
  if (ri[0].pct < 80) fail(`inverted: burn holds ${ri[0].pct}%`);
  c = await p.shot('07-inverted');
  console.log(`PASS invert: burn ${ri[0].pct}% at the root (${c} colours)`);

  // Pause: no refresh for 2.5 s; resume: refreshes again.
  const pause = await p.centre('#pause', null);
  await p.click(pause.x, pause.y);
  await sleep(1500); /* a refresh in flight at the click, and one queued behind it, may end */
  const np = await refreshes(p);
  await sleep(2500);
  if ((await refreshes(p)) > np + 1) fail('refreshes went on while paused');
  await p.click(pause.x, pause.y);
  await waitRefresh(p, 'a refresh after resume');
  console.log('PASS pause and resume');
  if (p.exceptions.length) fail('page exceptions: ' + p.exceptions.join('; '));
}

async function hostile(p) {
  const name = '<img src=x onerror=alert(1)>';
  await p.waitFor(`Number(document.body.dataset.refreshes || 0) >= 1`, 'the tree');
  await sleep(300);
  const found = await p.eval(`[...document.querySelectorAll('#rows tr .fn')].some((e) => e.textContent === ${JSON.stringify(name)})`);
  if (!found) fail('the hostile name is not shown as text: ' + JSON.stringify(await rows(p)));
  const imgs = await p.eval(`document.querySelectorAll('img').length`);
  if (imgs) fail(`${imgs} img elements in the page`);
  let c = await p.shot('10-hostile');
  // Hover its box in the flame graph: the tooltip shows it as text too.
  const box = await p.eval(`(() => { const b = document.getElementById('flame').getBoundingClientRect(); return {x: b.left, y: b.top, w: b.width}; })()`);
  await p.mouse('mouseMoved', box.x + 5, box.y + 16 + 8);
  const tip = await p.waitFor(`!document.getElementById('tooltip').hidden && document.getElementById('tooltip').textContent`, 'the tooltip');
  if (!tip.startsWith(name)) fail('tooltip: ' + tip);
  // Its transform's breadcrumb shows it as text too.
  await menu(p, name, 'Focus on function');
  await p.waitFor(`[...document.querySelectorAll('#crumbs .crumb')].some((e) => e.textContent === ${JSON.stringify('focus on ' + name)})`, 'the hostile breadcrumb');
  c = await p.shot('11-hostile-crumb');
  // Its callers view (the view's crumb) and its per-line costs' title: text too.
  await menu(p, name, 'Show callers');
  await p.waitFor(`document.querySelector('#crumbs .viewcrumb')?.textContent === ${JSON.stringify('callers of ' + name)}`, 'the hostile callers crumb');
  await menu(p, name, 'Show per-line costs');
  await p.waitFor(`document.getElementById('lines-title').textContent === ${JSON.stringify('per-line costs of ' + name)} && document.getElementById('lines-note').textContent !== 'loading…'`, 'the hostile lines title');
  // and typed into the search box: only its samples, the name still text
  await p.eval(`(() => { const s = document.getElementById('search'); s.value = ${JSON.stringify(name)}; s.dispatchEvent(new Event('input')); })()`);
  await p.waitFor(`location.hash.includes('onerror') && document.querySelectorAll('#rows tr').length > 0`, 'the hostile search');
  c = await p.shot('13-hostile-views');
  await sleep(500);
  if (await p.eval(`document.querySelectorAll('img').length`)) fail('an img element in the page');
  if (p.dialogs.length) fail('a dialog opened: ' + p.dialogs.join('; '));
  console.log(`PASS hostile name shown as text, no dialog (${c} colours)`);
}

// A change the server refuses (the page started with --callers, then Invert: two views) is
// undone: the message shows, the button is off again, the tree stays.
async function refused(p) {
  await p.waitFor(`Number(document.body.dataset.refreshes || 0) >= 1 && document.querySelectorAll('#rows tr').length > 0`, 'the callers tree');
  const before = await rows(p);
  const inv = await p.centre('#invert', null);
  await p.click(inv.x, inv.y);
  const msg = await p.waitFor(`!document.getElementById('error').hidden && document.getElementById('error').textContent`, 'the refusal');
  if (!/only one of --invert, --callees, --callers, --functions/.test(msg)) fail('refusal: ' + msg);
  await p.waitFor(`document.getElementById('invert').getAttribute('aria-pressed') === 'false'`, 'Invert undone');
  await p.waitFor(`Number(document.body.dataset.refreshes) >= 2`, 'the reload after the undo');
  const after = await rows(p);
  if (JSON.stringify(after.map((r) => r.name)) !== JSON.stringify(before.map((r) => r.name))) fail('the tree changed after a refused change');
  if (await p.eval(`document.getElementById('error').hidden`)) fail('the refusal was cleared by the reload');
  const c = await p.shot('12-refused');
  console.log(`PASS a refused change is undone, its message stays (${c} colours)`);
}


// ---- views, transforms, search, thread, range, URL, downloads (a saved session) ----------

const crumbsExpr = `[...document.querySelectorAll('#crumbs .crumb')].map((c) => c.textContent)`;
const totalExpr = `Number(document.getElementById('status').dataset.total)`;

async function home(p) {
  const h = await p.centre('#crumbs .crumb', null);
  await p.click(h.x, h.y);
  await p.waitFor(`document.querySelectorAll('#crumbs .crumb').length === 1 && [...document.querySelectorAll('#rows tr .fn')].some((e) => e.textContent === 'work_a')`, 'the whole profile');
}

// Picks a transform from row name's menu; waits for its crumb; returns the rows.
async function transform(p, name, label, crumb) {
  await menu(p, name, label);
  await p.waitFor(`${crumbsExpr}.includes(${JSON.stringify(crumb)})`, 'the crumb ' + crumb);
  await sleep(100);
  return rows(p);
}

async function setSelect(p, id, value) {
  await p.eval(`(() => { const s = document.getElementById(${JSON.stringify(id)}); s.value = ${JSON.stringify(value)}; s.dispatchEvent(new Event('change')); })()`);
}

async function views(p) {
  await p.waitFor(`Number(document.body.dataset.refreshes || 0) >= 1 && document.querySelectorAll('#rows tr').length > 3`, 'the tree');
  const full = await p.eval(totalExpr);

  // The function list, by self time: burn first, self never increasing.
  await setSelect(p, 'view', 'functions');
  await p.waitFor(`document.querySelectorAll('#rows tr').length > 0 && ![...document.querySelectorAll('#rows tr')].some((tr) => tr.dataset.depth !== '0') && document.querySelector('#rows tr .fn').textContent === 'burn'`, 'the function list');
  const selfs = await p.eval(`[...document.querySelectorAll('#rows tr .self')].map((e) => parseFloat(e.textContent))`);
  for (let i = 1; i < selfs.length; i++) if (selfs[i] > selfs[i - 1]) fail('function list not by self: ' + selfs);
  let c = await p.shot('20-functions');
  console.log(`PASS function list by self time, burn first (${selfs.length} functions, ${c} colours)`);

  // Callers of burn (from the menu): burn at the root, its callers below.
  await menu(p, 'burn', 'Show callers');
  await p.waitFor(`document.querySelector('#crumbs .viewcrumb')?.textContent === 'callers of burn' && document.querySelector('#rows tr .fn')?.textContent === 'burn' && document.getElementById('view').value === 'callers'`, 'callers of burn');
  await p.key('*');
  const callers = (await rows(p)).map((r) => r.name);
  for (const f of ['work_a', 'work_b_inner', 'work_c']) if (!callers.includes(f)) fail(`callers of burn lack ${f}: ${callers}`);
  c = await p.shot('21-callers');
  console.log(`PASS callers of burn: ${callers.slice(0, 5).join(', ')}… (${c} colours)`);

  // Callees of main: main at the root, work_a below it.
  await setSelect(p, 'view', 'tree');
  await p.waitFor(`document.querySelector('#rows tr .fn')?.textContent !== 'burn' && [...document.querySelectorAll('#rows tr .fn')].some((e) => e.textContent === 'main')`, 'the tree again');
  await menu(p, 'main', 'Show callees');
  await p.waitFor(`document.querySelector('#crumbs .viewcrumb')?.textContent === 'callees of main' && document.querySelector('#rows tr .fn')?.textContent === 'main'`, 'callees of main');
  const callees = await rows(p);
  if (callees[0].depth !== 0 || callees[0].pct < 99 || !callees.some((r) => r.name === 'work_a' && r.depth === 1)) fail('callees of main: ' + JSON.stringify(callees.slice(0, 4)));
  console.log('PASS callees of main');
  await setSelect(p, 'view', 'tree');
  await p.waitFor(`!document.querySelector('#crumbs .viewcrumb') && [...document.querySelectorAll('#rows tr .fn')].some((e) => e.textContent === 'work_a')`, 'the tree');

  // Per-line costs of burn: lines (the workload has debug info) or at least addresses, 100% in all.
  await menu(p, 'burn', 'Show per-line costs');
  await p.waitFor(`!document.getElementById('lines-box').hidden && document.getElementById('lines-title').textContent === 'per-line costs of burn' && document.querySelectorAll('#lines-rows tr, #addrs-rows tr').length > 0`, 'per-line costs');
  const lines = await p.eval(`[...document.querySelectorAll('#lines-rows tr')].map((tr) => [tr.children[0].textContent, parseFloat(tr.children[2].textContent)])`);
  const addrs = await p.eval(`[...document.querySelectorAll('#addrs-rows tr')].map((tr) => parseFloat(tr.children[2].textContent))`);
  const sum = (lines.length ? lines.map((l) => l[1]) : addrs).reduce((a, b) => a + b, 0);
  if (Math.abs(sum - 100) > 1.5) fail(`per-line costs add up to ${sum}%`);
  c = await p.shot('22-lines');
  console.log(`PASS per-line costs of burn: ${lines.length} lines, ${addrs.length} addresses, ${sum.toFixed(1)}% (${c} colours)`);
  await p.eval(`document.getElementById('lines-close').click()`);

  // Every transform of the menu, each its canopy tree -t SPEC, each popped again.
  let r = await transform(p, 'work_a', 'Focus on library', 'focus on library wl_shares_fp');
  if (r.some((x) => x.name.startsWith('__libc')) || !r.some((x) => x.name === 'main')) fail('focus-lib: ' + r.map((x) => x.name));
  await home(p);
  r = await transform(p, '__libc_start_call_main', 'Collapse library', 'collapse library libc.so.6');
  if (!r.some((x) => x.name === 'libc.so.6') || r.some((x) => x.name.startsWith('__libc'))) fail('collapse-lib: ' + r.map((x) => x.name));
  c = await p.shot('23-collapse-lib');
  await home(p);
  r = await transform(p, 'work_c', 'Collapse recursion', 'collapse recursion work_c');
  if (r.filter((x) => x.name === 'work_c').length !== 1) fail('collapse-rec left nested work_c: ' + r.map((x) => x.name));
  // stacked: collapse direct recursion (nothing left to collapse), then pop to the first crumb
  r = await transform(p, 'work_c', 'Collapse direct recursion only', 'collapse direct recursion work_c');
  const mid = await p.centre('#crumbs .crumb', 'collapse recursion work_c');
  await p.click(mid.x, mid.y);
  await p.waitFor(`${crumbsExpr}.length === 2`, 'popped to the middle crumb');
  await home(p);
  r = await transform(p, 'work_c', 'Collapse direct recursion only', 'collapse direct recursion work_c');
  if (r.filter((x) => x.name === 'work_c').length !== 1) fail('collapse-direct-rec: ' + r.map((x) => x.name));
  await home(p);
  r = await transform(p, 'work_b', 'Collapse function', 'collapse work_b');
  const wb = r.find((x) => x.name === 'work_b');
  const wbSelf = await p.eval(`parseFloat([...document.querySelectorAll('#rows tr')].find((tr) => tr.querySelector('.fn').textContent === 'work_b').querySelector('.self').textContent)`);
  if (!wb || wbSelf !== wb.total || r.some((x) => x.name === 'work_b_inner')) fail(`collapse work_b: self ${wbSelf}, total ${wb && wb.total}`);
  await home(p);
  r = await transform(p, 'work_a', 'Drop samples with this function', 'drop work_a');
  const dropped = await p.eval(totalExpr);
  await p.waitFor(`Number(document.getElementById('activity').dataset.sum) === ${dropped}`, 'the activity graph after drop');
  if (r.some((x) => x.name === 'work_a') || !(dropped < full * 0.7)) fail(`drop work_a: total ${full} -> ${dropped}`);
  await home(p);
  r = await transform(p, 'work_b', 'Merge node', 'merge node _start;__libc_start_main_impl;__libc_start_call_main;main;work_b');
  if (r.some((x) => x.name === 'work_b') || !r.some((x) => x.name === 'work_b_inner' && x.depth === 4)) fail('merge-node: ' + JSON.stringify(r));
  await home(p);
  // The Firefox Profiler's keys in the call tree: m merges the selected function, d drops it.
  const bn = await p.centre('#rows tr .fn', 'work_b_inner');
  await p.click(bn.x, bn.y);
  await p.key('m');
  await p.waitFor(`${crumbsExpr}.includes('merge work_b_inner') && ![...document.querySelectorAll('#rows tr .fn')].some((e) => e.textContent === 'work_b_inner')`, 'the key m');
  const wa2 = await p.centre('#rows tr .fn', 'work_a');
  await p.click(wa2.x, wa2.y);
  await p.key('d');
  await p.waitFor(`${crumbsExpr}.includes('drop work_a') && ![...document.querySelectorAll('#rows tr .fn')].some((e) => e.textContent === 'work_a')`, 'the key d');
  await home(p);
  console.log(`PASS transforms: focus-lib, collapse-lib, collapse-rec, collapse-direct-rec, collapse, drop, merge-node, keys m and d; crumbs pop (${c} colours)`);

  // Search: only samples with a function matching 'WORK_B' (case-insensitive).
  await p.eval(`(() => { const s = document.getElementById('search'); s.value = 'WORK_B'; s.dispatchEvent(new Event('input')); })()`);
  await p.waitFor(`![...document.querySelectorAll('#rows tr .fn')].some((e) => e.textContent === 'work_a') && ${totalExpr} < ${full}`, 'the search');
  const found = await p.eval(totalExpr);
  const wbFull = await p.eval(`fetch('/api/tree?token=' + new URLSearchParams(location.search).get('token') + '&arg=--functions').then((r) => r.json()).then((d) => d.functions.find((f) => f.name === 'work_b').total)`);
  if (found !== wbFull) fail(`search WORK_B: total ${found}, work_b's running total ${wbFull}`);
  // The activity graph follows the search (as the Firefox Profiler's does).
  await p.waitFor(`Number(document.getElementById('activity').dataset.sum) === ${found}`, 'the activity graph of the search');
  c = await p.shot('24-search');
  console.log(`PASS search WORK_B: total ${found} = work_b's running weight (${c} colours)`);
  await p.eval(`(() => { const s = document.getElementById('search'); s.value = ''; s.dispatchEvent(new Event('input')); })()`);
  await p.waitFor(`${totalExpr} === ${full}`, 'the search cleared');

  // The thread picker: the workload's thread, then all again.
  const opts = await p.eval(`[...document.getElementById('thread').options].map((o) => [o.value, o.textContent])`);
  const th = opts.find((o) => o[0][0] === 't');
  if (!th || !opts.some((o) => o[0][0] === 'p')) fail('thread picker: ' + JSON.stringify(opts));
  await setSelect(p, 'thread', th[0]);
  await p.waitFor(`document.getElementById('thread').value === ${JSON.stringify(th[0])} && Number(document.body.dataset.refreshes) > 0`, 'the thread');
  const thTotal = await p.waitFor(`(() => { const t = ${totalExpr}; return t > 0 && t; })()`, 'the thread total');
  const want = await p.eval(`fetch('/api/tree?token=' + new URLSearchParams(location.search).get('token') + '&arg=--tid&arg=${th[0].slice(1)}').then((r) => r.json()).then((d) => d.total)`);
  if (thTotal !== want) fail(`thread ${th[1]}: total ${thTotal}, --tid gives ${want}`);
  console.log(`PASS thread picker: ${th[1].trim()} total ${thTotal} = --tid's`);
  await setSelect(p, 'thread', '');
  await p.waitFor(`${totalExpr} === ${full}`, 'all threads again');

  // The activity graph: drag over its middle half; the total follows --from/--to.
  await p.waitFor(`!document.getElementById('activity-box').hidden`, 'the activity graph');
  const box = await p.eval(`(() => { const b = document.getElementById('activity').getBoundingClientRect(); return {x: b.left, y: b.top, w: b.width, h: b.height}; })()`);
  const end = Number(await p.eval(`document.getElementById('activity').dataset.end`));
  await p.mouse('mouseMoved', box.x + box.w * 0.25, box.y + box.h / 2);
  await p.mouse('mousePressed', box.x + box.w * 0.25, box.y + box.h / 2, 'left', 1);
  await p.mouse('mouseMoved', box.x + box.w * 0.5, box.y + box.h / 2, 'left');
  await p.mouse('mouseMoved', box.x + box.w * 0.75, box.y + box.h / 2, 'left');
  await p.mouse('mouseReleased', box.x + box.w * 0.75, box.y + box.h / 2, 'left', 1);
  await p.waitFor(`!document.getElementById('range').hidden && ${totalExpr} < ${full}`, 'the range');
  const ranged = await p.eval(totalExpr);
  const rtext = await p.eval(`document.getElementById('range-text').textContent`);
  const m = /range ([\d.]+) – ([\d.]+) s/.exec(rtext);
  if (!m || Math.abs(Number(m[1]) - end / 4) > end / 50 || Math.abs(Number(m[2]) - end * 3 / 4) > end / 50) fail(`range ${rtext} for end ${end}`);
  const want2 = await p.eval(`fetch('/api/tree?token=' + new URLSearchParams(location.search).get('token') + '&arg=--from&arg=${m[1]}&arg=--to&arg=${m[2]}').then((r) => r.json()).then((d) => d.total)`);
  if (ranged !== want2 || !(ranged > full * 0.25 && ranged < full * 0.75)) fail(`range: total ${ranged}, --from/--to ${want2}, whole ${full}`);
  c = await p.shot('25-range');
  console.log(`PASS activity graph: ${rtext}, total ${ranged} of ${full} = --from/--to's (${c} colours)`);

  // The URL keeps the view: a search, a transform, the range, the selection; reload restores it.
  await transform(p, 'burn', 'Merge function', 'merge burn');
  await p.eval(`(() => { const s = document.getElementById('search'); s.value = 'work'; s.dispatchEvent(new Event('input')); })()`);
  await p.waitFor(`location.hash.includes('work') && location.hash.includes('merge%3Aburn')`, 'the view in the URL');
  const wa = await p.centre('#rows tr .fn', 'work_a');
  await p.click(wa.x, wa.y);
  await sleep(300);
  await p.eval(`(() => { const s = document.getElementById('search'); s.dispatchEvent(new Event('input')); })()`); /* any load saves the URL */
  await waitRefreshOrWait(p);
  const before = { total: await p.eval(totalExpr), crumbs: await p.eval(crumbsExpr), rows: (await rows(p)).map((x) => x.name).join(','),
                   sel: await p.eval(`document.querySelector('#rows tr.sel .fn')?.textContent`) };
  const href = await p.eval('location.href');
  await p.send('Page.navigate', { url: href });
  await sleep(300);
  await p.waitFor(`Number(document.body.dataset.refreshes || 0) >= 1 && document.querySelectorAll('#rows tr').length > 0`, 'the reloaded page');
  const after = { total: await p.eval(totalExpr), crumbs: await p.eval(crumbsExpr), rows: (await rows(p)).map((x) => x.name).join(','),
                  sel: await p.eval(`document.querySelector('#rows tr.sel .fn')?.textContent`) };
  if (JSON.stringify(before) !== JSON.stringify(after)) fail(`reload: ${JSON.stringify(before)} -> ${JSON.stringify(after)}`);
  if ((await p.eval(`document.getElementById('search').value`)) !== 'work' || (await p.eval(`document.getElementById('range').hidden`))) fail('reload lost the search or the range');
  c = await p.shot('26-reloaded');
  console.log(`PASS reload restores the view (${after.crumbs.join(' › ')}, search, range, selected ${after.sel}) (${c} colours)`);

  // Downloads of the current view in every format, through the same renderer; the
  // Firefox Profiler link points at the token-protected firefox export.
  const links = await p.eval(`[...document.querySelectorAll('#downloads a')].map((a) => [a.dataset.format, a.href])`);
  const formats = links.map((l) => l[0]);
  for (const f of ['json', 'text', 'folded', 'pprof', 'speedscope', 'chrome-trace', 'svg', 'firefox', 'canopy'])
    if (!formats.includes(f)) fail('no download for ' + f);
  for (const [f, h] of links) {
    const got = await p.eval(`fetch(${JSON.stringify(h)}).then(async (r) => [r.status, r.headers.get('content-disposition'), (await r.arrayBuffer()).byteLength])`);
    if (got[0] !== 200 || !/attachment/.test(got[1] || '') || got[2] < 10) fail(`download ${f}: ${JSON.stringify(got)}`);
  }
  const same = await p.eval(`(async () => {
    const tok = new URLSearchParams(location.search).get('token');
    const a = [...document.querySelectorAll('#downloads a')].find((a) => a.dataset.format === 'json').href;
    const q = new URL(a).searchParams.getAll('arg');
    const t = '/api/tree?token=' + tok + q.map((x) => '&arg=' + encodeURIComponent(x)).join('');
    const [x, y] = await Promise.all([fetch(a).then((r) => r.text()), fetch(t).then((r) => r.text())]);
    return x === y && q.includes('search:work') && q.includes('merge:burn') && q.includes('--from');
  })()`);
  if (!same) fail('the json download is not the current view');
  const ffp = await p.eval(`document.getElementById('ffp').href`);
  const pre = 'https://profiler.firefox.com/from-url/';
  if (!ffp.startsWith(pre)) fail('Firefox Profiler link: ' + ffp);
  const target = decodeURIComponent(ffp.slice(pre.length));
  const origin = await p.eval('location.origin');
  if (!target.startsWith(origin + '/api/export?token=') || !target.includes('format=firefox')) fail('Firefox Profiler link target: ' + target);
  const ff = await p.eval(`fetch(${JSON.stringify(target)}).then(async (r) => [r.headers.get('access-control-allow-origin'), (await r.json()).meta.preprocessedProfileVersion])`);
  if (ff[0] !== 'https://profiler.firefox.com' || ff[1] !== 61) fail('firefox export: ' + JSON.stringify(ff));
  console.log(`PASS downloads in ${formats.length} formats = the current view; the Firefox Profiler link serves version ${ff[1]} with CORS for the profiler`);
  if (p.exceptions.length) fail('page exceptions: ' + p.exceptions.join('; '));
}

async function waitRefreshOrWait(p) {
  await sleep(600);
}

// An off-CPU/wall profile: times, not samples.
async function units(p) {
  await p.waitFor(`Number(document.body.dataset.refreshes || 0) >= 1 && document.querySelectorAll('#rows tr').length > 0`, 'the tree');
  const status = await p.eval(`document.getElementById('status').textContent`);
  const cells = await p.eval(`[...document.querySelectorAll('#rows tr .total')].slice(0, 5).map((e) => e.textContent)`);
  if (!/^total [\d.]+ (ns|µs|ms|s)\b/.test(status) || /samples/.test(status)) fail('status of a wall profile: ' + status);
  if (!cells.every((t) => /^-?[\d.]+ (ns|µs|ms|s)$/.test(t))) fail('cells of a wall profile: ' + cells);
  const box = await p.eval(`(() => { const b = document.getElementById('flame').getBoundingClientRect(); return {x: b.left, y: b.top, w: b.width}; })()`);
  await p.mouse('mouseMoved', box.x + 5, box.y + 8);
  const tip = await p.waitFor(`!document.getElementById('tooltip').hidden && document.getElementById('tooltip').textContent`, 'the tooltip');
  if (!/running: [\d.]+ (ns|µs|ms|s) /.test(tip)) fail('tooltip of a wall profile: ' + tip);
  const c = await p.shot('30-wall');
  console.log(`PASS wall profile in times: "${status}", ${cells[0]} (${c} colours)`);
}

// A real wall-mode session of tests/workloads/waits.c (test_web.sh, opened with
// --functions --tid MAIN): the header, cells and tooltip are times; prints the cells of
// compute, the read (frame-pointer unwinding skips wait_answer, the caller of libc's
// read, which keeps no frame pointer) and nap as the page shows them ("CELLS {...}"),
// which test_web.sh converts and compares with the workload's own measurement. An off-cpu
// session (offcpu: true) has no compute: main is off the CPU only in read and nap.
async function wall(p, offcpu) {
  const names = `[...document.querySelectorAll('#rows tr .fn')].map((e) => e.textContent)`;
  const compute = offcpu ? 'true' : `n.includes('compute')`;
  await p.waitFor(`(() => { const n = ${names}; return ${compute} && n.includes('nap') && n.some((f) => /(^|_)read$/.test(f)); })()`, 'compute, read and nap in the function list', 20000);
  const status = await p.eval(`document.getElementById('status').textContent`);
  if (!/^total [\d.]+ (µs|ms|s) · \d+ samples, \d+ lost/.test(status)) fail('status of a wall session: ' + status);
  const rows = await p.eval(`[...document.querySelectorAll('#rows tr')].map((tr) => [tr.querySelector('.fn').textContent, tr.querySelector('.total').textContent])`);
  const cells = {};
  for (const [f, t] of rows) {
    const k = f === 'compute' || f === 'nap' ? f : /(^|_)read$/.test(f) ? 'read' : null;
    if (k && !(k in cells)) cells[k] = t;
  }
  if (!rows.every((r) => /^[\d.]+ (ns|µs|ms|s)$/.test(r[1]) || r[1] === '0')) fail('cells of a wall session: ' + JSON.stringify(rows));
  const y = await p.eval(`(() => { const b = document.getElementById('flame').getBoundingClientRect(); return {x: b.left, y: b.top}; })()`);
  await p.mouse('mouseMoved', y.x + 5, y.y + 8);
  const tip = await p.waitFor(`!document.getElementById('tooltip').hidden && document.getElementById('tooltip').textContent`, 'the tooltip');
  if (!/running: [\d.]+ (ns|µs|ms|s) /.test(tip)) fail('tooltip of a wall session: ' + tip);
  const c = await p.shot(offcpu ? '35-offcpu-session' : '34-wall-session');
  console.log(`PASS ${offcpu ? 'off-cpu' : 'wall'} session in times: "${status}", ${rows.length} functions (${c} colours)`);
  console.log('CELLS ' + JSON.stringify(cells));
  if (p.exceptions.length) fail('page exceptions: ' + p.exceptions.join('; '));
}

// A long table (main with 2000 callees): windowed, the rows follow the scrolling.
async function long(p) {
  await p.waitFor(`Number(document.body.dataset.refreshes || 0) >= 1`, 'the tree');
  const n = await p.eval(`document.querySelectorAll('#rows tr').length`);
  if (!(n > 20 && n < 300)) fail(`${n} rows in the document for 2001 in the table`);
  await p.eval(`window.scrollTo(0, document.body.scrollHeight)`);
  const last = await p.waitFor(`(() => { const r = [...document.querySelectorAll('#rows tr .fn')]; const l = r[r.length - 1]; return l && l.textContent === 'f999' && l.getBoundingClientRect().bottom <= window.innerHeight + 1 && r.length; })()`, 'the last row after scrolling');
  const c = await p.shot('32-long-table');
  console.log(`PASS a 2001-row table keeps ${n} rows in the document, ${last} at the end, f999 last (${c} colours)`);
}

// canopy web BASE NEW: canopy diff's tree, red where NEW grew, blue where it shrank.
async function diff(p) {
  await p.waitFor(`Number(document.body.dataset.refreshes || 0) >= 1 && document.querySelectorAll('#rows tr').length > 1`, 'the diff');
  const status = await p.eval(`document.getElementById('status').textContent`);
  if (!/^diff: base /.test(status)) fail('diff status: ' + status);
  const r = await rows(p);
  const grew = r.find((x) => x.name === 'grew'), shrank = r.find((x) => x.name === 'shrank');
  if (!grew || !shrank || !(grew.total > 0) || !(shrank.total < 0)) fail('diff rows: ' + JSON.stringify(r));
  // The boxes' colours, read from the canvas where the tooltip names them: red for grew,
  // blue for shrank (widths are NEW's weights, as flamegraph's difffolded draws them).
  const box = await p.eval(`(() => { const b = document.getElementById('flame').getBoundingClientRect(); return {x: b.left, y: b.top, w: b.width}; })()`);
  const at = {};
  for (let x = 2; x < box.w && !(at.grew && at.shrank); x += 12) {
    await p.mouse('mouseMoved', box.x + x, box.y + 16 + 8);
    const t = await p.eval(`document.getElementById('tooltip').hidden ? '' : document.getElementById('tooltip').textContent`);
    const name = t.split(/\s/)[0];
    if ((name === 'grew' || name === 'shrank') && !at[name]) at[name] = x;
  }
  if (!at.grew || !at.shrank) fail('no grew/shrank boxes: ' + JSON.stringify(at));
  const px = await p.eval(`(() => {
    const c = document.getElementById('flame'), g = c.getContext('2d'), d = window.devicePixelRatio || 1;
    const px = (x) => Array.from(g.getImageData(Math.round(x * d), Math.round((16 + 8) * d), 1, 1).data);
    return { grew: px(${at.grew} + 4), shrank: px(${at.shrank} + 4) };
  })()`);
  if (!(px.grew[0] > px.grew[2] + 40) || !(px.shrank[2] > px.shrank[0] + 40)) fail('diff colours: ' + JSON.stringify(px));
  const c = await p.shot('31-diff');
  console.log(`PASS diff: grew +${grew.total} red ${px.grew.slice(0, 3)}, shrank ${shrank.total} blue ${px.shrank.slice(0, 3)} (${c} colours)`);
  if (p.exceptions.length) fail('page exceptions: ' + p.exceptions.join('; '));
}

// A live session of wl_shares_fp whose symbols are held back by canopyd-test: everything
// expanded and the workload's deepest row selected while the frames are addresses; once they are
// names, work_a and work_b must be open rows and a named row still selected.
// canopy web --pid PID (test_web.sh): sampled in the canopy process, live: the page's total
// grows over its refreshes, and the workload's functions are named in its table.
async function pid(p) {
  await p.waitFor(`Number(document.body.dataset.refreshes || 0) >= 1 && document.getElementById('status').dataset.total > 0`, 'the first tree');
  const t1 = Number(await p.eval(`document.getElementById('status').dataset.total`));
  await p.waitFor(`Number(document.getElementById('status').dataset.total) > ${t1}`, 'the total growing', 20000);
  const t2 = Number(await p.eval(`document.getElementById('status').dataset.total`));
  const status = await p.eval(`document.getElementById('status').textContent`);
  if (!/ · live$/.test(status)) fail('--pid status: ' + status);
  const first = await p.centre('#rows tr .fn', null);
  await p.click(first.x, first.y); /* the first root selected, and everything under it open */
  await p.key('*');
  await p.waitFor(`[...document.querySelectorAll('#rows tr .fn')].some((e) => e.textContent === 'burn')`, 'burn named in the expanded table', 20000);
  const c = await p.shot('36-pid');
  console.log(`PASS --pid in the browser: total ${t1} -> ${t2}, "${status}", burn named (${c} colours)`);
  if (p.exceptions.length) fail('page exceptions: ' + p.exceptions.join('; '));
}

// The name and share of the flame graph's box under (x, depth), or null: from the tooltip.
async function boxAt(p, x, depth) {
  const top = await p.eval(`(() => { window.scrollTo(0, 0); return document.getElementById('flame').getBoundingClientRect().top; })()`);
  await p.mouse('mouseMoved', x, top + 16 * depth + 8);
  const tip = await p.eval(`(() => { const t = document.getElementById('tooltip'); return t.hidden ? '' : t.textContent; })()`);
  const m = /^(.*?)(  \(.*\))?\nrunning: .*\(([\d.]+)%\)/.exec(tip);
  return m ? { name: m[1], pct: Number(m[3]) } : null;
}

async function symbols(p) {
  await p.waitFor(`Number(document.body.dataset.refreshes || 0) >= 1 && document.querySelectorAll('#rows tr').length > 1`, 'the first tree');
  const r0 = await rows(p);
  if (!r0.some((r) => r.name.startsWith('wl_shares_fp+0x')) || r0.some((r) => r.name === 'work_a'))
    fail('the symbols were not held back: ' + JSON.stringify(r0.map((r) => r.name)));
  const roots = r0.filter((r) => r.depth === 0).map((r) => r.name);
  const expandAll = async () => {
    for (const name of roots) { // `*` on each root: every node open
      const at = await p.centre('#rows tr .fn', name);
      await p.click(at.x, at.y);
      await p.key('*');
    }
  };
  // A transform pushed with an address (PH: the heaviest of the workload's, burn's, which
  // test_web_symbols.sh found): merge it. The server remaps it when the symbols arrive.
  const ph = process.env.PH;
  await expandAll();
  await menu(p, ph, 'Merge function');
  await p.waitFor(`document.querySelectorAll('#crumbs .crumb').length === 2 && Number(document.body.dataset.refreshes) > 0 &&
                   ![...document.querySelectorAll('#rows tr .fn')].some((e) => e.textContent === ${JSON.stringify(ph)})`, 'merge ' + ph);
  await expandAll();
  const r1 = await rows(p);
  // The parent of the workload's deepest address (not the kernel's: never renamed): a
  // work_* function once named (the deepest itself is burn's, which the merge removes).
  const mine = r1.filter((r) => r.name.startsWith('wl_shares_fp+0x'));
  const leaf = r1.indexOf(mine.reduce((m, r) => (r.depth > m.depth ? r : m), mine[0]));
  let pi = leaf;
  while (pi > 0 && r1[pi].depth >= r1[leaf].depth) pi--;
  const deep = r1[pi];
  // Zoom the flame graph to a box of the workload's named by address, less than the whole
  // width: after the symbols it is the box of the function's name, filling the width.
  const fr = await p.eval(`(() => { const b = document.getElementById('flame').getBoundingClientRect(); return {x: b.left, w: b.width}; })()`);
  let zoom = null;
  for (let d = 4; d < 14 && !zoom; d++) /* below main (depth 3): a work_* function's */
    for (let k = 0; k < 12 && !zoom; k++) {
      const x = fr.x + 2 + (fr.w - 4) * k / 12, b = await boxAt(p, x, d);
      if (b && b.name.startsWith('wl_shares_fp+0x') && b.pct < 90) zoom = { x, d, name: b.name, pct: b.pct };
    }
  if (!zoom) fail('no box of the workload named by address in the flame graph');
  await p.click(zoom.x, (await p.eval(`document.getElementById('flame').getBoundingClientRect().top`)) + 16 * zoom.d + 8);
  const zl = await boxAt(p, fr.x + 3, zoom.d), zr = await boxAt(p, fr.x + fr.w - 3, zoom.d);
  if (!zl || !zr || zl.name !== zoom.name || zr.name !== zoom.name) fail(`zoom to ${zoom.name}: the edges show ${JSON.stringify([zl, zr])}`);
  const at = await p.centre('#rows tr .fn', deep.name);
  await p.click(at.x, at.y);
  const twisties = `[...document.querySelectorAll('#rows tr')].map((tr) => tr.querySelector('.twisty').textContent)`;
  const closed0 = (await p.eval(twisties)).filter((t) => t === '▸').length;
  let c = await p.shot('40-addresses');
  console.log(`PASS before the symbols: ${r1.length} rows, ${closed0} closed, selected ${deep.name} at depth ${deep.depth} (${c} colours)`);

  // Symbols arrive in batches: wait for the last of the workload's (no row of it still
  // named by address), or the check below can fall between two batches, when the work_a
  // row comes from a frame already named and the open path is still held under another's
  // placeholder (a CI run failed so).
  await p.waitFor(`[...document.querySelectorAll('#rows tr .fn')].some((e) => e.textContent === 'work_a') &&
                   [...document.querySelectorAll('#rows tr .fn')].some((e) => e.textContent === 'work_b') &&
                   ![...document.querySelectorAll('#rows tr .fn')].some((e) => e.textContent.startsWith('wl_shares_fp+0x'))`,
                  'work_a and work_b named and shown, every workload frame named (the expanded set remapped)', 40000);
  await waitRefresh(p, 'a refresh after the symbols');
  const open = await p.eval(`[...document.querySelectorAll('#rows tr')].map((tr, i, all) => ({
    name: tr.querySelector('.fn').textContent, twisty: tr.querySelector('.twisty').textContent,
    child: !!all[i + 1] && Number(all[i + 1].dataset.depth) > Number(tr.dataset.depth) }))`);
  for (const f of ['main', 'work_a', 'work_b']) {
    const r = open.find((x) => x.name === f);
    if (!r || r.twisty !== '▾' || !r.child) fail(`${f} is not open after the symbols: ${JSON.stringify(open)}`);
  }
  const crumbs = await p.eval(`[...document.querySelectorAll('#crumbs .crumb')].map((c) => c.textContent)`);
  if (crumbs.length !== 2 || open.some((x) => x.name === 'burn'))
    fail(`merge ${ph} is not merge burn after the symbols: crumbs ${JSON.stringify(crumbs)}, rows ${JSON.stringify(open.map((x) => x.name))}`);
  // Its own address may come in a later batch of symbols: the selection waits for it.
  await p.waitFor(`!(document.querySelector('#rows tr.sel .fn')?.textContent || 'wl_shares_fp+0x').startsWith('wl_shares_fp+0x')`,
                  'the selected row named', 20000);
  const sel = await p.eval(`document.querySelector('#rows tr.sel .fn')?.textContent`);
  if (!['burn', 'work_a', 'work_b', 'work_b_inner', 'work_c', 'main'].includes(sel))
    fail(`the selection (${deep.name}) is not a named row of the workload after the symbols: ${sel}`);
  // The crumb names the function now, and the flame graph is still zoomed, to its name.
  const zEnd = Date.now() + 20000;
  let z2 = null;
  for (;;) { /* the zoomed box's own address may come in a later batch */
    const l = await boxAt(p, fr.x + 3, zoom.d), r = await boxAt(p, fr.x + fr.w - 3, zoom.d);
    /* the same box at both edges, of less than 90% of the total: zoomed */
    if (l && r && l.name === r.name && !l.name.startsWith('wl_shares_fp+0x') && l.pct < 90) { z2 = l.name; break; }
    if (Date.now() > zEnd) fail(`the zoom to ${zoom.name} is not kept after the symbols: the edges at depth ${zoom.d} show ${JSON.stringify([l, r])}`);
    await sleep(300);
  }
  if (!['work_a', 'work_b', 'work_b_inner', 'work_c'].includes(z2)) fail(`the zoom (${zoom.name}) went to ${z2}`);
  await p.waitFor(`document.querySelectorAll('#crumbs .crumb')[1]?.textContent === 'merge burn'`, `the crumb "merge ${ph}" relabelled "merge burn"`);
  console.log(`PASS the flame graph's zoom on ${zoom.name} (${zoom.pct}% at depth ${zoom.d}) is on ${z2} after the symbols; crumb "merge burn"`);
  c = await p.shot('41-names');
  console.log(`PASS after the symbols: main, work_a, work_b open, ${open.length} rows, selected ${sel}, the transform stack (${crumbs[1]}) kept and now merging burn (${c} colours)`);

  // test_web_symbols.sh stops the session when this file appears: from then on every
  // refresh is answered 304 (the same ETag) and the page keeps its table as it was.
  fs.writeFileSync(path.join(outdir, 'stop-now'), '');
  await p.waitFor(`Number(document.body.dataset.unchanged || 0) >= 2`, 'two refreshes answered 304 after the stop', 20000);
  const still = await p.eval(`[...document.querySelectorAll('#rows tr')].map((tr) => tr.querySelector('.fn').textContent + tr.querySelector('.twisty').textContent)`);
  if (!still.includes('work_a▾') || !still.includes('work_b▾')) fail('the table changed after 304s: ' + JSON.stringify(still));
  console.log(`PASS stopped session: refreshes answered 304 (${await p.eval('document.body.dataset.unchanged')}), the table kept`);
  // Self-contained: everything the page loaded (its files and every query) came from its
  // own origin; no CDN, no font, no other server.
  const res = await p.eval(`performance.getEntriesByType('resource').map((e) => e.name)`);
  const origin = await p.eval('location.origin');
  const away = res.filter((u) => !u.startsWith(origin + '/'));
  if (res.length < 3 || away.length) fail(`requests to another origin: ${JSON.stringify(away)} (of ${res.length})`);
  console.log(`PASS self-contained: ${res.length} requests, all to ${origin}`);
  if (p.exceptions.length) fail('page exceptions: ' + p.exceptions.join('; '));
}

// bench/web_speed.js drives the same browser: it requires this file for these.
module.exports = { Browser, openPage, sleep, setBrowser: (b) => { browser = b; } };

if (require.main === module) (async () => {
  const b = new Browser();
  browser = b;
  const timer = setTimeout(() => fail('the browser steps took more than 60 s'), 60000);
  try {
    const p = await openPage(b, url);
    if (mode === 'live') await live(p);
    else if (mode === 'hostile') await hostile(p);
    else if (mode === 'refused') await refused(p);
    else if (mode === 'views') await views(p);
    else if (mode === 'units') await units(p);
    else if (mode === 'wall') await wall(p, false);
    else if (mode === 'offcpu') await wall(p, true);
    else if (mode === 'pid') await pid(p);
    else if (mode === 'diff') await diff(p);
    else if (mode === 'long') await long(p);
    else if (mode === 'symbols') await symbols(p);
    else if (mode === 'shot') { // a look at the page (no check): node web_browser.js shot URL DIR
      await p.waitFor(`Number(document.body.dataset.refreshes || 0) >= 1`, 'the page');
      await sleep(500);
      await p.shot('shot');
    }
    else fail('mode ' + mode);
  } catch (e) {
    fail(e.stack || String(e));
  } finally {
    clearTimeout(timer);
    b.close();
  }
})();
