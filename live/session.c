/* session.c — one live (or saved) profiling session: sampler → aggregate ← symbolizer.
 *
 * The sampler's callbacks queue each sample's leaf-first (resource, offset) frames and
 * {time since start, thread} in a per-session batch (pend, pend_refs), which goes to
 * aggregate in one cn_agg_add_samples_refs() call (callchains hashed a group at a time,
 * cache slots prefetched) when it fills and at the end of every read, so the profile is
 * complete whenever the owner looks at it. Objects map to aggregate resources by the
 * sampler's dense object id (obj_res) and back (res_obj, so a frame's resource tells the
 * symbolizer which file to read). Frames are handed to the symbolizer in order of
 * creation: frames [0, next_frame) have been submitted. Saved sessions have no sampler:
 * their counters come from the file's metadata.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cn_sym.h"
#include "d_internal.h"

#define DEFAULT_RETENTION_NS (600LL * 1000000000)
#define DEFAULT_MAX_MEMORY   ((size_t)256 << 20)
#define FOLD_EVERY_NS        1000000000LL
#define SUBMIT_BATCH         512

const char *cn_d_kind_name(cn_d_kind k)
{
    switch (k) {
    case CN_D_ATTACH:
        return "attach";
    case CN_D_RUN:
        return "run";
    case CN_D_SYSTEM:
        return "system";
    }
    return "?";
}

const char *cn_d_state_name(cn_d_state s)
{
    switch (s) {
    case CN_D_RUNNING:
        return "running";
    case CN_D_EXITED:
        return "exited";
    case CN_D_STOPPED:
        return "stopped";
    case CN_D_SAVED:
        return "saved";
    }
    return "?";
}

void cn_d_session_opts_init(cn_d_session_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->unwind = CN_SMP_UNWIND_AUTO;
}

/* ---- sampler callbacks ------------------------------------------------------------- */

static int32_t obj_resource(cn_d_session *s, const cn_smp_object *obj)
{
    if (obj->id < s->n_obj_res && s->obj_res[obj->id] != INT32_MIN)
        return s->obj_res[obj->id];
    return -1;
}

static void on_object(void *arg, const cn_smp_object *obj)
{
    cn_d_session *s = arg;
    if (obj->id >= s->n_obj_res) {
        size_t n = obj->id + 64;
        int32_t *a = realloc(s->obj_res, n * sizeof(*a));
        if (!a)
            return;
        for (size_t i = s->n_obj_res; i < n; i++)
            a[i] = INT32_MIN;
        s->obj_res = a;
        s->n_obj_res = n;
    }
    cn_agg_resource_kind kind;
    switch (obj->kind) {
    case CN_SMP_OBJ_USER:
        kind = CN_AGG_RES_LIBRARY;
        break;
    case CN_SMP_OBJ_KERNEL:
    case CN_SMP_OBJ_MODULE:
        kind = CN_AGG_RES_KERNEL;
        break;
    case CN_SMP_OBJ_JIT:
        kind = CN_AGG_RES_JIT;
        break;
    default:
        s->obj_res[obj->id] = -1; /* anonymous memory: frames are bare addresses */
        return;
    }
    const char *name = obj->kind == CN_SMP_OBJ_JIT ? "[jit]" : obj->name;
    int32_t res = cn_agg_resource(s->p, name, obj->identity, obj->path, kind);
    if (res < 0)
        return;
    if ((size_t)res >= s->n_res_obj) {
        size_t n = (size_t)res + 64;
        const cn_smp_object **a = realloc(s->res_obj, n * sizeof(*a));
        if (!a)
            return;
        memset(a + s->n_res_obj, 0, (n - s->n_res_obj) * sizeof(*a));
        s->res_obj = a;
        s->n_res_obj = n;
    }
    s->res_obj[res] = obj;
    s->obj_res[obj->id] = res;
}

