/*
 * test_pop.c - receive/ack consumption (core/pop.c) over a real store and
 * metadata database: handles and their results, invisibility, nack and the
 * retry ladder, retry and dead-letter topics, tag filters, orderly groups,
 * restart after a crash (journal replay with and without a snapshot) and
 * after a clean close, offset resets, group and topic drops, the in-flight
 * cap and a multi-threaded receive/ack run.
 *
 * Each case gets a temporary directory with a store (small segments, the
 * housekeeper idle) and meta.db in 'd1/', topic "T" of 2 queues, group "G"
 * (retryMaxTimes 2) and an engine without its keeper thread: the test
 * drives the engine's clock and runs keeper rounds itself (pop_keep).  The
 * retry ladder is 100ms 200ms 300ms 400ms 500ms.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "delay.h"
#include "filter.h"
#include "group.h"
#include "meta.h"
#include "msg.h"
#include "pop.h"
#include "store.h"
#include "topic.h"

#define RW (META_PERM_READ | META_PERM_WRITE)
#define T0 1700000000000LL /* the engine clock at the start of each case, ms */
#define LONG_MS 600000     /* an invisibility that never ends within a case */

typedef struct Fixture {
    char *dir;               /* per-case temporary directory */
    char *data;              /* the open data directory (store + meta.db) */
    StoreConfig scfg;
    Store *st;
    Meta *meta;
    TopicRegistry *topics;
    GroupRegistry *groups;
    PopConfig pcfg;
    PopEngine *e;
    int64_t levels[DELAY_LEVELS_MAX];
    size_t n_levels;
    uint8_t host[8];
    uint32_t inflight_max;   /* PopConfig.inflight_max of the next open */
    Scheduler *sched;        /* PopConfig.sched of the next open (NULL: none) */
    _Atomic int64_t now;     /* the engine clock, ms */
    Filter *all;             /* TAG "*" */
    MetaGroup g;             /* group "G" as stored */
} Fixture;

/* What a delivery points at, read back from its record. */
typedef struct Got {
    int seq;                       /* the number in the body "m<seq>" */
    uint32_t queue_id;             /* of the record (source queue) */
    char topic[MSG_SYSTEM_NAME_MAX + 1];
    uint32_t reconsume;            /* PopDelivery.reconsume_times */
    bool retry;
    char handle[RECEIPT_LEN + 1];
} Got;

static int64_t test_clock(void *arg) {
    return atomic_load(&((Fixture *)arg)->now);
}

static void advance(Fixture *f, int64_t ms) {
    atomic_fetch_add(&f->now, ms);
}

/* ======================================================================
 * Fixture
 * ====================================================================== */

static void engine_open(Fixture *f) {
    f->pcfg = (PopConfig){
        .store = f->st,
        .meta = f->meta,
        .topics = f->topics,
        .groups = f->groups,
        .longpoll = NULL,
        .delay_levels_ms = f->levels,
        .n_delay_levels = f->n_levels,
        .inflight_max = f->inflight_max,
        .revive_interval_ms = 100,
        .snapshot_interval_ms = 0,
        .orderly_retry_delay_ms = 1000,
        .store_host = f->host,
        .sched = f->sched,
        .keeper = false,
        .clock = test_clock,
        .clock_arg = f,
    };
    assert_int_equal(pop_open(&f->pcfg, &f->e), MQ_OK);
    assert_non_null(f->e);
}

/* Opens store, meta, registries and engine on 'data'. */
static void world_open(Fixture *f, const char *data) {
    free(f->data);
    f->data = strdup(data);
    store_config_defaults(&f->scfg, f->data);
    f->scfg.segment_size = 1024 * 1024;
    f->scfg.cq_file_entries = 4096;
    f->scfg.index_slots = 1024;
    f->scfg.index_entries = 65536;
    f->scfg.flush_interval_ms = 20;
    f->scfg.flush_cq_interval_ms = 600000; /* housekeeper idle */
    assert_int_equal(store_open(&f->scfg, &f->st), MQ_OK);
    char *mpath = tu_path(f->data, "meta.db");
    assert_int_equal(meta_open(mpath, 0, &f->meta), MQ_OK);
    free(mpath);
    assert_int_equal(topic_registry_open(f->meta, 4, &f->topics), MQ_OK);
    assert_int_equal(group_registry_open(f->meta, &f->groups), MQ_OK);
    engine_open(f);
}

/* Closes all of it cleanly (the engine saves its state). */
static void world_close(Fixture *f) {
    pop_close(f->e);
    f->e = NULL;
    store_close(f->st);
    f->st = NULL;
    group_registry_close(f->groups);
    f->groups = NULL;
    topic_registry_close(f->topics);
    f->topics = NULL;
    meta_close(f->meta);
    f->meta = NULL;
}

static void put_group(Fixture *f, const char *name, bool orderly, uint32_t retry_max,
                      MetaGroup *out) {
    MetaGroup g;
    meta_group_defaults(&g, name);
    g.orderly = orderly;
    g.retry_max_times = retry_max;
    assert_int_equal(group_put(f->groups, &g, NULL), MQ_OK);
    assert_int_equal(group_get(f->groups, name, out), MQ_OK);
}

static int setup(void **state) {
    Fixture *f = calloc(1, sizeof(*f));
    if (!f) return -1;
    f->dir = tu_mkdtemp("pop");
    atomic_store(&f->now, T0);
    f->inflight_max = 1000;
    assert_int_equal(delay_levels_parse("100ms 200ms 300ms 400ms 500ms", f->levels,
                                        DELAY_LEVELS_MAX, &f->n_levels),
                     MQ_OK);
    assert_int_equal(f->n_levels, 5);
    char *d1 = tu_path(f->dir, "d1");
    world_open(f, d1);
    free(d1);
    assert_int_equal(topic_put(f->topics, "T", 2, RW, false, NULL), MQ_OK);
    put_group(f, "G", false, 2, &f->g);
    assert_int_equal(filter_compile(FILTER_TAG, "*", 1, &f->all, NULL), MQ_OK);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    Fixture *f = *state;
    world_close(f);
    filter_unref(f->all);
    tu_rmtree(f->dir);
    free(f->data);
    free(f->dir);
    free(f);
    return 0;
}

/* ======================================================================
 * Helpers
 * ====================================================================== */

/* put appends "m<seq>" to ('topic', 'qid') with TAGS 'tag' (NULL: none)
 * and a user property. */
static void put(Fixture *f, const char *topic, uint32_t qid, int seq, const char *tag) {
    char body[32];
    snprintf(body, sizeof(body), "m%d", seq);
    MsgProp props[2];
    size_t np = 0;
    if (tag) props[np++] = (MsgProp){mq_slice("TAGS", 4), mq_slice(tag, strlen(tag))};
    props[np++] = (MsgProp){mq_slice("color", 5), mq_slice("red", 3)};
    uint8_t pbuf[128];
    size_t plen = 0;
    assert_int_equal(msg_props_encode(props, np, pbuf, sizeof(pbuf), &plen), MQ_OK);
    ClMessage m = {.topic = mq_slice(topic, strlen(topic)),
                   .queue_id = qid,
                   .born_ts = atomic_load(&f->now),
                   .body = mq_slice(body, strlen(body)),
                   .props = mq_slice(pbuf, plen)};
    ClAppendResult r;
    assert_int_equal(store_put(f->st, &m, 1, &r), MQ_OK);
}

static void dispatched(Fixture *f) {
    assert_int_equal(store_wait_dispatched(f->st, 5000), MQ_OK);
}

/* The record of a delivery.  Returns the body's sequence number. */
static int read_got(Fixture *f, const PopDelivery *d, Got *g) {
    ClRecord rec;
    MappedFile *ref = NULL;
    assert_int_equal(store_read_msg(f->st, d->phys_off, &rec, &ref), MQ_OK);
    char body[32] = {0};
    assert_true(rec.body.len > 1 && rec.body.len < sizeof(body));
    memcpy(body, rec.body.ptr, rec.body.len);
    assert_int_equal(body[0], 'm');
    g->seq = atoi(body + 1);
    g->queue_id = rec.queue_id;
    assert_true(rec.topic.len < sizeof(g->topic));
    memcpy(g->topic, rec.topic.ptr, rec.topic.len);
    g->topic[rec.topic.len] = '\0';
    mf_unref(&ref);
    g->reconsume = d->reconsume_times;
    g->retry = d->retry;
    memcpy(g->handle, d->handle, sizeof(g->handle));
    assert_int_equal(strlen(g->handle), RECEIPT_LEN);
    return g->seq;
}

