/*
 * test_indexfile.c - the key index (store/indexfile.c): put/query, chains
 * in shared slots, time ranges, rolling, reopen and crash repair, damaged
 * files, deletion, sync and a reader racing the writer.
 */
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "indexfile.h"
#include "io.h"
#include "mq.h"

#define T0 1700000000000LL /* a store time, ms */

typedef struct Fx {
    char *dir;      /* test directory (tu_mkdtemp) */
    char *ix_dir;   /* '<dir>/index', created by ix_open */
    int64_t now;    /* the injected wall clock, ms */
    IndexStore *ix; /* open store or NULL */
} Fx;

static int64_t fake_clock(void *arg) { return *(const int64_t *)arg; }

static int setup(void **state) {
    Fx *fx = calloc(1, sizeof(*fx));
    if (!fx) return -1;
    fx->dir = tu_mkdtemp("ix");
    fx->ix_dir = tu_path(fx->dir, "index");
    fx->now = T0;
    *state = fx;
    return 0;
}

static int teardown(void **state) {
    Fx *fx = *state;
    mq_io_set(NULL);
    ix_close(fx->ix);
    tu_rmtree(fx->dir);
    free(fx->ix_dir);
    free(fx->dir);
    free(fx);
    return 0;
}

static IndexConfig config(Fx *fx, uint32_t slot_num, uint32_t max_entries) {
    return (IndexConfig){fx->ix_dir, slot_num, max_entries, fake_clock, &fx->now};
}

static IndexStore *open_ix(Fx *fx, uint32_t slot_num, uint32_t max_entries) {
    IndexConfig cfg = config(fx, slot_num, max_entries);
    ix_close(fx->ix);
    fx->ix = NULL;
    assert_int_equal(ix_open(&cfg, &fx->ix), MQ_OK);
    return fx->ix;
}

static void close_ix(Fx *fx) {
    ix_close(fx->ix);
    fx->ix = NULL;
}

static MqSlice str(const char *s) { return mq_slice(s, strlen(s)); }

static int put(IndexStore *ix, const char *topic, const char *key, uint64_t off, int64_t ts) {
    return ix_put(ix, str(topic), str(key), off, ts);
}

/* query returns the candidate count, offsets in 'offs'. */
static size_t query(IndexStore *ix, const char *topic, const char *key, int64_t begin_ms,
                    int64_t end_ms, size_t max, uint64_t *offs) {
    size_t n = 999;
    assert_int_equal(ix_query(ix, str(topic), str(key), begin_ms, end_ms, max, offs, &n), MQ_OK);
    assert_true(n <= max);
    return n;
}

/* expect_offs asserts that a query over all time returns exactly 'want'. */
static void expect_offs(IndexStore *ix, const char *key, const uint64_t *want, size_t n_want) {
    uint64_t offs[64];
    size_t n = query(ix, "T", key, INT64_MIN, INT64_MAX, 64, offs);
    assert_int_equal(n, n_want);
    for (size_t i = 0; i < n; i++) assert_true(offs[i] == want[i]);
}

static char *file_path(Fx *fx, int64_t name) { return tu_path(fx->ix_dir, "%020" PRId64, name); }

static int count_files(const char *dir) {
    DIR *dp = opendir(dir);
    assert_non_null(dp);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(dp)) != NULL)
        if (de->d_name[0] != '.') n++;
    closedir(dp);
    return n;
}

static void patch(const char *path, long off, const void *p, size_t len) {
    int fd = open(path, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, p, len, off), (ssize_t)len);
    close(fd);
}

static void patch_u32(const char *path, long off, uint32_t v) {
    uint8_t b[4];
    mq_put_u32(b, v);
    patch(path, off, b, sizeof(b));
}

static void patch_u64(const char *path, long off, uint64_t v) {
    uint8_t b[8];
    mq_put_u64(b, v);
    patch(path, off, b, sizeof(b));
}

static uint32_t read_u32(const char *path, long off) {
    uint8_t b[4];
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(pread(fd, b, sizeof(b), off), 4);
    close(fd);
    return mq_get_u32(b);
}

/* Byte offset of entry 'n' in a file with 'slot_num' slots. */
static long entry_off(uint32_t slot_num, uint32_t n) {
    return IX_HEADER_SIZE + (long)slot_num * 4 + (long)(n - 1) * IX_ENTRY_SIZE;
}

/* ---- basic put and query -----------------------------------------------------*/

