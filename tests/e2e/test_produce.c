/*
 * test_produce.c - end-to-end tests of produce, get-by-id and classic pull
 * against a real petrel: every body form round trip, batches, queue
 * selection (queueId, shardingKey), tag filters, auto-create on and off,
 * pull statuses, restart, SYNC_FLUSH (single and 8 concurrent producers)
 * and every validation error with its status and code.
 * Each case starts its own server in its own temporary directory.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "e2e.h"

static int setup(void **state) {
    return e2e_case_setup(state, "e2e-produce");
}

/* Checks a SEND_OK answer and returns it. */
static json_t *produce(E2eCase *f, const char *topic, const char *body) {
    char path[256];
    snprintf(path, sizeof(path), "/v1/topics/%s/messages", topic);
    json_t *res = e2e_call(f, "POST", path, E2E_JSON, body, 200);
    assert_string_equal(e2e_str(res, "status"), "SEND_OK");
    assert_int_equal(strlen(e2e_str(res, "msgId")), 32);
    assert_int_equal(strlen(e2e_str(res, "uniqueId")), 32);
    assert_true(json_is_null(json_object_get(res, "transactionId")));
    return res;
}

/* Pulls queue 'q' of 'topic' from 'offset' ('query' appended). */
static json_t *pull(E2eCase *f, const char *topic, int q, long long offset, const char *query) {
    char path[512];
    snprintf(path, sizeof(path), "/v1/topics/%s/queues/%d/messages?offset=%lld%s", topic, q,
             offset, query ? query : "");
    return e2e_call(f, "GET", path, NULL, NULL, 200);
}

static json_t *get_msg(E2eCase *f, const char *id) {
    char path[128];
    snprintf(path, sizeof(path), "/v1/messages/%s", id);
    return e2e_call(f, "GET", path, NULL, NULL, 200);
}

/* ---- round trips -----------------------------------------------------------*/

static void test_produce_json_utf8_get_and_pull_round_trip(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    json_t *res = produce(f, "Rt", "{\"body\":\"h\\u00e9llo\",\"tags\":\"TagA\",\"keys\":"
                          "[\"order-1\",\"o2\"],\"properties\":{\"color\":\"red\"},\"queueId\":2}");
    assert_int_equal(e2e_num(res, "queueId"), 2);
    assert_int_equal(e2e_num(res, "queueOffset"), 0);
    json_t *m = get_msg(f, e2e_str(res, "msgId"));
    assert_string_equal(e2e_str(m, "msgId"), e2e_str(res, "msgId"));
    assert_string_equal(e2e_str(m, "topic"), "Rt");
    assert_int_equal(e2e_num(m, "queueId"), 2);
    assert_int_equal(e2e_num(m, "queueOffset"), 0);
    assert_int_equal(e2e_num(m, "commitLogOffset"), 0);
    assert_string_equal(e2e_str(m, "tags"), "TagA");
    json_t *keys = json_object_get(m, "keys");
    assert_int_equal(json_array_size(keys), 2);
    assert_string_equal(json_string_value(json_array_get(keys, 0)), "order-1");
    assert_string_equal(json_string_value(json_array_get(keys, 1)), "o2");
    json_t *props = json_object_get(m, "properties");
    assert_int_equal(json_object_size(props), 1); /* system properties are hidden */
    assert_string_equal(e2e_str(props, "color"), "red");
    assert_string_equal(e2e_str(m, "body"), "h\xc3\xa9llo");
    assert_string_equal(e2e_str(m, "bodyEncoding"), "utf8");
    assert_true(e2e_num(m, "bornTimestamp") > 0);
    assert_true(e2e_num(m, "storeTimestamp") >= e2e_num(m, "bornTimestamp"));
    assert_int_equal(e2e_num(m, "reconsumeTimes"), 0);
    assert_true(e2e_num(m, "storeSize") > 95);

    e2e_wait_queue(f, "Rt", 2, 1);
    json_t *p = pull(f, "Rt", 2, 0, NULL);
    assert_string_equal(e2e_str(p, "status"), "FOUND");
    assert_int_equal(e2e_num(p, "nextOffset"), 1);
    assert_int_equal(e2e_num(p, "minOffset"), 0);
    assert_int_equal(e2e_num(p, "maxOffset"), 1);
    json_t *msgs = json_object_get(p, "messages");
    assert_int_equal(json_array_size(msgs), 1);
    assert_true(json_equal(json_array_get(msgs, 0), m));
    json_decref(p);
    json_decref(m);
    json_decref(res);
}

