/*
 * test_topic.c - end-to-end tests of topic admin against a real petrel:
 * PUT (create, update, defaults), GET, list, DELETE, the queue list, perm
 * enforcement on produce and pull, and every validation error.
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
    return e2e_case_setup(state, "e2e-topic");
}

static void assert_topic(const json_t *t, const char *name, int queues, const char *perm,
                         bool order) {
    assert_string_equal(json_string_value(json_object_get(t, "topic")), name);
    assert_int_equal(json_integer_value(json_object_get(t, "queues")), queues);
    assert_int_equal(json_integer_value(json_object_get(t, "readQueues")), queues);
    assert_int_equal(json_integer_value(json_object_get(t, "writeQueues")), queues);
    assert_string_equal(json_string_value(json_object_get(t, "perm")), perm);
    assert_int_equal(json_is_true(json_object_get(t, "order")), order);
    assert_true(json_integer_value(json_object_get(t, "createdTimestamp")) > 0);
    assert_true(json_integer_value(json_object_get(t, "updatedTimestamp")) > 0);
}

/* ---- cases ---------------------------------------------------------------*/

static void test_topic_put_get_list_update_delete(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    json_t *t = e2e_call(f, "PUT", "/v1/topics/Orders", E2E_JSON, "{\"queues\":3,\"perm\":\"RW\","
                     "\"order\":true}", 201);
    assert_topic(t, "Orders", 3, "RW", true);
    json_decref(t);
    json_decref(e2e_call(f, "PUT", "/v1/topics/Alpha", E2E_JSON, "{}", 201));

    t = e2e_call(f, "GET", "/v1/topics/Orders", NULL, NULL, 200);
    assert_topic(t, "Orders", 3, "RW", true);
    json_t *qs = json_object_get(t, "queueStats");
    assert_int_equal(json_array_size(qs), 3);
    for (size_t i = 0; i < 3; i++) {
        json_t *q = json_array_get(qs, i);
        assert_int_equal(json_integer_value(json_object_get(q, "queueId")), i);
        assert_int_equal(json_integer_value(json_object_get(q, "minOffset")), 0);
        assert_int_equal(json_integer_value(json_object_get(q, "maxOffset")), 0);
        assert_int_equal(json_integer_value(json_object_get(q, "lastUpdateTimestamp")), 0);
    }
    json_decref(t);

    t = e2e_call(f, "GET", "/v1/topics", NULL, NULL, 200);
    assert_int_equal(json_array_size(t), 2);
    assert_topic(json_array_get(t, 0), "Alpha", 8, "RW", false);
    assert_topic(json_array_get(t, 1), "Orders", 3, "RW", true);
    json_decref(t);

    /* Update: only the fields given change. */
    t = e2e_call(f, "PUT", "/v1/topics/Orders", E2E_JSON, "{\"queues\":16}", 200);
    assert_topic(t, "Orders", 16, "RW", true);
    json_decref(t);
    t = e2e_call(f, "PUT", "/v1/topics/Orders", E2E_JSON, "{\"perm\":\"R\",\"order\":false}", 200);
    assert_topic(t, "Orders", 16, "R", false);
    json_decref(t);

    assert_null(e2e_call(f, "DELETE", "/v1/topics/Orders", NULL, NULL, 204));
    e2e_expect_error(f, "GET", "/v1/topics/Orders", NULL, NULL, 404, "TOPIC_NOT_FOUND");
    e2e_expect_error(f, "GET", "/v1/topics/Orders/queues", NULL, NULL, 404, "TOPIC_NOT_FOUND");
    e2e_expect_error(f, "DELETE", "/v1/topics/Orders", NULL, NULL, 404, "TOPIC_NOT_FOUND");
    t = e2e_call(f, "GET", "/v1/topics", NULL, NULL, 200);
    assert_int_equal(json_array_size(t), 1);
    json_decref(t);
    assert_int_equal(e2e_stop(&f->srv), 0);
}

