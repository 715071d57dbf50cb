/* cache.c — the object cache shared by every user, and synchronous lookups.
 *
 * Objects are kept in a chained hash table keyed by "kind:identity" and on an LRU list.
 * A handle is a reference to one loaded (immutable) object; objects with no reference are
 * evicted, least recently used first, while the cache holds more than one of its bounds:
 * heap bytes, objects, or bytes of mapped debug files (cn_sym.h). The most recently used
 * object is exempt from the last two: a worker resolving frames of a huge object and of
 * small ones in turn must not reload the huge one for each frame.
 * Loading runs outside the cache mutex, so a slow load never blocks lookups of other
 * objects; if two threads load the same object at once, the first insertion wins.
 * A failed load is cached too (status < 0), so a bad file is not re-read for every frame.
 * JIT perf maps are re-read when the file has grown: the new table replaces the old one
 * in the hash, and the old one is freed when its last handle is released.
 *
 * Loading an ELF object opens and reads a target's files. cn_obj_open refuses what could
 * block (FIFOs, devices, FUSE), but a file system can still stall a read (a dead NFS
 * server, a FUSE mount the mount tables do not show): each ELF load therefore runs in a
 * thread of its own, and a lookup waits for it at most cfg.load_wait_ms. A load that
 * outlasts the wait leaves a placeholder (status -ETIMEDOUT) in the hash, answered at once
 * to every lookup until the load lands and replaces it, so one stalled object costs the
 * symbolizer one wait, never a thread, and never delays other objects again. At most
 * MAX_STALLED placeholders exist; beyond that a load is refused (-EBUSY, not cached). The
 * thread of a load that never returns is left alone (it owns copies of all it uses).
 * Loader threads are joinable: the cache joins those that have finished, when it starts
 * another and when it is freed, and detaches only the ones still running then. A finished
 * load's thread still runs its thread-local destructors (libcurl's TLS library keeps state
 * per thread) after it has handed its result over; had it been detached, a process that
 * exits right after its lookup could end before them (LeakSanitizer then reports that
 * state as leaked, one run in about seventy under load). */
#include "sym_internal.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NBUCKETS 1024

#define DEFAULT_MAX_MEMORY    ((size_t)256 << 20)
#define DEFAULT_MAX_OBJECTS   1024
#define DEFAULT_MAX_MAPPED    ((size_t)512 << 20)
#define DEFAULT_LOAD_WAIT_MS  3000
#define DEFAULT_RELOAD_CREDIT 1000
#define MAX_STALLED           8 /* loads outlasting their wait at once (threads left running) */

struct cn_sym_handle {
    cn_sym__obj o;
    int detached; /* replaced in the hash; freed on last put */
};

typedef struct cn_sym__loader cn_sym__loader;

struct cn_sym_cache {
    pthread_mutex_t lock;
    cn_sym_config cfg;
    char *debug_dirs;
    cn_sym__obj *buckets[NBUCKETS];
    cn_sym__obj lru; /* sentinel: lru.lru_next is the most recent */
    cn_sym_stats stats;
    size_t stalled;          /* placeholders of loads that outlasted their wait, in the hash */
    cn_sym__loader *loaders; /* threads not yet joined (see the top of this file) */
    size_t n_loaders, cap_loaders;
};

/* One ELF load in its own thread (see the top of this file). Shared by the loader thread
 * and whoever waits for it (a lookup, then a placeholder): freed by the last of the two.
 * It owns copies of everything the load reads, so the cache may go away meanwhile. */
typedef struct cn_sym__load {
    pthread_mutex_t lock;
    pthread_cond_t done_cv; /* CLOCK_MONOTONIC */
    int refs;
    bool done;
    cn_sym_object obj;
    char *path, *identity, *debug_dirs;
    cn_sym_config cfg;
    cn_sym__obj *result; /* when done: the loaded object (or NULL on ENOMEM), until taken */
} cn_sym__load;

/* A loader thread the cache has yet to join, with a reference to its load (to tell a
 * finished thread, joined at once, from a stalled one, detached). */
struct cn_sym__loader {
    pthread_t thread;
    cn_sym__load *job;
};

void cn_sym_config_init(cn_sym_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->max_memory = DEFAULT_MAX_MEMORY;
    cfg->max_objects = DEFAULT_MAX_OBJECTS;
    cfg->max_mapped = DEFAULT_MAX_MAPPED;
    cfg->lines = true;
    cfg->debuginfod = true;
    cfg->debug_dirs = NULL;
    cfg->reload_credit = DEFAULT_RELOAD_CREDIT;
}

cn_sym_cache *cn_sym_cache_new(const cn_sym_config *cfg)
{
    cn_sym_cache *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    if (cfg)
        c->cfg = *cfg;
    else
        cn_sym_config_init(&c->cfg);
    if (c->cfg.max_memory == 0)
        c->cfg.max_memory = DEFAULT_MAX_MEMORY;
    if (c->cfg.max_objects == 0)
        c->cfg.max_objects = DEFAULT_MAX_OBJECTS;
    if (c->cfg.max_mapped == 0)
        c->cfg.max_mapped = DEFAULT_MAX_MAPPED;
    if (c->cfg.load_wait_ms == 0)
        c->cfg.load_wait_ms = DEFAULT_LOAD_WAIT_MS;
    if (c->cfg.debug_dirs) {
        c->debug_dirs = strdup(c->cfg.debug_dirs);
        if (!c->debug_dirs) {
            free(c);
            return NULL;
        }
    }
    c->cfg.debug_dirs = c->debug_dirs;
    c->cfg.mounts = c->cfg.mounts ? cn_obj_mounts_ref(c->cfg.mounts) : cn_obj_mounts_new();
    if (!c->cfg.mounts) {
        free(c->debug_dirs);
        free(c);
        return NULL;
    }
    pthread_mutex_init(&c->lock, NULL);
    c->lru.lru_next = c->lru.lru_prev = &c->lru;
    return c;
}

