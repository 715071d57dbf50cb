"""A stand-in OTLP/HTTP profiles receiver (test_otlp_push.sh): POST /v1development/profiles
with Content-Type application/x-protobuf and Content-Encoding gzip. Each body is written as it came to
OUT/NNNN.otlp.pb (gunzipped; decoded later by formats/otlp_helper.py, which does not trust canopy's
.proto); a request with the wrong path or content type is logged to OUT/errors and
refused with 400; while FAILFILE exists every request gets 503. It listens on PORT (the
test starts it late, so that canopyd first finds nobody there). Usage:
otlp_receiver.py PORT OUT FAILFILE."""
import gzip
import os
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

port, out, failfile = int(sys.argv[1]), sys.argv[2], sys.argv[3]
count = [0]


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def answer(self, code, body=b"", ctype="application/x-protobuf"):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.headers.get("Content-Encoding") != "gzip":
            with open(os.path.join(out, "errors"), "a") as f:
                f.write("content encoding %s\n" % self.headers.get("Content-Encoding"))
            return self.answer(400, b"not gzip", "text/plain")
        body = gzip.decompress(body)
        if os.path.exists(failfile):
            return self.answer(503, b"test outage", "text/plain")
        errs = []
        if self.path != "/v1development/profiles":
            errs.append("path " + self.path)
        if self.headers.get("Content-Type") != "application/x-protobuf":
            errs.append("content type %s" % self.headers.get("Content-Type"))
        if not body:
            errs.append("empty body")
        if errs:
            with open(os.path.join(out, "errors"), "a") as f:
                f.write("; ".join(errs) + "\n")
            return self.answer(400, "; ".join(errs).encode(), "text/plain")
        count[0] += 1
        with open(os.path.join(out, "%04d.otlp.pb" % count[0]), "wb") as f:
            f.write(body)
        # ExportProfilesServiceResponse{}: an empty message, no partial_success
        self.answer(200, b"")


HTTPServer(("127.0.0.1", port), H).serve_forever()
