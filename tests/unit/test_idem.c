/*
 * test_idem.c - the Idempotency-Key table (core/idem.c): claim, answer,
 * replay, abort, expiry at the window's end, eviction by key count and by
 * byte budget, independence of topics, and one winner among racing
 * claimers.
 */
#include "testutil.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem.h"
#include "mq.h"

#define WINDOW 600000 /* ms */

static IdemTable *open_ok(size_t max_keys, size_t max_bytes) {
    IdemTable *t = NULL;
    assert_int_equal(idem_open(WINDOW, max_keys, max_bytes, &t), MQ_OK);
    return t;
}

/* Claims 'key' on 'topic' and answers it with 'body' at time 'now'. */
static void claim_answer(IdemTable *t, const char *topic, const char *key, const char *body,
                         int64_t now) {
    IdemAnswer a;
    assert_int_equal(idem_begin(t, topic, key, now, &a), IDEM_NEW);
    idem_finish(t, topic, key, 200, body, strlen(body));
}

static void expect_done(IdemTable *t, const char *topic, const char *key, const char *body,
                        int64_t now) {
    IdemAnswer a = {0};
    assert_int_equal(idem_begin(t, topic, key, now, &a), IDEM_DONE);
    assert_int_equal(a.status, 200);
    assert_int_equal(a.len, strlen(body));
    assert_memory_equal(a.body, body, a.len);
    free(a.body);
}

static void test_open_rejects_zero_bounds(void **state) {
    (void)state;
    IdemTable *t = NULL;
    assert_int_equal(idem_open(0, 10, 1000, &t), MQ_ERR_INVAL);
    assert_int_equal(idem_open(WINDOW, 0, 1000, &t), MQ_ERR_INVAL);
    assert_int_equal(idem_open(WINDOW, 10, 0, &t), MQ_ERR_INVAL);
    assert_null(t);
}

static void test_claim_answer_replay(void **state) {
    (void)state;
    IdemTable *t = open_ok(100, 1 << 20);
    IdemAnswer a;
    assert_int_equal(idem_begin(t, "T", "k1", 1000, &a), IDEM_NEW);
    /* A retry while the first is in progress must not produce again. */
    assert_int_equal(idem_begin(t, "T", "k1", 1001, &a), IDEM_PENDING);
    idem_finish(t, "T", "k1", 200, "{\"a\":1}", 7);
    expect_done(t, "T", "k1", "{\"a\":1}", 1002);
    expect_done(t, "T", "k1", "{\"a\":1}", 1000 + WINDOW - 1);
    assert_int_equal(idem_count(t), 1);
    idem_close(t);
}

static void test_abort_frees_the_key(void **state) {
    (void)state;
    IdemTable *t = open_ok(100, 1 << 20);
    IdemAnswer a;
    assert_int_equal(idem_begin(t, "T", "k", 1, &a), IDEM_NEW);
    idem_abort(t, "T", "k");
    assert_int_equal(idem_count(t), 0);
    assert_int_equal(idem_begin(t, "T", "k", 2, &a), IDEM_NEW);
    /* abort of an answered key leaves the answer */
    idem_finish(t, "T", "k", 200, "x", 1);
    idem_abort(t, "T", "k");
    expect_done(t, "T", "k", "x", 3);
    idem_close(t);
}

static void test_expiry_at_window_end(void **state) {
    (void)state;
    IdemTable *t = open_ok(100, 1 << 20);
    claim_answer(t, "T", "k", "first", 5000);
    IdemAnswer a;
    assert_int_equal(idem_begin(t, "T", "k", 5000 + WINDOW, &a), IDEM_NEW);
    idem_finish(t, "T", "k", 200, "second", 6);
    expect_done(t, "T", "k", "second", 5000 + WINDOW + 1);
    idem_close(t);
}

static void test_topics_are_separate(void **state) {
    (void)state;
    IdemTable *t = open_ok(100, 1 << 20);
    claim_answer(t, "A", "k", "on A", 1);
    claim_answer(t, "B", "k", "on B", 1);
    /* "A" + "Bk" must not collide with "AB" + "k" */
    claim_answer(t, "AB", "k", "on AB", 1);
    claim_answer(t, "A", "Bk", "on A/Bk", 1);
    expect_done(t, "A", "k", "on A", 2);
    expect_done(t, "B", "k", "on B", 2);
    expect_done(t, "AB", "k", "on AB", 2);
    expect_done(t, "A", "Bk", "on A/Bk", 2);
    idem_close(t);
}