static void load_put(cn_sym__load *j);
static bool load_take_ready(cn_sym__load *j);

static void obj_free(cn_sym__obj *o)
{
    if (!o)
        return;
    if (o->job)
        load_put(o->job);
    cn_sym__obj_clear(o);
    pthread_mutex_destroy(&o->dw_lock);
    free(o->key);
    free(o);
}

static void loaders_release(cn_sym_cache *c);

cn_sym_cache *cn_sym_cache_free(cn_sym_cache *c)
{
    if (!c)
        return NULL;
    loaders_release(c);
    for (cn_sym__obj *o = c->lru.lru_next, *next; o != &c->lru; o = next) {
        next = o->lru_next;
        obj_free(o);
    }
    pthread_mutex_destroy(&c->lock);
    cn_obj_mounts_unref(c->cfg.mounts);
    free(c->debug_dirs);
    free(c);
    return NULL;
}

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    while (*s)
        h = (h ^ (unsigned char)*s++) * 1099511628211ull;
    return h;
}

/* The cache's key of obj's object into buf (snprintf's contract: the length it needs). */
static int key_format(const cn_sym_object *obj, char *buf, size_t size)
{
    switch (obj->kind) {
    case CN_SYM_USER:
        return snprintf(buf, size, "u:%s", obj->identity ? obj->identity : obj->path);
    case CN_SYM_KERNEL:
        return snprintf(buf, size, "k:%s",
                        obj->identity ? obj->identity
                        : obj->path   ? obj->path
                                      : "[kernel]");
    case CN_SYM_JIT:
        if (obj->identity)
            return snprintf(buf, size, "j:%s", obj->identity);
        return snprintf(buf, size, "j:jit:%d:%s:%lld", (int)obj->pid, obj->path ? obj->path : "",
                        obj->has_owner ? (long long)obj->owner_uid : -1LL);
    case CN_SYM_VDSO:
        return snprintf(buf, size, "v:[vdso]");
    }
    return -1;
}

static char *make_key(const cn_sym_object *obj)
{
    int n = key_format(obj, NULL, 0);
    char *key = n < 0 ? NULL : malloc((size_t)n + 1);
    if (key)
        key_format(obj, key, (size_t)n + 1);
    return key;
}

uint64_t cn_sym__object_hash(const cn_sym_object *obj)
{
    char buf[512];
    int n = key_format(obj, buf, sizeof(buf));
    if (n >= 0 && (size_t)n < sizeof(buf))
        return hash_str(buf);
    char *key = make_key(obj); /* a long path: rare */
    uint64_t h = key ? hash_str(key) : 0;
    free(key);
    return h;
}

static void lru_unlink(cn_sym__obj *o)
{
    o->lru_prev->lru_next = o->lru_next;
    o->lru_next->lru_prev = o->lru_prev;
    o->lru_next = o->lru_prev = NULL;
}

static void lru_push_front(cn_sym_cache *c, cn_sym__obj *o)
{
    assert(!o->lru_next && !o->lru_prev); /* on the list at most once */
    o->lru_next = c->lru.lru_next;
    o->lru_prev = &c->lru;
    c->lru.lru_next->lru_prev = o;
    c->lru.lru_next = o;
}

static void hash_unlink(cn_sym_cache *c, cn_sym__obj *o)
{
    cn_sym__obj **pp = &c->buckets[o->hash % NBUCKETS];
    while (*pp && *pp != o)
        pp = &(*pp)->hnext;
    if (*pp)
        *pp = o->hnext;
    o->hnext = NULL;
}

/* Whether the cache is over a bound that object o, when evicted, would help with: the
 * heap bound always, the count and mapped bounds unless o is the most recently used. */
static bool over_bound(const cn_sym_cache *c, const cn_sym__obj *o)
{
    if (c->stats.memory > c->cfg.max_memory)
        return true;
    if (o == c->lru.lru_next)
        return false;
    return c->stats.objects > c->cfg.max_objects ||
           (o->mapped > 0 && c->stats.mapped > c->cfg.max_mapped);
}

/* Unlinks and frees an unreferenced object. Caller holds lock. */
static void drop_locked(cn_sym_cache *c, cn_sym__obj *o)
{
    hash_unlink(c, o);
    lru_unlink(o);
    assert(c->stats.memory >= o->memory && c->stats.mapped >= o->mapped);
    c->stats.memory -= o->memory;
    c->stats.mapped -= o->mapped;
    c->stats.objects--;
    c->stats.evictions++;
    c->stalled -= o->job != NULL;
    obj_free(o);
}

/* Counts what o's debug data holds now: the CU index and line tables a lookup added, the
 * sections a reopen read, or nothing once released. Caller holds lock; o is in the hash. */
static void recount_locked(cn_sym_cache *c, cn_sym__obj *o, size_t dw_bytes)
{
    assert(c->stats.mapped >= o->mapped);
    c->stats.mapped = c->stats.mapped - o->mapped + dw_bytes;
    o->mapped = dw_bytes;
}

/* Releases o's debug data (unreferenced: nobody is in a lookup on it, and a new one must
 * take the lock first): libdw's, and with index_too the index of the CUs looked up, which
 * answers their addresses without libdw. Returns whether there was any. Caller holds
 * lock. */
static bool release_debug_locked(cn_sym_cache *c, cn_sym__obj *o, bool index_too)
{
    assert(o->refs == 0);
    if (!cn_sym__dwarf_release(o->dw, index_too))
        return false;
    recount_locked(c, o, cn_sym__dwarf_bytes(o->dw));
    c->stats.debug_releases++;
    return true;
}

