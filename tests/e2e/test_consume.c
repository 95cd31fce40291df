/*
 * test_consume.c - end-to-end tests of receive/ack consumption (API.md
 * "Consume - receive / ack", core/pop.h) against a real petrel: two
 * receivers splitting a topic (and the consumer offsets they leave),
 * invisibility expiry and redelivery, long-poll waits, the in-flight
 * threshold, nack through the retry topic to the DLQ and a resend back,
 * the nack retry ladder, TAG and SQL92 filters (also past a long run of
 * non-matching messages), orderly groups (per-key order under concurrent
 * receivers, a nack keeps the queue waiting, suspend time, DLQ), Server-
 * Sent Events streams (events, acks, keep-alive, a client that goes
 * away), kill -9 (journal only, and after a snapshot) and SIGTERM with
 * messages in flight, and every validation error.
 * Worker threads use only the thread-safe helpers (no cmocka assertion
 * off the main thread): they note their first problem in a string that
 * the main thread asserts empty.  Each case starts its own server.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "e2e.h"

static int setup(void **state) {
    return e2e_case_setup(state, "e2e-consume");
}

/* ---- helpers safe on any thread --------------------------------------------*/

/* Sends 'method' 'path' with the JSON 'body' (NULL: none); '*status' is
 * the HTTP status (0 on a failed transfer).  Returns the parsed body
 * (caller owns) or NULL. */
static json_t *http_json(const E2eServer *s, const char *method, const char *path,
                         const char *body, long *status) {
    E2eResponse r;
    *status = 0;
    int rc = e2e_send(s, method, path, body ? E2E_JSON : NULL, body, &r);
    json_t *root = NULL;
    if (rc == 0) {
        *status = r.status;
        if (r.len) root = json_loadb(r.body, r.len, 0, NULL);
    }
    e2e_response_free(&r);
    return root;
}

/* The JSON text of 'v' (stolen; caller frees the text). */
static char *dump(json_t *v) {
    char *s = json_dumps(v, JSON_COMPACT);
    json_decref(v);
    return s;
}

/* An ack body {"topic":'topic',"receiptHandles":[the receiptHandle of
 * every message of 'msgs']} (caller frees). */
static char *ack_body_of(const char *topic, const json_t *msgs) {
    json_t *hs = json_array();
    for (size_t i = 0; i < json_array_size(msgs); i++)
        json_array_append_new(hs, json_string(e2e_str(json_array_get(msgs, i), "receiptHandle")));
    return dump(json_pack("{s:s, s:o}", "topic", topic, "receiptHandles", hs));
}

/* Acks every message of 'msgs'.  Returns NULL when each result is OK,
 * else a description of the first problem (static). */
static const char *ack_all_mt(const E2eServer *s, const char *group, const char *topic,
                              const json_t *msgs) {
    if (json_array_size(msgs) == 0) return NULL;
    char path[256];
    snprintf(path, sizeof(path), "/v1/groups/%s/ack", group);
    char *body = ack_body_of(topic, msgs);
    long st = 0;
    json_t *res = http_json(s, "POST", path, body, &st);
    free(body);
    const char *bad = NULL;
    json_t *results = json_object_get(res, "results");
    if (st != 200) {
        bad = "ack: status is not 200";
    } else if (json_array_size(results) != json_array_size(msgs)) {
        bad = "ack: not one result per handle";
    } else {
        for (size_t i = 0; i < json_array_size(results); i++) {
            json_t *r = json_array_get(results, i);
            const char *h = e2e_str(r, "receiptHandle");
            const char *want = e2e_str(json_array_get(msgs, i), "receiptHandle");
            if (!h || !want || strcmp(h, want) != 0) bad = "ack: results out of order";
            else if (!e2e_str(r, "status") || strcmp(e2e_str(r, "status"), "OK") != 0)
                bad = "ack: a status is not OK";
            if (bad) break;
        }
    }
    json_decref(res);
    return bad;
}

