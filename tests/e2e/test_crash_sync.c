/*
 * test_crash_sync.c - kill -9 of a real petrel under SYNC_FLUSH load.
 * Six producer threads send JSON messages (unique bodies, some with tags,
 * keys, a queueId, a shardingKey, some in batches) to a topic of 8 queues
 * on a broker with 256 KiB commit-log segments, so that segments roll
 * while they send, and record every SEND_OK answer.  The broker is killed
 * while they send, restarted on the same data directory, and every queue
 * is pulled from offset 0 to its end: each acknowledged message must be
 * there exactly once, intact, at its acknowledged queueId and queueOffset
 * with its msgId, and GET /v1/messages/{msgId} must return it (checked for
 * the last acks before each kill and every 10th other); an unacknowledged
 * message may be there, at most once and intact.  Three rounds kill at
 * three different moments; then a clean stop and `petrel check` pass.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2e.h"

#define TOPIC "Crash"
#define QUEUES 8
#define THREADS 6
#define ROUNDS 3
#define PAD_MAX 1200  /* bytes of padding of a body, at most */
#define BATCH_EVERY 6 /* every 6th request of a thread is a batch ... */
#define BATCH_LEN 3   /* ... of 3 messages */
#define PULL_MAX 1000
#define GET_LAST 50   /* each thread's last acks before a kill: all got by msgId */
#define GET_EVERY 10  /* of its other acks, every 10th seq is got by msgId */

/* Kill moments, in ms after the round's first acknowledgement (so that a
 * slow start on a loaded machine still kills under load). */
static const int kill_after_ms[ROUNDS] = {1800, 600, 2600};

static const char *const broker_flags[] = {"--flushDiskType=SYNC_FLUSH",
                                           "--mappedFileSizeCommitLog=262144", NULL};

static int setup(void **state) { return e2e_case_setup(state, "e2e-crash-sync"); }

/* ---- messages --------------------------------------------------------------
 * Message 'seq' of thread 'thread' in round 'round' is fully determined by
 * the three numbers, so any message read back can be checked byte by byte. */

typedef struct Expect {
    char body[64 + PAD_MAX]; /* NUL-terminated */
    char tags[16];           /* "" = none */
    char key[48];            /* "" = none */
    int queue_id;            /* -1 = not given */
    bool sharded;            /* sent with a shardingKey */
} Expect;

static void expect_for(int round, int thread, int seq, Expect *e) {
    int n = snprintf(e->body, sizeof(e->body), "r%d-p%d-s%06d-", round, thread, seq);
    int pad = (seq * 37 + thread * 11 + round * 5) % PAD_MAX;
    for (int i = 0; i < pad; i++) e->body[n + i] = (char)('a' + (i + seq) % 26);
    e->body[n + pad] = '\0';
    e->tags[0] = '\0';
    e->key[0] = '\0';
    if (seq % 3 == 0) snprintf(e->tags, sizeof(e->tags), "T%d", thread);
    if (seq % 5 == 0) snprintf(e->key, sizeof(e->key), "k-%d-%d-%d", round, thread, seq);
    e->queue_id = seq % 4 == 0 ? (seq / 4) % QUEUES : -1;
    e->sharded = seq % 4 == 1;
}

/* Appends the JSON object of message 'seq' to 'buf' at '*len'. */
static void json_for(int round, int thread, int seq, char *buf, size_t cap, size_t *len) {
    Expect e;
    expect_for(round, thread, seq, &e);
    int n = snprintf(buf + *len, cap - *len, "{\"body\":\"%s\"", e.body);
    if (e.tags[0]) n += snprintf(buf + *len + n, cap - *len - n, ",\"tags\":\"%s\"", e.tags);
    if (e.key[0]) n += snprintf(buf + *len + n, cap - *len - n, ",\"keys\":[\"%s\"]", e.key);
    if (e.queue_id >= 0)
        n += snprintf(buf + *len + n, cap - *len - n, ",\"queueId\":%d", e.queue_id);
    if (e.sharded)
        n += snprintf(buf + *len + n, cap - *len - n, ",\"shardingKey\":\"sk-%d\"", thread);
    n += snprintf(buf + *len + n, cap - *len - n, "}");
    *len += (size_t)n;
}

