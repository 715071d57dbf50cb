/* rows.c — labels, stack hashes and the rows of one interval.
 *
 * A window of a profile's samples is summed per stack id in one pass (a cn_u64map from
 * stack id to a slot), then each distinct stack's function path is read once
 * (cn_agg_stack_funcs, leaf first) and hashed root first; stacks with equal paths (two
 * addresses in one function) merge into one row through a second map keyed by hash.
 * Rows are written straight into the batch's TabSeparated buffers, so a batch is ready
 * to compress without another copy. Arrays use ClickHouse's quoted form inside TSV
 * (['a','b']), with every byte that either syntax treats specially escaped.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>

#include "cn_fleet.h"
#include "fleet_internal.h"

/* ---- labels ----------------------------------------------------------------------- */

int cn_fleet_label_check(const char *key, const char *value, cn_err *err)
{
    size_t kn = strlen(key), vn = strlen(value);
    if (kn == 0 || kn > CN_FLEET_MAX_KEY || !(isalpha((unsigned char)key[0]) || key[0] == '_'))
        return cn_err_set(err, -EINVAL,
                          "bad label key '%.64s' (a letter or '_', then letters, digits, "
                          "'_', '.', '-'; at most %d bytes)",
                          key, CN_FLEET_MAX_KEY);
    for (size_t i = 1; i < kn; i++)
        if (!isalnum((unsigned char)key[i]) && !strchr("_.-", key[i]))
            return cn_err_set(err, -EINVAL,
                              "bad label key '%.64s' (letters, digits, '_', '.', '-')", key);
    if (vn > CN_FLEET_MAX_VALUE)
        return cn_err_set(err, -EINVAL, "label %s: value longer than %d bytes", key,
                          CN_FLEET_MAX_VALUE);
    for (size_t i = 0; i < vn; i++)
        if ((unsigned char)value[i] < 0x20 || value[i] == 0x7f || value[i] == ',')
            return cn_err_set(err, -EINVAL, "label %s: value has a control character or ','", key);
    return 0;
}

const char *cn_fleet_labels_get(const cn_fleet_labels *l, const char *key)
{
    for (size_t i = 0; l && i < l->n; i++)
        if (!strcmp(l->v[i].key, key))
            return l->v[i].value;
    return NULL;
}

int cn_fleet_labels_set(cn_fleet_labels *l, const char *key, const char *value, cn_err *err)
{
    int r = cn_fleet_label_check(key, value, err);
    if (r < 0)
        return r;
    char *v = strdup(value);
    if (!v)
        return cn_err_set(err, -ENOMEM, "out of memory");
    for (size_t i = 0; i < l->n; i++) {
        if (!strcmp(l->v[i].key, key)) {
            free(l->v[i].value);
            l->v[i].value = v;
            return 0;
        }
    }
    char *k = NULL;
    if (l->n >= CN_FLEET_MAX_LABELS)
        r = cn_err_set(err, -EINVAL, "too many labels (at most %d)", CN_FLEET_MAX_LABELS);
    else if (!(k = strdup(key)) || CN_RESERVE(l->v, l->cap, l->n + 1) < 0)
        r = cn_err_set(err, -ENOMEM, "out of memory");
    if (r < 0) {
        free(k);
        free(v);
        return r;
    }
    l->v[l->n++] = (cn_fleet_label){k, v};
    return 0;
}

int cn_fleet_labels_parse(cn_fleet_labels *l, const char *list, cn_err *err)
{
    const char *p = list;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        char *item = strndup(p, n);
        if (!item)
            return cn_err_set(err, -ENOMEM, "out of memory");
        char *eq = strchr(item, '=');
        int r;
        if (!eq) {
            r = cn_err_set(err, -EINVAL, "bad label '%.64s' (KEY=VALUE expected)", item);
        } else {
            *eq = '\0';
            r = cn_fleet_labels_set(l, item, eq + 1, err);
        }
        free(item);
        if (r < 0)
            return r;
        p += n;
        if (*p == ',')
            p++;
    }
    return 0;
}

int cn_fleet_labels_merge(cn_fleet_labels *dst, const cn_fleet_labels *src, cn_err *err)
{
    for (size_t i = 0; src && i < src->n; i++) {
        int r = cn_fleet_labels_set(dst, src->v[i].key, src->v[i].value, err);
        if (r < 0)
            return r;
    }
    return 0;
}