static void test_ix_query_finds_key_in_time_range(void **state) {
    Fx *fx = *state;
    IndexStore *ix = open_ix(fx, 64, 100);
    assert_int_equal(ix_file_count(ix), 0);
    assert_true(ix_end_phys(ix) == 0);
    assert_int_equal(put(ix, "T", "order-1", 100, T0), MQ_OK);
    assert_int_equal(put(ix, "T", "order-2", 200, T0 + 10), MQ_OK);
    assert_int_equal(put(ix, "U", "order-1", 300, T0 + 20), MQ_OK);
    assert_int_equal(ix_file_count(ix), 1);
    assert_true(tu_exists(fx->ix_dir));

    uint64_t offs[8];
    assert_int_equal(query(ix, "T", "order-1", T0, T0 + 1000, 8, offs), 1);
    assert_true(offs[0] == 100);
    assert_int_equal(query(ix, "T", "order-2", T0, T0 + 1000, 8, offs), 1);
    assert_true(offs[0] == 200);
    assert_int_equal(query(ix, "U", "order-1", T0, T0 + 1000, 8, offs), 1);
    assert_true(offs[0] == 300);
    assert_int_equal(query(ix, "T", "order-3", T0, T0 + 1000, 8, offs), 0);
    assert_int_equal(query(ix, "T", "order-1", T0 + 5000, T0 + 9000, 8, offs), 0);
    assert_int_equal(query(ix, "T", "order-1", T0, T0 + 1000, 0, offs), 0);
    assert_true(ix_end_phys(ix) == 300);
}

static void test_ix_put_rejects_empty_and_oversized_keys(void **state) {
    Fx *fx = *state;
    IndexStore *ix = open_ix(fx, 64, 100);
    static char big[4097];
    memset(big, 'k', sizeof(big));
    MqSlice topic = str("T");
    assert_int_equal(ix_put(ix, topic, mq_slice(NULL, 0), 1, T0), MQ_ERR_INVAL);
    assert_int_equal(ix_put(ix, topic, mq_slice(big, 4097), 1, T0), MQ_ERR_INVAL);
    assert_int_equal(ix_put(ix, mq_slice(big, 256), str("k"), 1, T0), MQ_ERR_INVAL);
    assert_int_equal(ix_file_count(ix), 0);
    assert_int_equal(ix_put(ix, topic, mq_slice(big, 4096), 2, T0), MQ_OK);
    assert_int_equal(ix_put(ix, mq_slice(big, 255), str("k"), 3, T0), MQ_OK);
    assert_int_equal(ix_put(ix, mq_slice(NULL, 0), str("k"), 4, T0), MQ_OK);

    uint64_t offs[4];
    size_t n = 9;
    assert_int_equal(ix_query(ix, topic, mq_slice(big, 4096), T0, T0, 4, offs, &n), MQ_OK);
    assert_int_equal(n, 1);
    assert_true(offs[0] == 2);
    assert_int_equal(ix_query(ix, mq_slice(big, 255), str("k"), T0, T0, 4, offs, &n), MQ_OK);
    assert_int_equal(n, 1);
    assert_true(offs[0] == 3);
    assert_int_equal(ix_query(ix, mq_slice(NULL, 0), str("k"), T0, T0, 4, offs, &n), MQ_OK);
    assert_int_equal(n, 1);
    assert_true(offs[0] == 4);
    /* keys that ix_put rejects are simply not found */
    assert_int_equal(ix_query(ix, topic, mq_slice(NULL, 0), T0, T0, 4, offs, &n), MQ_OK);
    assert_int_equal(n, 0);
    assert_int_equal(ix_query(ix, topic, mq_slice(big, 4097), T0, T0, 4, offs, &n), MQ_OK);
    assert_int_equal(n, 0);
}

static void test_ix_query_finds_each_of_many_keys(void **state) {
    Fx *fx = *state;
    IndexStore *ix = open_ix(fx, 509, 10000);
    char key[32];
    for (int i = 0; i < 3000; i++) {
        snprintf(key, sizeof(key), "key-%d", i);
        assert_int_equal(put(ix, "T", key, (uint64_t)i * 10, T0 + i), MQ_OK);
    }
    for (int i = 0; i < 100; i++) { /* a second offset for the first 100 keys */
        snprintf(key, sizeof(key), "key-%d", i);
        assert_int_equal(put(ix, "T", key, 100000 + (uint64_t)i, T0 + 3000 + i), MQ_OK);
    }
    assert_int_equal(ix_file_count(ix), 1);
    uint64_t offs[8];
    for (int i = 0; i < 3000; i++) {
        snprintf(key, sizeof(key), "key-%d", i);
        size_t n = query(ix, "T", key, T0, T0 + 10000, 8, offs);
        if (i < 100) {
            assert_int_equal(n, 2);
            assert_true(offs[0] == 100000 + (uint64_t)i);
            assert_true(offs[1] == (uint64_t)i * 10);
        } else {
            assert_int_equal(n, 1);
            assert_true(offs[0] == (uint64_t)i * 10);
        }
    }
}

/* With one or two slots every key shares a chain: a query must walk past
 * the other keys' entries and return every offset of its own, newest first. */
