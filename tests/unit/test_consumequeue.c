/*
 * test_consumequeue.c - the consume queue: entry codec, file layout, reopen,
 * gaps, tag filters, truncation, retention, sync, disk full, and a reader
 * racing the writer.
 */
#include "testutil.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "consumequeue.h"
#include "io.h"
#include "mfile.h"
#include "mq.h"

/* Every test entry is derived from its offset, so a reader can tell a torn
 * or misplaced entry from a good one. */
static CqEntry entry_for(uint64_t off) {
    return (CqEntry){.phys_off = off * 100, .size = 100, .tag_hash = off * 3 + 1};
}

static bool entry_is_for(const CqEntry *e, uint64_t off) {
    CqEntry want = entry_for(off);
    return e->phys_off == want.phys_off && e->size == want.size && e->tag_hash == want.tag_hash;
}

static void put_range(ConsumeQueue *cq, uint64_t from, uint64_t to) {
    for (uint64_t off = from; off < to; off++) {
        CqEntry e = entry_for(off);
        assert_int_equal(cq_put(cq, off, &e), MQ_OK);
    }
}

/* The file of the queue in 'dir' whose first entry is 'first'. */
static char *cq_file(const char *dir, uint64_t first) {
    char name[21];
    mf_name_for(first * CQ_ENTRY_SIZE, name);
    return tu_path(dir, "%s", name);
}

static bool cq_file_exists(const char *dir, uint64_t first) {
    char *path = cq_file(dir, first);
    bool ok = tu_exists(path);
    free(path);
    return ok;
}

/* Reads up to 'max' entries from 'from' with no filter and checks that they
 * are exactly the offsets in 'want' ('n_want' of them); returns '*next'. */
static uint64_t read_expect(ConsumeQueue *cq, uint64_t from, size_t max,
                            const uint64_t *want, size_t n_want) {
    CqEntry out[64];
    uint64_t offs[64];
    size_t n = 99;
    uint64_t next = 0;
    assert_true(max <= 64);
    assert_int_equal(cq_read(cq, from, max, 1000, NULL, 0, out, offs, &n, &next), MQ_OK);
    assert_int_equal(n, n_want);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(offs[i], want[i]);
        assert_true(entry_is_for(&out[i], want[i]));
    }
    return next;
}

static int setup_dir(void **state) {
    *state = tu_mkdtemp("cq");
    return 0;
}

static int teardown_dir(void **state) {
    tu_rmtree(*state);
    free(*state);
    return 0;
}

/* ---- codec ---------------------------------------------------------------*/

static void test_cq_encode_writes_twenty_little_endian_bytes_and_decode_reverses_it(
    void **state) {
    (void)state;
    CqEntry e = {.phys_off = 0x0102030405060708ULL,
                 .size = 0xA1B2C3D4u,
                 .tag_hash = 0x1112131415161718ULL};
    uint8_t buf[CQ_ENTRY_SIZE + 1];
    memset(buf, 0xEE, sizeof(buf));
    cq_encode(buf, &e);
    const uint8_t want[CQ_ENTRY_SIZE] = {0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02,
                                         0x01, 0xD4, 0xC3, 0xB2, 0xA1, 0x18, 0x17,
                                         0x16, 0x15, 0x14, 0x13, 0x12, 0x11};
    assert_memory_equal(buf, want, CQ_ENTRY_SIZE);
    assert_int_equal(buf[CQ_ENTRY_SIZE], 0xEE); /* nothing written past 20 bytes */
    CqEntry back;
    cq_decode(buf, &back);
    assert_true(back.phys_off == e.phys_off);
    assert_int_equal(back.size, e.size);
    assert_true(back.tag_hash == e.tag_hash);
}

/* ---- put / get / read ----------------------------------------------------*/

