/*
 * test_query.c - end-to-end tests of message queries against a real
 * petrel: GET /v1/topics/{topic}/messages by key (several messages with
 * one key, keys of other topics, the unique id, max, a time window) and
 * by store time range (merged across queues in store order, max, empty
 * windows), and every bad parameter combination with its status and code.
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
    return e2e_case_setup(state, "e2e-query");
}

/* Produces the JSON message 'body' into 'topic'; returns the answer. */
static json_t *produce(E2eCase *f, const char *topic, const char *body) {
    char path[256];
    snprintf(path, sizeof(path), "/v1/topics/%s/messages", topic);
    json_t *res = e2e_call(f, "POST", path, E2E_JSON, body, 200);
    assert_string_equal(e2e_str(res, "status"), "SEND_OK");
    return res;
}

/* GETs 'path' until its "messages" has 'n' entries (the index and the
 * queues are built a moment after the produce answer); returns it. */
static json_t *query_until(E2eCase *f, const char *path, size_t n) {
    json_t *root = NULL;
    for (int tries = 0; tries < 500; tries++) {
        json_decref(root);
        root = e2e_call(f, "GET", path, NULL, NULL, 200);
        assert_int_equal(json_object_size(root), 1);
        json_t *msgs = json_object_get(root, "messages");
        assert_true(json_is_array(msgs));
        if (json_array_size(msgs) == n) return root;
        e2e_sleep_ms(10);
    }
    fail_msg("%s never answered %zu messages", path, n);
    return NULL;
}

/* The body of message 'i' of a query answer. */
static const char *body_at(const json_t *root, size_t i) {
    return e2e_str(json_array_get(json_object_get(root, "messages"), i), "body");
}

/* ---- by key --------------------------------------------------------------*/

static void test_query_by_key(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    json_decref(e2e_call(f, "PUT", "/v1/topics/K", E2E_JSON, "{\"queues\":4}", 201));
    long long t0 = e2e_wall_ms();
    json_decref(produce(f, "K", "{\"body\":\"first\",\"keys\":[\"order-1\"],\"queueId\":0}"));
    e2e_sleep_ms(20);
    json_t *second = produce(f, "K", "{\"body\":\"second\",\"keys\":[\"x\",\"order-1\"],"
                             "\"queueId\":3}");
    json_decref(produce(f, "K", "{\"body\":\"third\",\"keys\":[\"order-2\"]}"));
    json_decref(produce(f, "Other", "{\"body\":\"elsewhere\",\"keys\":[\"order-1\"]}"));
    /* A key is matched whole, not as a prefix. */
    json_decref(produce(f, "K", "{\"body\":\"near\",\"keys\":[\"order-10\"]}"));

    json_t *root = query_until(f, "/v1/topics/K/messages?key=order-1", 2);
    json_t *msgs = json_object_get(root, "messages");
    assert_string_equal(body_at(root, 0), "first"); /* oldest first */
    assert_string_equal(body_at(root, 1), "second");
    for (size_t i = 0; i < 2; i++) {
        json_t *m = json_array_get(msgs, i);
        assert_string_equal(e2e_str(m, "topic"), "K");
        assert_int_equal(strlen(e2e_str(m, "msgId")), 32);
        assert_true(e2e_num(m, "storeTimestamp") >= t0);
    }
    assert_int_equal(e2e_num(json_array_get(msgs, 1), "queueId"), 3);
    assert_string_equal(e2e_str(json_array_get(msgs, 1), "msgId"), e2e_str(second, "msgId"));
    /* The same message as GET /v1/messages/{msgId}. */
    char path[256];
    snprintf(path, sizeof(path), "/v1/messages/%s", e2e_str(second, "msgId"));
    json_t *m = e2e_call(f, "GET", path, NULL, NULL, 200);
    assert_true(json_equal(m, json_array_get(msgs, 1)));
    json_decref(m);
    json_decref(root);

    root = query_until(f, "/v1/topics/K/messages?key=order-2", 1);
    assert_string_equal(body_at(root, 0), "third");
    json_decref(root);
    root = query_until(f, "/v1/topics/Other/messages?key=order-1", 1);
    assert_string_equal(body_at(root, 0), "elsewhere");
    json_decref(root);

    /* The unique id works as a key too (RocketMQ's UNIQ_KEY). */
    snprintf(path, sizeof(path), "/v1/topics/K/messages?key=%s", e2e_str(second, "uniqueId"));
    root = query_until(f, path, 1);
    assert_string_equal(body_at(root, 0), "second");
    json_decref(root);

    /* max keeps the newest; a window before the messages finds none. */
    root = query_until(f, "/v1/topics/K/messages?key=order-1&max=1", 1);
    assert_string_equal(body_at(root, 0), "second");
    json_decref(root);
    snprintf(path, sizeof(path), "/v1/topics/K/messages?key=order-1&begin=0&end=%lld", t0 - 1);
    root = query_until(f, path, 0);
    json_decref(root);
    snprintf(path, sizeof(path), "/v1/topics/K/messages?key=order-1&begin=%lld&end=%lld", t0,
             e2e_wall_ms() + 1000);
    root = query_until(f, path, 2);
    json_decref(root);
    root = query_until(f, "/v1/topics/K/messages?key=nobody", 0);
    json_decref(root);
    json_decref(second);
    /* A clean exit (under make check, a sanitizer report makes it fail). */
    assert_int_equal(e2e_stop(&f->srv), 0);
}

