#!/usr/bin/env python3
"""svg_check.py SVG CANOPY_JSON OUTDIR

Loads canopy's flame graph in headless Chromium and checks it:
  - the page's own script runs without errors (an error listener is injected first);
  - every frame rectangle's width is its total / the graph's total * the drawable width,
    both as attribute and as rendered (getBBox);
  - frames carry the totals of canopy's JSON tree for the same query (matched by path);
  - click-to-zoom makes a frame full width and unzoom restores it; the search box's
    function highlights matches and reports their share;
  - a PNG screenshot renders, and its root-level bar is as wide in pixels as its rect.
Prints one line per check; exits 1 on the first failure.
Environment: CHROMIUM (default /usr/bin/chromium)."""
import html
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import zlib

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]

PROBE_HEAD = """<script type="text/ecmascript"><![CDATA[
window.__errors = [];
window.addEventListener('error', function (e) { window.__errors.push(String(e.message)); });
]]></script>"""

PROBE_TAIL = """<script type="text/ecmascript"><![CDATA[
(function () {
  var out = {errors: window.__errors.slice(), frames: []};
  try {
    var cf = window.canopyFlame;
    out.api = !!cf;
    var W = +document.documentElement.getAttribute('data-w');
    var PAD = +document.documentElement.getAttribute('data-pad');
    out.total = cf.total; out.drawable = W - 2 * PAD;
    cf.frames.forEach(function (f) {
      out.frames.push({n: f.name, x: f.x, w: f.w, d: f.d, k: f.g.getAttribute('data-k'),
                       rw: +f.rect.getAttribute('width'), bw: f.rect.getBBox().width,
                       fill: f.rect.getAttribute('fill'), text: f.text.textContent});
    });
    var widest = 0;
    cf.frames.forEach(function (f, i) { if (f.d === 1 && f.w > cf.frames[widest].w * (cf.frames[widest].d === 1 ? 1 : 0)) widest = i; });
    var z = cf.frames[widest];
    cf.zoom(widest);
    out.zoomed = {n: z.name, w: +z.rect.getAttribute('width'),
                  hidden: cf.frames.filter(function (f) { return f.g.style.display === 'none'; }).length};
    cf.unzoom();
    out.unzoomed = +z.rect.getAttribute('width');
    out.search = cf.search(cf.frames[0].name);
    out.matches = document.querySelectorAll('g.f.match').length;
    out.matchedText = document.getElementById('matched').textContent;
    cf.search('');
  } catch (e) { out.errors.push('probe: ' + e.message); }
  var t = document.createElementNS('http://www.w3.org/2000/svg', 'text');
  t.setAttribute('id', 'canopy-probe');
  t.textContent = JSON.stringify(out);
  document.documentElement.appendChild(t);
})();
]]></script>"""


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def run_chromium(args, timeout=120):
    with tempfile.TemporaryDirectory() as prof:
        return subprocess.run([CHROMIUM] + FLAGS + ["--user-data-dir=" + prof] + args,
                              capture_output=True, timeout=timeout)


def png_pixels(path):
    """Decodes an 8-bit RGB/RGBA non-interlaced PNG: (width, height, rows of bytes, bpp)."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, w = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and ctype in (2, 6) and interlace == 0, (depth, ctype, interlace)
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev = [], bytearray(stride)
    for y in range(h):
        ft = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if ft == 1:
                line[i] = (line[i] + a) & 255
            elif ft == 2:
                line[i] = (line[i] + b) & 255
            elif ft == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif ft == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, rows, bpp


def json_paths(tree):
    """{(name, ..., name): total} for every node of canopy's JSON tree."""
    out = {}

    def walk(node, path):
        p = path + (node["name"],)
        out[p] = out.get(p, 0) + node["total"]
        for c in node.get("children", []):
            walk(c, p)
    for r in tree["roots"]:
        walk(r, ())
    return out


