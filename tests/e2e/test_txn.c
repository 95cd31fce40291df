/*
 * test_txn.c - end-to-end tests of transactional messages (issue 5, API.md
 * "Transactional messages") against a real petrel, with a small check-back
 * HTTP server inside the test (libmicrohttpd on 127.0.0.1): a half message
 * is invisible until committed, then on its topic exactly once; rollback
 * discards it; repeated and crossed commit/rollback; every bad input; the
 * check-back answering COMMIT, ROLLBACK, UNKNOWN until transactionCheckMax,
 * garbage, a slow answer and an unreachable URL; the host allow-list;
 * SIGTERM restart with pending transactions (the check-back resumes); and
 * kill -9 in the middle of a stream of commits: every transaction is
 * afterwards either committed with its message on the topic exactly once
 * or still pending with nothing on the topic, and `petrel check` is clean;
 * under SYNC_FLUSH, kill -9 right after the answers loses none of them.
 * Each case starts its own server in its own temporary directory.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2e.h"

/* Short check timing: first check 300 ms after prepare, the next ones
 * 1.2 s apart (the broker keeps them at least the request timeout + 1 s
 * apart), answers cut after 200 ms, 3 checks at most. */
static const char *const fast_checks[] = {
    "--transactionTimeOut=300", "--transactionCheckInterval=300",
    "--transactionCheckRequestTimeout=200", "--transactionCheckMax=3", NULL};

static int setup(void **state) {
    return e2e_case_setup(state, "e2e-txn");
}

/* ---- the check-back server ------------------------------------------------
 * Answers by path: /commit, /rollback, /unknown (the JSON state), /garbage
 * (200 "nope"), /slow (UNKNOWN after 1 s: past the request timeout),
 * /flip (UNKNOWN to the first check of a transaction, COMMIT after).
 * Every request is recorded. */

#define CHECKS_MAX 256

typedef struct Check {
    char path[32];
    json_t *body; /* parsed request body (owned), NULL when not JSON */
    char content_type[64];
} Check;

typedef struct CheckServer {
    struct MHD_Daemon *d;
    int port;
    pthread_mutex_t mu;
    Check got[CHECKS_MAX];
    int n;
} CheckServer;

typedef struct Upload {
    char *buf;
    size_t len;
} Upload;

static enum MHD_Result answer(struct MHD_Connection *conn, unsigned status, const char *text) {
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_MUST_COPY);
    MHD_add_response_header(r, "Content-Type", "application/json");
    enum MHD_Result ret = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result on_check(void *cls, struct MHD_Connection *conn, const char *url,
                                const char *method, const char *version, const char *data,
                                size_t *size, void **con_cls) {
    (void)version;
    CheckServer *s = cls;
    Upload *u = *con_cls;
    if (!u) {
        *con_cls = calloc(1, sizeof(Upload));
        return *con_cls ? MHD_YES : MHD_NO;
    }
    if (*size) {
        char *nb = realloc(u->buf, u->len + *size + 1);
        if (!nb) return MHD_NO;
        memcpy(nb + u->len, data, *size);
        u->buf = nb;
        u->len += *size;
        u->buf[u->len] = '\0';
        *size = 0;
        return MHD_YES;
    }
    json_t *body = u->buf ? json_loads(u->buf, 0, NULL) : NULL;
    const char *ct = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type");
    const char *id = json_string_value(json_object_get(body, "transactionId"));
    int earlier = 0;
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->n && id; i++)
        if (strcmp(json_string_value(json_object_get(s->got[i].body, "transactionId")) ?: "",
                   id) == 0)
            earlier++;
    if (s->n < CHECKS_MAX && strcmp(method, "POST") == 0) {
        Check *c = &s->got[s->n++];
        snprintf(c->path, sizeof(c->path), "%s", url);
        snprintf(c->content_type, sizeof(c->content_type), "%s", ct ? ct : "");
        c->body = body;
        body = NULL;
    }
    pthread_mutex_unlock(&s->mu);
    json_decref(body);
    free(u->buf);
    free(u);
    *con_cls = NULL;
    if (strcmp(url, "/commit") == 0) return answer(conn, 200, "{\"state\":\"COMMIT\"}");
    if (strcmp(url, "/rollback") == 0) return answer(conn, 200, "{\"state\":\"ROLLBACK\"}");
    if (strcmp(url, "/unknown") == 0) return answer(conn, 200, "{\"state\":\"UNKNOWN\"}");
    if (strcmp(url, "/garbage") == 0) return answer(conn, 200, "nope");
    if (strcmp(url, "/slow") == 0) {
        e2e_sleep_ms(1000);
        return answer(conn, 200, "{\"state\":\"UNKNOWN\"}");
    }
    if (strcmp(url, "/flip") == 0)
        return answer(conn, 200, earlier ? "{\"state\":\"COMMIT\"}" : "{\"state\":\"UNKNOWN\"}");
    return answer(conn, 404, "{}");
}

