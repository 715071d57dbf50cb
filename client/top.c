/* top.c — `canopy top`: a full-screen ncurses view of a profile, refreshed every second
 * for live sources.
 *
 * Two panes: the hottest functions by self weight, and the call tree (or the inverted
 * tree) with expand/collapse. Keys (docs/cli.md) push transforms onto a stack that is
 * sent with every query: f focus on the selected node, F focus on its function, m merge
 * its function, M merge the node, d drop its function, u pops; i inverts, w cycles the
 * time window (all, 60 s, 10 s), c cycles the tree's roots (none, process, container, pod,
 * service, cgroup), p pauses refreshes, / searches, q quits.
 *
 * State that must survive a refresh is kept by name, never by node index: the selection
 * is a call node path (root first), the expanded nodes a sorted set of joined paths.
 * After a refresh the selection falls back to its longest existing prefix
 * (docs/calltree.md §2.14); after a transform it is mapped through cn_agg_map_path.
 *
 * The loop polls stdin and a signalfd (SIGINT, SIGTERM, SIGHUP, SIGQUIT blocked while top
 * runs), so a signal ends the loop through the one cleanup path that restores the
 * terminal; no handler and no global state are involved.
 */
#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <curses.h>

#include "client.h"
#include "cn_common.h"
#include "live.h"

#define MAX_TRANSFORMS    64
#define SEP               '\x1f' /* joins path names into expanded-set keys */
#define REFRESH_NS        1000000000LL
#define AUTO_EXPAND_SHARE 0.05 /* auto-expanded nodes hold at least 5% of the total */

static const int64_t windows_ns[] = {0, 60000000000LL, 10000000000LL};
static const char *const window_names[] = {"all", "60 s", "10 s"};
/* Key c cycles the tree's roots (docs/cli-live.md "Containers and cgroups"). */
static const cn_agg_group_by groups[] = {CN_AGG_GROUP_NONE,      CN_AGG_GROUP_PROCESS,
                                         CN_AGG_GROUP_CONTAINER, CN_AGG_GROUP_POD,
                                         CN_AGG_GROUP_SERVICE,   CN_AGG_GROUP_CGROUP};

typedef enum top_mode { MODE_NORMAL, MODE_SEARCH } top_mode;

typedef struct top_row {
    int32_t node;
    int depth;
} top_row;

typedef struct top_state {
    const cn_top_source *src;
    cn_agg_transform tfs[MAX_TRANSFORMS];
    size_t n_tfs;
    bool inverted;
    int window;
    int group; /* index in groups[] */
    bool paused;
    bool auto_expand; /* until the user expands or collapses by hand */

    cn_top_snapshot snap;
    bool have_snap;
    /* What the snapshot was asked with: a failed query for something else must not leave
     * it on screen under the new view's headings. */
    bool snap_inverted;
    int snap_window;
    size_t snap_n_tfs;
    int64_t last_fetch_ns;
    bool need_fetch;

    top_row *rows; /* visible tree rows */
    size_t n_rows, cap_rows;
    char **expanded; /* sorted joined paths; owned */
    size_t n_expanded, cap_expanded;
    char **sel; /* selected path (names, root first); owned */
    size_t sel_len;
    size_t sel_row, scroll;

    top_mode mode;
    char search[128];
    size_t search_len;
    char msg[640];
    bool colors;
} top_state;

/* ---------------------------------------------------------------------------------------
 * Paths and the expanded set
 */

static void path_free(char **p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(p[i]);
    free(p);
}

/* The path of node id (names, root first), malloc'ed. NULL on ENOMEM. */
static char **node_path(const cn_top_snapshot *s, int32_t id, size_t *len)
{
    size_t n = 0;
    for (int32_t x = id; x >= 0; x = s->nodes[x].parent)
        n++;
    char **p = calloc(n ? n : 1, sizeof(*p));
    if (!p)
        return NULL;
    size_t i = n;
    for (int32_t x = id; x >= 0; x = s->nodes[x].parent) {
        if (!(p[--i] = strdup(s->nodes[x].name))) {
            path_free(p, n);
            return NULL;
        }
    }
    *len = n;
    return p;
}

