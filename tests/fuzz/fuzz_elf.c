/* libFuzzer target: an untrusted ELF image through the symbolizer's loader (segments,
 * .symtab/.dynsym, MiniDebugInfo decompression, PLT synthesis), then lookups. */
#include <stddef.h>
#include <stdint.h>

#include "cn_sym.h"
#include "sym_fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    (void)cn_sym_fuzz_elf(data, size);
    return 0;
}
