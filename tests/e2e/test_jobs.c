/*
 * test_jobs.c - end-to-end tests of the gateway's job runner (gateway/
 * jobs.h) against a real petrel: topic PUT and DELETE and the auto-create
 * of a produce run their sqlite writes off the HTTP workers.  The test
 * takes sqlite's write lock on the broker's meta.db itself (BEGIN
 * IMMEDIATE from this process), so the broker's metadata writes wait in
 * sqlite's busy handler (2 s at most): meanwhile the workers must keep
 * answering everything else, the waiting requests show up as suspended,
 * and a SIGTERM waits for them.  Also many connections creating, updating
 * and deleting topics and auto-creating on produce while long polls are
 * held, all answered correctly, and racing produces with one
 * Idempotency-Key to a topic being created storing once.  Timing
 * assertions bound one side only.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <jansson.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2e.h"

#define FAST_MS 500  /* an answer that needs no metadata write arrives sooner */
#define HOLD_MS 1300 /* longest hold of meta.db's lock (the broker waits 2 s) */

static int setup(void **state) {
    return e2e_case_setup(state, "e2e-jobs");
}

/* ---- a request on its own thread ---------------------------------------------*/

typedef E2eCall Call;

/* Starts 'method' on the path printed from the format with the JSON body
 * (NULL: none) on a new thread. */
#define call_start(c, f, method, body, ...) \
    assert_int_equal(e2e_call_start((c), &(f)->srv, (method), (body), __VA_ARGS__), 0)

/* Joins 'c' and checks its status (printing the answer otherwise). */
static void call_join(Call *c, long status) {
    e2e_call_join(c);
    if (c->status != status) {
        char *dump = c->json ? json_dumps(c->json, 0) : NULL;
        fprintf(stderr, "%s %s: %ld %s\n", c->method, c->path, c->status, dump ? dump : "");
        free(dump);
    }
    assert_int_equal(c->status, status);
}

static void call_free(Call *c) {
    json_decref(c->json);
    c->json = NULL;
}

/* ---- helpers -------------------------------------------------------------------*/

/* The broker's count of suspended requests (GET /v1/broker). */
static long long suspended_now(E2eCase *f) {
    json_t *b = e2e_call(f, "GET", "/v1/broker", NULL, NULL, 200);
    long long n = e2e_num(json_object_get(b, "http"), "suspended");
    json_decref(b);
    return n;
}

/* Waits (up to 5 s) until at least 'n' requests are suspended. */
static void wait_suspended(E2eCase *f, long long n) {
    long long now = 0;
    for (int tries = 0; tries < 500; tries++) {
        now = suspended_now(f);
        if (now >= n) return;
        e2e_sleep_ms(10);
    }
    fail_msg("%lld request(s) suspended, expected at least %lld", now, n);
}

/* Takes sqlite's write lock on the server's meta.db: every metadata write
 * of the broker now waits (sqlite's busy handler) until meta_unlock. */
