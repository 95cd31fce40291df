/*
 * test_members.c - the live-consumer table (core/members.c): heartbeats
 * and the queue assignment they lead to (join, expiry, pop clients,
 * broadcast, CONFIG, subscription replacement), listing, the orderly
 * queue locks (grant, deny, renew, lease expiry, unlock, release on
 * expiry), argument checks and bounds, and two threads at once.  Time is
 * always passed in: no case reads the clock.
 */
#include "testutil.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "members.h"
#include "mq.h"

#define NQ 8 /* queues of the topic used by most cases */

static MbTable *open_table(int64_t expire_ms, int64_t lease_ms) {
    MbTable *t = NULL;
    MbConfig cfg = {.expire_ms = expire_ms, .lock_lease_ms = lease_ms};
    assert_int_equal(mb_open(&cfg, &t), MQ_OK);
    assert_non_null(t);
    return t;
}

/* A heartbeat of 'id' in group "G" subscribing to one 'topic' ("*", TAG). */
static void hb(MbTable *t, const char *id, RbStrategy s, const char *topic, int64_t now_ms) {
    MbSubscription sub = {.topic = topic, .expression = "*", .filter_type = "TAG"};
    assert_int_equal(mb_heartbeat(t, "G", id, s, &sub, 1, now_ms), MQ_OK);
}

/* The assignment of 'id' on 'topic' with 'nq' queues (must be MQ_OK). */
static size_t assign(MbTable *t, const char *id, const char *topic, uint32_t nq, bool broadcast,
                     uint32_t *out) {
    size_t n = 999;
    assert_int_equal(mb_assignment(t, "G", id, topic, nq, broadcast, out, &n), MQ_OK);
    for (size_t i = 1; i < n; i++) assert_true(out[i - 1] < out[i]);
    return n;
}

/* Asserts the assignments of 'ids' on "T" cover the NQ queues once each. */
static void expect_cover(MbTable *t, const char *const *ids, size_t n) {
    int seen[NQ] = {0};
    for (size_t c = 0; c < n; c++) {
        uint32_t out[NQ];
        size_t got = assign(t, ids[c], "T", NQ, false, out);
        for (size_t i = 0; i < got; i++) seen[out[i]]++;
    }
    for (int q = 0; q < NQ; q++) assert_int_equal(seen[q], 1);
}

/* ---- heartbeat and assignment --------------------------------------------*/

static void test_mb_heartbeat_then_assignment_shares_every_queue_once(void **state) {
    (void)state;
    const char *ids[] = {"c1", "c2", "c3", "c4"};
    for (size_t n = 1; n <= 4; n++) {
        MbTable *t = open_table(0, 0);
        for (size_t c = 0; c < n; c++) hb(t, ids[c], RB_AVG, "T", 0);
        assert_int_equal(mb_count(t, "G"), n);
        expect_cover(t, ids, n);
        mb_close(t);
    }
    /* AVG exactly: 8 queues over 3 clients = 3 + 3 + 2 */
    MbTable *t = open_table(0, 0);
    hb(t, "c3", RB_AVG, "T", 0);
    hb(t, "c1", RB_AVG, "T", 0);
    hb(t, "c2", RB_AVG, "T", 0);
    uint32_t out[NQ];
    assert_int_equal(assign(t, "c1", "T", NQ, false, out), 3);
    assert_int_equal(out[0], 0);
    assert_int_equal(assign(t, "c3", "T", NQ, false, out), 2);
    assert_int_equal(out[0], 6);
    assert_int_equal(out[1], 7);
    mb_close(t);
}

static void test_mb_join_rebalances_the_first_client(void **state) {
    (void)state;
    MbTable *t = open_table(0, 0);
    uint32_t out[NQ];
    hb(t, "c1", RB_AVG, "T", 0);
    assert_int_equal(assign(t, "c1", "T", NQ, false, out), NQ);
    hb(t, "c2", RB_AVG, "T", 10);
    assert_int_equal(assign(t, "c1", "T", NQ, false, out), 4);
    assert_int_equal(out[3], 3);
    assert_int_equal(assign(t, "c2", "T", NQ, false, out), 4);
    assert_int_equal(out[0], 4);
    /* a client of another topic or another group does not count */
    hb(t, "c0", RB_AVG, "Other", 20);
    MbSubscription sub = {.topic = "T"};
    assert_int_equal(mb_heartbeat(t, "H", "c0", RB_AVG, &sub, 1, 20), MQ_OK);
    assert_int_equal(assign(t, "c1", "T", NQ, false, out), 4);
    assert_int_equal(out[0], 0);
    mb_close(t);
}

