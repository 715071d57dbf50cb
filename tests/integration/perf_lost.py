#!/usr/bin/env python3
"""perf_lost.py PID: the records the kernel dropped for PID's perf events, as the kernel
counts them: every fd of PID that is a perf event is copied here (pidfd_getfd, as root)
and read (read_format PERF_FORMAT_LOST, which canopyd's sampler sets: {value, lost}).
Prints {"fds": N, "lost": SUM, "unreadable": M}; an fd read without the lost field (a
kernel before 6.0) counts in unreadable. The ground truth for the `lost` canopyd reports
from the LOST records in its rings (test_daemon_churn.sh)."""
import ctypes
import json
import os
import struct
import sys

SYS_PIDFD_GETFD = 438


def kernel_lost(pid):
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = os.pidfd_open(pid)
    n = lost = unreadable = 0
    for name in os.listdir("/proc/%d/fd" % pid):
        try:
            if os.readlink("/proc/%d/fd/%s" % (pid, name)) != "anon_inode:[perf_event]":
                continue
        except OSError:
            continue  # closed meanwhile
        fd = libc.syscall(SYS_PIDFD_GETFD, pidfd, int(name), 0)
        if fd < 0:
            continue  # closed meanwhile
        try:
            b = os.read(fd, 64)
        finally:
            os.close(fd)
        n += 1
        if len(b) == 16:
            lost += struct.unpack("QQ", b)[1]
        else:
            unreadable += 1
    os.close(pidfd)
    return {"fds": n, "lost": lost, "unreadable": unreadable}


def main(argv):
    print(json.dumps(kernel_lost(int(argv[1]))))


if __name__ == "__main__":
    main(sys.argv)
