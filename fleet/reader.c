/* reader.c — the reading side: filters, the rollup tiers a time window reads from,
 * `GROUP BY stack` into the engine, labels (the tables themselves: schema.c).
 *
 * A tree is two queries: the rows grouped by (group value, stack hash) with their sums,
 * then the definitions of exactly those stacks (`stack GLOBAL IN (…the same filter…)`,
 * which also works over Distributed tables, where a plain IN would be refused). The
 * answers are TabSeparated; arrays come back joined with \x1e, so a line splits with one
 * pass. Each definition is interned once (a map from hash to its parsed frames), frames
 * through a map from XXH3(func, lib, kind) to the profile's frame id, so loading is linear
 * in the answer's size. A frame marked "python" in the definition's kinds is a Python
 * function of the source file its lib names (docs/python.md).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "cn_fleet.h"
#include "fleet_internal.h"

#define ANSWER_MAX ((size_t)2 << 30)
#define SEP        '\x1e'

/* ---- TSV decoding ------------------------------------------------------------------ */

size_t cn_fleet__tsv_split(char *line, size_t len, char **fields, size_t max)
{
    size_t n = 0;
    char *w = line, *end = line + len;
    if (max == 0)
        return 0;
    fields[n++] = w;
    for (char *r = line; r < end; r++) {
        char c = *r;
        if (c == '\t') {
            *w++ = '\0';
            if (n == max)
                return n;
            fields[n++] = w;
            continue;
        }
        if (c == '\\' && r + 1 < end) {
            char e = *++r;
            switch (e) {
            case 't':
                c = '\t';
                break;
            case 'n':
                c = '\n';
                break;
            case 'r':
                c = '\r';
                break;
            case '0':
                c = '\0';
                break;
            case 'b':
                c = '\b';
                break;
            case 'f':
                c = '\f';
                break;
            default:
                c = e;
                break;
            }
            if (c == '\0')
                c = '?'; /* names are C strings */
        }
        *w++ = c;
    }
    *w = '\0';
    return n;
}

/* ---- filters ----------------------------------------------------------------------- */

void cn_fleet_filter_init(cn_fleet_filter *f)
{
    memset(f, 0, sizeof(*f));
    f->from_s = INT64_MIN;
    f->to_s = INT64_MAX;
}

void cn_fleet_filter_clear(cn_fleet_filter *f)
{
    for (size_t i = 0; i < f->n; i++) {
        free(f->keys[i]);
        free(f->values[i]);
    }
    free(f->keys);
    free(f->values);
    cn_fleet_filter_init(f);
}

int cn_fleet_filter_add(cn_fleet_filter *f, const char *list, cn_err *err)
{
    cn_fleet_labels l = {0};
    int r = cn_fleet_labels_parse(&l, list, err);
    if (r == 0 && l.n == 0)
        r = cn_err_set(err, -EINVAL, "empty label condition (KEY=VALUE expected)");
    for (size_t i = 0; i < l.n && r == 0; i++) {
        char **k = realloc(f->keys, (f->n + 1) * sizeof(*k));
        if (k)
            f->keys = k;
        char **v = realloc(f->values, (f->n + 1) * sizeof(*v));
        if (v)
            f->values = v;
        if (!k || !v) {
            r = cn_err_set(err, -ENOMEM, "out of memory");
            break;
        }
        f->keys[f->n] = l.v[i].key;
        f->values[f->n] = l.v[i].value;
        l.v[i].key = l.v[i].value = NULL;
        f->n++;
    }
    cn_fleet_labels_clear(&l);
    return r;
}

/* The label key of a key: the live trees' names of the container labels (`container`,
 * `pod`, `qos`; docs/fleet.md "Container labels") are their labels' (`service` stays the
 * column). */
static const char *label_key(const char *key)
{
    cn_cgroup_key k;
    if (strcmp(key, "service") && cn_cgroup_key_parse(key, &k) == 0)
        return cn_cgroup_label_name(k);
    return key;
}