static void test_key_count_evicts_oldest(void **state) {
    (void)state;
    IdemTable *t = open_ok(3, 1 << 20);
    claim_answer(t, "T", "k1", "1", 1);
    claim_answer(t, "T", "k2", "2", 2);
    claim_answer(t, "T", "k3", "3", 3);
    claim_answer(t, "T", "k4", "4", 4); /* k1 goes */
    assert_int_equal(idem_count(t), 3);
    expect_done(t, "T", "k4", "4", 5);
    expect_done(t, "T", "k2", "2", 5);
    IdemAnswer a;
    assert_int_equal(idem_begin(t, "T", "k1", 5, &a), IDEM_NEW);
    idem_close(t);
}

static void test_byte_budget(void **state) {
    (void)state;
    IdemTable *t = open_ok(1000, 2048);
    char big[1501];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    claim_answer(t, "T", "big1", big, 1);
    expect_done(t, "T", "big1", big, 2);
    /* A second big answer does not fit beside the first: the older goes. */
    claim_answer(t, "T", "big2", big, 3);
    expect_done(t, "T", "big2", big, 4);
    IdemAnswer a;
    assert_int_equal(idem_begin(t, "T", "big1", 5, &a), IDEM_NEW);
    idem_abort(t, "T", "big1");
    /* An answer larger than the whole budget is not kept: the claim goes. */
    char huge[3000];
    memset(huge, 'y', sizeof(huge));
    assert_int_equal(idem_begin(t, "T", "huge", 6, &a), IDEM_NEW);
    idem_finish(t, "T", "huge", 200, huge, sizeof(huge));
    assert_int_equal(idem_begin(t, "T", "huge", 7, &a), IDEM_NEW);
    idem_close(t);
}

/* Many keys: the table grows and still finds every one. */
static void test_many_keys(void **state) {
    (void)state;
    IdemTable *t = open_ok(100000, 64 << 20);
    char key[32], body[32];
    for (int i = 0; i < 5000; i++) {
        snprintf(key, sizeof(key), "key-%d", i);
        snprintf(body, sizeof(body), "body-%d", i);
        claim_answer(t, "T", key, body, i);
    }
    for (int i = 0; i < 5000; i += 7) {
        snprintf(key, sizeof(key), "key-%d", i);
        snprintf(body, sizeof(body), "body-%d", i);
        expect_done(t, "T", key, body, 6000);
    }
    assert_int_equal(idem_count(t), 5000);
    idem_close(t);
}

typedef struct Racer {
    IdemTable *t;
    int news;
    pthread_barrier_t *go;
} Racer;

static void *race(void *arg) {
    Racer *r = arg;
    pthread_barrier_wait(r->go);
    IdemAnswer a = {0};
    for (int i = 0; i < 200; i++) {
        char key[16];
        snprintf(key, sizeof(key), "k%d", i);
        IdemState st = idem_begin(r->t, "T", key, 1, &a);
        if (st == IDEM_NEW) {
            r->news++;
            idem_finish(r->t, "T", key, 200, "ok", 2);
        } else if (st == IDEM_DONE) {
            free(a.body);
        }
    }
    return NULL;
}

static void test_racing_claims_one_winner(void **state) {
    (void)state;
    IdemTable *t = open_ok(100000, 64 << 20);
    enum { N = 4 };
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, N);
    Racer rs[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        rs[i] = (Racer){t, 0, &go};
        pthread_create(&th[i], NULL, race, &rs[i]);
    }
    int total = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        total += rs[i].news;
    }
    assert_int_equal(total, 200); /* each key claimed exactly once */
    pthread_barrier_destroy(&go);
    idem_close(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_open_rejects_zero_bounds),
        cmocka_unit_test(test_claim_answer_replay),
        cmocka_unit_test(test_abort_frees_the_key),
        cmocka_unit_test(test_expiry_at_window_end),
        cmocka_unit_test(test_topics_are_separate),
        cmocka_unit_test(test_key_count_evicts_oldest),
        cmocka_unit_test(test_byte_budget),
        cmocka_unit_test(test_many_keys),
        cmocka_unit_test(test_racing_claims_one_winner),
    };
    return cmocka_run_group_tests_name("idem", tests, NULL, NULL);
}