/* Whether the cache is within all its bounds. */
static bool within_bounds(const cn_sym_cache *c)
{
    return c->stats.memory <= c->cfg.max_memory && c->stats.objects <= c->cfg.max_objects &&
           c->stats.mapped <= c->cfg.max_mapped;
}

static int64_t worth_of(const cn_sym_cache *c, const cn_sym__obj *o);

/* Drops unreferenced objects while over a bound (only the debug data of one when the debug
 * bound alone is exceeded), the one with the lowest worth first:
 * its last use plus cfg.reload_credit times its load time. Plain recency evicted a large
 * debug file that takes 100 ms to decompress (libc6-dbg's) for a stream of small new
 * programs, and reloaded it seconds later: on a busy machine a sixth of canopyd's CPU.
 * The placeholder of a load still running stays (it is a few bytes): it is what counts
 * that load's thread against MAX_STALLED, and evicting it would let the next lookup
 * start one more. A linear scan per eviction: objects are at most cfg.max_objects, and
 * an eviction follows a load. Caller holds lock. */
static void evict(cn_sym_cache *c)
{
    while (!within_bounds(c)) {
        cn_sym__obj *victim = NULL;
        int64_t worst = INT64_MAX;
        for (cn_sym__obj *o = c->lru.lru_prev; o != &c->lru; o = o->lru_prev) {
            int64_t worth = worth_of(c, o);
            if (worth < worst && o->refs == 0 && (!o->job || load_take_ready(o->job)) &&
                over_bound(c, o)) {
                victim = o;
                worst = worth;
            }
        }
        if (!victim)
            return;
        /* Over the debug bound alone: its debug data goes, its symbol table stays. */
        if (c->stats.memory <= c->cfg.max_memory && c->stats.objects <= c->cfg.max_objects &&
            release_debug_locked(c, victim, true))
            continue;
        drop_locked(c, victim);
    }
}

static cn_sym__obj *find_locked(cn_sym_cache *c, const char *key, uint64_t h)
{
    for (cn_sym__obj *o = c->buckets[h % NBUCKETS]; o; o = o->hnext) {
        if (o->hash == h && strcmp(o->key, key) == 0)
            return o;
    }
    return NULL;
}

/* The pid of process pid inside its own pid namespace (the last NSpid of its status),
 * which is the number in the name of the perf map it writes; pid when unknown. */
static int32_t ns_pid(int32_t pid)
{
    char path[64], line[256];
    int32_t ns = pid;
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return pid;
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, "NSpid:", 6) != 0)
            continue;
        char *p = line + 6, *end;
        for (;;) {
            long v = strtol(p, &end, 10);
            if (end == p)
                break;
            if (v > 0 && v <= INT32_MAX)
                ns = (int32_t)v;
            p = end;
        }
        break;
    }
    fclose(f);
    return ns;
}

/* Whether process pid still exists (its /proc directory). */
static bool proc_alive(int32_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d", (int)pid);
    return pid > 0 && access(path, F_OK) == 0;
}

/* The perf map's path: the one given, else the one inside the process's root, else (it
 * exited, and its root went with it) /tmp/perf-PID.map in ours. */
static void jit_path(const cn_sym_object *obj, char *buf, size_t size)
{
    if (obj->path)
        snprintf(buf, size, "%s", obj->path);
    else if (proc_alive(obj->pid))
        snprintf(buf, size, "/proc/%d/root/tmp/perf-%d.map", (int)obj->pid, (int)ns_pid(obj->pid));
    else
        snprintf(buf, size, "/tmp/perf-%d.map", (int)obj->pid);
}

/* cn_sym_perfmap_size with mount tables m for the open (NULL: read at the open). */
static int perfmap_size_in(cn_obj_mounts *m, const cn_sym_object *obj, uint64_t *size,
                           int64_t *mtime_ns)
{
    char path[4096];
    cn_obj_ident st;
    if (!obj || obj->kind != CN_SYM_JIT || !cn_sym_object_valid(obj))
        return -EINVAL;
    jit_path(obj, path, sizeof(path));
    int fd = cn_sym__perfmap_open(m, path, &st); /* as it will be read: same rules */
    if (fd < 0)
        return fd;
    close(fd);
    *size = (uint64_t)st.size;
    if (mtime_ns)
        *mtime_ns = st.mtime_ns;
    return 0;
}

int cn_sym_perfmap_size(cn_sym_cache *c, const cn_sym_object *obj, uint64_t *size,
                        int64_t *mtime_ns)
{
    return perfmap_size_in(c ? c->cfg.mounts : NULL, obj, size, mtime_ns);
}

/* A perf map's version: its size (-1: none) and modification time, as a load records
 * them (jit_file_size, jit_mtime_ns). */
typedef struct jit_version {
    int64_t size, mtime_ns;
} jit_version;

/* The perf map's version now (opened as it will be read). */
static jit_version jit_now(const cn_sym_cache *c, const cn_sym_object *obj)
{
    uint64_t size;
    jit_version v = {-1, 0}; /* mtime_ns is only written on success */
    if (perfmap_size_in(c->cfg.mounts, obj, &size, &v.mtime_ns) == 0)
        v.size = (int64_t)size;
    return v;
}

/* Whether o was loaded from another version of its perf map than v. */
static bool jit_changed(const cn_sym__obj *o, jit_version v)
{
    return o->jit_file_size != v.size || o->jit_mtime_ns != v.mtime_ns;
}

/* The uid a JIT object's perf map must belong to: the one given, else the owner of
 * /proc/PID now, else (the process is gone) our own: a map nobody vouches for is only
 * trusted when we wrote it, never when another user could have planted it. */
