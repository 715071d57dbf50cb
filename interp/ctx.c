/* ctx.c — an interpreter context: the loaded BPF program and its maps, the registered
 * processes (their layouts and code-object caches) and the queue of records drained from the
 * ring buffer, waiting for the sampler to take them.
 *
 * The queue is queue.c's; each process's code objects are cached in an open-addressing map,
 * code object address → entry. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "cn_obj.h"
#include "int_internal.h"
#include "python.skel.h"

#define MAPS_MAX       (16u << 20) /* bytes of /proc/PID/maps read */
#define CODES_MAX      65536       /* code objects cached per process */
#define CODE_BYTES_MAX (32u << 20) /* bytes of names and line tables cached per process */
#define BATCH_MAX      256         /* code objects checked by one process_vm_readv */
#define BATCH_SPAN     256         /* bytes read per code object (cn_int__ident_span: ≤ 256) */
#define BATCH_BYTES    (BATCH_MAX * BATCH_SPAN) /* the check's buffer (runs of nearby spans) */

/* The initial pid namespace's inode number, fixed by the kernel (PROC_PID_INIT_INO, not in
 * its uapi headers); every other namespace gets a number allocated below it. */
#define PID_NS_INITIAL_INO 0xEFFFFFFCu

typedef struct code_ent {
    uint64_t code;
    cn_int__code c;
    bool readable;
    uint32_t epoch; /* the epoch it was last checked in */
} code_ent;

typedef struct proc {
    uint32_t pid;
    uint64_t eval_start, eval_end;
    cn_int__layout lay;
    cn_int__types types;
    cn_u64map index; /* code → entry */
    code_ent *ents;
    size_t nents, cap;
    size_t bytes;                            /* held by ents' strings and line tables */
    uint32_t slot;                           /* its slot in "checks", CN_INT_ABI_NONE */
    uint64_t chk_seq;                        /* the last request's seq */
    uint32_t chk_n;                          /* objects in it */
    uint64_t chk_code[CN_INT_ABI_CHECK_MAX]; /* their addresses */
    bool self_pending;   /* arm64: registered before its libc was mapped (thread_self_off) */
    uint64_t self_tried; /* the ktime of the last record that tried to settle it */
    /* cn_int_capture's index of the thread states by thread, made by one walk of the thread
     * lists and used again for the next NATIVE_TTL_NS: an attach reads every waiting thread,
     * and a walk per thread would read the lists once per thread */
    cn_int__ts_id *natives;
    size_t n_natives;
    uint64_t natives_at; /* CLOCK_MONOTONIC of the walk, 0 none */
    uint32_t n_interps;  /* interpreters the walk saw */
    /* 3.8–3.10 (no native_thread_id): offsetof(struct pthread, tid) in the process's glibc,
     * where a state's thread_id (pthread_self()) leads to its thread's tid; 0 not known yet
     * (no libc mapped: asked again after SELF_RETRY_NS), pd_tid_none when its libc does not
     * say (musl, a glibc without libthread_db's descriptors) */
    uint32_t pd_tid;
    bool pd_tid_none;
    uint64_t pd_tid_tried;
} proc;

struct cn_int_ctx {
    struct python_bpf *skel;
    struct ring_buffer *rb;
    proc *procs;
    size_t nprocs, procs_cap;
    cn_int__queue queue;
    uint32_t epoch;                  /* cn_int_new_epoch */
    int err;                         /* a queue allocation failure seen in the ring callback */
    uint8_t *batch;                  /* BATCH_BYTES for the epoch's check (malloc'ed once) */
    uint64_t checks_changed;         /* objects the program's checks found changed */
    struct cn_int_abi_check *checks; /* the map "checks", memory-mapped (NULL: not mapped) */
    bool slot_used[CN_INT_ABI_CHECK_SLOTS];
};

#define EPOCH_NONE UINT32_MAX /* a code_ent's epoch: checked again at its next use */

static proc *proc_find(const cn_int_ctx *c, uint32_t pid)
{
    for (size_t i = 0; i < c->nprocs; i++)
        if (c->procs[i].pid == pid)
            return &c->procs[i];
    return NULL;
}

static void proc_clear(proc *p)
{
    free(p->natives);
    for (size_t i = 0; i < p->nents; i++)
        cn_int__code_clear(&p->ents[i].c);
    free(p->ents);
    cn_u64map_clear(&p->index);
    memset(p, 0, sizeof(*p));
}

static size_t checks_bytes(void)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t n = CN_INT_ABI_CHECK_SLOTS * sizeof(struct cn_int_abi_check);
    return (n + page - 1) / page * page;
}

/* The program's answer to a check request (cn_int_new_epoch): the objects it found changed
 * are checked again, and read again, at their next use; the others stay checked. An answer
 * to an older request (the process re-registered meanwhile) only costs such checks. */
