# The arm64 machine's Python workload (tests/arm64/vm_tests.sh, python check): work_a and
# work_b run the same rounds, 7 and 3 of them per cycle, so they share the CPU 70/30 by
# construction (as shares.c's functions do: under emulation on a loaded host, a thread's own
# CPU clock counts the time its vCPU was preempted, so a split measured with it is noisier
# than the sampling it would check). A round is a pure-Python loop and a call into C:
# math.sin over a range (libm's sin) or zlib.compress and crc32 (libz), alternately.
# argv[1]: seconds of the loop, which starts at SIGUSR1 (the check sends it once canopyd
# registered the interpreter: that takes 0.2-1 s emulated, and samples taken before it have
# no Python frames). Prints "ready" while it waits and "cycles N" at the end.
import _signal
import math
import sys
import time
import zlib

BUF = bytes((i * 7919) & 255 for i in range(1024))
R = range(60)


def round_(r):
    s = 0
    for i in range(100):
        s += i * i
    if r & 1:
        return s + zlib.crc32(zlib.compress(BUF, 6))
    return s + int(sum(map(math.sin, R)))


def work_a(n):
    return sum(round_(r) for r in range(n))


def work_b(n):
    return sum(round_(r) for r in range(n))


def main(seconds):
    _signal.signal(_signal.SIGUSR1, lambda sig, frame: None)
    print("ready", flush=True)
    _signal.pause()
    end = time.monotonic() + seconds
    cycles = 0
    while time.monotonic() < end:
        work_a(14)
        work_b(6)
        cycles += 1
    print("cycles %d" % cycles, flush=True)


main(float(sys.argv[1]))
