/* transform.c — the transforms of docs/calltree.md §2 on func-level stack tables.
 *
 * Every transform is one pass over the input table in row order (prefix < row, so a
 * row's parent has always been handled): per-row state (a match counter, "F seen", the
 * row before the outermost F …) is derived from the parent's, which makes the stack rule
 * an incremental form of the per-sample path rule of §2. Two shapes:
 *  - map only (drop, hide, prune, collapse, focus-inverted, search): rows are unchanged and each
 *    maps to itself, an ancestor, or -1 (dropped);
 *  - rebuild (all others): a new table is interned; map[r] is the new row of r's rewritten
 *    path, and also the row r's children attach under.
 * Functions and path elements match by displayed name (string id of the func's name).
 * The implementation filter is always `combined` (native-only), so no frame is
 * transparent.
 */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "q_engine.h"

typedef struct tfctx {
    cn_agg_profile *p;
    const cn_agg__qtable *in;
    cn_agg__tfout *o;
    int32_t *st;  /* per input row state */
    int32_t *nid; /* name ids of the path (or the F argument in nid[0]) */
    int32_t k;    /* path length */
    uint8_t *lib; /* resource -> matches LIB */
    int32_t libfunc;
    uint8_t *hit; /* search: func -> its name, library or file contains the text */
} tfctx;

static inline int32_t in_name(const tfctx *c, int32_t r)
{
    return c->p->func_name[c->in->func[r]];
}

static inline int32_t out_name(const tfctx *c, int32_t r)
{
    return c->p->func_name[c->o->t.func[r]];
}

static inline bool in_lib(const tfctx *c, int32_t func)
{
    int32_t res = c->p->func_res[func];
    return res >= 0 && c->lib[res];
}

#define INTERN(dst, pre, fn)                                                                       \
    do {                                                                                           \
        (dst) = cn_agg__qt_intern(&c->o->t, (pre), (fn));                                          \
        if ((dst) < 0)                                                                             \
            return -ENOMEM;                                                                        \
    } while (0)

/* ---- map-only transforms ------------------------------------------------------------ */

/* The match state after row r for a path transform: 0..k-1 elements matched, k when the
 * whole path matched at r or above, -1 when the match failed. */
static inline int32_t path_state(const tfctx *c, int32_t r)
{
    int32_t par = c->in->prefix[r];
    int32_t sp = par < 0 ? 0 : c->st[par];
    if (sp < 0 || sp == c->k)
        return sp;
    return in_name(c, r) == c->nid[sp] ? sp + 1 : -1;
}

static int tf_map_only(tfctx *c, cn_agg_tf_kind kind)
{
    const cn_agg__qtable *in = c->in;
    int32_t *map = c->o->map, *st = c->st;
    c->o->same = true;
    for (int32_t r = 0; r < (int32_t)in->n; r++) {
        int32_t par = in->prefix[r];
        switch (kind) {
        case CN_AGG_TF_FOCUS_INVERTED: {
            int32_t x = r;
            bool ok = true;
            for (int32_t j = 0; ok && j < c->k; j++) {
                ok = x >= 0 && in_name(c, x) == c->nid[j];
                if (ok && j < c->k - 1)
                    x = in->prefix[x];
            }
            map[r] = ok ? x : -1;
            break;
        }
        case CN_AGG_TF_DROP:
            st[r] = (par >= 0 && st[par]) || in_name(c, r) == c->nid[0];
            map[r] = st[r] ? -1 : r;
            break;
        case CN_AGG_TF_SEARCH: /* the Firefox Profiler's search: keep a sample when some
                                  function of its stack matches (an ancestor's match
                                  carries down) */
            st[r] = (par >= 0 && st[par]) || c->hit[in->func[r]];
            map[r] = st[r] ? r : -1;
            break;
        case CN_AGG_TF_HIDE:
            st[r] = path_state(c, r);
            map[r] = st[r] == c->k ? -1 : r;
            break;
        case CN_AGG_TF_PRUNE: {
            int32_t sp = par < 0 ? 0 : st[par];
            st[r] = path_state(c, r);
            if (sp == c->k)
                map[r] = map[par];
            else
                map[r] = st[r] == c->k ? par : r;
            break;
        }
        case CN_AGG_TF_COLLAPSE:
            if (par >= 0 && st[par]) {
                st[r] = 1;
                map[r] = map[par];
            } else {
                st[r] = in_name(c, r) == c->nid[0];
                map[r] = r;
            }
            break;
        default:
            return -EINVAL;
        }
    }
    return 0;
}