static void on_checked(cn_int_ctx *c, const struct cn_int_abi_checked *k)
{
    proc *p = proc_find(c, k->pid);
    if (!p || k->seq != p->chk_seq || k->n != p->chk_n)
        return;
    for (uint32_t i = 0; i < p->chk_n && i < CN_INT_ABI_CHECK_MAX; i++) {
        if (!(k->changed & (1ull << i)))
            continue;
        int32_t j = cn_u64map_get(&p->index, p->chk_code[i]);
        if (j >= 0) {
            p->ents[j].epoch = EPOCH_NONE;
            c->checks_changed++;
        }
    }
}

static void settle_self(cn_int_ctx *c, proc *p, uint64_t ktime);

static int on_record(void *arg, void *data, size_t size)
{
    cn_int_ctx *c = arg;
    if (size == sizeof(struct cn_int_abi_checked)) {
        on_checked(c, data);
        return 0;
    }
    const struct cn_int_abi_record *r = data;
    proc *p = size >= CN_INT_ABI_HEADER_SIZE ? proc_find(c, r->pid) : NULL;
    if (p && p->self_pending)
        settle_self(c, p, r->ktime);
    if (cn_int__queue_push(&c->queue, data, size, p ? &p->lay.names : NULL) == -ENOMEM)
        c->err = -ENOMEM;
    return 0;
}

int cn_int_new(cn_int_ctx **out, cn_err *err)
{
    int ret;
    cn_int_ctx *c = calloc(1, sizeof(*c));
    if (!c)
        return cn_err_set(err, -ENOMEM, "out of memory");
    c->skel = python_bpf__open();
    if (!c->skel) {
        ret = cn_err_set(err, -errno, "python frames: BPF open: %s", strerror(errno));
        goto fail;
    }
    struct stat ns;
    if (stat("/proc/self/ns/pid", &ns) < 0) {
        ret = cn_err_set(err, -errno, "python frames: /proc/self/ns/pid: %s", strerror(errno));
        goto fail;
    }
    c->skel->rodata->pidns_dev = ns.st_dev;
    c->skel->rodata->pidns_ino = ns.st_ino;
    c->skel->rodata->pidns_initial = ns.st_ino == PID_NS_INITIAL_INO;
    ret = python_bpf__load(c->skel);
    if (ret < 0) {
        ret = cn_err_set(err, ret, "python frames: BPF load: %s", strerror(-ret));
        goto fail;
    }
    /* the code-object checks' slots; without them user space reads (epoch_batch) */
    void *m = mmap(NULL, checks_bytes(), PROT_READ | PROT_WRITE, MAP_SHARED,
                   bpf_map__fd(c->skel->maps.checks), 0);
    c->checks = m == MAP_FAILED ? NULL : m;
    c->rb = ring_buffer__new(bpf_map__fd(c->skel->maps.ring), on_record, c, NULL);
    if (!c->rb) {
        ret = cn_err_set(err, -errno, "python frames: ring buffer: %s", strerror(errno));
        goto fail;
    }
    *out = c;
    return 0;
fail:
    cn_int_free(c);
    return ret;
}

cn_int_ctx *cn_int_free(cn_int_ctx *c)
{
    if (!c)
        return NULL;
    if (c->checks)
        munmap(c->checks, checks_bytes());
    ring_buffer__free(c->rb);
    python_bpf__destroy(c->skel);
    for (size_t i = 0; i < c->nprocs; i++)
        proc_clear(&c->procs[i]);
    free(c->procs);
    cn_int__queue_free(&c->queue);
    free(c->batch);
    free(c);
    return NULL;
}

/* PERF_EVENT_IOC_SET_BPF, not libbpf's bpf_program__attach_perf_event: that one also enables
 * the event, and a sampler enables its events together when the session starts (samples
 * taken before cn_int_register have no record: the program returns at once for them). */
int cn_int_attach(cn_int_ctx *c, int perf_fd, cn_err *err)
{
    if (ioctl(perf_fd, PERF_EVENT_IOC_SET_BPF, bpf_program__fd(c->skel->progs.cn_int_sample)) < 0)
        return cn_err_set(err, -errno, "python frames: attach to perf event: %s", strerror(errno));
    return 0;
}

int cn_int_ring_fd(const cn_int_ctx *c)
{
    return ring_buffer__epoll_fd(c->rb);
}

int cn_int_drain(cn_int_ctx *c)
{
    int n = ring_buffer__consume(c->rb);
    if (c->err) {
        int e = c->err;
        c->err = 0;
        return e;
    }
    return n;
}

int cn_int_take(cn_int_ctx *c, uint32_t pid, uint32_t tid, uint64_t time, cn_int_record *out)
{
    if (cn_int__queue_take(&c->queue, pid, tid, time, out))
        return 1;
    cn_int_drain(c);
    return cn_int__queue_take(&c->queue, pid, tid, time, out);
}

size_t cn_int_expire(cn_int_ctx *c, uint64_t time)
{
    return cn_int__queue_expire(&c->queue, time);
}

int cn_int_next(cn_int_ctx *c, cn_int_record *out)
{
    return cn_int__queue_next(&c->queue, out);
}

/* ------------------------------------------------------------------------------------ */

