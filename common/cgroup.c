/* cgroup.c — a process's cgroup and what its path says: the one parser of /proc/PID/cgroup
 * and of the container, pod and systemd unit a cgroup path names (docs/cli-live.md,
 * "Containers"). The text comes from /proc and the path from whoever named the cgroup (a
 * container runtime, a user's systemd), so both are untrusted: bounded, never trusted to be
 * well formed, and a shape not recognised gives empty fields, never an error. */
#include <errno.h>
#include <stddef.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cn_common.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* The cgroup path of one line "ID:CONTROLLERS:PATH" of /proc/PID/cgroup, or NULL. */
static const char *line_path(const char *line, const char *end, const char **ctl, size_t *ctl_len)
{
    const char *c1 = memchr(line, ':', (size_t)(end - line));
    if (!c1)
        return NULL;
    const char *c2 = memchr(c1 + 1, ':', (size_t)(end - c1 - 1));
    if (!c2)
        return NULL;
    *ctl = c1 + 1;
    *ctl_len = (size_t)(c2 - c1 - 1);
    return c2 + 1;
}

int cn_cgroup_from_proc(const char *text, size_t len, char *out, size_t size)
{
    /* The unified hierarchy's line (0::PATH) carries perf's cgroup mode; without one (a
     * pure v1 machine) the perf_event controller's, else systemd's named hierarchy. */
    static const char *const prefs[] = {"", "perf_event", "name=systemd"};
    const char *best = NULL, *best_end = NULL;
    size_t best_rank = N_OF(prefs);
    if (!text || size == 0)
        return -EINVAL;
    for (const char *p = text, *end = text + len; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end, *ctl;
        size_t ctl_len;
        const char *path = line_path(p, le, &ctl, &ctl_len);
        for (size_t i = 0; path && i < best_rank; i++) {
            if (strlen(prefs[i]) == ctl_len && !memcmp(prefs[i], ctl, ctl_len) &&
                (i != 0 || (le - p >= 3 && !memcmp(p, "0::", 3)))) {
                best = path;
                best_end = le;
                best_rank = i;
            }
        }
        p = nl ? nl + 1 : end;
    }
    if (!best)
        return -ENOENT;
    size_t n = (size_t)(best_end - best);
    if (n == 0 || n >= size || best[0] != '/' || memchr(best, '\0', n))
        return -EINVAL;
    memcpy(out, best, n);
    out[n] = '\0';
    return 0;
}

int cn_cgroup_read(int pid, char *out, size_t size)
{
    char path[64], buf[4096];
    snprintf(path, sizeof(path), "/proc/%d/cgroup", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t len = 0;
    ssize_t n;
    while (len < sizeof(buf) && (n = read(fd, buf + len, sizeof(buf) - len)) > 0)
        len += (size_t)n;
    int rc = n < 0 ? -errno : 0;
    close(fd);
    return rc < 0 ? rc : cn_cgroup_from_proc(buf, len, out, size);
}

static bool is_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return n > 0;
}

/* A container id: exactly 64 lowercase hex digits (every runtime here names them so). */
static bool is_id(const char *s, size_t n)
{
    return n == 64 && is_hex(s, n);
}

static bool has_prefix(const char *s, size_t n, const char *pre)
{
    size_t k = strlen(pre);
    return n >= k && !memcmp(s, pre, k);
}

static bool has_suffix(const char *s, size_t n, const char *suf)
{
    size_t k = strlen(suf);
    return n >= k && !memcmp(s + n - k, suf, k);
}

static void set_field(char *dst, size_t size, const char *s, size_t n)
{
    if (n >= size)
        n = size - 1;
    memcpy(dst, s, n);
    dst[n] = '\0';
}

/* A pod UID written with '-' (cgroupfs driver) or '_' (systemd driver): 36 characters,
 * hex and separators; stored with '-'. */
static bool take_pod(cn_cgroup_info *o, const char *s, size_t n)
{
    if (n != 36)
        return false;
    char uid[37];
    for (size_t i = 0; i < n; i++) {
        char c = s[i] == '_' ? '-' : s[i];
        bool sep = i == 8 || i == 13 || i == 18 || i == 23;
        if (sep ? c != '-' : !is_hex(&c, 1))
            return false;
        uid[i] = c;
    }
    set_field(o->pod_uid, sizeof(o->pod_uid), uid, n);
    return true;
}

static const char *const qos_names[] = {"burstable", "besteffort"};