/* The SQL expression for key's value in a row. */
static int key_expr(cn_buf *sql, const char *key)
{
    if (!strcmp(key, "host") || !strcmp(key, "service") || !strcmp(key, "session"))
        return cn_buf_appendf(sql, "%s", key);
    int r = cn_buf_appendf(sql, "label_values[indexOf(label_keys, ");
    r = r ? r : cn_fleet_sql_quote(sql, label_key(key));
    return r ? r : cn_buf_appendf(sql, ")]");
}

/* Appends " WHERE …" for f's label conditions, the time window [from, to) (INT64_MIN /
 * INT64_MAX: open) and extra (may be NULL), or nothing when there is no condition. */
static int where_sql(const cn_fleet_filter *f, int64_t from, int64_t to, const char *extra,
                     cn_buf *sql)
{
    const char *glue = " WHERE ";
    int r = 0;
    /* Conditions on one key are ORed, in the order first seen; keys are ANDed. */
    for (size_t i = 0; i < f->n && r == 0; i++) {
        bool first = true;
        for (size_t j = 0; j < i && first; j++)
            first = strcmp(f->keys[j], f->keys[i]) != 0;
        if (!first)
            continue;
        r = cn_buf_appendf(sql, "%s(", glue);
        glue = " AND ";
        const char * or = "";
        for (size_t j = i; j < f->n && r == 0; j++) {
            if (strcmp(f->keys[j], f->keys[i]))
                continue;
            r = cn_buf_appendf(sql, "%s", or);
            r = r ? r : key_expr(sql, f->keys[i]);
            r = r ? r : cn_buf_appendf(sql, " = ");
            r = r ? r : cn_fleet_sql_quote(sql, f->values[j]);
            or = " OR ";
        }
        r = r ? r : cn_buf_appendf(sql, ")");
    }
    if (r == 0 && from != INT64_MIN) {
        r = cn_buf_appendf(sql, "%stime >= toDateTime(%lld)", glue, (long long)from);
        glue = " AND ";
    }
    if (r == 0 && to != INT64_MAX) {
        r = cn_buf_appendf(sql, "%stime < toDateTime(%lld)", glue, (long long)to);
        glue = " AND ";
    }
    if (r == 0 && extra)
        r = cn_buf_appendf(sql, "%s%s", glue, extra);
    return r;
}

int cn_fleet_filter_sql(const cn_fleet_filter *f, cn_buf *sql)
{
    return where_sql(f, f->from_s, f->to_s, NULL, sql);
}

typedef struct source {
    cn_buf *sql;
    const char *cols, *extra;
    const cn_fleet_filter *f;
    const char *tables[CN_FLEET__N_TIERS + 1]; /* the rollups coarsest first, then the raw rows */
    bool first;
} source;

static int select_sql(source *S, const char *table, int64_t from, int64_t to)
{
    int r = cn_buf_appendf(S->sql, "%sSELECT %s FROM %s", S->first ? "" : " UNION ALL ", S->cols,
                           table);
    S->first = false;
    return r ? r : where_sql(S->f, from, to, S->extra, S->sql);
}

/* The rows of [from, to) from tier k and finer: the whole buckets of tier k from its
 * rollup (a rollup row's time is its bucket's start, so it is inside the window exactly
 * when its bucket is), the partial ones at each edge from the next tier, the raw rows
 * (k == CN_FLEET__N_TIERS) for what no rollup covers. */
static int tier_sql(source *S, size_t k, int64_t from, int64_t to)
{
    if (from >= to)
        return 0;
    if (k == CN_FLEET__N_TIERS)
        return select_sql(S, S->tables[k], from, to);
    int64_t b0 = cn_fleet__ceil_to(from, cn_fleet__tiers[k].secs),
            b1 = cn_fleet__floor_to(to, cn_fleet__tiers[k].secs);
    if (b0 >= b1)
        return tier_sql(S, k + 1, from, to);
    int r = select_sql(S, S->tables[k], b0, b1);
    r = r ? r : tier_sql(S, k + 1, from, b0);
    return r ? r : tier_sql(S, k + 1, b1, to);
}

