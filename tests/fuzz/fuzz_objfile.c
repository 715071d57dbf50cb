/* libFuzzer target: untrusted bytes through objfile/'s decoders (the ELF header, sections
 * by name, build-id notes in both alignments, the .eh_frame_hdr table in both byte
 * orders), which the sampler and the symbolizer both run on a target's files. */
#include <stddef.h>
#include <stdint.h>

#include "cn_obj.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    (void)cn_obj_fuzz(data, size);
    return 0;
}