static int vm_read(void *arg, uint64_t addr, void *buf, size_t n)
{
    pid_t pid = (pid_t)(uintptr_t)arg;
    if (n == 0)
        return 0;
    if (!addr || addr + n < addr)
        return -EFAULT;
    struct iovec local = {buf, n}, remote = {(void *)(uintptr_t)addr, n};
    ssize_t got = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (got < 0)
        return -errno;
    return (size_t)got == n ? 0 : -EFAULT;
}

/* One mapping of /proc/PID/maps. */
typedef struct mapping {
    uint64_t start, end, off;
    const char *path; /* into the maps text */
} mapping;

/* The file-backed mappings of a maps text (cut in place), in its order. */
static int parse_maps(char *text, mapping **out, size_t *n)
{
    size_t cap = 0;
    *out = NULL;
    *n = 0;
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        cn_obj_maps_line ml;
        if (cn_obj_maps_parse_line(line, &ml) < 0 || ml.path[0] != '/')
            continue;
        if (CN_RESERVE(*out, cap, *n + 1) < 0)
            return -ENOMEM;
        (*out)[(*n)++] = (mapping){ml.start, ml.end, ml.pgoff, ml.path};
    }
    return 0;
}

static bool python_named(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    return strstr(base, "python") != NULL;
}

/* Whether maps[i] is the first mapping of a file whose name named() accepts (the file's
 * other mappings follow it in the maps' order). */
static bool first_named(const mapping *maps, size_t i, bool (*named)(const char *))
{
    return named(maps[i].path) && !(i > 0 && strcmp(maps[i - 1].path, maps[i].path) == 0);
}

/* The file mapped at m, opened through /proc/PID/map_files (the very file, even if its path
 * now names another); a negative errno. */
static int open_mapped(pid_t pid, const mapping *m)
{
    char mf[96];
    snprintf(mf, sizeof(mf), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, (int)pid, m->start, m->end);
    return cn_obj_open(mf, 0, NULL, NULL);
}

/* The mapped object holding _PyRuntime: its symbols and the bias it is loaded at. */
static int find_runtime(pid_t pid, const mapping *maps, size_t n, cn_int__elfsyms *syms,
                        uint64_t *bias, const char **path, cn_err *err)
{
    for (size_t i = 0; i < n; i++) {
        if (!first_named(maps, i, python_named))
            continue;
        int fd = open_mapped(pid, &maps[i]);
        if (fd < 0)
            continue;
        int r = cn_int__elf_syms(fd, syms);
        close(fd);
        if (r < 0)
            continue;
        for (size_t j = i; j < n && strcmp(maps[j].path, maps[i].path) == 0; j++) {
            if (maps[j].off == syms->load_off) {
                *bias = maps[j].start - syms->load_vaddr;
                *path = maps[i].path;
                return 0;
            }
        }
    }
    return cn_err_set(err, -ENOENT, "not CPython (no mapped python object defines _PyRuntime)");
}

static bool libc_named(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    return strncmp(base, "libc.so.", 8) == 0 || strncmp(base, "libc-", 5) == 0;
}

/* What the process's glibc tells libthread_db (gdb's thread support) about struct pthread,
 * the thread descriptor pthread_self() points at: its size, and where it keeps the thread's
 * kernel tid (0: the libc did not say). Read from the file mapped, not from the process. */
typedef struct libc_pthread {
    uint32_t size, tid_off;
} libc_pthread;

/* 0 and *out; -EAGAIN no libc mapped yet; -ENOENT no mapped libc gives the size. */
static int libc_pthread_of(pid_t pid, const mapping *maps, size_t n, libc_pthread *out)
{
    bool libc = false;
    memset(out, 0, sizeof(*out));
    for (size_t i = 0; i < n; i++) {
        if (!first_named(maps, i, libc_named))
            continue;
        libc = true;
        int fd = open_mapped(pid, &maps[i]);
        if (fd < 0)
            continue;
        uint32_t v = 0, desc[3];
        int r = cn_int__elf_u32(fd, "_thread_db_sizeof_pthread", &v);
        /* glibc's struct pthread: 2368 bytes in Debian 12's x86-64 build, 1856 in its arm64 */
        if (r == 0 && v >= 256 && v <= 65536 && v % 16 == 0) {
            out->size = v;
            if (cn_int__elf_words(fd, "_thread_db_pthread_tid", desc, 3) < 0 ||
                cn_int__pthread_field(desc, 32, v, &out->tid_off) < 0)
                out->tid_off = 0;
        }
        close(fd);
        if (out->size)
            return 0;
    }
    return libc ? -ENOENT : -EAGAIN;
}

/* How far the thread pointer lies past pthread_self(), which CPython stores in
 * PyThreadState.thread_id and the program compares (python.bpf.c, thread_self). x86-64 (TLS
 * variant II): 0, the fs base is the struct pthread. arm64 (variant I): glibc's TCB ends at the
 * thread pointer, struct pthread right below it (THREAD_SELF is tp - sizeof(struct pthread)),
 * and that size changes between glibc builds: the process's libc says it, in the
 * _thread_db_sizeof_pthread object it exports for libthread_db. -EAGAIN: no libc mapped yet. */
