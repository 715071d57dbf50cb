/* procs.c — what the sampler knows about the tasks it watches: threads (tid sets),
 * processes and their address spaces, the objects mapped into them (with their identity),
 * the vDSO, and the kernel's modules.
 *
 * Data structures. A tid set is open addressing over int32 slots (0 empty, -1 tombstone),
 * a power-of-two capacity kept at most half used; the session has three (attached, named,
 * live). Processes hang off a fixed table of hash chains keyed by pid; each holds its
 * address space (maps.c: a sorted array of exec mappings). Objects are interned by key
 * ("maj:min:ino:path" for a file, the name for a special object) in a second table of
 * chains, and listed in an array indexed by their dense id. An object's identity is its
 * build-id, else "dev:inode:mtime"; its path is one the symbolizer can open now (the file,
 * else through /proc/PID/root, else /proc/PID/map_files for a deleted file). Kernel modules
 * are a flat array of address ranges read once from /proc/modules, searched linearly (only
 * kernel frames look there). */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <xxhash.h>

#include "smp_internal.h"

#define MAX_MODULES 4096

typedef struct cn_smp__module {
    uint64_t start, end;
} module_range;

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

bool cn_smp__tidset_has(const cn_smp__tidset *t, int32_t tid)
{
    assert((t->cap & (t->cap - 1)) == 0 && t->used * 2 <= t->cap && t->live <= t->used);
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

static int tidset_grow(cn_smp__tidset *t)
{
    cn_smp__tidset n = {calloc(t->cap ? t->cap * 2 : 64, sizeof(int32_t)), t->cap ? t->cap * 2 : 64,
                        0, 0};
    if (!n.slots)
        return -ENOMEM;
    for (size_t i = 0; i < t->cap; i++)
        if (t->slots[i] > 0)
            cn_smp__tidset_add(&n, t->slots[i]);
    free(t->slots);
    *t = n;
    return 0;
}

/* Returns 1 when added, 0 when present, -ENOMEM. */
int cn_smp__tidset_add(cn_smp__tidset *t, int32_t tid)
{
    if (tid <= 0 || cn_smp__tidset_has(t, tid))
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
    assert(t->used * 2 <= t->cap && t->live <= t->used);
    return 1;
}

bool cn_smp__tidset_del(cn_smp__tidset *t, int32_t tid)
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

static uint64_t key_hash(const char *key)
{
    return XXH3_64bits(key, strlen(key));
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
    cn_smp__obj_release(o);
    if (o->pub.file_key != o->pub.identity)
        free((char *)o->pub.file_key);
    free((char *)o->pub.identity);
    free((char *)o->pub.name);
    free((char *)o->pub.path);
    free((char *)o->pub.mapped_path);
    free((char *)o->pub.build_id);
    free(o->key);
    free(o->open_path);
    free(o);
}

/* Registers a new object (the session owns it) and announces it. */
static int obj_add(cn_smp_session *s, cn_smp__obj *o)
{
    if (!o->pub.file_key)
        o->pub.file_key = o->pub.identity; /* no file: nothing more to tell apart */
    o->cache = s->cache;
    if (CN_RESERVE(s->objs, s->capobjs, s->nobjs + 1) < 0 ||
        CN_RESERVE(s->obj_next, s->cap_obj_next, s->nobjs + 1) < 0 || s->nobjs >= INT32_MAX)
        return -ENOMEM;
    uint64_t h = key_hash(o->key);
    int32_t id = (int32_t)s->nobjs, first = cn_u64map_get(&s->objmap, h);
    if (first >= 0) { /* another key of this hash: chained after the first */
        s->obj_next[id] = s->obj_next[first];
        s->obj_next[first] = id;
    } else if (cn_u64map_put(&s->objmap, h, id) < 0) {
        return -ENOMEM;
    } else {
        s->obj_next[id] = -1;
    }
    o->pub.id = (uint32_t)s->nobjs;
    s->objs[s->nobjs++] = o;
    assert(s->objs[o->pub.id] == o); /* ids are dense: the index into objs */
    if (s->cb.object)
        s->cb.object(s->arg, &o->pub);
    return 0;
}

static cn_smp__obj *obj_lookup(cn_smp_session *s, const char *key)
{
    for (int32_t i = cn_u64map_get(&s->objmap, key_hash(key)); i >= 0; i = s->obj_next[i])
        if (strcmp(s->objs[i]->key, key) == 0)
            return s->objs[i];
    return NULL;
}

/* A special object (kernel, anon, vdso ...) by key, created on first use. */
cn_smp__obj *cn_smp__obj_special(cn_smp_session *s, const char *key, const char *name,
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
    o->elf_failed = true; /* no file: nothing to unwind with, but the vDSO's image */
    if (!o->key || !o->pub.identity || !o->pub.name || obj_add(s, o) < 0) {
        obj_free(o);
        return NULL;
    }
    return o;
}

/* A Python source file's object (python.c): key and identity "[py]" + the file's name,
 * as the interpreter reports it (co_filename); no file is read for it. */
cn_smp__obj *cn_smp__obj_python(cn_smp_session *s, const char *path)
{
    char *key = malloc(strlen(path) + 5);
    if (!key)
        return NULL;
    strcpy(key, "[py]");
    strcat(key, path);
    cn_smp__obj *o = obj_lookup(s, key);
    if (o) {
        free(key);
        return o;
    }
    o = calloc(1, sizeof(*o));
    if (!o) {
        free(key);
        return NULL;
    }
    o->key = key;
    o->pub.identity = strdup(key);
    o->pub.name = strdup(path[0] ? base_name(path) : "[python]");
    o->pub.path = path[0] ? strdup(path) : NULL;
    o->pub.kind = CN_SMP_OBJ_PYTHON;
    o->elf_failed = true; /* nothing to unwind with */
    if (!o->pub.identity || !o->pub.name || (path[0] && !o->pub.path) || obj_add(s, o) < 0) {
        obj_free(o);
        return NULL;
    }
    return o;
}

/* Opens the file of a mapping of process pid (path, device maj:min, inode ino) the way
 * everything after us will read it (cn_obj_open: no symlink, no FIFO or device, nothing
 * on FUSE, the inode checked on the fd that is read): the path itself, else the same path
 * inside the process's root, else the mapping through /proc/PID/map_files (a deleted or
 * replaced file). The device is checked too except through map_files, which is the mapped
 * file itself and whose device may be reported differently (overlayfs): an inode number
 * alone names a file on *some* device, and another mount at the same path can have a
 * file with that number. Returns an fd and the path opened (buf) and its identity, or
 * negative errno. */
static int open_mapped(cn_obj_mounts *m, pid_t pid, const char *path, uint32_t maj, uint32_t min,
                       uint64_t ino, bool deleted, uint64_t start, uint64_t end, char *buf,
                       size_t size, cn_obj_ident *got)
{
    const cn_obj_ident want = {.dev = (uint64_t)makedev(maj, min), .ino = ino};
    const unsigned exact = CN_OBJ_MATCH_INO | CN_OBJ_MATCH_DEV;
    int fd = -ENOENT;
    if (!deleted) {
        snprintf(buf, size, "%s", path);
        fd = cn_obj_open_in(m, buf, exact, &want, got);
    }
    if (fd < 0 && !deleted && pid > 0) {
        snprintf(buf, size, "/proc/%d/root%s", (int)pid, path);
        fd = cn_obj_open_in(m, buf, exact, &want, got);
    }
    if (fd < 0 && pid > 0) {
        snprintf(buf, size, "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, (int)pid, start, end);
        fd = cn_obj_open_in(m, buf, CN_OBJ_MATCH_INO, &want, got);
    }
    return fd;
}

/* An object no live address space mapped any more (its tables released, cache.c) is
 * mapped again by process pid: its tables from the cache, else read again from the file
 * as pid maps it, which must still be the file first checked (o->pub.file). A failure
 * leaves the object without tables (its frames end "no CFI"), as for any unreadable file. */
static void obj_rehold(cn_smp__obj *o, pid_t pid, const char *path, bool deleted, uint64_t start,
                       uint64_t end)
{
    char buf[4200];
    cn_obj_ident got;
    if (o->elf || o->nmapped > 0 || o->pub.kind != CN_SMP_OBJ_USER || !o->pub.file.ino ||
        cn_smp__elf_from_cache(o))
        return;
    o->elf_failed = false;
    int fd = open_mapped(cn_smp__cache_mounts(o->cache), pid, path, o->maj, o->min, o->ino, deleted,
                         start, end, buf, sizeof(buf), &got);
    if (fd < 0 || got.size != o->pub.file.size || got.mtime_ns != o->pub.file.mtime_ns ||
        cn_smp__elf_load_fd(o, fd) < 0)
        o->elf_failed = true;
    if (fd >= 0)
        close(fd);
}

/* The object for a file mapping of process pid, created on first use. Its file is opened
 * and read once, here; its identity (o->pub.file) is what the symbolizer will insist on. */
static cn_smp__obj *obj_file(cn_smp_session *s, pid_t pid, const char *path, uint32_t maj,
                             uint32_t min, uint64_t ino, bool deleted, uint64_t start, uint64_t end)
{
    char key[4200], buf[4200];
    snprintf(key, sizeof(key), "%x:%x:%" PRIu64 ":%s", maj, min, ino, path);
    cn_smp__obj *o = obj_lookup(s, key);
    if (o) {
        obj_rehold(o, pid, path, deleted, start, end);
        return o;
    }
    o = calloc(1, sizeof(*o));
    if (!o)
        return NULL;
    o->maj = maj;
    o->min = min;
    o->ino = ino;
    o->pub.kind = CN_SMP_OBJ_USER;
    cn_obj_ident id = {0};
    bool live = s->cfg.target != CN_SMP_TARGET_NONE || s->replay;
    int fd = live ? open_mapped(cn_smp__cache_mounts(s->cache), pid, path, maj, min, ino, deleted,
                                start, end, buf, sizeof(buf), &id)
                  : -ENOENT;
    o->key = strdup(key);
    o->pub.name = strdup(base_name(path));
    o->pub.path = fd >= 0 ? strdup(buf) : NULL;
    o->pub.mapped_path = strdup(path);
    o->open_path = fd >= 0 ? strdup(buf) : NULL;
    if (fd >= 0)
        o->pub.file = id;
    if (!o->key || !o->pub.name || !o->pub.mapped_path ||
        (fd >= 0 && (!o->pub.path || !o->open_path)))
        goto fail;
    char bid[129];
    uint8_t raw[64];
    size_t n;
    long long mtime = (long long)(id.mtime_ns / 1000000000);
    o->cache = s->cache;
    if (fd >= 0 && cn_smp__elf_load_fd(o, fd) == 0 &&
        (n = cn_obj_elf_build_id(o->elf->data, o->elf->size, raw, sizeof(raw))) > 0) {
        cn_obj_hex(raw, n, bid);
        o->pub.build_id = strdup(bid);
        o->pub.identity = strdup(bid);
    } else {
        snprintf(buf, sizeof(buf), "%x:%x:%" PRIu64 ":%lld", maj, min, ino, mtime);
        o->pub.identity = strdup(buf);
    }
    if (!o->pub.identity)
        goto fail;
    snprintf(buf, sizeof(buf), "%s@%x:%x:%" PRIu64 ":%lld:%lld", o->pub.identity, maj, min, ino,
             (long long)id.size, mtime);
    if (!(o->pub.file_key = strdup(buf)) || obj_add(s, o) < 0)
        goto fail;
    if (fd >= 0)
        close(fd);
    return o;
fail:
    if (fd >= 0)
        close(fd);
    obj_free(o);
    return NULL;
}

/* ---------------------------------------------------------------------------------------
 * The SYSTEM target's snapshot of the address spaces at its start
 */

typedef struct cn_smp__snap {
    pid_t pid;
    char *maps; /* its exec lines of /proc/PID/maps; NULL once used or obsolete */
} snap_entry;

static cn_smp__proc *proc_get(cn_smp_session *s, pid_t pid, bool create);

static int snap_cmp(const void *a, const void *b)
{
    pid_t x = ((const snap_entry *)a)->pid, y = ((const snap_entry *)b)->pid;
    return (x > y) - (x < y);
}

/* The snapshot of pid's mappings, taken out of the table (the caller frees it), or NULL. */
static char *snap_take(cn_smp_session *s, pid_t pid)
{
    snap_entry key = {pid, NULL};
    snap_entry *e = s->nsnap ? bsearch(&key, s->snap, s->nsnap, sizeof(key), snap_cmp) : NULL;
    char *maps = e ? e->maps : NULL;
    if (e)
        e->maps = NULL;
    return maps;
}

/* The exec lines of /proc/PID/maps as one string, or NULL. */
static char *read_exec_maps(const char *pid)
{
    char path[sizeof("/proc//maps") + 256], line[4400], copy[4400]; /* pid: a d_name */
    snprintf(path, sizeof(path), "/proc/%s/maps", pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return NULL;
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    while (out && fgets(line, sizeof(line), f)) {
        cn_obj_maps_line m;
        memcpy(copy, line, strlen(line) + 1); /* parsing cuts the line up */
        if (cn_obj_maps_parse_line(copy, &m) == 0 && m.exec)
            fputs(line, out);
    }
    fclose(f);
    if (!out || fclose(out) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

/* A cgroup session's cgroup as /proc/PID/cgroup names it (the directory below the v2
 * mount) into rel, or false when it is not under that mount (every process is then kept). */
static bool cgroup_rel(const cn_smp_session *s, char *rel, size_t size)
{
    char root[1024];
    size_t n;
    if (!s->cfg.cgroup || cn_cgroup_v2_root(root, sizeof(root)) < 0)
        return false;
    n = strlen(root);
    if (strncmp(s->cfg.cgroup, root, n) || (s->cfg.cgroup[n] && s->cfg.cgroup[n] != '/') ||
        strlen(s->cfg.cgroup + n) >= size)
        return false;
    snprintf(rel, size, "%s", s->cfg.cgroup + n);
    return true;
}

/* Whether pid is in the cgroup rel ("" the root) or below it. */
static bool in_cgroup(pid_t pid, const char *rel)
{
    char path[CN_CGROUP_PATH_MAX];
    size_t n = strlen(rel);
    return cn_cgroup_read((int)pid, path, sizeof(path)) == 0 && !strncmp(path, rel, n) &&
           (path[n] == '\0' || path[n] == '/');
}

void cn_smp__procs_snapshot(cn_smp_session *s)
{
    DIR *d = opendir("/proc");
    if (!d)
        return;
    /* A cgroup session reads the maps of its cgroup's processes only (a /proc/PID/cgroup
     * read costs a fraction of a maps read); one that joins later is read at its first
     * sample, as in any system session. */
    char rel[CN_CGROUP_PATH_MAX];
    bool only = cgroup_rel(s, rel, sizeof(rel)) && rel[0];
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        pid_t pid = atoi(e->d_name);
        if (pid <= 0 || (only && !in_cgroup(pid, rel)) ||
            CN_RESERVE(s->snap, s->capsnap, s->nsnap + 1) < 0)
            continue;
        char *maps = read_exec_maps(e->d_name);
        if (maps)
            s->snap[s->nsnap++] = (snap_entry){pid, maps};
    }
    closedir(d);
    if (s->nsnap)
        qsort(s->snap, s->nsnap, sizeof(*s->snap), snap_cmp);
    /* CPython processes running already: their samples joined from now on. After the whole
     * snapshot, which registering (ELF symbols read per process) would otherwise stretch. */
    for (size_t i = 0; s->py && i < s->nsnap; i++)
        if (strstr(s->snap[i].maps, "python3"))
            cn_smp__py_scan_text(s, proc_get(s, s->snap[i].pid, true), s->snap[i].maps);
}

/* ---------------------------------------------------------------------------------------
 * Processes and address spaces
 */

static cn_smp__proc *proc_get(cn_smp_session *s, pid_t pid, bool create)
{
    size_t b = hash32((uint32_t)pid) % CN_SMP__PROC_BUCKETS;
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

void cn_smp__proc_drop(cn_smp_session *s, pid_t pid)
{
    free(snap_take(s, pid)); /* a pid seen exiting: its snapshot is of another process now */
    cn_smp__proc **pp = &s->procs[hash32((uint32_t)pid) % CN_SMP__PROC_BUCKETS];
    for (; *pp; pp = &(*pp)->next) {
        if ((*pp)->pid == pid) {
            cn_smp__proc *p = *pp;
            *pp = p->next;
            cn_smp__py_forget(s, p);
            cn_smp__proc_clear(p);
            free(p->cgroup);
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
        cn_obj_maps_line ml;
        if (cn_obj_maps_parse_line(line, &ml) == 0 && ml.start == addr &&
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
        o = cn_smp__obj_special(s, path, path, CN_SMP_OBJ_USER, 0);
        if (o)
            load_vdso(s, o);
    } else if (strcmp(path, "[vsyscall]") == 0) {
        o = cn_smp__obj_special(s, path, path, CN_SMP_OBJ_USER, 0);
    } else {
        snprintf(key, sizeof(key), "[jit:%d]", (int)p->pid);
        o = cn_smp__obj_special(s, key, "[jit]", CN_SMP_OBJ_JIT, p->pid);
    }
    if (!o)
        return -ENOMEM;
    return cn_smp__proc_map(p, start, end, pgoff, o);
}

/* Reads p's exec mappings into p: from the session's snapshot when it has one (SYSTEM:
 * cn_smp__procs_snapshot), else from /proc/PID/maps now. */
static int proc_load_maps(cn_smp_session *s, cn_smp__proc *p)
{
    char path[64], line[4400];
    p->maps_loaded = true;
    if (s->cfg.target == CN_SMP_TARGET_NONE)
        return 0;
    char *snap = snap_take(s, p->pid);
    snprintf(path, sizeof(path), "/proc/%d/maps", (int)p->pid);
    FILE *f = !snap ? fopen(path, "re") : snap[0] ? fmemopen(snap, strlen(snap), "r") : NULL;
    if (!f) {
        int err = snap && !snap[0] ? 0 : -errno; /* an empty snapshot: no exec mappings */
        free(snap);
        return err;
    }
    int ret = 0;
    while (fgets(line, sizeof(line), f)) {
        cn_obj_maps_line m;
        if (cn_obj_maps_parse_line(line, &m) < 0 || !m.exec)
            continue;
        ret =
            proc_add_mapping(s, p, m.start, m.end, m.pgoff, m.path, m.maj, m.min, m.ino, m.deleted);
        if (ret < 0)
            break;
    }
    fclose(f);
    free(snap);
    return ret;
}

#define CGROUP_REREAD_NS 10000000000ull

static void emit_cgroup(cn_smp_session *s, const cn_smp__proc *p, uint64_t time)
{
    if (!s->cb.task || !p->cgroup)
        return;
    cn_smp_task_event ev = {.kind = CN_SMP_TASK_CGROUP,
                            .pid = p->pid,
                            .tid = p->pid,
                            .time_ns = time,
                            .cgroup = p->cgroup};
    s->cb.task(s->arg, &ev);
}

/* p's cgroup is path from now: reported when it changed. */
static void set_cgroup(cn_smp_session *s, cn_smp__proc *p, const char *path, uint64_t time)
{
    if (p->cgroup && !strcmp(p->cgroup, path))
        return;
    char *copy = strdup(path);
    if (!copy)
        return;
    free(p->cgroup);
    p->cgroup = copy;
    emit_cgroup(s, p, time);
}

/* The v2 hierarchy's mount point and a descriptor of it, looked up at first use; false
 * when there is none. */
static bool cgroup_root(cn_smp_session *s)
{
    if (!s->cg_root_done) {
        s->cg_root_done = true;
        s->cg_root_fd = -1;
        if (cn_cgroup_v2_root(s->cg_root, sizeof(s->cg_root)) == 0)
            s->cg_root_fd = open(s->cg_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    }
    return s->cg_root_fd >= 0;
}

/* The path of cgroup id below the v2 hierarchy's mount point (as /proc/PID/cgroup gives
 * it), from the cgroup's directory opened by its file handle: a kernfs handle is the id
 * itself (type FILEID_KERNFS, 8 bytes). Needs CAP_DAC_READ_SEARCH (canopyd has it as
 * root); false without it, or when the cgroup is gone or the id is of another hierarchy. */
static bool cgroup_by_id(cn_smp_session *s, uint64_t id, char *out, size_t size)
{
    enum { FILEID_KERNFS = 0xfe };
    struct {
        struct file_handle fh;
        uint64_t id;
    } h = {.fh = {.handle_bytes = sizeof(uint64_t), .handle_type = FILEID_KERNFS}, .id = id};
    if (!cgroup_root(s))
        return false;
    int fd = open_by_handle_at(s->cg_root_fd, &h.fh, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return false;
    char link[64], full[sizeof(s->cg_root) + CN_CGROUP_PATH_MAX];
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, full, sizeof(full) - 1);
    close(fd);
    size_t root = strlen(s->cg_root);
    if (n <= 0 || (size_t)n < root || memcmp(full, s->cg_root, root) ||
        (full[root] != '/' && (size_t)n > root))
        return false; /* outside the mount (another hierarchy's id), or a link too long */
    full[n] = '\0';
    const char *rel = (size_t)n > root ? full + root : "/";
    if (strlen(rel) >= size)
        return false;
    memcpy(out, rel, strlen(rel) + 1);
    return true;
}

/* The path of cgroup id, from the session's table or else found by cgroup_by_id and
 * added to it (an id found to have none is added as NULL: not asked again), or NULL. */
static const char *cgroup_path_of(cn_smp_session *s, uint64_t id)
{
    int32_t i = cn_u64map_get(&s->cg_ids, id);
    if (i >= 0)
        return s->cg_paths[i];
    if (s->ncg >= CN_SMP__CGROUP_IDS_MAX || CN_RESERVE(s->cg_paths, s->capcg, s->ncg + 1) < 0)
        return NULL;
    char path[CN_CGROUP_PATH_MAX];
    char *copy = cgroup_by_id(s, id, path, sizeof(path)) ? strdup(path) : NULL;
    s->cnt.cgroup_lookups++;
    if (cn_u64map_put(&s->cg_ids, id, (int32_t)s->ncg) < 0) {
        free(copy);
        return NULL;
    }
    s->cg_paths[s->ncg++] = copy;
    return copy;
}

void cn_smp__proc_cgroup(cn_smp_session *s, cn_smp__proc *p, uint64_t time, uint64_t id)
{
    if (!p || s->cfg.target == CN_SMP_TARGET_NONE)
        return;
    if (id) {
        /* The kernel read the task's cgroup with the sample: a process keeps its path
         * until the id changes, and an id's path is looked up once (a build's programs,
         * forked and exec'd in make's cgroup, are never read). */
        if (id == p->cgroup_id)
            return;
        const char *path = cgroup_path_of(s, id);
        if (path) {
            p->cgroup_id = id;
            set_cgroup(s, p, path, time);
            return;
        }
        if (id == p->cgroup_tried && time < p->cgroup_ns + CGROUP_REREAD_NS)
            return; /* no path for the id: read from /proc as without ids */
        p->cgroup_tried = id;
    } else if (p->cgroup_known && time < p->cgroup_ns + CGROUP_REREAD_NS) {
        return;
    }
    p->cgroup_known = true;
    p->cgroup_ns = time;
    char path[CN_CGROUP_PATH_MAX];
    s->cnt.cgroup_reads++;
    if (cn_cgroup_read((int)p->pid, path, sizeof(path)) == 0)
        set_cgroup(s, p, path, time); /* else gone: its inherited one stays */
}

cn_smp__proc *cn_smp__proc_for_sample(cn_smp_session *s, pid_t pid)
{
    cn_smp__proc *p = proc_get(s, pid, true);
    if (p && !p->maps_loaded)
        proc_load_maps(s, p);
    return p;
}

/* ---------------------------------------------------------------------------------------
 * Threads
 */

/* Reports a thread's name from /proc the first time we meet it without a COMM record. */
void cn_smp__ensure_comm(cn_smp_session *s, pid_t pid, pid_t tid, uint64_t time)
{
    if (tid <= 0 || cn_smp__tidset_has(&s->seen, tid))
        return;
    if (cn_smp__tidset_add(&s->seen, tid) > 0)
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
        cn_smp__emit_task(s, CN_SMP_TASK_COMM, pid, tid, 0, 0, time, comm, false);
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
            cn_smp__ensure_comm(s, s->cfg.pid, tid, 0);
    }
    closedir(d);
}

/* ---------------------------------------------------------------------------------------
 * Kernel modules
 */

void cn_smp__load_modules(cn_smp_session *s)
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
        s->module_obj = cn_smp__obj_special(s, "[module]", "[module]", CN_SMP_OBJ_MODULE, 0);
}

static bool is_module_addr(const cn_smp_session *s, uint64_t addr)
{
    for (size_t i = 0; i < s->nmodules; i++)
        if (addr >= s->modules[i].start && addr < s->modules[i].end)
            return true;
    return false;
}

const cn_smp_object *cn_smp__kernel_obj(const cn_smp_session *s, uint64_t addr)
{
    const cn_smp__obj *o = is_module_addr(s, addr) ? s->module_obj : s->kernel_obj;
    return o ? &o->pub : NULL;
}

/* ---------------------------------------------------------------------------------------
 * The session's view of the target
 */

void cn_smp__procs_attach(cn_smp_session *s)
{
    cn_smp__proc *p = proc_get(s, s->cfg.pid, true);
    if (p && !p->maps_loaded)
        proc_load_maps(s, p);
    report_initial_comms(s);
}

void cn_smp__proc_mmap(cn_smp_session *s, const cn_smp__rec *r)
{
    if (!(r->u.mmap.prot & 4 /* PROT_EXEC */) || (int32_t)r->u.mmap.pid <= 0)
        return;
    cn_smp__proc *p = proc_get(s, (pid_t)r->u.mmap.pid, true);
    if (!p)
        return;
    if (!p->maps_loaded && s->cfg.target == CN_SMP_TARGET_SYSTEM)
        proc_load_maps(s, p);
    p->maps_loaded = true;
    proc_add_mapping(s, p, r->u.mmap.addr, r->u.mmap.addr + r->u.mmap.len, r->u.mmap.pgoff,
                     r->u.mmap.filename, r->u.mmap.maj, r->u.mmap.min, r->u.mmap.ino, false);
    cn_smp__py_mapped(s, p, r->u.mmap.filename);
}

void cn_smp__proc_exec(cn_smp_session *s, pid_t pid)
{
    cn_smp__proc *p = proc_get(s, pid, true);
    free(snap_take(s, pid)); /* of the image before the exec */
    if (p) {
        cn_smp__py_forget(s, p); /* a new image: registered again when it maps CPython */
        cn_smp__proc_clear(p);   /* exec: a new address space, MMAP2 records follow */
        p->maps_loaded = true;
        p->cgroup_known = false; /* a container's exec'd entry point may have been moved */
    }
}

/* A system session meets many parents only at their fork (a shell or make that was
 * waiting): the parent's address space is made then (from the snapshot) and the child's
 * copied from it. Left to the child's first sample, the child's would be read from /proc
 * when that sample is handled (records wait in the rings): by then the child has often
 * exec'd or exited, and its samples before the exec would land in no mapping. */
void cn_smp__proc_fork(cn_smp_session *s, pid_t ppid, pid_t pid)
{
    cn_smp__proc *parent = s->cfg.target == CN_SMP_TARGET_SYSTEM ? cn_smp__proc_for_sample(s, ppid)
                                                                 : proc_get(s, ppid, false);
    cn_smp__proc *child = proc_get(s, pid, true);
    free(snap_take(s, pid)); /* a new process: a snapshot under its pid was another's */
    if (child && parent && parent != child) {
        cn_smp__proc_clear(child);
        for (size_t i = 0; i < parent->nmaps; i++)
            cn_smp__proc_map(child, parent->maps[i].start, parent->maps[i].end,
                             parent->maps[i].pgoff, parent->maps[i].obj);
        child->maps_loaded = true;
    }
    if (child && parent && parent != child && parent->cgroup) {
        /* A child starts in its parent's cgroup: labelled even if it ends before its
         * first sample is read (the records wait in the rings, /proc may be gone). */
        char *copy = strdup(parent->cgroup);
        if (copy) {
            free(child->cgroup);
            child->cgroup = copy;
            child->cgroup_known = true;
            child->cgroup_ns = parent->cgroup_ns;
            child->cgroup_id = parent->cgroup_id;
            child->cgroup_tried = parent->cgroup_tried;
            emit_cgroup(s, child, 0);
        }
    }
    cn_smp__py_fork(s, parent, child);
}

void cn_smp__procs_free(cn_smp_session *s)
{
    for (size_t b = 0; b < CN_SMP__PROC_BUCKETS; b++)
        while (s->procs[b]) {
            cn_smp__proc *p = s->procs[b];
            s->procs[b] = p->next;
            cn_smp__proc_clear(p);
            free(p->cgroup);
            free(p);
        }
    cn_u64map_clear(&s->objmap);
    free(s->obj_next);
    for (size_t i = 0; i < s->nobjs; i++)
        obj_free(s->objs[i]);
    for (size_t i = 0; i < s->ncg; i++)
        free(s->cg_paths[i]);
    free(s->cg_paths);
    cn_u64map_clear(&s->cg_ids);
    if (s->cg_root_done && s->cg_root_fd >= 0)
        close(s->cg_root_fd);
    for (size_t i = 0; i < s->nsnap; i++)
        free(s->snap[i].maps);
    free(s->snap);
    free(s->objs);
    free(s->modules);
    free(s->attached.slots);
    free(s->seen.slots);
    free(s->live.slots);
}