/* ---- producers ---------------------------------------------------------------*/

typedef struct Ack {
    int round;
    int thread;
    int seq;
    int queue_id;
    long long queue_off;
    char msg_id[40];
    bool near_kill; /* among the thread's last GET_LAST acks of the round */
} Ack;

typedef struct Producer {
    const E2eServer *srv;
    int round;
    int thread;
    atomic_bool *stop;     /* set by the main thread after the kill */
    atomic_int *acked;     /* SEND_OK answers of the round, all threads */
    int sent;              /* messages sent (seqs 0..sent-1), acknowledged or not */
    Ack *acks;             /* SEND_OK answers, malloc'd */
    size_t n_acks;
    size_t cap_acks;
    int not_ok;            /* answers other than 200 SEND_OK (or none) */
    int bad;               /* protocol violations: checked by the main thread */
} Producer;

static void add_ack(Producer *p, int seq, const json_t *res) {
    const char *id = e2e_str(res, "msgId");
    if (!id || strlen(id) != 32 || !json_is_integer(json_object_get(res, "queueId")) ||
        !json_is_integer(json_object_get(res, "queueOffset"))) {
        p->bad++;
        return;
    }
    if (p->n_acks == p->cap_acks) {
        p->cap_acks = p->cap_acks ? 2 * p->cap_acks : 256;
        p->acks = realloc(p->acks, p->cap_acks * sizeof(*p->acks));
        if (!p->acks) abort();
    }
    Ack *a = &p->acks[p->n_acks++];
    *a = (Ack){p->round, p->thread, seq, (int)e2e_num(res, "queueId"),
               e2e_num(res, "queueOffset"), "", false};
    snprintf(a->msg_id, sizeof(a->msg_id), "%s", id);
    atomic_fetch_add(p->acked, 1);
}

/* Records the SEND_OK results of a request for seqs first..first+count-1. */
static void record_answer(Producer *p, int first, int count, const E2eResponse *r) {
    json_t *root = r->status == 200 ? e2e_json(r) : NULL;
    json_t *results = json_object_get(root, "results");
    if (!root || (count > 1) != (results != NULL) ||
        (results && json_array_size(results) != (size_t)count)) {
        if (root) p->bad++;
        p->not_ok += count;
        json_decref(root);
        return;
    }
    for (int i = 0; i < count; i++) {
        json_t *one = results ? json_array_get(results, (size_t)i) : root;
        const char *st = e2e_str(one, "status");
        if (st && strcmp(st, "SEND_OK") == 0) {
            add_ack(p, first + i, one);
        } else {
            p->not_ok++;
        }
    }
    json_decref(root);
}

/* Sends until told to stop or the broker is gone; every request has its
 * own curl handle (e2e_http). */
static void *producer_main(void *arg) {
    Producer *p = arg;
    size_t cap = BATCH_LEN * (PAD_MAX + 256) + 64;
    char *buf = malloc(cap);
    if (!buf) abort();
    for (int req_no = 0; !atomic_load(p->stop); req_no++) {
        int count = req_no % BATCH_EVERY == BATCH_EVERY - 1 ? BATCH_LEN : 1;
        int first = p->sent;
        size_t len = 0;
        if (count > 1) len += (size_t)snprintf(buf, cap, "{\"messages\":[");
        for (int i = 0; i < count; i++) {
            if (i) buf[len++] = ',';
            json_for(p->round, p->thread, first + i, buf, cap, &len);
        }
        if (count > 1) len += (size_t)snprintf(buf + len, cap - len, "]}");
        p->sent += count;
        E2eRequest req = {.method = "POST",
                          .path = "/v1/topics/" TOPIC "/messages",
                          .body = buf,
                          .body_len = len,
                          .content_type = E2E_JSON};
        E2eResponse r;
        if (e2e_http(p->srv, &req, &r) != 0) {
            /* The broker is gone: this request may or may not be stored;
             * stop rather than count refused connections as sent. */
            p->not_ok += count;
            e2e_response_free(&r);
            break;
        }
        record_answer(p, first, count, &r);
        e2e_response_free(&r);
    }
    free(buf);
    return NULL;
}

