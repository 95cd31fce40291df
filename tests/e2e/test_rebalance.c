/*
 * test_rebalance.c - end-to-end tests of classic-pull membership against a
 * real petrel: heartbeats answer each client's share of a topic's queues
 * (AVG, AVG_BY_CIRCLE, CONSISTENT_HASH: disjoint and covering; CONFIG;
 * broadcast), a silent client is dropped after clientChannelExpiredMs and
 * its queues go to the others, unregistering, orderly queue locks with
 * their lease, group auto-creation (on and off), and every validation
 * error with its status and code.  The servers run with short expiry and
 * lock lease (1500 ms) so the waits stay short.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "e2e.h"

#define EXPIRE_MS 1500 /* --clientChannelExpiredMs and --rebalanceLockMaxLiveTime */
#define ALL8 0xffu     /* the queues of an 8-queue topic, as a mask */

static const char *const fast[] = {"--clientChannelExpiredMs=1500",
                                   "--rebalanceLockMaxLiveTime=1500", NULL};

static int setup(void **state) {
    return e2e_case_setup(state, "e2e-rebalance");
}

/* Starts the server with the short timeouts and makes topic "T" (8 queues). */
static void start(E2eCase *f) {
    e2e_case_start(f, fast);
    e2e_create_topic(f, "T", 8);
}

/* The queues of 'topic' in a heartbeat answer as a bit mask; a queue given
 * twice fails the test. */
static uint64_t mask_of(const json_t *answer, const char *topic) {
    uint64_t mask = 0;
    json_t *as = json_object_get(answer, "assignments");
    assert_true(json_is_array(as));
    for (size_t i = 0; i < json_array_size(as); i++) {
        json_t *a = json_array_get(as, i);
        if (strcmp(e2e_str(a, "topic"), topic) != 0) continue;
        long long q = e2e_num(a, "queueId");
        assert_true(q >= 0 && q < 64);
        assert_int_equal(mask & (1ull << q), 0);
        mask |= 1ull << q;
    }
    return mask;
}

/* One heartbeat of 'client' in 'group' with 'body' (expects 200); returns
 * its queues of topic "T" as a mask. */
static uint64_t heartbeat(E2eCase *f, const char *group, const char *client, const char *body) {
    char path[256];
    snprintf(path, sizeof(path), "/v1/groups/%s/consumers/%s/heartbeat", group, client);
    json_t *a = e2e_call(f, "POST", path, E2E_JSON, body, 200);
    uint64_t mask = mask_of(a, "T");
    assert_int_equal(e2e_num(a, "expireMs"), EXPIRE_MS);
    json_decref(a);
    return mask;
}

/* A heartbeat subscribing to "T" only, with 'strategy'. */
static uint64_t hb(E2eCase *f, const char *group, const char *client, const char *strategy) {
    char body[128];
    snprintf(body, sizeof(body), "{\"subscriptions\":[{\"topic\":\"T\"}],\"strategy\":\"%s\"}",
             strategy);
    return heartbeat(f, group, client, body);
}

/* Asserts that the 'n' masks are disjoint and cover 'all'. */
static void assert_partition(const uint64_t *masks, size_t n, uint64_t all) {
    uint64_t seen = 0;
    for (size_t i = 0; i < n; i++) {
        if (seen & masks[i]) fprintf(stderr, "overlap at client %zu: %#llx\n", i,
                                     (unsigned long long)(seen & masks[i]));
        assert_int_equal(seen & masks[i], 0);
        seen |= masks[i];
    }
    assert_int_equal(seen, all);
}

/* ---- cases ---------------------------------------------------------------*/

