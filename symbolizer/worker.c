/* worker.c — the symbolizer's worker thread.
 *
 * Requests are queued under a mutex (the submitter only copies them: it never waits on
 * resolution); the thread takes them in batches of up to BATCH, resolves each through the
 * shared cache without holding the queue lock, appends the answers to the outbox and
 * signals the eventfd. The owner's loop takes the whole outbox at once. Each queued
 * request owns a copy of its object's strings. */
#include "sym_internal.h"

#include "cn_common.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

/* Requests taken at once, resolved grouped by object: on a busy machine the queue
 * interleaves frames of hundreds of objects, more than the cache's bounds hold, and taken
 * in queue order each object was loaded again for nearly every frame. */
#define BATCH 1024
/* How long the thread stays out of its gate for a fork that found it taken (try_pause):
 * the loop comes back within a few ms (the thread pokes it); the bound is for a loop that
 * gave up. */
#define PARK_MAX_NS 50000000

/* A request's place in the resolution order: its object's key, then its address. 24
 * bytes, so that qsort moves keys, not 112-byte requests, and compares integers, not
 * paths (the sort of whole requests was a tenth of the worker's time on a build). */
typedef struct req_order {
    uint64_t obj; /* cn_sym__object_hash: the cache's key of the object it needs */
    uint64_t addr;
    uint32_t i; /* index in the batch */
} req_order;

typedef struct vec_req {
    cn_sym_request *v;
    size_t head, n, cap; /* a FIFO: live entries are v[head .. head+n) */
} vec_req;

struct cn_sym_worker {
    cn_sym_cache *cache;
    pthread_t thread;
    int thread_started;
    pthread_mutex_t lock;
    /* Held by the thread whenever it may allocate (a lookup, freeing a request, the
     * outbox), never while it waits for work: cn_sym_worker_try_pause() takes it to hold the
     * thread at a point where it owns no allocator lock. Taken before `lock`. */
    pthread_mutex_t gate;
    int pause_wanted;    /* a try_pause found the gate taken: park before taking it again */
    pthread_cond_t wake; /* work or stop */
    pthread_cond_t idle; /* in_flight reached 0 */
    vec_req queue;
    cn_sym_answer *out;
    size_t n_out, cap_out;
    size_t max_pending;
    size_t in_flight; /* queued + being resolved */
    int64_t
        test_delay_ns; /* tests only: a pause before each batch (cn_sym_worker_set_test_delay) */
    int stop;
    int efd;
    /* The thread's batch of requests and their answers: on the heap, not its stack (the
     * thread is profiled like any other, and 43 KiB of frame put everything above it out
     * of a stack copy's reach). */
    cn_sym_request *batch;
    cn_sym_answer *ans;
    req_order *order; /* the batch's resolution order (BATCH) */
};

static void req_free_strings(cn_sym_request *r)
{
    free((char *)r->obj.path);
    free((char *)r->obj.identity);
    free((char *)r->obj.name);
    r->obj.path = r->obj.identity = r->obj.name = NULL;
}

static int req_copy(cn_sym_request *dst, const cn_sym_request *src)
{
    *dst = *src;
    dst->obj.path = src->obj.path ? strdup(src->obj.path) : NULL;
    dst->obj.identity = src->obj.identity ? strdup(src->obj.identity) : NULL;
    dst->obj.name = src->obj.name ? strdup(src->obj.name) : NULL;
    if ((src->obj.path && !dst->obj.path) || (src->obj.identity && !dst->obj.identity) ||
        (src->obj.name && !dst->obj.name)) {
        req_free_strings(dst);
        return -ENOMEM;
    }
    return 0;
}

static int outbox_push(cn_sym_worker *w, const cn_sym_answer *a)
{
    if (CN_RESERVE(w->out, w->cap_out, w->n_out + 1) < 0)
        return -ENOMEM;
    w->out[w->n_out++] = *a;
    return 0;
}

static int order_cmp(const void *x, const void *y)
{
    const req_order *a = x, *b = y;
    if (a->obj != b->obj)
        return a->obj < b->obj ? -1 : 1;
    return (a->addr > b->addr) - (a->addr < b->addr); /* locality in the object's tables */
}

