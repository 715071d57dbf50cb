#!/usr/bin/env python3
"""daemon_watch.py: canopyd's resources over time, for the churn and soak tests.

  daemon_watch.py watch SOCK PIDFILE OUT INTERVAL
      every INTERVAL s until SIGTERM, appends one JSON line to OUT: t (s since start), pid
      (read from PIDFILE each time: a restarted canopyd is followed), rss_kb (VmRSS),
      anon_kb (RssAnon), img_kb (the sampler's object images, from smaps: images_kb),
      run_ns and wait_ns (/proc/PID/schedstat: the loop thread's time on a CPU and waiting
      for one), fds (/proc/PID/fd) and of those fds_file (object files: files outside
      /proc and /dev, not memfds, directories nor the standard streams; the symbolizer's
      cached objects and the unwind tables read as lookups need them hold them), from
      `status`: lost, the symbol cache's heap bytes and objects, the unwind cache's open
      files;
      from `sessions`: running sessions, their samples, lost and profile memory (summed);
      and klost, the records the kernel dropped for canopyd's perf events (perf_lost.py).
      A sample canopyd did not answer is written with "down": true.
  daemon_watch.py report OUT WARMUP [--own-mb C] [--own-k K] [--fds N]
      prints a table (one row per ~10% of the run) and, per canopyd lifetime (pid), after
      WARMUP s of that lifetime: the growth of RSS; of "own", RSS less what canopyd reports
      and bounds itself (the profiles' memory, within session_memory; the symbol cache's
      heap) and less the sampler's object images (one per object file any process on the
      machine maps: what other processes run, not churn), as its steady rate (steady_growth: one-off jumps, the
      sampler reading the image of a big binary another process on this machine started,
      do not count, a leak that grows with every churned process does); and the fds that
      are not cached object files nor cached mount tables (sockets, pipes, memfds, other
      /proc files; printed by kind). Exits 1 when own's
      steady growth exceeds K x the profiles' growth + C MiB (K: tables grow by doubling,
      the blocks they leave stay with the allocator), when those fds grow by more than N
      (the fewest over the last WINDOW samples against the fewest over the first: what
      stays open, not what a query in flight holds for a moment),
      when the file fds exceed the symbol cache's objects and the unwind cache's open files
      by more than N (files opened by loads in flight), or when more than
      32 mount tables are open (two caches of 16).
"""
import json
import os
import signal
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemon_proto  # noqa: E402
import perf_lost  # noqa: E402


