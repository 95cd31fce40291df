/*
 * hist.c - fixed-bucket latency histogram: see hist.h.
 */
#include "hist.h"

const int64_t mq_hist_bounds_ns[MQ_HIST_BUCKETS] = {
    100000,    250000,    500000,    1000000,    2500000,    5000000,
    10000000,  25000000,  50000000,  100000000,  250000000,  500000000,
    1000000000, 2500000000, 5000000000, 10000000000,
};

void mq_hist_observe(MqHist *h, int64_t ns) {
    if (ns < 0) ns = 0;
    /* Linear scan: 16 compares, cheaper than anything clever here. */
    for (size_t i = 0; i < MQ_HIST_BUCKETS; i++) {
        if (ns <= mq_hist_bounds_ns[i]) {
            __atomic_fetch_add(&h->counts[i], 1, __ATOMIC_RELAXED);
            break;
        }
    }
    __atomic_fetch_add(&h->sum_ns, (uint64_t)ns, __ATOMIC_RELAXED);
    __atomic_fetch_add(&h->count, 1, __ATOMIC_RELAXED);
}

void mq_hist_read(const MqHist *h, MqHistSnap *out) {
    for (size_t i = 0; i < MQ_HIST_BUCKETS; i++)
        out->counts[i] = __atomic_load_n(&h->counts[i], __ATOMIC_RELAXED);
    out->sum_ns = __atomic_load_n(&h->sum_ns, __ATOMIC_RELAXED);
    out->count = __atomic_load_n(&h->count, __ATOMIC_RELAXED);
    /* Keep the snapshot consistent for exporters: count >= sum of buckets. */
    uint64_t in_buckets = 0;
    for (size_t i = 0; i < MQ_HIST_BUCKETS; i++) in_buckets += out->counts[i];
    if (out->count < in_buckets) out->count = in_buckets;
}

void mq_hist_add(MqHistSnap *a, const MqHistSnap *b) {
    for (size_t i = 0; i < MQ_HIST_BUCKETS; i++) a->counts[i] += b->counts[i];
    a->count += b->count;
    a->sum_ns += b->sum_ns;
}