/* recv receives up to 'max' of ('group', 'topic' with 'queues') through
 * 'flt' into 'out' (room for 'max'), read back.  Returns the count. */
static size_t recv_f(Fixture *f, const MetaGroup *group, const char *topic, uint32_t queues,
                     const Filter *flt, uint32_t max, int64_t invisible_ms, Got *out) {
    PopRequest req = {.group = group, .topic = topic, .read_queues = queues, .filter = flt,
                      .max_messages = max, .invisible_ms = invisible_ms};
    PopDelivery *d = calloc(max, sizeof(*d));
    assert_non_null(d);
    size_t n = 99999;
    assert_int_equal(pop_receive(f->e, &req, d, &n), MQ_OK);
    assert_true(n <= max);
    for (size_t i = 0; i < n; i++) read_got(f, &d[i], &out[i]);
    free(d);
    return n;
}

/* recv of "T" by "G" with TAG "*". */
static size_t recv_t(Fixture *f, uint32_t max, int64_t invisible_ms, Got *out) {
    return recv_f(f, &f->g, "T", 2, f->all, max, invisible_ms, out);
}

static PopResult ack_as(Fixture *f, const MetaGroup *g, const char *topic, const char *handle) {
    const char *hs[1] = {handle};
    size_t lens[1] = {strlen(handle)};
    PopResult r = 99;
    assert_int_equal(pop_ack(f->e, g, topic, hs, lens, 1, &r), MQ_OK);
    return r;
}

static PopResult ack1(Fixture *f, const char *handle) {
    return ack_as(f, &f->g, "T", handle);
}

static PopResult nack_as(Fixture *f, const MetaGroup *g, const char *topic, const char *handle,
                         int64_t delay_ms) {
    PopResult r = 99;
    assert_int_equal(pop_nack(f->e, g, topic, handle, strlen(handle), delay_ms, &r), MQ_OK);
    return r;
}

static PopResult nack1(Fixture *f, const char *handle, int64_t delay_ms) {
    return nack_as(f, &f->g, "T", handle, delay_ms);
}

/* The consumer offset of ('group', 'topic', 'qid'); -1 when none. */
static int64_t offset_of(Fixture *f, const char *group, const char *topic, uint32_t qid) {
    uint64_t off = 0;
    int rc = meta_offset_get(f->meta, group, topic, qid, &off);
    if (rc == MQ_ERR_NOTFOUND) return -1;
    assert_int_equal(rc, MQ_OK);
    return (int64_t)off;
}

static uint64_t queue_max(Fixture *f, const char *topic, uint32_t qid) {
    uint64_t lo = 0, hi = 0;
    store_queue_range(f->st, mq_slice(topic, strlen(topic)), qid, &lo, &hi);
    return hi;
}

/* The index in 'gs' of the delivery of 'seq'; fails when absent. */
static size_t find_seq(const Got *gs, size_t n, int seq) {
    for (size_t i = 0; i < n; i++)
        if (gs[i].seq == seq) return i;
    fail_msg("message m%d was not delivered", seq);
    return 0;
}

/* Sorted sequence numbers of 'gs' as a string "0,1,2" for comparisons. */
static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static void seqs_str(const Got *gs, size_t n, char *buf, size_t cap) {
    int v[256];
    assert_true(n <= 256);
    for (size_t i = 0; i < n; i++) v[i] = gs[i].seq;
    qsort(v, n, sizeof(v[0]), cmp_int);
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(buf + len, cap - len, i ? ",%d" : "%d", v[i]);
}

#define assert_seqs(gs, n, expect)                         \
    do {                                                   \
        char s_[1024];                                     \
        seqs_str((gs), (n), s_, sizeof(s_));               \
        assert_string_equal(s_, (expect));                 \
    } while (0)

/* Reads the record at ('topic', 'qid', 'off'): body seq and props. */
static int read_at(Fixture *f, const char *topic, uint32_t qid, uint64_t off, char *retry_topic,
                   size_t cap, uint32_t *reconsume) {
    CqEntry ce;
    uint64_t qoff = 0, next = 0;
    size_t n = 0;
    assert_int_equal(store_read_queue(f->st, mq_slice(topic, strlen(topic)), qid, off, 1, 1, NULL,
                                      0, &ce, &qoff, &n, &next),
                     MQ_OK);
    assert_int_equal(n, 1);
    ClRecord rec;
    MappedFile *ref = NULL;
    assert_int_equal(store_read_msg(f->st, ce.phys_off, &rec, &ref), MQ_OK);
    char body[32] = {0};
    memcpy(body, rec.body.ptr, rec.body.len < 31 ? rec.body.len : 31);
    MqSlice v;
    retry_topic[0] = '\0';
    if (msg_prop_get(rec.props, MSG_PROP_RETRY_TOPIC, &v)) {
        assert_true(v.len < cap);
        memcpy(retry_topic, v.ptr, v.len);
        retry_topic[v.len] = '\0';
    }
    /* the user's properties travel with it */
    assert_true(msg_prop_get(rec.props, "color", &v));
    assert_int_equal(v.len, 3);
    assert_memory_equal(v.ptr, "red", 3);
    *reconsume = rec.reconsume_times;
    mf_unref(&ref);
    return atoi(body + 1);
}

/* ======================================================================
 * 1. Receive
 * ====================================================================== */

static void test_pop_receive_hands_out_each_message_once(void **state) {
    Fixture *f = *state;
    for (int i = 0; i < 3; i++) put(f, "T", 0, i, NULL);
    for (int i = 10; i < 13; i++) put(f, "T", 1, i, NULL);
    dispatched(f);

    Got g[16];
    size_t n1 = recv_t(f, 4, LONG_MS, g);
    assert_int_equal(n1, 4);
    size_t n2 = recv_t(f, 4, LONG_MS, g + n1);
    assert_int_equal(n2, 2);
    assert_int_equal(recv_t(f, 4, LONG_MS, g + 6), 0);
    assert_seqs(g, 6, "0,1,2,10,11,12");
    for (size_t i = 0; i < 6; i++) {
        assert_int_equal(g[i].reconsume, 0);
        assert_false(g[i].retry);
        assert_string_equal(g[i].topic, "T");
        assert_int_equal(g[i].queue_id, g[i].seq < 10 ? 0 : 1);
        for (size_t j = 0; j < i; j++) assert_string_not_equal(g[i].handle, g[j].handle);
    }
    /* within a queue in offset order */
    for (size_t i = 1; i < 6; i++)
        for (size_t j = 0; j < i; j++)
            if (g[i].queue_id == g[j].queue_id) assert_true(g[j].seq < g[i].seq);

    assert_int_equal(pop_inflight(f->e, "G", "T", 0), 3);
    assert_int_equal(pop_inflight(f->e, "G", "T", 1), 3);
    assert_int_equal(pop_inflight(f->e, "G", "T", 7), 0);
    PopStats s;
    pop_stats(f->e, &s);
    assert_int_equal(s.received, 6);
    assert_int_equal(s.inflight, 6);

    /* a new message shows up for the next receive, the old ones do not */
    put(f, "T", 1, 13, NULL);
    dispatched(f);
    assert_int_equal(recv_t(f, 8, LONG_MS, g), 1);
    assert_int_equal(g[0].seq, 13);
}

static void test_pop_receive_rejects_bad_requests(void **state) {
    Fixture *f = *state;
    PopDelivery d[2];
    size_t n = 0;
    PopRequest ok = {.group = &f->g, .topic = "T", .read_queues = 2, .filter = f->all,
                     .max_messages = 2, .invisible_ms = 1000};
    PopRequest r = ok;
    r.max_messages = 0;
    assert_int_equal(pop_receive(f->e, &r, d, &n), MQ_ERR_INVAL);
    r = ok;
    r.max_messages = POP_MAX_MESSAGES + 1;
    assert_int_equal(pop_receive(f->e, &r, d, &n), MQ_ERR_INVAL);
    r = ok;
    r.invisible_ms = 0;
    assert_int_equal(pop_receive(f->e, &r, d, &n), MQ_ERR_INVAL);
    r = ok;
    r.filter = NULL;
    assert_int_equal(pop_receive(f->e, &r, d, &n), MQ_ERR_INVAL);
    /* nothing produced: OK with none */
    n = 5;
    assert_int_equal(pop_receive(f->e, &ok, d, &n), MQ_OK);
    assert_int_equal(n, 0);
    assert_string_equal(pop_result_name(POP_OK), "OK");
    assert_string_equal(pop_result_name(POP_EXPIRED), "EXPIRED");
    assert_string_equal(pop_result_name(POP_INVALID), "INVALID");
}