static int thread_self_off(pid_t pid, const mapping *maps, size_t n, uint64_t *off, cn_err *err)
{
    *off = 0;
#if defined(__aarch64__)
    libc_pthread lp;
    int r = libc_pthread_of(pid, maps, n, &lp);
    if (r == -EAGAIN)
        return r;
    if (r == 0) {
        *off = lp.size;
        return 0;
    }
    return cn_err_set(
        err, -ENOTSUP,
        "arm64: pthread_self() unknown (no mapped glibc with _thread_db_sizeof_pthread)");
#else
    (void)pid, (void)maps, (void)n, (void)err;
    return 0;
#endif
}

/* A process registered before its libc was mapped (the exec's first mapping: a `run` child)
 * has no self_off yet and the program searches none of its threads; a record of it (at most
 * every SELF_RETRY_NS) reads its mappings again and, libc found, gives the program the offset.
 * A libc without the size (musl, a glibc too old or too new) leaves the process without
 * Python frames. */
#define SELF_RETRY_NS 10000000ull
static void settle_self(cn_int_ctx *c, proc *p, uint64_t ktime)
{
    char path[64], *text = NULL;
    size_t len;
    mapping *maps = NULL;
    size_t nmaps = 0;
    uint64_t off = 0;
    cn_err err = {0};
    if (p->self_tried && ktime - p->self_tried < SELF_RETRY_NS)
        return;
    p->self_tried = ktime;
    snprintf(path, sizeof(path), "/proc/%u/maps", p->pid);
    if (cn_obj_read_file(path, MAPS_MAX, &text, &len) < 0 || parse_maps(text, &maps, &nmaps) < 0)
        goto out;
    int r = thread_self_off((pid_t)p->pid, maps, nmaps, &off, &err);
    if (r == -EAGAIN)
        goto out;
    p->self_pending = false; /* found, or never will be */
    struct cn_int_abi_proc val;
    uint32_t key = p->pid;
    int fd = bpf_map__fd(c->skel->maps.procs);
    if (r == 0 && bpf_map_lookup_elem(fd, &key, &val) == 0) {
        val.self_off = off;
        bpf_map_update_elem(fd, &key, &val, BPF_EXIST);
    }
out:
    free(maps);
    free(text);
}

/* The layout of the interpreter whose _PyRuntime is at runtime. */
static int pick_layout(pid_t pid, const cn_int__elfsyms *syms, const char *path, uint64_t runtime,
                       cn_int__layout *lay, bool *debug, cn_err *err)
{
    int major = 0, minor = 0;
    if (syms->version_hex) {
        major = (syms->version_hex >> 24) & 0xff;
        minor = (syms->version_hex >> 16) & 0xff;
    } else if (cn_int__version_from_name(path, &major, &minor) < 0) {
        return cn_err_set(err, -ENOTSUP, "CPython of unknown version (%s)", path);
    }
    *debug = false;
    uint8_t head[600];
    int r = vm_read((void *)(uintptr_t)pid, runtime, head, sizeof(head));
    if (r < 0)
        return cn_err_set(err, r, "cannot read _PyRuntime: %s", strerror(-r));
    if (major == 3 && minor >= 13) {
        r = cn_int__layout_debug(head, sizeof(head), lay);
        if (r == 0) {
            *debug = true;
            return 0;
        }
        if (r != -ENOENT)
            return cn_err_set(err, -ENOTSUP,
                              "CPython %d.%d: _Py_DebugOffsets not understood "
                              "(a newer layout, or a free-threaded build)",
                              major, minor);
    }
    if (cn_int__layout_for(major, minor, lay) < 0)
        return cn_err_set(err, -ENOTSUP, "CPython %d.%d: no frame layout", major, minor);
    return 0;
}

