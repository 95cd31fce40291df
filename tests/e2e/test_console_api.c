/*
 * test_console_api.c - end-to-end tests of the endpoints the console and
 * `petrel admin` read, against a real petrel: the traffic series (GET
 * /v1/broker/rates), delayed messages per level (GET /v1/delays), the
 * cluster view (GET /v1/cluster), a topic's route and readers (GET
 * /v1/topics/{t}, GET /v1/topics/{t}/groups), groups with their lag (GET
 * /v1/groups?lag=true) and a message's track (GET
 * /v1/messages/{id}/track), with their error answers.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2e.h"

static int setup(void **state) {
    return e2e_case_setup(state, "e2e-console-api");
}

/* Produces one JSON message 'body' (extra JSON fields in 'more', may be
 * "") to 'topic' and returns its msgId (static buffer of the caller). */
static void produce(E2eCase *f, const char *topic, const char *more, char id[64]) {
    char path[256], body[256];
    snprintf(path, sizeof(path), "/v1/topics/%s/messages", topic);
    snprintf(body, sizeof(body), "{\"body\":\"0123456789\",\"queueId\":0%s}", more);
    json_t *r = e2e_call(f, "POST", path, E2E_JSON, body, 200);
    if (id) snprintf(id, 64, "%s", e2e_str(r, "msgId"));
    json_decref(r);
}

/* Sums field 'k' over the samples of a rates answer. */
static long long sum_samples(const json_t *rates, const char *k) {
    long long sum = 0;
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(rates, "samples"), i, s) sum += e2e_num(s, k);
    return sum;
}

static void test_rates_count_produce_and_consume_per_second(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    e2e_create_topic(f, "RateT", 1);
    for (int i = 0; i < 25; i++) produce(f, "RateT", "", NULL);
    json_t *got = e2e_call(f, "POST", "/v1/groups/RateG/receive", E2E_JSON,
                           "{\"topic\":\"RateT\",\"maxMessages\":10,\"waitMs\":0}", 200);
    assert_int_equal(json_array_size(json_object_get(got, "messages")), 10);
    json_decref(got);
    /* Samples close on whole seconds: within ~2 s every message is in one. */
    json_t *r = NULL;
    for (int tries = 0; tries < 40; tries++) {
        json_decref(r);
        r = e2e_call(f, "GET", "/v1/broker/rates", NULL, NULL, 200);
        if (sum_samples(r, "messagesIn") == 25 && sum_samples(r, "messagesOut") == 10) break;
        e2e_sleep_ms(100);
    }
    assert_int_equal(sum_samples(r, "messagesIn"), 25);
    assert_int_equal(sum_samples(r, "bytesIn"), 250);
    assert_int_equal(sum_samples(r, "messagesOut"), 10);
    assert_int_equal(sum_samples(r, "bytesOut"), 100);
    assert_int_equal(e2e_num(r, "intervalMs"), 1000);
    assert_int_equal(e2e_num(r, "capacity"), 600);
    json_t *samples = json_object_get(r, "samples");
    size_t n = json_array_size(samples);
    assert_true(n >= 1 && n <= 600);
    long long prev = 0;
    size_t i;
    json_t *s;
    json_array_foreach(samples, i, s) {
        long long ts = e2e_num(s, "timestamp");
        assert_true(ts % 1000 == 0 && ts > prev && ts <= e2e_num(r, "now"));
        prev = ts;
    }
    /* ?since= returns only the newer samples: the last one's time gives none. */
    char path[128];
    snprintf(path, sizeof(path), "/v1/broker/rates?since=%lld", prev);
    json_t *none = e2e_call(f, "GET", path, NULL, NULL, 200);
    size_t later = json_array_size(json_object_get(none, "samples"));
    assert_true(later <= 1); /* one more second may have closed meanwhile */
    json_decref(none);
    snprintf(path, sizeof(path), "/v1/broker/rates?since=%lld", prev - 1);
    json_t *one = e2e_call(f, "GET", path, NULL, NULL, 200);
    assert_true(json_array_size(json_object_get(one, "samples")) >= 1);
    assert_int_equal(e2e_num(json_array_get(json_object_get(one, "samples"), 0), "timestamp"),
                     prev);
    json_decref(one);
    json_decref(r);
    e2e_expect_error(f, "GET", "/v1/broker/rates?since=-5", NULL, NULL, 400, "INVALID_PARAMETER");
    e2e_expect_error(f, "GET", "/v1/broker/rates?since=abc", NULL, NULL, 400,
                     "INVALID_PARAMETER");
    e2e_expect_error(f, "GET", "/v1/broker/rates?limit=3", NULL, NULL, 400, "INVALID_PARAMETER");
}