/* ======================================================================
 * 2. Ack
 * ====================================================================== */

static void test_pop_ack_results_and_consumer_offset(void **state) {
    Fixture *f = *state;
    for (int i = 0; i < 3; i++) put(f, "T", 0, i, NULL);
    dispatched(f);
    Got g[8];
    assert_int_equal(recv_t(f, 8, LONG_MS, g), 3);
    const char *h0 = g[find_seq(g, 3, 0)].handle;
    const char *h1 = g[find_seq(g, 3, 1)].handle;
    const char *h2 = g[find_seq(g, 3, 2)].handle;
    int64_t off = offset_of(f, "G", "T", 0);
    assert_true(off == -1 || off == 0);

    /* acking the middle one leaves the front where it is */
    assert_int_equal(ack1(f, h1), POP_OK);
    assert_int_equal(offset_of(f, "G", "T", 0), 0);
    assert_int_equal(ack1(f, h1), POP_EXPIRED);
    assert_int_equal(ack1(f, h0), POP_OK);
    assert_int_equal(offset_of(f, "G", "T", 0), 2);
    assert_int_equal(ack1(f, h0), POP_EXPIRED);
    assert_int_equal(nack1(f, h0, 0), POP_EXPIRED);

    /* not handles of this group and topic */
    assert_int_equal(ack1(f, "hello"), POP_INVALID);
    assert_int_equal(ack1(f, ""), POP_INVALID);
    char forged[RECEIPT_LEN + 1];
    memcpy(forged, h2, sizeof(forged));
    forged[20] = forged[20] == '0' ? '1' : '0';
    assert_int_equal(ack1(f, forged), POP_INVALID);
    memcpy(forged, h2, sizeof(forged));
    forged[RECEIPT_LEN - 1] = forged[RECEIPT_LEN - 1] == 'A' ? 'B' : 'A';
    assert_int_equal(ack1(f, forged), POP_INVALID);
    MetaGroup other;
    put_group(f, "H", false, 2, &other);
    assert_int_equal(ack_as(f, &other, "T", h2), POP_INVALID);
    assert_int_equal(nack_as(f, &other, "T", h2, 0), POP_INVALID);
    assert_int_equal(topic_put(f->topics, "U", 2, RW, false, NULL), MQ_OK);
    assert_int_equal(ack_as(f, &f->g, "U", h2), POP_INVALID);
    assert_int_equal(pop_inflight(f->e, "G", "T", 0), 1);

    assert_int_equal(ack1(f, h2), POP_OK);
    assert_int_equal(offset_of(f, "G", "T", 0), 3);
    assert_int_equal(pop_inflight(f->e, "G", "T", 0), 0);
    assert_int_equal(offset_of(f, "H", "T", 0), -1);

    /* a batch: results in the order given, a repeat is OK once */
    put(f, "T", 0, 3, NULL);
    put(f, "T", 0, 4, NULL);
    put(f, "T", 1, 10, NULL);
    dispatched(f);
    assert_int_equal(recv_t(f, 8, LONG_MS, g), 3);
    const char *hs[5] = {g[find_seq(g, 3, 4)].handle, g[find_seq(g, 3, 10)].handle,
                         g[find_seq(g, 3, 4)].handle, "zz", g[find_seq(g, 3, 3)].handle};
    size_t lens[5];
    for (int i = 0; i < 5; i++) lens[i] = strlen(hs[i]);
    PopResult res[5];
    assert_int_equal(pop_ack(f->e, &f->g, "T", hs, lens, 5, res), MQ_OK);
    assert_int_equal(res[0], POP_OK);
    assert_int_equal(res[1], POP_OK);
    assert_int_equal(res[2], POP_EXPIRED);
    assert_int_equal(res[3], POP_INVALID);
    assert_int_equal(res[4], POP_OK);
    assert_int_equal(offset_of(f, "G", "T", 0), 5);
    assert_int_equal(offset_of(f, "G", "T", 1), 1);
    PopStats s;
    pop_stats(f->e, &s);
    assert_int_equal(s.acked, 6);
    assert_int_equal(s.inflight, 0);
    assert_int_equal(recv_t(f, 8, LONG_MS, g), 0);
}

/* ======================================================================
 * 3. Invisibility
 * ====================================================================== */

static void test_pop_invisibility_end_moves_to_retry_topic(void **state) {
    Fixture *f = *state;
    put(f, "T", 1, 7, "A");
    dispatched(f);
    Got g[4];
    assert_int_equal(recv_t(f, 4, 1000, g), 1);
    assert_int_equal(g[0].seq, 7);

    advance(f, 999);
    assert_int_equal(pop_keep(f->e, false), 0);
    MetaTopic t;
    assert_int_equal(topic_get(f->topics, "%RETRY%G", &t), MQ_ERR_NOTFOUND);
    assert_int_equal(recv_t(f, 4, 1000, g + 1), 0);

    advance(f, 2);
    assert_int_equal(ack1(f, g[0].handle), POP_EXPIRED);
    assert_int_equal(nack1(f, g[0].handle, 0), POP_EXPIRED);
    assert_int_equal(pop_keep(f->e, false), 1);
    assert_int_equal(pop_keep(f->e, false), 0);
    assert_int_equal(topic_get(f->topics, "%RETRY%G", &t), MQ_OK);
    assert_int_equal(t.read_queues, f->g.retry_queue_nums);
    dispatched(f);
    assert_int_equal(queue_max(f, "%RETRY%G", 0), 1);
    char rt[64];
    uint32_t rc = 0;
    assert_int_equal(read_at(f, "%RETRY%G", 0, 0, rt, sizeof(rt), &rc), 7);
    assert_string_equal(rt, "T");
    assert_int_equal(rc, 1);
    /* the source queue is done with it */
    assert_int_equal(offset_of(f, "G", "T", 1), 1);
    assert_int_equal(pop_inflight(f->e, "G", "T", 1), 0);

    assert_int_equal(recv_t(f, 4, 1000, g + 1), 1);
    assert_int_equal(g[1].seq, 7);
    assert_true(g[1].retry);
    assert_int_equal(g[1].reconsume, 1);
    assert_string_equal(g[1].topic, "%RETRY%G");
    assert_string_not_equal(g[1].handle, g[0].handle);
    assert_int_equal(ack1(f, g[0].handle), POP_EXPIRED);
    assert_int_equal(ack1(f, g[1].handle), POP_OK);
    assert_int_equal(ack1(f, g[1].handle), POP_EXPIRED);
    advance(f, 3600000);
    assert_int_equal(pop_keep(f->e, false), 0);
    assert_int_equal(recv_t(f, 4, 1000, g + 2), 0);
    PopStats s;
    pop_stats(f->e, &s);
    assert_int_equal(s.expired, 1);
    assert_int_equal(s.retried, 1);
    assert_int_equal(s.dead, 0);
    assert_int_equal(s.acked, 1);
}

/* ======================================================================
 * 4-5. Nack, retries, dead letters
 * ====================================================================== */

static void test_pop_nack_retries_then_dead_letters(void **state) {
    Fixture *f = *state;
    put(f, "T", 0, 1, NULL);
    dispatched(f);
    Got g[4];
    assert_int_equal(recv_t(f, 4, LONG_MS, g), 1);
    assert_int_equal(nack1(f, g[0].handle, 0), POP_OK);
    assert_int_equal(nack1(f, g[0].handle, 0), POP_EXPIRED); /* spent */
    assert_int_equal(ack1(f, g[0].handle), POP_EXPIRED);

    for (uint32_t round = 1; round <= 2; round++) {
        assert_int_equal(pop_keep(f->e, false), 1);
        dispatched(f);
        assert_int_equal(queue_max(f, "%RETRY%G", 0), round);
        assert_int_equal(recv_t(f, 4, LONG_MS, g), 1);
        assert_int_equal(g[0].seq, 1);
        assert_true(g[0].retry);
        assert_int_equal(g[0].reconsume, round);
        assert_int_equal(recv_t(f, 4, LONG_MS, g + 1), 0);
        assert_int_equal(nack1(f, g[0].handle, 0), POP_OK);
    }
    /* the third failure with retryMaxTimes 2: dead */
    MetaTopic t;
    assert_int_equal(topic_get(f->topics, "%DLQ%G", &t), MQ_ERR_NOTFOUND);
    assert_int_equal(pop_keep(f->e, false), 1);
    dispatched(f);
    assert_int_equal(topic_get(f->topics, "%DLQ%G", &t), MQ_OK);
    assert_int_equal(queue_max(f, "%DLQ%G", 0), 1);
    assert_int_equal(queue_max(f, "%RETRY%G", 0), 2);
    char rt[64];
    uint32_t rc = 0;
    assert_int_equal(read_at(f, "%DLQ%G", 0, 0, rt, sizeof(rt), &rc), 1);
    assert_string_equal(rt, "T");
    assert_int_equal(rc, 3); /* as RocketMQ: the failed deliveries, counted */

    advance(f, 3600000);
    assert_int_equal(pop_keep(f->e, false), 0);
    dispatched(f);
    assert_int_equal(recv_t(f, 4, LONG_MS, g), 0);
    assert_int_equal(queue_max(f, "%DLQ%G", 0), 1);
    assert_int_equal(offset_of(f, "G", "T", 0), 1);
    PopStats s;
    pop_stats(f->e, &s);
    assert_int_equal(s.nacked, 3);
    assert_int_equal(s.retried, 2);
    assert_int_equal(s.dead, 1);
    assert_int_equal(s.inflight, 0);
}

