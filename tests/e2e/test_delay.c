/*
 * test_delay.c - end-to-end tests of delayed messages (issue 5, API.md
 * "Produce": delayLevel, deliverAt, delayMs) against a real petrel started
 * with short levels (--messageDelayLevel="300ms 600ms 1200ms"): a delayed
 * message is stored
 * in SCHEDULE_TOPIC_XXXX, is neither pullable nor receivable before its
 * store time + its level's delay, then appears on its real topic and queue
 * as a new record with its body, tags, keys and properties; per-level
 * order; the raw form and mixed batches; every bad delay field; SIGTERM
 * and kill -9 with messages pending and just delivered (each delivered
 * exactly once after restart, none early); a topic deleted meanwhile.
 * "Not early" is checked twice: on the client's clock (first seen >= sent
 * + delay) and on the server's (storeTimestamp of the delivered record >=
 * storeTimestamp of the scheduled one + delay).  Lateness is printed.
 * Timers (deliverAt, delayMs; the broker started with
 * --timerMaxDelaySec=60): a deliverAt hidden until its time then intact on
 * its queue (storeTimestamp >= deliverAt), delayMs in the raw and JSON
 * forms and in a batch, a deliverAt in the past (or delayMs 0) stored at
 * once, every bad value and combination 400 with nothing stored, and
 * kill -9 with timers pending, due while down and just delivered: each
 * delivered exactly once, none early, `petrel check` clean.
 * Each case starts its own server in its own temporary directory.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2e.h"

#define LEVELS "--messageDelayLevel=300ms 600ms 1200ms"
#define LEVEL_COUNT 3
#define WATCH_MAX 128   /* messages one watch can hold */
#define QUEUES_MAX 8    /* queues of a watched topic */
#define LATE_MAX_MS 1000 /* delivered at most this late (generous: loaded CI machines) */

static const char *const levels_flags[] = {LEVELS, NULL};

/* Delay of level 1..LEVEL_COUNT in ms (0: not delayed). */
static const long long level_ms[LEVEL_COUNT + 1] = {0, 300, 600, 1200};

static int setup(void **state) {
    return e2e_case_setup(state, "e2e-delay");
}

/* ---- helpers ---------------------------------------------------------------*/

/* Stops the server cleanly and runs `petrel check` on its data: exit 0
 * (the output is printed otherwise). */
static void stop_and_check(E2eCase *c) {
    e2e_stop_ok(c);
    e2e_check_data(c);
}

/* Produces the JSON text 'body' to 'topic'; checks SEND_OK and a msgId and
 * returns the answer (caller owns). */
static json_t *produce(E2eCase *c, const char *topic, const char *body) {
    char path[256];
    snprintf(path, sizeof(path), "/v1/topics/%s/messages", topic);
    json_t *res = e2e_call(c, "POST", path, E2E_JSON, body, 200);
    assert_string_equal(e2e_str(res, "status"), "SEND_OK");
    assert_int_equal(strlen(e2e_str(res, "msgId")), 32);
    assert_true(json_is_integer(json_object_get(res, "queueId")));
    return res;
}

/* Produces {"body":'body',"queueId":'queue_id'} (queue_id < 0: none) with
 * "delayLevel":'level' (0: none) to 'topic'; returns the answer. */
static json_t *produce_at(E2eCase *c, const char *topic, const char *body, int level,
                          int queue_id) {
    char json[512];
    int n = snprintf(json, sizeof(json), "{\"body\":\"%s\"", body);
    if (level > 0) n += snprintf(json + n, sizeof(json) - (size_t)n, ",\"delayLevel\":%d", level);
    if (queue_id >= 0)
        n += snprintf(json + n, sizeof(json) - (size_t)n, ",\"queueId\":%d", queue_id);
    snprintf(json + n, sizeof(json) - (size_t)n, "}");
    return produce(c, topic, json);
}

/* The message stored under 'msg_id' (GET /v1/messages/{id}; caller owns). */
static json_t *get_msg(E2eCase *c, const char *msg_id) {
    char path[128];
    snprintf(path, sizeof(path), "/v1/messages/%s", msg_id);
    return e2e_call(c, "GET", path, NULL, NULL, 200);
}

/* storeTimestamp of the record stored under 'msg_id' (the scheduled one). */
static long long store_ts_of(E2eCase *c, const char *msg_id) {
    json_t *m = get_msg(c, msg_id);
    long long ts = e2e_num(m, "storeTimestamp");
    json_decref(m);
    assert_true(ts > 0);
    return ts;
}

/* Sum of the maxOffsets of the queues of 'topic'. */
static long long topic_total(E2eCase *c, const char *topic) {
    char path[256];
    snprintf(path, sizeof(path), "/v1/topics/%s/queues", topic);
    json_t *qs = e2e_call(c, "GET", path, NULL, NULL, 200);
    long long sum = 0;
    for (size_t q = 0; q < json_array_size(qs); q++)
        sum += e2e_num(json_array_get(qs, q), "maxOffset");
    json_decref(qs);
    return sum;
}

/* Sends a request expected to fail with 400 'code'.  When 'range' is not
 * NULL the error's message should contain it (the allowed range): a
 * message that does not is printed and counted in '*no_range' (the case
 * fails at its end, after its other checks). */
static void expect_400(E2eCase *c, const char *path, const char *content_type, const char *body,
                       const char *code, const char *range, int *no_range) {
    e2e_expect_error(c, "POST", path, content_type, body, 400, code);
    if (!range) return;
    E2eResponse r;
    assert_int_equal(e2e_send(&c->srv, "POST", path, content_type, body, &r), 0);
    json_t *root = e2e_json(&r);
    const char *msg = e2e_str(json_object_get(root, "error"), "message");
    assert_non_null(msg);
    if (!strstr(msg, range)) {
        fprintf(stderr, "POST %s %s: message '%s' does not name '%s'\n", path, body ? body : "",
                msg, range);
        (*no_range)++;
    }
    json_decref(root);
    e2e_response_free(&r);
}

/* GET of the key query 'path' until it answers 'n' messages (up to ~2 s);
 * returns its messages array's owner (caller owns). */
static json_t *query_until(E2eCase *c, const char *path, size_t n) {
    json_t *root = NULL;
    for (int tries = 0; tries < 200; tries++) {
        json_decref(root);
        root = e2e_call(c, "GET", path, NULL, NULL, 200);
        if (json_array_size(json_object_get(root, "messages")) == n) return root;
        e2e_sleep_ms(10);
    }
    fail_msg("%s never answered %zu messages", path, n);
    return NULL;
}

/* Prints the lines of the server's log that contain 'needle'. */
static void print_log_lines(const E2eCase *c, const char *needle) {
    FILE *f = fopen(c->srv.log, "r");
    if (!f) return;
    char line[1024];
    while (fgets(line, sizeof(line), f))
        if (strstr(line, needle)) print_message("server log: %s", line);
    fclose(f);
}

/* ---- watching a topic ------------------------------------------------------
 * A watch pulls every queue of a topic from where it left off and notes
 * each message with the wall-clock time it was first seen, so a test can
 * tell when a delayed message became visible and whether one came twice. */

typedef struct Got {
    json_t *msg;       /* the pulled message (owned) */
    long long seen_ms; /* e2e_wall_ms() right after the pull that returned it */
} Got;

typedef struct Watch {
    const char *topic;
    int queues;
    long long next[QUEUES_MAX]; /* next offset to pull, per queue */
    Got got[WATCH_MAX];
    size_t n;
} Watch;

static void watch_init(Watch *w, const char *topic, int queues) {
    assert_true(queues <= QUEUES_MAX);
    memset(w, 0, sizeof(*w));
    w->topic = topic;
    w->queues = queues;
}

static void watch_free(Watch *w) {
    for (size_t i = 0; i < w->n; i++) json_decref(w->got[i].msg);
    w->n = 0;
}

