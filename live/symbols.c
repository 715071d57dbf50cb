/* symbols.c — a session's side of symbolization: frames → requests, answers → regroup.
 *
 * Frames are handed to the shared symbolizer (symbolizer.c) in order of creation: frames
 * [0, next_frame) have been submitted. A request carries the frame's object as the
 * sampler saw it (res_obj, filled by ingest.c); an answer is applied to the profile with
 * cn_agg_regroup() (docs/calltree.md §4). JIT frames that their perf map does not name
 * yet are kept (retry) and submitted again when the map grows (docs/cli-live.md,
 * "Symbols").
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "live_internal.h"

#define SUBMIT_BATCH   1024        /* symbol requests built per submit (s->reqs) */
#define APPLY_FRAMES   16          /* answers per regroup when the heap batch cannot be had */
#define APPLY_SYMBOLS  128         /* their chains' symbols (on the stack: kept small) */
#define JIT_RECHECK_NS 250000000LL /* how often unresolved JIT frames look for a map */
/* What a session's function ranges may hold (names and entries): past it they are all
 * dropped and filled again by later answers. At ~50 bytes a function, 2 MiB holds about
 * 40 000 functions: the stripped programs of a build name a few thousand each. */
#define RANGE_BYTES_MAX (2u << 20)

/* The source of frame f's resource, or NULL (anonymous memory, or a saved profile). */
static res_src *frame_src(const cn_live_session *s, int32_t f)
{
    int32_t res = cn_agg_frame_resource(s->p, f);
    if (res < 0 || (size_t)res >= s->n_res_obj || !s->res_obj[res].obj)
        return NULL;
    return &s->res_obj[res];
}

/* Fills q for frame f of s. Returns false when the frame is not to be submitted:
 * anonymous memory needs no symbols (it stays 0xADDRESS), and an object the symbolizer
 * cannot read (a mapping whose file could not be found, [vsyscall]) is counted as
 * unresolvable here rather than sent: one such frame must never hold back the others
 * (docs/cli-live.md, "Symbols"). */
static bool frame_request(cn_live_session *s, size_t f, cn_sym_request *q)
{
    const res_src *src = frame_src(s, (int32_t)f);
    const cn_smp_object *obj = src ? src->obj : NULL;
    if (!obj || obj->kind == CN_SMP_OBJ_PYTHON) /* named at once: python_frames() */
        return false;
    memset(q, 0, sizeof(*q));
    q->tag = s->tag;
    q->cookie = f;
    q->addr = (uint64_t)cn_agg_frame_address(s->p, (int32_t)f);
    q->obj.pid = obj->pid;
    /* The symbolizer's cache is shared by every user's sessions: key it by the file read,
     * not by a build-id its owner could have forged (docs/security.md). */
    q->obj.identity = obj->file_key;
    q->obj.path = obj->path;
    q->obj.name = obj->kind == CN_SMP_OBJ_USER ? obj->name : NULL; /* the resource's name */
    q->obj.file = obj->file; /* only the file the sampler checked is read (docs/security.md) */
    switch (obj->kind) {
    case CN_SMP_OBJ_KERNEL:
    case CN_SMP_OBJ_MODULE:
        q->obj.kind = CN_SYM_KERNEL;
        q->obj.path = NULL;
        q->obj.identity = NULL;
        break;
    case CN_SMP_OBJ_JIT:
        q->obj.kind = CN_SYM_JIT;
        q->obj.path = src->jit_path;
        q->obj.identity = NULL;
        q->obj.has_owner = src->has_owner;
        q->obj.owner_uid = src->owner_uid;
        break;
    default:
        /* The vDSO has no file; the symbolizer reads the kernel's image (the sampler
         * names it by its maps name "[vdso]"). */
        q->obj.kind = !obj->path && obj->identity && !strcmp(obj->identity, "[vdso]") ? CN_SYM_VDSO
                                                                                      : CN_SYM_USER;
        break;
    }
    if (!cn_sym_object_valid(&q->obj)) {
        s->sym_unresolvable++;
        return false;
    }
    return true;
}

