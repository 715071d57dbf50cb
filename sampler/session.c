/* session.c — perf_event setup, ring reading, time ordering and dispatch.
 *
 * One ring per CPU. For a PID target every thread gets one inherited event per CPU
 * (threads and processes it creates later inherit them), each redirected into its CPU's
 * ring with PERF_EVENT_IOC_SET_OUTPUT; /proc/PID/task is re-listed until no new thread
 * appears. Reading copies every complete record out of the rings (acquire data_head,
 * copy, release data_tail: the kernel never rewrites bytes we have not released, so no
 * read is torn; records that wrap the ring's end are copied in two pieces) into a pending
 * queue, sorts it by time, and delivers what is older than the previous read's start, so
 * that MMAP2 records from one CPU are applied before samples from another that depend on
 * them. Processes, threads and objects are kept in small hash tables off the session. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "smp_internal.h"

#define PROC_BUCKETS   1024
#define OBJ_BUCKETS    1024
#define AUTO_STACK_MAX 2048
#define MAX_RINGS      1024
#define MAX_MODULES    4096
/* Records this much older than a read are delivered by it; newer ones wait for the next. */
#define HOLD_NS 5000000ULL

typedef struct ring {
    int fd, cpu;
    uint8_t *base; /* metadata page, then data */
    size_t data_size, map_len;
    uint8_t *wrap; /* a record that wraps the ring's end, made contiguous (64 KiB, owned) */
    bool hup;
} ring;

typedef struct pend {
    uint64_t time, seq;
    size_t off;
    uint32_t len;
} pend;

typedef struct tidset {
    int32_t *slots; /* open addressing; 0 = empty, -1 = tombstone */
    size_t cap, used, live;
} tidset;

typedef struct objnode {
    cn_smp__obj *obj;
    struct objnode *next;
} objnode;

typedef struct module_range {
    uint64_t start, end;
} module_range;

struct cn_smp_session {
    cn_smp_config cfg;
    char *event_req;
    cn_smp_callbacks cb;
    void *arg;
    const cn_smp__arch *arch;

    /* what we asked the kernel for */
    char event_name[32];
    uint32_t perf_type;
    uint64_t perf_config;
    cn_smp__layout lay;
    bool kernel, want_callchain, want_stack;
    uint32_t stack_copy, ring_pages;

    ring *rings;
    size_t nrings;
    int *ring_fds;
    int *fds; /* every perf fd, rings included */
    size_t nfds, capfds;
    tidset attached; /* tids with events of their own */
    tidset seen;     /* tids whose comm was reported */
    tidset live;     /* PID target: tasks not yet exited */

    cn_smp__proc *procs[PROC_BUCKETS];
    objnode *objmap[OBJ_BUCKETS];
    cn_smp__obj **objs;
    size_t nobjs, capobjs;
    cn_smp__obj *kernel_obj, *module_obj, *unknown_obj;
    module_range *modules;
    size_t nmodules;

    uint8_t *arena, *arena2;
    size_t arena_len, arena_cap, arena2_cap;
    pend *pend;
    size_t npend, cappend;
    uint64_t seq;
    struct cursor *cursors; /* one per ring, for the merge */

