/* access.c — who may do what, from credentials captured once per connection.
 *
 * At accept, cn_d__cred_capture() takes the peer's uid, gid and pid (SO_PEERCRED, fixed by
 * the kernel at connect), its groups (SO_PEERGROUPS, also from connect) and its capability
 * sets from /proc/PID/status. The status is trusted only if it still shows the connect-time
 * uid and gid and the process, held through a pidfd, is still alive afterwards (so the pid
 * was not reused): a peer that exec'ed a setuid program in between is treated as having no
 * capabilities. Requests never read the peer's /proc again (docs/security.md).
 *
 * Root may do everything. Another user may attach only to a process it could ptrace
 * itself, checked the way the kernel's ptrace_may_access does it from what /proc shows:
 * the target's real, effective and saved uids and gids equal the caller's; the target is
 * dumpable (/proc/PID is owned by root otherwise); without CAP_SYS_PTRACE the target's
 * permitted capabilities are a subset of the caller's; and Yama's ptrace_scope holds
 * (1: the target descends from the caller's process; 2: CAP_SYS_PTRACE; 3: nobody).
 * A system session needs CAP_PERFMON or CAP_SYS_ADMIN in the caller's effective set, or
 * membership of the configured group. A target that vanishes while we look is -ESRCH.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "d_internal.h"

#define CAP_SYS_PTRACE_BIT 19
#define CAP_SYS_ADMIN_BIT  21
#define CAP_SYSLOG_BIT     34
#define CAP_PERFMON_BIT    38

#ifndef SO_PEERGROUPS
#define SO_PEERGROUPS 59
#endif
#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

/* Reads the value after "key:" in /proc/PID/status into buf. 0, -ESRCH or -ENOENT. */
static int status_field(pid_t pid, const char *key, char *buf, size_t size)
{
    char path[64], line[512];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -ESRCH;
    size_t klen = strlen(key);
    int r = -ENOENT;
    while (fgets(line, sizeof(line), f)) {
        if (!strncmp(line, key, klen) && line[klen] == ':') {
            const char *v = line + klen + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            snprintf(buf, size, "%s", v);
            buf[strcspn(buf, "\n")] = '\0';
            r = 0;
            break;
        }
    }
    fclose(f);
    return r;
}

/* The four ids of a Uid:/Gid: line all equal want? */
static int ids_match(pid_t pid, const char *key, unsigned want)
{
    char v[128];
    int r = status_field(pid, key, v, sizeof(v));
    if (r < 0)
        return r;
    unsigned a, b, c, d;
    if (sscanf(v, "%u %u %u %u", &a, &b, &c, &d) != 4)
        return -ESRCH;
    return (a == want && b == want && c == want && d == want) ? 1 : 0;
}

static bool has_cap(const cn_d__cred *cred, int bit)
{
    return (cred->cap_eff >> bit) & 1;
}

/* A hexadecimal capability set from /proc/PID/status ("CapPrm" …). 0, -ESRCH, -ENOENT. */
static int status_caps(pid_t pid, const char *key, uint64_t *out)
{
    char v[64];
    int r = status_field(pid, key, v, sizeof(v));
    if (r < 0)
        return r;
    *out = strtoull(v, NULL, 16);
    return 0;
}

static pid_t parent_of(pid_t pid)
{
    char v[32];
    if (status_field(pid, "PPid", v, sizeof(v)) < 0)
        return 0;
    return (pid_t)atoi(v);
}

static int yama_scope(void)
{
    FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
    int v = 0;
    if (!f)
        return 0; /* no Yama */
    if (fscanf(f, "%d", &v) != 1)
        v = 0;
    fclose(f);
    return v;
}

