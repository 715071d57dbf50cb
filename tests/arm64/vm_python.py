# The arm64 machine's Python workload (tests/arm64/vm_tests.sh, python check): work_a and
# work_b share the CPU 60/40, each a pure-Python loop that calls into C every round (work_a:
# math.sin over a range, libm's sin; work_b: zlib.compress and crc32, libz). Each sizes its
# next call by its own thread CPU time, so the split holds over any window; at the end it
# prints "shares A B" (% of the two functions' thread CPU time): the truth the sampled shares
# are checked against. argv[1]: seconds.
import math
import sys
import time
import zlib

clock = time.thread_time_ns
BUF = bytes((i * 7919) & 255 for i in range(2048))
R = range(100)


def work_a(n):
    s = 0
    for r in range(n):
        for i in range(100):
            s += i * i
        s += int(sum(map(math.sin, R)))
    return s


def work_b(n):
    s = 0
    for r in range(n):
        for i in range(100):
            s += i ^ 3
        s += zlib.crc32(zlib.compress(BUF, 6))
    return s


def main(seconds):
    funcs = (work_a, work_b)
    target = (0.6, 0.4)
    per = [1e6, 1e6]  # ns per round, learned
    spent = [0, 0]
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for k in range(2):
            n = max(1, int(20e6 * target[k] / per[k]))
            t = clock()
            funcs[k](n)
            dt = clock() - t
            per[k] = 0.8 * per[k] + 0.2 * (dt / n)
            spent[k] += dt
    tot = sum(spent) or 1
    print("shares %.1f %.1f" % tuple(100 * x / tot for x in spent), flush=True)


main(float(sys.argv[1]))