/* ---- verification ------------------------------------------------------------*/

/* Where a message was read back: queue -1 = not seen. */
typedef struct Seen {
    int queue;
    long long off;
    char msg_id[40];
} Seen;

typedef struct History {
    int sent[ROUNDS][THREADS];   /* seqs sent per round and thread */
    Ack *acks;                   /* every SEND_OK so far, all rounds */
    size_t n_acks;
    Seen *seen[ROUNDS][THREADS]; /* per seq, rebuilt by each verification */
} History;

static void history_free(History *h) {
    free(h->acks);
    for (int r = 0; r < ROUNDS; r++)
        for (int t = 0; t < THREADS; t++) free(h->seen[r][t]);
}

/* Checks one pulled message against the message its body names and marks
 * it seen; fails on a foreign, damaged or repeated message. */
static void check_pulled(History *h, int rounds_done, int q, long long off, const json_t *m) {
    const char *body = e2e_str(m, "body");
    assert_non_null(body);
    int round = -1;
    int thread = -1;
    int seq = -1;
    if (sscanf(body, "r%d-p%d-s%d-", &round, &thread, &seq) != 3 || round < 0 ||
        round >= rounds_done || thread < 0 || thread >= THREADS || seq < 0 ||
        seq >= h->sent[round][thread]) {
        fail_msg("queue %d offset %lld: a message nobody sent: '%.80s'", q, off, body);
    }
    Expect e;
    expect_for(round, thread, seq, &e);
    if (strcmp(body, e.body) != 0) {
        fail_msg("queue %d offset %lld: body of r%d-p%d-s%d damaged: '%.80s'", q, off, round,
                 thread, seq, body);
    }
    assert_string_equal(e2e_str(m, "bodyEncoding"), "utf8");
    assert_string_equal(e2e_str(m, "tags"), e.tags);
    json_t *keys = json_object_get(m, "keys");
    assert_int_equal(json_array_size(keys), e.key[0] ? 1 : 0);
    if (e.key[0]) assert_string_equal(json_string_value(json_array_get(keys, 0)), e.key);
    if (e.queue_id >= 0) assert_int_equal(q, e.queue_id);
    assert_int_equal(e2e_num(m, "queueId"), q);
    assert_int_equal(e2e_num(m, "queueOffset"), off);
    Seen *s = &h->seen[round][thread][seq];
    if (s->queue >= 0) {
        fail_msg("r%d-p%d-s%d twice: queue %d offset %lld and queue %d offset %lld", round,
                 thread, seq, s->queue, s->off, q, off);
    }
    s->queue = q;
    s->off = off;
    snprintf(s->msg_id, sizeof(s->msg_id), "%s", e2e_str(m, "msgId"));
}

/* Waits until the queues stop growing (recovery has dispatched). */
static void wait_queues_settled(E2eCase *c) {
    long long last = -1;
    for (int tries = 0; tries < 200; tries++) {
        json_t *qs = e2e_call(c, "GET", "/v1/topics/" TOPIC "/queues", NULL, NULL, 200);
        long long sum = 0;
        for (size_t q = 0; q < json_array_size(qs); q++)
            sum += e2e_num(json_array_get(qs, q), "maxOffset");
        json_decref(qs);
        if (sum == last) return;
        last = sum;
        e2e_sleep_ms(20);
    }
}

