# A pure-Python CPU-bound loop for -X perf (tests/integration/test_symbolizer_pyperf.sh):
# inner() holds the time, called from outer(). Argument: seconds (default 2). Prints its
# pid first (the test removes the /tmp/perf-PID.map that -X perf writes).
import os
import sys
import time
print("pid", os.getpid(), flush=True)
def inner(n):
    s = 0
    for i in range(n):
        s += i * i % 7
    return s
def outer(sec):
    end = time.time() + sec
    t = 0
    while time.time() < end:
        t += inner(20000)
    return t
print(outer(float(sys.argv[1]) if len(sys.argv) > 1 else 2.0))