static void test_mb_expire_drops_a_silent_client_and_the_rest_cover_all_queues(void **state) {
    (void)state;
    MbTable *t = open_table(1000, 0);
    const char *ids[] = {"c1", "c2", "c3"};
    for (size_t c = 0; c < 3; c++) hb(t, ids[c], RB_AVG, "T", 0);
    hb(t, "c1", RB_AVG, "T", 600);
    hb(t, "c2", RB_AVG, "T", 600);
    assert_int_equal(mb_expire(t, 999), 0); /* 0 + 1000 > 999 */
    assert_int_equal(mb_count(t, "G"), 3);
    assert_int_equal(mb_expire(t, 1000), 1);
    assert_int_equal(mb_count(t, "G"), 2);
    size_t n = 7;
    uint32_t out[NQ];
    assert_int_equal(mb_assignment(t, "G", "c3", "T", NQ, false, out, &n), MQ_ERR_NOTFOUND);
    assert_int_equal(n, 0);
    expect_cover(t, ids, 2);
    assert_int_equal(assign(t, "c2", "T", NQ, false, out), 4);
    /* the last ones go too, and with them the group */
    assert_int_equal(mb_expire(t, 1600), 2);
    assert_int_equal(mb_count(t, "G"), 0);
    assert_int_equal(mb_expire(t, 1000000), 0);
    mb_close(t);
}

static int collect(void *arg, const MbClientInfo *c) {
    MbClientInfo *infos = arg;
    size_t i = 0;
    while (infos[i].client_id) i++;
    infos[i] = *c;
    infos[i].client_id = strdup(c->client_id); /* the only field read after the call */
    return 0;
}

static void free_infos(MbClientInfo *infos, size_t n) {
    for (size_t i = 0; i < n; i++) free((char *)infos[i].client_id);
}

static void test_mb_pop_client_is_listed_but_takes_no_queues(void **state) {
    (void)state;
    MbTable *t = open_table(1000, 0);
    uint32_t out[NQ];
    hb(t, "c1", RB_AVG, "T", 0);
    assert_int_equal(mb_touch(t, "G", "p1", "T", 5), MQ_OK);
    assert_int_equal(mb_touch(t, "G", "p1", "T", 6), MQ_OK); /* same topic: not twice */
    assert_int_equal(mb_touch(t, "G", "p1", "U", 7), MQ_OK);
    assert_int_equal(mb_count(t, "G"), 2);
    assert_int_equal(assign(t, "c1", "T", NQ, false, out), NQ);
    size_t n;
    assert_int_equal(mb_assignment(t, "G", "p1", "T", NQ, false, out, &n), MQ_ERR_NOTFOUND);

    MbClientInfo infos[4] = {{0}};
    assert_int_equal(mb_list(t, "G", collect, infos), MQ_OK);
    assert_string_equal(infos[0].client_id, "c1");
    assert_int_equal(infos[0].kind, MB_PULL);
    assert_string_equal(infos[1].client_id, "p1");
    assert_int_equal(infos[1].kind, MB_POP);
    assert_int_equal(infos[1].last_seen_ms, 7);
    assert_int_equal(infos[1].n_subs, 2);
    assert_null(infos[2].client_id);
    free_infos(infos, 2);

    /* touching a pull client keeps it a pull client, and alive */
    assert_int_equal(mb_touch(t, "G", "c1", "V", 900), MQ_OK);
    assert_int_equal(mb_expire(t, 1007), 1); /* p1 (last 7) goes, c1 (900) stays */
    assert_int_equal(assign(t, "c1", "T", NQ, false, out), NQ);
    n = 0;
    assert_int_equal(mb_assignment(t, "G", "c1", "V", NQ, false, out, &n), MQ_ERR_NOTFOUND);
    /* a heartbeat turns a pop client into a pull client */
    assert_int_equal(mb_touch(t, "G", "p2", "T", 950), MQ_OK);
    hb(t, "p2", RB_AVG, "T", 960);
    assert_int_equal(assign(t, "p2", "T", NQ, false, out), 4);
    mb_close(t);
}

static void test_mb_broadcast_gives_every_queue_to_every_client(void **state) {
    (void)state;
    MbTable *t = open_table(0, 0);
    hb(t, "c1", RB_AVG, "T", 0);
    hb(t, "c2", RB_CONSISTENT_HASH, "T", 0);
    hb(t, "c3", RB_CONFIG, "T", 0);
    const char *ids[] = {"c1", "c2", "c3"};
    for (size_t c = 0; c < 3; c++) {
        uint32_t out[NQ];
        assert_int_equal(assign(t, ids[c], "T", NQ, true, out), NQ);
        for (uint32_t q = 0; q < NQ; q++) assert_int_equal(out[q], q);
    }
    mb_close(t);
}