static int32_t thread_of(cn_d_session *s, pid_t pid, pid_t tid)
{
    if (tid == s->last_tid && s->last_thread >= 0)
        return s->last_thread;
    int32_t t = cn_agg_thread(s->p, pid, tid, NULL);
    if (t >= 0) {
        s->last_tid = tid;
        s->last_thread = t;
    }
    return t;
}

_Static_assert(CN_D__PEND_REFS >= CN_SMP_MAX_FRAMES, "pend_refs must hold a max-depth chain");

/* Adds the queued samples to the profile with one batched call (cn_agg_add_samples_refs
 * hashes the callchains of a group together and prefetches their cache slots). An entry
 * that fails is counted as dropped, as cn_agg_add_sample's failure was, and the rest of
 * the queue is still added. Counters move exactly as if each sample had been added on
 * its own: samples and last_sample_ns for every entry added, dropped for every failure.
 * Empties the queue. */
static void flush_samples(cn_d_session *s)
{
    size_t i = 0;
    while (i < s->npend) {
        size_t before = cn_agg_sample_count(s->p);
        int r = cn_agg_add_samples_refs(s->p, s->pend + i, s->npend - i);
        size_t k = cn_agg_sample_count(s->p) - before;
        if (k > s->npend - i)
            k = s->npend - i; /* cannot happen: the profile only grows here */
        for (size_t j = i; j < i + k; j++) {
            s->samples++;
            if (s->pend[j].time_ns > s->last_sample_ns)
                s->last_sample_ns = s->pend[j].time_ns;
        }
        i += k;
        if (r >= 0)
            break;
        if (i < s->npend) {
            s->dropped++; /* pend[i] failed */
            i++;
        }
    }
    s->npend = 0;
    s->npend_refs = 0;
}

/* Queues one sample (its frames copied into pend_refs); flushes when the queue is full
 * or could not take another chain of CN_SMP_MAX_FRAMES. */
static void on_sample(void *arg, const cn_smp_sample *smp)
{
    cn_d_session *s = arg;
    if (s->memory_limited) {
        s->dropped++;
        return;
    }
    uint32_t n = smp->nframes < CN_SMP_MAX_FRAMES ? smp->nframes : CN_SMP_MAX_FRAMES;
    cn_agg_frame_ref *refs = s->pend_refs + s->npend_refs;
    for (uint32_t i = 0; i < n; i++) {
        const cn_smp_frame *f = &smp->frames[i];
        refs[i].resource = obj_resource(s, f->obj);
        refs[i].offset = f->offset;
    }
    int64_t t = (int64_t)smp->time_ns - s->start_mono;
    if (t < 0)
        t = 0;
    s->pend[s->npend++] = (cn_agg_sample_refs){
        .leaf_first = n ? refs : NULL,
        .n = n,
        .time_ns = t,
        .weight = 1.0,
        .thread = thread_of(s, smp->pid, smp->tid),
    };
    s->npend_refs += n;
    if (s->npend == CN_D__PEND_SAMPLES || s->npend_refs > CN_D__PEND_REFS - CN_SMP_MAX_FRAMES)
        flush_samples(s);
}

static void on_task(void *arg, const cn_smp_task_event *ev)
{
    cn_d_session *s = arg;
    if (ev->kind != CN_SMP_TASK_COMM || !ev->comm)
        return;
    int32_t t = cn_agg_thread(s->p, ev->pid, ev->tid, ev->comm);
    if (t >= 0)
        cn_agg_thread_set_name(s->p, t, ev->comm);
    if (ev->pid == ev->tid)
        cn_agg_process_set_name(s->p, ev->pid, ev->comm);
    if (ev->pid == s->pid && ev->tid == s->pid && ev->exec)
        snprintf(s->comm, sizeof(s->comm), "%s", ev->comm); /* `run`: the command's name */
}

/* ---- lifecycle --------------------------------------------------------------------- */