int cn_fleet_source_sql(const cn_fleet_schema *s, const cn_fleet_filter *f, const char *cols,
                        const char *extra, cn_buf *sql)
{
    source S = {.sql = sql,
                .cols = cols,
                .extra = extra,
                .f = f,
                .tables = {s->hourly, s->ten_min, s->samples},
                .first = true};
    _Static_assert(CN_FLEET__N_TIERS == 2, "one table name per tier");
    int r = cn_buf_appendf(sql, "(");
    if (f->raw || f->from_s >= f->to_s)
        r = r ? r : select_sql(&S, s->samples, f->from_s, f->to_s);
    else
        r = r ? r : tier_sql(&S, 0, f->from_s, f->to_s);
    return r ? r : cn_buf_appendf(sql, ")");
}

/* ---- loading a tree ---------------------------------------------------------------- */

/* One aggregated row of the answer, kept until the definitions are in. */
typedef struct arow {
    uint64_t hash;
    int32_t group; /* frame id of the "KEY=VALUE" root, or -1 */
    int32_t rank;  /* set by add_rows */
    double n, w;
} arow;

typedef struct loader {
    cn_agg_profile *p;
    cn_u64map frames; /* XXH3(func, lib, kind) → frame id */
    cn_u64map defs;   /* stack hash → index in def_off */
    size_t *def_off;  /* into path: each definition's first frame id */
    size_t *def_len;
    bool *def_marked; /* the definition marks a frame's kind */
    size_t n_defs, cap_defs, cap_len, cap_marked;
    int32_t *path; /* frame ids of every definition, root first */
    size_t n_path, cap_path;
    arow *rows;
    size_t n_rows, cap_rows;
} loader;

/* The frame of func in lib; python: lib is a Python source file (marked "python"). */
static int32_t intern_frame(loader *L, const char *func, const char *lib, bool python)
{
    uint64_t h = XXH3_64bits_withSeed(func, strlen(func),
                                      XXH3_64bits(lib, strlen(lib)) ^ (python ? ~0ULL : 0));
    int32_t id = cn_u64map_get(&L->frames, h);
    if (id >= 0)
        return id;
    int32_t res = -1;
    if (python) {
        if ((res = cn_agg_python_resource(L->p, lib)) < 0)
            return res;
    } else if (*lib) {
        cn_agg_resource_kind kind = lib[0] == '[' ? CN_AGG_RES_KERNEL : CN_AGG_RES_LIBRARY;
        if ((res = cn_agg_resource(L->p, lib, NULL, NULL, kind)) < 0)
            return res;
    }
    int32_t fn = cn_agg_func(L->p, func, res, NULL, 0);
    if (fn < 0)
        return fn;
    id = cn_agg_frame(L->p, fn, res, -1, 0);
    if (id >= 0 && cn_u64map_put(&L->frames, h, id) < 0)
        return -ENOMEM;
    return id;
}

/* The next element of a SEP-joined list at *s ("" once it runs out), NUL-terminated in
 * place; *s moves past it. */
static char *next_elem(char **s)
{
    char *e = *s, *end = strchr(e, SEP);
    if (end) {
        *end = '\0';
        *s = end + 1;
    } else {
        *s = e + strlen(e);
    }
    return e;
}

/* One definition line: stack, funcs, libs, kinds (joined with SEP; fewer libs or kinds
 * than funcs: the rest are ""). Copies of one definition written by canopyds before and
 * after kinds existed may both come back: one that marks a kind wins. */