    cn_smp_counters cnt;
    cn_smp__unwinder *unw;
    cn_smp_frame frames[CN_SMP_MAX_FRAMES + 2];
    uint64_t pcs[CN_SMP_MAX_FRAMES];
    bool started, stopped, had_live;
    bool vdso_tried; /* the [vdso] object's image was looked for */
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* ---------------------------------------------------------------------------------------
 * tid sets
 */

static uint32_t hash32(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352d;
    x ^= x >> 15;
    x *= 0x846ca68b;
    x ^= x >> 16;
    return x;
}

static bool tidset_has(const tidset *t, int32_t tid)
{
    if (!t->cap || tid <= 0)
        return false;
    for (size_t i = hash32((uint32_t)tid) & (t->cap - 1), n = 0; n < t->cap;
         i = (i + 1) & (t->cap - 1), n++) {
        if (t->slots[i] == tid)
            return true;
        if (t->slots[i] == 0)
            return false;
    }
    return false;
}

static int tidset_add(tidset *t, int32_t tid);

static int tidset_grow(tidset *t)
{
    tidset n = {calloc(t->cap ? t->cap * 2 : 64, sizeof(int32_t)), t->cap ? t->cap * 2 : 64, 0, 0};
    if (!n.slots)
        return -ENOMEM;
    for (size_t i = 0; i < t->cap; i++)
        if (t->slots[i] > 0)
            tidset_add(&n, t->slots[i]);
    free(t->slots);
    *t = n;
    return 0;
}

/* Returns 1 when added, 0 when present, -ENOMEM. */
static int tidset_add(tidset *t, int32_t tid)
{
    if (tid <= 0 || tidset_has(t, tid))
        return 0;
    if ((t->used + 1) * 2 > t->cap && tidset_grow(t) < 0)
        return -ENOMEM;
    size_t i = hash32((uint32_t)tid) & (t->cap - 1);
    while (t->slots[i] > 0)
        i = (i + 1) & (t->cap - 1);
    if (t->slots[i] == 0)
        t->used++;
    t->slots[i] = tid;
    t->live++;
    return 1;
}

static bool tidset_del(tidset *t, int32_t tid)
{
    if (!t->cap || tid <= 0)
        return false;
    for (size_t i = hash32((uint32_t)tid) & (t->cap - 1), n = 0; n < t->cap;
         i = (i + 1) & (t->cap - 1), n++) {
        if (t->slots[i] == tid) {
            t->slots[i] = -1;
            t->live--;
            return true;
        }
        if (t->slots[i] == 0)
            return false;
    }
    return false;
}

/* ---------------------------------------------------------------------------------------
 * Objects
 */

static uint32_t hash_str(const char *s)
{
    uint32_t h = 2166136261u;
    while (*s)
        h = (h ^ (uint8_t)*s++) * 16777619u;
    return h;
}

static const char *base_name(const char *path)
{
    const char *b = strrchr(path, '/');
    return b && b[1] ? b + 1 : path;
}

static void obj_free(cn_smp__obj *o)
{
    if (!o)
        return;
    cn_smp__elf_unload(&o->elf);
    free((char *)o->pub.identity);
    free((char *)o->pub.name);
    free((char *)o->pub.path);
    free((char *)o->pub.build_id);
    free(o->key);
    free(o->open_path);
    free(o);
}

/* Registers a new object (the session owns it) and announces it. */
static int obj_add(cn_smp_session *s, cn_smp__obj *o)
{
    if (s->nobjs == s->capobjs) {
        size_t cap = s->capobjs ? s->capobjs * 2 : 32;
        cn_smp__obj **n = realloc(s->objs, cap * sizeof(*n));
        if (!n)
            return -ENOMEM;
        s->objs = n;
        s->capobjs = cap;
    }
    objnode *node = malloc(sizeof(*node));
    if (!node)
        return -ENOMEM;
    uint32_t b = hash_str(o->key) % OBJ_BUCKETS;
    node->obj = o;
    node->next = s->objmap[b];
    s->objmap[b] = node;
    o->pub.id = (uint32_t)s->nobjs;
    s->objs[s->nobjs++] = o;
    if (s->cb.object)
        s->cb.object(s->arg, &o->pub);
    return 0;
}

static cn_smp__obj *obj_lookup(cn_smp_session *s, const char *key)
{
    for (objnode *n = s->objmap[hash_str(key) % OBJ_BUCKETS]; n; n = n->next)
        if (strcmp(n->obj->key, key) == 0)
            return n->obj;
    return NULL;
}

/* A special object (kernel, anon, vdso ...) by key, created on first use. */
static cn_smp__obj *obj_special(cn_smp_session *s, const char *key, const char *name,
                                cn_smp_obj_kind kind, pid_t pid)
{
    cn_smp__obj *o = obj_lookup(s, key);
    if (o)
        return o;
    o = calloc(1, sizeof(*o));
    if (!o)
        return NULL;
    o->key = strdup(key);
    o->pub.identity = strdup(key);
    o->pub.name = strdup(name);
    o->pub.kind = kind;
    o->pub.pid = pid;
    o->elf.tried = true;
    if (!o->key || !o->pub.identity || !o->pub.name || obj_add(s, o) < 0) {
        obj_free(o);
        return NULL;
    }
    return o;
}

static bool stat_matches(const char *path, uint64_t ino, struct stat *st)
{
    return stat(path, st) == 0 && S_ISREG(st->st_mode) && (uint64_t)st->st_ino == ino;
}

/* The object for a file mapping of process pid, created on first use. */
static cn_smp__obj *obj_file(cn_smp_session *s, pid_t pid, const char *path, uint32_t maj,
                             uint32_t min, uint64_t ino, bool deleted, uint64_t start, uint64_t end)
{
    char key[4200], buf[4200];
    snprintf(key, sizeof(key), "%x:%x:%" PRIu64 ":%s", maj, min, ino, path);
    cn_smp__obj *o = obj_lookup(s, key);
    if (o)
        return o;
    o = calloc(1, sizeof(*o));
    if (!o)
        return NULL;
    o->maj = maj;
    o->min = min;
    o->ino = ino;
    o->pub.kind = CN_SMP_OBJ_USER;
    struct stat st = {0};
    const char *open_path = NULL, *pub_path = NULL;
    bool live = s->cfg.target != CN_SMP_TARGET_NONE;
    if (live && !deleted && stat_matches(path, ino, &st)) {
        open_path = pub_path = path;
    } else if (live && pid > 0) {
        snprintf(buf, sizeof(buf), "/proc/%d/root%s", (int)pid, path);
        if (!deleted && stat_matches(buf, ino, &st)) {
            open_path = pub_path = buf;
        } else {
            snprintf(buf, sizeof(buf), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, (int)pid, start,
                     end);
            if (stat_matches(buf, ino, &st))
                open_path = pub_path = buf;
        }
    }
    o->key = strdup(key);
    o->pub.name = strdup(base_name(path));
    o->pub.path = pub_path ? strdup(pub_path) : NULL;
    o->open_path = open_path ? strdup(open_path) : NULL;
    if (!o->key || !o->pub.name || (pub_path && !o->pub.path) || (open_path && !o->open_path))
        goto fail;
    char bid[129];
    if (cn_smp__elf_load(o) == 0 &&
        cn_smp__elf_build_id(o->elf.data, o->elf.size, bid, sizeof(bid)) == 0) {
        o->pub.build_id = strdup(bid);
        o->pub.identity = strdup(bid);
    } else {
        snprintf(buf, sizeof(buf), "%x:%x:%" PRIu64 ":%lld", maj, min, ino, (long long)st.st_mtime);
        o->pub.identity = strdup(buf);
    }
    if (!o->pub.identity || obj_add(s, o) < 0)
        goto fail;
    return o;
fail:
    obj_free(o);
    return NULL;
}

/* ---------------------------------------------------------------------------------------
 * Processes
 */

static cn_smp__proc *proc_get(cn_smp_session *s, pid_t pid, bool create)
{
    size_t b = hash32((uint32_t)pid) % PROC_BUCKETS;
    for (cn_smp__proc *p = s->procs[b]; p; p = p->next)
        if (p->pid == pid)
            return p;
    if (!create)
        return NULL;
    cn_smp__proc *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->pid = pid;
    p->next = s->procs[b];
    s->procs[b] = p;
    s->cnt.processes++;
    return p;
}

static void proc_drop(cn_smp_session *s, pid_t pid)
{
    cn_smp__proc **pp = &s->procs[hash32((uint32_t)pid) % PROC_BUCKETS];
    for (; *pp; pp = &(*pp)->next) {
        if ((*pp)->pid == pid) {
            cn_smp__proc *p = *pp;
            *pp = p->next;
            cn_smp__proc_clear(p);
            free(p);
            return;
        }
    }
}

/* Length of our own [vdso] mapping starting at addr, or 0. */
static size_t own_vdso_len(uint64_t addr)
{
    FILE *f = fopen("/proc/self/maps", "re");
    char line[4400];
    size_t len = 0;
    if (!f)
        return 0;
    while (!len && fgets(line, sizeof(line), f)) {
        cn_smp__maps_line ml;
        if (cn_smp__maps_parse_line(line, &ml) == 0 && ml.start == addr &&
            strcmp(ml.path, "[vdso]") == 0)
            len = (size_t)(ml.end - ml.start);
    }
    fclose(f);
    return len;
}

/* The vDSO has no file, but the kernel maps one image into every 64-bit process: ours,
 * at AT_SYSINFO_EHDR, gives its unwind tables (a leaf in clock_gettime is common). Tried
 * once per session. */
static void load_vdso(cn_smp_session *s, cn_smp__obj *o)
{
    if (s->vdso_tried)
        return;
    s->vdso_tried = true;
    uint64_t own = getauxval(AT_SYSINFO_EHDR);
    size_t len = own ? own_vdso_len(own) : 0;
    if (len > 0)
        cn_smp__elf_load_image(o, (const void *)own, len);
}

/* Adds one mapping (exec only) described by path/anon to p. */
static int proc_add_mapping(cn_smp_session *s, cn_smp__proc *p, uint64_t start, uint64_t end,
                            uint64_t pgoff, const char *path, uint32_t maj, uint32_t min,
                            uint64_t ino, bool deleted)
{
    cn_smp__obj *o;
    char key[64];
    if (path[0] == '/' && ino != 0) {
        o = obj_file(s, p->pid, path, maj, min, ino, deleted, start, end);
    } else if (strcmp(path, "[vdso]") == 0) {
        o = obj_special(s, path, path, CN_SMP_OBJ_USER, 0);
        if (o)
            load_vdso(s, o);
    } else if (strcmp(path, "[vsyscall]") == 0) {
        o = obj_special(s, path, path, CN_SMP_OBJ_USER, 0);
    } else {
        snprintf(key, sizeof(key), "[jit:%d]", (int)p->pid);
        o = obj_special(s, key, "[jit]", CN_SMP_OBJ_JIT, p->pid);
    }
    if (!o)
        return -ENOMEM;
    return cn_smp__proc_map(p, start, end, pgoff, o);
}

/* Reads /proc/PID/maps into p (exec mappings). */
static int proc_load_maps(cn_smp_session *s, cn_smp__proc *p)
{
    char path[64], line[4400];
    p->maps_loaded = true;
    if (s->cfg.target == CN_SMP_TARGET_NONE)
        return 0;
    snprintf(path, sizeof(path), "/proc/%d/maps", (int)p->pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -errno;
    int ret = 0;
    while (fgets(line, sizeof(line), f)) {
        cn_smp__maps_line m;
        if (cn_smp__maps_parse_line(line, &m) < 0 || !m.exec)
            continue;
        ret =
            proc_add_mapping(s, p, m.start, m.end, m.pgoff, m.path, m.maj, m.min, m.ino, m.deleted);
        if (ret < 0)
            break;
    }
    fclose(f);
    return ret;
}

static cn_smp__proc *proc_for_sample(cn_smp_session *s, pid_t pid)
{
    cn_smp__proc *p = proc_get(s, pid, true);
    if (p && !p->maps_loaded)
        proc_load_maps(s, p);
    return p;
}

/* ---------------------------------------------------------------------------------------
 * Task events
 */

static void emit_task(cn_smp_session *s, cn_smp_task_kind kind, pid_t pid, pid_t tid, pid_t ppid,
                      pid_t ptid, uint64_t time, const char *comm, bool exec)
{
    if (!s->cb.task)
        return;
    cn_smp_task_event ev = {kind, pid, tid, ppid, ptid, time, comm, exec};
    s->cb.task(s->arg, &ev);
}

/* Reports a thread's name from /proc the first time we meet it without a COMM record. */
static void ensure_comm(cn_smp_session *s, pid_t pid, pid_t tid, uint64_t time)
{
    if (tid <= 0 || tidset_has(&s->seen, tid))
        return;
    if (tidset_add(&s->seen, tid) > 0)
        s->cnt.threads++;
    char path[96], comm[64] = "";
    if (s->cfg.target != CN_SMP_TARGET_NONE) {
        snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)pid, (int)tid);
        FILE *f = fopen(path, "re");
        if (f) {
            if (fgets(comm, sizeof(comm), f))
                comm[strcspn(comm, "\n")] = 0;
            fclose(f);
        }
    }
    if (comm[0])
        emit_task(s, CN_SMP_TASK_COMM, pid, tid, 0, 0, time, comm, false);
}

