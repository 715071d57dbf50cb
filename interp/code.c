/* code.c — a code object's names and line table, read out of the target through a reader
 * (process_vm_readv in ctx.c, forged memory in the unit test), and the user-space frame walk.
 *
 * The target is not trusted: every object's type is checked by its tp_name before its fields
 * are believed, every length is bounded, and a failed read makes that field unreadable. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "int_internal.h"

enum { OB_TYPE = 8, TP_NAME = 24, VAR_SIZE = 16, STR_STATE = 32, BYTES_SVAL = 32 };

static int rd_u64(cn_int__read_fn rd, void *arg, uint64_t addr, uint64_t *v)
{
    return rd(arg, addr, v, sizeof(*v));
}

/* Whether the object at obj has the type called want (cached per type address in *slot). */
static bool type_is(cn_int__read_fn rd, void *arg, uint64_t obj, const char *want, uint64_t *slot)
{
    uint64_t type, name;
    char buf[16];
    if (!obj || rd_u64(rd, arg, obj + OB_TYPE, &type) < 0 || !type)
        return false;
    if (slot && *slot)
        return *slot == type;
    size_t len = strlen(want) + 1;
    if (rd_u64(rd, arg, type + TP_NAME, &name) < 0 || rd(arg, name, buf, len) < 0 ||
        memcmp(buf, want, len) != 0)
        return false;
    if (slot)
        *slot = type;
    return true;
}

