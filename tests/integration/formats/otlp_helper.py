"""Reads canopy's OTLP profiles output (test_otlp.sh) WITHOUT canopy's .proto: the message
classes are built at run time, with Debian's python3-protobuf, from descriptors written
here from opentelemetry-proto v1.11.0 (profiles/v1development/profiles.proto,
common/v1/common.proto, resource/v1/resource.proto): the upstream package and message
names and EVERY field of each message, including those canopy does not write. A field
canopy wrote with a wrong number or wire type is then either a decode error or an unknown
field, and both fail here.

  otlp_helper.py check FILE.otlp.pb FUNCTIONS.json [expect KEY=VALUE ...]
    decodes FILE, checks the dictionary's rules (every table's [0] is the zero value, every
    index in range), no unknown field anywhere, then derives each function's self and
    total (recursion counted once, per name) from the samples and compares them with
    canopy's own `--functions --format json` for the same query. Expectations:
    resource.KEY=VALUE (some resource has that attribute), no-resource=KEY (none has it),
    sample_type=TYPE/UNIT, period_type=TYPE/UNIT, resources=N, min_resources=N, threads
    (samples carry thread.id and thread.name), build_ids (mappings carry GNU build-ids).
  otlp_helper.py check-many DIR FUNCTIONS.json [expect ...]
    the same over every DIR/*.otlp.pb together (the requests of canopyd's OTLP push): each
    one checked alone, the functions summed over all of them.
  otlp_helper.py totals FILE.otlp.pb
    prints the sum of all sample values (one line).
"""
import glob
import json
import os
import sys

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

F = descriptor_pb2.FieldDescriptorProto
REP, OPT = F.LABEL_REPEATED, F.LABEL_OPTIONAL
COMMON = "opentelemetry.proto.common.v1"
RESOURCE = "opentelemetry.proto.resource.v1"
PROF = "opentelemetry.proto.profiles.v1development"


def field(m, name, num, typ, label=OPT, tname=None, oneof=None):
    f = m.field.add(name=name, number=num, type=typ, label=label)
    if tname:
        f.type_name = tname
    if oneof is not None:
        f.oneof_index = oneof


