/*
 * test_groups.c - end-to-end tests of consumer-group admin against a real
 * petrel: PUT (create with RocketMQ's defaults, update keeping the fields
 * left out), GET with live consumers, list, DELETE (with its offsets and
 * consumers), groups across a restart, progress and lag after producing
 * and committing offsets, and every validation error with its status and
 * code.  Each case starts its own server in its own temporary directory.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "e2e.h"

static int setup(void **state) {
    return e2e_case_setup(state, "e2e-groups");
}

/* Asserts the settings of group object 'g'. */
static void assert_group(const json_t *g, const char *name, bool consume_enable, bool broadcast,
                         bool orderly, int retry_max, int retry_queues) {
    assert_non_null(g);
    assert_string_equal(e2e_str(g, "name"), name);
    assert_int_equal(json_is_true(json_object_get(g, "consumeEnable")), consume_enable);
    assert_int_equal(json_is_true(json_object_get(g, "broadcast")), broadcast);
    assert_int_equal(json_is_true(json_object_get(g, "orderly")), orderly);
    assert_int_equal(e2e_num(g, "retryMaxTimes"), retry_max);
    assert_int_equal(e2e_num(g, "retryQueueNums"), retry_queues);
    assert_true(e2e_num(g, "createdTimestamp") > 0);
    assert_true(e2e_num(g, "updatedTimestamp") >= e2e_num(g, "createdTimestamp"));
    char buf[160];
    snprintf(buf, sizeof(buf), "%%RETRY%%%s", name);
    assert_string_equal(e2e_str(g, "retryTopic"), buf);
    snprintf(buf, sizeof(buf), "%%DLQ%%%s", name);
    assert_string_equal(e2e_str(g, "dlqTopic"), buf);
}

/* Produces 'n' messages into queue 'q' of 'topic'. */
static void produce(E2eCase *f, const char *topic, int q, int n) {
    char path[256];
    char json[128];
    snprintf(path, sizeof(path), "/v1/topics/%s/messages", topic);
    snprintf(json, sizeof(json), "{\"body\":\"m\",\"queueId\":%d}", q);
    for (int i = 0; i < n; i++) json_decref(e2e_call(f, "POST", path, E2E_JSON, json, 200));
}

/* Asserts queue entry 'q' of a progress "queues" array. */
static void assert_queue(const json_t *queues, int q, long long broker, long long consumer,
                         bool has, long long lag) {
    json_t *e = json_array_get(queues, (size_t)q);
    assert_non_null(e);
    assert_int_equal(e2e_num(e, "queueId"), q);
    assert_int_equal(e2e_num(e, "brokerOffset"), broker);
    assert_int_equal(e2e_num(e, "minOffset"), 0);
    assert_int_equal(e2e_num(e, "consumerOffset"), consumer);
    assert_int_equal(json_is_true(json_object_get(e, "hasOffset")), has);
    assert_int_equal(e2e_num(e, "lag"), lag);
    assert_int_equal(e2e_num(e, "inflight"), 0);
    if (broker > 0) {
        assert_true(e2e_num(e, "lastTimestamp") > 0);
    } else {
        assert_int_equal(e2e_num(e, "lastTimestamp"), 0);
    }
}

/* ---- cases ---------------------------------------------------------------*/

