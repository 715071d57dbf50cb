/* persist.c — a session as a .canopy file: save (the session's identity and counters in
 * the file's metadata, written atomically) and load (a SAVED session from such a file).
 *
 * Saved sessions have no sampler: their counters come from the file's metadata. Reading
 * and writing the profile is aggregate's (cn_agg_write_canopy); live/ reads no files.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "live_internal.h"

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

/* The Python frames' counters in a saved session's metadata (docs/canopy-format.md), in
 * the order of cn_live_session's py_saved. */
static const char *const py_keys[] = {
    "canopy.session.python.registered", "canopy.session.python.refused",
    "canopy.session.python.samples",    "canopy.session.python.joined",
    "canopy.session.python.no_record",  "canopy.session.python.mismatch",
};
_Static_assert(sizeof(py_keys) / sizeof(py_keys[0]) ==
                   sizeof(((cn_live_session *)0)->py_saved) / sizeof(uint64_t),
               "one key per saved Python counter");

static int write_meta(cn_live_session *s)
{
    cn_live_session_info i;
    cn_live_session_info_get(s, &i);
    cn_agg_profile *p = s->p;
    int r = 0;
    r |= cn_agg_meta_set(p, "canopy.session.id", s->id);
    r |= cn_agg_meta_set(p, "canopy.session.name", s->name ? s->name : "");
    r |= cn_agg_meta_set(p, "canopy.session.kind", cn_live_kind_name(s->kind));
    r |= cn_agg_meta_set(p, "canopy.session.state",
                         cn_live_state_name(s->state == CN_LIVE_SAVED ? s->saved_state : s->state));
    r |= cn_agg_meta_set(p, "canopy.session.comm", s->comm);
    r |= cn_agg_meta_set(p, "canopy.session.unwind", s->unwind);
    r |= cn_agg_meta_set(p, "mode", cn_smp_mode_name(s->mode));
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
    r |= meta_seti(p, "canopy.session.user_stacks", (int64_t)i.user_stacks);
    r |= meta_seti(p, "canopy.session.unwind.complete", (int64_t)i.unwind_outcomes.complete);
    r |= meta_seti(p, "canopy.session.unwind.truncated_stack",
                   (int64_t)i.unwind_outcomes.truncated_stack);
    r |= meta_seti(p, "canopy.session.unwind.no_cfi", (int64_t)i.unwind_outcomes.no_cfi);
    r |= meta_seti(p, "canopy.session.unwind.read_fault", (int64_t)i.unwind_outcomes.read_fault);
    r |= meta_seti(p, "canopy.session.unwind.other", (int64_t)i.unwind_outcomes.other);
    if (i.python) {
        const uint64_t py[] = {i.py_registered, i.py_refused,   i.py_samples,
                               i.py_joined,     i.py_no_record, i.py_mismatch};
        r |= cn_agg_meta_set(p, "canopy.session.python", i.python);
        for (size_t k = 0; k < sizeof(py) / sizeof(py[0]); k++)
            r |= meta_seti(p, py_keys[k], (int64_t)py[k]);
    }
    return r < 0 ? -ENOMEM : 0;
}

int cn_live_session_save(cn_live_session *s, const char *path, cn_err *err)
{
    cn_afile af;
    FILE *f = NULL;
    assert(s->npend == 0); /* pump and finish flush the queue before they return */
    int r = write_meta(s);
    if (r < 0)
        return cn_err_set(err, r, "%s: out of memory", path);
    r = cn_afile_open(&af, path, 0600, err);
    if (r < 0)
        return r;
    if (!(f = cn_afile_stream(&af))) {
        r = cn_err_set(err, -ENOMEM, "%s: out of memory", path);
        goto fail;
    }
    r = cn_agg_write_canopy(s->p, f);
    if (fclose(f) != 0 && r == 0)
        r = -errno;
    if (r < 0) {
        cn_err_set(err, r, "%s: %s", af.tmp, strerror(-r));
        goto fail;
    }
    r = cn_afile_commit(&af, err);
    if (r < 0)
        return r;
    free(s->path);
    s->path = strdup(path);
    s->dirty = s->state == CN_LIVE_RUNNING ? s->dirty : false;
    return 0;
fail:
    cn_afile_abort(&af);
    return r;
}