static cn_d_session *session_alloc(const char *id, const char *name)
{
    cn_d_session *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->id = strdup(id ? id : "local");
    s->name = name && *name ? strdup(name) : NULL;
    s->p = cn_agg_profile_new();
    s->last_tid = -1;
    s->last_thread = -1;
    if (!s->id || (name && *name && !s->name) || !s->p)
        return cn_d_session_free(s);
    return s;
}

int cn_d_session_new(const cn_d_session_opts *o, cn_d_symbolizer *sym, cn_d_session **out,
                     cn_err *err)
{
    int r;
    cn_d_session *s = session_alloc(o->id, o->name);
    if (!s)
        return -ENOMEM;
    s->kind = o->kind;
    s->pid = o->kind == CN_D_SYSTEM ? 0 : o->pid;
    s->owner = o->owner;
    s->freq = o->freq ? o->freq : 99;
    s->duration_limit = o->duration_ns;
    s->retention_ns = o->retention_ns ? o->retention_ns : DEFAULT_RETENTION_NS;
    s->max_memory = o->max_memory ? o->max_memory : DEFAULT_MAX_MEMORY;
    if (s->pid)
        cn_d__comm(s->pid, s->comm, sizeof(s->comm));

    cn_smp_config cfg = {
        .target = o->kind == CN_D_SYSTEM ? CN_SMP_TARGET_SYSTEM : CN_SMP_TARGET_PID,
        .pid = s->pid,
        .event = o->event,
        .freq = s->freq,
        .unwind = o->unwind,
        .stack_size = o->stack_size,
        .no_kernel = o->no_kernel,
        .enable_on_exec = o->kind == CN_D_RUN,
        .ring_pages = o->ring_pages,
    };
    static const cn_smp_callbacks cbs = {on_sample, on_task, on_object};
    r = cn_smp_session_new(&cfg, &cbs, s, &s->smp);
    if (r < 0) {
        cn_err_set(err, 0, "sampler: %s", strerror(-r));
        goto fail;
    }
    s->start_mono = cn_common_now_ns();
    s->started_unix = (int64_t)time(NULL);
    r = cn_smp_session_start(s->smp);
    if (r < 0) {
        const char *m = cn_smp_session_errmsg(s->smp);
        cn_err_set(err, 0, "%s", m && *m ? m : strerror(-r));
        goto fail;
    }
    s->event = strdup(cn_smp_session_event(s->smp));
    if (!s->event) {
        r = -ENOMEM;
        goto fail;
    }
    snprintf(s->unwind, sizeof(s->unwind), "%s", cn_smp_unwind_name(cn_smp_session_unwind(s->smp)));
    cn_agg_profile_set_unit(s->p, CN_AGG_UNIT_SAMPLES);
    cn_agg_meta_set(s->p, "event", s->event);
    s->state = CN_D_RUNNING;
    s->dirty = true;
    if (sym)
        cn_d__symbolizer_attach(sym, s);
    *out = s;
    return 0;
fail:
    cn_d_session_free(s);
    return r;
}

cn_d_session *cn_d_session_free(cn_d_session *s)
{
    if (!s)
        return NULL;
    if (s->sym)
        cn_d__symbolizer_detach(s->sym, s);
    if (s->smp) {
        cn_smp_session_stop(s->smp);
        cn_smp_session_free(s->smp);
    }
    cn_agg_profile_free(s->p);
    free(s->obj_res);
    free(s->res_obj);
    free(s->id);
    free(s->name);
    free(s->event);
    free(s->path);
    free(s);
    return NULL;
}

size_t cn_d_session_fds(const cn_d_session *s, const int **fds)
{
    if (s->state != CN_D_RUNNING || !s->smp) {
        *fds = NULL;
        return 0;
    }
    return cn_smp_session_fds(s->smp, fds);
}

int64_t cn_d_session_now(const cn_d_session *s)
{
    if (s->state == CN_D_RUNNING)
        return cn_common_now_ns() - s->start_mono;
    return s->end_ns;
}

