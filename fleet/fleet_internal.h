/* fleet_internal.h — what fleet/'s files share: TabSeparated encoding and decoding, the
 * rollup tiers (schema.c) the reader picks from. */
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

/* Whether s is a usable database or cluster name: 1 to 64 letters, digits or '_'. */
bool cn_fleet__name_ok(const char *s);

/* The rollup tiers, coarsest first (docs/fleet.md "Schema"): each is the raw rows summed
 * per (bucket, labels, stack), `time` being the bucket's start in UTC, filled by its own
 * materialized view. */
typedef struct cn_fleet__tier {
    const char *table;
    int secs; /* bucket length; each divides the next coarser one */
} cn_fleet__tier;
#define CN_FLEET__N_TIERS 2
extern const cn_fleet__tier cn_fleet__tiers[CN_FLEET__N_TIERS];

/* t rounded down (up) to a multiple of secs; the open ends (INT64_MIN/MAX) stay open. */
int64_t cn_fleet__floor_to(int64_t t, int secs);
int64_t cn_fleet__ceil_to(int64_t t, int secs);

#endif /* CN_FLEET_INTERNAL_H */
