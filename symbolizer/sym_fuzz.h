/* sym_fuzz.h — the symbolizer's parsers over untrusted bytes, as entry points for the
 * fuzz targets (tests/fuzz/) and the unit tests: not part of cn_sym.h's API. Test code
 * includes it through the module's private directory (tests/CMakeLists.txt).
 */
#ifndef CN_SYM_FUZZ_H
#define CN_SYM_FUZZ_H

#include <stddef.h>
#include <stdint.h>

/* Each builds a symbol table from data, runs a few lookups and frees it. Return the
 * number of symbols (for an ELF image: plus its FDE function ranges, when it has no
 * .symtab) or negative errno. */
int cn_sym_fuzz_elf(const uint8_t *data, size_t size);
int cn_sym_fuzz_perfmap(const uint8_t *data, size_t size);
int cn_sym_fuzz_kallsyms(const uint8_t *data, size_t size);

#endif /* CN_SYM_FUZZ_H */
