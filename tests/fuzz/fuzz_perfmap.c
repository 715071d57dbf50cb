/* libFuzzer target: the text parsers of the symbolizer over untrusted bytes — JIT perf
 * maps (/tmp/perf-PID.map, written by the target process) and kallsyms-format files —
 * then lookups on the tables they built. */
#include <stddef.h>
#include <stdint.h>

#include "cn_sym.h"
#include "sym_fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    (void)cn_sym_fuzz_perfmap(data, size);
    (void)cn_sym_fuzz_kallsyms(data, size);
    return 0;
}