static void test_pop_nack_without_delay_follows_the_retry_ladder(void **state) {
    Fixture *f = *state;
    put(f, "T", 0, 1, NULL);
    dispatched(f);
    Got g[4];
    assert_int_equal(recv_t(f, 4, LONG_MS, g), 1);
    assert_int_equal(nack1(f, g[0].handle, -1), POP_OK);
    /* reconsume 0: level 3 = 300 ms */
    advance(f, 299);
    assert_int_equal(pop_keep(f->e, false), 0);
    assert_int_equal(recv_t(f, 4, LONG_MS, g + 1), 0);
    advance(f, 1);
    assert_int_equal(pop_keep(f->e, false), 1);
    dispatched(f);
    assert_int_equal(recv_t(f, 4, LONG_MS, g), 1);
    assert_int_equal(g[0].reconsume, 1);
    /* reconsume 1: level 4 = 400 ms */
    assert_int_equal(nack1(f, g[0].handle, -1), POP_OK);
    advance(f, 399);
    assert_int_equal(pop_keep(f->e, false), 0);
    advance(f, 1);
    assert_int_equal(pop_keep(f->e, false), 1);
    dispatched(f);
    assert_int_equal(recv_t(f, 4, LONG_MS, g), 1);
    assert_int_equal(g[0].reconsume, 2);
    /* an explicit delay wins over the ladder */
    assert_int_equal(nack1(f, g[0].handle, 50), POP_OK);
    advance(f, 49);
    assert_int_equal(pop_keep(f->e, false), 0);
    advance(f, 1);
    assert_int_equal(pop_keep(f->e, false), 1); /* reconsume 2 = max: dead */
    dispatched(f);
    assert_int_equal(queue_max(f, "%DLQ%G", 0), 1);
}

/* With a scheduler (as the broker runs it), a nack writes the retry copy
 * at once into the ladder's delay level, or a timer lane for delayMs, and
 * the delivery ends; the scheduler puts the copy on the retry topic when
 * due; past retryMaxTimes the nack is dead at once. */
static void test_pop_nack_through_the_scheduler_ends_the_delivery_at_once(void **state) {
    Fixture *f = *state;
    SchedConfig sc = {.store = f->st, .meta = f->meta, .topics = f->topics,
                      .levels_ms = f->levels, .n_levels = f->n_levels, .thread = false};
    assert_int_equal(sched_open(&sc, &f->sched), MQ_OK);
    pop_close(f->e);
    engine_open(f); /* now with the scheduler */
    put(f, "T", 0, 1, NULL);
    dispatched(f);
    Got g[4];
    assert_int_equal(recv_t(f, 4, LONG_MS, g), 1);
    assert_int_equal(nack1(f, g[0].handle, -1), POP_OK);
    PopStats s;
    pop_stats(f->e, &s);
    assert_int_equal(s.inflight, 0); /* no longer held while it waits */
    assert_int_equal(s.retried, 1);
    dispatched(f);
    assert_int_equal(sched_pending(f->sched), 1); /* in level 3 (300 ms) */
    assert_int_equal(queue_max(f, MSG_SCHEDULE_TOPIC, 2), 1);
    assert_int_equal(recv_t(f, 4, LONG_MS, g + 1), 0);
    /* due by the store's clock: the copy reaches %RETRY%G */
    assert_int_equal(sched_run_once(f->sched, mq_now_ms() + 400, false), 1);
    dispatched(f);
    assert_int_equal(queue_max(f, "%RETRY%G", 0), 1);
    assert_int_equal(recv_t(f, 4, LONG_MS, g), 1);
    assert_true(g[0].retry);
    assert_int_equal(g[0].seq, 1);
    assert_int_equal(g[0].reconsume, 1);
    /* delayMs: a timer lane */
    assert_int_equal(nack1(f, g[0].handle, 5000), POP_OK);
    dispatched(f);
    assert_int_equal(sched_timer_pending(f->sched), 1);
    assert_int_equal(sched_run_once(f->sched, mq_now_ms() + 6000, false), 1);
    dispatched(f);
    assert_int_equal(recv_t(f, 4, LONG_MS, g), 1);
    assert_int_equal(g[0].reconsume, 2);
    /* reconsume 2 = retryMaxTimes: dead at once, nothing scheduled */
    assert_int_equal(nack1(f, g[0].handle, -1), POP_OK);
    dispatched(f);
    assert_int_equal(queue_max(f, "%DLQ%G", 0), 1);
    assert_int_equal(sched_pending(f->sched) + sched_timer_pending(f->sched), 0);
    /* and the keeper has nothing left to move */
    advance(f, 3600000);
    assert_int_equal(pop_keep(f->e, false), 0);
    pop_stats(f->e, &s);
    assert_int_equal(s.inflight, 0);
    assert_int_equal(s.dead, 1);
    assert_int_equal(offset_of(f, "G", "T", 0), 1);
    pop_close(f->e);
    f->e = NULL;
    sched_close(f->sched);
    f->sched = NULL;
    engine_open(f); /* for the teardown */
}

/* ======================================================================
 * 6. Filters
 * ====================================================================== */

static void test_pop_tag_filter_passes_over_other_tags(void **state) {
    Fixture *f = *state;
    put(f, "T", 0, 0, "A");
    put(f, "T", 0, 1, "B");
    put(f, "T", 0, 2, "A");
    put(f, "T", 0, 3, "B");
    put(f, "T", 0, 4, "B");
    put(f, "T", 1, 10, "B");
    put(f, "T", 1, 11, NULL);
    dispatched(f);
    Filter *fa = NULL, *fb = NULL;
    assert_int_equal(filter_compile(FILTER_TAG, "A", 1, &fa, NULL), MQ_OK);
    assert_int_equal(filter_compile(FILTER_TAG, "B", 1, &fb, NULL), MQ_OK);

    Got g[16];
    size_t n = recv_f(f, &f->g, "T", 2, fa, 10, LONG_MS, g);
    assert_int_equal(n, 2);
    assert_seqs(g, n, "0,2");
    assert_int_equal(recv_f(f, &f->g, "T", 2, fa, 10, LONG_MS, g + 2), 0);
    /* queue 1 had nothing for "A": consumed as far as it goes */
    assert_int_equal(offset_of(f, "G", "T", 1), 2);
    int64_t off = offset_of(f, "G", "T", 0);
    assert_true(off == -1 || off == 0);

    assert_int_equal(ack1(f, g[find_seq(g, 2, 0)].handle), POP_OK);
    assert_int_equal(offset_of(f, "G", "T", 0), 2);
    assert_int_equal(ack1(f, g[find_seq(g, 2, 2)].handle), POP_OK);
    assert_int_equal(offset_of(f, "G", "T", 0), 5);
    assert_int_equal(pop_inflight(f->e, "G", "T", 0), 0);

    /* another group, its own state and its own filter */
    MetaGroup gb;
    put_group(f, "GB", false, 2, &gb);
    n = recv_f(f, &gb, "T", 2, fb, 10, LONG_MS, g);
    assert_seqs(g, n, "1,3,4,10");
    assert_int_equal(offset_of(f, "G", "T", 0), 5);

    /* an SQL92 selector has no tag prefilter: the record itself decides */
    Filter *fs = NULL;
    const char *expr = "TAGS = 'A' AND color = 'red'";
    assert_int_equal(filter_compile(FILTER_SQL92, expr, strlen(expr), &fs, NULL), MQ_OK);
    MetaGroup gs;
    put_group(f, "GS", false, 2, &gs);
    n = recv_f(f, &gs, "T", 2, fs, 10, LONG_MS, g);
    assert_seqs(g, n, "0,2");
    assert_int_equal(offset_of(f, "GS", "T", 1), 2);
    filter_unref(fs);
    filter_unref(fa);
    filter_unref(fb);
}