static void test_groups_put_get_list_update_delete(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    json_t *a = e2e_call(f, "GET", "/v1/groups", NULL, NULL, 200);
    assert_true(json_is_array(a));
    assert_int_equal(json_array_size(a), 0);
    json_decref(a);

    /* Created with RocketMQ's defaults (an empty body too). */
    json_t *g = e2e_call(f, "PUT", "/v1/groups/Orders", E2E_JSON, "{}", 201);
    assert_group(g, "Orders", true, false, false, 16, 1);
    json_decref(g);
    g = e2e_call(f, "PUT", "/v1/groups/Alpha", NULL, NULL, 201);
    assert_group(g, "Alpha", true, false, false, 16, 1);
    json_decref(g);
    g = e2e_call(f, "PUT", "/v1/groups/Bcast", E2E_JSON,
                 "{\"consumeEnable\":false,\"broadcast\":true,\"orderly\":true,"
                 "\"retryMaxTimes\":0,\"retryQueueNums\":64}", 201);
    assert_group(g, "Bcast", false, true, true, 0, 64);
    json_decref(g);

    /* Update: only the fields given change; 200. */
    g = e2e_call(f, "PUT", "/v1/groups/Orders", E2E_JSON, "{\"retryMaxTimes\":3,\"orderly\":true}",
                 200);
    assert_group(g, "Orders", true, false, true, 3, 1);
    long long created = e2e_num(g, "createdTimestamp");
    json_decref(g);
    g = e2e_call(f, "PUT", "/v1/groups/Orders", E2E_JSON, "{\"retryMaxTimes\":1000}", 200);
    assert_group(g, "Orders", true, false, true, 1000, 1);
    assert_int_equal(e2e_num(g, "createdTimestamp"), created);
    json_decref(g);

    g = e2e_call(f, "GET", "/v1/groups/Orders", NULL, NULL, 200);
    assert_group(g, "Orders", true, false, true, 1000, 1);
    json_t *cs = json_object_get(g, "consumers");
    assert_true(json_is_array(cs));
    assert_int_equal(json_array_size(cs), 0);
    json_decref(g);

    /* The list, by name, without consumers. */
    a = e2e_call(f, "GET", "/v1/groups", NULL, NULL, 200);
    assert_int_equal(json_array_size(a), 3);
    assert_group(json_array_get(a, 0), "Alpha", true, false, false, 16, 1);
    assert_group(json_array_get(a, 1), "Bcast", false, true, true, 0, 64);
    assert_group(json_array_get(a, 2), "Orders", true, false, true, 1000, 1);
    assert_null(json_object_get(json_array_get(a, 0), "consumers"));
    json_decref(a);

    /* Groups survive a restart. */
    assert_int_equal(e2e_stop(&f->srv), 0);
    e2e_case_start(f, NULL);
    g = e2e_call(f, "GET", "/v1/groups/Orders", NULL, NULL, 200);
    assert_group(g, "Orders", true, false, true, 1000, 1);
    assert_int_equal(e2e_num(g, "createdTimestamp"), created);
    json_decref(g);

    assert_null(e2e_call(f, "DELETE", "/v1/groups/Orders", NULL, NULL, 204));
    e2e_expect_error(f, "GET", "/v1/groups/Orders", NULL, NULL, 404, "GROUP_NOT_FOUND");
    e2e_expect_error(f, "DELETE", "/v1/groups/Orders", NULL, NULL, 404, "GROUP_NOT_FOUND");
    e2e_expect_error(f, "GET", "/v1/groups/Orders/progress", NULL, NULL, 404, "GROUP_NOT_FOUND");
    a = e2e_call(f, "GET", "/v1/groups", NULL, NULL, 200);
    assert_int_equal(json_array_size(a), 2);
    json_decref(a);
    /* Created again: a new group with the defaults. */
    g = e2e_call(f, "PUT", "/v1/groups/Orders", E2E_JSON, "{}", 201);
    assert_group(g, "Orders", true, false, false, 16, 1);
    json_decref(g);
    assert_int_equal(e2e_stop(&f->srv), 0);
}