void cn_fleet_labels_clear(cn_fleet_labels *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].key);
        free(l->v[i].value);
    }
    free(l->v);
    memset(l, 0, sizeof(*l));
}

/* ---- hashes and the seen set ------------------------------------------------------ */

uint64_t cn_fleet_stack_hash(const char *const *funcs, const char *const *libs, size_t n)
{
    XXH3_state_t st;
    static const char zero = 0;
    XXH3_64bits_reset(&st);
    for (size_t i = 0; i < n; i++) {
        XXH3_64bits_update(&st, funcs[i], strlen(funcs[i]));
        XXH3_64bits_update(&st, &zero, 1);
        XXH3_64bits_update(&st, libs[i], strlen(libs[i]));
        XXH3_64bits_update(&st, &zero, 1);
    }
    return XXH3_64bits_digest(&st);
}

struct cn_fleet_seen {
    cn_u64map map;
    size_t max;
};

cn_fleet_seen *cn_fleet_seen_new(size_t max)
{
    cn_fleet_seen *s = calloc(1, sizeof(*s));
    if (s)
        s->max = max ? max : 1000000;
    return s;
}

cn_fleet_seen *cn_fleet_seen_free(cn_fleet_seen *s)
{
    if (s) {
        cn_u64map_clear(&s->map);
        free(s);
    }
    return NULL;
}

void cn_fleet_seen_reset(cn_fleet_seen *s)
{
    cn_u64map_clear(&s->map);
}

size_t cn_fleet_seen_count(const cn_fleet_seen *s)
{
    return s->map.count;
}

/* ---- batches ---------------------------------------------------------------------- */

cn_fleet_batch *cn_fleet_batch_new(void)
{
    cn_fleet_batch *b = calloc(1, sizeof(*b));
    if (!b)
        return NULL;
    cn_buf_init(&b->samples, 0);
    cn_buf_init(&b->stacks, 0);
    b->time_s = INT64_MAX;
    return b;
}

cn_fleet_batch *cn_fleet_batch_free(cn_fleet_batch *b)
{
    if (b) {
        cn_buf_free(&b->samples);
        cn_buf_free(&b->stacks);
        free(b);
    }
    return NULL;
}

/* Appends s TSV-escaped (a bare field) or, quoted, as an array element. Escaping
 * backslash, quote, tab, newline, CR and NUL is valid in both syntaxes. */
int cn_fleet__tsv(cn_buf *b, const char *s, bool quoted)
{
    char tmp[512];
    size_t n = 0;
    int r = 0;
    if (quoted)
        tmp[n++] = '\'';
    for (; *s && r == 0; s++) {
        char c = *s, e = 0;
        switch (c) {
        case '\\':
            e = '\\';
            break;
        case '\'':
            e = '\'';
            break;
        case '\t':
            e = 't';
            break;
        case '\n':
            e = 'n';
            break;
        case '\r':
            e = 'r';
            break;
        default:
            break;
        }
        if (e) {
            tmp[n++] = '\\';
            tmp[n++] = e;
        } else {
            tmp[n++] = c;
        }
        if (n > sizeof(tmp) - 4) {
            r = cn_buf_append(b, tmp, n);
            n = 0;
        }
    }
    if (quoted)
        tmp[n++] = '\'';
    if (r == 0 && n)
        r = cn_buf_append(b, tmp, n);
    return r;
}

static int tsv_array(cn_buf *b, const char *const *v, size_t n)
{
    int r = cn_buf_append(b, "[", 1);
    for (size_t i = 0; i < n && r == 0; i++) {
        if (i)
            r = cn_buf_append(b, ",", 1);
        if (r == 0)
            r = cn_fleet__tsv(b, v[i], true);
    }
    return r ? r : cn_buf_append(b, "]", 1);
}

int cn_fleet__time(cn_buf *b, int64_t t)
{
    /* DateTime in TSV: ClickHouse also reads a bare unix timestamp. */
    return cn_buf_appendf(b, "%lld", (long long)t);
}

/* ---- collecting a window ---------------------------------------------------------- */