int cn_int_register(cn_int_ctx *c, pid_t pid, cn_int_proc *info, cn_err *err)
{
    char path[64], *text = NULL;
    size_t len;
    mapping *maps = NULL;
    size_t nmaps = 0;
    cn_int__elfsyms syms;
    uint64_t bias = 0;
    const char *obj = NULL;
    cn_int__layout lay;
    bool debug = false;
    snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
    int ret = cn_obj_read_file(path, MAPS_MAX, &text, &len);
    if (ret < 0) {
        ret = cn_err_set(err, ret == -ENOENT ? -ESRCH : ret, "cannot read %s: %s", path,
                         strerror(-ret));
        goto out;
    }
    ret = parse_maps(text, &maps, &nmaps);
    if (ret < 0) {
        cn_err_set(err, ret, "out of memory");
        goto out;
    }
    ret = find_runtime(pid, maps, nmaps, &syms, &bias, &obj, err);
    if (ret < 0)
        goto out;
    uint64_t runtime = bias + syms.runtime;
    ret = pick_layout(pid, &syms, obj, runtime, &lay, &debug, err);
    if (ret < 0)
        goto out;
    uint64_t self_off = 0;
    ret = thread_self_off(pid, maps, nmaps, &self_off, err);
    bool self_pending = ret == -EAGAIN;
    if (ret < 0 && !self_pending)
        goto out;
    if (self_pending)
        self_off = CN_INT_ABI_SELF_PENDING;
    ret = 0;
    lay.abi.runtime = runtime;
    uint32_t key = (uint32_t)pid;
    proc *p = proc_find(c, (uint32_t)pid);
    uint32_t slot = p ? p->slot : CN_INT_ABI_NONE;
    for (uint32_t i = 0; c->checks && slot == CN_INT_ABI_NONE && i < CN_INT_ABI_CHECK_SLOTS; i++)
        if (!c->slot_used[i])
            slot = i;
    struct cn_int_abi_proc val = {.l = lay.abi, .check_slot = slot, .self_off = self_off};
    if (bpf_map_update_elem(bpf_map__fd(c->skel->maps.procs), &key, &val, BPF_ANY) < 0) {
        ret = cn_err_set(err, -errno, "python frames: BPF map: %s", strerror(errno));
        goto out;
    }
    if (!p) {
        if (CN_RESERVE(c->procs, c->procs_cap, c->nprocs + 1) < 0) {
            bpf_map_delete_elem(bpf_map__fd(c->skel->maps.procs), &key);
            ret = cn_err_set(err, -ENOMEM, "out of memory");
            goto out;
        }
        p = &c->procs[c->nprocs++];
        memset(p, 0, sizeof(*p));
    } else {
        proc_clear(p);
    }
    p->pid = (uint32_t)pid;
    p->lay = lay;
    p->self_pending = self_pending;
    p->self_tried = 0;
    p->slot = slot;
    if (slot != CN_INT_ABI_NONE) {
        c->slot_used[slot] = true;
        p->chk_seq = c->checks[slot].seq; /* its numbering goes on: no answer is taken twice */
    }
    if (syms.eval && syms.eval_size) {
        p->eval_start = bias + syms.eval;
        p->eval_end = p->eval_start + syms.eval_size;
    }
    if (info) {
        memset(info, 0, sizeof(*info));
        info->major = lay.major;
        info->minor = lay.minor;
        info->runtime = runtime;
        info->debug_offsets = debug;
        info->self_off = self_off;
        info->eval_start = p->eval_start;
        info->eval_end = p->eval_end;
        snprintf(info->object, sizeof(info->object), "%s", obj);
    }
out:
    free(maps);
    free(text);
    return ret;
}

/* The tid of thread tid (in our pid namespace) in its own process's namespace: the last
 * field of NSpid, which is what CPython stored as native_thread_id; tid itself when the
 * kernel has no NSpid line. */
static uint32_t own_ns_tid(uint32_t pid, uint32_t tid)
{
    char path[64], *text = NULL;
    size_t len;
    uint32_t ntid = tid;
    snprintf(path, sizeof(path), "/proc/%u/task/%u/status", pid, tid);
    if (cn_obj_read_file(path, 1 << 16, &text, &len) < 0)
        return tid;
    const char *l = strstr(text, "\nNSpid:");
    if (l) {
        l += 7;
        for (char *end; *l && *l != '\n'; l = end) {
            unsigned long v = strtoul(l, &end, 10);
            if (end == l)
                break;
            ntid = (uint32_t)v;
        }
    }
    free(text);
    return ntid;
}

#define NATIVE_TTL_NS 100000000ull /* an index of the thread states is used for 100 ms */

/* Indexes p's thread states by thread (cn_int__index_states). 0 or -ENOMEM. */
static int index_natives(proc *p)
{
    size_t cap = (size_t)CN_INT_ABI_MAX_INTERPS * CN_INT_ABI_MAX_THREADS;
    cn_int__ts_id *v = p->natives ? p->natives : malloc(cap * sizeof(*v));
    if (!v)
        return -ENOMEM;
    p->natives = v;
    p->natives_at = (uint64_t)cn_common_now_ns();
    p->n_natives = cn_int__index_states(&p->lay, p->pd_tid, vm_read, (void *)(uintptr_t)p->pid, v,
                                        cap, &p->n_interps);
    return 0;
}

/* The thread state of thread ntid (0: none): from the index, made again when it is older
 * than NATIVE_TTL_NS or does not know ntid (a thread started since; unless it is less than
 * 1 ms old). -EEXIST: several states name the thread (cn_int__ts_match). */
static int tstate_of_native(proc *p, uint32_t ntid, uint64_t *ts)
{
    uint64_t age = p->natives_at ? (uint64_t)cn_common_now_ns() - p->natives_at : UINT64_MAX;
    *ts = 0;
    /* a miss in an index made this very millisecond is not worth another walk (a process's
     * native threads, which have no state, are asked about one after the other) */
    for (int pass = age < NATIVE_TTL_NS ? 0 : 1; pass < (age < 1000000 ? 1 : 2); pass++) {
        size_t at = 0;
        if (pass == 1 && index_natives(p) < 0)
            return 0;
        int r = cn_int__ts_match(p->natives, p->n_natives, ntid, &at);
        if (r == 1)
            *ts = p->natives[at].tstate;
        if (r != 0)
            return r < 0 ? r : 0;
    }
    return 0;
}

/* 3.8–3.10: settles p->pd_tid from the process's libc (once found, or known absent; while no
 * libc is mapped, at most every SELF_RETRY_NS). Whether it is known. */