static void test_delays_count_waiting_messages_per_level_and_timer(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    e2e_create_topic(f, "DelayT", 1);
    produce(f, "DelayT", ",\"delayLevel\":3", NULL);
    produce(f, "DelayT", ",\"delayLevel\":3", NULL);
    produce(f, "DelayT", ",\"delayLevel\":18", NULL);
    produce(f, "DelayT", ",\"delayMs\":600000", NULL);
    json_t *d = NULL;
    for (int tries = 0; tries < 50; tries++) { /* dispatch is asynchronous */
        json_decref(d);
        d = e2e_call(f, "GET", "/v1/delays", NULL, NULL, 200);
        if (e2e_num(d, "totalPending") == 4) break;
        e2e_sleep_ms(50);
    }
    json_t *levels = json_object_get(d, "levels");
    assert_int_equal(json_array_size(levels), 18);
    json_t *l1 = json_array_get(levels, 0);
    assert_int_equal(e2e_num(l1, "level"), 1);
    assert_string_equal(e2e_str(l1, "delay"), "1s");
    assert_int_equal(e2e_num(l1, "delayMs"), 1000);
    assert_int_equal(e2e_num(l1, "pending"), 0);
    assert_int_equal(e2e_num(json_array_get(levels, 2), "pending"), 2);
    assert_string_equal(e2e_str(json_array_get(levels, 2), "delay"), "10s");
    assert_int_equal(e2e_num(json_array_get(levels, 17), "pending"), 1);
    assert_string_equal(e2e_str(json_array_get(levels, 17), "delay"), "2h");
    assert_int_equal(e2e_num(json_object_get(d, "timer"), "pending"), 1);
    assert_int_equal(e2e_num(d, "totalPending"), 4);
    json_decref(d);
    e2e_expect_error(f, "GET", "/v1/delays?level=3", NULL, NULL, 400, "INVALID_PARAMETER");
}

static void test_cluster_and_route_name_this_broker(void **state) {
    E2eCase *f = *state;
    const char *extra[] = {"--brokerName=console-b", "--brokerClusterName=C9", NULL};
    e2e_case_start(f, extra);
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", f->srv.port);
    e2e_create_topic(f, "RouteT", 3);
    for (int i = 0; i < 20; i++) produce(f, "RouteT", "", NULL);
    json_t *c = NULL;
    json_t *b = NULL;
    for (int tries = 0; tries < 40; tries++) { /* the rate needs a closed second */
        json_decref(c);
        c = e2e_call(f, "GET", "/v1/cluster", NULL, NULL, 200);
        json_t *cl = json_array_get(json_object_get(c, "clusters"), 0);
        json_t *g = json_array_get(json_object_get(cl, "brokerGroups"), 0);
        b = json_array_get(json_object_get(g, "brokers"), 0);
        assert_string_equal(e2e_str(cl, "clusterName"), "C9");
        assert_string_equal(e2e_str(g, "brokerName"), "console-b");
        if (json_real_value(json_object_get(b, "produceTps")) > 0) break;
        e2e_sleep_ms(100);
    }
    assert_int_equal(e2e_num(b, "brokerId"), 0);
    assert_string_equal(e2e_str(b, "role"), "ASYNC_MASTER");
    assert_string_equal(e2e_str(b, "address"), addr);
    assert_non_null(e2e_str(b, "version"));
    assert_true(llabs(e2e_num(b, "lastHeartbeat") - e2e_wall_ms()) < 5000);
    double tps = json_real_value(json_object_get(b, "produceTps"));
    assert_true(tps >= 1.0 && tps <= 20.0); /* 20 messages over at most 10 s */
    assert_true(json_is_real(json_object_get(b, "consumeTps")));
    json_decref(c);

    json_t *t = e2e_call(f, "GET", "/v1/topics/RouteT", NULL, NULL, 200);
    json_t *route = json_object_get(t, "route");
    json_t *bd = json_array_get(json_object_get(route, "brokerDatas"), 0);
    assert_string_equal(e2e_str(bd, "cluster"), "C9");
    assert_string_equal(e2e_str(bd, "brokerName"), "console-b");
    assert_string_equal(e2e_str(json_object_get(bd, "brokerAddrs"), "0"), addr);
    json_t *qd = json_array_get(json_object_get(route, "queueDatas"), 0);
    assert_int_equal(e2e_num(qd, "readQueueNums"), 3);
    assert_int_equal(e2e_num(qd, "writeQueueNums"), 3);
    assert_string_equal(e2e_str(qd, "perm"), "RW");
    json_decref(t);
    e2e_expect_error(f, "GET", "/v1/cluster?x=1", NULL, NULL, 400, "INVALID_PARAMETER");
}