static void test_groups_get_lists_live_consumers(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    e2e_create_topic(f, "T", 4);
    json_decref(e2e_call(f, "PUT", "/v1/groups/g", E2E_JSON, "{}", 201));
    long long before = e2e_wall_ms();
    json_decref(e2e_call(f, "POST", "/v1/groups/g/consumers/10.0.0.1@42/heartbeat", E2E_JSON,
                         "{\"subscriptions\":[{\"topic\":\"T\",\"type\":\"SQL92\","
                         "\"expression\":\"a > 1\"},{\"topic\":\"U\"}],"
                         "\"strategy\":\"AVG_BY_CIRCLE\"}", 200));
    json_decref(e2e_call(f, "POST", "/v1/groups/g/consumers/c2/heartbeat", E2E_JSON,
                         "{\"subscriptions\":[{\"topic\":\"T\",\"queueIds\":[3,1,1]}],"
                         "\"strategy\":\"CONFIG\"}", 200));
    json_t *g = e2e_call(f, "GET", "/v1/groups/g", NULL, NULL, 200);
    json_t *cs = json_object_get(g, "consumers");
    assert_int_equal(json_array_size(cs), 2);
    json_t *c = json_array_get(cs, 0); /* by client id: "10..." < "c2" */
    assert_string_equal(e2e_str(c, "clientId"), "10.0.0.1@42");
    assert_string_equal(e2e_str(c, "kind"), "PULL");
    assert_string_equal(e2e_str(c, "strategy"), "AVG_BY_CIRCLE");
    assert_true(e2e_num(c, "lastHeartbeat") >= before - 1000);
    json_t *subs = json_object_get(c, "subscriptions");
    assert_int_equal(json_array_size(subs), 2);
    json_t *s = json_array_get(subs, 0);
    json_t *s1 = json_array_get(subs, 1);
    if (strcmp(e2e_str(s, "topic"), "T") != 0) {
        json_t *tmp = s;
        s = s1;
        s1 = tmp;
    }
    assert_string_equal(e2e_str(s, "topic"), "T");
    assert_string_equal(e2e_str(s, "type"), "SQL92");
    assert_string_equal(e2e_str(s, "expression"), "a > 1");
    assert_string_equal(e2e_str(s1, "topic"), "U");
    assert_string_equal(e2e_str(s1, "type"), "TAG");
    assert_string_equal(e2e_str(s1, "expression"), "*");
    c = json_array_get(cs, 1);
    assert_string_equal(e2e_str(c, "clientId"), "c2");
    assert_string_equal(e2e_str(c, "strategy"), "CONFIG");
    s = json_array_get(json_object_get(c, "subscriptions"), 0);
    json_t *qs = json_object_get(s, "queueIds");
    assert_int_equal(json_array_size(qs), 2); /* sorted, without duplicates */
    assert_int_equal(json_integer_value(json_array_get(qs, 0)), 1);
    assert_int_equal(json_integer_value(json_array_get(qs, 1)), 3);
    json_decref(g);

    /* Unregistered: gone from the list. */
    assert_null(e2e_call(f, "DELETE", "/v1/groups/g/consumers/c2", NULL, NULL, 204));
    g = e2e_call(f, "GET", "/v1/groups/g", NULL, NULL, 200);
    assert_int_equal(json_array_size(json_object_get(g, "consumers")), 1);
    json_decref(g);

    /* A deleted group forgets its consumers. */
    assert_null(e2e_call(f, "DELETE", "/v1/groups/g", NULL, NULL, 204));
    json_decref(e2e_call(f, "PUT", "/v1/groups/g", E2E_JSON, "{}", 201));
    g = e2e_call(f, "GET", "/v1/groups/g", NULL, NULL, 200);
    assert_int_equal(json_array_size(json_object_get(g, "consumers")), 0);
    json_decref(g);
    e2e_expect_error(f, "DELETE", "/v1/groups/g/consumers/10.0.0.1@42", NULL, NULL, 404,
                     "CONSUMER_NOT_FOUND");
    assert_int_equal(e2e_stop(&f->srv), 0);
}

