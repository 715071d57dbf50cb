/* fuzz_interp.c — interp/ over hostile target memory: the input is a process image at a fixed
 * address, its first bytes choose a CPython version and where a code object and a thread
 * state lie in it. Runs the code-object reader (type checks, strings, line table), the line
 * decoders, the user-space frame walk (the BPF program's mirror), the index of thread states
 * (cn_int_capture's) and the _Py_DebugOffsets reader. Never crashes, never reads outside the input
 * (ASan), every walk ends. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "int_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define BASE 0x10000000ull

typedef struct image {
    const uint8_t *p;
    size_t n;
} image;

static int rd(void *arg, uint64_t addr, void *buf, size_t n)
{
    const image *im = arg;
    if (addr < BASE || n > im->n || addr - BASE > im->n - n)
        return -EFAULT;
    memcpy(buf, im->p + (addr - BASE), n);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 8)
        return 0;
    image im = {data, size};
    cn_int__layout l;
    if (cn_int__layout_for(3, 8 + data[0] % 6, &l) < 0)
        return 0;
    uint16_t code_off, ts_off;
    memcpy(&code_off, data + 1, 2);
    memcpy(&ts_off, data + 3, 2);
    cn_int__code c;
    cn_int__types types = {0};
    if (cn_int__read_code(&l.names, rd, &im, BASE + code_off % size, &types, &c) == 0) {
        for (int32_t i = -1; i < 64; i++)
            (void)cn_int__line(l.names.line_format, c.linetable, c.linetable_len, c.first_line, i);
        cn_int__code_clear(&c);
    }
    for (int f = CN_INT__LNOTAB; f <= CN_INT__LOC311; f++)
        (void)cn_int__line(f, data + 5, size - 5, data[5], data[6]);
    cn_int_frame out[CN_INT_MAX_FRAMES];
    int status;
    uint32_t n =
        cn_int__walk(&l.abi, rd, &im, BASE + ts_off % size, out, CN_INT_MAX_FRAMES, &status);
    if (n > CN_INT_MAX_FRAMES)
        abort();
    /* cn_int_capture's index of the thread states, the runtime where the state is: by
     * native_thread_id (3.11+) or through a forged glibc descriptor (3.8–3.10) */
    static cn_int__ts_id ids[CN_INT_ABI_MAX_INTERPS * CN_INT_ABI_MAX_THREADS];
    uint32_t ninterps;
    size_t at;
    l.abi.runtime = BASE + ts_off % size;
    size_t nids =
        cn_int__index_states(&l, 720, rd, &im, ids, sizeof(ids) / sizeof(ids[0]), &ninterps);
    if (nids > sizeof(ids) / sizeof(ids[0]) || ninterps > CN_INT_ABI_MAX_INTERPS)
        abort();
    (void)cn_int__ts_match(ids, nids, data[7], &at);
    cn_int__layout d;
    if (cn_int__layout_debug(data, size, &d) == 0 &&
        (d.abi.fr_len == 0 || d.abi.fr_len > CN_INT_ABI_FRAME_READ_MAX))
        abort();
    return 0;
}
