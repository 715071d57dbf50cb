/* adapt.c — auto's adaptive stack copy (docs/perf-sampler.md, "auto's adaptive stack
 * copy"). Receiving a 16 KiB copy with every sample costs auto ~2× fp's time before any
 * walk; where frame pointers suffice, a small copy (the leaf's CFI step and the first
 * frames) plus the kernel's frame-pointer chain gives the same stacks. Which case a
 * program is cannot be known before its samples are seen, so a session that may adapt
 * (auto, CPU mode, no --stack-size) goes through three states:
 *
 *   LEARN  the full copy; each sample is also walked as if its copy had been one of
 *          COPY_SIZES' bytes (the record's copy clamped), the smallest first, and the
 *          results compared, once with the kernel's user chain and once without it. When
 *          at least 99.5% of a window's samples come out identical with one of them, the
 *          events are reopened with the smallest that does (perf_open.c, no gap) -> SMALL;
 *          else -> HOLD. In frame-pointer code the kernel's chain finishes a stack past the
 *          copy's end; code unwound by CFI needs the whole stack in the copy, often still
 *          far below the full one (CPython 3.11's fits 2 KiB: its eval loop does not
 *          recurse on the C stack for Python calls), and then the chain adds nothing: the
 *          events stop asking for it (the kernel's walk of it costs the sampled thread
 *          about what a 1 KiB copy does) when the copy alone fits at most twice the size
 *          the chain needed.
 *   SMALL  the small copy; a sample the small copy could not finish (the walk ends at the
 *          copy's end in code without frame pointers, or anywhere without the chain, or
 *          the kernel's chain runs through such code) is reported as cut short
 *          (CN_SMP_STOP_STACK_SHORT), and when more than 1% of a window's samples are, the
 *          full copy is reopened, with the chain -> HOLD.
 *   HOLD   the full copy, nothing simulated, for 4 windows; then LEARN again with a window
 *          twice as long (hysteresis: a program that keeps changing is tried less often).
 *
 * A stack's outermost frames are the C runtime's (_start, __libc_start_main, a thread's
 * clone3): code without frame pointers at the stack's far end, where no small copy
 * reaches and where the kernel's chain stops. Complete walks of full copies teach their
 * "tails": for a return address in such code, the frames that always followed it (at
 * most TAIL_MAX, every one but the outermost without frame pointers, the same every time
 * it was seen: a return address seen with two tails is never used). A small-copy stack
 * that ends at such an address gets its tail. The data structure is a small open-addressed
 * table keyed by (pid, address), bounded (TAIL_SLOTS); a full table learns nothing more.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "smp_internal.h"

/* The smaller copies tried, in bytes, smallest first; those not below the full copy are
 * not tried. */
static const uint32_t COPY_SIZES[] = {1024, 2048, 4096, 8192};
#define N_SIZES      ((int)(sizeof(COPY_SIZES) / sizeof(COPY_SIZES[0])))
#define LEARN_WINDOW 2000u  /* samples in the first learning window */
#define MAX_WINDOW   64000u /* the longest learning window */
#define MON_WINDOW   500u   /* SMALL: samples per check of the cut-short rate */
#define FIT_PERMILLE 995u   /* LEARN: identical samples needed to shrink */
#define GROW_PERCENT 1u     /* SMALL: cut-short samples beyond which the copy grows back */
#define GROW_EARLY   16u    /* SMALL: as many cut short decide before the window's end */
#define TAIL_MAX     4
#define TAIL_SLOTS   1024u /* a power of two */

typedef enum ad_state { AD_LEARN, AD_SMALL, AD_HOLD, AD_OFF } ad_state;

typedef struct tail {
    uint64_t key; /* 0: empty slot */
    pid_t pid;    /* 0 with a key: a slot freed by forget (probes go on past it) */
    uint8_t n;
    bool ambiguous;
    uint64_t pcs[TAIL_MAX];
} tail;

