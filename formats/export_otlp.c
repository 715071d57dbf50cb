/* export_otlp.c — a query's result as an OpenTelemetry profiles message (OTLP, the
 * "v1development" signal; otlp_profiles.proto, docs/cli.md "OTLP profiles").
 *
 * One ProfilesData: one shared ProfilesDictionary and one ResourceProfiles per process of
 * the samples (resource attributes host.name from the caller, process.pid,
 * process.executable.name, and container.id and k8s.pod.uid from the cgroup path the
 * profile recorded for the process), or a single one for samples of no known process
 * (files without threads, transformed queries), each with one ScopeProfiles (scope
 * "canopy") and one Profile.
 * Stacks come the two ways formats_internal.h describes, as in export_pprof.c:
 * - raw: one Sample per distinct (frame stack, thread), with the thread's thread.id and
 *   thread.name as sample attributes; one Location per frame with its mapping, address
 *   and one Line per function of its inline chain (innermost first); a placeholder frame
 *   (`LIB+0xOFFSET`) has no Line, so a consumer can symbolize it from the mapping's file
 *   and build-id (mapping attribute process.executable.build_id.gnu);
 * - tree (transforms, --group-by, --no-inline): one Sample per call node with self != 0,
 *   one Location per function.
 * Values are the weights in the sample type's unit: samples/count for CPU sessions (with
 * period_type cpu/nanoseconds and the period 1e9 / frequency when known), nanoseconds for
 * time profiles (off_cpu, wall), the event's count otherwise.
 * The message is built with protobuf-c over arrays sized once the tables are known, and
 * packed in one piece (writers take no untrusted input: no fuzz target).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "formats_internal.h"
#include "pb_dict.h"
#include "otlp_profiles.pb-c.h"

typedef Canopy__Otlp__ProfilesData pb_data;
typedef Canopy__Otlp__ProfilesDictionary pb_dict;
typedef Canopy__Otlp__ResourceProfiles pb_rprof;
typedef Canopy__Otlp__ScopeProfiles pb_sprof;
typedef Canopy__Otlp__InstrumentationScope pb_scope;
typedef Canopy__Otlp__Resource pb_resource;
typedef Canopy__Otlp__KeyValue pb_kv;
typedef Canopy__Otlp__AnyValue pb_any;
typedef Canopy__Otlp__Profile pb_profile;
typedef Canopy__Otlp__ValueType pb_vtype;
typedef Canopy__Otlp__Sample pb_sample;
typedef Canopy__Otlp__Mapping pb_mapping;
typedef Canopy__Otlp__Location pb_location;
typedef Canopy__Otlp__Line pb_line;
typedef Canopy__Otlp__Function pb_function;
typedef Canopy__Otlp__Stack pb_stack;
typedef Canopy__Otlp__Link pb_link;
typedef Canopy__Otlp__KeyValueAndUnit pb_kvu;

/* A sample before it becomes a pb_sample: leaf is a stack id (raw) or a tree node. */
typedef struct row {
    int32_t leaf;
    int32_t thread; /* -1: none */
    int32_t group;  /* resource group */
    double weight;
} row;

/* A resource: the samples of one process (pid -1: of none known). */
typedef struct group {
    int32_t pid;
    size_t n_samples;
} group;

