# tests/unit/test_interp_real.c's workload: work_a, work_b and Runner.work_c share the CPU
# 50/30/20, each in its own loop, for argv[1] seconds. Prints "ready" once the loop runs.
# The split is kept by measuring each call's thread CPU time and sizing the next round
# accordingly. SIGUSR1 starts a measured window, SIGUSR2 ends it and prints
# "shares A B C" (per mille of the three functions' CPU time in the window): the truth the
# sampled shares are checked against. CANOPY_INTERP_DEPTH=N runs the loop N calls deep.
import os
import signal
import sys
import time

clock = time.thread_time_ns


def work_a(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


def work_b(n):
    s = 0
    for i in range(n):
        s += i ^ 3
    return s


class Runner:
    # qualname Runner.work_c from 3.11 (co_qualname), work_c before
    def work_c(self, n):
        s = 0
        for i in range(n):
            s += i + 7
        return s


window = [0, 0, 0]
measuring = [False]


def start(sig, frame):
    window[:] = [0, 0, 0]
    measuring[0] = True


def stop(sig, frame):
    measuring[0] = False
    total = sum(window) or 1
    print("shares %d %d %d" % tuple(1000 * w // total for w in window), flush=True)


def main(seconds):
    r = Runner()
    funcs = (work_a, work_b, r.work_c)
    target = (0.5, 0.3, 0.2)
    per_iter = [50.0, 50.0, 50.0]  # ns per iteration, learned
    round_ns = 10e6
    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    print("ready", flush=True)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for k in range(3):
            n = max(1, int(round_ns * target[k] / per_iter[k]))
            t = clock()
            funcs[k](n)
            dt = clock() - t
            per_iter[k] = 0.8 * per_iter[k] + 0.2 * (dt / n)
            if measuring[0]:
                window[k] += dt


def deep(n, seconds):
    if n <= 0:
        return main(seconds)
    return deep(n - 1, seconds)


if __name__ == "__main__":
    sys.setrecursionlimit(10000)
    deep(int(os.environ.get("CANOPY_INTERP_DEPTH", "0")), float(sys.argv[1]))