struct cn_smp__adapt {
    ad_state state;
    uint32_t full;
    int nsizes;                  /* COPY_SIZES tried: those below full */
    uint64_t window, seen;       /* LEARN: samples, and of those identical with a copy of */
    uint64_t fit[N_SIZES];       /* COPY_SIZES[i] bytes */
    uint64_t fit_alone[N_SIZES]; /* the same without the kernel's user chain */
    uint64_t hold;               /* HOLD: samples left */
    uint64_t mon, shorts;        /* SMALL */
    uint32_t want;               /* a reopen decided while dispatching, done by _apply */
    bool want_chain;             /* ... with the kernel's user chain */
    uint32_t old_req;            /* the events replaced at switch_time: their later samples */
    uint64_t switch_time;        /* are the new events' twins */
    uint64_t max_stack;          /* kernel.perf_event_max_stack: a chain this long was cut */
    tail tails[TAIL_SLOTS];
    size_t ntails, nused;  /* live tails; slots taken, freed ones included */
    cn_smp__tidset owners; /* pids with live tails: forget and fork scan only for them */
    uint64_t sim[CN_SMP_MAX_FRAMES], chain[CN_SMP_MAX_FRAMES]; /* LEARN's second walk */
};

static uint64_t read_max_stack(void)
{
    FILE *f = fopen("/proc/sys/kernel/perf_event_max_stack", "re");
    unsigned long v = 127; /* the kernel's default */
    if (f) {
        if (fscanf(f, "%lu", &v) != 1)
            v = 127;
        fclose(f);
    }
    return v;
}

int cn_smp__adapt_new(cn_smp_session *s)
{
    if (s->cfg.unwind != CN_SMP_UNWIND_AUTO || s->cfg.stack_size || !s->want_stack ||
        s->cfg.mode != CN_SMP_MODE_CPU || s->cfg.target == CN_SMP_TARGET_NONE ||
        s->stack_copy <= COPY_SIZES[0])
        return 0;
    cn_smp__adapt *ad = calloc(1, sizeof(*ad));
    if (!ad)
        return -ENOMEM;
    ad->state = AD_LEARN;
    ad->full = s->stack_copy;
    while (ad->nsizes < N_SIZES && COPY_SIZES[ad->nsizes] < ad->full)
        ad->nsizes++;
    ad->window = LEARN_WINDOW;
    ad->max_stack = read_max_stack();
    s->ad = ad;
    return 0;
}

void cn_smp__adapt_free(cn_smp_session *s)
{
    if (s->ad)
        free(s->ad->owners.slots);
    free(s->ad);
    s->ad = NULL;
}

/* Whether return address (ret) or sampled pc (!ret) pc lies in code auto steps by frame
 * pointer (cfi.c: an object with has_fp, where frame pointers give the caller's SP). */
static bool fp_code_in(const cn_smp_session *s, const cn_smp__proc *p, uint64_t pc, bool ret,
                       const cn_smp__map **last)
{
    uint64_t at = ret ? s->arch->mask_ret(pc) - 1 : pc;
    const cn_smp__map *m =
        *last && at >= (*last)->start && at < (*last)->end ? *last : cn_smp__proc_find(p, at);
    *last = m;
    return s->arch->fp_gives_sp && m && m->obj->pub.kind == CN_SMP_OBJ_USER && m->obj->elf &&
           m->obj->elf->has_fp == 1;
}

static bool fp_code(const cn_smp_session *s, const cn_smp__proc *p, uint64_t pc, bool ret)
{
    const cn_smp__map *m = NULL;
    return fp_code_in(s, p, pc, ret, &m);
}

/* The slot of (pid, key): its tail, else the empty slot ending its probe (or NULL when
 * every slot was probed). *freed, when not NULL, receives the first freed slot passed. */
static tail *tail_slot_in(cn_smp__adapt *ad, pid_t pid, uint64_t key, tail **freed)
{
    uint64_t h = (key ^ ((uint64_t)(uint32_t)pid << 40)) * 0x9e3779b97f4a7c15ull;
    for (uint32_t i = (uint32_t)(h >> 40), k = 0; k < TAIL_SLOTS; i++, k++) {
        tail *t = &ad->tails[i & (TAIL_SLOTS - 1)];
        if (t->key == 0 || (t->key == key && t->pid == pid))
            return t;
        if (freed && !*freed && t->pid == 0)
            *freed = t;
    }
    return NULL;
}

static tail *tail_slot(cn_smp__adapt *ad, pid_t pid, uint64_t key)
{
    return tail_slot_in(ad, pid, key, NULL);
}

