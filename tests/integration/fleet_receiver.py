"""A stand-in for ClickHouse's HTTP interface (test_fleet_spool.sh): records every
INSERT (its query and gunzipped body, in arrival order) to LOG as JSON lines, answers
200, or 503 while the file FAILFILE exists. Usage: fleet_receiver.py PORTFILE LOG FAILFILE."""
import gzip
import json
import os
import sys
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

portfile, log, failfile = sys.argv[1:4]


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_POST(self):
        n = int(self.headers.get("Content-Length", 0))
        body = self.rfile.read(n)
        if os.path.exists(failfile):
            msg = b"Code: 210, e.displayText() = DB::NetException: test outage\n"
            self.send_response(503)
            self.send_header("Content-Length", str(len(msg)))
            self.end_headers()
            self.wfile.write(msg)
            return
        q = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query).get("query", [""])[0]
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        with open(log, "a") as f:
            f.write(json.dumps({"query": q, "body": body.decode("utf-8", "replace")}) + "\n")
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()


s = ThreadingHTTPServer(("127.0.0.1", 0), H)
with open(portfile + ".tmp", "w") as f:
    f.write(str(s.server_address[1]))
os.rename(portfile + ".tmp", portfile)
s.serve_forever()