/* Writer state; everything is freed by ow_free(). */
typedef struct ow {
    cn_agg_profile *p;
    bool raw;
    const cn_agg_tree *tree;
    const cn_fmt_otlp_opts *o;

    row *rows;
    size_t n_rows, cap_rows;
    cn_u64map row_index; /* raw: (stack, thread) -> row */

    group *groups;
    size_t n_groups, cap_groups;
    cn_u64map group_index; /* pid (as uint32) -> group */

    /* the string table, keys (frames raw, funcs tree) -> location, funcs -> function,
     * resources -> mapping (pb_dict.h; ids from 1, 0 = none); leaves (stacks raw, nodes
     * tree) -> stack */
    cn_fmt__dict d;
    int32_t *stack_of, *stack_leaf;
    size_t n_stacks, n_stack_locs;
    int32_t *thread_attr; /* thread -> its first attribute index (thread.id; thread.name + 1) */
    size_t n_attrs, cap_attrs;
    pb_kvu *attrs;       /* attribute_table, [0] the zero value */
    const char **attr_s; /* per attribute: its string value, or NULL for attr_i's int */
    int64_t *attr_i;
    size_t cap_attr_s, cap_attr_i;
    pb_any *attr_vals;

    /* pools of the message */
    pb_location *locs;
    pb_location **loc_ptrs;
    pb_line *lines;
    pb_line **line_ptrs;
    pb_function *fns;
    pb_function **fn_ptrs;
    pb_mapping *maps;
    pb_mapping **map_ptrs;
    int32_t *map_attr_idx; /* per mapping: its build-id attribute, 0 none */
    pb_stack *stacks;
    pb_stack **stack_ptrs;
    int32_t *stack_locs;
    pb_kvu **attr_ptrs;
    pb_sample *samples;
    pb_sample **sample_ptrs;
    int64_t *values;
    int32_t *sample_attrs;
    pb_rprof *rps;
    pb_rprof **rp_ptrs;
    pb_sprof *sps;
    pb_sprof **sp_ptrs;
    pb_profile *profs;
    pb_profile **prof_ptrs;
    pb_resource *resources;
    pb_kv *res_kvs;
    pb_kv **res_kv_ptrs;
    pb_any *res_vals;
    cn_cgroup_info *cgroups; /* per group: what its process's cgroup path names */
    pb_link zero_link;
    pb_link *link_ptr;
    pb_scope scope;
    pb_vtype sample_type, period_type;
    char **sys_names; /* owned, per function (fn_func order) */
} ow;

static void ow_free(ow *w)
{
    free(w->rows);
    cn_u64map_clear(&w->row_index);
    free(w->groups);
    cn_u64map_clear(&w->group_index);
    free(w->stack_of);
    free(w->stack_leaf);
    free(w->thread_attr);
    free(w->attrs);
    free(w->attr_s);
    free(w->attr_i);
    free(w->attr_vals);
    free(w->locs);
    free(w->loc_ptrs);
    free(w->lines);
    free(w->line_ptrs);
    free(w->fns);
    free(w->fn_ptrs);
    free(w->maps);
    free(w->map_ptrs);
    free(w->map_attr_idx);
    free(w->stacks);
    free(w->stack_ptrs);
    free(w->stack_locs);
    free(w->attr_ptrs);
    free(w->samples);
    free(w->sample_ptrs);
    free(w->values);
    free(w->sample_attrs);
    free(w->rps);
    free(w->rp_ptrs);
    free(w->sps);
    free(w->sp_ptrs);
    free(w->profs);
    free(w->prof_ptrs);
    free(w->resources);
    free(w->res_kvs);
    free(w->res_kv_ptrs);
    free(w->res_vals);
    free(w->cgroups);
    for (size_t i = 0; w->sys_names && i < w->d.n_fns; i++)
        free(w->sys_names[i]);
    free(w->sys_names);
    cn_fmt__dict_clear(&w->d); /* after sys_names: n_fns counts them */
}

/* ---- rows and resource groups -------------------------------------------------------- */

static int32_t group_of(ow *w, int32_t pid)
{
    uint64_t key = (uint32_t)pid;
    int32_t g = cn_u64map_get(&w->group_index, key);
    if (g >= 0)
        return g;
    if ((w->n_groups == w->cap_groups &&
         CN_RESERVE(w->groups, w->cap_groups, w->n_groups + 1) < 0) ||
        cn_u64map_put(&w->group_index, key, (int32_t)w->n_groups) < 0)
        return -ENOMEM;
    w->groups[w->n_groups] = (group){pid, 0};
    return (int32_t)w->n_groups++;
}

static int push_row(ow *w, int32_t leaf, int32_t thread, double weight)
{
    int32_t g = group_of(w, thread >= 0 ? cn_agg_thread_pid(w->p, thread) : -1);
    if (g < 0 || (w->n_rows == w->cap_rows && CN_RESERVE(w->rows, w->cap_rows, w->n_rows + 1) < 0))
        return -ENOMEM;
    w->rows[w->n_rows++] = (row){leaf, thread, g, weight};
    w->groups[g].n_samples++;
    return 0;
}

