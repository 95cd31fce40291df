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

#define JSON "application/json"

typedef struct Fixture {
    char *dir;
    E2eServer srv;
} Fixture;

static int setup(void **state) {
    Fixture *f = calloc(1, sizeof(*f));
    if (!f) return -1;
    f->dir = tu_mkdtemp("e2e-topic");
    *state = f;
    return 0;
}

static int teardown(void **state) {
    Fixture *f = *state;
    e2e_kill9(&f->srv);
    tu_rmtree(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

static void start(Fixture *f, const char *const *extra) {
    assert_int_equal(e2e_start(&f->srv, f->dir, extra), 0);
}

/* Sends a request and returns its JSON body (NULL for an empty body);
 * checks the status. */
static json_t *call(Fixture *f, const char *method, const char *path, const char *body,
                    long status) {
    E2eResponse r;
    assert_int_equal(e2e_send(&f->srv, method, path, body ? JSON : NULL, body, &r), 0);
    if (r.status != status) {
        fprintf(stderr, "%s %s: %ld %.*s\n", method, path, r.status, (int)r.len, r.body);
    }
    assert_int_equal(r.status, status);
    json_t *root = NULL;
    if (r.len > 0) {
        root = e2e_json(&r);
        assert_non_null(root);
    }
    e2e_response_free(&r);
    return root;
}

/* Checks that the request answers the API.md error body with 'code'. */
static void expect_error(Fixture *f, const char *method, const char *path, const char *ct,
                         const char *body, long status, const char *code) {
    E2eResponse r;
    assert_int_equal(e2e_send(&f->srv, method, path, ct, body, &r), 0);
    if (r.status != status) {
        fprintf(stderr, "%s %s %s: %ld %.*s\n", method, path, body ? body : "", r.status,
                (int)r.len, r.body);
    }
    assert_int_equal(r.status, status);
    json_t *root = e2e_json(&r);
    assert_non_null(root);
    json_t *err = json_object_get(root, "error");
    const char *got = json_string_value(json_object_get(err, "code"));
    if (!got || strcmp(got, code) != 0) fprintf(stderr, "body: %.*s\n", (int)r.len, r.body);
    assert_string_equal(got, code);
    assert_int_equal(json_integer_value(json_object_get(err, "status")), status);
    assert_true(strlen(json_string_value(json_object_get(err, "message"))) > 0);
    json_decref(root);
    e2e_response_free(&r);
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
    Fixture *f = *state;
    start(f, NULL);
    json_t *t = call(f, "PUT", "/v1/topics/Orders", "{\"queues\":3,\"perm\":\"RW\","
                     "\"order\":true}", 201);
    assert_topic(t, "Orders", 3, "RW", true);
    json_decref(t);
    json_decref(call(f, "PUT", "/v1/topics/Alpha", "{}", 201));

    t = call(f, "GET", "/v1/topics/Orders", NULL, 200);
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

    t = call(f, "GET", "/v1/topics", NULL, 200);
    assert_int_equal(json_array_size(t), 2);
    assert_topic(json_array_get(t, 0), "Alpha", 8, "RW", false);
    assert_topic(json_array_get(t, 1), "Orders", 3, "RW", true);
    json_decref(t);

    /* Update: only the fields given change. */
    t = call(f, "PUT", "/v1/topics/Orders", "{\"queues\":16}", 200);
    assert_topic(t, "Orders", 16, "RW", true);
    json_decref(t);
    t = call(f, "PUT", "/v1/topics/Orders", "{\"perm\":\"R\",\"order\":false}", 200);
    assert_topic(t, "Orders", 16, "R", false);
    json_decref(t);

    assert_null(call(f, "DELETE", "/v1/topics/Orders", NULL, 204));
    expect_error(f, "GET", "/v1/topics/Orders", NULL, NULL, 404, "TOPIC_NOT_FOUND");
    expect_error(f, "GET", "/v1/topics/Orders/queues", NULL, NULL, 404, "TOPIC_NOT_FOUND");
    expect_error(f, "DELETE", "/v1/topics/Orders", NULL, NULL, 404, "TOPIC_NOT_FOUND");
    t = call(f, "GET", "/v1/topics", NULL, 200);
    assert_int_equal(json_array_size(t), 1);
    json_decref(t);
    assert_int_equal(e2e_stop(&f->srv), 0);
}

static void test_topic_put_without_body_uses_defaults(void **state) {
    Fixture *f = *state;
    static const char *const extra[] = {"--defaultTopicQueueNums=5", NULL};
    start(f, extra);
    E2eResponse r;
    assert_int_equal(e2e_send(&f->srv, "PUT", "/v1/topics/Plain", NULL, NULL, &r), 0);
    assert_int_equal(r.status, 201);
    json_t *t = e2e_json(&r);
    assert_topic(t, "Plain", 5, "RW", false);
    json_decref(t);
    e2e_response_free(&r);
}

static void test_topic_queues_show_offsets_after_produce(void **state) {
    Fixture *f = *state;
    start(f, NULL);
    json_decref(call(f, "PUT", "/v1/topics/Q", "{\"queues\":2}", 201));
    for (int i = 0; i < 3; i++) {
        json_decref(call(f, "POST", "/v1/topics/Q/messages", "{\"body\":\"x\",\"queueId\":1}",
                         200));
    }
    json_t *qs = NULL;
    for (int tries = 0; tries < 200; tries++) {
        json_decref(qs);
        qs = call(f, "GET", "/v1/topics/Q/queues", NULL, 200);
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
    Fixture *f = *state;
    start(f, NULL);
    json_decref(call(f, "PUT", "/v1/topics/D", "{\"queues\":1}", 201));
    json_decref(call(f, "POST", "/v1/topics/D/messages", "{\"body\":\"a\"}", 200));
    json_decref(call(f, "POST", "/v1/topics/D/messages", "{\"body\":\"b\"}", 200));
    assert_null(call(f, "DELETE", "/v1/topics/D", NULL, 204));
    json_decref(call(f, "PUT", "/v1/topics/D", "{\"queues\":1}", 201));
    json_t *res = call(f, "POST", "/v1/topics/D/messages", "{\"body\":\"c\"}", 200);
    assert_int_equal(json_integer_value(json_object_get(res, "queueOffset")), 0);
    json_decref(res);
}

static void test_topic_perm_is_enforced(void **state) {
    Fixture *f = *state;
    start(f, NULL);
    json_decref(call(f, "PUT", "/v1/topics/ReadOnly", "{\"queues\":1,\"perm\":\"R\"}", 201));
    json_decref(call(f, "PUT", "/v1/topics/WriteOnly", "{\"queues\":1,\"perm\":\"W\"}", 201));
    expect_error(f, "POST", "/v1/topics/ReadOnly/messages", JSON, "{\"body\":\"x\"}", 403,
                 "TOPIC_NOT_WRITABLE");
    json_decref(call(f, "POST", "/v1/topics/WriteOnly/messages", "{\"body\":\"x\"}", 200));
    expect_error(f, "GET", "/v1/topics/WriteOnly/queues/0/messages", NULL, NULL, 403,
                 "TOPIC_NOT_READABLE");
    json_t *p = call(f, "GET", "/v1/topics/ReadOnly/queues/0/messages", NULL, 200);
    assert_string_equal(json_string_value(json_object_get(p, "status")), "NO_NEW_MSG");
    json_decref(p);
}

static void test_topic_bad_requests_are_400_415_405(void **state) {
    Fixture *f = *state;
    start(f, NULL);
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
        expect_error(f, "PUT", cases[i].path, JSON, cases[i].body, 400, cases[i].code);
    }
    char longname[200];
    snprintf(longname, sizeof(longname), "/v1/topics/%0128d", 0);
    expect_error(f, "PUT", longname, JSON, "{}", 400, "INVALID_NAME");
    expect_error(f, "GET", "/v1/topics/bad.name", NULL, NULL, 400, "INVALID_NAME");
    expect_error(f, "DELETE", "/v1/topics/bad.name", NULL, NULL, 400, "INVALID_NAME");
    expect_error(f, "PUT", "/v1/topics/T", "text/plain", "{}", 415, "UNSUPPORTED_MEDIA_TYPE");
    expect_error(f, "POST", "/v1/topics", JSON, "{}", 405, "METHOD_NOT_ALLOWED");
    expect_error(f, "POST", "/v1/topics/T", JSON, "{}", 405, "METHOD_NOT_ALLOWED");
    /* Nothing was created by the failures. */
    json_t *t = call(f, "GET", "/v1/topics", NULL, 200);
    assert_int_equal(json_array_size(t), 0);
    json_decref(t);
}

static void test_topic_survives_restart(void **state) {
    Fixture *f = *state;
    start(f, NULL);
    json_decref(call(f, "PUT", "/v1/topics/Keep", "{\"queues\":6,\"order\":true}", 201));
    assert_int_equal(e2e_stop(&f->srv), 0);
    start(f, NULL);
    json_t *t = call(f, "GET", "/v1/topics/Keep", NULL, 200);
    assert_topic(t, "Keep", 6, "RW", true);
    json_decref(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_topic_put_get_list_update_delete, setup, teardown),
        cmocka_unit_test_setup_teardown(test_topic_put_without_body_uses_defaults, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_topic_queues_show_offsets_after_produce, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_topic_delete_then_recreate_starts_offsets_at_zero,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_topic_perm_is_enforced, setup, teardown),
        cmocka_unit_test_setup_teardown(test_topic_bad_requests_are_400_415_405, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_topic_survives_restart, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