static void test_mb_config_strategy_uses_the_stated_queues(void **state) {
    (void)state;
    MbTable *t = open_table(0, 0);
    const uint32_t mine[] = {9, 5, 1, 3, 1};
    MbSubscription sub = {.topic = "T", .config_queues = mine, .n_config_queues = 5};
    assert_int_equal(mb_heartbeat(t, "G", "cfg", RB_CONFIG, &sub, 1, 0), MQ_OK);
    uint32_t out[NQ];
    assert_int_equal(assign(t, "cfg", "T", NQ, false, out), 3); /* 9 is past the 8 queues */
    assert_int_equal(out[0], 1);
    assert_int_equal(out[1], 3);
    assert_int_equal(out[2], 5);
    assert_int_equal(assign(t, "cfg", "T", 16, false, (uint32_t[16]){0}), 4);
    assert_int_equal(assign(t, "cfg", "T", 0, false, NULL), 0);

    MbClientInfo infos[2] = {{0}};
    assert_int_equal(mb_list(t, "G", collect, infos), MQ_OK);
    free_infos(infos, 1);
    assert_int_equal(infos[0].strategy, RB_CONFIG);
    mb_close(t);
}

/* Checks the one client of group "G": strategy and its subscriptions. */
typedef struct SubCheck {
    RbStrategy strategy;
    const char *topic;
    const char *expression;
    const char *filter_type;
    size_t n_config;
    int calls;
} SubCheck;

static int check_subs(void *arg, const MbClientInfo *c) {
    SubCheck *want = arg;
    want->calls++;
    assert_int_equal(c->kind, MB_PULL);
    assert_int_equal(c->strategy, want->strategy);
    assert_int_equal(c->n_subs, 1);
    assert_string_equal(c->subs[0].topic, want->topic);
    assert_string_equal(c->subs[0].expression, want->expression);
    assert_string_equal(c->subs[0].filter_type, want->filter_type);
    assert_int_equal(c->subs[0].n_config_queues, want->n_config);
    return 0;
}

static void test_mb_heartbeat_replaces_strategy_and_subscriptions(void **state) {
    (void)state;
    MbTable *t = open_table(0, 0);
    char topic[16] = "A";
    char expr[16] = "TagA || TagB";
    uint32_t qs[2] = {0, 1};
    MbSubscription subs[2] = {
        {.topic = topic, .expression = expr, .filter_type = "TAG"},
        {.topic = "B", .expression = "a > 1", .filter_type = "SQL92", .config_queues = qs,
         .n_config_queues = 2},
    };
    assert_int_equal(mb_heartbeat(t, "G", "c1", RB_AVG, subs, 2, 0), MQ_OK);
    /* deep copies: the caller's buffers may change */
    strcpy(topic, "Z");
    strcpy(expr, "garbage");
    uint32_t out[NQ];
    assert_int_equal(assign(t, "c1", "A", NQ, false, out), NQ);
    assert_int_equal(assign(t, "c1", "B", NQ, false, out), NQ);

    /* the second heartbeat replaces the whole set; NULL expression and
     * filter type mean "*" and TAG */
    MbSubscription only_c = {.topic = "C"};
    assert_int_equal(mb_heartbeat(t, "G", "c1", RB_AVG_BY_CIRCLE, &only_c, 1, 5), MQ_OK);
    size_t n;
    assert_int_equal(mb_assignment(t, "G", "c1", "A", NQ, false, out, &n), MQ_ERR_NOTFOUND);
    assert_int_equal(mb_assignment(t, "G", "c1", "B", NQ, false, out, &n), MQ_ERR_NOTFOUND);
    assert_int_equal(assign(t, "c1", "C", NQ, false, out), NQ);
    SubCheck want = {RB_AVG_BY_CIRCLE, "C", "*", "TAG", 0, 0};
    assert_int_equal(mb_list(t, "G", check_subs, &want), MQ_OK);
    assert_int_equal(want.calls, 1);

    MbSubscription sql = {.topic = "D", .expression = "a > 1", .filter_type = "SQL92",
                          .config_queues = qs, .n_config_queues = 2};
    assert_int_equal(mb_heartbeat(t, "G", "c1", RB_CONFIG, &sql, 1, 6), MQ_OK);
    want = (SubCheck){RB_CONFIG, "D", "a > 1", "SQL92", 2, 0};
    assert_int_equal(mb_list(t, "G", check_subs, &want), MQ_OK);
    assert_int_equal(want.calls, 1);

    /* no subscriptions: registered, but assigned nothing */
    assert_int_equal(mb_heartbeat(t, "G", "c1", RB_AVG, NULL, 0, 7), MQ_OK);
    assert_int_equal(mb_count(t, "G"), 1);
    assert_int_equal(mb_assignment(t, "G", "c1", "D", NQ, false, out, &n), MQ_ERR_NOTFOUND);
    mb_close(t);
}

static int stop_after_first(void *arg, const MbClientInfo *c) {
    char *first = arg;
    strcpy(first, c->client_id);
    return 7;
}

