/* canopyd: the canopy daemon. Parses its flags (docs/cli.md) into a cn_d_config and runs
 * the server (daemon/cn_d.h) until SIGTERM/SIGINT or a `shutdown` request. It never forks
 * into the background: systemd (or the caller) supervises it. Exit status: 0 after a clean
 * shutdown, 1 on a runtime failure (socket busy, state dir unusable), 2 on bad usage. */
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cn_d.h"
#ifdef CANOPY_TEST_HOOKS
#include "test_seed.h"
#endif

static void usage(FILE *out)
{
    fprintf(out, "usage: canopyd [OPTIONS]\n\n"
                 "The canopy profiling daemon. Clients (canopy) talk to it over its socket in\n"
                 "newline-delimited JSON (docs/protocol.md). It stays in the foreground.\n\n"
                 "Options:\n");
    cn_opt_print(out, cn_d_options, 0, 80, NULL);
    fprintf(out, "\nExit status: 0 after a clean shutdown, 1 on a runtime failure, 2 on bad "
                 "usage.\nManual: man canopyd, man canopyd.conf.\n");
}

#define LOOP_NICE (-5)

int main(int argc, char **argv)
{
    /* getopt's table from cn_d_options: the one list of canopyd's options. */
    struct option opts[16];
    size_t n = 0;
    for (const cn_opt *o = cn_d_options; o->lng && n + 1 < sizeof(opts) / sizeof(opts[0]); o++)
        opts[n++] =
            (struct option){o->lng + 2, o->arg ? required_argument : no_argument, NULL, o->id};
    opts[n] = (struct option){NULL, 0, NULL, 0};
    const char *socket = NULL, *state = NULL, *config = NULL, *loop = NULL;
    int c;
    /* Two malloc heaps, not one per thread that ever ran (the symbolizer's loaders are
     * short-lived threads): each heap keeps what it freed, and canopyd's resident memory is
     * bounded by design (docs/perf-daemon.md, "A busy machine"). */
    mallopt(M_ARENA_MAX, 2);
    /* Blocks of 128 KiB and more (symbol tables, libelf's section buffers, the profile's
     * tables as they double) get pages of their own, returned to the system when freed.
     * A fixed threshold also turns off glibc's dynamic one, which rises to the largest
     * block freed so far: then every later large block came from the heaps, and a grown
     * table's old copy stayed there as free space between live blocks, resident after
     * the build (docs/perf-daemon.md, "A busy machine"). */
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    while ((c = getopt_long(argc, argv, "hV", opts, NULL)) != -1) {
        switch (c) {
        case 's':
            socket = optarg;
            break;
        case 'd':
            state = optarg;
            break;
        case 'c':
            config = optarg;
            break;
        case 'f':
            break;
        case 'e':
            loop = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        case 'V': {
            char id[80];
            printf("canopyd %s (build %s)\n", CANOPY_VERSION, cn_common_build_id(id, sizeof(id)));
            return 0;
        }
        default: /* getopt printed what was wrong */
            fprintf(stderr, "canopyd: see canopyd --help\n");
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "canopyd: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    cn_d_crash_install();
    cn_d_config cfg;
    cn_err err = {0};
    cn_d_config_init(&cfg);
    if (config && cn_d_config_load(&cfg, config, &err) < 0) {
        fprintf(stderr, "canopyd: %s\n", err.msg);
        cn_d_config_clear(&cfg);
        return 2;
    }
    if (socket)
        cfg.socket_path = socket;
    if (state)
        cfg.state_dir = state;
    if (loop) {
        if (!strcmp(loop, "io_uring")) {
            cfg.backend = CN_D_LOOP_IO_URING;
        } else if (!strcmp(loop, "epoll")) {
            cfg.backend = CN_D_LOOP_EPOLL;
        } else {
            fprintf(stderr, "canopyd: --event-loop must be io_uring or epoll, not '%s'\n", loop);
            cn_d_config_clear(&cfg);
            return 2;
        }
    }
#ifdef CANOPY_TEST_HOOKS
    /* canopyd-test only (tests/CMakeLists.txt; the installed canopyd has no such code):
     * widens the access-check race (docs/security.md) so that the attack test hits it
     * every time, and makes the symbolizer slow, so that clients' waits for symbols are
     * tested. */
    const char *delay = getenv("CANOPYD_TEST_ATTACH_DELAY_MS");
    if (delay)
        cfg.test_attach_delay_ns = strtoll(delay, NULL, 10) * 1000000;
    const char *sym_delay = getenv("CANOPYD_TEST_SYMBOL_DELAY_MS");
    if (sym_delay)
        cfg.test_symbol_delay_ns = strtoll(sym_delay, NULL, 10) * 1000000;
    const char *seed = getenv("CANOPYD_TEST_SEED"); /* STACKS:SAMPLES, test_seed.c */
    if (seed) {
        cfg.test_session_seed = cn_d_test_seed;
        cfg.test_seed_arg = seed;
    }
#endif
    cn_d_server *srv = NULL;
    int rc = cn_d_server_new(&cfg, &srv, &err);
    if (rc < 0) {
        fprintf(stderr, "canopyd: %s\n", err.msg);
        cn_d_config_clear(&cfg);
        return 1;
    }
    fprintf(stderr, "canopyd %s: listening (event loop %s)\n", CANOPY_VERSION,
            cn_d_server_backend(srv));
    /* This thread runs the event loop, which drains every session's rings: it runs at
     * nice -5, ahead of the users' own nice-0 work, so that sampling keeps the CPU on a
     * busy machine. Only this thread: the symbolizer's (started above) stay at 0, the
     * forked query workers set 0 and saves 5 (workers.c). docs/security.md. */
    if (setpriority(PRIO_PROCESS, (id_t)gettid(), LOOP_NICE) < 0)
        fprintf(stderr, "canopyd: cannot run the event loop at nice %d: %s\n", LOOP_NICE,
                strerror(errno));
    rc = cn_d_server_run(srv);
    if (rc < 0)
        fprintf(stderr, "canopyd: event loop: %s\n", strerror(-rc));
    cn_d_server_free(srv);
    cn_d_config_clear(&cfg);
    return rc < 0 ? 1 : 0;
}
