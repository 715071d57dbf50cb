/* layout.c — where CPython 3.8–3.13 keep what the frame walk and the naming read.
 *
 * One row per minor version, the offsets read from the pyenv builds' DWARF with
 * `gdb -batch -ex 'print (long)&((struct _ts*)0)->thread_id' libpython3.X.so` (the command
 * that prints them all is in docs/python.md; the unit test checks the rows' shape, the
 * real-interpreter test checks them at work, and for 3.13 against the interpreter's own
 * _Py_DebugOffsets). Patch releases of one minor version keep these structs. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "int_internal.h"

#define NONE CN_INT_ABI_NONE

typedef struct row {
    int minor;
    struct cn_int_abi_layout abi;
    cn_int__names names;
} row;

/* names: co_filename, co_name, co_qualname, co_firstlineno, co_linetable, ascii_size,
 *        compact_size, line_format, instr_bytes */
static const row rows[] = {
    {8,
     {.kind = CN_INT_ABI_FRAMEOBJ,
      .rt_interp_head = 32,
      .is_id = 16,
      .ts_status = NONE,
      .is_next = 0,
      .is_threads_head = 8,
      .ts_next = 8,
      .ts_thread_id = 176,
      .ts_frame = 24,
      .cf_current_frame = NONE,
      .fr_code = 32,
      .fr_previous = 24,
      .fr_instr = 104,
      .fr_is_entry = NONE,
      .fr_owner = NONE,
      .co_code_adaptive = 0},
     {104, 112, NONE, 40, 120, 48, 72, CN_INT__LNOTAB, true}},
    {9,
     {.kind = CN_INT_ABI_FRAMEOBJ,
      .rt_interp_head = 32,
      .is_id = 24,
      .ts_status = NONE,
      .is_next = 0,
      .is_threads_head = 8,
      .ts_next = 8,
      .ts_thread_id = 176,
      .ts_frame = 24,
      .cf_current_frame = NONE,
      .fr_code = 32,
      .fr_previous = 24,
      .fr_instr = 104,
      .fr_is_entry = NONE,
      .fr_owner = NONE,
      .co_code_adaptive = 0},
     {104, 112, NONE, 40, 120, 48, 72, CN_INT__LNOTAB, true}},
    {10,
     {.kind = CN_INT_ABI_FRAMEOBJ,
      .rt_interp_head = 32,
      .is_id = 24,
      .ts_status = NONE,
      .is_next = 0,
      .is_threads_head = 8,
      .ts_next = 8,
      .ts_thread_id = 176,
      .ts_frame = 24,
      .cf_current_frame = NONE,
      .fr_code = 32,
      .fr_previous = 24,
      .fr_instr = 96,
      .fr_is_entry = NONE,
      .fr_owner = NONE,
      .co_code_adaptive = 0},
     {104, 112, NONE, 40, 120, 48, 72, CN_INT__LT310, false}},
    {11,
     {.kind = CN_INT_ABI_IFRAME,
      .rt_interp_head = 40,
      .is_id = 48,
      .ts_status = NONE,
      .is_next = 0,
      .is_threads_head = 16,
      .ts_next = 8,
      .ts_thread_id = 152,
      .ts_frame = 56,
      .cf_current_frame = 8,
      .fr_code = 32,
      .fr_previous = 48,
      .fr_instr = 56,
      .fr_is_entry = 68,
      .fr_owner = NONE,
      .co_code_adaptive = 184},
     {112, 120, 128, 72, 136, 48, 72, CN_INT__LOC311, true}},
    {12,
     {.kind = CN_INT_ABI_IFRAME,
      .rt_interp_head = 40,
      .is_id = 8,
      .ts_status = 24,
      .is_next = 0,
      .is_threads_head = 72,
      .ts_next = 8,
      .ts_thread_id = 136,
      .ts_frame = 56,
      .cf_current_frame = 0,
      .fr_code = 0,
      .fr_previous = 8,
      .fr_instr = 56,
      .fr_is_entry = NONE,
      .fr_owner = 70,
      .co_code_adaptive = 192},
     {112, 120, 128, 68, 136, 40, 56, CN_INT__LOC311, true}},
    {13,
     {.kind = CN_INT_ABI_IFRAME,
      .rt_interp_head = 632,
      .is_id = 7272,
      .ts_status = 32,
      .is_next = 7264,
      .is_threads_head = 7344,
      .ts_next = 8,
      .ts_thread_id = 152,
      .ts_frame = 72,
      .cf_current_frame = NONE,
      .fr_code = 0,
      .fr_previous = 8,
      .fr_instr = 56,
      .fr_is_entry = NONE,
      .fr_owner = 70,
      .co_code_adaptive = 200},
     {112, 120, 128, 68, 136, 40, 56, CN_INT__LOC311, true}},
};

