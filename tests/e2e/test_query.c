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

#define JSON "application/json"

typedef struct Fixture {
    char *dir;
    E2eServer srv;
} Fixture;

static int setup(void **state) {
    Fixture *f = calloc(1, sizeof(*f));
    if (!f) return -1;
    f->dir = tu_mkdtemp("e2e-query");
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

static void start(Fixture *f) {
    assert_int_equal(e2e_start(&f->srv, f->dir, NULL), 0);
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static long long wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static json_t *call(Fixture *f, const char *method, const char *path, const char *body,
                    long status) {
    E2eResponse r;
    assert_int_equal(e2e_send(&f->srv, method, path, body ? JSON : NULL, body, &r), 0);
    if (r.status != status) {
        fprintf(stderr, "%s %s: %ld %.*s\n", method, path, r.status, (int)r.len, r.body);
    }
    assert_int_equal(r.status, status);
    json_t *root = r.len ? e2e_json(&r) : NULL;
    if (r.len) assert_non_null(root);
    e2e_response_free(&r);
    return root;
}

static void expect_error(Fixture *f, const char *method, const char *path, long status,
                         const char *code) {
    E2eResponse r;
    assert_int_equal(e2e_send(&f->srv, method, path, NULL, NULL, &r), 0);
    json_t *root = e2e_json(&r);
    json_t *err = json_object_get(root, "error");
    const char *got = json_string_value(json_object_get(err, "code"));
    if (r.status != status || !got || strcmp(got, code) != 0) {
        fprintf(stderr, "%s %s: %ld %.*s\n", method, path, r.status, (int)r.len, r.body);
    }
    assert_int_equal(r.status, status);
    assert_non_null(got);
    assert_string_equal(got, code);
    assert_int_equal(json_integer_value(json_object_get(err, "status")), status);
    assert_true(strlen(json_string_value(json_object_get(err, "message"))) > 0);
    json_decref(root);
    e2e_response_free(&r);
}

static const char *str(const json_t *o, const char *k) {
    return json_string_value(json_object_get(o, k));
}

static long long num(const json_t *o, const char *k) {
    return json_integer_value(json_object_get(o, k));
}

/* Produces the JSON message 'body' into 'topic'; returns the answer. */
static json_t *produce(Fixture *f, const char *topic, const char *body) {
    char path[256];
    snprintf(path, sizeof(path), "/v1/topics/%s/messages", topic);
    json_t *res = call(f, "POST", path, body, 200);
    assert_string_equal(str(res, "status"), "SEND_OK");
    return res;
}

/* GETs 'path' until its "messages" has 'n' entries (the index and the
 * queues are built a moment after the produce answer); returns it. */
static json_t *query_until(Fixture *f, const char *path, size_t n) {
    json_t *root = NULL;
    for (int tries = 0; tries < 500; tries++) {
        json_decref(root);
        root = call(f, "GET", path, NULL, 200);
        assert_int_equal(json_object_size(root), 1);
        json_t *msgs = json_object_get(root, "messages");
        assert_true(json_is_array(msgs));
        if (json_array_size(msgs) == n) return root;
        sleep_ms(10);
    }
    fail_msg("%s never answered %zu messages", path, n);
    return NULL;
}

/* The body of message 'i' of a query answer. */
static const char *body_at(const json_t *root, size_t i) {
    return str(json_array_get(json_object_get(root, "messages"), i), "body");
}

/* ---- by key --------------------------------------------------------------*/

static void test_query_by_key(void **state) {
    Fixture *f = *state;
    start(f);
    json_decref(call(f, "PUT", "/v1/topics/K", "{\"queues\":4}", 201));
    long long t0 = wall_ms();
    json_decref(produce(f, "K", "{\"body\":\"first\",\"keys\":[\"order-1\"],\"queueId\":0}"));
    sleep_ms(20);
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
        assert_string_equal(str(m, "topic"), "K");
        assert_int_equal(strlen(str(m, "msgId")), 32);
        assert_true(num(m, "storeTimestamp") >= t0);
    }
    assert_int_equal(num(json_array_get(msgs, 1), "queueId"), 3);
    assert_string_equal(str(json_array_get(msgs, 1), "msgId"), str(second, "msgId"));
    /* The same message as GET /v1/messages/{msgId}. */
    char path[256];
    snprintf(path, sizeof(path), "/v1/messages/%s", str(second, "msgId"));
    json_t *m = call(f, "GET", path, NULL, 200);
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
    snprintf(path, sizeof(path), "/v1/topics/K/messages?key=%s", str(second, "uniqueId"));
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
             wall_ms() + 1000);
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
    Fixture *f = *state;
    start(f);
    json_decref(call(f, "PUT", "/v1/topics/TR", "{\"queues\":3}", 201));
    long long t0 = wall_ms();
    static const char *const bodies[] = {"m0", "m1", "m2", "m3", "m4", "m5", "m6"};
    long long mid = 0;
    for (int i = 0; i < 7; i++) {
        char body[64];
        /* Queues out of step with the order: 2, 0, 1, 0, 2, 1, 0. */
        static const int qs[] = {2, 0, 1, 0, 2, 1, 0};
        snprintf(body, sizeof(body), "{\"body\":\"%s\",\"queueId\":%d}", bodies[i], qs[i]);
        json_decref(produce(f, "TR", body));
        if (i == 3) {
            sleep_ms(30);
            mid = wall_ms();
            sleep_ms(30);
        }
    }
    json_decref(produce(f, "Noise", "{\"body\":\"other topic\"}"));
    long long t1 = wall_ms();

    char path[256];
    snprintf(path, sizeof(path), "/v1/topics/TR/messages?begin=%lld&end=%lld&max=100", t0, t1);
    json_t *root = query_until(f, path, 7);
    json_t *msgs = json_object_get(root, "messages");
    long long prev_ts = 0;
    long long prev_off = -1;
    for (size_t i = 0; i < 7; i++) {
        json_t *m = json_array_get(msgs, i);
        assert_string_equal(str(m, "body"), bodies[i]);
        assert_string_equal(str(m, "topic"), "TR");
        assert_true(num(m, "storeTimestamp") >= prev_ts);
        assert_true(num(m, "commitLogOffset") > prev_off);
        prev_ts = num(m, "storeTimestamp");
        prev_off = num(m, "commitLogOffset");
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
    json_decref(call(f, "PUT", "/v1/topics/Empty", "{\"queues\":2}", 201));
    json_decref(query_until(f, "/v1/topics/Empty/messages?begin=0&end=9999999999999", 0));
    /* A clean exit (under make check, a sanitizer report makes it fail). */
    assert_int_equal(e2e_stop(&f->srv), 0);
}

/* ---- errors --------------------------------------------------------------*/

static void test_query_bad_parameters(void **state) {
    Fixture *f = *state;
    start(f);
    json_decref(call(f, "PUT", "/v1/topics/Q", "{\"queues\":1}", 201));
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
        expect_error(f, "GET", bad[i], 400, "INVALID_PARAMETER");
    }
    expect_error(f, "GET", "/v1/topics/bad.name/messages?key=k", 400, "INVALID_NAME");
    expect_error(f, "GET", "/v1/topics/Nope/messages?key=k", 404, "TOPIC_NOT_FOUND");
    expect_error(f, "GET", "/v1/topics/Nope/messages?begin=0&end=1", 404, "TOPIC_NOT_FOUND");
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
    json_decref(call(f, "GET", "/healthz", NULL, 200));
    /* A clean exit (under make check, a sanitizer report makes it fail). */
    assert_int_equal(e2e_stop(&f->srv), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_query_by_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_query_by_time_range_is_ordered, setup, teardown),
        cmocka_unit_test_setup_teardown(test_query_bad_parameters, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