/* ---- by time -------------------------------------------------------------*/

static void test_query_by_time_range_is_ordered(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    json_decref(e2e_call(f, "PUT", "/v1/topics/TR", E2E_JSON, "{\"queues\":3}", 201));
    long long t0 = e2e_wall_ms();
    static const char *const bodies[] = {"m0", "m1", "m2", "m3", "m4", "m5", "m6"};
    long long mid = 0;
    for (int i = 0; i < 7; i++) {
        char body[64];
        /* Queues out of step with the order: 2, 0, 1, 0, 2, 1, 0. */
        static const int qs[] = {2, 0, 1, 0, 2, 1, 0};
        snprintf(body, sizeof(body), "{\"body\":\"%s\",\"queueId\":%d}", bodies[i], qs[i]);
        json_decref(produce(f, "TR", body));
        if (i == 3) {
            e2e_sleep_ms(30);
            mid = e2e_wall_ms();
            e2e_sleep_ms(30);
        }
    }
    json_decref(produce(f, "Noise", "{\"body\":\"other topic\"}"));
    long long t1 = e2e_wall_ms();

    char path[256];
    snprintf(path, sizeof(path), "/v1/topics/TR/messages?begin=%lld&end=%lld&max=100", t0, t1);
    json_t *root = query_until(f, path, 7);
    json_t *msgs = json_object_get(root, "messages");
    long long prev_ts = 0;
    long long prev_off = -1;
    for (size_t i = 0; i < 7; i++) {
        json_t *m = json_array_get(msgs, i);
        assert_string_equal(e2e_str(m, "body"), bodies[i]);
        assert_string_equal(e2e_str(m, "topic"), "TR");
        assert_true(e2e_num(m, "storeTimestamp") >= prev_ts);
        assert_true(e2e_num(m, "commitLogOffset") > prev_off);
        prev_ts = e2e_num(m, "storeTimestamp");
        prev_off = e2e_num(m, "commitLogOffset");
    }
    json_decref(root);

    /* Default max is 32; max cuts the oldest-first list. */
    snprintf(path, sizeof(path), "/v1/topics/TR/messages?begin=%lld&end=%lld", t0, t1);
    json_decref(query_until(f, path, 7));
    snprintf(path, sizeof(path), "/v1/topics/TR/messages?begin=%lld&end=%lld&max=3", t0, t1);
    root = query_until(f, path, 3);
    assert_string_equal(body_at(root, 0), "m0");
    assert_string_equal(body_at(root, 2), "m2");
    json_decref(root);

    /* From the middle; up to the middle; before everything. */
    snprintf(path, sizeof(path), "/v1/topics/TR/messages?begin=%lld&end=%lld", mid, t1);
    root = query_until(f, path, 3);
    assert_string_equal(body_at(root, 0), "m4");
    assert_string_equal(body_at(root, 2), "m6");
    json_decref(root);
    snprintf(path, sizeof(path), "/v1/topics/TR/messages?begin=0&end=%lld", mid);
    root = query_until(f, path, 4);
    assert_string_equal(body_at(root, 3), "m3");
    json_decref(root);
    snprintf(path, sizeof(path), "/v1/topics/TR/messages?begin=0&end=%lld", t0 - 1);
    json_decref(query_until(f, path, 0));

    /* A topic without messages. */
    json_decref(e2e_call(f, "PUT", "/v1/topics/Empty", E2E_JSON, "{\"queues\":2}", 201));
    json_decref(query_until(f, "/v1/topics/Empty/messages?begin=0&end=9999999999999", 0));
    /* A clean exit (under make check, a sanitizer report makes it fail). */
    assert_int_equal(e2e_stop(&f->srv), 0);
}