/* Appends code point c as UTF-8 (an invalid one as U+FFFD). */
static size_t put_utf8(char *o, uint32_t c)
{
    if (c >= 0xd800 && c < 0xe000)
        c = 0xfffd;
    if (c < 0x80) {
        o[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (char)(0xc0 | (c >> 6));
        o[1] = (char)(0x80 | (c & 63));
        return 2;
    }
    if (c < 0x10000) {
        o[0] = (char)(0xe0 | (c >> 12));
        o[1] = (char)(0x80 | ((c >> 6) & 63));
        o[2] = (char)(0x80 | (c & 63));
        return 3;
    }
    if (c > 0x10ffff)
        return put_utf8(o, 0xfffd);
    o[0] = (char)(0xf0 | (c >> 18));
    o[1] = (char)(0x80 | ((c >> 12) & 63));
    o[2] = (char)(0x80 | ((c >> 6) & 63));
    o[3] = (char)(0x80 | (c & 63));
    return 4;
}

/* A compact str object as malloc'ed UTF-8, or NULL. */
static char *read_str(const cn_int__names *l, cn_int__read_fn rd, void *arg, uint64_t obj,
                      cn_int__types *types)
{
    int64_t length;
    uint32_t state;
    char *raw = NULL, *out = NULL;
    if (!type_is(rd, arg, obj, "str", types ? &types->str : NULL) ||
        rd(arg, obj + VAR_SIZE, &length, sizeof(length)) < 0 ||
        rd(arg, obj + STR_STATE, &state, sizeof(state)) < 0)
        return NULL;
    unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
    if (!compact || length < 0 || length > CN_INT__MAX_STR || (kind != 1 && kind != 2 && kind != 4))
        return NULL;
    if (ascii && kind != 1)
        return NULL;
    uint64_t data = obj + (ascii ? l->ascii_size : l->compact_size);
    raw = malloc((size_t)length * kind + 1);
    out = malloc((size_t)length * 4 + 1);
    if (!raw || !out || rd(arg, data, raw, (size_t)length * kind) < 0)
        goto fail;
    size_t o = 0;
    for (int64_t i = 0; i < length; i++) {
        uint32_t c;
        if (kind == 1) {
            c = (uint8_t)raw[i];
        } else if (kind == 2) {
            uint16_t u;
            memcpy(&u, raw + i * 2, 2);
            c = u;
        } else {
            memcpy(&c, raw + i * 4, 4);
        }
        if (c == 0)
            c = 0xfffd; /* a NUL would cut the name */
        o += put_utf8(out + o, c);
    }
    out[o] = '\0';
    free(raw);
    return out;
fail:
    free(raw);
    free(out);
    return NULL;
}

int cn_int__read_code(const cn_int__names *l, cn_int__read_fn rd, void *arg, uint64_t code,
                      cn_int__types *types, cn_int__code *out)
{
    memset(out, 0, sizeof(*out));
    if (!type_is(rd, arg, code, "code", types ? &types->code : NULL))
        return -EFAULT;
    uint64_t name = 0, file = 0, lt = 0;
    int32_t first = 0;
    uint32_t name_off = l->co_qualname != CN_INT_ABI_NONE ? l->co_qualname : l->co_name;
    if (rd_u64(rd, arg, code + name_off, &name) == 0)
        out->name = read_str(l, rd, arg, name, types);
    if (rd_u64(rd, arg, code + l->co_filename, &file) == 0)
        out->filename = read_str(l, rd, arg, file, types);
    out->ident[0] = name;
    out->ident[1] = file;
    if (rd(arg, code + l->co_firstlineno, &first, sizeof(first)) == 0 && first > 0)
        out->first_line = first;
    int64_t size;
    if (rd_u64(rd, arg, code + l->co_linetable, &lt) == 0 &&
        type_is(rd, arg, lt, "bytes", types ? &types->bytes : NULL) &&
        rd(arg, lt + VAR_SIZE, &size, sizeof(size)) == 0 && size > 0 &&
        size <= CN_INT__MAX_LINETABLE) {
        out->linetable = malloc((size_t)size);
        if (out->linetable && rd(arg, lt + BYTES_SVAL, out->linetable, (size_t)size) == 0) {
            out->linetable_len = (size_t)size;
        } else {
            free(out->linetable);
            out->linetable = NULL;
        }
    }
    return 0;
}

#define SAME_SPAN 256

static uint32_t name_off_of(const cn_int__names *l)
{
    return l->co_qualname != CN_INT_ABI_NONE ? l->co_qualname : l->co_name;
}

bool cn_int__ident_span(const cn_int__names *l, uint32_t *off, uint32_t *len)
{
    uint32_t name_off = name_off_of(l), file_off = l->co_filename;
    uint32_t hi = name_off > file_off ? name_off : file_off;
    if (name_off < OB_TYPE || file_off < OB_TYPE || hi - OB_TYPE + 8 > SAME_SPAN)
        return false;
    *off = OB_TYPE;
    *len = hi - OB_TYPE + 8;
    return true;
}

bool cn_int__ident_offsets(const cn_int__names *l, uint32_t off[3])
{
    off[0] = OB_TYPE;
    off[1] = name_off_of(l);
    off[2] = l->co_filename;
    return off[1] != CN_INT_ABI_NONE && off[2] != CN_INT_ABI_NONE;
}

/* The type, name and file words out of the span's bytes (cn_int__ident_span). */
static void ident_words(const cn_int__names *l, const uint8_t *span, uint64_t w[3])
{
    memcpy(&w[0], span, 8);
    memcpy(&w[1], span + (name_off_of(l) - OB_TYPE), 8);
    memcpy(&w[2], span + (l->co_filename - OB_TYPE), 8);
}

static bool ident_same(const uint64_t w[3], const cn_int__types *types, const cn_int__code *c)
{
    return (!types || !types->code || w[0] == types->code) && w[1] == c->ident[0] &&
           w[2] == c->ident[1];
}

bool cn_int__ident_same(const cn_int__names *l, const uint8_t *span, const cn_int__types *types,
                        const cn_int__code *c)
{
    uint64_t w[3];
    ident_words(l, span, w);
    return ident_same(w, types, c);
}

/* The words at code + OB_TYPE, + name_off and + file_off: with one read of the span they lie in
 * when it is at most SAME_SPAN bytes (every layout's is: 112 or 128 bytes), else with three. A
 * check runs for each code object at its first use in every epoch not checked by the epoch's
 * batch (ctx.c), and a read of the target is a process_vm_readv of several µs. 0, or the
 * failed read's error. */
static int read_ident(const cn_int__names *l, cn_int__read_fn rd, void *arg, uint64_t code,
                      uint64_t w[3])
{
    uint32_t off, len;
    if (!cn_int__ident_span(l, &off, &len)) {
        int r;
        if ((r = rd_u64(rd, arg, code + OB_TYPE, &w[0])) < 0 ||
            (r = rd_u64(rd, arg, code + name_off_of(l), &w[1])) < 0)
            return r;
        return rd_u64(rd, arg, code + l->co_filename, &w[2]);
    }
    uint8_t b[SAME_SPAN];
    int r = rd(arg, code + off, b, len);
    if (r < 0)
        return r;
    ident_words(l, b, w);
    return 0;
}

bool cn_int__code_same(const cn_int__names *l, cn_int__read_fn rd, void *arg, uint64_t code,
                       const cn_int__types *types, const cn_int__code *c)
{
    uint64_t w[3]; /* type, name, file */
    int r = read_ident(l, rd, arg, code, w);
    if (r == -ESRCH)
        return true; /* the process is gone: its last samples keep what was read while it ran */
    if (r < 0)
        return !c->ident[0] && !c->ident[1]; /* unreadable then, unreadable now */
    return ident_same(w, types, c);
}

size_t cn_int__plan_runs(const uint64_t *addr, size_t n, uint32_t len, uint64_t *run_lo,
                         uint32_t *run_len, uint32_t *run_of)
{
    size_t nruns = 0;
    for (size_t i = 0; i < n; i++) {
        if (nruns > 0) {
            uint64_t lo = run_lo[nruns - 1], end = lo + run_len[nruns - 1];
            if (addr[i] >= lo && addr[i] <= end + CN_INT__RUN_GAP &&
                addr[i] + len - lo <= CN_INT__RUN_MAX) {
                if (addr[i] + len > end)
                    run_len[nruns - 1] = (uint32_t)(addr[i] + len - lo);
                run_of[i] = (uint32_t)(nruns - 1);
                continue;
            }
        }
        run_lo[nruns] = addr[i];
        run_len[nruns] = len;
        run_of[i] = (uint32_t)nruns++;
    }
    return nruns;
}

void cn_int__code_clear(cn_int__code *c)
{
    free(c->name);
    free(c->filename);
    free(c->linetable);
    memset(c, 0, sizeof(*c));
}

/* Mirrors cn_int_sample() (bpf/python.bpf.c) line for line: keep the two alike. */
uint32_t cn_int__walk(const struct cn_int_abi_layout *l, cn_int__read_fn rd, void *arg,
                      uint64_t tstate, cn_int_frame *out, uint32_t max, int *status)
{
    uint32_t n = 0;
    uint64_t f = 0;
    *status = CN_INT_OK;
    if (rd_u64(rd, arg, tstate + l->ts_frame, &f) < 0)
        f = 0;
    /* the program's entry check (python.bpf.c entry_checked): the caller's current frame */
    bool check_entry = false;
    uint64_t expect = 0;
    if (l->cf_current_frame != CN_INT_ABI_NONE && f) {
        uint64_t cf[2] = {0, 0}; /* the _PyCFrame's current_frame and previous */
        if (rd(arg, f + l->cf_current_frame, cf, sizeof(cf)) < 0)
            cf[0] = 0;
        f = cf[0];
        if (f && cf[1]) {
            if (rd_u64(rd, arg, cf[1] + l->cf_current_frame, &expect) < 0)
                expect = 0;
            check_entry = true;
        }
    }
    uint8_t b[CN_INT_ABI_WINDOW + 128];
    uint64_t win_lo = 0;
    uint32_t win_len = 0, len = l->fr_len, base = l->fr_base;
    if (len == 0 || len > CN_INT_ABI_FRAME_READ_MAX)
        return 0;
    for (uint32_t i = 0; i < max + 32 && f; i++) {
        uint64_t code, prev, ip, a = f + base;
        if (a < f || a + len < a) { /* a forged pointer at the top of the address space: its
                                       a + len wraps, and would pass the window's check */
            *status = CN_INT_FAULT;
            break;
        }
        if (!win_len || a < win_lo || a + len > win_lo + win_len) {
            /* the window (python_abi.h, CN_INT_ABI_WINDOW), else the frame's own bytes */
            uint64_t lo = a;
            if (l->kind == CN_INT_ABI_IFRAME) {
                lo = a + len > CN_INT_ABI_WINDOW ? a + len - CN_INT_ABI_WINDOW : 0;
                if (lo < (a & ~4095ull))
                    lo = a & ~4095ull;
            }
            uint32_t wlen = (uint32_t)(a + len - lo);
            if (wlen > CN_INT_ABI_WINDOW || rd(arg, lo, b, wlen) < 0) {
                lo = a;
                wlen = len;
                if (rd(arg, a, b, len) < 0) {
                    *status = CN_INT_FAULT;
                    break;
                }
            }
            win_lo = lo;
            win_len = wlen;
        }
        const uint8_t *fb = b + (uint32_t)(a - win_lo);
        memcpy(&code, fb + ((l->fr_code - base) & 0x78), 8);
        memcpy(&prev, fb + ((l->fr_previous - base) & 0x78), 8);
        f = prev;
        bool entry = false;
        uint32_t instr;
        if (l->kind == CN_INT_ABI_FRAMEOBJ) {
            memcpy(&instr, fb + ((l->fr_instr - base) & 0x7c), 4);
            entry = true;
        } else {
            if (l->fr_owner != CN_INT_ABI_NONE &&
                fb[(l->fr_owner - base) & 0x7f] == 3) { /* FRAME_OWNED_BY_CSTACK */
                if (n > 0)
                    out[n - 1].entry = true;
                if (check_entry && prev != expect)
                    goto stale;
                check_entry = false;
                continue;
            }
            if (l->fr_is_entry != CN_INT_ABI_NONE)
                entry = fb[(l->fr_is_entry - base) & 0x7f] != 0;
            if (entry && check_entry && prev != expect)
                goto stale;
            check_entry = check_entry && !entry;
            memcpy(&ip, fb + ((l->fr_instr - base) & 0x78), 8);
            instr = (uint32_t)(ip - (code + l->co_code_adaptive));
        }
        if (n >= max) {
            *status = CN_INT_TRUNCATED;
            break;
        }
        out[n].code = code;
        out[n].instr = (int32_t)instr; /* raw, as the program writes it */
        out[n].entry = entry;
        n++;
    }
    if (check_entry && *status != CN_INT_TRUNCATED) /* no entry frame reached */
        goto stale;
    return n;
stale:
    *status = CN_INT_STALE;
    return 0;
}

/* The id a thread state is indexed under (0: unreadable): native_thread_id, or (3.8–3.10)
 * the tid glibc keeps in the descriptor at thread_id, which is the thread's pthread_self().
 * The kernel writes that tid (the thread's, in its own pid namespace) at the thread's start
 * and zeroes it at its end, so a state whose thread ended names no thread; the main
 * thread's descriptor (in its static TLS, not on a stack) says the same as the others'. */
static uint64_t ts_id(const cn_int__layout *lay, uint32_t pd_tid, cn_int__read_fn rd, void *arg,
                      uint64_t ts)
{
    uint64_t id = 0, self = 0;
    int32_t tid = 0;
    if (lay->ts_native_id != CN_INT_ABI_NONE)
        return rd_u64(rd, arg, ts + lay->ts_native_id, &id) < 0 ? 0 : id;
    if (!pd_tid || rd_u64(rd, arg, ts + lay->abi.ts_thread_id, &self) < 0 || self % 8 ||
        self + pd_tid < self || rd(arg, self + pd_tid, &tid, 4) < 0)
        return 0;
    return tid > 0 ? (uint64_t)tid : 0;
}

size_t cn_int__index_states(const cn_int__layout *lay, uint32_t pd_tid, cn_int__read_fn rd,
                            void *arg, cn_int__ts_id *out, size_t cap, uint32_t *ninterps)
{
    const struct cn_int_abi_layout *l = &lay->abi;
    uint64_t is = 0;
    size_t n = 0;
    *ninterps = 0;
    if (rd_u64(rd, arg, l->runtime + l->rt_interp_head, &is) < 0)
        return 0;
    for (uint32_t i = 0; i < CN_INT_ABI_MAX_INTERPS && is; i++) {
        uint64_t ts = 0;
        *ninterps = i + 1;
        if (rd_u64(rd, arg, is + l->is_threads_head, &ts) < 0)
            return n;
        for (int j = 0; j < CN_INT_ABI_MAX_THREADS && ts && n < cap; j++) {
            out[n++] = (cn_int__ts_id){ts_id(lay, pd_tid, rd, arg, ts), ts, i};
            if (rd_u64(rd, arg, ts + l->ts_next, &ts) < 0)
                break;
        }
        if (rd_u64(rd, arg, is + l->is_next, &is) < 0)
            return n;
    }
    return n;
}

int cn_int__ts_match(const cn_int__ts_id *v, size_t n, uint64_t id, size_t *at)
{
    int found = 0;
    for (size_t i = 0; id && i < n; i++) {
        if (v[i].id != id)
            continue;
        if (found)
            return -EEXIST;
        found = 1;
        *at = i;
    }
    return found;
}
