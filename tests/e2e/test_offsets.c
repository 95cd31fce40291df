/*
 * test_offsets.c - end-to-end tests of broker-kept consumer offsets against
 * a real petrel: get, set (single and batch), reset by timestamp, offsets
 * across a clean restart, offsets dropped with their topic, and every
 * validation error with its status and code.
 * Each case starts its own server in its own temporary directory.
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
    return e2e_case_setup(state, "e2e-offsets");
}

/* Produces one message with 'body' into queue 'q' of 'topic'. */
static void produce(E2eCase *f, const char *topic, int q, const char *body) {
    char path[256];
    char json[256];
    snprintf(path, sizeof(path), "/v1/topics/%s/messages", topic);
    snprintf(json, sizeof(json), "{\"body\":\"%s\",\"queueId\":%d}", body, q);
    json_decref(e2e_call(f, "POST", path, E2E_JSON, json, 200));
}

/* Asserts that entry 'i' of the offsets array 'arr' is (topic, q, off). */
static void assert_entry(const json_t *arr, size_t i, const char *topic, int q, long long off) {
    json_t *e = json_array_get(arr, i);
    assert_non_null(e);
    assert_int_equal(json_object_size(e), 3);
    assert_string_equal(json_string_value(json_object_get(e, "topic")), topic);
    assert_int_equal(e2e_num(e, "queueId"), q);
    assert_int_equal(e2e_num(e, "offset"), off);
}

/* Two topics: "T" with 2 queues (3 and 2 messages), "A" with 1 (1 message). */
static void make_topics(E2eCase *f) {
    json_decref(e2e_call(f, "PUT", "/v1/topics/T", E2E_JSON, "{\"queues\":2}", 201));
    json_decref(e2e_call(f, "PUT", "/v1/topics/A", E2E_JSON, "{\"queues\":1}", 201));
    for (int i = 0; i < 3; i++) produce(f, "T", 0, "t0");
    for (int i = 0; i < 2; i++) produce(f, "T", 1, "t1");
    produce(f, "A", 0, "a0");
    e2e_wait_queue(f, "T", 0, 3);
    e2e_wait_queue(f, "T", 1, 2);
    e2e_wait_queue(f, "A", 0, 1);
}

/* ---- cases ---------------------------------------------------------------*/

static void test_offsets_set_single_and_batch_then_get(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    make_topics(f);
    json_t *a = e2e_call(f, "GET", "/v1/groups/g1/offsets", NULL, NULL, 200);
    assert_true(json_is_array(a));
    assert_int_equal(json_array_size(a), 0);
    json_decref(a);

    a = e2e_call(f, "PUT", "/v1/groups/g1/offsets", E2E_JSON,
                 "{\"topic\":\"T\",\"queueId\":1,\"offset\":1}", 200);
    assert_int_equal(json_array_size(a), 1);
    assert_entry(a, 0, "T", 1, 1);
    json_decref(a);

    a = e2e_call(f, "PUT", "/v1/groups/g1/offsets", E2E_JSON,
                 "{\"offsets\":[{\"topic\":\"T\",\"queueId\":0,"
                 "\"offset\":3},{\"topic\":\"T\",\"queueId\":1,\"offset\":2},{\"topic\":\"A\","
                 "\"queueId\":0,\"offset\":0}]}",
                 200);
    assert_int_equal(json_array_size(a), 3); /* in request order */
    assert_entry(a, 0, "T", 0, 3);
    assert_entry(a, 1, "T", 1, 2);
    assert_entry(a, 2, "A", 0, 0);
    json_decref(a);

    /* All topics, by topic then queue; then one topic. */
    a = e2e_call(f, "GET", "/v1/groups/g1/offsets", NULL, NULL, 200);
    assert_int_equal(json_array_size(a), 3);
    assert_entry(a, 0, "A", 0, 0);
    assert_entry(a, 1, "T", 0, 3);
    assert_entry(a, 2, "T", 1, 2);
    json_decref(a);
    a = e2e_call(f, "GET", "/v1/groups/g1/offsets?topic=T", NULL, NULL, 200);
    assert_int_equal(json_array_size(a), 2);
    assert_entry(a, 0, "T", 0, 3);
    assert_entry(a, 1, "T", 1, 2);
    json_decref(a);

    /* Moving back is allowed; groups are independent. */
    json_decref(e2e_call(f, "PUT", "/v1/groups/g1/offsets", E2E_JSON,
                         "{\"topic\":\"T\",\"queueId\":0,"
                         "\"offset\":0}",
                         200));
    a = e2e_call(f, "GET", "/v1/groups/g1/offsets?topic=T", NULL, NULL, 200);
    assert_entry(a, 0, "T", 0, 0);
    json_decref(a);
    a = e2e_call(f, "GET", "/v1/groups/other-group/offsets", NULL, NULL, 200);
    assert_int_equal(json_array_size(a), 0);
    json_decref(a);
    a = e2e_call(f, "GET", "/v1/groups/g1/offsets?topic=A", NULL, NULL, 200);
    assert_int_equal(json_array_size(a), 1);
    json_decref(a);
    /* A clean exit (under make check, a sanitizer report makes it fail). */
    assert_int_equal(e2e_stop(&f->srv), 0);
}