def build():
    pool = descriptor_pool.DescriptorPool()
    c = descriptor_pb2.FileDescriptorProto(name="t_common.proto", package=COMMON, syntax="proto3")
    m = c.message_type.add(name="AnyValue")
    m.oneof_decl.add(name="value")
    for name, num, typ, tn in (("string_value", 1, F.TYPE_STRING, None), ("bool_value", 2, F.TYPE_BOOL, None),
                               ("int_value", 3, F.TYPE_INT64, None), ("double_value", 4, F.TYPE_DOUBLE, None),
                               ("array_value", 5, F.TYPE_MESSAGE, "." + COMMON + ".ArrayValue"),
                               ("kvlist_value", 6, F.TYPE_MESSAGE, "." + COMMON + ".KeyValueList"),
                               ("bytes_value", 7, F.TYPE_BYTES, None),
                               ("string_value_strindex", 8, F.TYPE_INT32, None)):
        field(m, name, num, typ, OPT, tn, 0)
    m = c.message_type.add(name="ArrayValue")
    field(m, "values", 1, F.TYPE_MESSAGE, REP, "." + COMMON + ".AnyValue")
    m = c.message_type.add(name="KeyValueList")
    field(m, "values", 1, F.TYPE_MESSAGE, REP, "." + COMMON + ".KeyValue")
    m = c.message_type.add(name="KeyValue")
    field(m, "key", 1, F.TYPE_STRING)
    field(m, "value", 2, F.TYPE_MESSAGE, OPT, "." + COMMON + ".AnyValue")
    field(m, "key_strindex", 3, F.TYPE_INT32)
    m = c.message_type.add(name="InstrumentationScope")
    field(m, "name", 1, F.TYPE_STRING)
    field(m, "version", 2, F.TYPE_STRING)
    field(m, "attributes", 3, F.TYPE_MESSAGE, REP, "." + COMMON + ".KeyValue")
    field(m, "dropped_attributes_count", 4, F.TYPE_UINT32)
    m = c.message_type.add(name="EntityRef")
    field(m, "schema_url", 1, F.TYPE_STRING)
    field(m, "type", 2, F.TYPE_STRING)
    field(m, "id_keys", 3, F.TYPE_STRING, REP)
    field(m, "description_keys", 4, F.TYPE_STRING, REP)
    pool.Add(c)

    r = descriptor_pb2.FileDescriptorProto(name="t_resource.proto", package=RESOURCE, syntax="proto3",
                                           dependency=["t_common.proto"])
    m = r.message_type.add(name="Resource")
    field(m, "attributes", 1, F.TYPE_MESSAGE, REP, "." + COMMON + ".KeyValue")
    field(m, "dropped_attributes_count", 2, F.TYPE_UINT32)
    field(m, "entity_refs", 3, F.TYPE_MESSAGE, REP, "." + COMMON + ".EntityRef")
    pool.Add(r)

    p = descriptor_pb2.FileDescriptorProto(name="t_profiles.proto", package=PROF, syntax="proto3",
                                           dependency=["t_common.proto", "t_resource.proto"])
    P = "." + PROF + "."
    m = p.message_type.add(name="ProfilesDictionary")
    for name, num, t in (("mapping_table", 1, "Mapping"), ("location_table", 2, "Location"),
                         ("function_table", 3, "Function"), ("link_table", 4, "Link")):
        field(m, name, num, F.TYPE_MESSAGE, REP, P + t)
    field(m, "string_table", 5, F.TYPE_STRING, REP)
    field(m, "attribute_table", 6, F.TYPE_MESSAGE, REP, P + "KeyValueAndUnit")
    field(m, "stack_table", 7, F.TYPE_MESSAGE, REP, P + "Stack")
    m = p.message_type.add(name="ProfilesData")
    field(m, "resource_profiles", 1, F.TYPE_MESSAGE, REP, P + "ResourceProfiles")
    field(m, "dictionary", 2, F.TYPE_MESSAGE, OPT, P + "ProfilesDictionary")
    m = p.message_type.add(name="ResourceProfiles")
    field(m, "resource", 1, F.TYPE_MESSAGE, OPT, "." + RESOURCE + ".Resource")
    field(m, "scope_profiles", 2, F.TYPE_MESSAGE, REP, P + "ScopeProfiles")
    field(m, "schema_url", 3, F.TYPE_STRING)
    m = p.message_type.add(name="ScopeProfiles")
    field(m, "scope", 1, F.TYPE_MESSAGE, OPT, "." + COMMON + ".InstrumentationScope")
    field(m, "profiles", 2, F.TYPE_MESSAGE, REP, P + "Profile")
    field(m, "schema_url", 3, F.TYPE_STRING)
    m = p.message_type.add(name="Profile")
    field(m, "sample_type", 1, F.TYPE_MESSAGE, OPT, P + "ValueType")
    field(m, "samples", 2, F.TYPE_MESSAGE, REP, P + "Sample")
    field(m, "time_unix_nano", 3, F.TYPE_FIXED64)
    field(m, "duration_nano", 4, F.TYPE_UINT64)
    field(m, "period_type", 5, F.TYPE_MESSAGE, OPT, P + "ValueType")
    field(m, "period", 6, F.TYPE_INT64)
    field(m, "profile_id", 7, F.TYPE_BYTES)
    field(m, "dropped_attributes_count", 8, F.TYPE_UINT32)
    field(m, "original_payload_format", 9, F.TYPE_STRING)
    field(m, "original_payload", 10, F.TYPE_BYTES)
    field(m, "attribute_indices", 11, F.TYPE_INT32, REP)
    m = p.message_type.add(name="Link")
    field(m, "trace_id", 1, F.TYPE_BYTES)
    field(m, "span_id", 2, F.TYPE_BYTES)
    m = p.message_type.add(name="ValueType")
    field(m, "type_strindex", 1, F.TYPE_INT32)
    field(m, "unit_strindex", 2, F.TYPE_INT32)
    m = p.message_type.add(name="Sample")
    field(m, "stack_index", 1, F.TYPE_INT32)
    field(m, "attribute_indices", 2, F.TYPE_INT32, REP)
    field(m, "link_index", 3, F.TYPE_INT32)
    field(m, "values", 4, F.TYPE_INT64, REP)
    field(m, "timestamps_unix_nano", 5, F.TYPE_FIXED64, REP)
    m = p.message_type.add(name="Mapping")
    field(m, "memory_start", 1, F.TYPE_UINT64)
    field(m, "memory_limit", 2, F.TYPE_UINT64)
    field(m, "file_offset", 3, F.TYPE_UINT64)
    field(m, "filename_strindex", 4, F.TYPE_INT32)
    field(m, "attribute_indices", 5, F.TYPE_INT32, REP)
    m = p.message_type.add(name="Stack")
    field(m, "location_indices", 1, F.TYPE_INT32, REP)
    m = p.message_type.add(name="Location")
    field(m, "mapping_index", 1, F.TYPE_INT32)
    field(m, "address", 2, F.TYPE_UINT64)
    field(m, "lines", 3, F.TYPE_MESSAGE, REP, P + "Line")
    field(m, "attribute_indices", 4, F.TYPE_INT32, REP)
    m = p.message_type.add(name="Line")
    field(m, "function_index", 1, F.TYPE_INT32)
    field(m, "line", 2, F.TYPE_INT64)
    field(m, "column", 3, F.TYPE_INT64)
    m = p.message_type.add(name="Function")
    field(m, "name_strindex", 1, F.TYPE_INT32)
    field(m, "system_name_strindex", 2, F.TYPE_INT32)
    field(m, "filename_strindex", 3, F.TYPE_INT32)
    field(m, "start_line", 4, F.TYPE_INT64)
    m = p.message_type.add(name="KeyValueAndUnit")
    field(m, "key_strindex", 1, F.TYPE_INT32)
    field(m, "value", 2, F.TYPE_MESSAGE, OPT, "." + COMMON + ".AnyValue")
    field(m, "unit_strindex", 3, F.TYPE_INT32)
    pool.Add(p)
    d = pool.FindMessageTypeByName(PROF + ".ProfilesData")
    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(d)
    return message_factory.MessageFactory(pool).GetPrototype(d)


