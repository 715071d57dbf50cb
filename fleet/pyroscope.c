/* pyroscope.c — Grafana Pyroscope's push request (docs/fleet.md, "Pushing to Pyroscope").
 *
 * A pusher with the Pyroscope sink (push.c) sends batches whose body is a PushRequest
 * (push.proto). Each call here appends one more PushRequest of one series: protobuf
 * merges the repeated fields of concatenated messages, so a batch's body, and several
 * batches merged in the pusher's queue, stay one valid PushRequest with every series in
 * order, without decoding anything. The pprof bytes come from the caller (canopyd
 * writes them with formats/' one pprof encoder); nothing here knows pprof.
 *
 * Labels: Pyroscope takes Prometheus label names ([a-zA-Z_][a-zA-Z0-9_]*) and refuses a
 * series with a repeated name, so '.' and '-' (which canopy's keys allow) become '_', and
 * the first label of a name wins; they are sent sorted by name, as Pyroscope stores them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cn_fleet.h"
#include "push.pb-c.h"

typedef struct named {
    char name[CN_FLEET_MAX_KEY + 1];
    const char *value;
} named;

/* Insertion sort by name, stable: n is at most a few dozen. */
static void sort_named(named *v, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        named x = v[i];
        size_t j = i;
        for (; j > 0 && strcmp(v[j - 1].name, x.name) > 0; j--)
            v[j] = v[j - 1];
        v[j] = x;
    }
}

/* Copies key into out as a Prometheus label name. false: nothing usable. */
static bool sanitize(const char *key, char *out)
{
    size_t n = strlen(key);
    if (n == 0 || n > CN_FLEET_MAX_KEY)
        return false;
    for (size_t i = 0; i <= n; i++) {
        char c = key[i];
        bool ok = c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                  (i > 0 && c >= '0' && c <= '9') || c == '\0';
        out[i] = ok ? c : '_';
    }
    return true;
}

int cn_fleet_pyroscope_add(cn_fleet_batch *b, const cn_fleet_label *labels, size_t n,
                           const void *pprof_gz, size_t len, const char *id, int64_t time_s)
{
    named v[CN_FLEET_PYROSCOPE_MAX_LABELS];
    size_t nv = 0;
    if (!b || !pprof_gz || len == 0 || (n && !labels))
        return -EINVAL;
    for (size_t i = 0; i < n && nv < CN_FLEET_PYROSCOPE_MAX_LABELS; i++) {
        if (!labels[i].key || !labels[i].value || !sanitize(labels[i].key, v[nv].name))
            continue;
        bool dup = false;
        for (size_t k = 0; k < nv && !dup; k++)
            dup = !strcmp(v[k].name, v[nv].name);
        if (!dup)
            v[nv++].value = labels[i].value;
    }
    if (nv == 0)
        return -EINVAL;
    sort_named(v, nv);

    Push__V1__LabelPair pairs[CN_FLEET_PYROSCOPE_MAX_LABELS],
        *pair_ptrs[CN_FLEET_PYROSCOPE_MAX_LABELS];
    for (size_t i = 0; i < nv; i++) {
        push__v1__label_pair__init(&pairs[i]);
        pairs[i].name = v[i].name;
        pairs[i].value = (char *)v[i].value;
        pair_ptrs[i] = &pairs[i];
    }
    Push__V1__RawSample sample, *sample_ptr = &sample;
    push__v1__raw_sample__init(&sample);
    sample.raw_profile.data = (uint8_t *)(uintptr_t)pprof_gz;
    sample.raw_profile.len = len;
    sample.id = (char *)(id ? id : "");
    Push__V1__RawProfileSeries series, *series_ptr = &series;
    push__v1__raw_profile_series__init(&series);
    series.n_labels = nv;
    series.labels = pair_ptrs;
    series.n_samples = 1;
    series.samples = &sample_ptr;
    Push__V1__PushRequest req;
    push__v1__push_request__init(&req);
    req.n_series = 1;
    req.series = &series_ptr;

    size_t need = push__v1__push_request__get_packed_size(&req), room;
    uint8_t *out = (uint8_t *)cn_buf_space(&b->samples, need, &room);
    if (!out || room < need)
        return -ENOMEM;
    cn_buf_commit(&b->samples, push__v1__push_request__pack(&req, out));
    b->sample_rows++;
    b->weight_samples++;
    if (time_s < b->time_s)
        b->time_s = time_s;
    return 0;
}
