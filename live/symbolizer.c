/* symbolizer.c — the symbolizer every session shares: one cn_sym cache and worker thread.
 *
 * Sessions register with a unique tag; their new frames go to the worker as requests
 * (tag, cookie = frame id); answers come back through the worker's eventfd and are
 * applied with cn_agg_regroup() on the owner's thread, one regroup per run of answers
 * for the same session. A session that goes away cancels its tag; late answers for an
 * unknown tag are dropped.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cn_sym.h"
#include "d_internal.h"

#define SUBMIT_BATCH 1024

struct cn_d_symbolizer {
    cn_sym_cache *cache;
    cn_sym_worker *worker;
    cn_d_session *sessions; /* linked through sym_next */
    uint64_t next_tag;
};

int cn_d_symbolizer_new(size_t max_memory, cn_d_symbolizer **out, cn_err *err)
{
    cn_d_symbolizer *y = calloc(1, sizeof(*y));
    if (!y)
        return -ENOMEM;
    cn_sym_config cfg;
    cn_sym_config_init(&cfg);
    if (max_memory)
        cfg.max_memory = max_memory;
    cfg.debuginfod = false; /* a daemon must not block on the network by default */
    y->cache = cn_sym_cache_new(&cfg);
    int r = y->cache ? cn_sym_worker_new(y->cache, 0, &y->worker) : -ENOMEM;
    if (r < 0) {
        if (err)
            snprintf(err->msg, sizeof(err->msg), "symbolizer: %s", strerror(-r));
        cn_d_symbolizer_free(y);
        return r;
    }
    y->next_tag = 1;
    *out = y;
    return 0;
}

cn_d_symbolizer *cn_d_symbolizer_free(cn_d_symbolizer *y)
{
    if (!y)
        return NULL;
    for (cn_d_session *s = y->sessions; s; s = s->sym_next)
        s->sym = NULL;
    cn_sym_worker_free(y->worker);
    cn_sym_cache_free(y->cache);
    free(y);
    return NULL;
}

int cn_d_symbolizer_fd(const cn_d_symbolizer *y)
{
    return cn_sym_worker_fd(y->worker);
}

void cn_d__symbolizer_attach(cn_d_symbolizer *y, cn_d_session *s)
{
    s->sym = y;
    s->tag = y->next_tag++;
    s->sym_next = y->sessions;
    y->sessions = s;
}

void cn_d__symbolizer_detach(cn_d_symbolizer *y, cn_d_session *s)
{
    cn_sym_worker_cancel(y->worker, s->tag);
    for (cn_d_session **ps = &y->sessions; *ps; ps = &(*ps)->sym_next) {
        if (*ps == s) {
            *ps = s->sym_next;
            break;
        }
    }
    s->sym = NULL;
}

void cn_d__symbolizer_submit(cn_d_symbolizer *y, cn_d_session *s)
{
    cn_sym_request reqs[SUBMIT_BATCH];
    size_t total = cn_agg_frame_count(s->p);
    while (s->next_frame < total) {
        size_t n = 0, f = s->next_frame;
        for (; f < total && n < SUBMIT_BATCH; f++) {
            int32_t res = cn_agg_frame_resource(s->p, (int32_t)f);
            const cn_smp_object *obj =
                res >= 0 && (size_t)res < s->n_res_obj ? s->res_obj[res] : NULL;
            if (!obj)
                continue; /* anonymous memory: stays 0xADDRESS */
            cn_sym_request *q = &reqs[n++];
            memset(q, 0, sizeof(*q));
            q->tag = s->tag;
            q->cookie = f;
            q->addr = (uint64_t)cn_agg_frame_address(s->p, (int32_t)f);
            q->obj.pid = obj->pid;
            q->obj.identity = obj->identity;
            q->obj.path = obj->path;
            switch (obj->kind) {
            case CN_SMP_OBJ_KERNEL:
            case CN_SMP_OBJ_MODULE:
                q->obj.kind = CN_SYM_KERNEL;
                q->obj.path = NULL;
                q->obj.identity = NULL;
                break;
            case CN_SMP_OBJ_JIT:
                q->obj.kind = CN_SYM_JIT;
                q->obj.path = NULL;
                q->obj.identity = NULL;
                break;
            default:
                q->obj.kind = CN_SYM_USER;
                break;
            }
        }
        if (n > 0 && cn_sym_worker_submit(y->worker, reqs, n) < 0)
            return; /* full (or no memory): retry these frames on the next pump */
        s->sym_pending += n;
        s->next_frame = f;
    }
}

static cn_d_session *find_tag(cn_d_symbolizer *y, uint64_t tag)
{
    for (cn_d_session *s = y->sessions; s; s = s->sym_next)
        if (s->tag == tag)
            return s;
    return NULL;
}

/* Applies answers[from, to) (all for session s) with one regroup. */
static int apply_run(cn_d_session *s, const cn_sym_answer *a, size_t n)
{
    cn_agg_frame_symbols *batch = calloc(n ? n : 1, sizeof(*batch));
    size_t depth = 0;
    for (size_t i = 0; i < n; i++)
        depth += a[i].result.status == 0 ? a[i].result.depth : 0;
    cn_agg_symbol *chains = calloc(depth ? depth : 1, sizeof(*chains));
    int r = -ENOMEM;
    if (!batch || !chains)
        goto out;
    size_t nb = 0, k = 0;
    for (size_t i = 0; i < n; i++) {
        s->sym_pending -= s->sym_pending ? 1 : 0;
        const cn_sym_result *res = &a[i].result;
        if (res->status < 0 || res->depth == 0 || a[i].cookie >= cn_agg_frame_count(s->p)) {
            s->sym_failed++;
            continue;
        }
        batch[nb].frame = (int32_t)a[i].cookie;
        batch[nb].chain = chains + k;
        batch[nb].depth = res->depth;
        for (size_t d = 0; d < res->depth; d++, k++) {
            chains[k].name = res->chain[d].name;
            chains[k].file = res->chain[d].file;
            chains[k].line = res->chain[d].line;
        }
        nb++;
    }
    r = nb ? cn_agg_regroup(s->p, batch, nb) : 0;
    if (r == 0)
        r = (int)nb;
    s->dirty = true;
out:
    free(batch);
    free(chains);
    return r;
}

int cn_d_symbolizer_dispatch(cn_d_symbolizer *y)
{
    cn_sym_batch *b = NULL;
    int r = cn_sym_worker_take(y->worker, &b);
    if (r <= 0 || !b)
        return r;
    int applied = 0;
    for (size_t i = 0; i < b->n;) {
        size_t j = i + 1;
        while (j < b->n && b->answers[j].tag == b->answers[i].tag)
            j++;
        cn_d_session *s = find_tag(y, b->answers[i].tag);
        if (s) {
            int a = apply_run(s, b->answers + i, j - i);
            if (a > 0)
                applied += a;
        }
        i = j;
    }
    cn_sym_batch_free(b);
    return applied;
}

int cn_d_symbolizer_flush(cn_d_symbolizer *y, int timeout_ms)
{
    for (cn_d_session *s = y->sessions; s; s = s->sym_next)
        cn_d__symbolizer_submit(y, s);
    int r = cn_sym_worker_drain(y->worker, timeout_ms);
    while (cn_d_symbolizer_dispatch(y) > 0)
        ;
    return r;
}