static uint32_t jit_owner(const cn_sym_object *obj)
{
    char path[64];
    struct stat st;
    if (obj->has_owner)
        return obj->owner_uid;
    snprintf(path, sizeof(path), "/proc/%d", (int)obj->pid);
    if (obj->pid > 0 && stat(path, &st) == 0)
        return (uint32_t)st.st_uid;
    return (uint32_t)geteuid();
}

/* Builds a new object (outside the lock). Always returns an object unless ENOMEM;
 * o->status says whether the load worked. prev (JIT, held by the caller, may be NULL) is
 * the object it replaces: a grown perf map is read from where prev stopped. */
static cn_sym__obj *load(const cn_sym_config *cfg, const cn_sym_object *obj,
                         const cn_sym__obj *prev)
{
    struct cn_sym_handle *h = calloc(1, sizeof(*h));
    if (!h)
        return NULL;
    cn_sym__obj *o = &h->o;
    pthread_mutex_init(&o->dw_lock, NULL);
    o->kind = obj->kind;
    int64_t t0 = cn_common_now_ns();
    int rc = 0;
    char *buf = NULL;
    size_t len = 0;
    char path[4096];
    switch (obj->kind) {
    case CN_SYM_USER: {
        char root[64] = "";
        if (obj->pid > 0)
            snprintf(root, sizeof(root), "/proc/%d/root", (int)obj->pid);
        rc = cn_sym__elf_load(o, obj->path, &obj->file, root, cfg);
        break;
    }
    case CN_SYM_KERNEL:
        o->is_exec_addr = 1;
        rc = cn_obj_read_file(obj->path ? obj->path : "/proc/kallsyms", CN_SYM__MAX_TEXT_FILE, &buf,
                              &len);
        if (rc == 0)
            rc = cn_sym__kallsyms_parse(&o->syms, buf, len);
        snprintf(o->source, sizeof(o->source), "kallsyms");
        break;
    case CN_SYM_JIT:
        o->is_exec_addr = 1;
        jit_path(obj, path, sizeof(path));
        rc = cn_sym__perfmap_load(o, prev, path, jit_owner(obj), cfg->mounts);
        snprintf(o->source, sizeof(o->source), "perfmap");
        break;
    case CN_SYM_VDSO:
        rc = cn_sym__vdso_load(o);
        break;
    }
    free(buf);
    if (rc < 0) {
        int64_t jit_file_size = o->jit_file_size, jit_mtime_ns = o->jit_mtime_ns;
        cn_sym__obj_clear(o);
        o->jit_file_size = jit_file_size; /* a failed map is retried when it changes */
        o->jit_mtime_ns = jit_mtime_ns;
        if (rc == -ENOMEM) {
            obj_free(o);
            return NULL;
        }
    }
    o->status = rc < 0 ? rc : 0;
    o->load_ns = cn_common_now_ns() - t0;
    o->memory = sizeof(*h) + cn_sym__table_memory(&o->syms) + cn_sym__fdes_memory(&o->fdes);
    o->mapped = cn_sym__dwarf_bytes(o->dw);
    return o;
}

/* Drops one reference to j; the last frees it and a result nobody took. */
static void load_put(cn_sym__load *j)
{
    pthread_mutex_lock(&j->lock);
    int left = --j->refs;
    pthread_mutex_unlock(&j->lock);
    if (left > 0)
        return;
    obj_free(j->result);
    pthread_cond_destroy(&j->done_cv);
    pthread_mutex_destroy(&j->lock);
    free(j->path);
    free(j->identity);
    free(j->debug_dirs);
    cn_obj_mounts_unref(j->cfg.mounts);
    free(j);
}

/* The result of a finished load (ownership passes to the caller; NULL when it failed for
 * memory or another caller took it), or (void *)-1 while it runs. */
static cn_sym__obj *load_take(cn_sym__load *j)
{
    cn_sym__obj *r = (cn_sym__obj *)-1;
    pthread_mutex_lock(&j->lock);
    if (j->done) {
        r = j->result;
        j->result = NULL;
    }
    pthread_mutex_unlock(&j->lock);
    return r;
}

/* Whether j has finished (its result may then be taken). */
static bool load_take_ready(cn_sym__load *j)
{
    pthread_mutex_lock(&j->lock);
    bool done = j->done;
    pthread_mutex_unlock(&j->lock);
    return done;
}

static void *loader_main(void *arg)
{
    cn_sym__load *j = arg;
    cn_sym__obj *o = load(&j->cfg, &j->obj, NULL);
    pthread_mutex_lock(&j->lock);
    j->result = o;
    j->done = true;
    pthread_cond_broadcast(&j->done_cv);
    pthread_mutex_unlock(&j->lock);
    load_put(j);
    return NULL;
}

/* A new load of obj with copies of what it reads (two references: thread and waiter). */
static cn_sym__load *load_new(const cn_sym_cache *c, const cn_sym_object *obj)
{
    cn_sym__load *j = calloc(1, sizeof(*j));
    if (!j)
        return NULL;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&j->done_cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&j->lock, NULL);
    j->refs = 2;
    j->obj = *obj;
    j->cfg = c->cfg;
    cn_obj_mounts_ref(j->cfg.mounts); /* the load may outlive the cache */
    j->path = obj->path ? strdup(obj->path) : NULL;
    j->identity = obj->identity ? strdup(obj->identity) : NULL;
    j->debug_dirs = c->cfg.debug_dirs ? strdup(c->cfg.debug_dirs) : NULL;
    j->obj.path = j->path;
    j->obj.identity = j->identity;
    j->obj.name = NULL; /* not copied: a load does not name frames */
    j->cfg.debug_dirs = j->debug_dirs;
    if ((obj->path && !j->path) || (obj->identity && !j->identity) ||
        (c->cfg.debug_dirs && !j->debug_dirs)) {
        j->refs = 1;
        load_put(j);
        return NULL;
    }
    return j;
}