static int raw_sample(void *ctx, int32_t stack, int32_t thread, int64_t time_ns, double weight,
                      int64_t count)
{
    ow *w = ctx;
    (void)time_ns;
    (void)count;
    uint64_t key = cn_pair(stack, thread);
    int32_t r = cn_u64map_get(&w->row_index, key);
    if (r >= 0) {
        w->rows[r].weight += weight;
        return 0;
    }
    if (cn_u64map_put(&w->row_index, key, (int32_t)w->n_rows) < 0)
        return -ENOMEM;
    return push_row(w, stack, thread, weight);
}

static int collect_rows(ow *w, const cn_agg_query *q, cn_agg_tree **tree, cn_err *err)
{
    if (w->raw)
        return cn_agg_for_each_sample(w->p, q, raw_sample, w);
    int rc = cn_fmt__run_view(w->p, q, CN_AGG_VIEW_TREE, tree, err);
    if (rc < 0)
        return rc;
    w->tree = *tree;
    for (size_t i = 0; i < (*tree)->n_nodes; i++)
        if ((*tree)->nodes[i].self != 0 && push_row(w, (int32_t)i, -1, (*tree)->nodes[i].self) < 0)
            return -ENOMEM;
    return 0;
}

/* Gives a row's leaf its stack index, and every location on its path. */
static void use_stack(ow *w, const row *r)
{
    if (w->stack_of[r->leaf])
        return;
    w->stack_leaf[w->n_stacks] = r->leaf;
    w->stack_of[r->leaf] = (int32_t)++w->n_stacks;
    if (w->raw) {
        for (int32_t s = r->leaf; s >= 0; s = cn_agg_stack_prefix(w->p, s), w->n_stack_locs++)
            cn_fmt__dict_use_location(&w->d, cn_agg_stack_frame(w->p, s));
    } else {
        for (int32_t nd = r->leaf; nd >= 0; nd = w->tree->nodes[nd].parent, w->n_stack_locs++)
            cn_fmt__dict_use_location(&w->d, w->tree->nodes[nd].func);
    }
}

/* ---- attributes ------------------------------------------------------------------------ */

/* Appends an attribute (a string value, or an int one when sval is NULL); its AnyValue is
 * linked by link_attrs once the table stops moving. Returns its index or -ENOMEM. */
static int add_attr(ow *w, const char *key, const char *sval, int64_t ival)
{
    size_t n = w->n_attrs;
    if (n >= INT32_MAX || (n == w->cap_attrs && CN_RESERVE(w->attrs, w->cap_attrs, n + 1) < 0) ||
        (n == w->cap_attr_s && CN_RESERVE(w->attr_s, w->cap_attr_s, n + 1) < 0) ||
        (n == w->cap_attr_i && CN_RESERVE(w->attr_i, w->cap_attr_i, n + 1) < 0))
        return -ENOMEM;
    int32_t k = cn_fmt__dict_lit(&w->d, key);
    if (k < 0)
        return -ENOMEM;
    canopy__otlp__key_value_and_unit__init(&w->attrs[n]);
    w->attrs[n].key_strindex = k;
    w->attr_s[n] = sval;
    w->attr_i[n] = ival;
    w->n_attrs++;
    return (int)n;
}

/* ---- building the message -------------------------------------------------------------- */

static int build_functions(ow *w, pb_dict *d)
{
    const cn_agg_profile *p = w->p;
    size_t n = w->d.n_fns + 1;
    if (!CN_FMT_ALLOC_N(w->fns, n) || !CN_FMT_ALLOC_N(w->fn_ptrs, n) ||
        !CN_FMT_ALLOC_N(w->sys_names, n))
        return -ENOMEM;
    canopy__otlp__function__init(&w->fns[0]);
    w->fn_ptrs[0] = &w->fns[0];
    for (size_t i = 1; i < n; i++) {
        int32_t f = w->d.fn_func[i - 1];
        pb_function *fn = &w->fns[i];
        canopy__otlp__function__init(fn);
        if ((fn->name_strindex = cn_fmt__dict_str(&w->d, cn_agg_func_name(p, f))) < 0 ||
            (fn->filename_strindex = cn_fmt__dict_str(&w->d, cn_agg_func_file(p, f))) < 0 ||
            cn_fmt__py_system_name(p, f, &w->sys_names[i - 1]) < 0)
            return -ENOMEM;
        fn->system_name_strindex =
            w->sys_names[i - 1] ? cn_fmt__dict_add(&w->d, w->sys_names[i - 1]) : fn->name_strindex;
        if (fn->system_name_strindex < 0)
            return -ENOMEM;
        fn->start_line = cn_agg_func_line(p, f);
        w->fn_ptrs[i] = fn;
    }
    d->n_function_table = n;
    d->function_table = w->fn_ptrs;
    return 0;
}