int cn_d__may_attach(const cn_d__cred *cred, pid_t pid, cn_err *err)
{
    char path[64];
    struct stat st;
    if (pid <= 0) {
        snprintf(err->msg, sizeof(err->msg), "invalid pid %d", (int)pid);
        return -ESRCH;
    }
    snprintf(path, sizeof(path), "/proc/%d", (int)pid);
    if (stat(path, &st) < 0) {
        snprintf(err->msg, sizeof(err->msg), "no such process: %d", (int)pid);
        return -ESRCH;
    }
    if (cred->uid == 0)
        return 0;
    int u = ids_match(pid, "Uid", cred->uid), g = ids_match(pid, "Gid", cred->gid);
    if (u < 0 || g < 0) {
        snprintf(err->msg, sizeof(err->msg), "no such process: %d", (int)pid);
        return -ESRCH;
    }
    if (!u || !g) {
        snprintf(err->msg, sizeof(err->msg),
                 "permission denied: process %d does not run as uid %u/gid %u (only root may "
                 "profile other users' processes)",
                 (int)pid, (unsigned)cred->uid, (unsigned)cred->gid);
        return -EPERM;
    }
    if (st.st_uid != cred->uid) {
        snprintf(err->msg, sizeof(err->msg),
                 "permission denied: process %d is not dumpable (setuid, or PR_SET_DUMPABLE 0)",
                 (int)pid);
        return -EPERM;
    }
    uint64_t target_prm = 0;
    if (!has_cap(cred, CAP_SYS_PTRACE_BIT) &&
        (status_caps(pid, "CapPrm", &target_prm) < 0 || (target_prm & ~cred->cap_prm) != 0)) {
        snprintf(err->msg, sizeof(err->msg),
                 "permission denied: process %d has capabilities the caller lacks", (int)pid);
        return -EPERM;
    }
    int scope = yama_scope();
    if (scope >= 3 || (scope == 2 && !has_cap(cred, CAP_SYS_PTRACE_BIT))) {
        snprintf(err->msg, sizeof(err->msg),
                 "permission denied: kernel.yama.ptrace_scope=%d forbids attaching to %d", scope,
                 (int)pid);
        return -EPERM;
    }
    if (scope == 1 && !has_cap(cred, CAP_SYS_PTRACE_BIT)) {
        pid_t p = pid;
        for (int depth = 0; p > 1 && p != cred->pid && depth < 4096; depth++)
            p = parent_of(p);
        if (p != cred->pid) {
            snprintf(err->msg, sizeof(err->msg),
                     "permission denied: kernel.yama.ptrace_scope=1 and process %d is not a "
                     "descendant of the caller",
                     (int)pid);
            return -EPERM;
        }
    }
    return 0;
}

int cn_d__may_system(const cn_d__cred *cred, const char *group, cn_err *err)
{
    if (cred->uid == 0 || has_cap(cred, CAP_PERFMON_BIT) || has_cap(cred, CAP_SYS_ADMIN_BIT) ||
        cred->in_system_group)
        return 0;
    snprintf(err->msg, sizeof(err->msg),
             "permission denied: a system session needs root, CAP_PERFMON%s%s",
             group ? " or group " : "", group ? group : "");
    return -EPERM;
}

#define CGROUP_V1_MAGIC   0x27e0eb
#define CGROUP_V2_MAGIC   0x63677270
#define CGROUP_MAX_DEPTH  64
#define CGROUP_MAX_GROUPS 4096

/* Every process in the cgroup open as dfd and its descendants (depth-first, bounded)
 * passes cn_d__may_attach; *groups counts the directories visited. 0 or the refusal. */
