# tests/unit/test_interp_real.c's code-object reuse workload: every 0.3 s it compiles a new
# function gen_NNN (the same code, another name), drops the one before it, and spins in the
# new one, for argv[1] seconds. The dropped code object is freed and the next one is most
# often allocated at its address: a cached name must not outlive its object. Prints "ready",
# then "switch TIME_NS NAME" (CLOCK_MONOTONIC) each time it starts spinning in a function.
import gc
import sys
import time

SRC = """
def gen_%03d(end):
    s = 0
    while time.monotonic() < end:
        for i in range(2000):
            s += i * i
    return s
"""


def main(seconds):
    print("ready", flush=True)
    stop = time.monotonic() + seconds
    k = 0
    while time.monotonic() < stop:
        ns = {"time": time}
        exec(SRC % (k % 1000), ns)
        f = ns["gen_%03d" % (k % 1000)]
        del ns
        gc.collect()
        print("switch %d gen_%03d" % (time.monotonic_ns(), k % 1000), flush=True)
        f(time.monotonic() + 0.3)
        del f
        k += 1


if __name__ == "__main__":
    main(float(sys.argv[1]))
