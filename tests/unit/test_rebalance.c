/*
 * test_rebalance.c - queue allocation (core/rebalance.c): strategy names,
 * RocketMQ's averagely and by-circle tables exactly, every queue to
 * exactly one client for every strategy over many (queues, clients)
 * pairs, independence from the order of the client ids, and the
 * consistent-hash ring moving queues only to a new client or only from a
 * removed one.
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mq.h"
#include "rebalance.h"

#define MAX_CLIENTS 16
#define MAX_QUEUES 1024

/* Runs rb_allocate for 'me' and checks the result is ascending. */
static size_t alloc(RbStrategy s, const char *topic, const char *const *ids, size_t n,
                    const char *me, uint32_t nq, uint32_t *out) {
    size_t n_out = 12345;
    assert_int_equal(rb_allocate(s, topic, ids, n, me, nq, out, &n_out), MQ_OK);
    assert_true(n_out <= nq);
    for (size_t i = 1; i < n_out; i++) assert_true(out[i - 1] < out[i]);
    return n_out;
}

/* Fills 'owner[q]' with the index in 'ids' of the client that gets queue
 * q, asserting every queue goes to exactly one client. */
static void owners(RbStrategy s, const char *topic, const char *const *ids, size_t n, uint32_t nq,
                   int *owner) {
    static uint32_t out[MAX_QUEUES];
    for (uint32_t q = 0; q < nq; q++) owner[q] = -1;
    for (size_t c = 0; c < n; c++) {
        size_t got = alloc(s, topic, ids, n, ids[c], nq, out);
        for (size_t i = 0; i < got; i++) {
            assert_true(out[i] < nq);
            assert_int_equal(owner[out[i]], -1); /* not given twice */
            owner[out[i]] = (int)c;
        }
    }
    for (uint32_t q = 0; q < nq; q++) assert_int_not_equal(owner[q], -1);
}

/* Asserts that 'me' gets exactly the 'n_want' queues of 'want'. */
static void expect(RbStrategy s, const char *const *ids, size_t n, const char *me, uint32_t nq,
                   const uint32_t *want, size_t n_want) {
    uint32_t out[MAX_QUEUES];
    size_t got = alloc(s, "T", ids, n, me, nq, out);
    assert_int_equal(got, n_want);
    for (size_t i = 0; i < n_want; i++) assert_int_equal(out[i], want[i]);
}

#define EXPECT(s, ids, me, nq, ...)                                                            \
    do {                                                                                       \
        const uint32_t want_[] = {__VA_ARGS__};                                                \
        expect(s, ids, sizeof(ids) / sizeof(ids[0]), me, nq, want_,                            \
               sizeof(want_) / sizeof(want_[0]));                                              \
    } while (0)
#define EXPECT_NONE(s, ids, me, nq) expect(s, ids, sizeof(ids) / sizeof(ids[0]), me, nq, NULL, 0)

/* ---- names ---------------------------------------------------------------*/