def status_kb(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def images_kb(pid):
    """Resident kB of the sampler's object images: private anonymous mappings made with
    MAP_NORESERVE (VmFlags nr) of at most 4 GiB (CN_SMP_MAX_OBJECT_BYTES; ASan's shadow and
    allocator regions are larger), less glibc's arena heaps (also nr, at 64 MiB-aligned
    addresses). An estimate, until canopyd reports what its images hold."""
    total = 0
    name = None
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            head = line.split()
            if "-" in head[0] and len(head) >= 5 and ":" not in head[0]:
                lo, hi = (int(x, 16) for x in head[0].split("-"))
                name = head[5] if len(head) > 5 else ""
                anon = name == "" and (hi - lo) <= 4 << 30 and lo % (64 << 20) != 0
            elif head[0] == "Rss:":
                rss = int(head[1])
            elif head[0] == "VmFlags:" and anon and "nr" in head[1:]:
                total += rss
    return total


def fd_kind(link):
    """What an fd that is not an object file is, without its instance: "socket",
    "anon_inode:[pidfd]", "/proc/*/maps", "memfd:NAME": to say which kind grew."""
    if link.startswith("/proc/"):
        parts = link.split("/")
        return "/proc/*/" + "/".join(parts[3:]) if len(parts) > 3 else link
    if link.startswith("/memfd:"):
        return "memfd:" + link[7:].split(" ")[0]
    return link.split(":[")[0] if not link.startswith("anon_inode:") else link


def sample(sock, pid):
    d = {"pid": pid}
    try:
        d["rss_kb"] = status_kb(pid, "VmRSS")
        d["anon_kb"] = status_kb(pid, "RssAnon")
        d["img_kb"] = images_kb(pid)
        with open("/proc/%d/schedstat" % pid) as f:  # the loop thread: ns on CPU, waiting
            d["run_ns"], d["wait_ns"] = (int(x) for x in f.read().split()[:2])
        d["fds"] = d["fds_file"] = d["fds_mounts"] = 0
        kinds = {}
        for name in os.listdir("/proc/%d/fd" % pid):
            try:
                link = os.readlink("/proc/%d/fd/%s" % (pid, name))
            except OSError:
                continue
            d["fds"] += 1
            # Object files: not the standard streams (the log), memfds ("/memfd:NAME
            # (deleted)": a query's answer), nor directories (the cgroup root).
            is_file = (int(name) > 2 and link.startswith("/")
                       and not link.startswith(("/proc/", "/dev/", "/memfd:"))
                       and not os.path.isdir(link))
            d["fds_file"] += is_file
            # The mount tables' caches (cn_obj_mounts: one open mountinfo per mount
            # namespace, at most 16 in each of the sampler's and the symbolizer's).
            mounts = link.startswith("/proc/") and link.endswith("/mountinfo")
            d["fds_mounts"] += mounts
            if not is_file and not mounts:
                kind = fd_kind(link)
                kinds[kind] = kinds.get(kind, 0) + 1
        d["other_kinds"] = kinds
        st = daemon_proto.call(sock, {"cmd": "status"})
        ss = daemon_proto.call(sock, {"cmd": "sessions"})
        d["klost"] = perf_lost.kernel_lost(pid)["lost"]
    except (OSError, EOFError, ValueError):
        d["down"] = True
        return d
    d["lost"] = st.get("lost", 0)
    d["sym_heap"] = st.get("symbol_cache", {}).get("heap_bytes", 0)
    d["sym_objects"] = st.get("symbol_cache", {}).get("objects", 0)
    d["unw_files"] = st.get("unwind_cache", {}).get("open_files", 0)
    run = [s for s in ss.get("sessions", []) if s.get("state") == "running"]
    d["running"] = len(run)
    d["sessions"] = len(ss.get("sessions", []))
    d["samples"] = sum(s["samples"] for s in run)
    d["slost"] = sum(s["lost"] for s in run)
    d["memory"] = sum(s["memory"] for s in ss.get("sessions", []))
    return d


def watch(sock, pidfile, out, interval):
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    t0 = time.monotonic()
    with open(out, "a") as f:
        while not stop:
            try:
                with open(pidfile) as p:
                    pid = int(p.read().strip() or 0)
            except (OSError, ValueError):
                pid = 0
            d = sample(sock, pid) if pid > 0 else {"pid": 0, "down": True}
            d["t"] = round(time.monotonic() - t0, 2)
            f.write(json.dumps(d) + "\n")
            f.flush()
            time.sleep(interval)


def stretch(rows):
    """By how much the machine stretched canopyd's loop thread's wall time: (time on a CPU
    + time runnable but waiting for one) / time on a CPU, over every lifetime."""
    run = wait = 0
    by_pid = {}
    for r in rows:
        if "run_ns" in r:
            by_pid.setdefault(r["pid"], []).append(r)
    for life in by_pid.values():
        run += life[-1]["run_ns"] - life[0]["run_ns"]
        wait += life[-1]["wait_ns"] - life[0]["wait_ns"]
    return (run + wait) / run if run > 0 else 1.0


WINDOW = 5  # samples (10 s at the tests' 2 s): see report's fd growth


def own_mb(d):
    return (d["rss_kb"] * 1024 - d["memory"] - d["sym_heap"] - d["img_kb"] * 1024) / 2**20



def steady_growth(pts):
    """The trend of (t, MiB) points over their span: the median of the slopes between every
    two points (Theil-Sen), times the span. A one-off jump moves few of the slopes; a leak
    that grows with every churned process moves all of them. It replaced the median 2-s
    step times the steps, which a sawtooth biases: memory that rises a few MiB a step and
    falls back at each malloc_trim has a rising median step, and a CI run under load read
    "steady +196 MiB" where the own memory had grown by 0.1 MiB over the run."""
    slopes = [(b[1] - a[1]) / (b[0] - a[0]) for i, a in enumerate(pts) for b in pts[i + 1:]
              if b[0] > a[0]]
    return statistics.median(slopes) * (pts[-1][0] - pts[0][0]) if slopes else 0.0

def report(out, warmup, own_c, own_k, fds_max):
    rows = [json.loads(line) for line in open(out)]
    up = [r for r in rows if not r.get("down")]
    if not up:
        sys.exit("no sample of a running canopyd")
    print("%7s %8s %8s %8s %9s %5s %9s %8s %8s" % ("t(s)", "pid", "RSS MiB", "own MiB", "prof MiB",
                                                   "fds", "samples", "lost", "klost"))
    step = max(1, len(up) // 10)
    for r in up[::step] + ([up[-1]] if (len(up) - 1) % step else []):
        print("%7.1f %8d %8.1f %8.1f %9.1f %5d %9d %8d %8d" % (
            r["t"], r["pid"], r["rss_kb"] / 1024, own_mb(r), r["memory"] / 2**20, r["fds"],
            r["samples"], r["lost"], r["klost"]))
    bad = []
    first = {}
    for r in up:
        first.setdefault(r["pid"], r["t"])
    for pid, t0 in first.items():
        life = [r for r in up if r["pid"] == pid and r["t"] >= t0 + warmup]
        if len(life) < 10:  # under 20 s past its warm-up: too short to judge
            continue
        base, last = life[0], life[-1]
        steady = steady_growth([(r["t"], own_mb(r)) for r in life])
        g_prof = (last["memory"] - base["memory"]) / 2**20
        other = [r["fds"] - r["fds_file"] - r.get("fds_mounts", 0) for r in life]
        # What stays open: the fewest over the first and the last WINDOW samples. A leak
        # stays in every sample after it; an fd of a query, a load or a connection in
        # flight is in one now and then (under a loaded CI run, once, 5 of them in one
        # sample where the limit was 4, when the growth was judged on the most).
        g_other = min(other[-WINDOW:]) - min(other[:WINDOW])
        over_files = max(r["fds_file"] - r["sym_objects"] - r.get("unw_files", 0) for r in life)
        print("canopyd %d: %.0f s after warm-up: RSS %+.1f MiB, own %+.1f MiB (steady %+.1f), "
              "profiles %+.1f MiB; fds %d..%d, not cached files %d..%d, files - cached objects "
              "- open unwind tables <= %d" % (pid, last["t"] - base["t"], (last["rss_kb"] - base["rss_kb"]) / 1024,
                         own_mb(last) - own_mb(base), steady, g_prof, min(r["fds"] for r in life),
                         max(r["fds"] for r in life), min(other), max(other), over_files))
        kinds = sorted({k for r in life for k in r.get("other_kinds", {})})
        ranges = ["%s %d..%d" % (k, min(r.get("other_kinds", {}).get(k, 0) for r in life),
                                 max(r.get("other_kinds", {}).get(k, 0) for r in life))
                  for k in kinds]
        print("canopyd %d: fds other than cached files, by kind: %s" % (pid, ", ".join(ranges)))
        if own_c is not None and steady > own_k * max(g_prof, 0) + own_c:
            bad.append("canopyd %d: own memory's steady growth %.1f MiB > %.1f x %.1f + %.1f MiB"
                       % (pid, steady, own_k, g_prof, own_c))
        if fds_max is not None and g_other > fds_max:
            bad.append("canopyd %d: fds other than cached files grew by %d (limit %d), the "
                       "fewest over the first and the last %d samples: at t=%.1f %s, at t=%.1f "
                       "%s" % (pid, g_other, fds_max, WINDOW, life[0]["t"],
                               life[0].get("other_kinds"), life[-1]["t"],
                               life[-1].get("other_kinds")))
        mounts = max(r.get("fds_mounts", 0) for r in life)
        if mounts > 32:
            bad.append("canopyd %d: %d mount tables open, more than the caches' 2 x 16"
                       % (pid, mounts))
        if fds_max is not None and over_files > fds_max:
            bad.append("canopyd %d: %d file fds more than the symbol cache's objects and the "
                       "unwind tables read as needed (limit %d)" % (pid, over_files, fds_max))
    for b in bad:
        print("FAIL: " + b, file=sys.stderr)
    sys.exit(1 if bad else 0)


def main(argv):
    if len(argv) == 6 and argv[1] == "watch":
        watch(argv[2], argv[3], argv[4], float(argv[5]))
    elif len(argv) >= 4 and argv[1] == "report":
        opts = dict(zip(argv[4::2], argv[5::2]))
        report(argv[2], float(argv[3]),
               float(opts["--own-mb"]) if "--own-mb" in opts else None,
               float(opts.get("--own-k", 1)),
               int(opts["--fds"]) if "--fds" in opts else None)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
