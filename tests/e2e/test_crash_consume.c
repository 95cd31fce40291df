/*
 * test_crash_consume.c - kill -9 of a real petrel under receive/ack load
 * (docs/consume.md "Durability").  3000 messages "m<i>" wait in a topic of
 * 4 queues; four consumer threads receive (16 at a time, invisibleMs 2000,
 * waitMs 300), hold the messages a little and ack every handle, retrying
 * through refused connections.  The broker runs with offsetFlushInterval
 * 200 ms (the receive state is saved between kills, so a restart loads a
 * snapshot and replays the pop journal after it) and reviveInterval 100 ms.
 * It is killed three times, 0.3, 1.1 and 2.1 s into a round of consuming,
 * and restarted on the same directory and port each time, once after a
 * downtime longer than the invisibility (the messages held at that kill
 * come back as retries); then consuming goes on until every message is
 * done and nothing comes back for longer than an invisibility.
 * Checked: a message whose ack answered OK is never received by a receive
 * sent after that answer (across kills or not); each message gets exactly
 * one OK, unless an ack of it was cut by a kill and so may have taken
 * effect unanswered; a redelivery comes with a higher reconsumeTimes and
 * not before the invisibility of the delivery before it ended; the log of
 * each restart shows the journal replay, and the last one replays less
 * than everything (a snapshot was used); the broker reports nothing in
 * flight and no lag; no instance died before its kill and the log has no
 * assertion or sanitizer report; after a clean stop `petrel check` passes.
 * Consumer threads use no cmocka assertion: they note violations under
 * the shared mutex and the main thread asserts there were none.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "e2e.h"

#define TOPIC "CrashPop"
#define GROUP "gCrashPop"
#define QUEUES 4
#define N_MSGS 3000
#define PRODUCE_BATCH 100
#define CONSUMERS 4
#define KILLS 3
#define INVISIBLE_MS 2000
#define HOLD_MIN_MS 60     /* a consumer holds its messages this long ... */
#define HOLD_SPREAD_MS 100 /* ... plus up to this much before it acks */
#define QUIET_MS 2600      /* > INVISIBLE_MS + reviveInterval: nothing more can come */
#define FINAL_MS 30000     /* after the last restart, everything is done within this */
#define MAX_REPORTS 20     /* violations printed as they happen */
#define RETRY_MIN_MS 25    /* a consumer retries a refused receive after this, */
#define RETRY_MAX_MS 200   /* doubled at each failure up to this */

/* Kill moments, in ms after the first delivery of each round (so that a
 * slow start on a loaded machine still kills under load).  Not multiples
 * of offsetFlushInterval: a restarted broker's first delivery comes a few
 * ms after its keeper started counting, so a kill 1000 ms later would
 * land just after a snapshot, with no journal after it to replay. */
static const int kill_after_ms[KILLS] = {300, 1100, 2100};

/* How long the broker stays down after each kill: consumers meet refused
 * connections; after the second kill longer than an invisibility, so the
 * messages held at the kill come back as retries. */
static const int down_ms[KILLS] = {300, INVISIBLE_MS + 300, 100};

static const char *const broker_flags[] = {"--offsetFlushInterval=200", "--reviveInterval=100",
                                           NULL};

static int setup(void **state) {
    return e2e_case_setup(state, "e2e-crash-consume");
}

/* ---- shared state ------------------------------------------------------------
 * 'gen' counts the kills done: the main thread kills, then increments, then
 * restarts.  So a request sent when 'gen' read g is served by instance g or
 * a later one, and an answer after which 'gen' reads g came from instance
 * g or an earlier one.  'clock' orders events across threads: an ack OK is
 * stamped after its answer, a receive reads the clock before it is sent;
 * a message whose OK stamp is at or below a receive's reading was done
 * before the broker saw that receive and must not be in its answer. */