/* A group's one retry topic serves every topic it receives from: each
 * retry goes back to the receivers of its own topic only. */
static void test_pop_retry_topic_is_shared_by_the_group_topics(void **state) {
    Fixture *f = *state;
    assert_int_equal(topic_put(f->topics, "U", 1, RW, false, NULL), MQ_OK);
    put(f, "T", 0, 0, NULL);
    put(f, "U", 0, 100, NULL);
    dispatched(f);
    Got g[4];
    assert_int_equal(recv_t(f, 4, 1000, g), 1);
    assert_int_equal(recv_f(f, &f->g, "U", 1, f->all, 4, 1000, g + 1), 1);
    assert_int_equal(g[1].seq, 100);
    advance(f, 1000);
    assert_int_equal(pop_keep(f->e, false), 2);
    dispatched(f);
    assert_int_equal(queue_max(f, "%RETRY%G", 0), 2);

    Got h[4];
    assert_int_equal(recv_f(f, &f->g, "U", 1, f->all, 4, 1000, h), 1);
    assert_int_equal(h[0].seq, 100);
    assert_true(h[0].retry);
    assert_int_equal(recv_f(f, &f->g, "U", 1, f->all, 4, 1000, h + 1), 0);
    assert_int_equal(recv_t(f, 4, 1000, h + 1), 1);
    assert_int_equal(h[1].seq, 0);
    assert_true(h[1].retry);
    assert_int_equal(h[1].reconsume, 1);
    assert_int_equal(ack1(f, h[0].handle), POP_INVALID); /* a handle of "U" */
    assert_int_equal(ack_as(f, &f->g, "U", h[0].handle), POP_OK);
    assert_int_equal(ack1(f, h[1].handle), POP_OK);
    assert_int_equal(recv_t(f, 4, 1000, h), 0);
    assert_int_equal(recv_f(f, &f->g, "U", 1, f->all, 4, 1000, h), 0);
}

/* More expired deliveries in one queue than a keeper round takes. */
static void test_pop_keeper_moves_a_long_backlog_in_rounds(void **state) {
    Fixture *f = *state;
    for (int i = 0; i < 300; i++) put(f, "T", 0, i, NULL);
    dispatched(f);
    Got *g = calloc(300, sizeof(*g));
    assert_non_null(g);
    assert_int_equal(recv_t(f, 300, 1000, g), 300);
    advance(f, 1000);
    size_t moved = pop_keep(f->e, false);
    assert_true(moved > 0 && moved < 300);
    moved += pop_keep(f->e, false);
    moved += pop_keep(f->e, false);
    assert_int_equal(moved, 300);
    assert_int_equal(pop_keep(f->e, false), 0);
    dispatched(f);
    assert_int_equal(queue_max(f, "%RETRY%G", 0), 300);
    assert_int_equal(offset_of(f, "G", "T", 0), 300);
    size_t n = recv_t(f, 300, 1000, g);
    assert_int_equal(n, 300);
    for (size_t i = 0; i < n; i++) {
        assert_true(g[i].retry);
        assert_int_equal(g[i].reconsume, 1);
        assert_int_equal(g[i].seq, (int)i); /* in the order they were handed out */
    }
    free(g);
}

/* ======================================================================
 * 7. Orderly groups
 * ====================================================================== */

static void test_pop_orderly_queue_waits_for_its_message_in_flight(void **state) {
    Fixture *f = *state;
    assert_int_equal(topic_put(f->topics, "O", 1, RW, true, NULL), MQ_OK);
    MetaGroup go;
    put_group(f, "GO", true, 2, &go);
    for (int i = 1; i <= 3; i++) put(f, "O", 0, i, NULL);
    dispatched(f);

    Got g[8];
    assert_int_equal(recv_f(f, &go, "O", 1, f->all, 1, LONG_MS, g), 1);
    assert_int_equal(g[0].seq, 1);
    assert_int_equal(recv_f(f, &go, "O", 1, f->all, 10, LONG_MS, g + 1), 0);
    assert_int_equal(ack_as(f, &go, "O", g[0].handle), POP_OK);

    assert_int_equal(recv_f(f, &go, "O", 1, f->all, 1, LONG_MS, g), 1);
    assert_int_equal(g[0].seq, 2);
    assert_int_equal(nack_as(f, &go, "O", g[0].handle, 0), POP_OK);
    /* still the queue's message in flight until the keeper has seen it */
    assert_int_equal(recv_f(f, &go, "O", 1, f->all, 10, LONG_MS, g + 1), 0);
    assert_int_equal(pop_keep(f->e, false), 1);
    assert_int_equal(recv_f(f, &go, "O", 1, f->all, 1, LONG_MS, g + 1), 1);
    assert_int_equal(g[1].seq, 2);
    assert_int_equal(g[1].reconsume, 1);
    assert_false(g[1].retry);
    assert_string_equal(g[1].topic, "O");
    assert_string_not_equal(g[1].handle, g[0].handle);
    assert_int_equal(recv_f(f, &go, "O", 1, f->all, 10, LONG_MS, g + 2), 0);
    assert_int_equal(ack_as(f, &go, "O", g[0].handle), POP_EXPIRED);
    assert_int_equal(ack_as(f, &go, "O", g[1].handle), POP_OK);
    assert_int_equal(offset_of(f, "GO", "O", 0), 2);

    assert_int_equal(recv_f(f, &go, "O", 1, f->all, 10, LONG_MS, g), 1);
    assert_int_equal(g[0].seq, 3);
    assert_int_equal(g[0].reconsume, 0);
    MetaTopic t;
    assert_int_equal(topic_get(f->topics, "%RETRY%GO", &t), MQ_ERR_NOTFOUND);
    assert_int_equal(queue_max(f, "%RETRY%GO", 0), 0);
}

static void test_pop_orderly_expiry_delay_and_dead_letter(void **state) {
    Fixture *f = *state;
    assert_int_equal(topic_put(f->topics, "O", 2, RW, true, NULL), MQ_OK);
    MetaGroup go;
    put_group(f, "GO", true, 1, &go);
    put(f, "O", 0, 1, NULL);
    put(f, "O", 0, 2, NULL);
    put(f, "O", 1, 10, NULL);
    dispatched(f);

    /* queue 1 is not held up by queue 0 */
    Got g[8];
    assert_int_equal(recv_f(f, &go, "O", 2, f->all, 1, 1000, g), 1);
    Got first = g[0];
    assert_int_equal(recv_f(f, &go, "O", 2, f->all, 1, 1000, g), 1);
    assert_int_equal(first.queue_id + g[0].queue_id, 1);
    assert_int_equal(recv_f(f, &go, "O", 2, f->all, 10, 1000, g + 1), 0);
    Got m1 = first.seq == 1 ? first : g[0];
    assert_int_equal(m1.seq, 1);
    assert_int_equal(ack_as(f, &go, "O", (first.seq == 10 ? first : g[0]).handle), POP_OK);

    /* invisibility ends: it waits in place and comes back first */
    advance(f, 1000);
    assert_int_equal(ack_as(f, &go, "O", m1.handle), POP_EXPIRED);
    assert_int_equal(pop_keep(f->e, false), 1);
    assert_int_equal(recv_f(f, &go, "O", 2, f->all, 1, 1000, g), 1);
    assert_int_equal(g[0].seq, 1);
    assert_int_equal(g[0].reconsume, 1);

    /* nack without delay: orderly_retry_delay_ms (1000); reconsume 1 is
     * retryMaxTimes: dead, and the queue moves on */
    assert_int_equal(nack_as(f, &go, "O", g[0].handle, -1), POP_OK);
    advance(f, 999);
    assert_int_equal(pop_keep(f->e, false), 0);
    assert_int_equal(recv_f(f, &go, "O", 2, f->all, 10, 1000, g + 1), 0);
    advance(f, 1);
    assert_int_equal(pop_keep(f->e, false), 1);
    dispatched(f);
    assert_int_equal(queue_max(f, "%DLQ%GO", 0), 1);
    char rt[64];
    uint32_t rc = 0;
    assert_int_equal(read_at(f, "%DLQ%GO", 0, 0, rt, sizeof(rt), &rc), 1);
    assert_string_equal(rt, "O");
    assert_int_equal(rc, 2);
    assert_int_equal(recv_f(f, &go, "O", 2, f->all, 10, 1000, g), 1);
    assert_int_equal(g[0].seq, 2);
    assert_int_equal(g[0].reconsume, 0);
    assert_int_equal(offset_of(f, "GO", "O", 0), 1);
    MetaTopic t;
    assert_int_equal(topic_get(f->topics, "%RETRY%GO", &t), MQ_ERR_NOTFOUND);
}

