/* sym_query — a test driver for the symbolizer: reads addresses (hex, one per line) on
 * stdin and prints one line per address: the inline chain outer first,
 * "name@file:line|name@file:line…", or "??" when unresolved.
 *   sym_query [--nolines] [--worker] [--offsets] FILE      ELF (addresses are vaddrs
 *                                                           unless --offsets)
 *   sym_query --kernel [KALLSYMS]                           absolute kernel addresses
 *   sym_query --jit PID                                     /tmp/perf-PID.map
 * --worker resolves through the worker thread instead of synchronous lookups. */
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

static void print_result(const cn_sym_result *r)
{
    if (r->status < 0) {
        printf("??\n");
        return;
    }
    for (size_t i = 0; i < r->depth; i++)
        printf("%s%s@%s:%d", i ? "|" : "", r->chain[i].name,
               r->chain[i].file ? r->chain[i].file : "??", (int)r->chain[i].line);
    printf("\n");
}

int main(int argc, char **argv)
{
    cn_sym_config cfg;
    cn_sym_config_init(&cfg);
    cn_sym_object obj = {.kind = CN_SYM_USER};
    int use_worker = 0, offsets = 0, i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--nolines") == 0)
            cfg.lines = false;
        else if (strcmp(argv[i], "--worker") == 0)
            use_worker = 1;
        else if (strcmp(argv[i], "--offsets") == 0)
            offsets = 1;
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
        fprintf(stderr, "usage: sym_query [--nolines] [--worker] [--offsets] FILE\n");
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
    if (!use_worker) {
        for (size_t k = 0; k < n; k++) {
            cn_sym_result r;
            if (addrs[k] == UINT64_MAX) {
                printf("??\n");
                continue;
            }
            if (cn_sym_lookup(cache, &obj, addrs[k], &r) < 0) {
                rc = 1;
                break;
            }
            print_result(&r);
            cn_sym_result_clear(&r);
        }
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
            print_result(&res[k]);
            cn_sym_result_clear(&res[k]);
        }
        free(res);
        cn_sym_worker_free(w);
    }
    free(addrs);
    cn_sym_cache_free(cache);
    return rc;
}
