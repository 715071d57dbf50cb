/* config.c — canopyd's settings: defaults and the `key = value` config file. */
#include <ctype.h>
#include <stddef.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "d_internal.h"

/* The command line (main.c builds its getopt table from these rows; id is getopt's value). */
const cn_opt cn_d_options[] = {
    {"--socket", NULL, "PATH",
     "/run/canopy/canopy.sock for root, else $XDG_RUNTIME_DIR/canopy.sock",
     "the socket to listen on (unused under socket activation)", 's', 0},
    {"--state-dir", NULL, "DIR", "/var/lib/canopy for root, else $XDG_STATE_HOME/canopy",
     "where sessions are saved", 'd', 0},
    {"--config", NULL, "FILE", "none",
     "read settings from FILE (canopyd.conf(5)); the options above win over it", 'c', 0},
    {"--foreground", NULL, NULL, NULL,
     "accepted for compatibility: canopyd always stays in the foreground", 'f', 0},
    {"--event-loop", NULL, "io_uring|epoll", "io_uring, else epoll", "force one event loop", 'e',
     0},
    {"--help", "-h", NULL, NULL, "print this help", 'h', 0},
    {"--version", "-V", NULL, NULL, "print the version and build id", 'V', 0},
    {NULL, NULL, NULL, NULL, NULL, 0, 0},
};

/* The config file's keys: apply() refuses any key not here (so the manual lists every key
 * the parser takes), and the unit test loads each row's example value. */
const cn_opt cn_d_config_keys[] = {
    {"socket", NULL, "PATH", "/run/canopy/canopy.sock",
     "the listening socket (ignored when systemd passes one: canopyd.socket)", 0, 0},
    {"state_dir", NULL, "DIR", "/var/lib/canopy", "where sessions are saved", 0, 0},
    {"event_loop", NULL, "io_uring|epoll", "io_uring",
     "the event loop; epoll where io_uring is unavailable or forbidden", 0, 0},
    {"max_sessions", NULL, "COUNT", "64", "sessions at most", 0, 0},
    {"max_clients", NULL, "COUNT", "128", "connections at most", 0, 0},
    {"max_request", NULL, "SIZE", "64K", "the longest request line, 256 to 64M", 0, 0},
    {"session_memory", NULL, "SIZE", "256M",
     "profile tables per session: at it the all-time tree is trimmed harder (fold_trim raised "
     "up to 1%), beyond that samples are counted as dropped",
     0, 0},
    {"unwind_cache", NULL, "SIZE", "16M", "unwind tables kept of files no live process maps", 0, 0},
    {"symbol_cache", NULL, "SIZE", "32M", "symbol tables kept", 0, 0},
    {"debug_cache", NULL, "SIZE", "64M", "debug data kept for lines and inlines", 0, 0},
    {"retention", NULL, "DURATION", "10m",
     "raw samples older than this fold into the all-time "
     "tree (--last and --from/--to only see what is still raw)",
     0, 0},
    {"fold_trim", NULL, "SHARE", "0.01%",
     "folded call paths below this share of the folded samples are merged into their "
     "callers' \"[trimmed]\" child (0: keep every path)",
     0, 0},
    {"checkpoint", NULL, "DURATION", "60s",
     "how often running sessions are saved (0: only on stop and exit); less often when a "
     "save's CPU time is over 0.5% of the interval (the next waits 200 times that)",
     0, 0},
    {"state_dir_max", NULL, "SIZE", "1G",
     "bytes of saved sessions kept; the oldest stopped sessions are evicted first", 0, 0},
    {"client_timeout", NULL, "DURATION", "30s", "a request must be complete within this", 0, 0},
    {"query_workers", NULL, "COUNT", "4", "queries and saves running at once, in forked workers", 0,
     0},
    {"query_max_transforms", NULL, "COUNT", "64", "transforms in one query", 0, 0},
    {"query_max_output", NULL, "SIZE", "64M", "the output of one query", 0, 0},
    {"query_cpu", NULL, "DURATION", "10s", "CPU time of one query", 0, 0},
    {"query_memory", NULL, "SIZE", "1G", "memory of one query", 0, 0},
    {"user_max_clients", NULL, "COUNT", "32", "connections per user (root: the global limits only)",
     0, 0},
    {"user_max_sessions", NULL, "COUNT", "16", "sessions per user", 0, 0},
    {"user_max_kept", NULL, "COUNT", "512", "saved sessions kept per user", 0, 0},
    {"user_max_kept_bytes", NULL, "SIZE", "256M", "bytes of saved sessions per user", 0, 0},
    {"user_max_fds", NULL, "COUNT", "8192", "file descriptors per user's sessions", 0, 0},
    {"idle_timeout", NULL, "DURATION", "10m", "connections without a request are closed after this",
     0, 0},
    {"send_timeout", NULL, "DURATION", "30s",
     "connections not reading their answer are closed after this", 0, 0},
    {"system_group", NULL, "GROUP", "none",
     "members may start whole-system sessions (root and CAP_PERFMON always can)", 0, 0},
    {"socket_mode", NULL, "OCTAL", "0666",
     "mode of the socket file (the socket unit's SocketMode= applies under activation)", 0, 0},
    {"fleet_url", NULL, "URL", "none: no push",
     "ClickHouse's HTTP URL for the fleet push (docs/fleet.md)", 0, 0},
    {"fleet_database", NULL, "NAME", "canopy", "the ClickHouse database", 0, 0},
    {"fleet_host", NULL, "NAME", "the host name", "the host column of this machine's rows", 0, 0},
    {"fleet_labels", NULL, "K=V[,K=V]", "none", "labels added to every row", 0, 0},
    {"fleet_interval", NULL, "DURATION", "10s", "how often rows are pushed (at least 100ms)", 0, 0},
    {"fleet_user", NULL, "NAME", "none", "ClickHouse's user", 0, 0},
    {"fleet_password_file", NULL, "FILE", "none",
     "the password, alone on the first line; the file must not be readable by group or others", 0,
     0},
    {"fleet_spool_max", NULL, "SIZE", "256M",
     "bytes of batches kept on disk while ClickHouse is unreachable (oldest dropped first)", 0, 0},
    {"fleet_pyroscope_url", NULL, "URL", "none: no push",
     "Pyroscope's base URL for the profile push", 0, 0},
    {"fleet_pyroscope_org", NULL, "NAME", "none", "sent as X-Scope-OrgID (multi-tenant Pyroscope)",
     0, 0},
    {"fleet_otlp_url", NULL, "URL", "none: no push",
     "an OTLP/HTTP receiver's base URL: each window is posted to /v1development/profiles", 0, 0},
    {NULL, NULL, NULL, NULL, NULL, 0, 0},
};