/* Joins, without waiting, the loader threads that have ended. Under c->lock. */
static void loaders_reap(cn_sym_cache *c)
{
    size_t kept = 0;
    for (size_t i = 0; i < c->n_loaders; i++) {
        cn_sym__loader *l = &c->loaders[i];
        if (pthread_tryjoin_np(l->thread, NULL) == 0)
            load_put(l->job);
        else
            c->loaders[kept++] = *l;
    }
    c->n_loaders = kept;
}

/* Hands the new loader thread t of j (which takes one more reference to j) to the
 * cache, to be joined later; detached at once if there is no memory to keep it. */
static void loaders_add(cn_sym_cache *c, pthread_t t, cn_sym__load *j)
{
    pthread_mutex_lock(&c->lock);
    loaders_reap(c);
    if (c->n_loaders == c->cap_loaders) {
        size_t cap = c->cap_loaders ? 2 * c->cap_loaders : 8;
        cn_sym__loader *grown = realloc(c->loaders, cap * sizeof(*grown));
        if (grown) {
            c->loaders = grown;
            c->cap_loaders = cap;
        }
    }
    bool kept = c->n_loaders < c->cap_loaders;
    if (kept) {
        pthread_mutex_lock(&j->lock);
        j->refs++;
        pthread_mutex_unlock(&j->lock);
        c->loaders[c->n_loaders++] = (cn_sym__loader){.thread = t, .job = j};
    }
    pthread_mutex_unlock(&c->lock);
    if (!kept)
        pthread_detach(t);
}

size_t cn_sym__cache_join_finished(cn_sym_cache *c)
{
    size_t kept = 0;
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < c->n_loaders; i++) {
        cn_sym__loader *l = &c->loaders[i];
        if (load_take_ready(l->job)) {
            pthread_join(l->thread, NULL); /* it is only exiting: short */
            load_put(l->job);
        } else {
            c->loaders[kept++] = *l;
        }
    }
    c->n_loaders = kept;
    pthread_mutex_unlock(&c->lock);
    return kept;
}

/* At the cache's end: joins the threads of finished loads (they are only exiting) and
 * detaches those of loads still running (a stalled read is never waited for). */
static void loaders_release(cn_sym_cache *c)
{
    for (size_t i = 0; i < c->n_loaders; i++) {
        cn_sym__loader *l = &c->loaders[i];
        if (load_take_ready(l->job))
            pthread_join(l->thread, NULL);
        else
            pthread_detach(l->thread);
        load_put(l->job);
    }
    free(c->loaders);
    c->loaders = NULL;
    c->n_loaders = c->cap_loaders = 0;
}

/* Loads obj as load() does, but an ELF object in a thread of its own, waited for at most
 * cfg.load_wait_ms: then the result, or a placeholder holding the load (status
 * -ETIMEDOUT, see the top of this file), or a refusal (-EBUSY) when MAX_STALLED loads
 * already outlasted their wait. NULL on ENOMEM. Called without the cache lock. */
static cn_sym__obj *load_bounded(cn_sym_cache *c, const cn_sym_object *obj, const cn_sym__obj *prev)
{
    if (obj->kind != CN_SYM_USER)
        return load(&c->cfg, obj, prev);
    pthread_mutex_lock(&c->lock);
    bool full = c->stalled >= MAX_STALLED;
    pthread_mutex_unlock(&c->lock);
    struct cn_sym_handle *h = NULL;
    cn_sym__load *j = full ? NULL : load_new(c, obj);
    if (!full && !j)
        return NULL;
    pthread_t t;
    int rc = j ? pthread_create(&t, NULL, loader_main, j) : 0;
    if (rc != 0) { /* no thread (EAGAIN): load here, unbounded, rather than not at all */
        j->refs = 1;
        load_put(j);
        return load(&c->cfg, obj, prev);
    }
    if (j)
        loaders_add(c, t, j);
    if (j && c->cfg.load_wait_ms > 0) {
        struct timespec dl =
            cn_common_deadline(CLOCK_MONOTONIC, (int64_t)c->cfg.load_wait_ms * 1000000);
        pthread_mutex_lock(&j->lock);
        while (!j->done && pthread_cond_timedwait(&j->done_cv, &j->lock, &dl) == 0)
            ;
        pthread_mutex_unlock(&j->lock);
        cn_sym__obj *r = load_take(j);
        if (r != (cn_sym__obj *)-1) {
            load_put(j);
            return r;
        }
    }
    /* Outlasted its wait (j: it goes on), or refused (no j). */
    h = calloc(1, sizeof(*h));
    if (!h) {
        if (j)
            load_put(j);
        return NULL;
    }
    pthread_mutex_init(&h->o.dw_lock, NULL);
    h->o.kind = obj->kind;
    h->o.status = j ? -ETIMEDOUT : -EBUSY;
    h->o.job = j;
    h->o.memory = sizeof(*h);
    return &h->o;
}

bool cn_sym_object_valid(const cn_sym_object *obj)
{
    if (!obj)
        return false;
    switch (obj->kind) {
    case CN_SYM_USER:
        return obj->path != NULL;
    case CN_SYM_KERNEL:
    case CN_SYM_VDSO:
        return true;
    case CN_SYM_JIT:
        return obj->pid > 0 || obj->path != NULL;
    }
    return false;
}

/* Drops a reference taken under the lock. Caller holds the lock. */
static void unref_locked(cn_sym_cache *c, cn_sym__obj *o)
{
    assert(o->refs > 0); /* every put matches a get */
    if (--o->refs == 0) {
        if (((struct cn_sym_handle *)o)->detached)
            obj_free(o);
        else
            evict(c);
    }
}