static void check_shared_slots(Fx *fx, uint32_t slot_num) {
    IndexStore *ix = open_ix(fx, slot_num, 100);
    const char *keys[] = {"alpha", "beta", "gamma"};
    for (int i = 0; i < 30; i++)
        assert_int_equal(put(ix, "T", keys[i % 3], 1000 + (uint64_t)i, T0 + i), MQ_OK);
    for (int k = 0; k < 3; k++) {
        uint64_t want[10];
        for (int j = 0; j < 10; j++) want[j] = 1000 + (uint64_t)(27 + k - 3 * j);
        expect_offs(ix, keys[k], want, 10);
    }
    expect_offs(ix, "delta", NULL, 0);
    close_ix(fx);
    tu_rmtree(fx->ix_dir);
}

static void test_ix_shared_slot_chain_returns_every_offset_of_the_key(void **state) {
    Fx *fx = *state;
    check_shared_slots(fx, 1);
    check_shared_slots(fx, 2);
}

static void test_ix_query_filters_by_time_range(void **state) {
    Fx *fx = *state;
    IndexStore *ix = open_ix(fx, 16, 100);
    const int64_t b = T0 + 999; /* begin_ts, deliberately not on a whole second */
    assert_int_equal(put(ix, "T", "k", 1, b), MQ_OK);        /* second [b, b+999] */
    assert_int_equal(put(ix, "T", "k", 2, b + 999), MQ_OK);  /* second [b, b+999] */
    assert_int_equal(put(ix, "T", "k", 3, b + 1500), MQ_OK); /* [b+1000, b+1999] */
    assert_int_equal(put(ix, "T", "k", 4, b + 5200), MQ_OK); /* [b+5000, b+5999] */
    assert_int_equal(put(ix, "T", "k", 5, b + 9999), MQ_OK); /* [b+9000, b+9999] */
    uint64_t o[8];
    assert_int_equal(query(ix, "T", "k", b, b, 8, o), 2);
    assert_true(o[0] == 2 && o[1] == 1);
    assert_int_equal(query(ix, "T", "k", b + 999, b + 999, 8, o), 2);
    assert_int_equal(query(ix, "T", "k", b + 1999, b + 1999, 8, o), 1);
    assert_true(o[0] == 3);
    assert_int_equal(query(ix, "T", "k", b + 2000, b + 4999, 8, o), 0);
    assert_int_equal(query(ix, "T", "k", b + 5999, b + 9000, 8, o), 2);
    assert_true(o[0] == 5 && o[1] == 4);
    assert_int_equal(query(ix, "T", "k", b + 10000, INT64_MAX, 8, o), 0);
    assert_int_equal(query(ix, "T", "k", INT64_MIN, b - 1, 8, o), 0);
    assert_int_equal(query(ix, "T", "k", INT64_MIN, INT64_MAX, 8, o), 5);
    assert_int_equal(query(ix, "T", "k", b + 5000, b + 1000, 8, o), 0); /* begin > end */
    /* A store time before the file's begin_ts (clock stepped back) is
     * indexed in the file's first second. */
    assert_int_equal(put(ix, "T", "k", 6, b - 3000), MQ_OK);
    assert_int_equal(query(ix, "T", "k", b, b, 8, o), 3);
    assert_true(o[0] == 6);
}

static void test_ix_query_stops_at_max(void **state) {
    Fx *fx = *state;
    IndexStore *ix = open_ix(fx, 8, 100);
    for (uint64_t i = 0; i < 20; i++) assert_int_equal(put(ix, "T", "k", i, T0), MQ_OK);
    uint64_t o[8];
    assert_int_equal(query(ix, "T", "k", T0, T0, 3, o), 3);
    assert_true(o[0] == 19 && o[1] == 18 && o[2] == 17);
    assert_int_equal(query(ix, "T", "k", T0, T0, 1, o), 1);
    assert_true(o[0] == 19);
}

static void test_ix_query_dedupes_offset_put_twice(void **state) {
    Fx *fx = *state;
    IndexStore *ix = open_ix(fx, 4, 2);
    /* twice in one file, then again at the start of the next file */
    assert_int_equal(put(ix, "T", "k", 500, T0), MQ_OK);
    assert_int_equal(put(ix, "T", "k", 500, T0), MQ_OK);
    assert_int_equal(put(ix, "T", "k", 500, T0 + 1), MQ_OK);
    assert_int_equal(put(ix, "T", "k", 600, T0 + 2), MQ_OK);
    assert_int_equal(ix_file_count(ix), 2);
    expect_offs(ix, "k", (uint64_t[]){600, 500}, 2);
}

/* ---- files: rolling, reopening, deleting ----------------------------------*/