static int add_def(loader *L, char *line, size_t len)
{
    char *f[4];
    if (cn_fleet__tsv_split(line, len, f, 4) != 4)
        return -EBADMSG;
    uint64_t h = strtoull(f[0], NULL, 10);
    bool marked = f[3][strspn(f[3], "\x1e")] != '\0';
    int32_t have = cn_u64map_get(&L->defs, h);
    if (have >= 0 && (L->def_marked[have] || !marked))
        return 0;
    size_t start = L->n_path;
    char *fs = f[1], *ls = f[2], *ks = f[3];
    while (*fs) {
        bool last = !strchr(fs, SEP);
        const char *func = next_elem(&fs), *lib = next_elem(&ls), *k = next_elem(&ks);
        cn_agg_resource_kind kind;
        bool python = cn_agg_resource_kind_parse(k, strlen(k), &kind) && kind == CN_AGG_RES_PYTHON;
        int32_t id = intern_frame(L, func, lib, python);
        if (id < 0)
            return id;
        if (CN_RESERVE(L->path, L->cap_path, L->n_path + 1) < 0)
            return -ENOMEM;
        L->path[L->n_path++] = id;
        if (last)
            break;
    }
    if (have >= 0) { /* the marked copy replaces the unmarked one */
        L->def_off[have] = start;
        L->def_len[have] = L->n_path - start;
        L->def_marked[have] = true;
        return 0;
    }
    if (L->n_defs >= INT32_MAX || CN_RESERVE(L->def_off, L->cap_defs, L->n_defs + 1) < 0 ||
        CN_RESERVE(L->def_len, L->cap_len, L->n_defs + 1) < 0 ||
        CN_RESERVE(L->def_marked, L->cap_marked, L->n_defs + 1) < 0 ||
        cn_u64map_put(&L->defs, h, (int32_t)L->n_defs) < 0)
        return -ENOMEM;
    L->def_off[L->n_defs] = start;
    L->def_marked[L->n_defs] = marked;
    L->def_len[L->n_defs++] = L->n_path - start;
    return 0;
}

/* One answer line: [group,] stack, samples, weight. The group's root frame is interned
 * now; the stack waits for its definition. */
static int read_row(loader *L, char *line, size_t len, const char *group_key)
{
    char *f[4];
    size_t want = group_key ? 4 : 3;
    if (cn_fleet__tsv_split(line, len, f, want) != want)
        return -EBADMSG;
    char **v = group_key ? f + 1 : f, *end;
    arow row = {.group = -1};
    row.hash = strtoull(v[0], &end, 10);
    row.n = strtod(v[1], NULL);
    row.w = strtod(v[2], NULL);
    if (end == v[0])
        return -EBADMSG;
    if (group_key) {
        char name[CN_FLEET_MAX_KEY + CN_FLEET_MAX_VALUE + 8];
        snprintf(name, sizeof(name), "%s=%s", group_key, f[0]);
        if ((row.group = intern_frame(L, name, "", false)) < 0)
            return row.group;
    }
    if (CN_RESERVE(L->rows, L->cap_rows, L->n_rows + 1) < 0)
        return -ENOMEM;
    L->rows[L->n_rows++] = row;
    return 0;
}

/* Rows in the order they are added: by group, then by their definition's path (rank:
 * the definition's place in path order; -1 without a definition). */
static int cmp_row(const void *a, const void *b)
{
    const arow *x = a, *y = b;
    if (x->group != y->group)
        return x->group < y->group ? -1 : 1;
    return x->rank < y->rank ? -1 : x->rank > y->rank;
}

static int cmp_def(const void *a, const void *b, void *arg)
{
    const loader *L = arg;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    const int32_t *px = L->path + L->def_off[x], *py = L->path + L->def_off[y];
    size_t nx = L->def_len[x], ny = L->def_len[y];
    for (size_t i = 0; i < nx && i < ny; i++)
        if (px[i] != py[i])
            return px[i] < py[i] ? -1 : 1;
    return nx < ny ? -1 : nx > ny;
}

/* Adds every row as one sample: its group root, then its definition's frames. Each stack
 * is interned frame by frame (cn_agg_stack); with the rows sorted by group and path, a
 * row shares its longest common prefix with the previous one and interns only the rest
 * (with --group-by host, 600 000 rows of 8-28 frames: docs/perf-fleet.md). */