/* A held reference to obj's object, loaded or failed (o->status), or -ENOMEM. */
static int acquire(cn_sym_cache *c, const cn_sym_object *obj, cn_sym__obj **out)
{
    char *key = make_key(obj);
    if (!key)
        return -ENOMEM;
    uint64_t h = hash_str(key);
    jit_version map_now = obj->kind == CN_SYM_JIT ? jit_now(c, obj) : (jit_version){-1, 0};
    pthread_mutex_lock(&c->lock);
    cn_sym__obj *o = find_locked(c, key, h);
    int64_t now = cn_common_now_ns();
    if (o) {
        o->refs++;
        o->used_ns = now;
        bool grown = obj->kind == CN_SYM_JIT && jit_changed(o, map_now);
        bool landed = o->job && load_take_ready(o->job);
        if (!grown && !landed) {
            lru_unlink(o);
            lru_push_front(c, o);
            pthread_mutex_unlock(&c->lock);
            free(key);
            *out = o;
            return 0;
        }
    }
    pthread_mutex_unlock(&c->lock);

    /* o (held, or NULL) is a perf map whose size changed (read what was appended), or the
     * placeholder of a load that has landed since (take its result; load again if another
     * thread took it or it ran out of memory). */
    cn_sym__obj *prev = o, *fresh = NULL;
    if (prev && prev->job) {
        fresh = load_take(prev->job);
        if (fresh == (cn_sym__obj *)-1)
            fresh = NULL;
    }
    if (!fresh)
        fresh = load_bounded(c, obj, prev && !prev->job ? prev : NULL);
    pthread_mutex_lock(&c->lock);
    if (prev)
        unref_locked(c, prev);
    pthread_mutex_unlock(&c->lock);
    if (!fresh) {
        free(key);
        return -ENOMEM;
    }
    fresh->key = key;
    fresh->hash = h;
    if (fresh->status == -EBUSY && !fresh->job) { /* refused for now: not cached */
        ((struct cn_sym_handle *)fresh)->detached = 1;
        fresh->refs = 1;
        *out = fresh;
        return 0;
    }
    pthread_mutex_lock(&c->lock);
    o = find_locked(c, key, h);
    bool replaces =
        o && ((obj->kind == CN_SYM_JIT &&
               jit_changed(o, (jit_version){fresh->jit_file_size, fresh->jit_mtime_ns})) ||
              (o->job && !fresh->job));
    if (o && !replaces) {
        obj_free(fresh); /* another thread won the race */
    } else {
        if (o) { /* a grown perf map replaces the old table; a landed load its placeholder */
            hash_unlink(c, o);
            lru_unlink(o);
            c->stats.memory -= o->memory;
            c->stats.mapped -= o->mapped;
            c->stats.objects--;
            c->stalled -= o->job != NULL;
            if (o->refs == 0)
                obj_free(o);
            else
                ((struct cn_sym_handle *)o)->detached = 1;
        }
        o = fresh;
        o->hnext = c->buckets[h % NBUCKETS];
        c->buckets[h % NBUCKETS] = o;
        lru_push_front(c, o);
        c->stats.memory += o->memory;
        c->stats.mapped += o->mapped;
        c->stats.objects++;
        c->stats.loads++;
        c->stats.debug_opens += o->dw != NULL; /* a load opens libdw on debug data */
        c->stalled += o->job != NULL;
    }
    o->refs++;
    o->used_ns = now;
    evict(c);
    pthread_mutex_unlock(&c->lock);
    *out = o;
    return 0;
}

size_t cn_sym_cache_expire(cn_sym_cache *c, int64_t idle_ns)
{
    size_t n = 0;
    int64_t before = cn_common_now_ns() - idle_ns;
    pthread_mutex_lock(&c->lock);
    for (cn_sym__obj *o = c->lru.lru_prev; o != &c->lru;) {
        cn_sym__obj *prev = o->lru_prev;
        if (o->used_ns >= before)
            break; /* the list is in order of use: the rest is newer */
        if (o->refs == 0 && !o->job) {
            drop_locked(c, o);
            n++;
        }
        o = prev;
    }
    pthread_mutex_unlock(&c->lock);
    return n;
}

/* What a part of the cache last used at used_ns and read in load_ns is worth: that time
 * plus cfg.reload_credit times load_ns (what dropping it would cost again); INT64_MAX - 1
 * when that overflows. */
static int64_t worth_at(const cn_sym_cache *c, int64_t used_ns, int64_t load_ns)
{
    int64_t credit, worth;
    if (__builtin_mul_overflow(c->cfg.reload_credit, load_ns, &credit) ||
        __builtin_add_overflow(used_ns, credit, &worth))
        return INT64_MAX - 1; /* kept before any object of ordinary worth */
    return worth;
}

/* An object's worth to the cache, by its last use. */
static int64_t worth_of(const cn_sym_cache *c, const cn_sym__obj *o)
{
    return worth_at(c, o->used_ns, o->load_ns);
}

size_t cn_sym_cache_release_debug(cn_sym_cache *c, int64_t idle_ns)
{
    size_t n = 0;
    int64_t before = cn_common_now_ns() - idle_ns;
    pthread_mutex_lock(&c->lock);
    /* Idle by worth, not by last use alone: a debug file that took 100 ms to read
     * (libc6-dbg's, decompressed) is kept 100 s longer than a cheap one, as eviction does;
     * released at 10 s, it was read again for nearly every new libc frame of a build.
     * The use and the cost that count are libdw's: lookups in the units already indexed
     * do not need it (a program run every few seconds asks new addresses in the same
     * units: the object is never idle, libdw is), and opening it again reads the sections
     * but indexes no unit again. */
    for (cn_sym__obj *o = c->lru.lru_prev; o != &c->lru; o = o->lru_prev) {
        if (o->refs != 0 || !o->dw) /* a lookup in it may be writing dw */
            continue;
        int64_t open_ns, used_ns = cn_sym__dwarf_libdw_used_ns(o->dw, &open_ns);
        if (worth_at(c, used_ns, open_ns) < before && release_debug_locked(c, o, false))
            n++;
    }
    pthread_mutex_unlock(&c->lock);
    return n;
}