static void test_produce_base64_binary_body_round_trip(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    /* bytes 00 ff 10 80 41: not UTF-8, so answered as base64 */
    json_t *res = produce(f, "Bin", "{\"body\":\"AP8QgEE=\",\"bodyEncoding\":\"base64\"}");
    json_t *m = get_msg(f, e2e_str(res, "msgId"));
    assert_string_equal(e2e_str(m, "body"), "AP8QgEE=");
    assert_string_equal(e2e_str(m, "bodyEncoding"), "base64");
    json_decref(m);
    json_decref(res);
    /* base64 of valid UTF-8 text comes back as text */
    res = produce(f, "Bin", "{\"body\":\"aGk=\",\"bodyEncoding\":\"base64\"}");
    m = get_msg(f, e2e_str(res, "msgId"));
    assert_string_equal(e2e_str(m, "body"), "hi");
    assert_string_equal(e2e_str(m, "bodyEncoding"), "utf8");
    json_decref(m);
    json_decref(res);
}

static void test_produce_raw_octet_stream_and_text_plain(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    E2eRequest req = {.method = "POST",
                      .path = "/v1/topics/Raw/messages?tags=TagR&keys=k1,k2&queueId=1",
                      .body = "\x01\x02\xff",
                      .body_len = 3,
                      .content_type = "application/octet-stream"};
    E2eResponse r;
    assert_int_equal(e2e_http(&f->srv, &req, &r), 0);
    assert_int_equal(r.status, 200);
    json_t *res = e2e_json(&r);
    e2e_response_free(&r);
    assert_string_equal(e2e_str(res, "status"), "SEND_OK");
    assert_int_equal(e2e_num(res, "queueId"), 1);
    json_t *m = get_msg(f, e2e_str(res, "msgId"));
    assert_string_equal(e2e_str(m, "body"), "AQL/");
    assert_string_equal(e2e_str(m, "bodyEncoding"), "base64");
    assert_string_equal(e2e_str(m, "tags"), "TagR");
    assert_int_equal(json_array_size(json_object_get(m, "keys")), 2);
    assert_string_equal(json_string_value(json_array_get(json_object_get(m, "keys"), 1)), "k2");
    json_decref(m);
    json_decref(res);

    res = e2e_call(f, "POST", "/v1/topics/Raw/messages?shardingKey=s1", "text/plain; charset=utf-8",
                  "plain text body", 200);
    m = get_msg(f, e2e_str(res, "msgId"));
    assert_string_equal(e2e_str(m, "body"), "plain text body");
    assert_string_equal(e2e_str(m, "bodyEncoding"), "utf8");
    assert_string_equal(e2e_str(m, "tags"), "");
    assert_int_equal(json_array_size(json_object_get(m, "keys")), 0);
    int q = (int)e2e_num(res, "queueId");
    e2e_wait_queue(f, "Raw", q, e2e_num(res, "queueOffset") + 1);
    json_t *p = pull(f, "Raw", q, 0, NULL);
    json_t *msgs = json_object_get(p, "messages");
    assert_string_equal(e2e_str(json_array_get(msgs, json_array_size(msgs) - 1), "body"),
                        "plain text body");
    json_decref(p);
    json_decref(m);
    json_decref(res);
}

static void test_produce_batch_results_in_order_on_one_queue(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    json_decref(produce(f, "Batch", "{\"body\":\"first\",\"queueId\":3}"));
    char body[4096] = "{\"messages\":[";
    for (int i = 0; i < 10; i++) {
        char one[64];
        snprintf(one, sizeof(one), "%s{\"body\":\"m%d\",\"queueId\":3}", i ? "," : "", i);
        strcat(body, one);
    }
    strcat(body, "]}");
    json_t *res = e2e_call(f, "POST", "/v1/topics/Batch/messages", E2E_JSON, body, 200);
    json_t *results = json_object_get(res, "results");
    assert_int_equal(json_array_size(results), 10);
    for (size_t i = 0; i < 10; i++) {
        json_t *one = json_array_get(results, i);
        assert_string_equal(e2e_str(one, "status"), "SEND_OK");
        assert_int_equal(e2e_num(one, "queueId"), 3);
        assert_int_equal(e2e_num(one, "queueOffset"), (long long)i + 1);
        assert_true(json_is_null(json_object_get(one, "transactionId")));
    }
    e2e_wait_queue(f, "Batch", 3, 11);
    json_t *p = pull(f, "Batch", 3, 1, "&max=100");
    json_t *msgs = json_object_get(p, "messages");
    assert_int_equal(json_array_size(msgs), 10);
    for (size_t i = 0; i < 10; i++) {
        char want[16];
        snprintf(want, sizeof(want), "m%zu", i);
        json_t *m = json_array_get(msgs, i);
        assert_string_equal(e2e_str(m, "body"), want);
        assert_string_equal(e2e_str(m, "msgId"), e2e_str(json_array_get(results, i), "msgId"));
    }
    assert_int_equal(e2e_num(p, "nextOffset"), 11);
    json_decref(p);
    /* max limits the answer */
    p = pull(f, "Batch", 3, 0, "&max=4");
    assert_int_equal(json_array_size(json_object_get(p, "messages")), 4);
    assert_int_equal(e2e_num(p, "nextOffset"), 4);
    json_decref(p);
    json_decref(res);
}

