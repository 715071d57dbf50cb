/* sym_query — a test driver for the symbolizer: reads addresses (hex, one per line) on
 * stdin and prints one line per address: the inline chain outer first,
 * "name@file:line|name@file:line…", or "??" when unresolved.
 *   sym_query [--nolines] [--worker] [--offsets] [--release] [--stats] FILE
 *                                                           ELF (addresses are vaddrs
 *                                                           unless --offsets)
 *   sym_query --kernel [KALLSYMS]                           absolute kernel addresses
 *   sym_query --jit PID                                     /tmp/perf-PID.map
 * --worker resolves through the worker thread instead of synchronous lookups.
 * --release: then closes libdw as an idle daemon does (cn_sym_cache_release_debug), looks
 * every address up again, and reports on stderr the debug data held after the first pass,
 * after the release and after the second, and how many answers differ (exit 1 if any).
 * --stats: reports on stderr what the cache holds after the lookups (the symbol tables'
 * bytes, as `canopy status` counts them, and the debug data's). */
#include "cn_sym.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* vaddr -> file offset through PT_LOAD, as a sampler would compute from a mapping. */
static int vaddr_to_offset(const char *path, uint64_t va, uint64_t *off)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    elf_version(EV_CURRENT);
    Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    size_t n = 0;
    int rc = -ENOENT;
    if (elf && elf_getphdrnum(elf, &n) == 0) {
        for (size_t i = 0; i < n; i++) {
            GElf_Phdr ph;
            if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD && va >= ph.p_vaddr &&
                va - ph.p_vaddr < ph.p_filesz) {
                *off = va - ph.p_vaddr + ph.p_offset;
                rc = 0;
                break;
            }
        }
    }
    elf_end(elf);
    close(fd);
    return rc;
}

static void print_result(FILE *out, const cn_sym_result *r)
{
    if (r->status < 0) {
        fprintf(out, "??\n");
        return;
    }
    for (size_t i = 0; i < r->depth; i++)
        fprintf(out, "%s%s@%s:%d", i ? "|" : "", r->chain[i].name,
                r->chain[i].file ? r->chain[i].file : "??", (int)r->chain[i].line);
    fprintf(out, "\n");
}

/* Looks every address up synchronously, printing the answers to out. 0, or 1 on error. */
static int lookup_all(cn_sym_cache *cache, const cn_sym_object *obj, const uint64_t *addrs,
                      size_t n, FILE *out)
{
    for (size_t k = 0; k < n; k++) {
        cn_sym_result r;
        if (addrs[k] == UINT64_MAX) {
            fprintf(out, "??\n");
            continue;
        }
        if (cn_sym_lookup(cache, obj, addrs[k], &r) < 0)
            return 1;
        print_result(out, &r);
        cn_sym_result_clear(&r);
    }
    return 0;
}

/* --release: the first pass's answers (text) against a second pass after libdw closed. */
static int release_and_again(cn_sym_cache *cache, const cn_sym_object *obj, const uint64_t *addrs,
                             size_t n, const char *first)
{
    cn_sym_stats st[3];
    cn_sym_cache_stats(cache, &st[0]);
    size_t closed = cn_sym_cache_release_debug(cache, 0);
    cn_sym_cache_stats(cache, &st[1]);
    char *again = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&again, &len);
    if (!out || lookup_all(cache, obj, addrs, n, out) != 0 || fclose(out) != 0)
        return 1;
    cn_sym_cache_stats(cache, &st[2]);
    size_t differ = 0;
    const char *a = first, *b = again;
    while (*a || *b) {
        size_t la = strcspn(a, "\n"), lb = strcspn(b, "\n");
        differ += la != lb || memcmp(a, b, la) != 0;
        a += la + (a[la] == '\n');
        b += lb + (b[lb] == '\n');
    }
    fprintf(stderr,
            "debug data: %zu bytes after the lookups, %zu after closing libdw (%zu objects), "
            "%zu after the same lookups again; %zu answers differ\n",
            st[0].mapped, st[1].mapped, closed, st[2].mapped, differ);
    free(again);
    return differ ? 1 : 0;
}