/* The memory bound: fold every raw sample first; if the tables are still over, refuse
 * further samples (counted as dropped) and say so. */
static void enforce_memory(cn_d_session *s)
{
    if (cn_agg_profile_memory(s->p) <= s->max_memory)
        return;
    if (cn_agg_sample_count(s->p) > 0)
        cn_agg_fold_before(s->p, INT64_MAX);
    if (cn_agg_profile_memory(s->p) > s->max_memory)
        s->memory_limited = true;
    s->hit_memory_bound = true;
}

static void finish(cn_d_session *s, cn_d_state state)
{
    if (s->state != CN_D_RUNNING)
        return;
    if (s->smp)
        cn_smp_session_stop(s->smp); /* delivers what the rings still held */
    flush_samples(s);
    s->end_ns = cn_common_now_ns() - s->start_mono;
    s->state = state;
    s->dirty = true;
    if (s->sym)
        cn_d__symbolizer_submit(s->sym, s);
}

int cn_d_session_pump(cn_d_session *s)
{
    if (s->state != CN_D_RUNNING || !s->smp)
        return 0;
    uint64_t before = s->samples;
    int r = cn_smp_session_read(s->smp);
    flush_samples(s); /* even after an error: what was delivered is queued */
    if (r < 0)
        return r;
    int64_t now = cn_common_now_ns() - s->start_mono;
    if (s->samples != before)
        s->dirty = true;
    if (s->retention_ns > 0 && now - s->last_fold_ns >= FOLD_EVERY_NS) {
        s->last_fold_ns = now;
        if (now > s->retention_ns && cn_agg_sample_count(s->p) > 0)
            cn_agg_fold_before(s->p, now - s->retention_ns);
    }
    enforce_memory(s);
    if (s->sym)
        cn_d__symbolizer_submit(s->sym, s);
    if (cn_smp_session_ended(s->smp))
        finish(s, CN_D_EXITED);
    else if (s->duration_limit > 0 && now >= s->duration_limit)
        finish(s, CN_D_STOPPED);
    return (int)(s->samples - before);
}

int cn_d_session_stop(cn_d_session *s)
{
    finish(s, CN_D_STOPPED);
    return 0;
}

void cn_d_session_info_get(const cn_d_session *s, cn_d_session_info *out)
{
    memset(out, 0, sizeof(*out));
    out->id = s->id;
    out->name = s->name;
    out->kind = s->kind;
    out->state = s->state;
    out->pid = s->pid;
    snprintf(out->comm, sizeof(out->comm), "%s", s->comm);
    out->owner = s->owner;
    out->event = s->event ? s->event : "";
    out->freq = s->freq;
    out->unwind = s->unwind;
    out->started_unix = s->started_unix;
    out->duration_ns = cn_d_session_now(s);
    out->samples = s->samples;
    out->dropped = s->dropped;
    out->lost = s->lost_saved;
    out->threads = s->threads_saved;
    if (s->smp) {
        cn_smp_counters c;
        cn_smp_session_counters(s->smp, &c);
        out->lost = c.lost;
        out->threads = c.threads;
    }
    out->unsymbolized = s->sym_pending + s->sym_failed;
    out->memory = cn_agg_profile_memory(s->p);
    out->memory_limited = s->hit_memory_bound;
}

cn_agg_profile *cn_d_session_profile(cn_d_session *s)
{
    flush_samples(s); /* a no-op outside pump/finish, where the queue is always empty */
    return s->p;
}

bool cn_d_session_dirty(const cn_d_session *s)
{
    return s->dirty;
}

void cn_d_session_mark_clean(cn_d_session *s)
{
    s->dirty = false;
}

