/* import_pprof.c — pprof profile.proto (already gunzipped by import.c) into a profile.
 *
 * Reads what canopy writes and what other tools write (Go's runtime/pprof, `go tool
 * pprof -proto`, pprof-rs …). Steps: a scan of the top-level wire format (so a truncated
 * or corrupt file is reported at its byte offset), protobuf-c's unpack, then a check of
 * every cross reference (string indexes, mapping/location/function ids) before anything
 * is built. Mappings become resources (build-id as identity), functions become funcs per
 * resource, each location becomes its inline chain of frames (outer first; a location
 * without lines becomes a native frame at its file offset, to be symbolized later), and
 * each sample adds one sample weighing its value of the default sample type. Labels
 * `tid`, `pid` and `thread` (as canopy writes them) restore threads. A function whose
 * system_name is `py::NAME:FILE` for its own NAME (frame_kind.c: what canopy writes for a
 * Python function, CPython's perf-map name) is a Python function of the source file FILE,
 * whatever its location's mapping.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "import_internal.h"
#include "profile.pb-c.h"

typedef Perftools__Profiles__Profile pb_profile;

/* ---- wire scan -------------------------------------------------------------------- */

/* Reads a varint at *pos. Returns false when it runs past len or exceeds 10 bytes. */
static bool read_varint(const uint8_t *b, size_t len, size_t *pos, uint64_t *v)
{
    uint64_t x = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (*pos >= len)
            return false;
        uint8_t c = b[(*pos)++];
        x |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *v = x;
            return true;
        }
    }
    return false;
}

/* Wire type each Profile field must have (2 = length-delimited; packed repeated int64
 * also accepts 0 for field 13, as protobuf allows unpacked encoding). */
static bool field_ok(uint64_t field, uint64_t wt)
{
    switch (field) {
    case 1:
    case 2:
    case 3:
    case 4:
    case 5:
    case 6:
    case 11:
        return wt == 2;
    case 13:
        return wt == 0 || wt == 2;
    case 7:
    case 8:
    case 9:
    case 10:
    case 12:
    case 14:
    case 15:
        return wt == 0;
    default:
        return false;
    }
}

/* Scans the top-level fields. Returns the number of fields read; *bad_at is the offset of
 * the first field that is unknown, has the wrong wire type or runs past the end
 * (SIZE_MAX when the whole buffer is well formed); *binary is set when a field's bytes
 * include a control byte or a byte >= 0x80 (text never does). */
static size_t wire_scan(const uint8_t *b, size_t len, size_t *bad_at, bool *binary,
                        size_t *field_at, uint64_t *field_no, size_t max_fields)
{
    size_t pos = 0, n = 0;
    *bad_at = SIZE_MAX;
    while (pos < len) {
        size_t start = pos;
        uint64_t tag, v;
        if (!read_varint(b, len, &pos, &tag) || !field_ok(tag >> 3, tag & 7))
            goto bad;
        if ((tag & 7) == 0) {
            if (!read_varint(b, len, &pos, &v))
                goto bad;
        } else {
            if (!read_varint(b, len, &pos, &v) || v > len - pos)
                goto bad;
            pos += v;
        }
        for (size_t i = start; i < pos && !*binary && i < start + 64; i++)
            if (b[i] >= 0x80 || (b[i] < 0x20 && b[i] != '\n' && b[i] != '\t' && b[i] != '\r'))
                *binary = true;
        if (field_at && n < max_fields) {
            field_at[n] = start;
            field_no[n] = tag >> 3;
        }
        n++;
        continue;
    bad:
        *bad_at = start;
        return n;
    }
    return n;
}

bool cn_fmt__is_pprof(const void *data, size_t len)
{
    size_t bad;
    bool binary = false;
    size_t n = wire_scan(data, len, &bad, &binary, NULL, NULL, 0);
    if (n == 0)
        return false;
    if (bad == SIZE_MAX)
        return true;
    return n >= 2 && binary; /* a truncated or damaged pprof: let the importer say where */
}

