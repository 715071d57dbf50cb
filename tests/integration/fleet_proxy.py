"""A stand-in network between canopyd and ClickHouse (test_fleet_retry.sh): forwards every
HTTP request to ClickHouse and relays the answer, except that the DROP-th INSERT into the
samples table is forwarded and answered by ClickHouse but its answer is lost: the proxy
closes the client's connection without a response. Logs one line per request (the
query's first words, and "DROPPED" for the lost answer) to LOG.
Usage: fleet_proxy.py PORTFILE LOG CLICKHOUSE_PORT DROP."""
import http.client
import os
import sys
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

portfile, log, ch_port, drop = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
inserts = 0


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_POST(self):
        global inserts
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        q = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query).get("query", [""])[0]
        what = (q or body[:200].decode("utf-8", "replace")).split("\n")[0][:80]
        hdrs = {k: v for k, v in self.headers.items()
                if k.lower() in ("content-encoding", "content-type", "authorization")}
        c = http.client.HTTPConnection("127.0.0.1", ch_port, timeout=60)
        c.request("POST", self.path, body=body, headers=hdrs)
        r = c.getresponse()
        data = r.read()
        c.close()
        lost = False
        if q.startswith("INSERT INTO canopy.samples"):
            inserts += 1
            lost = inserts == drop
        with open(log, "a") as f:
            f.write("%s%s %d\n" % ("DROPPED " if lost else "", what, r.status))
        if lost:
            self.close_connection = True  # ClickHouse took the rows; canopyd hears nothing
            return
        self.send_response(r.status)
        for k, v in r.getheaders():
            if k.lower() not in ("connection", "transfer-encoding", "content-length"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


s = ThreadingHTTPServer(("127.0.0.1", 0), H)
with open(portfile + ".tmp", "w") as f:
    f.write(str(s.server_address[1]))
os.rename(portfile + ".tmp", portfile)
s.serve_forever()