/* Empties the table when freed slots make most of it (a system session's processes come
 * and go; their tails are forgotten, their slots would fill the table for good). */
static void tails_compact(cn_smp__adapt *ad)
{
    if (ad->nused < TAIL_SLOTS / 2 || ad->ntails >= TAIL_SLOTS / 4)
        return;
    tail old[TAIL_SLOTS];
    memcpy(old, ad->tails, sizeof(old));
    memset(ad->tails, 0, sizeof(ad->tails));
    ad->nused = ad->ntails = 0;
    for (size_t i = 0; i < TAIL_SLOTS; i++)
        if (old[i].key && old[i].pid) {
            tail *t = tail_slot(ad, old[i].pid, old[i].key);
            assert(t && !t->key); /* fewer live tails than slots, each once */
            *t = old[i];
            ad->nused++;
            ad->ntails++;
        }
}

static void tail_put(cn_smp__adapt *ad, pid_t pid, uint64_t key, const uint64_t *pcs, int n)
{
    tail *freed = NULL;
    tail *t = key && pid > 0 ? tail_slot_in(ad, pid, key, &freed) : NULL;
    if (t && t->key) {
        if (t->n != n || memcmp(t->pcs, pcs, (size_t)n * sizeof(*pcs)) != 0)
            t->ambiguous = true;
        return;
    }
    if (!freed && (!t || ad->nused >= TAIL_SLOTS / 2))
        return; /* full: probes stay short */
    if (cn_smp__tidset_add(&ad->owners, pid) < 0)
        return;
    if (freed)
        t = freed;
    else
        ad->nused++;
    *t = (tail){.key = key, .pid = pid, .n = (uint8_t)n};
    memcpy(t->pcs, pcs, (size_t)n * sizeof(*pcs));
    ad->ntails++;
}

void cn_smp__adapt_forget(cn_smp_session *s, pid_t pid)
{
    cn_smp__adapt *ad = s->ad;
    if (!ad || !cn_smp__tidset_del(&ad->owners, pid))
        return; /* no tails: nothing to scan for (most exits and execs) */
    for (size_t i = 0; i < TAIL_SLOTS; i++)
        if (ad->tails[i].key && ad->tails[i].pid == pid) {
            ad->tails[i].pid = 0; /* freed: reused by a later tail, probes go on past it */
            ad->ntails--;
        }
    tails_compact(ad);
}

void cn_smp__adapt_fork(cn_smp_session *s, pid_t ppid, pid_t pid)
{
    cn_smp__adapt *ad = s->ad;
    if (!ad || ppid == pid)
        return;
    cn_smp__adapt_forget(s, pid);
    if (!cn_smp__tidset_has(&ad->owners, ppid))
        return;
    for (size_t i = 0; i < TAIL_SLOTS; i++) {
        const tail t = ad->tails[i]; /* a copy: tail_put writes into the table */
        if (t.key && t.pid == ppid && !t.ambiguous)
            tail_put(ad, pid, t.key, t.pcs, t.n);
    }
}

/* A complete walk of a full copy, pcs[0..n): its tails (see the file's comment). */
static void learn_tails(cn_smp_session *s, const cn_smp__proc *p, const uint64_t *pcs, int n)
{
    for (int j = n - 2; j >= 0 && n - 1 - j <= TAIL_MAX; j--) {
        if (j + 1 < n - 1 && fp_code(s, p, pcs[j + 1], true))
            break; /* the chain goes on through frame-pointer code: no tail here */
        if (!fp_code(s, p, pcs[j], j > 0))
            tail_put(s->ad, p->pid, pcs[j], pcs + j + 1, n - 1 - j);
    }
}

/* A walk of a small copy, pcs[0..*n) with *stop (joined_at: where the kernel's chain was
 * appended, or -1): what the small copy could not finish gets its learned tail, or is
 * reported as cut short. Returns true when cut short. */