static int may_cgroup_tree(const cn_d__cred *cred, int dfd, const char *path, int depth,
                           int *groups, cn_err *err)
{
    if (depth > CGROUP_MAX_DEPTH || ++*groups > CGROUP_MAX_GROUPS) {
        snprintf(err->msg, sizeof(err->msg),
                 "permission denied: cgroup %.200s is too deep or too large to check", path);
        return -EPERM;
    }
    int rc = 0, fd = openat(dfd, "cgroup.procs", O_RDONLY | O_CLOEXEC);
    FILE *f = fd >= 0 ? fdopen(fd, "re") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
        snprintf(err->msg, sizeof(err->msg), "cgroup %.200s: cannot read cgroup.procs", path);
        return -EINVAL;
    }
    long pid;
    while (rc == 0 && fscanf(f, "%ld", &pid) == 1) {
        cn_err why = {0};
        int r = cn_d__may_attach(cred, (pid_t)pid, &why);
        if (r == -EPERM) {
            snprintf(err->msg, sizeof(err->msg),
                     "permission denied: cgroup %.200s holds process %ld: %.200s", path, pid,
                     why.msg);
            rc = -EPERM;
        } /* -ESRCH: it left meanwhile */
    }
    fclose(f);
    int cfd = rc == 0 ? dup(dfd) : -1;
    DIR *d = cfd >= 0 ? fdopendir(cfd) : NULL;
    if (rc == 0 && !d) {
        if (cfd >= 0)
            close(cfd);
        snprintf(err->msg, sizeof(err->msg), "cgroup %.200s: cannot list", path);
        return -EINVAL;
    }
    struct dirent *e;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (e->d_type != DT_DIR || e->d_name[0] == '.')
            continue;
        int sub = openat(dfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0)
            continue; /* removed meanwhile */
        char child[CN_CGROUP_PATH_MAX];
        snprintf(child, sizeof(child), "%s/%s", path, e->d_name);
        rc = may_cgroup_tree(cred, sub, child, depth + 1, groups, err);
        close(sub);
    }
    if (d)
        closedir(d);
    return rc;
}

int cn_d__may_cgroup(const cn_d__cred *cred, const char *group, const char *path, cn_err *err)
{
    /* The sampler opens the path again: it must be canonical and inside the cgroup v2
     * mount (root's directories, and cgroupfs has no symlinks), so that no one can
     * swap what it names between this check and that open. */
    char v2[1024], *real = realpath(path, NULL);
    size_t n = cn_cgroup_v2_root(v2, sizeof(v2)) == 0 ? strlen(v2) : 0;
    bool inside = real && n && !strcmp(real, path) && !strncmp(path, v2, n) &&
                  (path[n] == '/' || path[n] == '\0');
    free(real);
    if (!inside) {
        snprintf(err->msg, sizeof(err->msg),
                 "%.200s: not a canonical path inside the cgroup v2 hierarchy%s%.100s", path,
                 n ? " at " : " (none is mounted)", n ? v2 : "");
        return -EINVAL;
    }
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;
    struct statfs sf;
    struct stat st;
    if (fd < 0 || fstatfs(fd, &sf) < 0 ||
        (sf.f_type != CGROUP_V2_MAGIC && sf.f_type != CGROUP_V1_MAGIC)) {
        snprintf(err->msg, sizeof(err->msg), "%.200s is not a cgroup directory", path);
        rc = -EINVAL;
    } else if (cn_d__may_system(cred, group, err) == 0) {
        rc = 0;
    } else if (fstatat(fd, "cgroup.procs", &st, 0) < 0 || st.st_uid != cred->uid) {
        /* Who may write cgroup.procs decides which tasks join later: the caller (or root) */
        snprintf(err->msg, sizeof(err->msg),
                 "permission denied: cgroup %.200s is not delegated to uid %u (its cgroup.procs "
                 "belongs to uid %u; without CAP_PERFMON a cgroup session needs one whose "
                 "tasks only the caller or root can add)",
                 path, (unsigned)cred->uid, fd >= 0 ? (unsigned)st.st_uid : 0u);
        rc = -EPERM;
    } else {
        int groups = 0;
        rc = may_cgroup_tree(cred, fd, path, 0, &groups, err);
    }
    if (fd >= 0)
        close(fd);
    return rc;
}

