/*
 * commitlog.h - the one append-only log of all topics: fixed-size mapped
 * segment files under '<data>/commitlog/', named by the 20-digit offset of
 * their first byte.  FORMAT.md section "Commit log".
 *
 * Record layout (little-endian), total = 95 + body + topic + properties:
 *
 *   +0   u32 total_size      whole record, these 4 bytes included
 *   +4   u32 magic           CL_MAGIC (CL_BLANK_MAGIC: end-of-segment filler)
 *   +8   u32 body_crc        CRC-32C of the body
 *   +12  u32 queue_id
 *   +16  u32 flag            producer's flag, opaque
 *   +20  u64 queue_offset    index of this record in its consume queue
 *   +28  u64 phys_offset     offset of this record in the commit log
 *   +36  u32 sysflag         CL_SYSFLAG_* bits
 *   +40  i64 born_ts         producer time, epoch ms
 *   +48  8   born_host       IPv4 (4 bytes, network order) + u32 port
 *   +56  i64 store_ts        broker time at append, epoch ms
 *   +64  8   store_host      IPv4 + u32 port of the storing broker
 *   +72  u32 reconsume_times
 *   +76  u64 prepared_tx_offset
 *   +84  u32 body_len        then body_len bytes of body
 *   ..   u8  topic_len       then topic_len bytes of topic (1..255)
 *   ..   u16 props_len       then props_len bytes: "k\x01v\x02" pairs
 *   ..   u32 record_crc      CRC-32C of bytes [0, 88) then [88 + body_len,
 *                            total_size - 4): all but the body and itself
 *
 * A record never straddles two segments: when the next record (or batch)
 * does not fit, the rest of the segment gets a blank marker (u32 remaining
 * bytes, u32 CL_BLANK_MAGIC) and the write moves to the next segment.
 *
 * Threads: any number of appenders (one short lock covers reservation and
 * copy), one flusher thread (fdatasync, then the callbacks it satisfied),
 * one completer thread (callbacks that time out or whose flush failed),
 * readers on any thread.
 */
#ifndef PETREL_COMMITLOG_H
#define PETREL_COMMITLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hist.h"
#include "mfile.h"
#include "mq.h"

#define CL_MAGIC 0x314C5450u       /* bytes "PTL1" */
#define CL_BLANK_MAGIC 0xCBD43194u /* RocketMQ's BLANK_MAGIC_CODE */
#define CL_VERSION 1
#define CL_FIXED_SIZE 95           /* record bytes besides body, topic, properties */
#define CL_BLANK_MIN 8             /* space always left for a blank marker */
#define CL_TOPIC_MAX 255
#define CL_PROPS_MAX 65535

/* sysflag bits (RocketMQ's values where RocketMQ has them). */
enum {
    CL_SYSFLAG_COMPRESSED = 0x1,
    CL_SYSFLAG_MULTI_TAGS = 0x2,
    CL_SYSFLAG_TX_PREPARED = 0x4,
    CL_SYSFLAG_TX_COMMIT = 0x8,
    CL_SYSFLAG_TX_ROLLBACK = 0xC,
};

/* Property names the store reads when it dispatches (RocketMQ's). */
#define CL_PROP_TAGS "TAGS"
#define CL_PROP_KEYS "KEYS"         /* space-separated keys */
#define CL_PROP_UNIQ_KEY "UNIQ_KEY" /* client-side unique message id */

/* A message to append.  Slices are borrowed for the call only. */
typedef struct ClMessage {
    MqSlice topic;            /* 1..CL_TOPIC_MAX bytes */
    uint32_t queue_id;
    uint32_t flag;
    uint32_t sysflag;
    int64_t born_ts;          /* epoch ms */
    uint8_t born_host[8];     /* IPv4 + u32 port, as on disk */
    uint32_t reconsume_times;
    uint64_t prepared_tx_off;
    MqSlice body;             /* any bytes, < 4 GiB */
    MqSlice props;            /* encoded properties, <= CL_PROPS_MAX bytes */
} ClMessage;

/* A decoded record: slices point into the segment's mapping. */
typedef struct ClRecord {
    uint32_t total_size;
    uint32_t body_crc;
    uint32_t queue_id;
    uint32_t flag;
    uint64_t queue_off;
    uint64_t phys_off;
    uint32_t sysflag;
    int64_t born_ts;
    uint8_t born_host[8];
    int64_t store_ts;
    uint8_t store_host[8];
    uint32_t reconsume_times;
    uint64_t prepared_tx_off;
    MqSlice body;
    MqSlice topic;
    MqSlice props;
} ClRecord;

typedef struct ClAppendResult {
    uint64_t phys_off;  /* first byte of the record */
    uint32_t size;      /* record bytes */
    uint64_t queue_off; /* its index in its consume queue */
    int64_t store_ts;   /* epoch ms written into the record */
} ClAppendResult;

/* ---- record codec (no state) ---------------------------------------------*/