static int build_locations(ow *w, pb_dict *d)
{
    const cn_agg_profile *p = w->p;
    size_t n = w->d.n_locs + 1;
    if (!CN_FMT_ALLOC_N(w->locs, n) || !CN_FMT_ALLOC_N(w->loc_ptrs, n) ||
        !CN_FMT_ALLOC_N(w->lines, w->d.n_lines) || !CN_FMT_ALLOC_N(w->line_ptrs, w->d.n_lines))
        return -ENOMEM;
    canopy__otlp__location__init(&w->locs[0]);
    w->loc_ptrs[0] = &w->locs[0];
    size_t ln = 0;
    for (size_t i = 1; i < n; i++) {
        int32_t key = w->d.loc_key[i - 1];
        pb_location *l = &w->locs[i];
        canopy__otlp__location__init(l);
        l->lines = w->line_ptrs + ln;
        w->loc_ptrs[i] = l;
        if (!w->raw) {
            int32_t res = cn_agg_func_resource(p, key);
            l->mapping_index = res >= 0 ? w->d.map_of[res] : 0;
            pb_line *line = &w->lines[ln];
            canopy__otlp__line__init(line);
            line->function_index = w->d.fn_of[key];
            line->line = cn_agg_func_line(p, key);
            w->line_ptrs[ln++] = line;
            l->n_lines = 1;
            continue;
        }
        int32_t res = cn_agg_frame_resource(p, key);
        int64_t addr = cn_agg_frame_address(p, key);
        l->mapping_index = res >= 0 ? w->d.map_of[res] : 0;
        /* -1 is "none", but a kernel address (above 2^63) is stored negative, and a
         * placeholder frame always has its offset (0xffffffffffffffff included) */
        bool placeholder = cn_agg_frame_is_placeholder(p, key);
        l->address = addr != -1 || placeholder ? (uint64_t)addr : 0;
        if (placeholder)
            continue;
        const int32_t *chain;
        size_t depth = cn_agg_frame_funcs(p, key, &chain);
        for (size_t j = 0; j < depth; j++) { /* innermost first */
            pb_line *line = &w->lines[ln];
            canopy__otlp__line__init(line);
            line->function_index = w->d.fn_of[chain[depth - 1 - j]];
            line->line = j == 0 ? cn_agg_frame_line(p, key) : 0;
            w->line_ptrs[ln++] = line;
            l->n_lines++;
        }
    }
    d->n_location_table = n;
    d->location_table = w->loc_ptrs;
    return 0;
}

/* Mappings: file path (else name); address range from the locations that use them, start
 * = file_offset = the lowest address, so address - start + file_offset is the file offset
 * canopy recorded; the GNU build-id as the attribute process.executable.build_id.gnu. */
