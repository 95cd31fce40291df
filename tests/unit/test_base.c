/*
 * test_base.c - mq.h helpers, CRC-32C and the mapped-file module.
 */
#include "testutil.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "io.h"
#include "mfile.h"
#include "mq.h"

static void test_crc32c_matches_known_check_value(void **state) {
    (void)state;
    assert_int_equal(mq_crc32c("123456789", 9), 0xE3069283u);
    assert_int_equal(mq_crc32c("", 0), 0);
}

static void test_crc32c_extend_equals_whole(void **state) {
    (void)state;
    char buf[1000];
    for (size_t i = 0; i < sizeof(buf); i++) buf[i] = (char)(i * 7 + 3);
    uint32_t whole = mq_crc32c(buf, sizeof(buf));
    for (size_t cut = 0; cut <= sizeof(buf); cut += 37) {
        uint32_t c = mq_crc32c_extend(0, buf, cut);
        c = mq_crc32c_extend(c, buf + cut, sizeof(buf) - cut);
        assert_int_equal(c, whole);
    }
}

static void test_le_codecs_round_trip(void **state) {
    (void)state;
    uint8_t b[8];
    mq_put_u64(b, 0x0102030405060708ULL);
    assert_int_equal(b[0], 0x08);
    assert_int_equal(b[7], 0x01);
    assert_true(mq_get_u64(b) == 0x0102030405060708ULL);
    mq_put_u32(b, 0xA1B2C3D4u);
    assert_int_equal(b[0], 0xD4);
    assert_int_equal(mq_get_u32(b), 0xA1B2C3D4u);
    mq_put_u16(b, 0xBEEF);
    assert_int_equal(mq_get_u16(b), 0xBEEF);
}

static void test_mf_name_round_trip(void **state) {
    (void)state;
    char name[21];
    mf_name_for(1073741824ULL, name);
    assert_string_equal(name, "00000000001073741824");
    uint64_t off = 0;
    assert_true(mf_parse_name(name, &off));
    assert_true(off == 1073741824ULL);
    assert_false(mf_parse_name("0000000000107374182x", &off));
    assert_false(mf_parse_name("123", &off));
    assert_false(mf_parse_name("99999999999999999999", &off)); /* > UINT64_MAX */
}

static void test_mf_create_write_reopen(void **state) {
    (void)state;
    char *dir = tu_mkdtemp("mf");
    char *path = tu_path(dir, "00000000000000004096");
    MappedFile *mf = NULL;
    assert_int_equal(mf_open(path, 4096, 65536, true, &mf), MQ_OK);
    assert_int_equal(tu_file_size(path), 65536);
    memcpy(mf_data(mf) + 100, "hello", 5);
    assert_int_equal(mf_sync(mf), MQ_OK);
    assert_int_equal(mf_open(path, 4096, 65536, true, &(MappedFile *){NULL}), MQ_ERR_EXISTS);
    mf_unref(&mf);
    assert_null(mf);
    assert_int_equal(mf_open(path, 4096, 65536, false, &mf), MQ_OK);
    assert_memory_equal(mf_data(mf) + 100, "hello", 5);
    assert_true(mf_base(mf) == 4096);
    /* zeroing a range spanning partial and whole pages */
    memset(mf_data(mf), 0xAB, 65536);
    assert_int_equal(mf_zero(mf, 1000, 20000), MQ_OK);
    assert_int_equal(mf_data(mf)[999], 0xAB);
    for (size_t i = 1000; i < 20000; i++) assert_int_equal(mf_data(mf)[i], 0);
    assert_int_equal(mf_data(mf)[20000], 0xAB);
    mf_unref(&mf);
    MappedFile *bigger = NULL;
    assert_int_equal(mf_open(path, 4096, 4096, false, &bigger), MQ_ERR_CORRUPT);
    assert_int_equal(mf_open(dir, 0, 4096, false, &bigger) != MQ_OK, 1);
    free(path);
    tu_rmtree(dir);
    free(dir);
}

static int fail_fallocate(int fd, int mode, off_t off, off_t len) {
    (void)fd, (void)mode, (void)off, (void)len;
    errno = ENOSPC;
    return -1;
}

static void test_mf_create_reports_disk_full_and_leaves_no_file(void **state) {
    (void)state;
    char *dir = tu_mkdtemp("mf");
    char *path = tu_path(dir, "00000000000000000000");
    MqIo io = mq_io_default;
    io.fallocate = fail_fallocate;
    mq_io_set(&io);
    MappedFile *mf = NULL;
    int rc = mf_open(path, 0, 65536, true, &mf);
    mq_io_set(NULL);
    assert_int_equal(rc, MQ_ERR_FULL);
    assert_null(mf);
    assert_false(tu_exists(path));
    free(path);
    tu_rmtree(dir);
    free(dir);
}

static void test_mf_unlinked_file_stays_readable_while_referenced(void **state) {
    (void)state;
    char *dir = tu_mkdtemp("mf");
    char *path = tu_path(dir, "00000000000000000000");
    MappedFile *mf = NULL;
    assert_int_equal(mf_open(path, 0, 8192, true, &mf), MQ_OK);
    memcpy(mf_data(mf), "keep", 4);
    MappedFile *reader = mf;
    mf_ref(reader);
    assert_int_equal(mf_mark_delete(mf), MQ_OK);
    mf_unref(&mf);
    assert_false(tu_exists(path));
    assert_memory_equal(mf_data(reader), "keep", 4);
    mf_unref(&reader);
    free(path);
    tu_rmtree(dir);
    free(dir);
}

static void test_strerror_names_every_code(void **state) {
    (void)state;
    for (int e = 0; e >= MQ_ERR_RDONLY; e--) assert_string_not_equal(mq_strerror(e), "unknown error");
    assert_string_equal(mq_strerror(-999), "unknown error");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32c_matches_known_check_value),
        cmocka_unit_test(test_crc32c_extend_equals_whole),
        cmocka_unit_test(test_le_codecs_round_trip),
        cmocka_unit_test(test_mf_name_round_trip),
        cmocka_unit_test(test_mf_create_write_reopen),
        cmocka_unit_test(test_mf_create_reports_disk_full_and_leaves_no_file),
        cmocka_unit_test(test_mf_unlinked_file_stays_readable_while_referenced),
        cmocka_unit_test(test_strerror_names_every_code),
    };
    return cmocka_run_group_tests_name("base", tests, NULL, NULL);
}
