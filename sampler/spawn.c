/* spawn.c — a child held before exec, for `canopy run`: the child blocks reading a pipe
 * until the profiler has attached, then execs the command. Sampling with enable_on_exec
 * starts exactly at the command's first instruction. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "smp_internal.h"

/* In the child: wait for the release byte (EOF without it means the parent gave up). */
static void child_main(char *const argv[], int rfd, uid_t uid, gid_t gid)
{
    char c;
    ssize_t n;
    do
        n = read(rfd, &c, 1);
    while (n < 0 && errno == EINTR);
    close(rfd);
    if (n != 1)
        _exit(127);
    if (uid != (uid_t)-1) {
        if (setgroups(0, NULL) < 0 && errno != EPERM)
            _exit(127);
        if (setgid(gid) < 0 || setuid(uid) < 0)
            _exit(127);
    }
    execvp(argv[0], argv);
    _exit(127);
}

int cn_smp_spawn(char *const argv[], uid_t uid, gid_t gid, cn_smp_child *ret)
{
    int p[2];
    if (!argv || !argv[0] || !ret)
        return -EINVAL;
    if (pipe2(p, O_CLOEXEC) < 0)
        return -errno;
    pid_t pid = fork();
    if (pid < 0) {
        int e = -errno;
        close(p[0]);
        close(p[1]);
        return e;
    }
    if (pid == 0) {
        close(p[1]);
        child_main(argv, p[0], uid, gid);
    }
    close(p[0]);
    ret->pid = pid;
    ret->release_fd = p[1];
    return 0;
}

int cn_smp_child_release(cn_smp_child *c)
{
    if (!c)
        return -EINVAL;
    if (c->release_fd < 0)
        return 0;
    ssize_t n;
    do
        n = write(c->release_fd, "g", 1);
    while (n < 0 && errno == EINTR);
    int e = n == 1 ? 0 : -errno;
    close(c->release_fd);
    c->release_fd = -1;
    return e;
}

void cn_smp_child_abort(cn_smp_child *c)
{
    if (!c || c->pid <= 0)
        return;
    if (c->release_fd >= 0) {
        close(c->release_fd); /* EOF: the child exits 127 without exec */
        c->release_fd = -1;
    }
    kill(c->pid, SIGKILL);
    while (waitpid(c->pid, NULL, 0) < 0 && errno == EINTR)
        ;
    c->pid = -1;
}