/* ---- rebuilding transforms ---------------------------------------------------------- */

static int tf_focus(tfctx *c)
{
    for (int32_t r = 0; r < (int32_t)c->in->n; r++) {
        int32_t par = c->in->prefix[r], f = c->in->func[r];
        int32_t sp = par < 0 ? 0 : c->st[par];
        c->st[r] = path_state(c, r);
        c->o->map[r] = -1;
        if (sp == c->k)
            INTERN(c->o->map[r], c->o->map[par], f);
        else if (c->st[r] == c->k)
            INTERN(c->o->map[r], -1, f);
    }
    return 0;
}

static int tf_merge_node(tfctx *c)
{
    for (int32_t r = 0; r < (int32_t)c->in->n; r++) {
        int32_t par = c->in->prefix[r], f = c->in->func[r];
        int32_t sp = par < 0 ? 0 : c->st[par];
        int32_t at = par < 0 ? -1 : c->o->map[par];
        c->st[r] = path_state(c, r);
        if (sp != c->k && c->st[r] == c->k)
            c->o->map[r] = at; /* merged away: children and samples go to the parent */
        else
            INTERN(c->o->map[r], at, f);
    }
    return 0;
}

static int tf_by_func(tfctx *c, cn_agg_tf_kind kind)
{
    const int32_t F = c->nid[0];
    for (int32_t r = 0; r < (int32_t)c->in->n; r++) {
        int32_t par = c->in->prefix[r], f = c->in->func[r];
        int32_t at = par < 0 ? -1 : c->o->map[par];
        bool is = in_name(c, r) == F;
        int32_t *m = &c->o->map[r];
        switch (kind) {
        case CN_AGG_TF_FOCUS_FUNC: /* st: F is on the path */
            c->st[r] = (par >= 0 && c->st[par]) || is;
            *m = -1;
            if (par >= 0 && c->st[par])
                INTERN(*m, at, f);
            else if (is)
                INTERN(*m, -1, f);
            break;
        case CN_AGG_TF_FOCUS_SELF:
            *m = -1;
            if (is)
                INTERN(*m, -1, f);
            break;
        case CN_AGG_TF_MERGE:
            if (is)
                *m = at;
            else
                INTERN(*m, at, f);
            break;
        case CN_AGG_TF_COLLAPSE_DIRECT_REC:
            if (is && at >= 0 && out_name(c, at) == F)
                INTERN(*m, c->o->t.prefix[at], f); /* replaces the previous F */
            else
                INTERN(*m, at, f);
            break;
        case CN_AGG_TF_COLLAPSE_REC: { /* st: output row before the outermost F, or -2 */
            int32_t bp = par < 0 ? -2 : c->st[par];
            c->st[r] = bp != -2 ? bp : (is ? at : -2);
            INTERN(*m, is ? c->st[r] : at, f);
            break;
        }
        default:
            return -EINVAL;
        }
    }
    return 0;
}