static void test_groups_broadcast_group_keeps_no_broker_offsets(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    e2e_create_topic(f, "T", 2);
    json_decref(e2e_call(f, "PUT", "/v1/groups/bc", E2E_JSON, "{\"broadcast\":true}", 201));
    json_t *e = e2e_call(f, "PUT", "/v1/groups/bc/offsets", E2E_JSON,
                         "{\"topic\":\"T\",\"queueId\":0,\"offset\":0}", 409);
    assert_string_equal(e2e_str(json_object_get(e, "error"), "code"), "BROADCAST_GROUP");
    json_decref(e);
    e = e2e_call(f, "POST", "/v1/groups/bc/offsets/reset", E2E_JSON,
                 "{\"topic\":\"T\",\"timestamp\":0}", 409);
    assert_string_equal(e2e_str(json_object_get(e, "error"), "code"), "BROADCAST_GROUP");
    json_decref(e);
    json_t *offs = e2e_call(f, "GET", "/v1/groups/bc/offsets", NULL, NULL, 200);
    assert_int_equal(json_array_size(offs), 0);
    json_decref(offs);
    /* the same group made clustering again accepts offsets */
    json_decref(e2e_call(f, "PUT", "/v1/groups/bc", E2E_JSON, "{\"broadcast\":false}", 200));
    json_decref(e2e_call(f, "PUT", "/v1/groups/bc/offsets", E2E_JSON,
                         "{\"topic\":\"T\",\"queueId\":0,\"offset\":0}", 200));
}

static void test_groups_progress_counts_lag(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    e2e_create_topic(f, "T", 2);
    e2e_create_topic(f, "Other", 1);
    produce(f, "T", 0, 5);
    produce(f, "T", 1, 3);
    e2e_wait_queue(f, "T", 0, 5);
    e2e_wait_queue(f, "T", 1, 3);
    json_decref(e2e_call(f, "PUT", "/v1/groups/g", E2E_JSON, "{}", 201));

    /* No offsets and no consumers: no topics. */
    json_t *p = e2e_call(f, "GET", "/v1/groups/g/progress", NULL, NULL, 200);
    assert_string_equal(e2e_str(p, "group"), "g");
    assert_int_equal(json_array_size(json_object_get(p, "topics")), 0);
    assert_int_equal(e2e_num(p, "totalLag"), 0);
    json_decref(p);

    /* Never committed: every stored message is lag. */
    p = e2e_call(f, "GET", "/v1/groups/g/progress?topic=T", NULL, NULL, 200);
    assert_string_equal(e2e_str(p, "group"), "g");
    assert_string_equal(e2e_str(p, "topic"), "T");
    json_t *qs = json_object_get(p, "queues");
    assert_int_equal(json_array_size(qs), 2);
    assert_queue(qs, 0, 5, 0, false, 5);
    assert_queue(qs, 1, 3, 0, false, 3);
    assert_int_equal(e2e_num(p, "totalLag"), 8);
    json_decref(p);

    /* Committed offsets. */
    json_decref(e2e_call(f, "PUT", "/v1/groups/g/offsets", E2E_JSON,
                         "{\"topic\":\"T\",\"queueId\":0,\"offset\":2}", 200));
    p = e2e_call(f, "GET", "/v1/groups/g/progress?topic=T", NULL, NULL, 200);
    qs = json_object_get(p, "queues");
    assert_queue(qs, 0, 5, 2, true, 3);
    assert_queue(qs, 1, 3, 0, false, 3);
    assert_int_equal(e2e_num(p, "totalLag"), 6);
    json_decref(p);
    json_decref(e2e_call(f, "PUT", "/v1/groups/g/offsets", E2E_JSON,
                         "{\"offsets\":[{\"topic\":\"T\",\"queueId\":1,\"offset\":3},"
                         "{\"topic\":\"Other\",\"queueId\":0,\"offset\":0}]}", 200));
    produce(f, "T", 1, 2);
    e2e_wait_queue(f, "T", 1, 5);

    /* Every topic with offsets, by name. */
    p = e2e_call(f, "GET", "/v1/groups/g/progress", NULL, NULL, 200);
    json_t *ts = json_object_get(p, "topics");
    assert_int_equal(json_array_size(ts), 2);
    json_t *t0 = json_array_get(ts, 0);
    assert_string_equal(e2e_str(t0, "topic"), "Other");
    assert_int_equal(json_array_size(json_object_get(t0, "queues")), 1);
    assert_queue(json_object_get(t0, "queues"), 0, 0, 0, true, 0);
    assert_int_equal(e2e_num(t0, "totalLag"), 0);
    json_t *t1 = json_array_get(ts, 1);
    assert_string_equal(e2e_str(t1, "topic"), "T");
    assert_queue(json_object_get(t1, "queues"), 0, 5, 2, true, 3);
    assert_queue(json_object_get(t1, "queues"), 1, 5, 3, true, 2);
    assert_int_equal(e2e_num(t1, "totalLag"), 5);
    assert_int_equal(e2e_num(p, "totalLag"), 5);
    json_decref(p);

    /* Another group is independent; a topic a live consumer subscribes to
     * is listed without offsets. */
    json_decref(e2e_call(f, "PUT", "/v1/groups/h", E2E_JSON, "{}", 201));
    json_decref(e2e_call(f, "POST", "/v1/groups/h/consumers/c1/heartbeat", E2E_JSON,
                         "{\"subscriptions\":[{\"topic\":\"T\"},{\"topic\":\"NotYet\"}]}", 200));
    p = e2e_call(f, "GET", "/v1/groups/h/progress", NULL, NULL, 200);
    ts = json_object_get(p, "topics");
    assert_int_equal(json_array_size(ts), 1); /* NotYet does not exist */
    assert_string_equal(e2e_str(json_array_get(ts, 0), "topic"), "T");
    assert_int_equal(e2e_num(p, "totalLag"), 10);
    json_decref(p);

    /* Deleting the group drops its offsets. */
    assert_null(e2e_call(f, "DELETE", "/v1/groups/g", NULL, NULL, 204));
    e2e_expect_error(f, "GET", "/v1/groups/g/progress?topic=T", NULL, NULL, 404,
                     "GROUP_NOT_FOUND");
    json_t *a = e2e_call(f, "GET", "/v1/groups/g/offsets", NULL, NULL, 200);
    assert_int_equal(json_array_size(a), 0);
    json_decref(a);
    assert_int_equal(e2e_stop(&f->srv), 0);
}