/* cl_record_size returns the encoded size of 'm', 0 if a field is too long. */
size_t cl_record_size(const ClMessage *m);

/* cl_encode writes 'm' as a record of 'size' (= cl_record_size) bytes at
 * 'dst', with the broker-assigned fields, computing both CRCs. */
void cl_encode(uint8_t *dst, size_t size, const ClMessage *m, uint64_t phys_off,
               uint64_t queue_off, int64_t store_ts, const uint8_t store_host[8]);

typedef enum ClRecKind {
    CL_REC_OK,    /* a valid record */
    CL_REC_BLANK, /* end-of-segment filler: skip to the next segment */
    CL_REC_EMPTY, /* zero bytes: nothing was ever written here */
    CL_REC_BAD,   /* torn or corrupt */
} ClRecKind;

/* cl_decode classifies the bytes at 'p' ('avail' bytes to the segment end)
 * and, for CL_REC_OK, fills 'out'.  'verify_crc' checks both CRCs (recovery,
 * check); without it only sizes and magic are checked (hot read path). */
ClRecKind cl_decode(const uint8_t *p, size_t avail, bool verify_crc, ClRecord *out);

/* cl_prop_find looks 'key' up in encoded properties; true and '*val' on hit. */
bool cl_prop_find(MqSlice props, const char *key, MqSlice *val);

/* ---- the log -------------------------------------------------------------*/

typedef struct ClConfig {
    const char *dir;                /* segment directory, created if missing */
    size_t segment_size;            /* mappedFileSizeCommitLog, bytes */
    uint8_t store_host[8];          /* written into every record */
    uint32_t flush_interval_ms;     /* flushIntervalCommitLog (async flush) */
    uint32_t sync_flush_timeout_ms; /* syncFlushTimeout */
    /* false: records are copied into the segment's mapping (no system call
     * per append: the ASYNC_FLUSH path).  true: records are pwrite()n into
     * the file (SYNC_FLUSH: every append is followed by an fdatasync anyway,
     * and ext4 syncs pwrite()n pages much faster than pages dirtied through
     * a mapping; see docs/store.md).  Readers use the mapping either way. */
    bool write_through;
    MqClockFn clock;                /* wall clock for store_ts; NULL = real */
    void *clock_arg;
    /* Called after each successful append, outside the lock, on the
     * appending thread (the store wakes its dispatcher here).  May be NULL. */
    void (*on_append)(void *arg);
    void *on_append_arg;
} ClConfig;

typedef struct CommitLog CommitLog;

/* cl_open maps every segment in 'cfg->dir' (checking names and sizes) and
 * starts the flusher and completer threads.  The write position is the
 * start of the log until cl_recover says otherwise.  Caller owns '*out'. */
int cl_open(const ClConfig *cfg, CommitLog **out);

/* cl_close stops the threads after a final flush (waiters get their
 * callbacks), unmaps, frees.  NULL ok. */
void cl_close(CommitLog *cl);

/* cl_recover scans from 'from' (a record boundary, or the start of a
 * segment) to the end of the data, checking each record's magic, size and
 * CRCs; the first bad or empty spot is the end of the log: the rest of that
 * segment is zeroed and later segments are deleted.  Sets the write, flush
 * and dispatch positions to that end, stored in '*end'.  Before any append. */
int cl_recover(CommitLog *cl, uint64_t from, uint64_t *end);

/* cl_append writes 'count' records contiguously in one segment, assigning
 * phys and queue offsets; fills 'res[i]'.  Errors: MQ_ERR_INVAL (a field
 * too long, or the batch larger than a segment), MQ_ERR_FULL (disk full:
 * over the refusal ratio or no space for a segment), MQ_ERR_RDONLY (after
 * an I/O error), MQ_ERR_IO (write_through: the write failed; the log is
 * cut back to where it was and becomes read-only).  Never waits for a
 * disk sync.  Any thread. */
int cl_append(CommitLog *cl, const ClMessage *msgs, size_t count, ClAppendResult *res);

/* cl_append_ex is cl_append that calls ClConfig.on_append only when
 * 'notify' (the store's dispatcher then finds the records at its next
 * wake-up or tick instead of at once). */
int cl_append_ex(CommitLog *cl, const ClMessage *msgs, size_t count, ClAppendResult *res,
                 bool notify);

/* A sync-flush waiter, owned by the caller (no allocation per request).
 * It must stay valid until 'done' has been called. */
typedef struct ClFlushWaiter {
    uint64_t upto;                       /* log offset that must be durable */
    int64_t deadline_ns;                 /* mq_mono_ns() deadline */
    void (*done)(void *arg, int status); /* MQ_OK, MQ_ERR_TIMEOUT or MQ_ERR_IO */
    void *arg;
    struct ClFlushWaiter *prev, *next;   /* private to the commit log */
} ClFlushWaiter;

