#!/usr/bin/env python3
"""ready_time.py LOG CMD...: runs CMD (canopyd) with NOTIFY_SOCKET set to a private datagram
socket, its stdout and stderr appended to LOG (the test's $TMP, so that a failing test
prints it), and prints, as JSON, the seconds from exec to its READY=1 and the pid (the
daemon keeps running). Fails if READY does not come within 60 s."""
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

d = tempfile.mkdtemp()
path = os.path.join(d, "notify")
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
s.settimeout(60)
env = dict(os.environ, NOTIFY_SOCKET=path)
t0 = time.monotonic()
log = open(sys.argv[1], "a")
p = subprocess.Popen(sys.argv[2:], env=env, stdout=log, stderr=log)
while True:
    msg = s.recv(4096).decode()
    if "READY=1" in msg:
        break
print(json.dumps({"ready_s": time.monotonic() - t0, "pid": p.pid, "status": msg}))
sys.stdout.flush()
os._exit(0)
