/* fleet_internal.h — what fleet/'s files share: TabSeparated encoding and decoding. */
#ifndef CN_FLEET_INTERNAL_H
#define CN_FLEET_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cn_common.h"

/* Appends s TSV-escaped; quoted: as a '…' array element. 0 or -ENOMEM. */
int cn_fleet__tsv(cn_buf *b, const char *s, bool quoted);
/* Appends a DateTime field (unix seconds). */
int cn_fleet__time(cn_buf *b, int64_t t);
/* Splits one TSV line (len bytes, no newline) into at most max fields, unescaping in
 * place (the line is modified; fields are NUL-terminated). Returns the field count. */
size_t cn_fleet__tsv_split(char *line, size_t len, char **fields, size_t max);

#endif /* CN_FLEET_INTERNAL_H */