/* Pulls every queue from 0 to its end and checks the messages of rounds
 * 0..rounds_done-1; then every acknowledged message: seen where it was
 * acknowledged with its msgId.  Of round 'get_round', the acks nearest the
 * kill and every GET_EVERY-th seq are also got by msgId (one connection per
 * request: all of them would take most of the test's time, and the pull
 * reads the same records by the same commit-log offsets).  Returns the
 * messages read. */
static long long verify(E2eCase *c, History *h, int rounds_done, int get_round) {
    for (int r = 0; r < rounds_done; r++) {
        for (int t = 0; t < THREADS; t++) {
            free(h->seen[r][t]);
            size_t n = (size_t)h->sent[r][t] + 1;
            h->seen[r][t] = malloc(n * sizeof(Seen));
            assert_non_null(h->seen[r][t]);
            for (size_t i = 0; i < n; i++) h->seen[r][t][i].queue = -1;
        }
    }
    wait_queues_settled(c);
    long long total = 0;
    for (int q = 0; q < QUEUES; q++) {
        long long off = 0;
        for (;;) {
            char path[256];
            snprintf(path, sizeof(path), "/v1/topics/%s/queues/%d/messages?offset=%lld&max=%d",
                     TOPIC, q, off, PULL_MAX);
            json_t *p = e2e_call(c, "GET", path, NULL, NULL, 200);
            const char *st = e2e_str(p, "status");
            assert_int_equal(e2e_num(p, "minOffset"), 0);
            json_t *msgs = json_object_get(p, "messages");
            for (size_t i = 0; i < json_array_size(msgs); i++) {
                check_pulled(h, rounds_done, q, off, json_array_get(msgs, i));
                off++;
                total++;
            }
            bool found = strcmp(st, "FOUND") == 0;
            if (found) assert_int_equal(e2e_num(p, "nextOffset"), off);
            if (!found) {
                assert_string_equal(st, "NO_NEW_MSG");
                assert_int_equal(e2e_num(p, "maxOffset"), off);
            }
            json_decref(p);
            if (!found) break;
        }
    }
    for (size_t i = 0; i < h->n_acks; i++) {
        const Ack *a = &h->acks[i];
        const Seen *s = &h->seen[a->round][a->thread][a->seq];
        if (s->queue != a->queue_id || s->off != a->queue_off) {
            fail_msg("acknowledged r%d-p%d-s%d (queue %d offset %lld, %s) %s", a->round,
                     a->thread, a->seq, a->queue_id, a->queue_off, a->msg_id,
                     s->queue < 0 ? "is missing" : "is elsewhere");
        }
        assert_string_equal(s->msg_id, a->msg_id);
        if (a->round != get_round || !(a->near_kill || a->seq % GET_EVERY == 0)) continue;
        char path[128];
        snprintf(path, sizeof(path), "/v1/messages/%s", a->msg_id);
        json_t *m = e2e_call(c, "GET", path, NULL, NULL, 200);
        Expect e;
        expect_for(a->round, a->thread, a->seq, &e);
        assert_string_equal(e2e_str(m, "body"), e.body);
        assert_string_equal(e2e_str(m, "msgId"), a->msg_id);
        assert_string_equal(e2e_str(m, "topic"), TOPIC);
        assert_int_equal(e2e_num(m, "queueId"), a->queue_id);
        assert_int_equal(e2e_num(m, "queueOffset"), a->queue_off);
        json_decref(m);
    }
    return total;
}

/* Runs the producers of 'round' against the started server until it is
 * killed 'kill_after_ms[round]' ms after their first acknowledgement, and
 * adds their acknowledgements to 'h'. */