static void test_mb_list_is_sorted_and_stops_early(void **state) {
    (void)state;
    MbTable *t = open_table(0, 0);
    hb(t, "c3", RB_AVG, "T", 3);
    hb(t, "c1", RB_AVG, "T", 1);
    assert_int_equal(mb_touch(t, "G", "c2", "T", 2), MQ_OK);
    MbClientInfo infos[4] = {{0}};
    assert_int_equal(mb_list(t, "G", collect, infos), MQ_OK);
    assert_string_equal(infos[0].client_id, "c1");
    assert_string_equal(infos[1].client_id, "c2");
    assert_string_equal(infos[2].client_id, "c3");
    assert_int_equal(infos[0].last_seen_ms, 1);
    assert_int_equal(infos[2].last_seen_ms, 3);
    free_infos(infos, 3);

    char first[MB_CLIENT_ID_MAX + 1] = "";
    assert_int_equal(mb_list(t, "G", stop_after_first, first), 7);
    assert_string_equal(first, "c1");
    /* an unknown group lists nothing */
    memset(infos, 0, sizeof(infos));
    assert_int_equal(mb_list(t, "nope", collect, infos), MQ_OK);
    assert_null(infos[0].client_id);
    mb_close(t);
}

static void test_mb_unregister_and_drop_group(void **state) {
    (void)state;
    MbTable *t = open_table(0, 0);
    hb(t, "c1", RB_AVG, "T", 0);
    hb(t, "c2", RB_AVG, "T", 0);
    assert_int_equal(mb_unregister(t, "G", "c1"), MQ_OK);
    assert_int_equal(mb_unregister(t, "G", "c1"), MQ_ERR_NOTFOUND);
    assert_int_equal(mb_unregister(t, "nope", "c2"), MQ_ERR_NOTFOUND);
    uint32_t out[NQ];
    assert_int_equal(assign(t, "c2", "T", NQ, false, out), NQ);

    uint32_t q = 0;
    size_t n;
    assert_int_equal(mb_lock(t, "G", "c2", "T", &q, 1, 0, out, &n), MQ_OK);
    assert_true(mb_lock_holder(t, "G", "T", 0, 0, NULL));
    mb_drop_group(t, "G");
    mb_drop_group(t, "G"); /* again: nothing */
    assert_int_equal(mb_count(t, "G"), 0);
    assert_false(mb_lock_holder(t, "G", "T", 0, 0, NULL));
    assert_int_equal(mb_assignment(t, "G", "c2", "T", NQ, false, out, &n), MQ_ERR_NOTFOUND);
    mb_close(t);
}

/* ---- locks ---------------------------------------------------------------*/

/* mb_lock of 'n' queues for 'id' on "T" at 'now'; returns how many held. */
static size_t lock(MbTable *t, const char *id, const uint32_t *qids, size_t n, int64_t now,
                   uint32_t *locked) {
    size_t got = 999;
    assert_int_equal(mb_lock(t, "G", id, "T", qids, n, now, locked, &got), MQ_OK);
    return got;
}

static void expect_holder(MbTable *t, uint32_t qid, int64_t now, const char *want) {
    char holder[MB_CLIENT_ID_MAX + 1] = "";
    if (!want) {
        assert_false(mb_lock_holder(t, "G", "T", qid, now, holder));
        return;
    }
    assert_true(mb_lock_holder(t, "G", "T", qid, now, holder));
    assert_string_equal(holder, want);
}

static void test_mb_lock_grants_free_queues_and_denies_another_client(void **state) {
    (void)state;
    MbTable *t = open_table(0, 1000);
    uint32_t locked[8];
    const uint32_t a[] = {2, 0, 1};
    assert_int_equal(lock(t, "c1", a, 3, 0, locked), 3);
    assert_int_equal(locked[0], 0);
    assert_int_equal(locked[2], 2);
    const uint32_t b[] = {3, 2, 1};
    assert_int_equal(lock(t, "c2", b, 3, 10, locked), 1);
    assert_int_equal(locked[0], 3);
    expect_holder(t, 1, 10, "c1");
    expect_holder(t, 3, 10, "c2");
    expect_holder(t, 4, 10, NULL);
    /* duplicates come back once, ascending */
    const uint32_t d[] = {5, 4, 5, 0};
    assert_int_equal(lock(t, "c1", d, 4, 20, locked), 3);
    assert_int_equal(locked[0], 0);
    assert_int_equal(locked[1], 4);
    assert_int_equal(locked[2], 5);
    /* same queue ids of another topic or group are other locks */
    size_t n;
    assert_int_equal(mb_lock(t, "G", "c2", "T2", a, 3, 30, locked, &n), MQ_OK);
    assert_int_equal(n, 3);
    assert_int_equal(mb_lock(t, "H", "c2", "T", a, 3, 30, locked, &n), MQ_OK);
    assert_int_equal(n, 3);
    assert_int_equal(lock(t, "c1", NULL, 0, 30, NULL), 0);
    mb_close(t);
}