/* The span of a frame the walk reads in one go: every field it uses, from an 8-aligned base.
 * -EINVAL when the fields are too far apart (or a pointer field is not 8-aligned from it). */
static int frame_read(struct cn_int_abi_layout *a)
{
    const uint32_t f[] = {a->fr_code, a->fr_previous, a->fr_instr, a->fr_is_entry, a->fr_owner};
    uint32_t lo = UINT32_MAX, hi = 0;
    for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
        if (f[i] == NONE)
            continue;
        uint32_t size = i < 2 || (i == 2 && a->kind == CN_INT_ABI_IFRAME) ? 8 : i == 2 ? 4 : 1;
        if (f[i] < lo)
            lo = f[i];
        if (f[i] + size > hi)
            hi = f[i] + size;
    }
    lo &= ~7u;
    if (hi - lo > CN_INT_ABI_FRAME_READ_MAX || (a->fr_code - lo) % 8 || (a->fr_previous - lo) % 8)
        return -EINVAL;
    a->fr_base = lo;
    a->fr_len = hi - lo;
    return 0;
}

int cn_int__layout_for(int major, int minor, cn_int__layout *out)
{
    if (major != 3)
        return -ENOTSUP;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        if (rows[i].minor == minor) {
            memset(out, 0, sizeof(*out));
            out->major = 3;
            out->minor = minor;
            out->abi = rows[i].abi;
            out->names = rows[i].names;
            /* 3.11, 3.12: native_thread_id is the word after thread_id (cpython/pystate.h) */
            out->ts_native_id = minor >= 11 ? out->abi.ts_thread_id + 8 : NONE;
            return frame_read(&out->abi);
        }
    }
    return -ENOTSUP;
}

static uint64_t u64_at(const uint8_t *p, size_t off)
{
    uint64_t v;
    memcpy(&v, p + off, sizeof(v));
    return v;
}

/* _Py_DebugOffsets of 3.13 (Include/internal/pycore_runtime.h at v3.13.0): each field a
 * uint64_t; the offsets below are of the fields in that block. */
enum {
    DO_VERSION = 8,
    DO_FREE_THREADED = 16,
    DO_RT_INTERP_HEAD = 40,
    DO_IS_ID = 56,
    DO_IS_NEXT = 64,
    DO_IS_THREADS_HEAD = 72,
    DO_TS_NEXT = 168,
    DO_TS_CURRENT_FRAME = 184,
    DO_TS_THREAD_ID = 192,
    DO_TS_NATIVE_THREAD_ID = 200,
    DO_FR_PREVIOUS = 232,
    DO_FR_EXECUTABLE = 240,
    DO_FR_INSTR_PTR = 248,
    DO_FR_OWNER = 264,
    DO_CO_FILENAME = 280,
    DO_CO_NAME = 288,
    DO_CO_QUALNAME = 296,
    DO_CO_LINETABLE = 304,
    DO_CO_FIRSTLINENO = 312,
    DO_CO_ADAPTIVE = 344,
    DO_UNICODE_ASCII_SIZE = 560,
    DO_SIZE = 584,
};
/* PyThreadState._status: not in 3.13's _Py_DebugOffsets; read from pyenv 3.13.0's DWARF (the
 * struct is the same in every 3.13 release, the block's version checked above). */
#define TS_STATUS_313 32