static bool settle_pd_tid(proc *p)
{
    char path[64], *text = NULL;
    size_t len;
    mapping *maps = NULL;
    size_t nmaps = 0;
    libc_pthread lp;
    uint64_t now = (uint64_t)cn_common_now_ns();
    if (p->lay.ts_native_id != CN_INT_ABI_NONE || p->pd_tid)
        return true;
    if (p->pd_tid_none || (p->pd_tid_tried && now - p->pd_tid_tried < SELF_RETRY_NS))
        return false;
    p->pd_tid_tried = now;
    snprintf(path, sizeof(path), "/proc/%u/maps", p->pid);
    if (cn_obj_read_file(path, MAPS_MAX, &text, &len) == 0 &&
        parse_maps(text, &maps, &nmaps) == 0) {
        int r = libc_pthread_of((pid_t)p->pid, maps, nmaps, &lp);
        if (r == 0 && lp.tid_off)
            p->pd_tid = lp.tid_off;
        else if (r != -EAGAIN)
            p->pd_tid_none = true;
    }
    free(maps);
    free(text);
    return p->pd_tid != 0;
}

int cn_int_capture(cn_int_ctx *c, uint32_t pid, uint32_t tid, uint64_t time)
{
    proc *p = proc_find(c, pid);
    if (!p)
        return -ENOENT;
    if (!settle_pd_tid(p))
        return p->pd_tid_none ? -ENOTSUP : -EAGAIN;
    uint64_t ts = 0;
    int m = tstate_of_native(p, own_ns_tid(pid, tid), &ts);
    cn_int_frame fr[CN_INT_MAX_FRAMES];
    /* several states of the thread: ambiguous across interpreters (the sampler marks it as
     * it marks the program's); in one, a stale state: no frames */
    int status = m == -EEXIST && p->n_interps > 1 ? CN_INT_AMBIGUOUS : CN_INT_NO_THREAD;
    uint32_t n = 0;
    if (ts)
        n = cn_int__walk(&p->lay.abi, vm_read, (void *)(uintptr_t)pid, ts, fr, CN_INT_MAX_FRAMES,
                         &status);
    struct cn_int_abi_record *r = calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    r->time = r->ktime = time;
    r->pid = pid;
    r->tid = tid;
    r->nframes = (uint16_t)n;
    r->status = (uint8_t)status;
    r->time_src = CN_INT_ABI_T_SAMPLE;
    r->tstate = ts;
    r->rflags = p->n_interps > 1 ? CN_INT_ABI_R_MULTI : 0;
    for (uint32_t i = 0; i < n; i++) {
        r->frames[i].code = fr[i].code;
        r->frames[i].instr = (uint32_t)fr[i].instr; /* raw, as the program writes it */
        r->frames[i].flags = fr[i].entry ? CN_INT_ABI_F_ENTRY : 0;
    }
    int ret = cn_int__queue_push(&c->queue, r, CN_INT_ABI_HEADER_SIZE + n * sizeof(r->frames[0]),
                                 &p->lay.names);
    free(r);
    return ret;
}

void cn_int_unregister(cn_int_ctx *c, pid_t pid)
{
    proc *p = proc_find(c, (uint32_t)pid);
    uint32_t key = (uint32_t)pid;
    bpf_map_delete_elem(bpf_map__fd(c->skel->maps.procs), &key);
    if (!p)
        return;
    if (p->slot != CN_INT_ABI_NONE && c->checks) {
        /* its request, if pending, is not checked in the next process of the slot */
        struct cn_int_abi_check *k = &c->checks[p->slot];
        uint64_t seq = (p->chk_seq | 1) + 1;
        __atomic_store_n(&k->seq, seq - 1, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_RELEASE);
        k->n = 0;
        __atomic_store_n(&k->seq, seq, __ATOMIC_RELEASE);
        c->slot_used[p->slot] = false;
    }
    proc_clear(p);
    *p = c->procs[--c->nprocs];
}

/* Reads the code object into e (cleared first), within the process's byte budget. */
static void code_read(cn_int_ctx *c, proc *p, code_ent *e, uint64_t code)
{
    cn_int__code_clear(&e->c);
    e->code = code;
    e->epoch = c->epoch;
    e->readable = cn_int__read_code(&p->lay.names, vm_read, (void *)(uintptr_t)p->pid, code,
                                    &p->types, &e->c) == 0;
    size_t bytes = e->c.linetable_len + (e->c.name ? strlen(e->c.name) : 0) +
                   (e->c.filename ? strlen(e->c.filename) : 0);
    if (p->bytes + bytes > CODE_BYTES_MAX) {
        /* over budget: the names are kept, lines are not */
        bytes -= e->c.linetable_len;
        free(e->c.linetable);
        e->c.linetable = NULL;
        e->c.linetable_len = 0;
    }
    p->bytes += bytes;
}

/* The cache entry of a code object: found (and, at its first use in this epoch, checked to be
 * the same object still, else read again), or read and added. NULL past the bounds. */