static void test_offsets_bad_requests_are_rejected(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    make_topics(f);
    static const struct {
        const char *path;
        const char *body;
        long status;
        const char *code;
    } cases[] = {
        {"/v1/groups/bad.name/offsets", "{\"topic\":\"T\",\"queueId\":0,\"offset\":0}", 400,
         "INVALID_NAME"},
        {"/v1/groups/%25RETRY%25g/offsets", "{\"topic\":\"T\",\"queueId\":0,\"offset\":0}", 400,
         "INVALID_NAME"},
        {"/v1/groups/g/offsets", "{\"topic\":\"Nope\",\"queueId\":0,\"offset\":0}", 404,
         "TOPIC_NOT_FOUND"},
        {"/v1/groups/g/offsets", "{\"topic\":\"bad.topic\",\"queueId\":0,\"offset\":0}", 400,
         "INVALID_NAME"},
        {"/v1/groups/g/offsets", "{\"topic\":\"T\",\"queueId\":2,\"offset\":0}", 400,
         "INVALID_FIELD"},
        {"/v1/groups/g/offsets", "{\"topic\":\"T\",\"queueId\":-1,\"offset\":0}", 400,
         "INVALID_FIELD"},
        {"/v1/groups/g/offsets", "{\"topic\":\"T\",\"queueId\":0,\"offset\":-1}", 400,
         "INVALID_FIELD"},
        {"/v1/groups/g/offsets", "{\"topic\":\"T\",\"queueId\":0,\"offset\":4}", 400,
         "INVALID_FIELD"},
        {"/v1/groups/g/offsets", "{\"topic\":\"T\",\"queueId\":0,\"offset\":9223372036854775807}",
         400, "INVALID_FIELD"},
        {"/v1/groups/g/offsets", "{\"topic\":\"T\",\"queueId\":0,\"offset\":99999999999999999999}",
         400, "INVALID_JSON"},
        {"/v1/groups/g/offsets", "{\"topic\":\"T\",\"queueId\":0,\"offset\":1.5}", 400,
         "INVALID_FIELD"},
        {"/v1/groups/g/offsets", "{\"topic\":\"T\",\"queueId\":\"0\",\"offset\":0}", 400,
         "INVALID_FIELD"},
        {"/v1/groups/g/offsets", "{\"topic\":1,\"queueId\":0,\"offset\":0}", 400,
         "INVALID_FIELD"},
        {"/v1/groups/g/offsets", "{\"queueId\":0,\"offset\":0}", 400, "INVALID_FIELD"},
        {"/v1/groups/g/offsets", "{\"topic\":\"T\",\"offset\":0}", 400, "INVALID_FIELD"},
        {"/v1/groups/g/offsets", "{\"topic\":\"T\",\"queueId\":0}", 400, "INVALID_FIELD"},
        {"/v1/groups/g/offsets", "{\"topic\":\"T\",\"queueId\":0,\"offset\":0,\"x\":1}", 400,
         "UNKNOWN_FIELD"},
        {"/v1/groups/g/offsets", "{\"topic\":\"T\",", 400, "INVALID_JSON"},
        {"/v1/groups/g/offsets", "[]", 400, "INVALID_JSON"},
        {"/v1/groups/g/offsets", "", 400, "INVALID_JSON"},
        {"/v1/groups/g/offsets", "{\"offset\":1,\"offset\":2}", 400, "INVALID_JSON"},
        {"/v1/groups/g/offsets", "{\"offsets\":[]}", 400, "INVALID_FIELD"},
        {"/v1/groups/g/offsets", "{\"offsets\":{}}", 400, "INVALID_FIELD"},
        {"/v1/groups/g/offsets", "{\"offsets\":[1]}", 400, "INVALID_FIELD"},
        {"/v1/groups/g/offsets", "{\"offsets\":[],\"topic\":\"T\"}", 400, "UNKNOWN_FIELD"},
        /* One bad entry: nothing of the batch is stored (checked below). */
        {"/v1/groups/g/offsets", "{\"offsets\":[{\"topic\":\"T\",\"queueId\":0,\"offset\":1},"
         "{\"topic\":\"T\",\"queueId\":1,\"offset\":9}]}", 400, "INVALID_FIELD"},
        {"/v1/groups/g/offsets", "{\"offsets\":[{\"topic\":\"T\",\"queueId\":0,\"offset\":1},"
         "{\"topic\":\"T\",\"queueId\":1,\"offset\":0,\"y\":0}]}", 400, "UNKNOWN_FIELD"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        e2e_expect_error(f, "PUT", cases[i].path, E2E_JSON, cases[i].body, cases[i].status,
                     cases[i].code);
    }

    /* A batch over 1000 entries. */
    size_t cap = 1001 * 48 + 32;
    char *big = malloc(cap);
    assert_non_null(big);
    size_t len = (size_t)snprintf(big, cap, "{\"offsets\":[");
    for (int i = 0; i < 1001; i++) {
        len += (size_t)snprintf(big + len, cap - len, "%s{\"topic\":\"T\",\"queueId\":0,"
                                "\"offset\":0}", i ? "," : "");
    }
    snprintf(big + len, cap - len, "]}");
    e2e_expect_error(f, "PUT", "/v1/groups/g/offsets", E2E_JSON, big, 400, "INVALID_FIELD");
    /* Exactly 1000 is fine. */
    char *last = strrchr(big, '{');
    strcpy(last - 1, "]}");
    json_t *a = e2e_call(f, "PUT", "/v1/groups/g/offsets", E2E_JSON, big, 200);
    assert_int_equal(json_array_size(a), 1000);
    json_decref(a);
    free(big);
    json_decref(e2e_call(f, "PUT", "/v1/groups/g/offsets", E2E_JSON,
                         "{\"topic\":\"T\",\"queueId\":0,"
                         "\"offset\":0}",
                         200));

    e2e_expect_error(f, "PUT", "/v1/groups/g/offsets", "text/plain",
                 "{\"topic\":\"T\",\"queueId\":0,\"offset\":0}", 415, "UNSUPPORTED_MEDIA_TYPE");
    e2e_expect_error(f, "GET", "/v1/groups/bad.name/offsets", NULL, NULL, 400, "INVALID_NAME");
    e2e_expect_error(f, "GET", "/v1/groups/g/offsets?topic=Nope", NULL, NULL, 404,
                 "TOPIC_NOT_FOUND");
    e2e_expect_error(f, "GET", "/v1/groups/g/offsets?topic=bad.t", NULL, NULL, 400, "INVALID_NAME");
    e2e_expect_error(f, "GET", "/v1/groups/g/offsets?colour=red", NULL, NULL, 400,
                 "INVALID_PARAMETER");
    e2e_expect_error(f, "DELETE", "/v1/groups/g/offsets", NULL, NULL, 405, "METHOD_NOT_ALLOWED");
    e2e_expect_error(f, "GET", "/v1/groups/g/offsets/reset", NULL, NULL, 405,
                 "METHOD_NOT_ALLOWED");

    static const struct {
        const char *body;
        long status;
        const char *code;
    } resets[] = {
        {"{\"topic\":\"Nope\",\"timestamp\":0}", 404, "TOPIC_NOT_FOUND"},
        {"{\"topic\":\"bad.t\",\"timestamp\":0}", 400, "INVALID_NAME"},
        {"{\"topic\":\"T\"}", 400, "INVALID_FIELD"},
        {"{\"timestamp\":0}", 400, "INVALID_FIELD"},
        {"{\"topic\":\"T\",\"timestamp\":-1}", 400, "INVALID_FIELD"},
        {"{\"topic\":\"T\",\"timestamp\":\"1\"}", 400, "INVALID_FIELD"},
        {"{\"topic\":\"T\",\"timestamp\":1.5}", 400, "INVALID_FIELD"},
        {"{\"topic\":\"T\",\"timestamp\":0,\"queueId\":0}", 400, "UNKNOWN_FIELD"},
        {"{\"topic\":\"T\"", 400, "INVALID_JSON"},
    };
    for (size_t i = 0; i < sizeof(resets) / sizeof(resets[0]); i++) {
        e2e_expect_error(f, "POST", "/v1/groups/g/offsets/reset", E2E_JSON, resets[i].body,
                     resets[i].status, resets[i].code);
    }
    e2e_expect_error(f, "POST", "/v1/groups/bad.name/offsets/reset", E2E_JSON,
                 "{\"topic\":\"T\",\"timestamp\":0}", 400, "INVALID_NAME");

    /* Only the two valid PUTs above left a trace: (T, 0) = 0. */
    a = e2e_call(f, "GET", "/v1/groups/g/offsets", NULL, NULL, 200);
    assert_int_equal(json_array_size(a), 1);
    assert_entry(a, 0, "T", 0, 0);
    json_decref(a);

    /* The broker is still healthy. */
    json_decref(e2e_call(f, "GET", "/healthz", NULL, NULL, 200));
    /* A clean exit (under make check, a sanitizer report makes it fail). */
    assert_int_equal(e2e_stop(&f->srv), 0);
}

static void test_offsets_reset_by_timestamp(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    json_decref(e2e_call(f, "PUT", "/v1/topics/R", E2E_JSON, "{\"queues\":3}", 201));
    produce(f, "R", 0, "a");
    produce(f, "R", 1, "b");
    produce(f, "R", 0, "c");
    e2e_sleep_ms(30);
    long long mid = e2e_wall_ms();
    e2e_sleep_ms(30);
    produce(f, "R", 0, "d");
    produce(f, "R", 1, "e");
    produce(f, "R", 0, "f");
    e2e_wait_queue(f, "R", 0, 4);
    e2e_wait_queue(f, "R", 1, 2);

    char body[128];
    snprintf(body, sizeof(body), "{\"topic\":\"R\",\"timestamp\":%lld}", mid);
    json_t *a = e2e_call(f, "POST", "/v1/groups/g/offsets/reset", E2E_JSON, body, 200);
    assert_int_equal(json_array_size(a), 3);
    assert_entry(a, 0, "R", 0, 2); /* "d": the first message at or after 'mid' */
    assert_entry(a, 1, "R", 1, 1); /* "e" */
    assert_entry(a, 2, "R", 2, 0); /* never had a message */
    json_decref(a);
    a = e2e_call(f, "GET", "/v1/groups/g/offsets?topic=R", NULL, NULL, 200);
    assert_int_equal(json_array_size(a), 3);
    assert_entry(a, 0, "R", 0, 2);
    assert_entry(a, 1, "R", 1, 1);
    json_decref(a);

    /* The message at the new offset is the first one stored after 'mid'. */
    json_t *p =
        e2e_call(f, "GET", "/v1/topics/R/queues/0/messages?offset=2&max=1", NULL, NULL, 200);
    json_t *m = json_array_get(json_object_get(p, "messages"), 0);
    assert_string_equal(json_string_value(json_object_get(m, "body")), "d");
    assert_true(e2e_num(m, "storeTimestamp") >= mid);
    json_decref(p);

    /* Before everything: the start; after everything: the end. */
    a = e2e_call(f, "POST", "/v1/groups/g/offsets/reset", E2E_JSON,
                 "{\"topic\":\"R\",\"timestamp\":0}", 200);
    assert_entry(a, 0, "R", 0, 0);
    assert_entry(a, 1, "R", 1, 0);
    json_decref(a);
    snprintf(body, sizeof(body), "{\"topic\":\"R\",\"timestamp\":%lld}", e2e_wall_ms() + 60000);
    a = e2e_call(f, "POST", "/v1/groups/g/offsets/reset", E2E_JSON, body, 200);
    assert_entry(a, 0, "R", 0, 4);
    assert_entry(a, 1, "R", 1, 2);
    assert_entry(a, 2, "R", 2, 0);
    json_decref(a);
    /* A clean exit (under make check, a sanitizer report makes it fail). */
    assert_int_equal(e2e_stop(&f->srv), 0);
}

static void test_offsets_survive_a_restart(void **state) {
    E2eCase *f = *state;
    /* A long flush interval: only the clean shutdown can have saved them. */
    static const char *const extra[] = {"--offsetFlushInterval=600000", NULL};
    e2e_case_start(f, extra);
    make_topics(f);
    json_decref(e2e_call(f, "PUT", "/v1/groups/keep/offsets", E2E_JSON,
                         "{\"offsets\":[{\"topic\":\"T\","
                         "\"queueId\":0,\"offset\":2},{\"topic\":\"T\",\"queueId\":1,\"offset\":1},"
                         "{\"topic\":\"A\",\"queueId\":0,\"offset\":1}]}",
                         200));
    json_decref(e2e_call(f, "PUT", "/v1/groups/keep/offsets", E2E_JSON,
                         "{\"topic\":\"T\",\"queueId\":0,"
                         "\"offset\":3}",
                         200));
    assert_int_equal(e2e_stop(&f->srv), 0);
    e2e_case_start(f, extra);
    json_t *a = e2e_call(f, "GET", "/v1/groups/keep/offsets", NULL, NULL, 200);
    assert_int_equal(json_array_size(a), 3);
    assert_entry(a, 0, "A", 0, 1);
    assert_entry(a, 1, "T", 0, 3);
    assert_entry(a, 2, "T", 1, 1);
    json_decref(a);
    assert_int_equal(e2e_stop(&f->srv), 0);
}

static void test_offsets_go_with_their_topic(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    make_topics(f);
    json_decref(
        e2e_call(f, "PUT", "/v1/groups/g/offsets", E2E_JSON,
                 "{\"offsets\":[{\"topic\":\"T\","
                 "\"queueId\":0,\"offset\":1},{\"topic\":\"A\",\"queueId\":0,\"offset\":1}]}",
                 200));
    assert_null(e2e_call(f, "DELETE", "/v1/topics/T", NULL, NULL, 204));
    json_t *a = e2e_call(f, "GET", "/v1/groups/g/offsets", NULL, NULL, 200);
    assert_int_equal(json_array_size(a), 1);
    assert_entry(a, 0, "A", 0, 1);
    json_decref(a);
    /* A clean exit (under make check, a sanitizer report makes it fail). */
    assert_int_equal(e2e_stop(&f->srv), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_offsets_set_single_and_batch_then_get, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_offsets_bad_requests_are_rejected, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_offsets_reset_by_timestamp, setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_offsets_survive_a_restart, setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_offsets_go_with_their_topic, setup, e2e_case_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