ProfilesData = build()


def decode(path):
    raw = open(path, "rb").read()
    m = ProfilesData.FromString(raw)
    stripped = ProfilesData.FromString(raw)
    stripped.DiscardUnknownFields()
    assert len(stripped.SerializeToString()) == len(raw), \
        "fields unknown to opentelemetry-proto's profiles.proto: %d of %d bytes" % (
            len(raw) - len(stripped.SerializeToString()), len(raw))
    return m


def anyval(v):
    k = v.WhichOneof("value")
    return getattr(v, k) if k else None


def check_dictionary(m):
    d = m.dictionary
    S = d.string_table
    assert len(S) and S[0] == "", "string_table[0] must be \"\""
    for name in ("mapping_table", "location_table", "function_table", "link_table",
                 "attribute_table", "stack_table"):
        t = getattr(d, name)
        assert len(t) >= 1 and t[0].ByteSize() == 0, "%s[0] is not the zero value" % name
    for s in d.stack_table:
        for li in s.location_indices:
            assert 0 < li < len(d.location_table), "stack: location %d" % li
    for loc in d.location_table:
        assert 0 <= loc.mapping_index < len(d.mapping_table)
        for ln in loc.lines:
            assert 0 < ln.function_index < len(d.function_table)
        for a in loc.attribute_indices:
            assert 0 < a < len(d.attribute_table)
    for f in d.function_table[1:]:
        for x in (f.name_strindex, f.system_name_strindex, f.filename_strindex):
            assert 0 <= x < len(S)
        assert f.name_strindex or f.system_name_strindex or f.filename_strindex
    for mp in d.mapping_table:
        assert 0 <= mp.filename_strindex < len(S)
        for a in mp.attribute_indices:
            assert 0 < a < len(d.attribute_table)
    for a in d.attribute_table[1:]:
        assert 0 < a.key_strindex < len(S)
    for rp in m.resource_profiles:
        for sp in rp.scope_profiles:
            for p in sp.profiles:
                assert 0 <= p.sample_type.type_strindex < len(S)
                for s in p.samples:
                    assert 0 < s.stack_index < len(d.stack_table), "sample stack %d" % s.stack_index
                    assert len(s.values) == 1, "one value per sample"
                    keys = [d.attribute_table[a].key_strindex for a in s.attribute_indices]
                    assert len(keys) == len(set(keys)), "repeated attribute key in a sample"


def frame_names(d, loc):
    """Function names of a location, outermost first (canopy's order on a path)."""
    S = d.string_table
    if loc.lines:
        return [S[d.function_table[ln.function_index].name_strindex] for ln in reversed(loc.lines)]
    if not loc.mapping_index:  # code mapped from no file, named by a perf map
        return ["0x%x" % loc.address]
    mp = d.mapping_table[loc.mapping_index]
    lib = os.path.basename(S[mp.filename_strindex])
    return ["%s+0x%x" % (lib, loc.address - mp.memory_start + mp.file_offset)]


