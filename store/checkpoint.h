/*
 * checkpoint.h - the store's checkpoint file: how far the commit log,
 * the consume queues and the index are known durable.  Recovery after a
 * crash starts from it.  FORMAT.md section "Checkpoint".
 *
 * Layout, 64 bytes, little-endian:
 *   +0  u32 magic 0x54504B43 (bytes "CKPT")
 *   +4  u32 version (CKPT_VERSION)
 *   +8  u64 log_flushed    commit log durable below this offset
 *   +16 u64 cq_flushed     queue entries durable for every record below
 *   +24 u64 index_flushed  index entries durable for every record below
 *   +32 i64 log_ts         wall ms when log_flushed was taken
 *   +40 i64 cq_ts          wall ms when cq_flushed was taken
 *   +48 i64 index_ts       wall ms when index_flushed was taken
 *   +56 u32 reserved (0)
 *   +60 u32 crc            CRC-32C of bytes [0, 60)
 *
 * Written whole: 'checkpoint.tmp', fsync, rename over 'checkpoint',
 * fsync of the directory.  A torn file cannot exist under the real name.
 */
#ifndef PETREL_CHECKPOINT_H
#define PETREL_CHECKPOINT_H

#include <stdint.h>

#define CKPT_MAGIC 0x54504B43u
#define CKPT_VERSION 1
#define CKPT_SIZE 64

typedef struct Checkpoint {
    uint64_t log_flushed;
    uint64_t cq_flushed;
    uint64_t index_flushed;
    int64_t log_ts;
    int64_t cq_ts;
    int64_t index_ts;
} Checkpoint;

/* ckpt_read loads 'path'.  MQ_ERR_NOTFOUND if missing (fresh store),
 * MQ_ERR_CORRUPT on a bad size, magic, version or CRC. */
int ckpt_read(const char *path, Checkpoint *out);

/* ckpt_write replaces 'path' atomically (see above).  MQ_OK or MQ_ERR_IO;
 * on error the old file is untouched. */
int ckpt_write(const char *path, const Checkpoint *ck);

void ckpt_encode(uint8_t *buf, const Checkpoint *ck);
int ckpt_decode(const uint8_t *buf, Checkpoint *out);

#endif
