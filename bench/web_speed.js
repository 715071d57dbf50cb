// web_speed.js — canopy web's page speed in Debian's headless chromium (bench/web_speed.sh
// runs it): node web_speed.js URL ROUNDS. Prints one line per figure, in ms:
//   first_paint   navigation start to the first tree drawn (the page's data-first-paint-ms)
//   refresh       one whole reload of the view: the query sent, the answer parsed, table and
//                 flame graph drawn (data-load-ms), over ROUNDS changes of the search box
//                 between '' and 'f' (every function matches: the same whole tree)
//   draw          drawing the flame graph alone (data-draw-ms), ROUNDS window resizes
//   drawn         boxes the flame graph drew (at least half a pixel wide)
// Medians of the rounds, and their min and max.
'use strict';
const path = require('path');
const { Browser, openPage, sleep, setBrowser } = require(
  path.join(__dirname, '..', 'tests', 'integration', 'web_browser.js'));

const [url, roundsArg] = process.argv.slice(2);
const ROUNDS = Number(roundsArg || 5);

function stats(v) {
  const s = v.slice().sort((a, b) => a - b);
  return `${s[s.length >> 1].toFixed(1)} (min ${s[0].toFixed(1)}, max ${s[s.length - 1].toFixed(1)})`;
}

async function waitFor(p, expr, ms) {
  const end = Date.now() + (ms || 60000);
  for (;;) {
    let v = null;
    try { v = await p.eval(expr); } catch (e) { v = null; }
    if (v) return v;
    if (Date.now() > end) throw new Error('timed out: ' + expr);
    await sleep(20);
  }
}

(async () => {
  const b = new Browser();
  setBrowser(b);
  try {
    const p = await openPage(b, url);
    await waitFor(p, `document.body.dataset.firstPaintMs`);
    const first = Number(await p.eval(`document.body.dataset.firstPaintMs`));
    const rows = await p.eval(`document.querySelectorAll('#rows tr').length`);
    console.log(`first_paint ${first.toFixed(1)} (table rows ${rows})`);
    const loads = [], parts = [];
    for (let i = 0; i < ROUNDS; i++) {
      const n = Number(await p.eval(`document.body.dataset.refreshes`));
      const text = i % 2 ? '' : 'f';
      await p.eval(`(() => { const s = document.getElementById('search'); s.value = '${text}'; s.dispatchEvent(new Event('input')); })()`);
      await waitFor(p, `Number(document.body.dataset.refreshes) > ${n}`);
      loads.push(Number(await p.eval(`document.body.dataset.loadMs`)));
      const lp = await p.eval(`document.body.dataset.loadParts`); /* absent before 2026-11-28 */
      if (lp) parts.push(JSON.parse(lp));
    }
    console.log(`refresh ${stats(loads)}`);
    for (const k of Object.keys(parts[0] || {}))
      if (parts.every((x) => typeof x[k] === 'number')) console.log(`  ${k} ${stats(parts.map((x) => x[k]))}`);
    const draws = [];
    for (let i = 0; i < ROUNDS; i++) {
      await p.eval(`window.dispatchEvent(new Event('resize'))`);
      draws.push(Number(await p.eval(`document.body.dataset.drawMs`)));
    }
    console.log(`draw ${stats(draws)}`);
    console.log(`drawn ${await p.eval(`document.body.dataset.drawn`)}`);
  } catch (e) {
    console.log('FAIL: ' + (e.stack || e));
    process.exitCode = 1;
  } finally {
    b.close();
  }
})();