/* ---------------------------------------------------------------------------------------
 * Samples
 */

static bool is_module_addr(const cn_smp_session *s, uint64_t addr)
{
    for (size_t i = 0; i < s->nmodules; i++)
        if (addr >= s->modules[i].start && addr < s->modules[i].end)
            return true;
    return false;
}

static void add_kernel_frame(cn_smp_session *s, uint32_t *n, uint64_t addr)
{
    if (*n >= CN_SMP_MAX_FRAMES)
        return;
    cn_smp__obj *o = is_module_addr(s, addr) ? s->module_obj : s->kernel_obj;
    if (!o)
        return;
    s->frames[(*n)++] = (cn_smp_frame){&o->pub, addr};
}

static void add_user_frame(cn_smp_session *s, const cn_smp__proc *p, uint32_t *n, uint64_t addr)
{
    if (*n >= CN_SMP_MAX_FRAMES)
        return;
    const cn_smp__map *m = p ? cn_smp__proc_find(p, addr) : NULL;
    if (m && m->obj->pub.kind == CN_SMP_OBJ_USER) {
        s->frames[(*n)++] = (cn_smp_frame){&m->obj->pub, addr - m->start + m->pgoff};
    } else if (m) {
        s->frames[(*n)++] = (cn_smp_frame){&m->obj->pub, addr};
    } else if (s->unknown_obj) {
        s->cnt.unmapped++;
        s->frames[(*n)++] = (cn_smp_frame){&s->unknown_obj->pub, addr};
    }
}

/* Splits the kernel's callchain into kernel and raw user addresses (user into s->pcs). */
static int split_chain(cn_smp_session *s, const cn_smp__rec *r, uint32_t *nk, int *nuser)
{
    uint64_t ctx = PERF_CONTEXT_USER;
    bool first_kernel = true;
    *nuser = 0;
    for (uint64_t i = 0; i < r->u.sample.nr; i++) {
        uint64_t v = cn_smp__chain_at(r, i);
        if (v >= (uint64_t)PERF_CONTEXT_MAX) {
            ctx = v;
            continue;
        }
        if (ctx == PERF_CONTEXT_KERNEL && s->kernel) {
            add_kernel_frame(s, nk, first_kernel ? v : v - 1);
            first_kernel = false;
        } else if (ctx == PERF_CONTEXT_USER && *nuser < CN_SMP_MAX_FRAMES) {
            s->pcs[(*nuser)++] = v;
        }
    }
    return 0;
}

static void count_stop(cn_smp_session *s, cn_smp_stop stop)
{
    s->cnt.unwind_stop[stop]++;
    if (stop != CN_SMP_STOP_NONE)
        s->cnt.unwind_early++;
}

/* Does the user chain pass through an object known to lack frame pointers? */
static bool chain_needs_dwarf(cn_smp_session *s, const cn_smp__proc *p, int nuser)
{
    if (!p)
        return false;
    for (int i = 0; i < nuser && i < 2; i++) {
        const cn_smp__map *m = cn_smp__proc_find(p, s->pcs[i]);
        if (m && m->obj->pub.kind == CN_SMP_OBJ_USER && cn_smp__elf_load(m->obj) == 0 &&
            m->obj->elf.has_fp == 0)
            return true;
    }
    return false;
}