def per_function(m, acc=None):
    d = m.dictionary
    self_, total, grand = acc if acc else ({}, {}, 0)
    for rp in m.resource_profiles:
        for sp in rp.scope_profiles:
            for p in sp.profiles:
                for s in p.samples:
                    v = s.values[0]
                    grand += v
                    locs = d.stack_table[s.stack_index].location_indices  # leaf first
                    path = []
                    for li in reversed(locs):
                        path += frame_names(d, d.location_table[li])
                    self_[path[-1]] = self_.get(path[-1], 0) + v
                    for f in set(path):
                        total[f] = total.get(f, 0) + v
    return self_, total, grand


def expectations(m, exp):
    d = m.dictionary
    S = d.string_table
    res = []
    for rp in m.resource_profiles:
        res.append({kv.key: anyval(kv.value) for kv in rp.resource.attributes})
    profs = [p for rp in m.resource_profiles for sp in rp.scope_profiles for p in sp.profiles]
    for e in exp:
        k, _, v = e.partition("=")
        if k.startswith("resource."):
            key = k[len("resource."):]
            assert any(str(r.get(key)) == v for r in res), "no resource with %s=%s: %s" % (key, v, res)
        elif k == "no-resource":
            assert all(v not in r for r in res), "resource attribute %s present: %s" % (v, res)
        elif k in ("sample_type", "period_type"):
            for p in profs:
                vt = getattr(p, k)
                got = "%s/%s" % (S[vt.type_strindex], S[vt.unit_strindex])
                assert got == v, "%s %s, expected %s" % (k, got, v)
        elif k == "resources":
            assert len(res) == int(v), "%d resources, expected %s: %s" % (len(res), v, res)
        elif k == "min_resources":
            assert len(res) >= int(v), "%d resources, expected at least %s" % (len(res), v)
        elif k == "threads":
            keys = {S[d.attribute_table[a].key_strindex] for p in profs for s in p.samples
                    for a in s.attribute_indices}
            assert {"thread.id", "thread.name"} <= keys, "thread attributes missing: %s" % keys
            assert all(s.attribute_indices for p in profs for s in p.samples)
        elif k == "build_ids":
            keys = {S[d.attribute_table[a].key_strindex] for mp in d.mapping_table
                    for a in mp.attribute_indices}
            assert "process.executable.build_id.gnu" in keys, "no mapping build-ids"
        else:
            raise SystemExit("unknown expectation " + e)


def main():
    cmd = sys.argv[1]
    if cmd == "check-many":
        files = sorted(glob.glob(os.path.join(sys.argv[2], "*.otlp.pb")))
        assert files, "no requests"
        ms = [decode(f) for f in files]
        acc = ({}, {}, 0)
        for m in ms:
            check_dictionary(m)
            acc = per_function(m, acc)
        for m in ms:
            expectations(m, sys.argv[4:])
    else:
        m = decode(sys.argv[2])
        if cmd == "totals":
            print(per_function(m)[2])
            return
        check_dictionary(m)
        acc = per_function(m)
        ms = [m]
    want = json.load(open(sys.argv[3]))
    self_, total, grand = acc
    assert grand == round(want["total"]), "total %d, canopy %s" % (grand, want["total"])
    names = [f["name"] for f in want["functions"]]
    unique = {n for n in names if names.count(n) == 1}
    bad = []
    for f in want["functions"]:
        n = f["name"]
        if n not in unique:
            continue
        if self_.get(n, 0) != round(f["self"]) or total.get(n, 0) != round(f["total"]):
            bad.append((n, self_.get(n, 0), f["self"], total.get(n, 0), f["total"]))
    extra = set(total) - set(names)
    # what a mismatch needs to be understood: the names only the export has, and its files
    maps = sorted({m.dictionary.string_table[mp.filename_strindex]
                   for m in ms for mp in m.dictionary.mapping_table[1:]})
    assert not bad, ("functions differ (name, otlp self, canopy self, otlp total, canopy total): "
                     "%s; only in the export: %s; mappings: %s" % (bad[:10], sorted(extra)[:10], maps))
    assert not extra, "functions canopy does not show: %s" % sorted(extra)[:10]
    if cmd != "check-many":
        expectations(m, sys.argv[4:])
    print("%d functions, total %d, %d messages, %d resources, %d strings" % (
        len(unique), grand, len(ms), sum(len(m.resource_profiles) for m in ms),
        sum(len(m.dictionary.string_table) for m in ms)))


if __name__ == "__main__":
    main()
