/* import_internal.h — what formats/'s importer files (import.c, import_folded.c,
 * cpuprofile_parse.c, cpuprofile_model.c, import_perf_script.c, import_pprof.c,
 * import_tree_json.c) share, and what the importers' fuzz targets call directly.
 *
 * import.c reads a file (or takes a buffer), undoes gzip, sniffs the content with the
 * cn_fmt__looks_* predicates below and hands the bytes to one importer. The .cpuprofile
 * importer and that of canopy's own JSON tree are also stream parsers (feed chunks, then
 * finish), so a large JSON file is never held in memory whole. Lines are split by a tiny iterator
 * shared by the text formats. Nothing here is public; names carry the cn_fmt__ prefix.
 */
#ifndef CN_FMT_IMPORT_INTERNAL_H
#define CN_FMT_IMPORT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "formats_internal.h"

/* The largest decompressed input accepted (bytes): a bound on what a gzip bomb costs. */
#define CN_FMT__IMPORT_MAX ((size_t)4 << 30)

/* ---- the importers (import.c detects the format and dispatches) ------------------- */

/* Each parses a whole decompressed buffer into a new profile. name is the file name for
 * messages. Return 0 and *out, or negative errno with err "NAME:LINE: what" (or
 * "NAME: byte OFFSET: what"). */
int cn_fmt__import_folded(const char *data, size_t len, const char *name, cn_agg_profile **out,
                          cn_err *err);
int cn_fmt__import_cpuprofile(const char *data, size_t len, const char *name, cn_agg_profile **out,
                              cn_err *err);
int cn_fmt__import_perf_script(const char *data, size_t len, const char *name, cn_agg_profile **out,
                               cn_err *err);
int cn_fmt__import_pprof(const void *data, size_t len, const char *name, cn_agg_profile **out,
                         cn_err *err);
/* canopy's JSON tree (docs/cli.md "JSON tree"): each node's path weighted by its self. */
int cn_fmt__import_tree_json(const char *data, size_t len, const char *name, cn_agg_profile **out,
                             cn_err *err);
/* True when the buffer plausibly is a gzipped or plain pprof profile.proto. */
bool cn_fmt__is_pprof(const void *data, size_t len);

/* Hands each line of data (without its end of line) to fn, setting *lineno to the line's
 * 1-based number first so that fn and the caller's error path can name it. A line holding
 * a NUL byte is an error ("NAME:LINE: NUL byte in a text line", err set). Returns 0, or
 * the first negative errno from fn (which sets err itself) or for a NUL byte. */
int cn_fmt__for_each_line(const char *data, size_t len, const char *name, size_t *lineno,
                          int (*fn)(void *ctx, const char *line, size_t len), void *ctx,
                          cn_err *err);

static inline bool cn_fmt__is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* ---- sniffers: true when the (decompressed) head of a file looks like the format --- */

bool cn_fmt__looks_json(const char *data, size_t len);
/* The index of the first byte at or after i that is not JSON white space (at i == 0 a
 * UTF-8 byte order mark is skipped too); len when there is none. */
size_t cn_fmt__json_skip_blank(const char *data, size_t len, size_t i);

/* A JSON object whose first key is "unit": canopy's JSON tree (checked before
 * cn_fmt__looks_json, which would take it for a .cpuprofile). */
bool cn_fmt__looks_tree_json(const char *data, size_t len);
bool cn_fmt__looks_perf_script(const char *data, size_t len);
bool cn_fmt__looks_folded(const char *data, size_t len);

/* ---- the streaming .cpuprofile parser -------------------------------------------- */

typedef struct cn_fmt__cpuprof cn_fmt__cpuprof;

/* A parser that reports errors as "NAME: byte OFFSET: what" (name is copied).
 * NULL on ENOMEM. */
cn_fmt__cpuprof *cn_fmt__cpuprof_new(const char *name);
/* Parses the next chunk. Returns 0 or negative errno with err set (then only _free). */
int cn_fmt__cpuprof_feed(cn_fmt__cpuprof *c, const void *data, size_t len, cn_err *err);
/* Ends the input and hands over the profile (*out, caller frees). 0 or negative errno. */
int cn_fmt__cpuprof_finish(cn_fmt__cpuprof *c, cn_agg_profile **out, cn_err *err);
/* Frees the parser and a profile it still owns; accepts NULL; returns NULL. */
cn_fmt__cpuprof *cn_fmt__cpuprof_free(cn_fmt__cpuprof *c);

/* ---- the streaming JSON tree parser (import_tree_json.c) ------------------------- */

typedef struct cn_fmt__treejson cn_fmt__treejson;

/* The same contract as the .cpuprofile parser's: _new (NULL on ENOMEM), _feed chunks,
 * _finish hands over the profile, _free accepts NULL and returns NULL. */
cn_fmt__treejson *cn_fmt__treejson_new(const char *name);
int cn_fmt__treejson_feed(cn_fmt__treejson *c, const void *data, size_t len, cn_err *err);
int cn_fmt__treejson_finish(cn_fmt__treejson *c, cn_agg_profile **out, cn_err *err);
cn_fmt__treejson *cn_fmt__treejson_free(cn_fmt__treejson *c);

#endif /* CN_FMT_IMPORT_INTERNAL_H */