static void test_rebalance_avg_splits_queues_and_reassigns_after_expiry(void **state) {
    E2eCase *f = *state;
    start(f);
    /* Alone: everything.  The group is auto-created by the heartbeat. */
    assert_int_equal(hb(f, "g", "c1", "AVG"), ALL8);
    json_decref(e2e_call(f, "GET", "/v1/groups/g", NULL, NULL, 200));

    /* Two: 4 + 4, contiguous (RocketMQ's AVG: c1 first by id). */
    uint64_t m[3];
    m[1] = hb(f, "g", "c2", "AVG");
    m[0] = hb(f, "g", "c1", "AVG");
    assert_partition(m, 2, ALL8);
    assert_int_equal(m[0], 0x0f);
    assert_int_equal(m[1], 0xf0);

    /* Three: 3 + 3 + 2. */
    m[2] = hb(f, "g", "c3", "AVG");
    m[0] = hb(f, "g", "c1", "AVG");
    m[1] = hb(f, "g", "c2", "AVG");
    assert_partition(m, 3, ALL8);
    assert_int_equal(m[0], 0x07);
    assert_int_equal(m[1], 0x38);
    assert_int_equal(m[2], 0xc0);

    /* c3 goes silent; c1 and c2 keep beating until it has expired. */
    long long t0 = e2e_now_ms();
    while (e2e_now_ms() - t0 < EXPIRE_MS + 400) {
        hb(f, "g", "c1", "AVG");
        hb(f, "g", "c2", "AVG");
        e2e_sleep_ms(300);
    }
    m[0] = hb(f, "g", "c1", "AVG");
    m[1] = hb(f, "g", "c2", "AVG");
    assert_partition(m, 2, ALL8);
    json_t *g = e2e_call(f, "GET", "/v1/groups/g", NULL, NULL, 200);
    json_t *cs = json_object_get(g, "consumers");
    assert_int_equal(json_array_size(cs), 2);
    assert_string_equal(e2e_str(json_array_get(cs, 0), "clientId"), "c1");
    assert_string_equal(e2e_str(json_array_get(cs, 1), "clientId"), "c2");
    json_decref(g);

    /* A graceful leave: the other gets everything at once. */
    assert_null(e2e_call(f, "DELETE", "/v1/groups/g/consumers/c2", NULL, NULL, 204));
    assert_int_equal(hb(f, "g", "c1", "AVG"), ALL8);
    e2e_expect_error(f, "DELETE", "/v1/groups/g/consumers/c2", NULL, NULL, 404,
                     "CONSUMER_NOT_FOUND");
    e2e_expect_error(f, "DELETE", "/v1/groups/nope/consumers/c2", NULL, NULL, 404,
                     "GROUP_NOT_FOUND");
    assert_int_equal(e2e_stop(&f->srv), 0);
}

static void test_rebalance_circle_and_consistent_hash_cover_all_queues(void **state) {
    E2eCase *f = *state;
    start(f);
    static const char *const ids[] = {"10.0.0.1@100", "10.0.0.2@200", "host-c:7"};
    uint64_t m[3];
    for (size_t i = 0; i < 3; i++) hb(f, "circle", ids[i], "AVG_BY_CIRCLE");
    for (size_t i = 0; i < 3; i++) m[i] = hb(f, "circle", ids[i], "AVG_BY_CIRCLE");
    assert_partition(m, 3, ALL8);
    assert_int_equal(m[0], 0x49); /* 0, 3, 6 */
    assert_int_equal(m[1], 0x92); /* 1, 4, 7 */
    assert_int_equal(m[2], 0x24); /* 2, 5 */

    for (size_t i = 0; i < 3; i++) hb(f, "ring", ids[i], "CONSISTENT_HASH");
    for (size_t i = 0; i < 3; i++) m[i] = hb(f, "ring", ids[i], "CONSISTENT_HASH");
    assert_partition(m, 3, ALL8);
    /* Removing a client moves only its queues. */
    uint64_t before0 = m[0];
    uint64_t before1 = m[1];
    assert_null(e2e_call(f, "DELETE", "/v1/groups/ring/consumers/host-c:7", NULL, NULL, 204));
    m[0] = hb(f, "ring", ids[0], "CONSISTENT_HASH");
    m[1] = hb(f, "ring", ids[1], "CONSISTENT_HASH");
    assert_partition(m, 2, ALL8);
    assert_int_equal(m[0] & before0, before0);
    assert_int_equal(m[1] & before1, before1);
    assert_int_equal(e2e_stop(&f->srv), 0);
}

