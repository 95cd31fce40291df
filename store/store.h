/*
 * store.h - the message store: commit log + consume queues + index +
 * checkpoint + recovery + retention, behind one handle.  This is the API
 * core/ uses; it knows nothing of HTTP, JSON or topic semantics.
 *
 * Data directory layout (FORMAT.md has each file byte by byte):
 *   commitlog/<20-digit offset>                     segments
 *   consumequeue/<topic>/<queueId>/<20-digit off>   20-byte entries
 *   index/<20-digit ms>                             hash index files
 *   checkpoint                                      positions, atomically replaced
 *   abort                                           exists while open
 *   (meta.db belongs to meta.h, opened by core)
 *
 * Threads owned here: the commit log's flusher and completer, the
 * dispatcher (builds consume queue and index entries from new records,
 * then calls the arrival hook) and the housekeeper (flushes queues and
 * index, writes the checkpoint, watches disk use, runs retention).
 */
#ifndef PETREL_STORE_H
#define PETREL_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "commitlog.h"
#include "consumequeue.h"
#include "hist.h"
#include "mq.h"

typedef struct StoreConfig {
    const char *data_dir;             /* root directory, created if missing */
    size_t segment_size;              /* mappedFileSizeCommitLog (1 GiB) */
    uint32_t cq_file_entries;         /* entries per consume queue file (300,000) */
    uint32_t index_slots;             /* maxHashSlotNum (5,000,000) */
    uint32_t index_entries;           /* maxIndexNum (20,000,000) */
    uint32_t flush_interval_ms;       /* flushIntervalCommitLog (500) */
    uint32_t flush_cq_interval_ms;    /* flushIntervalConsumeQueue (1000) */
    uint32_t flush_index_interval_ms; /* flushIntervalIndex (10000): the index is
                                       * synced this often, at most once per
                                       * housekeeping round */
    uint32_t sync_flush_timeout_ms;   /* syncFlushTimeout (5000) */
    bool sync_flush;                  /* flushDiskType == SYNC_FLUSH: write
                                       * through with pwrite (ClConfig) */
    uint32_t file_reserved_hours;     /* fileReservedTime (72) */
    char delete_when[64];             /* deleteWhen: hours "04" or "04;16" */
    uint32_t disk_max_used_ratio;     /* diskMaxUsedSpaceRatio, percent (75) */
    uint32_t disk_force_clean_ratio;  /* diskSpaceCleanForciblyRatio (85) */
    uint32_t disk_refuse_ratio;       /* refuse appends above it, percent (90) */
    uint32_t clean_interval_ms;       /* cleanResourceInterval (10000) */
    uint8_t store_host[8];            /* IPv4 + u32 port, written into records */
    MqClockFn clock;                  /* wall clock; NULL = real time */
    void *clock_arg;
    /* Called by the dispatcher after it adds entries to a queue, with the
     * queue's new max offset.  Must not block (long polling wakes here). */
    void (*on_arrival)(void *arg, MqSlice topic, uint32_t queue_id, uint64_t max_off);
    void *on_arrival_arg;
} StoreConfig;

/* store_config_defaults fills 'cfg' with RocketMQ's defaults (above) and
 * 'data_dir'. */
void store_config_defaults(StoreConfig *cfg, const char *data_dir);

typedef struct Store Store;

/* store_open opens or creates the store.  If the abort file exists the
 * last run crashed: the commit log is scanned from the checkpoint, a torn
 * or corrupt tail is truncated, queue and index entries are rebuilt from
 * the log past the checkpoint, and queue entries pointing past the log end
 * are dropped.  A missing consumequeue/ directory is rebuilt from the whole
 * log.  Creates the abort file and starts the threads.  Caller owns '*out'. */
int store_open(const StoreConfig *cfg, Store **out);

/* store_close stops accepting appends, flushes log, queues and index,
 * writes the checkpoint, removes the abort file and frees.  NULL ok. */
void store_close(Store *st);

/* store_put appends 'count' messages as one unit (see cl_append). */
int store_put(Store *st, const ClMessage *msgs, size_t count, ClAppendResult *res);

