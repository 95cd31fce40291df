/*
 * test_schedule.c - the delay scheduler (core/schedule.c) over a real
 * store and meta.db, time passed in explicitly.  Delay levels: sched_wrap's
 * record, nothing delivered before its time, each level in order, the
 * re-put record (real topic and queue, properties back, __DELAY_SRC), a
 * deleted topic's message dropped, and exactly-once across a stale saved
 * position (the crash case: re-puts after the last save are found by the
 * scan).  Timers, with a fake clock shared by the store and the scheduler,
 * stepped from due time to due time: the lane table and its boundaries,
 * sched_timer_wrap's record, an hour-long timer delivered at its time
 * after a few hops and never early at any of them, the runtime hop cap,
 * exactly-once of hops and deliveries across a stale saved position, and
 * the saved-position formats (old rows without timer_progress, bad rows).
 */
#include "testutil.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "delay.h"
#include "meta.h"
#include "msg.h"
#include "schedule.h"
#include "store.h"
#include "topic.h"

typedef struct Fixture {
    char *dir;
    Store *st;
    Meta *meta;
    TopicRegistry *topics;
    Scheduler *s;
    int64_t levels[DELAY_LEVELS_MAX];
    size_t n_levels;
    bool fake;                 /* store and scheduler run on 'clock_ms' */
    _Atomic int64_t clock_ms;  /* the fake wall clock, epoch ms */
    int64_t max_hop_ms;        /* SchedConfig.timer_max_hop_ms */
} Fixture;

static const MqSlice SCHED = {MSG_SCHEDULE_TOPIC, sizeof(MSG_SCHEDULE_TOPIC) - 1};
static const MqSlice WHEEL = {SCHED_TIMER_TOPIC, sizeof(SCHED_TIMER_TOPIC) - 1};

#define T0 1767225600000LL /* the fake clock's start: 2026-01-01 */

static int64_t fake_clock(void *arg) {
    Fixture *f = arg;
    return atomic_load(&f->clock_ms);
}

static void sched_start(Fixture *f) {
    SchedConfig c = {.store = f->st,
                     .meta = f->meta,
                     .topics = f->topics,
                     .levels_ms = f->levels,
                     .n_levels = f->n_levels,
                     .timer_max_hop_ms = f->max_hop_ms,
                     .thread = false,
                     .clock = f->fake ? fake_clock : NULL,
                     .clock_arg = f};
    assert_int_equal(sched_open(&c, &f->s), MQ_OK);
}

/* Opens meta.db and the topic registry, with the topic T (2 queues). */
static void open_meta(Fixture *f) {
    char *mpath = tu_path(f->dir, "meta.db");
    assert_int_equal(meta_open(mpath, 0, &f->meta), MQ_OK);
    free(mpath);
    assert_int_equal(topic_registry_open(f->meta, 4, &f->topics), MQ_OK);
    assert_int_equal(topic_put(f->topics, "T", 2, META_PERM_READ | META_PERM_WRITE, false, NULL),
                     MQ_OK);
}

static int setup_with(void **state, bool fake, int64_t max_hop_ms) {
    Fixture *f = calloc(1, sizeof(*f));
    if (!f) return -1;
    f->fake = fake;
    atomic_init(&f->clock_ms, T0);
    f->max_hop_ms = max_hop_ms;
    f->dir = tu_mkdtemp("sched");
    StoreConfig sc;
    store_config_defaults(&sc, f->dir);
    if (fake) {
        sc.clock = fake_clock;
        sc.clock_arg = f;
    }
    sc.segment_size = 1024 * 1024;
    sc.cq_file_entries = 4096;
    sc.index_slots = 1024;
    sc.index_entries = 65536;
    assert_int_equal(store_open(&sc, &f->st), MQ_OK);
    open_meta(f);
    assert_int_equal(delay_levels_parse("1s 5s", f->levels, DELAY_LEVELS_MAX, &f->n_levels),
                     MQ_OK);
    sched_start(f);
    *state = f;
    return 0;
}

static int setup(void **state) {
    return setup_with(state, false, 0);
}

/* Timers: the fake clock, no hop cap but the table's. */
static int setup_timer(void **state) {
    return setup_with(state, true, 0);
}

/* Timers: the fake clock, hops of at most 1 s. */
static int setup_timer_cap(void **state) {
    return setup_with(state, true, 1000);
}

