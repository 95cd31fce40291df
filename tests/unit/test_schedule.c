/*
 * test_schedule.c - the delay-level scheduler (core/schedule.c) over a
 * real store and meta.db, time passed in explicitly: sched_wrap's record,
 * nothing delivered before its time, each level in order, the re-put
 * record (real topic and queue, properties back, __DELAY_SRC), a deleted
 * topic's message dropped, and exactly-once across a stale saved position
 * (the crash case: re-puts after the last save are found by the scan).
 */
#include "testutil.h"

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
} Fixture;

static const MqSlice SCHED = {MSG_SCHEDULE_TOPIC, sizeof(MSG_SCHEDULE_TOPIC) - 1};

static void sched_start(Fixture *f) {
    SchedConfig c = {.store = f->st,
                     .meta = f->meta,
                     .topics = f->topics,
                     .levels_ms = f->levels,
                     .n_levels = f->n_levels,
                     .thread = false};
    assert_int_equal(sched_open(&c, &f->s), MQ_OK);
}

static int setup(void **state) {
    Fixture *f = calloc(1, sizeof(*f));
    if (!f) return -1;
    f->dir = tu_mkdtemp("sched");
    StoreConfig sc;
    store_config_defaults(&sc, f->dir);
    sc.segment_size = 1024 * 1024;
    sc.cq_file_entries = 4096;
    sc.index_slots = 1024;
    sc.index_entries = 65536;
    assert_int_equal(store_open(&sc, &f->st), MQ_OK);
    char *mpath = tu_path(f->dir, "meta.db");
    assert_int_equal(meta_open(mpath, 0, &f->meta), MQ_OK);
    free(mpath);
    assert_int_equal(topic_registry_open(f->meta, 4, &f->topics), MQ_OK);
    assert_int_equal(topic_put(f->topics, "T", 2, META_PERM_READ | META_PERM_WRITE, false, NULL),
                     MQ_OK);
    assert_int_equal(delay_levels_parse("1s 5s", f->levels, DELAY_LEVELS_MAX, &f->n_levels),
                     MQ_OK);
    sched_start(f);
    *state = f;
    return 0;
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
        cmocka_unit_test(test_sched_wrap_refuses_bad_levels_and_full_properties),
    };
    return cmocka_run_group_tests_name("schedule", tests, NULL, NULL);
}