/* The track type of 'group' in a track answer, or NULL when not listed. */
static const char *track_of(const json_t *tr, const char *group) {
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(tr, "tracks"), i, t) {
        if (strcmp(e2e_str(t, "group"), group) == 0) return e2e_str(t, "trackType");
    }
    return NULL;
}

static json_t *group_in(json_t *arr, const char *key, const char *name) {
    size_t i;
    json_t *g;
    json_array_foreach(arr, i, g) if (strcmp(e2e_str(g, key), name) == 0) return g;
    return NULL;
}

/* Three messages; group Pop received two and acked the second; group Off
 * committed offset 2 through the offsets API; group Idle reads another
 * topic.  Readers, lags and each message's track follow. */
static void test_readers_lag_and_track(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    e2e_create_topic(f, "TrackT", 1);
    e2e_create_topic(f, "OtherT", 1);
    char id[3][64];
    for (int i = 0; i < 3; i++) produce(f, "TrackT", "", id[i]);
    produce(f, "OtherT", "", NULL);
    e2e_wait_queue(f, "TrackT", 0, 3);
    json_t *got = e2e_call(f, "POST", "/v1/groups/Pop/receive", E2E_JSON,
                           "{\"topic\":\"TrackT\",\"maxMessages\":2,\"waitMs\":0,"
                           "\"clientId\":\"c-1\"}",
                           200);
    json_t *msgs = json_object_get(got, "messages");
    assert_int_equal(json_array_size(msgs), 2);
    char ack[256];
    snprintf(ack, sizeof(ack), "{\"topic\":\"TrackT\",\"receiptHandles\":[\"%s\"]}",
             e2e_str(json_array_get(msgs, 1), "receiptHandle"));
    json_decref(got);
    json_decref(e2e_call(f, "POST", "/v1/groups/Pop/ack", E2E_JSON, ack, 200));
    json_decref(e2e_call(f, "PUT", "/v1/groups/Off/offsets", E2E_JSON,
                         "{\"topic\":\"TrackT\",\"queueId\":0,\"offset\":2}", 200));
    json_decref(e2e_call(f, "PUT", "/v1/groups/Idle/offsets", E2E_JSON,
                         "{\"topic\":\"OtherT\",\"queueId\":0,\"offset\":0}", 200));
    json_decref(e2e_call(f, "PUT", "/v1/groups/Off", E2E_JSON, "{}", 201));
    json_decref(e2e_call(f, "PUT", "/v1/groups/Idle", E2E_JSON, "{}", 201));
    json_decref(e2e_call(f, "PUT", "/v1/groups/Empty", E2E_JSON, "{}", 201)); /* reads nothing */

    json_t *rd = e2e_call(f, "GET", "/v1/topics/TrackT/groups", NULL, NULL, 200);
    assert_string_equal(e2e_str(rd, "topic"), "TrackT");
    json_t *arr = json_object_get(rd, "groups");
    assert_int_equal(json_array_size(arr), 2); /* Idle reads OtherT only */
    json_t *pop = group_in(arr, "group", "Pop");
    json_t *off = group_in(arr, "group", "Off");
    assert_non_null(pop);
    assert_non_null(off);
    assert_int_equal(e2e_num(pop, "totalLag"), 3); /* no offset committed below an unacked one */
    assert_int_equal(e2e_num(pop, "inflight"), 1);
    assert_int_equal(e2e_num(pop, "consumerCount"), 1);
    assert_int_equal(e2e_num(off, "totalLag"), 1);
    assert_int_equal(e2e_num(off, "inflight"), 0);
    assert_int_equal(e2e_num(off, "consumerCount"), 0);
    json_decref(rd);

    json_t *gl = e2e_call(f, "GET", "/v1/groups?lag=true", NULL, NULL, 200);
    assert_int_equal(e2e_num(group_in(gl, "name", "Pop"), "totalLag"), 3);
    assert_int_equal(e2e_num(group_in(gl, "name", "Pop"), "consumerCount"), 1);
    assert_int_equal(e2e_num(group_in(gl, "name", "Off"), "totalLag"), 1);
    assert_int_equal(e2e_num(group_in(gl, "name", "Idle"), "totalLag"), 1);
    assert_int_equal(e2e_num(group_in(gl, "name", "Empty"), "totalLag"), 0);
    json_decref(gl);
    gl = e2e_call(f, "GET", "/v1/groups", NULL, NULL, 200);
    assert_null(json_object_get(json_array_get(gl, 0), "totalLag")); /* only when asked */
    json_decref(gl);

    const char *want_pop[3] = {"IN_FLIGHT", "CONSUMED", "NOT_CONSUMED_YET"};
    const char *want_off[3] = {"CONSUMED", "CONSUMED", "NOT_CONSUMED_YET"};
    for (int i = 0; i < 3; i++) {
        char path[160];
        snprintf(path, sizeof(path), "/v1/messages/%s/track", id[i]);
        json_t *tr = e2e_call(f, "GET", path, NULL, NULL, 200);
        assert_string_equal(e2e_str(tr, "msgId"), id[i]);
        assert_string_equal(e2e_str(tr, "topic"), "TrackT");
        assert_int_equal(e2e_num(tr, "queueOffset"), i);
        assert_int_equal(json_array_size(json_object_get(tr, "tracks")), 2);
        assert_string_equal(track_of(tr, "Pop"), want_pop[i]);
        assert_string_equal(track_of(tr, "Off"), want_off[i]);
        assert_null(track_of(tr, "Idle"));
        json_decref(tr);
    }
    e2e_expect_error(f, "GET", "/v1/topics/NoSuch/groups", NULL, NULL, 404, "TOPIC_NOT_FOUND");
    e2e_expect_error(f, "GET", "/v1/topics/bad%20name/groups", NULL, NULL, 400, "INVALID_NAME");
    e2e_expect_error(f, "GET", "/v1/topics/TrackT/groups?x=1", NULL, NULL, 400,
                     "INVALID_PARAMETER");
    e2e_expect_error(f, "GET", "/v1/groups?lag=yes", NULL, NULL, 400, "INVALID_PARAMETER");
    e2e_expect_error(f, "GET", "/v1/groups?foo=1", NULL, NULL, 400, "INVALID_PARAMETER");
    e2e_expect_error(f, "GET", "/v1/messages/xyz/track", NULL, NULL, 400, "INVALID_MSG_ID");
    e2e_expect_error(f, "GET", "/v1/messages/7F00000100001FA300000000FFFFFFFF/track", NULL, NULL,
                     404, "MESSAGE_NOT_FOUND");
}