static void check_server_start(CheckServer *s) {
    memset(s, 0, sizeof(*s));
    pthread_mutex_init(&s->mu, NULL);
    s->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION,
                            0, NULL, NULL, on_check, s, MHD_OPTION_SOCK_ADDR, NULL,
                            MHD_OPTION_END);
    assert_non_null(s->d);
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    assert_non_null(di);
    s->port = di->port;
}

static void check_server_stop(CheckServer *s) {
    MHD_stop_daemon(s->d);
    for (int i = 0; i < s->n; i++) json_decref(s->got[i].body);
    pthread_mutex_destroy(&s->mu);
}

/* Requests the server got for transaction 'id' so far. */
static int checks_for(CheckServer *s, const char *id) {
    int n = 0;
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->n; i++) {
        const char *t = json_string_value(json_object_get(s->got[i].body, "transactionId"));
        if (t && strcmp(t, id) == 0) n++;
    }
    pthread_mutex_unlock(&s->mu);
    return n;
}

/* ---- broker helpers ---------------------------------------------------------*/

/* Sends a transactional message with the JSON members 'extra' (without
 * braces, may be "") and body 'body' to 'topic'; copies its transaction
 * id into 'id' (33 bytes). */
static void prepare(E2eCase *c, const char *topic, const char *body, const char *extra,
                    char id[65]) {
    char path[160], json[1024];
    snprintf(path, sizeof(path), "/v1/topics/%s/transactions", topic);
    snprintf(json, sizeof(json), "{\"body\":\"%s\"%s%s}", body, *extra ? "," : "", extra);
    json_t *r = e2e_call(c, "POST", path, E2E_JSON, json, 200);
    assert_string_equal(e2e_str(r, "status"), "SEND_OK");
    assert_int_equal(strlen(e2e_str(r, "msgId")), 32);
    assert_non_null(e2e_str(r, "transactionId"));
    snprintf(id, 65, "%s", e2e_str(r, "transactionId"));
    json_decref(r);
}

/* POST /v1/transactions/{id}/{what}, expecting 'status'; returns the
 * answer (caller owns). */
static json_t *end_txn(E2eCase *c, const char *id, const char *what, long status) {
    char path[160];
    snprintf(path, sizeof(path), "/v1/transactions/%.64s/%.16s", id, what);
    return e2e_call(c, "POST", path, NULL, NULL, status);
}

static json_t *get_txn(E2eCase *c, const char *id) {
    char path[160];
    snprintf(path, sizeof(path), "/v1/transactions/%.64s", id);
    return e2e_call(c, "GET", path, NULL, NULL, 200);
}

/* Waits (up to 'ms') for transaction 'id' to reach 'state'; returns its
 * row (caller owns) or fails. */