static void test_topic_put_without_body_uses_defaults(void **state) {
    E2eCase *f = *state;
    static const char *const extra[] = {"--defaultTopicQueueNums=5", NULL};
    e2e_case_start(f, extra);
    E2eResponse r;
    assert_int_equal(e2e_send(&f->srv, "PUT", "/v1/topics/Plain", NULL, NULL, &r), 0);
    assert_int_equal(r.status, 201);
    json_t *t = e2e_json(&r);
    assert_topic(t, "Plain", 5, "RW", false);
    json_decref(t);
    e2e_response_free(&r);
}

static void test_topic_queues_show_offsets_after_produce(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    json_decref(e2e_call(f, "PUT", "/v1/topics/Q", E2E_JSON, "{\"queues\":2}", 201));
    for (int i = 0; i < 3; i++) {
        json_decref(e2e_call(f, "POST", "/v1/topics/Q/messages", E2E_JSON,
                             "{\"body\":\"x\",\"queueId\":1}", 200));
    }
    json_t *qs = NULL;
    for (int tries = 0; tries < 200; tries++) {
        json_decref(qs);
        qs = e2e_call(f, "GET", "/v1/topics/Q/queues", NULL, NULL, 200);
        if (json_integer_value(json_object_get(json_array_get(qs, 1), "maxOffset")) == 3) break;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(json_array_size(qs), 2);
    json_t *q0 = json_array_get(qs, 0);
    json_t *q1 = json_array_get(qs, 1);
    assert_int_equal(json_integer_value(json_object_get(q0, "maxOffset")), 0);
    assert_int_equal(json_integer_value(json_object_get(q1, "queueId")), 1);
    assert_int_equal(json_integer_value(json_object_get(q1, "minOffset")), 0);
    assert_int_equal(json_integer_value(json_object_get(q1, "maxOffset")), 3);
    assert_true(json_integer_value(json_object_get(q1, "lastUpdateTimestamp")) > 0);
    json_decref(qs);
}

static void test_topic_delete_then_recreate_starts_offsets_at_zero(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    json_decref(e2e_call(f, "PUT", "/v1/topics/D", E2E_JSON, "{\"queues\":1}", 201));
    json_decref(e2e_call(f, "POST", "/v1/topics/D/messages", E2E_JSON, "{\"body\":\"a\"}", 200));
    json_decref(e2e_call(f, "POST", "/v1/topics/D/messages", E2E_JSON, "{\"body\":\"b\"}", 200));
    assert_null(e2e_call(f, "DELETE", "/v1/topics/D", NULL, NULL, 204));
    json_decref(e2e_call(f, "PUT", "/v1/topics/D", E2E_JSON, "{\"queues\":1}", 201));
    json_t *res = e2e_call(f, "POST", "/v1/topics/D/messages", E2E_JSON, "{\"body\":\"c\"}", 200);
    assert_int_equal(json_integer_value(json_object_get(res, "queueOffset")), 0);
    json_decref(res);
}

static void test_topic_perm_is_enforced(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    json_decref(
        e2e_call(f, "PUT", "/v1/topics/ReadOnly", E2E_JSON, "{\"queues\":1,\"perm\":\"R\"}", 201));
    json_decref(
        e2e_call(f, "PUT", "/v1/topics/WriteOnly", E2E_JSON, "{\"queues\":1,\"perm\":\"W\"}", 201));
    e2e_expect_error(f, "POST", "/v1/topics/ReadOnly/messages", E2E_JSON, "{\"body\":\"x\"}", 403,
                 "TOPIC_NOT_WRITABLE");
    json_decref(
        e2e_call(f, "POST", "/v1/topics/WriteOnly/messages", E2E_JSON, "{\"body\":\"x\"}", 200));
    e2e_expect_error(f, "GET", "/v1/topics/WriteOnly/queues/0/messages", NULL, NULL, 403,
                 "TOPIC_NOT_READABLE");
    json_t *p = e2e_call(f, "GET", "/v1/topics/ReadOnly/queues/0/messages", NULL, NULL, 200);
    assert_string_equal(json_string_value(json_object_get(p, "status")), "NO_NEW_MSG");
    json_decref(p);
}

static void test_topic_bad_requests_are_400_415_405(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    static const struct {
        const char *path;
        const char *body;
        const char *code;
    } cases[] = {
        {"/v1/topics/T", "{", "INVALID_JSON"},
        {"/v1/topics/T", "[1]", "INVALID_JSON"},
        {"/v1/topics/T", "{\"queues\":0}", "INVALID_FIELD"},
        {"/v1/topics/T", "{\"queues\":1025}", "INVALID_FIELD"},
        {"/v1/topics/T", "{\"queues\":\"8\"}", "INVALID_FIELD"},
        {"/v1/topics/T", "{\"queues\":2.5}", "INVALID_FIELD"},
        {"/v1/topics/T", "{\"perm\":\"X\"}", "INVALID_FIELD"},
        {"/v1/topics/T", "{\"perm\":6}", "INVALID_FIELD"},
        {"/v1/topics/T", "{\"order\":\"yes\"}", "INVALID_FIELD"},
        {"/v1/topics/T", "{\"colour\":1}", "UNKNOWN_FIELD"},
        {"/v1/topics/T", "{\"queues\":1,\"queues\":2}", "INVALID_JSON"},
        {"/v1/topics/%25RETRY%25g", "{}", "INVALID_NAME"},
        {"/v1/topics/RMQ_SYS_X", "{}", "INVALID_NAME"},
        {"/v1/topics/bad.name", "{}", "INVALID_NAME"},
        {"/v1/topics/TBW102", "{}", "INVALID_NAME"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        e2e_expect_error(f, "PUT", cases[i].path, E2E_JSON, cases[i].body, 400, cases[i].code);
    }
    char longname[200];
    snprintf(longname, sizeof(longname), "/v1/topics/%0128d", 0);
    e2e_expect_error(f, "PUT", longname, E2E_JSON, "{}", 400, "INVALID_NAME");
    e2e_expect_error(f, "GET", "/v1/topics/bad.name", NULL, NULL, 400, "INVALID_NAME");
    e2e_expect_error(f, "DELETE", "/v1/topics/bad.name", NULL, NULL, 400, "INVALID_NAME");
    e2e_expect_error(f, "PUT", "/v1/topics/T", "text/plain", "{}", 415, "UNSUPPORTED_MEDIA_TYPE");
    e2e_expect_error(f, "POST", "/v1/topics", E2E_JSON, "{}", 405, "METHOD_NOT_ALLOWED");
    e2e_expect_error(f, "POST", "/v1/topics/T", E2E_JSON, "{}", 405, "METHOD_NOT_ALLOWED");
    /* Nothing was created by the failures. */
    json_t *t = e2e_call(f, "GET", "/v1/topics", NULL, NULL, 200);
    assert_int_equal(json_array_size(t), 0);
    json_decref(t);
}

static void test_topic_survives_restart(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    json_decref(
        e2e_call(f, "PUT", "/v1/topics/Keep", E2E_JSON, "{\"queues\":6,\"order\":true}", 201));
    assert_int_equal(e2e_stop(&f->srv), 0);
    e2e_case_start(f, NULL);
    json_t *t = e2e_call(f, "GET", "/v1/topics/Keep", NULL, NULL, 200);
    assert_topic(t, "Keep", 6, "RW", true);
    json_decref(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_topic_put_get_list_update_delete, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_topic_put_without_body_uses_defaults, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_topic_queues_show_offsets_after_produce, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_topic_delete_then_recreate_starts_offsets_at_zero,
                                        setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_topic_perm_is_enforced, setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_topic_bad_requests_are_400_415_405, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_topic_survives_restart, setup, e2e_case_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
