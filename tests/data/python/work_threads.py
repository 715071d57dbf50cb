# tests/unit/test_interp_real.c's threaded workload: thread A runs work_a, thread B runs
# work_b, the main thread waits; for argv[1] seconds. Prints "ready TID_A TID_B" (native
# thread ids) once both threads run: each thread's samples must name its own function.
# With argv[2] == "late" it first prints "waiting" and starts the threads on SIGUSR1 (threads
# born after the perf event was opened: they run under inherited events).
import signal
import sys
import threading
import time


def work_a(stop):
    s = 0
    while not stop.is_set():
        for i in range(10000):
            s += i * i
    return s


def work_b(stop):
    s = 0
    while not stop.is_set():
        for i in range(10000):
            s += i ^ 3
    return s


def main(seconds, late):
    if late:
        go = threading.Event()
        signal.signal(signal.SIGUSR1, lambda sig, frame: go.set())
        print("waiting", flush=True)
        go.wait(seconds)
    stop = threading.Event()
    tids = {}
    started = threading.Barrier(3)

    def run(name, f):
        tids[name] = threading.get_native_id()
        started.wait()
        f(stop)

    ts = [threading.Thread(target=run, args=("a", work_a)),
          threading.Thread(target=run, args=("b", work_b))]
    for t in ts:
        t.start()
    started.wait()
    print("ready %d %d" % (tids["a"], tids["b"]), flush=True)
    time.sleep(seconds)
    stop.set()
    for t in ts:
        t.join()


if __name__ == "__main__":
    main(float(sys.argv[1]), len(sys.argv) > 2 and sys.argv[2] == "late")