/* kubepods[-QOS][-podUID].slice (systemd driver), or kubepods, QOS, podUID (cgroupfs). */
static void kube_component(cn_cgroup_info *o, const char *s, size_t n, bool in_kube)
{
    if (has_prefix(s, n, "kubepods") && has_suffix(s, n, ".slice")) {
        const char *p = s + 8, *e = s + n - 6;
        if (!o->k8s_qos[0])
            set_field(o->k8s_qos, sizeof(o->k8s_qos), "guaranteed", 10);
        for (size_t i = 0; i < N_OF(qos_names); i++) {
            size_t k = strlen(qos_names[i]);
            if (e - p > (ptrdiff_t)k && p[0] == '-' && !memcmp(p + 1, qos_names[i], k)) {
                set_field(o->k8s_qos, sizeof(o->k8s_qos), qos_names[i], k);
                p += 1 + k;
            }
        }
        if (e - p > 4 && !memcmp(p, "-pod", 4))
            take_pod(o, p + 4, (size_t)(e - p - 4));
        return;
    }
    if (!in_kube)
        return;
    for (size_t i = 0; i < N_OF(qos_names); i++)
        if (strlen(qos_names[i]) == n && !memcmp(s, qos_names[i], n))
            set_field(o->k8s_qos, sizeof(o->k8s_qos), s, n);
    if (has_prefix(s, n, "pod"))
        take_pod(o, s + 3, n - 3);
}

/* A container's own cgroup: RUNTIME-ID.scope (systemd driver), libpod-ID (podman's
 * cgroupfs), or a bare ID under docker/ or kubepods/. The runtimes' monitor scopes
 * (crio-conmon-ID, libpod-conmon-ID) are not the container. */
static void container_component(cn_cgroup_info *o, const char *s, size_t n, const char *parent,
                                size_t parent_len)
{
    static const struct {
        const char *prefix, *runtime;
    } forms[] = {{"docker-", "docker"},
                 {"cri-containerd-", "containerd"},
                 {"crio-", "cri-o"},
                 {"libpod-", "podman"}};
    const char *id = NULL, *rt = "";
    size_t body = has_suffix(s, n, ".scope") ? n - 6 : n;
    for (size_t i = 0; i < N_OF(forms) && !id; i++) {
        size_t k = strlen(forms[i].prefix);
        if (has_prefix(s, body, forms[i].prefix) && is_id(s + k, body - k)) {
            id = s + k;
            rt = forms[i].runtime;
        }
    }
    if (!id && is_id(s, n)) {
        id = s;
        rt = parent_len == 6 && !memcmp(parent, "docker", 6) ? "docker" : "";
    }
    if (!id)
        return;
    set_field(o->container_id, sizeof(o->container_id), id, 64);
    set_field(o->runtime, sizeof(o->runtime), rt, strlen(rt));
}

void cn_cgroup_identify(const char *path, cn_cgroup_info *o)
{
    memset(o, 0, sizeof(*o));
    if (!path)
        return;
    const char *parent = "";
    size_t parent_len = 0;
    bool in_kube = false;
    for (const char *p = path; *p;) {
        while (*p == '/')
            p++;
        size_t n = strcspn(p, "/");
        if (n == 0)
            break;
        if (n == 8 && !memcmp(p, "kubepods", 8))
            in_kube = true;
        kube_component(o, p, n, in_kube);
        container_component(o, p, n, parent, parent_len);
        /* The innermost unit: a service, or a scope (a login session, a container's). */
        if ((has_suffix(p, n, ".service") && n > 8) || (has_suffix(p, n, ".scope") && n > 6))
            set_field(o->systemd_unit, sizeof(o->systemd_unit), p, n);
        parent = p;
        parent_len = n;
        p += n;
    }
}

const char *cn_cgroup_key_value(const cn_cgroup_info *o, const char *path, cn_cgroup_key key)
{
    switch (key) {
    case CN_CGROUP_KEY_CONTAINER:
        return o->container_id;
    case CN_CGROUP_KEY_CGROUP:
        return path ? path : "";
    case CN_CGROUP_KEY_POD:
        return o->pod_uid;
    case CN_CGROUP_KEY_QOS:
        return o->k8s_qos;
    case CN_CGROUP_KEY_SERVICE:
        return o->systemd_unit;
    }
    return "";
}