static json_t *wait_state(E2eCase *c, const char *id, const char *state, int ms) {
    long long end = e2e_now_ms() + ms;
    for (;;) {
        json_t *t = get_txn(c, id);
        if (strcmp(e2e_str(t, "state"), state) == 0) return t;
        if (e2e_now_ms() > end) {
            fprintf(stderr, "transaction %s: state %s, waited for %s\n", id, e2e_str(t, "state"),
                    state);
            json_decref(t);
            e2e_case_print_log(c);
            fail();
        }
        json_decref(t);
        e2e_sleep_ms(50);
    }
}

/* How many messages with body 'body' are on 'topic' (every queue read
 * from its start). */
static int count_body(E2eCase *c, const char *topic, const char *body) {
    char path[256];
    snprintf(path, sizeof(path), "/v1/topics/%s/queues", topic);
    json_t *qs = e2e_call(c, "GET", path, NULL, NULL, 200);
    int n = 0;
    for (size_t q = 0; q < json_array_size(qs); q++) {
        long long max = e2e_num(json_array_get(qs, q), "maxOffset");
        for (long long off = 0; off < max;) {
            snprintf(path, sizeof(path), "/v1/topics/%s/queues/%zu/messages?offset=%lld&max=100",
                     topic, q, off);
            json_t *p = e2e_call(c, "GET", path, NULL, NULL, 200);
            json_t *msgs = json_object_get(p, "messages");
            for (size_t i = 0; i < json_array_size(msgs); i++)
                if (strcmp(e2e_str(json_array_get(msgs, i), "body"), body) == 0) n++;
            long long next = e2e_num(p, "nextOffset");
            json_decref(p);
            if (next <= off) break;
            off = next;
        }
    }
    json_decref(qs);
    return n;
}

/* count_body once the messages already stored have reached their queues
 * (dispatch follows the answer by a moment): waits up to 3 s for 'n',
 * then returns the count. */
static int settled_count(E2eCase *c, const char *topic, const char *body, int n) {
    int got = 0;
    for (int tries = 0; tries < 300 && (got = count_body(c, topic, body)) < n; tries++)
        e2e_sleep_ms(10);
    return got;
}

/* ============================================================================
 * 1. commit: invisible before, on its topic once after, idempotent, 409
 * ==========================================================================*/
static void test_txn_commit_makes_the_half_message_visible_once(void **state) {
    E2eCase *c = *state;
    e2e_case_start(c, NULL);
    e2e_create_topic(c, "TX", 2);
    char id[65];
    prepare(c, "TX", "order-1", "\"tags\":\"created\",\"keys\":[\"o1\"],"
            "\"properties\":{\"region\":\"eu\"},\"shardingKey\":\"s\"", id);
    json_t *t = get_txn(c, id);
    assert_string_equal(e2e_str(t, "state"), "PREPARED");
    assert_true(json_is_null(json_object_get(t, "msgId")));
    assert_int_equal(e2e_num(t, "checkTimes"), 0);
    assert_true(json_is_null(json_object_get(t, "checkUrl")));
    json_decref(t);
    /* a half message is on no queue of its topic, nor found by key */
    e2e_sleep_ms(100);
    assert_int_equal(count_body(c, "TX", "order-1"), 0);
    json_t *q = e2e_call(c, "GET", "/v1/topics/TX/messages?key=o1", NULL, NULL, 200);
    assert_int_equal(json_array_size(json_object_get(q, "messages")), 0);
    json_decref(q);

    json_t *a = end_txn(c, id, "commit", 200);
    assert_string_equal(e2e_str(a, "state"), "COMMITTED");
    assert_string_equal(e2e_str(a, "resolvedBy"), "client");
    const char *mid = e2e_str(a, "msgId");
    assert_non_null(mid);
    char path[128];
    snprintf(path, sizeof(path), "/v1/messages/%s", mid);
    json_t *msg = e2e_call(c, "GET", path, NULL, NULL, 200);
    assert_string_equal(e2e_str(msg, "topic"), "TX");
    assert_string_equal(e2e_str(msg, "body"), "order-1");
    assert_string_equal(e2e_str(msg, "tags"), "created");
    assert_string_equal(json_string_value(json_array_get(json_object_get(msg, "keys"), 0)), "o1");
    assert_string_equal(e2e_str(json_object_get(msg, "properties"), "region"), "eu");
    assert_int_equal(e2e_num(msg, "queueId"), e2e_num(a, "queueId"));
    assert_int_equal(e2e_num(msg, "queueOffset"), e2e_num(a, "queueOffset"));
    json_decref(msg);
    /* again: the same answer, nothing stored twice; rollback now conflicts */
    json_t *b = end_txn(c, id, "commit", 200);
    assert_string_equal(e2e_str(b, "msgId"), mid);
    json_decref(b);
    json_decref(a);
    e2e_expect_error(c, "POST", "/v1/transactions/x/rollback", NULL, NULL, 404,
                     "TRANSACTION_NOT_FOUND");
    snprintf(path, sizeof(path), "/v1/transactions/%s/rollback", id);
    e2e_expect_error(c, "POST", path, NULL, NULL, 409, "TRANSACTION_CONFLICT");
    assert_int_equal(settled_count(c, "TX", "order-1", 1), 1);
    for (int tries = 0; tries < 300; tries++) { /* the key index follows the dispatch */
        q = e2e_call(c, "GET", "/v1/topics/TX/messages?key=o1", NULL, NULL, 200);
        if (json_array_size(json_object_get(q, "messages")) >= 1 || tries == 299) break;
        json_decref(q);
        e2e_sleep_ms(10);
    }
    assert_int_equal(json_array_size(json_object_get(q, "messages")), 1);
    json_decref(q);
    e2e_stop_ok(c);
}