static int build_mappings(ow *w, pb_dict *d)
{
    const cn_agg_profile *p = w->p;
    size_t n = w->d.n_maps + 1;
    if (!CN_FMT_ALLOC_N(w->maps, n) || !CN_FMT_ALLOC_N(w->map_ptrs, n) ||
        !CN_FMT_ALLOC_N(w->map_attr_idx, n))
        return -ENOMEM;
    canopy__otlp__mapping__init(&w->maps[0]);
    w->map_ptrs[0] = &w->maps[0];
    for (size_t i = 1; i < n; i++) {
        int32_t res = w->d.map_res[i - 1];
        pb_mapping *mp = &w->maps[i];
        canopy__otlp__mapping__init(mp);
        const char *file = cn_agg_resource_path(p, res);
        if ((mp->filename_strindex =
                 cn_fmt__dict_str(&w->d, file ? file : cn_agg_resource_name(p, res))) < 0)
            return -ENOMEM;
        const char *ident = cn_agg_resource_identity(p, res);
        if (cn_fmt__is_build_id(ident)) {
            int a = add_attr(w, "process.executable.build_id.gnu", ident, 0);
            if (a < 0)
                return -ENOMEM;
            w->map_attr_idx[i] = a;
        }
        mp->memory_start = UINT64_MAX;
        w->map_ptrs[i] = mp;
    }
    for (size_t i = 1; w->raw && i <= w->d.n_locs; i++) {
        const pb_location *l = &w->locs[i];
        if (!l->mapping_index || cn_agg_frame_address(p, w->d.loc_key[i - 1]) == -1)
            continue;
        pb_mapping *mp = &w->maps[l->mapping_index];
        mp->memory_start = l->address < mp->memory_start ? l->address : mp->memory_start;
        mp->memory_limit = l->address + 1 > mp->memory_limit ? l->address + 1 : mp->memory_limit;
    }
    for (size_t i = 1; i < n; i++) {
        pb_mapping *mp = &w->maps[i];
        if (mp->memory_start == UINT64_MAX)
            mp->memory_start = mp->memory_limit = 0;
        mp->file_offset = mp->memory_start;
        if (w->map_attr_idx[i]) {
            mp->n_attribute_indices = 1;
            mp->attribute_indices = &w->map_attr_idx[i];
        }
    }
    d->n_mapping_table = n;
    d->mapping_table = w->map_ptrs;
    return 0;
}

static int build_stacks(ow *w, pb_dict *d)
{
    size_t n = w->n_stacks + 1;
    if (!CN_FMT_ALLOC_N(w->stacks, n) || !CN_FMT_ALLOC_N(w->stack_ptrs, n) ||
        !CN_FMT_ALLOC_N(w->stack_locs, w->n_stack_locs))
        return -ENOMEM;
    canopy__otlp__stack__init(&w->stacks[0]);
    w->stack_ptrs[0] = &w->stacks[0];
    size_t k = 0;
    for (size_t i = 1; i < n; i++) {
        pb_stack *s = &w->stacks[i];
        canopy__otlp__stack__init(s);
        s->location_indices = w->stack_locs + k;
        size_t k0 = k;
        int32_t leaf = w->stack_leaf[i - 1];
        if (w->raw) {
            for (int32_t x = leaf; x >= 0; x = cn_agg_stack_prefix(w->p, x))
                w->stack_locs[k++] = w->d.loc_of[cn_agg_stack_frame(w->p, x)];
        } else {
            for (int32_t nd = leaf; nd >= 0; nd = w->tree->nodes[nd].parent)
                w->stack_locs[k++] = w->d.loc_of[w->tree->nodes[nd].func];
        }
        s->n_location_indices = k - k0;
        w->stack_ptrs[i] = s;
    }
    d->n_stack_table = n;
    d->stack_table = w->stack_ptrs;
    return 0;
}

/* Thread attributes (thread.id, thread.name) once per thread used. */
static int thread_attrs(ow *w)
{
    size_t nt = cn_agg_thread_count(w->p);
    if (!CN_FMT_ALLOC_N(w->thread_attr, nt))
        return -ENOMEM;
    for (size_t i = 0; i < w->n_rows; i++) {
        int32_t t = w->rows[i].thread;
        if (t < 0 || w->thread_attr[t])
            continue;
        int a = add_attr(w, "thread.id", NULL, cn_agg_thread_tid(w->p, t));
        const char *name = cn_agg_thread_name(w->p, t);
        if (a < 0 || (name && add_attr(w, "thread.name", name, 0) < 0))
            return -ENOMEM;
        w->thread_attr[t] = a;
    }
    return 0;
}

/* Gives every attribute but the zero one its AnyValue, now that the table no longer
 * moves. */
static int link_attrs(ow *w, pb_dict *d)
{
    if (!CN_FMT_ALLOC_N(w->attr_vals, w->n_attrs) || !CN_FMT_ALLOC_N(w->attr_ptrs, w->n_attrs))
        return -ENOMEM;
    for (size_t i = 0; i < w->n_attrs; i++) {
        pb_any *v = &w->attr_vals[i];
        canopy__otlp__any_value__init(v);
        if (w->attr_s[i]) {
            v->value_case = CANOPY__OTLP__ANY_VALUE__VALUE_STRING_VALUE;
            v->string_value = (char *)w->attr_s[i];
        } else {
            v->value_case = CANOPY__OTLP__ANY_VALUE__VALUE_INT_VALUE;
            v->int_value = w->attr_i[i];
        }
        w->attrs[i].value = i > 0 ? v : NULL;
        w->attr_ptrs[i] = &w->attrs[i];
    }
    d->n_attribute_table = w->n_attrs;
    d->attribute_table = w->attr_ptrs;
    return 0;
}

