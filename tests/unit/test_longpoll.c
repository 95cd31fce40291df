/*
 * test_longpoll.c - the long-polling registry (core/longpoll.c) alone:
 * arrivals fire only the waiters of their queue below the new max offset,
 * deadlines fire once (time driven through lp_expire, plus one check of
 * the real timer thread), cancel, wake-all and close, and many threads
 * registering, cancelling and firing at once without a double fire.
 */
#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "longpoll.h"
#include "mq.h"

#define S(lit) mq_slice(lit, sizeof(lit) - 1)
#define FAR (INT64_MAX / 2) /* a deadline that never passes */

/* A waiter with a fire counter. */
typedef struct Probe {
    LpWaiter w;
    atomic_int fired;  /* callbacks run */
    atomic_int reason; /* the last LpReason */
} Probe;

static void on_fire(void *arg, LpReason reason) {
    Probe *p = arg;
    atomic_fetch_add(&p->fired, 1);
    atomic_store(&p->reason, (int)reason);
}

static void probe_init(Probe *p) {
    lp_waiter_init(&p->w);
    atomic_init(&p->fired, 0);
    atomic_init(&p->reason, 0);
}

static void add(LpRegistry *reg, Probe *p, MqSlice topic, uint32_t q, uint64_t off,
                int64_t deadline_ns) {
    assert_int_equal(lp_add(reg, &p->w, topic, q, off, deadline_ns, on_fire, p), MQ_OK);
}