static bool finish_small(cn_smp_session *s, const cn_smp__proc *p, const cn_smp__rec *r,
                         uint64_t *pcs, int *n, cn_smp_stop *stop, int joined_at)
{
    cn_smp__adapt *ad = s->ad;
    if (*n <= 0)
        return false;
    if (joined_at >= 0 && *stop == CN_SMP_STOP_NONE) {
        /* Each chain frame's caller came from its frame pointer: right only where the
         * frame's code keeps one. Past the first that does not, the chain is not the
         * stack (a caller skipped, or garbage). */
        int end = *n;
        const cn_smp__map *last = NULL; /* chain frames mostly lie in one object */
        for (int j = joined_at; j + 1 < *n; j++)
            if (!fp_code_in(s, p, pcs[j], true, &last)) {
                end = j + 1;
                break;
            }
        bool cut = end < *n || r->u.sample.nr >= ad->max_stack;
        *n = end;
        if (!cut && fp_code(s, p, pcs[end - 1], end - 1 > 0))
            return false; /* ended inside frame-pointer code: its outermost frame */
    } else if (*stop != CN_SMP_STOP_STACK_SHORT) {
        return false;
    }
    const tail *t = tail_slot(ad, p->pid, pcs[*n - 1]);
    if (t && t->key && !t->ambiguous && *n + t->n <= CN_SMP_MAX_FRAMES) {
        memcpy(pcs + *n, t->pcs, t->n * sizeof(*pcs));
        *n += t->n;
        *stop = CN_SMP_STOP_NONE;
        return false;
    }
    *stop = CN_SMP_STOP_STACK_SHORT;
    return true;
}

/* LEARN: whether r, had its copy been copy bytes (and without the kernel's user chain
 * unless chain), would give pcs[0..n) and stop. */
static bool fits_small(cn_smp_session *s, const cn_smp__proc *p, const cn_smp__rec *r,
                       uint64_t chain_from, const uint64_t *pcs, int n, cn_smp_stop stop,
                       uint32_t copy, bool chain)
{
    cn_smp__adapt *ad = s->ad;
    cn_smp__rec small = *r;
    if (small.u.sample.stack_size > copy)
        small.u.sample.stack_size = copy;
    cn_smp__fpwalk fw = {.chain = ad->chain,
                         .nchain = -1,
                         /* past the record's chain: no user entry, as the events give
                          * with exclude_callchain_user */
                         .chain_from = chain ? chain_from : r->u.sample.nr,
                         .chain_first = true,
                         .joined_at = -1};
    cn_smp_stop st;
    int m = cn_smp__unwind_cfi(s->arch, p, &small, ad->sim, CN_SMP_MAX_FRAMES, &fw, &st, NULL);
    if (m < 0)
        return false;
    finish_small(s, p, &small, ad->sim, &m, &st, fw.joined_at);
    return m == n && st == stop && memcmp(ad->sim, pcs, (size_t)n * sizeof(*pcs)) == 0;
}

bool cn_smp__adapt_small(const cn_smp_session *s, const cn_smp__rec *r)
{
    return s->ad && r->u.sample.stack_req < s->ad->full;
}

bool cn_smp__adapt_drop(cn_smp_session *s, const cn_smp__rec *r)
{
    const cn_smp__adapt *ad = s->ad;
    if (!ad || !ad->old_req || r->u.sample.stack_req != ad->old_req ||
        ad->old_req == s->stack_copy || r->time <= ad->switch_time)
        return false;
    s->cnt.stack_switch_dropped++;
    return true;
}

static void learn_reset(cn_smp__adapt *ad)
{
    ad->seen = 0;
    memset(ad->fit, 0, sizeof(ad->fit));
    memset(ad->fit_alone, 0, sizeof(ad->fit_alone));
}

/* LEARN: counts, in fit (with the chain) or fit_alone, the sizes at which r's small walk
 * gives the full walk's result. A size is tried only while it can still reach
 * FIT_PERMILLE of the window, and a larger one only where the smaller did not do (a larger
 * copy gives what a smaller one did): where no size suffices, the window ends after a few
 * samples, and learning costs little. */
static void learn_fits(cn_smp_session *s, const cn_smp__proc *p, const cn_smp__rec *r,
                       uint64_t chain_from, int n, cn_smp_stop stop, bool chain)
{
    cn_smp__adapt *ad = s->ad;
    uint64_t *fit = chain ? ad->fit : ad->fit_alone;
    uint64_t allowed = ad->window * (1000 - FIT_PERMILLE) / 1000;
    for (int i = 0; i < ad->nsizes; i++) {
        if (ad->seen - 1 - fit[i] > allowed)
            continue;
        if (fits_small(s, p, r, chain_from, s->pcs, n, stop, COPY_SIZES[i], chain)) {
            for (int j = i; j < ad->nsizes; j++)
                fit[j]++;
            break;
        }
    }
}

