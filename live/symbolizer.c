/* symbolizer.c — the symbolizer every session shares: one cn_sym cache and worker thread.
 *
 * Sessions register and get a unique tag; they build their own requests (tag, cookie =
 * frame id, object, address) and queue them here. Answers come back through the worker's
 * eventfd and are routed, one run of consecutive answers with the same tag at a time, to
 * that session's cn_live__session_apply_symbols() on the owner's thread. The registry is a
 * small array (sessions that sample at once: tens, so a linear search by tag is cheap). A
 * session that goes away cancels its tag; late answers for an unknown tag are dropped.
 * This file never reads or writes a session's fields.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "live_internal.h"

/* How long freeing the symbolizer waits for its thread to end. */
#define STOP_MS 500

typedef struct attached {
    uint64_t tag;
    cn_live_session *s;
} attached;

struct cn_live_symbolizer {
    cn_sym_cache *cache;
    cn_sym_worker *worker;
    attached *sessions; /* registered sessions, in order of attachment */
    size_t n_sessions, cap_sessions;
    uint64_t next_tag;
    uint64_t submits; /* successful submissions (flush loops while answers cause more) */
    int64_t expire_t; /* the last cn_sym_cache_expire */
};

/* Objects nobody looked up for this long leave the cache (a finished build's compilers),
 * and their debug data (the largest part, read again when needed) sooner; checked this
 * often from dispatch. */
#define SYMBOLS_IDLE_NS (30LL * 1000000000)
#define DEBUG_IDLE_NS   (10LL * 1000000000)
#define EXPIRE_EVERY_NS (5LL * 1000000000)

int cn_live_symbolizer_new(size_t max_memory, size_t max_debug, cn_live_symbolizer **out,
                           cn_err *err)
{
    int r;
    cn_sym_config cfg;
    cn_live_symbolizer *y = calloc(1, sizeof(*y));
    if (!y)
        return cn_err_set(err, -ENOMEM, "symbolizer: out of memory");
    cn_sym_config_init(&cfg);
    if (max_memory)
        cfg.max_memory = max_memory;
    if (max_debug) /* debug data is read into memory (ELF_C_READ), not mapped */
        cfg.max_mapped = max_debug;
    cfg.debuginfod = false; /* a daemon must not block on the network by default */
    y->cache = cn_sym_cache_new(&cfg);
    r = y->cache ? cn_sym_worker_new(y->cache, 0, &y->worker) : -ENOMEM;
    if (r < 0) {
        cn_err_set(err, r, "symbolizer: %s", strerror(-r));
        cn_live_symbolizer_free(y);
        return r;
    }
    y->next_tag = 1;
    *out = y;
    return 0;
}

cn_live_symbolizer *cn_live_symbolizer_free(cn_live_symbolizer *y)
{
    if (!y)
        return NULL;
    for (size_t i = 0; i < y->n_sessions; i++)
        cn_live__session_detached(y->sessions[i].s);
    /* A thread stuck in a system call on a target's file must not keep the process from
     * exiting (SIGTERM ends canopyd within 2 s, docs/security.md): after a bounded wait
     * it is left running, with the worker and the cache it still uses. */
    if (cn_sym_worker_stop(y->worker, STOP_MS) < 0) {
        free(y->sessions);
        free(y);
        return NULL;
    }
    cn_sym_worker_free(y->worker);
    cn_sym_cache_free(y->cache);
    free(y->sessions);
    free(y);
    return NULL;
}

void cn_live_symbolizer_set_test_delay(cn_live_symbolizer *y, int64_t ns)
{
    cn_sym_worker_set_test_delay(y->worker, ns);
}

bool cn_live_symbolizer_try_pause(cn_live_symbolizer *y)
{
    return !y || cn_sym_worker_try_pause(y->worker);
}

void cn_live_symbolizer_resume(cn_live_symbolizer *y)
{
    if (y)
        cn_sym_worker_resume(y->worker);
}

int cn_live_symbolizer_fd(const cn_live_symbolizer *y)
{
    return cn_sym_worker_fd(y->worker);
}