void cn_d_config_init(cn_d_config *c)
{
    memset(c, 0, sizeof(*c));
    c->backend = CN_D_LOOP_AUTO;
    c->listen_fd = -1;
    c->max_sessions = 64;
    c->max_clients = 128;
    c->max_request = CN_PROTO_MAX_REQUEST;
    c->session_memory = (size_t)256 << 20;
    /* A whole-system session on a busy machine within 64 MiB (docs/perf-daemon.md, "A busy
     * machine"): what unused files' unwind tables and the symbolizer may keep. */
    c->unwind_cache = (uint64_t)16 << 20;
    c->symbol_cache = (uint64_t)32 << 20;
    c->debug_cache = (uint64_t)64 << 20;
    c->retention_ns = 600LL * 1000000000;
    c->fold_trim = CN_LIVE_TRIM_DEFAULT;
    c->checkpoint_ns = 60LL * 1000000000;
    c->state_dir_max = (uint64_t)1 << 30;
    c->client_timeout_ns = 30LL * 1000000000;
    c->query_workers = 4;
    c->query_max_transforms = 64;
    c->query_max_output = (size_t)64 << 20;
    c->query_cpu_ns = 10LL * 1000000000;
    c->query_memory = (size_t)1 << 30;
    c->user_max_clients = 32;
    c->user_max_sessions = 16;
    c->user_max_kept = 512;
    c->user_max_kept_bytes = (uint64_t)256 << 20;
    c->user_max_fds = 8192;
    c->idle_timeout_ns = 600LL * 1000000000;
    c->send_timeout_ns = 30LL * 1000000000;
    c->fleet_interval_ns = 10LL * 1000000000;
    c->fleet_spool_max = (uint64_t)256 << 20;
}

/* The limits of queries and the per-user quotas (docs/cli-live.md "Daemon limits"): counts,
 * sizes and durations. 0 or -EINVAL for a bad value, -ENOENT for another key. */