typedef struct acc {
    int32_t stack;
    int32_t group; /* index in the window's cgroup paths (0: none) */
    double weight;
    uint64_t count;
} acc;

typedef struct collect_ctx {
    cn_agg_profile *p;
    cn_u64map map; /* (group, stack id) → index in accs */
    acc *accs;
    size_t n, cap;
    /* The samples' cgroups (docs/fleet.md "Container labels"): each thread's group, from
     * its process's cgroup path, found once per window; group 0 is "no cgroup". */
    int32_t *thr_group; /* n_thr of them, -1 = not looked up yet */
    size_t n_thr;
    const char **paths; /* n_groups; paths[0] = NULL */
    size_t n_groups, cap_groups;
    bool none; /* a sample without a cgroup was seen */
} collect_ctx;

static int32_t thread_group(collect_ctx *c, int32_t thread)
{
    if (thread < 0 || (size_t)thread >= c->n_thr)
        return 0;
    if (c->thr_group[thread] >= 0)
        return c->thr_group[thread];
    const char *path = cn_agg_process_cgroup(c->p, cn_agg_thread_pid(c->p, thread));
    size_t g = 0;
    while (path && g < c->n_groups && (g == 0 || strcmp(c->paths[g], path)))
        g++;
    if (path && g == c->n_groups) {
        if (CN_RESERVE(c->paths, c->cap_groups, c->n_groups + 1) < 0)
            return -ENOMEM;
        c->paths[c->n_groups++] = path;
    }
    if (!path)
        g = 0;
    return c->thr_group[thread] = (int32_t)g;
}

static int on_sample(void *ctx, int32_t stack, int32_t thread, int64_t time_ns, double weight,
                     int64_t count)
{
    collect_ctx *c = ctx;
    int32_t g = thread_group(c, thread);
    if (g < 0)
        return g;
    uint64_t key = (uint64_t)(uint32_t)g << 32 | (uint32_t)stack;
    int32_t i = cn_u64map_get(&c->map, key);
    if (i < 0) {
        if (c->n >= INT32_MAX || CN_RESERVE(c->accs, c->cap, c->n + 1) < 0 ||
            cn_u64map_put(&c->map, key, (int32_t)c->n) < 0)
            return -ENOMEM;
        i = (int32_t)c->n++;
        c->accs[i] = (acc){stack, g, 0, 0};
    }
    c->accs[i].weight += weight;
    c->accs[i].count += count > 0 ? (uint64_t)count : 1;
    return 0;
}

/* The frames of stack id, root first: func and lib names, build-ids (unresolved frames
 * only) and kind markers ("python"; "" for the kinds a library's name tells apart). The
 * name arrays point into the profile. Returns the depth, or -ENOMEM; *unresolved is set
 * when a frame has no symbol yet. */
typedef struct path_buf {
    const char **funcs, **libs, **ids, **kinds;
    size_t cap;
} path_buf;

static int stack_path(cn_agg_profile *p, int32_t stack, path_buf *pb, bool *unresolved)
{
    size_t n = 0;
    for (int32_t s = stack; s >= 0; s = cn_agg_stack_prefix(p, s)) {
        int32_t frame = cn_agg_stack_frame(p, s);
        const int32_t *chain;
        size_t depth = cn_agg_frame_funcs(p, frame, &chain);
        bool ph = cn_agg_frame_is_placeholder(p, frame);
        int32_t res = cn_agg_frame_resource(p, frame);
        const char *lib = res >= 0 ? cn_agg_resource_name(p, res) : "";
        const char *id = ph && res >= 0 ? cn_agg_resource_identity(p, res) : NULL;
        const char *kind =
            res >= 0 ? cn_agg_resource_kind_marker(cn_agg_resource_kind_of(p, res)) : NULL;
        if (ph)
            *unresolved = true;
        if (n + depth > pb->cap) {
            size_t cap = (n + depth) * 2 + 16;
            const char **f = realloc(pb->funcs, cap * sizeof(*f));
            if (f)
                pb->funcs = f;
            const char **l = realloc(pb->libs, cap * sizeof(*l));
            if (l)
                pb->libs = l;
            const char **d = realloc(pb->ids, cap * sizeof(*d));
            if (d)
                pb->ids = d;
            const char **k = realloc(pb->kinds, cap * sizeof(*k));
            if (k)
                pb->kinds = k;
            if (!f || !l || !d || !k)
                return -ENOMEM;
            pb->cap = cap;
        }
        /* Leaf first here; an inline chain is outer first, so it is added reversed. */
        for (size_t k = depth; k-- > 0;) {
            pb->funcs[n] = cn_agg_func_name(p, chain[k]);
            pb->libs[n] = lib;
            pb->ids[n] = id ? id : "";
            pb->kinds[n] = kind ? kind : "";
            n++;
        }
    }
    for (size_t i = 0; i < n / 2; i++) {
        const char *t;
        t = pb->funcs[i], pb->funcs[i] = pb->funcs[n - 1 - i], pb->funcs[n - 1 - i] = t;
        t = pb->libs[i], pb->libs[i] = pb->libs[n - 1 - i], pb->libs[n - 1 - i] = t;
        t = pb->ids[i], pb->ids[i] = pb->ids[n - 1 - i], pb->ids[n - 1 - i] = t;
        t = pb->kinds[i], pb->kinds[i] = pb->kinds[n - 1 - i], pb->kinds[n - 1 - i] = t;
    }
    return (int)n;
}