static LpRegistry *open_reg(bool timer) {
    LpRegistry *reg = NULL;
    assert_int_equal(lp_open(timer, &reg), MQ_OK);
    assert_non_null(reg);
    return reg;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- arrivals ------------------------------------------------------------*/

static void test_lp_arrival_fires_only_waiters_below_max_of_that_queue(void **state) {
    (void)state;
    LpRegistry *reg = open_reg(false);
    Probe at3, at5, other_q, other_t, prefix_t;
    probe_init(&at3);
    probe_init(&at5);
    probe_init(&other_q);
    probe_init(&other_t);
    probe_init(&prefix_t);
    add(reg, &at3, S("Orders"), 1, 3, FAR);
    add(reg, &at5, S("Orders"), 1, 5, FAR);
    add(reg, &other_q, S("Orders"), 2, 0, FAR);
    add(reg, &other_t, S("Payments"), 1, 0, FAR);
    add(reg, &prefix_t, S("Order"), 1, 0, FAR);
    assert_int_equal(lp_count(reg), 5);

    /* max 3: nothing new for a waiter at offset 3 */
    assert_int_equal(lp_arrival(reg, S("Orders"), 1, 3), 0);
    assert_int_equal(atomic_load(&at3.fired), 0);
    /* max 4 wakes the waiter at 3 only */
    assert_int_equal(lp_arrival(reg, S("Orders"), 1, 4), 1);
    assert_int_equal(atomic_load(&at3.fired), 1);
    assert_int_equal(atomic_load(&at3.reason), LP_ARRIVAL);
    assert_int_equal(atomic_load(&at5.fired), 0);
    /* again: the fired waiter does not fire twice */
    assert_int_equal(lp_arrival(reg, S("Orders"), 1, 5), 0);
    assert_int_equal(atomic_load(&at3.fired), 1);
    assert_int_equal(lp_arrival(reg, S("Orders"), 1, 6), 1);
    assert_int_equal(atomic_load(&at5.fired), 1);
    assert_int_equal(atomic_load(&other_q.fired), 0);
    assert_int_equal(atomic_load(&other_t.fired), 0);
    assert_int_equal(atomic_load(&prefix_t.fired), 0);
    assert_int_equal(lp_count(reg), 3);
    lp_close(reg);
}

static void test_lp_arrival_with_nothing_waiting_fires_nothing(void **state) {
    (void)state;
    LpRegistry *reg = open_reg(false);
    assert_int_equal(lp_arrival(reg, S("T"), 0, 1), 0);
    assert_int_equal(lp_count(reg), 0);
    lp_close(reg);
}

static void test_lp_arrival_fires_every_waiter_of_the_queue(void **state) {
    (void)state;
    LpRegistry *reg = open_reg(false);
    enum { N = 100 };
    Probe *ps = calloc(N, sizeof(*ps));
    assert_non_null(ps);
    for (int i = 0; i < N; i++) {
        probe_init(&ps[i]);
        add(reg, &ps[i], S("T"), 0, 7, FAR);
    }
    assert_int_equal(lp_arrival(reg, S("T"), 0, 8), N);
    for (int i = 0; i < N; i++) assert_int_equal(atomic_load(&ps[i].fired), 1);
    assert_int_equal(lp_count(reg), 0);
    lp_close(reg);
    free(ps);
}

static void test_lp_topic_waiter_fires_on_any_queue_of_its_topic_only(void **state) {
    (void)state;
    LpRegistry *reg = open_reg(false);
    Probe any, other_topic, cancelled;
    probe_init(&any);
    probe_init(&other_topic);
    probe_init(&cancelled);
    add(reg, &any, S("Orders"), LP_ANY_QUEUE, 0, FAR);
    add(reg, &other_topic, S("Payments"), LP_ANY_QUEUE, 0, FAR);
    add(reg, &cancelled, S("Orders"), LP_ANY_QUEUE, 0, FAR);
    assert_true(lp_cancel(reg, &cancelled.w));
    /* an arrival on queue 6 of Orders fires the Orders topic waiter */
    assert_int_equal(lp_arrival(reg, S("Orders"), 6, 1), 1);
    assert_int_equal(atomic_load(&any.fired), 1);
    assert_int_equal(atomic_load(&any.reason), LP_ARRIVAL);
    assert_int_equal(atomic_load(&other_topic.fired), 0);
    assert_int_equal(atomic_load(&cancelled.fired), 0);
    /* fired once: a second arrival finds only the Payments waiter's topic */
    assert_int_equal(lp_arrival(reg, S("Orders"), 0, 2), 0);
    assert_int_equal(lp_arrival(reg, S("Payments"), 3, 1), 1);
    assert_int_equal(atomic_load(&other_topic.fired), 1);
    assert_int_equal(lp_count(reg), 0);
    lp_close(reg);
}

/* ---- deadlines -----------------------------------------------------------*/

static void test_lp_expire_fires_due_waiters_once_in_deadline_order(void **state) {
    (void)state;
    LpRegistry *reg = open_reg(false);
    Probe a, b, c;
    probe_init(&a);
    probe_init(&b);
    probe_init(&c);
    add(reg, &c, S("T"), 0, 0, 3000);
    add(reg, &a, S("T"), 0, 0, 1000);
    add(reg, &b, S("T"), 1, 0, 2000);
    assert_int_equal(lp_expire(reg, 999), 0);
    assert_int_equal(lp_expire(reg, 2000), 2);
    assert_int_equal(atomic_load(&a.fired), 1);
    assert_int_equal(atomic_load(&b.fired), 1);
    assert_int_equal(atomic_load(&a.reason), LP_TIMEOUT);
    assert_int_equal(atomic_load(&c.fired), 0);
    /* a timed-out waiter ignores a later arrival; c still waits */
    assert_int_equal(lp_arrival(reg, S("T"), 0, 1), 1);
    assert_int_equal(atomic_load(&a.fired), 1);
    assert_int_equal(atomic_load(&c.fired), 1);
    assert_int_equal(atomic_load(&c.reason), LP_ARRIVAL);
    /* ... and the arrival-fired one ignores its deadline */
    assert_int_equal(lp_expire(reg, 10000), 0);
    assert_int_equal(atomic_load(&c.fired), 1);
    lp_close(reg);
}

static void test_lp_timer_thread_fires_at_the_deadline_once(void **state) {
    (void)state;
    LpRegistry *reg = open_reg(true);
    Probe late, soon;
    probe_init(&late);
    probe_init(&soon);
    add(reg, &late, S("T"), 0, 0, mq_mono_ns() + 3600 * 1000000000LL);
    /* the earlier deadline must wake the thread that sleeps for 'late' */
    int64_t deadline = mq_mono_ns() + 20 * 1000000LL;
    add(reg, &soon, S("T"), 0, 0, deadline);
    for (int i = 0; i < 1000 && atomic_load(&soon.fired) == 0; i++) sleep_ms(10);
    assert_int_equal(atomic_load(&soon.fired), 1);
    assert_true(mq_mono_ns() >= deadline);
    assert_int_equal(atomic_load(&soon.reason), LP_TIMEOUT);
    sleep_ms(30);
    assert_int_equal(atomic_load(&soon.fired), 1);
    assert_int_equal(atomic_load(&late.fired), 0);
    assert_int_equal(lp_count(reg), 1);
    lp_close(reg);
    assert_int_equal(atomic_load(&late.fired), 1);
    assert_int_equal(atomic_load(&late.reason), LP_STOPPING);
}

/* ---- cancel, re-add, wake-all, close ---------------------------------------*/

static void test_lp_cancel_before_fire_prevents_it(void **state) {
    (void)state;
    LpRegistry *reg = open_reg(false);
    Probe p;
    probe_init(&p);
    assert_false(lp_cancel(reg, &p.w)); /* never added */
    add(reg, &p, S("T"), 0, 0, 100);
    assert_true(lp_cancel(reg, &p.w));
    assert_false(lp_cancel(reg, &p.w));
    assert_int_equal(lp_arrival(reg, S("T"), 0, 5), 0);
    assert_int_equal(lp_expire(reg, 1000), 0);
    assert_int_equal(atomic_load(&p.fired), 0);
    /* re-added after cancel, it fires; then cancel says it already did */
    add(reg, &p, S("T"), 0, 4, FAR);
    assert_int_equal(lp_arrival(reg, S("T"), 0, 5), 1);
    assert_false(lp_cancel(reg, &p.w));
    assert_int_equal(atomic_load(&p.fired), 1);
    lp_close(reg);
}

static void test_lp_wake_all_fires_everything_and_refuses_new_waiters(void **state) {
    (void)state;
    LpRegistry *reg = open_reg(true);
    Probe a, b, late;
    probe_init(&a);
    probe_init(&b);
    probe_init(&late);
    add(reg, &a, S("A"), 0, 0, FAR);
    add(reg, &b, S("B"), 3, 9, FAR);
    assert_int_equal(lp_wake_all(reg), 2);
    assert_int_equal(atomic_load(&a.reason), LP_STOPPING);
    assert_int_equal(atomic_load(&b.reason), LP_STOPPING);
    assert_int_equal(lp_add(reg, &late.w, S("A"), 0, 0, FAR, on_fire, &late), MQ_ERR_STATE);
    assert_int_equal(lp_count(reg), 0);
    lp_close(reg);
    assert_int_equal(atomic_load(&a.fired), 1);
    assert_int_equal(atomic_load(&b.fired), 1);
    assert_int_equal(atomic_load(&late.fired), 0);
}

static void test_lp_close_fires_remaining_waiters(void **state) {
    (void)state;
    LpRegistry *reg = open_reg(true);
    Probe a, b, done;
    probe_init(&a);
    probe_init(&b);
    probe_init(&done);
    add(reg, &a, S("A"), 0, 0, FAR);
    add(reg, &b, S("A"), 1, 0, mq_mono_ns() + 3600 * 1000000000LL);
    add(reg, &done, S("A"), 0, 0, FAR);
    assert_int_equal(lp_arrival(reg, S("A"), 0, 1), 2);
    lp_close(reg);
    assert_int_equal(atomic_load(&a.fired), 1);
    assert_int_equal(atomic_load(&a.reason), LP_ARRIVAL);
    assert_int_equal(atomic_load(&b.fired), 1);
    assert_int_equal(atomic_load(&b.reason), LP_STOPPING);
    assert_int_equal(atomic_load(&done.fired), 1);
    lp_close(NULL);
}

static void test_lp_add_rejects_a_topic_longer_than_the_limit(void **state) {
    (void)state;
    LpRegistry *reg = open_reg(false);
    char name[LP_TOPIC_MAX + 2];
    memset(name, 'x', sizeof(name));
    Probe p;
    probe_init(&p);
    assert_int_equal(lp_add(reg, &p.w, mq_slice(name, LP_TOPIC_MAX + 1), 0, 0, FAR, on_fire, &p),
                     MQ_ERR_INVAL);
    add(reg, &p, mq_slice(name, LP_TOPIC_MAX), 0, 0, FAR);
    assert_int_equal(lp_arrival(reg, mq_slice(name, LP_TOPIC_MAX), 0, 1), 1);
    lp_close(reg);
}

/* ---- concurrency -----------------------------------------------------------*/

enum { CT_THREADS = 4, CT_PER_THREAD = 2000, CT_QUEUES = 8 };

typedef struct Conc {
    LpRegistry *reg;
    Probe *probes;       /* CT_THREADS * CT_PER_THREAD */
    atomic_int cancelled; /* cancels that won */
    atomic_int add_errors; /* lp_add failures (cmocka asserts stay on the main thread) */
    atomic_bool done;    /* registering threads finished */
} Conc;

typedef struct ConcArg {
    Conc *c;
    int idx;
} ConcArg;

/* Registers its waiters on queue i % CT_QUEUES at offset 0; every third
 * one has a deadline already due, every fifth is cancelled right away. */
static void *conc_register(void *arg) {
    ConcArg *a = arg;
    Conc *c = a->c;
    for (int i = 0; i < CT_PER_THREAD; i++) {
        Probe *p = &c->probes[a->idx * CT_PER_THREAD + i];
        int64_t deadline = i % 3 == 0 ? mq_mono_ns() : FAR;
        if (lp_add(c->reg, &p->w, S("C"), (uint32_t)(i % CT_QUEUES), 0, deadline, on_fire, p) !=
            MQ_OK) {
            atomic_fetch_add(&c->add_errors, 1);
            continue;
        }
        if (i % 5 == 0 && lp_cancel(c->reg, &p->w)) atomic_fetch_add(&c->cancelled, 1);
    }
    return NULL;
}

/* Reports arrivals on every queue until the registering threads end. */
static void *conc_arrive(void *arg) {
    Conc *c = arg;
    uint64_t max = 1;
    while (!atomic_load(&c->done)) {
        for (uint32_t q = 0; q < CT_QUEUES; q++) lp_arrival(c->reg, S("C"), q, max);
        max++;
    }
    return NULL;
}

static void test_lp_concurrent_add_fire_cancel_fires_each_waiter_at_most_once(void **state) {
    (void)state;
    Conc c;
    memset(&c, 0, sizeof(c));
    c.reg = open_reg(true);
    atomic_init(&c.cancelled, 0);
    atomic_init(&c.done, false);
    atomic_init(&c.add_errors, 0);
    size_t total = (size_t)CT_THREADS * CT_PER_THREAD;
    c.probes = calloc(total, sizeof(*c.probes));
    assert_non_null(c.probes);
    for (size_t i = 0; i < total; i++) probe_init(&c.probes[i]);

    pthread_t arrive;
    pthread_t reg_threads[CT_THREADS];
    ConcArg args[CT_THREADS];
    assert_int_equal(pthread_create(&arrive, NULL, conc_arrive, &c), 0);
    for (int t = 0; t < CT_THREADS; t++) {
        args[t] = (ConcArg){&c, t};
        assert_int_equal(pthread_create(&reg_threads[t], NULL, conc_register, &args[t]), 0);
    }
    for (int t = 0; t < CT_THREADS; t++) pthread_join(reg_threads[t], NULL);
    atomic_store(&c.done, true);
    pthread_join(arrive, NULL);
    /* whatever is left fires now */
    for (uint32_t q = 0; q < CT_QUEUES; q++) lp_arrival(c.reg, S("C"), q, UINT64_MAX);
    assert_int_equal(atomic_load(&c.add_errors), 0);
    assert_int_equal(lp_count(c.reg), 0);
    lp_close(c.reg);

    int fired = 0;
    for (size_t i = 0; i < total; i++) {
        int n = atomic_load(&c.probes[i].fired);
        assert_true(n == 0 || n == 1);
        fired += n;
    }
    assert_int_equal(fired + atomic_load(&c.cancelled), (int)total);
    free(c.probes);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lp_arrival_fires_only_waiters_below_max_of_that_queue),
        cmocka_unit_test(test_lp_arrival_with_nothing_waiting_fires_nothing),
        cmocka_unit_test(test_lp_arrival_fires_every_waiter_of_the_queue),
        cmocka_unit_test(test_lp_topic_waiter_fires_on_any_queue_of_its_topic_only),
        cmocka_unit_test(test_lp_expire_fires_due_waiters_once_in_deadline_order),
        cmocka_unit_test(test_lp_timer_thread_fires_at_the_deadline_once),
        cmocka_unit_test(test_lp_cancel_before_fire_prevents_it),
        cmocka_unit_test(test_lp_wake_all_fires_everything_and_refuses_new_waiters),
        cmocka_unit_test(test_lp_close_fires_remaining_waiters),
        cmocka_unit_test(test_lp_add_rejects_a_topic_longer_than_the_limit),
        cmocka_unit_test(test_lp_concurrent_add_fire_cancel_fires_each_waiter_at_most_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
