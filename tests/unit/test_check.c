/*
 * test_check.c - the offline checker: a clean store checks clean; a flipped
 * record byte and a wrong queue entry are both reported.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "store.h"

static char *make_store(ClAppendResult *last) {
    char *dir = tu_mkdtemp("check");
    StoreConfig cfg;
    store_config_defaults(&cfg, dir);
    cfg.segment_size = 8192;
    cfg.cq_file_entries = 16;
    cfg.index_slots = 16;
    cfg.index_entries = 64;
    Store *st = NULL;
    assert_int_equal(store_open(&cfg, &st), MQ_OK);
    for (int i = 0; i < 100; i++) {
        char body[64];
        int n = snprintf(body, sizeof(body), "message number %d", i);
        ClMessage m = {.topic = mq_slice("chk", 3), .queue_id = (uint32_t)(i % 2),
                       .body = mq_slice(body, (size_t)n)};
        assert_int_equal(store_put(st, &m, 1, last), MQ_OK);
    }
    store_close(st);
    return dir;
}

static void test_check_clean_store_is_clean(void **state) {
    (void)state;
    ClAppendResult last;
    char *dir = make_store(&last);
    CheckReport rep;
    assert_int_equal(check_dir(dir, 0, NULL, &rep), MQ_OK);
    assert_true(rep.records == 100);
    assert_true(rep.entries == 100);
    assert_true(rep.queues == 2);
    assert_true(rep.log_end == last.phys_off + last.size);
    assert_true(rep.segments >= 2);
    assert_int_equal(rep.checkpoint, MQ_OK);
    assert_int_equal(rep.abort_present, 0);
    tu_rmtree(dir);
    free(dir);
}

static void test_check_reports_flipped_byte_and_wrong_entry(void **state) {
    (void)state;
    ClAppendResult last;
    char *dir = make_store(&last);
    char *seg = tu_path(dir, "commitlog/%020d", 0);
    int fd = open(seg, O_RDWR);
    uint8_t b;
    assert_int_equal(pread(fd, &b, 1, 500), 1);
    b ^= 0x10;
    assert_int_equal(pwrite(fd, &b, 1, 500), 1);
    close(fd);
    /* queue 1 entry 0 now claims to be in queue 0's record */
    char *cq0 = tu_path(dir, "consumequeue/chk/0/%020d", 0);
    char *cq1 = tu_path(dir, "consumequeue/chk/1/%020d", 0);
    uint8_t e[20];
    fd = open(cq0, O_RDONLY);
    assert_int_equal(pread(fd, e, 20, 0), 20);
    close(fd);
    fd = open(cq1, O_RDWR);
    assert_int_equal(pwrite(fd, e, 20, 0), 20);
    close(fd);
    CheckReport rep;
    assert_int_equal(check_dir(dir, 0, NULL, &rep), MQ_ERR_CORRUPT);
    assert_true(rep.bad_offset < 500);
    assert_true(rep.bad_entries >= 1);
    free(seg);
    free(cq0);
    free(cq1);
    tu_rmtree(dir);
    free(dir);
}

static void test_check_dump_prints_records(void **state) {
    (void)state;
    ClAppendResult last;
    char *dir = make_store(&last);
    char *path = tu_path(dir, "dump.txt");
    FILE *out = fopen(path, "w+");
    assert_int_equal(check_dump(dir, 0, 0, 3, out), MQ_OK);
    rewind(out);
    char line[512];
    int lines = 0;
    while (fgets(line, sizeof(line), out)) lines++;
    fclose(out);
    assert_int_equal(lines, 3);
    assert_non_null(strstr(line, "topic=chk"));
    assert_non_null(strstr(line, "body=message number 2"));
    free(path);
    tu_rmtree(dir);
    free(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_clean_store_is_clean),
        cmocka_unit_test(test_check_reports_flipped_byte_and_wrong_entry),
        cmocka_unit_test(test_check_dump_prints_records),
    };
    return cmocka_run_group_tests_name("check", tests, NULL, NULL);
}