/* ---- import state ----------------------------------------------------------------- */

typedef struct importer {
    const pb_profile *m;
    const char *name;
    cn_agg_profile *p;
    cn_err *err;
    cn_u64map map_by_id, loc_by_id, fn_by_id; /* pprof id -> index */
    int32_t *map_res;                         /* mapping index -> resource (-2 = todo) */
    cn_u64map func_of;                        /* (function index, res) -> func */
    int32_t *loc_frames;                      /* frames of every location, outer first */
    size_t *loc_off;  /* location index -> offset in loc_frames (n_location + 1) */
    int32_t *scratch; /* one sample's frames, root first */
    size_t scratch_cap;
} importer;

static void importer_free(importer *im)
{
    cn_u64map_clear(&im->map_by_id);
    cn_u64map_clear(&im->loc_by_id);
    cn_u64map_clear(&im->fn_by_id);
    cn_u64map_clear(&im->func_of);
    free(im->map_res);
    free(im->loc_frames);
    free(im->loc_off);
    free(im->scratch);
}

static bool str_ok(const importer *im, int64_t i)
{
    return i >= 0 && (uint64_t)i < im->m->n_string_table;
}

static const char *str(const importer *im, int64_t i)
{
    return im->m->string_table[i];
}

/* Indexes `n` ids into map; ids must be non-zero and unique. */
static int index_ids(importer *im, cn_u64map *map, size_t n,
                     uint64_t (*id_of)(const void *, size_t), const void *arr, const char *what)
{
    if (n > INT32_MAX)
        return cn_err_set(im->err, -EINVAL, "%s: too many %ss", im->name, what);
    if (cn_u64map_reserve(map, n) < 0)
        return cn_err_set(im->err, -ENOMEM, "%s: out of memory", im->name);
    for (size_t i = 0; i < n; i++) {
        uint64_t id = id_of(arr, i);
        if (id == 0)
            return cn_err_set(im->err, -EINVAL, "%s: %s %zu has id 0", im->name, what, i);
        if (cn_u64map_get(map, id) >= 0)
            return cn_err_set(im->err, -EINVAL, "%s: duplicate %s id %" PRIu64, im->name, what, id);
        if (cn_u64map_put(map, id, (int32_t)i) < 0)
            return cn_err_set(im->err, -ENOMEM, "%s: out of memory", im->name);
    }
    return 0;
}

static uint64_t mapping_id(const void *a, size_t i)
{
    return ((Perftools__Profiles__Mapping *const *)a)[i]->id;
}
static uint64_t location_id(const void *a, size_t i)
{
    return ((Perftools__Profiles__Location *const *)a)[i]->id;
}
static uint64_t function_id(const void *a, size_t i)
{
    return ((Perftools__Profiles__Function *const *)a)[i]->id;
}

/* Every string index and id reference in the message is checked here, so the build
 * steps below cannot index out of range. */