void cn_live_symbolizer_stats_get(const cn_live_symbolizer *y, cn_live_symbolizer_stats *out)
{
    cn_sym_stats st;
    cn_sym_cache_stats(y->cache, &st);
    *out = (cn_live_symbolizer_stats){.objects = st.objects,
                                      .heap_bytes = st.memory,
                                      .mapped_bytes = st.mapped,
                                      .evictions = st.evictions,
                                      .debug_releases = st.debug_releases,
                                      .debug_opens = st.debug_opens,
                                      .debug_units = st.debug_units,
                                      .max_heap_bytes = st.max_memory,
                                      .max_mapped_bytes = st.max_mapped,
                                      .debug_idle_ns = DEBUG_IDLE_NS,
                                      .symbols_idle_ns = SYMBOLS_IDLE_NS};
}

int cn_live__symbolizer_attach(cn_live_symbolizer *y, cn_live_session *s, uint64_t *tag)
{
    if (CN_RESERVE(y->sessions, y->cap_sessions, y->n_sessions + 1) < 0)
        return -ENOMEM;
    y->sessions[y->n_sessions++] = (attached){.tag = y->next_tag, .s = s};
    *tag = y->next_tag++;
    return 0;
}

void cn_live__symbolizer_detach(cn_live_symbolizer *y, uint64_t tag)
{
    cn_sym_worker_cancel(y->worker, tag);
    for (size_t i = 0; i < y->n_sessions; i++) {
        if (y->sessions[i].tag == tag) {
            memmove(y->sessions + i, y->sessions + i + 1,
                    (y->n_sessions - i - 1) * sizeof(*y->sessions));
            y->n_sessions--;
            return;
        }
    }
    assert(!"detaching a session that is not attached");
}

int cn_live__symbolizer_submit(cn_live_symbolizer *y, const cn_sym_request *reqs, size_t n)
{
    int r = n ? cn_sym_worker_submit(y->worker, reqs, n) : 0;
    y->submits += n && r == 0;
    return r;
}

int cn_live__symbolizer_perfmap_size(cn_live_symbolizer *y, const cn_sym_object *obj,
                                     uint64_t *size, int64_t *mtime_ns)
{
    return cn_sym_perfmap_size(y->cache, obj, size, mtime_ns);
}

static cn_live_session *find_tag(const cn_live_symbolizer *y, uint64_t tag)
{
    for (size_t i = 0; i < y->n_sessions; i++)
        if (y->sessions[i].tag == tag)
            return y->sessions[i].s;
    return NULL;
}

int cn_live_symbolizer_dispatch(cn_live_symbolizer *y)
{
    int64_t now = cn_common_now_ns();
    if (now - y->expire_t >= EXPIRE_EVERY_NS) {
        cn_sym_cache_expire(y->cache, SYMBOLS_IDLE_NS);
        cn_sym_cache_release_debug(y->cache, DEBUG_IDLE_NS);
        y->expire_t = now;
    }
    cn_sym_batch *b = NULL;
    int r = cn_sym_worker_take(y->worker, &b);
    if (r <= 0 || !b)
        return r;
    int applied = 0;
    for (size_t i = 0; i < b->n;) {
        size_t j = i + 1;
        while (j < b->n && b->answers[j].tag == b->answers[i].tag)
            j++;
        cn_live_session *s = find_tag(y, b->answers[i].tag);
        if (s)
            applied += cn_live__session_apply_symbols(s, b->answers + i, j - i);
        i = j;
    }
    cn_sym_batch_free(b);
    return applied;
}

/* Rounds of flushing: answers may submit again (a JIT frame whose perf map grew while it
 * was looked up), and those answers are waited for too, a few rounds at most. */
#define FLUSH_ROUNDS 4

int cn_live_symbolizer_flush(cn_live_symbolizer *y, int timeout_ms)
{
    int r = 0;
    for (int round = 0; round < FLUSH_ROUNDS; round++) {
        uint64_t before = y->submits;
        for (size_t i = 0; i < y->n_sessions; i++)
            cn_live_session_symbolize(y->sessions[i].s);
        r = cn_sym_worker_drain(y->worker, timeout_ms);
        while (cn_live_symbolizer_dispatch(y) > 0)
            ;
        if (r < 0 || y->submits == before)
            break;
    }
    return r;
}
