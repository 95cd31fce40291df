/*
 * meta.h - metadata in sqlite3 (WAL): topics, subscription groups and
 * consumer offsets.  The only place in Petrel that speaks SQL.
 * FORMAT.md section "meta.db".
 *
 * Topics and groups are read and written through to sqlite (they change
 * rarely).  Consumer offsets live in an in-memory table and are written in
 * one transaction of all dirty rows by meta_offsets_flush(), which a
 * background thread calls every 'offset_flush_ms' and meta_close() calls
 * last: never one sqlite write per commit.  All functions are thread-safe.
 */
#ifndef PETREL_META_H
#define PETREL_META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define META_NAME_MAX 255   /* longest topic/group name stored, bytes */
#define META_SCHEMA_VERSION 3 /* 2 added pop_state, 3 the transactions; older ones are upgraded at open */

/* Permission bits, RocketMQ's values. */
enum { META_PERM_WRITE = 2, META_PERM_READ = 4 };

typedef struct MetaTopic {
    char name[META_NAME_MAX + 1];
    uint32_t read_queues;  /* readable queue count */
    uint32_t write_queues; /* writable queue count */
    uint32_t perm;         /* META_PERM_* bits; 6 = read-write */
    bool order;            /* ordered topic */
    int64_t created_ms;    /* set by the first meta_topic_put */
    int64_t updated_ms;    /* set by every meta_topic_put */
} MetaTopic;

typedef struct MetaGroup {
    char name[META_NAME_MAX + 1];
    bool consume_enable;       /* default true */
    bool broadcast;            /* default false */
    bool orderly;              /* default false */
    uint32_t retry_max_times;  /* default 16 */
    uint32_t retry_queue_nums; /* default 1 */
    int64_t created_ms;
    int64_t updated_ms;
} MetaGroup;

typedef struct Meta Meta;

/* meta_open opens or creates the database 'path' (WAL, synchronous=NORMAL),
 * creating or checking the schema (MQ_ERR_CORRUPT on a newer or unknown
 * schema version), loads all offsets into memory, and starts the offset
 * flusher thread when 'offset_flush_ms' > 0.  Caller owns '*out'. */
int meta_open(const char *path, uint32_t offset_flush_ms, Meta **out);

/* meta_close stops the flusher, flushes dirty offsets, closes.  NULL ok. */
void meta_close(Meta *m);

/* Topics.  put inserts or replaces by name (created_ms kept on replace);
 * get fills '*out' or MQ_ERR_NOTFOUND; delete returns MQ_ERR_NOTFOUND if
 * absent and also drops the topic's offsets; list calls 'fn' per topic in
 * name order (stop early when 'fn' returns non-zero). */
int meta_topic_put(Meta *m, const MetaTopic *t);
int meta_topic_get(Meta *m, const char *name, MetaTopic *out);
int meta_topic_delete(Meta *m, const char *name);
int meta_topic_list(Meta *m, int (*fn)(void *arg, const MetaTopic *t), void *arg);

/* Groups: the same contract; delete also drops the group's offsets. */
int meta_group_put(Meta *m, const MetaGroup *g);
int meta_group_get(Meta *m, const char *name, MetaGroup *out);
int meta_group_delete(Meta *m, const char *name);
int meta_group_list(Meta *m, int (*fn)(void *arg, const MetaGroup *g), void *arg);

/* meta_group_defaults fills 'g' with RocketMQ's defaults and 'name'. */
void meta_group_defaults(MetaGroup *g, const char *name);

/* Offsets (group, topic, queue) -> next offset to consume.  set/get work on
 * memory only (set marks the row dirty); get returns MQ_ERR_NOTFOUND when
 * the group never committed for that queue.  list calls 'fn' for each
 * queue of (group, topic) in queue order; 'topic' NULL = all topics. */
int meta_offset_set(Meta *m, const char *group, const char *topic, uint32_t queue_id,
                    uint64_t offset);
int meta_offset_get(Meta *m, const char *group, const char *topic, uint32_t queue_id,
                    uint64_t *out);
int meta_offset_list(Meta *m, const char *group, const char *topic,
                     int (*fn)(void *arg, const char *topic, uint32_t queue_id, uint64_t off),
                     void *arg);
/* meta_offset_pairs calls 'fn' once per distinct (group, topic) having
 * offsets, in byte-wise (group, topic) order, until it returns non-zero:
 * one pass over the table for "which topics does every group read".  The
 * names are valid during the call only.  MQ_OK or MQ_ERR_NOMEM. */
int meta_offset_pairs(Meta *m, int (*fn)(void *arg, const char *group, const char *topic),
                      void *arg);

/* meta_offsets_flush writes every dirty offset in one BEGIN IMMEDIATE ...
 * COMMIT.  Returns the number of rows written (>= 0) or MQ_ERR_DB. */
int meta_offsets_flush(Meta *m);

/* meta_kv_get/put: small named settings (e.g. the store's host id),
 * written through.  get copies at most 'cap'-1 bytes plus NUL into 'buf';
 * MQ_ERR_NOTFOUND if absent. */
int meta_kv_put(Meta *m, const char *key, const char *value);
int meta_kv_get(Meta *m, const char *key, char *buf, size_t cap);

/* ---- receive state -------------------------------------------------------
 * Snapshots of the receive/ack state of each (group, topic, source queue)
 * (core/pop.h), written in batches by its keeper thread; the rows between
 * two snapshots are rebuilt from the pop journal, replayed from the
 * position saved with the batch.  Meta does not look inside 'entries'. */
#define META_POP_REPLAY_KEY "pop_replay_from" /* kv key of the replay position */