static int teardown(void **state) {
    Fixture *f = *state;
    sched_close(f->s);
    topic_registry_close(f->topics);
    meta_close(f->meta);
    store_close(f->st);
    tu_rmtree(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

/* Stores body 'body' for topic 'topic' queue 'q' at delay 'level'; returns
 * its store time. */
static int64_t put_delayed(Fixture *f, const char *topic, uint32_t q, uint32_t level,
                           const char *body) {
    MsgProp p[2] = {{mq_slice("TAGS", 4), mq_slice("TagA", 4)},
                    {mq_slice("color", 5), mq_slice("red", 3)}};
    uint8_t props[64];
    size_t plen = 0;
    assert_int_equal(msg_props_encode(p, 2, props, sizeof(props), &plen), MQ_OK);
    ClMessage real = {.topic = mq_slice(topic, strlen(topic)),
                      .queue_id = q,
                      .born_ts = 1,
                      .body = mq_slice(body, strlen(body)),
                      .props = mq_slice(props, plen)};
    uint8_t buf[256];
    ClMessage wrapped;
    assert_int_equal(sched_wrap(&real, level, buf, sizeof(buf), &wrapped), MQ_OK);
    assert_int_equal(wrapped.queue_id, level - 1);
    assert_true(wrapped.topic.len == SCHED.len && memcmp(wrapped.topic.ptr, SCHED.ptr, SCHED.len) == 0);
    ClAppendResult res;
    assert_int_equal(store_put(f->st, &wrapped, 1, &res), MQ_OK);
    assert_int_equal(store_wait_dispatched(f->st, 5000), MQ_OK);
    return res.store_ts;
}

/* The bodies on queue 'q' of 'topic', in order, joined by ','. */
static void bodies(Fixture *f, const char *topic, uint32_t q, char *out, size_t cap) {
    assert_int_equal(store_wait_dispatched(f->st, 5000), MQ_OK);
    out[0] = '\0';
    CqEntry ce[64];
    size_t n = 0;
    uint64_t next = 0;
    if (store_read_queue(f->st, mq_slice(topic, strlen(topic)), q, 0, 64, 64, NULL, 0, ce, NULL,
                         &n, &next) != MQ_OK)
        return;
    for (size_t i = 0; i < n; i++) {
        ClRecord rec;
        MappedFile *ref = NULL;
        assert_int_equal(store_read_msg(f->st, ce[i].phys_off, &rec, &ref), MQ_OK);
        size_t l = strlen(out);
        snprintf(out + l, cap - l, "%s%.*s", l ? "," : "", (int)rec.body.len,
                 (const char *)rec.body.ptr);
        mf_unref(&ref);
    }
}

static void test_sched_delivers_when_due_in_level_order(void **state) {
    Fixture *f = *state;
    int64_t t1 = put_delayed(f, "T", 1, 1, "a");
    put_delayed(f, "T", 1, 2, "slow");
    put_delayed(f, "T", 1, 1, "b");
    /* before the first is due: nothing, not even at store time + delay
     * (store_ts is cut down to the millisecond: due 1 ms later) */
    assert_int_equal(sched_run_once(f->s, t1 + 999, false), 0);
    assert_int_equal(sched_run_once(f->s, t1 + 1000, false), 0);
    char got[256];
    bodies(f, "T", 1, got, sizeof(got));
    assert_string_equal(got, "");
    assert_int_equal(sched_pending(f->s), 3);
    /* level 1 due (both), level 2 not */
    assert_int_equal(sched_run_once(f->s, t1 + 2000, false), 2);
    bodies(f, "T", 1, got, sizeof(got));
    assert_string_equal(got, "a,b");
    assert_int_equal(sched_position(f->s, 1), 2);
    assert_int_equal(sched_position(f->s, 2), 0);
    assert_int_equal(sched_run_once(f->s, t1 + 6000, false), 1);
    bodies(f, "T", 1, got, sizeof(got));
    assert_string_equal(got, "a,b,slow");
    assert_int_equal(sched_pending(f->s), 0);

    /* the re-put record: real topic and queue, own properties back */
    CqEntry ce;
    size_t n = 0;
    uint64_t next = 0;
    assert_int_equal(store_read_queue(f->st, mq_slice("T", 1), 1, 0, 1, 1, NULL, 0, &ce, NULL,
                                      &n, &next),
                     MQ_OK);
    ClRecord rec;
    MappedFile *ref = NULL;
    assert_int_equal(store_read_msg(f->st, ce.phys_off, &rec, &ref), MQ_OK);
    MqSlice v;
    assert_true(msg_prop_get(rec.props, "TAGS", &v) && v.len == 4);
    assert_true(msg_prop_get(rec.props, "color", &v) && v.len == 3);
    assert_false(msg_prop_get(rec.props, MSG_PROP_REAL_TOPIC, &v));
    assert_false(msg_prop_get(rec.props, MSG_PROP_REAL_QID, &v));
    assert_false(msg_prop_get(rec.props, MSG_PROP_DELAY, &v));
    assert_true(msg_prop_get(rec.props, MSG_PROP_DELAY_SRC, &v));
    assert_int_equal(v.len, 3);
    assert_memory_equal(v.ptr, "1:0", 3);
    mf_unref(&ref);
}

static void test_sched_drops_the_message_of_a_deleted_topic(void **state) {
    Fixture *f = *state;
    int64_t t = put_delayed(f, "Gone", 0, 1, "x");
    assert_int_equal(sched_run_once(f->s, t + 1001, false), 1); /* consumed, not delivered */
    assert_int_equal(sched_position(f->s, 1), 1);
    char got[64];
    bodies(f, "Gone", 0, got, sizeof(got));
    assert_string_equal(got, "");
}

static void test_sched_stale_saved_position_delivers_each_once(void **state) {
    Fixture *f = *state;
    int64_t t = put_delayed(f, "T", 0, 1, "m1");
    put_delayed(f, "T", 0, 1, "m2");
    int64_t t3 = put_delayed(f, "T", 0, 1, "m3");
    /* the position saved now is the one a crash would leave */
    assert_int_equal(sched_run_once(f->s, t - 1, true), 0);
    char saved[256];
    assert_int_equal(meta_kv_get(f->meta, SCHED_PROGRESS_KEY, saved, sizeof(saved)), MQ_OK);
    /* three re-put, not saved; then the "crash" */
    struct timespec pause = {0, 5 * 1000000L};
    nanosleep(&pause, NULL); /* m4 stored at least 1 ms after m3 */
    int64_t t4 = put_delayed(f, "T", 0, 1, "m4");
    assert_true(t4 > t3);
    assert_int_equal(sched_run_once(f->s, t3 + 1001, false), 3);
    sched_close(f->s);
    f->s = NULL;
    assert_int_equal(meta_kv_put(f->meta, SCHED_PROGRESS_KEY, saved), MQ_OK);
    sched_start(f);
    /* the scan found the three re-puts: only m4 is left */
    assert_int_equal(sched_position(f->s, 1), 3);
    assert_int_equal(sched_run_once(f->s, t4 + 1001, false), 1);
    char got[256];
    bodies(f, "T", 0, got, sizeof(got));
    assert_string_equal(got, "m1,m2,m3,m4");
}

/* A delayed message with many properties (more than the 63 an earlier
 * version decoded: it dropped such messages as "damaged") is delivered
 * with all of them, and a __DELAY_SRC it carried from an earlier delivery
 * is replaced, not doubled (recovery reads the first one). */
static void test_sched_many_properties_and_an_old_source_survive_a_re_put(void **state) {
    Fixture *f = *state;
    enum { N = 100 };
    MsgProp p[N + 1];
    char names[N][16];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof(names[i]), "p%d", i);
        p[i] = (MsgProp){mq_slice(names[i], strlen(names[i])), mq_slice("v", 1)};
    }
    p[N] = (MsgProp){mq_slice(MSG_PROP_DELAY_SRC, strlen(MSG_PROP_DELAY_SRC)),
                     mq_slice("2:77", 4)};
    uint8_t props[2048];
    size_t plen = 0;
    assert_int_equal(msg_props_encode(p, N + 1, props, sizeof(props), &plen), MQ_OK);
    ClMessage real = {.topic = mq_slice("T", 1),
                      .queue_id = 0,
                      .born_ts = 1,
                      .body = mq_slice("many", 4),
                      .props = mq_slice(props, plen)};
    uint8_t buf[2048 + SCHED_WRAP_EXTRA];
    ClMessage wrapped;
    assert_int_equal(sched_wrap(&real, 1, buf, sizeof(buf), &wrapped), MQ_OK);
    ClAppendResult res;
    assert_int_equal(store_put(f->st, &wrapped, 1, &res), MQ_OK);
    assert_int_equal(store_wait_dispatched(f->st, 5000), MQ_OK);
    assert_int_equal(sched_run_once(f->s, res.store_ts + 1001, false), 1);
    SchedStats st;
    sched_stats(f->s, &st);
    assert_int_equal(st.delivered, 1);
    assert_int_equal(st.dropped, 0);
    assert_int_equal(store_wait_dispatched(f->st, 5000), MQ_OK);
    CqEntry ce;
    size_t n = 0;
    uint64_t next = 0;
    assert_int_equal(store_read_queue(f->st, mq_slice("T", 1), 0, 0, 1, 1, NULL, 0, &ce, NULL,
                                      &n, &next),
                     MQ_OK);
    assert_int_equal(n, 1);
    ClRecord rec;
    MappedFile *ref = NULL;
    assert_int_equal(store_read_msg(f->st, ce.phys_off, &rec, &ref), MQ_OK);
    MsgProp got[N + 8];
    size_t ng = 0;
    assert_int_equal(msg_props_decode(rec.props, got, N + 8, &ng), MQ_OK);
    assert_int_equal(ng, N + 1); /* the user's, and one __DELAY_SRC */
    MqSlice v;
    assert_true(msg_prop_get(rec.props, "p99", &v));
    assert_true(msg_prop_get(rec.props, MSG_PROP_DELAY_SRC, &v));
    assert_int_equal(v.len, 3);
    assert_memory_equal(v.ptr, "1:0", 3);
    mf_unref(&ref);
}

