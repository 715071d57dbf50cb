# tests/unit/test_interp_real.c's off-CPU workload: nap() sleeps 2 ms at a time, so the
# thread is switched out inside nap (time.sleep called from it) about 500 times a second.
import sys
import time


def nap():
    time.sleep(0.002)


def main(seconds):
    print("ready", flush=True)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        nap()


if __name__ == "__main__":
    main(float(sys.argv[1]))