/* GET /v1/groups/{g} counts the messages of its retry and DLQ topics:
 * null before they exist, then what they store. */
static void test_group_counts_retry_and_dlq_messages(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    e2e_create_topic(f, "DlqT", 1);
    json_decref(e2e_call(f, "PUT", "/v1/groups/DlqG", E2E_JSON, "{\"retryMaxTimes\":0}", 201));
    json_t *g = e2e_call(f, "GET", "/v1/groups/DlqG", NULL, NULL, 200);
    assert_true(json_is_null(json_object_get(g, "retryMessages")));
    assert_true(json_is_null(json_object_get(g, "dlqMessages")));
    json_decref(g);
    produce(f, "DlqT", "", NULL);
    produce(f, "DlqT", "", NULL);
    e2e_wait_queue(f, "DlqT", 0, 2);
    json_t *got = e2e_call(f, "POST", "/v1/groups/DlqG/receive", E2E_JSON,
                           "{\"topic\":\"DlqT\",\"maxMessages\":2,\"waitMs\":0}", 200);
    json_t *msgs = json_object_get(got, "messages");
    assert_int_equal(json_array_size(msgs), 2);
    for (size_t i = 0; i < 2; i++) {
        char nack[256];
        snprintf(nack, sizeof(nack), "{\"topic\":\"DlqT\",\"receiptHandle\":\"%s\"}",
                 e2e_str(json_array_get(msgs, i), "receiptHandle"));
        json_decref(e2e_call(f, "POST", "/v1/groups/DlqG/nack", E2E_JSON, nack, 200));
    }
    json_decref(got);
    for (int tries = 0; tries < 100; tries++) { /* the DLQ copies are dispatched */
        g = e2e_call(f, "GET", "/v1/groups/DlqG", NULL, NULL, 200);
        long long n = e2e_num(g, "dlqMessages");
        json_decref(g);
        if (n == 2) break;
        e2e_sleep_ms(50);
    }
    g = e2e_call(f, "GET", "/v1/groups/DlqG", NULL, NULL, 200);
    assert_int_equal(e2e_num(g, "dlqMessages"), 2);
    assert_true(json_is_null(json_object_get(g, "retryMessages")));
    json_decref(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_rates_count_produce_and_consume_per_second, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_delays_count_waiting_messages_per_level_and_timer,
                                        setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_cluster_and_route_name_this_broker, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_readers_lag_and_track, setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_group_counts_retry_and_dlq_messages, setup,
                                        e2e_case_teardown),
    };
    return cmocka_run_group_tests_name("e2e-console-api", tests, NULL, NULL);
}