static void test_sched_bad_saved_positions_are_corrupt(void **state) {
    Fixture *f = *state;
    sched_close(f->s);
    f->s = NULL;
    assert_int_equal(meta_kv_put(f->meta, SCHED_PROGRESS_KEY, "12 x"), MQ_OK);
    SchedConfig c = {.store = f->st,
                     .meta = f->meta,
                     .topics = f->topics,
                     .levels_ms = f->levels,
                     .n_levels = f->n_levels};
    int saved = mq_log_level;
    mq_log_level = -1;
    assert_int_equal(sched_open(&c, &f->s), MQ_ERR_CORRUPT);
    mq_log_level = saved;
    assert_null(f->s);
    assert_int_equal(meta_kv_put(f->meta, SCHED_PROGRESS_KEY, "0 5 9 7"), MQ_OK);
    sched_start(f); /* more levels saved than configured: kept for later */
    assert_int_equal(sched_position(f->s, 1), 5);
    assert_int_equal(sched_position(f->s, 2), 9);
    sched_close(f->s); /* saves all three */
    f->s = NULL;
    char again[128];
    assert_int_equal(meta_kv_get(f->meta, SCHED_PROGRESS_KEY, again, sizeof(again)), MQ_OK);
    assert_non_null(strstr(again, " 5 9 7"));
    sched_start(f);
}