/* Notes the first problem of a worker thread into 'err' (cap 256). */
static void note(char *err, pthread_mutex_t *mu, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void note(char *err, pthread_mutex_t *mu, const char *fmt, ...) {
    pthread_mutex_lock(mu);
    if (err[0] == '\0') {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, 256, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(mu);
}

/* ---- helpers for the main thread (cmocka) ----------------------------------*/

/* Produces 'msg' (stolen) to 'topic'; returns the SEND_OK answer. */
static json_t *produce(E2eCase *c, const char *topic, json_t *msg) {
    char path[256];
    snprintf(path, sizeof(path), "/v1/topics/%s/messages", topic);
    char *body = dump(msg);
    json_t *res = e2e_call(c, "POST", path, E2E_JSON, body, 200);
    free(body);
    assert_string_equal(e2e_str(res, "status"), "SEND_OK");
    return res;
}

/* Produces the batch 'msgs' (stolen) to 'topic'; returns the answer. */
static json_t *produce_batch(E2eCase *c, const char *topic, json_t *msgs) {
    char path[256];
    snprintf(path, sizeof(path), "/v1/topics/%s/messages", topic);
    size_t n = json_array_size(msgs);
    char *body = dump(json_pack("{s:o}", "messages", msgs));
    json_t *res = e2e_call(c, "POST", path, E2E_JSON, body, 200);
    free(body);
    assert_int_equal(json_array_size(json_object_get(res, "results")), n);
    return res;
}

static void produce_body(E2eCase *c, const char *topic, const char *body, int queue_id) {
    json_decref(produce(c, topic, json_pack("{s:s, s:i}", "body", body, "queueId", queue_id)));
}

/* POST /v1/groups/'group'/receive with the body printed from 'fmt';
 * expects 200 and returns the answer (caller owns). */
static json_t *receive(E2eCase *c, const char *group, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static json_t *receive(E2eCase *c, const char *group, const char *fmt, ...) {
    char path[256];
    char body[1024];
    snprintf(path, sizeof(path), "/v1/groups/%s/receive", group);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof(body), fmt, ap);
    va_end(ap);
    json_t *res = e2e_call(c, "POST", path, E2E_JSON, body, 200);
    assert_non_null(res);
    assert_true(json_is_array(json_object_get(res, "messages")));
    return res;
}

static json_t *msgs_of(const json_t *res) {
    return json_object_get(res, "messages");
}

/* Acks 'handle' of 'group' on 'topic' and asserts its result 'want'. */
static void expect_ack(E2eCase *c, const char *group, const char *topic, const char *handle,
                       const char *want) {
    char path[256];
    snprintf(path, sizeof(path), "/v1/groups/%s/ack", group);
    char *body = dump(json_pack("{s:s, s:[s]}", "topic", topic, "receiptHandles", handle));
    json_t *res = e2e_call(c, "POST", path, E2E_JSON, body, 200);
    free(body);
    json_t *results = json_object_get(res, "results");
    assert_int_equal(json_array_size(results), 1);
    assert_string_equal(e2e_str(json_array_get(results, 0), "receiptHandle"), handle);
    const char *got = e2e_str(json_array_get(results, 0), "status");
    if (!got || strcmp(got, want) != 0)
        fprintf(stderr, "ack %s on %s: %s, expected %s\n", handle, group, got, want);
    assert_non_null(got);
    assert_string_equal(got, want);
    json_decref(res);
}

/* Acks every message of 'msgs' and asserts each result is OK. */
static void ack_all(E2eCase *c, const char *group, const char *topic, const json_t *msgs) {
    const char *bad = ack_all_mt(&c->srv, group, topic, msgs);
    if (bad) fail_msg("%s", bad);
}

/* Nacks 'handle' ('delay_ms' < 0: no delayMs) and asserts 'want'. */
static void expect_nack(E2eCase *c, const char *group, const char *topic, const char *handle,
                        long delay_ms, const char *want) {
    char path[256];
    snprintf(path, sizeof(path), "/v1/groups/%s/nack", group);
    json_t *req = json_pack("{s:s, s:s}", "topic", topic, "receiptHandle", handle);
    if (delay_ms >= 0) json_object_set_new(req, "delayMs", json_integer(delay_ms));
    char *body = dump(req);
    json_t *res = e2e_call(c, "POST", path, E2E_JSON, body, 200);
    free(body);
    assert_string_equal(e2e_str(res, "receiptHandle"), handle);
    assert_string_equal(e2e_str(res, "status"), want);
    json_decref(res);
}

/* PUT /v1/groups/'group' 'body'; false (after a message) when the route
 * answers 501 (not implemented yet). */
static bool group_put(E2eCase *c, const char *group, const char *body) {
    char path[256];
    snprintf(path, sizeof(path), "/v1/groups/%s", group);
    E2eResponse r;
    assert_int_equal(e2e_send(&c->srv, "PUT", path, E2E_JSON, body, &r), 0);
    long st = r.status;
    if (st != 200 && st != 201) fprintf(stderr, "PUT %s: %ld %.*s\n", path, st, (int)r.len, r.body);
    e2e_response_free(&r);
    if (st == 501) {
        print_message("PUT /v1/groups/{group} answers 501: group settings cannot be set; "
                      "skipping this case\n");
        return false;
    }
    assert_true(st == 200 || st == 201);
    return true;
}

/* Asserts the API.md error answer as e2e_expect_error does, and that its
 * message contains 'needle'. */
static void expect_error_msg(E2eCase *c, const char *method, const char *path, const char *ct,
                             const char *body, long status, const char *code,
                             const char *needle) {
    E2eResponse r;
    assert_int_equal(e2e_send(&c->srv, method, path, ct, body, &r), 0);
    json_t *root = e2e_json(&r);
    json_t *err = json_object_get(root, "error");
    const char *got = e2e_str(err, "code");
    const char *msg = e2e_str(err, "message");
    bool ok = r.status == status && got && strcmp(got, code) == 0 && msg &&
              strstr(msg, needle) != NULL;
    if (!ok)
        fprintf(stderr, "%s %s %.120s: %ld %.*s (expected %ld %s with '%s')\n", method, path,
                body ? body : "", r.status, (int)r.len, r.body, status, code, needle);
    assert_int_equal(r.status, status);
    assert_non_null(got);
    assert_string_equal(got, code);
    assert_int_equal(e2e_num(err, "status"), status);
    assert_non_null(msg);
    assert_non_null(strstr(msg, needle));
    json_decref(root);
    e2e_response_free(&r);
}

/* The number N of a body "<prefix>N"; -1 when it is not one. */
static int body_index(const json_t *m, char prefix) {
    const char *b = e2e_str(m, "body");
    if (!b || b[0] != prefix || b[1] < '0' || b[1] > '9') return -1;
    return atoi(b + 1);
}

/* ============================================================================
 * 1. two receivers split a topic
 * ==========================================================================*/

#define SPLIT_N 200

typedef struct Splitter {
    const E2eServer *srv;
    int id;                      /* 0 or 1 */
    atomic_int (*got)[2];        /* [SPLIT_N][receiver]: deliveries */
    atomic_int *acked;           /* acknowledged by both */
    pthread_mutex_t *mu;
    char *err;
    int received;                /* this receiver's deliveries */
} Splitter;

static void *splitter_main(void *arg) {
    Splitter *s = arg;
    long long deadline = e2e_now_ms() + 20000;
    while (atomic_load(s->acked) < SPLIT_N && e2e_now_ms() < deadline && !s->err[0]) {
        long st = 0;
        json_t *res = http_json(s->srv, "POST", "/v1/groups/gSplit/receive",
                                "{\"topic\":\"Split\",\"maxMessages\":16,\"invisibleMs\":30000,"
                                "\"waitMs\":1000}",
                                &st);
        json_t *msgs = json_object_get(res, "messages");
        if (st != 200 || !json_is_array(msgs)) {
            note(s->err, s->mu, "receiver %d: receive answered %ld", s->id, st);
            json_decref(res);
            break;
        }
        if (json_array_size(msgs) > 16)
            note(s->err, s->mu, "receiver %d: %zu messages > maxMessages", s->id,
                 json_array_size(msgs));
        for (size_t i = 0; i < json_array_size(msgs); i++) {
            json_t *m = json_array_get(msgs, i);
            int k = body_index(m, 'm');
            if (k < 0 || k >= SPLIT_N) {
                note(s->err, s->mu, "receiver %d: unexpected body '%s'", s->id,
                     e2e_str(m, "body"));
                continue;
            }
            if (e2e_num(m, "reconsumeTimes") != 0)
                note(s->err, s->mu, "m%d: reconsumeTimes %lld", k, e2e_num(m, "reconsumeTimes"));
            atomic_fetch_add(&s->got[k][s->id], 1);
            s->received++;
        }
        const char *bad = ack_all_mt(s->srv, "gSplit", "Split", msgs);
        if (bad) note(s->err, s->mu, "receiver %d: %s", s->id, bad);
        atomic_fetch_add(s->acked, (int)json_array_size(msgs));
        json_decref(res);
    }
    return NULL;
}

static void test_pop_two_receivers_split_a_topic(void **state) {
    E2eCase *c = *state;
    e2e_case_start(c, NULL);
    e2e_create_topic(c, "Split", 8);
    for (int i = 0; i < SPLIT_N; i++) {
        char b[16];
        snprintf(b, sizeof(b), "m%d", i);
        produce_body(c, "Split", b, i % 8);
    }
    for (int q = 0; q < 8; q++) e2e_wait_queue(c, "Split", q, SPLIT_N / 8);

    static atomic_int got[SPLIT_N][2];
    for (int i = 0; i < SPLIT_N; i++) {
        atomic_init(&got[i][0], 0);
        atomic_init(&got[i][1], 0);
    }
    atomic_int acked;
    atomic_init(&acked, 0);
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    char err[256] = "";
    Splitter sp[2];
    pthread_t th[2];
    long long t0 = e2e_now_ms();
    for (int i = 0; i < 2; i++) {
        sp[i] = (Splitter){.srv = &c->srv, .id = i, .got = got, .acked = &acked, .mu = &mu,
                           .err = err};
        assert_int_equal(pthread_create(&th[i], NULL, splitter_main, &sp[i]), 0);
    }
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    print_message("200 messages received and acked by two receivers in %lld ms (%d + %d)\n",
                  e2e_now_ms() - t0, sp[0].received, sp[1].received);
    if (err[0]) fail_msg("%s", err);
    assert_int_equal(atomic_load(&acked), SPLIT_N);
    for (int i = 0; i < SPLIT_N; i++) {
        int a = atomic_load(&got[i][0]);
        int b = atomic_load(&got[i][1]);
        if (a + b != 1) fail_msg("m%d delivered %d times to receiver 0, %d to receiver 1", i, a, b);
    }
    assert_int_equal(sp[0].received + sp[1].received, SPLIT_N);
    assert_true(sp[0].received > 0); /* both took part */
    assert_true(sp[1].received > 0);
    /* nothing left, nothing comes back */
    json_t *res = receive(c, "gSplit", "{\"topic\":\"Split\",\"waitMs\":0}");
    assert_int_equal(json_array_size(msgs_of(res)), 0);
    json_decref(res);
    /* the acks are the group's consumer offsets */
    json_t *p = e2e_call(c, "GET", "/v1/groups/gSplit/progress?topic=Split", NULL, NULL, 200);
    assert_int_equal(e2e_num(p, "totalLag"), 0);
    json_t *qs = json_object_get(p, "queues");
    assert_int_equal(json_array_size(qs), 8);
    for (size_t q = 0; q < 8; q++) {
        json_t *one = json_array_get(qs, q);
        assert_int_equal(e2e_num(one, "brokerOffset"), SPLIT_N / 8);
        assert_int_equal(e2e_num(one, "consumerOffset"), SPLIT_N / 8);
        assert_int_equal(e2e_num(one, "inflight"), 0);
    }
    json_decref(p);
}

/* ============================================================================
 * 2. invisibility expiry
 * ==========================================================================*/

static void test_pop_unacked_message_comes_back_after_invisibility(void **state) {
    E2eCase *c = *state;
    e2e_case_start(c, NULL);
    e2e_create_topic(c, "Inv", 1);
    json_t *sent = produce(c, "Inv", json_pack("{s:s, s:s}", "body", "inv-body", "tags", "T1"));
    e2e_wait_queue(c, "Inv", 0, 1);

    long long t_first = e2e_now_ms();
    json_t *r1 = receive(c, "gInv", "{\"topic\":\"Inv\",\"invisibleMs\":1000,\"waitMs\":0}");
    assert_int_equal(json_array_size(msgs_of(r1)), 1);
    json_t *m1 = json_array_get(msgs_of(r1), 0);
    assert_string_equal(e2e_str(m1, "body"), "inv-body");
    assert_string_equal(e2e_str(m1, "msgId"), e2e_str(sent, "msgId"));
    assert_string_equal(e2e_str(m1, "topic"), "Inv");
    assert_string_equal(e2e_str(m1, "tags"), "T1");
    assert_int_equal(e2e_num(m1, "reconsumeTimes"), 0);
    assert_int_equal(e2e_num(m1, "queueOffset"), 0);
    assert_int_equal(strlen(e2e_str(m1, "receiptHandle")), 52);
    assert_null(json_object_get(m1, "originMsgId"));

    /* hidden now */
    json_t *r2 = receive(c, "gInv", "{\"topic\":\"Inv\",\"waitMs\":0}");
    assert_int_equal(json_array_size(msgs_of(r2)), 0);
    json_decref(r2);

    /* back after about 1 s: the long poll is answered by the redelivery */
    json_t *r3 = receive(c, "gInv", "{\"topic\":\"Inv\",\"invisibleMs\":30000,\"waitMs\":3000}");
    long long back = e2e_now_ms() - t_first;
    print_message("redelivered %lld ms after the first receive\n", back);
    assert_int_equal(json_array_size(msgs_of(r3)), 1);
    json_t *m3 = json_array_get(msgs_of(r3), 0);
    assert_true(back >= 1000);
    assert_true(back < 2900);
    assert_string_equal(e2e_str(m3, "body"), "inv-body");
    assert_string_equal(e2e_str(m3, "topic"), "Inv");
    assert_string_equal(e2e_str(m3, "tags"), "T1");
    assert_int_equal(e2e_num(m3, "reconsumeTimes"), 1);
    assert_string_not_equal(e2e_str(m3, "receiptHandle"), e2e_str(m1, "receiptHandle"));
    assert_non_null(e2e_str(m3, "originMsgId"));
    assert_string_equal(e2e_str(m3, "originMsgId"), e2e_str(m1, "msgId"));

    expect_ack(c, "gInv", "Inv", e2e_str(m1, "receiptHandle"), "EXPIRED");
    expect_ack(c, "gInv", "Inv", e2e_str(m3, "receiptHandle"), "OK");
    expect_ack(c, "gInv", "Inv", e2e_str(m3, "receiptHandle"), "EXPIRED"); /* once only */
    json_t *r4 = receive(c, "gInv", "{\"topic\":\"Inv\",\"waitMs\":1500}");
    assert_int_equal(json_array_size(msgs_of(r4)), 0);
    json_decref(r4);
    json_decref(r3);
    json_decref(r1);
    json_decref(sent);
}

static void test_pop_receive_waits_for_an_arrival_or_waitms(void **state) {
    E2eCase *c = *state;
    e2e_case_start(c, NULL);
    e2e_create_topic(c, "Lp", 2);
    /* nothing there: an empty list, only after waitMs */
    long long t0 = e2e_now_ms();
    json_t *r = receive(c, "gLp", "{\"topic\":\"Lp\",\"waitMs\":400}");
    long long took = e2e_now_ms() - t0;
    assert_int_equal(json_array_size(msgs_of(r)), 0);
    assert_true(took >= 400);
    assert_true(took < 2000);
    json_decref(r);
    /* a held receive is answered by a produce */
    E2eCall call;
    assert_int_equal(e2e_call_start(&call, &c->srv, "POST",
                                    "{\"topic\":\"Lp\",\"waitMs\":5000,\"maxMessages\":4}",
                                    "/v1/groups/gLp/receive"),
                     0);
    e2e_sleep_ms(300);
    assert_false(atomic_load(&call.done));
    long long sent = e2e_now_ms();
    produce_body(c, "Lp", "wake", 1);
    e2e_call_join(&call);
    assert_int_equal(call.status, 200);
    json_t *msgs = json_object_get(call.json, "messages");
    assert_int_equal(json_array_size(msgs), 1);
    assert_string_equal(e2e_str(json_array_get(msgs, 0), "body"), "wake");
    assert_int_equal(e2e_num(json_array_get(msgs, 0), "queueId"), 1);
    assert_true(call.end_ms >= sent);
    assert_true(call.end_ms - call.start_ms < 3000);
    ack_all(c, "gLp", "Lp", msgs);
    json_decref(call.json);
}

static void test_pop_inflight_threshold_limits_a_queue(void **state) {
    E2eCase *c = *state;
    const char *flags[] = {"--popInflightMessageThreshold=5", NULL};
    e2e_case_start(c, flags);
    e2e_create_topic(c, "Thr", 1);
    for (int i = 0; i < 12; i++) {
        char b[16];
        snprintf(b, sizeof(b), "h%d", i);
        produce_body(c, "Thr", b, 0);
    }
    e2e_wait_queue(c, "Thr", 0, 12);
    json_t *r1 = receive(c, "gThr", "{\"topic\":\"Thr\",\"maxMessages\":16,\"waitMs\":0}");
    assert_int_equal(json_array_size(msgs_of(r1)), 5);
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(body_index(json_array_get(msgs_of(r1), i), 'h'), i);
    json_t *r2 = receive(c, "gThr", "{\"topic\":\"Thr\",\"maxMessages\":16,\"waitMs\":0}");
    assert_int_equal(json_array_size(msgs_of(r2)), 0); /* the queue is at its threshold */
    json_decref(r2);
    ack_all(c, "gThr", "Thr", msgs_of(r1));
    json_decref(r1);
    r1 = receive(c, "gThr", "{\"topic\":\"Thr\",\"maxMessages\":16,\"waitMs\":0}");
    assert_int_equal(json_array_size(msgs_of(r1)), 5);
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(body_index(json_array_get(msgs_of(r1), i), 'h'), 5 + i);
    ack_all(c, "gThr", "Thr", msgs_of(r1));
    json_decref(r1);
    r1 = receive(c, "gThr", "{\"topic\":\"Thr\",\"maxMessages\":16,\"waitMs\":0}");
    assert_int_equal(json_array_size(msgs_of(r1)), 2);
    ack_all(c, "gThr", "Thr", msgs_of(r1));
    json_decref(r1);
}

/* ============================================================================
 * 3. nack -> retry -> DLQ -> resend; the nack ladder
 * ==========================================================================*/

static void test_pop_nack_retries_then_dead_letters_and_resend_brings_it_back(void **state) {
    E2eCase *c = *state;
    e2e_case_start(c, NULL);
    if (!group_put(c, "gN", "{\"retryMaxTimes\":2}")) skip();
    e2e_create_topic(c, "Rt", 1);
    json_t *sent = produce(c, "Rt", json_pack("{s:s, s:s, s:[s], s:{s:s}}", "body", "dead-body",
                                              "tags", "TD", "keys", "key-d", "properties",
                                              "color", "red"));
    const char *orig_id = e2e_str(sent, "msgId");
    e2e_wait_queue(c, "Rt", 0, 1);

    json_t *r = receive(c, "gN", "{\"topic\":\"Rt\",\"waitMs\":0}");
    assert_int_equal(json_array_size(msgs_of(r)), 1);
    json_t *m = json_array_get(msgs_of(r), 0);
    assert_int_equal(e2e_num(m, "reconsumeTimes"), 0);
    assert_string_equal(e2e_str(m, "msgId"), orig_id);
    for (int round = 1; round <= 3; round++) {
        long long t0 = e2e_now_ms();
        expect_nack(c, "gN", "Rt", e2e_str(m, "receiptHandle"), 0, "OK");
        /* the same handle is over now */
        expect_nack(c, "gN", "Rt", e2e_str(m, "receiptHandle"), 0, "EXPIRED");
        json_decref(r);
        if (round == 3) break;
        r = receive(c, "gN", "{\"topic\":\"Rt\",\"waitMs\":3000}");
        print_message("nack %d: back after %lld ms\n", round, e2e_now_ms() - t0);
        assert_int_equal(json_array_size(msgs_of(r)), 1);
        m = json_array_get(msgs_of(r), 0);
        assert_string_equal(e2e_str(m, "body"), "dead-body");
        assert_string_equal(e2e_str(m, "topic"), "Rt");
        assert_string_equal(e2e_str(m, "tags"), "TD");
        assert_string_equal(json_string_value(json_array_get(json_object_get(m, "keys"), 0)),
                            "key-d");
        assert_string_equal(e2e_str(json_object_get(m, "properties"), "color"), "red");
        assert_int_equal(e2e_num(m, "reconsumeTimes"), round);
        assert_string_equal(e2e_str(m, "originMsgId"), orig_id);
    }
    /* past retryMaxTimes: not delivered again */
    r = receive(c, "gN", "{\"topic\":\"Rt\",\"waitMs\":1500}");
    assert_int_equal(json_array_size(msgs_of(r)), 0);
    json_decref(r);

    /* in the DLQ, readable with a classic pull */
    json_t *dq = e2e_call(c, "GET", "/v1/topics/%25DLQ%25gN/queues", NULL, NULL, 200);
    assert_int_equal(json_array_size(dq), 1);
    assert_int_equal(e2e_num(json_array_get(dq, 0), "maxOffset"), 1);
    json_decref(dq);
    json_t *pull = e2e_call(c, "GET", "/v1/topics/%25DLQ%25gN/queues/0/messages?offset=0", NULL,
                            NULL, 200);
    assert_string_equal(e2e_str(pull, "status"), "FOUND");
    assert_int_equal(json_array_size(json_object_get(pull, "messages")), 1);
    json_t *dm = json_array_get(json_object_get(pull, "messages"), 0);
    assert_string_equal(e2e_str(dm, "topic"), "%DLQ%gN");
    assert_string_equal(e2e_str(dm, "body"), "dead-body");
    assert_string_equal(e2e_str(dm, "tags"), "TD");
    assert_string_equal(e2e_str(json_object_get(dm, "properties"), "color"), "red");
    print_message("DLQ copy: reconsumeTimes %lld\n", e2e_num(dm, "reconsumeTimes"));
    char dlq_id[64];
    snprintf(dlq_id, sizeof(dlq_id), "%s", e2e_str(dm, "msgId"));
    assert_string_not_equal(dlq_id, orig_id);
    json_decref(pull);
    char path[256];
    snprintf(path, sizeof(path), "/v1/messages/%s", dlq_id);
    json_t *got = e2e_call(c, "GET", path, NULL, NULL, 200);
    assert_string_equal(e2e_str(got, "topic"), "%DLQ%gN");
    json_decref(got);

    /* resend: back to Rt as a fresh message */
    snprintf(path, sizeof(path), "/v1/messages/%s/resend", dlq_id);
    json_t *rs = e2e_call(c, "POST", path, NULL, NULL, 200);
    assert_string_equal(e2e_str(rs, "status"), "SEND_OK");
    assert_string_equal(e2e_str(rs, "topic"), "Rt");
    assert_int_equal(e2e_num(rs, "queueId"), 0);
    assert_int_equal(e2e_num(rs, "queueOffset"), 1);
    char resent_id[64];
    snprintf(resent_id, sizeof(resent_id), "%s", e2e_str(rs, "msgId"));
    json_decref(rs);
    r = receive(c, "gN", "{\"topic\":\"Rt\",\"waitMs\":3000}");
    assert_int_equal(json_array_size(msgs_of(r)), 1);
    m = json_array_get(msgs_of(r), 0);
    assert_string_equal(e2e_str(m, "body"), "dead-body");
    assert_string_equal(e2e_str(m, "topic"), "Rt");
    assert_string_equal(e2e_str(m, "msgId"), resent_id);
    assert_string_equal(e2e_str(m, "tags"), "TD");
    assert_string_equal(e2e_str(json_object_get(m, "properties"), "color"), "red");
    assert_int_equal(e2e_num(m, "reconsumeTimes"), 0);
    assert_int_equal(e2e_num(m, "queueOffset"), 1);
    /* the resent copy names the dead message's origin: the first delivery */
    assert_string_equal(e2e_str(m, "originMsgId"), orig_id);
    expect_ack(c, "gN", "Rt", e2e_str(m, "receiptHandle"), "OK");
    json_decref(r);
    json_decref(sent);

    /* an operator drops the DLQ like any topic; producing to it stays refused */
    json_t *pe = e2e_call(c, "POST", "/v1/topics/%25DLQ%25gN/messages", E2E_JSON,
                          "{\"body\":\"x\"}", 400);
    assert_string_equal(e2e_str(json_object_get(pe, "error"), "code"), "INVALID_NAME");
    json_decref(pe);
    json_decref(e2e_call(c, "DELETE", "/v1/topics/%25DLQ%25gN", NULL, NULL, 204));
    json_decref(e2e_call(c, "GET", "/v1/topics/%25DLQ%25gN/queues", NULL, NULL, 404));
}

static void test_pop_nack_without_delay_follows_the_retry_ladder(void **state) {
    E2eCase *c = *state;
    const char *flags[] = {"--messageDelayLevel=100ms 200ms 300ms 400ms 500ms", NULL};
    e2e_case_start(c, flags);
    e2e_create_topic(c, "Lad", 1);
    produce_body(c, "Lad", "ladder", 0);
    e2e_wait_queue(c, "Lad", 0, 1);
    json_t *r = receive(c, "gL", "{\"topic\":\"Lad\",\"waitMs\":0}");
    assert_int_equal(json_array_size(msgs_of(r)), 1);
    long long t_nack = e2e_now_ms();
    expect_nack(c, "gL", "Lad", e2e_str(json_array_get(msgs_of(r), 0), "receiptHandle"), -1,
                "OK");
    json_decref(r);
    /* level 3 + 0 = 300 ms: not back within 200 ms */
    r = receive(c, "gL", "{\"topic\":\"Lad\",\"waitMs\":200}");
    if (e2e_now_ms() - t_nack < 300) /* else this machine was too slow to tell */
        assert_int_equal(json_array_size(msgs_of(r)), 0);
    json_decref(r);
    r = receive(c, "gL", "{\"topic\":\"Lad\",\"waitMs\":2000}");
    long long back = e2e_now_ms() - t_nack;
    print_message("nack without delayMs: back after %lld ms (level 3 = 300 ms)\n", back);
    assert_int_equal(json_array_size(msgs_of(r)), 1);
    json_t *m = json_array_get(msgs_of(r), 0);
    assert_string_equal(e2e_str(m, "body"), "ladder");
    assert_int_equal(e2e_num(m, "reconsumeTimes"), 1);
    assert_true(back >= 300);
    assert_true(back < 2000);
    /* second nack: level 4 = 400 ms */
    t_nack = e2e_now_ms();
    expect_nack(c, "gL", "Lad", e2e_str(m, "receiptHandle"), -1, "OK");
    json_decref(r);
    r = receive(c, "gL", "{\"topic\":\"Lad\",\"waitMs\":2000}");
    back = e2e_now_ms() - t_nack;
    print_message("second nack: back after %lld ms (level 4 = 400 ms)\n", back);
    assert_int_equal(json_array_size(msgs_of(r)), 1);
    m = json_array_get(msgs_of(r), 0);
    assert_int_equal(e2e_num(m, "reconsumeTimes"), 2);
    assert_true(back >= 400);
    assert_true(back < 2000);
    /* The ladder goes through the delay levels (issue 5): right after a
     * nack the message waits in SCHEDULE_TOPIC_XXXX (level 5 now), no
     * longer in flight; with delayMs it waits in a timer lane. */
    expect_nack(c, "gL", "Lad", e2e_str(m, "receiptHandle"), -1, "OK");
    json_decref(r);
    assert_int_equal(e2e_metric_until(c, "petrel_delayed_messages", 1), 1);
    assert_int_equal(e2e_metric(c, "petrel_inflight_messages"), 0);
    r = receive(c, "gL", "{\"topic\":\"Lad\",\"waitMs\":3000,\"invisibleMs\":60000}");
    assert_int_equal(json_array_size(msgs_of(r)), 1);
    m = json_array_get(msgs_of(r), 0);
    assert_int_equal(e2e_num(m, "reconsumeTimes"), 3);
    t_nack = e2e_now_ms();
    expect_nack(c, "gL", "Lad", e2e_str(m, "receiptHandle"), 700, "OK");
    json_decref(r);
    assert_int_equal(e2e_metric_until(c, "petrel_timer_messages", 1), 1);
    assert_int_equal(e2e_metric(c, "petrel_inflight_messages"), 0);
    r = receive(c, "gL", "{\"topic\":\"Lad\",\"waitMs\":3000}");
    back = e2e_now_ms() - t_nack;
    print_message("nack with delayMs 700: back after %lld ms\n", back);
    assert_int_equal(json_array_size(msgs_of(r)), 1);
    m = json_array_get(msgs_of(r), 0);
    assert_int_equal(e2e_num(m, "reconsumeTimes"), 4);
    assert_true(back >= 700);
    expect_ack(c, "gL", "Lad", e2e_str(m, "receiptHandle"), "OK");
    json_decref(r);
    assert_int_equal(e2e_metric(c, "petrel_delayed_messages"), 0);
    assert_int_equal(e2e_metric(c, "petrel_timer_messages"), 0);
}

/* ============================================================================
 * 4. filters
 * ==========================================================================*/

/* Receives (waitMs 0) until an empty answer; every message is acked.
 * Returns the array of the bodies (caller owns). */
static json_t *drain(E2eCase *c, const char *group, const char *topic, const char *filter) {
    json_t *bodies = json_array();
    for (int i = 0; i < 100; i++) {
        json_t *r = receive(c, group, "{\"topic\":\"%s\",\"filter\":%s,\"maxMessages\":32,"
                            "\"waitMs\":0}", topic, filter);
        size_t n = json_array_size(msgs_of(r));
        for (size_t k = 0; k < n; k++) {
            json_t *m = json_array_get(msgs_of(r), k);
            json_array_append_new(bodies, json_string(e2e_str(m, "body")));
        }
        ack_all(c, group, topic, msgs_of(r));
        json_decref(r);
        if (n == 0) return bodies;
    }
    fail_msg("receive never ran dry");
    return bodies;
}

/* Asserts that 'bodies' holds exactly the 'n' strings of 'want', once each. */
static void expect_bodies(json_t *bodies, const char *const *want, size_t n) {
    if (json_array_size(bodies) != n) {
        char *s = json_dumps(bodies, JSON_COMPACT);
        fprintf(stderr, "received %s\n", s);
        free(s);
    }
    assert_int_equal(json_array_size(bodies), n);
    for (size_t i = 0; i < n; i++) {
        int seen = 0;
        for (size_t k = 0; k < json_array_size(bodies); k++)
            if (strcmp(json_string_value(json_array_get(bodies, k)), want[i]) == 0) seen++;
        if (seen != 1) fail_msg("'%s' received %d times", want[i], seen);
    }
}

static void test_pop_tag_and_sql92_filters_select_exactly_the_matching(void **state) {
    E2eCase *c = *state;
    e2e_case_start(c, NULL);
    e2e_create_topic(c, "Flt", 2);
    for (int i = 0; i < 12; i++) {
        char b[16];
        char tag[2] = {"ABC"[i % 3], 0};
        snprintf(b, sizeof(b), "f%d", i);
        json_decref(produce(c, "Flt", json_pack("{s:s, s:s, s:i}", "body", b, "tags", tag,
                                                "queueId", i % 2)));
    }
    e2e_wait_queue(c, "Flt", 0, 6);
    e2e_wait_queue(c, "Flt", 1, 6);
    json_t *bodies = drain(c, "gTag", "Flt", "{\"type\":\"TAG\",\"expression\":\"A || C\"}");
    const char *ac[] = {"f0", "f2", "f3", "f5", "f6", "f8", "f9", "f11"};
    expect_bodies(bodies, ac, 8);
    json_decref(bodies);
    /* a filter on another group does not hide anything from this one */
    bodies = drain(c, "gTagB", "Flt", "{\"type\":\"TAG\",\"expression\":\"B\"}");
    const char *b_only[] = {"f1", "f4", "f7", "f10"};
    expect_bodies(bodies, b_only, 4);
    json_decref(bodies);

    e2e_create_topic(c, "Sql", 1);
    static const char *const regions[] = {"eu", "asia", "us"};
    for (int i = 0; i < 12; i++) {
        char b[16];
        snprintf(b, sizeof(b), "q%d", i);
        json_decref(produce(c, "Sql", json_pack("{s:s, s:{s:s, s:s}}", "body", b, "properties",
                                                "price", i % 2 ? "20" : "5", "region",
                                                regions[(i / 2) % 3])));
    }
    e2e_wait_queue(c, "Sql", 0, 12);
    bodies = drain(c, "gSql", "Sql",
                   "{\"type\":\"SQL92\",\"expression\":\"price > 10 AND region IN ('eu','us')\"}");
    const char *match[] = {"q1", "q5", "q7", "q11"};
    expect_bodies(bodies, match, 4);
    json_decref(bodies);

    expect_error_msg(c, "POST", "/v1/groups/gSql/receive", E2E_JSON,
                     "{\"topic\":\"Sql\",\"filter\":{\"type\":\"SQL92\","
                     "\"expression\":\"price >\"},"
                     "\"waitMs\":0}",
                     400, "INVALID_FILTER", "position");
    expect_error_msg(c, "POST", "/v1/groups/gSql/receive", E2E_JSON,
                     "{\"topic\":\"Sql\",\"filter\":{\"type\":\"XPATH\",\"expression\":\"a\"}}",
                     400,
                     "INVALID_FIELD", "type");
}

/* A receive with an SQL92 filter must look past a long run of messages
 * that do not match (as a TAG filter does) instead of answering empty, or
 * waiting out waitMs, while a matching message is stored. */
static void test_pop_sql92_filter_finds_a_match_behind_many_non_matching(void **state) {
    E2eCase *c = *state;
    e2e_case_start(c, NULL);
    e2e_create_topic(c, "Far", 1);
    json_t *batch = json_array();
    for (int i = 0; i < 100; i++)
        json_array_append_new(batch, json_pack("{s:s, s:s, s:{s:s}}", "body", "no", "tags", "N",
                                               "properties", "x", "1"));
    json_decref(produce_batch(c, "Far", batch));
    json_decref(produce(c, "Far", json_pack("{s:s, s:s, s:{s:s}}", "body", "yes", "tags", "Y",
                                            "properties", "x", "2")));
    e2e_wait_queue(c, "Far", 0, 101);
    /* TAG: found at once */
    long long t0 = e2e_now_ms();
    json_t *r = receive(c, "gFarTag", "{\"topic\":\"Far\",\"filter\":{\"type\":\"TAG\","
                        "\"expression\":\"Y\"},\"maxMessages\":16,\"waitMs\":3000}");
    long long took = e2e_now_ms() - t0;
    assert_int_equal(json_array_size(msgs_of(r)), 1);
    assert_string_equal(e2e_str(json_array_get(msgs_of(r), 0), "body"), "yes");
    assert_true(took < 1500);
    json_decref(r);
    /* SQL92: the same */
    t0 = e2e_now_ms();
    r = receive(c, "gFarSql", "{\"topic\":\"Far\",\"filter\":{\"type\":\"SQL92\","
                "\"expression\":\"x = 2\"},\"maxMessages\":16,\"waitMs\":3000}");
    took = e2e_now_ms() - t0;
    print_message("SQL92 receive past 100 non-matching messages: %zu message(s) after %lld ms\n",
                  json_array_size(msgs_of(r)), took);
    assert_int_equal(json_array_size(msgs_of(r)), 1);
    assert_string_equal(e2e_str(json_array_get(msgs_of(r), 0), "body"), "yes");
    assert_true(took < 1500);
    json_decref(r);
}

/* ============================================================================
 * 5. orderly groups
 * ==========================================================================*/

#define ORD_KEYS 8
#define ORD_PER_KEY 5
#define ORD_N (ORD_KEYS * ORD_PER_KEY)

typedef struct OrdShared {
    pthread_mutex_t mu;
    int last_acked[ORD_KEYS];           /* highest seq acked, -1 none */
    int holder[ORD_KEYS];               /* receiver holding an unacked message of the key, -1 */
    int acks[ORD_KEYS][ORD_PER_KEY + 4];/* seqs in ack order */
    int n_acks[ORD_KEYS];
    atomic_int total;                   /* acked */
    char err[256];
    const E2eServer *srv;
} OrdShared;

typedef struct OrdReceiver {
    OrdShared *sh;
    int id;
    int batches;
} OrdReceiver;

static void *ord_main(void *arg) {
    OrdReceiver *o = arg;
    OrdShared *sh = o->sh;
    long long deadline = e2e_now_ms() + 20000;
    while (atomic_load(&sh->total) < ORD_N && e2e_now_ms() < deadline && !sh->err[0]) {
        long st = 0;
        json_t *res = http_json(sh->srv, "POST", "/v1/groups/gO/receive",
                                "{\"topic\":\"Ord\",\"maxMessages\":4,\"invisibleMs\":30000,"
                                "\"waitMs\":500}",
                                &st);
        json_t *msgs = json_object_get(res, "messages");
        if (st != 200 || !json_is_array(msgs)) {
            note(sh->err, &sh->mu, "receiver %d: receive answered %ld", o->id, st);
            json_decref(res);
            break;
        }
        size_t n = json_array_size(msgs);
        int keys[4];
        int seqs[4];
        int batch_last[ORD_KEYS];
        for (int j = 0; j < ORD_KEYS; j++) batch_last[j] = -2;
        pthread_mutex_lock(&sh->mu);
        for (size_t i = 0; i < n && i < 4; i++) {
            json_t *m = json_array_get(msgs, i);
            int j = -1;
            int seq = -1;
            const char *b = e2e_str(m, "body");
            if (!b || sscanf(b, "k%d-%d", &j, &seq) != 2 || j < 0 || j >= ORD_KEYS || seq < 0 ||
                seq >= ORD_PER_KEY) {
                pthread_mutex_unlock(&sh->mu);
                note(sh->err, &sh->mu, "unexpected body '%s'", b ? b : "(none)");
                pthread_mutex_lock(&sh->mu);
                keys[i] = seqs[i] = -1;
                continue;
            }
            keys[i] = j;
            seqs[i] = seq;
            int want = batch_last[j] != -2 ? batch_last[j] + 1 : sh->last_acked[j] + 1;
            if (sh->holder[j] != -1 && sh->holder[j] != o->id && !sh->err[0]) {
                snprintf(sh->err, sizeof(sh->err), "k%d-%d received by %d while receiver %d "
                         "holds an unacked message of k%d", j, seq, o->id, sh->holder[j], j);
            } else if (seq != want && !sh->err[0]) {
                snprintf(sh->err, sizeof(sh->err), "k%d-%d received by %d, expected k%d-%d "
                         "(out of order)", j, seq, o->id, j, want);
            } else if (e2e_num(m, "reconsumeTimes") != 0 && !sh->err[0]) {
                snprintf(sh->err, sizeof(sh->err), "k%d-%d: reconsumeTimes %lld", j, seq,
                         e2e_num(m, "reconsumeTimes"));
            }
            sh->holder[j] = o->id;
            batch_last[j] = seq;
        }
        pthread_mutex_unlock(&sh->mu);
        if (n > 4) note(sh->err, &sh->mu, "%zu messages > maxMessages 4", n);
        if (n > 0) {
            o->batches++;
            e2e_sleep_ms(5);
            /* Marked acked just before the ack goes out: from then on the
             * broker may hand out the next message of the key. */
            pthread_mutex_lock(&sh->mu);
            for (size_t i = 0; i < n && i < 4; i++) {
                int j = keys[i];
                if (j < 0) continue;
                if (sh->n_acks[j] < ORD_PER_KEY + 4) sh->acks[j][sh->n_acks[j]++] = seqs[i];
                sh->last_acked[j] = seqs[i];
                sh->holder[j] = -1;
            }
            pthread_mutex_unlock(&sh->mu);
            const char *bad = ack_all_mt(sh->srv, "gO", "Ord", msgs);
            if (bad) note(sh->err, &sh->mu, "receiver %d: %s", o->id, bad);
            atomic_fetch_add(&sh->total, (int)n);
        }
        json_decref(res);
    }
    return NULL;
}

static void test_pop_orderly_group_keeps_each_key_in_order(void **state) {
    E2eCase *c = *state;
    e2e_case_start(c, NULL);
    if (!group_put(c, "gO", "{\"orderly\":true}")) skip();
    e2e_create_topic(c, "Ord", 4);
    int per_queue[4] = {0};
    for (int seq = 0; seq < ORD_PER_KEY; seq++) {
        for (int j = 0; j < ORD_KEYS; j++) {
            char b[32];
            char k[16];
            snprintf(b, sizeof(b), "k%d-%d", j, seq);
            snprintf(k, sizeof(k), "k%d", j);
            json_t *res = produce(c, "Ord", json_pack("{s:s, s:s}", "body", b, "shardingKey", k));
            per_queue[e2e_num(res, "queueId")]++;
            json_decref(res);
        }
    }
    for (int q = 0; q < 4; q++) e2e_wait_queue(c, "Ord", q, per_queue[q]);
    print_message("queues hold %d %d %d %d messages\n", per_queue[0], per_queue[1],
                  per_queue[2], per_queue[3]);

    static OrdShared sh;
    memset(&sh, 0, sizeof(sh));
    pthread_mutex_init(&sh.mu, NULL);
    atomic_init(&sh.total, 0);
    sh.srv = &c->srv;
    for (int j = 0; j < ORD_KEYS; j++) {
        sh.last_acked[j] = -1;
        sh.holder[j] = -1;
    }
    OrdReceiver rs[4];
    pthread_t th[4];
    long long t0 = e2e_now_ms();
    for (int i = 0; i < 4; i++) {
        rs[i] = (OrdReceiver){.sh = &sh, .id = i};
        assert_int_equal(pthread_create(&th[i], NULL, ord_main, &rs[i]), 0);
    }
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    print_message("40 orderly messages done in %lld ms; batches per receiver %d %d %d %d\n",
                  e2e_now_ms() - t0, rs[0].batches, rs[1].batches, rs[2].batches,
                  rs[3].batches);
    pthread_mutex_destroy(&sh.mu);
    if (sh.err[0]) fail_msg("%s", sh.err);
    assert_int_equal(atomic_load(&sh.total), ORD_N);
    for (int j = 0; j < ORD_KEYS; j++) {
        assert_int_equal(sh.n_acks[j], ORD_PER_KEY);
        for (int s = 0; s < ORD_PER_KEY; s++) assert_int_equal(sh.acks[j][s], s);
    }
    json_t *r = receive(c, "gO", "{\"topic\":\"Ord\",\"waitMs\":0}");
    assert_int_equal(json_array_size(msgs_of(r)), 0);
    json_decref(r);
}

static void test_pop_orderly_nack_keeps_the_queue_waiting(void **state) {
    E2eCase *c = *state;
    const char *flags[] = {"--suspendCurrentQueueTimeMillis=200", NULL};
    e2e_case_start(c, flags);
    if (!group_put(c, "gO2", "{\"orderly\":true,\"retryMaxTimes\":1}")) skip();
    e2e_create_topic(c, "OrdN", 1);
    char ids[3][64];
    for (int seq = 0; seq < 3; seq++) {
        char b[16];
        snprintf(b, sizeof(b), "k0-%d", seq);
        json_t *res = produce(c, "OrdN", json_pack("{s:s, s:s}", "body", b, "shardingKey", "k0"));
        snprintf(ids[seq], sizeof(ids[seq]), "%s", e2e_str(res, "msgId"));
        json_decref(res);
    }
    e2e_wait_queue(c, "OrdN", 0, 3);
    json_t *r = receive(c, "gO2", "{\"topic\":\"OrdN\",\"maxMessages\":1,\"waitMs\":0}");
    assert_int_equal(json_array_size(msgs_of(r)), 1);
    json_t *m = json_array_get(msgs_of(r), 0);
    assert_string_equal(e2e_str(m, "body"), "k0-0");
    assert_int_equal(e2e_num(m, "reconsumeTimes"), 0);
    /* while k0-0 is in flight, nothing of the queue */
    json_t *r2 = receive(c, "gO2", "{\"topic\":\"OrdN\",\"waitMs\":0}");
    assert_int_equal(json_array_size(msgs_of(r2)), 0);
    json_decref(r2);
    long long t_nack = e2e_now_ms();
    expect_nack(c, "gO2", "OrdN", e2e_str(m, "receiptHandle"), 300, "OK");
    json_decref(r);
    /* the queue waits for k0-0 */
    r2 = receive(c, "gO2", "{\"topic\":\"OrdN\",\"waitMs\":0}");
    if (e2e_now_ms() - t_nack < 300) assert_int_equal(json_array_size(msgs_of(r2)), 0);
    json_decref(r2);
    r = receive(c, "gO2", "{\"topic\":\"OrdN\",\"maxMessages\":1,\"waitMs\":2000}");
    long long back = e2e_now_ms() - t_nack;
    print_message("orderly nack (delayMs 300): back after %lld ms\n", back);
    assert_int_equal(json_array_size(msgs_of(r)), 1);
    m = json_array_get(msgs_of(r), 0);
    assert_string_equal(e2e_str(m, "body"), "k0-0");
    assert_int_equal(e2e_num(m, "reconsumeTimes"), 1);
    assert_string_equal(e2e_str(m, "msgId"), ids[0]); /* in place, not a retry copy */
    assert_true(back >= 300);
    assert_true(back < 2000);
    expect_ack(c, "gO2", "OrdN", e2e_str(m, "receiptHandle"), "OK");
    json_decref(r);

    /* k0-1: a nack without delayMs waits suspendCurrentQueueTimeMillis */
    r = receive(c, "gO2", "{\"topic\":\"OrdN\",\"maxMessages\":1,\"waitMs\":2000}");
    assert_int_equal(json_array_size(msgs_of(r)), 1);
    m = json_array_get(msgs_of(r), 0);
    assert_string_equal(e2e_str(m, "body"), "k0-1");
    assert_int_equal(e2e_num(m, "reconsumeTimes"), 0);
    assert_string_equal(e2e_str(m, "msgId"), ids[1]);
    t_nack = e2e_now_ms();
    expect_nack(c, "gO2", "OrdN", e2e_str(m, "receiptHandle"), -1, "OK");
    json_decref(r);
    r = receive(c, "gO2", "{\"topic\":\"OrdN\",\"maxMessages\":1,\"waitMs\":2000}");
    back = e2e_now_ms() - t_nack;
    print_message("orderly nack without delayMs (suspend 200 ms): back after %lld ms\n", back);
    assert_int_equal(json_array_size(msgs_of(r)), 1);
    m = json_array_get(msgs_of(r), 0);
    assert_string_equal(e2e_str(m, "body"), "k0-1");
    assert_int_equal(e2e_num(m, "reconsumeTimes"), 1);
    assert_true(back >= 200);
    assert_true(back < 2000);
    r2 = receive(c, "gO2", "{\"topic\":\"OrdN\",\"waitMs\":0}"); /* k0-2 waits behind it */
    assert_int_equal(json_array_size(msgs_of(r2)), 0);
    json_decref(r2);
    /* past retryMaxTimes (1): to the DLQ, and the queue moves on */
    expect_nack(c, "gO2", "OrdN", e2e_str(m, "receiptHandle"), 0, "OK");
    json_decref(r);
    r = receive(c, "gO2", "{\"topic\":\"OrdN\",\"maxMessages\":16,\"waitMs\":2000}");
    assert_int_equal(json_array_size(msgs_of(r)), 1);
    m = json_array_get(msgs_of(r), 0);
    assert_string_equal(e2e_str(m, "body"), "k0-2");
    assert_int_equal(e2e_num(m, "reconsumeTimes"), 0);
    assert_string_equal(e2e_str(m, "msgId"), ids[2]);
    ack_all(c, "gO2", "OrdN", msgs_of(r));
    json_decref(r);
    e2e_wait_queue(c, "%25DLQ%25gO2", 0, 1); /* written by the keeper, dispatched later */
    json_t *pull = e2e_call(c, "GET", "/v1/topics/%25DLQ%25gO2/queues/0/messages?offset=0", NULL,
                            NULL, 200);
    assert_string_equal(e2e_str(pull, "status"), "FOUND");
    assert_int_equal(json_array_size(json_object_get(pull, "messages")), 1);
    assert_string_equal(e2e_str(json_array_get(json_object_get(pull, "messages"), 0), "body"),
                        "k0-1");
    json_decref(pull);
    r = receive(c, "gO2", "{\"topic\":\"OrdN\",\"waitMs\":500}");
    assert_int_equal(json_array_size(msgs_of(r)), 0);
    json_decref(r);
}

/* ============================================================================
 * 6. Server-Sent Events
 * ==========================================================================*/

typedef struct Sse {
    char url[512];
    int timeout_ms;
    pthread_mutex_t mu;
    char *buf;              /* everything received (NUL-terminated) */
    size_t len;
    atomic_bool stop;       /* abort the transfer */
    atomic_bool done;
    long status;
    int curl_code;
    char content_type[128];
    pthread_t th;
} Sse;

static size_t sse_write(char *d, size_t size, size_t n, void *arg) {
    Sse *s = arg;
    pthread_mutex_lock(&s->mu);
    char *nb = realloc(s->buf, s->len + size * n + 1);
    if (nb) {
        memcpy(nb + s->len, d, size * n);
        s->len += size * n;
        nb[s->len] = '\0';
        s->buf = nb;
    }
    pthread_mutex_unlock(&s->mu);
    return atomic_load(&s->stop) || !nb ? 0 : size * n;
}

static int sse_progress(void *arg, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d) {
    (void)a;
    (void)b;
    (void)c;
    (void)d;
    Sse *s = arg;
    return atomic_load(&s->stop) ? 1 : 0;
}

static void *sse_main(void *arg) {
    Sse *s = arg;
    CURL *h = curl_easy_init();
    if (h) {
        curl_easy_setopt(h, CURLOPT_URL, s->url);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)s->timeout_ms);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sse_write);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, s);
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, sse_progress);
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, s);
        s->curl_code = (int)curl_easy_perform(h);
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &s->status);
        char *ct = NULL;
        curl_easy_getinfo(h, CURLINFO_CONTENT_TYPE, &ct);
        snprintf(s->content_type, sizeof(s->content_type), "%s", ct ? ct : "");
        curl_easy_cleanup(h);
    }
    atomic_store(&s->done, true);
    return NULL;
}