typedef struct MetaPopRow {
    const char *group;      /* borrowed */
    const char *topic;      /* the subscribed topic */
    bool retry;             /* the source is the group's retry topic */
    uint32_t queue_id;
    uint64_t ack_off;       /* everything below is done */
    uint64_t next_off;      /* next offset never handed out */
    int64_t journal_off;    /* last journal record reflected, -1 none */
    const uint8_t *entries; /* pop.c's entry blob (FORMAT.md "pop_state") */
    size_t entries_len;
    bool drop;              /* save: delete the row instead */
} MetaPopRow;

/* meta_pop_save writes 'n' rows (upserted, or deleted when 'drop') and the
 * replay position 'replay_from' in one transaction.  MQ_OK, MQ_ERR_INVAL,
 * MQ_ERR_DB (nothing written). */
int meta_pop_save(Meta *m, const MetaPopRow *rows, size_t n, int64_t replay_from);

/* meta_pop_load calls 'fn' for each saved row (borrowed for the call; 'fn'
 * must not call meta_) and gives the saved replay position, -1 when none
 * was ever saved.  Stops at the first non-MQ_OK from 'fn' and returns it.
 * Topic and group deletes drop their rows (meta_topic_delete,
 * meta_group_delete). */
int meta_pop_load(Meta *m, int (*fn)(void *arg, const MetaPopRow *row), void *arg,
                  int64_t *replay_from);

/* ---- transactions --------------------------------------------------------
 * One row per transactional message (core/txn.h), plus an append-only op
 * log (txn_op: prepare, commit, rollback, check results).  Only the
 * transaction engine's thread uses these, and only inside a batch:
 * meta_txn_begin takes the connection (db_mu) and opens BEGIN IMMEDIATE,
 * meta_txn_end commits or rolls back and releases it.  Between the two the
 * caller may call only the meta_txn_* functions below (any other meta_
 * call would wait for the mutex it holds).  Reads inside a batch see the
 * batch's own writes. */
#define META_TXN_ID_MAX 64     /* longest transaction id, bytes */
#define META_TXN_URL_MAX 2048  /* longest check-back URL, bytes */
#define META_TXN_SCAN_KEY "txn_scan_from" /* kv: commit-log offset, see core/txn.h */

typedef enum {
    META_TXN_PREPARED = 0,
    META_TXN_COMMITTED = 1,
    META_TXN_ROLLED_BACK = 2,
} MetaTxnState;

typedef struct MetaTxn {
    char id[META_TXN_ID_MAX + 1];
    char topic[META_NAME_MAX + 1]; /* the real topic */
    uint32_t queue_id;             /* its real queue */
    uint64_t half_off;             /* commit-log offset of the half record */
    char msg_id[META_TXN_ID_MAX + 1]; /* the half message's id */
    char check_url[META_TXN_URL_MAX + 1]; /* "" = none */
    MetaTxnState state;
    uint32_t check_times;          /* check-backs sent so far */
    int64_t created_ms;
    int64_t next_check_ms;         /* PREPARED: when the next check-back is due */
    int64_t updated_ms;
    int64_t real_off;              /* COMMITTED: commit-log offset of the real message, else -1 */
    int64_t real_qoff;             /* COMMITTED: its queue offset, else -1 */
    char resolved_by[16];          /* "" while PREPARED; "client", "check", "max_checks",
                                    * "recovery", "lost" */
} MetaTxn;

int meta_txn_begin(Meta *m); /* MQ_OK (db_mu held) or MQ_ERR_DB (not held) */
/* Commits (or, with !commit, rolls back) and releases db_mu.  MQ_OK or
 * MQ_ERR_DB (rolled back). */
int meta_txn_end(Meta *m, bool commit);

/* Inside a batch.  put inserts a new row (MQ_ERR_EXISTS when the id is
 * taken); set updates the mutable columns of row t->id (state,
 * check_times, next_check_ms, updated_ms, real_off, real_qoff,
 * resolved_by).  get: MQ_ERR_NOTFOUND
 * when absent.  log appends to the op log.  due calls 'fn' for PREPARED
 * rows with next_check_ms <= now, earliest first, at most 'limit' ('fn'
 * must not call meta_).  purge deletes resolved rows updated before
 * 'before_ms' and their op-log lines.  pending counts PREPARED rows.
 * scan_from saves the kv META_TXN_SCAN_KEY. */
int meta_txn_put(Meta *m, const MetaTxn *t);
int meta_txn_set(Meta *m, const MetaTxn *t);
int meta_txn_get(Meta *m, const char *id, MetaTxn *out);
int meta_txn_log(Meta *m, const char *id, const char *op, const char *source,
                 const char *detail, int64_t at_ms);
int meta_txn_due(Meta *m, int64_t now_ms, size_t limit,
                 int (*fn)(void *arg, const MetaTxn *t), void *arg);
int meta_txn_purge(Meta *m, int64_t before_ms);
int meta_txn_pending(Meta *m, uint64_t *count);
int meta_txn_set_scan_from(Meta *m, uint64_t off);
int meta_txn_get_scan_from(Meta *m, uint64_t *off); /* MQ_ERR_NOTFOUND when never saved */

/* meta_txn_read is meta_txn_get outside a batch (it takes the connection
 * for the read).  Never between meta_txn_begin and meta_txn_end. */
int meta_txn_read(Meta *m, const char *id, MetaTxn *out);

/* meta_txn_pending_list calls 'fn' for at most 'limit' PREPARED rows,
 * the next check due first ('fn' must not call meta_).  Outside a batch. */
int meta_txn_pending_list(Meta *m, size_t limit, int (*fn)(void *arg, const MetaTxn *t),
                          void *arg);

#endif