static int validate(importer *im)
{
    const pb_profile *m = im->m;
    const char *nm = im->name;
    if (m->n_string_table == 0 || m->string_table[0][0] != '\0')
        return cn_err_set(im->err, -EINVAL, "%s: string_table[0] must be \"\"", nm);
    for (size_t i = 0; i < m->n_sample_type; i++)
        if (!str_ok(im, m->sample_type[i]->type) || !str_ok(im, m->sample_type[i]->unit))
            return cn_err_set(im->err, -EINVAL, "%s: sample_type %zu: string index out of range",
                              nm, i);
    if (!str_ok(im, m->default_sample_type) ||
        (m->period_type &&
         (!str_ok(im, m->period_type->type) || !str_ok(im, m->period_type->unit))))
        return cn_err_set(im->err, -EINVAL, "%s: string index out of range", nm);
    int rc;
    if ((rc = index_ids(im, &im->map_by_id, m->n_mapping, mapping_id, m->mapping, "mapping")) < 0 ||
        (rc = index_ids(im, &im->loc_by_id, m->n_location, location_id, m->location, "location")) <
            0 ||
        (rc = index_ids(im, &im->fn_by_id, m->n_function, function_id, m->function, "function")) <
            0)
        return rc;
    for (size_t i = 0; i < m->n_mapping; i++)
        if (!str_ok(im, m->mapping[i]->filename) || !str_ok(im, m->mapping[i]->build_id))
            return cn_err_set(im->err, -EINVAL,
                              "%s: mapping %" PRIu64 ": string index out of range", nm,
                              m->mapping[i]->id);
    for (size_t i = 0; i < m->n_function; i++) {
        const Perftools__Profiles__Function *f = m->function[i];
        if (!str_ok(im, f->name) || !str_ok(im, f->system_name) || !str_ok(im, f->filename))
            return cn_err_set(im->err, -EINVAL,
                              "%s: function %" PRIu64 ": string index out of range", nm, f->id);
    }
    for (size_t i = 0; i < m->n_location; i++) {
        const Perftools__Profiles__Location *l = m->location[i];
        if (l->mapping_id && cn_u64map_get(&im->map_by_id, l->mapping_id) < 0)
            return cn_err_set(im->err, -EINVAL,
                              "%s: location %" PRIu64 ": mapping id %" PRIu64 " does not exist", nm,
                              l->id, l->mapping_id);
        for (size_t j = 0; j < l->n_line; j++)
            if (cn_u64map_get(&im->fn_by_id, l->line[j]->function_id) < 0)
                return cn_err_set(im->err, -EINVAL,
                                  "%s: location %" PRIu64 ": function id %" PRIu64
                                  " does not exist",
                                  nm, l->id, l->line[j]->function_id);
    }
    for (size_t i = 0; i < m->n_sample; i++) {
        const Perftools__Profiles__Sample *s = m->sample[i];
        if (s->n_value != m->n_sample_type)
            return cn_err_set(im->err, -EINVAL,
                              "%s: sample %zu has %zu values for %zu sample types", nm, i,
                              s->n_value, m->n_sample_type);
        for (size_t j = 0; j < s->n_location_id; j++)
            if (cn_u64map_get(&im->loc_by_id, s->location_id[j]) < 0)
                return cn_err_set(im->err, -EINVAL,
                                  "%s: sample %zu: location id %" PRIu64 " does not exist", nm, i,
                                  s->location_id[j]);
        for (size_t j = 0; j < s->n_label; j++)
            if (!str_ok(im, s->label[j]->key) || !str_ok(im, s->label[j]->str) ||
                !str_ok(im, s->label[j]->num_unit))
                return cn_err_set(im->err, -EINVAL,
                                  "%s: sample %zu: label string index out of range", nm, i);
    }
    return 0;
}

/* ---- building --------------------------------------------------------------------- */

/* The resource of mapping index mi (-1 for none), created on first use. */
static int32_t mapping_resource(importer *im, int32_t mi)
{
    if (mi < 0)
        return -1;
    if (im->map_res[mi] != -2)
        return im->map_res[mi];
    const Perftools__Profiles__Mapping *mp = im->m->mapping[mi];
    const char *file = str(im, mp->filename);
    const char *build_id = str(im, mp->build_id);
    int32_t res = -1;
    if (*file || *build_id) {
        const char *base = strrchr(file, '/');
        base = base && base[1] ? base + 1 : file;
        cn_agg_resource_kind kind = CN_AGG_RES_LIBRARY;
        if (strncmp(file, "[kernel", 7) == 0) {
            base = "[kernel]";
            kind = CN_AGG_RES_KERNEL;
        } else if (strcmp(file, "[jit]") == 0) {
            kind = CN_AGG_RES_JIT;
        } else if (file[0] == '[') {
            kind = CN_AGG_RES_OTHER;
        }
        if (!*base)
            base = build_id;
        res = cn_agg_resource(im->p, base, *build_id ? build_id : NULL,
                              strchr(file, '/') ? file : NULL, kind);
    }
    im->map_res[mi] = res;
    return res;
}