/* ---- errors --------------------------------------------------------------*/

static void test_query_bad_parameters(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    json_decref(e2e_call(f, "PUT", "/v1/topics/Q", E2E_JSON, "{\"queues\":1}", 201));
    static const char *const bad[] = {
        "/v1/topics/Q/messages",
        "/v1/topics/Q/messages?begin=0",
        "/v1/topics/Q/messages?end=10",
        "/v1/topics/Q/messages?max=5",
        "/v1/topics/Q/messages?key=",
        "/v1/topics/Q/messages?key",
        "/v1/topics/Q/messages?key=k&max=0",
        "/v1/topics/Q/messages?key=k&max=65",
        "/v1/topics/Q/messages?key=k&begin=10&end=5",
        "/v1/topics/Q/messages?key=k&begin=-1",
        "/v1/topics/Q/messages?key=k&end=soon",
        "/v1/topics/Q/messages?begin=0&end=10&max=0",
        "/v1/topics/Q/messages?begin=0&end=10&max=2001",
        "/v1/topics/Q/messages?begin=10&end=5",
        "/v1/topics/Q/messages?begin=abc&end=10",
        "/v1/topics/Q/messages?begin=0&end=1.5",
        "/v1/topics/Q/messages?begin=0&end=99999999999999999999",
        "/v1/topics/Q/messages?begin=0&end=10&colour=red",
        "/v1/topics/Q/messages?key=k&tags=TagA",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        e2e_expect_error(f, "GET", bad[i], NULL, NULL, 400, "INVALID_PARAMETER");
    }
    e2e_expect_error(f, "GET", "/v1/topics/bad.name/messages?key=k", NULL, NULL, 400,
                     "INVALID_NAME");
    e2e_expect_error(f, "GET", "/v1/topics/Nope/messages?key=k", NULL, NULL, 404,
                     "TOPIC_NOT_FOUND");
    e2e_expect_error(f, "GET", "/v1/topics/Nope/messages?begin=0&end=1", NULL, NULL, 404,
                     "TOPIC_NOT_FOUND");
    /* The largest limits are accepted. */
    json_decref(query_until(f, "/v1/topics/Q/messages?key=k&max=64", 0));
    json_decref(query_until(f, "/v1/topics/Q/messages?begin=0&end=1&max=2000", 0));

    /* GET and POST share the path; other methods get 405 with Allow. */
    E2eResponse r;
    assert_int_equal(e2e_send(&f->srv, "DELETE", "/v1/topics/Q/messages", NULL, NULL, &r), 0);
    assert_int_equal(r.status, 405);
    char allow[64];
    assert_non_null(e2e_header(&r, "Allow", allow, sizeof(allow)));
    assert_non_null(strstr(allow, "GET"));
    assert_non_null(strstr(allow, "POST"));
    e2e_response_free(&r);
    /* Produce still works on the shared path. */
    json_decref(produce(f, "Q", "{\"body\":\"still here\"}"));
    json_decref(e2e_call(f, "GET", "/healthz", NULL, NULL, 200));
    /* A clean exit (under make check, a sanitizer report makes it fail). */
    assert_int_equal(e2e_stop(&f->srv), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_query_by_key, setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_query_by_time_range_is_ordered, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_query_bad_parameters, setup, e2e_case_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
