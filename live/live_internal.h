/* live_internal.h — what live/'s two files say to each other, and nobody else sees.
 *
 * session.c owns struct cn_live_session (defined there: not even symbolizer.c reads or
 * writes its fields); symbolizer.c owns struct cn_live_symbolizer and its registry of
 * attached sessions (tag → session). A session builds its own symbol requests and hands
 * them over with cn_live__symbolizer_submit(); the symbolizer routes each answer back to
 * its session's cn_live__session_apply_symbols(). Names carry the cn_live__ prefix.
 */
#ifndef CN_LIVE_INTERNAL_H
#define CN_LIVE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "cn_live.h"
#include "cn_sym.h"

/* ---- symbolizer.c, called by session.c --------------------------------------------- */

/* Registers s for answers: *tag is the session's tag in every request it submits.
 * Returns 0 or -ENOMEM. */
int cn_live__symbolizer_attach(cn_live_symbolizer *y, cn_live_session *s, uint64_t *tag);
/* Cancels tag's requests and forgets the session: later answers for it are dropped. */
void cn_live__symbolizer_detach(cn_live_symbolizer *y, uint64_t tag);
/* Queues n requests (copied) for the worker. 0, or negative errno when the worker's
 * queue is full or out of memory (nothing was queued: the caller retries later). */
int cn_live__symbolizer_submit(cn_live_symbolizer *y, const cn_sym_request *reqs, size_t n);

/* ---- session.c, called by symbolizer.c --------------------------------------------- */

/* Applies n answers (all for s, as tagged) to s's profile with as few cn_agg_regroup()
 * calls as memory allows. Answers that cannot be applied are counted (unsymbolized and
 * errors). Returns the number of frames that got symbols (>= 0). */
int cn_live__session_apply_symbols(cn_live_session *s, const cn_sym_answer *a, size_t n);
/* The symbolizer is going away before s (a host that broke the order of cn_live.h):
 * s stops submitting. */
void cn_live__session_detached(cn_live_session *s);

#endif /* CN_LIVE_INTERNAL_H */
