#!/usr/bin/env python3
"""A tiny canopyd protocol client for the daemon's integration tests (docs/protocol.md).

  daemon_proto.py call SOCK JSON            one request; prints the response line
  daemon_proto.py flood SOCK SECONDS        malformed, oversized, half-sent requests and
                                            abrupt disconnects; checks that well-formed
                                            requests on other connections keep being answered
  daemon_proto.py load SOCK SESSION N MS S  N clients each asking for a tree every MS ms for
                                            S seconds; prints {"queries", "median_ms", "max_ms"}
  daemon_proto.py bench SOCK SESSION N JSONQUERY   N tree round trips; prints the median ms
"""
import json
import socket
import statistics
import sys
import threading
import time


def connect(path, timeout=60):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(path)
    return s


def read_line(s, buf=b""):
    while b"\n" not in buf:
        d = s.recv(1 << 20)
        if not d:
            raise EOFError("daemon closed the connection")
        buf += d
    line, rest = buf.split(b"\n", 1)
    return line, rest


def call_on(s, req):
    s.sendall((json.dumps(req) + "\n").encode())
    line, _ = read_line(s)
    return json.loads(line)


def call(path, req):
    with connect(path) as s:
        return call_on(s, req)


def is_busy(r):
    """The answer to a connection over max_clients: the flood's closed connections still
    count until canopyd reads their EOF, so any abuser may meet the limit."""
    return not r.get("ok") and r.get("error", {}).get("code") == "busy"


def flood(path, seconds):
    stop = time.time() + seconds
    errors = []
    answered = [0]
    busy = [0]
    abuser_busy = [0]
    held = []
    abuse_count = {}

    def abuse(kind):
        while time.time() < stop:
            time.sleep(0.005)
            abuse_count[kind] = abuse_count.get(kind, 0) + 1
            try:
                s = connect(path, 5)
                if kind == "garbage":
                    s.sendall(b"\x00\xff garbage {{{\n[1,2]\n{\"cmd\":7}\n{\"v\":9,\"cmd\":\"x\"}\n")
                    rest = b""
                    for _ in range(4):
                        line, rest = read_line(s, rest)
                        r = json.loads(line)
                        if r["ok"]:
                            errors.append("garbage answered ok")
                        if is_busy(r):
                            abuser_busy[0] += 1  # over the client limit: one answer, then closed
                            break
                elif kind == "oversized":
                    try:
                        s.sendall(b"{\"cmd\":\"" + b"A" * 200000)
                        line, _ = read_line(s)
                        r = json.loads(line)
                        if is_busy(r):
                            abuser_busy[0] += 1
                        elif r["error"]["code"] != "too_large":
                            errors.append("oversized: " + line.decode()[:200])
                    except (BrokenPipeError, ConnectionResetError, EOFError):
                        pass
                elif kind == "half":
                    s.sendall(b"{\"cmd\":\"tree\",\"sess")
                    if len(held) < 20:
                        held.append(s)  # stalls: kept open, never completed
                        s = None
                elif kind == "abrupt":
                    s.sendall(b"{\"cmd\":\"tree\",\"session\":\"s1\"}\n")
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                if s:
                    s.close()
            except BlockingIOError:
                time.sleep(0.05)  # the listen backlog is full: the flood outruns accept()
            except (OSError, EOFError) as e:
                errors.append("%s: %r" % (kind, e))
                time.sleep(0.05)

    def good():
        while time.time() < stop:
            try:
                r = call(path, {"cmd": "status"})
                if r.get("ok"):
                    answered[0] += 1
                elif r.get("error", {}).get("code") == "busy":
                    busy[0] += 1  # the client limit, as documented
                else:
                    errors.append("status failed: %r" % r)
            except BlockingIOError:
                busy[0] += 1
            except (OSError, EOFError) as e:
                errors.append("good client: %r" % e)
            time.sleep(0.05)

    ts = [threading.Thread(target=abuse, args=(k,)) for k in ("garbage", "oversized", "half", "abrupt")]
    ts.append(threading.Thread(target=good))
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for s in held:
        s.close()
    print(json.dumps({"answered": answered[0], "busy": busy[0], "abusers_busy": abuser_busy[0],
                      "abuse": abuse_count,
                      "errors": errors[:10], "n_errors": len(errors)}))
    return 0 if not errors and answered[0] > 4 * busy[0] else 1


def load(path, session, n, ms, seconds):
    lat = []
    errors = []

    def client():
        with connect(path) as s:
            end = time.time() + seconds
            while time.time() < end:
                t0 = time.time()
                r = call_on(s, {"cmd": "tree", "session": session, "format": "json"})
                lat.append((time.time() - t0) * 1000)
                if not r.get("ok"):
                    errors.append(r)
                time.sleep(max(0, ms / 1000 - (time.time() - t0)))

    ts = [threading.Thread(target=client) for _ in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    print(json.dumps({"queries": len(lat), "median_ms": statistics.median(lat) if lat else None,
                      "max_ms": max(lat) if lat else None, "errors": errors[:3]}))
    return 0 if not errors else 1


def bench(path, session, n, query):
    lat = []
    with connect(path) as s:
        for _ in range(n):
            req = dict(json.loads(query), cmd="tree", session=session)
            t0 = time.perf_counter()
            r = call_on(s, req)
            lat.append((time.perf_counter() - t0) * 1000)
            if not r.get("ok"):
                print(json.dumps(r), file=sys.stderr)
                return 1
    print("%.2f" % statistics.median(lat))
    return 0


def main(argv):
    cmd = argv[1]
    if cmd == "call":
        print(json.dumps(call(argv[2], json.loads(argv[3]))))
        return 0
    if cmd == "flood":
        return flood(argv[2], float(argv[3]))
    if cmd == "load":
        return load(argv[2], argv[3], int(argv[4]), float(argv[5]), float(argv[6]))
    if cmd == "bench":
        return bench(argv[2], argv[3], int(argv[4]), argv[5])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