/* Whether gid `want` is the peer's gid or among its supplementary groups at connect. */
static bool peer_in_group(int fd, gid_t primary, gid_t want)
{
    gid_t small[256], *groups = small;
    socklen_t len = sizeof(small);
    bool found = primary == want;
    if (found)
        return true;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) < 0) {
        if (errno != ERANGE || !(groups = malloc(len)))
            return false;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) < 0)
            goto out;
    }
    for (size_t i = 0; i < len / sizeof(gid_t); i++)
        found |= groups[i] == want;
out:
    if (groups != small)
        free(groups);
    return found;
}

/* The peer's capability sets, if /proc/PID/status still describes the process that
 * connected as uid/gid: its effective uid and gid unchanged, and the process, held through
 * a pidfd from before the read, still alive after it (so the pid was not reused). */
static void capture_caps(int fd, const struct ucred *uc, cn_d__cred *out)
{
    socklen_t len = sizeof(int);
    int pidfd = -1;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) < 0)
        pidfd = (int)syscall(SYS_pidfd_open, uc->pid, 0);
    if (pidfd < 0)
        return;
    char v[128];
    unsigned ruid, euid, rgid, egid;
    uint64_t eff = 0, prm = 0;
    if (status_field(uc->pid, "Uid", v, sizeof(v)) < 0 || sscanf(v, "%u %u", &ruid, &euid) != 2 ||
        status_field(uc->pid, "Gid", v, sizeof(v)) < 0 || sscanf(v, "%u %u", &rgid, &egid) != 2 ||
        euid != uc->uid || egid != uc->gid || status_caps(uc->pid, "CapEff", &eff) < 0 ||
        status_caps(uc->pid, "CapPrm", &prm) < 0)
        goto out;
    if (syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) < 0)
        goto out; /* gone: the status may have been another process's */
    out->cap_eff = eff;
    out->cap_prm = prm;
out:
    close(pidfd);
}

int cn_d__cred_capture(int fd, const char *system_group, cn_d__cred *out)
{
    struct ucred uc;
    socklen_t len = sizeof(uc);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0)
        return -errno;
    *out = (cn_d__cred){.pid = uc.pid, .uid = uc.uid, .gid = uc.gid};
    capture_caps(fd, &uc, out);
    if (system_group && *system_group) {
        struct group gr, *res = NULL;
        char buf[4096];
        if (getgrnam_r(system_group, &gr, buf, sizeof(buf), &res) == 0 && res)
            out->in_system_group = peer_in_group(fd, uc.gid, res->gr_gid);
    }
    return 0;
}

/* An integer sysctl under /proc/sys/kernel (def when unreadable). */
static int kernel_sysctl(const char *name, int def)
{
    char path[96];
    int v = def;
    snprintf(path, sizeof(path), "/proc/sys/kernel/%s", name);
    FILE *f = fopen(path, "re");
    if (!f)
        return def;
    if (fscanf(f, "%d", &v) != 1)
        v = def;
    fclose(f);
    return v;
}

bool cn_d__may_see_kernel(const cn_d__cred *cred)
{
    if (cred->uid == 0 || has_cap(cred, CAP_SYS_ADMIN_BIT))
        return true;
    int paranoid = kernel_sysctl("perf_event_paranoid", 2);
    int kptr = kernel_sysctl("kptr_restrict", 1);
    bool frames = paranoid <= 1 || has_cap(cred, CAP_PERFMON_BIT);
    bool addresses = (kptr == 0 && paranoid <= 1) || (kptr <= 1 && has_cap(cred, CAP_SYSLOG_BIT));
    return frames && addresses;
}

size_t cn_d__rss(void)
{
    FILE *f = fopen("/proc/self/statm", "re");
    unsigned long size = 0, res = 0;
    if (!f)
        return 0;
    if (fscanf(f, "%lu %lu", &size, &res) != 2)
        res = 0;
    fclose(f);
    return res * (size_t)sysconf(_SC_PAGESIZE);
}