/* The joined key of node id; malloc'ed, NULL on ENOMEM. */
static char *node_key(const cn_top_snapshot *s, int32_t id)
{
    size_t n = 0;
    for (int32_t x = id; x >= 0; x = s->nodes[x].parent)
        n += strlen(s->nodes[x].name) + 1;
    char *k = malloc(n ? n : 1);
    if (!k)
        return NULL;
    size_t end = n ? n - 1 : 0;
    k[end] = '\0';
    for (int32_t x = id; x >= 0; x = s->nodes[x].parent) {
        size_t l = strlen(s->nodes[x].name);
        end -= l;
        memcpy(k + end, s->nodes[x].name, l);
        if (end)
            k[--end] = SEP;
    }
    return k;
}

static int cmp_key(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool is_expanded_key(const top_state *st, const char *key)
{
    return st->n_expanded &&
           bsearch(&key, st->expanded, st->n_expanded, sizeof(char *), cmp_key) != NULL;
}

static bool is_expanded(const top_state *st, int32_t id)
{
    char *k = node_key(&st->snap, id);
    bool r = k && is_expanded_key(st, k);
    free(k);
    return r;
}

/* Adds or removes node id's key. 0 or -ENOMEM. */
static int set_expanded(top_state *st, int32_t id, bool on)
{
    char *k = node_key(&st->snap, id);
    if (!k)
        return -ENOMEM;
    size_t lo = 0, hi = st->n_expanded;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (strcmp(st->expanded[mid], k) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    bool present = lo < st->n_expanded && !strcmp(st->expanded[lo], k);
    if (on == present) {
        free(k);
        return 0;
    }
    if (!on) {
        free(st->expanded[lo]);
        memmove(&st->expanded[lo], &st->expanded[lo + 1],
                (st->n_expanded - lo - 1) * sizeof(char *));
        st->n_expanded--;
        free(k);
        return 0;
    }
    if (CN_RESERVE(st->expanded, st->cap_expanded, st->n_expanded + 1) < 0) {
        free(k);
        return -ENOMEM;
    }
    memmove(&st->expanded[lo + 1], &st->expanded[lo], (st->n_expanded - lo) * sizeof(char *));
    st->expanded[lo] = k;
    st->n_expanded++;
    return 0;
}

static void clear_expanded(top_state *st)
{
    path_free(st->expanded, st->n_expanded);
    st->expanded = NULL;
    st->n_expanded = st->cap_expanded = 0;
}

static void set_selection(top_state *st, char **path, size_t len)
{
    path_free(st->sel, st->sel_len);
    st->sel = path;
    st->sel_len = path ? len : 0;
}

/* ---------------------------------------------------------------------------------------
 * Rows
 */

static int push_row(top_state *st, int32_t node, int depth)
{
    if (CN_RESERVE(st->rows, st->cap_rows, st->n_rows + 1) < 0)
        return -ENOMEM;
    st->rows[st->n_rows++] = (top_row){node, depth};
    return 0;
}

/* Auto-expansion: every node holding at least AUTO_EXPAND_SHARE of the total. */
static int auto_expand(top_state *st)
{
    const cn_top_snapshot *s = &st->snap;
    double limit = AUTO_EXPAND_SHARE * (s->total < 0 ? -s->total : s->total);
    for (size_t i = 0; i < s->n_nodes; i++) {
        double t = s->nodes[i].total < 0 ? -s->nodes[i].total : s->nodes[i].total;
        if (s->nodes[i].first_child >= 0 && t >= limit && t > 0) {
            int rc = set_expanded(st, (int32_t)i, true);
            if (rc < 0)
                return rc;
        }
    }
    return 0;
}

/* Rebuilds the visible rows (depth first through expanded nodes). */
static int build_rows(top_state *st)
{
    const cn_top_snapshot *s = &st->snap;
    st->n_rows = 0;
    if (s->first_root < 0)
        return 0;
    /* Iterative walk: next node = first child if expanded, else next sibling or an
     * ancestor's next sibling. */
    int32_t x = s->first_root;
    int depth = 0;
    while (x >= 0) {
        int rc = push_row(st, x, depth);
        if (rc < 0)
            return rc;
        if (s->nodes[x].first_child >= 0 && is_expanded(st, x)) {
            x = s->nodes[x].first_child;
            depth++;
            continue;
        }
        while (x >= 0 && s->nodes[x].next_sibling < 0) {
            x = s->nodes[x].parent;
            depth--;
        }
        if (x >= 0)
            x = s->nodes[x].next_sibling;
    }
    return 0;
}

/* The node at the longest existing prefix of the selection path, or -1. */
static int32_t find_selection(const top_state *st)
{
    const cn_top_snapshot *s = &st->snap;
    int32_t found = -1, level = s->first_root;
    for (size_t i = 0; i < st->sel_len && level >= 0; i++) {
        int32_t x = level;
        while (x >= 0 && strcmp(s->nodes[x].name, st->sel[i]))
            x = s->nodes[x].next_sibling;
        if (x < 0)
            break;
        found = x;
        level = s->nodes[x].first_child;
    }
    return found;
}

/* Puts sel_row on the selected node (expanding its ancestors), or on row 0. */
static int place_selection(top_state *st)
{
    int32_t id = find_selection(st);
    if (id >= 0)
        for (int32_t a = st->snap.nodes[id].parent; a >= 0; a = st->snap.nodes[a].parent) {
            int rc = set_expanded(st, a, true);
            if (rc < 0)
                return rc;
        }
    int rc = build_rows(st);
    if (rc < 0)
        return rc;
    st->sel_row = 0;
    for (size_t r = 0; r < st->n_rows; r++)
        if (st->rows[r].node == id) {
            st->sel_row = r;
            break;
        }
    return 0;
}

/* Makes the selection path that of the node on sel_row. */
static int select_row(top_state *st, size_t row)
{
    if (row >= st->n_rows)
        return 0;
    size_t len;
    char **p = node_path(&st->snap, st->rows[row].node, &len);
    if (!p)
        return -ENOMEM;
    set_selection(st, p, len);
    st->sel_row = row;
    return 0;
}

static int32_t selected_node(const top_state *st)
{
    return st->sel_row < st->n_rows ? st->rows[st->sel_row].node : -1;
}

/* ---------------------------------------------------------------------------------------
 * Fetching
 */

static int fetch(top_state *st)
{
    cn_top_snapshot fresh;
    memset(&fresh, 0, sizeof(fresh));
    cn_top_snapshot_clear(&fresh);
    cn_top_request req = {.transforms = st->tfs,
                          .n_transforms = st->n_tfs,
                          .inverted = st->inverted,
                          .window_ns = windows_ns[st->window],
                          .group_by = groups[st->group]};
    cn_err err = {0};
    int rc = st->src->fetch(st->src->ctx, &req, &fresh, &err);
    st->last_fetch_ns = cn_common_now_ns();
    st->need_fetch = false;
    if (rc < 0) {
        cn_top_snapshot_clear(&fresh);
        snprintf(st->msg, sizeof(st->msg), "%s", err.msg[0] ? err.msg : "query failed");
        if (st->snap_inverted != st->inverted || st->snap_window != st->window ||
            st->snap_n_tfs != st->n_tfs) {
            cn_top_snapshot_clear(&st->snap);
            st->have_snap = false;
            st->n_rows = 0;
            st->sel_row = 0;
        }
        return rc;
    }
    cn_top_snapshot_clear(&st->snap);
    st->snap = fresh;
    st->have_snap = true;
    st->snap_inverted = st->inverted;
    st->snap_window = st->window;
    st->snap_n_tfs = st->n_tfs;
    if (st->auto_expand && (rc = auto_expand(st)) < 0)
        return rc;
    return place_selection(st);
}

/* ---------------------------------------------------------------------------------------
 * Transforms
 */

/* Joins names with ';' after "NAME:". NULL on ENOMEM. */
static char *make_spec(const char *op, char *const *names, size_t n)
{
    cn_buf b;
    cn_buf_init(&b, 1 << 20);
    int rc = cn_buf_appendf(&b, "%s:", op);
    for (size_t i = 0; i < n && !rc; i++)
        rc = cn_buf_appendf(&b, "%s%s", i ? ";" : "", names[i]);
    if (rc) {
        cn_buf_free(&b);
        return NULL;
    }
    return cn_buf_steal(&b, NULL);
}

/* Pushes op on the selected node (path or function) and maps the selection through it. */
static void push_transform(top_state *st, const char *op, bool by_path)
{
    int32_t id = selected_node(st);
    if (id < 0) {
        snprintf(st->msg, sizeof(st->msg), "nothing selected");
        return;
    }
    if (st->n_tfs == MAX_TRANSFORMS) {
        snprintf(st->msg, sizeof(st->msg), "at most %d transforms (u pops one)", MAX_TRANSFORMS);
        return;
    }
    size_t len;
    char **path = node_path(&st->snap, id, &len);
    if (!path) {
        snprintf(st->msg, sizeof(st->msg), "out of memory");
        return;
    }
    size_t n_names = by_path ? len : 1;
    char **names = by_path ? path : &path[len - 1];
    char *spec = make_spec(op, names, n_names);
    cn_err err = {0};
    cn_agg_transform t;
    int rc = spec ? cn_agg_transform_parse(spec, &t, &err) : -ENOMEM;
    if (rc < 0) {
        snprintf(st->msg, sizeof(st->msg), "%s", err.msg[0] ? err.msg : "out of memory");
        goto out;
    }
    if (by_path && t.path_len != n_names) {
        snprintf(st->msg, sizeof(st->msg), "cannot %s a path whose names contain ';'", op);
        cn_agg_transform_clear(&t);
        goto out;
    }
    st->tfs[st->n_tfs++] = t;
    /* Map the selection: in the tree view through the transform's path rule; the
     * inverted view's paths start at leaves, so keep only its function there. */
    char **mapped = NULL;
    size_t mapped_len = 0;
    if (!st->inverted)
        rc = cn_agg_map_path(&t, st->sel, st->sel_len, &mapped, &mapped_len);
    else
        rc = -EINVAL;
    if (rc < 0 || !mapped_len) {
        path_free(mapped, mapped_len);
        mapped = NULL;
        mapped_len = 0;
        if (!strncmp(op, "focus", 5) && (mapped = calloc(1, sizeof(*mapped))) &&
            (mapped[0] = strdup(path[len - 1])))
            mapped_len = 1;
    }
    set_selection(st, mapped, mapped_len);
    clear_expanded(st);
    st->auto_expand = true;
    st->need_fetch = true;
    snprintf(st->msg, sizeof(st->msg), "%s", spec);
out:
    free(spec);
    path_free(path, len);
}

static void pop_transform(top_state *st)
{
    if (!st->n_tfs) {
        snprintf(st->msg, sizeof(st->msg), "no transform to pop");
        return;
    }
    char *spec = cn_agg_transform_format(&st->tfs[st->n_tfs - 1]);
    snprintf(st->msg, sizeof(st->msg), "popped %s", spec ? spec : "a transform");
    free(spec);
    cn_agg_transform_clear(&st->tfs[--st->n_tfs]);
    clear_expanded(st);
    st->auto_expand = true;
    st->need_fetch = true;
}

/* ---------------------------------------------------------------------------------------
 * Search
 */

/* Selects the next node (depth-first order, after the selection, wrapping) whose name
 * contains the search text, expanding its ancestors. */
static int search_next(top_state *st)
{
    const cn_top_snapshot *s = &st->snap;
    if (!st->search_len || !s->n_nodes)
        return 0;
    /* Snapshot nodes are stored in depth-first display order (both builders add them
     * that way), so index order is pre-order. */
    int32_t cur = selected_node(st);
    size_t start = cur >= 0 ? (size_t)cur + 1 : 0;
    for (size_t k = 0; k < s->n_nodes; k++) {
        size_t i = (start + k) % s->n_nodes;
        if (!strcasestr(s->nodes[i].name, st->search))
            continue;
        size_t len;
        char **p = node_path(s, (int32_t)i, &len);
        if (!p)
            return -ENOMEM;
        set_selection(st, p, len);
        st->auto_expand = false;
        snprintf(st->msg, sizeof(st->msg), "/%s", st->search);
        return place_selection(st);
    }
    snprintf(st->msg, sizeof(st->msg), "not found: %s", st->search);
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Drawing
 */

enum { PAIR_HEAD = 1, PAIR_HOT, PAIR_DIM, PAIR_MATCH };

static double pct(double v, double total)
{
    return total != 0 ? 100.0 * v / total : 0.0;
}

static void fmt_value(char *buf, size_t n, double v)
{
    double a = v < 0 ? -v : v;
    if (a >= 1e9)
        snprintf(buf, n, "%.1fG", v / 1e9);
    else if (a >= 1e6)
        snprintf(buf, n, "%.1fM", v / 1e6);
    else if (a >= 1e4)
        snprintf(buf, n, "%.1fk", v / 1e3);
    else if (a == (long long)a)
        snprintf(buf, n, "%lld", (long long)v);
    else
        snprintf(buf, n, "%.1f", v);
}

/* A weight in the snapshot's unit: times (off-cpu and wall sessions, time-based files)
 * as "12.3 ms" (docs/cli-live.md, "canopy top"), counts as above. */
static double ns_per_unit(const cn_top_snapshot *s)
{
    return !strcmp(s->unit, "ns")   ? 1
           : !strcmp(s->unit, "us") ? 1e3
           : !strcmp(s->unit, "ms") ? 1e6
                                    : 0;
}

static void fmt_weight(const cn_top_snapshot *s, char *buf, size_t n, double v)
{
    if (ns_per_unit(s) > 0)
        cn_fmt_time(buf, n, v * ns_per_unit(s));
    else
        fmt_value(buf, n, v);
}

/* Prints s clipped to the columns left on row y, starting at column x, in the terminal's
 * form (cn_term_str, docs/cli.md "Names in text output"): everything drawn may quote a
 * name. The form of a string already in it is the string itself. */
static void put_clipped(int y, int x, const char *s, int width)
{
    char t[2048];
    if (x >= width)
        return;
    mvaddnstr(y, x, cn_term_str(t, sizeof(t), s), width - x);
}

static void draw_header(const top_state *st, int w)
{
    const cn_top_snapshot *s = &st->snap;
    char line[512];
    int n = snprintf(line, sizeof(line), " canopy top  window %s%s%s%s%s", window_names[st->window],
                     st->inverted ? "  [inverted]" : "", st->paused ? "  [paused]" : "",
                     st->group ? "  by " : "",
                     st->group ? cn_fmt_group_by_name(groups[st->group]) : "");
    if (s->samples >= 0)
        n += snprintf(line + n, sizeof(line) - (size_t)n, "  %lld samples", (long long)s->samples);
    if (s->lost >= 0)
        n += snprintf(line + n, sizeof(line) - (size_t)n, "  %lld lost", (long long)s->lost);
    char cut[160];
    if (cn_fmt_unwind_summary(&s->unwind, cut, sizeof(cut)))
        n += snprintf(line + n, sizeof(line) - (size_t)n, "  %s", cut);
    if (s->note[0])
        n += snprintf(line + n, sizeof(line) - (size_t)n, "  %s", s->note);
    snprintf(line + n, sizeof(line) - (size_t)n, "  %s", st->src->title);
    attron(A_REVERSE | A_BOLD);
    mvhline(0, 0, ' ', w);
    put_clipped(0, 0, line, w);
    attroff(A_REVERSE | A_BOLD);

    char tl[512] = " transforms: ";
    size_t tn = strlen(tl);
    if (!st->n_tfs)
        snprintf(tl + tn, sizeof(tl) - tn, "none");
    for (size_t i = 0; i < st->n_tfs && tn < sizeof(tl) - 1; i++) {
        char *spec = cn_agg_transform_format(&st->tfs[i]);
        tn += (size_t)snprintf(tl + tn, sizeof(tl) - tn, "%s%s", i ? " > " : "", spec ? spec : "?");
        free(spec);
        if (tn >= sizeof(tl))
            tn = sizeof(tl) - 1;
    }
    put_clipped(1, 0, tl, w);
}

static void draw_functions(const top_state *st, int y0, int rows, int w)
{
    const cn_top_snapshot *s = &st->snap;
    attron(A_BOLD | A_UNDERLINE);
    mvhline(y0, 0, ' ', w);
    put_clipped(y0, 0, "  SELF%     SELF  TOTAL%  HOT FUNCTIONS", w);
    attroff(A_BOLD | A_UNDERLINE);
    for (int r = 0; r < rows - 1 && (size_t)r < s->n_funcs; r++) {
        const cn_top_func *f = &s->funcs[r];
        char line[512], v[32], name[400];
        fmt_weight(s, v, sizeof(v), f->self);
        /* Escaped before measuring, so that the library's column is right. */
        int n = snprintf(line, sizeof(line), " %5.1f%% %8s  %5.1f%%  %s", pct(f->self, s->total), v,
                         pct(f->total, s->total), cn_term_str(name, sizeof(name), f->name));
        if (st->colors)
            attron(COLOR_PAIR(PAIR_HOT));
        put_clipped(y0 + 1 + r, 0, line, w);
        if (st->colors)
            attroff(COLOR_PAIR(PAIR_HOT));
        if (f->lib && n < w) {
            snprintf(line, sizeof(line), "  %s", f->lib);
            attron(A_DIM);
            put_clipped(y0 + 1 + r, n, line, w);
            attroff(A_DIM);
        }
    }
    if (!s->n_funcs)
        put_clipped(y0 + 1, 0, "  (no samples yet)", w);
}

static void draw_tree(top_state *st, int y0, int rows, int w)
{
    const cn_top_snapshot *s = &st->snap;
    attron(A_BOLD | A_UNDERLINE);
    mvhline(y0, 0, ' ', w);
    char head[160], total[32];
    fmt_weight(s, total, sizeof(total), s->total);
    bool time = ns_per_unit(s) > 0; /* the unit is in the value */
    snprintf(head, sizeof(head), " TOTAL%%   SELF%%  %s  (total %s%s%s)",
             st->inverted ? "INVERTED TREE (callers below)" : "CALL TREE", total, time ? "" : " ",
             time ? "" : s->unit);
    put_clipped(y0, 0, head, w);
    attroff(A_BOLD | A_UNDERLINE);
    int body = rows - 1;
    if (body < 1)
        return;
    if (st->sel_row < st->scroll)
        st->scroll = st->sel_row;
    if (st->sel_row >= st->scroll + (size_t)body)
        st->scroll = st->sel_row - (size_t)body + 1;
    for (int r = 0; r < body && st->scroll + (size_t)r < st->n_rows; r++) {
        size_t row = st->scroll + (size_t)r;
        const cn_top_node *n = &s->nodes[st->rows[row].node];
        char line[1024], name[800];
        char mark = n->first_child < 0 ? ' ' : is_expanded(st, st->rows[row].node) ? '-' : '+';
        int depth = st->rows[row].depth > 60 ? 60 : st->rows[row].depth;
        int len = snprintf(line, sizeof(line), "%6.1f%% %6.1f%%  %*s%c %s", pct(n->total, s->total),
                           pct(n->self, s->total), 2 * depth, "", mark,
                           cn_term_str(name, sizeof(name), n->name));
        bool selected = row == st->sel_row;
        bool match = st->search_len && strcasestr(n->name, st->search);
        if (selected) {
            attron(A_REVERSE);
            mvhline(y0 + 1 + r, 0, ' ', w);
        } else if (match && st->colors) {
            attron(COLOR_PAIR(PAIR_MATCH));
        }
        put_clipped(y0 + 1 + r, 0, line, w);
        if (n->lib && len < w) {
            snprintf(line, sizeof(line), "  %s", n->lib);
            if (!selected)
                attron(A_DIM);
            put_clipped(y0 + 1 + r, len, line, w);
            attroff(A_DIM);
        }
        attroff(A_REVERSE);
        if (st->colors)
            attroff(COLOR_PAIR(PAIR_MATCH));
    }
    if (!st->n_rows)
        put_clipped(y0 + 1, 0, st->have_snap ? "  (empty tree)" : "  (waiting for data)", w);
}

static void draw(top_state *st)
{
    int h, w;
    getmaxyx(stdscr, h, w);
    erase();
    if (h < 8 || w < 40) {
        put_clipped(0, 0, "canopy top: terminal too small", w);
        refresh();
        return;
    }
    draw_header(st, w);
    int hot = (h - 4) / 3;
    if (hot < 3)
        hot = 3;
    draw_functions(st, 2, hot, w);
    draw_tree(st, 2 + hot, h - 3 - hot, w);
    /* Status line: a prompt, a message, or the key summary. */
    char line[700];
    if (st->mode == MODE_SEARCH)
        snprintf(line, sizeof(line), "/%s", st->search);
    else if (st->msg[0])
        snprintf(line, sizeof(line), " %s", st->msg);
    else
        snprintf(line, sizeof(line),
                 " q quit  arrows move/fold  i invert  f/F focus  m/M merge  "
                 "d drop  u undo  w window  p pause  / search");
    attron(A_REVERSE);
    mvhline(h - 1, 0, ' ', w);
    put_clipped(h - 1, 0, line, w);
    attroff(A_REVERSE);
    if (st->mode == MODE_SEARCH) {
        curs_set(1);
        move(h - 1, (int)st->search_len + 1 < w ? (int)st->search_len + 1 : w - 1);
    } else {
        curs_set(0);
    }
    refresh();
}

/* ---------------------------------------------------------------------------------------
 * Keys
 */

static int tree_body_rows(void)
{
    int h = getmaxy(stdscr);
    int hot = (h - 4) / 3 < 3 ? 3 : (h - 4) / 3;
    int body = h - 4 - hot;
    return body > 1 ? body : 1;
}

static int move_to(top_state *st, long row)
{
    if (!st->n_rows)
        return 0;
    if (row < 0)
        row = 0;
    if ((size_t)row >= st->n_rows)
        row = (long)st->n_rows - 1;
    return select_row(st, (size_t)row);
}

/* Expands (on) or collapses the selected node; collapsing a leaf or a collapsed node
 * moves to its parent. */
static int fold(top_state *st, bool on)
{
    int32_t id = selected_node(st);
    if (id < 0)
        return 0;
    st->auto_expand = false;
    const cn_top_node *n = &st->snap.nodes[id];
    if (!on && (n->first_child < 0 || !is_expanded(st, id))) {
        if (n->parent < 0)
            return 0;
        size_t len;
        char **p = node_path(&st->snap, n->parent, &len);
        if (!p)
            return -ENOMEM;
        set_selection(st, p, len);
        return place_selection(st);
    }
    if (n->first_child < 0)
        return 0;
    int rc = set_expanded(st, id, on);
    return rc < 0 ? rc : place_selection(st);
}

static int search_key(top_state *st, int ch)
{
    if (ch == 27) { /* Esc */
        st->mode = MODE_NORMAL;
        st->search_len = 0;
        st->search[0] = '\0';
        st->msg[0] = '\0';
    } else if (ch == '\n' || ch == '\r' || ch == KEY_ENTER) {
        st->mode = MODE_NORMAL;
        return search_next(st);
    } else if (ch == KEY_BACKSPACE || ch == 127 || ch == 8) {
        if (st->search_len)
            st->search[--st->search_len] = '\0';
    } else if (ch >= 0x20 && ch < 0x100 && ch != 127 && st->search_len < sizeof(st->search) - 1) {
        st->search[st->search_len++] = (char)ch;
        st->search[st->search_len] = '\0';
    }
    return 0;
}

/* Handles one key. Returns 1 to quit, 0 to go on, negative errno on failure. */
static int key(top_state *st, int ch)
{
    if (st->mode == MODE_SEARCH)
        return search_key(st, ch);
    if (ch != KEY_RESIZE)
        st->msg[0] = '\0';
    switch (ch) {
    case 'q':
    case 'Q':
        return 1;
    case KEY_UP:
    case 'k':
        return move_to(st, (long)st->sel_row - 1);
    case KEY_DOWN:
    case 'j':
        return move_to(st, (long)st->sel_row + 1);
    case KEY_PPAGE:
        return move_to(st, (long)st->sel_row - tree_body_rows());
    case KEY_NPAGE:
    case ' ':
        return move_to(st, (long)st->sel_row + tree_body_rows());
    case KEY_HOME:
    case 'g':
        return move_to(st, 0);
    case KEY_END:
    case 'G':
        return move_to(st, (long)st->n_rows - 1);
    case KEY_RIGHT:
    case KEY_ENTER:
    case '\n':
    case '\r':
    case 'l':
        return fold(st, true);
    case KEY_LEFT:
    case 'h':
        return fold(st, false);
    case 'i':
        st->inverted = !st->inverted;
        set_selection(st, NULL, 0);
        clear_expanded(st);
        st->auto_expand = true;
        st->need_fetch = true;
        break;
    case 'f':
        push_transform(st, st->inverted ? "focus-inverted" : "focus", true);
        break;
    case 'F':
        push_transform(st, "focus-func", false);
        break;
    case 'm':
        push_transform(st, "merge", false);
        break;
    case 'M':
        if (st->inverted)
            snprintf(st->msg, sizeof(st->msg), "M merges a node of the call tree: press i first");
        else
            push_transform(st, "merge-node", true);
        break;
    case 'd':
        push_transform(st, "drop", false);
        break;
    case 'u':
        pop_transform(st);
        break;
    case 'c':
        st->group = (st->group + 1) % (int)(sizeof(groups) / sizeof(groups[0]));
        snprintf(st->msg, sizeof(st->msg), "group by: %s", cn_fmt_group_by_name(groups[st->group]));
        set_selection(st, NULL, 0);
        clear_expanded(st);
        st->auto_expand = true;
        st->need_fetch = true;
        break;
    case 'w':
        st->window = (st->window + 1) % (int)(sizeof(windows_ns) / sizeof(windows_ns[0]));
        snprintf(st->msg, sizeof(st->msg), "window: %s", window_names[st->window]);
        st->need_fetch = true;
        break;
    case 'p':
        st->paused = !st->paused;
        snprintf(st->msg, sizeof(st->msg), st->paused ? "paused" : "resumed");
        if (!st->paused)
            st->need_fetch = true;
        break;
    case '/':
        st->mode = MODE_SEARCH;
        st->search_len = 0;
        st->search[0] = '\0';
        break;
    case 'n':
        return search_next(st);
    case 'r':
        st->need_fetch = true;
        break;
    default:
        break;
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * The loop
 */

static void state_free(top_state *st)
{
    for (size_t i = 0; i < st->n_tfs; i++)
        cn_agg_transform_clear(&st->tfs[i]);
    cn_top_snapshot_clear(&st->snap);
    free(st->rows);
    clear_expanded(st);
    set_selection(st, NULL, 0);
}

int cn_top_run(const cn_top_source *src)
{
    top_state st;
    sigset_t mask, old;
    bool masked = false;
    int sfd = -1, status = CN_EXIT_OK, rc = 0;
    bool curses = false;

    memset(&st, 0, sizeof(st));
    cn_top_snapshot_clear(&st.snap);
    st.src = src;
    st.auto_expand = true;
    st.need_fetch = true;

    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
        fprintf(stderr, "canopy top: needs a terminal (use canopy tree for text output)\n");
        return CN_EXIT_USAGE;
    }
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGQUIT);
    if (sigprocmask(SIG_BLOCK, &mask, &old) == 0)
        masked = true;
    if (!masked || (sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK)) < 0) {
        fprintf(stderr, "canopy top: signalfd: %s\n", strerror(errno));
        status = CN_EXIT_FAIL;
        goto out;
    }
    if (!initscr()) {
        fprintf(stderr, "canopy top: cannot initialise the terminal\n");
        status = CN_EXIT_FAIL;
        goto out;
    }
    curses = true;
    cbreak();
    noecho();
    nonl();
    keypad(stdscr, TRUE);
    nodelay(stdscr, TRUE);
    set_escdelay(25);
    curs_set(0);
    if (has_colors() && !getenv("NO_COLOR")) {
        start_color();
        use_default_colors();
        init_pair(PAIR_HOT, COLOR_RED, -1);
        init_pair(PAIR_MATCH, COLOR_YELLOW, -1);
        st.colors = true;
    }

    for (;;) {
        cn_err err = {0};
        if (src->pump && (rc = src->pump(src->ctx, &err)) < 0) {
            snprintf(st.msg, sizeof(st.msg), "%s", err.msg);
            status = CN_EXIT_FAIL;
            break;
        }
        int64_t now = cn_common_now_ns();
        if (st.need_fetch || (src->live && !st.paused && now - st.last_fetch_ns >= REFRESH_NS)) {
            rc = fetch(&st);
            if (rc == -ENOMEM)
                break;
            /* A transform the source refuses (e.g. a function renamed meanwhile) is
             * popped so the view stays usable; the message says why. */
            if (rc < 0 && st.n_tfs && st.have_snap) {
                char keep[sizeof(st.msg)];
                snprintf(keep, sizeof(keep), "%s", st.msg);
                cn_agg_transform_clear(&st.tfs[--st.n_tfs]);
                fetch(&st);
                snprintf(st.msg, sizeof(st.msg), "%s", keep);
            }
            rc = 0;
        }
        draw(&st);

        struct pollfd pfd[2] = {{.fd = STDIN_FILENO, .events = POLLIN},
                                {.fd = sfd, .events = POLLIN}};
        int n = poll(pfd, 2, 100);
        if (n < 0 && errno != EINTR) {
            rc = -errno;
            break;
        }
        if (n > 0 && (pfd[1].revents & POLLIN)) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
                status = si.ssi_signo == SIGINT ? CN_EXIT_OK : 128 + (int)si.ssi_signo;
            break;
        }
        if (n > 0 && (pfd[0].revents & (POLLHUP | POLLERR)) && !(pfd[0].revents & POLLIN))
            break;
        int ch, quit = 0;
        while (!quit && (ch = getch()) != ERR) {
            quit = key(&st, ch);
            if (quit < 0) {
                rc = quit;
                break;
            }
        }
        if (rc < 0 || quit)
            break;
    }
    if (rc < 0) {
        snprintf(st.msg, sizeof(st.msg), "%s", strerror(-rc));
        status = CN_EXIT_FAIL;
    }
out:
    if (curses) {
        curs_set(1);
        endwin();
    }
    if (status == CN_EXIT_FAIL && st.msg[0]) {
        fputs("canopy top: ", stderr);
        cn_term_fputs(st.msg, stderr); /* may quote the daemon's message */
        fputc('\n', stderr);
    }
    if (sfd >= 0)
        close(sfd);
    if (masked)
        sigprocmask(SIG_SETMASK, &old, NULL);
    state_free(&st);
    return status;
}
