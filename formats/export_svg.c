/* export_svg.c — flame graphs (and icicle graphs) as one self-contained SVG file.
 *
 * The query's tree is laid out once here: a node's width is proportional to its total
 * (|total|; for a differential tree (base + new) / 2, so children always fit inside their
 * parent), siblings left to right in the tree's order, roots at the bottom (flame) or the
 * top (icicle: --invert and --callers). Siblings narrower than 0.1% of the whole width
 * are merged into one grey "(N small frames)" box and not descended into, which bounds
 * the file to about a thousand boxes per level whatever the profile's size.
 * Each box is an SVG group carrying its model (data-x, data-w in weight units, data-d
 * depth, data-n full name) with a <title> tooltip; names are truncated with an ellipsis
 * to the box width. A small embedded script (no external resources) adds click to zoom,
 * a search box that highlights matches and reports the matched share, and re-truncates
 * names on zoom; it exposes window.canopyFlame for tests.
 * Colours: by library (a warm hue from a hash of its name), kernel frames blue-violet,
 * JIT frames green, script URLs aqua, unknown grey; differential graphs use red for growth
 * and blue for shrinkage, stronger with the size of the change.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "formats_internal.h"

#define SVG_W     1200.0
#define PAD       10.0
#define FRAME_H   16.0
#define TOP       56.0
#define BOTTOM    28.0
#define CHAR_W    7.2 /* 12px monospace advance */
#define MIN_SHARE 0.001

/* One box to draw: node >= 0, or -1 for merged small siblings (count, sums). */
typedef struct box {
    int32_t node;
    int32_t depth;
    double x, w;
    int32_t merged;
    double m_total, m_base, m_new;
} box;

typedef struct layout {
    const cn_fmt__flame *f;
    box *boxes;
    size_t n, cap;
    int32_t max_depth;
    double min_w;
} layout;

static double node_width(const cn_fmt__flame *f, int32_t n)
{
    if (f->base)
        return (fabs(f->base[n]) + fabs(f->newv[n])) / 2;
    return fabs(f->t->nodes[n].total);
}

static int push_box(layout *l, box b)
{
    if (l->n == l->cap && CN_RESERVE(l->boxes, l->cap, l->n + 1) < 0)
        return -ENOMEM;
    l->boxes[l->n++] = b;
    if (b.depth > l->max_depth)
        l->max_depth = b.depth;
    return 0;
}

/* Lays out the siblings starting at `first` from x at `depth`. Explicit recursion: depth
 * is bounded by the tree's depth, which the engine's stacks bound. */
static int lay_out(layout *l, int32_t first, double x, int32_t depth)
{
    const cn_fmt__flame *f = l->f;
    box small = {.node = -1, .depth = depth};
    for (int32_t c = first; c >= 0; c = f->t->nodes[c].next_sibling) {
        double w = node_width(f, c);
        if (w <= 0)
            continue;
        if (w < l->min_w) {
            small.merged++;
            small.w += w;
            small.m_total += f->t->nodes[c].total;
            if (f->base) {
                small.m_base += f->base[c];
                small.m_new += f->newv[c];
            }
            continue;
        }
        int rc = push_box(l, (box){.node = c, .depth = depth, .x = x, .w = w});
        if (rc < 0)
            return rc;
        if ((rc = lay_out(l, f->t->nodes[c].first_child, x, depth + 1)) < 0)
            return rc;
        x += w;
    }
    if (small.merged > 0 && small.w >= l->min_w) {
        small.x = x;
        return push_box(l, small);
    }
    return 0;
}

