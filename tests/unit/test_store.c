/*
 * test_store.c - the store façade: dispatch into consume queues and index,
 * reads with tag filters, reopen, crash recovery (abort file), rebuild of
 * deleted queues, key queries with hash collisions, time search, retention,
 * disk-full refusal, topic deletion, checkpoint failure injection.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint.h"
#include "io.h"
#include "store.h"

typedef struct Fixture {
    char *dir;
    Store *st;
    StoreConfig cfg;
    int64_t now_ms;
    int arrivals;
} Fixture;

static int64_t test_clock(void *arg) { return ((Fixture *)arg)->now_ms; }

static void on_arrival(void *arg, MqSlice topic, uint32_t queue_id, uint64_t max_off) {
    (void)topic, (void)queue_id, (void)max_off;
    __atomic_add_fetch(&((Fixture *)arg)->arrivals, 1, __ATOMIC_RELAXED);
}

static int setup(void **state) {
    Fixture *f = calloc(1, sizeof(*f));
    f->dir = tu_mkdtemp("store");
    store_config_defaults(&f->cfg, f->dir);
    f->cfg.segment_size = 64 * 1024;
    f->cfg.cq_file_entries = 64;
    f->cfg.index_slots = 128;
    f->cfg.index_entries = 1024;
    f->cfg.flush_interval_ms = 20;
    /* The housekeeper thread stays idle: tests run rounds themselves with
     * store_housekeep(), so that retention and checkpoints happen when the
     * test says (test_store_housekeeper_thread_checkpoints covers the thread). */
    f->cfg.flush_cq_interval_ms = 600000;
    f->cfg.on_arrival = on_arrival;
    f->cfg.on_arrival_arg = f;
    f->now_ms = mq_now_ms();
    assert_int_equal(store_open(&f->cfg, &f->st), MQ_OK);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    Fixture *f = *state;
    store_close(f->st);
    mq_io_set(NULL);
    tu_rmtree(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

static void reopen(Fixture *f) {
    store_close(f->st);
    f->st = NULL;
    assert_int_equal(store_open(&f->cfg, &f->st), MQ_OK);
}

/* put_msg appends one message with an optional tag and keys. */
static ClAppendResult put_msg(Fixture *f, const char *topic, uint32_t qid, const char *body,
                              const char *tag, const char *keys) {
    char props[256];
    size_t plen = 0;
    if (tag) plen += (size_t)snprintf(props + plen, sizeof(props) - plen, "TAGS\001%s\002", tag);
    if (keys) plen += (size_t)snprintf(props + plen, sizeof(props) - plen, "KEYS\001%s\002", keys);
    ClMessage m = {.topic = mq_slice(topic, strlen(topic)), .queue_id = qid,
                   .body = mq_slice(body, strlen(body)), .props = mq_slice(props, plen)};
    ClAppendResult r;
    assert_int_equal(store_put(f->st, &m, 1, &r), MQ_OK);
    return r;
}

static void read_body(Fixture *f, uint64_t phys, char *out, size_t cap) {
    ClRecord rec;
    MappedFile *ref = NULL;
    assert_int_equal(store_read_msg(f->st, phys, &rec, &ref), MQ_OK);
    size_t n = rec.body.len < cap - 1 ? rec.body.len : cap - 1;
    memcpy(out, rec.body.ptr, n);
    out[n] = 0;
    mf_unref(&ref);
}

static void test_store_put_dispatches_to_queue_and_notifies(void **state) {
    Fixture *f = *state;
    for (int i = 0; i < 10; i++) {
        char body[16];
        snprintf(body, sizeof(body), "m%d", i);
        put_msg(f, "orders", 1, body, NULL, NULL);
    }
    assert_int_equal(store_wait_dispatched(f->st, 5000), MQ_OK);
    uint64_t min, max;
    store_queue_range(f->st, mq_slice("orders", 6), 1, &min, &max);
    assert_true(min == 0 && max == 10);
    store_queue_range(f->st, mq_slice("orders", 6), 2, &min, &max);
    assert_true(min == 0 && max == 0);
    CqEntry e[16];
    uint64_t offs[16];
    size_t n = 0;
    uint64_t next = 0;
    assert_int_equal(store_read_queue(f->st, mq_slice("orders", 6), 1, 3, 16, 100, NULL, 0, e,
                                      offs, &n, &next),
                     MQ_OK);
    assert_int_equal(n, 7);
    assert_true(next == 10 && offs[0] == 3);
    char body[32];
    read_body(f, e[0].phys_off, body, sizeof(body));
    assert_string_equal(body, "m3");
    assert_int_equal(__atomic_load_n(&f->arrivals, __ATOMIC_RELAXED), 10);
    assert_int_equal(store_read_queue(f->st, mq_slice("nope", 4), 0, 0, 16, 100, NULL, 0, e,
                                      offs, &n, &next),
                     MQ_ERR_NOTFOUND);
    assert_true(store_queue_last_ts(f->st, mq_slice("orders", 6), 1) > 0);
}

static void test_store_tag_filter_skips_other_tags(void **state) {
    Fixture *f = *state;
    const char *tags[] = {"A", "B", NULL, "A", "C", "B"};
    for (int i = 0; i < 6; i++) {
        char body[16];
        snprintf(body, sizeof(body), "%d", i);
        put_msg(f, "t", 0, body, tags[i], NULL);
    }
    assert_int_equal(store_wait_dispatched(f->st, 5000), MQ_OK);
    uint64_t want[2] = {store_tag_hash(mq_slice("A", 1)), store_tag_hash(mq_slice("B", 1))};
    CqEntry e[8];
    uint64_t offs[8];
    size_t n = 0;
    uint64_t next = 0;
    assert_int_equal(store_read_queue(f->st, mq_slice("t", 1), 0, 0, 8, 100, want, 2, e, offs,
                                      &n, &next),
                     MQ_OK);
    assert_int_equal(n, 4);
    assert_true(offs[0] == 0 && offs[1] == 1 && offs[2] == 3 && offs[3] == 5);
    assert_true(store_tag_hash(mq_slice("", 0)) == 0);
}

static void test_store_reopen_continues_queue_offsets(void **state) {
    Fixture *f = *state;
    put_msg(f, "t", 0, "a", NULL, NULL);
    put_msg(f, "t", 0, "b", NULL, NULL);
    reopen(f);
    StoreStats ss;
    store_stats(f->st, &ss);
    assert_false(ss.recovered_from_crash);
    ClAppendResult r = put_msg(f, "t", 0, "c", NULL, NULL);
    assert_true(r.queue_off == 2);
    assert_int_equal(store_wait_dispatched(f->st, 5000), MQ_OK);
    uint64_t min, max;
    store_queue_range(f->st, mq_slice("t", 1), 0, &min, &max);
    assert_true(max == 3);
}

static void test_store_clean_close_leaves_checkpoint_and_no_abort_file(void **state) {
    Fixture *f = *state;
    char *abort_path = tu_path(f->dir, "abort");
    char *ckpt_path = tu_path(f->dir, "checkpoint");
    assert_true(tu_exists(abort_path));
    ClAppendResult r = put_msg(f, "t", 0, "x", NULL, NULL);
    store_close(f->st);
    f->st = NULL;
    assert_false(tu_exists(abort_path));
    Checkpoint ck;
    assert_int_equal(ckpt_read(ckpt_path, &ck), MQ_OK);
    assert_true(ck.log_flushed == r.phys_off + r.size);
    assert_true(ck.cq_flushed == ck.log_flushed && ck.index_flushed == ck.log_flushed);
    assert_int_equal(store_open(&f->cfg, &f->st), MQ_OK);
    free(abort_path);
    free(ckpt_path);
}

/* crash_copy simulates kill -9: copy the data directory while the store is
 * open (abort file included), as a crashed process would leave it. */
static char *crash_copy(Fixture *f) {
    assert_int_equal(store_wait_dispatched(f->st, 5000), MQ_OK);
    char *copy = tu_mkdtemp("store-crash");
    char cmd[8192];
    snprintf(cmd, sizeof(cmd), "cp -a '%s/.' '%s/'", f->dir, copy);
    assert_int_equal(system(cmd), 0);
    return copy;
}

static void switch_dir(Fixture *f, char *dir) {
    store_close(f->st);
    f->st = NULL;
    tu_rmtree(f->dir);
    free(f->dir);
    f->dir = dir;
    f->cfg.data_dir = dir;
}

static void test_store_crash_recovery_truncates_torn_tail_and_drops_its_queue_entry(void **state) {
    Fixture *f = *state;
    ClAppendResult r[30];
    for (int i = 0; i < 30; i++) r[i] = put_msg(f, "t", 0, "payload-payload", NULL, "key1");
    char *copy = crash_copy(f);
    switch_dir(f, copy);
    /* Tear the last record in the copy. */
    char *seg = tu_path(f->dir, "commitlog/%020d", 0);
    int fd = open(seg, O_RDWR);
    uint8_t junk[4] = {0xde, 0xad, 0xbe, 0xef};
    assert_int_equal(pwrite(fd, junk, 4, (off_t)(r[29].phys_off + 20)), 4);
    close(fd);
    free(seg);
    assert_int_equal(store_open(&f->cfg, &f->st), MQ_OK);
    StoreStats ss;
    store_stats(f->st, &ss);
    assert_true(ss.recovered_from_crash);
    assert_true(ss.write_offset == r[29].phys_off);
    uint64_t min, max;
    store_queue_range(f->st, mq_slice("t", 1), 0, &min, &max);
    assert_true(max == 29);
    /* The queue continues where the log does. */
    ClAppendResult again = put_msg(f, "t", 0, "next", NULL, NULL);
    assert_true(again.queue_off == 29 && again.phys_off == r[29].phys_off);
    /* The index no longer returns the torn record (it was overwritten). */
    assert_int_equal(store_wait_dispatched(f->st, 5000), MQ_OK);
    uint64_t offs[64];
    size_t n = 0;
    assert_int_equal(store_query_key(f->st, mq_slice("t", 1), mq_slice("key1", 4), 0, INT64_MAX,
                                     64, offs, &n),
                     MQ_OK);
    assert_int_equal(n, 29);
}

static void test_store_crash_rebuilds_entries_past_checkpoint(void **state) {
    Fixture *f = *state;
    for (int i = 0; i < 20; i++) put_msg(f, "t", 1, "a", NULL, NULL);
    store_housekeep(f->st); /* checkpoint now */
    for (int i = 0; i < 20; i++) put_msg(f, "t", 1, "b", NULL, "later");
    char *copy = crash_copy(f);
    /* Lose the queue's tail in the copy: as if its pages never hit disk. */
    char *cq = tu_path(copy, "consumequeue/t/1/%020d", 0);
    int fd = open(cq, O_RDWR);
    uint8_t zero[20 * 30] = {0};
    assert_int_equal(pwrite(fd, zero, sizeof(zero), 20 * 15), (ssize_t)sizeof(zero));
    close(fd);
    free(cq);
    switch_dir(f, copy);
    assert_int_equal(store_open(&f->cfg, &f->st), MQ_OK);
    uint64_t min, max;
    store_queue_range(f->st, mq_slice("t", 1), 1, &min, &max);
    assert_true(max == 40);
    CqEntry e[40];
    uint64_t offs[40];
    size_t n = 0;
    uint64_t next;
    assert_int_equal(store_read_queue(f->st, mq_slice("t", 1), 1, 0, 40, 40, NULL, 0, e, offs, &n,
                                      &next),
                     MQ_OK);
    /* entries 15..19 were before the checkpoint, which vouched for them:
     * recovery does not look there and they stay empty slots that reads
     * skip; 20..39 are rebuilt from the log */
    for (size_t i = 0; i < n; i++) {
        char body[8];
        read_body(f, e[i].phys_off, body, sizeof(body));
        assert_string_equal(body, offs[i] < 20 ? "a" : "b");
    }
    assert_true(offs[n - 1] == 39);
}

/* Waits (up to 5 s) until the async flusher has synced the whole log. */
static void wait_log_flushed(Fixture *f) {
    for (int i = 0; i < 500; i++) {
        StoreStats ss;
        store_stats(f->st, &ss);
        if (ss.flushed_offset == ss.write_offset && i > 0) return;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    fail_msg("the log was never flushed");
}

static Checkpoint read_ckpt(Fixture *f) {
    char *path = tu_path(f->dir, "checkpoint");
    Checkpoint ck;
    assert_int_equal(ckpt_read(path, &ck), MQ_OK);
    free(path);
    return ck;
}

/* The index is synced on its own, longer interval; its checkpoint position
 * lags the queues' meanwhile, and recovery re-indexes from it. */
static void test_store_index_syncs_on_its_own_interval(void **state) {
    Fixture *f = *state;
    f->cfg.flush_index_interval_ms = 600000;
    reopen(f); /* open syncs everything once */
    uint64_t at_open = read_ckpt(f).index_flushed;
    for (int i = 0; i < 10; i++) put_msg(f, "t", 0, "v", NULL, "lagging-key");
    assert_int_equal(store_wait_dispatched(f->st, 5000), MQ_OK);
    wait_log_flushed(f);
    store_housekeep(f->st);
    Checkpoint ck = read_ckpt(f);
    assert_true(ck.cq_flushed > at_open);
    assert_true(ck.index_flushed == at_open);
    char *copy = crash_copy(f);
    switch_dir(f, copy);
    assert_int_equal(store_open(&f->cfg, &f->st), MQ_OK);
    assert_int_equal(store_wait_dispatched(f->st, 5000), MQ_OK);
    uint64_t offs[16];
    size_t n = 0;
    assert_int_equal(store_query_key(f->st, mq_slice("t", 1), mq_slice("lagging-key", 11), 0,
                                     INT64_MAX, 16, offs, &n),
                     MQ_OK);
    assert_int_equal(n, 10);
    /* once the interval has passed, a round syncs the index too */
    f->cfg.flush_index_interval_ms = 1;
    reopen(f);
    put_msg(f, "t", 0, "v", NULL, "k2");
    assert_int_equal(store_wait_dispatched(f->st, 5000), MQ_OK);
    wait_log_flushed(f); /* also lets the 1 ms interval pass */
    store_housekeep(f->st);
    ck = read_ckpt(f);
    assert_true(ck.index_flushed == ck.cq_flushed);
}

static void test_store_rebuilds_deleted_consume_queues_from_log(void **state) {
    Fixture *f = *state;
    for (int i = 0; i < 150; i++) put_msg(f, i % 2 ? "odd" : "even", (uint32_t)(i % 3), "v", "T",
                                          NULL);
    store_close(f->st);
    f->st = NULL;
    char *cq = tu_path(f->dir, "consumequeue");
    tu_rmtree(cq);
    free(cq);
    assert_int_equal(store_open(&f->cfg, &f->st), MQ_OK);
    size_t total = 0;
    const char *topics[] = {"odd", "even"};
    for (int t = 0; t < 2; t++) {
        for (uint32_t q = 0; q < 3; q++) {
            uint64_t min, max;
            store_queue_range(f->st, mq_slice(topics[t], strlen(topics[t])), q, &min, &max);
            total += max - min;
        }
    }
    assert_int_equal(total, 150);
    ClAppendResult r = put_msg(f, "odd", 0, "new", NULL, NULL);
    assert_true(r.queue_off == 25); /* odd i with i%3==0: i = 3, 9, ..., 147 -> 25 */
}

static void test_store_query_key_resolves_hash_collisions(void **state) {
    Fixture *f = *state;
    store_close(f->st);
    f->st = NULL;
    f->cfg.index_slots = 1; /* every key shares one chain */
    f->cfg.index_entries = 16; /* and files roll often */
    assert_int_equal(store_open(&f->cfg, &f->st), MQ_OK);
    ClAppendResult want[5];
    int w = 0;
    for (int i = 0; i < 60; i++) {
        char key[32];
        snprintf(key, sizeof(key), "order-%d", i % 12);
        ClAppendResult r = put_msg(f, i % 5 == 4 ? "other" : "t", 0, "x", NULL, key);
        if (i % 12 == 7 && i % 5 != 4) want[w++] = r;
    }
    put_msg(f, "t", 0, "uniq", NULL, "alpha beta order-7x");
    assert_int_equal(store_wait_dispatched(f->st, 5000), MQ_OK);
    uint64_t offs[32];
    size_t n = 0;
    assert_int_equal(store_query_key(f->st, mq_slice("t", 1), mq_slice("order-7", 7), 0,
                                     INT64_MAX, 32, offs, &n),
                     MQ_OK);
    assert_int_equal(n, w);
    for (int i = 0; i < w; i++) assert_true(offs[i] == want[w - 1 - i].phys_off); /* newest first */
    assert_int_equal(store_query_key(f->st, mq_slice("t", 1), mq_slice("beta", 4), 0, INT64_MAX,
                                     32, offs, &n),
                     MQ_OK);
    assert_int_equal(n, 1);
    /* a time range before everything finds nothing */
    assert_int_equal(store_query_key(f->st, mq_slice("t", 1), mq_slice("order-7", 7), 0, 1000, 32,
                                     offs, &n),
                     MQ_OK);
    assert_int_equal(n, 0);
}

static void test_store_offset_for_time_finds_first_at_or_after(void **state) {
    Fixture *f = *state;
    store_close(f->st);
    f->st = NULL;
    f->cfg.clock = test_clock;
    f->cfg.clock_arg = f;
    f->now_ms = 1000000;
    assert_int_equal(store_open(&f->cfg, &f->st), MQ_OK);
    for (int i = 0; i < 50; i++) {
        f->now_ms = 1000000 + i * 10; /* message i stored at 1,000,000 + 10 i */
        put_msg(f, "t", 0, "x", NULL, NULL);
    }
    assert_int_equal(store_wait_dispatched(f->st, 5000), MQ_OK);
    uint64_t off = 99;
    assert_int_equal(store_offset_for_time(f->st, mq_slice("t", 1), 0, 1000205, &off), MQ_OK);
    assert_true(off == 21);
    assert_int_equal(store_offset_for_time(f->st, mq_slice("t", 1), 0, 1000200, &off), MQ_OK);
    assert_true(off == 20);
    assert_int_equal(store_offset_for_time(f->st, mq_slice("t", 1), 0, 0, &off), MQ_OK);
    assert_true(off == 0);
    assert_int_equal(store_offset_for_time(f->st, mq_slice("t", 1), 0, 9999999, &off), MQ_OK);
    assert_true(off == 50);
    assert_int_equal(store_offset_for_time(f->st, mq_slice("x", 1), 0, 0, &off), MQ_ERR_NOTFOUND);
}

static void age_file(const char *path, int64_t mtime_ms) {
    struct timeval tv[2];
    tv[0].tv_sec = tv[1].tv_sec = (time_t)(mtime_ms / 1000);
    tv[0].tv_usec = tv[1].tv_usec = 0;
    assert_int_equal(utimes(path, tv), 0);
}

static int64_t at_hour(int hour) {
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    tm.tm_hour = hour;
    tm.tm_min = 30;
    tm.tm_sec = 0;
    return (int64_t)mktime(&tm) * 1000;
}

static void test_store_retention_deletes_expired_segments_at_delete_hour(void **state) {
    Fixture *f = *state;
    store_close(f->st);
    f->st = NULL;
    f->cfg.clock = test_clock;
    f->cfg.clock_arg = f;
    f->cfg.clean_interval_ms = 0;
    f->cfg.disk_max_used_ratio = 100; /* no disk pressure */
    f->cfg.disk_force_clean_ratio = 100;
    f->cfg.disk_refuse_ratio = 100;
    f->now_ms = at_hour(10);
    assert_int_equal(store_open(&f->cfg, &f->st), MQ_OK);
    char body[2000];
    memset(body, 'r', sizeof(body) - 1);
    body[sizeof(body) - 1] = 0;
    for (int i = 0; i < 150; i++) put_msg(f, "t", 0, body, NULL, NULL); /* ~4.6 segments */
    assert_int_equal(store_wait_dispatched(f->st, 5000), MQ_OK);
    /* only flushed segments may go */
    assert_int_equal(cl_flush_now(store_commitlog(f->st)), MQ_OK);
    assert_int_equal(store_housekeep(f->st), MQ_OK);
    StoreStats ss;
    store_stats(f->st, &ss);
    assert_true(ss.min_offset == 0);
    /* Segments 0 and 1 are 100 hours old; the rest are fresh. */
    for (int i = 0; i < 2; i++) {
        char *p = tu_path(f->dir, "commitlog/%020d", i * 65536);
        age_file(p, f->now_ms - 100LL * 3600 * 1000);
        free(p);
    }
    /* Not the delete hour: nothing goes. */
    assert_int_equal(store_housekeep(f->st), MQ_OK);
    store_stats(f->st, &ss);
    assert_true(ss.min_offset == 0);
    /* At 04:30 the two expired ones go, oldest first, and only them. */
    f->now_ms = at_hour(4);
    assert_int_equal(store_housekeep(f->st), MQ_OK);
    store_stats(f->st, &ss);
    assert_true(ss.min_offset == 2 * 65536);
    char *gone = tu_path(f->dir, "commitlog/%020d", 65536);
    assert_false(tu_exists(gone));
    free(gone);
    /* The consume queue's min moved past the deleted records. */
    uint64_t min, max;
    store_queue_range(f->st, mq_slice("t", 1), 0, &min, &max);
    assert_true(max == 150);
    CqEntry e;
    uint64_t off;
    size_t n;
    uint64_t next;
    assert_int_equal(store_read_queue(f->st, mq_slice("t", 1), 0, 0, 1, 1, NULL, 0, &e, &off, &n,
                                      &next),
                     MQ_OK);
    assert_int_equal(n, 1);
    assert_true(e.phys_off >= 2 * 65536);
    ClRecord rec;
    MappedFile *ref = NULL;
    assert_int_equal(store_read_msg(f->st, 0, &rec, &ref), MQ_ERR_NOTFOUND);
    /* After a restart the minimum stays where retention left it, and the
     * queue still starts at the first message that exists. */
    reopen(f);
    store_stats(f->st, &ss);
    assert_true(ss.min_offset == 2 * 65536);
    assert_int_equal(store_read_queue(f->st, mq_slice("t", 1), 0, 0, 1, 1, NULL, 0, &e, &off, &n,
                                      &next),
                     MQ_OK);
    assert_int_equal(n, 1);
    assert_true(e.phys_off >= 2 * 65536);
    assert_int_equal(store_read_msg(f->st, e.phys_off, &rec, &ref), MQ_OK);
    mf_unref(&ref);
}

static double fake_used = 0.5;
static int fake_statvfs(const char *path, struct statvfs *out) {
    (void)path;
    memset(out, 0, sizeof(*out));
    out->f_bsize = out->f_frsize = 4096;
    out->f_blocks = 1000000;
    out->f_bfree = out->f_bavail = (fsblkcnt_t)(1000000 * (1 - fake_used));
    return 0;
}

static void test_store_refuses_appends_with_disk_full_above_ratio(void **state) {
    Fixture *f = *state;
    static MqIo io;
    io = mq_io_default;
    io.statvfs = fake_statvfs;
    mq_io_set(&io);
    fake_used = 0.95;
    assert_int_equal(store_housekeep(f->st), MQ_OK);
    ClMessage m = {.topic = mq_slice("t", 1), .body = mq_slice("x", 1)};
    ClAppendResult r;
    assert_int_equal(store_put(f->st, &m, 1, &r), MQ_ERR_FULL);
    StoreStats ss;
    store_stats(f->st, &ss);
    assert_int_equal(ss.refusal, MQ_ERR_FULL);
    assert_true(ss.disk_used_ratio > 0.9);
    fake_used = 0.5;
    assert_int_equal(store_housekeep(f->st), MQ_OK);
    assert_int_equal(store_put(f->st, &m, 1, &r), MQ_OK);
}

static void test_store_disk_pressure_deletes_unexpired_oldest(void **state) {
    Fixture *f = *state;
    char body[3000];
    memset(body, 'p', sizeof(body) - 1);
    body[sizeof(body) - 1] = 0;
    for (int i = 0; i < 80; i++) put_msg(f, "t", 0, body, NULL, NULL);
    assert_int_equal(store_wait_dispatched(f->st, 5000), MQ_OK);
    assert_int_equal(cl_flush_now(store_commitlog(f->st)), MQ_OK); /* deletable once durable */
    static MqIo io;
    io = mq_io_default;
    io.statvfs = fake_statvfs;
    mq_io_set(&io);
    fake_used = 0.87; /* over the force-clean ratio, under the refusal one */
    StoreStats before;
    store_stats(f->st, &before);
    assert_int_equal(store_housekeep(f->st), MQ_OK);
    StoreStats after;
    store_stats(f->st, &after);
    assert_true(after.min_offset == before.min_offset + 65536); /* one per round */
    assert_int_equal(after.refusal, MQ_OK);
}

static int short_pwrite(int fd, const void *buf, size_t len, off_t off) {
    (void)fd, (void)buf, (void)off;
    errno = ENOSPC;
    return len > 10 ? -1 : 0;
}
static ssize_t short_pwrite_adapter(int fd, const void *buf, size_t len, off_t off) {
    return short_pwrite(fd, buf, len, off);
}

static void test_store_checkpoint_write_failure_keeps_old_checkpoint(void **state) {
    Fixture *f = *state;
    put_msg(f, "t", 0, "a", NULL, NULL);
    assert_int_equal(store_wait_dispatched(f->st, 5000), MQ_OK);
    assert_int_equal(cl_flush_now(store_commitlog(f->st)), MQ_OK);
    assert_int_equal(store_housekeep(f->st), MQ_OK);
    char *ckpt_path = tu_path(f->dir, "checkpoint");
    Checkpoint before;
    assert_int_equal(ckpt_read(ckpt_path, &before), MQ_OK);
    put_msg(f, "t", 0, "b", NULL, NULL);
    assert_int_equal(store_wait_dispatched(f->st, 5000), MQ_OK);
    static MqIo io;
    io = mq_io_default;
    io.pwrite = short_pwrite_adapter;
    mq_io_set(&io);
    assert_int_equal(cl_flush_now(store_commitlog(f->st)), MQ_OK);
    assert_int_equal(store_housekeep(f->st), MQ_ERR_IO);
    mq_io_set(NULL);
    Checkpoint after;
    assert_int_equal(ckpt_read(ckpt_path, &after), MQ_OK);
    assert_memory_equal(&before, &after, sizeof(before));
    char *tmp = tu_path(f->dir, "checkpoint.tmp");
    assert_false(tu_exists(tmp));
    free(tmp);
    assert_int_equal(store_housekeep(f->st), MQ_OK); /* recovers on the next round */
    assert_int_equal(ckpt_read(ckpt_path, &after), MQ_OK);
    assert_true(after.cq_flushed > before.cq_flushed);
    free(ckpt_path);
}

static void test_store_housekeeper_thread_checkpoints(void **state) {
    Fixture *f = *state;
    store_close(f->st);
    f->st = NULL;
    f->cfg.flush_cq_interval_ms = 10;
    assert_int_equal(store_open(&f->cfg, &f->st), MQ_OK);
    ClAppendResult r = put_msg(f, "t", 0, "a", NULL, NULL);
    char *ckpt_path = tu_path(f->dir, "checkpoint");
    Checkpoint ck = {0};
    for (int i = 0; i < 500 && ck.cq_flushed < r.phys_off + r.size; i++) {
        usleep(10000);
        assert_int_equal(ckpt_read(ckpt_path, &ck), MQ_OK);
    }
    assert_true(ck.cq_flushed == r.phys_off + r.size);
    assert_true(ck.log_flushed >= ck.cq_flushed);
    free(ckpt_path);
}

static void test_store_delete_topic_removes_queues(void **state) {
    Fixture *f = *state;
    put_msg(f, "gone", 0, "a", NULL, NULL);
    put_msg(f, "gone", 1, "a", NULL, NULL);
    put_msg(f, "kept", 0, "a", NULL, NULL);
    assert_int_equal(store_wait_dispatched(f->st, 5000), MQ_OK);
    assert_int_equal(store_delete_topic(f->st, mq_slice("gone", 4)), MQ_OK);
    char *d = tu_path(f->dir, "consumequeue/gone");
    assert_false(tu_exists(d));
    free(d);
    uint64_t min, max;
    store_queue_range(f->st, mq_slice("gone", 4), 0, &min, &max);
    assert_true(max == 0);
    store_queue_range(f->st, mq_slice("kept", 4), 0, &min, &max);
    assert_true(max == 1);
    assert_int_equal(store_delete_topic(f->st, mq_slice("gone", 4)), MQ_ERR_NOTFOUND);
    /* a new message starts the topic again at queue offset 0 */
    ClAppendResult r = put_msg(f, "gone", 0, "b", NULL, NULL);
    assert_true(r.queue_off == 0);
}

static void test_store_rejects_unsafe_topic_names(void **state) {
    Fixture *f = *state;
    const char *bad[] = {"..", ".", "a/b", ""};
    for (size_t i = 0; i < 4; i++) {
        ClMessage m = {.topic = mq_slice(bad[i], strlen(bad[i])), .body = mq_slice("x", 1)};
        ClAppendResult r;
        assert_int_equal(store_put(f->st, &m, 1, &r), MQ_ERR_INVAL);
    }
}

int main(void) {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_store_index_syncs_on_its_own_interval),
        T(test_store_put_dispatches_to_queue_and_notifies),
        T(test_store_tag_filter_skips_other_tags),
        T(test_store_reopen_continues_queue_offsets),
        T(test_store_clean_close_leaves_checkpoint_and_no_abort_file),
        T(test_store_crash_recovery_truncates_torn_tail_and_drops_its_queue_entry),
        T(test_store_crash_rebuilds_entries_past_checkpoint),
        T(test_store_rebuilds_deleted_consume_queues_from_log),
        T(test_store_query_key_resolves_hash_collisions),
        T(test_store_offset_for_time_finds_first_at_or_after),
        T(test_store_retention_deletes_expired_segments_at_delete_hour),
        T(test_store_refuses_appends_with_disk_full_above_ratio),
        T(test_store_disk_pressure_deletes_unexpired_oldest),
        T(test_store_checkpoint_write_failure_keeps_old_checkpoint),
        T(test_store_housekeeper_thread_checkpoints),
        T(test_store_delete_topic_removes_queues),
        T(test_store_rejects_unsafe_topic_names),
    };
#undef T
    return cmocka_run_group_tests_name("store", tests, NULL, NULL);
}