static int tf_by_lib(tfctx *c, cn_agg_tf_kind kind)
{
    for (int32_t r = 0; r < (int32_t)c->in->n; r++) {
        int32_t par = c->in->prefix[r], f = c->in->func[r];
        int32_t at = par < 0 ? -1 : c->o->map[par];
        int32_t *m = &c->o->map[r];
        if (kind == CN_AGG_TF_FOCUS_LIB) {
            /* A func without a resource inherits its caller's category (§2.5). */
            int32_t res = c->p->func_res[f];
            c->st[r] = res >= 0 ? c->lib[res] : (par >= 0 ? c->st[par] : 0);
            if (c->st[r])
                INTERN(*m, at, f);
            else
                *m = at;
        } else if (!in_lib(c, f)) {
            INTERN(*m, at, f);
        } else if (at >= 0 && c->o->t.func[at] == c->libfunc) {
            *m = at; /* continues a run of LIB frames */
        } else {
            INTERN(*m, at, c->libfunc);
        }
    }
    return 0;
}

/* JProfiler's collapse recursions (§6.1) with merged-stack and recursion counters.
 *
 * Row r maps to the output row of its nearest input ancestor y whose output row is on
 * the output path of r's parent and carries r's name (an output path never shows a name
 * twice), else to a new row (map[parent], func). One depth-first pass over the input
 * rows, walking the input table's own child lists (no CSR, no explicit DFS stack of
 * children: a row's next sibling is taken when it is left), finds y exactly: the current
 * output path is a stack of (name, output row) with each name's position in it, so a
 * lookup is O(1); a recursion cuts the stack back to y's position for r's subtree (the
 * cut entries are saved and put back when the DFS leaves r). Output rows are interned
 * when the DFS enters a row, so a new row's parent is usually the row created just
 * before it (hot in cache). The same pass counts each name's input ancestors (r is a
 * recursion when its name is already on its input path) and sums subtree weights on
 * leaving a row, which gives "shown in the input tree" (total != 0 or a shown child)
 * without a separate sweep.
 *
 * Counters (§6.1, "original" = this transform's input tree): merged_stacks(m) = number of
 * shown input rows mapped to m, recursions(m) = those whose name occurs among their input
 * ancestors. They describe this collapse only: counters of an earlier collapse-all-rec
 * are not added in (its output has no recursion, so a second collapse gives 1 and 0 per
 * shown row, as §7.1.15 says for a tree without recursion). */
typedef struct car_ent {
    int32_t name, out;
} car_ent;

typedef struct car_frame { /* one input row on the DFS path */
    int32_t row;
    int32_t out;          /* output row it maps to */
    int32_t depth_before; /* output path depth when the DFS entered it */
    int32_t name;
    double total; /* subtree weight so far */
    uint8_t live_child, rec, pushed;
} car_frame;

typedef struct car_name { /* per name (string id) */
    int32_t in_cnt;       /* input ancestors with this name on the DFS path */
    int32_t out_pos;      /* position on the output path, or -1 */
} car_name;

