/*
 * fuzz_receipt.c - receipt-handle decoding (core/receipt.c) on arbitrary
 * input: never crashes; whatever decodes must be a handle the encoder
 * makes, byte for byte (upper-cased), so a forged handle can only pass by
 * guessing a 64-bit MAC.  The first input byte picks the group and topic
 * the handle is checked against; the rest is the handle text.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mq.h"
#include "receipt.h"

static const uint8_t KEY[RECEIPT_KEY_LEN] = {7, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
static const char *const NAMES[4] = {"g", "group-with-a-longer-name", "%RETRY%g", ""};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    const char *group = NAMES[data[0] & 3];
    const char *topic = NAMES[(data[0] >> 2) & 3];
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    Receipt r;
    ReceiptKey k;
    receipt_key_derive(KEY, group, topic, &k);
    if (receipt_decode(&k, text, len, &r) != MQ_OK) {
        /* A valid handle for these names, with the input's fields, then
         * one byte of the input flipped into it: must be refused. */
        Receipt made = {.retry = data[0] & 16, .queue_id = (uint32_t)len, .queue_off = size,
                        .seq = 1 + data[0]};
        char h[RECEIPT_LEN + 1];
        receipt_encode(&k, &made, h);
        Receipt back;
        if (receipt_decode(&k, h, RECEIPT_LEN, &back) != MQ_OK) abort();
        if (back.queue_id != made.queue_id || back.queue_off != made.queue_off ||
            back.seq != made.seq || back.retry != made.retry)
            abort();
        size_t at = data[size - 1] % RECEIPT_LEN;
        char c = h[at];
        h[at] = c == '0' ? '1' : '0';
        if (receipt_decode(&k, h, RECEIPT_LEN, &back) == MQ_OK) abort();
        return 0;
    }
    char again[RECEIPT_LEN + 1];
    receipt_encode(&k, &r, again);
    for (size_t i = 0; i < RECEIPT_LEN; i++) {
        char c = text[i];
        if (c >= 'a' && c <= 'f') c = (char)(c - 'a' + 'A');
        if (c != again[i]) abort();
    }
    return 0;
}
