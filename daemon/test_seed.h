/* test_seed.h — canopyd-test's CANOPYD_TEST_SEED hook (never in the installed canopyd):
 * each new session starts with bench_tree's synthetic profile, so that a live session of
 * 1 M samples over 100 k distinct stacks keeps sampling (bench/web_speed.sh's live refresh). */
#ifndef CN_D_TEST_SEED_H
#define CN_D_TEST_SEED_H

#include "cn_agg.h"

/* arg: "STACKS:SAMPLES" (a string). Adds the samples to p at session times 0 .. SAMPLES ns
 * (before any real sample), on two threads "seed-main" and "seed-worker" (pid 1). 0, or a
 * negative errno (bad arg, out of memory). */
int cn_d_test_seed(cn_agg_profile *p, const void *arg);

#endif
