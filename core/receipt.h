/*
 * receipt.h - receipt handles of the receive/ack API (core/pop.h): which
 * delivery of which message a consumer is acknowledging, as 52 hex digits
 * that only this broker can have made.
 *
 * The 26 bytes behind the hex digits, integers little-endian:
 *
 *   +-----+-------+----------+----------------+---------+----------------+
 *   | ver | flags | queue id | queue offset   | seq     | MAC            |
 *   | 1   | 1     | 4        | 8              | 4       | 8              |
 *   +-----+-------+----------+----------------+---------+----------------+
 *
 *   ver    RECEIPT_VERSION (1)
 *   flags  bit 0: the message came from the group's retry topic
 *          (%RETRY%<group>), not from the subscribed topic itself;
 *          other bits 0
 *   seq    the delivery number of that message (pop.c counts them), so a
 *          handle of an earlier delivery is told apart from the current one
 *   MAC    SipHash-2-4 of the first 18 bytes under a key derived from the
 *          broker's 16-byte secret, the group name and the subscribed topic
 *          name (receipt_key_derive): a handle made up by a client, changed
 *          in one bit, or made for another group or topic does not verify.
 *          The derived key is computed once per request, so each handle
 *          costs one SipHash of 18 bytes.
 *
 * Pure functions; thread-safe.
 */
#ifndef PETREL_RECEIPT_H
#define PETREL_RECEIPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RECEIPT_VERSION 1
#define RECEIPT_BYTES 26
#define RECEIPT_LEN (2 * RECEIPT_BYTES) /* hex digits */
#define RECEIPT_KEY_LEN 16

typedef struct Receipt {
    bool retry;         /* from the retry topic of the group */
    uint32_t queue_id;  /* queue of that topic */
    uint64_t queue_off; /* the message's consume-queue offset */
    uint32_t seq;       /* delivery number, >= 1 */
} Receipt;

/* The MAC key of one (group, topic): the SipHash, under the broker's
 * secret, of 0x01 or 0x02 (for each half), the group's length (one byte,
 * names longer than 255 bytes cut) and bytes, the topic's length and
 * bytes. */
typedef struct ReceiptKey {
    uint8_t k[RECEIPT_KEY_LEN];
} ReceiptKey;

void receipt_key_derive(const uint8_t secret[RECEIPT_KEY_LEN], const char *group,
                        const char *topic, ReceiptKey *out);

/* receipt_encode writes the handle of 'r' under 'key' (of its group and
 * topic) into 'out' (RECEIPT_LEN upper-case hex digits + NUL). */
void receipt_encode(const ReceiptKey *key, const Receipt *r, char out[RECEIPT_LEN + 1]);

/* receipt_decode checks the 'len' characters at 's' (hex, either case)
 * under 'key' and fills '*out'.  MQ_OK, or MQ_ERR_INVAL when the length, a
 * digit, the version, the flags or the MAC is wrong ('*out' untouched). */
int receipt_decode(const ReceiptKey *key, const char *s, size_t len, Receipt *out);

/* receipt_siphash is SipHash-2-4 of the 'len' bytes at 'p' under 'key'
 * (exposed for its test vectors). */
uint64_t receipt_siphash(const uint8_t key[RECEIPT_KEY_LEN], const void *p, size_t len);

#endif