static void test_rebalance_config_and_broadcast(void **state) {
    E2eCase *f = *state;
    start(f);
    /* CONFIG: the queues the client states, those beyond the topic's
     * queue count dropped. */
    uint64_t m = heartbeat(f, "cfg", "c1",
                           "{\"strategy\":\"CONFIG\",\"subscriptions\":[{\"topic\":\"T\","
                           "\"queueIds\":[5,1,3,3,99]}]}");
    assert_int_equal(m, (1u << 1) | (1u << 3) | (1u << 5));
    m = heartbeat(f, "cfg", "c2",
                  "{\"strategy\":\"CONFIG\",\"subscriptions\":[{\"topic\":\"T\","
                  "\"queueIds\":[]}]}");
    assert_int_equal(m, 0);

    /* Broadcast: every client gets every queue. */
    json_decref(e2e_call(f, "PUT", "/v1/groups/bc", E2E_JSON, "{\"broadcast\":true}", 201));
    for (int round = 0; round < 2; round++) {
        static const char *const ids[] = {"a", "b", "c"};
        for (size_t i = 0; i < 3; i++) {
            char path[128];
            snprintf(path, sizeof(path), "/v1/groups/bc/consumers/%s/heartbeat", ids[i]);
            json_t *a = e2e_call(f, "POST", path, E2E_JSON,
                                 "{\"subscriptions\":[{\"topic\":\"T\"}]}", 200);
            assert_true(json_is_true(json_object_get(a, "broadcast")));
            assert_int_equal(mask_of(a, "T"), ALL8);
            json_decref(a);
        }
    }
    assert_int_equal(e2e_stop(&f->srv), 0);
}

static void test_rebalance_topics_that_do_not_exist_yet(void **state) {
    E2eCase *f = *state;
    start(f);
    const char *body = "{\"subscriptions\":[{\"topic\":\"T\",\"expression\":\"TagA || TagB\"},"
                       "{\"topic\":\"Later\",\"type\":\"SQL92\",\"expression\":\"x = 1\"}]}";
    char path[] = "/v1/groups/g/consumers/c1/heartbeat";
    json_t *a = e2e_call(f, "POST", path, E2E_JSON, body, 200);
    assert_int_equal(mask_of(a, "T"), ALL8);
    assert_int_equal(mask_of(a, "Later"), 0);
    assert_false(json_is_true(json_object_get(a, "broadcast")));
    json_decref(a);
    e2e_create_topic(f, "Later", 2);
    a = e2e_call(f, "POST", path, E2E_JSON, body, 200);
    assert_int_equal(mask_of(a, "T"), ALL8);
    assert_int_equal(mask_of(a, "Later"), 0x3);
    json_decref(a);
    /* A heartbeat replaces the whole subscription set. */
    a = e2e_call(f, "POST", path, E2E_JSON, "{\"subscriptions\":[{\"topic\":\"Later\"}]}", 200);
    assert_int_equal(mask_of(a, "T"), 0);
    assert_int_equal(mask_of(a, "Later"), 0x3);
    json_decref(a);
    a = e2e_call(f, "POST", path, E2E_JSON, "{\"subscriptions\":[]}", 200);
    assert_int_equal(json_array_size(json_object_get(a, "assignments")), 0);
    json_decref(a);
    assert_int_equal(e2e_stop(&f->srv), 0);
}

/* POSTs a lock (or DELETEs it with 'unlock') and returns the locked mask
 * (0 for an unlock, which answers 204). */