/* ======================================================================
 * 8. Restart
 * ====================================================================== */

enum { RESTART_CRASH, RESTART_CRASH_AFTER_SNAPSHOT, RESTART_CLEAN };

/* Builds some state, restarts as 'how' says, and checks that it is the
 * same state: acked messages stay acked, in-flight ones come back once
 * their invisibility ends, with their retry counts, and handles stay
 * valid. */
static void restart_keeps_state(Fixture *f, int how) {
    for (int i = 0; i < 4; i++) put(f, "T", 0, i, NULL);
    for (int i = 10; i < 14; i++) put(f, "T", 1, i, NULL);
    dispatched(f);
    Got g[16];
    assert_int_equal(recv_t(f, 16, 10000, g), 8);
    assert_int_equal(nack1(f, g[find_seq(g, 8, 1)].handle, 0), POP_OK);
    assert_int_equal(pop_keep(f->e, false), 1);
    dispatched(f);
    if (how == RESTART_CRASH_AFTER_SNAPSHOT) assert_int_equal(pop_keep(f->e, true), 0);
    Got r[4];
    assert_int_equal(recv_t(f, 16, 10000, r), 1); /* m1 from the retry topic */
    assert_int_equal(r[0].seq, 1);
    assert_int_equal(r[0].reconsume, 1);
    assert_int_equal(ack1(f, g[find_seq(g, 8, 0)].handle), POP_OK);
    assert_int_equal(ack1(f, g[find_seq(g, 8, 2)].handle), POP_OK);
    assert_int_equal(ack1(f, g[find_seq(g, 8, 10)].handle), POP_OK);
    assert_int_equal(nack1(f, g[find_seq(g, 8, 11)].handle, 5000), POP_OK);
    assert_int_equal(offset_of(f, "G", "T", 0), 3);
    assert_int_equal(offset_of(f, "G", "T", 1), 1);
    /* in flight: m3, m12, m13 (T0 + 10000), m11 (T0 + 5000), retry m1 */
    dispatched(f);

    if (how == RESTART_CLEAN) {
        char *data = strdup(f->data);
        world_close(f);
        world_open(f, data);
        free(data);
    } else {
        /* kill -9: a copy of the live directory (the commit log is in the
         * page cache, meta.db in its WAL), opened as the next run */
        char *copy = tu_path(f->dir, "d2");
        char cmd[4096];
        snprintf(cmd, sizeof(cmd), "cp -a '%s' '%s'", f->data, copy);
        assert_int_equal(system(cmd), 0);
        world_close(f);
        world_open(f, copy);
        free(copy);
    }
    /* the group is whatever meta.db says now */
    assert_int_equal(group_get(f->groups, "G", &f->g), MQ_OK);

    assert_int_equal(offset_of(f, "G", "T", 0), 3);
    assert_int_equal(offset_of(f, "G", "T", 1), 1);
    assert_int_equal(pop_inflight(f->e, "G", "T", 0), 1);
    assert_int_equal(pop_inflight(f->e, "G", "T", 1), 3);
    Got h[16];
    assert_int_equal(recv_t(f, 16, 10000, h), 0);
    /* handles outlive the restart */
    assert_int_equal(ack1(f, g[find_seq(g, 8, 12)].handle), POP_OK);
    assert_int_equal(ack1(f, g[find_seq(g, 8, 0)].handle), POP_EXPIRED);
    assert_int_equal(ack1(f, g[find_seq(g, 8, 1)].handle), POP_EXPIRED);
    assert_int_equal(ack1(f, g[find_seq(g, 8, 11)].handle), POP_EXPIRED); /* nacked */

    advance(f, 4999);
    assert_int_equal(pop_keep(f->e, false), 0);
    advance(f, 1);
    assert_int_equal(pop_keep(f->e, false), 1); /* m11 */
    dispatched(f);
    assert_int_equal(recv_t(f, 16, 10000, h), 1);
    assert_int_equal(h[0].seq, 11);
    assert_true(h[0].retry);
    assert_int_equal(h[0].reconsume, 1);

    advance(f, 5000); /* T0 + 10000: m3, m13 and the retry delivery of m1 */
    assert_int_equal(ack1(f, g[find_seq(g, 8, 13)].handle), POP_EXPIRED);
    assert_int_equal(pop_keep(f->e, false), 3);
    dispatched(f);
    size_t n = recv_t(f, 16, 10000, h + 1);
    assert_int_equal(n, 3);
    assert_seqs(h + 1, 3, "1,3,13");
    for (size_t i = 1; i <= 3; i++) {
        assert_true(h[i].retry);
        assert_int_equal(h[i].reconsume, h[i].seq == 1 ? 2 : 1);
    }
    for (size_t i = 0; i <= 3; i++) assert_int_equal(ack1(f, h[i].handle), POP_OK);
    assert_int_equal(recv_t(f, 16, 10000, h), 0);
    assert_int_equal(offset_of(f, "G", "T", 0), 4);
    assert_int_equal(offset_of(f, "G", "T", 1), 4);
    assert_int_equal(pop_inflight(f->e, "G", "T", 0), 0);
    assert_int_equal(pop_inflight(f->e, "G", "T", 1), 0);
    advance(f, 3600000);
    assert_int_equal(pop_keep(f->e, false), 0);
    assert_int_equal(recv_t(f, 16, 10000, h), 0);
}

static void test_pop_crash_replays_the_whole_journal(void **state) {
    restart_keeps_state(*state, RESTART_CRASH);
}

static void test_pop_crash_after_snapshot_replays_the_rest(void **state) {
    restart_keeps_state(*state, RESTART_CRASH_AFTER_SNAPSHOT);
}

static void test_pop_clean_restart_keeps_state(void **state) {
    restart_keeps_state(*state, RESTART_CLEAN);
}

enum { SNAP_NONE, SNAP_BEFORE_DROP, SNAP_AFTER_DROP };

/* A drop and a reset in the journal, then a crash: the state after them
 * comes back, not the one before. */
static void crash_after_drop_and_reset(Fixture *f, int snap) {
    for (int i = 0; i < 3; i++) put(f, "T", 0, i, NULL);
    for (int i = 10; i < 12; i++) put(f, "T", 1, i, NULL);
    assert_int_equal(topic_put(f->topics, "U", 1, RW, false, NULL), MQ_OK);
    put(f, "U", 0, 100, NULL);
    dispatched(f);
    Got g[8];
    assert_int_equal(recv_t(f, 8, LONG_MS, g), 5);
    assert_int_equal(ack1(f, g[find_seq(g, 5, 0)].handle), POP_OK);
    /* in flight on "U" when dropped, and never received again */
    assert_int_equal(recv_f(f, &f->g, "U", 1, f->all, 8, LONG_MS, g + 5), 1);
    assert_int_equal(offset_of(f, "G", "T", 0), 1);
    if (snap == SNAP_BEFORE_DROP) pop_keep(f->e, true);
    assert_int_equal(pop_drop_group(f->e, "G"), MQ_OK);
    if (snap == SNAP_AFTER_DROP) pop_keep(f->e, true);

    Got h[8];
    assert_int_equal(recv_t(f, 8, LONG_MS, h), 4);
    assert_seqs(h, 4, "1,2,10,11");
    assert_int_equal(ack1(f, h[find_seq(h, 4, 1)].handle), POP_OK);
    assert_int_equal(meta_offset_set(f->meta, "G", "T", 1, 1), MQ_OK);
    assert_int_equal(pop_reset_offset(f->e, "G", "T", 1, 1), MQ_OK);
    Got k[4];
    assert_int_equal(recv_t(f, 8, LONG_MS, k), 1);
    assert_int_equal(k[0].seq, 11);
    const char *m2 = h[find_seq(h, 4, 2)].handle;
    dispatched(f);

    char *copy = tu_path(f->dir, "d2");
    char cmd[4096];
    snprintf(cmd, sizeof(cmd), "cp -a '%s' '%s'", f->data, copy);
    assert_int_equal(system(cmd), 0);
    world_close(f);
    world_open(f, copy);
    free(copy);

    assert_int_equal(offset_of(f, "G", "T", 0), 2);
    assert_int_equal(offset_of(f, "G", "T", 1), 1);
    assert_int_equal(pop_inflight(f->e, "G", "T", 0), 1);
    assert_int_equal(pop_inflight(f->e, "G", "T", 1), 1);
    assert_int_equal(pop_inflight(f->e, "G", "U", 0), 0);
    Got r[8];
    assert_int_equal(recv_t(f, 8, LONG_MS, r), 0);
    assert_int_equal(ack1(f, h[find_seq(h, 4, 10)].handle), POP_EXPIRED); /* reset away */
    assert_int_equal(ack1(f, m2), POP_OK);
    advance(f, LONG_MS);
    assert_int_equal(pop_keep(f->e, false), 1);
    dispatched(f);
    assert_int_equal(recv_t(f, 8, LONG_MS, r), 1);
    assert_int_equal(r[0].seq, 11);
    assert_int_equal(r[0].reconsume, 1);
    assert_true(r[0].retry);
    assert_int_equal(offset_of(f, "G", "T", 0), 3);
    assert_int_equal(offset_of(f, "G", "T", 1), 2);
}