static void test_sched_wrap_refuses_bad_levels_and_full_properties(void **state) {
    (void)state;
    ClMessage m = {.topic = mq_slice("T", 1), .body = mq_slice("b", 1)};
    uint8_t buf[8];
    ClMessage out;
    assert_int_equal(sched_wrap(&m, 0, buf, sizeof(buf), &out), MQ_ERR_INVAL);
    assert_int_equal(sched_wrap(&m, 1, buf, sizeof(buf), &out), MQ_ERR_FULL);
}

/* ============================================================================
 * Timers
 * ==========================================================================*/

/* Wraps body 'body' for 'topic' queue 'q', due at 'deliver_at', with the
 * fixture's scheduler at the fake clock's now and stores it; returns the
 * lane it went to. */
static uint32_t put_timer(Fixture *f, const char *topic, uint32_t q, int64_t deliver_at,
                          const char *body) {
    MsgProp p[1] = {{mq_slice("color", 5), mq_slice("red", 3)}};
    uint8_t props[64];
    size_t plen = 0;
    assert_int_equal(msg_props_encode(p, 1, props, sizeof(props), &plen), MQ_OK);
    int64_t now = atomic_load(&f->clock_ms);
    ClMessage real = {.topic = mq_slice(topic, strlen(topic)),
                      .queue_id = q,
                      .born_ts = now,
                      .body = mq_slice(body, strlen(body)),
                      .props = mq_slice(props, plen)};
    uint8_t buf[64 + SCHED_TIMER_WRAP_EXTRA];
    ClMessage wrapped;
    assert_int_equal(sched_timer_wrap(f->s, &real, deliver_at, now, buf, sizeof(buf), &wrapped),
                     MQ_OK);
    assert_true(wrapped.topic.len == WHEEL.len &&
                memcmp(wrapped.topic.ptr, WHEEL.ptr, WHEEL.len) == 0);
    ClAppendResult res;
    assert_int_equal(store_put(f->st, &wrapped, 1, &res), MQ_OK);
    assert_int_equal(res.store_ts, now);
    assert_int_equal(store_wait_dispatched(f->st, 5000), MQ_OK);
    return wrapped.queue_id;
}

/* Moves the fake clock from due time to due time (as the scheduler's
 * thread sleeps), running a pass at each, up to and including 't_end'.
 * Returns the records handled. */
static size_t step_until(Fixture *f, int64_t t_end) {
    size_t n = 0;
    for (;;) {
        assert_int_equal(store_wait_dispatched(f->st, 5000), MQ_OK);
        n += sched_run_once(f->s, -1, false);
        int64_t now = atomic_load(&f->clock_ms);
        if (now >= t_end) return n;
        int64_t next = sched_next_due(f->s);
        assert_true(next > now);
        atomic_store(&f->clock_ms, next < t_end ? next : t_end);
    }
}

/* One record read back from a queue. */
typedef struct Seen {
    char body[32];
    int64_t store_ts;
    char src[48];      /* __DELAY_SRC, "" when none */
    int64_t deliver;   /* TIMER_DELIVER_MS, -1 when none */
    bool real;         /* has REAL_TOPIC and REAL_QID */
    bool color;        /* has the user property color=red */
} Seen;

/* The records of queue 'q' of 'topic' into 'out' (at most 'cap'); their
 * number. */
static size_t read_queue(Fixture *f, MqSlice topic, uint32_t q, Seen *out, size_t cap) {
    assert_int_equal(store_wait_dispatched(f->st, 5000), MQ_OK);
    CqEntry ce[64];
    size_t n = 0;
    uint64_t next = 0;
    if (store_read_queue(f->st, topic, q, 0, 64, 64, NULL, 0, ce, NULL, &n, &next) != MQ_OK)
        return 0;
    assert_true(n <= cap);
    for (size_t i = 0; i < n; i++) {
        ClRecord rec;
        MappedFile *ref = NULL;
        assert_int_equal(store_read_msg(f->st, ce[i].phys_off, &rec, &ref), MQ_OK);
        Seen *x = &out[i];
        memset(x, 0, sizeof(*x));
        snprintf(x->body, sizeof(x->body), "%.*s", (int)rec.body.len, (const char *)rec.body.ptr);
        x->store_ts = rec.store_ts;
        MqSlice v;
        if (msg_prop_get(rec.props, MSG_PROP_DELAY_SRC, &v))
            snprintf(x->src, sizeof(x->src), "%.*s", (int)v.len, (const char *)v.ptr);
        x->deliver = -1;
        if (msg_prop_get(rec.props, MSG_PROP_TIMER_DELIVER_MS, &v)) {
            char num[24];
            snprintf(num, sizeof(num), "%.*s", (int)v.len, (const char *)v.ptr);
            x->deliver = strtoll(num, NULL, 10);
        }
        x->real = msg_prop_get(rec.props, MSG_PROP_REAL_TOPIC, &v) &&
                  msg_prop_get(rec.props, MSG_PROP_REAL_QID, &v);
        x->color = msg_prop_get(rec.props, "color", &v) && v.len == 3;
        mf_unref(&ref);
    }
    return n;
}