json_t *cn_d_session_json(const cn_d_session *s)
{
    cn_d_session_info i;
    cn_d_session_info_get(s, &i);
    json_t *target = s->kind == CN_D_SYSTEM
                         ? json_string("system")
                         : json_pack("{s:i, s:s}", "pid", (int)i.pid, "comm", i.comm);
    json_t *o = json_pack(
        "{s:s, s:s?, s:s, s:o, s:s, s:s, s:i, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:b, s:I, "
        "s:f, s:I}",
        "id", i.id, "name", i.name, "kind", cn_d_kind_name(i.kind), "target", target, "state",
        cn_d_state_name(i.state), "event", i.event, "freq", (int)i.freq, "unwind", i.unwind,
        "samples", (json_int_t)i.samples, "lost", (json_int_t)i.lost, "dropped",
        (json_int_t)i.dropped, "threads", (json_int_t)i.threads, "unsymbolized",
        (json_int_t)i.unsymbolized, "memory", (json_int_t)i.memory, "memory_limited",
        i.memory_limited, "started", (json_int_t)i.started_unix, "duration_s",
        (double)i.duration_ns / 1e9, "owner", (json_int_t)i.owner);
    return o;
}

/* ---- persistence ------------------------------------------------------------------- */

static int meta_seti(cn_agg_profile *p, const char *key, int64_t v)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%" PRId64, v);
    return cn_agg_meta_set(p, key, buf);
}

static int64_t meta_geti(const cn_agg_profile *p, const char *key, int64_t def)
{
    const char *v = cn_agg_meta_get(p, key);
    if (!v || !*v)
        return def;
    char *end;
    long long x = strtoll(v, &end, 10);
    return *end ? def : (int64_t)x;
}

static int write_meta(cn_d_session *s)
{
    cn_d_session_info i;
    cn_d_session_info_get(s, &i);
    cn_agg_profile *p = s->p;
    int r = 0;
    r |= cn_agg_meta_set(p, "canopy.session.id", s->id);
    r |= cn_agg_meta_set(p, "canopy.session.name", s->name ? s->name : "");
    r |= cn_agg_meta_set(p, "canopy.session.kind", cn_d_kind_name(s->kind));
    r |= cn_agg_meta_set(p, "canopy.session.state",
                         cn_d_state_name(s->state == CN_D_SAVED ? s->saved_state : s->state));
    r |= cn_agg_meta_set(p, "canopy.session.comm", s->comm);
    r |= cn_agg_meta_set(p, "canopy.session.unwind", s->unwind);
    r |= cn_agg_meta_set(p, "event", i.event);
    r |= meta_seti(p, "freq", i.freq);
    r |= meta_seti(p, "canopy.session.pid", i.pid);
    r |= meta_seti(p, "canopy.session.owner", i.owner);
    r |= meta_seti(p, "canopy.session.started", i.started_unix);
    r |= meta_seti(p, "canopy.session.duration_ns", i.duration_ns);
    r |= meta_seti(p, "canopy.session.samples", (int64_t)i.samples);
    r |= meta_seti(p, "canopy.session.lost", (int64_t)i.lost);
    r |= meta_seti(p, "canopy.session.dropped", (int64_t)i.dropped);
    r |= meta_seti(p, "canopy.session.threads", (int64_t)i.threads);
    r |= meta_seti(p, "canopy.session.memory_limited", i.memory_limited);
    return r < 0 ? -ENOMEM : 0;
}