/* Pulls every queue once from its next offset; returns the messages added. */
static size_t watch_poll(E2eCase *c, Watch *w) {
    size_t added = 0;
    for (int q = 0; q < w->queues; q++) {
        char path[256];
        snprintf(path, sizeof(path), "/v1/topics/%s/queues/%d/messages?offset=%lld&max=100",
                 w->topic, q, w->next[q]);
        json_t *p = e2e_call(c, "GET", path, NULL, NULL, 200);
        long long now = e2e_wall_ms();
        json_t *msgs = json_object_get(p, "messages");
        for (size_t i = 0; i < json_array_size(msgs); i++) {
            json_t *m = json_array_get(msgs, i);
            assert_int_equal(e2e_num(m, "queueId"), q);
            assert_int_equal(e2e_num(m, "queueOffset"), w->next[q]);
            assert_true(w->n < WATCH_MAX);
            w->got[w->n++] = (Got){json_incref(m), now};
            w->next[q]++;
            added++;
        }
        json_decref(p);
    }
    return added;
}

/* Polls every 5 ms until the watch holds 'n' messages or 'deadline_ms'
 * (e2e_wall_ms) passes; returns the number held. */
static size_t watch_until(E2eCase *c, Watch *w, size_t n, long long deadline_ms) {
    for (;;) {
        watch_poll(c, w);
        if (w->n >= n || e2e_wall_ms() > deadline_ms) return w->n;
        e2e_sleep_ms(5);
    }
}

/* The message with body 'body' (NULL when none); '*count' is how many
 * messages have that body. */
static const Got *watch_find(const Watch *w, const char *body, int *count) {
    const Got *first = NULL;
    *count = 0;
    for (size_t i = 0; i < w->n; i++) {
        if (strcmp(e2e_str(w->got[i].msg, "body"), body) != 0) continue;
        if (!first) first = &w->got[i];
        (*count)++;
    }
    return first;
}

/* Asserts the watch holds 'body' exactly once and returns it. */
static const Got *watch_once(const Watch *w, const char *body) {
    int count = 0;
    const Got *g = watch_find(w, body, &count);
    if (count != 1) fail_msg("'%s' on %s %d times, expected once", body, w->topic, count);
    return g;
}

/* One delayed message as sent: what its delivery is checked against. */
typedef struct Sent {
    char body[32];
    int level;              /* 0 = not delayed */
    int queue_id;           /* the queueId of the answer */
    long long sent_ms;      /* e2e_wall_ms() just before the produce request */
    char msg_id[40];        /* msgId of the answer: the scheduled record */
    long long sched_store;  /* its storeTimestamp (0 = not looked up) */
} Sent;

/* Produces 'body' at 'level' (queue 'queue_id', < 0: any) and fills 's'. */
static void send_one(E2eCase *c, const char *topic, Sent *s, const char *body, int level,
                     int queue_id) {
    memset(s, 0, sizeof(*s));
    snprintf(s->body, sizeof(s->body), "%s", body);
    s->level = level;
    s->sent_ms = e2e_wall_ms();
    json_t *res = produce_at(c, topic, body, level, queue_id);
    s->queue_id = (int)e2e_num(res, "queueId");
    if (queue_id >= 0) assert_int_equal(s->queue_id, queue_id);
    snprintf(s->msg_id, sizeof(s->msg_id), "%s", e2e_str(res, "msgId"));
    json_decref(res);
}

/* Checks the delivery 'g' of 's' on 'topic': right topic and queue, a new
 * msgId, not early on either clock.  Returns its lateness on the server's
 * clock (ms after sched_store + delay; after sent_ms + delay when
 * sched_store is 0). */
static long long check_delivery(const Sent *s, const Got *g, const char *topic) {
    const json_t *m = g->msg;
    long long delay = level_ms[s->level];
    long long stored = e2e_num(m, "storeTimestamp");
    assert_string_equal(e2e_str(m, "topic"), topic);
    assert_int_equal(e2e_num(m, "queueId"), s->queue_id);
    assert_int_equal(e2e_num(m, "reconsumeTimes"), 0);
    if (s->level > 0) assert_string_not_equal(e2e_str(m, "msgId"), s->msg_id);
    if (g->seen_ms < s->sent_ms + delay || stored < s->sent_ms + delay ||
        (s->sched_store && stored < s->sched_store + delay)) {
        fail_msg("'%s' (level %d, %lld ms) early: sent at %lld, scheduled record stored at "
                 "%lld, delivered record stored at %lld, seen at %lld",
                 s->body, s->level, delay, s->sent_ms, s->sched_store, stored, g->seen_ms);
    }
    return stored - ((s->sched_store ? s->sched_store : s->sent_ms) + delay);
}

/* ============================================================================
 * 1. one delayed message
 * ==========================================================================*/

static void test_delay_level_1_hidden_until_due_then_intact_on_its_queue(void **state) {
    E2eCase *c = *state;
    e2e_case_start(c, levels_flags);
    e2e_create_topic(c, "D1", 2);
    long long t_send = e2e_wall_ms();
    json_t *res = produce(c, "D1",
                          "{\"body\":\"h\\u00e9llo delayed\",\"tags\":\"TagD\","
                          "\"keys\":[\"order-7\",\"k2\"],\"properties\":{\"color\":\"red\","
                          "\"n\":\"1\"},\"queueId\":1,\"delayLevel\":1}");
    assert_int_equal(e2e_num(res, "queueId"), 1);
    assert_true(json_is_null(json_object_get(res, "transactionId")));
    long long answer_off = e2e_num(res, "queueOffset");
    char uniq[40];
    snprintf(uniq, sizeof(uniq), "%s", e2e_str(res, "uniqueId"));
    Sent s = {.body = "hello delayed", .level = 1, .queue_id = 1, .sent_ms = t_send};
    snprintf(s.msg_id, sizeof(s.msg_id), "%s", e2e_str(res, "msgId"));
    json_decref(res);

    /* the answer's msgId is the scheduled record */
    json_t *sched = get_msg(c, s.msg_id);
    s.sched_store = e2e_num(sched, "storeTimestamp");
    assert_int_equal(e2e_num(sched, "queueOffset"), answer_off);
    assert_string_equal(e2e_str(sched, "body"), "h\xc3\xa9llo delayed");
    assert_string_equal(e2e_str(sched, "topic"), "SCHEDULE_TOPIC_XXXX");
    assert_int_equal(e2e_num(sched, "queueId"), 0); /* level 1: queue 0 */
    json_decref(sched);

    /* ~150 ms in: not on the topic */
    long long wait = t_send + 150 - e2e_wall_ms();
    if (wait > 0) e2e_sleep_ms((int)wait);
    Watch w;
    watch_init(&w, "D1", 2);
    watch_poll(c, &w);
    long long total = topic_total(c, "D1");
    json_t *q = e2e_call(c, "GET", "/v1/topics/D1/messages?key=order-7", NULL, NULL, 200);
    if (e2e_wall_ms() < t_send + level_ms[1]) { /* else this machine was too slow to tell */
        assert_int_equal(w.n, 0);
        assert_int_equal(total, 0);
        assert_int_equal(json_array_size(json_object_get(q, "messages")), 0);
    }
    json_decref(q);

    /* by ~1 s: there */
    size_t n = watch_until(c, &w, 1, t_send + 1000);
    assert_int_equal(n, 1);
    const Got *g = watch_once(&w, "h\xc3\xa9llo delayed");
    long long late = check_delivery(&s, g, "D1");
    print_message("delayLevel 1 (300 ms): stored %lld ms late (server clock), first pulled "
                  "%lld ms after send + 300\n",
                  late, g->seen_ms - (t_send + level_ms[1]));
    assert_true(late < LATE_MAX_MS);
    const json_t *m = g->msg;
    assert_int_equal(e2e_num(m, "queueOffset"), 0);
    assert_string_equal(e2e_str(m, "bodyEncoding"), "utf8");
    assert_string_equal(e2e_str(m, "tags"), "TagD");
    json_t *keys = json_object_get(m, "keys");
    assert_int_equal(json_array_size(keys), 2);
    assert_string_equal(json_string_value(json_array_get(keys, 0)), "order-7");
    assert_string_equal(json_string_value(json_array_get(keys, 1)), "k2");
    json_t *props = json_object_get(m, "properties");
    json_t *want = json_pack("{s:s, s:s}", "color", "red", "n", "1");
    if (!json_equal(props, want)) {
        char *got = json_dumps(props, JSON_COMPACT);
        fprintf(stderr, "delivered properties %s, expected {\"color\":\"red\",\"n\":\"1\"}\n",
                got);
        free(got);
    }
    assert_true(json_equal(props, want));
    json_decref(want);
    assert_true(e2e_num(m, "bornTimestamp") <= s.sched_store);

    /* the delivered record is a message of its own, got by its id */
    json_t *byid = get_msg(c, e2e_str(m, "msgId"));
    assert_string_equal(e2e_str(byid, "topic"), "D1");
    assert_string_equal(e2e_str(byid, "body"), "h\xc3\xa9llo delayed");
    json_decref(byid);

    /* found by its key and by the uniqueId of the produce answer (kept) */
    char path[128];
    snprintf(path, sizeof(path), "/v1/topics/D1/messages?key=%s", uniq);
    const char *const queries[2] = {"/v1/topics/D1/messages?key=order-7", path};
    for (int i = 0; i < 2; i++) {
        q = query_until(c, queries[i], 1);
        assert_string_equal(e2e_str(json_array_get(json_object_get(q, "messages"), 0), "msgId"),
                            e2e_str(m, "msgId"));
        json_decref(q);
    }

    /* and it comes once */
    e2e_sleep_ms(300);
    watch_poll(c, &w);
    assert_int_equal(w.n, 1);
    assert_int_equal(topic_total(c, "D1"), 1);
    watch_free(&w);
}