static int apply_limit(cn_d_config *c, const char *k, const char *v)
{
    static const struct {
        const char *key;
        size_t off;
        unsigned max;
    } counts[] = {
        {"query_workers", offsetof(cn_d_config, query_workers), 64},
        {"query_max_transforms", offsetof(cn_d_config, query_max_transforms),
         CN_FMT_MAX_TRANSFORMS},
        {"user_max_clients", offsetof(cn_d_config, user_max_clients), 100000},
        {"user_max_sessions", offsetof(cn_d_config, user_max_sessions), 100000},
        {"user_max_kept", offsetof(cn_d_config, user_max_kept), CN_D__MAX_LOADED_SESSIONS},
        {"user_max_fds", offsetof(cn_d_config, user_max_fds), 1 << 24},
    };
    uint64_t u;
    int64_t ns;
    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
        if (strcmp(k, counts[i].key))
            continue;
        char *end;
        unsigned long n = strtoul(v, &end, 10);
        if (*end || !*v || n == 0 || n > counts[i].max)
            return -EINVAL;
        *(unsigned *)((char *)c + counts[i].off) = (unsigned)n;
        return 0;
    }
    if (!strcmp(k, "query_max_output") || !strcmp(k, "query_memory") ||
        !strcmp(k, "user_max_kept_bytes")) {
        if (cn_common_parse_size(v, &u) < 0 || u == 0)
            return -EINVAL;
        if (!strcmp(k, "query_max_output"))
            c->query_max_output = (size_t)u;
        else if (!strcmp(k, "query_memory"))
            c->query_memory = (size_t)u;
        else
            c->user_max_kept_bytes = u;
        return 0;
    }
    if (!strcmp(k, "query_cpu") || !strcmp(k, "idle_timeout") || !strcmp(k, "send_timeout")) {
        if (cn_common_parse_duration(v, &ns) < 0 || ns <= 0)
            return -EINVAL;
        *(!strcmp(k, "query_cpu")      ? &c->query_cpu_ns
          : !strcmp(k, "idle_timeout") ? &c->idle_timeout_ns
                                       : &c->send_timeout_ns) = ns;
        return 0;
    }
    return -ENOENT;
}

/* The fleet's string settings and their bits in `owned`. */
static const char **fleet_field(cn_d_config *c, const char *k, unsigned *bit)
{
    static const char *const keys[] = {
        "fleet_url",           "fleet_database",      "fleet_host",
        "fleet_labels",        "fleet_user",          "fleet_password_file",
        "fleet_pyroscope_url", "fleet_pyroscope_org", "fleet_otlp_url"};
    const char **fields[] = {
        &c->fleet_url,           &c->fleet_database,      &c->fleet_host,
        &c->fleet_labels,        &c->fleet_user,          &c->fleet_password_file,
        &c->fleet_pyroscope_url, &c->fleet_pyroscope_org, &c->fleet_otlp_url};
    for (unsigned i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        if (!strcmp(k, keys[i])) {
            *bit = 8u << i;
            return fields[i];
        }
    }
    return NULL;
}