static const char *const key_names[] = {
    [CN_CGROUP_KEY_CONTAINER] = "container",
    [CN_CGROUP_KEY_CGROUP] = "cgroup",
    [CN_CGROUP_KEY_POD] = "pod",
    [CN_CGROUP_KEY_QOS] = "qos",
    [CN_CGROUP_KEY_SERVICE] = "service",
};

/* The fleet's label names for the same keys (docs/fleet.md, "Container labels"). */
static const char *const label_names[] = {
    [CN_CGROUP_KEY_CONTAINER] = "container_id",
    [CN_CGROUP_KEY_CGROUP] = "cgroup",
    [CN_CGROUP_KEY_POD] = "pod_uid",
    [CN_CGROUP_KEY_QOS] = "k8s_qos",
    [CN_CGROUP_KEY_SERVICE] = "systemd_unit",
};

const char *cn_cgroup_key_name(cn_cgroup_key key)
{
    return (size_t)key < N_OF(key_names) ? key_names[key] : "?";
}

const char *cn_cgroup_label_name(cn_cgroup_key key)
{
    return (size_t)key < N_OF(label_names) ? label_names[key] : "?";
}

int cn_cgroup_key_parse(const char *name, cn_cgroup_key *out)
{
    for (size_t i = 0; name && i < N_OF(key_names); i++) {
        if (!strcmp(name, key_names[i]) || !strcmp(name, label_names[i])) {
            *out = (cn_cgroup_key)i;
            return 0;
        }
    }
    return -EINVAL;
}

bool cn_cgroup_value_match(cn_cgroup_key key, const char *value, const char *want)
{
    /* A container id may be given by a prefix, as docker and podman accept one. */
    if (key == CN_CGROUP_KEY_CONTAINER && want[0])
        return !strncmp(value, want, strlen(want));
    return !strcmp(value, want);
}

int cn_cgroup_v2_root(char *out, size_t size)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return -errno;
    char line[4096];
    int rc = -ENOENT;
    while (rc == -ENOENT && fgets(line, sizeof(line), f)) {
        /* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER */
        char *sep = strstr(line, " - cgroup2 ");
        char root[8], mnt[1024];
        if (!sep || sscanf(line, "%*s %*s %*s %7s %1023s", root, mnt) != 2 || strcmp(root, "/"))
            continue;
        if (strlen(mnt) >= size || strchr(mnt, '\\'))
            continue; /* an escaped (space-holding) mount point: not ours to guess */
        memcpy(out, mnt, strlen(mnt) + 1);
        rc = 0;
    }
    fclose(f);
    return rc;
}

/* The prefix of path that ends with the component naming container id (the container's
 * own cgroup, above the sub-cgroups some runtimes make inside it). */
static void container_prefix(const char *path, const char *id, char *out, size_t size)
{
    const char *at = strstr(path, id);
    size_t n = at ? (size_t)(at - path) + strcspn(at, "/") : strlen(path);
    set_field(out, size, path, n);
}

int cn_cgroup_find_container(const char *prefix, char *path, size_t size, char *id)
{
    if (!prefix || !prefix[0] || strlen(prefix) > 64 || !is_hex(prefix, strlen(prefix)))
        return -EINVAL;
    DIR *d = opendir("/proc");
    if (!d)
        return -errno;
    int rc = -ENOENT;
    struct dirent *e;
    char cg[CN_CGROUP_PATH_MAX], found[65] = "";
    while ((e = readdir(d)) != NULL) {
        int pid = atoi(e->d_name);
        cn_cgroup_info info;
        if (pid <= 0 || cn_cgroup_read(pid, cg, sizeof(cg)) < 0)
            continue;
        cn_cgroup_identify(cg, &info);
        if (!info.container_id[0] || strncmp(info.container_id, prefix, strlen(prefix)))
            continue;
        if (found[0] && strcmp(found, info.container_id)) {
            rc = -EEXIST; /* two containers start so */
            break;
        }
        char mine[CN_CGROUP_PATH_MAX];
        container_prefix(cg, info.container_id, mine, sizeof(mine));
        if (!found[0] || strlen(mine) < strlen(path)) {
            if (strlen(mine) >= size) {
                rc = -ENAMETOOLONG;
                break;
            }
            memcpy(path, mine, strlen(mine) + 1);
        }
        memcpy(found, info.container_id, sizeof(found));
        rc = 0;
    }
    closedir(d);
    if (rc == 0)
        memcpy(id, found, sizeof(found));
    return rc;
}
