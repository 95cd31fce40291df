/*
 * test_idempotency.c - end-to-end tests of Idempotency-Key on produce
 * against a real petrel: a retry gets the first answer (marked
 * Idempotency-Replayed) and stores nothing (single and batch), keys are
 * per topic, error answers are not remembered, a rejected request leaves
 * no topic behind, malformed keys are 400, the window expires, and racing
 * retries under SYNC_FLUSH store one message.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2e.h"

static int setup(void **state) {
    return e2e_case_setup(state, "e2e-idem");
}

/* Sends a JSON produce with 'key' (NULL: no header); fills 'out'. */
static void produce_with_key(E2eCase *f, const char *topic, const char *key, const char *body,
                             E2eResponse *out) {
    char path[256], hdr[512];
    snprintf(path, sizeof(path), "/v1/topics/%s/messages", topic);
    snprintf(hdr, sizeof(hdr), "Idempotency-Key: %s", key ? key : "");
    const char *headers[] = {hdr, NULL};
    E2eRequest req = {.method = "POST",
                      .path = path,
                      .body = body,
                      .body_len = strlen(body),
                      .content_type = E2E_JSON,
                      .headers = key ? headers : NULL};
    assert_int_equal(e2e_http(&f->srv, &req, out), 0);
}

static bool replayed(const E2eResponse *r) {
    char v[32];
    return e2e_header(r, "Idempotency-Replayed", v, sizeof(v)) && strcmp(v, "true") == 0;
}

/* Sum of maxOffset over every queue of 'topic'. */
static long long stored(E2eCase *f, const char *topic) {
    char path[256];
    snprintf(path, sizeof(path), "/v1/topics/%s/queues", topic);
    json_t *qs = e2e_call(f, "GET", path, NULL, NULL, 200);
    long long n = 0;
    size_t i;
    json_t *q;
    json_array_foreach(qs, i, q) n += e2e_num(q, "maxOffset");
    json_decref(qs);
    return n;
}

static void test_retry_gets_first_answer(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    E2eResponse a, b;
    produce_with_key(f, "Idem", "order-1-created", "{\"body\":\"first\"}", &a);
    assert_int_equal(a.status, 200);
    assert_false(replayed(&a));
    /* a different body under the same key still gets the first answer */
    produce_with_key(f, "Idem", "order-1-created", "{\"body\":\"second\"}", &b);
    assert_int_equal(b.status, 200);
    assert_true(replayed(&b));
    assert_int_equal(a.len, b.len);
    assert_memory_equal(a.body, b.body, a.len);
    json_t *first = e2e_json(&a);
    e2e_wait_queue(f, "Idem", (int)e2e_num(first, "queueId"), 1);
    e2e_sleep_ms(100); /* a second append, if any, would be dispatched by now */
    assert_int_equal(stored(f, "Idem"), 1);
    /* the stored message is the first body */
    char path[128];
    snprintf(path, sizeof(path), "/v1/messages/%s", e2e_str(first, "msgId"));
    json_t *msg = e2e_call(f, "GET", path, NULL, NULL, 200);
    assert_string_equal(e2e_str(msg, "body"), "first");
    json_decref(msg);
    json_decref(first);
    e2e_response_free(&a);
    e2e_response_free(&b);

    /* the same key on another topic is another operation */
    produce_with_key(f, "Idem2", "order-1-created", "{\"body\":\"other\"}", &a);
    assert_int_equal(a.status, 200);
    assert_false(replayed(&a));
    e2e_response_free(&a);
    /* no key: every request stores */
    produce_with_key(f, "Idem", NULL, "{\"body\":\"x\"}", &a);
    produce_with_key(f, "Idem", NULL, "{\"body\":\"x\"}", &b);
    assert_int_equal(a.status, 200);
    assert_int_equal(b.status, 200);
    assert_string_not_equal(a.body, b.body);
    e2e_response_free(&a);
    e2e_response_free(&b);
}

static void test_batch_replay(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    const char *batch = "{\"messages\":[{\"body\":\"a\",\"queueId\":0},{\"body\":\"b\","
                        "\"queueId\":0},{\"body\":\"c\",\"queueId\":0}]}";
    E2eResponse a, b;
    produce_with_key(f, "IdemB", "batch-7", batch, &a);
    produce_with_key(f, "IdemB", "batch-7", batch, &b);
    assert_int_equal(a.status, 200);
    assert_int_equal(b.status, 200);
    assert_true(replayed(&b));
    assert_string_equal(a.body, b.body);
    e2e_wait_queue(f, "IdemB", 0, 3);
    e2e_sleep_ms(100);
    assert_int_equal(stored(f, "IdemB"), 3);
    e2e_response_free(&a);
    e2e_response_free(&b);
}