int cn_fleet_cgroup_labels(const char *path, const cn_fleet_labels *session, cn_fleet_labels *out)
{
    static const cn_cgroup_key keys[] = {CN_CGROUP_KEY_CONTAINER, CN_CGROUP_KEY_CGROUP,
                                         CN_CGROUP_KEY_POD, CN_CGROUP_KEY_QOS,
                                         CN_CGROUP_KEY_SERVICE};
    cn_cgroup_info info;
    cn_err err = {0};
    int r = 0;
    if (!path || !strcmp(path, "/"))
        return 0; /* the root cgroup: every process of a machine without cgroups */
    cn_cgroup_identify(path, &info);
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]) && r == 0; i++) {
        const char *k = cn_cgroup_label_name(keys[i]),
                   *v = cn_cgroup_key_value(&info, path, keys[i]);
        /* The session's own label wins; a value a label cannot hold (a path with ',', or
         * longer than CN_FLEET_MAX_VALUE) is left out rather than cut into another's. */
        if (!v[0] || cn_fleet_labels_get(session, k) || cn_fleet_label_check(k, v, &err) < 0)
            continue;
        r = cn_fleet_labels_set(out, k, v, &err);
    }
    return r;
}

/* The leading fields of a sample row, shared by every row of one source and cgroup
 * (path NULL: none). */
static int row_prefix(cn_buf *b, const cn_fleet_source *src, const char *path)
{
    const cn_fleet_labels *l = src->labels;
    const char *keys[CN_FLEET_MAX_LABELS + CN_CGROUP_N_KEYS];
    const char *vals[CN_FLEET_MAX_LABELS + CN_CGROUP_N_KEYS];
    size_t n = 0;
    cn_fleet_labels cg = {0};
    for (size_t i = 0; l && i < l->n && n < CN_FLEET_MAX_LABELS; i++) {
        keys[n] = l->v[i].key;
        vals[n++] = l->v[i].value;
    }
    if (cn_fleet_cgroup_labels(path, l, &cg) < 0) {
        cn_fleet_labels_clear(&cg);
        return -ENOMEM;
    }
    for (size_t i = 0; i < cg.n; i++) {
        keys[n] = cg.v[i].key;
        vals[n++] = cg.v[i].value;
    }
    int r = cn_fleet__time(b, src->time_s);
    r = r ? r : cn_buf_append(b, "\t", 1);
    r = r ? r : cn_fleet__tsv(b, src->host, false);
    r = r ? r : cn_buf_append(b, "\t", 1);
    r = r ? r : cn_fleet__tsv(b, src->service, false);
    r = r ? r : cn_buf_append(b, "\t", 1);
    r = r ? r : cn_fleet__tsv(b, src->session, false);
    r = r ? r : cn_buf_append(b, "\t", 1);
    r = r ? r : tsv_array(b, keys, n);
    r = r ? r : cn_buf_append(b, "\t", 1);
    r = r ? r : tsv_array(b, vals, n);
    cn_fleet_labels_clear(&cg);
    return r ? r : cn_buf_append(b, "\t", 1);
}