/* ============================================================================
 * 2. rollback: never visible; commit after it is 409
 * ==========================================================================*/
static void test_txn_rollback_discards_and_commit_after_it_conflicts(void **state) {
    E2eCase *c = *state;
    e2e_case_start(c, NULL);
    e2e_create_topic(c, "TX", 1);
    char id[65];
    prepare(c, "TX", "never", "", id);
    json_t *a = end_txn(c, id, "rollback", 200);
    assert_string_equal(e2e_str(a, "state"), "ROLLED_BACK");
    assert_true(json_is_null(json_object_get(a, "msgId")));
    json_decref(a);
    json_decref(end_txn(c, id, "rollback", 200));
    char path[128];
    snprintf(path, sizeof(path), "/v1/transactions/%s/commit", id);
    e2e_expect_error(c, "POST", path, NULL, NULL, 409, "TRANSACTION_CONFLICT");
    /* a consumer group never sees it either */
    json_t *r = e2e_call(c, "POST", "/v1/groups/G/receive", E2E_JSON,
                         "{\"topic\":\"TX\",\"maxMessages\":8,\"waitMs\":200}", 200);
    assert_int_equal(json_array_size(json_object_get(r, "messages")), 0);
    json_decref(r);
    assert_int_equal(count_body(c, "TX", "never"), 0);
    e2e_stop_ok(c);
}

/* ============================================================================
 * 3. bad input: clear 4xx, nothing stored
 * ==========================================================================*/