/* LEARN, at a window's end: the smallest size that fits with the chain, and without it
 * (0: none). The copy alone is chosen when it needs at most twice the bytes. */
static void learn_decide(cn_smp__adapt *ad)
{
    uint32_t with = 0, alone = 0;
    for (int i = ad->nsizes - 1; i >= 0; i--) {
        if (ad->fit[i] * 1000 >= ad->seen * FIT_PERMILLE)
            with = COPY_SIZES[i];
        if (ad->fit_alone[i] * 1000 >= ad->seen * FIT_PERMILLE)
            alone = COPY_SIZES[i];
    }
    ad->want_chain = !alone || (with && alone > 2 * with);
    ad->want = ad->want_chain ? with : alone;
}

void cn_smp__adapt_sample(cn_smp_session *s, const cn_smp__proc *p, const cn_smp__rec *r,
                          uint64_t chain_from, int *n, cn_smp_stop *stop, int joined_at)
{
    cn_smp__adapt *ad = s->ad;
    if (r->u.sample.stack_req < ad->full) {
        bool cut = finish_small(s, p, r, s->pcs, n, stop, joined_at);
        if (ad->state != AD_SMALL)
            return; /* the last records of replaced events */
        ad->mon++;
        ad->shorts += cut;
        /* At a window's end, or as soon as GROW_EARLY samples were cut short at that rate
         * (a program that changed: each sample until the reopen is cut short). */
        bool over = ad->shorts * 100 > ad->mon * GROW_PERCENT;
        if (over && (ad->mon >= MON_WINDOW || ad->shorts >= GROW_EARLY))
            ad->want = ad->full;
        if (ad->mon >= MON_WINDOW || ad->want)
            ad->mon = ad->shorts = 0;
        return;
    }
    if (ad->state == AD_HOLD && --ad->hold == 0) {
        ad->state = AD_LEARN;
        learn_reset(ad);
    }
    if (ad->state != AD_LEARN || ad->want)
        return;
    if (*stop == CN_SMP_STOP_NONE && joined_at < 0)
        learn_tails(s, p, s->pcs, *n);
    ad->seen++;
    learn_fits(s, p, r, chain_from, *n, *stop, true);
    learn_fits(s, p, r, chain_from, *n, *stop, false);
    uint64_t allowed = ad->window * (1000 - FIT_PERMILLE) / 1000;
    bool lost = ad->seen - ad->fit[ad->nsizes - 1] > allowed &&
                ad->seen - ad->fit_alone[ad->nsizes - 1] > allowed;
    if (ad->seen < ad->window && !lost)
        return;
    if (!lost)
        learn_decide(ad);
    if (!ad->want) {
        ad->state = AD_HOLD;
        ad->hold = ad->window * 4;
        if (ad->window < MAX_WINDOW)
            ad->window *= 2;
    }
    learn_reset(ad);
}

void cn_smp__adapt_apply(cn_smp_session *s)
{
    cn_smp__adapt *ad = s->ad;
    if (!ad || !ad->want || s->stopped)
        return;
    uint32_t to = ad->want, from = s->stack_copy;
    /* the full copy always with the chain: a program that outgrew the small copy */
    bool chain = ad->want_chain || to >= ad->full;
    uint64_t t;
    ad->want = 0;
    if (cn_smp__perf_reopen(s, to, chain, &t) < 0) {
        ad->state = AD_OFF; /* keep what runs (the full copy unless a grow failed) */
        return;
    }
    ad->old_req = from;
    ad->switch_time = t;
    s->cnt.stack_copy = to;
    s->cnt.stack_chain_off = !chain;
    if (to < from) {
        s->cnt.stack_shrinks++;
        ad->state = AD_SMALL;
        ad->mon = ad->shorts = 0;
    } else {
        s->cnt.stack_grows++;
        ad->state = AD_HOLD;
        ad->hold = ad->window * 4;
        if (ad->window < MAX_WINDOW)
            ad->window *= 2;
    }
}