/* sample_type, period_type and period (docs/cli.md "OTLP profiles"). */
static int value_types(ow *w, int64_t *period)
{
    const cn_agg_profile *p = w->p;
    cn_agg_unit unit = cn_agg_profile_unit(p);
    const char *type = "samples", *uname = "count", *ptype = NULL, *punit = NULL;
    const char *mode = cn_agg_meta_get(p, "mode"), *freq = cn_agg_meta_get(p, "freq");
    *period = 0;
    if (unit == CN_AGG_UNIT_SAMPLES) {
        long long hz = freq ? atoll(freq) : 0;
        if (hz > 0) {
            ptype = "cpu";
            punit = "nanoseconds";
            *period = 1000000000LL / hz;
        }
    } else if (unit == CN_AGG_UNIT_EVENTS) {
        const char *ev = cn_agg_meta_get(p, "event");
        type = ev && *ev ? ev : "events";
    } else {
        type = mode && !strcmp(mode, "off-cpu") ? "off_cpu"
               : mode && !strcmp(mode, "wall")  ? "wall"
                                                : "cpu";
        uname = "nanoseconds";
    }
    canopy__otlp__value_type__init(&w->sample_type);
    canopy__otlp__value_type__init(&w->period_type);
    if ((w->sample_type.type_strindex = cn_fmt__dict_lit(&w->d, type)) < 0 ||
        (w->sample_type.unit_strindex = cn_fmt__dict_lit(&w->d, uname)) < 0)
        return -ENOMEM;
    if (ptype && ((w->period_type.type_strindex = cn_fmt__dict_lit(&w->d, ptype)) < 0 ||
                  (w->period_type.unit_strindex = cn_fmt__dict_lit(&w->d, punit)) < 0))
        return -ENOMEM;
    return 0;
}

/* host.name, process.pid, process.executable.name, container.id, k8s.pod.uid */
#define N_OWN_ATTRS 5