/* The session's request buffers, made on first use. False when out of memory. */
static bool request_buffers(cn_live_session *s)
{
    if (!s->reqs)
        s->reqs = malloc(SUBMIT_BATCH * sizeof(*s->reqs));
    if (!s->req_idx)
        s->req_idx = malloc(SUBMIT_BATCH * sizeof(*s->req_idx));
    if (!s->range_batch)
        s->range_batch = malloc(SUBMIT_BATCH * sizeof(*s->range_batch));
    if (!s->range_syms)
        s->range_syms = malloc(SUBMIT_BATCH * sizeof(*s->range_syms));
    return s->reqs && s->req_idx && s->range_batch && s->range_syms;
}

/* ---- function ranges: names known for every address of a function ----------------
 * A build runs the same compilers again and again; each run meets thousands of new
 * addresses (a frame is an address), most inside functions an earlier answer named. When
 * an answer says its name holds for a whole range (an object without DWARF, so no line
 * varies: cn_sym_result.range_lo), the range is kept on the frame's resource and later
 * frames inside it are named as they are made (the profile's namer), without a
 * placeholder or a lookup; frames made before their range came are named by the next
 * symbolize pass. */

/* The index of the first range of src with lo > addr. */
static size_t range_upper(const res_src *src, uint64_t addr)
{
    return src->n_ranges
               ? cn_count_le_u64(&src->ranges[0].lo, src->n_ranges, sizeof(*src->ranges), addr)
               : 0;
}

/* The name of src's range holding addr, or NULL. */
static const char *range_name(const res_src *src, uint64_t addr)
{
    size_t i = range_upper(src, addr);
    return i > 0 && addr < src->ranges[i - 1].hi ? src->ranges[i - 1].name : NULL;
}

void cn_live__ranges_clear(cn_live_session *s)
{
    for (size_t r = 0; r < s->n_res_obj; r++) {
        res_src *src = &s->res_obj[r];
        for (size_t i = 0; i < src->n_ranges; i++)
            free(src->ranges[i].name);
        free(src->ranges);
        src->ranges = NULL;
        src->n_ranges = src->cap_ranges = 0;
    }
    s->range_bytes = 0;
}

/* Keeps answer res's range on src, unless it overlaps one kept (two answers inside one
 * function give the same range). Out of memory or over RANGE_BYTES_MAX, ranges are an
 * accelerator: nothing is lost but later lookups. */
static void range_keep(cn_live_session *s, res_src *src, const cn_sym_result *res)
{
    if (!(res->range_lo < res->range_hi) || res->depth != 1 || res->chain[0].file || res->symbol)
        return;
    size_t len = strlen(res->chain[0].name);
    if (s->range_bytes + len + 1 + sizeof(sym_range) > RANGE_BYTES_MAX)
        cn_live__ranges_clear(s); /* before the search below: src's ranges go too */
    size_t i = range_upper(src, res->range_lo);
    if ((i > 0 && src->ranges[i - 1].hi > res->range_lo) ||
        (i < src->n_ranges && src->ranges[i].lo < res->range_hi))
        return;
    char *name = malloc(len + 1);
    if (!name || CN_RESERVE(src->ranges, src->cap_ranges, src->n_ranges + 1) < 0) {
        free(name);
        return;
    }
    memcpy(name, res->chain[0].name, len + 1);
    memmove(src->ranges + i + 1, src->ranges + i, (src->n_ranges - i) * sizeof(*src->ranges));
    src->ranges[i] = (sym_range){res->range_lo, res->range_hi, name};
    src->n_ranges++;
    s->range_bytes += len + 1 + sizeof(sym_range);
}

const char *cn_live__frame_namer(void *ctx, int32_t res, uint64_t offset)
{
    cn_live_session *s = ctx;
    if (res < 0 || (size_t)res >= s->n_res_obj || !s->res_obj[res].n_ranges)
        return NULL;
    const char *name = range_name(&s->res_obj[res], offset);
    s->sym_by_range += name != NULL;
    return name;
}