/* The Python source file of function index fi (its system_name `py::NAME:FILE`, FILE
 * agreeing with its filename when it has one), or NULL for any other function. */
static const char *python_file(const importer *im, int32_t fi)
{
    const Perftools__Profiles__Function *f = im->m->function[fi];
    const char *file = str(im, f->filename);
    const char *py = cn_fmt__py_system_file(str(im, f->system_name), str(im, f->name));
    return py && *str(im, f->name) && (!*file || !strcmp(file, py)) ? py : NULL;
}

/* The func of function fn_id in the location's resource res (-2: the mapping's, not made
 * yet: made here with mapping_resource(mi) unless the function is a Python function,
 * whose resource is its source file's). */
static int32_t function_func(importer *im, uint64_t fn_id, int32_t *res, int32_t mi)
{
    int32_t fi = cn_u64map_get(&im->fn_by_id, fn_id);
    const char *py = python_file(im, fi);
    int32_t fres = py ? cn_agg_python_resource(im->p, py) : *res;
    if (fres == -2)
        fres = *res = mapping_resource(im, mi);
    if (fres < -1)
        return fres;
    uint64_t key = cn_pair(fi, fres);
    int32_t func = cn_u64map_get(&im->func_of, key);
    if (func >= 0)
        return func;
    const Perftools__Profiles__Function *f = im->m->function[fi];
    const char *name = str(im, f->name);
    if (!*name)
        name = str(im, f->system_name);
    if (!*name)
        name = "[unknown]";
    const char *file = str(im, f->filename);
    int32_t line = f->start_line > 0 && f->start_line <= INT32_MAX ? (int32_t)f->start_line : 0;
    func = cn_agg_func(im->p, name, fres, *file ? file : NULL, line);
    if (func >= 0 && cn_u64map_put(&im->func_of, key, func) < 0)
        return -ENOMEM;
    return func;
}

/* Frames for every location: its lines outer first, or one native frame. */
static int build_locations(importer *im)
{
    const pb_profile *m = im->m;
    size_t total = 0;
    for (size_t i = 0; i < m->n_location; i++)
        total += m->location[i]->n_line ? m->location[i]->n_line : 1;
    im->loc_frames = malloc((total ? total : 1) * sizeof(*im->loc_frames));
    im->loc_off = malloc((m->n_location + 1) * sizeof(*im->loc_off));
    if (!im->loc_frames || !im->loc_off)
        return -ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < m->n_location; i++) {
        const Perftools__Profiles__Location *l = m->location[i];
        im->loc_off[i] = k;
        int32_t mi = l->mapping_id ? cn_u64map_get(&im->map_by_id, l->mapping_id) : -1;
        int32_t res = -2; /* the mapping's resource, made when a frame needs it */
        if (l->n_line == 0) {
            if ((res = mapping_resource(im, mi)) < -1)
                return res;
            uint64_t off = l->address;
            if (mi >= 0 && res >= 0) {
                const Perftools__Profiles__Mapping *mp = m->mapping[mi];
                if (off >= mp->memory_start)
                    off = off - mp->memory_start + mp->file_offset;
            }
            int32_t fr = cn_agg_native_frame(im->p, res, off);
            if (fr < 0)
                return fr;
            im->loc_frames[k++] = fr;
            continue;
        }
        for (size_t j = l->n_line; j-- > 0;) { /* lines are innermost first */
            const Perftools__Profiles__Line *ln = l->line[j];
            int32_t func = function_func(im, ln->function_id, &res, mi);
            if (func < 0)
                return func;
            int64_t addr = l->address && l->address <= INT64_MAX ? (int64_t)l->address : -1;
            int32_t line = ln->line > 0 && ln->line <= INT32_MAX ? (int32_t)ln->line : 0;
            int32_t fr = cn_agg_frame(im->p, func, cn_agg_func_resource(im->p, func), addr, line);
            if (fr < 0)
                return fr;
            im->loc_frames[k++] = fr;
        }
    }
    im->loc_off[m->n_location] = k;
    return 0;
}