static int tf_collapse_all_rec(tfctx *c, const double *self)
{
    const cn_agg__qtable *in = c->in;
    const cn_agg_profile *p = c->p;
    size_t n = in->n, ns = p->n_str ? p->n_str : 1;
    /* Frames, output path and saved entries are bounded by the input depth (a saved or
     * live output entry was pushed by a distinct row on the DFS path): grown on demand. */
    size_t cap = 64, nfr = 0, depth = 0, nsaved = 0;
    car_frame *fr = malloc(cap * sizeof(*fr));
    car_ent *ostk = malloc(cap * sizeof(*ostk));
    car_ent *saved = malloc(cap * sizeof(*saved));
    car_name *nmst = malloc(ns * sizeof(*nmst));
    int32_t *map = c->o->map;
    c->o->merged = calloc(n ? n : 1, sizeof(int32_t));
    c->o->recur = calloc(n ? n : 1, sizeof(int32_t));
    int rc = -ENOMEM;
    if (!fr || !ostk || !saved || !nmst || !c->o->merged || !c->o->recur)
        goto out;
    for (size_t i = 0; i < ns; i++)
        nmst[i] = (car_name){0, -1};
    int32_t *merged = c->o->merged, *recur = c->o->recur;
    const int32_t *name_of = p->func_name;
    int32_t e = in->roots.child;
    for (;;) {
        if (e >= 0) { /* enter e */
            if (nfr == cap) {
                size_t c1 = cap, c2 = cap, c3 = cap;
                if (CN_RESERVE(fr, c1, cap + 1) < 0 || CN_RESERVE(ostk, c2, cap + 1) < 0 ||
                    CN_RESERVE(saved, c3, cap + 1) < 0)
                    goto out;
                cap = c1 < c2 ? (c1 < c3 ? c1 : c3) : (c2 < c3 ? c2 : c3);
            }
            int32_t f = in->func[e], nm = name_of[f];
            car_name *ns_e = &nmst[nm];
            car_frame *x = &fr[nfr++];
            x->row = e;
            x->name = nm;
            x->depth_before = (int32_t)depth;
            x->total = self ? self[e] : 0;
            x->live_child = 0;
            x->rec = ns_e->in_cnt > 0;
            ns_e->in_cnt++;
            int32_t pos = ns_e->out_pos;
            assert(pos < 0 || (pos < (int32_t)depth && ostk[pos].name == nm));
            if (pos < 0) {
                int32_t m = cn_agg__qt_intern(&c->o->t, depth ? ostk[depth - 1].out : -1, f);
                if (m < 0)
                    goto out;
                x->out = m;
                x->pushed = 1;
                ostk[depth] = (car_ent){nm, m};
                ns_e->out_pos = (int32_t)depth++;
            } else {
                x->out = ostk[pos].out;
                x->pushed = 0;
                /* Saved deepest first, so restoring pops them shallowest first. */
                for (size_t j = depth; j-- > (size_t)pos + 1;) {
                    saved[nsaved++] = ostk[j];
                    nmst[ostk[j].name].out_pos = -1;
                }
                depth = (size_t)pos + 1;
            }
            /* Each output path or saved entry was pushed by a distinct row on the path. */
            assert(depth + nsaved <= nfr);
            map[e] = x->out;
            e = in->head[e].child;
            continue;
        }
        if (nfr == 0)
            break;
        /* leave the deepest row on the path */
        car_frame *x = &fr[--nfr];
        nmst[x->name].in_cnt--;
        size_t d0 = (size_t)x->depth_before;
        if (x->pushed) {
            nmst[x->name].out_pos = -1; /* x pushed its name at d0 */
        } else {
            for (size_t j = depth; j < d0; j++) {
                ostk[j] = saved[--nsaved];
                nmst[ostk[j].name].out_pos = (int32_t)j;
            }
        }
        depth = d0;
        assert(depth + nsaved <= nfr);
        bool live = x->total != 0 || x->live_child;
        if (live) {
            merged[x->out]++;
            recur[x->out] += x->rec;
        }
        if (nfr > 0) {
            fr[nfr - 1].total += x->total;
            fr[nfr - 1].live_child |= live;
        }
        e = in->link[x->row].sib;
    }
    rc = 0;
out:
    free(fr);
    free(ostk);
    free(saved);
    free(nmst);
    return rc;
}

/* ---- dispatch ------------------------------------------------------------------------ */

bool cn_agg__tf_needs_self(const cn_agg_transform *tf)
{
    return tf->kind == CN_AGG_TF_COLLAPSE_ALL_REC;
}

void cn_agg__tfout_free(cn_agg__tfout *o)
{
    cn_agg__qt_clear(&o->t);
    free(o->map);
    free(o->merged);
    free(o->recur);
    memset(o, 0, sizeof(*o));
}

/* Resolves the transform's names against the profile. */
/* Whether s contains one of text's comma-separated terms (each trimmed of spaces; empty
 * terms ignored), ignoring ASCII case; true when text has no term at all. */