static void test_txn_bad_requests_are_4xx(void **state) {
    E2eCase *c = *state;
    const char *const flags[] = {"--transactionCheckAllowedHosts=127.0.0.1,Checks.Example",
                                 NULL};
    e2e_case_start(c, flags);
    e2e_create_topic(c, "TX", 1);
    const char *p = "/v1/topics/TX/transactions";
    static const char *const bad[] = {
        "{\"body\":\"x\",\"checkUrl\":\"ftp://127.0.0.1/x\"}",
        "{\"body\":\"x\",\"checkUrl\":\"file:///etc/passwd\"}",
        "{\"body\":\"x\",\"checkUrl\":\"http://evil.example/x\"}",
        "{\"body\":\"x\",\"checkUrl\":\"http://user:pw@127.0.0.1/x\"}",
        "{\"body\":\"x\",\"checkUrl\":\"not a url\"}",
        "{\"body\":\"x\",\"checkUrl\":42}",
        "{\"body\":\"x\",\"checkUrl\":\"\"}",
        "{\"body\":\"x\",\"delayLevel\":1}",
        "{\"body\":\"x\",\"delayMs\":100}",
        "{\"messages\":[{\"body\":\"x\"}]}",
        "{\"body\":\"x\",\"nope\":1}",
        "{\"body\":\"x\",\"queueId\":5}",
        "{\"tags\":\"no body\"}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        E2eResponse r;
        assert_int_equal(e2e_send(&c->srv, "POST", p, E2E_JSON, bad[i], &r), 0);
        if (r.status != 400) fprintf(stderr, "%s: %ld %.*s\n", bad[i], r.status, (int)r.len, r.body);
        assert_int_equal(r.status, 400);
        e2e_response_free(&r);
    }
    /* the allow-list is case-insensitive */
    char id[65];
    prepare(c, "TX", "ok", "\"checkUrl\":\"https://checks.example:8443/tx\"", id);
    json_t *t = get_txn(c, id);
    assert_string_equal(e2e_str(t, "checkUrl"), "https://checks.example:8443/tx");
    json_decref(t);
    e2e_expect_error(c, "POST", p, E2E_JSON, "{\"body\":", 400, "INVALID_JSON");
    e2e_expect_error(c, "POST", p, "text/plain", "{\"body\":\"x\"}", 415,
                     "UNSUPPORTED_MEDIA_TYPE");
    e2e_expect_error(c, "POST", "/v1/topics/RMQ_SYS_X/transactions", E2E_JSON,
                     "{\"body\":\"x\"}", 400, "INVALID_NAME");
    e2e_expect_error(c, "POST", "/v1/transactions/a%20b/commit", NULL, NULL, 400,
                     "INVALID_FIELD");
    char path[128];
    snprintf(path, sizeof(path), "/v1/transactions/%s/commit", id);
    e2e_expect_error(c, "POST", path, E2E_JSON, "{\"force\":true}", 400, "UNKNOWN_FIELD");
    e2e_expect_error(c, "GET", "/v1/transactions/ABCDEF", NULL, NULL, 404,
                     "TRANSACTION_NOT_FOUND");
    /* nothing but the one good half message was stored: the topic is empty */
    assert_int_equal(count_body(c, "TX", "x"), 0);
    t = get_txn(c, id);
    assert_string_equal(e2e_str(t, "state"), "PREPARED");
    json_decref(t);
    e2e_stop_ok(c);
    /* autoCreateTopicEnable off: an unknown topic is 404 */
    const char *const off[] = {"--autoCreateTopicEnable=false", NULL};
    e2e_case_start(c, off);
    e2e_expect_error(c, "POST", "/v1/topics/Nope/transactions", E2E_JSON, "{\"body\":\"x\"}",
                     404, "TOPIC_NOT_FOUND");
    e2e_stop_ok(c);
}

/* ============================================================================
 * 4. check-back: COMMIT, ROLLBACK, UNKNOWN until the maximum, errors
 * ==========================================================================*/