static void test_produce_same_sharding_key_same_queue_in_order(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    json_decref(e2e_call(f, "PUT", "/v1/topics/Ord", E2E_JSON, "{\"queues\":8}", 201));
    long long q = -1;
    long long last_off = -1;
    for (int i = 0; i < 20; i++) {
        char body[128];
        snprintf(body, sizeof(body), "{\"body\":\"step-%02d\",\"shardingKey\":\"order-42\"}", i);
        json_t *res = produce(f, "Ord", body);
        if (q < 0) q = e2e_num(res, "queueId");
        assert_int_equal(e2e_num(res, "queueId"), q);
        assert_true(e2e_num(res, "queueOffset") > last_off);
        last_off = e2e_num(res, "queueOffset");
        json_decref(res);
        /* other keys interleaved */
        snprintf(body, sizeof(body), "{\"body\":\"x\",\"shardingKey\":\"other-%d\"}", i);
        json_decref(produce(f, "Ord", body));
    }
    /* Round robin without a key spreads over the queues. */
    long long seen = 0;
    for (int i = 0; i < 8; i++) {
        json_t *res = produce(f, "Ord", "{\"body\":\"rr\"}");
        seen |= 1LL << e2e_num(res, "queueId");
        json_decref(res);
    }
    assert_int_equal(seen, 0xff);
    e2e_wait_queue(f, "Ord", (int)q, last_off + 1);
    json_t *p = pull(f, "Ord", (int)q, 0, "&max=1000");
    json_t *msgs = json_object_get(p, "messages");
    int step = 0;
    for (size_t i = 0; i < json_array_size(msgs); i++) {
        const char *b = e2e_str(json_array_get(msgs, i), "body");
        if (strncmp(b, "step-", 5) != 0) continue;
        char want[16];
        snprintf(want, sizeof(want), "step-%02d", step++);
        assert_string_equal(b, want);
    }
    assert_int_equal(step, 20);
    json_decref(p);
}

static void test_pull_filters_by_tag(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    const char *tags[] = {"TagA", "TagB", "TagC"};
    for (int i = 0; i < 9; i++) {
        char body[128];
        snprintf(body, sizeof(body), "{\"body\":\"%d\",\"tags\":\"%s\",\"queueId\":0}", i,
                 tags[i % 3]);
        json_decref(produce(f, "Tg", body));
    }
    json_decref(produce(f, "Tg", "{\"body\":\"untagged\",\"queueId\":0}"));
    e2e_wait_queue(f, "Tg", 0, 10);
    json_t *p = pull(f, "Tg", 0, 0, "&tags=TagA");
    json_t *msgs = json_object_get(p, "messages");
    assert_int_equal(json_array_size(msgs), 3);
    for (size_t i = 0; i < 3; i++) {
        assert_string_equal(e2e_str(json_array_get(msgs, i), "tags"), "TagA");
    }
    assert_string_equal(e2e_str(p, "status"), "FOUND");
    json_decref(p);
    p = pull(f, "Tg", 0, 0, "&tags=TagA%20||%20TagC");
    assert_int_equal(json_array_size(json_object_get(p, "messages")), 6);
    json_decref(p);
    p = pull(f, "Tg", 0, 0, "&tags=*");
    assert_int_equal(json_array_size(json_object_get(p, "messages")), 10);
    json_decref(p);
    /* Nothing matches: NO_NEW_MSG, but nextOffset moves past what was scanned. */
    p = pull(f, "Tg", 0, 0, "&tags=TagZ");
    assert_string_equal(e2e_str(p, "status"), "NO_NEW_MSG");
    assert_int_equal(json_array_size(json_object_get(p, "messages")), 0);
    assert_int_equal(e2e_num(p, "nextOffset"), 10);
    json_decref(p);
}

/* ---- topics --------------------------------------------------------------*/

static void test_produce_auto_creates_topic_with_4_queues(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    json_decref(produce(f, "AutoT", "{\"body\":\"x\"}"));
    json_t *t = e2e_call(f, "GET", "/v1/topics/AutoT", NULL, NULL, 200);
    assert_int_equal(e2e_num(t, "queues"), 4);
    assert_string_equal(e2e_str(t, "perm"), "RW");
    assert_int_equal(json_array_size(json_object_get(t, "queueStats")), 4);
    json_decref(t);
}

