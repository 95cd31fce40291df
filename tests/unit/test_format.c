/*
 * test_format.c - golden files: the record and checkpoint encoders must
 * produce exactly the bytes of tests/data/ (the examples of FORMAT.md), and
 * the decoders must read them back.  A failure here means the on-disk
 * format changed.
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "commitlog.h"

static size_t load(const char *name, uint8_t *buf, size_t cap) {
    char path[512];
    const char *root = getenv("PETREL_SRC");
    snprintf(path, sizeof(path), "%s/tests/data/%s", root ? root : ".", name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    return n;
}

static void test_format_record_v1_matches_golden_bytes(void **state) {
    (void)state;
    uint8_t golden[256];
    size_t n = load("record-v1.bin", golden, sizeof(golden));
    assert_int_equal(n, 129);
    static const char props[] = "TAGS\001TagA\002KEYS\001order-1\002";
    ClMessage m = {.topic = mq_slice("orders", 6), .queue_id = 1, .born_ts = 1767225600000,
                   .body = mq_slice("hello", 5), .props = mq_slice(props, sizeof(props) - 1)};
    memcpy(m.born_host, (uint8_t[8]){10, 0, 0, 7, 0x39, 0x30, 0, 0}, 8);
    uint8_t host[8] = {127, 0, 0, 1, 0x90, 0x1f, 0, 0};
    uint8_t out[256];
    assert_int_equal(cl_record_size(&m), 129);
    cl_encode(out, 129, &m, 0, 0, 1767225600123, host);
    assert_memory_equal(out, golden, 129);
    ClRecord rec;
    assert_int_equal(cl_decode(golden, n, true, &rec), CL_REC_OK);
    assert_true(rec.store_ts == 1767225600123);
    assert_memory_equal(rec.topic.ptr, "orders", 6);
}

static void test_format_checkpoint_v1_matches_golden_bytes(void **state) {
    (void)state;
    uint8_t golden[128];
    assert_int_equal(load("checkpoint-v1.bin", golden, sizeof(golden)), CKPT_SIZE);
    Checkpoint ck;
    assert_int_equal(ckpt_decode(golden, &ck), MQ_OK);
    assert_true(ck.log_flushed == 129 && ck.cq_flushed == 129 && ck.index_flushed == 129);
    assert_true(ck.log_ts == 1767225600123);
    uint8_t out[CKPT_SIZE];
    ckpt_encode(out, &ck);
    assert_memory_equal(out, golden, CKPT_SIZE);
    golden[20] ^= 1;
    assert_int_equal(ckpt_decode(golden, &ck), MQ_ERR_CORRUPT);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format_record_v1_matches_golden_bytes),
        cmocka_unit_test(test_format_checkpoint_v1_matches_golden_bytes),
    };
    return cmocka_run_group_tests_name("format", tests, NULL, NULL);
}