static void test_sched_timer_lane_table_and_boundaries(void **state) {
    (void)state;
    /* d x 16^k: lanes 0..14 are 1..15 ms, 15.. 16, 32, ... */
    assert_int_equal(sched_timer_hop_ms(0), 1);
    assert_int_equal(sched_timer_hop_ms(14), 15);
    assert_int_equal(sched_timer_hop_ms(15), 16);
    assert_int_equal(sched_timer_hop_ms(29), 240);
    assert_int_equal(sched_timer_hop_ms(30), 256);
    assert_int_equal(sched_timer_hop_ms(75), 1 << 20);
    assert_int_equal(sched_timer_hop_ms(90), 1 << 24);
    assert_int_equal(sched_timer_hop_ms(94), 5LL << 24);
    assert_int_equal(sched_timer_hop_ms(94), SCHED_TIMER_HOP_MAX_MS);
    assert_true(SCHED_TIMER_HOP_MAX_MS <= 24 * 3600000LL);
    assert_int_equal(sched_timer_hop_ms(95), 0);
    for (uint32_t q = 1; q < SCHED_TIMER_LANES; q++)
        assert_true(sched_timer_hop_ms(q) > sched_timer_hop_ms(q - 1));
    /* the largest hop not over the remaining time */
    assert_int_equal(sched_timer_lane(1, 0), 0);
    assert_int_equal(sched_timer_lane(0, 0), 0);
    assert_int_equal(sched_timer_lane(-5, 0), 0);
    assert_int_equal(sched_timer_lane(15, 0), 14);
    assert_int_equal(sched_timer_lane(16, 0), 15);
    assert_int_equal(sched_timer_lane(31, 0), 15);
    assert_int_equal(sched_timer_lane(32, 0), 16);
    assert_int_equal(sched_timer_lane(255, 0), 29);
    assert_int_equal(sched_timer_lane(256, 0), 30);
    assert_int_equal(sched_timer_lane(3600000, 0), 77); /* 3 x 16^5 */
    assert_int_equal(sched_timer_lane(SCHED_TIMER_HOP_MAX_MS - 1, 0), 93);
    assert_int_equal(sched_timer_lane(SCHED_TIMER_HOP_MAX_MS, 0), 94);
    assert_int_equal(sched_timer_lane(40LL * 24 * 3600000, 0), 94);
    /* the runtime cap: the largest hop not over it either */
    assert_int_equal(sched_timer_lane(3600000, 1800000), 75);  /* 16^5 <= 30 min */
    assert_int_equal(sched_timer_lane(3600000, 1 << 20), 75);  /* a cap on a hop */
    assert_int_equal(sched_timer_lane(3600000, (1 << 20) - 1), 74);
    assert_int_equal(sched_timer_lane(100, 1000), 20);        /* 6 x 16: as without a cap */
    assert_int_equal(sched_timer_lane(INT64_MAX, 86400000), 94);
    /* every remaining time, up to 2^20: hop(lane) <= r < hop(lane + 1) */
    for (int64_t r = 1; r <= (1 << 20); r++) {
        uint32_t q = sched_timer_lane(r, 0);
        assert_true(sched_timer_hop_ms(q) <= r);
        assert_true(q == SCHED_TIMER_LANES - 1 || sched_timer_hop_ms(q + 1) > r);
    }
}

