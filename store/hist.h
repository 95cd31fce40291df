/*
 * hist.h - a fixed-bucket latency histogram that any thread may update
 * without a lock (relaxed atomic counters), read as a snapshot for
 * Prometheus-style export.  The bucket bounds are the same for every
 * histogram (100 us .. 10 s, roughly 1-2.5-5 steps), so snapshots of
 * different histograms can be summed and printed by one routine.
 */
#ifndef PETREL_HIST_H
#define PETREL_HIST_H

#include <stddef.h>
#include <stdint.h>

#define MQ_HIST_BUCKETS 16 /* finite upper bounds; +Inf is implicit */

/* A snapshot: counts[i] = observations <= mq_hist_bounds_ns[i]
 * (non-cumulative: only those above the previous bound), 'count' every
 * observation (so count - sum(counts) fell above the last bound). */
typedef struct MqHistSnap {
    uint64_t counts[MQ_HIST_BUCKETS];
    uint64_t count;
    uint64_t sum_ns;
} MqHistSnap;

/* The live histogram.  Zero-initialised memory is an empty histogram. */
typedef struct MqHist {
    uint64_t counts[MQ_HIST_BUCKETS]; /* atomic */
    uint64_t count;                   /* atomic */
    uint64_t sum_ns;                  /* atomic */
} MqHist;

/* The upper bounds of the finite buckets, nanoseconds, ascending. */
extern const int64_t mq_hist_bounds_ns[MQ_HIST_BUCKETS];

/* mq_hist_observe records one duration (negative counts as 0).  Any
 * thread, lock-free. */
void mq_hist_observe(MqHist *h, int64_t ns);

/* mq_hist_read copies 'h' into '*out'.  Concurrent observations may be
 * half-counted (count updated, bucket not yet): a monitoring view, not an
 * exact one.  Any thread. */
void mq_hist_read(const MqHist *h, MqHistSnap *out);

/* mq_hist_add adds 'b' to '*a'. */
void mq_hist_add(MqHistSnap *a, const MqHistSnap *b);

#endif