static cn_live_kind kind_parse(const char *k)
{
    if (k && !strcmp(k, "system"))
        return CN_LIVE_SYSTEM;
    if (k && !strcmp(k, "run"))
        return CN_LIVE_RUN;
    return CN_LIVE_ATTACH;
}

static cn_live_state state_parse(const char *k)
{
    if (k && !strcmp(k, "exited"))
        return CN_LIVE_EXITED;
    return CN_LIVE_STOPPED;
}

int cn_live_session_load(cn_agg_profile *p, const char *path, cn_live_session **out, cn_err *err)
{
    const char *id = cn_agg_meta_get(p, "canopy.session.id");
    if (!id || !*id) {
        cn_err_set(err, 0, "%s: not a canopyd session (no canopy.session.id)", path);
        cn_agg_profile_free(p);
        return -EINVAL;
    }
    cn_live_session *s = cn_live__session_alloc(id, cn_agg_meta_get(p, "canopy.session.name"));
    if (!s) {
        cn_agg_profile_free(p);
        return -ENOMEM;
    }
    cn_agg_profile_free(s->p);
    s->p = p;
    s->kind = kind_parse(cn_agg_meta_get(p, "canopy.session.kind"));
    s->saved_state = state_parse(cn_agg_meta_get(p, "canopy.session.state"));
    s->state = CN_LIVE_SAVED;
    snprintf(s->comm, sizeof(s->comm), "%s",
             cn_agg_meta_get(p, "canopy.session.comm") ? cn_agg_meta_get(p, "canopy.session.comm")
                                                       : "");
    const char *uw = cn_agg_meta_get(p, "canopy.session.unwind");
    snprintf(s->unwind, sizeof(s->unwind), "%s", uw ? uw : "");
    const char *ev = cn_agg_meta_get(p, "event");
    s->event = strdup(ev ? ev : "");
    if (cn_smp_mode_parse(cn_agg_meta_get(p, "mode"), &s->mode) < 0)
        s->mode = cn_agg_profile_unit(p) == CN_AGG_UNIT_NS ? CN_SMP_MODE_WALL : CN_SMP_MODE_CPU;
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
    s->user_stacks = (uint64_t)meta_geti(p, "canopy.session.user_stacks", 0);
    s->unwind_outcomes.complete = (uint64_t)meta_geti(p, "canopy.session.unwind.complete", 0);
    s->unwind_outcomes.truncated_stack =
        (uint64_t)meta_geti(p, "canopy.session.unwind.truncated_stack", 0);
    s->unwind_outcomes.no_cfi = (uint64_t)meta_geti(p, "canopy.session.unwind.no_cfi", 0);
    s->unwind_outcomes.read_fault = (uint64_t)meta_geti(p, "canopy.session.unwind.read_fault", 0);
    s->unwind_outcomes.other = (uint64_t)meta_geti(p, "canopy.session.unwind.other", 0);
    const char *py = cn_agg_meta_get(p, "canopy.session.python");
    if (py && !(s->python_saved = strdup(py))) {
        cn_live_session_free(s);
        return -ENOMEM;
    }
    for (size_t k = 0; k < sizeof(py_keys) / sizeof(py_keys[0]); k++)
        s->py_saved[k] = (uint64_t)meta_geti(p, py_keys[k], 0);
    if (!s->event || !s->path) {
        cn_live_session_free(s);
        return -ENOMEM;
    }
    *out = s;
    return 0;
}

uint64_t cn_live_session_changes(const cn_live_session *s)
{
    return s->changes;
}

int cn_live_session_mark_saved(cn_live_session *s, const char *path, uint64_t changes)
{
    char *p = strdup(path);
    if (!p)
        return -ENOMEM;
    free(s->path);
    s->path = p;
    if (s->state != CN_LIVE_RUNNING && s->changes == changes)
        s->dirty = false;
    return 0;
}