static void handle_sample(cn_smp_session *s, const cn_smp__rec *r)
{
    uint32_t n = 0;
    int nuser = 0;
    cn_smp_stop stop = CN_SMP_STOP_NONE;
    cn_smp__proc *p = r->pid > 0 ? proc_for_sample(s, (pid_t)r->pid) : NULL;
    ensure_comm(s, (pid_t)r->pid, (pid_t)r->tid, r->time);
    s->cnt.samples++;

    if (r->u.sample.chain)
        split_chain(s, r, &n, &nuser);
    else if (s->kernel && r->u.sample.ip && (int64_t)r->u.sample.ip < 0)
        add_kernel_frame(s, &n, r->u.sample.ip);
    uint32_t nk = n;

    bool have_regs = r->u.sample.regs && r->u.sample.abi != PERF_SAMPLE_REGS_ABI_NONE;
    cn_smp_unwind mode = s->cfg.unwind;
    if (!r->u.sample.chain && !have_regs && r->u.sample.ip && (int64_t)r->u.sample.ip >= 0)
        s->pcs[nuser++] = r->u.sample.ip; /* no unwinding data at all: the leaf only */
    if (have_regs && s->unw && p &&
        (mode == CN_SMP_UNWIND_DWARF ||
         (mode == CN_SMP_UNWIND_AUTO && chain_needs_dwarf(s, p, nuser)))) {
        int got = cn_smp__unwind_dwarf(s->unw, p, r, s->pcs, CN_SMP_MAX_FRAMES, &stop);
        s->cnt.dwarf_unwinds++;
        nuser = got > 0 ? got : 0;
        count_stop(s, stop);
    } else if (have_regs && s->unw && p && mode == CN_SMP_UNWIND_AUTO && nuser >= 1) {
        /* Leaf fix-up: one CFI step from the sample's registers. If the caller it finds is
         * not the FP chain's second entry, the leaf set up no frame (yet) and the chain
         * skipped its caller: insert it. */
        uint64_t two[2];
        cn_smp_stop st2;
        int got = cn_smp__unwind_dwarf(s->unw, p, r, two, 2, &st2);
        if (got == 2 && two[0] == s->pcs[0] && (nuser < 2 || two[1] != s->pcs[1]) &&
            nuser < CN_SMP_MAX_FRAMES) {
            memmove(&s->pcs[2], &s->pcs[1], (size_t)(nuser - 1) * sizeof(s->pcs[0]));
            s->pcs[1] = two[1];
            nuser++;
            s->cnt.leaf_fixups++;
        }
        count_stop(s, CN_SMP_STOP_NONE);
    } else {
        count_stop(s, nuser >= CN_SMP_MAX_FRAMES ? CN_SMP_STOP_MAX_DEPTH : CN_SMP_STOP_NONE);
    }
    for (int i = 0; i < nuser; i++) {
        uint64_t a = s->pcs[i];
        if (i > 0)
            a = s->arch->mask_ret(a) - 1; /* into the call instruction */
        add_user_frame(s, p, &n, a);
    }
    if (!s->cb.sample)
        return;
    cn_smp_sample out = {
        (pid_t)r->pid, (pid_t)r->tid, r->cpu, r->time, r->u.sample.period, s->frames, n, nk, stop};
    s->cb.sample(s->arg, &out);
}

static void handle_record(cn_smp_session *s, const cn_smp__rec *r)
{
    switch (r->type) {
    case PERF_RECORD_SAMPLE:
        handle_sample(s, r);
        break;
    case PERF_RECORD_MMAP:
    case PERF_RECORD_MMAP2: {
        if (!(r->u.mmap.prot & 4 /* PROT_EXEC */) || (int32_t)r->u.mmap.pid <= 0)
            break;
        cn_smp__proc *p = proc_get(s, (pid_t)r->u.mmap.pid, true);
        if (!p)
            break;
        if (!p->maps_loaded && s->cfg.target == CN_SMP_TARGET_SYSTEM)
            proc_load_maps(s, p);
        p->maps_loaded = true;
        proc_add_mapping(s, p, r->u.mmap.addr, r->u.mmap.addr + r->u.mmap.len, r->u.mmap.pgoff,
                         r->u.mmap.filename, r->u.mmap.maj, r->u.mmap.min, r->u.mmap.ino, false);
        break;
    }
    case PERF_RECORD_COMM: {
        bool exec = r->misc & PERF_RECORD_MISC_COMM_EXEC;
        if (exec && r->u.comm.pid == r->u.comm.tid) {
            cn_smp__proc *p = proc_get(s, (pid_t)r->u.comm.pid, true);
            if (p) {
                cn_smp__proc_clear(p); /* exec: a new address space, MMAP2 records follow */
                p->maps_loaded = true;
            }
        }
        if (tidset_add(&s->seen, (int32_t)r->u.comm.tid) > 0)
            s->cnt.threads++;
        emit_task(s, CN_SMP_TASK_COMM, (pid_t)r->u.comm.pid, (pid_t)r->u.comm.tid, 0, 0, r->time,
                  r->u.comm.comm, exec);
        break;
    }
    case PERF_RECORD_FORK: {
        const typeof(r->u.task) *t = &r->u.task;
        if (t->pid != t->ppid) {
            cn_smp__proc *parent = proc_get(s, (pid_t)t->ppid, false);
            cn_smp__proc *child = proc_get(s, (pid_t)t->pid, true);
            if (child && parent && parent != child) {
                cn_smp__proc_clear(child);
                for (size_t i = 0; i < parent->nmaps; i++)
                    cn_smp__proc_map(child, parent->maps[i].start, parent->maps[i].end,
                                     parent->maps[i].pgoff, parent->maps[i].obj);
                child->maps_loaded = true;
            }
        }
        if (s->cfg.target == CN_SMP_TARGET_PID && tidset_add(&s->live, (int32_t)t->tid) > 0)
            s->had_live = true;
        emit_task(s, CN_SMP_TASK_FORK, (pid_t)t->pid, (pid_t)t->tid, (pid_t)t->ppid, (pid_t)t->ptid,
                  r->time, NULL, false);
        break;
    }
    case PERF_RECORD_EXIT: {
        const typeof(r->u.task) *t = &r->u.task;
        tidset_del(&s->live, (int32_t)t->tid);
        emit_task(s, CN_SMP_TASK_EXIT, (pid_t)t->pid, (pid_t)t->tid, (pid_t)t->ppid, (pid_t)t->ptid,
                  r->time, NULL, false);
        if (t->pid == t->tid && s->cfg.target == CN_SMP_TARGET_SYSTEM)
            proc_drop(s, (pid_t)t->pid);
        break;
    }
    case PERF_RECORD_LOST:
        s->cnt.lost += r->u.lost.lost;
        s->cnt.lost_events++;
        break;
    case PERF_RECORD_THROTTLE:
        s->cnt.throttles++;
        break;
    case PERF_RECORD_UNTHROTTLE:
        s->cnt.unthrottles++;
        break;
    default:
        break;
    }
}

/* Handles a record that parsed (parse_ret 0); counts the malformed ones. */
static void handle_parsed(cn_smp_session *s, int parse_ret, const cn_smp__rec *r)
{
    if (parse_ret == 0)
        handle_record(s, r);
    else if (parse_ret != -ENOTSUP) /* a type we do not use */
        s->cnt.bad_records++;
}

static void process_one(cn_smp_session *s, const uint8_t *rec, size_t len)
{
    cn_smp__rec r;
    handle_parsed(s, cn_smp__parse(&s->lay, rec, len, &r), &r);
}

/* ---------------------------------------------------------------------------------------
 * Pending queue and rings
 */

/* Copies a record (contiguous) into the held queue. */
static int arena_push(cn_smp_session *s, const uint8_t *rec, size_t len, uint64_t time)
{
    if (s->arena_len + len > s->arena_cap) {
        size_t cap = s->arena_cap ? s->arena_cap : 1 << 20;
        while (cap < s->arena_len + len)
            cap *= 2;
        uint8_t *n = realloc(s->arena, cap);
        if (!n)
            return -ENOMEM;
        s->arena = n;
        s->arena_cap = cap;
    }
    if (s->npend == s->cappend) {
        size_t cap = s->cappend ? s->cappend * 2 : 4096;
        pend *n = realloc(s->pend, cap * sizeof(*n));
        if (!n)
            return -ENOMEM;
        s->pend = n;
        s->cappend = cap;
    }
    memcpy(s->arena + s->arena_len, rec, len);
    s->pend[s->npend++] = (pend){time, s->seq++, s->arena_len, (uint32_t)len};
    s->arena_len += len;
    return 0;
}