static void test_errors_are_not_remembered(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    E2eResponse a;
    /* a reserved property name: 400, nothing stored, no topic created */
    produce_with_key(f, "IdemE", "k-err", "{\"body\":\"x\",\"properties\":{\"TAGS\":\"t\"}}", &a);
    assert_int_equal(a.status, 400);
    e2e_response_free(&a);
    e2e_expect_error(f, "GET", "/v1/topics/IdemE", NULL, NULL, 404, "TOPIC_NOT_FOUND");
    /* a bad queueId (checked after the key is claimed): 400, claim dropped */
    json_decref(e2e_call(f, "PUT", "/v1/topics/IdemE", E2E_JSON, "{\"queues\":2}", 201));
    produce_with_key(f, "IdemE", "k-err", "{\"body\":\"x\",\"queueId\":5}", &a);
    assert_int_equal(a.status, 400);
    e2e_response_free(&a);
    /* the corrected retry is produced, not replayed */
    produce_with_key(f, "IdemE", "k-err", "{\"body\":\"x\",\"queueId\":1}", &a);
    assert_int_equal(a.status, 200);
    assert_false(replayed(&a));
    e2e_response_free(&a);
    produce_with_key(f, "IdemE", "k-err", "{\"body\":\"x\",\"queueId\":1}", &a);
    assert_true(replayed(&a));
    e2e_response_free(&a);
}

static void test_malformed_keys(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    char long_key[300];
    memset(long_key, 'k', 256);
    long_key[256] = '\0';
    const char *bad[] = {"has space", long_key, "tab\there", "\xc3\xa9t\xc3\xa9"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        E2eResponse a;
        produce_with_key(f, "IdemM", bad[i], "{\"body\":\"x\"}", &a);
        assert_int_equal(a.status, 400);
        json_t *root = e2e_json(&a);
        assert_string_equal(e2e_str(json_object_get(root, "error"), "code"), "INVALID_HEADER");
        json_decref(root);
        e2e_response_free(&a);
    }
    long_key[255] = '\0'; /* 255 bytes: the longest allowed */
    E2eResponse a;
    produce_with_key(f, "IdemM", long_key, "{\"body\":\"x\"}", &a);
    assert_int_equal(a.status, 200);
    e2e_response_free(&a);
}

static void test_window_expires(void **state) {
    E2eCase *f = *state;
    const char *extra[] = {"--idempotencyWindow=1000", NULL};
    e2e_case_start(f, extra);
    E2eResponse a, b;
    produce_with_key(f, "IdemW", "w", "{\"body\":\"x\"}", &a);
    e2e_sleep_ms(1200);
    produce_with_key(f, "IdemW", "w", "{\"body\":\"x\"}", &b);
    assert_int_equal(b.status, 200);
    assert_false(replayed(&b));
    assert_string_not_equal(a.body, b.body);
    e2e_response_free(&a);
    e2e_response_free(&b);
}

typedef struct Racer {
    E2eCase *f;
    E2eResponse resp;
} Racer;

static void *race(void *arg) {
    Racer *r = arg;
    produce_with_key(r->f, "IdemR", "race-1", "{\"body\":\"once\"}", &r->resp);
    return NULL;
}

static void test_racing_retries_store_once(void **state) {
    E2eCase *f = *state;
    const char *extra[] = {"--flushDiskType=SYNC_FLUSH", NULL};
    e2e_case_start(f, extra);
    json_decref(e2e_call(f, "PUT", "/v1/topics/IdemR", E2E_JSON, "{\"queues\":1}", 201));
    enum { N = 8 };
    Racer rs[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        rs[i] = (Racer){.f = f};
        pthread_create(&th[i], NULL, race, &rs[i]);
    }
    const char *first = NULL;
    int ok = 0, busy = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        if (rs[i].resp.status == 200) {
            ok++;
            if (!first) first = rs[i].resp.body;
            assert_string_equal(rs[i].resp.body, first); /* one answer for all */
        } else {
            assert_int_equal(rs[i].resp.status, 409);
            json_t *root = e2e_json(&rs[i].resp);
            assert_string_equal(e2e_str(json_object_get(root, "error"), "code"),
                                "IDEMPOTENCY_KEY_IN_USE");
            json_decref(root);
            busy++;
        }
    }
    assert_true(ok >= 1);
    assert_int_equal(ok + busy, N);
    e2e_sleep_ms(100);
    assert_int_equal(stored(f, "IdemR"), 1);
    for (int i = 0; i < N; i++) e2e_response_free(&rs[i].resp);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_retry_gets_first_answer, setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_batch_replay, setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_errors_are_not_remembered, setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_malformed_keys, setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_window_expires, setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_racing_retries_store_once, setup, e2e_case_teardown),
    };
    return cmocka_run_group_tests_name("e2e-idempotency", tests, NULL, NULL);
}
