/*
 * crc32c.c - CRC-32C, reflected polynomial 0x82F63B78, init and final xor
 * 0xFFFFFFFF.  The hardware path is picked once, at first use.
 */
#include "crc32c.h"

#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#define POLY 0x82F63B78u

static uint32_t table[256];

static void table_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ POLY : c >> 1;
        table[i] = c;
    }
}

static uint32_t crc_soft(uint32_t c, const uint8_t *p, size_t len) {
    while (len--) c = table[(c ^ *p++) & 0xff] ^ (c >> 8);
    return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t c, const uint8_t *p,
                                                         size_t len) {
    uint64_t c64 = c;
    while (len >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c64 = __builtin_ia32_crc32di(c64, v);
        p += 8;
        len -= 8;
    }
    c = (uint32_t)c64;
    while (len--) c = __builtin_ia32_crc32qi(c, *p++);
    return c;
}
#endif

static int mode; /* 1 = software, 2 = hardware; set once by choose() */
static pthread_once_t chosen = PTHREAD_ONCE_INIT;

static void choose(void) {
    table_init();
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2")) {
        mode = 2;
        return;
    }
#endif
    mode = 1;
}

uint32_t mq_crc32c_extend(uint32_t crc, const void *p, size_t len) {
    pthread_once(&chosen, choose);
    uint32_t c = ~crc;
#if defined(__x86_64__)
    if (mode == 2) return ~crc_hw(c, p, len);
#endif
    return ~crc_soft(c, p, len);
}