static sqlite3 *meta_lock(const E2eCase *f) {
    char path[1200];
    snprintf(path, sizeof(path), "%s/meta.db", f->srv.data);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    assert_int_equal(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    return db;
}

static void meta_unlock(sqlite3 *db) {
    assert_int_equal(sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
}

static void produce_ok(E2eCase *f, const char *topic, const char *body) {
    char path[160];
    snprintf(path, sizeof(path), "/v1/topics/%s/messages", topic);
    json_t *res = e2e_call(f, "POST", path, E2E_JSON, body, 200);
    assert_string_equal(e2e_str(res, "status"), "SEND_OK");
    json_decref(res);
}

static void assert_queues(E2eCase *f, const char *topic, int queues) {
    char path[160];
    snprintf(path, sizeof(path), "/v1/topics/%s", topic);
    json_t *t = e2e_call(f, "GET", path, NULL, NULL, 200);
    assert_int_equal(e2e_num(t, "queues"), queues);
    json_decref(t);
}

/* ---- cases -----------------------------------------------------------------------*/

/* Topic writes that wait for sqlite do not hold a worker: with both
 * workers' worth of writes (and more) waiting, health checks, produces to
 * existing topics, reads and a long poll's wake-up are answered at once;
 * the writes are answered correctly once the lock goes. */
static void test_jobs_workers_answer_while_topic_writes_wait_for_sqlite(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    e2e_create_topic(f, "Open", 2);
    e2e_create_topic(f, "Doomed", 1);
    Call poll;
    call_start(&poll, f, "GET", NULL, "/v1/topics/Open/queues/0/messages?offset=0&waitMs=10000");
    wait_suspended(f, 1);

    sqlite3 *db = meta_lock(f);
    int64_t locked_at = e2e_now_ms();
    enum { PUTS = 3 };
    Call puts[PUTS];
    for (int i = 0; i < PUTS; i++) {
        call_start(&puts[i], f, "PUT", "{\"queues\":2}", "/v1/topics/Held%d", i);
    }
    Call autop;
    call_start(&autop, f, "POST", "{\"body\":\"first\"}", "/v1/topics/AutoHeld/messages");
    Call del;
    call_start(&del, f, "DELETE", NULL, "/v1/topics/Doomed");
    /* All of them wait suspended (not on a worker), the poll too. */
    wait_suspended(f, 1 + PUTS + 2);

    for (int i = 0; i < 3; i++) {
        int64_t t0 = e2e_now_ms();
        json_decref(e2e_call(f, "GET", "/healthz", NULL, NULL, 200));
        produce_ok(f, "Open", "{\"body\":\"x\",\"queueId\":1}");
        assert_queues(f, "Open", 2);
        json_decref(e2e_call(f, "GET", "/v1/topics", NULL, NULL, 200));
        json_decref(e2e_call(f, "GET", "/v1/groups/g1/offsets", NULL, NULL, 200));
        int64_t took = e2e_now_ms() - t0;
        if (took >= FAST_MS) fprintf(stderr, "round %d took %lld ms\n", i, (long long)took);
        assert_true(took < FAST_MS);
    }
    /* The long poll is woken and answered by a worker too. */
    int64_t sent = e2e_now_ms();
    produce_ok(f, "Open", "{\"body\":\"wake\",\"queueId\":0}");
    call_join(&poll, 200);
    assert_string_equal(e2e_str(poll.json, "status"), "FOUND");
    assert_true(poll.end_ms - sent < FAST_MS);
    call_free(&poll);

    /* The writes still wait: the broker gives up on the lock after 2 s. */
    int64_t held = e2e_now_ms() - locked_at;
    if (held >= HOLD_MS) fprintf(stderr, "meta.db held %lld ms\n", (long long)held);
    assert_true(held < HOLD_MS);
    for (int i = 0; i < PUTS; i++) assert_false(atomic_load(&puts[i].done));
    assert_false(atomic_load(&autop.done));
    assert_false(atomic_load(&del.done));
    meta_unlock(db);

    for (int i = 0; i < PUTS; i++) {
        call_join(&puts[i], 201);
        char name[16];
        snprintf(name, sizeof(name), "Held%d", i);
        assert_string_equal(e2e_str(puts[i].json, "topic"), name);
        assert_int_equal(e2e_num(puts[i].json, "queues"), 2);
        call_free(&puts[i]);
    }
    call_join(&autop, 200);
    assert_string_equal(e2e_str(autop.json, "status"), "SEND_OK");
    assert_true(e2e_num(autop.json, "queueId") < 4);
    call_free(&autop);
    call_join(&del, 204);
    call_free(&del);
    assert_queues(f, "AutoHeld", 4);
    e2e_expect_error(f, "GET", "/v1/topics/Doomed", NULL, NULL, 404, "TOPIC_NOT_FOUND");
    assert_int_equal(suspended_now(f), 0);
    assert_int_equal(e2e_stop(&f->srv), 0);
}

/* ---- many writers at once ------------------------------------------------------*/

#define WRITERS 8
#define ROUNDS 3

typedef struct Writer {
    E2eCase *f;
    int id;
    pthread_barrier_t *start; /* all writers begin together */
    int failures;             /* checks that did not hold */
    pthread_t th;
} Writer;

/* Sends one request and compares its status; counts a mismatch.  The
 * answer's JSON is returned (owned) when 'out' is set. */
static void expect(Writer *w, const char *method, const char *path, const char *body,
                   long status, json_t **out) {
    E2eResponse r;
    if (out) *out = NULL;
    if (e2e_send(&w->f->srv, method, path, body ? E2E_JSON : NULL, body, &r) != 0) {
        fprintf(stderr, "writer %d: %s %s: no answer\n", w->id, method, path);
        w->failures++;
        return;
    }
    if (r.status != status) {
        fprintf(stderr, "writer %d: %s %s: %ld (want %ld) %.*s\n", w->id, method, path,
                r.status, status, (int)r.len, r.body);
        w->failures++;
    }
    if (out && r.len) *out = json_loadb(r.body, r.len, 0, NULL);
    e2e_response_free(&r);
}

static void check(Writer *w, bool ok, const char *what) {
    if (ok) return;
    fprintf(stderr, "writer %d: %s\n", w->id, what);
    w->failures++;
}

static void *writer_main(void *arg) {
    Writer *w = arg;
    pthread_barrier_wait(w->start);
    /* Everybody at once: the first produce to "Shared" auto-creates it. */
    json_t *j = NULL;
    expect(w, "POST", "/v1/topics/Shared/messages", "{\"body\":\"s\"}", 200, &j);
    check(w, e2e_num(j, "queueId") < 4, "Shared: queueId out of range");
    json_decref(j);
    for (int round = 0; round < ROUNDS; round++) {
        char path[128];
        char msgs[160];
        snprintf(path, sizeof(path), "/v1/topics/W%d-%d", w->id, round);
        snprintf(msgs, sizeof(msgs), "%s/messages", path);
        expect(w, "PUT", path, "{\"queues\":2}", 201, &j);
        check(w, e2e_num(j, "queues") == 2, "created with 2 queues");
        json_decref(j);
        expect(w, "PUT", path, "{\"queues\":3,\"perm\":\"RW\"}", 200, &j);
        check(w, e2e_num(j, "queues") == 3, "updated to 3 queues");
        json_decref(j);
        expect(w, "PUT", path, "{\"order\":true}", 200, &j); /* the rest kept */
        check(w, e2e_num(j, "queues") == 3 && json_is_true(json_object_get(j, "order")),
              "order set, queues kept");
        json_decref(j);
        expect(w, "POST", msgs, "{\"body\":\"m\",\"queueId\":2}", 200, &j);
        check(w, e2e_str(j, "status") && strcmp(e2e_str(j, "status"), "SEND_OK") == 0,
              "SEND_OK");
        json_decref(j);
        expect(w, "DELETE", path, NULL, 204, NULL);
        expect(w, "DELETE", path, NULL, 404, &j);
        json_t *err = json_object_get(j, "error");
        check(w, e2e_str(err, "code") && strcmp(e2e_str(err, "code"), "TOPIC_NOT_FOUND") == 0,
              "second DELETE: TOPIC_NOT_FOUND");
        json_decref(j);
        expect(w, "GET", path, NULL, 404, NULL);

        snprintf(path, sizeof(path), "/v1/topics/A%d-%d", w->id, round);
        snprintf(msgs, sizeof(msgs), "%s/messages", path);
        expect(w, "POST", msgs, "{\"messages\":[{\"body\":\"a\"},{\"body\":\"b\"}]}", 200, &j);
        check(w, json_array_size(json_object_get(j, "results")) == 2, "a batch of 2");
        json_decref(j);
        expect(w, "GET", path, NULL, 200, &j);
        check(w, e2e_num(j, "queues") == 4, "auto-created with 4 queues");
        json_decref(j);
    }
    return NULL;
}

/* Many connections create, update and delete topics and auto-create on
 * produce while long polls hold connections: every answer is right, the
 * polls stay held until their message comes, nothing stays suspended. */
static void test_jobs_concurrent_topic_writes_and_auto_create_while_polls_are_held(
    void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    e2e_create_topic(f, "Polled", 1);
    enum { POLLS = 10 };
    Call polls[POLLS];
    for (int i = 0; i < POLLS; i++) {
        call_start(&polls[i], f, "GET", NULL,
                   "/v1/topics/Polled/queues/0/messages?offset=0&waitMs=20000");
    }
    wait_suspended(f, POLLS);

    pthread_barrier_t start;
    assert_int_equal(pthread_barrier_init(&start, NULL, WRITERS), 0);
    Writer ws[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
        ws[i] = (Writer){.f = f, .id = i, .start = &start};
        assert_int_equal(pthread_create(&ws[i].th, NULL, writer_main, &ws[i]), 0);
    }
    for (int i = 0; i < WRITERS; i++) {
        pthread_join(ws[i].th, NULL);
        assert_int_equal(ws[i].failures, 0);
    }
    pthread_barrier_destroy(&start);

    /* One topic came out of the racing auto-creates, holding every message. */
    assert_queues(f, "Shared", 4);
    json_t *all = e2e_call(f, "GET", "/v1/topics", NULL, NULL, 200);
    int shared = 0;
    size_t i;
    json_t *t;
    json_array_foreach(all, i, t) shared += strcmp(e2e_str(t, "topic"), "Shared") == 0;
    assert_int_equal(shared, 1);
    assert_int_equal(json_array_size(all), 2 + WRITERS * ROUNDS); /* Polled, Shared, A* */
    json_decref(all);
    long long stored = 0;
    for (int tries = 0; tries < 500 && stored < WRITERS; tries++) {
        json_t *qs = e2e_call(f, "GET", "/v1/topics/Shared/queues", NULL, NULL, 200);
        stored = 0;
        for (size_t q = 0; q < json_array_size(qs); q++) {
            stored += e2e_num(json_array_get(qs, q), "maxOffset");
        }
        json_decref(qs);
        if (stored < WRITERS) e2e_sleep_ms(10);
    }
    assert_int_equal(stored, WRITERS);

    /* The polls were held all along; one message answers them all. */
    for (int k = 0; k < POLLS; k++) assert_false(atomic_load(&polls[k].done));
    assert_int_equal(suspended_now(f), POLLS);
    produce_ok(f, "Polled", "{\"body\":\"now\"}");
    for (int k = 0; k < POLLS; k++) {
        call_join(&polls[k], 200);
        assert_string_equal(e2e_str(polls[k].json, "status"), "FOUND");
        call_free(&polls[k]);
    }
    assert_int_equal(suspended_now(f), 0);
    assert_int_equal(e2e_stop(&f->srv), 0);
}

/* ---- Idempotency-Key across an auto-create ----------------------------------*/

typedef struct KeyedProduce {
    E2eCase *f;
    const char *topic;
    const char *key;
    E2eResponse resp;  /* the answer (free with e2e_response_free) */
    atomic_bool done;  /* the answer arrived */
    pthread_t th;
} KeyedProduce;

static void *keyed_main(void *arg) {
    KeyedProduce *k = arg;
    char path[128];
    char hdr[128];
    snprintf(path, sizeof(path), "/v1/topics/%s/messages", k->topic);
    snprintf(hdr, sizeof(hdr), "Idempotency-Key: %s", k->key);
    const char *headers[] = {hdr, NULL};
    static const char body[] = "{\"body\":\"once\"}";
    E2eRequest req = {.method = "POST",
                      .path = path,
                      .body = body,
                      .body_len = sizeof(body) - 1,
                      .content_type = E2E_JSON,
                      .headers = headers};
    if (e2e_http(&k->f->srv, &req, &k->resp) != 0) k->resp.status = 0;
    atomic_store(&k->done, true);
    return NULL;
}

/* Requests with one Idempotency-Key race to produce to a topic that does
 * not exist yet, its creation held up in sqlite: the claim is not held
 * across the creation job, yet exactly one message is stored, every
 * answer is that one or 409, and the key ends settled (a retry replays). */
static void test_jobs_racing_same_key_produces_to_a_new_topic_store_once(void **state) {
    E2eCase *f = *state;
    const char *extra[] = {"--flushDiskType=SYNC_FLUSH", NULL};
    e2e_case_start(f, extra);
    sqlite3 *db = meta_lock(f);
    enum { N = 8 };
    KeyedProduce ks[N];
    for (int i = 0; i < N; i++) {
        ks[i] = (KeyedProduce){.f = f, .topic = "IdemNew", .key = "race-new-1"};
        atomic_init(&ks[i].done, false);
        assert_int_equal(pthread_create(&ks[i].th, NULL, keyed_main, &ks[i]), 0);
    }
    /* Every request is either answered (409 while another holds the
     * claim) or suspended behind the creation. */
    for (int tries = 0; tries < 500; tries++) {
        long long answered = 0;
        for (int i = 0; i < N; i++) answered += atomic_load(&ks[i].done);
        if (answered + suspended_now(f) >= N) break;
        e2e_sleep_ms(10);
    }
    meta_unlock(db);
    const char *first = NULL;
    int ok = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(ks[i].th, NULL);
        if (ks[i].resp.status == 200) {
            ok++;
            if (!first) first = ks[i].resp.body;
            assert_string_equal(ks[i].resp.body, first); /* one answer for all */
        } else {
            if (ks[i].resp.status != 409) {
                fprintf(stderr, "%ld %s\n", ks[i].resp.status, ks[i].resp.body);
            }
            assert_int_equal(ks[i].resp.status, 409);
            json_t *root = e2e_json(&ks[i].resp);
            assert_string_equal(e2e_str(json_object_get(root, "error"), "code"),
                                "IDEMPOTENCY_KEY_IN_USE");
            json_decref(root);
        }
    }
    assert_true(ok >= 1);
    /* Settled: a retry now replays the stored answer. */
    KeyedProduce again = {.f = f, .topic = "IdemNew", .key = "race-new-1"};
    atomic_init(&again.done, false);
    keyed_main(&again);
    assert_int_equal(again.resp.status, 200);
    assert_string_equal(again.resp.body, first);
    char v[16];
    assert_non_null(e2e_header(&again.resp, "Idempotency-Replayed", v, sizeof(v)));
    assert_string_equal(v, "true");
    json_t *answer = e2e_json(&again.resp);
    e2e_wait_queue(f, "IdemNew", (int)e2e_num(answer, "queueId"), 1);
    json_decref(answer);
    e2e_sleep_ms(100); /* a second append, if any, would be dispatched by now */
    json_t *qs = e2e_call(f, "GET", "/v1/topics/IdemNew/queues", NULL, NULL, 200);
    long long stored = 0;
    for (size_t q = 0; q < json_array_size(qs); q++) {
        stored += e2e_num(json_array_get(qs, q), "maxOffset");
    }
    json_decref(qs);
    assert_int_equal(stored, 1);
    for (int i = 0; i < N; i++) e2e_response_free(&ks[i].resp);
    e2e_response_free(&again.resp);
    assert_int_equal(e2e_stop(&f->srv), 0);
}

/* ---- shutdown ----------------------------------------------------------------------*/

typedef struct Stopper {
    E2eServer *srv;
    int status;       /* e2e_stop's result */
    atomic_bool done; /* the server has exited */
    pthread_t th;
} Stopper;

static void *stopper_main(void *arg) {
    Stopper *s = arg;
    s->status = e2e_stop(s->srv);
    atomic_store(&s->done, true);
    return NULL;
}

/* SIGTERM while topic writes wait for sqlite: the server keeps running
 * until the jobs are done and their requests answered, then exits 0; the
 * writes are in meta.db after a restart. */
static void test_jobs_shutdown_waits_for_queued_jobs(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    sqlite3 *db = meta_lock(f);
    enum { PUTS = 3 };
    Call puts[PUTS];
    for (int i = 0; i < PUTS; i++) {
        call_start(&puts[i], f, "PUT", "{\"queues\":3}", "/v1/topics/Late%d", i);
    }
    Call autop;
    call_start(&autop, f, "POST", "{\"body\":\"late\"}", "/v1/topics/LateAuto/messages");
    wait_suspended(f, PUTS + 1);

    Stopper s = {.srv = &f->srv};
    atomic_init(&s.done, false);
    assert_int_equal(pthread_create(&s.th, NULL, stopper_main, &s), 0);
    e2e_sleep_ms(300);
    assert_false(atomic_load(&s.done)); /* still waiting for its jobs */
    for (int i = 0; i < PUTS; i++) assert_false(atomic_load(&puts[i].done));
    meta_unlock(db);

    pthread_join(s.th, NULL);
    assert_int_equal(s.status, 0);
    for (int i = 0; i < PUTS; i++) {
        call_join(&puts[i], 201);
        assert_int_equal(e2e_num(puts[i].json, "queues"), 3);
        call_free(&puts[i]);
    }
    call_join(&autop, 200);
    assert_string_equal(e2e_str(autop.json, "status"), "SEND_OK");
    call_free(&autop);

    e2e_case_start(f, NULL); /* same data directory */
    for (int i = 0; i < PUTS; i++) {
        char name[16];
        snprintf(name, sizeof(name), "Late%d", i);
        assert_queues(f, name, 3);
    }
    assert_queues(f, "LateAuto", 4);
    assert_int_equal(e2e_stop(&f->srv), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_jobs_workers_answer_while_topic_writes_wait_for_sqlite,
                                        setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(
            test_jobs_concurrent_topic_writes_and_auto_create_while_polls_are_held, setup,
            e2e_case_teardown),
        cmocka_unit_test_setup_teardown(
            test_jobs_racing_same_key_produces_to_a_new_topic_store_once, setup,
            e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_jobs_shutdown_waits_for_queued_jobs, setup,
                                        e2e_case_teardown),
    };
    return cmocka_run_group_tests_name("e2e-jobs", tests, NULL, NULL);
}