static void test_sched_timer_wrap_record_and_refusals(void **state) {
    Fixture *f = *state;
    ClMessage m = {.topic = mq_slice("T", 1), .queue_id = 7, .body = mq_slice("b", 1)};
    uint8_t buf[SCHED_TIMER_WRAP_EXTRA];
    ClMessage out;
    /* not in the future: stored directly by the caller */
    assert_int_equal(sched_timer_wrap(f->s, &m, T0, T0, buf, sizeof(buf), &out), MQ_ERR_INVAL);
    assert_int_equal(sched_timer_wrap(f->s, &m, T0 - 1, T0, buf, sizeof(buf), &out),
                     MQ_ERR_INVAL);
    assert_int_equal(sched_timer_wrap(f->s, &m, T0 + 1, T0, buf, 8, &out), MQ_ERR_FULL);
    assert_int_equal(sched_timer_wrap(f->s, &m, T0 + 5000, T0, buf, sizeof(buf), &out), MQ_OK);
    assert_int_equal(out.queue_id, sched_timer_lane(5000, 0));
    assert_int_equal(out.queue_id, 45); /* 1 x 4096 */
    MqSlice v;
    assert_true(msg_prop_get(out.props, MSG_PROP_REAL_TOPIC, &v) && v.len == 1);
    assert_true(msg_prop_get(out.props, MSG_PROP_REAL_QID, &v) && v.len == 1 &&
                memcmp(v.ptr, "7", 1) == 0);
    assert_true(msg_prop_get(out.props, MSG_PROP_TIMER_DELIVER_MS, &v));
    assert_int_equal(v.len, 13);
    assert_memory_equal(v.ptr, "1767225605000", 13);
    assert_false(msg_prop_get(out.props, MSG_PROP_DELAY, &v));
    /* properties that leave no room for a hop's __DELAY_SRC are refused */
    size_t big_len = CL_PROPS_MAX - 100; /* + the wrap's ~55 bytes fits, + __DELAY_SRC not */
    uint8_t *big = malloc(big_len);
    uint8_t *wb = malloc(big_len + SCHED_TIMER_WRAP_EXTRA);
    assert_non_null(big);
    assert_non_null(wb);
    MsgProp p = {mq_slice("k", 1), mq_slice("", 0)};
    char *val = malloc(big_len);
    assert_non_null(val);
    memset(val, 'v', big_len);
    size_t plen = 0;
    p.value = mq_slice(val, big_len - 3); /* "k" 0x01 value 0x02 */
    assert_int_equal(msg_props_encode(&p, 1, big, big_len, &plen), MQ_OK);
    assert_int_equal(plen, big_len);
    m.props = mq_slice(big, plen);
    assert_int_equal(sched_timer_wrap(f->s, &m, T0 + 5000, T0, wb, big_len +
                                      SCHED_TIMER_WRAP_EXTRA, &out), MQ_ERR_FULL);
    free(val);
    free(wb);
    free(big);
}

static void test_sched_timer_an_hour_ahead_hops_then_comes_on_time(void **state) {
    Fixture *f = *state;
    int64_t at = T0 + 3600000;
    uint32_t lane = put_timer(f, "T", 1, at, "hour");
    assert_int_equal(sched_timer_hop_ms(lane), 3LL << 20);
    assert_int_equal(sched_timer_pending(f->s), 1);
    assert_int_equal(sched_pending(f->s), 0);
    /* a millisecond before its time: on no queue of T, still waiting */
    step_until(f, at - 1);
    char got[64];
    bodies(f, "T", 1, got, sizeof(got));
    assert_string_equal(got, "");
    assert_int_equal(sched_timer_pending(f->s), 1);
    SchedStats st;
    sched_stats(f->s, &st);
    assert_int_equal(st.delivered, 0);
    /* 3 x 16^5 (the produce), then 6 x 16^4, 14 x 16^3, 14 x 16^2, 7 x 16
     * and 11 ms: five hops (each due 1 ms after its store time + hop) */
    assert_int_equal(st.hops, 5);
    step_until(f, at + 1);
    sched_stats(f->s, &st);
    assert_int_equal(st.delivered, 1);
    assert_int_equal(st.hops, 5);
    assert_int_equal(sched_timer_pending(f->s), 0);
    Seen d[4];
    assert_int_equal(read_queue(f, mq_slice("T", 1), 1, d, 4), 1);
    assert_string_equal(d[0].body, "hour");
    /* never early; at most 1 ms late (store times are cut to the ms) */
    assert_true(d[0].store_ts >= at && d[0].store_ts <= at + 1);
    assert_true(d[0].color);
    assert_false(d[0].real);
    assert_int_equal(d[0].deliver, -1);
    unsigned src_lane = 0;
    unsigned long long src_off = 0;
    assert_int_equal(sscanf(d[0].src, "t%u:%llu", &src_lane, &src_off), 2);
    /* every record in the wheel: the same deliver time, and a hop that
     * never passes it (so no hop can make the timer early or late) */
    size_t total = 0;
    for (uint32_t q = 0; q < SCHED_TIMER_LANES; q++) {
        Seen w[8];
        size_t n = read_queue(f, WHEEL, q, w, 8);
        for (size_t i = 0; i < n; i++) {
            assert_string_equal(w[i].body, "hour");
            assert_int_equal(w[i].deliver, at);
            assert_true(w[i].real && w[i].color);
            assert_true(w[i].store_ts + sched_timer_hop_ms(q) <= at);
            assert_int_equal(w[i].src[0] == 't', q != lane); /* hops name their source */
        }
        total += n;
    }
    assert_int_equal(total, 1 + 5);
}

static void test_sched_timer_hops_stay_under_the_runtime_cap(void **state) {
    Fixture *f = *state; /* hops of at most 1000 ms */
    ClMessage m = {.topic = mq_slice("T", 1), .body = mq_slice("b", 1)};
    uint8_t buf[SCHED_TIMER_WRAP_EXTRA];
    ClMessage out;
    assert_int_equal(sched_timer_wrap(NULL, &m, T0 + 10000, T0, buf, sizeof(buf), &out), MQ_OK);
    assert_int_equal(sched_timer_hop_ms(out.queue_id), 8192); /* no cap without a scheduler */
    int64_t at = T0 + 10000;
    uint32_t lane = put_timer(f, "T", 0, at, "capped");
    assert_int_equal(sched_timer_hop_ms(lane), 768); /* 3 x 256: the largest <= 1000 */
    step_until(f, at + 1);
    Seen d[2];
    assert_int_equal(read_queue(f, mq_slice("T", 1), 0, d, 2), 1);
    assert_true(d[0].store_ts >= at && d[0].store_ts <= at + 1);
    SchedStats st;
    sched_stats(f->s, &st);
    assert_true(st.hops >= 10000 / 1000);
    for (uint32_t q = 0; q < SCHED_TIMER_LANES; q++) {
        Seen w[32];
        if (read_queue(f, WHEEL, q, w, 32) > 0) assert_true(sched_timer_hop_ms(q) <= 1000);
    }
}