static void test_pop_crash_after_drop_and_reset(void **state) {
    crash_after_drop_and_reset(*state, SNAP_NONE);
}

static void test_pop_crash_after_drop_and_reset_snapshot_before_drop(void **state) {
    crash_after_drop_and_reset(*state, SNAP_BEFORE_DROP);
}

static void test_pop_crash_after_drop_and_reset_snapshot_after_drop(void **state) {
    crash_after_drop_and_reset(*state, SNAP_AFTER_DROP);
}

/* ======================================================================
 * 9-10. Offset reset, drops, stale handles
 * ====================================================================== */

static void test_pop_reset_offset_redelivers_from_there(void **state) {
    Fixture *f = *state;
    /* a queue never received from: nothing to do */
    assert_int_equal(pop_reset_offset(f->e, "G", "T", 0, 0), MQ_OK);
    for (int i = 0; i < 2; i++) put(f, "T", 0, i, NULL);
    for (int i = 10; i < 12; i++) put(f, "T", 1, i, NULL);
    dispatched(f);
    Got g[8];
    assert_int_equal(recv_t(f, 8, LONG_MS, g), 4);
    for (int i = 0; i < 4; i++) assert_int_equal(ack1(f, g[i].handle), POP_OK);
    assert_int_equal(offset_of(f, "G", "T", 0), 2);
    assert_int_equal(offset_of(f, "G", "T", 1), 2);
    assert_int_equal(recv_t(f, 8, LONG_MS, g), 0);

    for (uint32_t q = 0; q < 2; q++) {
        assert_int_equal(meta_offset_set(f->meta, "G", "T", q, 0), MQ_OK); /* as the caller */
        assert_int_equal(pop_reset_offset(f->e, "G", "T", q, 0), MQ_OK);
    }
    assert_int_equal(recv_t(f, 8, LONG_MS, g), 4);
    assert_seqs(g, 4, "0,1,10,11");
    for (int i = 0; i < 4; i++) assert_int_equal(g[i].reconsume, 0);

    /* with messages in flight: they are forgotten and handed out again */
    assert_int_equal(ack1(f, g[find_seq(g, 4, 0)].handle), POP_OK);
    assert_int_equal(pop_reset_offset(f->e, "G", "T", 0, 1), MQ_OK);
    assert_int_equal(pop_inflight(f->e, "G", "T", 0), 0);
    assert_int_equal(pop_inflight(f->e, "G", "T", 1), 2);
    Got h[8];
    assert_int_equal(recv_t(f, 8, LONG_MS, h), 1);
    assert_int_equal(h[0].seq, 1);
    assert_int_equal(ack1(f, h[0].handle), POP_OK);
    assert_int_equal(offset_of(f, "G", "T", 0), 2);
}

static void test_pop_drop_group_forgets_its_state(void **state) {
    Fixture *f = *state;
    for (int i = 0; i < 3; i++) put(f, "T", 0, i, NULL);
    for (int i = 10; i < 13; i++) put(f, "T", 1, i, NULL);
    dispatched(f);
    Got g[8];
    assert_int_equal(recv_t(f, 8, LONG_MS, g), 6);
    assert_int_equal(ack1(f, g[find_seq(g, 6, 0)].handle), POP_OK);
    assert_int_equal(ack1(f, g[find_seq(g, 6, 1)].handle), POP_OK);
    assert_int_equal(offset_of(f, "G", "T", 0), 2);

    assert_int_equal(pop_drop_group(f->e, "G"), MQ_OK);
    assert_int_equal(ack1(f, g[find_seq(g, 6, 2)].handle), POP_EXPIRED);
    assert_int_equal(nack1(f, g[find_seq(g, 6, 10)].handle, 0), POP_EXPIRED);
    assert_int_equal(pop_inflight(f->e, "G", "T", 0), 0);
    assert_int_equal(pop_inflight(f->e, "G", "T", 1), 0);
    PopStats s;
    pop_stats(f->e, &s);
    assert_int_equal(s.inflight, 0);
    assert_int_equal(s.queues, 0);
    advance(f, LONG_MS + 1);
    assert_int_equal(pop_keep(f->e, false), 0); /* nothing left to expire */

    /* receiving again starts at the consumer offset: queue 0 at 2, queue
     * 1 (never committed, still holds message 0) at 0 */
    Got h[8];
    assert_int_equal(recv_t(f, 8, LONG_MS, h), 4);
    assert_seqs(h, 4, "2,10,11,12");

    /* the group deleted and made again: no offsets, everything again */
    assert_int_equal(group_delete(f->groups, "G"), MQ_OK);
    assert_int_equal(pop_drop_group(f->e, "G"), MQ_OK);
    put_group(f, "G", false, 2, &f->g);
    assert_int_equal(recv_t(f, 8, LONG_MS, h), 6);
    assert_seqs(h, 6, "0,1,2,10,11,12");
    assert_int_equal(pop_drop_group(f->e, ""), MQ_ERR_INVAL);
}

static void test_pop_drop_topic_forgets_its_state(void **state) {
    Fixture *f = *state;
    MetaGroup g2;
    put_group(f, "G2", false, 2, &g2);
    put(f, "T", 0, 0, NULL);
    dispatched(f);
    Got g[4], h[4];
    assert_int_equal(recv_t(f, 4, LONG_MS, g), 1);
    assert_int_equal(recv_f(f, &g2, "T", 2, f->all, 4, LONG_MS, h), 1);
    assert_int_equal(pop_drop_topic(f->e, "T"), MQ_OK);
    assert_int_equal(ack1(f, g[0].handle), POP_EXPIRED);
    assert_int_equal(ack_as(f, &g2, "T", h[0].handle), POP_EXPIRED);
    assert_int_equal(pop_inflight(f->e, "G2", "T", 0), 0);
}

/* A handle handed out before an offset reset or a drop belongs to a
 * delivery that is over: once the message is handed out again, only the
 * new handle may ack it (pop.h: EXPIRED = "redelivered since"). */
static void test_pop_handle_from_before_reset_is_expired(void **state) {
    Fixture *f = *state;
    put(f, "T", 0, 0, NULL);
    dispatched(f);
    Got g[4], h[4];
    assert_int_equal(recv_t(f, 4, LONG_MS, g), 1);
    assert_int_equal(pop_reset_offset(f->e, "G", "T", 0, 0), MQ_OK);
    assert_int_equal(recv_t(f, 4, LONG_MS, h), 1);
    assert_int_equal(h[0].seq, 0);
    assert_string_not_equal(h[0].handle, g[0].handle);
    assert_int_equal(ack1(f, g[0].handle), POP_EXPIRED);
    assert_int_equal(ack1(f, h[0].handle), POP_OK);
}

static void test_pop_handle_from_before_drop_is_expired(void **state) {
    Fixture *f = *state;
    put(f, "T", 0, 0, NULL);
    dispatched(f);
    Got g[4], h[4];
    assert_int_equal(recv_t(f, 4, LONG_MS, g), 1);
    assert_int_equal(pop_drop_group(f->e, "G"), MQ_OK);
    assert_int_equal(recv_t(f, 4, LONG_MS, h), 1);
    assert_int_equal(h[0].seq, 0);
    assert_string_not_equal(h[0].handle, g[0].handle);
    assert_int_equal(ack1(f, g[0].handle), POP_EXPIRED);
    assert_int_equal(ack1(f, h[0].handle), POP_OK);
}

/* ======================================================================
 * 11. In-flight cap
 * ====================================================================== */