static void test_mb_lock_renewal_extends_the_lease(void **state) {
    (void)state;
    MbTable *t = open_table(0, 1000);
    uint32_t locked[1];
    const uint32_t q = 0;
    assert_int_equal(lock(t, "c1", &q, 1, 0, locked), 1);
    assert_int_equal(lock(t, "c1", &q, 1, 800, locked), 1); /* renewed */
    assert_int_equal(lock(t, "c2", &q, 1, 1500, locked), 0); /* 800 + 1000 > 1500 */
    expect_holder(t, 0, 1799, "c1");
    expect_holder(t, 0, 1800, NULL);
    assert_int_equal(lock(t, "c2", &q, 1, 1800, locked), 1);
    expect_holder(t, 0, 1800, "c2");
    mb_close(t);
}

static void test_mb_lock_lease_runs_out_without_renewal(void **state) {
    (void)state;
    MbTable *t = open_table(0, 1000);
    uint32_t locked[1];
    const uint32_t q = 7;
    assert_int_equal(lock(t, "c1", &q, 1, 0, locked), 1);
    expect_holder(t, 7, 999, "c1");
    assert_int_equal(lock(t, "c2", &q, 1, 999, locked), 0);
    expect_holder(t, 7, 1000, NULL);
    assert_int_equal(lock(t, "c2", &q, 1, 1000, locked), 1);
    expect_holder(t, 7, 1000, "c2");
    /* mb_expire forgets run-out locks (c2's is still running) */
    assert_int_equal(mb_expire(t, 1999), 0);
    expect_holder(t, 7, 1999, "c2");
    assert_int_equal(mb_expire(t, 2000), 0);
    expect_holder(t, 7, 0, NULL); /* gone, not merely run out */
    mb_close(t);
}

static void test_mb_unlock_by_a_non_holder_is_ignored(void **state) {
    (void)state;
    MbTable *t = open_table(0, 1000);
    uint32_t locked[2];
    const uint32_t qs[] = {0, 1};
    assert_int_equal(lock(t, "c1", qs, 2, 0, locked), 2);
    assert_int_equal(mb_unlock(t, "G", "c2", "T", qs, 2), MQ_OK);
    expect_holder(t, 0, 1, "c1");
    expect_holder(t, 1, 1, "c1");
    assert_int_equal(mb_unlock(t, "G", "c1", "T", qs, 1), MQ_OK);
    expect_holder(t, 0, 1, NULL);
    expect_holder(t, 1, 1, "c1");
    assert_int_equal(lock(t, "c2", qs, 2, 2, locked), 1);
    assert_int_equal(locked[0], 0);
    assert_int_equal(mb_unlock(t, "nope", "c1", "T", qs, 2), MQ_OK);
    assert_int_equal(mb_unlock(t, "G", "c1", "T", NULL, 0), MQ_OK);
    mb_close(t);
}

static void test_mb_client_expiry_and_unregister_release_its_locks(void **state) {
    (void)state;
    MbTable *t = open_table(1000, 60000);
    uint32_t locked[2];
    const uint32_t qs[] = {0, 1};
    hb(t, "c1", RB_AVG, "T", 0);
    hb(t, "c2", RB_AVG, "T", 900);
    assert_int_equal(lock(t, "c1", qs, 1, 500, locked), 1);
    assert_int_equal(lock(t, "c2", qs + 1, 1, 900, locked), 1);
    assert_int_equal(lock(t, "c2", qs, 2, 900, locked), 1); /* q0 is c1's */
    assert_int_equal(mb_expire(t, 1000), 1);                 /* c1 */
    expect_holder(t, 0, 1000, NULL);
    expect_holder(t, 1, 1000, "c2");
    assert_int_equal(lock(t, "c2", qs, 2, 1000, locked), 2);
    assert_int_equal(mb_unregister(t, "G", "c2"), MQ_OK);
    expect_holder(t, 0, 1000, NULL);
    expect_holder(t, 1, 1000, NULL);
    mb_close(t);
}

/* ---- arguments and bounds ------------------------------------------------*/