int cn_int__layout_debug(const uint8_t *p, size_t n, cn_int__layout *out)
{
    if (n < 16 || memcmp(p, "xdebugpy", 8) != 0)
        return -ENOENT;
    uint64_t hex = u64_at(p, DO_VERSION);
    int major = (int)((hex >> 24) & 0xff), minor = (int)((hex >> 16) & 0xff);
    if (major != 3 || minor != 13 || n < DO_SIZE)
        return -ENOTSUP;
    if (u64_at(p, DO_FREE_THREADED) != 0)
        return -ENOTSUP; /* 3.13t: other object headers, untested */
    static const uint16_t fields[] = {DO_RT_INTERP_HEAD,    DO_IS_ID,
                                      DO_IS_NEXT,           DO_IS_THREADS_HEAD,
                                      DO_TS_NEXT,           DO_TS_CURRENT_FRAME,
                                      DO_TS_THREAD_ID,      DO_TS_NATIVE_THREAD_ID,
                                      DO_FR_PREVIOUS,       DO_FR_EXECUTABLE,
                                      DO_FR_INSTR_PTR,      DO_FR_OWNER,
                                      DO_CO_FILENAME,       DO_CO_NAME,
                                      DO_CO_QUALNAME,       DO_CO_LINETABLE,
                                      DO_CO_FIRSTLINENO,    DO_CO_ADAPTIVE,
                                      DO_UNICODE_ASCII_SIZE};
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
        if (u64_at(p, fields[i]) > 65536)
            return -EINVAL; /* no struct read here is that large */
    cn_int__layout l = {.major = major,
                        .minor = minor,
                        .ts_native_id = (uint32_t)u64_at(p, DO_TS_NATIVE_THREAD_ID)};
    l.abi = (struct cn_int_abi_layout){
        .kind = CN_INT_ABI_IFRAME,
        .rt_interp_head = (uint32_t)u64_at(p, DO_RT_INTERP_HEAD),
        .is_id = (uint32_t)u64_at(p, DO_IS_ID),
        .ts_status = TS_STATUS_313,
        .is_next = (uint32_t)u64_at(p, DO_IS_NEXT),
        .is_threads_head = (uint32_t)u64_at(p, DO_IS_THREADS_HEAD),
        .ts_next = (uint32_t)u64_at(p, DO_TS_NEXT),
        .ts_thread_id = (uint32_t)u64_at(p, DO_TS_THREAD_ID),
        .ts_frame = (uint32_t)u64_at(p, DO_TS_CURRENT_FRAME),
        .cf_current_frame = NONE,
        .fr_code = (uint32_t)u64_at(p, DO_FR_EXECUTABLE),
        .fr_previous = (uint32_t)u64_at(p, DO_FR_PREVIOUS),
        .fr_instr = (uint32_t)u64_at(p, DO_FR_INSTR_PTR),
        .fr_is_entry = NONE,
        .fr_owner = (uint32_t)u64_at(p, DO_FR_OWNER),
        .co_code_adaptive = (uint32_t)u64_at(p, DO_CO_ADAPTIVE),
    };
    if (frame_read(&l.abi) < 0)
        return -EINVAL;
    uint32_t ascii = (uint32_t)u64_at(p, DO_UNICODE_ASCII_SIZE);
    l.names = (cn_int__names){
        .co_filename = (uint32_t)u64_at(p, DO_CO_FILENAME),
        .co_name = (uint32_t)u64_at(p, DO_CO_NAME),
        .co_qualname = (uint32_t)u64_at(p, DO_CO_QUALNAME),
        .co_firstlineno = (uint32_t)u64_at(p, DO_CO_FIRSTLINENO),
        .co_linetable = (uint32_t)u64_at(p, DO_CO_LINETABLE),
        .ascii_size = ascii,
        .compact_size = ascii + 16, /* + utf8_length, utf8 (3.12+) */
        .line_format = CN_INT__LOC311,
        .instr_bytes = true,
    };
    *out = l;
    return 0;
}

int32_t cn_int__instr_index(const cn_int__names *l, uint32_t raw)
{
    int32_t v = (int32_t)raw;
    if (v < 0)
        return -1; /* 3.11+: prev_instr before the first instruction; f_lasti -1 */
    return l->instr_bytes ? v / 2 : v;
}

int cn_int__pthread_field(const uint32_t desc[3], uint32_t bits, uint32_t struct_size,
                          uint32_t *off)
{
    /* an array field says its element count in desc[1]; tid is a single pid_t */
    uint32_t bytes = bits / 8;
    if (desc[0] != bits || desc[1] != 1 || !bytes || desc[2] % bytes ||
        (uint64_t)desc[2] + bytes > struct_size)
        return -EINVAL;
    *off = desc[2];
    return 0;
}