/* Whether frame f needs no request: a range of its resource names it. It was named so
 * when it was made (cn_live__frame_namer), or else it is added to the pass's batch
 * (s->range_batch, *n of them): its range came after it. */
static bool range_frame(cn_live_session *s, size_t f, size_t *n)
{
    const res_src *src = frame_src(s, (int32_t)f);
    const char *name = src && src->n_ranges
                           ? range_name(src, (uint64_t)cn_agg_frame_address(s->p, (int32_t)f))
                           : NULL;
    if (!name)
        return false;
    const int32_t *funcs;
    if (cn_agg_frame_funcs(s->p, (int32_t)f, &funcs) == 1 &&
        strcmp(cn_agg_func_name(s->p, funcs[0]), name) == 0)
        return true; /* named when it was made */
    s->range_syms[*n] = (cn_agg_symbol){name, NULL, 0};
    s->range_batch[*n] = (cn_agg_frame_symbols){(int32_t)f, &s->range_syms[*n], 1, NULL};
    (*n)++;
    return true;
}

/* Names the pass's frames found in ranges (they are past next_frame's old value: none
 * was named before). */
static void range_apply(cn_live_session *s, size_t n)
{
    if (n == 0)
        return;
    if (cn_agg_regroup(s->p, s->range_batch, n) < 0) {
        s->errors += n; /* they keep their placeholder names */
        return;
    }
    s->sym_by_range += n;
    s->dirty = true;
    s->changes++;
}

/* Whether src's perf map (frame f is one of its frames) differs, for this retry pass, from
 * the version r's last lookup used. The map is measured once per source and pass (a
 * system session's waiting frames interleave many processes' maps). */
static bool src_map_changed(cn_live_session *s, res_src *src, size_t f, const jit_retry *r)
{
    cn_sym_request q;
    uint64_t size;
    if (src->jit_pass != s->retry_pass) {
        src->jit_pass = s->retry_pass;
        src->jit_size = -1;
        if (frame_request(s, f, &q) &&
            cn_live__symbolizer_perfmap_size(s->sym, &q.obj, &size, &src->jit_mtime_ns) == 0)
            src->jit_size = (int64_t)size;
    }
    return src->jit_size >= 0 &&
           ((uint64_t)src->jit_size != r->map_bytes || src->jit_mtime_ns != r->map_mtime_ns);
}

/* Resubmits the waiting JIT frames whose perf map's size is not what their last lookup saw
 * (it grew, appeared, or was rewritten: a map left by an earlier process of the same pid is
 * truncated by its successor), at most every JIT_RECHECK_NS unless force. Frames stay waiting when
 * the symbolizer's queue is full. */
void cn_live__retry_jit(cn_live_session *s, bool force)
{
    int64_t now = cn_common_now_ns();
    if (!s->sym || !s->n_retry || (!force && now - s->last_retry_ns < JIT_RECHECK_NS) ||
        !request_buffers(s))
        return;
    cn_sym_request *reqs = s->reqs;
    size_t *idx = s->req_idx;
    s->last_retry_ns = now;
    s->retry_pass++;
    s->retry_added = false;
    size_t n = 0, keep = 0;
    for (size_t i = 0; i <= s->n_retry; i++) {
        if (i < s->n_retry) {
            res_src *src = frame_src(s, s->retry[i].frame);
            if (!src)
                continue; /* cannot happen for a frame that was submitted; forget it */
            if (src_map_changed(s, src, (size_t)s->retry[i].frame, &s->retry[i]) &&
                frame_request(s, (size_t)s->retry[i].frame, &reqs[n])) {
                idx[n++] = i;
                continue;
            }
            s->retry[keep++] = s->retry[i];
        }
        if (n == SUBMIT_BATCH || (i == s->n_retry && n)) {
            if (cn_live__symbolizer_submit(s->sym, reqs, n) < 0) {
                for (size_t k = 0; k < n; k++) /* full: they wait for the next check */
                    s->retry[keep++] = s->retry[idx[k]];
            } else {
                s->sym_pending += n;
                s->sym_failed -= s->sym_failed >= n ? n : s->sym_failed;
            }
            n = 0;
        }
    }
    s->n_retry = keep;
}