/* One ResourceProfiles per group, with its resource attributes and one Profile. */
static int build_resources(ow *w, pb_data *m, const cn_agg_query *q)
{
    const cn_agg_profile *p = w->p;
    size_t ng = w->n_groups ? w->n_groups : 1;
    size_t n_res_attrs = N_OWN_ATTRS + (w->o ? w->o->n_attrs : 0);
    if (!w->n_groups && group_of(w, -1) < 0)
        return -ENOMEM;
    if (!CN_FMT_ALLOC_N(w->rps, ng) || !CN_FMT_ALLOC_N(w->rp_ptrs, ng) ||
        !CN_FMT_ALLOC_N(w->sps, ng) || !CN_FMT_ALLOC_N(w->sp_ptrs, ng) ||
        !CN_FMT_ALLOC_N(w->profs, ng) || !CN_FMT_ALLOC_N(w->prof_ptrs, ng) ||
        !CN_FMT_ALLOC_N(w->resources, ng) || !CN_FMT_ALLOC_N(w->res_kvs, ng * n_res_attrs) ||
        !CN_FMT_ALLOC_N(w->res_kv_ptrs, ng * n_res_attrs) ||
        !CN_FMT_ALLOC_N(w->res_vals, ng * n_res_attrs) || !CN_FMT_ALLOC_N(w->cgroups, ng) ||
        !CN_FMT_ALLOC_N(w->samples, w->n_rows) || !CN_FMT_ALLOC_N(w->sample_ptrs, w->n_rows) ||
        !CN_FMT_ALLOC_N(w->values, w->n_rows) || !CN_FMT_ALLOC_N(w->sample_attrs, 2 * w->n_rows))
        return -ENOMEM;
    int64_t period = 0;
    if (value_types(w, &period) < 0)
        return -ENOMEM;

    /* time: the session's start (whole seconds) and the span of the samples */
    const char *started = cn_agg_meta_get(p, "canopy.session.started");
    int64_t t0 = started ? atoll(started) : 0, lo = INT64_MAX, hi = INT64_MIN;
    for (size_t i = 0; w->raw && i < cn_agg_sample_count(p); i++) {
        int64_t t = cn_agg_sample_time(p, i);
        if (t >= q->from_ns && t < q->to_ns) {
            lo = t < lo ? t : lo;
            hi = t > hi ? t : hi;
        }
    }

    canopy__otlp__instrumentation_scope__init(&w->scope);
    w->scope.name = (char *)"canopy";
    w->scope.version = (char *)CANOPY_VERSION;

    /* samples, grouped: each group's samples are contiguous in w->samples */
    size_t *start = cn_fmt__alloc_n(ng + 1, sizeof(*start));
    if (!start)
        return -ENOMEM;
    for (size_t g = 0; g < w->n_groups; g++)
        start[g + 1] = start[g] + w->groups[g].n_samples;
    double factor = cn_fmt__dict_unit_factor(p);
    for (size_t i = 0; i < w->n_rows; i++) {
        const row *r = &w->rows[i];
        size_t k = start[r->group]++;
        pb_sample *s = &w->samples[k];
        canopy__otlp__sample__init(s);
        s->stack_index = w->stack_of[r->leaf];
        w->values[k] = llround(r->weight * factor);
        s->n_values = 1;
        s->values = &w->values[k];
        if (r->thread >= 0) {
            int32_t a = w->thread_attr[r->thread];
            s->attribute_indices = &w->sample_attrs[2 * k];
            s->attribute_indices[s->n_attribute_indices++] = a;
            if (cn_agg_thread_name(p, r->thread))
                s->attribute_indices[s->n_attribute_indices++] = a + 1;
        }
        w->sample_ptrs[k] = s;
    }
    size_t off = 0;
    for (size_t g = 0; g < ng; g++) {
        group *gr = &w->groups[g];
        pb_profile *pr = &w->profs[g];
        canopy__otlp__profile__init(pr);
        pr->sample_type = &w->sample_type;
        pr->n_samples = gr->n_samples;
        pr->samples = w->sample_ptrs + off;
        off += gr->n_samples;
        pr->time_unix_nano = t0 > 0 ? (uint64_t)t0 * 1000000000u : 0;
        if (t0 > 0 && lo != INT64_MAX && lo > 0)
            pr->time_unix_nano += (uint64_t)lo;
        pr->duration_nano = hi >= lo ? (uint64_t)(hi - lo) : 0;
        if (period > 0) {
            pr->period_type = &w->period_type;
            pr->period = period;
        }
        w->prof_ptrs[g] = pr;

        pb_sprof *sp = &w->sps[g];
        canopy__otlp__scope_profiles__init(sp);
        sp->scope = &w->scope;
        sp->n_profiles = 1;
        sp->profiles = &w->prof_ptrs[g];
        w->sp_ptrs[g] = sp;

        /* resource attributes */
        pb_kv *kv = &w->res_kvs[g * n_res_attrs];
        pb_any *v = &w->res_vals[g * n_res_attrs];
        pb_kv **kvp = &w->res_kv_ptrs[g * n_res_attrs];
        size_t na = 0;
        const char *host = w->o ? w->o->host : NULL;
        const char *comm = gr->pid >= 0 ? cn_agg_process_name(p, gr->pid) : NULL;
        /* the cgroup path the profile recorded for the process (common/cgroup.c) */
        cn_cgroup_info *cg = &w->cgroups[g];
        cn_cgroup_identify(gr->pid >= 0 ? cn_agg_process_cgroup(p, gr->pid) : NULL, cg);
        struct {
            const char *key, *s;
            int64_t i;
            bool on;
        } want[N_OWN_ATTRS] = {
            {"host.name", host, 0, host && *host},
            {"process.pid", NULL, gr->pid, gr->pid >= 0},
            {"process.executable.name", comm, 0, comm && *comm},
            {"container.id", cg->container_id, 0, cg->container_id[0] != '\0'},
            {"k8s.pod.uid", cg->pod_uid, 0, cg->pod_uid[0] != '\0'},
        };
        for (size_t a = 0; a < N_OWN_ATTRS; a++) {
            if (!want[a].on)
                continue;
            canopy__otlp__key_value__init(&kv[na]);
            canopy__otlp__any_value__init(&v[na]);
            kv[na].key = (char *)want[a].key;
            if (want[a].s) {
                v[na].value_case = CANOPY__OTLP__ANY_VALUE__VALUE_STRING_VALUE;
                v[na].string_value = (char *)want[a].s;
            } else {
                v[na].value_case = CANOPY__OTLP__ANY_VALUE__VALUE_INT_VALUE;
                v[na].int_value = want[a].i;
            }
            kv[na].value = &v[na];
            kvp[na] = &kv[na];
            na++;
        }
        for (size_t a = 0; w->o && a < w->o->n_attrs; a++) {
            const char *k = w->o->attr_keys[a], *val = w->o->attr_values[a];
            bool dup = !k || !val;
            for (size_t j = 0; j < na && !dup; j++)
                dup = !strcmp(kv[j].key, k);
            if (dup)
                continue;
            canopy__otlp__key_value__init(&kv[na]);
            canopy__otlp__any_value__init(&v[na]);
            kv[na].key = (char *)k;
            v[na].value_case = CANOPY__OTLP__ANY_VALUE__VALUE_STRING_VALUE;
            v[na].string_value = (char *)val;
            kv[na].value = &v[na];
            kvp[na] = &kv[na];
            na++;
        }
        pb_resource *res = &w->resources[g];
        canopy__otlp__resource__init(res);
        res->n_attributes = na;
        res->attributes = kvp;

        pb_rprof *rp = &w->rps[g];
        canopy__otlp__resource_profiles__init(rp);
        rp->resource = res;
        rp->n_scope_profiles = 1;
        rp->scope_profiles = &w->sp_ptrs[g];
        w->rp_ptrs[g] = rp;
    }
    free(start);
    m->n_resource_profiles = ng;
    m->resource_profiles = w->rp_ptrs;
    return 0;
}

