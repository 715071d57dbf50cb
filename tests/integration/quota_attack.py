#!/usr/bin/env python3
"""Per-user quota attacks on canopyd (test_daemon_quota.sh), run as the attacking user.

conns SOCK N: opens N connections, says hello on each, prints how many were answered ok
  and how many `busy` (with the first busy message), then checks that the daemon closes
  the idle ones (idle_timeout): prints how many were closed within 5 s.
stall SOCK SESSION: asks for SESSION's whole tree and never reads; after 4 s prints how
  many bytes arrived and whether the daemon closed the connection (send_timeout).
flood SOCK N SECONDS: keeps N connections open (as many as the daemon takes) for SECONDS,
  reconnecting refused ones; prints how many were refused `busy` for lack of fds."""
import json
import socket
import sys
import time


def conn(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(path)
    return s


def hello(s):
    """The answer to hello, or a refusal sent before it (the daemon may close first)."""
    try:
        s.sendall(b'{"cmd":"hello"}\n')
    except OSError:
        pass
    buf = b""
    while b"\n" not in buf:
        try:
            d = s.recv(4096)
        except OSError:
            d = b""
        if not d:
            return None
        buf += d
    return json.loads(buf.split(b"\n")[0])


def conns(path, n):
    ok, busy, msg, held = 0, 0, None, []
    for _ in range(n):
        s = conn(path)
        r = hello(s)
        if r and r.get("ok"):
            ok += 1
            held.append(s)
        else:
            busy += 1
            msg = msg or (r or {}).get("error", {}).get("message")
            s.close()
    closed = 0
    t0 = time.time()
    for s in held:
        s.settimeout(max(0.1, 5 - (time.time() - t0)))
        try:
            closed += s.recv(100) == b""
        except (socket.timeout, OSError):
            pass
    print(json.dumps({"ok": ok, "busy": busy, "message": msg, "idle_closed": closed}))


def stall(path, session):
    s = conn(path)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(json.dumps({"cmd": "tree", "session": session, "format": "text"}).encode() + b"\n")
    time.sleep(4)
    got, closed = 0, False
    s.settimeout(2)
    try:
        while True:
            d = s.recv(1 << 20)
            if not d:
                closed = True
                break
            got += len(d)
    except (socket.timeout, ConnectionResetError):
        closed = closed or False
    print(json.dumps({"bytes": got, "closed": closed}))


def flood(path, n, seconds):
    held, refused, msg = [], 0, None
    stop = time.time() + seconds
    while time.time() < stop:
        while len(held) < n and time.time() < stop:
            try:
                s = conn(path)
                r = hello(s)
            except OSError:
                r, s = None, None
            if r and r.get("ok"):
                held.append(s)
                continue
            refused += 1
            msg = msg or (r or {}).get("error", {}).get("message")
            if s:
                s.close()
            time.sleep(0.01)
        time.sleep(0.05)
    print(json.dumps({"held": len(held), "refused": refused, "message": msg}))


if __name__ == "__main__":
    if sys.argv[1] == "conns":
        conns(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "stall":
        stall(sys.argv[2], sys.argv[3])
    else:
        flood(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