static void test_mb_bad_arguments_are_rejected(void **state) {
    (void)state;
    MbTable *t = NULL;
    assert_int_equal(mb_open(&(MbConfig){.expire_ms = -1}, &t), MQ_ERR_INVAL);
    assert_int_equal(mb_open(&(MbConfig){.lock_lease_ms = -1}, &t), MQ_ERR_INVAL);
    assert_int_equal(mb_open(NULL, NULL), MQ_ERR_INVAL);
    assert_int_equal(mb_open(NULL, &t), MQ_OK); /* defaults */
    mb_close(t);
    mb_close(NULL);
    t = open_table(0, 0);

    char id255[MB_CLIENT_ID_MAX + 1];
    char id256[MB_CLIENT_ID_MAX + 2];
    memset(id255, 'x', sizeof(id255) - 1);
    id255[sizeof(id255) - 1] = '\0';
    memset(id256, 'x', sizeof(id256) - 1);
    id256[sizeof(id256) - 1] = '\0';
    static char expr[MB_EXPR_MAX + 2];
    memset(expr, 'e', sizeof(expr) - 1);
    MbSubscription ok = {.topic = "T"};
    MbSubscription s[MB_SUBS_MAX + 1];
    char names[MB_SUBS_MAX + 1][8];
    for (size_t i = 0; i <= MB_SUBS_MAX; i++) {
        snprintf(names[i], sizeof(names[i]), "T%zu", i);
        s[i] = (MbSubscription){.topic = names[i]};
    }

    /* heartbeat */
    assert_int_equal(mb_heartbeat(t, "G", id255, RB_AVG, &ok, 1, 0), MQ_OK);
    assert_int_equal(mb_heartbeat(t, "G", id256, RB_AVG, &ok, 1, 0), MQ_ERR_INVAL);
    assert_int_equal(mb_heartbeat(t, "G", "", RB_AVG, &ok, 1, 0), MQ_ERR_INVAL);
    assert_int_equal(mb_heartbeat(t, "G", NULL, RB_AVG, &ok, 1, 0), MQ_ERR_INVAL);
    assert_int_equal(mb_heartbeat(t, "", "c", RB_AVG, &ok, 1, 0), MQ_ERR_INVAL);
    assert_int_equal(mb_heartbeat(t, id256, "c", RB_AVG, &ok, 1, 0), MQ_ERR_INVAL);
    assert_int_equal(mb_heartbeat(NULL, "G", "c", RB_AVG, &ok, 1, 0), MQ_ERR_INVAL);
    assert_int_equal(mb_heartbeat(t, "G", "c", (RbStrategy)4, &ok, 1, 0), MQ_ERR_INVAL);
    assert_int_equal(mb_heartbeat(t, "G", "c", RB_AVG, &ok, 1, -1), MQ_ERR_INVAL);
    assert_int_equal(mb_heartbeat(t, "G", "c", RB_AVG, NULL, 1, 0), MQ_ERR_INVAL);
    assert_int_equal(mb_heartbeat(t, "G", "c", RB_AVG, s, MB_SUBS_MAX, 0), MQ_OK);
    assert_int_equal(mb_heartbeat(t, "G", "c", RB_AVG, s, MB_SUBS_MAX + 1, 0), MQ_ERR_INVAL);
    MbSubscription bad[2] = {{.topic = "T"}, {.topic = "T"}};
    assert_int_equal(mb_heartbeat(t, "G", "c", RB_AVG, bad, 2, 0), MQ_ERR_INVAL); /* twice */
    bad[0] = (MbSubscription){.topic = NULL};
    assert_int_equal(mb_heartbeat(t, "G", "c", RB_AVG, bad, 1, 0), MQ_ERR_INVAL);
    bad[0] = (MbSubscription){.topic = ""};
    assert_int_equal(mb_heartbeat(t, "G", "c", RB_AVG, bad, 1, 0), MQ_ERR_INVAL);
    bad[0] = (MbSubscription){.topic = id256};
    assert_int_equal(mb_heartbeat(t, "G", "c", RB_AVG, bad, 1, 0), MQ_ERR_INVAL);
    bad[0] = (MbSubscription){.topic = "T", .filter_type = "tag"};
    assert_int_equal(mb_heartbeat(t, "G", "c", RB_AVG, bad, 1, 0), MQ_ERR_INVAL);
    bad[0] = (MbSubscription){.topic = "T", .expression = expr};
    assert_int_equal(mb_heartbeat(t, "G", "c", RB_AVG, bad, 1, 0), MQ_ERR_INVAL);
    expr[MB_EXPR_MAX] = '\0';
    assert_int_equal(mb_heartbeat(t, "G", "c", RB_AVG, bad, 1, 0), MQ_OK); /* 4096 fits */
    bad[0] = (MbSubscription){.topic = "T", .n_config_queues = 1};
    assert_int_equal(mb_heartbeat(t, "G", "c", RB_CONFIG, bad, 1, 0), MQ_ERR_INVAL);
    static uint32_t many[MB_CONFIG_QUEUES_MAX + 1];
    bad[0] = (MbSubscription){.topic = "T", .config_queues = many,
                              .n_config_queues = MB_CONFIG_QUEUES_MAX + 1};
    assert_int_equal(mb_heartbeat(t, "G", "c", RB_CONFIG, bad, 1, 0), MQ_ERR_INVAL);

    /* the failed heartbeats changed nothing: c still has its 4096-byte expression */
    assert_int_equal(mb_count(t, "G"), 2);

    /* touch */
    assert_int_equal(mb_touch(t, "G", "p", NULL, 0), MQ_ERR_INVAL);
    assert_int_equal(mb_touch(t, "G", "p", "", 0), MQ_ERR_INVAL);
    assert_int_equal(mb_touch(t, "G", id256, "T", 0), MQ_ERR_INVAL);
    assert_int_equal(mb_touch(t, "G", "p", "T", -5), MQ_ERR_INVAL);
    assert_int_equal(mb_touch(NULL, "G", "p", "T", 0), MQ_ERR_INVAL);
    for (size_t i = 0; i < MB_SUBS_MAX; i++)
        assert_int_equal(mb_touch(t, "G", "p", names[i], 10), MQ_OK);
    assert_int_equal(mb_touch(t, "G", "p", names[MB_SUBS_MAX], 11), MQ_ERR_FULL);
    assert_int_equal(mb_touch(t, "G", "p", names[0], 12), MQ_OK);

    /* assignment */
    uint32_t out[NQ];
    size_t n;
    assert_int_equal(mb_assignment(t, "G", "c", "T", NQ, false, out, NULL), MQ_ERR_INVAL);
    assert_int_equal(mb_assignment(t, "G", "c", "T", NQ, false, NULL, &n), MQ_ERR_INVAL);
    assert_int_equal(mb_assignment(t, "G", "c", NULL, NQ, false, out, &n), MQ_ERR_INVAL);
    assert_int_equal(mb_assignment(t, NULL, "c", "T", NQ, false, out, &n), MQ_ERR_INVAL);
    assert_int_equal(mb_assignment(t, "G", "zz", "T", NQ, false, out, &n), MQ_ERR_NOTFOUND);
    assert_int_equal(mb_assignment(t, "nope", "c", "T", NQ, false, out, &n), MQ_ERR_NOTFOUND);

    /* locks */
    const uint32_t q = 0;
    assert_int_equal(mb_lock(t, "G", "c", "T", &q, 1, 0, out, NULL), MQ_ERR_INVAL);
    assert_int_equal(mb_lock(t, "G", "c", "T", NULL, 1, 0, out, &n), MQ_ERR_INVAL);
    assert_int_equal(mb_lock(t, "G", "c", "T", &q, 1, 0, NULL, &n), MQ_ERR_INVAL);
    assert_int_equal(mb_lock(t, "G", "", "T", &q, 1, 0, out, &n), MQ_ERR_INVAL);
    assert_int_equal(mb_lock(t, "G", id256, "T", &q, 1, 0, out, &n), MQ_ERR_INVAL);
    assert_int_equal(mb_lock(t, "G", "c", "", &q, 1, 0, out, &n), MQ_ERR_INVAL);
    assert_int_equal(mb_lock(t, "", "c", "T", &q, 1, 0, out, &n), MQ_ERR_INVAL);
    assert_int_equal(mb_lock(t, "G", "c", "T", &q, 1, -1, out, &n), MQ_ERR_INVAL);
    assert_int_equal(mb_unlock(t, "G", "c", "T", NULL, 1), MQ_ERR_INVAL);
    assert_int_equal(mb_unlock(t, "G", NULL, "T", &q, 1), MQ_ERR_INVAL);
    assert_false(mb_lock_holder(t, NULL, "T", 0, 0, NULL));
    assert_false(mb_lock_holder(NULL, "G", "T", 0, 0, NULL));

    /* the rest */
    assert_int_equal(mb_unregister(t, NULL, "c"), MQ_ERR_INVAL);
    assert_int_equal(mb_list(t, "G", NULL, NULL), MQ_ERR_INVAL);
    assert_int_equal(mb_count(t, NULL), 0);
    assert_int_equal(mb_expire(NULL, 0), 0);
    mb_drop_group(t, NULL);
    assert_int_equal(mb_count(t, "G"), 3);
    mb_close(t);
}