typedef struct hrow {
    uint64_t hash;
    int32_t group;
    double weight;
    uint64_t count;
} hrow;

static int emit(cn_fleet_batch *b, cn_agg_profile *p, collect_ctx *c, const cn_fleet_source *src,
                cn_fleet_seen *seen, bool allow_unresolved)
{
    path_buf pb = {0};
    cn_u64map *by_hash = calloc(c->n_groups ? c->n_groups : 1, sizeof(*by_hash));
    hrow *rows = NULL;
    size_t nrows = 0, cap = 0;
    cn_buf prefix, defs;
    uint64_t new_defs = 0;
    int r = 0;
    bool any_unresolved = false;

    cn_buf_init(&prefix, 0);
    cn_buf_init(&defs, 0);
    if (!by_hash)
        r = -ENOMEM;
    for (size_t i = 0; i < c->n && r == 0; i++) {
        bool unres = false;
        int n = stack_path(p, c->accs[i].stack, &pb, &unres);
        if (n < 0) {
            r = n;
            break;
        }
        any_unresolved |= unres;
        if (unres && !allow_unresolved)
            continue; /* the caller will hear -EAGAIN: finish the scan cheaply */
        uint64_t h = cn_fleet_stack_hash(pb.funcs, pb.libs, (size_t)n);
        cn_u64map *m = &by_hash[c->accs[i].group];
        int32_t k = cn_u64map_get(m, h);
        if (k < 0) {
            if (CN_RESERVE(rows, cap, nrows + 1) < 0 || cn_u64map_put(m, h, (int32_t)nrows) < 0) {
                r = -ENOMEM;
                break;
            }
            k = (int32_t)nrows;
            rows[nrows++] = (hrow){h, c->accs[i].group, 0, 0};
            bool defined = false; /* by another group's row of this window */
            for (size_t g = 0; g < c->n_groups && !defined; g++)
                defined = (int32_t)g != c->accs[i].group && cn_u64map_get(&by_hash[g], h) >= 0;
            if (!defined && cn_u64map_get(&seen->map, h) < 0) {
                /* stacks row: stack, host, time, funcs, libs, build_ids, kinds */
                r = cn_buf_appendf(&defs, "%llu\t", (unsigned long long)h);
                r = r ? r : cn_fleet__tsv(&defs, src->host, false);
                r = r ? r : cn_buf_append(&defs, "\t", 1);
                r = r ? r : cn_fleet__time(&defs, src->time_s);
                r = r ? r : cn_buf_append(&defs, "\t", 1);
                r = r ? r : tsv_array(&defs, pb.funcs, (size_t)n);
                r = r ? r : cn_buf_append(&defs, "\t", 1);
                r = r ? r : tsv_array(&defs, pb.libs, (size_t)n);
                r = r ? r : cn_buf_append(&defs, "\t", 1);
                r = r ? r : tsv_array(&defs, pb.ids, (size_t)n);
                r = r ? r : cn_buf_append(&defs, "\t", 1);
                r = r ? r : tsv_array(&defs, pb.kinds, (size_t)n);
                r = r ? r : cn_buf_append(&defs, "\n", 1);
                new_defs++;
            }
        }
        rows[k].weight += c->accs[i].weight;
        rows[k].count += c->accs[i].count;
    }
    if (r == 0 && any_unresolved && !allow_unresolved)
        r = -EAGAIN;
    uint64_t total = 0;
    /* group by group: one prefix each (a host has few cgroups with samples in a window) */
    for (size_t g = 0, i = 0; g < c->n_groups && r == 0; g++, i = 0) {
        cn_buf_reset(&prefix);
        r = row_prefix(&prefix, src, c->paths[g]);
        for (; i < nrows && r == 0; i++) {
            if (rows[i].group != (int32_t)g)
                continue;
            r = cn_buf_append(&b->samples, cn_buf_ptr(&prefix), cn_buf_len(&prefix));
            r = r ? r
                  : cn_buf_appendf(&b->samples, "%llu\t%llu\t%.17g\n",
                                   (unsigned long long)rows[i].hash,
                                   (unsigned long long)rows[i].count, rows[i].weight);
            total += rows[i].count;
        }
    }
    if (r == 0 && cn_buf_len(&defs))
        r = cn_buf_append(&b->stacks, cn_buf_ptr(&defs), cn_buf_len(&defs));
    if (r == 0) {
        /* Only now are the definitions on their way: remember them. */
        if (seen->map.count + new_defs > seen->max)
            cn_fleet_seen_reset(seen);
        for (size_t i = 0; i < nrows && r == 0; i++)
            if (cn_u64map_get(&seen->map, rows[i].hash) < 0)
                r = cn_u64map_put(&seen->map, rows[i].hash, 0);
        b->sample_rows += nrows;
        b->stack_rows += new_defs;
        b->weight_samples += total;
        if (nrows && src->time_s < b->time_s)
            b->time_s = src->time_s;
    }
    cn_buf_free(&prefix);
    cn_buf_free(&defs);
    for (size_t g = 0; by_hash && g < c->n_groups; g++)
        cn_u64map_clear(&by_hash[g]);
    free(by_hash);
    free(rows);
    free(pb.funcs);
    free(pb.libs);
    free(pb.ids);
    free(pb.kinds);
    return r;
}