static void test_rb_strategy_parse_accepts_exact_names_only(void **state) {
    (void)state;
    const RbStrategy all[] = {RB_AVG, RB_AVG_BY_CIRCLE, RB_CONSISTENT_HASH, RB_CONFIG};
    for (size_t i = 0; i < 4; i++) {
        RbStrategy s = (RbStrategy)99;
        assert_true(rb_strategy_parse(rb_strategy_name(all[i]), &s));
        assert_int_equal(s, all[i]);
    }
    assert_string_equal(rb_strategy_name(RB_AVG), "AVG");
    assert_string_equal(rb_strategy_name(RB_AVG_BY_CIRCLE), "AVG_BY_CIRCLE");
    assert_string_equal(rb_strategy_name(RB_CONSISTENT_HASH), "CONSISTENT_HASH");
    assert_string_equal(rb_strategy_name(RB_CONFIG), "CONFIG");
    assert_string_equal(rb_strategy_name((RbStrategy)42), "UNKNOWN");

    RbStrategy s = RB_CONFIG;
    const char *bad[] = {"avg", "AVG ", " AVG", "", "AVG_BY", "MACHINE_ROOM", "UNKNOWN"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_false(rb_strategy_parse(bad[i], &s));
    assert_false(rb_strategy_parse(NULL, &s));
    assert_false(rb_strategy_parse("AVG", NULL));
    assert_int_equal(s, RB_CONFIG); /* untouched */
}

/* ---- exact tables --------------------------------------------------------*/

static void test_rb_avg_matches_rocketmq_averagely(void **state) {
    (void)state;
    const char *three[] = {"c2", "c0", "c1"}; /* sorted: c0 c1 c2 */
    EXPECT(RB_AVG, three, "c0", 8, 0, 1, 2);
    EXPECT(RB_AVG, three, "c1", 8, 3, 4, 5);
    EXPECT(RB_AVG, three, "c2", 8, 6, 7);

    const char *four[] = {"c0", "c1", "c2", "c3"};
    EXPECT(RB_AVG, four, "c0", 10, 0, 1, 2);
    EXPECT(RB_AVG, four, "c1", 10, 3, 4, 5);
    EXPECT(RB_AVG, four, "c2", 10, 6, 7);
    EXPECT(RB_AVG, four, "c3", 10, 8, 9);
    EXPECT(RB_AVG, four, "c2", 4, 2); /* as many queues as clients */

    const char *five[] = {"c4", "c3", "c2", "c1", "c0"};
    EXPECT(RB_AVG, five, "c0", 3, 0);
    EXPECT(RB_AVG, five, "c1", 3, 1);
    EXPECT(RB_AVG, five, "c2", 3, 2);
    EXPECT_NONE(RB_AVG, five, "c3", 3);
    EXPECT_NONE(RB_AVG, five, "c4", 3);

    const char *one[] = {"only"};
    EXPECT(RB_AVG, one, "only", 5, 0, 1, 2, 3, 4);
    EXPECT_NONE(RB_AVG, one, "only", 0);

    /* byte-wise order: 'B' (0x42) < 'a' < 'b' < 0xc3 */
    const char *bytes[] = {"b", "\xc3\xa9", "a", "B"};
    EXPECT(RB_AVG, bytes, "B", 4, 0);
    EXPECT(RB_AVG, bytes, "a", 4, 1);
    EXPECT(RB_AVG, bytes, "b", 4, 2);
    EXPECT(RB_AVG, bytes, "\xc3\xa9", 4, 3);
}

static void test_rb_avg_by_circle_deals_queues_round_robin(void **state) {
    (void)state;
    const char *three[] = {"c1", "c2", "c0"};
    EXPECT(RB_AVG_BY_CIRCLE, three, "c0", 8, 0, 3, 6);
    EXPECT(RB_AVG_BY_CIRCLE, three, "c1", 8, 1, 4, 7);
    EXPECT(RB_AVG_BY_CIRCLE, three, "c2", 8, 2, 5);

    const char *five[] = {"c0", "c1", "c2", "c3", "c4"};
    EXPECT(RB_AVG_BY_CIRCLE, five, "c0", 3, 0);
    EXPECT(RB_AVG_BY_CIRCLE, five, "c2", 3, 2);
    EXPECT_NONE(RB_AVG_BY_CIRCLE, five, "c3", 3);
    EXPECT_NONE(RB_AVG_BY_CIRCLE, five, "c4", 3);

    const char *one[] = {"only"};
    EXPECT(RB_AVG_BY_CIRCLE, one, "only", 4, 0, 1, 2, 3);
}

/* ---- properties over many shapes -----------------------------------------*/

static void test_rb_every_queue_goes_to_exactly_one_client(void **state) {
    (void)state;
    static const RbStrategy strategies[] = {RB_AVG, RB_AVG_BY_CIRCLE, RB_CONSISTENT_HASH};
    static const uint32_t more_queues[] = {64, 100, 257, 1024}; /* after 1..40 */
    char names[MAX_CLIENTS][32];
    const char *ids[MAX_CLIENTS];
    static int owner[MAX_QUEUES];
    for (size_t c = 0; c < MAX_CLIENTS; c++) {
        /* unsorted on purpose: ids[c] does not sort at c */
        snprintf(names[c], sizeof(names[c]), "10.0.%zu.%zu@%zu", (c * 7) % MAX_CLIENTS, c,
                 1000 + c);
        ids[c] = names[c];
    }
    size_t pairs = 0;
    for (size_t si = 0; si < 3; si++) {
        for (size_t n = 1; n <= MAX_CLIENTS; n++) {
            for (uint32_t i = 1; i <= 44; i++) {
                uint32_t nq = i <= 40 ? i : more_queues[i - 41];
                owners(strategies[si], "TopicTest", ids, n, nq, owner);
                pairs++;
            }
        }
    }
    assert_int_equal(pairs, 3 * MAX_CLIENTS * 44);
}

static void test_rb_result_ignores_client_order_and_duplicates(void **state) {
    (void)state;
    const char *sorted[] = {"alpha", "bravo", "charlie", "delta", "echo"};
    const char *shuffled[] = {"delta", "alpha", "echo", "charlie", "bravo"};
    const char *dups[] = {"echo", "alpha", "delta", "alpha", "bravo", "echo", "charlie"};
    static const RbStrategy strategies[] = {RB_AVG, RB_AVG_BY_CIRCLE, RB_CONSISTENT_HASH};
    for (size_t si = 0; si < 3; si++) {
        for (uint32_t nq = 1; nq <= 20; nq++) {
            for (size_t c = 0; c < 5; c++) {
                uint32_t a[20], b[20], d[20];
                size_t na = alloc(strategies[si], "T", sorted, 5, sorted[c], nq, a);
                size_t nb = alloc(strategies[si], "T", shuffled, 5, sorted[c], nq, b);
                size_t nd = alloc(strategies[si], "T", dups, 7, sorted[c], nq, d);
                assert_int_equal(na, nb);
                assert_int_equal(na, nd);
                assert_memory_equal(a, b, na * sizeof(*a));
                assert_memory_equal(a, d, na * sizeof(*a));
            }
        }
    }
}

static void test_rb_client_not_in_the_list_gets_nothing(void **state) {
    (void)state;
    const char *ids[] = {"c0", "c1"};
    uint32_t out[8];
    static const RbStrategy strategies[] = {RB_AVG, RB_AVG_BY_CIRCLE, RB_CONSISTENT_HASH};
    for (size_t si = 0; si < 3; si++) {
        assert_int_equal(alloc(strategies[si], "T", ids, 2, "c2", 8, out), 0);
        assert_int_equal(alloc(strategies[si], "T", ids, 2, "c", 8, out), 0);
        assert_int_equal(alloc(strategies[si], "T", NULL, 0, "c0", 8, out), 0);
    }
}

/* ---- consistent hash -----------------------------------------------------*/

static void test_rb_consistent_hash_join_moves_queues_only_to_the_new_client(void **state) {
    (void)state;
    const char *three[] = {"10.0.0.1@100", "10.0.0.2@100", "10.0.0.3@100"};
    const char *four[] = {"10.0.0.1@100", "10.0.0.2@100", "10.0.0.3@100", "10.0.0.4@100"};
    int before[64], after[64];
    owners(RB_CONSISTENT_HASH, "TopicTest", three, 3, 64, before);
    owners(RB_CONSISTENT_HASH, "TopicTest", four, 4, 64, after);
    int moved = 0;
    for (int q = 0; q < 64; q++) {
        if (after[q] == before[q]) continue;
        assert_int_equal(after[q], 3); /* only to the new client */
        moved++;
    }
    assert_true(moved > 0);
    /* the ring spreads the queues: nobody is left empty (plain FNV-1a
     * without the finaliser gave every queue to one client) */
    int per_client[4] = {0};
    for (int q = 0; q < 64; q++) per_client[after[q]]++;
    for (int c = 0; c < 4; c++) assert_true(per_client[c] > 0);
}

static void test_rb_consistent_hash_leave_moves_only_the_leavers_queues(void **state) {
    (void)state;
    const char *four[] = {"c-a", "c-b", "c-c", "c-d"};
    const char *without_b[] = {"c-a", "c-c", "c-d"};
    const int map[] = {0, 2, 3}; /* index in without_b -> index in four */
    int before[64], after[64];
    owners(RB_CONSISTENT_HASH, "Orders", four, 4, 64, before);
    owners(RB_CONSISTENT_HASH, "Orders", without_b, 3, 64, after);
    int moved = 0;
    for (int q = 0; q < 64; q++) {
        if (before[q] == 1) {
            moved++;
            continue; /* b's queues go anywhere */
        }
        assert_int_equal(map[after[q]], before[q]);
    }
    assert_true(moved > 0);
}

static void test_rb_consistent_hash_is_deterministic_per_topic(void **state) {
    (void)state;
    const char *ids[] = {"c0", "c1", "c2"};
    uint32_t a[64], b[64];
    size_t na = alloc(RB_CONSISTENT_HASH, "Orders", ids, 3, "c1", 64, a);
    size_t nb = alloc(RB_CONSISTENT_HASH, "Orders", ids, 3, "c1", 64, b);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, na * sizeof(*a));
    /* the topic is part of the queue key */
    int x[64], y[64];
    owners(RB_CONSISTENT_HASH, "Orders", ids, 3, 64, x);
    owners(RB_CONSISTENT_HASH, "Payments", ids, 3, 64, y);
    assert_memory_not_equal(x, y, sizeof(x));
}