static bool search_match(const char *s, const char *text)
{
    bool any = false;
    for (const char *t = text; *t;) {
        const char *end = strchr(t, ',');
        size_t len = end ? (size_t)(end - t) : strlen(t);
        const char *a = t, *b = t + len;
        while (a < b && isspace((unsigned char)*a))
            a++;
        while (b > a && isspace((unsigned char)b[-1]))
            b--;
        if (b > a) {
            any = true;
            for (const char *x = s; *x; x++)
                if (!strncasecmp(x, a, (size_t)(b - a)))
                    return true;
        }
        t += len + (end ? 1 : 0);
    }
    return !any;
}

/* search:TEXT: which funcs match by name, library or source file, as the Firefox
 * Profiler's search box matches a function's name and resource (its terms split at
 * commas, any may match). */
static int search_hits(tfctx *c, const char *text)
{
    cn_agg_profile *p = c->p;
    c->hit = calloc(p->n_func ? p->n_func : 1, 1);
    if (!c->hit)
        return -ENOMEM;
    for (size_t f = 0; f < p->n_func; f++) {
        int32_t res = p->func_res[f], file = p->func_file[f];
        c->hit[f] = search_match(p->str[p->func_name[f]], text) ||
                    (res >= 0 && search_match(p->str[p->res_name[res]], text)) ||
                    (file >= 0 && search_match(p->str[file], text));
    }
    return 0;
}

static int resolve_args(tfctx *c, const cn_agg_transform *tf)
{
    cn_agg_profile *p = c->p;
    c->k = (int32_t)tf->path_len;
    c->nid = malloc((tf->path_len ? tf->path_len : 1) * sizeof(*c->nid));
    if (!c->nid)
        return -ENOMEM;
    c->nid[0] = -2;
    if (tf->kind == CN_AGG_TF_SEARCH)
        return search_hits(c, tf->arg);
    for (size_t j = 0; j < tf->path_len; j++)
        c->nid[j] = cn_agg__q_name_id(p, tf->path[j]);
    if (tf->kind != CN_AGG_TF_FOCUS_LIB && tf->kind != CN_AGG_TF_COLLAPSE_LIB)
        return 0;
    c->lib = calloc(p->n_res ? p->n_res : 1, 1);
    if (!c->lib)
        return -ENOMEM;
    int32_t first = -1;
    for (size_t i = 0; i < p->n_res; i++) {
        c->lib[i] = strcmp(p->str[p->res_name[i]], tf->arg) == 0;
        if (c->lib[i] && first < 0)
            first = (int32_t)i;
    }
    c->libfunc = -1;
    if (tf->kind == CN_AGG_TF_COLLAPSE_LIB && first >= 0) {
        c->libfunc = cn_agg_func(p, tf->arg, first, NULL, 0);
        if (c->libfunc < 0)
            return c->libfunc;
    }
    return 0;
}

/* Carries collapse-all-rec counters through a later rebuilding transform: a row keeps
 * its counters when it survives as the same func. */
static int carry_counters(const cn_agg__qtable *in, const int32_t *merged_in,
                          const int32_t *recur_in, cn_agg__tfout *o)
{
    if (!merged_in || o->merged)
        return 0;
    size_t n = o->t.n ? o->t.n : 1;
    o->merged = calloc(n, sizeof(int32_t));
    o->recur = calloc(n, sizeof(int32_t));
    if (!o->merged || !o->recur)
        return -ENOMEM;
    for (size_t r = 0; r < in->n; r++) {
        int32_t m = o->map[r];
        if (m >= 0 && o->t.func[m] == in->func[r]) {
            o->merged[m] += merged_in[r];
            o->recur[m] += recur_in[r];
        }
    }
    return 0;
}

#ifndef NDEBUG
/* The row-map contract (q_engine.h, the top of this file), checked in debug builds once
 * per transform, in linear time: the input and output tables are in prefix < row order;
 * every map entry is -1 or an output row (an input row when the rows are unchanged); a
 * map-only transform maps a row to itself, an ancestor (an earlier row) or -1. */