static void test_pop_inflight_max_caps_each_queue(void **state) {
    Fixture *f = *state;
    pop_close(f->e);
    f->inflight_max = 3;
    engine_open(f);
    for (int i = 0; i < 5; i++) put(f, "T", 0, i, NULL);
    for (int i = 10; i < 15; i++) put(f, "T", 1, i, NULL);
    dispatched(f);
    Got g[16];
    size_t n = recv_t(f, 10, LONG_MS, g);
    assert_int_equal(n, 6);
    assert_seqs(g, n, "0,1,2,10,11,12");
    assert_int_equal(recv_t(f, 10, LONG_MS, g + n), 0);
    assert_int_equal(pop_inflight(f->e, "G", "T", 0), 3);

    /* acking one (not the first) frees one place in its queue only */
    assert_int_equal(ack1(f, g[find_seq(g, 6, 1)].handle), POP_OK);
    assert_int_equal(recv_t(f, 10, LONG_MS, g + 6), 1);
    assert_int_equal(g[6].seq, 3);
    assert_int_equal(recv_t(f, 10, LONG_MS, g + 7), 0);
}

/* ======================================================================
 * 12. Threads
 * ====================================================================== */

#define SMOKE_MSGS 2000
#define SMOKE_THREADS 4

typedef struct Smoke {
    Fixture *f;
    atomic_int delivered[SMOKE_MSGS];
    atomic_int acked[SMOKE_MSGS];
    atomic_int total_acked;
    atomic_int errors;  /* unexpected return codes, bad records */
    atomic_int not_ok;  /* ack results other than OK */
    int64_t deadline_ms; /* monotonic */
} Smoke;

static void *smoke_worker(void *arg) {
    Smoke *s = arg;
    Fixture *f = s->f;
    PopRequest req = {.group = &f->g, .topic = "T", .read_queues = 2, .filter = f->all,
                      .max_messages = 8, .invisible_ms = LONG_MS};
    while (atomic_load(&s->total_acked) < SMOKE_MSGS && mq_mono_ms() < s->deadline_ms) {
        PopDelivery d[8];
        size_t n = 0;
        if (pop_receive(f->e, &req, d, &n) != MQ_OK) {
            atomic_fetch_add(&s->errors, 1);
            continue;
        }
        const char *hs[8];
        size_t lens[8];
        int seqs[8];
        for (size_t i = 0; i < n; i++) {
            ClRecord rec;
            MappedFile *ref = NULL;
            seqs[i] = -1;
            if (store_read_msg(f->st, d[i].phys_off, &rec, &ref) == MQ_OK && rec.body.len > 1 &&
                rec.body.len < 16) {
                char body[16] = {0};
                memcpy(body, rec.body.ptr, rec.body.len);
                int seq = atoi(body + 1);
                if (seq >= 0 && seq < SMOKE_MSGS) seqs[i] = seq;
            }
            mf_unref(&ref);
            if (seqs[i] < 0)
                atomic_fetch_add(&s->errors, 1);
            else
                atomic_fetch_add(&s->delivered[seqs[i]], 1);
            hs[i] = d[i].handle;
            lens[i] = strlen(d[i].handle);
        }
        if (n == 0) continue;
        PopResult res[8];
        if (pop_ack(f->e, &f->g, "T", hs, lens, n, res) != MQ_OK) {
            atomic_fetch_add(&s->errors, 1);
            continue;
        }
        for (size_t i = 0; i < n; i++) {
            if (res[i] != POP_OK) {
                atomic_fetch_add(&s->not_ok, 1);
                continue;
            }
            if (seqs[i] >= 0) atomic_fetch_add(&s->acked[seqs[i]], 1);
            atomic_fetch_add(&s->total_acked, 1);
        }
    }
    return NULL;
}

/* The keeper's snapshots race the workers' changes. */
static void *smoke_keeper(void *arg) {
    Smoke *s = arg;
    while (atomic_load(&s->total_acked) < SMOKE_MSGS && mq_mono_ms() < s->deadline_ms)
        pop_keep(s->f->e, true);
    return NULL;
}

static void test_pop_threads_receive_and_ack_each_message_once(void **state) {
    Fixture *f = *state;
    for (int i = 0; i < SMOKE_MSGS; i++) put(f, "T", (uint32_t)(i % 2), i, NULL);
    dispatched(f);
    Smoke *s = calloc(1, sizeof(*s));
    assert_non_null(s);
    s->f = f;
    s->deadline_ms = mq_mono_ms() + 60000;
    pthread_t th[SMOKE_THREADS];
    pthread_t keeper;
    for (int i = 0; i < SMOKE_THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, smoke_worker, s), 0);
    assert_int_equal(pthread_create(&keeper, NULL, smoke_keeper, s), 0);
    for (int i = 0; i < SMOKE_THREADS; i++) pthread_join(th[i], NULL);
    pthread_join(keeper, NULL);
    assert_int_equal(atomic_load(&s->errors), 0);
    assert_int_equal(atomic_load(&s->not_ok), 0);
    assert_int_equal(atomic_load(&s->total_acked), SMOKE_MSGS);
    for (int i = 0; i < SMOKE_MSGS; i++) {
        if (atomic_load(&s->delivered[i]) != 1 || atomic_load(&s->acked[i]) != 1)
            fail_msg("m%d delivered %d times, acked %d times", i, atomic_load(&s->delivered[i]),
                     atomic_load(&s->acked[i]));
    }
    free(s);
    Got g[4];
    assert_int_equal(recv_t(f, 4, LONG_MS, g), 0);
    assert_int_equal(offset_of(f, "G", "T", 0), SMOKE_MSGS / 2);
    assert_int_equal(offset_of(f, "G", "T", 1), SMOKE_MSGS / 2);
    PopStats st;
    pop_stats(f->e, &st);
    assert_int_equal(st.received, SMOKE_MSGS);
    assert_int_equal(st.acked, SMOKE_MSGS);
    assert_int_equal(st.inflight, 0);

    /* killed now, the last snapshot plus the journal say: all done */
    dispatched(f);
    char *copy = tu_path(f->dir, "d2");
    char cmd[4096];
    snprintf(cmd, sizeof(cmd), "cp -a '%s' '%s'", f->data, copy);
    assert_int_equal(system(cmd), 0);
    world_close(f);
    world_open(f, copy);
    free(copy);
    assert_int_equal(group_get(f->groups, "G", &f->g), MQ_OK);
    assert_int_equal(pop_inflight(f->e, "G", "T", 0), 0);
    assert_int_equal(pop_inflight(f->e, "G", "T", 1), 0);
    assert_int_equal(offset_of(f, "G", "T", 0), SMOKE_MSGS / 2);
    assert_int_equal(offset_of(f, "G", "T", 1), SMOKE_MSGS / 2);
    advance(f, LONG_MS + 1);
    assert_int_equal(pop_keep(f->e, false), 0);
    assert_int_equal(recv_t(f, 4, LONG_MS, g), 0);
}

#define CASE(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void) {
    mq_log_level = MQ_LOG_WARN;
    const struct CMUnitTest tests[] = {
        CASE(test_pop_receive_hands_out_each_message_once),
        CASE(test_pop_receive_rejects_bad_requests),
        CASE(test_pop_ack_results_and_consumer_offset),
        CASE(test_pop_invisibility_end_moves_to_retry_topic),
        CASE(test_pop_nack_retries_then_dead_letters),
        CASE(test_pop_nack_without_delay_follows_the_retry_ladder),
        CASE(test_pop_nack_through_the_scheduler_ends_the_delivery_at_once),
        CASE(test_pop_tag_filter_passes_over_other_tags),
        CASE(test_pop_retry_topic_is_shared_by_the_group_topics),
        CASE(test_pop_keeper_moves_a_long_backlog_in_rounds),
        CASE(test_pop_orderly_queue_waits_for_its_message_in_flight),
        CASE(test_pop_orderly_expiry_delay_and_dead_letter),
        CASE(test_pop_crash_replays_the_whole_journal),
        CASE(test_pop_crash_after_snapshot_replays_the_rest),
        CASE(test_pop_clean_restart_keeps_state),
        CASE(test_pop_crash_after_drop_and_reset),
        CASE(test_pop_crash_after_drop_and_reset_snapshot_before_drop),
        CASE(test_pop_crash_after_drop_and_reset_snapshot_after_drop),
        CASE(test_pop_reset_offset_redelivers_from_there),
        CASE(test_pop_drop_group_forgets_its_state),
        CASE(test_pop_drop_topic_forgets_its_state),
        CASE(test_pop_handle_from_before_reset_is_expired),
        CASE(test_pop_handle_from_before_drop_is_expired),
        CASE(test_pop_inflight_max_caps_each_queue),
        CASE(test_pop_threads_receive_and_ack_each_message_once),
    };
    return cmocka_run_group_tests_name("pop", tests, NULL, NULL);
}