/* A ring's unread records, walked in place by the merge. */
typedef struct cursor {
    ring *rg;
    const uint8_t *data;
    uint64_t head, tail, size;
    const uint8_t *rec; /* the current record: in the ring, or rg->wrap when it wraps */
    size_t len;         /* 0 when the ring has nothing more */
    uint64_t time;      /* 0 when the record does not parse (delivered at once, counted) */
    cn_smp__rec parsed; /* rec parsed (pointers into rec), when parse_ret == 0 */
    int parse_ret;
} cursor;

/* Points c at the record at its tail (len 0 when none). A malformed header discards the
 * rest of what the ring holds now, counted. */
static void cursor_peek(cn_smp_session *s, cursor *c)
{
    c->len = 0;
    if (c->tail >= c->head)
        return;
    struct perf_event_header h;
    uint64_t avail = c->head - c->tail, off = c->tail & (c->size - 1);
    size_t first = (size_t)(c->size - off);
    if (avail < sizeof(h) || avail > c->size)
        goto bad;
    if (first >= sizeof(h)) {
        memcpy(&h, c->data + off, sizeof(h));
    } else {
        memcpy(&h, c->data + off, first);
        memcpy((uint8_t *)&h + first, c->data, sizeof(h) - first);
    }
    if (h.size < sizeof(h) || h.size > avail)
        goto bad;
    c->rec = c->data + off;
    if (first < h.size) { /* wraps the end of the ring: make it contiguous */
        memcpy(c->rg->wrap, c->data + off, first);
        memcpy(c->rg->wrap + first, c->data, h.size - first);
        c->rec = c->rg->wrap;
    }
    c->len = h.size;
    c->parse_ret = cn_smp__parse(&s->lay, c->rec, c->len, &c->parsed);
    c->time = c->parse_ret == 0 ? c->parsed.time : 0;
    return;
bad:
    s->cnt.bad_records++;
    c->tail = c->head;
}

static void cursor_open(cn_smp_session *s, cursor *c, ring *rg)
{
    struct perf_event_mmap_page *pg = (void *)rg->base;
    c->rg = rg;
    /* Acquire: the records up to data_head are completely written. */
    c->head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE);
    c->tail = pg->data_tail;
    c->data = rg->base + (pg->data_offset ? pg->data_offset : (uint64_t)getpagesize());
    c->size = rg->data_size;
    cursor_peek(s, c);
}

/* Hands the ring's space up to the cursor back to the kernel. */
static void cursor_close(cursor *c)
{
    struct perf_event_mmap_page *pg = (void *)c->rg->base;
    /* Release: our reads of the records are done before the kernel may overwrite them. */
    __atomic_store_n(&pg->data_tail, c->tail, __ATOMIC_RELEASE);
}

