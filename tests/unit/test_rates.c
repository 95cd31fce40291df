/*
 * test_rates.c - the traffic time series (core/rates.c): deltas from
 * running totals, the baseline, counters going down, the ring wrapping at
 * RATES_CAPACITY, 'since' selection, averages, and the thread sampling a
 * live reader on whole intervals.
 */
#include "testutil.h"

#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "mq.h"
#include "rates.h"

static RateSeries *open_manual(void) {
    RatesConfig cfg = {.interval_ms = 1000};
    RateSeries *s = NULL;
    assert_int_equal(rates_open(&cfg, &s), MQ_OK);
    return s;
}

static RateTotals totals(uint64_t in, uint64_t out) {
    return (RateTotals){.in_msgs = in, .in_bytes = in * 10, .out_msgs = out, .out_bytes = out * 10};
}

static void test_rates_first_record_is_the_baseline_then_deltas(void **state) {
    (void)state;
    RateSeries *s = open_manual();
    RateSample buf[4];
    RateTotals t = totals(100, 40);
    rates_record(s, 1000, &t);
    assert_int_equal(rates_copy(s, INT64_MIN, buf, 4), 0);
    t = totals(130, 45);
    rates_record(s, 2000, &t);
    t = totals(130, 60);
    rates_record(s, 3000, &t);
    assert_int_equal(rates_copy(s, INT64_MIN, buf, 4), 2);
    assert_true(buf[0].ts_ms == 2000 && buf[0].in_msgs == 30 && buf[0].out_msgs == 5);
    assert_true(buf[0].in_bytes == 300 && buf[0].out_bytes == 50);
    assert_true(buf[1].ts_ms == 3000 && buf[1].in_msgs == 0 && buf[1].out_msgs == 15);
    rates_close(s);
}

static void test_rates_totals_going_down_count_as_zero(void **state) {
    (void)state;
    RateSeries *s = open_manual();
    RateTotals t = totals(500, 500);
    rates_record(s, 1000, &t);
    t = totals(20, 490); /* a busy topic was deleted with its counters */
    rates_record(s, 2000, &t);
    t = totals(25, 495);
    rates_record(s, 3000, &t);
    RateSample buf[4];
    assert_int_equal(rates_copy(s, INT64_MIN, buf, 4), 2);
    assert_true(buf[0].in_msgs == 0 && buf[0].out_msgs == 0);
    assert_true(buf[1].in_msgs == 5 && buf[1].out_msgs == 5);
    rates_close(s);
}

static void test_rates_ring_keeps_the_newest_capacity_samples(void **state) {
    (void)state;
    RateSeries *s = open_manual();
    size_t n = RATES_CAPACITY + 250;
    for (size_t i = 0; i <= n; i++) {
        RateTotals t = totals(i * (i + 1) / 2, 0); /* sample i carries i messages */
        rates_record(s, (int64_t)i * 1000, &t);
    }
    static RateSample buf[RATES_CAPACITY + 8];
    size_t got = rates_copy(s, INT64_MIN, buf, RATES_CAPACITY + 8);
    assert_int_equal(got, RATES_CAPACITY);
    for (size_t k = 0; k < got; k++) {
        size_t i = n - RATES_CAPACITY + 1 + k; /* oldest first */
        assert_true(buf[k].ts_ms == (int64_t)i * 1000);
        assert_true(buf[k].in_msgs == i);
    }
    /* 'since' keeps the newer ones only; a small 'cap' the oldest of those. */
    int64_t since = (int64_t)(n - 3) * 1000;
    assert_int_equal(rates_copy(s, since, buf, 8), 3);
    assert_true(buf[0].ts_ms == since + 1000 && buf[2].ts_ms == (int64_t)n * 1000);
    assert_int_equal(rates_copy(s, since, buf, 2), 2);
    assert_true(buf[0].ts_ms == since + 1000);
    assert_int_equal(rates_copy(s, (int64_t)n * 1000, buf, 8), 0);
    rates_close(s);
}

static void test_rates_average_sums_the_last_samples(void **state) {
    (void)state;
    RateSeries *s = open_manual();
    RateSample sum;
    assert_int_equal(rates_average(s, 10, &sum), 0);
    assert_true(sum.in_msgs == 0);
    uint64_t in = 0;
    for (int i = 0; i <= 20; i++) {
        in += (uint64_t)i;
        RateTotals t = totals(in, 2 * in);
        rates_record(s, i * 1000, &t);
    }
    /* Samples 11..20 carry 11..20 messages: 155 in, 310 out, over 10 s. */
    assert_int_equal(rates_average(s, 10, &sum), 10000);
    assert_true(sum.in_msgs == 155 && sum.out_msgs == 310 && sum.ts_ms == 20000);
    assert_int_equal(rates_average(s, 1000, &sum), 20000); /* all 20 held */
    rates_close(s);
}

static _Atomic uint64_t live_in;

static void read_live(void *arg, RateTotals *out) {
    (void)arg;
    out->in_msgs = atomic_load(&live_in);
}

static void test_rates_thread_samples_on_whole_intervals(void **state) {
    (void)state;
    atomic_store(&live_in, 7);
    RatesConfig cfg = {.interval_ms = 50, .read = read_live};
    RateSeries *s = NULL;
    assert_int_equal(rates_open(&cfg, &s), MQ_OK);
    RateSample buf[64];
    size_t n = 0;
    for (int i = 0; i < 200 && n < 3; i++) {
        atomic_fetch_add(&live_in, 2);
        nanosleep(&(struct timespec){0, 10 * 1000000L}, NULL);
        n = rates_copy(s, INT64_MIN, buf, 64);
    }
    assert_true(n >= 3);
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        assert_true(buf[i].ts_ms % 50 == 0);
        if (i > 0) assert_true(buf[i].ts_ms > buf[i - 1].ts_ms);
        sum += buf[i].in_msgs;
    }
    /* Every counted message is in some sample, the baseline's 7 in none. */
    rates_close(s);
    assert_true(sum > 0 && sum <= atomic_load(&live_in) - 7);
}

static void test_rates_open_refuses_bad_config(void **state) {
    (void)state;
    RateSeries *s = NULL;
    RatesConfig cfg = {.interval_ms = 0};
    assert_int_equal(rates_open(&cfg, &s), MQ_ERR_INVAL);
    assert_int_equal(rates_open(NULL, &s), MQ_ERR_INVAL);
    rates_close(NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rates_first_record_is_the_baseline_then_deltas),
        cmocka_unit_test(test_rates_totals_going_down_count_as_zero),
        cmocka_unit_test(test_rates_ring_keeps_the_newest_capacity_samples),
        cmocka_unit_test(test_rates_average_sums_the_last_samples),
        cmocka_unit_test(test_rates_thread_samples_on_whole_intervals),
        cmocka_unit_test(test_rates_open_refuses_bad_config),
    };
    return cmocka_run_group_tests_name("rates", tests, NULL, NULL);
}