static void test_ix_put_rolls_to_new_file_when_full(void **state) {
    Fx *fx = *state;
    IndexStore *ix = open_ix(fx, 4, 8);
    for (int i = 0; i < 20; i++) {
        assert_int_equal(put(ix, "T", "k", (uint64_t)i * 100, T0 + i * 1000), MQ_OK);
        assert_int_equal(put(ix, "T", i % 2 ? "odd" : "even", (uint64_t)i * 100 + 1, T0 + i * 1000),
                         MQ_OK);
    }
    assert_int_equal(ix_file_count(ix), 5); /* 40 entries, 8 per file */
    /* the clock stands still: names take the next free millisecond */
    for (int64_t i = 0; i < 5; i++) {
        char *p = file_path(fx, T0 + i);
        assert_true(tu_exists(p));
        assert_int_equal(tu_file_size(p), IX_HEADER_SIZE + 4 * 4 + 8 * IX_ENTRY_SIZE);
        free(p);
    }
    uint64_t o[32];
    assert_int_equal(query(ix, "T", "k", INT64_MIN, INT64_MAX, 32, o), 20);
    for (int i = 0; i < 20; i++) assert_true(o[i] == (uint64_t)(19 - i) * 100);
    assert_int_equal(query(ix, "T", "k", INT64_MIN, INT64_MAX, 5, o), 5);
    assert_true(o[4] == 1500);
    /* a range spanning three files */
    assert_int_equal(query(ix, "T", "k", T0 + 5000, T0 + 12999, 32, o), 8);
    for (int i = 0; i < 8; i++) assert_true(o[i] == (uint64_t)(12 - i) * 100);
    assert_int_equal(query(ix, "T", "odd", T0 + 5000, T0 + 12999, 32, o), 4);
    assert_true(o[0] == 1101 && o[3] == 501);
    assert_true(ix_end_phys(ix) == 1901);
}

static void test_ix_file_names_stay_ordered_when_clock_steps_back(void **state) {
    Fx *fx = *state;
    IndexStore *ix = open_ix(fx, 4, 1);
    assert_int_equal(put(ix, "T", "k", 1, T0), MQ_OK);
    fx->now = T0 - 100000;
    assert_int_equal(put(ix, "T", "k", 2, T0), MQ_OK);
    fx->now = T0 + 50;
    assert_int_equal(put(ix, "T", "k", 3, T0), MQ_OK);
    int64_t names[] = {T0, T0 + 1, T0 + 50};
    for (int i = 0; i < 3; i++) {
        char *p = file_path(fx, names[i]);
        assert_true(tu_exists(p));
        free(p);
    }
    ix = open_ix(fx, 4, 1);
    expect_offs(ix, "k", (uint64_t[]){3, 2, 1}, 3);
}

static void test_ix_reopen_keeps_entries_and_continues_the_newest_file(void **state) {
    Fx *fx = *state;
    IndexStore *ix = open_ix(fx, 4, 8);
    for (uint64_t i = 0; i < 12; i++) assert_int_equal(put(ix, "T", "k", i, T0), MQ_OK);
    assert_int_equal(ix_file_count(ix), 2);
    /* files keep their geometry; new files use the new one */
    ix = open_ix(fx, 16, 32);
    assert_int_equal(ix_file_count(ix), 2);
    assert_true(ix_end_phys(ix) == 11);
    uint64_t o[32];
    assert_int_equal(query(ix, "T", "k", T0, T0, 32, o), 12);
    assert_true(o[0] == 11 && o[11] == 0);
    for (uint64_t i = 12; i < 17; i++) assert_int_equal(put(ix, "T", "k", i, T0), MQ_OK);
    assert_int_equal(ix_file_count(ix), 3); /* 4 more filled file 2, the 5th rolled */
    char *p = file_path(fx, T0 + 2);
    assert_int_equal(tu_file_size(p), IX_HEADER_SIZE + 16 * 4 + 32 * IX_ENTRY_SIZE);
    free(p);
    assert_int_equal(query(ix, "T", "k", T0, T0, 32, o), 17);
    for (int i = 0; i < 17; i++) assert_true(o[i] == (uint64_t)(16 - i));
    assert_true(ix_end_phys(ix) == 16);
}

static void test_ix_end_phys_reports_newest_indexed_offset(void **state) {
    Fx *fx = *state;
    IndexStore *ix = open_ix(fx, 1, 2);
    assert_true(ix_end_phys(ix) == 0);
    assert_int_equal(put(ix, "T", "a", 100, T0), MQ_OK);
    assert_true(ix_end_phys(ix) == 100);
    assert_int_equal(put(ix, "T", "b", 200, T0), MQ_OK);
    assert_int_equal(put(ix, "T", "a", 300, T0), MQ_OK);
    assert_int_equal(ix_file_count(ix), 2);
    assert_true(ix_end_phys(ix) == 300);
    close_ix(fx);
    /* a crash inside the first put of file 2: entry and slot written,
     * index_count and end_phys not; file 2 reopens empty */
    char *p = file_path(fx, T0 + 1);
    patch_u32(p, 44, 1);
    ix = open_ix(fx, 1, 2);
    assert_int_equal(ix_file_count(ix), 2);
    assert_true(ix_end_phys(ix) == 200);
    expect_offs(ix, "a", (uint64_t[]){100}, 1);
    assert_int_equal(put(ix, "T", "a", 300, T0), MQ_OK);
    expect_offs(ix, "a", (uint64_t[]){300, 100}, 2);
    assert_true(ix_end_phys(ix) == 300);
    free(p);
}

