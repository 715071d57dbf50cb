/* cpuprofile.h — what the two halves of the .cpuprofile importer share: the streaming
 * JSON parser (cpuprofile_parse.c) and the DevTools model that turns nodes and samples
 * into a profile (cpuprofile_model.c). Private to formats/.
 *
 * The parser state is one struct: the yajl driver (yajl_stream.h) and the nesting state,
 * the nodes as flat arrays (struct of arrays, indexed by the order nodes appear in the
 * file; an id map finds a node by its id), then per node what the model derives once the
 * nodes array closes (stack, bottom node, weight), and the samples (kept as node ids, or
 * added to the profile directly: "direct mode", see cpuprofile_model.c).
 */
#ifndef CN_FMT_CPUPROFILE_H
#define CN_FMT_CPUPROFILE_H

#include <stdbool.h>
#include <stdint.h>

#include "import_internal.h"
#include "yajl_stream.h"

enum state {
    ST_BEGIN,
    ST_TOP,
    ST_NODES,
    ST_NODE,
    ST_CF,
    ST_CHILDREN,
    ST_SAMPLES,
    ST_DELTAS,
    ST_END
};

enum key {
    K_OTHER,
    K_NODES,
    K_START,
    K_END,
    K_SAMPLES,
    K_DELTAS,
    K_HEAD,
    K_ID,
    K_CALLFRAME,
    K_HIT,
    K_CHILDREN,
    K_PARENT,
    K_FNAME,
    K_URL,
    K_LINE,
    K_COL,
};

enum vtype { V_NULL, V_BOOL, V_INT, V_DOUBLE, V_STRING };

#define NO_ID INT64_MIN

/* The whole import state; owned by the caller of cn_fmt__cpuprof_new, freed by _free. */
struct cn_fmt__cpuprof {
    cn_fmt__jstream js; /* the yajl handle, the name, the error bookkeeping */
    cn_agg_profile *p;
    enum state st;
    enum key key;
    size_t skip; /* depth inside a value being skipped */

    bool have_nodes, have_start, have_end, have_samples, have_deltas, samples_done;
    double start_us, end_us;

    /* nodes (struct of arrays) */
    int32_t *n_id, *n_name, *n_url, *n_line, *n_col, *n_parent_id;
    int64_t *n_hit; /* -1: absent */
    uint32_t *n_child_off, *n_child_cnt;
    uint64_t *n_offset; /* byte offset of the node, for messages */
    size_t n_nodes, cap_nodes;
    int32_t *child_ids;
    size_t n_child_ids, cap_child_ids;
    cn_u64map id_index; /* id -> node index */
    /* the node being read */
    int64_t cur_id, cur_parent, cur_hit, cur_line, cur_col;
    int32_t cur_name, cur_url;
    bool cur_cf;

    /* after the nodes: per node */
    bool nodes_done;
    int32_t *stack, *bottom, *parent;
    double *weight;
    int64_t *count; /* samples per node */
    int32_t program, idle, gc;
    bool hits_from_file;
    double total_hits;

    /* samples: node ids, then (resolved) node indices */
    int32_t *smp;
    size_t n_smp, cap_smp;
    bool resolved;
    uint64_t samples_offset;
    int64_t *times; /* ns after startTime, per sample in file order (when kept) */
    size_t cap_times;
    size_t n_deltas;
    int64_t cum_ns;
    bool streaming; /* samples are added (or timed) as timeDeltas arrive */
    bool unsorted;
    /* direct mode: each node has its own stack, so `samples` entries go straight into
     * the profile (a node is recovered from its stack) and no per-sample array is kept */
    int32_t *node_of_stack; /* stack id -> node index */
    bool injective, direct;
    size_t n_added;
};

/* ---- shared by the parser and the model ------------------------------------------ */

/* Errors in the parser and the model: "NAME: byte OFFSET: what" at the offset reached
 * (yajl_stream.h); each returns 0, what a yajl callback returns to stop. */
#define CN_FMT__CP_FAIL(c, ...) cn_fmt__jstream_fail(&(c)->js, -EINVAL, __VA_ARGS__)
#define CN_FMT__CP_NOMEM(c)     cn_fmt__jstream_fail(&(c)->js, -ENOMEM, "out of memory")

/* ---- the model (cpuprofile_model.c); each returns 1, or 0 with the error recorded -- */

/* The index of the node with this id, or -1. */
int32_t cn_fmt__cpuprof_node(const cn_fmt__cpuprof *c, int64_t id);
/* When the nodes array closes: checks the tree (unknown children, two parents, nodes not
 * reachable from nodes[0]) in time linear in the nodes, and gives each node its stack. */
int cn_fmt__cpuprof_build_tree(cn_fmt__cpuprof *c);
/* Turns the kept sample ids into node indices and fixes per-node weights. */
int cn_fmt__cpuprof_resolve(cn_fmt__cpuprof *c);
/* Adds kept sample k at time t (ns after startTime). */
int cn_fmt__cpuprof_add_sample(cn_fmt__cpuprof *c, size_t k, int64_t t);
/* After the whole input was parsed and checked: adds what did not stream, applies
 * DevTools' fixes and the metadata. Returns 0 or c->js.rc. */
int cn_fmt__cpuprof_complete(cn_fmt__cpuprof *c);

#endif /* CN_FMT_CPUPROFILE_H */
