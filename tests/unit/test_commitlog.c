/*
 * test_commitlog.c - the commit log alone: record codec, appends, segment
 * rolling, concurrency, recovery of torn/corrupt tails, group commit,
 * failure injection, replication primitives.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commitlog.h"
#include "crc32c.h"
#include "io.h"
#include "mq.h"

typedef struct Fixture {
    char *dir;
    CommitLog *cl;
    ClConfig cfg;
} Fixture;

static const char zeros[4096];

static int64_t fixed_clock(void *arg) { return *(int64_t *)arg; }
static int64_t clock_value = 1767225600123;

static int setup(void **state) {
    Fixture *f = calloc(1, sizeof(*f));
    f->dir = tu_mkdtemp("cl");
    f->cfg = (ClConfig){
        .dir = f->dir,
        .segment_size = 64 * 1024,
        .store_host = {127, 0, 0, 1, 0x1F, 0x90, 0, 0},
        /* Long: the flusher runs only when a test asks for a sync, so that
         * when it prepares the next segment is up to the test. */
        .flush_interval_ms = 60000,
        .sync_flush_timeout_ms = 2000,
        .clock = fixed_clock,
        .clock_arg = &clock_value,
    };
    assert_int_equal(cl_open(&f->cfg, &f->cl), MQ_OK);
    uint64_t end = 1;
    assert_int_equal(cl_recover(f->cl, 0, &end), MQ_OK);
    assert_true(end == 0);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    Fixture *f = *state;
    cl_close(f->cl);
    mq_io_set(NULL);
    tu_rmtree(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

static void reopen(Fixture *f, uint64_t from, uint64_t *end) {
    cl_close(f->cl);
    f->cl = NULL;
    assert_int_equal(cl_open(&f->cfg, &f->cl), MQ_OK);
    assert_int_equal(cl_recover(f->cl, from, end), MQ_OK);
}

static ClMessage msg(const char *topic, uint32_t qid, const void *body, size_t len) {
    ClMessage m = {0};
    m.topic = mq_slice(topic, strlen(topic));
    m.queue_id = qid;
    m.body = mq_slice(body, len);
    return m;
}

static void test_cl_record_round_trips_every_field(void **state) {
    Fixture *f = *state;
    static const char props[] = "TAGS\001TagA\002KEYS\001k1 k2\002";
    uint8_t body[300];
    for (size_t i = 0; i < sizeof(body); i++) body[i] = (uint8_t)(i * 13);
    ClMessage m = msg("orders", 3, body, sizeof(body));
    m.flag = 0xA5A5A5A5u;
    m.sysflag = CL_SYSFLAG_TX_PREPARED;
    m.born_ts = 1767225600000;
    memcpy(m.born_host, (uint8_t[8]){10, 1, 2, 3, 0x39, 0x30, 0, 0}, 8);
    m.reconsume_times = 7;
    m.prepared_tx_off = 0x1122334455667788ULL;
    m.props = mq_slice(props, sizeof(props) - 1);
    ClAppendResult r;
    assert_int_equal(cl_append(f->cl, &m, 1, &r), MQ_OK);
    assert_true(r.phys_off == 0);
    assert_true(r.queue_off == 0);
    assert_int_equal(r.size, CL_FIXED_SIZE + sizeof(body) + 6 + sizeof(props) - 1);
    assert_true(r.store_ts == clock_value);

    ClRecord rec;
    MappedFile *ref = NULL;
    assert_int_equal(cl_read(f->cl, r.phys_off, &rec, &ref), MQ_OK);
    assert_int_equal(rec.total_size, r.size);
    assert_int_equal(rec.queue_id, 3);
    assert_int_equal(rec.flag, 0xA5A5A5A5u);
    assert_true(rec.queue_off == 0 && rec.phys_off == 0);
    assert_int_equal(rec.sysflag, CL_SYSFLAG_TX_PREPARED);
    assert_true(rec.born_ts == 1767225600000);
    assert_memory_equal(rec.born_host, m.born_host, 8);
    assert_true(rec.store_ts == clock_value);
    assert_memory_equal(rec.store_host, f->cfg.store_host, 8);
    assert_int_equal(rec.reconsume_times, 7);
    assert_true(rec.prepared_tx_off == 0x1122334455667788ULL);
    assert_int_equal(rec.body.len, sizeof(body));
    assert_memory_equal(rec.body.ptr, body, sizeof(body));
    assert_int_equal(rec.body_crc, mq_crc32c(body, sizeof(body)));
    assert_int_equal(rec.topic.len, 6);
    assert_memory_equal(rec.topic.ptr, "orders", 6);
    assert_int_equal(rec.props.len, sizeof(props) - 1);
    MqSlice v;
    assert_true(cl_prop_find(rec.props, "KEYS", &v));
    assert_int_equal(v.len, 5);
    assert_memory_equal(v.ptr, "k1 k2", 5);
    assert_true(cl_prop_find(rec.props, "TAGS", &v));
    assert_memory_equal(v.ptr, "TagA", 4);
    assert_false(cl_prop_find(rec.props, "TAG", &v));
    /* the bytes on disk verify */
    assert_int_equal(cl_decode(mf_data(ref), r.size, true, NULL), CL_REC_OK);
    mf_unref(&ref);
}

static void test_cl_decode_rejects_every_single_byte_flip(void **state) {
    (void)state;
    uint8_t buf[256];
    ClMessage m = msg("t", 0, "hello world", 11);
    m.props = mq_slice("a\001b\002", 4);
    size_t size = cl_record_size(&m);
    cl_encode(buf, size, &m, 0, 0, 5, (uint8_t[8]){0});
    assert_int_equal(cl_decode(buf, size, true, NULL), CL_REC_OK);
    for (size_t i = 0; i < size; i++) {
        buf[i] ^= 0x40;
        assert_int_not_equal(cl_decode(buf, size, true, NULL), CL_REC_OK);
        buf[i] ^= 0x40;
    }
    /* a record cut short is bad, never ok */
    for (size_t avail = 0; avail < size; avail++)
        assert_int_not_equal(cl_decode(buf, avail, true, NULL), CL_REC_OK);
    memset(buf, 0, sizeof(buf));
    assert_int_equal(cl_decode(buf, sizeof(buf), true, NULL), CL_REC_EMPTY);
}

static void test_cl_rejects_fields_too_long(void **state) {
    Fixture *f = *state;
    char topic[300];
    memset(topic, 'a', sizeof(topic) - 1);
    topic[sizeof(topic) - 1] = 0;
    ClMessage m = msg(topic, 0, "x", 1);
    ClAppendResult r;
    assert_int_equal(cl_append(f->cl, &m, 1, &r), MQ_ERR_INVAL);
    m = msg("", 0, "x", 1);
    assert_int_equal(cl_append(f->cl, &m, 1, &r), MQ_ERR_INVAL);
    static char big[70000];
    m = msg("t", 0, big, sizeof(big)); /* larger than a 64 KiB segment */
    assert_int_equal(cl_append(f->cl, &m, 1, &r), MQ_ERR_INVAL);
    m = msg("t", 0, "x", 1);
    m.props = mq_slice(big, 65536);
    assert_int_equal(cl_append(f->cl, &m, 1, &r), MQ_ERR_INVAL);
    assert_true(cl_write_offset(f->cl) == 0);
}

/* Fill the first segment so that exactly 'left' bytes remain. */
static void fill_to(Fixture *f, size_t left) {
    size_t seg = f->cfg.segment_size;
    static char body[8192];
    for (;;) {
        size_t used = (size_t)cl_write_offset(f->cl);
        size_t room = seg - used - left;
        if (room == 0) return;
        size_t blen = room - CL_FIXED_SIZE - 1; /* topic "t" */
        if (blen > sizeof(body)) blen = sizeof(body) - 200;
        ClMessage m = msg("t", 0, body, blen);
        ClAppendResult r;
        assert_int_equal(cl_append(f->cl, &m, 1, &r), MQ_OK);
    }
}

static void test_cl_rolls_segment_at_exact_boundary(void **state) {
    Fixture *f = *state;
    size_t seg = f->cfg.segment_size;
    /* A record of exactly left-8 bytes fits: 8 bytes stay for a marker. */
    fill_to(f, 500);
    size_t rec = 500 - CL_BLANK_MIN;
    ClMessage m = msg("t", 0, zeros, rec - CL_FIXED_SIZE - 1);
    ClAppendResult r;
    assert_int_equal(cl_append(f->cl, &m, 1, &r), MQ_OK);
    assert_true(r.phys_off + r.size == seg - CL_BLANK_MIN);
    /* One byte more does not fit in the 8 left: blank marker, next segment. */
    m = msg("t", 0, "y", 1);
    assert_int_equal(cl_append(f->cl, &m, 1, &r), MQ_OK);
    assert_true(r.phys_off == seg);
    char path[4096];
    snprintf(path, sizeof(path), "%s/%020zu", f->dir, seg);
    assert_true(tu_exists(path));
    /* Walk the log: every record, across the marker. */
    uint64_t off = 0;
    uint64_t last = 0;
    size_t count = 0;
    ClRecord rr;
    MappedFile *ref = NULL;
    uint64_t next;
    while (cl_next(f->cl, off, &rr, &next, &ref) == MQ_OK) {
        assert_true(rr.phys_off == off || off == seg - CL_BLANK_MIN);
        assert_true(rr.queue_off == count);
        last = rr.phys_off;
        off = next;
        count++;
        mf_unref(&ref);
    }
    assert_true(last == seg);
    /* A reopen with a scan from 0 finds the same end. */
    uint64_t end = 0;
    uint64_t before = cl_write_offset(f->cl);
    reopen(f, 0, &end);
    assert_true(end == before);
}

static void test_cl_record_that_fits_exactly_a_fresh_segment(void **state) {
    Fixture *f = *state;
    size_t seg = f->cfg.segment_size;
    static char body[65536];
    ClMessage m = msg("t", 0, body, seg - CL_BLANK_MIN - CL_FIXED_SIZE - 1);
    ClAppendResult r;
    assert_int_equal(cl_append(f->cl, &m, 1, &r), MQ_OK);
    assert_true(r.phys_off == 0 && r.size == seg - CL_BLANK_MIN);
    m.body.len++;
    assert_int_equal(cl_append(f->cl, &m, 1, &r), MQ_ERR_INVAL);
    m.body.len = 10;
    assert_int_equal(cl_append(f->cl, &m, 1, &r), MQ_OK);
    assert_true(r.phys_off == seg);
}

static void test_cl_batch_is_contiguous_with_consecutive_queue_offsets(void **state) {
    Fixture *f = *state;
    ClMessage one = msg("a", 1, "first", 5);
    ClAppendResult r0;
    assert_int_equal(cl_append(f->cl, &one, 1, &r0), MQ_OK);
    ClMessage batch[5];
    ClAppendResult res[5];
    for (int i = 0; i < 5; i++) batch[i] = msg(i == 2 ? "b" : "a", 1, "batch", 5);
    assert_int_equal(cl_append(f->cl, batch, 5, res), MQ_OK);
    assert_true(res[0].phys_off == r0.phys_off + r0.size);
    for (int i = 1; i < 5; i++) assert_true(res[i].phys_off == res[i - 1].phys_off + res[i - 1].size);
    assert_true(res[0].queue_off == 1 && res[1].queue_off == 2);
    assert_true(res[2].queue_off == 0); /* topic b */
    assert_true(res[3].queue_off == 3 && res[4].queue_off == 4);
    assert_true(cl_get_queue_offset(f->cl, mq_slice("a", 1), 1) == 5);
    assert_true(cl_get_queue_offset(f->cl, mq_slice("b", 1), 1) == 1);
    assert_true(cl_get_queue_offset(f->cl, mq_slice("c", 1), 1) == 0);
}

static void test_cl_batch_rolls_as_a_unit(void **state) {
    Fixture *f = *state;
    fill_to(f, 300);
    ClMessage batch[3];
    ClAppendResult res[3];
    for (int i = 0; i < 3; i++) batch[i] = msg("t", 0, zeros, 100);
    assert_int_equal(cl_append(f->cl, batch, 3, res), MQ_OK);
    assert_true(res[0].phys_off == f->cfg.segment_size); /* none left behind */
}

typedef struct Writer {
    CommitLog *cl;
    int id;
    int count;
    ClAppendResult *res;
} Writer;

static void *writer_main(void *arg) {
    Writer *w = arg;
    char body[64];
    for (int i = 0; i < w->count; i++) {
        int len = snprintf(body, sizeof(body), "w%d-m%d", w->id, i);
        ClMessage m = msg("conc", (uint32_t)w->id, body, (size_t)len + (size_t)(i % 17));
        if (cl_append(w->cl, &m, 1, &w->res[i]) != MQ_OK) abort();
    }
    return NULL;
}

static void test_cl_concurrent_appends_are_all_readable_without_overlap(void **state) {
    Fixture *f = *state;
    enum { THREADS = 4, EACH = 3000 };
    pthread_t t[THREADS];
    Writer w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (Writer){f->cl, i, EACH, calloc(EACH, sizeof(ClAppendResult))};
        pthread_create(&t[i], NULL, writer_main, &w[i]);
    }
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    uint64_t seg = f->cfg.segment_size;
    for (int i = 0; i < THREADS; i++) {
        for (int k = 0; k < EACH; k++) {
            ClAppendResult *r = &w[i].res[k];
            assert_true(r->queue_off == (uint64_t)k); /* per-queue order kept */
            assert_true(r->phys_off / seg == (r->phys_off + r->size - 1) / seg);
            ClRecord rec;
            MappedFile *ref = NULL;
            assert_int_equal(cl_read(f->cl, r->phys_off, &rec, &ref), MQ_OK);
            char body[64];
            int len = snprintf(body, sizeof(body), "w%d-m%d", i, k);
            assert_memory_equal(rec.body.ptr, body, (size_t)len);
            assert_int_equal(rec.queue_id, i);
            mf_unref(&ref);
        }
    }
    /* No overlap: walking the log visits exactly THREADS*EACH records. */
    uint64_t off = 0;
    size_t n = 0;
    ClRecord rec;
    MappedFile *ref = NULL;
    uint64_t next;
    while (cl_next(f->cl, off, &rec, &next, &ref) == MQ_OK) {
        off = next;
        n++;
        mf_unref(&ref);
    }
    assert_int_equal(n, THREADS * EACH);
    assert_true(off == cl_write_offset(f->cl));
    for (int i = 0; i < THREADS; i++) free(w[i].res);
}

