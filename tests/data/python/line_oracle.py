# tests/unit/test_interp.c's line-table oracle: compiles a stdlib module's source (its own
# argparse.py unless a path is given) with the running interpreter and prints, for each of its code objects, the raw line table and the
# line CPython itself gives each instruction (code unit), for interp/lines.c to match:
#   T <format: lnotab|lt310|loc311> <co_firstlineno> <table as hex>
#   L <instruction index> <line, 0 = none> ...   (one line of pairs per code object)
import sys
import types


def codes(co):
    yield co
    for c in co.co_consts:
        if isinstance(c, types.CodeType):
            yield from codes(c)


def lines_of(co):
    n = len(co.co_code) // 2
    v = sys.version_info[:2]
    out = [0] * n
    if v >= (3, 11):
        for i, pos in enumerate(co.co_positions()):
            if i < n:
                out[i] = pos[0] or 0
        return "loc311", co.co_linetable, out
    if v == (3, 10):
        for start, end, line in co.co_lines():
            for b in range(start, end, 2):
                out[b // 2] = line or 0
        return "lt310", co.co_linetable, out
    import dis
    starts = dict(dis.findlinestarts(co))
    line = co.co_firstlineno
    for i in range(n):
        line = starts.get(2 * i, line)
        out[i] = line
    return "lnotab", co.co_lnotab, out


def main(path):
    src = open(path).read()
    top = compile(src, path, "exec")
    for k, co in enumerate(codes(top)):
        if k >= 300:
            break
        fmt, table, out = lines_of(co)
        print("T", fmt, co.co_firstlineno, table.hex() or "-")
        print("L", " ".join("%d:%d" % (i, l) for i, l in enumerate(out)))


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(sys.argv[1])
    else:
        import argparse

        main(argparse.__file__)