def main(svg_path, json_path, outdir):
    svg = open(svg_path, encoding="utf-8").read()
    m = re.search(r"<svg[^>]*>", svg)
    probe = svg[:m.end()] + PROBE_HEAD + svg[m.end():]
    probe = probe[:probe.rindex("</svg>")] + PROBE_TAIL + "</svg>\n"
    probe_path = os.path.join(outdir, "probe.svg")
    open(probe_path, "w", encoding="utf-8").write(probe)
    r = run_chromium(["--dump-dom", "file://" + os.path.abspath(probe_path)])
    dom = r.stdout.decode("utf-8", "replace")
    m = re.search(r'<text id="canopy-probe">(.*?)</text>', dom, re.S)
    if not m:
        fail("the probe did not run (no result in the DOM): " + r.stderr.decode()[-500:])
    res = json.loads(html.unescape(m.group(1)))
    if res["errors"]:
        fail("script errors: %s" % res["errors"])
    if not res.get("api") or not res["frames"]:
        fail("no frames or no window.canopyFlame")
    print("ok page loads without script errors (%d frames)" % len(res["frames"]))

    scale = res["drawable"] / res["total"]
    for f in res["frames"]:
        want = f["w"] * scale
        if abs(f["rw"] - want) > 0.011 or abs(f["bw"] - want) > 0.011:
            fail("frame %r: width %.3f (rendered %.3f), want %.3f" % (f["n"], f["rw"], f["bw"], want))
    print("ok every rect width = total / graph total * %.0f px" % res["drawable"])

    tree = json.load(open(json_path))
    if abs(res["total"] - sum(abs(r["total"]) for r in tree["roots"])) > 1e-6 * res["total"]:
        fail("graph total %g, canopy total %g" % (res["total"], tree["total"]))
    paths = json_paths(tree)
    frames = sorted(res["frames"], key=lambda f: (f["d"], f["x"]))
    path_of, checked = {}, 0
    for i, f in enumerate(frames):
        if f["k"] == "merged":
            continue
        parent = ()
        if f["d"] > 0:
            cands = [j for j, g in enumerate(frames) if g["d"] == f["d"] - 1 and g["x"] <= f["x"] + 1e-9
                     and f["x"] + f["w"] <= g["x"] + g["w"] + 1e-6 * res["total"]]
            if not cands:
                fail("frame %r has no parent box" % f["n"])
            parent = path_of[cands[0]]
        path_of[i] = parent + (f["n"],)
        want = paths.get(path_of[i])
        if want is None or abs(abs(want) - f["w"]) > 1e-6 * max(1, abs(want)):
            fail("frame %s: width %g, canopy total %s" % (";".join(path_of[i]), f["w"], want))
        checked += 1
    print("ok %d frames carry canopy's node totals (by call path)" % checked)

    if abs(res["zoomed"]["w"] - res["drawable"]) > 0.01 or abs(res["unzoomed"] - [
            f["rw"] for f in res["frames"] if f["n"] == res["zoomed"]["n"]][0]) > 0.01:
        fail("zoom: %r" % res["zoomed"])
    print("ok click-to-zoom widens %r to the full width and unzoom restores it" % res["zoomed"]["n"])
    if res["matches"] < 1 or not res["matchedText"].startswith("Matched: "):
        fail("search: %r" % res)
    print("ok search highlights %d frames (%s)" % (res["matches"], res["matchedText"]))

    height = int(re.search(r'height="(\d+)"', svg).group(1))
    png = os.path.join(outdir, "flame.png")
    run_chromium(["--screenshot=" + png, "--window-size=1200,%d" % max(height + 100, 400),
                  "--hide-scrollbars", "file://" + os.path.abspath(svg_path)])
    if not os.path.exists(png):
        fail("no screenshot")
    w, h, rows, bpp = png_pixels(png)
    root = max((f for f in res["frames"] if f["d"] == 0), key=lambda f: f["w"])
    icicle = 'data-icicle="1"' in svg
    ys = [int(float(v)) for v in re.findall(r'<rect x="[\d.]+" y="([\d.]+)" width="[\d.]+" height="15.0"', svg)]
    y = (min(ys) if icicle else max(ys)) + 2  # inside the root row, above its text baseline
    row = rows[y]
    bg = row[0:3]
    xs = [x for x in range(w) if row[x * bpp:x * bpp + 3] != bg]
    colours = {row[x * bpp:x * bpp + 3] for x in xs}
    span = (max(xs) - min(xs) + 1) if xs else 0
    want = sum(f["rw"] for f in res["frames"] if f["d"] == 0)
    if abs(span - want) > 3:
        fail("screenshot: root row spans %d px, rects say %.1f" % (span, want))
    print("ok screenshot %dx%d: root row spans %d px (rects %.1f), %d colours" % (w, h, span, want, len(colours)))


if __name__ == "__main__":
    main(*sys.argv[1:4])