static void test_txn_check_back_commit_rollback_unknown_and_errors(void **state) {
    E2eCase *c = *state;
    CheckServer cs;
    check_server_start(&cs);
    e2e_case_start(c, fast_checks);
    e2e_create_topic(c, "TX", 1);
    const char *paths[] = {"/commit", "/rollback", "/unknown", "/garbage", "/slow"};
    char ids[6][65];
    for (int i = 0; i < 5; i++) {
        char extra[160], body[16];
        snprintf(extra, sizeof(extra), "\"keys\":[\"k%d\",\"x\"],\"properties\":{\"n\":\"%d\"},"
                 "\"checkUrl\":\"http://127.0.0.1:%d%s\"", i, i, cs.port, paths[i]);
        snprintf(body, sizeof(body), "b%d", i);
        prepare(c, "TX", body, extra, ids[i]);
    }
    /* an unreachable check URL: a port nothing listens on */
    prepare(c, "TX", "b5", "\"checkUrl\":\"http://127.0.0.1:1/x\"", ids[5]);

    json_t *t = wait_state(c, ids[0], "COMMITTED", 5000);
    assert_string_equal(e2e_str(t, "resolvedBy"), "check");
    assert_int_equal(e2e_num(t, "checkTimes"), 1);
    json_decref(t);
    assert_int_equal(settled_count(c, "TX", "b0", 1), 1);
    t = wait_state(c, ids[1], "ROLLED_BACK", 5000);
    assert_string_equal(e2e_str(t, "resolvedBy"), "check");
    json_decref(t);
    /* 3 checks (~300 ms + 2 x 1.2 s), then rolled back */
    for (int i = 2; i < 6; i++) {
        t = wait_state(c, ids[i], "ROLLED_BACK", 10000);
        assert_string_equal(e2e_str(t, "resolvedBy"), "max_checks");
        assert_int_equal(e2e_num(t, "checkTimes"), 3);
        json_decref(t);
    }
    assert_int_equal(checks_for(&cs, ids[0]), 1);
    assert_int_equal(checks_for(&cs, ids[1]), 1);
    assert_int_equal(checks_for(&cs, ids[2]), 3);
    assert_int_equal(checks_for(&cs, ids[3]), 3);
    for (int i = 1; i < 6; i++) {
        char body[16];
        snprintf(body, sizeof(body), "b%d", i);
        assert_int_equal(count_body(c, "TX", body), 0);
    }
    /* the check-back request: the fields of API.md, checkTimes counting */
    pthread_mutex_lock(&cs.mu);
    int seen = 0;
    for (int i = 0; i < cs.n; i++) {
        json_t *b = cs.got[i].body;
        assert_non_null(b);
        assert_string_equal(cs.got[i].content_type, "application/json");
        if (strcmp(e2e_str(b, "transactionId"), ids[2]) != 0) continue;
        seen++;
        assert_string_equal(e2e_str(b, "topic"), "TX");
        assert_int_equal(strlen(e2e_str(b, "msgId")), 32);
        assert_int_equal(e2e_num(b, "checkTimes"), seen);
        json_t *keys = json_object_get(b, "keys");
        assert_int_equal(json_array_size(keys), 2);
        assert_string_equal(json_string_value(json_array_get(keys, 0)), "k2");
        assert_string_equal(e2e_str(json_object_get(b, "properties"), "n"), "2");
    }
    pthread_mutex_unlock(&cs.mu);
    assert_int_equal(seen, 3);
    e2e_stop_ok(c);
    check_server_stop(&cs);
}

/* ============================================================================
 * 5. SIGTERM restart with pending transactions: state and check-back resume
 * ==========================================================================*/