static void test_ix_delete_below_phys_removes_old_files_only(void **state) {
    Fx *fx = *state;
    IndexStore *ix = open_ix(fx, 4, 4);
    for (uint64_t i = 0; i < 16; i++) assert_int_equal(put(ix, "T", "k", i * 100, T0), MQ_OK);
    assert_int_equal(ix_file_count(ix), 4); /* end_phys 300, 700, 1100, 1500 */
    assert_int_equal(ix_delete_below_phys(ix, 300), 0);
    assert_int_equal(ix_delete_below_phys(ix, 800), 2);
    assert_int_equal(ix_file_count(ix), 2);
    assert_int_equal(count_files(fx->ix_dir), 2);
    char *p = file_path(fx, T0);
    assert_false(tu_exists(p));
    free(p);
    uint64_t o[32];
    assert_int_equal(query(ix, "T", "k", T0, T0, 32, o), 8);
    assert_true(o[0] == 1500 && o[7] == 800);
    assert_int_equal(ix_delete_below_phys(ix, UINT64_MAX), 1); /* never the newest */
    assert_int_equal(ix_file_count(ix), 1);
    assert_int_equal(count_files(fx->ix_dir), 1);
    assert_true(ix_end_phys(ix) == 1500);
    ix = open_ix(fx, 4, 4);
    assert_int_equal(ix_file_count(ix), 1);
    assert_int_equal(query(ix, "T", "k", T0, T0, 32, o), 4);
}

/* ---- damaged files ------------------------------------------------------------*/

static void test_ix_open_rejects_corrupt_header(void **state) {
    Fx *fx = *state;
    IndexStore *ix = open_ix(fx, 4, 8);
    assert_int_equal(put(ix, "T", "k", 1, T0), MQ_OK);
    close_ix(fx);
    char *p = file_path(fx, T0);
    struct {
        long off;      /* header field */
        uint32_t bad;  /* value written there */
        uint32_t good; /* original value */
    } cases[] = {
        {0, 0x50495832u, IX_MAGIC}, /* magic */
        {4, 2, IX_VERSION},         /* version */
        {44, 0, 2},                 /* index_count below 1 */
        {44, 10, 2},                /* index_count above max_entries + 1 */
        {48, 5, 4},                 /* slot_num that does not match the size */
        {52, 0, 8},                 /* max_entries 0 */
    };
    IndexConfig cfg = config(fx, 4, 8);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_int_equal(read_u32(p, cases[i].off), cases[i].good);
        patch_u32(p, cases[i].off, cases[i].bad);
        IndexStore *bad = NULL;
        assert_int_equal(ix_open(&cfg, &bad), MQ_ERR_CORRUPT);
        assert_null(bad);
        patch_u32(p, cases[i].off, cases[i].good);
    }
    /* a file shorter than its header says */
    assert_int_equal(truncate(p, IX_HEADER_SIZE + 4 * 4), 0);
    IndexStore *bad = NULL;
    assert_int_equal(ix_open(&cfg, &bad), MQ_ERR_CORRUPT);
    assert_null(bad);
    free(p);
}

static void test_ix_open_removes_file_whose_header_was_never_written(void **state) {
    Fx *fx = *state;
    IndexStore *ix = open_ix(fx, 4, 8);
    assert_int_equal(put(ix, "T", "k", 1, T0), MQ_OK);
    close_ix(fx);
    /* crash right after creation: empty, and fallocated but never written */
    char *empty = file_path(fx, T0 + 5);
    char *zeros = file_path(fx, T0 + 6);
    int fd = open(empty, O_CREAT | O_WRONLY, 0644);
    assert_true(fd >= 0);
    close(fd);
    fd = open(zeros, O_CREAT | O_WRONLY, 0644);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, IX_HEADER_SIZE + 4 * 4 + 8 * IX_ENTRY_SIZE), 0);
    close(fd);
    char *other = tu_path(fx->ix_dir, "notes.txt"); /* not an index file name: ignored */
    fd = open(other, O_CREAT | O_WRONLY, 0644);
    assert_true(fd >= 0);
    close(fd);

    ix = open_ix(fx, 4, 8);
    assert_int_equal(ix_file_count(ix), 1);
    assert_false(tu_exists(empty));
    assert_false(tu_exists(zeros));
    assert_true(tu_exists(other));
    expect_offs(ix, "k", (uint64_t[]){1}, 1);
    assert_int_equal(put(ix, "T", "k", 2, T0), MQ_OK);
    assert_int_equal(ix_file_count(ix), 1);
    expect_offs(ix, "k", (uint64_t[]){2, 1}, 2);
    free(empty);
    free(zeros);
    free(other);
}