/* cl_flush_wait asks for the log to be durable up to 'upto' (the end of the
 * caller's last record).  Returns 0 when it already is (done is not
 * called), 1 when 'w' was queued: 'done' will be called exactly once, on
 * the flusher or completer thread, after a flush covers 'upto' (MQ_OK), after
 * sync_flush_timeout_ms (MQ_ERR_TIMEOUT) or when a flush fails
 * (MQ_ERR_IO).  One fdatasync serves every waiter queued before it.
 * Returns MQ_ERR_RDONLY if the log already failed.  Any thread. */
int cl_flush_wait(CommitLog *cl, ClFlushWaiter *w, uint64_t upto,
                  void (*done)(void *arg, int status), void *arg);

/* cl_flush_now flushes everything appended so far on the calling thread
 * (shutdown, tests, recovery).  MQ_OK or MQ_ERR_IO. */
int cl_flush_now(CommitLog *cl);

/* Positions.  write: end of the last complete record (readable below it);
 * flushed: durable below it; min: first byte of the oldest segment. */
uint64_t cl_write_offset(CommitLog *cl);
uint64_t cl_flushed_offset(CommitLog *cl);
/* cl_flush_latency reads the histogram of flush durations (every flush
 * that synced bytes: the flusher's and cl_flush_now's).  Any thread. */
void cl_flush_latency(CommitLog *cl, MqHistSnap *out);
uint64_t cl_min_offset(CommitLog *cl);

/* cl_read decodes the record at 'phys_off' and hands back a ref on its
 * segment in '*ref' (release with mf_unref) keeping 'rec' slices valid.
 * MQ_ERR_NOTFOUND outside [min, write), MQ_ERR_CORRUPT if no valid record
 * starts there.  Any thread. */
int cl_read(CommitLog *cl, uint64_t phys_off, ClRecord *rec, MappedFile **ref);

/* cl_next walks records in log order: the first record at or after 'off'
 * (skipping blank fillers), with '*next' = the offset after it.
 * MQ_ERR_NOTFOUND when no record is there yet; then '*next' = where to look
 * next time ('off', or past a blank filler).  '*ref' is in/out: NULL or a
 * segment ref from the previous call (reused when 'off' is inside it, else
 * released); on MQ_OK it holds the record's segment (release with mf_unref
 * or pass it to the next call), otherwise NULL. */
int cl_next(CommitLog *cl, uint64_t off, ClRecord *rec, uint64_t *next, MappedFile **ref);

/* Queue offset table: next queue offset per (topic, queue id), assigned by
 * cl_append.  The store sets it from the consume queues after recovery. */
void cl_set_queue_offset(CommitLog *cl, MqSlice topic, uint32_t queue_id, uint64_t next);
uint64_t cl_get_queue_offset(CommitLog *cl, MqSlice topic, uint32_t queue_id);
void cl_remove_topic(CommitLog *cl, MqSlice topic);

/* cl_set_refusal makes appends fail with 'err' (MQ_ERR_FULL while the disk
 * is over the refusal ratio), or accepts them again with MQ_OK.  It never
 * clears MQ_ERR_RDONLY (an I/O error is final until restart). */
void cl_set_refusal(CommitLog *cl, int err);
int cl_refusal(CommitLog *cl);

/* ---- retention -----------------------------------------------------------*/

typedef struct ClSegmentInfo {
    uint64_t base;      /* offset of the first byte */
    int64_t mtime_ms;   /* file modification time, epoch ms */
} ClSegmentInfo;

/* cl_segments copies up to 'cap' descriptions of the segments, oldest
 * first, excluding the one being written; returns how many. */
size_t cl_segments(CommitLog *cl, ClSegmentInfo *out, size_t cap);

/* cl_delete_oldest deletes the oldest segment if it is not the one being
 * written, moving the min offset.  Readers holding refs keep reading it.
 * MQ_OK, MQ_ERR_NOTFOUND (nothing to delete), MQ_ERR_IO. */
int cl_delete_oldest(CommitLog *cl);

/* ---- replication (slave side) --------------------------------------------*/

/* cl_read_raw copies up to 'cap' bytes of the log starting at 'from' (not
 * crossing a segment end) into 'buf'; '*n' = bytes copied (0 at the end). */
int cl_read_raw(CommitLog *cl, uint64_t from, uint8_t *buf, size_t cap, size_t *n);

/* cl_append_raw writes 'len' bytes, which must be whole records and blank
 * markers produced by another log, at exactly 'at' == cl_write_offset().
 * MQ_ERR_STATE if 'at' differs, MQ_ERR_CORRUPT if the bytes do not parse. */
int cl_append_raw(CommitLog *cl, uint64_t at, const uint8_t *p, size_t len);

/* cl_truncate moves the end of the log back to 'to' (a record boundary):
 * zeroes the rest of its segment and deletes later ones. */
int cl_truncate(CommitLog *cl, uint64_t to);

#endif