static void test_produce_without_auto_create_is_404(void **state) {
    E2eCase *f = *state;
    static const char *const extra[] = {"--autoCreateTopicEnable=false", NULL};
    e2e_case_start(f, extra);
    e2e_expect_error(f, "POST", "/v1/topics/Nope/messages", E2E_JSON, "{\"body\":\"x\"}", 404,
                 "TOPIC_NOT_FOUND");
    e2e_expect_error(f, "POST", "/v1/topics/Nope/messages", "text/plain", "x", 404,
                 "TOPIC_NOT_FOUND");
    e2e_expect_error(f, "GET", "/v1/topics/Nope/queues/0/messages", NULL, NULL, 404,
                 "TOPIC_NOT_FOUND");
    e2e_expect_error(f, "GET", "/v1/topics/Nope", NULL, NULL, 404, "TOPIC_NOT_FOUND");
    json_decref(e2e_call(f, "PUT", "/v1/topics/Nope", E2E_JSON, "{\"queues\":2}", 201));
    json_decref(produce(f, "Nope", "{\"body\":\"x\"}"));
}

/* ---- pull statuses and errors --------------------------------------------*/

static void test_pull_statuses_for_offsets(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    json_decref(e2e_call(f, "PUT", "/v1/topics/Off", E2E_JSON, "{\"queues\":2}", 201));
    json_t *p = pull(f, "Off", 0, 0, NULL);
    assert_string_equal(e2e_str(p, "status"), "NO_NEW_MSG");
    assert_int_equal(e2e_num(p, "nextOffset"), 0);
    assert_int_equal(e2e_num(p, "maxOffset"), 0);
    json_decref(p);
    for (int i = 0; i < 3; i++) json_decref(produce(f, "Off", "{\"body\":\"x\",\"queueId\":0}"));
    e2e_wait_queue(f, "Off", 0, 3);
    p = pull(f, "Off", 0, 3, NULL);
    assert_string_equal(e2e_str(p, "status"), "NO_NEW_MSG");
    assert_int_equal(e2e_num(p, "nextOffset"), 3);
    assert_int_equal(json_array_size(json_object_get(p, "messages")), 0);
    json_decref(p);
    p = pull(f, "Off", 0, 99, NULL);
    assert_string_equal(e2e_str(p, "status"), "OFFSET_OVERFLOW");
    assert_int_equal(e2e_num(p, "nextOffset"), 3);
    assert_int_equal(e2e_num(p, "maxOffset"), 3);
    json_decref(p);
    p = pull(f, "Off", 0, 1, "&max=1");
    assert_string_equal(e2e_str(p, "status"), "FOUND");
    assert_int_equal(e2e_num(p, "nextOffset"), 2);
    json_decref(p);
    p = pull(f, "Off", 1, 5, NULL);
    assert_string_equal(e2e_str(p, "status"), "OFFSET_OVERFLOW");
    assert_int_equal(e2e_num(p, "nextOffset"), 0);
    json_decref(p);
}

