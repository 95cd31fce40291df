/*
 * receipt.c - receipt handle codec and its MAC (see receipt.h).  SipHash
 * is written from its paper (Aumasson and Bernstein, 2012): a keyed PRF
 * that is fast on short inputs, which is what a per-message MAC needs.
 */
#include "receipt.h"

#include <pthread.h>
#include <string.h>

#include "mq.h"

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

typedef struct Sip {
    uint64_t v0, v1, v2, v3;
} Sip;

static void sip_round(Sip *s) {
    s->v0 += s->v1;
    s->v1 = ROTL(s->v1, 13);
    s->v1 ^= s->v0;
    s->v0 = ROTL(s->v0, 32);
    s->v2 += s->v3;
    s->v3 = ROTL(s->v3, 16);
    s->v3 ^= s->v2;
    s->v0 += s->v3;
    s->v3 = ROTL(s->v3, 21);
    s->v3 ^= s->v0;
    s->v2 += s->v1;
    s->v1 = ROTL(s->v1, 17);
    s->v1 ^= s->v2;
    s->v2 = ROTL(s->v2, 32);
}

static void sip_block(Sip *s, uint64_t m) {
    s->v3 ^= m;
    sip_round(s);
    sip_round(s);
    s->v0 ^= m;
}

uint64_t receipt_siphash(const uint8_t key[RECEIPT_KEY_LEN], const void *p, size_t len) {
    const uint8_t *in = p;
    uint64_t k0 = mq_get_u64(key);
    uint64_t k1 = mq_get_u64(key + 8);
    Sip s = {k0 ^ 0x736f6d6570736575ull, k1 ^ 0x646f72616e646f6dull,
             k0 ^ 0x6c7967656e657261ull, k1 ^ 0x7465646279746573ull};
    size_t full = len & ~(size_t)7;
    for (size_t i = 0; i < full; i += 8) sip_block(&s, mq_get_u64(in + i));
    uint64_t last = (uint64_t)(len & 0xff) << 56;
    for (size_t i = 0; i < (len & 7); i++) last |= (uint64_t)in[full + i] << (8 * i);
    sip_block(&s, last);
    s.v2 ^= 0xff;
    for (int i = 0; i < 4; i++) sip_round(&s);
    return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

void receipt_key_derive(const uint8_t secret[RECEIPT_KEY_LEN], const char *group,
                        const char *topic, ReceiptKey *out) {
    uint8_t buf[1 + 2 + 255 + 255];
    size_t n = 1;
    const char *names[2] = {group, topic};
    for (int i = 0; i < 2; i++) {
        size_t l = strlen(names[i]);
        if (l > 255) l = 255;
        buf[n++] = (uint8_t)l;
        memcpy(buf + n, names[i], l);
        n += l;
    }
    for (int half = 0; half < 2; half++) {
        buf[0] = (uint8_t)(half + 1);
        mq_put_u64(out->k + 8 * half, receipt_siphash(secret, buf, n));
    }
}

static void pack_head(const Receipt *r, uint8_t head[18]) {
    head[0] = RECEIPT_VERSION;
    head[1] = r->retry ? 1 : 0;
    mq_put_u32(head + 2, r->queue_id);
    mq_put_u64(head + 6, r->queue_off);
    mq_put_u32(head + 14, r->seq);
}

void receipt_encode(const ReceiptKey *key, const Receipt *r, char out[RECEIPT_LEN + 1]) {
    static const char hex[] = "0123456789ABCDEF";
    uint8_t b[RECEIPT_BYTES];
    pack_head(r, b);
    mq_put_u64(b + 18, receipt_siphash(key->k, b, 18));
    for (size_t i = 0; i < RECEIPT_BYTES; i++) {
        out[2 * i] = hex[b[i] >> 4];
        out[2 * i + 1] = hex[b[i] & 15];
    }
    out[RECEIPT_LEN] = '\0';
}

/* Hex digit values; -1 for every other byte. */
static signed char hex_table[256];

static void hex_table_init(void) {
    memset(hex_table, -1, sizeof(hex_table));
    for (int i = 0; i < 10; i++) hex_table['0' + i] = (signed char)i;
    for (int i = 0; i < 6; i++) {
        hex_table['a' + i] = (signed char)(10 + i);
        hex_table['A' + i] = (signed char)(10 + i);
    }
}

int receipt_decode(const ReceiptKey *key, const char *s, size_t len, Receipt *out) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    if (!key || !s || !out || len != RECEIPT_LEN) return MQ_ERR_INVAL;
    pthread_once(&once, hex_table_init);
    uint8_t b[RECEIPT_BYTES];
    for (size_t i = 0; i < RECEIPT_BYTES; i++) {
        int hi = hex_table[(unsigned char)s[2 * i]];
        int lo = hex_table[(unsigned char)s[2 * i + 1]];
        if (hi < 0 || lo < 0) return MQ_ERR_INVAL;
        b[i] = (uint8_t)(hi << 4 | lo);
    }
    if (b[0] != RECEIPT_VERSION || (b[1] & ~1u) != 0) return MQ_ERR_INVAL;
    if (mq_get_u64(b + 18) != receipt_siphash(key->k, b, 18)) return MQ_ERR_INVAL;
    Receipt r = {
        .retry = b[1] & 1,
        .queue_id = mq_get_u32(b + 2),
        .queue_off = mq_get_u64(b + 6),
        .seq = mq_get_u32(b + 14),
    };
    if (r.seq == 0) return MQ_ERR_INVAL;
    *out = r;
    return MQ_OK;
}