static void test_ix_open_drops_entry_that_was_not_counted(void **state) {
    Fx *fx = *state;
    IndexStore *ix = open_ix(fx, 1, 8);
    assert_int_equal(put(ix, "T", "a", 100, T0), MQ_OK);
    assert_int_equal(put(ix, "T", "b", 200, T0), MQ_OK);
    assert_int_equal(put(ix, "T", "a", 300, T0), MQ_OK);
    close_ix(fx);
    /* crash in the third put after the slot was published: the header
     * still says 3 (next entry) and end_phys 200 */
    char *p = file_path(fx, T0);
    assert_int_equal(read_u32(p, IX_HEADER_SIZE), 3);
    patch_u32(p, 44, 3);
    patch_u64(p, 32, 200);
    ix = open_ix(fx, 1, 8);
    assert_int_equal(read_u32(p, IX_HEADER_SIZE), 2); /* the slot went back to entry 2 */
    assert_int_equal(read_u32(p, 40), 1);             /* slots_used */
    assert_true(ix_end_phys(ix) == 200);
    expect_offs(ix, "a", (uint64_t[]){100}, 1);
    expect_offs(ix, "b", (uint64_t[]){200}, 1);
    /* the dispatcher puts the record again */
    assert_int_equal(put(ix, "T", "a", 300, T0), MQ_OK);
    expect_offs(ix, "a", (uint64_t[]){300, 100}, 2);
    assert_int_equal(read_u32(p, 44), 4);
    free(p);
}

static void test_ix_query_survives_cyclic_and_garbage_chains(void **state) {
    Fx *fx = *state;
    /* file 1: e1 a:100, e2 a:200, e3 a:300, e4 b:400; slot -> e4 -> e3 ...
     * file 2: a:500.  File 1 is not the newest, so open does not repair it. */
    IndexStore *ix = open_ix(fx, 1, 4);
    assert_int_equal(put(ix, "T", "a", 100, T0), MQ_OK);
    assert_int_equal(put(ix, "T", "a", 200, T0), MQ_OK);
    assert_int_equal(put(ix, "T", "a", 300, T0), MQ_OK);
    assert_int_equal(put(ix, "T", "b", 400, T0), MQ_OK);
    assert_int_equal(put(ix, "T", "a", 500, T0), MQ_OK);
    close_ix(fx);
    char *p = file_path(fx, T0);
    uint8_t garbage[4 * IX_ENTRY_SIZE];
    memset(garbage, 0xFF, sizeof(garbage));

    patch_u32(p, entry_off(1, 1) + 16, 4); /* e1.prev -> e4: a cycle */
    expect_offs(open_ix(fx, 1, 4), "a", (uint64_t[]){500, 300, 200, 100}, 4);
    close_ix(fx);
    patch_u32(p, entry_off(1, 1) + 16, 0);

    patch_u32(p, entry_off(1, 3) + 16, 3); /* e3.prev -> e3: a loop on itself */
    expect_offs(open_ix(fx, 1, 4), "a", (uint64_t[]){500, 300}, 2);
    close_ix(fx);
    patch_u32(p, entry_off(1, 3) + 16, 2);

    patch_u32(p, IX_HEADER_SIZE, 99); /* slot past max_entries */
    expect_offs(open_ix(fx, 1, 4), "a", (uint64_t[]){500}, 1);
    close_ix(fx);
    patch_u32(p, IX_HEADER_SIZE, 4);

    patch(p, entry_off(1, 1), garbage, sizeof(garbage)); /* all entries 0xFF */
    expect_offs(open_ix(fx, 1, 4), "a", (uint64_t[]){500}, 1);
    expect_offs(fx->ix, "b", NULL, 0);
    free(p);
}

/* ---- failures and sync -------------------------------------------------------*/

static int enospc_fallocate(int fd, int mode, off_t off, off_t len) {
    (void)fd, (void)mode, (void)off, (void)len;
    errno = ENOSPC;
    return -1;
}

static void test_ix_put_reports_full_when_new_file_cannot_be_allocated(void **state) {
    Fx *fx = *state;
    IndexStore *ix = open_ix(fx, 4, 2);
    MqIo io = mq_io_default;
    io.fallocate = enospc_fallocate;

    mq_io_set(&io); /* no file yet */
    assert_int_equal(put(ix, "T", "k", 1, T0), MQ_ERR_FULL);
    mq_io_set(NULL);
    assert_int_equal(ix_file_count(ix), 0);
    assert_int_equal(count_files(fx->ix_dir), 0);

    assert_int_equal(put(ix, "T", "k", 1, T0), MQ_OK);
    assert_int_equal(put(ix, "T", "k", 2, T0), MQ_OK);
    mq_io_set(&io); /* the newest file is full */
    assert_int_equal(put(ix, "T", "k", 3, T0), MQ_ERR_FULL);
    mq_io_set(NULL);
    assert_int_equal(ix_file_count(ix), 1);
    assert_int_equal(count_files(fx->ix_dir), 1);
    assert_true(ix_end_phys(ix) == 2);
    assert_int_equal(put(ix, "T", "k", 3, T0), MQ_OK);
    assert_int_equal(ix_file_count(ix), 2);
    expect_offs(ix, "k", (uint64_t[]){3, 2, 1}, 3);
}