void cn_d_config_clear(cn_d_config *c)
{
    if (c->owned & 1)
        free((char *)c->socket_path);
    if (c->owned & 2)
        free((char *)c->state_dir);
    if (c->owned & 4)
        free((char *)c->system_group);
    static const char *const fleet_keys[] = {
        "fleet_url",           "fleet_database",      "fleet_host",
        "fleet_labels",        "fleet_user",          "fleet_password_file",
        "fleet_pyroscope_url", "fleet_pyroscope_org", "fleet_otlp_url"};
    for (size_t i = 0; i < sizeof(fleet_keys) / sizeof(fleet_keys[0]); i++) {
        unsigned bit = 0;
        const char **f = fleet_field(c, fleet_keys[i], &bit);
        if (f && (c->owned & bit))
            free((char *)*f);
    }
    c->owned = 0;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

static int set_str(cn_d_config *c, const char **field, unsigned bit, const char *v)
{
    char *d = strdup(v);
    if (!d)
        return -ENOMEM;
    if (c->owned & bit)
        free((char *)*field);
    *field = d;
    c->owned |= bit;
    return 0;
}

/* Applies one setting. 0, -EINVAL, or -ENOENT for a key cn_d_config_keys does not list. */
static int apply(cn_d_config *c, const char *k, const char *v)
{
    uint64_t u;
    int64_t ns;
    if (!cn_opt_find(cn_d_config_keys, k))
        return -ENOENT;
    if (!strcmp(k, "socket"))
        return set_str(c, &c->socket_path, 1, v);
    if (!strcmp(k, "state_dir"))
        return set_str(c, &c->state_dir, 2, v);
    if (!strcmp(k, "system_group"))
        return set_str(c, &c->system_group, 4, v);
    unsigned bit = 0;
    const char **fleet = fleet_field(c, k, &bit);
    if (fleet)
        return set_str(c, fleet, bit, v);
    if (!strcmp(k, "fleet_interval")) {
        if (cn_common_parse_duration(v, &ns) < 0 || ns < 100000000LL)
            return -EINVAL; /* at least 100 ms */
        c->fleet_interval_ns = ns;
        return 0;
    }
    if (!strcmp(k, "fleet_spool_max")) {
        if (cn_common_parse_size(v, &u) < 0 || u == 0)
            return -EINVAL;
        c->fleet_spool_max = u;
        return 0;
    }
    if (!strcmp(k, "event_loop")) {
        if (!strcmp(v, "io_uring"))
            c->backend = CN_D_LOOP_IO_URING;
        else if (!strcmp(v, "epoll"))
            c->backend = CN_D_LOOP_EPOLL;
        else
            return -EINVAL;
        return 0;
    }
    if (!strcmp(k, "max_sessions") || !strcmp(k, "max_clients")) {
        char *end;
        unsigned long n = strtoul(v, &end, 10);
        if (*end || n == 0 || n > 100000)
            return -EINVAL;
        *(!strcmp(k, "max_sessions") ? &c->max_sessions : &c->max_clients) = (unsigned)n;
        return 0;
    }
    if (!strcmp(k, "max_request") || !strcmp(k, "session_memory") || !strcmp(k, "state_dir_max") ||
        !strcmp(k, "unwind_cache") || !strcmp(k, "symbol_cache") || !strcmp(k, "debug_cache")) {
        if (cn_common_parse_size(v, &u) < 0 || u == 0)
            return -EINVAL;
        if (!strcmp(k, "unwind_cache")) {
            c->unwind_cache = u;
        } else if (!strcmp(k, "symbol_cache")) {
            c->symbol_cache = u;
        } else if (!strcmp(k, "debug_cache")) {
            c->debug_cache = u;
        } else if (!strcmp(k, "max_request")) {
            if (u < 256 || u > ((uint64_t)64 << 20))
                return -EINVAL;
            c->max_request = (size_t)u;
        } else if (!strcmp(k, "session_memory")) {
            c->session_memory = (size_t)u;
        } else {
            c->state_dir_max = u;
        }
        return 0;
    }
    if (!strcmp(k, "retention") || !strcmp(k, "checkpoint") || !strcmp(k, "client_timeout")) {
        if (cn_common_parse_duration(v, &ns) < 0)
            return -EINVAL;
        if (!strcmp(k, "retention")) {
            if (ns == 0)
                return -EINVAL;
            c->retention_ns = ns;
        } else if (!strcmp(k, "checkpoint")) {
            c->checkpoint_ns = ns;
        } else {
            if (ns == 0)
                return -EINVAL;
            c->client_timeout_ns = ns;
        }
        return 0;
    }
    if (!strcmp(k, "fold_trim")) { /* a share: 0.0001 or 0.01% */
        char *end;
        errno = 0;
        double v_share = strtod(v, &end);
        if (end != v && *end == '%' && !end[1])
            v_share /= 100, end++;
        if (errno || end == v || *end || !(v_share >= 0 && v_share < 0.1))
            return -EINVAL;
        c->fold_trim = v_share;
        return 0;
    }
    if (!strcmp(k, "socket_mode")) {
        char *end;
        unsigned long m = strtoul(v, &end, 8);
        if (*end || m > 0777)
            return -EINVAL;
        c->socket_mode = (unsigned)m;
        return 0;
    }
    return apply_limit(c, k, v);
}

int cn_d_config_load(cn_d_config *c, const char *path, cn_err *err)
{
    FILE *f = fopen(path, "re");
    char line[1024];
    int lineno = 0, r = 0;
    if (!f) {
        r = -errno;
        snprintf(err->msg, sizeof(err->msg), "%s: %s", path, strerror(errno));
        return r;
    }
    while (fgets(line, sizeof(line), f)) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *s = trim(line);
        if (!*s)
            continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            snprintf(err->msg, sizeof(err->msg), "%s:%d: expected key = value", path, lineno);
            r = -EINVAL;
            break;
        }
        *eq = '\0';
        char *k = trim(s), *v = trim(eq + 1);
        r = apply(c, k, v);
        if (r == -ENOENT) {
            snprintf(err->msg, sizeof(err->msg), "%s:%d: unknown setting '%s'", path, lineno, k);
            r = -EINVAL;
            break;
        }
        if (r < 0) {
            snprintf(err->msg, sizeof(err->msg), "%s:%d: bad value for %s: '%s'", path, lineno, k,
                     v);
            break;
        }
    }
    fclose(f);
    return r;
}