static void sse_start(Sse *s, const E2eCase *c, const char *path, int timeout_ms) {
    memset(s, 0, sizeof(*s));
    snprintf(s->url, sizeof(s->url), "%s%s", c->srv.base, path);
    s->timeout_ms = timeout_ms;
    pthread_mutex_init(&s->mu, NULL);
    atomic_init(&s->stop, false);
    atomic_init(&s->done, false);
    assert_int_equal(pthread_create(&s->th, NULL, sse_main, s), 0);
}

static void sse_join(Sse *s) {
    pthread_join(s->th, NULL);
}

static void sse_free(Sse *s) {
    pthread_mutex_destroy(&s->mu);
    free(s->buf);
}

/* Occurrences of 'needle' in the stream from byte 'from'. */
static int sse_count(Sse *s, const char *needle, size_t from) {
    int n = 0;
    pthread_mutex_lock(&s->mu);
    const char *p = s->buf && from < s->len ? s->buf + from : NULL;
    while (p && (p = strstr(p, needle)) != NULL) {
        n++;
        p += strlen(needle);
    }
    pthread_mutex_unlock(&s->mu);
    return n;
}

static size_t sse_len(Sse *s) {
    pthread_mutex_lock(&s->mu);
    size_t n = s->len;
    pthread_mutex_unlock(&s->mu);
    return n;
}

