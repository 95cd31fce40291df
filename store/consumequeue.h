/*
 * consumequeue.h - the consume queue of one (topic, queue id): a sequence
 * of fixed 20-byte entries, entry N = the Nth message of that queue, each
 * pointing into the commit log.  FORMAT.md section "Consume queue".
 *
 * Files live in '<dir>' (consumequeue/<topic>/<queueId>/), each of
 * 'file_entries' entries, named by the 20-digit byte offset of their first
 * entry (entry index * 20).  Entry layout, little-endian:
 *
 *   +0  u64 phys_off   commit-log offset of the record
 *   +8  u32 size       record size in bytes; 0 = empty slot (never written)
 *   +12 u64 tag_hash   mq_hash64 of the TAGS property, 0 = no tag
 *
 * Entries are written only by the store's dispatcher thread (one writer);
 * readers on other threads may read concurrently: the writer stores the
 * entry bytes first and publishes the new max offset with a release store.
 */
#ifndef PETREL_CONSUMEQUEUE_H
#define PETREL_CONSUMEQUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CQ_ENTRY_SIZE 20
#define CQ_VERSION 1

typedef struct CqEntry {
    uint64_t phys_off; /* commit-log offset of the record */
    uint32_t size;     /* record size in bytes (> 0 for a real entry) */
    uint64_t tag_hash; /* mq_hash64 of the tag string, 0 = untagged */
} CqEntry;

typedef struct ConsumeQueue ConsumeQueue;

/* cq_open opens (creating the directory if missing) the queue stored in
 * 'dir'.  Loads existing files: min offset = first non-empty entry of the
 * first file, max offset = one past the last non-empty entry of the last
 * file.  'file_entries' > 0.  Caller owns '*out'; free with cq_close. */
int cq_open(const char *dir, uint32_t file_entries, ConsumeQueue **out);

/* cq_close unmaps and frees (does not sync).  NULL ok. */
void cq_close(ConsumeQueue *cq);

/* cq_put writes 'e' at logical offset 'queue_off'.  Writing at an offset
 * already holding the same entry is a no-op (re-dispatch after a crash);
 * below the min offset it is ignored.  Offsets past max leave empty slots
 * between (they read as absent).  Max becomes max(max, queue_off + 1).
 * MQ_OK, MQ_ERR_FULL (cannot create a file), MQ_ERR_IO.
 * Dispatcher thread only. */
int cq_put(ConsumeQueue *cq, uint64_t queue_off, const CqEntry *e);

/* cq_get reads the entry at 'queue_off'.  MQ_ERR_NOTFOUND outside
 * [min, max) or for an empty slot.  Any thread. */
int cq_get(ConsumeQueue *cq, uint64_t queue_off, CqEntry *out);

/* cq_read copies up to 'max' entries starting at 'from' into 'out', in
 * offset order, skipping empty slots and, when 'n_tags' > 0, entries whose
 * tag_hash is not in 'tags'.  It scans at most 'max_scan' entries (bounding
 * the work when a filter matches little).  '*n_out' = entries copied,
 * '*next' = offset after the last entry scanned (where the next read starts).
 * 'offs' (may be NULL) receives each copied entry's queue offset.
 * Reading at or past max copies nothing and sets '*next' = 'from'.  A
 * 'from' below min starts at min.  Any thread.  Returns MQ_OK. */
int cq_read(ConsumeQueue *cq, uint64_t from, size_t max, size_t max_scan,
            const uint64_t *tags, size_t n_tags, CqEntry *out, uint64_t *offs,
            size_t *n_out, uint64_t *next);

uint64_t cq_min_offset(ConsumeQueue *cq); /* first readable offset */
uint64_t cq_max_offset(ConsumeQueue *cq); /* one past the last entry */

/* cq_last_phys_end returns phys_off + size of the last entry, 0 if empty. */
uint64_t cq_last_phys_end(ConsumeQueue *cq);

/* cq_truncate_phys drops every entry whose record ends past 'phys_end'
 * (the commit log was truncated there): entries at the tail are zeroed and
 * max moves back; files that become empty are deleted.  Recovery only. */
int cq_truncate_phys(ConsumeQueue *cq, uint64_t phys_end);

/* cq_delete_below_phys deletes whole files all of whose entries point below
 * 'min_phys' (the commit log's new minimum after retention), except the
 * last file, and moves min to the first entry whose phys_off >= min_phys.
 * Returns the number of files deleted (>= 0) or an error. */
int cq_delete_below_phys(ConsumeQueue *cq, uint64_t min_phys);

/* cq_sync fdatasyncs every file written since the last sync.  Flusher
 * thread only.  MQ_OK or MQ_ERR_IO. */
int cq_sync(ConsumeQueue *cq);

/* cq_destroy deletes every file and the directory, then frees 'cq'. */
int cq_destroy(ConsumeQueue *cq);

/* cq_encode / cq_decode convert one entry to and from its 20 bytes. */
void cq_encode(uint8_t *p, const CqEntry *e);
void cq_decode(const uint8_t *p, CqEntry *e);

#endif