static void test_sched_timer_stale_saved_position_handles_each_once(void **state) {
    Fixture *f = *state;
    static const int64_t in_ms[] = {20, 300, 5000, 70000, 70000};
    enum { N = sizeof(in_ms) / sizeof(in_ms[0]) };
    for (int i = 0; i < N; i++) {
        char body[16];
        snprintf(body, sizeof(body), "t%d", i);
        put_timer(f, "T", 0, T0 + in_ms[i], body);
    }
    /* the positions saved now are the ones a crash would leave */
    assert_int_equal(sched_run_once(f->s, -1, true), 0);
    char saved_d[512], saved_t[2048];
    assert_int_equal(meta_kv_get(f->meta, SCHED_PROGRESS_KEY, saved_d, sizeof(saved_d)), MQ_OK);
    assert_int_equal(meta_kv_get(f->meta, SCHED_TIMER_PROGRESS_KEY, saved_t, sizeof(saved_t)),
                     MQ_OK);
    /* deliveries (t0, t1) and hops (t0, t1, t2) not saved; then the "crash" */
    step_until(f, T0 + 4500);
    SchedStats st;
    sched_stats(f->s, &st);
    assert_int_equal(st.delivered, 2);
    assert_true(st.hops >= 4);
    uint64_t before[SCHED_TIMER_LANES];
    for (uint32_t q = 0; q < SCHED_TIMER_LANES; q++) before[q] = sched_timer_position(f->s, q);
    sched_close(f->s);
    f->s = NULL;
    assert_int_equal(meta_kv_put(f->meta, SCHED_PROGRESS_KEY, saved_d), MQ_OK);
    assert_int_equal(meta_kv_put(f->meta, SCHED_TIMER_PROGRESS_KEY, saved_t), MQ_OK);
    sched_start(f);
    /* the scan found every hop and delivery: each lane where it was */
    for (uint32_t q = 0; q < SCHED_TIMER_LANES; q++)
        assert_int_equal(sched_timer_position(f->s, q), before[q]);
    assert_int_equal(sched_timer_pending(f->s), N - 2);
    step_until(f, T0 + 70001);
    char got[128];
    bodies(f, "T", 0, got, sizeof(got));
    assert_string_equal(got, "t0,t1,t2,t3,t4");
    Seen d[N];
    assert_int_equal(read_queue(f, mq_slice("T", 1), 0, d, N), N);
    for (int i = 0; i < N; i++)
        assert_true(d[i].store_ts >= T0 + in_ms[i] && d[i].store_ts <= T0 + in_ms[i] + 1);
    assert_int_equal(sched_timer_pending(f->s), 0);
}

/* sched_notify: the thread, asleep for up to SCHED_TICK_MS with nothing
 * due, wakes for a timer due sooner.  The fake clock stands still, so only
 * the notification (or the tick, 100 ms of real time) can wake it; three
 * timers each delivered within 20 ms of their notification cannot all be
 * the tick's doing (about 1 chance in 125). */
static void test_sched_notify_wakes_the_thread_for_a_timer_due_sooner(void **state) {
    Fixture *f = *state;
    sched_close(f->s);
    SchedConfig c = {.store = f->st,
                     .meta = f->meta,
                     .topics = f->topics,
                     .levels_ms = f->levels,
                     .n_levels = f->n_levels,
                     .thread = true,
                     .clock = fake_clock,
                     .clock_arg = f};
    assert_int_equal(sched_open(&c, &f->s), MQ_OK);
    for (int i = 0; i < 3; i++) {
        struct timespec settle = {0, 30 * 1000000L}; /* the thread goes back to sleep */
        nanosleep(&settle, NULL);
        int64_t now = atomic_load(&f->clock_ms);
        ClMessage real = {.topic = mq_slice("T", 1), .body = mq_slice("n", 1)};
        uint8_t buf[SCHED_TIMER_WRAP_EXTRA];
        ClMessage wrapped;
        assert_int_equal(sched_timer_wrap(f->s, &real, now + 5, now, buf, sizeof(buf), &wrapped),
                         MQ_OK);
        ClAppendResult res;
        assert_int_equal(store_put(f->st, &wrapped, 1, &res), MQ_OK);
        assert_int_equal(store_wait_dispatched(f->st, 5000), MQ_OK);
        atomic_store(&f->clock_ms, now + 10); /* due: only a pass is missing */
        int64_t t0 = mq_mono_ns();
        sched_notify(f->s, &wrapped, res.store_ts);
        uint64_t qmin = 0, qmax = 0;
        while (qmax < (uint64_t)i + 1 && mq_mono_ns() - t0 < 2000000000LL) {
            struct timespec tick = {0, 200000L};
            nanosleep(&tick, NULL);
            store_queue_range(f->st, mq_slice("T", 1), 0, &qmin, &qmax);
        }
        int64_t waited_ms = (mq_mono_ns() - t0) / 1000000;
        if (waited_ms >= 20) fail_msg("timer %d delivered %lld ms after its notification", i,
                                      (long long)waited_ms);
        atomic_store(&f->clock_ms, now + 1000);
    }
}