/* ---- errors --------------------------------------------------------------*/

static void test_rb_allocate_rejects_bad_arguments(void **state) {
    (void)state;
    const char *ids[] = {"c0", "c1"};
    const char *with_null[] = {"c0", NULL};
    uint32_t out[4];
    size_t n = 99;
    assert_int_equal(rb_allocate(RB_CONFIG, "T", ids, 2, "c0", 4, out, &n), MQ_ERR_INVAL);
    assert_int_equal(n, 0);
    assert_int_equal(rb_allocate((RbStrategy)9, "T", ids, 2, "c0", 4, out, &n), MQ_ERR_INVAL);
    assert_int_equal(rb_allocate(RB_AVG, "T", ids, 2, NULL, 4, out, &n), MQ_ERR_INVAL);
    assert_int_equal(rb_allocate(RB_AVG, "T", ids, 2, "c0", 4, NULL, &n), MQ_ERR_INVAL);
    assert_int_equal(rb_allocate(RB_AVG, "T", ids, 2, "c0", 4, out, NULL), MQ_ERR_INVAL);
    assert_int_equal(rb_allocate(RB_AVG, "T", NULL, 2, "c0", 4, out, &n), MQ_ERR_INVAL);
    assert_int_equal(rb_allocate(RB_AVG, "T", with_null, 2, "c0", 4, out, &n), MQ_ERR_INVAL);
    assert_int_equal(rb_allocate(RB_CONSISTENT_HASH, NULL, ids, 2, "c0", 4, out, &n),
                     MQ_ERR_INVAL);
    /* the topic matters to consistent hash only */
    assert_int_equal(rb_allocate(RB_AVG, NULL, ids, 2, "c0", 4, out, &n), MQ_OK);
    assert_int_equal(n, 2);
    /* no queues: no buffer needed */
    assert_int_equal(rb_allocate(RB_CONSISTENT_HASH, "T", ids, 2, "c0", 0, NULL, &n), MQ_OK);
    assert_int_equal(n, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rb_strategy_parse_accepts_exact_names_only),
        cmocka_unit_test(test_rb_avg_matches_rocketmq_averagely),
        cmocka_unit_test(test_rb_avg_by_circle_deals_queues_round_robin),
        cmocka_unit_test(test_rb_every_queue_goes_to_exactly_one_client),
        cmocka_unit_test(test_rb_result_ignores_client_order_and_duplicates),
        cmocka_unit_test(test_rb_client_not_in_the_list_gets_nothing),
        cmocka_unit_test(test_rb_consistent_hash_join_moves_queues_only_to_the_new_client),
        cmocka_unit_test(test_rb_consistent_hash_leave_moves_only_the_leavers_queues),
        cmocka_unit_test(test_rb_consistent_hash_is_deterministic_per_topic),
        cmocka_unit_test(test_rb_allocate_rejects_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