static void test_txn_pending_survive_restart_and_checks_resume(void **state) {
    E2eCase *c = *state;
    CheckServer cs;
    check_server_start(&cs);
    const char *const slow_first[] = {
        "--transactionTimeOut=1500", "--transactionCheckInterval=300",
        "--transactionCheckRequestTimeout=200", "--transactionCheckMax=5", NULL};
    e2e_case_start(c, slow_first);
    e2e_create_topic(c, "TX", 2);
    char a[65], b[65], d[65], url[96];
    snprintf(url, sizeof(url), "\"checkUrl\":\"http://127.0.0.1:%d/flip\"", cs.port);
    prepare(c, "TX", "by-endpoint", "", a);
    prepare(c, "TX", "by-check", url, b);
    prepare(c, "TX", "rolled", "", d);
    json_decref(end_txn(c, d, "rollback", 200));
    e2e_stop_ok(c); /* before any check was due */
    assert_int_equal(checks_for(&cs, b), 0);
    e2e_case_start(c, slow_first);
    json_t *t = get_txn(c, a);
    assert_string_equal(e2e_str(t, "state"), "PREPARED");
    json_decref(t);
    /* the pending list: both prepared ones, the next check due first */
    json_t *l = e2e_call(c, "GET", "/v1/transactions?limit=10", NULL, NULL, 200);
    assert_int_equal(e2e_num(l, "pending"), 2);
    json_t *arr = json_object_get(l, "transactions");
    assert_int_equal(json_array_size(arr), 2);
    assert_string_equal(e2e_str(json_array_get(arr, 0), "transactionId"), a);
    assert_string_equal(e2e_str(json_array_get(arr, 1), "transactionId"), b);
    assert_string_equal(e2e_str(json_array_get(arr, 1), "state"), "PREPARED");
    assert_true(e2e_num(json_array_get(arr, 0), "nextCheckAt") <=
                e2e_num(json_array_get(arr, 1), "nextCheckAt"));
    json_decref(l);
    l = e2e_call(c, "GET", "/v1/transactions?limit=1", NULL, NULL, 200);
    assert_int_equal(json_array_size(json_object_get(l, "transactions")), 1);
    json_decref(l);
    e2e_expect_error(c, "GET", "/v1/transactions?limit=0", NULL, NULL, 400, "INVALID_PARAMETER");
    e2e_expect_error(c, "GET", "/v1/transactions?state=X", NULL, NULL, 400, "INVALID_PARAMETER");
    t = get_txn(c, d);
    assert_string_equal(e2e_str(t, "state"), "ROLLED_BACK");
    json_decref(t);
    json_t *r = end_txn(c, a, "commit", 200);
    json_decref(r);
    /* /flip: UNKNOWN to the first check, COMMIT to the second */
    t = wait_state(c, b, "COMMITTED", 8000);
    assert_int_equal(e2e_num(t, "checkTimes"), 2);
    json_decref(t);
    assert_int_equal(checks_for(&cs, b), 2);
    assert_int_equal(settled_count(c, "TX", "by-endpoint", 1), 1);
    assert_int_equal(settled_count(c, "TX", "by-check", 1), 1);
    assert_int_equal(count_body(c, "TX", "rolled"), 0);
    e2e_stop_ok(c);
    check_server_stop(&cs);
}

/* ============================================================================
 * 6. kill -9 during a stream of commits: each exactly once or pending
 * ==========================================================================*/
#define KILL_TXNS 300

typedef struct Committer {
    E2eCase *c;
    char (*ids)[65];
    int from, to;
    int acked[KILL_TXNS]; /* 1: the commit was answered 200 */
} Committer;

static void *commit_all(void *arg) {
    Committer *k = arg;
    for (int i = k->from; i < k->to; i++) {
        char path[160];
        snprintf(path, sizeof(path), "/v1/transactions/%s/commit", k->ids[i]);
        E2eResponse r;
        if (e2e_send(&k->c->srv, "POST", path, NULL, NULL, &r) != 0) break; /* killed */
        if (r.status == 200) k->acked[i] = 1;
        e2e_response_free(&r);
    }
    return NULL;
}