int cn_fmt_write_otlp(cn_agg_profile *p, const cn_agg_query *q, const cn_fmt_otlp_opts *o,
                      FILE *out, cn_err *err)
{
    ow w = {.p = p, .raw = cn_fmt__query_is_raw(q), .o = o};
    cn_agg_tree *tree = NULL;
    pb_data m;
    pb_dict d;
    uint8_t *buf = NULL;
    canopy__otlp__profiles_data__init(&m);
    canopy__otlp__profiles_dictionary__init(&d);
    canopy__otlp__link__init(&w.zero_link);
    int rc = collect_rows(&w, q, &tree, err);
    if (rc < 0)
        goto out;
    size_t nleaves = w.raw ? cn_agg_stack_count(p) : (tree ? tree->n_nodes : 0);
    if (cn_fmt__dict_init(&w.d, p, w.raw) < 0 || !CN_FMT_ALLOC_N(w.stack_of, nleaves) ||
        !CN_FMT_ALLOC_N(w.stack_leaf, nleaves) || add_attr(&w, "", NULL, 0) < 0)
        goto nomem;
    /* attribute_table[0] (key "", no value) and string_table[0] ("") are the zero values */
    for (size_t i = 0; i < w.n_rows; i++)
        use_stack(&w, &w.rows[i]);
    if (thread_attrs(&w) < 0 || build_functions(&w, &d) < 0 || build_locations(&w, &d) < 0 ||
        build_mappings(&w, &d) < 0 || build_stacks(&w, &d) < 0 || build_resources(&w, &m, q) < 0 ||
        link_attrs(&w, &d) < 0)
        goto nomem;
    w.link_ptr = &w.zero_link;
    d.n_link_table = 1;
    d.link_table = &w.link_ptr;
    d.n_string_table = w.d.n_strs;
    d.string_table = w.d.strs;
    m.dictionary = &d;
    size_t len = canopy__otlp__profiles_data__get_packed_size(&m);
    if (!(buf = malloc(len ? len : 1)))
        goto nomem;
    canopy__otlp__profiles_data__pack(&m, buf);
    if (len && fwrite(buf, 1, len, out) != len) {
        rc = cn_err_set(err, -EIO, "writing OTLP output: %s", strerror(EIO));
        goto out;
    }
    rc = cn_fmt__finish_output(out, "OTLP", err);
    goto out;
nomem:
    rc = cn_err_set(err, -ENOMEM, "OTLP output: out of memory");
out:
    free(buf);
    cn_agg_tree_free(tree);
    ow_free(&w);
    return rc;
}
