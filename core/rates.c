/*
 * rates.c - the traffic time series: see rates.h.
 */
#define _GNU_SOURCE
#include "rates.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mq.h"

struct RateSeries {
    RatesConfig cfg;
    pthread_mutex_t mu; /* ring, head, count, last, have_last */
    RateSample ring[RATES_CAPACITY];
    size_t head;  /* next slot written */
    size_t count; /* samples held, <= RATES_CAPACITY */
    RateTotals last;
    bool have_last;

    pthread_t thread;
    bool running;
    pthread_mutex_t stop_mu;
    pthread_cond_t stop_cv;
    bool stopping;
};

static uint64_t delta(uint64_t now, uint64_t before) {
    return now >= before ? now - before : 0;
}

void rates_record(RateSeries *s, int64_t now_ms, const RateTotals *t) {
    pthread_mutex_lock(&s->mu);
    if (s->have_last) {
        s->ring[s->head] = (RateSample){
            .ts_ms = now_ms,
            .in_msgs = delta(t->in_msgs, s->last.in_msgs),
            .in_bytes = delta(t->in_bytes, s->last.in_bytes),
            .out_msgs = delta(t->out_msgs, s->last.out_msgs),
            .out_bytes = delta(t->out_bytes, s->last.out_bytes),
        };
        s->head = (s->head + 1) % RATES_CAPACITY;
        if (s->count < RATES_CAPACITY) s->count++;
    }
    s->last = *t;
    s->have_last = true;
    pthread_mutex_unlock(&s->mu);
}

/* The i-th held sample, 0 being the oldest; under s->mu. */
static const RateSample *held(const RateSeries *s, size_t i) {
    MQ_ASSERT(i < s->count);
    return &s->ring[(s->head + RATES_CAPACITY - s->count + i) % RATES_CAPACITY];
}

size_t rates_copy(RateSeries *s, int64_t since_ms, RateSample *out, size_t cap) {
    pthread_mutex_lock(&s->mu);
    size_t first = s->count; /* the oldest sample newer than since_ms */
    while (first > 0 && held(s, first - 1)->ts_ms > since_ms) first--;
    size_t n = 0;
    for (size_t i = first; i < s->count && n < cap; i++) out[n++] = *held(s, i);
    pthread_mutex_unlock(&s->mu);
    return n;
}

int64_t rates_average(RateSeries *s, size_t n, RateSample *out) {
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&s->mu);
    if (n > s->count) n = s->count;
    for (size_t i = s->count - n; i < s->count; i++) {
        const RateSample *x = held(s, i);
        out->in_msgs += x->in_msgs;
        out->in_bytes += x->in_bytes;
        out->out_msgs += x->out_msgs;
        out->out_bytes += x->out_bytes;
        out->ts_ms = x->ts_ms;
    }
    pthread_mutex_unlock(&s->mu);
    return (int64_t)n * s->cfg.interval_ms;
}

int64_t rates_interval_ms(const RateSeries *s) {
    return s->cfg.interval_ms;
}

/* Waits until the next multiple of the interval on the wall clock (so
 * samples fall on whole seconds), or until stopped; true when stopped.
 * Under stop_mu. */
static bool sleep_to_boundary(RateSeries *s) {
    int64_t iv = s->cfg.interval_ms;
    return mq_wait_stop(&s->stop_cv, &s->stop_mu, &s->stopping, iv - mq_now_ms() % iv);
}

static void sample_now(RateSeries *s) {
    RateTotals t;
    memset(&t, 0, sizeof(t));
    s->cfg.read(s->cfg.arg, &t);
    /* Rounded to the boundary just passed: a late wake-up does not skew
     * the time axis. */
    int64_t now = mq_now_ms();
    rates_record(s, now - now % s->cfg.interval_ms, &t);
}

static void *rates_main(void *arg) {
    RateSeries *s = arg;
    pthread_setname_np(pthread_self(), "petrel-rates"); /* for top -H */
    sample_now(s); /* the baseline */
    pthread_mutex_lock(&s->stop_mu);
    while (!sleep_to_boundary(s)) {
        pthread_mutex_unlock(&s->stop_mu);
        sample_now(s);
        pthread_mutex_lock(&s->stop_mu);
    }
    pthread_mutex_unlock(&s->stop_mu);
    return NULL;
}

int rates_open(const RatesConfig *cfg, RateSeries **out) {
    if (!cfg || !out || cfg->interval_ms <= 0) return MQ_ERR_INVAL;
    RateSeries *s = calloc(1, sizeof(*s));
    if (!s) return MQ_ERR_NOMEM;
    s->cfg = *cfg;
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->stop_mu, NULL);
    mq_cond_init_mono(&s->stop_cv);
    if (cfg->read) {
        int e = pthread_create(&s->thread, NULL, rates_main, s);
        if (e != 0) {
            MQ_ERROR("cannot start the rates thread: %s", strerror(e));
            rates_close(s);
            return MQ_ERR_IO;
        }
        s->running = true;
    }
    *out = s;
    return MQ_OK;
}

void rates_close(RateSeries *s) {
    if (!s) return;
    if (s->running) {
        mq_stop_signal(&s->stop_cv, &s->stop_mu, &s->stopping);
        pthread_join(s->thread, NULL);
    }
    pthread_cond_destroy(&s->stop_cv);
    pthread_mutex_destroy(&s->stop_mu);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
