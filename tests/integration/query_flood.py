#!/usr/bin/env python3
"""Query load for canopyd's fairness test (test_daemon_query_flood.sh).

query_flood.py attack SOCK SESSION SECONDS CONNS: CONNS connections send pathological
queries on SESSION for SECONDS (1024 transforms, full text trees with 60 transforms,
timelines, lines) and print the error codes and messages seen, as JSON.
query_flood.py probe SOCK SESSION SECONDS: one connection asks for SESSION's tree every
50 ms and prints the latencies (ms), as JSON."""
import json
import sys
import threading
import time

sys.path.insert(0, sys.argv[0].rsplit("/", 1)[0])
from daemon_proto import call_on, connect  # noqa: E402


def attack(path, session, seconds, conns):
    stop = time.time() + seconds
    codes, msgs, errors = {}, {}, []
    lock = threading.Lock()
    queries = [
        {"cmd": "tree", "session": session, "transforms": ["merge:f%d" % i for i in range(1024)]},
        {"cmd": "tree", "session": session, "format": "text",
         "transforms": ["merge:f%d" % (i * 7) for i in range(60)]},
        {"cmd": "timeline", "session": session},
        {"cmd": "tree", "session": session, "format": "text", "view": "callers", "view_func": "f1"},
        {"cmd": "lines", "session": session, "function": "f2"},
    ]

    def worker(k):
        try:
            with connect(path, 30) as s:
                i = k
                while time.time() < stop:
                    r = call_on(s, queries[i % len(queries)])
                    i += 1
                    code = "ok" if r.get("ok") else r["error"]["code"]
                    with lock:
                        codes[code] = codes.get(code, 0) + 1
                        if code != "ok":
                            m = r["error"]["message"]
                            msgs[m[:60]] = msgs.get(m[:60], 0) + 1
        except Exception as e:  # noqa: BLE001 - reported to the test
            with lock:
                errors.append(repr(e))

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(conns)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    print(json.dumps({"codes": codes, "messages": msgs, "errors": errors[:5]}))


def probe(path, session, seconds):
    lat, errors = [], []
    stop = time.time() + seconds
    with connect(path, 30) as s:
        while time.time() < stop:
            t0 = time.time()
            r = call_on(s, {"cmd": "tree", "session": session, "format": "json"})
            lat.append((time.time() - t0) * 1000)
            if not r.get("ok"):
                errors.append(r)
            time.sleep(max(0, 0.05 - (time.time() - t0)))
    lat.sort()
    print(json.dumps({"n": len(lat), "median_ms": lat[len(lat) // 2] if lat else None,
                      "p90_ms": lat[len(lat) * 9 // 10] if lat else None, "errors": errors[:3]}))


if __name__ == "__main__":
    if sys.argv[1] == "attack":
        attack(sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5]))
    else:
        probe(sys.argv[2], sys.argv[3], float(sys.argv[4]))