static void test_mb_group_holds_at_most_the_client_limit(void **state) {
    (void)state;
    MbTable *t = open_table(0, 0);
    char id[32];
    for (int i = 0; i < MB_CLIENTS_MAX; i++) {
        snprintf(id, sizeof(id), "client-%05d", i);
        hb(t, id, RB_AVG, "T", 0);
    }
    assert_int_equal(mb_count(t, "G"), MB_CLIENTS_MAX);
    MbSubscription sub = {.topic = "T"};
    assert_int_equal(mb_heartbeat(t, "G", "one-more", RB_AVG, &sub, 1, 0), MQ_ERR_FULL);
    assert_int_equal(mb_touch(t, "G", "one-more", "T", 0), MQ_ERR_FULL);
    hb(t, "client-00000", RB_AVG, "T", 1); /* a known one still beats */
    assert_int_equal(mb_heartbeat(t, "G2", "one-more", RB_AVG, &sub, 1, 0), MQ_OK);
    /* 10,000 clients over 1024 queues: the first 1024 (by id) get one
     * each, the others none (AVG with more clients than queues) */
    static const int sample[] = {0, 1, 511, 1023, 1024, 5000, 9999};
    for (size_t i = 0; i < sizeof(sample) / sizeof(sample[0]); i++) {
        uint32_t out[1024];
        size_t n;
        snprintf(id, sizeof(id), "client-%05d", sample[i]);
        assert_int_equal(mb_assignment(t, "G", id, "T", 1024, false, out, &n), MQ_OK);
        assert_int_equal(n, sample[i] < 1024 ? 1 : 0);
        if (n == 1) assert_int_equal(out[0], sample[i]);
    }
    assert_int_equal(mb_expire(t, MB_EXPIRE_MS_DEFAULT), MB_CLIENTS_MAX); /* all but one */
    assert_int_equal(mb_count(t, "G"), 1);
    mb_close(t);
}