static ClAppendResult put_n(Fixture *f, int n, ClAppendResult *all) {
    ClAppendResult r = {0};
    for (int i = 0; i < n; i++) {
        char body[32];
        int len = snprintf(body, sizeof(body), "body-%d", i);
        ClMessage m = msg("t", 0, body, (size_t)len);
        assert_int_equal(cl_append(f->cl, &m, 1, &r), MQ_OK);
        if (all) all[i] = r;
    }
    return r;
}

static void test_cl_recover_truncates_torn_tail(void **state) {
    Fixture *f = *state;
    ClAppendResult all[50];
    put_n(f, 50, all);
    assert_int_equal(cl_flush_now(f->cl), MQ_OK);
    /* Tear the last record: keep its header, lose its end. */
    char path[4096];
    snprintf(path, sizeof(path), "%s/%020d", f->dir, 0);
    cl_close(f->cl);
    f->cl = NULL;
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    uint8_t zero[16] = {0};
    assert_int_equal(pwrite(fd, zero, sizeof(zero), (off_t)(all[49].phys_off + all[49].size - 16)),
                     16);
    close(fd);
    uint64_t end = 0;
    assert_int_equal(cl_open(&f->cfg, &f->cl), MQ_OK);
    assert_int_equal(cl_recover(f->cl, 0, &end), MQ_OK);
    assert_true(end == all[49].phys_off);
    /* The torn bytes are gone: the next append lands there and reads back. */
    ClMessage m = msg("t", 0, "after", 5);
    ClAppendResult r;
    assert_int_equal(cl_append(f->cl, &m, 1, &r), MQ_OK);
    assert_true(r.phys_off == all[49].phys_off);
    ClRecord rec;
    MappedFile *ref = NULL;
    assert_int_equal(cl_read(f->cl, r.phys_off, &rec, &ref), MQ_OK);
    assert_memory_equal(rec.body.ptr, "after", 5);
    mf_unref(&ref);
}