typedef struct Shared {
    pthread_mutex_t mu;
    atomic_bool stop;              /* consumers end their loop */
    atomic_int gen;                /* kills done */
    atomic_llong last_delivery_ms; /* e2e_now_ms() after the last receive with messages */
    atomic_int round_deliveries[KILLS + 1]; /* receives with messages, by 'gen' at sending */
    /* guarded by mu: */
    long long clock;              /* event counter */
    long long acked_at[N_MSGS];   /* clock stamp of the first OK, 0 = none */
    int acked_gen[N_MSGS];        /* 'gen' read after that OK */
    int ok_count[N_MSGS];         /* OK answers to acks of it */
    int deliveries[N_MSGS];       /* times it was received */
    long long last_rt[N_MSGS];    /* reconsumeTimes of its last delivery, -1 none */
    long long recv_start[N_MSGS]; /* e2e_now_ms() before the receive of its last delivery */
    bool ack_unknown[N_MSGS];     /* an ack of it got no answer (cut by a kill) */
    int n_acked;                  /* messages with an OK */
    long long ops;                /* receives with messages + acks with an OK */
    long long transport_errors;   /* requests without an answer */
    long long expired;            /* EXPIRED ack results */
    long long violations;         /* count */
    char err[512];                /* the first violation */
} Shared;

typedef struct Consumer {
    Shared *sh;
    E2eServer srv; /* a copy: the restarts rewrite the case's (same port) */
    int id;
} Consumer;

/* Notes a violation: the first is kept for the main thread's assertion,
 * the first MAX_REPORTS are printed.  'sh->mu' held. */