static code_ent *code_of(cn_int_ctx *c, proc *p, uint64_t code)
{
    int32_t i = cn_u64map_get(&p->index, code);
    if (i >= 0) {
        code_ent *e = &p->ents[i];
        if (e->epoch != c->epoch) {
            if (!cn_int__code_same(&p->lay.names, vm_read, (void *)(uintptr_t)p->pid, code,
                                   &p->types, &e->c)) {
                size_t held = e->c.linetable_len + (e->c.name ? strlen(e->c.name) : 0) +
                              (e->c.filename ? strlen(e->c.filename) : 0);
                p->bytes -= held < p->bytes ? held : p->bytes;
                code_read(c, p, e, code);
            }
            e->epoch = c->epoch;
        }
        return e;
    }
    if (p->nents >= CODES_MAX || CN_RESERVE(p->ents, p->cap, p->nents + 1) < 0)
        return NULL;
    code_ent *e = &p->ents[p->nents];
    memset(e, 0, sizeof(*e));
    code_read(c, p, e, code);
    if (cn_u64map_put(&p->index, code, (int32_t)p->nents) < 0) {
        cn_int__code_clear(&e->c);
        return NULL;
    }
    p->nents++;
    return e;
}

/* The epoch's check, for the code objects of p used in epoch prev (those the next samples
 * will most likely meet again): one process_vm_readv of all their spans, merged into runs
 * of nearby objects (cn_int__plan_runs), where a check at each one's first use would be one
 * call each (a call costs ~12 µs on the project's VM, mostly fixed, and ~5 µs more per
 * iovec). Each found the same counts as checked in the new epoch; the others (changed,
 * unread past a fault, over the bounds) are checked at their first use as before
 * (code_of), which reads a changed one again. */
typedef struct batch_item {
    uint64_t addr;
    code_ent *e;
} batch_item;

static int item_cmp(const void *a, const void *b)
{
    uint64_t x = ((const batch_item *)a)->addr, y = ((const batch_item *)b)->addr;
    return x < y ? -1 : x > y;
}

static void epoch_batch(cn_int_ctx *c, proc *p, uint32_t prev)
{
    struct iovec local[BATCH_MAX], remote[BATCH_MAX];
    batch_item it[BATCH_MAX];
    uint64_t addr[BATCH_MAX], run_lo[BATCH_MAX];
    uint32_t run_len[BATCH_MAX], run_of[BATCH_MAX];
    size_t run_buf[BATCH_MAX];
    uint32_t off, len;
    if (!cn_int__ident_span(&p->lay.names, &off, &len) || len > BATCH_SPAN)
        return;
    size_t n = 0;
    for (size_t i = 0; i < p->nents && n < BATCH_MAX; i++) {
        code_ent *e = &p->ents[i];
        if (e->epoch != prev || !e->readable || e->code + off + len < e->code)
            continue;
        it[n++] = (batch_item){e->code + off, e};
    }
    if (n == 0)
        return;
    qsort(it, n, sizeof(*it), item_cmp);
    for (size_t i = 0; i < n; i++)
        addr[i] = it[i].addr;
    size_t nruns = cn_int__plan_runs(addr, n, len, run_lo, run_len, run_of), used = 0, nio = 0;
    for (; nio < nruns && used + run_len[nio] <= BATCH_BYTES; nio++) {
        run_buf[nio] = used;
        local[nio] = (struct iovec){c->batch + used, run_len[nio]};
        remote[nio] = (struct iovec){(void *)(uintptr_t)run_lo[nio], run_len[nio]};
        used += run_len[nio];
    }
    if (nio == 0)
        return;
    ssize_t got = process_vm_readv((pid_t)p->pid, local, nio, remote, nio, 0);
    /* A fault ends the read: the runs before it are whole (a transfer never splits an
     * iovec), in order. */
    size_t whole = 0;
    for (size_t done = 0; got > 0 && whole < nio && done + run_len[whole] <= (size_t)got; whole++)
        done += run_len[whole];
    for (size_t i = 0; i < n; i++) {
        uint32_t r = run_of[i];
        if (r < whole &&
            cn_int__ident_same(&p->lay.names, c->batch + run_buf[r] + (addr[i] - run_lo[r]),
                               &p->types, &it[i].e->c))
            it[i].e->epoch = c->epoch;
    }
}

/* The epoch's check by the program: the code objects of p used in epoch prev (at most
 * CN_INT_ABI_CHECK_MAX), written into the process's slot of the memory-mapped "checks" for
 * its next sample: no system call, where epoch_batch's process_vm_readv of five objects
 * costs ~30 µs on the project's VM (and a bpf() map update ~10 µs). They count as checked in the
 * new epoch from now; the answer (on_checked) takes back those found changed. So a code object
 * replaced at its address is named anew up to two epochs later, where epoch_batch took one. false
 * when nothing was listed (epoch_batch checks them). */