/* ---- threads -------------------------------------------------------------*/

#define TH_ROUNDS 2000
#define TH_CLIENTS 8

typedef struct ThArg {
    MbTable *t;
    char prefix; /* 'a' or 'b': the ids this thread owns */
    int errors;  /* calls that did not return what they should */
} ThArg;

static void *th_main(void *p) {
    ThArg *a = p;
    char id[16];
    char tmp[16];
    uint32_t out[NQ];
    uint32_t locked[NQ];
    MbSubscription sub = {.topic = "T"};
    const uint32_t qs[] = {0, 1, 2, 3, 4, 5, 6, 7};
    for (int r = 0; r < TH_ROUNDS; r++) {
        snprintf(id, sizeof(id), "%c-%d", a->prefix, r % TH_CLIENTS);
        snprintf(tmp, sizeof(tmp), "%c-tmp", a->prefix);
        size_t n;
        if (mb_heartbeat(a->t, "G", id, (RbStrategy)(r % 3), &sub, 1, r) != MQ_OK) a->errors++;
        if (mb_assignment(a->t, "G", id, "T", NQ, false, out, &n) != MQ_OK || n > NQ)
            a->errors++;
        if (mb_touch(a->t, "G", tmp, "T", r) != MQ_OK) a->errors++;
        if (mb_lock(a->t, "G", id, "T", qs, NQ, r, locked, &n) != MQ_OK) a->errors++;
        if (mb_unlock(a->t, "G", id, "T", locked, n) != MQ_OK) a->errors++;
        if (mb_unregister(a->t, "G", tmp) != MQ_OK) a->errors++;
        if (mb_count(a->t, "G") > 2 * TH_CLIENTS + 2) a->errors++;
        mb_expire(a->t, r); /* expire_ms is large: drops nothing */
        mb_lock_holder(a->t, "G", "T", (uint32_t)r % NQ, r, NULL);
    }
    return NULL;
}

static void test_mb_two_threads_share_the_table(void **state) {
    (void)state;
    MbTable *t = open_table(1000000, 10);
    ThArg args[2] = {{t, 'a', 0}, {t, 'b', 0}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&th[i], NULL, th_main, &args[i]), 0);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    assert_int_equal(args[0].errors, 0);
    assert_int_equal(args[1].errors, 0);
    assert_int_equal(mb_count(t, "G"), 2 * TH_CLIENTS);
    /* all AVG now: the 16 clients share the 8 queues once each */
    char id[16];
    MbSubscription sub = {.topic = "T"};
    int seen[NQ] = {0};
    for (int c = 0; c < 2 * TH_CLIENTS; c++) {
        snprintf(id, sizeof(id), "%c-%d", c < TH_CLIENTS ? 'a' : 'b', c % TH_CLIENTS);
        assert_int_equal(mb_heartbeat(t, "G", id, RB_AVG, &sub, 1, 5000), MQ_OK);
    }
    for (int c = 0; c < 2 * TH_CLIENTS; c++) {
        snprintf(id, sizeof(id), "%c-%d", c < TH_CLIENTS ? 'a' : 'b', c % TH_CLIENTS);
        uint32_t out[NQ];
        size_t n = assign(t, id, "T", NQ, false, out);
        for (size_t k = 0; k < n; k++) seen[out[k]]++;
    }
    for (int q = 0; q < NQ; q++) assert_int_equal(seen[q], 1);
    mb_close(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mb_heartbeat_then_assignment_shares_every_queue_once),
        cmocka_unit_test(test_mb_join_rebalances_the_first_client),
        cmocka_unit_test(test_mb_expire_drops_a_silent_client_and_the_rest_cover_all_queues),
        cmocka_unit_test(test_mb_pop_client_is_listed_but_takes_no_queues),
        cmocka_unit_test(test_mb_broadcast_gives_every_queue_to_every_client),
        cmocka_unit_test(test_mb_config_strategy_uses_the_stated_queues),
        cmocka_unit_test(test_mb_heartbeat_replaces_strategy_and_subscriptions),
        cmocka_unit_test(test_mb_list_is_sorted_and_stops_early),
        cmocka_unit_test(test_mb_unregister_and_drop_group),
        cmocka_unit_test(test_mb_lock_grants_free_queues_and_denies_another_client),
        cmocka_unit_test(test_mb_lock_renewal_extends_the_lease),
        cmocka_unit_test(test_mb_lock_lease_runs_out_without_renewal),
        cmocka_unit_test(test_mb_unlock_by_a_non_holder_is_ignored),
        cmocka_unit_test(test_mb_client_expiry_and_unregister_release_its_locks),
        cmocka_unit_test(test_mb_bad_arguments_are_rejected),
        cmocka_unit_test(test_mb_group_holds_at_most_the_client_limit),
        cmocka_unit_test(test_mb_two_threads_share_the_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