static void test_txn_kill9_during_commits_each_exactly_once(void **state) {
    E2eCase *c = *state;
    const char *const flags[] = {"--transactionTimeOut=600000", NULL};
    e2e_case_start(c, flags);
    e2e_create_topic(c, "TX", 4);
    static char ids[KILL_TXNS][65];
    for (int i = 0; i < KILL_TXNS; i++) {
        char body[32];
        snprintf(body, sizeof(body), "m%d", i);
        prepare(c, "TX", body, "", ids[i]);
    }
    Committer k = {.c = c, .ids = ids, .from = 0, .to = KILL_TXNS};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, commit_all, &k), 0);
    e2e_sleep_ms(150);
    e2e_kill9(&c->srv);
    pthread_join(th, NULL);
    e2e_case_start(c, flags);
    int committed = 0, acked = 0;
    for (int i = 0; i < KILL_TXNS; i++) {
        char body[32];
        snprintf(body, sizeof(body), "m%d", i);
        json_t *t = get_txn(c, ids[i]);
        const char *st = e2e_str(t, "state");
        int on_topic = settled_count(c, "TX", body, strcmp(st, "COMMITTED") == 0 ? 1 : 0);
        if (strcmp(st, "COMMITTED") == 0) {
            committed++;
            assert_int_equal(on_topic, 1);
        } else {
            assert_string_equal(st, "PREPARED");
            assert_int_equal(on_topic, 0);
            /* an acknowledged commit is never lost */
            assert_int_equal(k.acked[i], 0);
        }
        acked += k.acked[i];
        json_decref(t);
        if (i % 3 == 0) json_decref(end_txn(c, ids[i], "commit", 200)); /* commit some now */
    }
    print_message("kill -9 after %d acknowledged commits; %d committed at restart\n", acked,
                  committed);
    for (int i = 0; i < KILL_TXNS; i++) json_decref(end_txn(c, ids[i], "commit", 200));
    for (int i = 0; i < KILL_TXNS; i += 7) {
        char body[32];
        snprintf(body, sizeof(body), "m%d", i);
        assert_int_equal(settled_count(c, "TX", body, 1), 1);
    }
    long long total = 0;
    for (int tries = 0; tries < 300 && total < KILL_TXNS; tries++) {
        if (tries) e2e_sleep_ms(10);
        json_t *qs = e2e_call(c, "GET", "/v1/topics/TX/queues", NULL, NULL, 200);
        total = 0;
        for (size_t q = 0; q < json_array_size(qs); q++)
            total += e2e_num(json_array_get(qs, q), "maxOffset");
        json_decref(qs);
    }
    assert_int_equal(total, KILL_TXNS);
    e2e_stop_ok(c);
    e2e_check_data(c);
}

/* ============================================================================
 * 7. SYNC_FLUSH: what was answered survives kill -9 at once
 * ==========================================================================*/
static void test_txn_sync_flush_answers_survive_kill9(void **state) {
    E2eCase *c = *state;
    const char *const flags[] = {"--flushDiskType=SYNC_FLUSH", NULL};
    e2e_case_start(c, flags);
    e2e_create_topic(c, "TX", 2);
    char a[65], b[65], d[65];
    prepare(c, "TX", "sync-commit", "", a);
    prepare(c, "TX", "sync-pending", "", b);
    prepare(c, "TX", "sync-rollback", "", d);
    json_t *r = end_txn(c, a, "commit", 200);
    assert_string_equal(e2e_str(r, "status"), "OK");
    json_decref(r);
    json_decref(end_txn(c, d, "rollback", 200));
    e2e_kill9(&c->srv); /* right after the answers: rows may be only in memory */
    e2e_case_start(c, flags);
    json_t *t = get_txn(c, a);
    assert_string_equal(e2e_str(t, "state"), "COMMITTED");
    json_decref(t);
    t = get_txn(c, b);
    assert_string_equal(e2e_str(t, "state"), "PREPARED");
    json_decref(t);
    t = get_txn(c, d);
    assert_string_equal(e2e_str(t, "state"), "ROLLED_BACK");
    json_decref(t);
    assert_int_equal(settled_count(c, "TX", "sync-commit", 1), 1);
    json_decref(end_txn(c, b, "commit", 200));
    assert_int_equal(settled_count(c, "TX", "sync-pending", 1), 1);
    assert_int_equal(count_body(c, "TX", "sync-rollback"), 0);
    e2e_stop_ok(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_txn_commit_makes_the_half_message_visible_once,
                                        setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_txn_rollback_discards_and_commit_after_it_conflicts,
                                        setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_txn_bad_requests_are_4xx, setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_txn_check_back_commit_rollback_unknown_and_errors,
                                        setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_txn_pending_survive_restart_and_checks_resume,
                                        setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_txn_kill9_during_commits_each_exactly_once, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_txn_sync_flush_answers_survive_kill9, setup,
                                        e2e_case_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
