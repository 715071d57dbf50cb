#!/usr/bin/env python3
"""hold_fds.py PID PREFIX FILE: copies into this process every fd of PID whose /proc link
starts with PREFIX (pidfd_getfd, as root), writes how many to FILE (at once, by a rename),
then sleeps 60 s or until killed. It stands in for another process that holds the same
files as canopyd: a forked child, or the kernel's deferred teardown after a SIGKILL."""
import ctypes
import os
import sys
import time

SYS_PIDFD_GETFD = 438


def main(argv):
    pid, prefix, out = int(argv[1]), argv[2], argv[3]
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = os.pidfd_open(pid)
    held = []
    for name in os.listdir("/proc/%d/fd" % pid):
        try:
            if not os.readlink("/proc/%d/fd/%s" % (pid, name)).startswith(prefix):
                continue
        except OSError:
            continue
        fd = libc.syscall(SYS_PIDFD_GETFD, pidfd, int(name), 0)
        if fd < 0:
            sys.exit("pidfd_getfd: %s" % os.strerror(ctypes.get_errno()))
        held.append(fd)
    with open(out + ".tmp", "w") as f:
        f.write("%d\n" % len(held))
    os.rename(out + ".tmp", out)
    time.sleep(60)


if __name__ == "__main__":
    main(sys.argv)
