# tests/unit/test_interp_real.c's sub-interpreter workload (CPython 3.12+): a thread runs
# sub_spin inside a sub-interpreter while the main thread runs main_spin in the main one, for
# argv[1] seconds. Prints "ready MAIN_TID WORKER_TID" (native thread ids) once both spin.
# argv[2] says who creates the sub-interpreter: "own" (the worker thread, so its first thread
# state is the worker's) or "borrowed" (the main thread; 3.12's run_string then runs the
# worker on that first state, whose thread_id is the main thread's).
import sys
import threading
import time

try:
    import _interpreters as interpreters  # 3.13
except ImportError:
    import _xxsubinterpreters as interpreters  # 3.12

SUB_CODE = """
import time


def sub_spin(end):
    s = 0
    while time.monotonic() < end:
        for i in range(10000):
            s += i * i
    return s


sub_spin(%r)
"""


def main_spin(end):
    s = 0
    while time.monotonic() < end:
        for i in range(10000):
            s += i ^ 3
    return s


def main(seconds, mode):
    end = time.monotonic() + seconds
    tids = {}
    started = threading.Barrier(2)
    iid = interpreters.create() if mode == "borrowed" else None

    def worker():
        tids["worker"] = threading.get_native_id()
        own = interpreters.create() if iid is None else iid
        started.wait()
        interpreters.run_string(own, SUB_CODE % end)

    t = threading.Thread(target=worker)
    t.start()
    started.wait()
    print("ready %d %d" % (threading.get_native_id(), tids["worker"]), flush=True)
    main_spin(end)
    t.join()


if __name__ == "__main__":
    main(float(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "own")