static void check_map(const cn_agg__qtable *in, const cn_agg__tfout *o)
{
    int32_t nout = (int32_t)(o->same ? in->n : o->t.n);
    for (size_t r = 0; r < in->n; r++) {
        assert(in->prefix[r] >= -1 && in->prefix[r] < (int32_t)r);
        assert(o->map[r] >= -1 && o->map[r] < nout);
        assert(!o->same || o->map[r] <= (int32_t)r);
    }
    for (size_t r = 0; r < o->t.n; r++)
        assert(o->t.prefix[r] >= -1 && o->t.prefix[r] < (int32_t)r);
}
#endif

int cn_agg__tf_apply(cn_agg_profile *p, const cn_agg__qtable *in, const cn_agg_transform *tf,
                     const double *self, const int32_t *merged_in, const int32_t *recur_in,
                     cn_agg__tfout *o)
{
    tfctx c = {.p = p, .in = in, .o = o};
    size_t n = in->n ? in->n : 1;
    int rc = -ENOMEM;
    memset(o, 0, sizeof(*o));
    cn_agg__qt_init(&o->t);
    o->map = malloc(n * sizeof(*o->map));
    if (tf->kind != CN_AGG_TF_COLLAPSE_ALL_REC)
        c.st = malloc(n * sizeof(*c.st)); /* per-row state: every pass but collapse-all-rec */
    if (!o->map || (tf->kind != CN_AGG_TF_COLLAPSE_ALL_REC && !c.st))
        goto out;
    rc = resolve_args(&c, tf);
    if (rc < 0)
        goto out;
    if (tf->kind != CN_AGG_TF_FOCUS_INVERTED && tf->kind != CN_AGG_TF_DROP &&
        tf->kind != CN_AGG_TF_HIDE && tf->kind != CN_AGG_TF_PRUNE &&
        tf->kind != CN_AGG_TF_COLLAPSE && tf->kind != CN_AGG_TF_SEARCH) {
        rc = cn_agg__qt_reserve(&o->t, in->n + 16);
        if (rc < 0)
            goto out;
    }
    switch (tf->kind) {
    case CN_AGG_TF_FOCUS_INVERTED:
    case CN_AGG_TF_DROP:
    case CN_AGG_TF_HIDE:
    case CN_AGG_TF_PRUNE:
    case CN_AGG_TF_COLLAPSE:
    case CN_AGG_TF_SEARCH:
        rc = tf_map_only(&c, tf->kind);
        break;
    case CN_AGG_TF_FOCUS:
        rc = tf_focus(&c);
        break;
    case CN_AGG_TF_MERGE_NODE:
        rc = tf_merge_node(&c);
        break;
    case CN_AGG_TF_FOCUS_FUNC:
    case CN_AGG_TF_FOCUS_SELF:
    case CN_AGG_TF_MERGE:
    case CN_AGG_TF_COLLAPSE_DIRECT_REC:
    case CN_AGG_TF_COLLAPSE_REC:
        rc = tf_by_func(&c, tf->kind);
        break;
    case CN_AGG_TF_FOCUS_LIB:
    case CN_AGG_TF_COLLAPSE_LIB:
        rc = tf_by_lib(&c, tf->kind);
        break;
    case CN_AGG_TF_COLLAPSE_ALL_REC:
        rc = tf_collapse_all_rec(&c, self);
        break;
    default:
        rc = -EINVAL;
    }
    if (rc == 0 && !o->same)
        rc = carry_counters(in, merged_in, recur_in, o);
#ifndef NDEBUG
    if (rc == 0)
        check_map(in, o);
#endif
out:
    free(c.st);
    free(c.nid);
    free(c.lib);
    free(c.hit);
    if (rc < 0)
        cn_agg__tfout_free(o);
    return rc;
}