int cn_d_session_save(cn_d_session *s, const char *path, cn_err *err)
{
    char tmp[4096];
    int r, fd = -1;
    FILE *f = NULL;
    if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp)) {
        cn_err_set(err, 0, "%s: path too long", path);
        return -ENAMETOOLONG;
    }
    flush_samples(s);
    r = write_meta(s);
    if (r < 0) {
        cn_err_set(err, 0, "%s: out of memory", path);
        return r;
    }
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        r = -errno;
        cn_err_set(err, 0, "%s: %s", tmp, strerror(errno));
        return r;
    }
    f = fdopen(fd, "w");
    if (!f) {
        r = -errno;
        close(fd);
        goto fail;
    }
    r = cn_agg_write_canopy(s->p, f);
    if (r < 0)
        goto fail;
    if (fflush(f) != 0 || fsync(fd) != 0) {
        r = -errno;
        goto fail;
    }
    if (fclose(f) != 0) {
        f = NULL;
        r = -errno;
        goto fail;
    }
    f = NULL;
    if (rename(tmp, path) < 0) {
        r = -errno;
        goto fail;
    }
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s", path);
    int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    free(s->path);
    s->path = strdup(path);
    s->dirty = s->state == CN_D_RUNNING ? s->dirty : false;
    return 0;
fail:
    cn_err_set(err, 0, "%s: %s", tmp, strerror(-r));
    if (f)
        fclose(f);
    unlink(tmp);
    return r;
}

static cn_d_kind kind_parse(const char *k)
{
    if (k && !strcmp(k, "system"))
        return CN_D_SYSTEM;
    if (k && !strcmp(k, "run"))
        return CN_D_RUN;
    return CN_D_ATTACH;
}

static cn_d_state state_parse(const char *k)
{
    if (k && !strcmp(k, "exited"))
        return CN_D_EXITED;
    return CN_D_STOPPED;
}

int cn_d_session_load(const char *path, cn_d_session **out, cn_err *err)
{
    cn_err aerr = {0};
    cn_agg_profile *p = NULL;
    int r = cn_agg_import_file(path, &p, &aerr);
    if (r < 0) {
        cn_err_set(err, 0, "%s", aerr.msg);
        return r;
    }
    const char *id = cn_agg_meta_get(p, "canopy.session.id");
    if (!id || !*id) {
        cn_err_set(err, 0, "%s: not a canopyd session (no canopy.session.id)", path);
        cn_agg_profile_free(p);
        return -EINVAL;
    }
    cn_d_session *s = session_alloc(id, cn_agg_meta_get(p, "canopy.session.name"));
    if (!s) {
        cn_agg_profile_free(p);
        return -ENOMEM;
    }
    cn_agg_profile_free(s->p);
    s->p = p;
    s->kind = kind_parse(cn_agg_meta_get(p, "canopy.session.kind"));
    s->saved_state = state_parse(cn_agg_meta_get(p, "canopy.session.state"));
    s->state = CN_D_SAVED;
    snprintf(s->comm, sizeof(s->comm), "%s",
             cn_agg_meta_get(p, "canopy.session.comm") ? cn_agg_meta_get(p, "canopy.session.comm")
                                                       : "");
    const char *uw = cn_agg_meta_get(p, "canopy.session.unwind");
    snprintf(s->unwind, sizeof(s->unwind), "%s", uw ? uw : "");
    const char *ev = cn_agg_meta_get(p, "event");
    s->event = strdup(ev ? ev : "");
    s->path = strdup(path);
    s->freq = (uint32_t)meta_geti(p, "freq", 0);
    s->pid = (pid_t)meta_geti(p, "canopy.session.pid", 0);
    s->owner = (uid_t)meta_geti(p, "canopy.session.owner", 0);
    s->started_unix = meta_geti(p, "canopy.session.started", 0);
    s->end_ns = meta_geti(p, "canopy.session.duration_ns", 0);
    s->samples = (uint64_t)meta_geti(p, "canopy.session.samples", 0);
    s->lost_saved = (uint64_t)meta_geti(p, "canopy.session.lost", 0);
    s->dropped = (uint64_t)meta_geti(p, "canopy.session.dropped", 0);
    s->threads_saved = (uint64_t)meta_geti(p, "canopy.session.threads", 0);
    s->hit_memory_bound = meta_geti(p, "canopy.session.memory_limited", 0) != 0;
    if (!s->event || !s->path) {
        cn_d_session_free(s);
        return -ENOMEM;
    }
    *out = s;
    return 0;
}