/* ============================================================================
 * 2. levels mixed
 * ==========================================================================*/

#define MIXED 16 /* message i has level i % 4 (0: not delayed), queue i % 3 */

static void test_delay_mixed_levels_each_on_time_and_in_order_per_level(void **state) {
    E2eCase *c = *state;
    e2e_case_start(c, levels_flags);
    e2e_create_topic(c, "D2", 3);
    Sent s[MIXED];
    for (int i = 0; i < MIXED; i++) {
        char body[32];
        snprintf(body, sizeof(body), "L%d-%02d", i % 4, i);
        send_one(c, "D2", &s[i], body, i % 4, i % 3);
    }
    for (int i = 0; i < MIXED; i++)
        if (s[i].level) s[i].sched_store = store_ts_of(c, s[i].msg_id);
    long long last_sent = s[MIXED - 1].sent_ms;
    Watch w;
    watch_init(&w, "D2", 3);
    size_t n = watch_until(c, &w, MIXED, last_sent + level_ms[3] + 3000);
    assert_int_equal(n, MIXED);
    long long worst[LEVEL_COUNT + 1] = {0};
    long long prev_clo[LEVEL_COUNT + 1] = {-1, -1, -1, -1};
    for (int i = 0; i < MIXED; i++) {
        const Got *g = watch_once(&w, s[i].body);
        long long late = check_delivery(&s[i], g, "D2");
        if (s[i].level == 0) continue;
        if (late > worst[s[i].level]) worst[s[i].level] = late;
        /* per level, re-put in produce order: commit-log offsets ascend */
        long long clo = e2e_num(g->msg, "commitLogOffset");
        if (clo <= prev_clo[s[i].level])
            fail_msg("level %d: '%s' re-put before an earlier message of its level", s[i].level,
                     s[i].body);
        prev_clo[s[i].level] = clo;
    }
    for (int l = 1; l <= LEVEL_COUNT; l++) {
        print_message("level %d (%lld ms): worst lateness %lld ms (server clock)\n", l,
                      level_ms[l], worst[l]);
        assert_true(worst[l] < LATE_MAX_MS);
    }
    /* the immediate ones were there long before the delayed ones */
    e2e_sleep_ms(200);
    watch_poll(c, &w);
    assert_int_equal(w.n, MIXED);
    watch_free(&w);
}

/* ============================================================================
 * 3. raw form and mixed batch
 * ==========================================================================*/

static void test_delay_raw_form_and_batch_of_delayed_and_immediate(void **state) {
    E2eCase *c = *state;
    e2e_case_start(c, levels_flags);
    e2e_create_topic(c, "D3r", 1);
    e2e_create_topic(c, "D3", 2);

    /* raw, ?delayLevel=2 */
    Sent raw = {.body = "raw delayed", .level = 2, .queue_id = 0};
    raw.sent_ms = e2e_wall_ms();
    json_t *res = e2e_call(c, "POST", "/v1/topics/D3r/messages?delayLevel=2&tags=TagR&keys=a,b",
                           "text/plain", "raw delayed", 200);
    assert_string_equal(e2e_str(res, "status"), "SEND_OK");
    assert_int_equal(e2e_num(res, "queueId"), 0);
    snprintf(raw.msg_id, sizeof(raw.msg_id), "%s", e2e_str(res, "msgId"));
    json_decref(res);
    raw.sched_store = store_ts_of(c, raw.msg_id);

    /* batch: immediate, level 1, immediate, level 2 */
    long long t_batch = e2e_wall_ms();
    res = e2e_call(c, "POST", "/v1/topics/D3/messages", E2E_JSON,
                   "{\"messages\":[{\"body\":\"b-now-1\",\"queueId\":0},"
                   "{\"body\":\"b-d1\",\"delayLevel\":1,\"queueId\":0,\"tags\":\"X\"},"
                   "{\"body\":\"b-now-2\",\"queueId\":0},"
                   "{\"body\":\"b-d2\",\"delayLevel\":2,\"queueId\":1,\"keys\":[\"kb\"]}]}",
                   200);
    json_t *results = json_object_get(res, "results");
    assert_int_equal(json_array_size(results), 4);
    static const char *const bodies[4] = {"b-now-1", "b-d1", "b-now-2", "b-d2"};
    static const int levels[4] = {0, 1, 0, 2};
    static const int queues[4] = {0, 0, 0, 1};
    Sent b[4];
    for (int i = 0; i < 4; i++) {
        json_t *one = json_array_get(results, (size_t)i);
        assert_string_equal(e2e_str(one, "status"), "SEND_OK");
        assert_int_equal(e2e_num(one, "queueId"), queues[i]);
        b[i] = (Sent){.level = levels[i], .queue_id = queues[i], .sent_ms = t_batch};
        snprintf(b[i].body, sizeof(b[i].body), "%s", bodies[i]);
        snprintf(b[i].msg_id, sizeof(b[i].msg_id), "%s", e2e_str(one, "msgId"));
    }
    /* the immediate ones take offsets 0 and 1 of queue 0 */
    assert_int_equal(e2e_num(json_array_get(results, 0), "queueOffset"), 0);
    assert_int_equal(e2e_num(json_array_get(results, 2), "queueOffset"), 1);
    json_decref(res);
    b[1].sched_store = store_ts_of(c, b[1].msg_id);
    b[3].sched_store = store_ts_of(c, b[3].msg_id);

    /* right away: the two immediate ones, nothing delayed */
    Watch w;
    watch_init(&w, "D3", 2);
    watch_until(c, &w, 2, t_batch + 2000);
    if (e2e_wall_ms() < t_batch + level_ms[1]) {
        assert_int_equal(w.n, 2);
        assert_string_equal(e2e_str(w.got[0].msg, "body"), "b-now-1");
        assert_string_equal(e2e_str(w.got[1].msg, "body"), "b-now-2");
    }
    Watch wr;
    watch_init(&wr, "D3r", 1);
    watch_poll(c, &wr);
    if (e2e_wall_ms() < raw.sent_ms + level_ms[2]) assert_int_equal(wr.n, 0);

    assert_int_equal(watch_until(c, &w, 4, t_batch + level_ms[2] + 2000), 4);
    assert_int_equal(watch_until(c, &wr, 1, raw.sent_ms + level_ms[2] + 2000), 1);
    for (int i = 0; i < 4; i++) {
        long long late = check_delivery(&b[i], watch_once(&w, b[i].body), "D3");
        if (b[i].level) {
            print_message("batch '%s' level %d: %lld ms late\n", b[i].body, b[i].level, late);
            assert_true(late < LATE_MAX_MS);
        }
    }
    const Got *g = watch_once(&w, "b-d1");
    assert_string_equal(e2e_str(g->msg, "tags"), "X");
    g = watch_once(&w, "b-d2");
    assert_string_equal(json_string_value(json_array_get(json_object_get(g->msg, "keys"), 0)),
                        "kb");
    g = watch_once(&wr, "raw delayed");
    long long late = check_delivery(&raw, g, "D3r");
    print_message("raw ?delayLevel=2 (600 ms): %lld ms late\n", late);
    assert_true(late < LATE_MAX_MS);
    assert_string_equal(e2e_str(g->msg, "tags"), "TagR");
    json_t *keys = json_object_get(g->msg, "keys");
    assert_int_equal(json_array_size(keys), 2);
    assert_string_equal(json_string_value(json_array_get(keys, 0)), "a");
    assert_string_equal(json_string_value(json_array_get(keys, 1)), "b");
    watch_free(&w);
    watch_free(&wr);
}