static void violation(Shared *sh, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void violation(Shared *sh, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (sh->violations++ < MAX_REPORTS) fprintf(stderr, "VIOLATION: %s\n", msg);
    if (sh->err[0] == '\0') snprintf(sh->err, sizeof(sh->err), "%s", msg);
}

/* The N of a body "mN" with N < N_MSGS; -1 when it is not one. */
static int body_index(const json_t *m) {
    const char *b = e2e_str(m, "body");
    if (!b || b[0] != 'm' || b[1] < '0' || b[1] > '9') return -1;
    char *end = NULL;
    long k = strtol(b + 1, &end, 10);
    return *end == '\0' && k < N_MSGS ? (int)k : -1;
}

/* ---- consumers -----------------------------------------------------------------*/

/* Records the deliveries of one receive sent at clock 'clock0' with 'gen0'
 * kills done, started at 'start_ms' and answered at 'end_ms'. */
static void record_deliveries(Consumer *cs, const json_t *msgs, long long clock0, int gen0,
                              long long start_ms, long long end_ms) {
    Shared *sh = cs->sh;
    pthread_mutex_lock(&sh->mu);
    for (size_t i = 0; i < json_array_size(msgs); i++) {
        const json_t *m = json_array_get(msgs, i);
        int k = body_index(m);
        if (k < 0) {
            violation(sh, "consumer %d: a message nobody sent: '%.40s'", cs->id,
                      e2e_str(m, "body") ? e2e_str(m, "body") : "(no body)");
            continue;
        }
        long long rt = e2e_num(m, "reconsumeTimes");
        const char *topic = e2e_str(m, "topic");
        if (!topic || strcmp(topic, TOPIC) != 0)
            violation(sh, "m%d: topic '%s'", k, topic ? topic : "(none)");
        if (sh->acked_at[k] != 0 && sh->acked_at[k] <= clock0) {
            violation(sh, "m%d: acked OK (answer seen with %d kills done) and received again "
                      "by a receive sent after that answer (%d kills done when sent), "
                      "reconsumeTimes %lld, msgId %s, delivery #%d",
                      k, sh->acked_gen[k], gen0, rt, e2e_str(m, "msgId"), sh->deliveries[k] + 1);
        }
        if (sh->deliveries[k] > 0) {
            if (rt <= sh->last_rt[k])
                violation(sh, "m%d: delivered again with reconsumeTimes %lld after %lld", k, rt,
                          sh->last_rt[k]);
            if (end_ms - sh->recv_start[k] < INVISIBLE_MS)
                violation(sh, "m%d: delivered again %lld ms after the receive of its previous "
                          "delivery, before its invisibility (%d ms) ended",
                          k, end_ms - sh->recv_start[k], INVISIBLE_MS);
        }
        sh->deliveries[k]++;
        sh->last_rt[k] = rt;
        sh->recv_start[k] = start_ms;
    }
    if (json_array_size(msgs) > 0) sh->ops++;
    pthread_mutex_unlock(&sh->mu);
}

/* Acks every message of 'msgs' and records the answers. */
static void ack_and_record(Consumer *cs, const json_t *msgs) {
    Shared *sh = cs->sh;
    json_t *hs = json_array();
    for (size_t i = 0; i < json_array_size(msgs); i++)
        json_array_append_new(hs, json_string(e2e_str(json_array_get(msgs, i), "receiptHandle")));
    json_t *req = json_pack("{s:s, s:o}", "topic", TOPIC, "receiptHandles", hs);
    char *body = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    E2eResponse r;
    int rc = e2e_send(&cs->srv, "POST", "/v1/groups/" GROUP "/ack", E2E_JSON, body, &r);
    free(body);
    int gen_after = atomic_load(&sh->gen);
    json_t *root = rc == 0 && r.status == 200 ? json_loadb(r.body, r.len, 0, NULL) : NULL;
    json_t *results = json_object_get(root, "results");
    pthread_mutex_lock(&sh->mu);
    if (rc != 0 || r.status == 0) {
        /* Cut by a kill: the ack may have been journaled, unanswered. */
        sh->transport_errors++;
        for (size_t i = 0; i < json_array_size(msgs); i++) {
            int k = body_index(json_array_get(msgs, i));
            if (k >= 0) sh->ack_unknown[k] = true;
        }
    } else if (r.status != 200 || json_array_size(results) != json_array_size(msgs)) {
        violation(sh, "consumer %d: ack answered %ld %.200s", cs->id, r.status,
                  r.body ? r.body : "");
    } else {
        bool any_ok = false;
        for (size_t i = 0; i < json_array_size(msgs); i++) {
            const json_t *m = json_array_get(msgs, i);
            const json_t *res = json_array_get(results, i);
            int k = body_index(m);
            const char *st = e2e_str(res, "status");
            const char *h = e2e_str(res, "receiptHandle");
            if (k < 0) continue;
            if (!st || !h || strcmp(h, e2e_str(m, "receiptHandle")) != 0) {
                violation(sh, "m%d: ack result without its handle or status", k);
            } else if (strcmp(st, "OK") == 0) {
                any_ok = true;
                sh->ok_count[k]++;
                if (sh->ok_count[k] > 1) {
                    violation(sh, "m%d: a second ack OK (first with %d kills done, this one "
                              "with %d), delivered %d times, reconsumeTimes %lld",
                              k, sh->acked_gen[k], gen_after, sh->deliveries[k], sh->last_rt[k]);
                } else {
                    sh->acked_at[k] = ++sh->clock;
                    sh->acked_gen[k] = gen_after;
                    sh->n_acked++;
                }
            } else if (strcmp(st, "EXPIRED") == 0) {
                sh->expired++; /* held past the invisibility (a restart): it comes back */
            } else {
                violation(sh, "m%d: ack %s (handles stay valid across restarts)", k, st);
            }
        }
        if (any_ok) sh->ops++;
    }
    pthread_mutex_unlock(&sh->mu);
    json_decref(root);
    e2e_response_free(&r);
}

static void *consumer_main(void *arg) {
    Consumer *cs = arg;
    Shared *sh = cs->sh;
    /* Hold times differ from run to run: the kills meet other moments. */
    unsigned seed = (unsigned)e2e_wall_ms() * 2654435761u + (unsigned)cs->id * 7919u;
    int backoff_ms = RETRY_MIN_MS;
    while (!atomic_load(&sh->stop)) {
        pthread_mutex_lock(&sh->mu);
        long long clock0 = sh->clock;
        pthread_mutex_unlock(&sh->mu);
        int gen0 = atomic_load(&sh->gen);
        long long start_ms = e2e_now_ms();
        E2eResponse r;
        int rc = e2e_send(&cs->srv, "POST", "/v1/groups/" GROUP "/receive", E2E_JSON,
                          "{\"topic\":\"" TOPIC "\",\"maxMessages\":16,\"invisibleMs\":2000,"
                          "\"waitMs\":300}",
                          &r);
        long long end_ms = e2e_now_ms();
        if (rc != 0 || r.status == 0) {
            /* The broker is down or was killed while answering: retry,
             * less and less often (each failure prints a line). */
            e2e_response_free(&r);
            pthread_mutex_lock(&sh->mu);
            sh->transport_errors++;
            pthread_mutex_unlock(&sh->mu);
            e2e_sleep_ms(backoff_ms);
            if (backoff_ms < RETRY_MAX_MS) backoff_ms *= 2;
            continue;
        }
        backoff_ms = RETRY_MIN_MS;
        json_t *root = r.status == 200 ? json_loadb(r.body, r.len, 0, NULL) : NULL;
        json_t *msgs = json_object_get(root, "messages");
        if (!json_is_array(msgs)) {
            pthread_mutex_lock(&sh->mu);
            violation(sh, "consumer %d: receive answered %ld %.200s", cs->id, r.status,
                      r.body ? r.body : "");
            pthread_mutex_unlock(&sh->mu);
            json_decref(root);
            e2e_response_free(&r);
            e2e_sleep_ms(25);
            continue;
        }
        e2e_response_free(&r);
        if (json_array_size(msgs) > 0) {
            atomic_store(&sh->last_delivery_ms, end_ms);
            if (gen0 <= KILLS) atomic_fetch_add(&sh->round_deliveries[gen0], 1);
        }
        record_deliveries(cs, msgs, clock0, gen0, start_ms, end_ms);
        if (json_array_size(msgs) > 0) {
            e2e_sleep_ms(HOLD_MIN_MS + rand_r(&seed) % HOLD_SPREAD_MS);
            ack_and_record(cs, msgs);
        }
        json_decref(root);
    }
    return NULL;
}

/* ---- main thread ---------------------------------------------------------------*/

/* Acked messages so far. */
static int n_acked(Shared *sh) {
    pthread_mutex_lock(&sh->mu);
    int n = sh->n_acked;
    pthread_mutex_unlock(&sh->mu);
    return n;
}

/* Reads the log 'path' from byte 'from': the N of its "pop journal: N
 * records replayed" line (0 without one); fails on a journal error. */
static long long replayed_since(const char *path, long long from) {
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    assert_int_equal(fseek(f, (long)from, SEEK_SET), 0);
    long long n = 0;
    int lines = 0;
    char line[1024];
    while (fgets(line, sizeof(line), f)) {
        const char *p = strstr(line, "pop journal: ");
        long long v = 0;
        if (p && sscanf(p, "pop journal: %lld records replayed", &v) == 1) {
            n += v;
            lines++;
        }
        if (strstr(line, "pop journal record") || strstr(line, "cannot load the receive state"))
            fail_msg("restart log: %s", line);
    }
    fclose(f);
    assert_true(lines <= 1);
    return n;
}

/* Fails when the log 'path' reports a crash of its own (an assertion, a
 * sanitizer report) anywhere: a killed instance leaves no exit status. */
static void assert_log_clean(const char *path) {
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[1024];
    while (fgets(line, sizeof(line), f)) {
        if (strstr(line, "assertion failed") || strstr(line, "Sanitizer") ||
            strstr(line, "runtime error:"))
            fail_msg("server log: %s", line);
    }
    fclose(f);
}

/* Waits until the consumers got messages from instance 'gen' (at most
 * E2E_WAIT_MS), then 'ms' more. */
static void consume_for(Shared *sh, int gen, int ms) {
    long long t0 = e2e_now_ms();
    while (atomic_load(&sh->round_deliveries[gen]) == 0 && e2e_now_ms() - t0 < E2E_WAIT_MS)
        e2e_sleep_ms(5);
    assert_true(atomic_load(&sh->round_deliveries[gen]) > 0);
    e2e_sleep_ms(ms);
}

static void test_pop_kill9_under_receive_load_never_redelivers_an_acked_message(void **state) {
    E2eCase *c = *state;
    long long t_start = e2e_now_ms();
    e2e_case_start(c, broker_flags);
    e2e_create_topic(c, TOPIC, QUEUES);
    for (int i = 0; i < N_MSGS; i += PRODUCE_BATCH) {
        json_t *ms = json_array();
        for (int j = i; j < i + PRODUCE_BATCH && j < N_MSGS; j++) {
            char b[16];
            snprintf(b, sizeof(b), "m%d", j);
            json_array_append_new(ms, json_pack("{s:s, s:i}", "body", b, "queueId", j % QUEUES));
        }
        json_t *req = json_pack("{s:o}", "messages", ms);
        char *body = json_dumps(req, JSON_COMPACT);
        json_decref(req);
        json_t *res = e2e_call(c, "POST", "/v1/topics/" TOPIC "/messages", E2E_JSON, body, 200);
        free(body);
        json_t *results = json_object_get(res, "results");
        for (size_t j = 0; j < json_array_size(results); j++)
            assert_string_equal(e2e_str(json_array_get(results, j), "status"), "SEND_OK");
        json_decref(res);
    }
    for (int q = 0; q < QUEUES; q++) e2e_wait_queue(c, TOPIC, q, N_MSGS / QUEUES);
    int port = c->srv.port;
    char listen[64];
    snprintf(listen, sizeof(listen), "--listen=127.0.0.1:%d", port);
    const char *restart_flags[] = {broker_flags[0], broker_flags[1], listen, NULL};

    static Shared sh; /* too big for the stack */
    memset(&sh, 0, sizeof(sh));
    pthread_mutex_init(&sh.mu, NULL);
    for (int k = 0; k < N_MSGS; k++) sh.last_rt[k] = -1;
    static Consumer cs[CONSUMERS]; /* outlive a failed assertion's longjmp */
    static pthread_t th[CONSUMERS];
    for (int i = 0; i < CONSUMERS; i++) {
        cs[i] = (Consumer){.sh = &sh, .srv = c->srv, .id = i};
        assert_int_equal(pthread_create(&th[i], NULL, consumer_main, &cs[i]), 0);
    }

    long long replayed[KILLS] = {0};
    long long ops_before_last = 0;
    long long t_restart = 0;
    for (int kill = 0; kill < KILLS; kill++) {
        consume_for(&sh, kill, kill_after_ms[kill]);
        int ws = 0;
        if (waitpid(c->srv.pid, &ws, WNOHANG) == c->srv.pid) {
            c->srv.pid = 0;
            e2e_case_print_log(c);
            fail_msg("the broker died before kill %d: status %d", kill + 1, e2e_exit_status(ws));
        }
        e2e_kill9(&c->srv);
        atomic_fetch_add(&sh.gen, 1);
        pthread_mutex_lock(&sh.mu);
        int acked = sh.n_acked;
        int held = 0;
        for (int k = 0; k < N_MSGS; k++)
            if (sh.deliveries[k] > 0 && sh.ok_count[k] == 0) held++;
        long long ops = sh.ops;
        pthread_mutex_unlock(&sh.mu);
        if (kill == KILLS - 1) ops_before_last = ops;
        long long log_off = tu_file_size(c->srv.log);
        assert_true(log_off >= 0);
        long long t_kill = e2e_now_ms();
        e2e_sleep_ms(down_ms[kill]);
        e2e_case_start(c, restart_flags); /* same directory, same port */
        assert_int_equal(c->srv.port, port);
        t_restart = e2e_now_ms();
        replayed[kill] = replayed_since(c->srv.log, log_off);
        print_message("kill %d: %d ms into the round, %d acked, %d received and not acked; "
                      "restarted after %lld ms, pop journal: %lld records replayed\n",
                      kill + 1, kill_after_ms[kill], acked, held, t_restart - t_kill,
                      replayed[kill]);
    }

    /* Everything done (or acked unanswered), then nothing more for longer
     * than an invisibility. */
    long long deadline = t_restart + FINAL_MS;
    for (;;) {
        long long now = e2e_now_ms();
        pthread_mutex_lock(&sh.mu);
        int pending = 0;
        for (int k = 0; k < N_MSGS; k++)
            if (sh.ok_count[k] == 0 && !sh.ack_unknown[k]) pending++;
        bool bad = sh.err[0] != '\0';
        pthread_mutex_unlock(&sh.mu);
        long long last = atomic_load(&sh.last_delivery_ms);
        if (bad) break;
        if (pending == 0 && now - last >= QUIET_MS && now - t_restart >= QUIET_MS) break;
        if (now >= deadline) {
            atomic_store(&sh.stop, true);
            for (int i = 0; i < CONSUMERS; i++) pthread_join(th[i], NULL);
            fail_msg("%d messages never acked %d ms after the last restart (%d acked)", pending,
                     FINAL_MS, n_acked(&sh));
        }
        e2e_sleep_ms(50);
    }
    atomic_store(&sh.stop, true);
    for (int i = 0; i < CONSUMERS; i++) pthread_join(th[i], NULL);

    int redelivered = 0;
    int unanswered_done = 0;
    long long deliveries = 0;
    for (int k = 0; k < N_MSGS; k++) {
        deliveries += sh.deliveries[k];
        if (sh.deliveries[k] > 1) redelivered++;
        if (sh.ok_count[k] == 0) unanswered_done++;
    }
    print_message("%d acked, %d done by an ack cut by a kill; %lld deliveries, %d messages "
                  "delivered more than once; %lld EXPIRED acks; %lld requests without an "
                  "answer; %lld violations\n",
                  sh.n_acked, unanswered_done, deliveries, redelivered, sh.expired,
                  sh.transport_errors, sh.violations);
    if (sh.err[0]) fail_msg("%s (%lld violations)", sh.err, sh.violations);
    for (int k = 0; k < N_MSGS; k++) {
        if (sh.ok_count[k] > 1) fail_msg("m%d acked OK %d times", k, sh.ok_count[k]);
        if (sh.ok_count[k] == 0 && !sh.ack_unknown[k]) fail_msg("m%d never acked", k);
        if (sh.deliveries[k] == 0) fail_msg("m%d never delivered", k);
    }

    /* The broker agrees: nothing in flight, nothing left. */
    json_t *p = e2e_call(c, "GET", "/v1/groups/" GROUP "/progress?topic=" TOPIC, NULL, NULL, 200);
    json_t *qs = json_object_get(p, "queues");
    assert_int_equal(json_array_size(qs), QUEUES);
    for (size_t q = 0; q < json_array_size(qs); q++) {
        assert_int_equal(e2e_num(json_array_get(qs, q), "inflight"), 0);
        assert_int_equal(e2e_num(json_array_get(qs, q), "consumerOffset"), N_MSGS / QUEUES);
    }
    assert_int_equal(e2e_num(p, "totalLag"), 0);
    json_decref(p);

    /* Each restart replayed the journal; the last one less than all of it
     * (every op before the last kill wrote at least one record), so it
     * started from a snapshot. */
    long long replayed_total = 0;
    for (int i = 0; i < KILLS; i++) replayed_total += replayed[i];
    assert_true(replayed_total > 0);
    print_message("last restart replayed %lld records; %lld ops journaled before that kill\n",
                  replayed[KILLS - 1], ops_before_last);
    assert_true(replayed[KILLS - 1] < ops_before_last);

    int st = e2e_stop(&c->srv);
    if (st != 0) e2e_case_print_log(c);
    assert_int_equal(st, 0);
    assert_log_clean(c->srv.log);
    e2e_check_data(c);
    pthread_mutex_destroy(&sh.mu);
    print_message("done in %lld ms\n", e2e_now_ms() - t_start);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            test_pop_kill9_under_receive_load_never_redelivers_an_acked_message, setup,
            e2e_case_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
