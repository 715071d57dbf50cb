/* bench_cgroup — the cost of a process's container identity (common/cgroup.c): reading
 * /proc/PID/cgroup and deriving the container, pod, QoS and unit from the path, as the
 * sampler does once per process (again after an exec and at most every 10 s of samples)
 * where the samples carry no cgroup id (docs/cli-live.md, "Containers and cgroups").
 * Measures every process on this machine, then the parser alone on the runtimes' paths.
 * Usage: bench_cgroup [ROUNDS]  (default 20) */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cn_common.h"

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 20;
    int pids[32768], n = 0;
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL && n < (int)(sizeof(pids) / sizeof(pids[0])))
        if (atoi(e->d_name) > 0)
            pids[n++] = atoi(e->d_name);
    if (d)
        closedir(d);
    char path[CN_CGROUP_PATH_MAX];
    cn_cgroup_info info;
    long reads = 0, named = 0;
    int64_t t0 = cn_common_now_ns();
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < n; i++) {
            if (cn_cgroup_read(pids[i], path, sizeof(path)) < 0)
                continue;
            cn_cgroup_identify(path, &info);
            reads++;
            named += info.container_id[0] || info.systemd_unit[0];
        }
    }
    int64_t t1 = cn_common_now_ns();
    static const char *const samples[] = {
        "/libpod_parent/libpod-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "/kubepods.slice/kubepods-burstable.slice/"
        "kubepods-burstable-pod0d2b9a4e_3c1f_4f0e_9b1a_1c2d3e4f5a6b.slice/"
        "cri-containerd-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.scope",
        "/user.slice/user-1000.slice/user@1000.service/app.slice/foo.service",
    };
    long parsed = 0;
    for (int r = 0; r < rounds * 10000; r++) {
        cn_cgroup_identify(samples[r % 3], &info);
        parsed += info.container_id[0] != 0;
    }
    int64_t t2 = cn_common_now_ns();
    printf("read+identify: %ld of %d processes x %d rounds, %.2f us each (%ld named)\n",
           reads / rounds, n, rounds, reads ? (double)(t1 - t0) / 1e3 / (double)reads : 0.0,
           named / rounds);
    printf("identify alone: %.3f us per path (%ld containers)\n",
           (double)(t2 - t1) / 1e3 / ((double)rounds * 10000), parsed);
    return 0;
}