/* The thread named by a sample's labels (tid/pid numbers, thread string), or -1. */
static int32_t sample_thread(importer *im, const Perftools__Profiles__Sample *s)
{
    int64_t tid = -1, pid = 0;
    const char *name = NULL;
    for (size_t j = 0; j < s->n_label; j++) {
        const char *key = str(im, s->label[j]->key);
        if (strcmp(key, "tid") == 0 || strcmp(key, "thread_id") == 0)
            tid = s->label[j]->num;
        else if (strcmp(key, "pid") == 0)
            pid = s->label[j]->num;
        else if (strcmp(key, "thread") == 0 || strcmp(key, "thread_name") == 0)
            name = str(im, s->label[j]->str);
    }
    if (tid < 0 || tid > INT32_MAX || pid < 0 || pid > INT32_MAX)
        return -1;
    return cn_agg_thread(im->p, (int32_t)pid, (int32_t)tid, name && *name ? name : NULL);
}

/* Which sample type the weights come from, and the profile's unit for it. */
static size_t choose_value(importer *im)
{
    const pb_profile *m = im->m;
    size_t idx = m->n_sample_type ? m->n_sample_type - 1 : 0;
    for (size_t i = 0; m->default_sample_type && i < m->n_sample_type; i++)
        if (m->sample_type[i]->type == m->default_sample_type)
            idx = i;
    if (m->n_sample_type == 0)
        return 0;
    const char *type = str(im, m->sample_type[idx]->type);
    const char *unit = str(im, m->sample_type[idx]->unit);
    cn_agg_unit u = CN_AGG_UNIT_EVENTS;
    double scale = 1;
    if (strcmp(unit, "nanoseconds") == 0)
        u = CN_AGG_UNIT_NS;
    else if (strcmp(unit, "microseconds") == 0)
        u = CN_AGG_UNIT_US;
    else if (strcmp(unit, "milliseconds") == 0)
        u = CN_AGG_UNIT_MS;
    else if (strcmp(unit, "seconds") == 0)
        u = CN_AGG_UNIT_MS, scale = 1000;
    else if (strcmp(unit, "count") == 0 && strcmp(type, "samples") == 0)
        u = CN_AGG_UNIT_SAMPLES;
    cn_agg_profile_set_unit(im->p, u);
    cn_agg_profile_set_scale(im->p, scale);
    char desc[256];
    snprintf(desc, sizeof(desc), "%s/%s", type, unit);
    cn_agg_meta_set(im->p, "pprof.sample_type", desc);
    if (u == CN_AGG_UNIT_EVENTS && strcmp(type, "samples") != 0)
        cn_agg_meta_set(im->p, "event", type);
    return idx;
}

static int build_samples(importer *im)
{
    const pb_profile *m = im->m;
    size_t vi = choose_value(im);
    for (size_t i = 0; i < m->n_sample; i++) {
        const Perftools__Profiles__Sample *s = m->sample[i];
        size_t n = 0;
        for (size_t j = 0; j < s->n_location_id; j++) {
            int32_t li = cn_u64map_get(&im->loc_by_id, s->location_id[j]);
            n += im->loc_off[li + 1] - im->loc_off[li];
        }
        if (n == 0 || s->value[vi] == 0)
            continue; /* no stack, or nothing to weigh */
        if (n > im->scratch_cap) {
            free(im->scratch);
            im->scratch_cap = n;
            if (!(im->scratch = malloc(n * sizeof(*im->scratch))))
                return -ENOMEM;
        }
        /* location_id is leaf first and each location's frames outer first: fill the
         * root-first array from its end, location by location. */
        size_t k = n;
        for (size_t j = 0; j < s->n_location_id; j++) {
            int32_t li = cn_u64map_get(&im->loc_by_id, s->location_id[j]);
            size_t lo = im->loc_off[li], hi = im->loc_off[li + 1];
            k -= hi - lo;
            memcpy(im->scratch + k, im->loc_frames + lo, (hi - lo) * sizeof(int32_t));
        }
        int32_t stack = cn_agg_stack_from_frames(im->p, im->scratch, n);
        if (stack < 0)
            return stack;
        int32_t thread = sample_thread(im, s);
        if (thread < -1)
            return thread;
        int rc = cn_agg_add_sample(im->p, stack, 0, (double)s->value[vi], thread);
        if (rc < 0)
            return rc;
    }
    if (m->period > 0) {
        char buf[32];
        snprintf(buf, sizeof(buf), "%" PRId64, m->period);
        cn_agg_meta_set(im->p, "period", buf);
    }
    return cn_agg_meta_set(im->p, "format", "pprof");
}