/* Fills order[0, n) with batch's resolution order. */
static void order_batch(const cn_sym_request *batch, size_t n, req_order *order)
{
    for (size_t i = 0; i < n; i++)
        order[i] = (req_order){cn_sym__object_hash(&batch[i].obj), batch[i].addr, (uint32_t)i};
    qsort(order, n, sizeof(*order), order_cmp); /* answers go by tag and cookie */
}

/* Takes the gate; first, when a fork is waiting for it (cn_sym_worker_try_pause failed),
 * stays out for up to PARK_MAX_NS and wakes the loop, so that its next try succeeds.
 * Called holding neither the gate nor `lock` (the loop may need `lock` meanwhile). */
static void gate_enter(cn_sym_worker *w)
{
    if (__atomic_load_n(&w->pause_wanted, __ATOMIC_ACQUIRE)) {
        uint64_t one = 1;
        ssize_t wr = write(w->efd, &one, sizeof(one)); /* the loop tries again on waking */
        (void)wr;
        int64_t end = cn_common_now_ns() + PARK_MAX_NS;
        while (__atomic_load_n(&w->pause_wanted, __ATOMIC_ACQUIRE) && cn_common_now_ns() < end)
            nanosleep(&(struct timespec){0, 100000}, NULL);
        __atomic_store_n(&w->pause_wanted, 0, __ATOMIC_RELEASE);
    }
    pthread_mutex_lock(&w->gate);
}

static void *worker_main(void *arg)
{
    cn_sym_worker *w = arg;
    cn_sym_request *batch = w->batch;
    cn_sym_answer *ans = w->ans;
    req_order *order = w->order;
    /* The ELF/DWARF readers run here on untrusted files: a stack overflow is reported. */
    void *altstack = cn_common_altstack_new();
    pthread_mutex_lock(&w->lock);
    for (;;) {
        while (!w->stop && w->queue.n == 0)
            pthread_cond_wait(&w->wake, &w->lock);
        if (w->stop)
            break;
        size_t n = w->queue.n < BATCH ? w->queue.n : BATCH;
        memcpy(batch, w->queue.v + w->queue.head, n * sizeof(*batch));
        w->queue.head += n;
        w->queue.n -= n;
        if (w->queue.n == 0)
            w->queue.head = 0;
        int64_t delay = w->test_delay_ns;
        pthread_mutex_unlock(&w->lock);
        gate_enter(w); /* qsort() may allocate its scratch */
        order_batch(batch, n, order);
        pthread_mutex_unlock(&w->gate);
        if (delay > 0)
            nanosleep(&(struct timespec){delay / 1000000000, delay % 1000000000}, NULL);
        for (size_t k = 0; k < n; k++) {
            if (__atomic_load_n(&w->stop, __ATOMIC_RELAXED)) { /* stopping: drop the rest */
                for (size_t j = k; j < n; j++)
                    req_free_strings(&batch[order[j].i]);
                for (size_t j = 0; j < k; j++)
                    cn_sym_result_clear(&ans[j].result);
                pthread_mutex_lock(&w->lock);
                goto stopped;
            }
            cn_sym_request *q = &batch[order[k].i];
            ans[k].tag = q->tag;
            ans[k].cookie = q->cookie;
            gate_enter(w);
            int rc = cn_sym_lookup(w->cache, &q->obj, q->addr, &ans[k].result);
            if (rc < 0) { /* -EINVAL (an object it cannot read) or -ENOMEM */
                memset(&ans[k].result, 0, sizeof(ans[k].result));
                ans[k].result.status = rc;
            }
            req_free_strings(q);
            pthread_mutex_unlock(&w->gate);
        }
        gate_enter(w);
        pthread_mutex_lock(&w->lock);
        for (size_t i = 0; i < n; i++) {
            if (outbox_push(w, &ans[i]) < 0)
                cn_sym_result_clear(&ans[i].result); /* lost: the frame keeps its name */
        }
        assert(w->in_flight >= n); /* in_flight counts queued + being resolved */
        w->in_flight -= n;
        uint64_t one = 1;
        ssize_t wr = write(w->efd, &one, sizeof(one));
        (void)wr; /* EAGAIN only when the counter is saturated: still readable */
        if (w->in_flight == 0)
            pthread_cond_broadcast(&w->idle);
        pthread_mutex_unlock(&w->gate);
    }
stopped:
    pthread_mutex_unlock(&w->lock);
    cn_common_altstack_free(altstack);
    return NULL;
}