/* store_put_lazy is store_put that, with 'lazy', does not wake the
 * dispatcher: the records reach their consume queue with the next append
 * that does, or at the dispatcher's tick (100 ms).  For records nobody
 * waits for (the receive journal), whose wake-ups cost more than the
 * append (docs/bench.md). */
int store_put_lazy(Store *st, const ClMessage *msgs, size_t count, ClAppendResult *res,
                   bool lazy);

/* store_wait_flush: see cl_flush_wait. */
int store_wait_flush(Store *st, ClFlushWaiter *w, uint64_t upto,
                     void (*done)(void *arg, int status), void *arg);

/* store_read_msg decodes the record at 'phys_off' (see cl_read). */
int store_read_msg(Store *st, uint64_t phys_off, ClRecord *rec, MappedFile **ref);

/* store_read_queue reads consume-queue entries of (topic, queue_id) from
 * 'from': see cq_read for 'max', 'max_scan', 'tags', 'out', 'offs', '*n',
 * '*next'.  MQ_ERR_NOTFOUND if the queue has never had a message. */
int store_read_queue(Store *st, MqSlice topic, uint32_t queue_id, uint64_t from, size_t max,
                     size_t max_scan, const uint64_t *tags, size_t n_tags, CqEntry *out,
                     uint64_t *offs, size_t *n, uint64_t *next);

/* store_queue_range gives the min and max (one past last) offsets of a
 * queue; 0, 0 for a queue that has never had a message. */
void store_queue_range(Store *st, MqSlice topic, uint32_t queue_id, uint64_t *min,
                       uint64_t *max);

/* store_queue_last_ts gives the store timestamp of the queue's last
 * message, 0 if empty. */
int64_t store_queue_last_ts(Store *st, MqSlice topic, uint32_t queue_id);

/* store_offset_for_time returns in '*out' the first queue offset whose
 * message was stored at or after 'ts_ms' (binary search over the queue);
 * max when every message is older.  For offset resets. */
int store_offset_for_time(Store *st, MqSlice topic, uint32_t queue_id, int64_t ts_ms,
                          uint64_t *out);

/* store_query_key finds up to 'max' messages of 'topic' whose KEYS (or
 * UNIQ_KEY) property contains 'key', stored in ['begin_ms', 'end_ms'];
 * newest first; every result is checked against the record itself. */
int store_query_key(Store *st, MqSlice topic, MqSlice key, int64_t begin_ms, int64_t end_ms,
                    size_t max, uint64_t *offs, size_t *n);

/* store_delete_topic removes the consume queues of 'topic' (their files
 * go; commit-log bytes age out by retention) and its queue offsets. */
int store_delete_topic(Store *st, MqSlice topic);

/* store_tag_hash is the consume-queue hash of a tag string (0 if empty). */
uint64_t store_tag_hash(MqSlice tag);

typedef struct StoreStats {
    uint64_t min_offset;       /* commit log */
    uint64_t write_offset;
    uint64_t flushed_offset;
    uint64_t dispatched_offset;
    uint64_t segment_count;
    double disk_used_ratio;    /* 0..1, -1 unknown */
    int refusal;               /* MQ_OK, MQ_ERR_FULL or MQ_ERR_RDONLY */
    bool recovered_from_crash; /* the abort file was present at open */
    int64_t recovery_ms;       /* time store_open spent recovering */
    uint64_t disk_total_bytes; /* filesystem of the data directory; 0 unknown */
    uint64_t disk_avail_bytes;
    MqHistSnap flush_latency;  /* commit log flushes (cl_flush_latency) */
} StoreStats;

void store_stats(Store *st, StoreStats *out);

/* store_housekeep runs one round of the housekeeper now (flush queues and
 * index, checkpoint, disk check, retention) on the calling thread.  The
 * housekeeper thread does this every flush_cq_interval_ms; tests call it
 * directly with an injected clock. */
int store_housekeep(Store *st);

/* store_wait_dispatched blocks until every record appended so far has been
 * dispatched or 'timeout_ms' passes (tests and shutdown); MQ_ERR_TIMEOUT. */
int store_wait_dispatched(Store *st, uint32_t timeout_ms);

/* The commit log itself, for replication and tools.  Borrowed. */
CommitLog *store_commitlog(Store *st);

#endif