int main(int argc, char **argv)
{
    cn_sym_config cfg;
    cn_sym_config_init(&cfg);
    cn_sym_object obj = {.kind = CN_SYM_USER};
    int use_worker = 0, offsets = 0, release = 0, stats = 0, i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--nolines") == 0)
            cfg.lines = false;
        else if (strcmp(argv[i], "--worker") == 0)
            use_worker = 1;
        else if (strcmp(argv[i], "--offsets") == 0)
            offsets = 1;
        else if (strcmp(argv[i], "--release") == 0)
            release = 1, cfg.reload_credit = 0;
        else if (strcmp(argv[i], "--stats") == 0)
            stats = 1;
        else if (strcmp(argv[i], "--kernel") == 0)
            obj.kind = CN_SYM_KERNEL;
        else if (strcmp(argv[i], "--jit") == 0 && i + 1 < argc)
            obj.kind = CN_SYM_JIT, obj.pid = atoi(argv[++i]);
        else {
            fprintf(stderr, "sym_query: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (i < argc)
        obj.path = argv[i];
    if (obj.kind == CN_SYM_USER && !obj.path) {
        fprintf(stderr,
                "usage: sym_query [--nolines] [--worker] [--offsets] [--release] [--stats] FILE\n");
        return 2;
    }
    cn_sym_cache *cache = cn_sym_cache_new(&cfg);
    if (!cache)
        return 1;
    size_t cap = 1024, n = 0;
    uint64_t *addrs = malloc(cap * sizeof(*addrs));
    char line[256];
    while (addrs && fgets(line, sizeof(line), stdin)) {
        uint64_t a = strtoull(line, NULL, 16), off = a;
        if (obj.kind == CN_SYM_USER && !offsets && vaddr_to_offset(obj.path, a, &off) < 0)
            off = UINT64_MAX;
        if (n == cap) {
            cap *= 2;
            uint64_t *bigger = realloc(addrs, cap * sizeof(*addrs));
            if (!bigger)
                return 1;
            addrs = bigger;
        }
        addrs[n++] = off;
    }
    int rc = 0;
    if (release && !use_worker) {
        char *first = NULL;
        size_t len = 0;
        FILE *out = open_memstream(&first, &len);
        rc = !out || lookup_all(cache, &obj, addrs, n, out) != 0 || fclose(out) != 0;
        if (!rc) {
            fputs(first, stdout);
            rc = release_and_again(cache, &obj, addrs, n, first);
        }
        free(first);
    } else if (!use_worker) {
        rc = lookup_all(cache, &obj, addrs, n, stdout);
    } else {
        cn_sym_worker *w = NULL;
        cn_sym_result *res = calloc(n ? n : 1, sizeof(*res));
        if (!res || cn_sym_worker_new(cache, 0, &w) < 0)
            return 1;
        for (size_t k = 0; k < n; k++) {
            cn_sym_request req = {.tag = 1, .cookie = k, .obj = obj, .addr = addrs[k]};
            res[k].status = -ENOENT;
            if (cn_sym_worker_submit(w, &req, 1) < 0)
                return 1;
        }
        size_t got = 0;
        while (got < n) {
            struct pollfd p = {.fd = cn_sym_worker_fd(w), .events = POLLIN};
            if (poll(&p, 1, 60000) <= 0) {
                fprintf(stderr, "sym_query: worker timed out\n");
                return 1;
            }
            cn_sym_batch *b = NULL;
            int m = cn_sym_worker_take(w, &b);
            for (int k = 0; k < m; k++) {
                res[b->answers[k].cookie] = b->answers[k].result;
                memset(&b->answers[k].result, 0, sizeof(b->answers[k].result));
            }
            got += m > 0 ? (size_t)m : 0;
            cn_sym_batch_free(b);
        }
        for (size_t k = 0; k < n; k++) {
            if (addrs[k] == UINT64_MAX)
                res[k].status = -ENOENT;
            print_result(stdout, &res[k]);
            cn_sym_result_clear(&res[k]);
        }
        free(res);
        cn_sym_worker_free(w);
    }
    if (stats) {
        cn_sym_stats st;
        cn_sym_cache_stats(cache, &st);
        fprintf(stderr, "symbols: %zu bytes in %zu objects; debug data: %zu bytes\n", st.memory,
                st.objects, st.mapped);
    }
    free(addrs);
    cn_sym_cache_free(cache);
    return rc;
}