/* After protobuf-c refused the buffer: the offset of the first top-level field whose
 * own message does not decode, for the error message. */
static size_t find_bad_field(const uint8_t *b, size_t len)
{
    enum { MAX = 1 << 16 };
    size_t *at = malloc(MAX * sizeof(*at));
    uint64_t *no = malloc(MAX * sizeof(*no));
    size_t bad = 0;
    bool binary = false;
    if (!at || !no)
        goto out;
    size_t n = wire_scan(b, len, &bad, &binary, at, no, MAX);
    bad = 0;
    for (size_t i = 0; i < n && i < MAX; i++) {
        size_t pos = at[i];
        uint64_t tag, flen;
        if (!read_varint(b, len, &pos, &tag) || !read_varint(b, len, &pos, &flen))
            break;
        const ProtobufCMessageDescriptor *d = NULL;
        switch (no[i]) {
        case 1:
        case 11:
            d = &perftools__profiles__value_type__descriptor;
            break;
        case 2:
            d = &perftools__profiles__sample__descriptor;
            break;
        case 3:
            d = &perftools__profiles__mapping__descriptor;
            break;
        case 4:
            d = &perftools__profiles__location__descriptor;
            break;
        case 5:
            d = &perftools__profiles__function__descriptor;
            break;
        default:
            continue;
        }
        ProtobufCMessage *msg = protobuf_c_message_unpack(d, NULL, flen, b + pos);
        if (!msg) {
            bad = at[i];
            break;
        }
        protobuf_c_message_free_unpacked(msg, NULL);
    }
out:
    free(at);
    free(no);
    return bad;
}

int cn_fmt__import_pprof(const void *data, size_t len, const char *name, cn_agg_profile **out,
                         cn_err *err)
{
    importer im = {.name = name, .err = err};
    pb_profile *m = NULL;
    size_t bad;
    bool binary = false;
    int rc;
    wire_scan(data, len, &bad, &binary, NULL, NULL, 0);
    if (len == 0)
        return cn_err_set(err, -EINVAL, "%s: empty pprof profile", name);
    if (bad != SIZE_MAX)
        return cn_err_set(err, -EINVAL, "%s: byte %zu: truncated or malformed pprof field", name,
                          bad);
    m = perftools__profiles__profile__unpack(NULL, len, data);
    if (!m)
        return cn_err_set(err, -EINVAL, "%s: byte %zu: malformed pprof message", name,
                          find_bad_field(data, len));
    im.m = m;
    if ((rc = validate(&im)) < 0)
        goto out;
    rc = -ENOMEM;
    if (!(im.p = cn_agg_profile_new()))
        goto nomem;
    if (!(im.map_res = malloc((m->n_mapping ? m->n_mapping : 1) * sizeof(*im.map_res))))
        goto nomem;
    for (size_t i = 0; i < m->n_mapping; i++)
        im.map_res[i] = -2;
    if ((rc = build_locations(&im)) < 0 || (rc = build_samples(&im)) < 0) {
        rc = cn_err_set(err, rc, "%s: %s", name, strerror(-rc));
        goto out;
    }
    *out = im.p;
    im.p = NULL;
    rc = 0;
    goto out;
nomem:
    rc = cn_err_set(err, -ENOMEM, "%s: out of memory", name);
out:
    cn_agg_profile_free(im.p);
    importer_free(&im);
    perftools__profiles__profile__free_unpacked(m, NULL);
    return rc;
}
