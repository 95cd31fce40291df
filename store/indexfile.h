/*
 * indexfile.h - hash index from message key (and unique message id) to
 * commit-log offset, in the style of RocketMQ's IndexFile: a header, a
 * table of hash slots and a region of linked entries, in fixed-size mapped
 * files under '<data>/index/'.  FORMAT.md section "Index file".
 *
 * File layout (little-endian), size = 64 + slot_num*4 + max_entries*20:
 *
 *   header, 64 bytes
 *     +0  u32 magic 0x50495831 ("PIX1" read as LE bytes 31 58 49 50)
 *     +4  u32 version (IX_VERSION)
 *     +8  i64 begin_ts    store timestamp (ms) of the first entry, 0 = none
 *     +16 i64 end_ts      largest store timestamp (ms) indexed (the last
 *                         entry's unless the clock stepped back)
 *     +24 u64 begin_phys  commit-log offset of the first entry's record
 *     +32 u64 end_phys    commit-log offset of the last entry's record
 *     +40 u32 slots_used  hash slots that are non-empty
 *     +44 u32 index_count next entry number; starts at 1 (0 = "no entry")
 *     +48 u32 slot_num    number of hash slots in this file
 *     +52 u32 max_entries number of entries this file can hold
 *     +56 i64 created_ms  wall-clock creation time
 *   slots, slot_num x u32: number of the newest entry with hash % slot_num
 *     equal to the slot's index, 0 = empty
 *   entries, max_entries x 20 bytes; entry n (n >= 1) at 64 + slot_num*4 +
 *     (n-1)*20
 *     +0  u32 key_hash    low 32 bits of mq_hash64("topic#key")
 *     +4  u64 phys_off    commit-log offset of the record
 *     +12 u32 time_diff   (store_ts - begin_ts) / 1000, seconds
 *     +16 u32 prev        number of the previous entry in this slot's
 *                         chain, 0 = end of chain
 *
 * Files are named by the 20-digit wall-clock ms of their creation.  A key
 * is "topic#key"; hashes collide, so query results are candidates that the
 * caller must check against the record.  One writer (the dispatcher
 * thread); queries may run on any thread at the same time.
 */
#ifndef PETREL_INDEXFILE_H
#define PETREL_INDEXFILE_H

#include <stddef.h>
#include <stdint.h>

#include "mq.h"

#define IX_MAGIC 0x50495831u
#define IX_VERSION 1
#define IX_HEADER_SIZE 64
#define IX_ENTRY_SIZE 20

typedef struct IndexConfig {
    const char *dir;      /* directory of index files, created if missing */
    uint32_t slot_num;    /* hash slots per file (RocketMQ: 5,000,000) */
    uint32_t max_entries; /* entries per file (RocketMQ: 20,000,000) */
    MqClockFn clock;      /* wall clock for file names; NULL = mq_now_ms */
    void *clock_arg;      /* passed to 'clock' */
} IndexConfig;

typedef struct IndexStore IndexStore;

/* ix_open loads every index file in 'cfg->dir' (oldest first), checking
 * each header (MQ_ERR_CORRUPT names the file).  Files keep the slot_num and
 * max_entries they were made with; new files use 'cfg's.  Caller owns
 * '*out'; free with ix_close. */
int ix_open(const IndexConfig *cfg, IndexStore **out);

/* ix_close unmaps and frees (no sync).  NULL ok. */
void ix_close(IndexStore *ix);

/* ix_put adds the key "topic#key" -> 'phys_off' stored at 'store_ts' (ms).
 * Rolls to a new file when the newest is full.  MQ_OK, MQ_ERR_FULL (no
 * disk for a new file), MQ_ERR_IO, MQ_ERR_INVAL (empty key, key over 4096
 * or topic over 255 bytes: the caller should skip that key).  Dispatcher
 * thread only. */
int ix_put(IndexStore *ix, MqSlice topic, MqSlice key, uint64_t phys_off, int64_t store_ts);

/* ix_query finds up to 'max' candidate offsets for "topic#key" among
 * entries whose store time lies in ['begin_ms', 'end_ms'] (second
 * granularity: an entry is a candidate if its second overlaps the range),
 * newest first, with no offset twice.  '*n' = count written to 'offs'.
 * Any thread.  MQ_OK. */
int ix_query(IndexStore *ix, MqSlice topic, MqSlice key, int64_t begin_ms, int64_t end_ms,
             size_t max, uint64_t *offs, size_t *n);

/* ix_end_phys returns end_phys of the newest file (0 if none): every
 * record below it has been indexed.  Any thread. */
uint64_t ix_end_phys(IndexStore *ix);

/* ix_sync fdatasyncs files written since the last sync.  Flusher only. */
int ix_sync(IndexStore *ix);

/* ix_delete_below_phys deletes files (never the newest) whose end_phys is
 * below 'min_phys'.  Returns the number deleted (>= 0) or an error. */
int ix_delete_below_phys(IndexStore *ix, uint64_t min_phys);

/* ix_file_count returns the number of index files. */
size_t ix_file_count(IndexStore *ix);

#endif