static int add_rows(loader *L, double *samples)
{
    int32_t *order = NULL, *rank = NULL, *chain = NULL;
    const int32_t *prev = NULL;
    size_t cap_chain = 0, n_prev = 0;
    int32_t prev_group = -2, root = -1;
    int r = 0;
    if (L->n_defs && (!(order = malloc(L->n_defs * sizeof(*order))) ||
                      !(rank = malloc(L->n_defs * sizeof(*rank))))) {
        r = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < L->n_defs; i++)
        order[i] = (int32_t)i;
    if (L->n_defs)
        qsort_r(order, L->n_defs, sizeof(*order), cmp_def, L);
    for (size_t i = 0; i < L->n_defs; i++)
        rank[order[i]] = (int32_t)i;
    for (size_t i = 0; i < L->n_rows; i++) {
        int32_t d = cn_u64map_get(&L->defs, L->rows[i].hash);
        L->rows[i].rank = d >= 0 ? rank[d] : -1;
    }
    if (L->n_rows) /* rows NULL when empty */
        qsort(L->rows, L->n_rows, sizeof(*L->rows), cmp_row);
    for (size_t i = 0; i < L->n_rows && r == 0; i++) {
        const arow *row = &L->rows[i];
        const int32_t *path;
        size_t n, k = 0;
        int32_t unknown;
        if (row->group != prev_group) {
            root = row->group >= 0 ? cn_agg_stack(L->p, -1, row->group) : -1;
            if (root < 0 && row->group >= 0) {
                r = root;
                break;
            }
            prev_group = row->group;
            n_prev = 0;
        }
        if (row->rank >= 0) {
            int32_t d = order[row->rank];
            path = L->path + L->def_off[d];
            n = L->def_len[d];
        } else {
            /* Rows whose definition was lost (a dropped spool file) stay counted. */
            if ((unknown = intern_frame(L, "[unknown stack]", "", false)) < 0) {
                r = unknown;
                break;
            }
            path = &unknown;
            n = 1;
            n_prev = 0;
        }
        if (CN_RESERVE(chain, cap_chain, n) < 0) {
            r = -ENOMEM;
            break;
        }
        while (k < n && k < n_prev && prev[k] == path[k])
            k++;
        for (; k < n && r == 0; k++) {
            chain[k] = cn_agg_stack(L->p, k ? chain[k - 1] : root, path[k]);
            r = chain[k] < 0 ? chain[k] : 0;
        }
        if (r < 0)
            break;
        int32_t stack = n ? chain[n - 1] : root;
        prev = row->rank >= 0 ? path : NULL;
        n_prev = row->rank >= 0 ? n : 0;
        *samples += row->n;
        r = cn_agg_add_sample(L->p, stack, 0, row->w, -1);
    }
out:
    free(order);
    free(rank);
    free(chain);
    return r;
}

