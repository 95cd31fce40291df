/*
 * rates.h - a short in-memory time series of the broker's traffic, for the
 * console's live charts and GET /v1/broker/rates.
 *
 * A ring of RATES_CAPACITY samples, one per interval (1 s in the broker):
 * each holds what happened during the interval ending at its timestamp
 * (messages and body bytes in and out).  The ring costs
 * RATES_CAPACITY * sizeof(RateSample) = 600 * 40 bytes = 24 KB, whatever the
 * traffic.
 *
 * rates_record() turns running totals into per-interval deltas; a total
 * that goes down (a topic deleted with its counters) counts as 0, never as
 * a negative rate.  With a thread (RatesConfig.read set), rates_open starts
 * "petrel-rates", which reads the totals at every interval boundary.
 * Readers copy samples out under a mutex held for the copy only.
 */
#ifndef PETREL_RATES_H
#define PETREL_RATES_H

#include <stddef.h>
#include <stdint.h>

#define RATES_CAPACITY 600 /* 10 minutes at one sample a second */

typedef struct RateTotals {
    uint64_t in_msgs, in_bytes;   /* produced */
    uint64_t out_msgs, out_bytes; /* delivered to consumers */
} RateTotals;

typedef struct RateSample {
    int64_t ts_ms; /* end of the interval, epoch ms */
    uint64_t in_msgs, in_bytes;
    uint64_t out_msgs, out_bytes;
} RateSample;

typedef struct RatesConfig {
    int64_t interval_ms; /* > 0 */
    /* Reads the running totals; called on the rates thread.  NULL: no
     * thread, the owner calls rates_record itself (tests). */
    void (*read)(void *arg, RateTotals *out);
    void *arg;
} RatesConfig;

typedef struct RateSeries RateSeries;

int rates_open(const RatesConfig *cfg, RateSeries **out);
void rates_close(RateSeries *s); /* stops the thread; NULL is fine */

/* rates_record appends the sample for the interval ending at 'now_ms',
 * the difference between 'totals' and the previous call's.  The first
 * call only sets the baseline.  Any thread. */
void rates_record(RateSeries *s, int64_t now_ms, const RateTotals *totals);

/* rates_copy copies the samples newer than 'since_ms' (all: INT64_MIN),
 * oldest first, into 'out' (room for 'cap'); returns how many.  Any
 * thread. */
size_t rates_copy(RateSeries *s, int64_t since_ms, RateSample *out, size_t cap);

/* rates_average sums the last 'n' samples into '*out' and returns the
 * time they cover in ms (0 when there are none). */
int64_t rates_average(RateSeries *s, size_t n, RateSample *out);

int64_t rates_interval_ms(const RateSeries *s);

#endif