static void test_cq_put_then_read_returns_entries_in_order(void **state) {
    char *dir = tu_path(*state, "topic/0"); /* parents are created */
    ConsumeQueue *cq = NULL;
    assert_int_equal(cq_open(dir, 16, &cq), MQ_OK);
    assert_true(cq_min_offset(cq) == 0 && cq_max_offset(cq) == 0);
    assert_true(cq_last_phys_end(cq) == 0);
    put_range(cq, 0, 10);
    assert_true(cq_min_offset(cq) == 0);
    assert_true(cq_max_offset(cq) == 10);
    assert_true(cq_last_phys_end(cq) == 1000);
    for (uint64_t off = 0; off < 10; off++) {
        CqEntry e;
        assert_int_equal(cq_get(cq, off, &e), MQ_OK);
        assert_true(entry_is_for(&e, off));
    }
    CqEntry e;
    assert_int_equal(cq_get(cq, 10, &e), MQ_ERR_NOTFOUND);

    const uint64_t all[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    assert_true(read_expect(cq, 0, 64, all, 10) == 10);
    assert_true(read_expect(cq, 3, 4, all + 3, 4) == 7);
    assert_true(read_expect(cq, 10, 64, NULL, 0) == 10); /* at max: next = from */
    assert_true(read_expect(cq, 50, 64, NULL, 0) == 50);
    assert_true(read_expect(cq, 2, 0, NULL, 0) == 2); /* max 0 copies nothing */

    /* 'offs' may be NULL */
    CqEntry out[4];
    size_t n = 0;
    uint64_t next = 0;
    assert_int_equal(cq_read(cq, 8, 4, 100, NULL, 0, out, NULL, &n, &next), MQ_OK);
    assert_int_equal(n, 2);
    assert_true(entry_is_for(&out[0], 8) && entry_is_for(&out[1], 9));
    assert_true(next == 10);

    CqEntry empty = {.phys_off = 5, .size = 0, .tag_hash = 0};
    assert_int_equal(cq_put(cq, 10, &empty), MQ_ERR_INVAL);
    assert_true(cq_max_offset(cq) == 10);
    cq_close(cq);
    free(dir);
}

static void test_cq_files_split_exactly_at_file_boundaries(void **state) {
    char *dir = tu_path(*state, "q");
    ConsumeQueue *cq = NULL;
    assert_int_equal(cq_open(dir, 4, &cq), MQ_OK);
    put_range(cq, 0, 4);
    assert_true(cq_file_exists(dir, 0));
    assert_false(cq_file_exists(dir, 4)); /* created only when entry 4 is put */
    put_range(cq, 4, 14);
    const char *names[] = {"00000000000000000000", "00000000000000000080",
                           "00000000000000000160", "00000000000000000240"};
    for (size_t i = 0; i < 4; i++) {
        char *path = tu_path(dir, "%s", names[i]);
        assert_int_equal(tu_file_size(path), 4 * CQ_ENTRY_SIZE);
        free(path);
    }
    assert_false(cq_file_exists(dir, 16));

    const uint64_t all[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13};
    assert_true(read_expect(cq, 2, 10, all + 2, 10) == 12); /* spans three files */
    assert_true(read_expect(cq, 3, 2, all + 3, 2) == 5);    /* last of one, first of next */
    assert_true(read_expect(cq, 0, 64, all, 14) == 14);
    assert_true(read_expect(cq, 12, 64, all + 12, 2) == 14);

    /* entry 5 sits at byte 20 of the second file */
    char *path = cq_file(dir, 4);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    uint8_t raw[4 * CQ_ENTRY_SIZE];
    assert_int_equal(fread(raw, 1, sizeof(raw), f), sizeof(raw));
    fclose(f);
    CqEntry e;
    cq_decode(raw + CQ_ENTRY_SIZE, &e);
    assert_true(entry_is_for(&e, 5));
    free(path);
    cq_close(cq);
    free(dir);
}

static void test_cq_reopen_finds_min_and_max(void **state) {
    char *dir = tu_path(*state, "q");
    ConsumeQueue *cq = NULL;
    assert_int_equal(cq_open(dir, 4, &cq), MQ_OK);
    put_range(cq, 2, 10); /* a queue starting at 2: slots 0 and 1 never written */
    assert_true(cq_min_offset(cq) == 2);
    assert_true(cq_max_offset(cq) == 10);
    assert_int_equal(cq_sync(cq), MQ_OK);
    cq_close(cq);

    /* a crash right after creating the next file leaves it all zeros */
    char *tail = cq_file(dir, 12);
    MappedFile *mf = NULL;
    assert_int_equal(mf_open(tail, 12 * CQ_ENTRY_SIZE, 4 * CQ_ENTRY_SIZE, true, &mf), MQ_OK);
    mf_unref(&mf);

    assert_int_equal(cq_open(dir, 4, &cq), MQ_OK);
    assert_true(cq_min_offset(cq) == 2);
    assert_true(cq_max_offset(cq) == 10);
    assert_true(cq_last_phys_end(cq) == 1000);
    const uint64_t want[] = {2, 3, 4, 5, 6, 7, 8, 9};
    assert_true(read_expect(cq, 0, 64, want, 8) == 10);
    put_range(cq, 10, 14); /* continues into the existing files */
    assert_true(cq_max_offset(cq) == 14);
    cq_close(cq);

    assert_int_equal(cq_open(dir, 4, &cq), MQ_OK);
    assert_true(cq_min_offset(cq) == 2);
    assert_true(cq_max_offset(cq) == 14);
    cq_close(cq);
    free(tail);
    free(dir);
}

static void test_cq_reopen_of_only_an_empty_file_starts_at_that_file(void **state) {
    char *dir = tu_path(*state, "q");
    assert_int_equal(mq_mkdirs(dir), MQ_OK);
    char *path = cq_file(dir, 8);
    MappedFile *mf = NULL;
    assert_int_equal(mf_open(path, 8 * CQ_ENTRY_SIZE, 4 * CQ_ENTRY_SIZE, true, &mf), MQ_OK);
    mf_unref(&mf);
    ConsumeQueue *cq = NULL;
    assert_int_equal(cq_open(dir, 4, &cq), MQ_OK);
    assert_true(cq_min_offset(cq) == 8);
    assert_true(cq_max_offset(cq) == 8);
    assert_true(cq_last_phys_end(cq) == 0);
    CqEntry e = entry_for(3);
    assert_int_equal(cq_put(cq, 3, &e), MQ_OK); /* below min: ignored */
    assert_false(cq_file_exists(dir, 0));
    put_range(cq, 8, 10);
    assert_true(cq_min_offset(cq) == 8);
    assert_true(cq_max_offset(cq) == 10);
    cq_close(cq);
    free(path);
    free(dir);
}

static void test_cq_open_rejects_bad_arguments_and_misaligned_files(void **state) {
    char *dir = tu_path(*state, "q");
    ConsumeQueue *cq = NULL;
    assert_int_equal(cq_open(dir, 0, &cq), MQ_ERR_INVAL);
    assert_null(cq);
    assert_int_equal(mq_mkdirs(dir), MQ_OK);
    char *junk = tu_path(dir, "README");
    FILE *f = fopen(junk, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(cq_open(dir, 4, &cq), MQ_OK); /* other names are ignored */
    cq_close(cq);
    cq = NULL;
    char *odd = tu_path(dir, "00000000000000000020"); /* entry 1: not a file start */
    f = fopen(odd, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(cq_open(dir, 4, &cq), MQ_ERR_CORRUPT);
    assert_null(cq);
    free(odd);
    free(junk);
    free(dir);
}

static int n_fdatasync;

static int counting_fdatasync(int fd) {
    n_fdatasync++;
    return mq_io_default.fdatasync(fd);
}

static void test_cq_put_of_identical_entry_is_a_noop_and_of_different_entry_overwrites(
    void **state) {
    char *dir = tu_path(*state, "q");
    ConsumeQueue *cq = NULL;
    assert_int_equal(cq_open(dir, 4, &cq), MQ_OK);
    put_range(cq, 0, 5);
    assert_int_equal(cq_sync(cq), MQ_OK);

    MqIo io = mq_io_default;
    io.fdatasync = counting_fdatasync;
    mq_io_set(&io);
    n_fdatasync = 0;
    put_range(cq, 2, 3); /* same entry again: nothing written */
    assert_int_equal(cq_sync(cq), MQ_OK);
    assert_int_equal(n_fdatasync, 0);
    assert_true(cq_max_offset(cq) == 5);

    CqEntry other = {.phys_off = 777, .size = 7, .tag_hash = 9};
    assert_int_equal(cq_put(cq, 2, &other), MQ_OK);
    assert_int_equal(cq_sync(cq), MQ_OK);
    mq_io_set(NULL);
    assert_int_equal(n_fdatasync, 1);
    assert_true(cq_max_offset(cq) == 5);
    CqEntry got;
    assert_int_equal(cq_get(cq, 2, &got), MQ_OK);
    assert_true(got.phys_off == 777 && got.size == 7 && got.tag_hash == 9);
    cq_close(cq);

    assert_int_equal(cq_open(dir, 4, &cq), MQ_OK);
    assert_int_equal(cq_get(cq, 2, &got), MQ_OK);
    assert_true(got.phys_off == 777);
    assert_true(cq_max_offset(cq) == 5);
    cq_close(cq);
    free(dir);
}

static void test_cq_sync_syncs_only_files_written_since_the_last_sync(void **state) {
    char *dir = tu_path(*state, "q");
    ConsumeQueue *cq = NULL;
    assert_int_equal(cq_open(dir, 4, &cq), MQ_OK);
    MqIo io = mq_io_default;
    io.fdatasync = counting_fdatasync;
    mq_io_set(&io);
    n_fdatasync = 0;
    put_range(cq, 0, 10); /* three files */
    assert_int_equal(cq_sync(cq), MQ_OK);
    assert_int_equal(n_fdatasync, 3);
    n_fdatasync = 0;
    assert_int_equal(cq_sync(cq), MQ_OK);
    assert_int_equal(n_fdatasync, 0);
    put_range(cq, 10, 11);
    assert_int_equal(cq_sync(cq), MQ_OK);
    assert_int_equal(n_fdatasync, 1);
    mq_io_set(NULL);
    cq_close(cq);
    free(dir);
}

static void test_cq_read_skips_empty_slots_and_get_reports_them_missing(void **state) {
    char *dir = tu_path(*state, "q");
    ConsumeQueue *cq = NULL;
    assert_int_equal(cq_open(dir, 4, &cq), MQ_OK);
    const uint64_t puts[] = {0, 1, 5, 10, 20}; /* files 12..19 are never created */
    for (size_t i = 0; i < 5; i++) put_range(cq, puts[i], puts[i] + 1);
    assert_true(cq_max_offset(cq) == 21);
    assert_false(cq_file_exists(dir, 12));
    assert_false(cq_file_exists(dir, 16));
    assert_true(read_expect(cq, 0, 64, puts, 5) == 21);
    assert_true(read_expect(cq, 2, 64, puts + 2, 3) == 21);
    assert_true(read_expect(cq, 11, 64, puts + 4, 1) == 21); /* over the missing files */
    CqEntry e;
    assert_int_equal(cq_get(cq, 2, &e), MQ_ERR_NOTFOUND);
    assert_int_equal(cq_get(cq, 15, &e), MQ_ERR_NOTFOUND);
    assert_int_equal(cq_get(cq, 5, &e), MQ_OK);

    /* each scanned slot counts, empty or not */
    CqEntry out[8];
    uint64_t offs[8];
    size_t n = 0;
    uint64_t next = 0;
    assert_int_equal(cq_read(cq, 1, 8, 3, NULL, 0, out, offs, &n, &next), MQ_OK);
    assert_int_equal(n, 1);
    assert_true(offs[0] == 1 && next == 4);

    put_range(cq, 3, 4); /* fill a slot below max */
    put_range(cq, 14, 15); /* and one in a missing file */
    const uint64_t filled[] = {0, 1, 3, 5, 10, 14, 20};
    assert_true(read_expect(cq, 0, 64, filled, 7) == 21);
    assert_true(cq_max_offset(cq) == 21);
    cq_close(cq);

    assert_int_equal(cq_open(dir, 4, &cq), MQ_OK);
    assert_true(cq_min_offset(cq) == 0);
    assert_true(cq_max_offset(cq) == 21);
    assert_true(read_expect(cq, 0, 64, filled, 7) == 21);
    cq_close(cq);
    free(dir);
}

static void test_cq_read_with_tag_filter_stops_at_max_scan_and_reports_next(void **state) {
    char *dir = tu_path(*state, "q");
    ConsumeQueue *cq = NULL;
    assert_int_equal(cq_open(dir, 8, &cq), MQ_OK);
    const uint64_t tag_a = mq_hash64("A", 1);
    const uint64_t tag_b = mq_hash64("B", 1);
    for (uint64_t off = 0; off < 20; off++) {
        CqEntry e = {.phys_off = off * 100, .size = 100, .tag_hash = off % 4 == 0 ? tag_a : tag_b};
        assert_int_equal(cq_put(cq, off, &e), MQ_OK);
    }
    CqEntry out[32];
    uint64_t offs[32];
    size_t n = 0;
    uint64_t next = 0;
    const uint64_t only_a[] = {tag_a};
    assert_int_equal(cq_read(cq, 0, 32, 100, only_a, 1, out, offs, &n, &next), MQ_OK);
    assert_int_equal(n, 5);
    for (size_t i = 0; i < n; i++) {
        assert_true(offs[i] == i * 4);
        assert_true(out[i].tag_hash == tag_a && out[i].phys_off == i * 400);
    }
    assert_true(next == 20);

    /* the scan bound: 6 slots scanned (0..5), two matches */
    assert_int_equal(cq_read(cq, 0, 32, 6, only_a, 1, out, offs, &n, &next), MQ_OK);
    assert_int_equal(n, 2);
    assert_true(offs[0] == 0 && offs[1] == 4);
    assert_true(next == 6);
    /* carrying on from 'next' with the same bound */
    assert_int_equal(cq_read(cq, next, 32, 6, only_a, 1, out, offs, &n, &next), MQ_OK);
    assert_int_equal(n, 1);
    assert_true(offs[0] == 8 && next == 12);
    /* the count bound: stop right after the second match */
    assert_int_equal(cq_read(cq, 0, 2, 100, only_a, 1, out, offs, &n, &next), MQ_OK);
    assert_int_equal(n, 2);
    assert_true(next == 5);
    /* a scan bound of 0 scans nothing */
    assert_int_equal(cq_read(cq, 3, 32, 0, only_a, 1, out, offs, &n, &next), MQ_OK);
    assert_int_equal(n, 0);
    assert_true(next == 3);
    /* several tags, one unknown */
    const uint64_t several[] = {mq_hash64("C", 1), tag_b};
    assert_int_equal(cq_read(cq, 0, 32, 100, several, 2, out, offs, &n, &next), MQ_OK);
    assert_int_equal(n, 15);
    for (size_t i = 0; i < n; i++) assert_true(offs[i] % 4 != 0);
    /* no match at all: the scan still advances 'next' */
    const uint64_t none[] = {mq_hash64("C", 1)};
    assert_int_equal(cq_read(cq, 0, 32, 7, none, 1, out, offs, &n, &next), MQ_OK);
    assert_int_equal(n, 0);
    assert_true(next == 7);
    cq_close(cq);
    free(dir);
}

/* ---- truncation and retention --------------------------------------------*/

static void test_cq_truncate_phys_drops_tail_entries_and_deletes_emptied_files(void **state) {
    char *dir = tu_path(*state, "q");
    ConsumeQueue *cq = NULL;
    assert_int_equal(cq_open(dir, 4, &cq), MQ_OK);
    put_range(cq, 0, 14); /* entry k ends at (k+1)*100 */
    assert_int_equal(cq_truncate_phys(cq, 1400), MQ_OK); /* nothing past the end */
    assert_true(cq_max_offset(cq) == 14);

    assert_int_equal(cq_truncate_phys(cq, 650), MQ_OK); /* entry 5 ends at 600, 6 at 700 */
    assert_true(cq_max_offset(cq) == 6);
    assert_true(cq_min_offset(cq) == 0);
    assert_true(cq_last_phys_end(cq) == 600);
    assert_true(cq_file_exists(dir, 0));
    assert_true(cq_file_exists(dir, 4));
    assert_false(cq_file_exists(dir, 8));
    assert_false(cq_file_exists(dir, 12));
    CqEntry e;
    assert_int_equal(cq_get(cq, 6, &e), MQ_ERR_NOTFOUND);
    const uint64_t all[] = {0, 1, 2, 3, 4, 5, 6, 7};
    assert_true(read_expect(cq, 0, 64, all, 6) == 6);
    assert_int_equal(cq_sync(cq), MQ_OK);
    cq_close(cq);

    /* the wiped slots are zero on disk, and a reopen agrees */
    char *path = cq_file(dir, 4);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    uint8_t raw[4 * CQ_ENTRY_SIZE];
    assert_int_equal(fread(raw, 1, sizeof(raw), f), sizeof(raw));
    fclose(f);
    for (size_t i = 2 * CQ_ENTRY_SIZE; i < sizeof(raw); i++) assert_int_equal(raw[i], 0);
    free(path);
    assert_int_equal(cq_open(dir, 4, &cq), MQ_OK);
    assert_true(cq_min_offset(cq) == 0);
    assert_true(cq_max_offset(cq) == 6);
    assert_true(read_expect(cq, 0, 64, all, 6) == 6);

    put_range(cq, 6, 8); /* the dispatcher re-puts after the cut */
    assert_true(read_expect(cq, 0, 64, all, 8) == 8);
    assert_int_equal(cq_truncate_phys(cq, 0), MQ_OK); /* everything goes */
    assert_true(cq_max_offset(cq) == 0);
    assert_false(cq_file_exists(dir, 0));
    assert_false(cq_file_exists(dir, 4));
    cq_close(cq);
    assert_int_equal(cq_open(dir, 4, &cq), MQ_OK);
    assert_true(cq_min_offset(cq) == 0 && cq_max_offset(cq) == 0);
    cq_close(cq);
    free(dir);
}

static void test_cq_truncate_phys_passes_over_empty_slots_to_the_last_kept_entry(void **state) {
    char *dir = tu_path(*state, "q");
    ConsumeQueue *cq = NULL;
    assert_int_equal(cq_open(dir, 4, &cq), MQ_OK);
    const uint64_t puts[] = {0, 1, 2, 9, 17}; /* files 4..7, 12..15 missing */
    for (size_t i = 0; i < 5; i++) put_range(cq, puts[i], puts[i] + 1);
    assert_int_equal(cq_truncate_phys(cq, 300), MQ_OK); /* entry 2 ends at 300 */
    assert_true(cq_max_offset(cq) == 3);
    assert_true(cq_last_phys_end(cq) == 300);
    assert_false(cq_file_exists(dir, 8));
    assert_false(cq_file_exists(dir, 16));
    assert_true(cq_file_exists(dir, 0));
    cq_close(cq);
    assert_int_equal(cq_open(dir, 4, &cq), MQ_OK);
    assert_true(cq_max_offset(cq) == 3);
    cq_close(cq);
    free(dir);
}

static void test_cq_delete_below_phys_deletes_files_and_moves_min(void **state) {
    char *dir = tu_path(*state, "q");
    ConsumeQueue *cq = NULL;
    assert_int_equal(cq_open(dir, 4, &cq), MQ_OK);
    put_range(cq, 0, 14); /* entry k at phys k*100 */
    assert_int_equal(cq_delete_below_phys(cq, 0), 0);
    assert_true(cq_min_offset(cq) == 0);

    assert_int_equal(cq_delete_below_phys(cq, 650), 1); /* file 0..3 ends at 400 */
    assert_false(cq_file_exists(dir, 0));
    assert_true(cq_file_exists(dir, 4));
    assert_true(cq_min_offset(cq) == 7); /* first phys_off >= 650 is 700 */
    assert_true(cq_max_offset(cq) == 14);
    CqEntry e;
    assert_int_equal(cq_get(cq, 5, &e), MQ_ERR_NOTFOUND);
    assert_int_equal(cq_get(cq, 1, &e), MQ_ERR_NOTFOUND);
    assert_int_equal(cq_get(cq, 7, &e), MQ_OK);
    const uint64_t all[] = {7, 8, 9, 10, 11, 12, 13};
    assert_true(read_expect(cq, 0, 64, all, 7) == 14); /* below min starts at min */
    assert_true(read_expect(cq, 3, 2, all, 2) == 9);

    /* everything expired: the file holding max-1 (12..15) stays */
    assert_int_equal(cq_delete_below_phys(cq, 100000), 2);
    assert_false(cq_file_exists(dir, 4));
    assert_false(cq_file_exists(dir, 8));
    assert_true(cq_file_exists(dir, 12));
    assert_true(cq_min_offset(cq) == 14);
    assert_true(cq_max_offset(cq) == 14);
    assert_true(cq_last_phys_end(cq) == 1400);
    assert_true(read_expect(cq, 0, 64, NULL, 0) == 14);
    assert_int_equal(cq_delete_below_phys(cq, 100000), 0);

    e = entry_for(3);
    assert_int_equal(cq_put(cq, 3, &e), MQ_OK); /* below min: ignored */
    assert_false(cq_file_exists(dir, 0));
    put_range(cq, 14, 17);
    assert_true(cq_min_offset(cq) == 14);
    const uint64_t tail[] = {14, 15, 16};
    assert_true(read_expect(cq, 0, 64, tail, 3) == 17);
    cq_close(cq);
    free(dir);
}

static void test_cq_destroy_removes_the_directory(void **state) {
    char *dir = tu_path(*state, "q");
    ConsumeQueue *cq = NULL;
    assert_int_equal(cq_open(dir, 4, &cq), MQ_OK);
    put_range(cq, 0, 10);
    assert_true(tu_exists(dir));
    assert_int_equal(cq_destroy(cq), MQ_OK);
    assert_false(tu_exists(dir));
    assert_int_equal(cq_open(dir, 4, &cq), MQ_OK); /* a fresh, empty queue */
    assert_true(cq_max_offset(cq) == 0);
    assert_int_equal(cq_destroy(cq), MQ_OK);
    assert_false(tu_exists(dir));
    free(dir);
}

/* ---- disk full -----------------------------------------------------------*/

static int enospc_fallocate(int fd, int mode, off_t off, off_t len) {
    (void)fd, (void)mode, (void)off, (void)len;
    errno = ENOSPC;
    return -1;
}

static void test_cq_put_reports_full_when_a_file_cannot_be_created(void **state) {
    char *dir = tu_path(*state, "q");
    ConsumeQueue *cq = NULL;
    assert_int_equal(cq_open(dir, 4, &cq), MQ_OK);
    put_range(cq, 0, 4);
    MqIo io = mq_io_default;
    io.fallocate = enospc_fallocate;
    mq_io_set(&io);
    CqEntry e = entry_for(4);
    int rc = cq_put(cq, 4, &e);
    int rc_again = cq_put(cq, 4, &e);
    CqEntry e3 = entry_for(3);
    int rc_existing = cq_put(cq, 3, &e3); /* needs no new file */
    mq_io_set(NULL);
    assert_int_equal(rc, MQ_ERR_FULL);
    assert_int_equal(rc_again, MQ_ERR_FULL);
    assert_int_equal(rc_existing, MQ_OK);
    assert_false(cq_file_exists(dir, 4));
    assert_true(cq_max_offset(cq) == 4);
    const uint64_t all[] = {0, 1, 2, 3, 4, 5};
    assert_true(read_expect(cq, 0, 64, all, 4) == 4);

    put_range(cq, 4, 6); /* space is back */
    assert_true(cq_max_offset(cq) == 6);
    assert_true(read_expect(cq, 0, 64, all, 6) == 6);
    assert_int_equal(cq_sync(cq), MQ_OK);
    cq_close(cq);
    assert_int_equal(cq_open(dir, 4, &cq), MQ_OK);
    assert_true(cq_max_offset(cq) == 6);
    cq_close(cq);
    free(dir);
}

/* ---- concurrency ---------------------------------------------------------*/

enum { RACE_ENTRIES = 100000, RACE_FILE_ENTRIES = 1000, RACE_KEEP = 20000 };

typedef struct Race {
    ConsumeQueue *cq;
    int done;      /* atomic; the writer has finished */
    long bad;      /* entries that did not match their offset */
    long disorder; /* offsets out of order within or across reads */
    long reads;    /* entries copied */
    long errors;   /* calls that failed */
    long deleted;  /* files deleted (housekeeper) */
    uint64_t seed; /* xorshift state of the random getter, != 0 */
} Race;

static void *race_reader(void *arg) {
    Race *r = arg;
    CqEntry out[32];
    uint64_t offs[32];
    uint64_t from = 0;
    for (;;) {
        bool finished = __atomic_load_n(&r->done, __ATOMIC_ACQUIRE);
        size_t n = 0;
        uint64_t next = 0;
        if (cq_read(r->cq, from, 32, 64, NULL, 0, out, offs, &n, &next) != MQ_OK) r->errors++;
        uint64_t prev = from;
        for (size_t i = 0; i < n; i++) {
            if (!entry_is_for(&out[i], offs[i])) r->bad++;
            if (offs[i] < prev || (i > 0 && offs[i] != offs[i - 1] + 1)) r->disorder++;
            prev = offs[i] + 1;
        }
        if (next < from) r->disorder++;
        r->reads += (long)n;
        from = next;
        if (finished && n == 0 && next >= cq_max_offset(r->cq)) break;
    }
    return NULL;
}

static void *race_getter(void *arg) {
    Race *r = arg;
    while (!__atomic_load_n(&r->done, __ATOMIC_ACQUIRE)) {
        uint64_t max = cq_max_offset(r->cq);
        if (max == 0) continue;
        r->seed ^= r->seed << 13; /* xorshift */
        r->seed ^= r->seed >> 7;
        r->seed ^= r->seed << 17;
        uint64_t off = r->seed % max;
        CqEntry e;
        if (cq_get(r->cq, off, &e) == MQ_OK) {
            if (!entry_is_for(&e, off)) r->bad++;
            r->reads++;
        }
        if (cq_get(r->cq, max - 1, &e) != MQ_OK || !entry_is_for(&e, max - 1)) r->bad++;
    }
    return NULL;
}

/* What the store's housekeeper does: sync the queue and apply retention,
 * keeping the last RACE_KEEP entries' records. */
static void *race_housekeeper(void *arg) {
    Race *r = arg;
    while (!__atomic_load_n(&r->done, __ATOMIC_ACQUIRE)) {
        if (cq_sync(r->cq) != MQ_OK) r->errors++;
        uint64_t max = cq_max_offset(r->cq);
        if (max <= RACE_KEEP) continue;
        int rc = cq_delete_below_phys(r->cq, (max - RACE_KEEP) * 100);
        if (rc < 0) r->errors++;
        else r->deleted += rc;
    }
    return NULL;
}

static void test_cq_reader_never_sees_a_torn_entry_while_the_writer_appends(void **state) {
    char *dir = tu_path(*state, "q");
    ConsumeQueue *cq = NULL;
    assert_int_equal(cq_open(dir, RACE_FILE_ENTRIES, &cq), MQ_OK);
    Race reader = {.cq = cq};
    Race getter = {.cq = cq, .seed = 42};
    Race keeper = {.cq = cq};
    pthread_t t_reader;
    pthread_t t_getter;
    pthread_t t_keeper;
    assert_int_equal(pthread_create(&t_reader, NULL, race_reader, &reader), 0);
    assert_int_equal(pthread_create(&t_getter, NULL, race_getter, &getter), 0);
    assert_int_equal(pthread_create(&t_keeper, NULL, race_housekeeper, &keeper), 0);
    for (uint64_t off = 0; off < RACE_ENTRIES; off++) {
        CqEntry e = entry_for(off);
        assert_int_equal(cq_put(cq, off, &e), MQ_OK);
    }
    __atomic_store_n(&reader.done, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&getter.done, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&keeper.done, 1, __ATOMIC_RELEASE);
    pthread_join(t_reader, NULL);
    pthread_join(t_getter, NULL);
    pthread_join(t_keeper, NULL);
    assert_int_equal(reader.bad, 0);
    assert_int_equal(reader.disorder, 0);
    assert_int_equal(reader.errors, 0);
    assert_int_equal(getter.bad, 0);
    assert_int_equal(keeper.errors, 0);
    assert_true(reader.reads > 0);

    /* one last round: files 0..79 hold only records below entry 80000 */
    int rc = cq_delete_below_phys(cq, (RACE_ENTRIES - RACE_KEEP) * 100);
    assert_true(rc >= 0);
    assert_int_equal(keeper.deleted + rc, (RACE_ENTRIES - RACE_KEEP) / RACE_FILE_ENTRIES);
    assert_true(cq_min_offset(cq) == RACE_ENTRIES - RACE_KEEP);
    assert_true(cq_max_offset(cq) == RACE_ENTRIES);
    assert_false(cq_file_exists(dir, RACE_ENTRIES - RACE_KEEP - RACE_FILE_ENTRIES));
    assert_true(cq_file_exists(dir, RACE_ENTRIES - RACE_KEEP));
    cq_close(cq);
    free(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup_dir, teardown_dir)
        T(test_cq_encode_writes_twenty_little_endian_bytes_and_decode_reverses_it),
        T(test_cq_put_then_read_returns_entries_in_order),
        T(test_cq_files_split_exactly_at_file_boundaries),
        T(test_cq_reopen_finds_min_and_max),
        T(test_cq_reopen_of_only_an_empty_file_starts_at_that_file),
        T(test_cq_open_rejects_bad_arguments_and_misaligned_files),
        T(test_cq_put_of_identical_entry_is_a_noop_and_of_different_entry_overwrites),
        T(test_cq_sync_syncs_only_files_written_since_the_last_sync),
        T(test_cq_read_skips_empty_slots_and_get_reports_them_missing),
        T(test_cq_read_with_tag_filter_stops_at_max_scan_and_reports_next),
        T(test_cq_truncate_phys_drops_tail_entries_and_deletes_emptied_files),
        T(test_cq_truncate_phys_passes_over_empty_slots_to_the_last_kept_entry),
        T(test_cq_delete_below_phys_deletes_files_and_moves_min),
        T(test_cq_destroy_removes_the_directory),
        T(test_cq_put_reports_full_when_a_file_cannot_be_created),
        T(test_cq_reader_never_sees_a_torn_entry_while_the_writer_appends),
#undef T
    };
    return cmocka_run_group_tests_name("consumequeue", tests, NULL, NULL);
}