/* Waits up to 'ms' for 'n' occurrences of 'needle'. */
static bool sse_wait(Sse *s, const char *needle, int n, int ms) {
    long long end = e2e_now_ms() + ms;
    while (e2e_now_ms() < end) {
        if (sse_count(s, needle, 0) >= n) return true;
        if (atomic_load(&s->done)) break;
        e2e_sleep_ms(10);
    }
    return sse_count(s, needle, 0) >= n;
}

/* The "event: message" events of the stream: an array of their data
 * objects (caller owns).  Fails on an event that does not parse, lacks a
 * receiptHandle or whose id is not its receiptHandle. */
static json_t *sse_messages(Sse *s) {
    pthread_mutex_lock(&s->mu);
    char *text = strdup(s->buf ? s->buf : "");
    pthread_mutex_unlock(&s->mu);
    assert_non_null(text);
    json_t *out = json_array();
    char *save = NULL;
    for (char *ev = text; ev && *ev;) {
        char *end = strstr(ev, "\n\n");
        if (!end) break; /* an incomplete event */
        *end = '\0';
        if (strstr(ev, "event: message")) {
            char *id = NULL;
            char *data = NULL;
            for (char *line = strtok_r(ev, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                if (strncmp(line, "id: ", 4) == 0) id = line + 4;
                else if (strncmp(line, "data: ", 6) == 0) data = line + 6;
                else if (strcmp(line, "event: message") != 0)
                    fail_msg("unexpected line '%s'", line);
            }
            assert_non_null(id);
            assert_non_null(data);
            json_t *m = json_loads(data, 0, NULL);
            if (!m) fail_msg("event data is not JSON: %s", data);
            assert_non_null(e2e_str(m, "receiptHandle"));
            assert_string_equal(e2e_str(m, "receiptHandle"), id);
            json_array_append_new(out, m);
        } else if (ev[0] != ':') {
            fail_msg("unexpected event '%s'", ev);
        }
        ev = end + 2;
    }
    free(text);
    return out;
}

static void test_pop_stream_pushes_messages_and_keeps_alive(void **state) {
    E2eCase *c = *state;
    const char *flags[] = {"--sseKeepAliveInterval=300", NULL};
    e2e_case_start(c, flags);
    e2e_create_topic(c, "Sse", 2);
    e2e_expect_error(c, "GET", "/v1/groups/gS/stream?topic=Nope", NULL, NULL, 404,
                     "TOPIC_NOT_FOUND");
    e2e_expect_error(c, "GET", "/v1/groups/gS/stream", NULL, NULL, 400, "INVALID_PARAMETER");

    Sse s;
    sse_start(&s, c, "/v1/groups/gS/stream?topic=Sse", 8000);
    assert_true(sse_wait(&s, ": stream open", 1, 3000));
    for (int i = 0; i < 20; i++) {
        char b[16];
        snprintf(b, sizeof(b), "s%d", i);
        produce_body(c, "Sse", b, i % 2);
    }
    bool all = sse_wait(&s, "event: message", 20, 5000);
    if (!all) fprintf(stderr, "stream so far:\n%s\n", s.buf ? s.buf : "");
    assert_true(all);
    json_t *msgs = sse_messages(&s);
    assert_int_equal(json_array_size(msgs), 20);
    int seen[20] = {0};
    for (size_t i = 0; i < 20; i++) {
        json_t *m = json_array_get(msgs, i);
        int k = body_index(m, 's');
        assert_true(k >= 0 && k < 20);
        seen[k]++;
        assert_string_equal(e2e_str(m, "topic"), "Sse");
        assert_int_equal(e2e_num(m, "reconsumeTimes"), 0);
        assert_int_equal(strlen(e2e_str(m, "msgId")), 32);
    }
    for (int k = 0; k < 20; k++) assert_int_equal(seen[k], 1);
    ack_all(c, "gS", "Sse", msgs);
    json_decref(msgs);

    /* idle: keep-alive comments, no more events */
    size_t mark = sse_len(&s);
    e2e_sleep_ms(1000);
    int pings = sse_count(&s, ": keep-alive\n\n", mark);
    print_message("%d keep-alive comments in 1 s (interval 300 ms)\n", pings);
    assert_true(pings >= 2);
    assert_int_equal(sse_count(&s, "event:", mark), 0);
    assert_false(atomic_load(&s.done));
    atomic_store(&s.stop, true);
    sse_join(&s);
    assert_int_equal(s.status, 200);
    assert_non_null(strstr(s.content_type, "text/event-stream"));
    assert_true(s.curl_code == CURLE_WRITE_ERROR || s.curl_code == CURLE_ABORTED_BY_CALLBACK);
    sse_free(&s);
    /* acked: nothing comes back */
    json_t *r = receive(c, "gS", "{\"topic\":\"Sse\",\"waitMs\":0}");
    assert_int_equal(json_array_size(msgs_of(r)), 0);
    json_decref(r);
}

static void test_pop_stream_ends_cleanly_when_the_broker_stops(void **state) {
    E2eCase *c = *state;
    e2e_case_start(c, NULL);
    e2e_create_topic(c, "Sse3", 1);
    Sse s;
    sse_start(&s, c, "/v1/groups/gS3/stream?topic=Sse3", 8000);
    assert_true(sse_wait(&s, ": stream open", 1, 3000));
    produce_body(c, "Sse3", "s0", 0);
    assert_true(sse_wait(&s, "event: message", 1, 3000));
    /* SIGTERM while the stream waits (suspended) for more */
    long long t0 = e2e_now_ms();
    assert_int_equal(e2e_stop(&c->srv), 0);
    long long stop_ms = e2e_now_ms() - t0;
    sse_join(&s);
    print_message("broker stopped %lld ms after SIGTERM with a stream open; curl code %d\n",
                  stop_ms, (int)s.curl_code);
    assert_true(stop_ms < 3000);
    assert_int_equal(s.status, 200);
    assert_int_equal(s.curl_code, CURLE_OK); /* the chunked stream ended properly */
    assert_int_equal(sse_count(&s, "event: message", 0), 1);
    sse_free(&s);
}

static void test_pop_stream_client_going_away_leaves_messages_to_come_back(void **state) {
    E2eCase *c = *state;
    const char *flags[] = {"--sseKeepAliveInterval=300", NULL};
    e2e_case_start(c, flags);
    e2e_create_topic(c, "Sse2", 1);
    for (int i = 0; i < 5; i++) {
        char b[16];
        snprintf(b, sizeof(b), "g%d", i);
        produce_body(c, "Sse2", b, 0);
    }
    e2e_wait_queue(c, "Sse2", 0, 5);
    long long t_open = e2e_now_ms();
    Sse s;
    sse_start(&s, c, "/v1/groups/gS2/stream?topic=Sse2&invisibleMs=3000", 8000);
    assert_true(sse_wait(&s, "event: message", 1, 3000));
    atomic_store(&s.stop, true); /* goes away without acking */
    sse_join(&s);
    assert_int_equal(s.status, 200);
    int streamed = sse_count(&s, "event: message", 0);
    print_message("%d events seen before the client went away\n", streamed);
    sse_free(&s);

    json_t *h = e2e_call(c, "GET", "/healthz", NULL, NULL, 200);
    json_decref(h);
    /* The broker learns that the client left only when a write fails: the
     * next keep-alive (300 ms).  Until then the dead stream still takes
     * arrivals (they come back after invisibleMs), so wait that out. */
    e2e_sleep_ms(700);
    /* a new message is served at once; the 5 handed to the stream are hidden */
    produce_body(c, "Sse2", "after", 0);
    e2e_wait_queue(c, "Sse2", 0, 6);
    json_t *r = receive(c, "gS2", "{\"topic\":\"Sse2\",\"waitMs\":0}");
    assert_true(e2e_now_ms() - t_open < 3000); /* still within their invisibility */
    assert_int_equal(json_array_size(msgs_of(r)), 1);
    assert_string_equal(e2e_str(json_array_get(msgs_of(r), 0), "body"), "after");
    assert_int_equal(e2e_num(json_array_get(msgs_of(r), 0), "reconsumeTimes"), 0);
    ack_all(c, "gS2", "Sse2", msgs_of(r));
    json_decref(r);

    /* after their invisibility, all five come back */
    int seen[5] = {0};
    int total = 0;
    long long end = e2e_now_ms() + 8000;
    while (total < 5 && e2e_now_ms() < end) {
        r = receive(c, "gS2", "{\"topic\":\"Sse2\",\"waitMs\":3000}");
        long long at = e2e_now_ms();
        for (size_t i = 0; i < json_array_size(msgs_of(r)); i++) {
            json_t *m = json_array_get(msgs_of(r), i);
            int k = body_index(m, 'g');
            assert_true(k >= 0 && k < 5);
            seen[k]++;
            total++;
            assert_int_equal(e2e_num(m, "reconsumeTimes"), 1);
            assert_true(at - t_open >= 3000);
        }
        ack_all(c, "gS2", "Sse2", msgs_of(r));
        json_decref(r);
    }
    for (int k = 0; k < 5; k++) assert_int_equal(seen[k], 1);
    r = receive(c, "gS2", "{\"topic\":\"Sse2\",\"waitMs\":0}");
    assert_int_equal(json_array_size(msgs_of(r)), 0);
    json_decref(r);
}

/* ============================================================================
 * 7. kill -9 with messages in flight
 * ==========================================================================*/

#define CRASH_N 50

/* Sum of "inflight" over the queues of the progress of 'group' on 'topic';
 * '*lag' gets "totalLag". */
static long long inflight_of(E2eCase *c, const char *group, const char *topic, long long *lag) {
    char path[256];
    snprintf(path, sizeof(path), "/v1/groups/%s/progress?topic=%s", group, topic);
    json_t *p = e2e_call(c, "GET", path, NULL, NULL, 200);
    long long n = 0;
    json_t *qs = json_object_get(p, "queues");
    assert_true(json_array_size(qs) > 0);
    for (size_t i = 0; i < json_array_size(qs); i++)
        n += e2e_num(json_array_get(qs, i), "inflight");
    if (lag) *lag = e2e_num(p, "totalLag");
    json_decref(p);
    return n;
}

/* Produces 50 messages, receives 30 (invisibleMs 2000), acks 15 of them,
 * waits 'settle_ms', stops the broker (kill -9, or SIGTERM when
 * 'graceful'), restarts it on the same directory with 'flags' and
 * consumes everything: the 15 acked never come back, the other 15
 * received come back once their invisibility ended (reconsumeTimes 1),
 * the 20 never received come once (reconsumeTimes 0). */
static void crash_case(E2eCase *c, const char *const *flags, int settle_ms, bool graceful) {
    e2e_case_start(c, flags);
    e2e_create_topic(c, "Cr", 2);
    for (int i = 0; i < CRASH_N; i++) {
        char b[16];
        snprintf(b, sizeof(b), "c%d", i);
        produce_body(c, "Cr", b, i % 2);
    }
    e2e_wait_queue(c, "Cr", 0, CRASH_N / 2);
    e2e_wait_queue(c, "Cr", 1, CRASH_N / 2);

    /* 0 never received, 1 received and acked, 2 received, not acked */
    int fate[CRASH_N] = {0};
    long long recv_at[CRASH_N] = {0}; /* start of the receive that handed it out */
    long long first_recv = e2e_now_ms();
    json_t *held = json_array();
    while (json_array_size(held) < 30) {
        long long t = e2e_now_ms();
        json_t *r = receive(c, "gC", "{\"topic\":\"Cr\",\"maxMessages\":%zu,\"invisibleMs\":2000,"
                            "\"waitMs\":0}", 30 - json_array_size(held));
        assert_true(json_array_size(msgs_of(r)) > 0);
        for (size_t i = 0; i < json_array_size(msgs_of(r)); i++) {
            json_t *m = json_array_get(msgs_of(r), i);
            int k = body_index(m, 'c');
            assert_true(k >= 0 && k < CRASH_N);
            assert_int_equal(fate[k], 0);
            assert_int_equal(e2e_num(m, "reconsumeTimes"), 0);
            fate[k] = 2;
            recv_at[k] = t;
            json_array_append(held, m);
        }
        json_decref(r);
    }
    assert_int_equal(json_array_size(held), 30);
    json_t *first = json_array();
    for (size_t i = 0; i < 15; i++) {
        json_t *m = json_array_get(held, i);
        json_array_append(first, m);
        fate[body_index(m, 'c')] = 1;
    }
    ack_all(c, "gC", "Cr", first);
    json_decref(first);
    json_decref(held);
    long long lag = 0;
    assert_int_equal(inflight_of(c, "gC", "Cr", &lag), 15);
    assert_true(lag >= CRASH_N - 15);
    if (settle_ms > 0) e2e_sleep_ms(settle_ms);

    if (graceful) {
        int st = e2e_stop(&c->srv);
        if (st != 0) e2e_case_print_log(c);
        assert_int_equal(st, 0);
    } else {
        e2e_kill9(&c->srv);
    }
    e2e_case_start(c, flags); /* the same data directory */
    long long since = e2e_now_ms() - first_recv;
    long long inflight = inflight_of(c, "gC", "Cr", NULL);
    print_message("restarted %lld ms after the first receive: %lld in flight\n", since, inflight);
    if (e2e_now_ms() - first_recv < 1500) assert_int_equal(inflight, 15);

    int again[CRASH_N] = {0};
    int total = 0;
    long long end = e2e_now_ms() + 10000;
    while (total < CRASH_N - 15 && e2e_now_ms() < end) {
        json_t *r = receive(c, "gC", "{\"topic\":\"Cr\",\"maxMessages\":16,\"invisibleMs\":30000,"
                            "\"waitMs\":1000}");
        long long at = e2e_now_ms();
        for (size_t i = 0; i < json_array_size(msgs_of(r)); i++) {
            json_t *m = json_array_get(msgs_of(r), i);
            int k = body_index(m, 'c');
            assert_true(k >= 0 && k < CRASH_N);
            if (fate[k] == 1) fail_msg("c%d was acked before the stop and came back", k);
            again[k]++;
            total++;
            long long rt = e2e_num(m, "reconsumeTimes");
            if (fate[k] == 2) {
                if (rt != 1) fail_msg("c%d (in flight at the stop): reconsumeTimes %lld", k, rt);
                if (at - recv_at[k] < 2000)
                    fail_msg("c%d came back %lld ms after it was received, before its "
                             "invisibility (2000 ms) ended", k, at - recv_at[k]);
            } else if (rt != 0) {
                fail_msg("c%d (never received): reconsumeTimes %lld", k, rt);
            }
        }
        ack_all(c, "gC", "Cr", msgs_of(r));
        json_decref(r);
    }
    for (int k = 0; k < CRASH_N; k++) {
        int want = fate[k] == 1 ? 0 : 1;
        if (again[k] != want) fail_msg("c%d (fate %d) delivered %d times after the restart", k,
                                       fate[k], again[k]);
    }
    json_t *r = receive(c, "gC", "{\"topic\":\"Cr\",\"waitMs\":1000}");
    assert_int_equal(json_array_size(msgs_of(r)), 0);
    json_decref(r);
    assert_int_equal(inflight_of(c, "gC", "Cr", &lag), 0);
    assert_int_equal(lag, 0);
}

/* State only in the journal (no snapshot before the kill). */
static void test_pop_kill9_keeps_acks_and_redelivers_the_unacked(void **state) {
    crash_case(*state, NULL, 0, false);
}

/* A snapshot (offsetFlushInterval 100 ms) plus the journal after it. */
static void test_pop_kill9_after_a_snapshot_keeps_acks_and_redelivers_the_unacked(void **state) {
    const char *flags[] = {"--offsetFlushInterval=100", NULL};
    crash_case(*state, flags, 400, false);
}

/* SIGTERM: the state saved at close. */
static void test_pop_restart_keeps_acks_and_redelivers_the_unacked(void **state) {
    crash_case(*state, NULL, 0, true);
}

/* ============================================================================
 * 8. bad input
 * ==========================================================================*/

static void test_pop_rejects_bad_input(void **state) {
    E2eCase *c = *state;
    const char *flags[] = {"--autoCreateSubscriptionGroup=false", NULL};
    e2e_case_start(c, flags);
    e2e_create_topic(c, "Bad", 1);
    const char *rcv = "/v1/groups/gB/receive";
    const char *ack = "/v1/groups/gB/ack";
    const char *nack = "/v1/groups/gB/nack";

    e2e_expect_error(c, "POST", "/v1/groups/nogroup/receive", E2E_JSON, "{\"topic\":\"Bad\"}", 404,
                     "GROUP_NOT_FOUND");
    e2e_expect_error(c, "GET", "/v1/groups/nogroup/stream?topic=Bad", NULL, NULL, 404,
                     "GROUP_NOT_FOUND");
    e2e_expect_error(c, "POST", "/v1/groups/nogroup/ack", E2E_JSON,
                     "{\"topic\":\"Bad\",\"receiptHandles\":[\"abc\"]}", 404, "GROUP_NOT_FOUND");
    if (!group_put(c, "gB", "{}")) skip();
    assert_true(group_put(c, "gB2", "{}"));

    static const char *const bad_max[] = {"0", "1001", "-1", "\"x\"", "1.5", "null"};
    for (size_t i = 0; i < sizeof(bad_max) / sizeof(*bad_max); i++) {
        char body[128];
        snprintf(body, sizeof(body), "{\"topic\":\"Bad\",\"maxMessages\":%s,\"waitMs\":0}",
                 bad_max[i]);
        expect_error_msg(c, "POST", rcv, E2E_JSON, body, 400, "INVALID_FIELD", "1..1000");
    }
    static const char *const bad_inv[] = {"999", "43200001", "0"};
    for (size_t i = 0; i < sizeof(bad_inv) / sizeof(*bad_inv); i++) {
        char body[128];
        snprintf(body, sizeof(body), "{\"topic\":\"Bad\",\"invisibleMs\":%s,\"waitMs\":0}",
                 bad_inv[i]);
        expect_error_msg(c, "POST", rcv, E2E_JSON, body, 400, "INVALID_FIELD", "1000..43200000");
    }
    static const char *const bad_wait[] = {"-1", "30001"};
    for (size_t i = 0; i < sizeof(bad_wait) / sizeof(*bad_wait); i++) {
        char body[128];
        snprintf(body, sizeof(body), "{\"topic\":\"Bad\",\"waitMs\":%s}", bad_wait[i]);
        expect_error_msg(c, "POST", rcv, E2E_JSON, body, 400, "INVALID_FIELD", "0..30000");
    }
    /* the bounds themselves are accepted */
    json_decref(receive(c, "gB", "{\"topic\":\"Bad\",\"maxMessages\":1000,\"invisibleMs\":1000,"
                        "\"waitMs\":0}"));
    json_decref(receive(c, "gB", "{\"topic\":\"Bad\",\"maxMessages\":1,"
                        "\"invisibleMs\":43200000,\"waitMs\":0}"));
    expect_error_msg(c, "POST", rcv, E2E_JSON, "{\"topic\":\"Bad\",\"foo\":1}", 400,
                     "UNKNOWN_FIELD", "foo");
    expect_error_msg(c, "POST", rcv, E2E_JSON, "{\"maxMessages\":1}", 400, "INVALID_FIELD",
                     "topic");
    e2e_expect_error(c, "POST", rcv, E2E_JSON, "{\"topic\":\"NoSuchTopic\",\"waitMs\":0}", 404,
                     "TOPIC_NOT_FOUND");
    e2e_expect_error(c, "POST", rcv, "text/plain", "{\"topic\":\"Bad\"}", 415,
                     "UNSUPPORTED_MEDIA_TYPE");
    e2e_expect_error(c, "POST", rcv, E2E_JSON, "{\"topic\":", 400, "INVALID_JSON");
    e2e_expect_error(c, "POST", rcv, E2E_JSON, "[1]", 400, "INVALID_JSON");
    e2e_expect_error(c, "POST", ack, "text/plain", "{\"topic\":\"Bad\",\"receiptHandles\":[\"a\"]}",
                     415, "UNSUPPORTED_MEDIA_TYPE");
    e2e_expect_error(c, "POST", ack, E2E_JSON, "{\"topic\":\"Bad\",\"receiptHandles\":[", 400,
                     "INVALID_JSON");
    e2e_expect_error(c, "POST", nack, "text/plain", "{\"topic\":\"Bad\",\"receiptHandle\":\"a\"}",
                     415, "UNSUPPORTED_MEDIA_TYPE");
    e2e_expect_error(c, "POST", nack, E2E_JSON, "nope", 400, "INVALID_JSON");

    /* forged handles */
    char zeros[53];
    memset(zeros, '0', 52);
    zeros[52] = '\0';
    char rnd[53];
    srand((unsigned)time(NULL));
    for (int i = 0; i < 52; i++) rnd[i] = "0123456789ABCDEF"[rand() % 16];
    rnd[52] = '\0';
    expect_ack(c, "gB", "Bad", zeros, "INVALID");
    expect_ack(c, "gB", "Bad", rnd, "INVALID");
    expect_ack(c, "gB", "Bad", "abc", "INVALID");
    expect_nack(c, "gB", "Bad", "abc", 0, "INVALID");

    /* a real handle of gB is no handle of gB2, nor of another topic */
    produce_body(c, "Bad", "real", 0);
    e2e_wait_queue(c, "Bad", 0, 1);
    json_t *r = receive(c, "gB", "{\"topic\":\"Bad\",\"waitMs\":0}");
    assert_int_equal(json_array_size(msgs_of(r)), 1);
    const char *h = e2e_str(json_array_get(msgs_of(r), 0), "receiptHandle");
    expect_ack(c, "gB2", "Bad", h, "INVALID");
    expect_nack(c, "gB2", "Bad", h, 0, "INVALID");
    e2e_create_topic(c, "Bad2", 1);
    expect_ack(c, "gB", "Bad2", h, "INVALID");
    /* a handle with one digit changed */
    char tampered[64];
    snprintf(tampered, sizeof(tampered), "%s", h);
    tampered[40] = tampered[40] == '0' ? '1' : '0';
    expect_ack(c, "gB", "Bad", tampered, "INVALID");
    expect_ack(c, "gB", "Bad", h, "OK");
    json_decref(r);

    e2e_expect_error(c, "POST", ack, E2E_JSON, "{\"topic\":\"Bad\",\"receiptHandles\":[]}", 400,
                     "INVALID_FIELD");
    json_t *many = json_array();
    for (int i = 0; i < 1001; i++) json_array_append_new(many, json_string(zeros));
    char *body = dump(json_pack("{s:s, s:o}", "topic", "Bad", "receiptHandles", many));
    expect_error_msg(c, "POST", ack, E2E_JSON, body, 400, "INVALID_FIELD", "1..1000");
    free(body);
    e2e_expect_error(c, "POST", ack, E2E_JSON, "{\"topic\":\"Bad\",\"receiptHandles\":[1]}", 400,
                     "INVALID_FIELD");
    e2e_expect_error(c, "POST", ack, E2E_JSON, "{\"topic\":\"Bad\"}", 400, "INVALID_FIELD");
    e2e_expect_error(c, "POST", ack, E2E_JSON, "{\"receiptHandles\":[\"abc\"]}", 400,
                     "INVALID_FIELD");
    expect_error_msg(c, "POST", nack, E2E_JSON,
                     "{\"topic\":\"Bad\",\"receiptHandle\":\"abc\",\"delayMs\":-5}", 400,
                     "INVALID_FIELD", "delayMs");
    e2e_expect_error(c, "POST", nack, E2E_JSON, "{\"topic\":\"Bad\"}", 400, "INVALID_FIELD");
    e2e_expect_error(c, "POST", nack, E2E_JSON,
                     "{\"topic\":\"Bad\",\"receiptHandle\":\"abc\",\"x\":1}", 400, "UNKNOWN_FIELD");

    /* names, settings and permissions */
    e2e_expect_error(c, "POST", "/v1/groups/%25RETRY%25gB/receive", E2E_JSON,
                     "{\"topic\":\"Bad\"}", 400, "INVALID_NAME");
    e2e_expect_error(c, "POST", rcv, E2E_JSON, "{\"topic\":\"%DLQ%gB\",\"waitMs\":0}", 400,
                     "INVALID_NAME");
    assert_true(group_put(c, "gOff", "{\"consumeEnable\":false}"));
    e2e_expect_error(c, "POST", "/v1/groups/gOff/receive", E2E_JSON,
                     "{\"topic\":\"Bad\",\"waitMs\":0}", 403, "CONSUME_DISABLED");
    assert_true(group_put(c, "gCast", "{\"broadcast\":true}"));
    e2e_expect_error(c, "POST", "/v1/groups/gCast/receive", E2E_JSON,
                     "{\"topic\":\"Bad\",\"waitMs\":0}", 409, "BROADCAST_GROUP");
    json_decref(e2e_call(c, "PUT", "/v1/topics/WOnly", E2E_JSON, "{\"queues\":1,\"perm\":\"W\"}",
                         201));
    e2e_expect_error(c, "POST", rcv, E2E_JSON, "{\"topic\":\"WOnly\",\"waitMs\":0}", 403,
                     "TOPIC_NOT_READABLE");
    /* stream parameters */
    e2e_expect_error(c, "GET", "/v1/groups/gB/stream?topic=Bad&maxMessages=0", NULL, NULL, 400,
                     "INVALID_PARAMETER");
    e2e_expect_error(c, "GET", "/v1/groups/gB/stream?topic=Bad&invisibleMs=999", NULL, NULL, 400,
                     "INVALID_PARAMETER");
    e2e_expect_error(c, "GET", "/v1/groups/gB/stream?topic=Bad&waitMs=5", NULL, NULL, 400,
                     "INVALID_PARAMETER");
    e2e_expect_error(c, "GET", "/v1/groups/gB/stream?topic=Bad&type=SQL92", NULL, NULL, 400,
                     "INVALID_PARAMETER");
    e2e_expect_error(c, "GET", "/v1/groups/gB/stream?topic=Bad&type=SQL92&expression=a%20%3E",
                     NULL, NULL, 400, "INVALID_FILTER");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_pop_two_receivers_split_a_topic, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_pop_unacked_message_comes_back_after_invisibility,
                                        setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_pop_receive_waits_for_an_arrival_or_waitms, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_pop_inflight_threshold_limits_a_queue, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(
            test_pop_nack_retries_then_dead_letters_and_resend_brings_it_back, setup,
            e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_pop_nack_without_delay_follows_the_retry_ladder,
                                        setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_pop_tag_and_sql92_filters_select_exactly_the_matching,
                                        setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(
            test_pop_sql92_filter_finds_a_match_behind_many_non_matching, setup,
            e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_pop_orderly_group_keeps_each_key_in_order, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_pop_orderly_nack_keeps_the_queue_waiting, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_pop_stream_pushes_messages_and_keeps_alive, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_pop_stream_ends_cleanly_when_the_broker_stops,
                                        setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(
            test_pop_stream_client_going_away_leaves_messages_to_come_back, setup,
            e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_pop_kill9_keeps_acks_and_redelivers_the_unacked,
                                        setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(
            test_pop_kill9_after_a_snapshot_keeps_acks_and_redelivers_the_unacked, setup,
            e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_pop_restart_keeps_acks_and_redelivers_the_unacked,
                                        setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_pop_rejects_bad_input, setup, e2e_case_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