static uint32_t fnv1a(const char *s)
{
    uint32_t h = 2166136261u;
    for (; s && *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

/* The fill of box b, as CSS hsl(). */
static void box_fill(const cn_fmt__flame *f, const box *b, double max_delta, char *buf, size_t len)
{
    if (f->base) {
        double d = b->node >= 0 ? f->newv[b->node] - f->base[b->node] : b->m_new - b->m_base;
        double r = max_delta > 0 ? fabs(d) / max_delta : 0;
        int light = (int)lround(94 - 44 * sqrt(r));
        if (d > 0)
            snprintf(buf, len, "hsl(0,85%%,%d%%)", light);
        else if (d < 0)
            snprintf(buf, len, "hsl(220,85%%,%d%%)", light);
        else
            snprintf(buf, len, "hsl(0,0%%,92%%)");
        return;
    }
    if (b->node < 0) {
        snprintf(buf, len, "hsl(0,0%%,78%%)");
        return;
    }
    int32_t func = f->t->nodes[b->node].func;
    int32_t res = cn_agg_func_resource(f->p, func);
    const char *lib = res >= 0 ? cn_agg_resource_name(f->p, res) : NULL;
    uint32_t hl = fnv1a(lib), hf = fnv1a(cn_agg_func_name(f->p, func));
    switch (res >= 0 ? cn_agg_resource_kind_of(f->p, res) : CN_AGG_RES_OTHER) {
    case CN_AGG_RES_KERNEL:
        snprintf(buf, len, "hsl(%u,60%%,%u%%)", 240 + hf % 20, 68 + hf % 8);
        break;
    case CN_AGG_RES_JIT:
        snprintf(buf, len, "hsl(%u,55%%,%u%%)", 105 + hf % 25, 52 + hf % 10);
        break;
    case CN_AGG_RES_URL:
        snprintf(buf, len, "hsl(%u,60%%,%u%%)", 178 + hl % 17, 55 + hf % 10);
        break;
    case CN_AGG_RES_PYTHON: /* Python functions: yellow-green, apart from native code */
        snprintf(buf, len, "hsl(%u,65%%,%u%%)", 62 + hl % 14, 50 + hf % 10);
        break;
    case CN_AGG_RES_LIBRARY:
        snprintf(buf, len, "hsl(%u,%u%%,%u%%)", hl % 56, 70 + (hl >> 8) % 16,
                 52 + (hl >> 16) % 8 + hf % 6);
        break;
    default:
        snprintf(buf, len, "hsl(35,18%%,%u%%)", 66 + hf % 8);
    }
}

static const char *kind_name(const cn_fmt__flame *f, const box *b)
{
    if (b->node < 0)
        return "merged";
    int32_t res = cn_agg_func_resource(f->p, f->t->nodes[b->node].func);
    switch (res >= 0 ? cn_agg_resource_kind_of(f->p, res) : CN_AGG_RES_OTHER) {
    case CN_AGG_RES_KERNEL:
        return "kernel";
    case CN_AGG_RES_JIT:
        return "jit";
    case CN_AGG_RES_URL:
        return "url";
    case CN_AGG_RES_PYTHON:
        return "python";
    case CN_AGG_RES_LIBRARY:
        return "lib";
    default:
        return "other";
    }
}

/* A value in display units: integers plain, else 4 significant digits. */
static void put_value(FILE *out, double v)
{
    if (v == floor(v) && fabs(v) < 1e15)
        fprintf(out, "%.0f", v);
    else
        fprintf(out, "%.4g", v);
}

static void put_tooltip(const cn_fmt__flame *f, const box *b, double denom, FILE *out)
{
    double scale = cn_agg_profile_scale(f->p);
    const char *unit = cn_agg_unit_name(cn_agg_profile_unit(f->p));
    if (b->node < 0) {
        fprintf(out, "(%d small frames merged)\ntotal ", (int)b->merged);
        put_value(out, b->m_total * scale);
        fprintf(out, " %s (%.2f%%)", unit, denom > 0 ? 100 * b->m_total / denom : 0);
        return;
    }
    const cn_agg_node *nd = &f->t->nodes[b->node];
    int32_t res = cn_agg_func_resource(f->p, nd->func);
    cn_fmt__xml_text(out, cn_agg_func_name(f->p, nd->func), -1);
    if (res >= 0) {
        fputs("\nlibrary: ", out);
        cn_fmt__xml_text(out, cn_agg_resource_name(f->p, res), -1);
    }
    if (f->base) {
        double base = f->base[b->node], nv = f->newv[b->node], d = nv - base;
        fputs("\nbase: ", out);
        put_value(out, base * scale);
        fputs(", new: ", out);
        put_value(out, nv * scale);
        fprintf(out, " %s\nchange: %s", unit, d > 0 ? "+" : "");
        put_value(out, d * scale);
        if (base != 0)
            fprintf(out, " (%+.1f%%)", 100 * d / fabs(base));
        return;
    }
    fputs("\ntotal: ", out);
    put_value(out, nd->total * scale);
    fprintf(out, " %s (%.2f%%)\nself: ", unit, denom > 0 ? 100 * nd->total / denom : 0);
    put_value(out, nd->self * scale);
    fprintf(out, " %s", unit);
}

static const char SCRIPT[] =
    "<script type=\"text/ecmascript\"><![CDATA[\n"
    "(function () {\n"
    "  'use strict';\n"
    "  var root = document.documentElement;\n"
    "  var W = +root.getAttribute('data-w'), PAD = +root.getAttribute('data-pad');\n"
    "  var CW = +root.getAttribute('data-cw'), TOTAL = +root.getAttribute('data-total');\n"
    "  var HL = 'hsl(300,90%,60%)';\n"
    "  var frames = [].slice.call(document.querySelectorAll('g.f')).map(function (g) {\n"
    "    var r = g.querySelector('rect');\n"
    "    return {g: g, rect: r, text: g.querySelector('text'), x: +g.getAttribute('data-x'),\n"
    "            w: +g.getAttribute('data-w'), d: +g.getAttribute('data-d'),\n"
    "            name: g.getAttribute('data-n'), fill: r.getAttribute('fill')};\n"
    "  });\n"
    "  var details = document.getElementById('details');\n"
    "  var reset = document.getElementById('reset');\n"
    "  var matched = document.getElementById('matched');\n"
    "  var zoomed = null;\n"
    "  function fit(name, px) {\n"
    "    var n = Math.floor((px - 6) / CW);\n"
    "    var chars = Array.from(name);\n"
    "    if (n < 3) return '';\n"
    "    return chars.length <= n ? name : chars.slice(0, n - 1).join('') + '\\u2026';\n"
    "  }\n"
    "  function place(f, px, pw) {\n"
    "    f.g.style.display = '';\n"
    "    f.rect.setAttribute('x', (PAD + px).toFixed(2));\n"
    "    f.rect.setAttribute('width', pw.toFixed(2));\n"
    "    f.text.setAttribute('x', (PAD + px + 3).toFixed(2));\n"
    "    f.text.textContent = fit(f.name, pw);\n"
    "  }\n"
    "  var EPS = 1e-9 * TOTAL;\n"
    "  function zoom(z) {\n"
    "    var x0 = z.x, x1 = z.x + z.w, s = (W - 2 * PAD) / z.w;\n"
    "    frames.forEach(function (f) {\n"
    "      if (f.d < z.d && f.x <= x0 + EPS && f.x + f.w >= x1 - EPS) {\n"
    "        place(f, 0, W - 2 * PAD); f.g.classList.add('parent');\n"
    "      } else if (f.d >= z.d && f.x >= x0 - EPS && f.x + f.w <= x1 + EPS) {\n"
    "        place(f, (f.x - x0) * s, f.w * s); f.g.classList.remove('parent');\n"
    "      } else {\n"
    "        f.g.style.display = 'none';\n"
    "      }\n"
    "    });\n"
    "    zoomed = z;\n"
    "    reset.classList.remove('hide');\n"
    "  }\n"
    "  function unzoom() {\n"
    "    var s = (W - 2 * PAD) / TOTAL;\n"
    "    frames.forEach(function (f) { place(f, f.x * s, f.w * s); "
    "f.g.classList.remove('parent'); });\n"
    "    zoomed = null;\n"
    "    reset.classList.add('hide');\n"
    "  }\n"
    "  function search(term) {\n"
    "    var re = null;\n"
    "    if (term) { try { re = new RegExp(term); } catch (e) { re = null; } }\n"
    "    var spans = [];\n"
    "    frames.forEach(function (f) {\n"
    "      var hit = !!term && (re ? re.test(f.name) : f.name.indexOf(term) >= 0);\n"
    "      f.rect.setAttribute('fill', hit ? HL : f.fill);\n"
    "      f.g.classList.toggle('match', hit);\n"
    "      if (hit) spans.push([f.x, f.x + f.w]);\n"
    "    });\n"
    "    spans.sort(function (a, b) { return a[0] - b[0]; });\n"
    "    var sum = 0, end = -Infinity;\n"
    "    spans.forEach(function (sp) {\n"
    "      if (sp[0] >= end) { sum += sp[1] - sp[0]; end = sp[1]; }\n"
    "      else if (sp[1] > end) { sum += sp[1] - end; end = sp[1]; }\n"
    "    });\n"
    "    var share = TOTAL > 0 ? 100 * sum / TOTAL : 0;\n"
    "    matched.textContent = term ? 'Matched: ' + share.toFixed(2) + '%' : '';\n"
    "    return share;\n"
    "  }\n"
    "  frames.forEach(function (f) {\n"
    "    f.g.addEventListener('click', function () { zoom(f); });\n"
    "    f.g.addEventListener('mouseover', function () {\n"
    "      var t = f.g.querySelector('title');\n"
    "      details.textContent = t ? t.textContent.split('\\n').join('  |  ') : f.name;\n"
    "    });\n"
    "    f.g.addEventListener('mouseout', function () { details.textContent = ' '; });\n"
    "  });\n"
    "  reset.addEventListener('click', unzoom);\n"
    "  var box = document.getElementById('search');\n"
    "  if (box) box.addEventListener('input', function () { search(box.value); });\n"
    "  document.addEventListener('keydown', function (e) {\n"
    "    if (e.key === 'Escape') { unzoom(); if (box) { box.value = ''; search(''); } }\n"
    "  });\n"
    "  window.canopyFlame = {frames: frames, zoom: function (i) { zoom(frames[i]); },\n"
    "                        unzoom: unzoom, search: search, total: TOTAL,\n"
    "                        zoomed: function () { return zoomed; }};\n"
    "})();\n"
    "]]></script>\n";

static void write_header(const cn_fmt__flame *f, const layout *l, double total_w, double height,
                         FILE *out)
{
    fprintf(out,
            "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
            "<svg version=\"1.1\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
            "xmlns=\"http://www.w3.org/2000/svg\" data-w=\"%.0f\" data-pad=\"%.0f\" "
            "data-cw=\"%.1f\" data-total=\"%.17g\" data-icicle=\"%d\" data-diff=\"%d\">\n",
            SVG_W, height, SVG_W, height, SVG_W, PAD, CHAR_W, total_w, f->icicle ? 1 : 0,
            f->base ? 1 : 0);
    fputs("<style>\n"
          "text { font-family: 'DejaVu Sans Mono', Menlo, Consolas, monospace; "
          "font-size: 12px; fill: #000; }\n"
          "g.f text { pointer-events: none; }\n"
          "g.f rect { stroke: #fff; stroke-width: 0.5; }\n"
          "g.f:hover rect { stroke: #000; stroke-width: 0.8; cursor: pointer; }\n"
          "g.parent rect { opacity: 0.6; }\n"
          "#title { font-size: 17px; }\n"
          "#reset, #matched { cursor: pointer; }\n"
          ".hide { display: none; }\n"
          "</style>\n",
          out);
    fprintf(out, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#fafafa\"/>\n", SVG_W,
            height);
    fprintf(out, "<text id=\"title\" x=\"%.0f\" y=\"22\" text-anchor=\"middle\">", SVG_W / 2);
    cn_fmt__xml_text(out,
                     f->title ? f->title
                              : (f->base     ? "Differential flame graph"
                                 : f->icicle ? "Icicle graph"
                                             : "Flame graph"),
                     120);
    fputs("</text>\n", out);
    fprintf(out, "<text id=\"subtitle\" x=\"%.0f\" y=\"40\" text-anchor=\"middle\">", SVG_W / 2);
    cn_fmt__xml_text(out, f->subtitle ? f->subtitle : "", 140);
    fputs("</text>\n", out);
    fprintf(out,
            "<text id=\"reset\" class=\"hide\" x=\"%.0f\" y=\"22\">Reset zoom</text>\n"
            "<foreignObject x=\"%.0f\" y=\"6\" width=\"240\" height=\"26\">"
            "<input xmlns=\"http://www.w3.org/1999/xhtml\" id=\"search\" type=\"search\" "
            "placeholder=\"Search (regex)\" style=\"width:228px;font:12px monospace\"/>"
            "</foreignObject>\n"
            "<text id=\"matched\" x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\"> </text>\n"
            "<text id=\"details\" x=\"%.0f\" y=\"%.0f\"> </text>\n",
            PAD, SVG_W - PAD - 240, SVG_W - PAD, height - 10, PAD, height - 10);
    (void)l;
}

static void write_boxes(const cn_fmt__flame *f, const layout *l, double total_w, double denom,
                        FILE *out)
{
    double max_delta = 0;
    for (size_t i = 0; f->base && i < l->n; i++) {
        const box *b = &l->boxes[i];
        double d = b->node >= 0 ? f->newv[b->node] - f->base[b->node] : b->m_new - b->m_base;
        max_delta = fabs(d) > max_delta ? fabs(d) : max_delta;
    }
    double s = total_w > 0 ? (SVG_W - 2 * PAD) / total_w : 0;
    char fill[64];
    fputs("<g id=\"frames\">\n", out);
    for (size_t i = 0; i < l->n; i++) {
        const box *b = &l->boxes[i];
        double y = f->icicle ? TOP + b->depth * FRAME_H : TOP + (l->max_depth - b->depth) * FRAME_H;
        double px = b->x * s, pw = b->w * s;
        char merged_name[64];
        const char *name = merged_name;
        if (b->node >= 0)
            name = cn_agg_func_name(f->p, f->t->nodes[b->node].func);
        else
            snprintf(merged_name, sizeof(merged_name), "(%d small frames)", (int)b->merged);
        box_fill(f, b, max_delta, fill, sizeof(fill));
        fprintf(out,
                "<g class=\"f\" data-k=\"%s\" data-x=\"%.17g\" data-w=\"%.17g\" "
                "data-d=\"%d\" data-n=\"",
                kind_name(f, b), b->x, b->w, (int)b->depth);
        cn_fmt__xml_text(out, name, -1);
        fputs("\"><title>", out);
        put_tooltip(f, b, denom, out);
        fprintf(out,
                "</title><rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" "
                "fill=\"%s\" rx=\"2\"/><text x=\"%.2f\" y=\"%.1f\">",
                PAD + px, y, pw, FRAME_H - 1, fill, PAD + px + 3, y + FRAME_H - 4.5);
        long chars = (long)floor((pw - 6) / CHAR_W);
        if (chars >= 3) {
            size_t len = 0;
            for (const unsigned char *c = (const unsigned char *)name; *c; c++)
                len += (*c & 0xc0) != 0x80;
            cn_fmt__xml_text(out, name, (long)len <= chars ? -1 : chars - 1);
        }
        fputs("</text></g>\n", out);
    }
    fputs("</g>\n", out);
}

int cn_fmt__write_flame(const cn_fmt__flame *f, FILE *out, cn_err *err)
{
    layout l = {.f = f, .max_depth = 0};
    double total_w = 0, denom = 0;
    for (int32_t r = f->t->first_root; r >= 0; r = f->t->nodes[r].next_sibling) {
        total_w += node_width(f, r);
        denom += fabs(f->t->nodes[r].total);
    }
    l.min_w = total_w * MIN_SHARE;
    int rc = lay_out(&l, f->t->first_root, 0, 0);
    if (rc < 0) {
        free(l.boxes);
        return cn_err_set(err, rc, "SVG output: out of memory");
    }
    int32_t levels = l.n ? l.max_depth + 1 : 1;
    double height = TOP + levels * FRAME_H + BOTTOM;
    write_header(f, &l, total_w, height, out);
    write_boxes(f, &l, total_w, denom, out);
    fputs(SCRIPT, out);
    fputs("</svg>\n", out);
    free(l.boxes);
    return cn_fmt__finish_output(out, "SVG", err);
}

/* "total 123 samples · tree · merge:foo, drop:bar" */
static char *make_subtitle(const cn_agg_profile *p, const cn_agg_tree *t, const cn_agg_query *q)
{
    char *s = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&s, &len);
    if (!m)
        return NULL;
    fputs("total ", m);
    put_value(m, t->total * cn_agg_profile_scale(p));
    fprintf(m, " %s \xc2\xb7 %s", cn_agg_unit_name(cn_agg_profile_unit(p)),
            cn_agg_view_name(t->view));
    if (q->view_func)
        fprintf(m, " %s", q->view_func);
    for (size_t i = 0; i < q->n_transforms; i++) {
        char *spec = cn_agg_transform_format(&q->transforms[i]);
        fprintf(m, "%s%s", i ? ", " : " \xc2\xb7 ", spec ? spec : "?");
        free(spec);
    }
    if (fclose(m) != 0) {
        free(s);
        return NULL;
    }
    return s;
}

int cn_fmt_write_svg(cn_agg_profile *p, const cn_agg_query *q, const cn_fmt_write_opts *o,
                     FILE *out, cn_err *err)
{
    if (!p || !q || !out)
        return cn_err_set(err, -EINVAL, "SVG output: bad arguments");
    cn_agg_view view = q->view == CN_AGG_VIEW_FUNCTIONS ? CN_AGG_VIEW_TREE : q->view;
    cn_agg_tree *tree = NULL;
    int rc = cn_fmt__run_view(p, q, view, &tree, err);
    if (rc < 0)
        return rc;
    char *subtitle = make_subtitle(p, tree, q);
    cn_fmt__flame f = {
        .p = p,
        .t = tree,
        .icicle = view == CN_AGG_VIEW_INVERTED || view == CN_AGG_VIEW_CALLERS,
        .title = o ? o->title : NULL,
        .subtitle = subtitle,
    };
    rc = cn_fmt__write_flame(&f, out, err);
    free(subtitle);
    cn_agg_tree_free(tree);
    return rc;
}
