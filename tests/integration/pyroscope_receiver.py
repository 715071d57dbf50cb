"""A stand-in for Grafana Pyroscope's push API (test_fleet_pyroscope.sh). Decodes each
POST /push.v1.PusherService/Push body as a push.v1 PushRequest with Debian's
python3-protobuf (the message classes built at run time from a descriptor written here
with the field numbers of fleet/push.proto, so the test does not trust canopy's copy of
it), checks the headers, writes each series' raw_profile gunzipped to OUT/NNNN.pprof and
its labels and ID as one JSON line to OUT/series.jsonl, in arrival order. A request that
fails a check is logged to OUT/errors and refused with 400; while FAILFILE exists every
request gets 503. Usage: pyroscope_receiver.py PORTFILE OUT FAILFILE ORG."""
import gzip
import json
import os
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

portfile, out, failfile, org = sys.argv[1:5]
F = descriptor_pb2.FieldDescriptorProto


def build():
    fd = descriptor_pb2.FileDescriptorProto(name="t_push.proto", package="push.v1", syntax="proto3")

    def msg(name, fields):
        m = fd.message_type.add(name=name)
        for fname, num, typ, label, tname in fields:
            f = m.field.add(name=fname, number=num, type=typ, label=label)
            if tname:
                f.type_name = tname

    rep, opt = F.LABEL_REPEATED, F.LABEL_OPTIONAL
    msg("LabelPair", [("name", 1, F.TYPE_STRING, opt, None), ("value", 2, F.TYPE_STRING, opt, None)])
    msg("RawSample", [("raw_profile", 1, F.TYPE_BYTES, opt, None), ("ID", 2, F.TYPE_STRING, opt, None)])
    msg("RawProfileSeries", [("labels", 1, F.TYPE_MESSAGE, rep, ".push.v1.LabelPair"),
                             ("samples", 2, F.TYPE_MESSAGE, rep, ".push.v1.RawSample")])
    msg("PushRequest", [("series", 1, F.TYPE_MESSAGE, rep, ".push.v1.RawProfileSeries")])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    d = pool.FindMessageTypeByName("push.v1.PushRequest")
    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(d)
    return message_factory.MessageFactory(pool).GetPrototype(d)


PushRequest = build()
count = [0]


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def answer(self, code, msg=b""):
        self.send_response(code)
        self.send_header("Content-Length", str(len(msg)))
        self.end_headers()
        self.wfile.write(msg)

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if os.path.exists(failfile):
            return self.answer(503, b'{"code":"unavailable","message":"test outage"}')
        errs = []
        if self.path != "/push.v1.PusherService/Push":
            errs.append("path " + self.path)
        if self.headers.get("Content-Type") != "application/proto":
            errs.append("content type %s" % self.headers.get("Content-Type"))
        if self.headers.get("X-Scope-OrgID") != org:
            errs.append("org %s" % self.headers.get("X-Scope-OrgID"))
        try:
            req = PushRequest.FromString(body)
        except Exception as e:  # a body that is not a PushRequest
            errs.append("decode: %s" % e)
            req = None
        series = []
        for s in req.series if req else []:
            for smp in s.samples:
                try:
                    raw = gzip.decompress(smp.raw_profile)
                except Exception as e:
                    errs.append("raw_profile is not gzip'd: %s" % e)
                    continue
                series.append(([(l.name, l.value) for l in s.labels], smp.ID, raw))
        if errs or not series:
            with open(os.path.join(out, "errors"), "a") as f:
                f.write("; ".join(errs or ["no series"]) + "\n")
            return self.answer(400, b'{"code":"invalid_argument"}')
        for labels, sid, raw in series:
            count[0] += 1
            name = os.path.join(out, "%04d.pprof" % count[0])
            with open(name, "wb") as f:
                f.write(raw)
            with open(os.path.join(out, "series.jsonl"), "a") as f:
                f.write(json.dumps({"file": name, "labels": labels, "id": sid}) + "\n")
        self.answer(200, b"{}")


s = HTTPServer(("127.0.0.1", 0), H)
with open(portfile + ".tmp", "w") as f:
    f.write(str(s.server_address[1]))
os.rename(portfile + ".tmp", portfile)
s.serve_forever()