static int count_group(void *ctx, int32_t stack, int32_t thread, int64_t time_ns, double weight,
                       int64_t count)
{
    (void)stack, (void)time_ns, (void)weight, (void)count;
    collect_ctx *c = ctx;
    int32_t g = thread_group(c, thread);
    c->none |= g == 0;
    return g < 0 ? g : 0;
}

int cn_fleet_window_cgroups(cn_agg_profile *p, int64_t from_ns, int64_t to_ns, const char ***out,
                            size_t *n)
{
    collect_ctx c = {.p = p, .n_thr = cn_agg_thread_count(p)};
    cn_agg_query q;
    cn_agg_query_init(&q);
    q.from_ns = from_ns;
    q.to_ns = to_ns;
    c.thr_group = malloc((c.n_thr ? c.n_thr : 1) * sizeof(*c.thr_group));
    if (!c.thr_group || CN_RESERVE(c.paths, c.cap_groups, 1) < 0) {
        free(c.thr_group);
        return -ENOMEM;
    }
    memset(c.thr_group, 0xff, (c.n_thr ? c.n_thr : 1) * sizeof(*c.thr_group));
    c.paths[c.n_groups++] = NULL;
    int r = cn_agg_for_each_sample(p, &q, count_group, &c);
    free(c.thr_group);
    if (r < 0) {
        free(c.paths);
        return r;
    }
    /* NULL stays first when samples without a cgroup exist, or no sample at all */
    bool drop = !c.none && c.n_groups > 1;
    if (drop)
        memmove(c.paths, c.paths + 1, (c.n_groups - 1) * sizeof(*c.paths));
    *out = c.paths;
    *n = c.n_groups - drop;
    return 0;
}

int cn_fleet_collect(cn_fleet_batch *b, cn_agg_profile *p, const cn_fleet_window *w,
                     const cn_fleet_source *src, cn_fleet_seen *seen, uint64_t *n_samples)
{
    collect_ctx c = {.p = p, .n_thr = p ? cn_agg_thread_count(p) : 0};
    cn_agg_query q;
    if (!b || !p || !w || !src || !seen || w->from_ns > w->to_ns)
        return -EINVAL;
    c.thr_group = malloc((c.n_thr ? c.n_thr : 1) * sizeof(*c.thr_group));
    if (!c.thr_group || CN_RESERVE(c.paths, c.cap_groups, 1) < 0) {
        free(c.thr_group);
        return -ENOMEM;
    }
    memset(c.thr_group, 0xff, (c.n_thr ? c.n_thr : 1) * sizeof(*c.thr_group));
    c.paths[c.n_groups++] = NULL;
    cn_agg_query_init(&q);
    q.from_ns = w->from_ns;
    q.to_ns = w->to_ns;
    int r = cn_agg_for_each_sample(p, &q, on_sample, &c);
    if (r == 0)
        r = emit(b, p, &c, src, seen, w->allow_unresolved);
    if (r == 0 && n_samples) {
        uint64_t n = 0;
        for (size_t i = 0; i < c.n; i++)
            n += c.accs[i].count;
        *n_samples = n;
    }
    cn_u64map_clear(&c.map);
    free(c.accs);
    free(c.thr_group);
    free(c.paths);
    return r;
}