static uint64_t lock(E2eCase *f, bool unlock, const char *client, const char *qids) {
    char body[256];
    snprintf(body, sizeof(body), "{\"clientId\":\"%s\",\"topic\":\"T\",\"queueIds\":%s}", client,
             qids);
    if (unlock) {
        assert_null(e2e_call(f, "DELETE", "/v1/groups/g/locks", E2E_JSON, body, 204));
        return 0;
    }
    json_t *a = e2e_call(f, "POST", "/v1/groups/g/locks", E2E_JSON, body, 200);
    assert_string_equal(e2e_str(a, "clientId"), client);
    assert_string_equal(e2e_str(a, "topic"), "T");
    json_t *qs = json_object_get(a, "queueIds");
    uint64_t mask = 0;
    long long prev = -1;
    for (size_t i = 0; i < json_array_size(qs); i++) {
        long long q = json_integer_value(json_array_get(qs, i));
        assert_true(q > prev); /* ascending, no duplicates */
        prev = q;
        mask |= 1ull << q;
    }
    json_decref(a);
    return mask;
}

static void test_rebalance_locks_lease_and_unlock(void **state) {
    E2eCase *f = *state;
    start(f);
    json_decref(e2e_call(f, "PUT", "/v1/groups/g", E2E_JSON, "{\"orderly\":true}", 201));
    assert_int_equal(lock(f, false, "A", "[0,1]"), 0x3);
    assert_int_equal(lock(f, false, "B", "[1,2]"), 0x4); /* a subset: 1 is A's */
    assert_int_equal(lock(f, false, "A", "[1,0,1]"), 0x3); /* renewed */
    assert_int_equal(lock(f, false, "B", "[1]"), 0);

    /* A's lease runs out; B renews 2 on the way. */
    e2e_sleep_ms(EXPIRE_MS + 300);
    assert_int_equal(lock(f, false, "B", "[1,2]"), 0x6);
    assert_int_equal(lock(f, false, "A", "[0,1]"), 0x1);

    /* Unlock releases only the caller's own locks. */
    lock(f, true, "A", "[1,2]"); /* not A's: nothing happens */
    assert_int_equal(lock(f, false, "A", "[1,2]"), 0);
    lock(f, true, "B", "[1]");
    assert_int_equal(lock(f, false, "A", "[1,2]"), 0x2);
    lock(f, true, "A", "[0,1]");
    assert_int_equal(lock(f, false, "B", "[0,1,2]"), 0x7);

    /* An unregistered consumer's locks are released. */
    hb(f, "g", "C", "AVG");
    assert_int_equal(lock(f, false, "C", "[3]"), 0x8);
    assert_int_equal(lock(f, false, "B", "[3]"), 0);
    assert_null(e2e_call(f, "DELETE", "/v1/groups/g/consumers/C", NULL, NULL, 204));
    assert_int_equal(lock(f, false, "B", "[3]"), 0x8);

    static const struct {
        const char *method;
        const char *path;
        const char *body;
        long status;
        const char *code;
    } cases[] = {
        {"POST", "/v1/groups/g/locks", "{\"clientId\":\"A\",\"topic\":\"T\",\"queueIds\":[8]}",
         400, "INVALID_FIELD"},
        {"POST", "/v1/groups/g/locks", "{\"clientId\":\"A\",\"topic\":\"T\",\"queueIds\":[-1]}",
         400, "INVALID_FIELD"},
        {"POST", "/v1/groups/g/locks", "{\"clientId\":\"A\",\"topic\":\"T\",\"queueIds\":[]}",
         400, "INVALID_FIELD"},
        {"POST", "/v1/groups/g/locks", "{\"clientId\":\"A\",\"topic\":\"T\",\"queueIds\":[\"1\"]}",
         400, "INVALID_FIELD"},
        {"POST", "/v1/groups/g/locks", "{\"clientId\":\"A\",\"topic\":\"T\",\"queueIds\":1}",
         400, "INVALID_FIELD"},
        {"POST", "/v1/groups/g/locks", "{\"clientId\":\"A\",\"topic\":\"T\"}", 400,
         "INVALID_FIELD"},
        {"POST", "/v1/groups/g/locks", "{\"topic\":\"T\",\"queueIds\":[0]}", 400,
         "INVALID_FIELD"},
        {"POST", "/v1/groups/g/locks", "{\"clientId\":\"a b\",\"topic\":\"T\",\"queueIds\":[0]}",
         400, "INVALID_FIELD"},
        {"POST", "/v1/groups/g/locks", "{\"clientId\":\"A\",\"queueIds\":[0]}", 400,
         "INVALID_FIELD"},
        {"POST", "/v1/groups/g/locks", "{\"clientId\":\"A\",\"topic\":\"b.d\",\"queueIds\":[0]}",
         400, "INVALID_NAME"},
        {"POST", "/v1/groups/g/locks",
         "{\"clientId\":\"A\",\"topic\":\"T\",\"queueIds\":[0],\"x\":1}", 400, "UNKNOWN_FIELD"},
        {"POST", "/v1/groups/g/locks", "{\"clientId\":\"A\"", 400, "INVALID_JSON"},
        {"POST", "/v1/groups/g/locks", "{\"clientId\":\"A\",\"topic\":\"Nope\",\"queueIds\":[0]}",
         404, "TOPIC_NOT_FOUND"},
        {"POST", "/v1/groups/nope/locks", "{\"clientId\":\"A\",\"topic\":\"T\",\"queueIds\":[0]}",
         404, "GROUP_NOT_FOUND"},
        {"POST", "/v1/groups/bad.g/locks", "{\"clientId\":\"A\",\"topic\":\"T\",\"queueIds\":[0]}",
         400, "INVALID_NAME"},
        {"DELETE", "/v1/groups/g/locks", "{\"clientId\":\"A\",\"topic\":\"T\",\"queueIds\":[8]}",
         400, "INVALID_FIELD"},
        {"DELETE", "/v1/groups/g/locks",
         "{\"clientId\":\"A\",\"topic\":\"Nope\",\"queueIds\":[0]}", 404, "TOPIC_NOT_FOUND"},
        {"DELETE", "/v1/groups/g/locks", "{}", 400, "INVALID_FIELD"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        e2e_expect_error(f, cases[i].method, cases[i].path, E2E_JSON, cases[i].body,
                         cases[i].status, cases[i].code);
    }
    e2e_expect_error(f, "POST", "/v1/groups/g/locks", "text/plain",
                     "{\"clientId\":\"A\",\"topic\":\"T\",\"queueIds\":[0]}", 415,
                     "UNSUPPORTED_MEDIA_TYPE");
    assert_int_equal(e2e_stop(&f->srv), 0);
}

static void test_rebalance_bad_heartbeats_are_rejected(void **state) {
    E2eCase *f = *state;
    start(f);
    char many[8192];
    size_t len = (size_t)snprintf(many, sizeof(many), "{\"subscriptions\":[");
    for (int i = 0; i < 65; i++) {
        len += (size_t)snprintf(many + len, sizeof(many) - len, "%s{\"topic\":\"t%d\"}",
                                i ? "," : "", i);
    }
    snprintf(many + len, sizeof(many) - len, "]}");
    char long_id[300];
    memset(long_id, 'x', 256);
    long_id[256] = '\0';
    char long_path[400];
    snprintf(long_path, sizeof(long_path), "/v1/groups/g/consumers/%s/heartbeat", long_id);
    const char *hbp = "/v1/groups/g/consumers/c1/heartbeat";
    static const char *const sub = "{\"subscriptions\":[{\"topic\":\"T\"}]}";
    const struct {
        const char *path;
        const char *ct;
        const char *body;
        long status;
        const char *code;
        const char *needle;
    } cases[] = {
        {hbp, E2E_JSON, "{}", 400, "INVALID_FIELD", "subscriptions"},
        {hbp, E2E_JSON, "{\"subscriptions\":{}}", 400, "INVALID_FIELD", "subscriptions"},
        {hbp, E2E_JSON, "{\"subscriptions\":[1]}", 400, "INVALID_FIELD", "subscriptions[0]"},
        {hbp, E2E_JSON, "{\"subscriptions\":[{}]}", 400, "INVALID_FIELD", "topic"},
        {hbp, E2E_JSON, "{\"subscriptions\":[{\"topic\":\"T\"}],\"strategy\":\"RANDOM\"}", 400,
         "INVALID_FIELD", "strategy"},
        {hbp, E2E_JSON, "{\"subscriptions\":[{\"topic\":\"T\"}],\"strategy\":\"avg\"}", 400,
         "INVALID_FIELD", "strategy"},
        {hbp, E2E_JSON, "{\"subscriptions\":[{\"topic\":\"T\"}],\"strategy\":1}", 400,
         "INVALID_FIELD", "strategy"},
        {hbp, E2E_JSON,
         "{\"subscriptions\":[{\"topic\":\"T\",\"type\":\"SQL92\",\"expression\":\"a >\"}]}",
         400, "INVALID_FILTER", "position 3"},
        {hbp, E2E_JSON,
         "{\"subscriptions\":[{\"topic\":\"T\",\"type\":\"SQL92\",\"expression\":\"a = 'x\"}]}",
         400, "INVALID_FILTER", "position "},
        {hbp, E2E_JSON, "{\"subscriptions\":[{\"topic\":\"T\",\"expression\":\"A ||\"}]}", 400,
         "INVALID_FILTER", "position "},
        {hbp, E2E_JSON, "{\"subscriptions\":[{\"topic\":\"T\",\"type\":\"XML\"}]}", 400,
         "INVALID_FIELD", "type"},
        {hbp, E2E_JSON, "{\"subscriptions\":[{\"topic\":\"T\",\"expression\":7}]}", 400,
         "INVALID_FIELD", "expression"},
        {hbp, E2E_JSON, "{\"subscriptions\":[{\"topic\":\"b.d\"}]}", 400, "INVALID_NAME",
         "subscriptions[0].topic"},
        {hbp, E2E_JSON, "{\"subscriptions\":[{\"topic\":\"%RETRY%g\"}]}", 400, "INVALID_NAME",
         NULL},
        {hbp, E2E_JSON, "{\"subscriptions\":[{\"topic\":\"T\"},{\"topic\":\"T\"}]}", 400,
         "INVALID_FIELD", "subscriptions[1]"},
        {hbp, E2E_JSON, "{\"subscriptions\":[{\"topic\":\"T\",\"queueIds\":[1]}]}", 400,
         "INVALID_FIELD", "CONFIG"},
        {hbp, E2E_JSON, "{\"subscriptions\":[{\"topic\":\"T\"}],\"strategy\":\"CONFIG\"}", 400,
         "INVALID_FIELD", "CONFIG"},
        {hbp, E2E_JSON,
         "{\"subscriptions\":[{\"topic\":\"T\",\"queueIds\":[1024]}],\"strategy\":\"CONFIG\"}",
         400, "INVALID_FIELD", "queueIds[0]"},
        {hbp, E2E_JSON, "{\"subscriptions\":[{\"topic\":\"T\",\"tags\":\"x\"}]}", 400,
         "UNKNOWN_FIELD", "tags"},
        {hbp, E2E_JSON, "{\"subscriptions\":[],\"clientId\":\"c1\"}", 400, "UNKNOWN_FIELD",
         NULL},
        {hbp, E2E_JSON, many, 400, "INVALID_FIELD", "at most 64"},
        {hbp, E2E_JSON, "{\"subscriptions\":[", 400, "INVALID_JSON", NULL},
        {hbp, E2E_JSON, "[]", 400, "INVALID_JSON", NULL},
        {hbp, E2E_JSON, "", 400, "INVALID_JSON", NULL},
        {hbp, "text/plain", sub, 415, "UNSUPPORTED_MEDIA_TYPE", NULL},
        {"/v1/groups/g/consumers/a%20b/heartbeat", E2E_JSON, sub, 400, "INVALID_PARAMETER",
         "clientId"},
        {long_path, E2E_JSON, sub, 400, "INVALID_PARAMETER", "clientId"},
        {"/v1/groups/bad.g/consumers/c1/heartbeat", E2E_JSON, sub, 400, "INVALID_NAME", NULL},
        {"/v1/groups/%25DLQ%25g/consumers/c1/heartbeat", E2E_JSON, sub, 400, "INVALID_NAME",
         NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        E2eResponse r;
        assert_int_equal(e2e_send(&f->srv, "POST", cases[i].path, cases[i].ct, cases[i].body,
                                  &r), 0);
        json_t *root = e2e_json(&r);
        json_t *err = json_object_get(root, "error");
        const char *code = e2e_str(err, "code");
        const char *msg = e2e_str(err, "message");
        bool ok = r.status == cases[i].status && code && strcmp(code, cases[i].code) == 0 &&
                  msg && (!cases[i].needle || strstr(msg, cases[i].needle));
        if (!ok) {
            fprintf(stderr, "case %zu %s %.80s: %ld %.*s\n", i, cases[i].path, cases[i].body,
                    r.status, (int)r.len, r.body);
        }
        assert_true(ok);
        assert_int_equal(e2e_num(err, "status"), cases[i].status);
        json_decref(root);
        e2e_response_free(&r);
    }
    /* Nothing was registered, and a rejected heartbeat creates no group. */
    e2e_expect_error(f, "GET", "/v1/groups/g", NULL, NULL, 404, "GROUP_NOT_FOUND");
    /* A maximal client id is fine. */
    long_id[255] = '\0';
    snprintf(long_path, sizeof(long_path), "/v1/groups/g/consumers/%s/heartbeat", long_id);
    json_decref(e2e_call(f, "POST", long_path, E2E_JSON, sub, 200));
    assert_int_equal(e2e_stop(&f->srv), 0);
}

static void test_rebalance_unknown_group_without_auto_create_is_404(void **state) {
    E2eCase *f = *state;
    static const char *const extra[] = {"--autoCreateSubscriptionGroup=false", NULL};
    e2e_case_start(f, extra);
    e2e_create_topic(f, "T", 8);
    const char *sub = "{\"subscriptions\":[{\"topic\":\"T\"}]}";
    e2e_expect_error(f, "POST", "/v1/groups/g/consumers/c1/heartbeat", E2E_JSON, sub, 404,
                     "GROUP_NOT_FOUND");
    e2e_expect_error(f, "GET", "/v1/groups/g", NULL, NULL, 404, "GROUP_NOT_FOUND");
    json_decref(e2e_call(f, "PUT", "/v1/groups/g", E2E_JSON, "{}", 201));
    json_t *a = e2e_call(f, "POST", "/v1/groups/g/consumers/c1/heartbeat", E2E_JSON, sub, 200);
    assert_int_equal(mask_of(a, "T"), ALL8);
    json_decref(a);
    assert_int_equal(e2e_stop(&f->srv), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_rebalance_avg_splits_queues_and_reassigns_after_expiry,
                                        setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_rebalance_circle_and_consistent_hash_cover_all_queues,
                                        setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_rebalance_config_and_broadcast, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_rebalance_topics_that_do_not_exist_yet, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_rebalance_locks_lease_and_unlock, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_rebalance_bad_heartbeats_are_rejected, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_rebalance_unknown_group_without_auto_create_is_404,
                                        setup, e2e_case_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
