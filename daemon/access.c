/* access.c — who may do what, from the socket peer's credentials (SO_PEERCRED).
 *
 * Root may do everything. Another user may attach only to a process it could ptrace
 * itself, checked the way the kernel's ptrace_may_access does it from what /proc shows:
 * the target's real, effective and saved uids and gids equal the caller's; the target is
 * dumpable (/proc/PID is owned by root otherwise); and Yama's ptrace_scope holds
 * (1: the target descends from the caller's process; 2: CAP_SYS_PTRACE; 3: nobody).
 * A system session needs CAP_PERFMON or CAP_SYS_ADMIN in the caller's effective set, or
 * membership of the configured group. Everything read here comes from /proc; a process
 * that vanishes while we look is -ESRCH.
 */
#include <errno.h>
#include <grp.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "d_internal.h"

#define CAP_SYS_PTRACE_BIT 19
#define CAP_SYS_ADMIN_BIT  21
#define CAP_PERFMON_BIT    38

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

static bool has_cap(pid_t pid, int bit)
{
    char v[64];
    if (status_field(pid, "CapEff", v, sizeof(v)) < 0)
        return false;
    uint64_t caps = strtoull(v, NULL, 16);
    return (caps >> bit) & 1;
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
    int scope = yama_scope();
    if (scope >= 3 || (scope == 2 && !has_cap(cred->pid, CAP_SYS_PTRACE_BIT))) {
        snprintf(err->msg, sizeof(err->msg),
                 "permission denied: kernel.yama.ptrace_scope=%d forbids attaching to %d", scope,
                 (int)pid);
        return -EPERM;
    }
    if (scope == 1 && !has_cap(cred->pid, CAP_SYS_PTRACE_BIT)) {
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

static bool in_group(const cn_d__cred *cred, gid_t gid)
{
    if (cred->gid == gid)
        return true;
    char v[4096];
    if (status_field(cred->pid, "Groups", v, sizeof(v)) < 0)
        return false;
    for (char *p = v, *end; *p; p = end) {
        unsigned long g = strtoul(p, &end, 10);
        if (end == p)
            break;
        if ((gid_t)g == gid)
            return true;
    }
    return false;
}

int cn_d__may_system(const cn_d__cred *cred, const char *group, cn_err *err)
{
    if (cred->uid == 0 || has_cap(cred->pid, CAP_PERFMON_BIT) ||
        has_cap(cred->pid, CAP_SYS_ADMIN_BIT))
        return 0;
    if (group && *group) {
        struct group gr, *res = NULL;
        char buf[4096];
        if (getgrnam_r(group, &gr, buf, sizeof(buf), &res) == 0 && res &&
            in_group(cred, res->gr_gid))
            return 0;
    }
    snprintf(err->msg, sizeof(err->msg),
             "permission denied: a system session needs root, CAP_PERFMON%s%s",
             group ? " or group " : "", group ? group : "");
    return -EPERM;
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