int cn_sym_worker_new(cn_sym_cache *cache, size_t max_pending, cn_sym_worker **out)
{
    if (!cache || !out)
        return -EINVAL;
    cn_sym_worker *w = calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    w->cache = cache;
    w->max_pending = max_pending ? max_pending : (1u << 20);
    w->batch = calloc(BATCH, sizeof(*w->batch));
    w->ans = calloc(BATCH, sizeof(*w->ans));
    w->order = calloc(BATCH, sizeof(*w->order));
    if (!w->batch || !w->ans || !w->order) {
        free(w->batch);
        free(w->ans);
        free(w->order);
        free(w);
        return -ENOMEM;
    }
    pthread_mutex_init(&w->lock, NULL);
    pthread_mutex_init(&w->gate, NULL);
    pthread_cond_init(&w->wake, NULL);
    pthread_cond_init(&w->idle, NULL);
    int rc;
    w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (w->efd < 0) {
        rc = -errno;
        goto fail;
    }
    rc = -pthread_create(&w->thread, NULL, worker_main, w);
    if (rc < 0)
        goto fail;
    w->thread_started = 1;
    *out = w;
    return 0;
fail:
    cn_sym_worker_free(w);
    return rc;
}

void cn_sym_worker_set_test_delay(cn_sym_worker *w, int64_t ns)
{
    pthread_mutex_lock(&w->lock);
    w->test_delay_ns = ns;
    pthread_mutex_unlock(&w->lock);
}

int cn_sym_worker_stop(cn_sym_worker *w, int timeout_ms)
{
    if (!w || !w->thread_started)
        return 0;
    pthread_mutex_lock(&w->lock);
    __atomic_store_n(&w->stop, 1, __ATOMIC_RELAXED); /* also read between two lookups */
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->lock);
    int rc;
    if (timeout_ms < 0) {
        rc = pthread_join(w->thread, NULL);
    } else {
        struct timespec t = cn_common_deadline(CLOCK_REALTIME, (int64_t)timeout_ms * 1000000);
        rc = pthread_timedjoin_np(w->thread, NULL, &t);
    }
    if (rc != 0)
        return -ETIMEDOUT;
    w->thread_started = 0;
    return 0;
}

cn_sym_worker *cn_sym_worker_free(cn_sym_worker *w)
{
    if (!w)
        return NULL;
    cn_sym_worker_stop(w, -1);
    for (size_t i = 0; i < w->queue.n; i++)
        req_free_strings(&w->queue.v[w->queue.head + i]);
    free(w->queue.v);
    for (size_t i = 0; i < w->n_out; i++)
        cn_sym_result_clear(&w->out[i].result);
    free(w->out);
    free(w->batch);
    free(w->ans);
    free(w->order);
    if (w->efd >= 0)
        close(w->efd);
    pthread_cond_destroy(&w->idle);
    pthread_cond_destroy(&w->wake);
    pthread_mutex_destroy(&w->lock);
    pthread_mutex_destroy(&w->gate);
    free(w);
    return NULL;
}

bool cn_sym_worker_try_pause(cn_sym_worker *w)
{
    if (!w)
        return true;
    if (pthread_mutex_trylock(&w->gate) != 0) {
        __atomic_store_n(&w->pause_wanted, 1, __ATOMIC_RELEASE);
        return false;
    }
    __atomic_store_n(&w->pause_wanted, 0, __ATOMIC_RELEASE);
    /* Loads run in threads of their own (cache.c); with the gate held none is being
     * waited for, and a finished one's thread may still be freeing as it exits. */
    cn_sym__cache_join_finished(w->cache);
    return true;
}

void cn_sym_worker_resume(cn_sym_worker *w)
{
    if (w)
        pthread_mutex_unlock(&w->gate);
}