static int sync_calls;
static int sync_errno; /* 0 = succeed */

static int counting_fdatasync(int fd) {
    sync_calls++;
    if (sync_errno) {
        errno = sync_errno;
        return -1;
    }
    return fdatasync(fd);
}

static void test_ix_sync_syncs_only_files_written_since_last_sync(void **state) {
    Fx *fx = *state;
    IndexStore *ix = open_ix(fx, 4, 4);
    MqIo io = mq_io_default;
    io.fdatasync = counting_fdatasync;
    mq_io_set(&io);
    sync_calls = 0;
    sync_errno = 0;
    assert_int_equal(ix_sync(ix), MQ_OK);
    assert_int_equal(sync_calls, 0);
    assert_int_equal(put(ix, "T", "k", 1, T0), MQ_OK);
    assert_int_equal(ix_sync(ix), MQ_OK);
    assert_int_equal(sync_calls, 1);
    assert_int_equal(ix_sync(ix), MQ_OK);
    assert_int_equal(sync_calls, 1);
    for (uint64_t i = 2; i <= 6; i++) assert_int_equal(put(ix, "T", "k", i, T0), MQ_OK);
    assert_int_equal(ix_sync(ix), MQ_OK); /* file 1 filled, file 2 new */
    assert_int_equal(sync_calls, 3);
    /* a failed sync is retried by the next one */
    assert_int_equal(put(ix, "T", "k", 7, T0), MQ_OK);
    sync_errno = EIO;
    assert_int_equal(ix_sync(ix), MQ_ERR_IO);
    assert_int_equal(sync_calls, 4);
    sync_errno = 0;
    assert_int_equal(ix_sync(ix), MQ_OK);
    assert_int_equal(sync_calls, 5);
    assert_int_equal(ix_sync(ix), MQ_OK);
    assert_int_equal(sync_calls, 5);
    mq_io_set(NULL);
}

static void test_ix_open_rejects_bad_config(void **state) {
    Fx *fx = *state;
    IndexStore *ix = NULL;
    IndexConfig cfg = config(fx, 0, 8);
    assert_int_equal(ix_open(&cfg, &ix), MQ_ERR_INVAL);
    cfg = config(fx, 8, 0);
    assert_int_equal(ix_open(&cfg, &ix), MQ_ERR_INVAL);
    cfg = config(fx, 8, UINT32_MAX);
    assert_int_equal(ix_open(&cfg, &ix), MQ_ERR_INVAL);
    cfg = config(fx, 8, 8);
    cfg.dir = NULL;
    assert_int_equal(ix_open(&cfg, &ix), MQ_ERR_INVAL);
    assert_null(ix);
    ix_close(NULL);
}

/* ---- a reader racing the writer -------------------------------------------
 * The writer puts RACE_PUTS records; record i has key "k<i % RACE_KEYS>",
 * store time T0 + i ms and offset i*100 + i % RACE_KEYS, so an offset tells
 * its key and its record.  It rolls files, deletes old ones and syncs as it
 * goes, and every 1000 records waits for the reader to finish a query so
 * that the two really interleave.  The reader checks that every answer
 * holds only offsets of its key that were put (or are being put), inside
 * the range asked (give or take the one-second granularity), newest first
 * (strictly decreasing, so no duplicates). */

#define RACE_PUTS 20000
#define RACE_KEYS 40

typedef struct Race {
    IndexStore *ix;
    uint64_t put_done; /* atomic: records put so far */
    int stop;          /* atomic: 1 = writer finished */
    long queries;      /* atomic: queries made by the reader */
    long found;        /* offsets returned in total */
    long bad;          /* answers that broke a rule */
} Race;

static bool race_answer_ok(const uint64_t *offs, size_t n, unsigned k, int64_t lo, int64_t hi,
                           uint64_t done) {
    for (size_t i = 0; i < n; i++) {
        int64_t rec = (int64_t)(offs[i] / 100);
        if (offs[i] % 100 != k || (uint64_t)rec > done) return false; /* 'done' may be mid-put */
        if (rec - 999 > hi || rec + 999 < lo) return false;          /* outside the range */
        if (i > 0 && offs[i] >= offs[i - 1]) return false;           /* order, duplicates */
    }
    return true;
}