static void test_groups_progress_and_consumers_of_receive(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    e2e_create_topic(f, "T", 1);
    produce(f, "T", 0, 3);
    e2e_wait_queue(f, "T", 0, 3);
    /* The receive auto-creates the group; its client id makes a POP
     * consumer. */
    json_t *got = e2e_call(f, "POST", "/v1/groups/g/receive", E2E_JSON,
                           "{\"topic\":\"T\",\"maxMessages\":2,\"waitMs\":0,"
                           "\"clientId\":\"pc1\"}", 200);
    json_t *msgs = json_object_get(got, "messages");
    assert_int_equal(json_array_size(msgs), 2);
    json_t *g = e2e_call(f, "GET", "/v1/groups/g", NULL, NULL, 200);
    json_t *c = json_array_get(json_object_get(g, "consumers"), 0);
    assert_string_equal(e2e_str(c, "clientId"), "pc1");
    assert_string_equal(e2e_str(c, "kind"), "POP");
    assert_true(json_is_null(json_object_get(c, "strategy")));
    json_t *s = json_array_get(json_object_get(c, "subscriptions"), 0);
    assert_string_equal(e2e_str(s, "topic"), "T");
    assert_null(json_object_get(s, "expression"));
    json_decref(g);

    /* In flight: still lag until acked. */
    json_t *p = e2e_call(f, "GET", "/v1/groups/g/progress?topic=T", NULL, NULL, 200);
    json_t *q = json_array_get(json_object_get(p, "queues"), 0);
    assert_int_equal(e2e_num(q, "inflight"), 2);
    assert_int_equal(e2e_num(q, "lag"), 3);
    json_decref(p);
    json_t *handles = json_array();
    for (size_t i = 0; i < 2; i++) {
        json_array_append_new(handles,
                              json_string(e2e_str(json_array_get(msgs, i), "receiptHandle")));
    }
    json_t *ack = json_pack("{s:s, s:o}", "topic", "T", "receiptHandles", handles);
    char *body = json_dumps(ack, JSON_COMPACT);
    json_decref(e2e_call(f, "POST", "/v1/groups/g/ack", E2E_JSON, body, 200));
    free(body);
    json_decref(ack);
    json_decref(got);
    p = e2e_call(f, "GET", "/v1/groups/g/progress", NULL, NULL, 200);
    json_t *t = json_array_get(json_object_get(p, "topics"), 0);
    assert_string_equal(e2e_str(t, "topic"), "T");
    q = json_array_get(json_object_get(t, "queues"), 0);
    assert_int_equal(e2e_num(q, "inflight"), 0);
    assert_int_equal(e2e_num(q, "consumerOffset"), 2);
    assert_true(json_is_true(json_object_get(q, "hasOffset")));
    assert_int_equal(e2e_num(q, "lag"), 1);
    assert_int_equal(e2e_num(p, "totalLag"), 1);
    json_decref(p);
    assert_int_equal(e2e_stop(&f->srv), 0);
}