static int cmp_hash(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Hashes per definitions query: at most 21 bytes each keeps the query under ClickHouse's
 * default max_query_size (256 KiB; a reader may not change settings). They go as one
 * string literal split in the query: ClickHouse parses one literal much faster than
 * thousands of IN (…) elements. The copies of a definition that ReplacingMergeTree has
 * not folded yet all come back (add_def keeps the first): a GROUP BY with any() over
 * the arrays would cost ClickHouse more than the copies cost us. */
#define DEFS_PER_QUERY 12000

/* Reads the definitions of the distinct stacks of L's rows (the rows were read first). */
static int load_defs(loader *L, cn_fleet_conn *c, const cn_fleet_schema *s, cn_buf *sql,
                     cn_buf *ans, cn_err *err)
{
    uint64_t *h = malloc((L->n_rows ? L->n_rows : 1) * sizeof(*h));
    size_t n = 0;
    int r = 0;
    if (!h)
        return cn_err_set(err, -ENOMEM, "out of memory");
    for (size_t i = 0; i < L->n_rows; i++)
        h[i] = L->rows[i].hash;
    qsort(h, L->n_rows, sizeof(*h), cmp_hash);
    for (size_t i = 0; i < L->n_rows; i++)
        if (n == 0 || h[n - 1] != h[i])
            h[n++] = h[i];
    for (size_t i = 0; i < n && r == 0; i += DEFS_PER_QUERY) {
        cn_buf_reset(sql);
        cn_buf_reset(ans);
        r = cn_buf_appendf(sql,
                           "SELECT stack, arrayStringConcat(funcs, '\\x1e'), "
                           "arrayStringConcat(libs, '\\x1e'), arrayStringConcat(kinds, '\\x1e') "
                           "FROM %s WHERE stack IN (SELECT "
                           "toUInt64(arrayJoin(splitByChar(',', '",
                           s->stacks);
        for (size_t j = i; j < n && j < i + DEFS_PER_QUERY && r == 0; j++)
            r = cn_buf_appendf(sql, "%s%llu", j > i ? "," : "", (unsigned long long)h[j]);
        r = r ? r : cn_buf_appendf(sql, "')))) FORMAT TabSeparated");
        if (r < 0) {
            r = cn_err_set(err, -ENOMEM, "out of memory");
            break;
        }
        if ((r = cn_fleet_exec(c, cn_buf_ptr(sql), NULL, 0, false, ans, err)) < 0)
            break;
        const char *line;
        size_t len;
        cn_lines it;
        cn_lines_init(&it, cn_buf_ptr(ans), cn_buf_len(ans));
        while (r == 0 && cn_lines_next(&it, &line, &len))
            if (len)
                r = add_def(L, (char *)line, len);
        if (r == -EBADMSG)
            r = cn_err_set(err, r, "unexpected answer from ClickHouse at %s", cn_fleet_conn_url(c));
        else if (r < 0)
            r = cn_err_set(err, r, "loading the fleet tree: %s", strerror(-r));
    }
    free(h);
    return r;
}

/* The aggregate query: the rows f selects, summed per ([group value,] stack). */
static int rows_sql(const cn_fleet_schema *s, const cn_fleet_filter *f, const char *group_by,
                    cn_buf *sql)
{
    cn_buf cols, extra;
    cn_buf_init(&cols, 0);
    cn_buf_init(&extra, 0);
    int r = 0;
    if (group_by) {
        r = key_expr(&cols, group_by);
        r = r ? r : cn_buf_appendf(&cols, " AS g, ");
        /* Rows without the label do not belong to any group. */
        if (r == 0 && strcmp(group_by, "host") && strcmp(group_by, "service") &&
            strcmp(group_by, "session")) {
            r = cn_buf_appendf(&extra, "has(label_keys, ");
            r = r ? r : cn_fleet_sql_quote(&extra, label_key(group_by));
            r = r ? r : cn_buf_appendf(&extra, ")");
        }
    }
    r = r ? r : cn_buf_appendf(&cols, "stack, samples, weight");
    r = r ? r
          : cn_buf_appendf(sql, "SELECT %sstack, sum(samples), sum(weight) FROM ",
                           group_by ? "g, " : "");
    r = r ? r
          : cn_fleet_source_sql(s, f, cn_buf_ptr(&cols),
                                cn_buf_len(&extra) ? cn_buf_ptr(&extra) : NULL, sql);
    r = r ? r : cn_buf_appendf(sql, " GROUP BY %sstack FORMAT TabSeparated", group_by ? "g, " : "");
    cn_buf_free(&cols);
    cn_buf_free(&extra);
    return r;
}

int cn_fleet_load(cn_fleet_conn *c, const cn_fleet_schema *s, const cn_fleet_filter *f,
                  const char *group_by, cn_agg_profile **out, cn_err *err)
{
    loader L = {0};
    cn_buf sql, ans;
    double samples = 0;
    int r;
    const char *line;
    size_t len;
    cn_lines it;

    cn_buf_init(&sql, 0);
    cn_buf_init(&ans, ANSWER_MAX);
    if (group_by && cn_fleet_label_check(group_by, "", err) < 0) {
        r = -EINVAL;
        goto out;
    }
    if (!(L.p = cn_agg_profile_new()) || rows_sql(s, f, group_by, &sql) < 0) {
        r = cn_err_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    if ((r = cn_fleet_exec(c, cn_buf_ptr(&sql), NULL, 0, false, &ans, err)) < 0)
        goto out;
    cn_lines_init(&it, cn_buf_ptr(&ans), cn_buf_len(&ans));
    while (cn_lines_next(&it, &line, &len))
        if (len && (r = read_row(&L, (char *)line, len, group_by)) < 0)
            goto bad;
    if ((r = load_defs(&L, c, s, &sql, &ans, err)) < 0)
        goto out;
    if ((r = add_rows(&L, &samples)) < 0)
        goto bad;
    char num[32];
    snprintf(num, sizeof(num), "%.0f", samples);
    if (cn_agg_meta_set(L.p, "source", "fleet") < 0 || cn_agg_meta_set(L.p, "samples", num) < 0) {
        r = cn_err_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    *out = L.p;
    L.p = NULL;
    goto out;
bad:
    if (r == -EBADMSG)
        cn_err_set(err, -EBADMSG, "unexpected answer from ClickHouse at %s", cn_fleet_conn_url(c));
    else
        cn_err_set(err, r, "loading the fleet tree: %s", strerror(-r));
out:
    cn_agg_profile_free(L.p);
    cn_u64map_clear(&L.frames);
    cn_u64map_clear(&L.defs);
    free(L.def_off);
    free(L.def_len);
    free(L.def_marked);
    free(L.path);
    free(L.rows);
    cn_buf_free(&sql);
    cn_buf_free(&ans);
    return r;
}

/* ---- labels ---------------------------------------------------------- */

int cn_fleet_labels_query(cn_fleet_conn *c, const cn_fleet_schema *s, const cn_fleet_filter *f,
                          const char *key, cn_buf *out, cn_err *err)
{
    static const char cols[] = "host, service, session, label_keys, label_values, samples";
    cn_buf sql, extra;
    int r;
    cn_buf_init(&sql, 0);
    cn_buf_init(&extra, 0);
    if (key && (r = cn_fleet_label_check(key, "", err)) < 0)
        goto out;
    if (!key) {
        r = cn_buf_appendf(&sql, "SELECT k, uniqExact(v), sum(n) FROM (SELECT 'host' AS k, host "
                                 "AS v, samples AS n FROM ");
        r = r ? r : cn_fleet_source_sql(s, f, cols, NULL, &sql);
        r = r ? r
              : cn_buf_appendf(&sql, " UNION ALL SELECT 'service' AS k, service AS v, samples "
                                     "AS n FROM ");
        r = r ? r : cn_fleet_source_sql(s, f, cols, NULL, &sql);
        r = r ? r : cn_buf_appendf(&sql, " UNION ALL SELECT k, v, samples AS n FROM ");
        r = r ? r : cn_fleet_source_sql(s, f, cols, NULL, &sql);
        r = r ? r
              : cn_buf_appendf(&sql, " ARRAY JOIN label_keys AS k, label_values AS v) GROUP BY k "
                                     "ORDER BY k FORMAT TabSeparated");
    } else {
        if (strcmp(key, "host") && strcmp(key, "service") && strcmp(key, "session")) {
            r = cn_buf_appendf(&extra, "has(label_keys, ");
            r = r ? r : cn_fleet_sql_quote(&extra, key);
            r = r ? r : cn_buf_appendf(&extra, ")");
            if (r < 0)
                goto oom;
        }
        r = cn_buf_appendf(&sql, "SELECT ");
        r = r ? r : key_expr(&sql, key);
        r = r ? r : cn_buf_appendf(&sql, " AS v, sum(samples) AS n FROM ");
        r = r ? r
              : cn_fleet_source_sql(s, f, cols, cn_buf_len(&extra) ? cn_buf_ptr(&extra) : NULL,
                                    &sql);
        r = r ? r : cn_buf_appendf(&sql, " GROUP BY v ORDER BY n DESC, v FORMAT TabSeparated");
    }
    if (r < 0)
        goto oom;
    r = cn_fleet_exec(c, cn_buf_ptr(&sql), NULL, 0, false, out, err);
    goto out;
oom:
    r = cn_err_set(err, -ENOMEM, "out of memory");
out:
    cn_buf_free(&sql);
    cn_buf_free(&extra);
    return r;
}