static void *race_reader(void *arg) {
    Race *r = arg;
    uint64_t offs[64];
    char key[16];
    unsigned seed = 7;
    while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
        seed = seed * 1103515245u + 12345u;
        unsigned k = (seed >> 8) % RACE_KEYS;
        int64_t lo = INT64_MIN + T0; /* records are at T0 + i: use relative times */
        int64_t hi = INT64_MAX - T0;
        if (seed & 1) { /* a window around a recent record */
            int64_t done = (int64_t)__atomic_load_n(&r->put_done, __ATOMIC_ACQUIRE);
            lo = done - (int64_t)(seed >> 20) % 2000; /* often in the oldest files */
            hi = lo + 300;
        }
        snprintf(key, sizeof(key), "k%u", k);
        size_t n = 0;
        int rc = ix_query(r->ix, str("T"), str(key), T0 + lo, T0 + hi, 64, offs, &n);
        uint64_t done = __atomic_load_n(&r->put_done, __ATOMIC_ACQUIRE);
        if (rc != MQ_OK || !race_answer_ok(offs, n, k, lo, hi, done)) r->bad++;
        r->found += (long)n;
        __atomic_add_fetch(&r->queries, 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

static void wait_for_query(Race *r) {
    long seen = __atomic_load_n(&r->queries, __ATOMIC_ACQUIRE);
    while (__atomic_load_n(&r->queries, __ATOMIC_ACQUIRE) == seen) sched_yield();
}

static void test_ix_query_during_puts_returns_only_put_offsets(void **state) {
    Fx *fx = *state;
    Race r = {.ix = open_ix(fx, 16, 100)};
    pthread_t reader;
    assert_int_equal(pthread_create(&reader, NULL, race_reader, &r), 0);
    char key[16];
    for (uint64_t i = 0; i < RACE_PUTS; i++) {
        snprintf(key, sizeof(key), "k%u", (unsigned)(i % RACE_KEYS));
        int64_t ts = T0 + (int64_t)i;
        assert_int_equal(put(r.ix, "T", key, i * 100 + i % RACE_KEYS, ts), MQ_OK);
        __atomic_store_n(&r.put_done, i + 1, __ATOMIC_RELEASE);
        if (i % 100 == 99) /* keep about 15 files, deleting one per roll */
            assert_true(ix_delete_below_phys(r.ix, (i - 1499) * 100) >= 0);
        if (i % 1000 == 999) {
            wait_for_query(&r);
            assert_int_equal(ix_sync(r.ix), MQ_OK);
        }
    }
    __atomic_store_n(&r.stop, 1, __ATOMIC_RELEASE);
    assert_int_equal(pthread_join(reader, NULL), 0);
    assert_int_equal(r.bad, 0);
    assert_true(r.queries >= RACE_PUTS / 1000);
    assert_true(r.found > 0);
    assert_int_equal(ix_file_count(r.ix), 15); /* records 18500..19999 */
    assert_true(ix_end_phys(r.ix) == (RACE_PUTS - 1) * 100 + (RACE_PUTS - 1) % RACE_KEYS);
    uint64_t offs[64];
    size_t n = 0;
    assert_int_equal(ix_query(r.ix, str("T"), str("k3"), INT64_MIN, INT64_MAX, 64, offs, &n),
                     MQ_OK);
    assert_int_equal(n, 37); /* 19963, 19923, ... 18523 */
    assert_true(offs[0] == 19963 * 100 + 3);
    assert_true(offs[36] == 18523 * 100 + 3);
}

int main(void) {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_ix_query_finds_key_in_time_range),
        T(test_ix_put_rejects_empty_and_oversized_keys),
        T(test_ix_query_finds_each_of_many_keys),
        T(test_ix_shared_slot_chain_returns_every_offset_of_the_key),
        T(test_ix_query_filters_by_time_range),
        T(test_ix_query_stops_at_max),
        T(test_ix_query_dedupes_offset_put_twice),
        T(test_ix_put_rolls_to_new_file_when_full),
        T(test_ix_file_names_stay_ordered_when_clock_steps_back),
        T(test_ix_reopen_keeps_entries_and_continues_the_newest_file),
        T(test_ix_end_phys_reports_newest_indexed_offset),
        T(test_ix_delete_below_phys_removes_old_files_only),
        T(test_ix_open_rejects_corrupt_header),
        T(test_ix_open_removes_file_whose_header_was_never_written),
        T(test_ix_open_drops_entry_that_was_not_counted),
        T(test_ix_query_survives_cyclic_and_garbage_chains),
        T(test_ix_put_reports_full_when_new_file_cannot_be_allocated),
        T(test_ix_sync_syncs_only_files_written_since_last_sync),
        T(test_ix_open_rejects_bad_config),
        T(test_ix_query_during_puts_returns_only_put_offsets),
    };
#undef T
    return cmocka_run_group_tests_name("indexfile", tests, NULL, NULL);
}