static void test_pull_bad_parameters_are_400(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    json_decref(e2e_call(f, "PUT", "/v1/topics/P", E2E_JSON, "{\"queues\":2}", 201));
    static const struct {
        const char *path;
        const char *code;
    } cases[] = {
        {"/v1/topics/P/queues/2/messages", "INVALID_PARAMETER"},
        {"/v1/topics/P/queues/-1/messages", "INVALID_PARAMETER"},
        {"/v1/topics/P/queues/x/messages", "INVALID_PARAMETER"},
        {"/v1/topics/P/queues/0/messages?offset=-1", "INVALID_PARAMETER"},
        {"/v1/topics/P/queues/0/messages?offset=abc", "INVALID_PARAMETER"},
        {"/v1/topics/P/queues/0/messages?offset=99999999999999999999", "INVALID_PARAMETER"},
        {"/v1/topics/P/queues/0/messages?max=0", "INVALID_PARAMETER"},
        {"/v1/topics/P/queues/0/messages?max=1001", "INVALID_PARAMETER"},
        {"/v1/topics/P/queues/0/messages?waitMs=30001", "INVALID_PARAMETER"},
        {"/v1/topics/P/queues/0/messages?waitMs=-1", "INVALID_PARAMETER"},
        {"/v1/topics/P/queues/0/messages?tags=A%20||", "INVALID_PARAMETER"},
        {"/v1/topics/P/queues/0/messages?colour=red", "INVALID_PARAMETER"},
        {"/v1/topics/bad.name/queues/0/messages", "INVALID_NAME"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        e2e_expect_error(f, "GET", cases[i].path, NULL, NULL, 400, cases[i].code);
    }
    json_t *p =
        e2e_call(f, "GET", "/v1/topics/P/queues/0/messages?waitMs=0&max=1000", NULL, NULL, 200);
    json_decref(p);
}

static void test_get_message_errors(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    json_t *res = produce(f, "G", "{\"body\":\"x\"}");
    char id[40];
    snprintf(id, sizeof(id), "%s", e2e_str(res, "msgId"));
    json_decref(res);
    char path[128];
    e2e_expect_error(f, "GET", "/v1/messages/xyz", NULL, NULL, 400, "INVALID_MSG_ID");
    e2e_expect_error(f, "GET", "/v1/messages/0123456789ABCDEF0123456789ABCDEZ", NULL, NULL, 400,
                 "INVALID_MSG_ID");
    /* another broker's host */
    snprintf(path, sizeof(path), "/v1/messages/0A000001%s", id + 8);
    e2e_expect_error(f, "GET", path, NULL, NULL, 404, "MESSAGE_NOT_FOUND");
    /* past the end of the log, and inside a record */
    snprintf(path, sizeof(path), "/v1/messages/%.16s00000000000FFFFF", id);
    e2e_expect_error(f, "GET", path, NULL, NULL, 404, "MESSAGE_NOT_FOUND");
    snprintf(path, sizeof(path), "/v1/messages/%.16s0000000000000004", id);
    e2e_expect_error(f, "GET", path, NULL, NULL, 404, "MESSAGE_NOT_FOUND");
    /* lower-case hex is accepted */
    for (char *c = id; *c; c++) {
        if (*c >= 'A' && *c <= 'F') *c = (char)(*c - 'A' + 'a');
    }
    json_decref(get_msg(f, id));
}

/* ---- produce validation --------------------------------------------------*/

static void test_produce_bad_requests_get_their_errors(void **state) {
    E2eCase *f = *state;
    static const char *const extra[] = {"--maxMessageSize=1024", NULL};
    e2e_case_start(f, extra);
    json_decref(e2e_call(f, "PUT", "/v1/topics/V", E2E_JSON, "{\"queues\":2}", 201));
    static const struct {
        const char *body;
        long status;
        const char *code;
    } cases[] = {
        {"{", 400, "INVALID_JSON"},
        {"", 400, "INVALID_JSON"},
        {"[]", 400, "INVALID_JSON"},
        {"{\"body\":\"a\",\"body\":\"b\"}", 400, "INVALID_JSON"},
        {"{}", 400, "INVALID_FIELD"},
        {"{\"body\":1}", 400, "INVALID_FIELD"},
        {"{\"body\":\"\"}", 400, "INVALID_FIELD"},
        {"{\"body\":\"x\",\"bodyEncoding\":\"hex\"}", 400, "INVALID_FIELD"},
        {"{\"body\":\"a$==\",\"bodyEncoding\":\"base64\"}", 400, "INVALID_FIELD"},
        {"{\"body\":\"abc\",\"bodyEncoding\":\"base64\"}", 400, "INVALID_FIELD"},
        {"{\"body\":\"x\",\"tags\":1}", 400, "INVALID_FIELD"},
        {"{\"body\":\"x\",\"tags\":\"\"}", 400, "INVALID_FIELD"},
        {"{\"body\":\"x\",\"tags\":\"A||B\"}", 400, "INVALID_FIELD"},
        {"{\"body\":\"x\",\"keys\":\"k\"}", 400, "INVALID_FIELD"},
        {"{\"body\":\"x\",\"keys\":[1]}", 400, "INVALID_FIELD"},
        {"{\"body\":\"x\",\"keys\":[\"\"]}", 400, "INVALID_FIELD"},
        {"{\"body\":\"x\",\"keys\":[\"a b\"]}", 400, "INVALID_FIELD"},
        {"{\"body\":\"x\",\"properties\":[]}", 400, "INVALID_FIELD"},
        {"{\"body\":\"x\",\"properties\":{\"a\":1}}", 400, "INVALID_FIELD"},
        {"{\"body\":\"x\",\"properties\":{\"TAGS\":\"t\"}}", 400, "INVALID_FIELD"},
        {"{\"body\":\"x\",\"properties\":{\"UNIQ_KEY\":\"t\"}}", 400, "INVALID_FIELD"},
        {"{\"body\":\"x\",\"properties\":{\"\":\"t\"}}", 400, "INVALID_FIELD"},
        {"{\"body\":\"x\",\"properties\":{\"a\":\"\\u0001\"}}", 400, "INVALID_FIELD"},
        {"{\"body\":\"x\",\"shardingKey\":\"\"}", 400, "INVALID_FIELD"},
        {"{\"body\":\"x\",\"shardingKey\":5}", 400, "INVALID_FIELD"},
        {"{\"body\":\"x\",\"queueId\":2}", 400, "INVALID_FIELD"},
        {"{\"body\":\"x\",\"queueId\":-1}", 400, "INVALID_FIELD"},
        {"{\"body\":\"x\",\"queueId\":\"1\"}", 400, "INVALID_FIELD"},
        {"{\"body\":\"x\",\"delayLevel\":0}", 400, "INVALID_FIELD"},
        {"{\"body\":\"x\",\"delayLevel\":19}", 400, "INVALID_FIELD"},
        {"{\"body\":\"x\",\"delayLevel\":\"3\"}", 400, "INVALID_FIELD"},
        {"{\"body\":\"x\",\"deliverAt\":-1}", 400, "INVALID_FIELD"},
        {"{\"body\":\"x\",\"delayMs\":\"1000\"}", 400, "INVALID_FIELD"},
        {"{\"body\":\"x\",\"delayMs\":1000,\"delayLevel\":1}", 400, "INVALID_FIELD"},
        {"{\"body\":\"x\",\"colour\":\"red\"}", 400, "UNKNOWN_FIELD"},
        {"{\"messages\":[]}", 400, "INVALID_FIELD"},
        {"{\"messages\":{}}", 400, "INVALID_FIELD"},
        {"{\"messages\":[{\"body\":\"x\"}],\"body\":\"y\"}", 400, "UNKNOWN_FIELD"},
        {"{\"messages\":[{\"body\":\"x\"},5]}", 400, "INVALID_FIELD"},
        {"{\"messages\":[{\"body\":\"x\"},{\"body\":\"x\",\"queueId\":9}]}", 400,
         "INVALID_FIELD"},
        {"{\"messages\":[{\"body\":\"x\"},{\"body\":\"x\",\"tags\":\"\"}]}", 400,
         "INVALID_FIELD"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        e2e_expect_error(f, "POST", "/v1/topics/V/messages", E2E_JSON, cases[i].body,
                         cases[i].status, cases[i].code);
    }
    /* too long tags and keys, too many keys */
    char big[2048];
    snprintf(big, sizeof(big), "{\"body\":\"x\",\"tags\":\"%0256d\"}", 0);
    e2e_expect_error(f, "POST", "/v1/topics/V/messages", E2E_JSON, big, 400, "INVALID_FIELD");
    snprintf(big, sizeof(big), "{\"body\":\"x\",\"keys\":[\"%0256d\"]}", 0);
    e2e_expect_error(f, "POST", "/v1/topics/V/messages", E2E_JSON, big, 400, "INVALID_FIELD");
    strcpy(big, "{\"body\":\"x\",\"keys\":[");
    for (int i = 0; i < 33; i++) strcat(big, i ? ",\"k\"" : "\"k\"");
    strcat(big, "]}");
    e2e_expect_error(f, "POST", "/v1/topics/V/messages", E2E_JSON, big, 400, "INVALID_FIELD");
    /* body over maxMessageSize (1024): E2E_JSON, base64 and raw */
    char *huge = malloc(4096);
    assert_non_null(huge);
    snprintf(huge, 4096, "{\"body\":\"%01025d\"}", 0);
    e2e_expect_error(f, "POST", "/v1/topics/V/messages", E2E_JSON, huge, 413, "PAYLOAD_TOO_LARGE");
    memset(huge, 'A', 4095);
    huge[4095] = '\0';
    e2e_expect_error(f, "POST", "/v1/topics/V/messages", "application/octet-stream", huge, 413,
                 "PAYLOAD_TOO_LARGE");
    strcpy(huge, "{\"body\":\"");
    for (int i = 0; i < 344; i++) strcat(huge, "AAAA"); /* 1032 bytes */
    strcat(huge, "\",\"bodyEncoding\":\"base64\"}");
    e2e_expect_error(f, "POST", "/v1/topics/V/messages", E2E_JSON, huge, 413, "PAYLOAD_TOO_LARGE");
    free(huge);
    /* a batch of 1001 */
    size_t cap = 1001 * 14 + 64;
    char *batch = malloc(cap);
    assert_non_null(batch);
    strcpy(batch, "{\"messages\":[");
    for (int i = 0; i < 1001; i++) strcat(batch, i ? ",{\"body\":\"x\"}" : "{\"body\":\"x\"}");
    strcat(batch, "]}");
    e2e_stop_ok(f);
    e2e_case_start(f, NULL); /* default maxMessageSize so the request itself fits */
    e2e_expect_error(f, "POST", "/v1/topics/V/messages", E2E_JSON, batch, 400, "INVALID_FIELD");
    free(batch);
    /* raw form parameters */
    static const struct {
        const char *path;
        const char *code;
    } raw[] = {
        {"/v1/topics/V/messages?queueId=2", "INVALID_FIELD"},
        {"/v1/topics/V/messages?queueId=x", "INVALID_FIELD"},
        {"/v1/topics/V/messages?tags=", "INVALID_FIELD"},
        {"/v1/topics/V/messages?keys=a,,b", "INVALID_FIELD"},
        {"/v1/topics/V/messages?shardingKey=", "INVALID_FIELD"},
        {"/v1/topics/V/messages?delayLevel=0", "INVALID_FIELD"},
        {"/v1/topics/V/messages?delayLevel=x", "INVALID_FIELD"},
        {"/v1/topics/V/messages?delayMs=-100", "INVALID_FIELD"},
        {"/v1/topics/V/messages?deliverAt=x", "INVALID_FIELD"},
        {"/v1/topics/V/messages?colour=red", "UNKNOWN_FIELD"},
        {"/v1/topics/%25DLQ%25g/messages", "INVALID_NAME"},
        {"/v1/topics/a%20b/messages", "INVALID_NAME"},
    };
    for (size_t i = 0; i < sizeof(raw) / sizeof(raw[0]); i++) {
        e2e_expect_error(f, "POST", raw[i].path, "text/plain", "hello", 400, raw[i].code);
    }
    e2e_expect_error(f, "POST", "/v1/topics/V/messages", "text/plain", "", 400, "INVALID_FIELD");
    e2e_expect_error(f, "POST", "/v1/topics/V/messages", "application/x-www-form-urlencoded",
                 "body=x", 415, "UNSUPPORTED_MEDIA_TYPE");
    e2e_expect_error(f, "POST", "/v1/topics/V/messages", "application/xml", "<a/>", 415,
                 "UNSUPPORTED_MEDIA_TYPE");
    e2e_expect_error(f, "DELETE", "/v1/topics/V/messages", NULL, NULL, 405, "METHOD_NOT_ALLOWED");
    /* nothing was stored by any of the failures */
    json_t *qs = e2e_call(f, "GET", "/v1/topics/V/queues", NULL, NULL, 200);
    for (size_t i = 0; i < json_array_size(qs); i++) {
        assert_int_equal(e2e_num(json_array_get(qs, i), "maxOffset"), 0);
    }
    json_decref(qs);
    json_t *health = e2e_call(f, "GET", "/healthz", NULL, NULL, 200);
    assert_string_equal(e2e_str(health, "status"), "UP");
    assert_int_equal(e2e_num(json_object_get(health, "commitLog"), "writeOffset"), 0);
    json_decref(health);
}

/* ---- restart -------------------------------------------------------------*/

static void test_restart_keeps_topics_and_offsets_continue(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    json_decref(e2e_call(f, "PUT", "/v1/topics/Rs", E2E_JSON, "{\"queues\":2}", 201));
    json_t *first = produce(f, "Rs", "{\"body\":\"before\",\"queueId\":1}");
    json_decref(produce(f, "Rs", "{\"body\":\"before2\",\"queueId\":1}"));
    e2e_stop_ok(f);
    e2e_case_start(f, NULL);
    json_t *t = e2e_call(f, "GET", "/v1/topics/Rs", NULL, NULL, 200);
    assert_int_equal(e2e_num(t, "queues"), 2);
    json_decref(t);
    json_t *res = produce(f, "Rs", "{\"body\":\"after\",\"queueId\":1}");
    assert_int_equal(e2e_num(res, "queueOffset"), 2);
    json_decref(res);
    json_t *m = get_msg(f, e2e_str(first, "msgId"));
    assert_string_equal(e2e_str(m, "body"), "before");
    json_decref(m);
    json_decref(first);
    e2e_wait_queue(f, "Rs", 1, 3);
    json_t *p = pull(f, "Rs", 1, 0, NULL);
    json_t *msgs = json_object_get(p, "messages");
    assert_int_equal(json_array_size(msgs), 3);
    assert_string_equal(e2e_str(json_array_get(msgs, 2), "body"), "after");
    json_decref(p);
}

/* ---- SYNC_FLUSH ----------------------------------------------------------*/

static const char *const sync_flags[] = {"--flushDiskType=SYNC_FLUSH", NULL};

static void test_sync_flush_produce_answers_send_ok(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, sync_flags);
    json_t *res = produce(f, "S", "{\"body\":\"durable\"}");
    json_t *m = get_msg(f, e2e_str(res, "msgId"));
    assert_string_equal(e2e_str(m, "body"), "durable");
    json_decref(m);
    json_decref(res);
    res = e2e_call(f, "POST", "/v1/topics/S/messages", E2E_JSON,
               "{\"messages\":[{\"body\":\"a\"},{\"body\":\"b\"}]}", 200);
    json_t *results = json_object_get(res, "results");
    assert_int_equal(json_array_size(results), 2);
    assert_string_equal(e2e_str(json_array_get(results, 1), "status"), "SEND_OK");
    json_decref(res);
    res = e2e_call(f, "POST", "/v1/topics/S/messages", "text/plain", "raw", 200);
    assert_string_equal(e2e_str(res, "status"), "SEND_OK");
    json_decref(res);
    json_t *h = e2e_call(f, "GET", "/healthz", NULL, NULL, 200);
    json_t *cl = json_object_get(h, "commitLog");
    assert_int_equal(e2e_num(cl, "flushedOffset"), e2e_num(cl, "writeOffset"));
    json_decref(h);
    e2e_stop_ok(f);
}

#define SYNC_THREADS 8
#define SYNC_PER_THREAD 50

typedef struct Producer {
    const E2eServer *srv;
    int id;
    int ok;   /* SEND_OK answers */
} Producer;

static void *producer_main(void *arg) {
    Producer *p = arg;
    for (int i = 0; i < SYNC_PER_THREAD; i++) {
        char body[128];
        snprintf(body, sizeof(body), "{\"body\":\"t%d-%03d\",\"shardingKey\":\"t%d\"}", p->id, i,
                 p->id);
        E2eResponse r;
        if (e2e_send(p->srv, "POST", "/v1/topics/Conc/messages", E2E_JSON, body, &r) != 0) continue;
        json_t *res = r.status == 200 ? e2e_json(&r) : NULL;
        const char *st = json_string_value(json_object_get(res, "status"));
        if (st && strcmp(st, "SEND_OK") == 0) p->ok++;
        json_decref(res);
        e2e_response_free(&r);
    }
    return NULL;
}

static void test_sync_flush_concurrent_producers_all_acked_and_pulled(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, sync_flags);
    json_decref(e2e_call(f, "PUT", "/v1/topics/Conc", E2E_JSON, "{\"queues\":4}", 201));
    pthread_t th[SYNC_THREADS];
    Producer ps[SYNC_THREADS];
    for (int i = 0; i < SYNC_THREADS; i++) {
        ps[i] = (Producer){&f->srv, i, 0};
        assert_int_equal(pthread_create(&th[i], NULL, producer_main, &ps[i]), 0);
    }
    for (int i = 0; i < SYNC_THREADS; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < SYNC_THREADS; i++) assert_int_equal(ps[i].ok, SYNC_PER_THREAD);

    /* Wait for the dispatcher, then pull everything back: each thread's
     * messages (one sharding key, so one queue) complete and in order. */
    long long sum = 0;
    for (int tries = 0; tries < 500 && sum < SYNC_THREADS * SYNC_PER_THREAD; tries++) {
        json_t *qs = e2e_call(f, "GET", "/v1/topics/Conc/queues", NULL, NULL, 200);
        sum = 0;
        for (size_t q = 0; q < json_array_size(qs); q++) {
            sum += e2e_num(json_array_get(qs, q), "maxOffset");
        }
        json_decref(qs);
        if (sum < SYNC_THREADS * SYNC_PER_THREAD) e2e_sleep_ms(10);
    }
    assert_int_equal(sum, SYNC_THREADS * SYNC_PER_THREAD);
    int next[SYNC_THREADS] = {0};
    int total = 0;
    for (int q = 0; q < 4; q++) {
        long long off = 0;
        for (;;) {
            json_t *p = pull(f, "Conc", q, off, "&max=1000");
            json_t *msgs = json_object_get(p, "messages");
            for (size_t i = 0; i < json_array_size(msgs); i++) {
                int t = -1;
                int seq = -1;
                assert_int_equal(sscanf(e2e_str(json_array_get(msgs, i), "body"), "t%d-%d", &t,
                                        &seq), 2);
                assert_true(t >= 0 && t < SYNC_THREADS);
                assert_int_equal(seq, next[t]);
                next[t]++;
                total++;
            }
            bool found = strcmp(e2e_str(p, "status"), "FOUND") == 0;
            off = e2e_num(p, "nextOffset");
            json_decref(p);
            if (!found) break;
        }
    }
    assert_int_equal(total, SYNC_THREADS * SYNC_PER_THREAD);
    for (int t = 0; t < SYNC_THREADS; t++) assert_int_equal(next[t], SYNC_PER_THREAD);
    e2e_stop_ok(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_produce_json_utf8_get_and_pull_round_trip, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_produce_base64_binary_body_round_trip, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_produce_raw_octet_stream_and_text_plain, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_produce_batch_results_in_order_on_one_queue, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_produce_same_sharding_key_same_queue_in_order,
                                        setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_pull_filters_by_tag, setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_produce_auto_creates_topic_with_4_queues, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_produce_without_auto_create_is_404, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_pull_statuses_for_offsets, setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_pull_bad_parameters_are_400, setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_get_message_errors, setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_produce_bad_requests_get_their_errors, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_restart_keeps_topics_and_offsets_continue, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_sync_flush_produce_answers_send_ok, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(
            test_sync_flush_concurrent_producers_all_acked_and_pulled, setup, e2e_case_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
