/*
 * crc32c.h - CRC-32C (Castagnoli), the checksum of commit-log records and
 * of the checkpoint.  Uses the SSE4.2 crc32 instruction when the
 * CPU has it, a table otherwise; both give the same values.
 */
#ifndef PETREL_CRC32C_H
#define PETREL_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* mq_crc32c_extend continues a CRC: pass 0 to start; the result of one call
 * may be passed to the next to checksum data given in pieces.
 * Check value: mq_crc32c_extend(0, "123456789", 9) == 0xE3069283. */
uint32_t mq_crc32c_extend(uint32_t crc, const void *p, size_t len);

static inline uint32_t mq_crc32c(const void *p, size_t len) {
    return mq_crc32c_extend(0, p, len);
}

#endif