int cn_sym_worker_submit(cn_sym_worker *w, const cn_sym_request *reqs, size_t n)
{
    if (!w || (!reqs && n))
        return -EINVAL;
    /* Requests for objects the symbolizer cannot read are queued like the others and
     * answered -EINVAL by the thread (cn_sym_lookup refuses them): one bad frame never
     * holds back the rest of a batch (docs/cli-live.md, "Symbols"). */
    int rc = 0;
    pthread_mutex_lock(&w->lock);
    if (w->in_flight + n > w->max_pending) {
        rc = -EAGAIN;
        goto out;
    }
    vec_req *q = &w->queue;
    if (q->head > 0 && q->head + q->n + n > q->cap) { /* compact */
        memmove(q->v, q->v + q->head, q->n * sizeof(*q->v));
        q->head = 0;
    }
    if (CN_RESERVE(q->v, q->cap, q->head + q->n + n) < 0) { /* head is 0 if it had to move */
        rc = -ENOMEM;
        goto out;
    }
    size_t base = q->head + q->n, done = 0;
    for (; done < n; done++) {
        rc = req_copy(&q->v[base + done], &reqs[done]);
        if (rc < 0)
            break;
    }
    if (rc < 0) {
        for (size_t i = 0; i < done; i++)
            req_free_strings(&q->v[base + i]);
        goto out;
    }
    q->n += n;
    w->in_flight += n;
    pthread_cond_signal(&w->wake);
out:
    pthread_mutex_unlock(&w->lock);
    return rc;
}

int cn_sym_worker_fd(const cn_sym_worker *w)
{
    return w ? w->efd : -1;
}

int cn_sym_worker_take(cn_sym_worker *w, cn_sym_batch **out)
{
    if (!w || !out)
        return -EINVAL;
    *out = NULL;
    uint64_t v;
    ssize_t rd = read(w->efd, &v, sizeof(v)); /* drain; EAGAIN when nothing signalled */
    (void)rd;
    cn_sym_batch *b = calloc(1, sizeof(*b));
    if (!b)
        return -ENOMEM;
    pthread_mutex_lock(&w->lock);
    b->answers = w->out;
    b->n = w->n_out;
    w->out = NULL;
    w->n_out = w->cap_out = 0;
    pthread_mutex_unlock(&w->lock);
    if (b->n == 0) {
        free(b->answers);
        free(b);
        return 0;
    }
    *out = b;
    return (int)b->n;
}

cn_sym_batch *cn_sym_batch_free(cn_sym_batch *b)
{
    if (!b)
        return NULL;
    for (size_t i = 0; i < b->n; i++)
        cn_sym_result_clear(&b->answers[i].result);
    free(b->answers);
    free(b);
    return NULL;
}

void cn_sym_worker_cancel(cn_sym_worker *w, uint64_t tag)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    vec_req *q = &w->queue;
    size_t k = 0, dropped = 0;
    for (size_t i = 0; i < q->n; i++) {
        cn_sym_request *r = &q->v[q->head + i];
        if (r->tag == tag) {
            req_free_strings(r);
            dropped++;
        } else {
            q->v[q->head + k++] = *r;
        }
    }
    q->n = k;
    assert(w->in_flight >= dropped);
    w->in_flight -= dropped;
    k = 0;
    for (size_t i = 0; i < w->n_out; i++) {
        if (w->out[i].tag == tag)
            cn_sym_result_clear(&w->out[i].result);
        else
            w->out[k++] = w->out[i];
    }
    w->n_out = k;
    if (w->in_flight == 0)
        pthread_cond_broadcast(&w->idle);
    pthread_mutex_unlock(&w->lock);
}

int cn_sym_worker_drain(cn_sym_worker *w, int timeout_ms)
{
    if (!w)
        return -EINVAL;
    struct timespec deadline =
        cn_common_deadline(CLOCK_REALTIME, timeout_ms >= 0 ? (int64_t)timeout_ms * 1000000 : 0);
    int rc = 0;
    pthread_mutex_lock(&w->lock);
    while (w->in_flight > 0 && rc == 0) {
        if (timeout_ms < 0)
            pthread_cond_wait(&w->idle, &w->lock);
        else if (pthread_cond_timedwait(&w->idle, &w->lock, &deadline) == ETIMEDOUT)
            rc = -ETIMEDOUT;
    }
    pthread_mutex_unlock(&w->lock);
    return rc;
}
