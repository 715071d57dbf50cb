/* transform.c — the transforms of calltree.md §2 on func-level stack tables.
 *
 * Every transform is one pass over the input table in row order (prefix < row, so a
 * row's parent has always been handled): per-row state (a match counter, "F seen", the
 * row before the outermost F …) is derived from the parent's, which makes the stack rule
 * an incremental form of the per-sample path rule of §2. Two shapes:
 *  - map only (drop, hide, prune, collapse, focus-inverted): rows are unchanged and each
 *    maps to itself, an ancestor, or -1 (dropped);
 *  - rebuild (all others): a new table is interned; map[r] is the new row of r's rewritten
 *    path, and also the row r's children attach under.
 * Functions and path elements match by displayed name (string id of the func's name).
 * The implementation filter is always `combined` (native-only), so no frame is
 * transparent.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

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

/* A 256-bit Bloom mask of the names on a row's path: a quick, exact "not on the path"
 * answer; only a set bit costs an ancestor walk. */
typedef struct namemask {
    uint64_t w[4];
} namemask;

static inline void name_bit(int32_t name, unsigned *word, uint64_t *bit)
{
    uint64_t h = cn_agg__mix64((uint64_t)(uint32_t)name);
    *word = (unsigned)(h & 3);
    *bit = 1ULL << ((h >> 2) & 63);
}

static inline void mask_derive(namemask *dst, const namemask *parent, unsigned word, uint64_t bit)
{
    if (parent)
        *dst = *parent;
    else
        memset(dst, 0, sizeof(*dst));
    dst->w[word] |= bit;
}

/* JProfiler's collapse recursions (§6.1) with merged-stack and recursion counters over
 * the live input rows. */
static int tf_collapse_all_rec(tfctx *c, const uint8_t *live, const int32_t *merged_in,
                               const int32_t *recur_in)
{
    const cn_agg__qtable *in = c->in;
    size_t n = in->n;
    namemask *imask = malloc((n ? n : 1) * sizeof(*imask));
    namemask *omask = malloc((n ? n : 1) * sizeof(*omask));
    c->o->merged = calloc(n ? n : 1, sizeof(int32_t));
    c->o->recur = calloc(n ? n : 1, sizeof(int32_t));
    int rc = -ENOMEM;
    if (!imask || !omask || !c->o->merged || !c->o->recur)
        goto out;
    for (int32_t r = 0; r < (int32_t)n; r++) {
        int32_t par = in->prefix[r], f = in->func[r], nm = in_name(c, r);
        int32_t at = par < 0 ? -1 : c->o->map[par];
        unsigned word;
        uint64_t bit;
        name_bit(nm, &word, &bit);
        bool rec = false;
        if (par >= 0 && (imask[par].w[word] & bit))
            for (int32_t x = par; x >= 0 && !rec; x = in->prefix[x])
                rec = in_name(c, x) == nm;
        mask_derive(&imask[r], par >= 0 ? &imask[par] : NULL, word, bit);
        int32_t found = -1;
        if (at >= 0 && (omask[at].w[word] & bit))
            for (int32_t x = at; x >= 0 && found < 0; x = c->o->t.prefix[x])
                if (out_name(c, x) == nm)
                    found = x;
        int32_t m = found;
        if (m < 0) {
            m = cn_agg__qt_intern(&c->o->t, at, f);
            if (m < 0)
                goto out;
            mask_derive(&omask[m], at >= 0 ? &omask[at] : NULL, word, bit);
        }
        c->o->map[r] = m;
        if (live && live[r]) {
            c->o->merged[m] += merged_in ? merged_in[r] : 1;
            c->o->recur[m] += (recur_in ? recur_in[r] : 0) + (rec ? 1 : 0);
        }
    }
    rc = 0;
out:
    free(imask);
    free(omask);
    return rc;
}

/* ---- dispatch ------------------------------------------------------------------------ */

bool cn_agg__tf_needs_live(const cn_agg_transform *tf)
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
static int resolve_args(tfctx *c, const cn_agg_transform *tf)
{
    cn_agg_profile *p = c->p;
    c->k = (int32_t)tf->path_len;
    c->nid = malloc((tf->path_len ? tf->path_len : 1) * sizeof(*c->nid));
    if (!c->nid)
        return -ENOMEM;
    c->nid[0] = -2;
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

int cn_agg__tf_apply(cn_agg_profile *p, const cn_agg__qtable *in, const cn_agg_transform *tf,
                     const uint8_t *live, const int32_t *merged_in, const int32_t *recur_in,
                     cn_agg__tfout *o)
{
    tfctx c = {.p = p, .in = in, .o = o};
    size_t n = in->n ? in->n : 1;
    int rc = -ENOMEM;
    memset(o, 0, sizeof(*o));
    cn_agg__qt_init(&o->t);
    o->map = malloc(n * sizeof(*o->map));
    c.st = malloc(n * sizeof(*c.st));
    if (!o->map || !c.st)
        goto out;
    rc = resolve_args(&c, tf);
    if (rc < 0)
        goto out;
    if (tf->kind != CN_AGG_TF_FOCUS_INVERTED && tf->kind != CN_AGG_TF_DROP &&
        tf->kind != CN_AGG_TF_HIDE && tf->kind != CN_AGG_TF_PRUNE &&
        tf->kind != CN_AGG_TF_COLLAPSE) {
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
        rc = tf_collapse_all_rec(&c, live, merged_in, recur_in);
        break;
    default:
        rc = -EINVAL;
    }
    if (rc == 0 && !o->same)
        rc = carry_counters(in, merged_in, recur_in, o);
out:
    free(c.st);
    free(c.nid);
    free(c.lib);
    if (rc < 0)
        cn_agg__tfout_free(o);
    return rc;
}