static int pend_cmp(const void *a, const void *b)
{
    const pend *x = a, *y = b;
    if (x->time != y->time)
        return x->time < y->time ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Keeps the held records from index `from` on (dropping those delivered), compacted. */
static int held_compact(cn_smp_session *s, size_t from)
{
    if (from == 0)
        return 0; /* nothing delivered: nothing to drop */
    size_t need = 0;
    for (size_t j = from; j < s->npend; j++)
        need += s->pend[j].len;
    if (need > s->arena2_cap) {
        uint8_t *n = realloc(s->arena2, need);
        if (!n)
            return -ENOMEM;
        s->arena2 = n;
        s->arena2_cap = need;
    }
    size_t off = 0;
    for (size_t j = from; j < s->npend; j++) {
        memcpy(s->arena2 + off, s->arena + s->pend[j].off, s->pend[j].len);
        s->pend[j - from] = s->pend[j];
        s->pend[j - from].off = off;
        off += s->pend[j].len;
    }
    s->npend -= from;
    uint8_t *t = s->arena;
    size_t tc = s->arena_cap;
    s->arena = s->arena2;
    s->arena_cap = s->arena2_cap;
    s->arena2 = t;
    s->arena2_cap = tc;
    s->arena_len = off;
    return 0;
}

/* Merges the rings' records and the held ones in time order, processing every record with
 * time <= bound where it lies (no copy: a dwarf sample carries kilobytes of stack). What is
 * newer waits for the next call, in the ring, or copied into the held queue when the ring
 * is filling up. Each ring is in time order (one CPU writes it), so a k-way merge of the
 * rings' heads and the held queue orders everything. */
static int merge(cn_smp_session *s, uint64_t bound)
{
    uint64_t before = s->cnt.samples;
    cursor *cur = s->cursors;
    size_t hi = 0;
    int ret = 0;
    for (size_t i = 0; i < s->nrings; i++)
        cursor_open(s, &cur[i], &s->rings[i]);
    for (;;) {
        cursor *best = NULL;
        uint64_t t = hi < s->npend ? s->pend[hi].time : UINT64_MAX;
        for (size_t i = 0; i < s->nrings; i++)
            if (cur[i].len && cur[i].time < t) {
                best = &cur[i];
                t = cur[i].time;
            }
        if (t > bound || (!best && hi >= s->npend))
            break;
        if (best) {
            handle_parsed(s, best->parse_ret, &best->parsed);
            best->tail += best->len;
            cursor_peek(s, best);
        } else {
            process_one(s, s->arena + s->pend[hi].off, s->pend[hi].len);
            hi++;
        }
    }
    ret = held_compact(s, hi);
    for (size_t i = 0; i < s->nrings; i++) {
        /* What is newer stays in the ring while the ring has room to spare (no copy); only
         * when it holds more than a quarter of its size is it moved out. */
        cursor *c = &cur[i];
        if (bound != UINT64_MAX && c->head - c->tail <= c->size / 4) {
            cursor_close(c);
            continue;
        }
        for (; ret == 0 && c->len; cursor_peek(s, c)) {
            ret = arena_push(s, c->rec, c->len, c->time);
            c->tail += c->len;
        }
        cursor_close(&cur[i]);
    }
    if (ret < 0)
        return ret;
    if (s->npend > 1)
        qsort(s->pend, s->npend, sizeof(*s->pend), pend_cmp);
    uint64_t got = s->cnt.samples - before;
    return got > INT32_MAX ? INT32_MAX : (int)got;
}

int cn_smp_session_read(cn_smp_session *s)
{
    if (!s)
        return -EINVAL;
    if (!s->started || s->stopped)
        return 0;
    /* Records are written within microseconds of their time stamp; those older than
     * HOLD_NS before this read can no longer be overtaken by a record still unwritten. */
    uint64_t now = now_ns();
    return merge(s, now > HOLD_NS ? now - HOLD_NS : 0);
}

int cn_smp_session_wait(cn_smp_session *s, int timeout_ms)
{
    if (!s)
        return -EINVAL;
    if (!s->started || s->stopped)
        return 0;
    struct pollfd pfd[MAX_RINGS];
    nfds_t n = 0;
    for (size_t i = 0; i < s->nrings && n < MAX_RINGS; i++)
        if (!s->rings[i].hup)
            pfd[n++] = (struct pollfd){s->rings[i].fd, POLLIN, 0};
    int wait = timeout_ms;
    if (n < s->nrings && (wait < 0 || wait > 20))
        wait = 20; /* a hung-up ring still gets records from inherited events: poll it by time */
    if (cn_smp_session_ended(s))
        wait = 0;
    int r = poll(pfd, n, wait);
    if (r < 0 && errno != EINTR)
        return -errno;
    for (nfds_t i = 0; r > 0 && i < n; i++)
        if (pfd[i].revents & (POLLHUP | POLLERR))
            for (size_t k = 0; k < s->nrings; k++)
                if (s->rings[k].fd == pfd[i].fd)
                    s->rings[k].hup = true;
    return cn_smp_session_read(s);
}

bool cn_smp_session_ended(const cn_smp_session *s)
{
    return s && s->cfg.target == CN_SMP_TARGET_PID && s->started && s->had_live &&
           s->live.live == 0;
}

int cn_smp_session_feed(cn_smp_session *s, const void *buf, size_t len)
{
    if (!s || (!buf && len))
        return -EINVAL;
    uint64_t before = s->cnt.samples;
    const uint8_t *p = buf;
    size_t off = 0;
    while (len - off >= sizeof(struct perf_event_header)) {
        struct perf_event_header h;
        memcpy(&h, p + off, sizeof(h));
        if (h.size < sizeof(h) || h.size > len - off) {
            s->cnt.bad_records++;
            break;
        }
        process_one(s, p + off, h.size);
        off += h.size;
    }
    if (off < len && len - off < sizeof(struct perf_event_header))
        s->cnt.bad_records++;
    uint64_t got = s->cnt.samples - before;
    return got > INT32_MAX ? INT32_MAX : (int)got;
}

/* ---------------------------------------------------------------------------------------
 * Setup
 */

static const struct {
    const char *name;
    uint32_t type;
    uint64_t config;
} events[] = {
    {"cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
    {"cpu-cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
    {"instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS},
    {"cache-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES},
    {"branch-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES},
    {"cpu-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK},
    {"task-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK},
    {"page-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS},
    {"faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS},
};

static int lookup_event(const char *name, uint32_t *type, uint64_t *config)
{
    for (size_t i = 0; i < sizeof(events) / sizeof(events[0]); i++)
        if (strcmp(events[i].name, name) == 0) {
            *type = events[i].type;
            *config = events[i].config;
            return 0;
        }
    return -ENOENT;
}

static void compute_layout(cn_smp_session *s)
{
    cn_smp_unwind u = s->cfg.unwind;
    s->want_callchain = u != CN_SMP_UNWIND_DWARF || s->kernel;
    s->want_stack = u != CN_SMP_UNWIND_FP;
    uint32_t ss = s->cfg.stack_size ? s->cfg.stack_size : 8192;
    if (u == CN_SMP_UNWIND_AUTO && ss > AUTO_STACK_MAX)
        ss = AUTO_STACK_MAX;
    s->stack_copy = (ss + 7) & ~7u;
    s->lay.sample_type =
        PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD;
    if (s->want_callchain)
        s->lay.sample_type |= PERF_SAMPLE_CALLCHAIN;
    if (s->want_stack)
        s->lay.sample_type |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
    s->lay.regs_mask = s->want_stack ? s->arch->regs_mask : 0;
    s->lay.sample_id_all = true;
}

int cn_smp_session_new(const cn_smp_config *cfg, const cn_smp_callbacks *cb, void *arg,
                       cn_smp_session **ret)
{
    if (!cfg || !ret || cfg->target > CN_SMP_TARGET_NONE || cfg->unwind > CN_SMP_UNWIND_DWARF ||
        (cfg->target == CN_SMP_TARGET_PID && cfg->pid <= 0) || cfg->stack_size > 65528 ||
        (cfg->ring_pages & (cfg->ring_pages - 1)))
        return -EINVAL;
    cn_smp_session *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->cfg = *cfg;
    s->cfg.freq = cfg->freq ? cfg->freq : 99;
    if (cfg->event && strcmp(cfg->event, "auto") != 0) {
        s->event_req = strdup(cfg->event);
        if (!s->event_req)
            goto nomem;
    }
    s->cfg.event = s->event_req;
    if (cb)
        s->cb = *cb;
    s->arg = arg;
    s->arch = cn_smp__arch_get();
    s->kernel = !cfg->no_kernel;
    compute_layout(s);
    s->ring_pages = cfg->ring_pages ? cfg->ring_pages : (s->want_stack ? 1024 : 256);
    s->kernel_obj = obj_special(s, "[kernel]", "[kernel]", CN_SMP_OBJ_KERNEL, 0);
    s->unknown_obj = obj_special(s, "[unknown]", "[unknown]", CN_SMP_OBJ_ANON, 0);
    if (!s->kernel_obj || !s->unknown_obj)
        goto nomem;
    if (s->want_stack) {
        s->unw = cn_smp__unwinder_new(cfg->check_unwind     ? CN_SMP__UNWIND_CHECK
                                      : cfg->libunwind_only ? CN_SMP__UNWIND_LIBUNWIND
                                                            : CN_SMP__UNWIND_CFI_FIRST);
        if (!s->unw)
            goto nomem;
    }
    *ret = s;
    return 0;
nomem:
    cn_smp_session_free(s);
    return -ENOMEM;
}

static void fill_attr(const cn_smp_session *s, struct perf_event_attr *a)
{
    memset(a, 0, sizeof(*a));
    a->size = sizeof(*a);
    a->type = s->perf_type;
    a->config = s->perf_config;
    a->freq = 1;
    a->sample_freq = s->cfg.freq;
    a->sample_type = s->lay.sample_type;
    a->sample_regs_user = s->lay.regs_mask;
    a->sample_stack_user = s->want_stack ? s->stack_copy : 0;
    a->disabled = 1;
    a->inherit = s->cfg.target == CN_SMP_TARGET_PID;
    a->enable_on_exec = s->cfg.enable_on_exec && s->cfg.target == CN_SMP_TARGET_PID;
    a->mmap = 1;
    a->mmap2 = 1;
    a->comm = 1;
    a->comm_exec = 1;
    a->task = 1;
    a->sample_id_all = 1;
    a->use_clockid = 1;
    a->clockid = CLOCK_MONOTONIC;
    a->exclude_hv = 1;
    a->exclude_kernel = !s->kernel;
    a->exclude_callchain_kernel = !s->kernel;
    a->exclude_callchain_user = s->cfg.unwind == CN_SMP_UNWIND_DWARF;
    a->watermark = 1;
    a->wakeup_watermark = (uint32_t)((size_t)s->ring_pages * (size_t)getpagesize() / 4);
}

static int perf_open(struct perf_event_attr *a, pid_t pid, int cpu)
{
    long fd = syscall(SYS_perf_event_open, a, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
    return fd < 0 ? -errno : (int)fd;
}

static int add_fd(cn_smp_session *s, int fd)
{
    if (s->nfds == s->capfds) {
        size_t cap = s->capfds ? s->capfds * 2 : 64;
        int *n = realloc(s->fds, cap * sizeof(*n));
        if (!n)
            return -ENOMEM;
        s->fds = n;
        s->capfds = cap;
    }
    s->fds[s->nfds++] = fd;
    return 0;
}

static int read_cpus(int *cpus, int max)
{
    FILE *f = fopen("/sys/devices/system/cpu/online", "re");
    int n = 0;
    if (f) {
        int a, b;
        char sep;
        while (n < max && fscanf(f, "%d", &a) == 1) {
            b = a;
            if (fscanf(f, "%c", &sep) == 1 && sep == '-') {
                if (fscanf(f, "%d", &b) != 1)
                    break;
                if (fscanf(f, "%c", &sep) != 1)
                    sep = 0;
            }
            for (int c = a; c <= b && n < max; c++)
                cpus[n++] = c;
            if (sep != ',')
                break;
        }
        fclose(f);
    }
    if (n == 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        for (n = 0; n < c && n < max; n++)
            cpus[n] = n;
    }
    return n;
}

static int ring_map(cn_smp_session *s, ring *rg)
{
    size_t page = (size_t)getpagesize();
    for (uint32_t pages = s->ring_pages; pages >= 1; pages /= 2) {
        size_t len = (pages + 1) * page;
        void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, rg->fd, 0);
        if (m != MAP_FAILED) {
            rg->wrap = malloc(1u << 16); /* header.size is 16 bits */
            if (!rg->wrap) {
                munmap(m, len);
                return -ENOMEM;
            }
            rg->base = m;
            rg->map_len = len;
            rg->data_size = pages * page;
            return 0;
        }
        if (errno != EPERM && errno != ENOMEM)
            return -errno;
    }
    return -ENOMEM;
}

/* Opens the events of one task (or of every task with tid -1) on every CPU. */
static int open_task(cn_smp_session *s, struct perf_event_attr *a, pid_t tid)
{
    int opened = 0;
    for (size_t i = 0; i < s->nrings; i++) {
        ring *rg = &s->rings[i];
        int fd = perf_open(a, tid, rg->cpu);
        if (fd == -ENODEV)
            continue; /* CPU went offline */
        if (fd < 0)
            return fd;
        if (add_fd(s, fd) < 0) {
            close(fd);
            return -ENOMEM;
        }
        if (rg->fd < 0) {
            rg->fd = fd;
            s->ring_fds[i] = fd;
            int ret = ring_map(s, rg);
            if (ret < 0)
                return ret;
        } else if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, rg->fd) < 0) {
            return -errno;
        }
        opened++;
    }
    return opened ? 0 : -ENODEV;
}

/* Picks the event and opens a first probe to settle kernel-frame permission. */
static int choose_event(cn_smp_session *s, pid_t probe_pid, int probe_cpu, cn_err *err)
{
    const char *want = s->event_req;
    bool autoev = !want;
    if (autoev)
        want = "cycles";
    if (lookup_event(want, &s->perf_type, &s->perf_config) < 0)
        return cn_err_set(err, -ENOENT, "unknown event '%s'", want);
    for (int attempt = 0; attempt < 4; attempt++) {
        struct perf_event_attr a;
        fill_attr(s, &a);
        int fd = perf_open(&a, probe_pid, probe_cpu);
        if (fd >= 0) {
            close(fd);
            snprintf(s->event_name, sizeof(s->event_name), "%s", want);
            return 0;
        }
        if ((fd == -ENOENT || fd == -EOPNOTSUPP || fd == -ENODEV) && autoev &&
            s->perf_type == PERF_TYPE_HARDWARE) {
            want = "cpu-clock";
            lookup_event(want, &s->perf_type, &s->perf_config);
            continue;
        }
        if ((fd == -EACCES || fd == -EPERM) && s->kernel) {
            s->kernel = false; /* kernel frames not permitted: user only */
            compute_layout(s);
            continue;
        }
        if (fd == -ESRCH)
            return cn_err_set(err, fd, "no such process %d", (int)probe_pid);
        if (fd == -EACCES || fd == -EPERM)
            return cn_err_set(err, fd,
                              "perf_event_open not permitted (kernel.perf_event_paranoid; "
                              "need root or CAP_PERFMON)");
        if (fd == -EINVAL && s->cfg.freq > 1000)
            return cn_err_set(err, fd,
                              "perf_event_open: invalid argument (frequency %u above "
                              "kernel.perf_event_max_sample_rate?)",
                              s->cfg.freq);
        return cn_err_set(err, fd, "perf_event_open(%s): %s", want, strerror(-fd));
    }
    return cn_err_set(err, -EINVAL, "perf_event_open: no usable configuration");
}

static void load_modules(cn_smp_session *s)
{
    FILE *f = fopen("/proc/modules", "re");
    if (!f)
        return;
    char line[512];
    while (s->nmodules < MAX_MODULES && fgets(line, sizeof(line), f)) {
        char name[128];
        unsigned long size;
        unsigned long long addr;
        if (sscanf(line, "%127s %lu %*s %*s %*s %llx", name, &size, &addr) != 3 || !addr)
            continue;
        if (!s->modules) {
            s->modules = calloc(MAX_MODULES, sizeof(*s->modules));
            if (!s->modules)
                break;
        }
        s->modules[s->nmodules++] = (module_range){addr, addr + size};
    }
    fclose(f);
    if (s->nmodules)
        s->module_obj = obj_special(s, "[module]", "[module]", CN_SMP_OBJ_MODULE, 0);
}

static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* Attaches every thread of the target, re-listing /proc/PID/task until stable. */
static int attach_threads(cn_smp_session *s, struct perf_event_attr *a, cn_err *err)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", (int)s->cfg.pid);
    for (int pass = 0; pass < 100; pass++) {
        DIR *d = opendir(path);
        if (!d)
            return pass == 0 ? cn_err_set(err, -ESRCH, "no such process %d", (int)s->cfg.pid) : 0;
        int added = 0, ret = 0;
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            int tid = atoi(e->d_name);
            if (tid <= 0 || tidset_has(&s->attached, tid))
                continue;
            ret = open_task(s, a, tid);
            if (ret == -ESRCH) {
                ret = 0; /* exited meanwhile */
                continue;
            }
            if (ret == -EMFILE) {
                raise_nofile();
                ret = open_task(s, a, tid);
            }
            if (ret < 0)
                break;
            tidset_add(&s->attached, tid);
            if (tidset_add(&s->live, tid) > 0)
                s->had_live = true;
            added++;
        }
        closedir(d);
        if (ret < 0)
            return cn_err_set(err, ret, "perf_event_open(pid %d): %s", (int)s->cfg.pid,
                              strerror(-ret));
        if (!added)
            return s->attached.live
                       ? 0
                       : cn_err_set(err, -ESRCH, "process %d has no threads", (int)s->cfg.pid);
    }
    return 0;
}

static void report_initial_comms(cn_smp_session *s)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", (int)s->cfg.pid);
    DIR *d = opendir(path);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int tid = atoi(e->d_name);
        if (tid > 0)
            ensure_comm(s, s->cfg.pid, tid, 0);
    }
    closedir(d);
}

int cn_smp_session_start(cn_smp_session *s, cn_err *err)
{
    if (!s || s->started)
        return cn_err_set(err, -EINVAL, "sampler session %s", s ? "already started" : "missing");
    if (s->cfg.target == CN_SMP_TARGET_NONE) {
        s->started = true;
        return 0;
    }
    int cpus[MAX_RINGS];
    int ncpu = read_cpus(cpus, MAX_RINGS);
    s->rings = calloc((size_t)ncpu, sizeof(*s->rings));
    s->ring_fds = calloc((size_t)ncpu, sizeof(int));
    if (!s->rings || !s->ring_fds)
        return cn_err_set(err, -ENOMEM, "out of memory");
    s->nrings = (size_t)ncpu;
    for (int i = 0; i < ncpu; i++) {
        s->rings[i] = (ring){.fd = -1, .cpu = cpus[i]};
        s->ring_fds[i] = -1;
    }
    bool pid_target = s->cfg.target == CN_SMP_TARGET_PID;
    int ret = choose_event(s, pid_target ? s->cfg.pid : -1, pid_target ? -1 : cpus[0], err);
    if (ret < 0)
        return ret;
    if (s->kernel)
        load_modules(s);
    struct perf_event_attr a;
    fill_attr(s, &a);
    if (pid_target) {
        cn_smp__proc *p = proc_get(s, s->cfg.pid, true);
        ret = attach_threads(s, &a, err);
        if (ret < 0)
            return ret;
        if (p && !p->maps_loaded)
            proc_load_maps(s, p);
        report_initial_comms(s);
    } else {
        ret = open_task(s, &a, -1);
        if (ret < 0)
            return cn_err_set(err, ret, "perf_event_open(system): %s", strerror(-ret));
    }
    /* Compact the ring arrays: drop CPUs that could not be opened. */
    size_t k = 0;
    for (size_t i = 0; i < s->nrings; i++)
        if (s->rings[i].fd >= 0) {
            s->rings[k] = s->rings[i];
            s->ring_fds[k++] = s->rings[i].fd;
        }
    s->nrings = k;
    s->cursors = calloc(k ? k : 1, sizeof(*s->cursors));
    if (!s->cursors)
        return cn_err_set(err, -ENOMEM, "out of memory");
    if (!a.enable_on_exec)
        for (size_t i = 0; i < s->nfds; i++)
            if (ioctl(s->fds[i], PERF_EVENT_IOC_ENABLE, 0) < 0)
                return cn_err_set(err, -errno, "PERF_EVENT_IOC_ENABLE: %s", strerror(errno));
    s->started = true;
    return 0;
}

size_t cn_smp_session_fds(const cn_smp_session *s, const int **fds)
{
    if (!s || !s->started || s->stopped) {
        if (fds)
            *fds = NULL;
        return 0;
    }
    if (fds)
        *fds = s->ring_fds;
    return s->nrings;
}

static void close_all(cn_smp_session *s)
{
    for (size_t i = 0; i < s->nrings; i++)
        if (s->rings[i].base) {
            munmap(s->rings[i].base, s->rings[i].map_len);
            free(s->rings[i].wrap);
        }
    for (size_t i = 0; i < s->nfds; i++)
        close(s->fds[i]);
    free(s->fds);
    free(s->cursors);
    s->cursors = NULL;
    free(s->rings);
    free(s->ring_fds);
    s->fds = NULL;
    s->rings = NULL;
    s->ring_fds = NULL;
    s->nfds = s->capfds = s->nrings = 0;
}

int cn_smp_session_stop(cn_smp_session *s)
{
    if (!s)
        return -EINVAL;
    if (s->stopped || !s->started)
        return 0;
    for (size_t i = 0; i < s->nfds; i++)
        ioctl(s->fds[i], PERF_EVENT_IOC_DISABLE, 0);
    int ret = 0;
    ret = merge(s, UINT64_MAX);
    close_all(s);
    s->stopped = true;
    return ret < 0 ? ret : 0;
}

cn_smp_session *cn_smp_session_free(cn_smp_session *s)
{
    if (!s)
        return NULL;
    close_all(s);
    for (size_t b = 0; b < PROC_BUCKETS; b++)
        while (s->procs[b]) {
            cn_smp__proc *p = s->procs[b];
            s->procs[b] = p->next;
            cn_smp__proc_clear(p);
            free(p);
        }
    for (size_t b = 0; b < OBJ_BUCKETS; b++)
        while (s->objmap[b]) {
            objnode *n = s->objmap[b];
            s->objmap[b] = n->next;
            free(n);
        }
    for (size_t i = 0; i < s->nobjs; i++)
        obj_free(s->objs[i]);
    free(s->objs);
    free(s->modules);
    free(s->arena);
    free(s->arena2);
    free(s->pend);
    free(s->attached.slots);
    free(s->seen.slots);
    free(s->live.slots);
    cn_smp__unwinder_free(s->unw);
    free(s->event_req);
    free(s);
    return NULL;
}

const char *cn_smp_session_event(const cn_smp_session *s)
{
    return s && s->event_name[0] ? s->event_name : NULL;
}

cn_smp_unwind cn_smp_session_unwind(const cn_smp_session *s)
{
    return s ? s->cfg.unwind : CN_SMP_UNWIND_AUTO;
}

bool cn_smp_session_kernel(const cn_smp_session *s)
{
    return s && s->kernel;
}

void cn_smp_session_counters(const cn_smp_session *s, cn_smp_counters *out)
{
    if (!s || !out)
        return;
    *out = s->cnt;
    out->live_threads = s->live.live;
    if (s->unw) {
        cn_smp__unwind_stats us;
        cn_smp__unwinder_stats(s->unw, &us);
        out->cfi_unwinds = us.cfi;
        out->libunwind_unwinds = us.libunwind;
        out->unwind_checked = us.checked;
        out->unwind_mismatches = us.mismatches;
    }
}

uint64_t cn_smp_session_sample_type(const cn_smp_session *s)
{
    return s ? s->lay.sample_type : 0;
}

const char *cn_smp_unwind_name(cn_smp_unwind u)
{
    switch (u) {
    case CN_SMP_UNWIND_FP:
        return "fp";
    case CN_SMP_UNWIND_DWARF:
        return "dwarf";
    case CN_SMP_UNWIND_AUTO:
        return "auto";
    }
    return "?";
}

int cn_smp_unwind_parse(const char *name, cn_smp_unwind *ret)
{
    if (!name || !ret)
        return -EINVAL;
    for (int u = CN_SMP_UNWIND_AUTO; u <= CN_SMP_UNWIND_DWARF; u++)
        if (strcmp(name, cn_smp_unwind_name((cn_smp_unwind)u)) == 0) {
            *ret = (cn_smp_unwind)u;
            return 0;
        }
    return -EINVAL;
}

const char *cn_smp_stop_name(cn_smp_stop stop)
{
    static const char *const names[] = {"complete",        "no-unwind-info", "stack-too-small",
                                        "bad-memory-read", "max-depth",      "other"};
    return stop < CN_SMP_STOP__COUNT ? names[stop] : "?";
}