int cn_sym_handle_get(cn_sym_cache *c, const cn_sym_object *obj, cn_sym_handle **out)
{
    cn_sym__obj *o;
    if (!c || !out || !cn_sym_object_valid(obj))
        return -EINVAL;
    int rc = acquire(c, obj, &o);
    if (rc < 0)
        return rc;
    if (o->status < 0) {
        int st = o->status;
        cn_sym_handle_put(c, (cn_sym_handle *)o);
        return st;
    }
    *out = (cn_sym_handle *)o;
    return 0;
}

void cn_sym_handle_put(cn_sym_cache *c, cn_sym_handle *h)
{
    if (!c || !h)
        return;
    pthread_mutex_lock(&c->lock);
    unref_locked(c, &h->o);
    pthread_mutex_unlock(&c->lock);
}

int cn_sym_handle_symbol(const cn_sym_handle *h, uint64_t addr, const char **name, uint64_t *start,
                         uint64_t *size)
{
    uint64_t va;
    if (!h || cn_sym__obj_to_vaddr(&h->o, addr, &va) < 0)
        return -ENOENT;
    const cn_sym__entry *e = cn_sym__table_find(&h->o.syms, va);
    if (!e)
        return -ENOENT;
    if (name)
        *name = h->o.syms.pool + e->name;
    if (start)
        *start = addr - (va - e->start);
    if (size)
        *size = e->size;
    return 0;
}

void cn_sym_handle_info(const cn_sym_handle *h, cn_sym_object_info *out)
{
    memset(out, 0, sizeof(*out));
    if (!h)
        return;
    out->symbols = h->o.syms.n;
    out->memory = h->o.memory;
    out->section_bytes = h->o.syms.section_bytes;
    out->has_dwarf = h->o.dw != NULL;
    out->load_ns = h->o.load_ns;
    snprintf(out->source, sizeof(out->source), "%s", h->o.source);
}

void cn_sym_cache_stats(cn_sym_cache *c, cn_sym_stats *out)
{
    pthread_mutex_lock(&c->lock);
    *out = c->stats;
    out->max_memory = c->cfg.max_memory;
    out->max_mapped = c->cfg.max_mapped;
    pthread_mutex_unlock(&c->lock);
}

void cn_sym_result_clear(cn_sym_result *r)
{
    if (!r)
        return;
    free(r->chain);
    memset(r, 0, sizeof(*r));
}

/* Copies a chain and symbol (may be NULL) into one allocation: the frame array followed
 * by the strings. */
static int result_fill(cn_sym_result *r, const cn_sym__chain *ch, const char *symbol)
{
    size_t bytes = ch->depth * sizeof(cn_sym_frame) + (symbol ? strlen(symbol) + 1 : 0);
    for (size_t i = 0; i < ch->depth; i++)
        bytes += strlen(ch->name[i]) + 1 + (ch->file[i] ? strlen(ch->file[i]) + 1 : 0);
    char *block = malloc(bytes);
    if (!block)
        return -ENOMEM;
    cn_sym_frame *f = (cn_sym_frame *)(void *)block;
    char *s = block + ch->depth * sizeof(cn_sym_frame);
    for (size_t i = 0; i < ch->depth; i++) {
        size_t n = strlen(ch->name[i]) + 1;
        memcpy(s, ch->name[i], n);
        f[i].name = s;
        s += n;
        f[i].file = NULL;
        if (ch->file[i]) {
            n = strlen(ch->file[i]) + 1;
            memcpy(s, ch->file[i], n);
            f[i].file = s;
            s += n;
        }
        f[i].line = ch->line[i];
    }
    r->symbol = NULL;
    if (symbol) {
        memcpy(s, symbol, strlen(symbol) + 1);
        r->symbol = s;
    }
    r->chain = f;
    r->depth = ch->depth;
    r->status = 0;
    return 0;
}

/* The function of a stripped object's local code (docs/cli.md "Names"): when no symbol
 * covers va, or only a sizeless one stretched over it from before the FDE range that
 * contains va, the FDE range is the function, named `LIB+0xSTART` exactly as aggregate
 * names an unresolved frame (LIB: the file's name, obj->name or else the path's last
 * component, START: the range's file offset), so the tree keeps one node per function. A
 * /proc/PID/map_files path without obj->name does not give the file's name: such frames
 * stay unresolved. Returns true and fills name, *start_va. */
static bool fde_function(const cn_sym__obj *o, const cn_sym_object *obj, uint64_t addr, uint64_t va,
                         const cn_sym__entry *e, char *name, size_t size, uint64_t *start_va)
{
    uint64_t s;
    if (o->fdes.n == 0 || obj->kind != CN_SYM_USER || !obj->path ||
        (!obj->name && strstr(obj->path, "/map_files/")) || cn_sym__fdes_find(&o->fdes, va, &s) < 0)
        return false;
    if (e && !(e->limit && s > e->start)) /* a symbol of its own size names it */
        return false;
    const char *slash = strrchr(obj->path, '/');
    const char *base = obj->name ? obj->name : slash && slash[1] ? slash + 1 : obj->path;
    snprintf(name, size, "%s+0x%" PRIx64, base, addr - (va - s));
    *start_va = s;
    return true;
}