/* Remembers an unresolved JIT frame for cn_live__retry_jit, with the version of the map
 * its lookup used (res). Returns false on ENOMEM. */
static bool add_retry(cn_live_session *s, int32_t frame, const cn_sym_result *res)
{
    if (CN_RESERVE(s->retry, s->cap_retry, s->n_retry + 1) < 0)
        return false;
    s->retry[s->n_retry++] =
        (jit_retry){.frame = frame, .map_bytes = res->map_bytes, .map_mtime_ns = res->map_mtime_ns};
    s->retry_added = true;
    return true;
}

/* Names the new frames of Python source files (docs/python.md) from the sampler's table,
 * at once and in this thread (no file to read: the sampler read the names from the target
 * when it first met the frame): qualname, file, the instruction's line, and the function's
 * first line. */
static void python_frames(cn_live_session *s)
{
    enum { BATCH = 64 }; /* 3.5 KiB of stack: canopyd's stacks stay within a stack copy */
    cn_agg_symbol syms[BATCH];
    cn_agg_frame_symbols batch[BATCH];
    size_t total = cn_agg_frame_count(s->p);
    while (s->next_py_frame < total) {
        size_t n = 0, f = s->next_py_frame;
        for (; f < total && n < BATCH; f++) {
            const res_src *src = frame_src(s, (int32_t)f);
            cn_smp_python_info pi;
            if (!src || src->obj->kind != CN_SMP_OBJ_PYTHON || !s->smp ||
                cn_smp_python_frame(s->smp, src->obj,
                                    (uint64_t)cn_agg_frame_address(s->p, (int32_t)f), &pi) < 0)
                continue;
            /* The function first, with its first line (the regroup finds it by name,
             * resource and file; it would make it without a line). */
            (void)cn_agg_func(s->p, pi.name, cn_agg_frame_resource(s->p, (int32_t)f),
                              pi.file[0] ? pi.file : NULL, pi.first_line);
            syms[n] = (cn_agg_symbol){pi.name, pi.file[0] ? pi.file : NULL, pi.line};
            batch[n] = (cn_agg_frame_symbols){(int32_t)f, &syms[n], 1, NULL};
            n++;
        }
        if (n && cn_agg_regroup(s->p, batch, n) < 0)
            s->errors += n; /* these frames keep their placeholder names */
        s->next_py_frame = f;
    }
}

void cn_live_session_symbolize(cn_live_session *s)
{
    size_t total;
    python_frames(s);
    if (!s->sym || !request_buffers(s))
        return; /* without the buffers, the frames wait for the next pump */
    cn_sym_request *reqs = s->reqs;
    total = cn_agg_frame_count(s->p);
    while (s->next_frame < total) {
        size_t n = 0, named = 0, f = s->next_frame;
        uint64_t unresolvable = s->sym_unresolvable;
        for (; f < total && n < SUBMIT_BATCH && named < SUBMIT_BATCH; f++)
            if (!range_frame(s, f, &named))
                n += frame_request(s, f, &reqs[n]);
        int r = cn_live__symbolizer_submit(s->sym, reqs, n);
        range_apply(s, named); /* even when full: named again, the same, next time */
        if (r == -EAGAIN) {
            s->sym_unresolvable = unresolvable; /* counted again on the next pump */
            break;                              /* full: these frames go again then */
        }
        if (r < 0) { /* out of memory: these frames' symbols are lost, and counted */
            s->sym_failed += n;
            s->errors += n;
        } else {
            s->sym_pending += n;
        }
        s->next_frame = f;
    }
    cn_live__retry_jit(s, false);
}

size_t cn_live_session_unsubmitted(const cn_live_session *s)
{
    size_t frames = cn_agg_frame_count(s->p);
    return s->sym && frames > s->next_frame ? frames - s->next_frame : 0;
}

/* Applies answers a[0, n) to at most `cap` frames' worth of batch/chains, starting at
 * *next; advances *next past what it consumed. Returns frames applied, or negative errno
 * from cn_agg_regroup (then nothing changed and the consumed answers were not applied). */
