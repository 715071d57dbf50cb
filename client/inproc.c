/* inproc.c — the engine hosted inside the client when no daemon answers.
 *
 * The same pieces canopyd hosts (live/cn_live.h): one cn_live_symbolizer (its worker
 * thread resolves frames in the background) and one cn_live_session that owns the perf
 * rings and the profile. The client's thread is the session's owner: it polls the ring fds and the
 * symbolizer's fd and pumps them; queries run on the same thread between pumps.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "live.h"

struct cn_cli_local {
    cn_live_symbolizer *sym;
    cn_live_session *session;
};

int cn_cli_local_start(const cn_live_session_opts *spec, cn_cli_local **out, cn_err *err)
{
    cn_live_session_opts o = *spec; /* borrows spec's strings; its labels are not used here */
    cn_cli_local *l = NULL;
    int rc = cn_live_session_opts_validate(&o, err);

    if (rc < 0)
        return rc;
    if (!(l = calloc(1, sizeof(*l)))) {
        cn_err_set(err, 0, "out of memory");
        return -ENOMEM;
    }
    rc = cn_live_symbolizer_new(0, 0, &l->sym, err);
    if (rc < 0)
        goto fail;
    o.owner = getuid();
    rc = cn_live_session_new(&o, l->sym, &l->session, err);
    if (rc < 0)
        goto fail;
    *out = l;
    return 0;
fail:
    if (err && !err->msg[0])
        cn_err_set(err, 0, "%s", strerror(-rc));
    cn_cli_local_free(l);
    return rc;
}

cn_cli_local *cn_cli_local_free(cn_cli_local *l)
{
    if (!l)
        return NULL;
    /* Sessions before the symbolizer they use (cn_live.h). */
    cn_live_session_free(l->session);
    cn_live_symbolizer_free(l->sym);
    free(l);
    return NULL;
}

cn_live_session *cn_cli_local_session(cn_cli_local *l)
{
    return l->session;
}

int cn_cli_local_pump(cn_cli_local *l, int timeout_ms, cn_err *err)
{
    const int *fds;
    size_t n = cn_live_session_fds(l->session, &fds);
    struct pollfd pfd[257];
    size_t np = 0;
    int rc;

    pfd[np++] = (struct pollfd){.fd = cn_live_symbolizer_fd(l->sym), .events = POLLIN};
    for (size_t i = 0; i < n && np < sizeof(pfd) / sizeof(pfd[0]); i++)
        pfd[np++] = (struct pollfd){.fd = fds[i], .events = POLLIN};
    if (timeout_ms > 0 && poll(pfd, np, timeout_ms) < 0 && errno != EINTR) {
        rc = -errno;
        cn_err_set(err, 0, "poll: %s", strerror(errno));
        return rc;
    }
    /* Pump on a timer too: it is cheap when nothing is there, and it is where the
     * session notices the target's exit and its duration. */
    rc = cn_live_session_pump(l->session);
    if (rc < 0) {
        cn_err_set(err, 0, "sampling failed: %s", strerror(-rc));
        return rc;
    }
    rc = cn_live_symbolizer_dispatch(l->sym);
    if (rc < 0) {
        cn_err_set(err, 0, "symbolizer failed: %s", strerror(-rc));
        return rc;
    }
    return 0;
}

int cn_cli_local_finish(cn_cli_local *l, int timeout_ms, cn_err *err)
{
    int rc = cn_live_session_stop(l->session);
    if (rc < 0) {
        cn_err_set(err, 0, "stopping the session: %s", strerror(-rc));
        return rc;
    }
    rc = cn_live_symbolizer_flush(l->sym, timeout_ms);
    if (rc == -ETIMEDOUT)
        rc = 0; /* what is not resolved yet stays LIB+0xOFFSET */
    if (rc < 0)
        cn_err_set(err, 0, "symbolizer failed: %s", strerror(-rc));
    return rc;
}