/* Sends the request and asserts the error, and that its message holds
 * 'needle' (NULL: not checked). */
static void expect_error_msg(E2eCase *f, const char *method, const char *path, const char *ct,
                             const char *body, long status, const char *code,
                             const char *needle) {
    e2e_expect_error(f, method, path, ct, body, status, code);
    if (!needle) return;
    E2eResponse r;
    assert_int_equal(e2e_send(&f->srv, method, path, ct, body, &r), 0);
    json_t *root = e2e_json(&r);
    const char *msg = json_string_value(json_object_get(json_object_get(root, "error"),
                                                        "message"));
    if (!msg || !strstr(msg, needle)) fprintf(stderr, "message: %s\n", msg ? msg : "(none)");
    assert_non_null(msg);
    assert_non_null(strstr(msg, needle));
    json_decref(root);
    e2e_response_free(&r);
}

static void test_groups_bad_requests_are_rejected(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    e2e_create_topic(f, "T", 2);
    json_decref(e2e_call(f, "PUT", "/v1/groups/g", E2E_JSON, "{}", 201));
    static const struct {
        const char *method;
        const char *path;
        const char *ct;
        const char *body;
        long status;
        const char *code;
        const char *needle; /* in the message, or NULL */
    } cases[] = {
        {"PUT", "/v1/groups/bad.name", E2E_JSON, "{}", 400, "INVALID_NAME", NULL},
        {"PUT", "/v1/groups/%25RETRY%25g", E2E_JSON, "{}", 400, "INVALID_NAME", NULL},
        {"PUT", "/v1/groups/RMQ_SYS_x", E2E_JSON, "{}", 400, "INVALID_NAME", NULL},
        {"PUT", "/v1/groups/g", E2E_JSON, "{\"bogus\":1}", 400, "UNKNOWN_FIELD", "bogus"},
        {"PUT", "/v1/groups/g", E2E_JSON, "{\"queues\":1}", 400, "UNKNOWN_FIELD", NULL},
        {"PUT", "/v1/groups/g", E2E_JSON, "{\"consumeEnable\":\"yes\"}", 400, "INVALID_FIELD",
         "boolean"},
        {"PUT", "/v1/groups/g", E2E_JSON, "{\"broadcast\":1}", 400, "INVALID_FIELD", NULL},
        {"PUT", "/v1/groups/g", E2E_JSON, "{\"orderly\":null}", 400, "INVALID_FIELD", NULL},
        {"PUT", "/v1/groups/g", E2E_JSON, "{\"retryMaxTimes\":-1}", 400, "INVALID_FIELD",
         "from 0 to 1000"},
        {"PUT", "/v1/groups/g", E2E_JSON, "{\"retryMaxTimes\":1001}", 400, "INVALID_FIELD",
         "from 0 to 1000"},
        {"PUT", "/v1/groups/g", E2E_JSON, "{\"retryMaxTimes\":1.5}", 400, "INVALID_FIELD", NULL},
        {"PUT", "/v1/groups/g", E2E_JSON, "{\"retryMaxTimes\":\"3\"}", 400, "INVALID_FIELD",
         NULL},
        {"PUT", "/v1/groups/g", E2E_JSON, "{\"retryQueueNums\":0}", 400, "INVALID_FIELD",
         "from 1 to 64"},
        {"PUT", "/v1/groups/g", E2E_JSON, "{\"retryQueueNums\":65}", 400, "INVALID_FIELD",
         "from 1 to 64"},
        {"PUT", "/v1/groups/g", E2E_JSON, "{\"retryMaxTimes\":99999999999999999999}", 400,
         "INVALID_JSON", NULL},
        {"PUT", "/v1/groups/g", E2E_JSON, "{\"orderly\":true,\"orderly\":false}", 400,
         "INVALID_JSON", NULL},
        {"PUT", "/v1/groups/g", E2E_JSON, "{", 400, "INVALID_JSON", NULL},
        {"PUT", "/v1/groups/g", E2E_JSON, "[]", 400, "INVALID_JSON", NULL},
        {"PUT", "/v1/groups/g", "text/plain", "{}", 415, "UNSUPPORTED_MEDIA_TYPE", NULL},
        {"GET", "/v1/groups/nope", NULL, NULL, 404, "GROUP_NOT_FOUND", NULL},
        {"GET", "/v1/groups/bad.name", NULL, NULL, 400, "INVALID_NAME", NULL},
        {"DELETE", "/v1/groups/nope", NULL, NULL, 404, "GROUP_NOT_FOUND", NULL},
        {"DELETE", "/v1/groups/bad.name", NULL, NULL, 400, "INVALID_NAME", NULL},
        {"GET", "/v1/groups/nope/progress", NULL, NULL, 404, "GROUP_NOT_FOUND", NULL},
        {"GET", "/v1/groups/nope/progress?topic=T", NULL, NULL, 404, "GROUP_NOT_FOUND", NULL},
        {"GET", "/v1/groups/g/progress?topic=Nope", NULL, NULL, 404, "TOPIC_NOT_FOUND", NULL},
        {"GET", "/v1/groups/g/progress?topic=bad.topic", NULL, NULL, 400, "INVALID_NAME", NULL},
        {"GET", "/v1/groups/g/progress?topic=T&x=1", NULL, NULL, 400, "INVALID_PARAMETER", NULL},
        {"GET", "/v1/groups/bad.name/progress", NULL, NULL, 400, "INVALID_NAME", NULL},
        {"POST", "/v1/groups", E2E_JSON, "{}", 405, "METHOD_NOT_ALLOWED", NULL},
        {"POST", "/v1/groups/g", E2E_JSON, "{}", 405, "METHOD_NOT_ALLOWED", NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        expect_error_msg(f, cases[i].method, cases[i].path, cases[i].ct, cases[i].body,
                         cases[i].status, cases[i].code, cases[i].needle);
    }
    /* Nothing of it changed the group or made another one. */
    json_t *a = e2e_call(f, "GET", "/v1/groups", NULL, NULL, 200);
    assert_int_equal(json_array_size(a), 1);
    assert_group(json_array_get(a, 0), "g", true, false, false, 16, 1);
    json_decref(a);
    assert_int_equal(e2e_stop(&f->srv), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_groups_put_get_list_update_delete, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_groups_get_lists_live_consumers, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_groups_broadcast_group_keeps_no_broker_offsets,
                                        setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_groups_progress_counts_lag, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_groups_progress_and_consumers_of_receive, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_groups_bad_requests_are_rejected, setup,
                                        e2e_case_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