/* ============================================================================
 * 4. bad input
 * ==========================================================================*/

static void test_delay_bad_fields_are_400_and_store_nothing(void **state) {
    E2eCase *c = *state;
    e2e_case_start(c, levels_flags);
    e2e_create_topic(c, "V", 2);
    int no_range = 0;
    static const struct {
        const char *body;
        const char *code;
        const char *range; /* the error message names it, or NULL */
    } cases[] = {
        {"{\"body\":\"x\",\"delayLevel\":0}", "INVALID_FIELD", "3"},
        {"{\"body\":\"x\",\"delayLevel\":4}", "INVALID_FIELD", "3"},
        {"{\"body\":\"x\",\"delayLevel\":-1}", "INVALID_FIELD", "3"},
        {"{\"body\":\"x\",\"delayLevel\":\"x\"}", "INVALID_FIELD", NULL},
        {"{\"body\":\"x\",\"delayLevel\":\"1\"}", "INVALID_FIELD", NULL},
        {"{\"body\":\"x\",\"delayLevel\":1.5}", "INVALID_FIELD", NULL},
        {"{\"body\":\"x\",\"delayLevel\":4294967297}", "INVALID_FIELD", "3"},
        {"{\"body\":\"x\",\"delayLevel\":1,\"delayMs\":1000}", "INVALID_FIELD", "at most one"},
        {"{\"body\":\"x\",\"delayLevel\":1,\"deliverAt\":1767225600000}", "INVALID_FIELD",
         "at most one"},
        {"{\"messages\":[{\"body\":\"ok\"},{\"body\":\"x\",\"delayLevel\":4}]}", "INVALID_FIELD",
         "messages[1]"},
        {"{\"messages\":[{\"body\":\"ok\",\"delayLevel\":1},{\"body\":\"x\",\"delayLevel\":1,"
         "\"delayMs\":5}]}",
         "INVALID_FIELD", "messages[1]"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        expect_400(c, "/v1/topics/V/messages", E2E_JSON, cases[i].body, cases[i].code,
                   cases[i].range, &no_range);
    static const struct {
        const char *path;
        const char *code;
        const char *range;
    } raw[] = {
        {"/v1/topics/V/messages?delayLevel=0", "INVALID_FIELD", "3"},
        {"/v1/topics/V/messages?delayLevel=4", "INVALID_FIELD", "3"},
        {"/v1/topics/V/messages?delayLevel=-1", "INVALID_FIELD", NULL},
        {"/v1/topics/V/messages?delayLevel=x", "INVALID_FIELD", NULL},
        {"/v1/topics/V/messages?delayLevel=1.5", "INVALID_FIELD", NULL},
        {"/v1/topics/V/messages?delayLevel=", "INVALID_FIELD", NULL},
        {"/v1/topics/V/messages?delayLevel=%2B1", "INVALID_FIELD", NULL},
        {"/v1/topics/V/messages?delayLevel=1&delayMs=100", "INVALID_FIELD", "at most one"},
    };
    for (size_t i = 0; i < sizeof(raw) / sizeof(raw[0]); i++)
        expect_400(c, raw[i].path, "text/plain", "hello", raw[i].code, raw[i].range, &no_range);
    /* nothing was stored anywhere, the schedule topic included */
    json_t *health = e2e_call(c, "GET", "/healthz", NULL, NULL, 200);
    assert_int_equal(e2e_num(json_object_get(health, "commitLog"), "writeOffset"), 0);
    json_decref(health);
    /* the edges are accepted */
    json_decref(produce_at(c, "V", "one", 1, -1));
    json_decref(produce_at(c, "V", "three", 3, -1));

    /* default levels: 18 of them */
    e2e_stop_ok(c);
    e2e_case_start(c, NULL);
    expect_400(c, "/v1/topics/V/messages", E2E_JSON, "{\"body\":\"x\",\"delayLevel\":19}",
               "INVALID_FIELD", "18", &no_range);
    expect_400(c, "/v1/topics/V/messages?delayLevel=19", "text/plain", "x", "INVALID_FIELD",
               "18", &no_range);
    expect_400(c, "/v1/topics/V/messages?delayLevel=0", "text/plain", "x", "INVALID_FIELD",
               "18", &no_range);
    json_decref(produce_at(c, "V", "two hours", 18, -1));
    json_t *res = e2e_call(c, "POST", "/v1/topics/V/messages?delayLevel=18", "text/plain",
                           "two hours raw", 200);
    assert_string_equal(e2e_str(res, "status"), "SEND_OK");
    json_decref(res);
    if (no_range) fail_msg("%d error messages without the allowed range", no_range);
}

/* ============================================================================
 * 5. SIGTERM restart with messages pending
 * ==========================================================================*/

#define PENDING 6 /* message i: level 3 (1200 ms) for even i, level 2 (600 ms) for odd */

static void test_delay_pending_survive_sigterm_restart_delivered_once_on_time(void **state) {
    E2eCase *c = *state;
    e2e_case_start(c, levels_flags);
    e2e_create_topic(c, "D5", 2);
    Sent s[PENDING];
    for (int i = 0; i < PENDING; i++) {
        char body[32];
        snprintf(body, sizeof(body), "pending-%d", i);
        send_one(c, "D5", &s[i], body, i % 2 ? 2 : 3, i % 2);
        s[i].sched_store = store_ts_of(c, s[i].msg_id);
    }
    /* down until the level-2 messages are due (and 100 ms more): those are
     * delivered once the broker is back, the level-3 ones when due */
    long long t_stop = e2e_wall_ms();
    e2e_stop_ok(c);
    long long down_until = s[PENDING - 1].sched_store + level_ms[2] + 100;
    if (down_until > e2e_wall_ms()) e2e_sleep_ms((int)(down_until - e2e_wall_ms()));
    e2e_case_start(c, levels_flags);
    long long t_up = e2e_wall_ms();
    print_message("broker down %lld ms; back %lld ms after the first send\n", t_up - t_stop,
                  t_up - s[0].sent_ms);
    Watch w;
    watch_init(&w, "D5", 2);
    size_t n = watch_until(c, &w, PENDING, s[PENDING - 1].sent_ms + level_ms[3] + 3000);
    if (n != PENDING) e2e_case_print_log(c);
    assert_int_equal(n, PENDING);
    for (int i = 0; i < PENDING; i++) {
        const Got *g = watch_once(&w, s[i].body);
        long long late = check_delivery(&s[i], g, "D5");
        long long due = s[i].sched_store + level_ms[s[i].level];
        long long stored = e2e_num(g->msg, "storeTimestamp");
        print_message("'%s' level %d: due %s the restart, stored %lld ms after %s\n", s[i].body,
                      s[i].level, due < t_up ? "before" : "after",
                      due < t_up ? stored - t_up : late,
                      due < t_up ? "the test saw the port (< 0: before)" : "due");
        assert_true(stored < (due > t_up ? due : t_up) + LATE_MAX_MS);
    }
    /* another clean restart: the scheduler's progress was kept, nothing again */
    e2e_stop_ok(c);
    e2e_case_start(c, levels_flags);
    e2e_sleep_ms(400);
    watch_poll(c, &w);
    assert_int_equal(w.n, PENDING);
    assert_int_equal(topic_total(c, "D5"), PENDING);
    watch_free(&w);
}

/* ============================================================================
 * 6. kill -9 with messages pending and just delivered
 * ==========================================================================*/

#define STREAM 20 /* level-1 messages sent ~15 ms apart */
#define LONG 4    /* level-3 messages */
#define MID 2     /* level-2 messages */
#define KILLED (STREAM + LONG + MID)

static void test_delay_kill9_pending_and_just_delivered_each_exactly_once(void **state) {
    E2eCase *c = *state;
    e2e_case_start(c, levels_flags);
    e2e_create_topic(c, "D6", 4);
    Sent s[KILLED];
    int k = 0;
    for (int i = 0; i < LONG; i++) {
        char body[32];
        snprintf(body, sizeof(body), "long-%d", i);
        send_one(c, "D6", &s[k++], body, 3, -1);
    }
    for (int i = 0; i < MID; i++) {
        char body[32];
        snprintf(body, sizeof(body), "mid-%d", i);
        send_one(c, "D6", &s[k++], body, 2, -1);
    }
    for (int i = 0; i < STREAM; i++) {
        char body[32];
        snprintf(body, sizeof(body), "stream-%02d", i);
        send_one(c, "D6", &s[k++], body, 1, -1);
        e2e_sleep_ms(15);
    }
    /* kill -9 while the stream is being re-put: about half of it on the topic */
    long long t0 = e2e_wall_ms();
    long long on_topic = 0;
    while ((on_topic = topic_total(c, "D6")) < STREAM / 2 && e2e_wall_ms() - t0 < 3000)
        e2e_sleep_ms(2);
    e2e_kill9(&c->srv);
    print_message("kill -9 with %lld of %d messages on the topic\n", on_topic, KILLED);
    assert_true(on_topic >= STREAM / 2);
    e2e_case_start(c, levels_flags);
    long long t_up = e2e_wall_ms();
    /* looked up after the restart: the scheduled records survived the kill */
    for (int i = 0; i < KILLED; i++) s[i].sched_store = store_ts_of(c, s[i].msg_id);

    Watch w;
    watch_init(&w, "D6", 4);
    size_t n = watch_until(c, &w, KILLED, s[LONG - 1].sent_ms + level_ms[3] + 3000);
    if (n != KILLED) e2e_case_print_log(c);
    assert_int_equal(n, KILLED);
    print_message("all %d delivered %lld ms after the restart\n", KILLED, e2e_wall_ms() - t_up);
    /* kill -9 again right after the last deliveries */
    e2e_kill9(&c->srv);
    e2e_case_start(c, levels_flags);
    e2e_sleep_ms(500);
    watch_poll(c, &w);
    if (w.n != KILLED) e2e_case_print_log(c);
    for (int i = 0; i < KILLED; i++) {
        const Got *g = watch_once(&w, s[i].body);
        /* the first-seen time of a message already on the topic at the kill
         * is after the restart: check time against the server's clock only */
        Got when = *g;
        when.seen_ms = e2e_num(g->msg, "storeTimestamp");
        check_delivery(&s[i], &when, "D6");
    }
    assert_int_equal(w.n, KILLED);
    assert_int_equal(topic_total(c, "D6"), KILLED);
    print_log_lines(c, "re-puts found"); /* the crash window was hit: re-puts past the save */
    watch_free(&w);
    stop_and_check(c);
}

/* ============================================================================
 * 7. receive
 * ==========================================================================*/

/* POST /v1/groups/gD/receive on 'topic' with 'wait_ms'; returns the
 * messages (caller owns the answer in '*res'). */
static json_t *receive(E2eCase *c, const char *topic, int wait_ms, json_t **res) {
    char body[256];
    snprintf(body, sizeof(body), "{\"topic\":\"%s\",\"maxMessages\":16,\"waitMs\":%d}", topic,
             wait_ms);
    *res = e2e_call(c, "POST", "/v1/groups/gD/receive", E2E_JSON, body, 200);
    json_t *msgs = json_object_get(*res, "messages");
    assert_true(json_is_array(msgs));
    return msgs;
}

static void ack(E2eCase *c, const char *topic, const json_t *m) {
    json_t *req = json_pack("{s:s, s:[s]}", "topic", topic, "receiptHandles",
                            e2e_str(m, "receiptHandle"));
    char *body = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    json_t *res = e2e_call(c, "POST", "/v1/groups/gD/ack", E2E_JSON, body, 200);
    free(body);
    assert_string_equal(e2e_str(json_array_get(json_object_get(res, "results"), 0), "status"),
                        "OK");
    json_decref(res);
}

static void test_delay_receive_sees_a_delayed_message_only_after_its_delay(void **state) {
    E2eCase *c = *state;
    e2e_case_start(c, levels_flags);
    e2e_create_topic(c, "D7", 1);
    Sent late;
    send_one(c, "D7", &late, "late", 2, -1);
    late.sched_store = store_ts_of(c, late.msg_id);
    Sent now;
    send_one(c, "D7", &now, "now", 0, -1);
    e2e_wait_queue(c, "D7", 0, 1);

    json_t *res;
    json_t *msgs = receive(c, "D7", 0, &res);
    assert_int_equal(json_array_size(msgs), 1);
    assert_string_equal(e2e_str(json_array_get(msgs, 0), "body"), "now");
    ack(c, "D7", json_array_get(msgs, 0));
    json_decref(res);

    msgs = receive(c, "D7", 200, &res);
    if (e2e_wall_ms() < late.sent_ms + level_ms[2]) /* else too slow to tell */
        assert_int_equal(json_array_size(msgs), 0);
    json_decref(res);

    long long t_ask = e2e_now_ms();
    msgs = receive(c, "D7", 3000, &res);
    long long waited = e2e_now_ms() - t_ask;
    Got g = {json_array_get(msgs, 0), e2e_wall_ms()};
    assert_int_equal(json_array_size(msgs), 1);
    assert_string_equal(e2e_str(g.msg, "body"), "late");
    long long lateness = check_delivery(&late, &g, "D7");
    print_message("receive: delayLevel 2 (600 ms) received %lld ms after send + 600 "
                  "(stored %lld ms late; the long poll waited %lld ms)\n",
                  g.seen_ms - (late.sent_ms + level_ms[2]), lateness, waited);
    assert_true(waited < 2500); /* woken by the arrival, not by the timeout */
    ack(c, "D7", g.msg);
    json_decref(res);

    msgs = receive(c, "D7", 0, &res);
    assert_int_equal(json_array_size(msgs), 0);
    json_decref(res);
}

/* ============================================================================
 * 8. topic deleted while its message waits
 * ==========================================================================*/

static void test_delay_message_of_a_deleted_topic_is_dropped(void **state) {
    E2eCase *c = *state;
    e2e_case_start(c, levels_flags);
    e2e_create_topic(c, "Gone", 1);
    e2e_create_topic(c, "Kept", 1);
    json_decref(produce_at(c, "Gone", "orphan", 1, -1));
    Sent kept;
    send_one(c, "Kept", &kept, "kept", 1, -1);
    assert_null(e2e_call(c, "DELETE", "/v1/topics/Gone", NULL, NULL, 204));
    /* the later message of the same level still comes: the level is not stuck */
    Watch w;
    watch_init(&w, "Kept", 1);
    assert_int_equal(watch_until(c, &w, 1, kept.sent_ms + level_ms[1] + 2000), 1);
    check_delivery(&kept, watch_once(&w, "kept"), "Kept");
    e2e_sleep_ms(100);
    /* the delivery did not create the topic again */
    e2e_expect_error(c, "GET", "/v1/topics/Gone", NULL, NULL, 404, "TOPIC_NOT_FOUND");
    print_log_lines(c, "Gone");
    watch_free(&w);
}

/* ============================================================================
 * 9. timers: deliverAt and delayMs (the timer wheel)
 * ==========================================================================*/

#define TIMER_MAX_FLAG "--timerMaxDelaySec=60"
static const char *const timer_flags[] = {LEVELS, TIMER_MAX_FLAG, NULL};

/* One timer as sent: what its delivery is checked against. */
typedef struct Timer {
    char body[40];
    long long deliver_at; /* deliverAt given (epoch ms); 0: delayMs */
    long long delay_ms;   /* delayMs given: due at the server's bornTimestamp + this + 1 */
    int queue_id;         /* the queueId of the answer */
    long long sent_ms;    /* e2e_wall_ms() just before the produce request */
    char msg_id[40];      /* msgId of the answer */
} Timer;

/* Produces {"body":'body',"queueId":'queue_id' (< 0: none),'extra'} to
 * 'topic' ('extra' is ",\"delayMs\":N" or ",\"deliverAt\":N") and fills 't'. */
static void send_timer(E2eCase *c, const char *topic, Timer *t, const char *body, int queue_id,
                       long long deliver_at, long long delay_ms) {
    memset(t, 0, sizeof(*t));
    snprintf(t->body, sizeof(t->body), "%s", body);
    t->deliver_at = deliver_at;
    t->delay_ms = delay_ms;
    char json[256];
    int n = snprintf(json, sizeof(json), "{\"body\":\"%s\"", body);
    if (queue_id >= 0)
        n += snprintf(json + n, sizeof(json) - (size_t)n, ",\"queueId\":%d", queue_id);
    if (deliver_at)
        n += snprintf(json + n, sizeof(json) - (size_t)n, ",\"deliverAt\":%lld", deliver_at);
    else
        n += snprintf(json + n, sizeof(json) - (size_t)n, ",\"delayMs\":%lld", delay_ms);
    snprintf(json + n, sizeof(json) - (size_t)n, "}");
    t->sent_ms = e2e_wall_ms();
    json_t *res = produce(c, topic, json);
    t->queue_id = (int)e2e_num(res, "queueId");
    if (queue_id >= 0) assert_int_equal(t->queue_id, queue_id);
    snprintf(t->msg_id, sizeof(t->msg_id), "%s", e2e_str(res, "msgId"));
    json_decref(res);
}

/* When 't' is due, given its delivered message 'm': its deliverAt, or
 * 1 ms after its bornTimestamp + delayMs (bornTimestamp is cut to the ms:
 * the +1 keeps the delivery from coming a fraction of a ms early). */
static long long timer_due(const Timer *t, const json_t *m) {
    if (t->deliver_at) return t->deliver_at;
    long long born = e2e_num(m, "bornTimestamp");
    return t->delay_ms ? born + t->delay_ms + 1 : born; /* delayMs 0: at once */
}

/* Checks the delivery 'g' of 't' on 'topic': right topic and queue, a new
 * msgId, not early on the server's clock (storeTimestamp) nor on the
 * client's (first seen; skipped when 'seen' is false).  Returns its
 * lateness on the server's clock. */
static long long check_timer(const Timer *t, const Got *g, const char *topic, bool seen) {
    const json_t *m = g->msg;
    long long due = timer_due(t, m);
    long long stored = e2e_num(m, "storeTimestamp");
    assert_string_equal(e2e_str(m, "topic"), topic);
    assert_int_equal(e2e_num(m, "queueId"), t->queue_id);
    assert_int_equal(e2e_num(m, "reconsumeTimes"), 0);
    if (stored < due || (seen && g->seen_ms < due)) {
        fail_msg("'%s' early: due at %lld, delivered record stored at %lld, seen at %lld",
                 t->body, due, stored, g->seen_ms);
    }
    return stored - due;
}

static void test_timer_deliver_at_hidden_until_its_time_then_intact_on_its_queue(void **state) {
    E2eCase *c = *state;
    e2e_case_start(c, timer_flags);
    e2e_create_topic(c, "T1", 2);
    /* 1500 ms ahead: lanes of 1280, 208 and 11 ms (two hops) */
    long long at = e2e_wall_ms() + 1500;
    char json[512];
    snprintf(json, sizeof(json),
             "{\"body\":\"at a time\",\"tags\":\"TagT\",\"keys\":[\"order-9\"],"
             "\"properties\":{\"color\":\"blue\"},\"queueId\":1,\"deliverAt\":%lld}", at);
    Timer t = {.body = "at a time", .deliver_at = at, .queue_id = 1};
    t.sent_ms = e2e_wall_ms();
    json_t *res = produce(c, "T1", json);
    assert_int_equal(e2e_num(res, "queueId"), 1);
    snprintf(t.msg_id, sizeof(t.msg_id), "%s", e2e_str(res, "msgId"));
    long long answer_off = e2e_num(res, "queueOffset");
    json_decref(res);
    /* the answer's msgId is the record waiting in the wheel */
    json_t *w = get_msg(c, t.msg_id);
    assert_string_equal(e2e_str(w, "topic"), "RMQ_SYS_WHEEL_TIMER");
    assert_int_equal(e2e_num(w, "queueOffset"), answer_off);
    assert_string_equal(e2e_str(w, "body"), "at a time");
    json_decref(w);
    assert_int_equal(e2e_metric_until(c, "petrel_timer_messages", 1), 1);
    assert_int_equal(e2e_metric(c, "petrel_delayed_messages"), 0);

    /* 1 s in: not on the topic, not found by its key */
    long long wait = at - 500 - e2e_wall_ms();
    if (wait > 0) e2e_sleep_ms((int)wait);
    Watch wt;
    watch_init(&wt, "T1", 2);
    watch_poll(c, &wt);
    json_t *q = e2e_call(c, "GET", "/v1/topics/T1/messages?key=order-9", NULL, NULL, 200);
    if (e2e_wall_ms() < at) {
        assert_int_equal(wt.n, 0);
        assert_int_equal(topic_total(c, "T1"), 0);
        assert_int_equal(json_array_size(json_object_get(q, "messages")), 0);
    }
    json_decref(q);
    assert_int_equal(watch_until(c, &wt, 1, at + 2000), 1);
    const Got *g = watch_once(&wt, "at a time");
    long long late = check_timer(&t, g, "T1", true);
    print_message("deliverAt (+1500 ms): stored %lld ms late (server clock), first pulled %lld ms "
                  "after deliverAt\n", late, g->seen_ms - at);
    assert_true(late < LATE_MAX_MS);
    assert_string_equal(e2e_str(g->msg, "tags"), "TagT");
    assert_string_equal(json_string_value(json_array_get(json_object_get(g->msg, "keys"), 0)),
                        "order-9");
    json_t *want = json_pack("{s:s}", "color", "blue");
    assert_true(json_equal(json_object_get(g->msg, "properties"), want));
    json_decref(want);
    assert_string_not_equal(e2e_str(g->msg, "msgId"), t.msg_id);
    /* once, and the wheel is empty */
    e2e_sleep_ms(300);
    watch_poll(c, &wt);
    assert_int_equal(wt.n, 1);
    assert_int_equal(e2e_metric_until(c, "petrel_timer_messages", 0), 0);
    watch_free(&wt);
}

static void test_timer_delay_ms_raw_json_batch_and_past_deliver_at(void **state) {
    E2eCase *c = *state;
    e2e_case_start(c, timer_flags);
    e2e_create_topic(c, "T2", 2);
    e2e_create_topic(c, "T2r", 1);
    /* raw ?delayMs=400 */
    Timer raw = {.body = "raw timer", .delay_ms = 400, .queue_id = 0};
    raw.sent_ms = e2e_wall_ms();
    json_t *res = e2e_call(c, "POST", "/v1/topics/T2r/messages?delayMs=400&tags=TagR",
                           "text/plain", "raw timer", 200);
    assert_string_equal(e2e_str(res, "status"), "SEND_OK");
    snprintf(raw.msg_id, sizeof(raw.msg_id), "%s", e2e_str(res, "msgId"));
    json_decref(res);
    /* raw ?deliverAt in the past: stored at once, on the topic itself */
    res = e2e_call(c, "POST", "/v1/topics/T2r/messages?deliverAt=1000", "text/plain",
                   "raw past", 200);
    json_t *direct = get_msg(c, e2e_str(res, "msgId"));
    assert_string_equal(e2e_str(direct, "topic"), "T2r");
    json_decref(direct);
    json_decref(res);
    /* JSON delayMs */
    Timer one;
    send_timer(c, "T2", &one, "json delayMs", 1, 0, 600);
    /* batch: immediate, delayMs, deliverAt in the past, delayMs 0, deliverAt ahead */
    long long now = e2e_wall_ms();
    char json[1024];
    snprintf(json, sizeof(json),
             "{\"messages\":[{\"body\":\"b-now\",\"queueId\":0},"
             "{\"body\":\"b-300\",\"delayMs\":300,\"queueId\":0},"
             "{\"body\":\"b-past\",\"deliverAt\":%lld,\"queueId\":1},"
             "{\"body\":\"b-zero\",\"delayMs\":0,\"queueId\":1},"
             "{\"body\":\"b-at\",\"deliverAt\":%lld,\"queueId\":0}]}",
             now - 60000, now + 800);
    Timer b[5];
    static const char *const names[5] = {"b-now", "b-300", "b-past", "b-zero", "b-at"};
    long long t_batch = e2e_wall_ms();
    res = e2e_call(c, "POST", "/v1/topics/T2/messages", E2E_JSON, json, 200);
    json_t *results = json_object_get(res, "results");
    assert_int_equal(json_array_size(results), 5);
    for (int i = 0; i < 5; i++) {
        json_t *r1 = json_array_get(results, (size_t)i);
        assert_string_equal(e2e_str(r1, "status"), "SEND_OK");
        b[i] = (Timer){.queue_id = (int)e2e_num(r1, "queueId"), .sent_ms = t_batch};
        snprintf(b[i].body, sizeof(b[i].body), "%s", names[i]);
        snprintf(b[i].msg_id, sizeof(b[i].msg_id), "%s", e2e_str(r1, "msgId"));
    }
    b[1].delay_ms = 300;
    b[2].deliver_at = now - 60000;
    b[4].deliver_at = now + 800;
    /* the past and zero ones are on their queue: offsets of queue 1 */
    assert_int_equal(e2e_num(json_array_get(results, 2), "queueOffset"), 0);
    assert_int_equal(e2e_num(json_array_get(results, 3), "queueOffset"), 1);
    assert_int_equal(b[2].queue_id, 1);
    json_decref(res);

    Watch w;
    watch_init(&w, "T2", 2);
    watch_until(c, &w, 3, t_batch + 2000);
    if (e2e_wall_ms() < t_batch + 300) { /* else too slow to tell */
        assert_int_equal(w.n, 3);
        int count = 0;
        assert_non_null(watch_find(&w, "b-now", &count));
        assert_non_null(watch_find(&w, "b-past", &count));
        assert_non_null(watch_find(&w, "b-zero", &count));
    }
    assert_int_equal(watch_until(c, &w, 6, t_batch + 800 + 2000), 6);
    Watch wr;
    watch_init(&wr, "T2r", 1);
    assert_int_equal(watch_until(c, &wr, 2, raw.sent_ms + 400 + 2000), 2);
    for (int i = 0; i < 5; i++) {
        const Got *g = watch_once(&w, b[i].body);
        long long late = check_timer(&b[i], g, "T2", b[i].deliver_at || b[i].delay_ms);
        if (i == 1 || i == 4) {
            print_message("batch '%s': %lld ms late\n", b[i].body, late);
            assert_true(late < LATE_MAX_MS);
        }
    }
    long long late = check_timer(&one, watch_once(&w, "json delayMs"), "T2", true);
    print_message("JSON delayMs 600: %lld ms late\n", late);
    assert_true(late < LATE_MAX_MS);
    const Got *g = watch_once(&wr, "raw timer");
    late = check_timer(&raw, g, "T2r", true);
    print_message("raw ?delayMs=400: %lld ms late\n", late);
    assert_true(late < LATE_MAX_MS);
    assert_string_equal(e2e_str(g->msg, "tags"), "TagR");
    watch_once(&wr, "raw past");
    watch_free(&w);
    watch_free(&wr);
}

static void test_timer_bad_fields_are_400_and_store_nothing(void **state) {
    E2eCase *c = *state;
    e2e_case_start(c, timer_flags); /* timerMaxDelaySec 60 */
    e2e_create_topic(c, "TV", 2);
    int no_range = 0;
    long long far = e2e_wall_ms() + 61000;
    char beyond[128], beyond_batch[256];
    snprintf(beyond, sizeof(beyond), "{\"body\":\"x\",\"deliverAt\":%lld}", far);
    snprintf(beyond_batch, sizeof(beyond_batch),
             "{\"messages\":[{\"body\":\"ok\",\"delayMs\":5},{\"body\":\"x\",\"deliverAt\":%lld}]}",
             far);
    const struct {
        const char *body;
        const char *range; /* the error message names it, or NULL */
    } cases[] = {
        {"{\"body\":\"x\",\"delayMs\":60001}", "60"},
        {beyond, "60"},
        {beyond_batch, "messages[1]"},
        {"{\"body\":\"x\",\"delayMs\":9223372036854775807}", "60"},
        {"{\"body\":\"x\",\"deliverAt\":9223372036854775807}", "60"},
        {"{\"body\":\"x\",\"delayMs\":5,\"deliverAt\":1}", "at most one"},
        {"{\"body\":\"x\",\"delayLevel\":1,\"delayMs\":5}", "at most one"},
        {"{\"body\":\"x\",\"delayLevel\":1,\"deliverAt\":1,\"delayMs\":0}", "at most one"},
        {"{\"body\":\"x\",\"delayMs\":-1}", "delayMs"},
        {"{\"body\":\"x\",\"delayMs\":1.5}", "delayMs"},
        {"{\"body\":\"x\",\"delayMs\":\"5\"}", "delayMs"},
        {"{\"body\":\"x\",\"delayMs\":null}", "delayMs"},
        {"{\"body\":\"x\",\"delayMs\":true}", "delayMs"},
        {"{\"body\":\"x\",\"deliverAt\":-5}", "deliverAt"},
        {"{\"body\":\"x\",\"deliverAt\":\"1767225600000\"}", "deliverAt"},
        {"{\"body\":\"x\",\"deliverAt\":1.767e12}", "deliverAt"},
        {"{\"messages\":[{\"body\":\"ok\"},{\"body\":\"x\",\"delayMs\":-3}]}", "messages[1]"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        expect_400(c, "/v1/topics/TV/messages", E2E_JSON, cases[i].body, "INVALID_FIELD",
                   cases[i].range, &no_range);
    char raw_far[128];
    snprintf(raw_far, sizeof(raw_far), "/v1/topics/TV/messages?deliverAt=%lld", far);
    const struct {
        const char *path;
        const char *range;
    } raw[] = {
        {"/v1/topics/TV/messages?delayMs=60001", "60"},
        {raw_far, "60"},
        {"/v1/topics/TV/messages?delayMs=-1", "delayMs"},
        {"/v1/topics/TV/messages?delayMs=x", "delayMs"},
        {"/v1/topics/TV/messages?delayMs=1.5", "delayMs"},
        {"/v1/topics/TV/messages?delayMs=", "delayMs"},
        {"/v1/topics/TV/messages?delayMs=%2B5", "delayMs"},
        {"/v1/topics/TV/messages?deliverAt=-1", "deliverAt"},
        {"/v1/topics/TV/messages?deliverAt=99999999999999999999", "deliverAt"},
        {"/v1/topics/TV/messages?delayMs=5&deliverAt=1", "at most one"},
        {"/v1/topics/TV/messages?delayMs=5&delayLevel=1", "at most one"},
    };
    for (size_t i = 0; i < sizeof(raw) / sizeof(raw[0]); i++)
        expect_400(c, raw[i].path, "text/plain", "hello", "INVALID_FIELD", raw[i].range,
                   &no_range);
    /* nothing was stored anywhere, the wheel included */
    json_t *health = e2e_call(c, "GET", "/healthz", NULL, NULL, 200);
    assert_int_equal(e2e_num(json_object_get(health, "commitLog"), "writeOffset"), 0);
    json_decref(health);
    /* the edges are accepted: exactly the maximum, and just inside it */
    Timer t;
    send_timer(c, "TV", &t, "max", -1, 0, 60000);
    send_timer(c, "TV", &t, "inside", -1, e2e_wall_ms() + 59000, 0);
    json_t *res = e2e_call(c, "POST", "/v1/topics/TV/messages?delayMs=60000", "text/plain",
                           "raw max", 200);
    json_decref(res);
    if (no_range) fail_msg("%d error messages without what they should name", no_range);
}

#define TK_LONG 4    /* delayMs 2500..3100: due after the restart */
#define TK_STREAM 24 /* delayMs 300, sent ~15 ms apart: being delivered at the kill */
#define TK_ALL (TK_LONG + TK_STREAM)

static void test_timer_kill9_pending_and_just_delivered_each_exactly_once(void **state) {
    E2eCase *c = *state;
    e2e_case_start(c, timer_flags);
    e2e_create_topic(c, "T6", 4);
    Timer t[TK_ALL];
    int k = 0;
    for (int i = 0; i < TK_LONG; i++) {
        char body[32];
        snprintf(body, sizeof(body), "long-%d", i);
        if (i % 2)
            send_timer(c, "T6", &t[k++], body, -1, e2e_wall_ms() + 2500 + 200 * i, 0);
        else
            send_timer(c, "T6", &t[k++], body, -1, 0, 2500 + 200 * i);
    }
    for (int i = 0; i < TK_STREAM; i++) {
        char body[32];
        snprintf(body, sizeof(body), "stream-%02d", i);
        send_timer(c, "T6", &t[k++], body, -1, 0, 300);
        e2e_sleep_ms(15);
    }
    /* kill -9 while the stream is coming out: about half of it delivered,
     * the rest due while the broker is down or just after */
    long long t0 = e2e_wall_ms();
    long long on_topic = 0;
    while ((on_topic = topic_total(c, "T6")) < TK_STREAM / 2 && e2e_wall_ms() - t0 < 3000)
        e2e_sleep_ms(2);
    e2e_kill9(&c->srv);
    long long t_kill = e2e_wall_ms();
    print_message("kill -9 with %lld of %d timers delivered\n", on_topic, TK_ALL);
    assert_true(on_topic >= TK_STREAM / 2 && on_topic < TK_ALL);
    e2e_sleep_ms(400); /* the rest of the stream falls due meanwhile */
    e2e_case_start(c, timer_flags);
    long long t_up = e2e_wall_ms();
    Watch w;
    watch_init(&w, "T6", 4);
    size_t n = watch_until(c, &w, TK_ALL, t[TK_LONG - 1].sent_ms + 3100 + 3000);
    if (n != TK_ALL) e2e_case_print_log(c);
    assert_int_equal(n, TK_ALL);
    print_message("down %lld ms; all %d delivered %lld ms after the restart\n", t_up - t_kill,
                  TK_ALL, e2e_wall_ms() - t_up);
    /* kill -9 again right after the last deliveries, then a clean restart */
    e2e_kill9(&c->srv);
    e2e_case_start(c, timer_flags);
    e2e_sleep_ms(400);
    e2e_stop_ok(c);
    e2e_case_start(c, timer_flags);
    e2e_sleep_ms(300);
    watch_poll(c, &w);
    if (w.n != TK_ALL) e2e_case_print_log(c);
    long long worst_after = 0;
    int while_down = 0;
    for (int i = 0; i < TK_ALL; i++) {
        const Got *g = watch_once(&w, t[i].body);
        long long late = check_timer(&t[i], g, "T6", false);
        long long due = timer_due(&t[i], g->msg);
        long long stored = e2e_num(g->msg, "storeTimestamp");
        if (due > t_up && late > worst_after) worst_after = late;
        if (due > t_kill && due < t_up) {
            while_down++; /* delivered once the broker was back */
            assert_true(stored >= t_kill && stored < t_up + LATE_MAX_MS);
        }
    }
    print_message("%d due while the broker was down; due after the restart: worst lateness "
                  "%lld ms (server clock)\n", while_down, worst_after);
    assert_true(while_down > 0);
    assert_true(worst_after < LATE_MAX_MS);
    assert_int_equal(w.n, TK_ALL);
    assert_int_equal(topic_total(c, "T6"), TK_ALL);
    assert_int_equal(e2e_metric_until(c, "petrel_timer_messages", 0), 0);
    print_log_lines(c, "re-puts found");
    watch_free(&w);
    stop_and_check(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            test_delay_level_1_hidden_until_due_then_intact_on_its_queue, setup,
            e2e_case_teardown),
        cmocka_unit_test_setup_teardown(
            test_delay_mixed_levels_each_on_time_and_in_order_per_level, setup,
            e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_delay_raw_form_and_batch_of_delayed_and_immediate,
                                        setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_delay_bad_fields_are_400_and_store_nothing, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(
            test_delay_pending_survive_sigterm_restart_delivered_once_on_time, setup,
            e2e_case_teardown),
        cmocka_unit_test_setup_teardown(
            test_delay_kill9_pending_and_just_delivered_each_exactly_once, setup,
            e2e_case_teardown),
        cmocka_unit_test_setup_teardown(
            test_delay_receive_sees_a_delayed_message_only_after_its_delay, setup,
            e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_delay_message_of_a_deleted_topic_is_dropped, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(
            test_timer_deliver_at_hidden_until_its_time_then_intact_on_its_queue, setup,
            e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_timer_delay_ms_raw_json_batch_and_past_deliver_at,
                                        setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_timer_bad_fields_are_400_and_store_nothing, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(
            test_timer_kill9_pending_and_just_delivered_each_exactly_once, setup,
            e2e_case_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