static int apply_some(cn_live_session *s, const cn_sym_answer *a, size_t n, size_t *next,
                      cn_agg_frame_symbols *batch, size_t cap, cn_agg_symbol *chains,
                      size_t cap_syms)
{
    size_t nb = 0, k = 0, i = *next;
    for (; i < n && nb < cap; i++) {
        const cn_sym_result *res = &a[i].result;
        if (res->status == 0 && res->depth > 0 && k + res->depth > cap_syms && nb > 0)
            break; /* the chain does not fit this round: the next one takes it */
        s->sym_pending -= s->sym_pending ? 1 : 0;
        if (a[i].cookie >= cn_agg_frame_count(s->p)) {
            s->sym_failed++;
            continue;
        }
        if (res->status == -EINVAL) { /* an object the symbolizer cannot read */
            s->sym_unresolvable++;
            continue;
        }
        if (res->status == 0 && res->depth > 0) {
            res_src *src = frame_src(s, (int32_t)a[i].cookie);
            if (src)
                range_keep(s, src, res);
        }
        if (res->status < 0 || res->depth == 0 || res->depth > cap_syms) {
            const res_src *src = frame_src(s, (int32_t)a[i].cookie);
            s->sym_failed++;
            if (res->status < 0 && src && src->obj->kind == CN_SMP_OBJ_JIT &&
                !add_retry(s, (int32_t)a[i].cookie, res))
                s->errors++; /* it will not be retried */
            continue;
        }
        batch[nb].frame = (int32_t)a[i].cookie;
        batch[nb].chain = chains + k;
        batch[nb].depth = res->depth;
        batch[nb].symbol = res->symbol; /* owned by the answer, which outlives the regroup */
        for (size_t d = 0; d < res->depth; d++, k++) {
            chains[k].name = res->chain[d].name;
            chains[k].file = res->chain[d].file;
            chains[k].line = res->chain[d].line;
        }
        nb++;
    }
    *next = i;
    int r = nb ? cn_agg_regroup(s->p, batch, nb) : 0;
    if (r < 0) {
        /* The symbols are lost for these frames (the worker answers each request once):
         * say so in the counters rather than dropping them silently. */
        s->sym_failed += nb;
        s->errors += nb;
        return r;
    }
    return (int)nb;
}

int cn_live__session_apply_symbols(cn_live_session *s, const cn_sym_answer *a, size_t n)
{
    size_t depth = 0, next = 0;
    int applied = 0;
    for (size_t i = 0; i < n; i++)
        depth += a[i].result.status == 0 ? a[i].result.depth : 0;
    /* One regroup for the whole run when the memory is there (a regroup re-derives held
     * paths: fewer is cheaper); otherwise fixed-size rounds on the stack. */
    cn_agg_frame_symbols *batch = calloc(n ? n : 1, sizeof(*batch));
    cn_agg_symbol *chains = calloc(depth ? depth : 1, sizeof(*chains));
    if (batch && chains) {
        int r = apply_some(s, a, n, &next, batch, n, chains, depth ? depth : 1);
        applied = r > 0 ? r : 0;
        assert(next == n);
    } else {
        cn_agg_frame_symbols sbatch[APPLY_FRAMES];
        cn_agg_symbol schains[APPLY_SYMBOLS];
        while (next < n) {
            int r = apply_some(s, a, n, &next, sbatch, APPLY_FRAMES, schains, APPLY_SYMBOLS);
            applied += r > 0 ? r : 0;
        }
    }
    free(batch);
    free(chains);
    s->dirty = true;
    s->changes++;
    /* A map that grew while these were looked up is read again now, not at the next
     * check: a process that writes its map as it exits leaves no later chance to. Only
     * when these answers added waiting frames: on a busy machine answers arrive all the
     * time, and every pass measures each waiting process's map. */
    cn_live__retry_jit(s, s->retry_added);
    return applied;
}

void cn_live__session_detached(cn_live_session *s)
{
    s->sym = NULL;
}
