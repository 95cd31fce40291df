/*
 * test_receipt.c - receipt handles (core/receipt.c): SipHash-2-4 against
 * the paper's test vectors, round trips, and every way a handle is refused
 * (length, digits, version, flags, MAC: one changed bit, another group or
 * topic, another key).
 */
#include "testutil.h"

#include <string.h>

#include "mq.h"
#include "receipt.h"

static const uint8_t KEY[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

static void test_receipt_siphash_matches_the_reference_vectors(void **state) {
    (void)state;
    uint8_t msg[64];
    for (int i = 0; i < 64; i++) msg[i] = (uint8_t)i;
    /* From the SipHash paper's appendix (vectors 0, 8 and 15). */
    assert_true(receipt_siphash(KEY, msg, 0) == 0x726fdb47dd0e0e31ull);
    assert_true(receipt_siphash(KEY, msg, 8) == 0x93f5f5799a932462ull);
    assert_true(receipt_siphash(KEY, msg, 15) == 0xa129ca6149be45e5ull);
}

static void test_receipt_round_trip_keeps_every_field(void **state) {
    (void)state;
    Receipt in = {.retry = true, .queue_id = 1023, .queue_off = 0x0123456789abcdefull,
                  .seq = 4000000000u};
    char h[RECEIPT_LEN + 1];
    ReceiptKey k;
    receipt_key_derive(KEY, "g1", "Orders", &k);
    receipt_encode(&k, &in, h);
    assert_int_equal(strlen(h), RECEIPT_LEN);
    Receipt out;
    assert_int_equal(receipt_decode(&k, h, RECEIPT_LEN, &out), MQ_OK);
    assert_true(out.retry);
    assert_int_equal(out.queue_id, 1023);
    assert_true(out.queue_off == 0x0123456789abcdefull);
    assert_int_equal(out.seq, 4000000000u);
    /* lower-case digits are the same handle */
    for (char *p = h; *p; p++)
        if (*p >= 'A' && *p <= 'F') *p = (char)(*p - 'A' + 'a');
    assert_int_equal(receipt_decode(&k, h, RECEIPT_LEN, &out), MQ_OK);
}

/* Decodes 'h' as a handle of ('group', 'topic') under 'secret'. */
static int decode_for(const uint8_t *secret, const char *group, const char *topic, const char *h,
                      size_t len, Receipt *out) {
    ReceiptKey k;
    receipt_key_derive(secret, group, topic, &k);
    return receipt_decode(&k, h, len, out);
}

static void test_receipt_refuses_forged_damaged_and_foreign_handles(void **state) {
    (void)state;
    Receipt in = {.retry = false, .queue_id = 3, .queue_off = 41, .seq = 1};
    char h[RECEIPT_LEN + 1];
    ReceiptKey k;
    receipt_key_derive(KEY, "g1", "Orders", &k);
    receipt_encode(&k, &in, h);
    Receipt out = {.queue_id = 77};
    assert_int_equal(decode_for(KEY, "g1", "Orders", h, RECEIPT_LEN, &out), MQ_OK);
    /* wrong length */
    assert_int_equal(decode_for(KEY, "g1", "Orders", h, RECEIPT_LEN - 1, &out), MQ_ERR_INVAL);
    /* another group, another topic, the names split differently, another key */
    assert_int_equal(decode_for(KEY, "g2", "Orders", h, RECEIPT_LEN, &out), MQ_ERR_INVAL);
    assert_int_equal(decode_for(KEY, "g1", "Order", h, RECEIPT_LEN, &out), MQ_ERR_INVAL);
    assert_int_equal(decode_for(KEY, "g1O", "rders", h, RECEIPT_LEN, &out), MQ_ERR_INVAL);
    uint8_t other[16] = {1};
    assert_int_equal(decode_for(other, "g1", "Orders", h, RECEIPT_LEN, &out), MQ_ERR_INVAL);
    /* one changed digit anywhere */
    for (size_t i = 0; i < RECEIPT_LEN; i++) {
        char bad[RECEIPT_LEN + 1];
        memcpy(bad, h, sizeof(bad));
        bad[i] = bad[i] == '0' ? '1' : '0';
        assert_int_equal(receipt_decode(&k, bad, RECEIPT_LEN, &out), MQ_ERR_INVAL);
    }
    /* not hex */
    char bad[RECEIPT_LEN + 1];
    memcpy(bad, h, sizeof(bad));
    bad[10] = 'g';
    assert_int_equal(receipt_decode(&k, bad, RECEIPT_LEN, &out), MQ_ERR_INVAL);
    assert_int_equal(receipt_decode(&k, NULL, 0, &out), MQ_ERR_INVAL);
    /* seq 0 is never issued, even with a valid MAC */
    Receipt zero = in;
    zero.seq = 0;
    out.queue_id = 77;
    receipt_encode(&k, &zero, h);
    assert_int_equal(receipt_decode(&k, h, RECEIPT_LEN, &out), MQ_ERR_INVAL);
    assert_int_equal(out.queue_id, 77); /* untouched on failure */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_receipt_siphash_matches_the_reference_vectors),
        cmocka_unit_test(test_receipt_round_trip_keeps_every_field),
        cmocka_unit_test(test_receipt_refuses_forged_damaged_and_foreign_handles),
    };
    return cmocka_run_group_tests_name("receipt", tests, NULL, NULL);
}