static void test_cl_recover_stops_at_crc_corruption(void **state) {
    Fixture *f = *state;
    ClAppendResult all[20];
    put_n(f, 20, all);
    cl_close(f->cl);
    f->cl = NULL;
    char path[4096];
    snprintf(path, sizeof(path), "%s/%020d", f->dir, 0);
    int fd = open(path, O_RDWR);
    uint8_t b;
    off_t at = (off_t)all[12].phys_off + 90; /* inside the body */
    assert_int_equal(pread(fd, &b, 1, at), 1);
    b ^= 1;
    assert_int_equal(pwrite(fd, &b, 1, at), 1);
    close(fd);
    uint64_t end = 0;
    assert_int_equal(cl_open(&f->cfg, &f->cl), MQ_OK);
    assert_int_equal(cl_recover(f->cl, all[5].phys_off, &end), MQ_OK);
    assert_true(end == all[12].phys_off);
    /* the bytes after the cut read as nothing */
    ClRecord rec;
    MappedFile *ref = NULL;
    assert_int_equal(cl_read(f->cl, all[13].phys_off, &rec, &ref), MQ_ERR_NOTFOUND);
}

static void test_cl_recover_deletes_segments_past_the_end(void **state) {
    Fixture *f = *state;
    fill_to(f, 100);
    put_n(f, 3, NULL); /* rolls into segment 2 */
    uint64_t seg = f->cfg.segment_size;
    assert_true(cl_write_offset(f->cl) > seg);
    /* Wipe segment 2's first record: the log ends at its start. */
    char path[4096];
    snprintf(path, sizeof(path), "%s/%020ju", f->dir, (uintmax_t)seg);
    uint64_t end = 0;
    cl_close(f->cl);
    f->cl = NULL;
    int fd = open(path, O_RDWR);
    uint8_t junk[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    assert_int_equal(pwrite(fd, junk, 8, 0), 8);
    close(fd);
    assert_int_equal(cl_open(&f->cfg, &f->cl), MQ_OK);
    assert_int_equal(cl_recover(f->cl, 0, &end), MQ_OK);
    assert_true(end == seg); /* the blank marker of segment 1 is valid */
    ClMessage m = msg("t", 0, "z", 1);
    ClAppendResult r;
    assert_int_equal(cl_append(f->cl, &m, 1, &r), MQ_OK);
    assert_true(r.phys_off == seg);
}

static void done_cb(void *arg, int status) {
    int *p = arg;
    __atomic_store_n(p, status == MQ_OK ? 1 : status, __ATOMIC_RELEASE);
}

static int wait_flag(int *p) {
    for (int i = 0; i < 5000; i++) {
        int v = __atomic_load_n(p, __ATOMIC_ACQUIRE);
        if (v != 0) return v;
        usleep(1000);
    }
    return 0;
}

static void test_cl_sync_waiter_fires_after_flush(void **state) {
    Fixture *f = *state;
    ClAppendResult r = put_n(f, 10, NULL);
    ClFlushWaiter w;
    int flag = 0;
    int rc = cl_flush_wait(f->cl, &w, r.phys_off + r.size, done_cb, &flag);
    assert_int_equal(rc, 1);
    assert_int_equal(wait_flag(&flag), 1);
    assert_true(cl_flushed_offset(f->cl) >= r.phys_off + r.size);
    /* Already durable: no callback, answer 0. */
    int flag2 = 0;
    assert_int_equal(cl_flush_wait(f->cl, &w, r.phys_off + r.size, done_cb, &flag2), 0);
    assert_int_equal(flag2, 0);
}

static int slow_fdatasync(int fd) {
    usleep(400 * 1000);
    return fdatasync(fd);
}

static void test_cl_sync_waiter_times_out(void **state) {
    Fixture *f = *state;
    cl_close(f->cl);
    f->cl = NULL;
    f->cfg.sync_flush_timeout_ms = 100;
    f->cfg.flush_interval_ms = 10000;
    static MqIo io;
    io = mq_io_default;
    io.fdatasync = slow_fdatasync;
    assert_int_equal(cl_open(&f->cfg, &f->cl), MQ_OK);
    uint64_t end;
    assert_int_equal(cl_recover(f->cl, 0, &end), MQ_OK);
    mq_io_set(&io);
    ClAppendResult r = put_n(f, 1, NULL);
    ClFlushWaiter w;
    int flag = 0;
    int64_t t0 = mq_mono_ns();
    assert_int_equal(cl_flush_wait(f->cl, &w, r.phys_off + r.size, done_cb, &flag), 1);
    assert_int_equal(wait_flag(&flag), MQ_ERR_TIMEOUT);
    /* It fired while the disk was still busy, not after it. */
    assert_true(mq_mono_ns() - t0 < 390 * 1000000LL);
    cl_close(f->cl); /* waits for the slow sync */
    f->cl = NULL;
    mq_io_set(NULL);
    assert_int_equal(cl_open(&f->cfg, &f->cl), MQ_OK);
}

static int eio_fdatasync(int fd) {
    (void)fd;
    errno = EIO;
    return -1;
}

static void test_cl_flush_error_fails_waiters_and_makes_log_read_only(void **state) {
    Fixture *f = *state;
    ClAppendResult r = put_n(f, 3, NULL);
    static MqIo io;
    io = mq_io_default;
    io.fdatasync = eio_fdatasync;
    mq_io_set(&io);
    ClFlushWaiter w;
    int flag = 0;
    assert_int_equal(cl_flush_wait(f->cl, &w, r.phys_off + r.size, done_cb, &flag), 1);
    assert_int_equal(wait_flag(&flag), MQ_ERR_IO);
    mq_io_set(NULL);
    ClMessage m = msg("t", 0, "no", 2);
    assert_int_equal(cl_append(f->cl, &m, 1, &r), MQ_ERR_RDONLY);
    assert_int_equal(cl_refusal(f->cl), MQ_ERR_RDONLY);
    cl_set_refusal(f->cl, MQ_OK); /* cannot clear an I/O failure */
    assert_int_equal(cl_refusal(f->cl), MQ_ERR_RDONLY);
    int flag2 = 0;
    assert_int_equal(cl_flush_wait(f->cl, &w, r.phys_off + r.size + 100, done_cb, &flag2),
                     MQ_ERR_RDONLY);
}

static void test_cl_many_waiters_share_few_fdatasyncs(void **state) {
    Fixture *f = *state;
    enum { N = 200 };
    ClFlushWaiter w[N];
    int flags[N] = {0};
    cl_flush_now(f->cl);
    for (int i = 0; i < N; i++) {
        ClAppendResult r = put_n(f, 1, NULL);
        int rc = cl_flush_wait(f->cl, &w[i], r.phys_off + r.size, done_cb, &flags[i]);
        assert_true(rc == 1 || rc == 0);
        if (rc == 0) flags[i] = 1;
    }
    for (int i = 0; i < N; i++) assert_int_equal(wait_flag(&flags[i]), 1);
}

static int enospc_fallocate(int fd, int mode, off_t off, off_t len) {
    (void)fd, (void)mode, (void)off, (void)len;
    errno = ENOSPC;
    return -1;
}

static void test_cl_no_space_for_next_segment_is_disk_full_and_loses_nothing(void **state) {
    Fixture *f = *state;
    fill_to(f, 200);
    uint64_t before = cl_write_offset(f->cl);
    static MqIo io;
    io = mq_io_default;
    io.fallocate = enospc_fallocate;
    mq_io_set(&io);
    ClMessage m = msg("t", 0, zeros, 300);
    ClAppendResult r;
    assert_int_equal(cl_append(f->cl, &m, 1, &r), MQ_ERR_FULL);
    assert_true(cl_write_offset(f->cl) == before);
    /* a small one still fits in the current segment */
    m.body.len = 10;
    assert_int_equal(cl_append(f->cl, &m, 1, &r), MQ_OK);
    mq_io_set(NULL);
    m.body.len = 300;
    assert_int_equal(cl_append(f->cl, &m, 1, &r), MQ_OK);
    assert_true(r.phys_off == f->cfg.segment_size);
}

static void test_cl_refusal_rejects_with_disk_full_then_accepts(void **state) {
    Fixture *f = *state;
    cl_set_refusal(f->cl, MQ_ERR_FULL);
    ClMessage m = msg("t", 0, "x", 1);
    ClAppendResult r;
    assert_int_equal(cl_append(f->cl, &m, 1, &r), MQ_ERR_FULL);
    cl_set_refusal(f->cl, MQ_OK);
    assert_int_equal(cl_append(f->cl, &m, 1, &r), MQ_OK);
}

static void test_cl_raw_copy_makes_identical_log(void **state) {
    Fixture *f = *state;
    fill_to(f, 400);
    put_n(f, 20, NULL);
    char *dir2 = tu_mkdtemp("cl2");
    ClConfig c2 = f->cfg;
    c2.dir = dir2;
    CommitLog *slave = NULL;
    assert_int_equal(cl_open(&c2, &slave), MQ_OK);
    uint64_t end;
    assert_int_equal(cl_recover(slave, 0, &end), MQ_OK);
    static uint8_t buf[70000];
    uint64_t at = 0;
    for (;;) {
        size_t n = 0;
        assert_int_equal(cl_read_raw(f->cl, at, buf, sizeof(buf), &n), MQ_OK);
        if (n == 0) break;
        /* hand over whole records only: cut at the last record boundary */
        size_t whole = 0;
        while (whole < n) {
            uint32_t sz = mq_get_u32(buf + whole);
            if (whole + sz > n) break;
            whole += sz;
        }
        assert_true(whole > 0);
        assert_int_equal(cl_append_raw(slave, at, buf, whole), MQ_OK);
        at += whole;
    }
    assert_true(cl_write_offset(slave) == cl_write_offset(f->cl));
    assert_true(cl_get_queue_offset(slave, mq_slice("t", 1), 0) ==
                cl_get_queue_offset(f->cl, mq_slice("t", 1), 0));
    assert_int_equal(cl_append_raw(slave, at + 1, buf, 10), MQ_ERR_STATE);
    uint8_t junk[200] = {1};
    assert_int_equal(cl_append_raw(slave, at, junk, sizeof(junk)), MQ_ERR_CORRUPT);
    assert_true(cl_write_offset(slave) == at);
    /* Truncate back and the same bytes go in again. */
    assert_int_equal(cl_truncate(slave, 0), MQ_OK);
    assert_true(cl_write_offset(slave) == 0);
    cl_close(slave);
    tu_rmtree(dir2);
    free(dir2);
}

/* ---- write-through (SYNC_FLUSH) mode ------------------------------------- */

static void use_write_through(Fixture *f) {
    cl_close(f->cl);
    f->cl = NULL;
    f->cfg.write_through = true;
    assert_int_equal(cl_open(&f->cfg, &f->cl), MQ_OK);
    uint64_t end;
    assert_int_equal(cl_recover(f->cl, 0, &end), MQ_OK);
}

static void test_cl_write_through_appends_read_back_and_roll(void **state) {
    Fixture *f = *state;
    use_write_through(f);
    ClAppendResult all[400];
    put_n(f, 400, all); /* rolls: about 16 KiB of records per 64 KiB segment */
    fill_to(f, 300);
    ClMessage m = msg("t", 0, zeros, 400);
    ClAppendResult r;
    assert_int_equal(cl_append(f->cl, &m, 1, &r), MQ_OK);
    assert_true(r.phys_off % f->cfg.segment_size == 0); /* rolled, blank written by pwrite */
    for (int i = 0; i < 400; i += 37) {
        ClRecord rec;
        MappedFile *ref = NULL;
        assert_int_equal(cl_read(f->cl, all[i].phys_off, &rec, &ref), MQ_OK);
        char body[32];
        int len = snprintf(body, sizeof(body), "body-%d", i);
        assert_memory_equal(rec.body.ptr, body, (size_t)len);
        mf_unref(&ref);
    }
    uint64_t before = cl_write_offset(f->cl);
    uint64_t end = 0;
    reopen(f, 0, &end);
    assert_true(end == before);
}

static int fail_after;  /* pwrite calls that succeed before the failure */
static int fail_errno;  /* errno of the failure */
static bool fail_short; /* the failing call writes half, then fails */
static ssize_t failing_pwrite(int fd, const void *buf, size_t len, off_t off) {
    if (fail_after-- > 0) return pwrite(fd, buf, len, off);
    if (fail_short && len > 1) {
        fail_short = false;
        return pwrite(fd, buf, len / 2, off); /* the loop retries the rest: fails then */
    }
    errno = fail_errno;
    return -1;
}

static void write_fails_and_log_is_cut_back(Fixture *f, int err, bool half) {
    use_write_through(f);
    ClAppendResult ok = put_n(f, 5, NULL);
    uint64_t before = cl_write_offset(f->cl);
    static MqIo io;
    io = mq_io_default;
    io.pwrite = failing_pwrite;
    fail_after = 0;
    fail_errno = err;
    fail_short = half;
    mq_io_set(&io);
    ClMessage m = msg("t", 0, "lost", 4);
    ClAppendResult r;
    assert_int_equal(cl_append(f->cl, &m, 1, &r), MQ_ERR_IO);
    mq_io_set(NULL);
    assert_true(cl_write_offset(f->cl) == before);
    assert_int_equal(cl_refusal(f->cl), MQ_ERR_RDONLY);
    assert_int_equal(cl_append(f->cl, &m, 1, &r), MQ_ERR_RDONLY);
    assert_true(cl_get_queue_offset(f->cl, mq_slice("t", 1), 0) == 5);
    /* After a restart the log ends where it ended, and takes appends again. */
    uint64_t end = 0;
    reopen(f, 0, &end);
    assert_true(end == ok.phys_off + ok.size);
    cl_set_queue_offset(f->cl, mq_slice("t", 1), 0, 5);
    assert_int_equal(cl_append(f->cl, &m, 1, &r), MQ_OK);
    assert_true(r.phys_off == end && r.queue_off == 5);
}

static void test_cl_write_through_eio_cuts_log_back_and_goes_read_only(void **state) {
    write_fails_and_log_is_cut_back(*state, EIO, false);
}

static void test_cl_write_through_short_write_then_enospc_loses_nothing_acked(void **state) {
    write_fails_and_log_is_cut_back(*state, ENOSPC, true);
}

/* The first segment of an empty log is made by recovery itself, so that
 * the first append (on an HTTP worker in the broker) does no disk work
 * either. */
static void test_cl_first_segment_of_an_empty_log_is_prepared_at_recovery(void **state) {
    Fixture *f = *state;
    char *first = tu_path(f->dir, "%020d", 0);
    assert_true(tu_exists(first));
    static MqIo io;
    io = mq_io_default;
    io.fallocate = enospc_fallocate; /* creating a file would fail now */
    mq_io_set(&io);
    ClMessage m = msg("t", 0, "x", 1);
    ClAppendResult r;
    assert_int_equal(cl_append(f->cl, &m, 1, &r), MQ_OK);
    assert_true(r.phys_off == 0);
    mq_io_set(NULL);
    free(first);
}

static void test_cl_next_segment_is_prepared_ahead_so_a_roll_needs_no_disk(void **state) {
    Fixture *f = *state;
    ClAppendResult last = put_n(f, 3, NULL);
    /* A flusher round (asked for by a sync waiter) makes segment 2 ahead. */
    ClFlushWaiter w;
    int flag = 0;
    if (cl_flush_wait(f->cl, &w, last.phys_off + last.size, done_cb, &flag) == 1)
        assert_int_equal(wait_flag(&flag), 1);
    char *next = tu_path(f->dir, "%020zu", f->cfg.segment_size);
    assert_true(tu_exists(next));
    /* With file creation failing from now on, the roll still succeeds:
     * it takes the prepared segment. */
    static MqIo io;
    io = mq_io_default;
    io.fallocate = enospc_fallocate;
    mq_io_set(&io);
    fill_to(f, 200);
    ClMessage m = msg("t", 0, zeros, 300);
    ClAppendResult r;
    assert_int_equal(cl_append(f->cl, &m, 1, &r), MQ_OK);
    assert_true(r.phys_off == f->cfg.segment_size);
    mq_io_set(NULL);
    /* A clean close leaves no prepared, never-written segment behind. */
    int flag2 = 0;
    if (cl_flush_wait(f->cl, &w, r.phys_off + r.size, done_cb, &flag2) == 1)
        assert_int_equal(wait_flag(&flag2), 1);
    char *after = tu_path(f->dir, "%020zu", 2 * f->cfg.segment_size);
    assert_true(tu_exists(after));
    cl_close(f->cl);
    f->cl = NULL;
    assert_false(tu_exists(after));
    uint64_t end = 0;
    assert_int_equal(cl_open(&f->cfg, &f->cl), MQ_OK);
    assert_int_equal(cl_recover(f->cl, 0, &end), MQ_OK);
    assert_true(end == r.phys_off + r.size);
    free(next);
    free(after);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cl_record_round_trips_every_field, setup, teardown),
        cmocka_unit_test(test_cl_decode_rejects_every_single_byte_flip),
        cmocka_unit_test_setup_teardown(test_cl_rejects_fields_too_long, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cl_rolls_segment_at_exact_boundary, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cl_record_that_fits_exactly_a_fresh_segment, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_cl_batch_is_contiguous_with_consecutive_queue_offsets,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_cl_batch_rolls_as_a_unit, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_cl_concurrent_appends_are_all_readable_without_overlap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cl_recover_truncates_torn_tail, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cl_recover_stops_at_crc_corruption, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cl_recover_deletes_segments_past_the_end, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_cl_sync_waiter_fires_after_flush, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cl_sync_waiter_times_out, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_cl_flush_error_fails_waiters_and_makes_log_read_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cl_many_waiters_share_few_fdatasyncs, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_cl_no_space_for_next_segment_is_disk_full_and_loses_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cl_refusal_rejects_with_disk_full_then_accepts, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_cl_raw_copy_makes_identical_log, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_cl_next_segment_is_prepared_ahead_so_a_roll_needs_no_disk, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_cl_first_segment_of_an_empty_log_is_prepared_at_recovery, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cl_write_through_appends_read_back_and_roll, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_cl_write_through_eio_cuts_log_back_and_goes_read_only, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_cl_write_through_short_write_then_enospc_loses_nothing_acked, setup, teardown),
    };
    return cmocka_run_group_tests_name("commitlog", tests, NULL, NULL);
}