static void produce_and_kill(E2eCase *c, History *h, int round) {
    atomic_bool stop = false;
    atomic_int acked = 0;
    pthread_t th[THREADS];
    Producer ps[THREADS];
    for (int t = 0; t < THREADS; t++) {
        ps[t] = (Producer){.srv = &c->srv, .round = round, .thread = t, .stop = &stop,
                           .acked = &acked};
        assert_int_equal(pthread_create(&th[t], NULL, producer_main, &ps[t]), 0);
    }
    long long t0 = e2e_now_ms();
    while (atomic_load(&acked) == 0 && e2e_now_ms() - t0 < E2E_WAIT_MS) e2e_sleep_ms(5);
    int first_ack_ms = (int)(e2e_now_ms() - t0);
    e2e_sleep_ms(kill_after_ms[round]);
    e2e_kill9(&c->srv);
    atomic_store(&stop, true);
    int sent = 0;
    int not_ok = 0;
    size_t n_acks = 0;
    for (int t = 0; t < THREADS; t++) {
        pthread_join(th[t], NULL);
        Producer *p = &ps[t];
        assert_int_equal(p->bad, 0);
        h->sent[round][t] = p->sent;
        sent += p->sent;
        not_ok += p->not_ok;
        n_acks += p->n_acks;
        for (size_t i = p->n_acks > GET_LAST ? p->n_acks - GET_LAST : 0; i < p->n_acks; i++)
            p->acks[i].near_kill = true;
        h->acks = realloc(h->acks, (h->n_acks + p->n_acks + 1) * sizeof(*h->acks));
        assert_non_null(h->acks);
        memcpy(h->acks + h->n_acks, p->acks, p->n_acks * sizeof(*p->acks));
        h->n_acks += p->n_acks;
        free(p->acks);
    }
    print_message("round %d: first ack after %d ms, killed %d ms later: %d sent, %zu acked, "
                  "%d not acknowledged\n",
                  round, first_ack_ms, kill_after_ms[round], sent, n_acks, not_ok);
    assert_true(n_acks > 0);
}

static void test_kill9_under_sync_flush_keeps_every_acked_message(void **state) {
    E2eCase *c = *state;
    History h = {0};
    long long t0 = e2e_now_ms();
    e2e_case_start(c, broker_flags);
    json_decref(e2e_call(c, "PUT", "/v1/topics/" TOPIC, E2E_JSON, "{\"queues\":8}", 201));
    for (int round = 0; round < ROUNDS; round++) {
        produce_and_kill(c, &h, round);
        /* For the log only: what the offline check makes of a crashed
         * directory (a torn unacknowledged tail is the restart's to cut). */
        const char *args[] = {"check", c->srv.data, NULL};
        char *out = NULL;
        int st = e2e_run(args, &out);
        const char *last = out ? strrchr(out, '\n') : NULL;
        while (last && last > out && last[-1] != '\n') last--;
        print_message("round %d: petrel check after the kill: exit %d, %s", round, st,
                      last ? last : "no output\n");
        free(out);
        e2e_case_start(c, broker_flags); /* recovers the killed broker's directory */
        long long n = verify(c, &h, round + 1, round);
        print_message("round %d: after restart %lld messages read, %zu acknowledged so far\n",
                      round, n, h.n_acks);
    }
    /* Segments rolled while producers sent (256 KiB each). */
    json_t *health = e2e_call(c, "GET", "/healthz", NULL, NULL, 200);
    assert_true(e2e_num(json_object_get(health, "commitLog"), "writeOffset") > 4 * 262144);
    json_decref(health);
    int st = e2e_stop(&c->srv);
    if (st != 0) e2e_case_print_log(c);
    assert_int_equal(st, 0);
    const char *args[] = {"check", c->srv.data, NULL};
    char *out = NULL;
    st = e2e_run(args, &out);
    if (st != 0) fprintf(stderr, "petrel check %s: exit %d\n%s", c->srv.data, st, out);
    assert_int_equal(st, 0);
    free(out);
    history_free(&h);
    print_message("%d rounds in %lld ms\n", ROUNDS, e2e_now_ms() - t0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_kill9_under_sync_flush_keeps_every_acked_message,
                                        setup, e2e_case_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