/* Closes the scheduler, the topics and meta.db, removes meta.db and opens
 * a fresh one with the topic T: what a broker before timers left. */
static void fresh_meta(Fixture *f) {
    sched_close(f->s);
    f->s = NULL;
    topic_registry_close(f->topics);
    meta_close(f->meta);
    static const char *const files[] = {"meta.db", "meta.db-wal", "meta.db-shm"};
    for (size_t i = 0; i < 3; i++) {
        char *path = tu_path(f->dir, "%s", files[i]);
        remove(path);
        free(path);
    }
    open_meta(f);
}

static void test_sched_timer_saved_positions_old_rows_and_bad_rows(void **state) {
    Fixture *f = *state;
    /* a delay_progress row alone (an older broker's): loaded as before,
     * timer lanes from their start, timer_progress written at once */
    fresh_meta(f);
    assert_int_equal(meta_kv_put(f->meta, SCHED_PROGRESS_KEY, "0 5 9"), MQ_OK);
    sched_start(f);
    assert_int_equal(sched_position(f->s, 1), 5);
    assert_int_equal(sched_position(f->s, 2), 9);
    assert_int_equal(sched_timer_position(f->s, 0), 0);
    char row[2048];
    assert_int_equal(meta_kv_get(f->meta, SCHED_PROGRESS_KEY, row, sizeof(row)), MQ_OK);
    assert_string_equal(row, "0 5 9");
    assert_int_equal(meta_kv_get(f->meta, SCHED_TIMER_PROGRESS_KEY, row, sizeof(row)), MQ_OK);
    size_t fields = 1;
    for (const char *c = row; *c; c++) fields += *c == ' ';
    assert_int_equal(fields, 1 + SCHED_TIMER_LANES);
    /* a timer row that does not parse, or has more lanes than the table */
    sched_close(f->s);
    f->s = NULL;
    SchedConfig c = {.store = f->st,
                     .meta = f->meta,
                     .topics = f->topics,
                     .levels_ms = f->levels,
                     .n_levels = f->n_levels};
    int saved = mq_log_level;
    mq_log_level = -1;
    assert_int_equal(meta_kv_put(f->meta, SCHED_TIMER_PROGRESS_KEY, "0 1 x"), MQ_OK);
    assert_int_equal(sched_open(&c, &f->s), MQ_ERR_CORRUPT);
    char many[2048];
    int k = snprintf(many, sizeof(many), "0");
    for (int i = 0; i <= SCHED_TIMER_LANES; i++)
        k += snprintf(many + k, sizeof(many) - (size_t)k, " 1");
    assert_int_equal(meta_kv_put(f->meta, SCHED_TIMER_PROGRESS_KEY, many), MQ_OK);
    assert_int_equal(sched_open(&c, &f->s), MQ_ERR_CORRUPT);
    mq_log_level = saved;
    assert_null(f->s);
    /* fewer lanes than the table: the rest from their start */
    assert_int_equal(meta_kv_put(f->meta, SCHED_TIMER_PROGRESS_KEY, "0 3 4"), MQ_OK);
    sched_start(f);
    assert_int_equal(sched_timer_position(f->s, 0), 3);
    assert_int_equal(sched_timer_position(f->s, 1), 4);
    assert_int_equal(sched_timer_position(f->s, 2), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sched_delivers_when_due_in_level_order, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_sched_drops_the_message_of_a_deleted_topic, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_sched_stale_saved_position_delivers_each_once, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_sched_bad_saved_positions_are_corrupt, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_sched_many_properties_and_an_old_source_survive_a_re_put, setup, teardown),
        cmocka_unit_test(test_sched_wrap_refuses_bad_levels_and_full_properties),
        cmocka_unit_test(test_sched_timer_lane_table_and_boundaries),
        cmocka_unit_test_setup_teardown(test_sched_timer_wrap_record_and_refusals, setup_timer,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_sched_timer_an_hour_ahead_hops_then_comes_on_time,
                                        setup_timer, teardown),
        cmocka_unit_test_setup_teardown(test_sched_timer_hops_stay_under_the_runtime_cap,
                                        setup_timer_cap, teardown),
        cmocka_unit_test_setup_teardown(test_sched_timer_stale_saved_position_handles_each_once,
                                        setup_timer, teardown),
        cmocka_unit_test_setup_teardown(test_sched_timer_saved_positions_old_rows_and_bad_rows,
                                        setup_timer, teardown),
        cmocka_unit_test_setup_teardown(test_sched_notify_wakes_the_thread_for_a_timer_due_sooner,
                                        setup_timer, teardown),
    };
    return cmocka_run_group_tests_name("schedule", tests, NULL, NULL);
}