static bool epoch_post(cn_int_ctx *c, proc *p, uint32_t prev)
{
    if (p->slot == CN_INT_ABI_NONE || !c->checks || !p->types.code)
        return false;
    struct cn_int_abi_check *k = &c->checks[p->slot];
    uint32_t off[3];
    if (!cn_int__ident_offsets(&p->lay.names, off))
        return false;
    uint32_t n = 0, idx[CN_INT_ABI_CHECK_MAX];
    for (size_t i = 0; i < p->nents && n < CN_INT_ABI_CHECK_MAX; i++) {
        const code_ent *e = &p->ents[i];
        if (e->epoch == prev && e->readable && e->c.ident[0])
            idx[n++] = (uint32_t)i;
    }
    if (n == 0)
        return false; /* the last request, answered or not, stays as it is */
    /* the sequence lock (python_abi.h): odd while the slot is written */
    uint64_t seq = (p->chk_seq | 1) + 1;
    __atomic_store_n(&k->seq, seq - 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    for (uint32_t i = 0; i < n; i++) {
        const code_ent *e = &p->ents[idx[i]];
        k->addr[i] = e->code;
        k->want[i][0] = p->types.code;
        k->want[i][1] = e->c.ident[0];
        k->want[i][2] = e->c.ident[1];
        p->chk_code[i] = e->code;
    }
    memcpy(k->off, off, sizeof(off));
    k->n = n;
    __atomic_store_n(&k->seq, seq, __ATOMIC_RELEASE);
    p->chk_seq = seq;
    p->chk_n = n;
    for (uint32_t i = 0; i < n; i++)
        p->ents[idx[i]].epoch = c->epoch;
    return true;
}

void cn_int_new_epoch(cn_int_ctx *c)
{
    /* the answers to the last requests first (a new request makes them stale) */
    cn_int_drain(c);
    uint32_t prev = c->epoch++;
    if (c->epoch == EPOCH_NONE)
        c->epoch = 0;
    for (size_t i = 0; i < c->nprocs; i++)
        epoch_post(c, &c->procs[i], prev);
    /* what the program was not asked (more than it takes, a failed update): one read */
    if (!c->batch)
        c->batch = malloc(BATCH_BYTES);
    if (!c->batch)
        return; /* every object is checked at its first use instead */
    for (size_t i = 0; i < c->nprocs; i++)
        epoch_batch(c, &c->procs[i], prev);
}

int cn_int_func_of(cn_int_ctx *c, uint32_t pid, uint64_t code, cn_int_func *out)
{
    proc *p = proc_find(c, pid);
    if (!p)
        return -ENOENT;
    code_ent *e = code_of(c, p, code);
    out->readable = e && e->readable && e->c.name;
    out->name = out->readable ? e->c.name : CN_INT_UNREADABLE;
    out->filename = e && e->c.filename ? e->c.filename : "";
    out->first_line = e ? e->c.first_line : 0;
    return 0;
}

uint64_t cn_int_changes(const cn_int_ctx *c)
{
    return c->checks_changed;
}

int cn_int_line(cn_int_ctx *c, uint32_t pid, uint64_t code, int32_t instr)
{
    proc *p = proc_find(c, pid);
    if (!p)
        return 0;
    code_ent *e = code_of(c, p, code);
    if (!e || !e->readable)
        return 0;
    return cn_int__line(p->lay.names.line_format, e->c.linetable, e->c.linetable_len,
                        e->c.first_line, instr);
}

bool cn_int_is_eval(const cn_int_ctx *c, uint32_t pid, uint64_t pc)
{
    const proc *p = proc_find(c, pid);
    return p && pc >= p->eval_start && pc < p->eval_end;
}

int cn_int_stats_get(const cn_int_ctx *c, cn_int_stats *out)
{
    int ncpu = libbpf_num_possible_cpus();
    if (ncpu <= 0)
        return ncpu < 0 ? ncpu : -EINVAL;
    uint64_t *vals = calloc((size_t)ncpu, sizeof(*vals));
    uint64_t sum[CN_INT_ABI_S_NSTATS] = {0};
    if (!vals)
        return -ENOMEM;
    for (uint32_t k = 0; k < CN_INT_ABI_S_NSTATS; k++) {
        if (bpf_map_lookup_elem(bpf_map__fd(c->skel->maps.stats), &k, vals) < 0)
            continue;
        for (int i = 0; i < ncpu; i++)
            sum[k] += vals[i];
    }
    free(vals);
    *out = (cn_int_stats){.runs = sum[CN_INT_ABI_S_RUNS],
                          .records = sum[CN_INT_ABI_S_RECORDS],
                          .ring_full = sum[CN_INT_ABI_S_RING_FULL],
                          .cache_hits = sum[CN_INT_ABI_S_CACHE_HIT],
                          .walks = sum[CN_INT_ABI_S_WALKS],
                          .other = sum[CN_INT_ABI_S_OTHER],
                          .no_thread = sum[CN_INT_ABI_S_NEG_HIT],
                          .checks = sum[CN_INT_ABI_S_CHECKS],
                          .stale = sum[CN_INT_ABI_S_STALE],
                          .checks_changed = c->checks_changed};
    return 0;
}

uint32_t cn_int_prog_id(const cn_int_ctx *c)
{
    struct bpf_prog_info info;
    uint32_t len = sizeof(info);
    memset(&info, 0, sizeof(info));
    if (bpf_obj_get_info_by_fd(bpf_program__fd(c->skel->progs.cn_int_sample), &info, &len) < 0)
        return 0;
    return info.id;
}
