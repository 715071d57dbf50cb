/* opt.c — documented option tables (cn_opt): matching argv against a table, printing it
 * as aligned columns, the nearest name to a typo, and the executable's build id for
 * --version. The tables themselves live next to their parsers (client/, daemon/). */
#include <elf.h>
#include <link.h>
#include <stdlib.h>

#include "cn_common.h"

static bool enabled(const cn_opt *o, unsigned flags)
{
    return o->when == 0 || (o->when & flags);
}

const cn_opt *cn_opt_match(const cn_opt *tab, unsigned flags, int argc, char **argv, int *i,
                           const char **val)
{
    const char *a = argv[*i];
    *val = NULL;
    for (const cn_opt *o = tab; o->lng; o++) {
        if (!enabled(o, flags))
            continue;
        size_t n = strlen(o->lng);
        bool whole = !strcmp(a, o->lng) || (o->shrt && !strcmp(a, o->shrt));
        bool inl = o->arg && !strncmp(a, o->lng, n) && a[n] == '=';
        if (!whole && !inl)
            continue;
        if (inl)
            *val = a + n + 1;
        else if (o->arg && *i + 1 < argc)
            *val = argv[++*i];
        return o;
    }
    return NULL;
}

const cn_opt *cn_opt_find(const cn_opt *tab, const char *name)
{
    for (const cn_opt *o = tab; o->lng; o++)
        if (!strcmp(o->lng, name) || (o->shrt && !strcmp(o->shrt, name)))
            return o;
    return NULL;
}

#define OPT_COL 30

/* Prints text wrapped at width, each continuation line indented by col. */
static void print_wrapped(FILE *out, const char *text, int col, int width)
{
    int pos = col;
    const char *p = text;
    while (*p) {
        while (*p == ' ')
            p++;
        size_t w = strcspn(p, " ");
        if (!w)
            break;
        if (pos > col && pos + 1 + (int)w > width) {
            fprintf(out, "\n%*s", col, "");
            pos = col;
        } else if (pos > col) {
            fputc(' ', out);
            pos++;
        }
        fprintf(out, "%.*s", (int)w, p);
        pos += (int)w;
        p += w;
    }
    fputc('\n', out);
}

void cn_opt_print(FILE *out, const cn_opt *tab, unsigned flags, int width, const cn_opt *shadow)
{
    for (const cn_opt *o = tab; o->lng; o++) {
        if (!enabled(o, flags) || (shadow && cn_opt_find(shadow, o->lng)))
            continue;
        char left[128], help[1024];
        int n = snprintf(left, sizeof(left), "  %s%s%s%s%s", o->shrt ? o->shrt : "",
                         o->shrt ? ", " : "", o->lng, o->arg ? " " : "", o->arg ? o->arg : "");
        snprintf(help, sizeof(help), "%s%s%s%s", o->help, o->dflt ? " (default: " : "",
                 o->dflt ? o->dflt : "", o->dflt ? ")" : "");
        if (n + 2 > OPT_COL)
            fprintf(out, "%s\n%*s", left, OPT_COL, "");
        else
            fprintf(out, "%-*s", OPT_COL, left);
        print_wrapped(out, help, OPT_COL, width);
    }
}

size_t cn_text_distance(const char *a, const char *b)
{
    /* Optimal string alignment: Levenshtein plus adjacent transpositions ("fromat"). */
    size_t la = strlen(a), lb = strlen(b), w = lb + 1;
    size_t *d = malloc((la + 1) * w * sizeof(*d));
    if (!d)
        return (size_t)-1;
    for (size_t i = 0; i <= la; i++)
        d[i * w] = i;
    for (size_t j = 0; j <= lb; j++)
        d[j] = j;
    for (size_t i = 1; i <= la; i++) {
        for (size_t j = 1; j <= lb; j++) {
            size_t best = d[(i - 1) * w + j - 1] + (a[i - 1] != b[j - 1]);
            if (d[(i - 1) * w + j] + 1 < best)
                best = d[(i - 1) * w + j] + 1;
            if (d[i * w + j - 1] + 1 < best)
                best = d[i * w + j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[(i - 2) * w + j - 2] + 1 < best)
                best = d[(i - 2) * w + j - 2] + 1;
            d[i * w + j] = best;
        }
    }
    size_t r = d[la * w + lb];
    free(d);
    return r;
}

const char *cn_text_nearest(const char *word, const char *const *cands, size_t n)
{
    const char *best = NULL;
    size_t best_d = (size_t)-1, len = strlen(word);
    for (size_t k = 0; k < n; k++) {
        size_t d = cn_text_distance(word, cands[k]);
        if (d < best_d) {
            best_d = d;
            best = cands[k];
        }
    }
    return best && best_d <= 2 && best_d * 2 < len ? best : NULL;
}

typedef struct build_id_ctx {
    char *buf;
    size_t n;
    bool found;
} build_id_ctx;

/* The first object dl_iterate_phdr reports is the executable: its NT_GNU_BUILD_ID note. */
static int find_build_id(struct dl_phdr_info *info, size_t size, void *data)
{
    build_id_ctx *c = data;
    for (int k = 0; k < info->dlpi_phnum && !c->found; k++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[k];
        if (ph->p_type != PT_NOTE)
            continue;
        const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
            const char *name = p + sizeof(*nh);
            const unsigned char *desc = (const unsigned char *)name + ((nh->n_namesz + 3) & ~3u);
            if ((const char *)desc + nh->n_descsz > end)
                break;
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && !memcmp(name, "GNU", 4)) {
                size_t o = 0;
                for (size_t b = 0; b < nh->n_descsz && o + 3 <= c->n; b++)
                    o += (size_t)snprintf(c->buf + o, c->n - o, "%02x", desc[b]);
                c->found = o > 0;
                break;
            }
            p = (const char *)desc + ((nh->n_descsz + 3) & ~3u);
        }
    }
    return 1; /* the executable only */
}

const char *cn_common_build_id(char *buf, size_t n)
{
    build_id_ctx c = {.buf = buf, .n = n};
    if (!n)
        return buf;
    buf[0] = '\0';
    dl_iterate_phdr(find_build_id, &c);
    if (!c.found)
        snprintf(buf, n, "unknown");
    return buf;
}