/* Sets r's range (cn_sym_result.range_lo) for an answer resolve() made without DWARF: the
 * addresses around addr (va in the object) where the segment, the symbol table's entry and
 * the FDE table's range stay those of addr, which is all such an answer depends on. An
 * object with DWARF (lines differ inside a function) or a JIT map (which grows) gets
 * none. */
static void answer_range(const cn_sym__obj *o, uint64_t addr, uint64_t va, cn_sym_result *r)
{
    uint64_t lo = 0, hi = UINT64_MAX;
    if (o->dw || o->kind == CN_SYM_JIT || cn_sym__obj_segment_region(o, addr, &lo, &hi) < 0 ||
        va < addr - lo) /* a hostile segment's addresses wrap around */
        return;
    assert(lo <= addr && addr < hi); /* the segment holds addr */
    uint64_t vlo = va - (addr - lo);
    uint64_t vhi = hi - addr > UINT64_MAX - va ? UINT64_MAX : va + (hi - addr);
    cn_sym__table_region(&o->syms, va, &vlo, &vhi);
    cn_sym__fdes_region(&o->fdes, va, &vlo, &vhi);
    r->range_lo = addr - (va - vlo);
    r->range_hi = addr + (vhi - va);
}

/* What a lookup did to an object's debug data. */
typedef struct dw_work {
    size_t bytes; /* what it holds now, SIZE_MAX when the lookup did not read it */
    uint32_t opened, indexed, closed;
} dw_work;

/* Resolves addr on a held object into r; *dw: what its debug data holds now and what the
 * lookup did to it (it indexes units and may open libdw again). */
static int resolve(cn_sym__obj *o, const cn_sym_object *obj, uint64_t addr, cn_sym_result *r,
                   dw_work *dw)
{
    uint64_t va;
    r->status = -ENOENT;
    if (cn_sym__obj_to_vaddr(o, addr, &va) < 0)
        return 0;
    const cn_sym__entry *e = cn_sym__table_find(&o->syms, va);
    cn_sym__chain ch;
    ch.depth = 0;
    int have_dw = 0;
    char fname[CN_SYM__MAX_NAME];
    uint64_t fstart = 0;
    if (o->dw) {
        pthread_mutex_lock(&o->dw_lock);
        have_dw = cn_sym__dwarf_lookup(o->dw, va, &ch) == 0;
        dw->bytes = cn_sym__dwarf_bytes(o->dw);
        dw->opened = ch.opened_libdw;
        dw->indexed = ch.indexed_units;
        dw->closed = ch.closed_libdw;
        if (!have_dw)
            pthread_mutex_unlock(&o->dw_lock);
    }
    int rc = 0;
    if (have_dw) {
        /* Like addr2line, DWARF names the function (clones such as foo.constprop.0 and
         * foo.cold are foo); the symbol table only fills in a nameless DIE. Its own name,
         * when different, goes along for --no-inline (docs/calltree.md §4.5). */
        char *symbol_owned = NULL;
        const char *symbol = e ? cn_sym__table_name(&o->syms, e, &symbol_owned) : NULL;
        if (e && strcmp(ch.name[0], "??") == 0) {
            free(ch.owned[0]);
            ch.owned[0] = NULL;
            ch.name[0] = symbol;
        }
        if (symbol && strcmp(symbol, ch.name[0]) == 0)
            symbol = NULL;
        r->sym_offset = e ? va - e->start : ch.func_low != UINT64_MAX ? va - ch.func_low : 0;
        rc = result_fill(r, &ch, symbol);
        cn_sym__chain_clear(&ch);
        free(symbol_owned); /* after the chain, which may point into it */
        pthread_mutex_unlock(&o->dw_lock);
    } else if (fde_function(o, obj, addr, va, e, fname, sizeof(fname), &fstart)) {
        ch.name[0] = fname;
        ch.owned[0] = NULL;
        ch.file[0] = NULL;
        ch.line[0] = 0;
        ch.depth = 1;
        r->sym_offset = va - fstart;
        rc = result_fill(r, &ch, NULL);
    } else if (e) {
        ch.name[0] = cn_sym__table_name(&o->syms, e, &ch.owned[0]);
        ch.file[0] = NULL;
        ch.line[0] = 0;
        ch.depth = 1;
        r->sym_offset = va - e->start;
        rc = result_fill(r, &ch, NULL);
        cn_sym__chain_clear(&ch);
    }
    if (rc == 0 && !have_dw && r->status == 0) /* named without DWARF: by FDE or symbol */
        answer_range(o, addr, va, r);
    return rc;
}

int cn_sym_lookup(cn_sym_cache *c, const cn_sym_object *obj, uint64_t addr, cn_sym_result *out)
{
    if (!c || !out || !cn_sym_object_valid(obj))
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    cn_sym__obj *o = NULL;
    int rc = acquire(c, obj, &o);
    pthread_mutex_lock(&c->lock);
    c->stats.lookups++;
    pthread_mutex_unlock(&c->lock);
    if (rc < 0)
        return rc;
    if (o->kind == CN_SYM_JIT && o->jit_file_size > 0) {
        out->map_bytes = (uint64_t)o->jit_file_size;
        out->map_mtime_ns = o->jit_mtime_ns;
    }
    dw_work dw = {.bytes = SIZE_MAX};
    if (o->status < 0)
        out->status = o->status;
    else
        rc = resolve(o, obj, addr, out, &dw);
    pthread_mutex_lock(&c->lock);
    if (dw.bytes != SIZE_MAX && !((struct cn_sym_handle *)o)->detached)
        recount_locked(c, o, dw.bytes);
    c->stats.debug_opens += dw.opened;
    c->stats.debug_units += dw.indexed;
    c->stats.debug_releases += dw.closed;
    unref_locked(c, o);
    pthread_mutex_unlock(&c->lock);
    return rc;
}
