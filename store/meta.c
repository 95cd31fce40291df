/*
 * meta.c - metadata in sqlite3 (see meta.h): topics, subscription groups,
 * consumer offsets and small settings in one WAL database.  FORMAT.md
 * section "meta.db".
 *
 * Owns one sqlite connection with its prepared statements (guarded by
 * 'db_mu'), the in-memory offset table (guarded by 'off_mu') and the offset
 * flusher thread.  Lock order: db_mu before off_mu; 'stop_mu' is never held
 * together with either.  Calls only libc, pthreads, sqlite3 and mq.h.
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include "meta.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>

#include "mq.h"

#define META_CKPT_MS 1000  /* the checkpointer's period (ckpt_main) */
#define META_WAL_MAX_FRAMES 4096 /* a WAL longer than this (16 MiB) is truncated */
#define OFF_BUCKETS_MIN 64 /* initial bucket count of the offset table, a power of 2 */

/* ---- statements ----------------------------------------------------------
 * Prepared once in meta_open (SQLITE_PREPARE_PERSISTENT), finalized in
 * meta_close, used only under db_mu. */
enum {
    ST_BEGIN,
    ST_COMMIT,
    ST_ROLLBACK,
    ST_TOPIC_PUT,
    ST_TOPIC_GET,
    ST_TOPIC_DEL,
    ST_TOPIC_LIST,
    ST_GROUP_PUT,
    ST_GROUP_GET,
    ST_GROUP_DEL,
    ST_GROUP_LIST,
    ST_OFF_PUT,
    ST_OFF_DEL_TOPIC,
    ST_OFF_DEL_GROUP,
    ST_OFF_LOAD,
    ST_KV_PUT,
    ST_KV_GET,
    ST_POP_PUT,
    ST_POP_DEL,
    ST_POP_DEL_TOPIC,
    ST_POP_DEL_GROUP,
    ST_POP_LOAD,
    ST_TXN_PUT,
    ST_TXN_SET,
    ST_TXN_GET,
    ST_TXN_DUE,
    ST_TXN_LOG,
    ST_TXN_PURGE,
    ST_TXN_PURGE_LOG,
    ST_TXN_COUNT,
    ST_TXN_LIST,
    ST_COUNT
};

#define TOPIC_COLS "name, read_queues, write_queues, perm, ordered, created_ms, updated_ms"
#define TXN_COLS                                                                    \
    "id, topic, qid, half_off, msg_id, check_url, state, check_times, created_ms, " \
    "next_check_ms, updated_ms, real_off, real_qoff, resolved_by"
#define GROUP_COLS                                                                      \
    "name, consume_enable, broadcast, orderly, retry_max_times, retry_queue_nums, " \
    "created_ms, updated_ms"

static const char *const stmt_sql[ST_COUNT] = {
    [ST_BEGIN] = "BEGIN IMMEDIATE",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
    [ST_TOPIC_PUT] = "INSERT INTO topic(" TOPIC_COLS ") VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?6)"
                     " ON CONFLICT(name) DO UPDATE SET read_queues = excluded.read_queues,"
                     " write_queues = excluded.write_queues, perm = excluded.perm,"
                     " ordered = excluded.ordered, updated_ms = excluded.updated_ms",
    [ST_TOPIC_GET] = "SELECT " TOPIC_COLS " FROM topic WHERE name = ?1",
    [ST_TOPIC_DEL] = "DELETE FROM topic WHERE name = ?1",
    [ST_TOPIC_LIST] = "SELECT " TOPIC_COLS " FROM topic ORDER BY name",
    [ST_GROUP_PUT] = "INSERT INTO subscription_group(" GROUP_COLS ")"
                     " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7)"
                     " ON CONFLICT(name) DO UPDATE SET consume_enable = excluded.consume_enable,"
                     " broadcast = excluded.broadcast, orderly = excluded.orderly,"
                     " retry_max_times = excluded.retry_max_times,"
                     " retry_queue_nums = excluded.retry_queue_nums,"
                     " updated_ms = excluded.updated_ms",
    [ST_GROUP_GET] = "SELECT " GROUP_COLS " FROM subscription_group WHERE name = ?1",
    [ST_GROUP_DEL] = "DELETE FROM subscription_group WHERE name = ?1",
    [ST_GROUP_LIST] = "SELECT " GROUP_COLS " FROM subscription_group ORDER BY name",
    /* A plain upsert, not a monotonic one: a reset moves an offset back. */
    [ST_OFF_PUT] = "INSERT INTO consumer_offset(grp, topic, qid, off) VALUES(?1, ?2, ?3, ?4)"
                   " ON CONFLICT(grp, topic, qid) DO UPDATE SET off = excluded.off",
    [ST_OFF_DEL_TOPIC] = "DELETE FROM consumer_offset WHERE topic = ?1",
    [ST_OFF_DEL_GROUP] = "DELETE FROM consumer_offset WHERE grp = ?1",
    [ST_OFF_LOAD] = "SELECT grp, topic, qid, off FROM consumer_offset",
    [ST_KV_PUT] = "INSERT INTO kv(key, value) VALUES(?1, ?2)"
                  " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
    [ST_KV_GET] = "SELECT value FROM kv WHERE key = ?1",
    [ST_POP_PUT] = "INSERT INTO pop_state(grp, topic, retry, qid, ack_off, next_off, journal_off,"
                   " entries) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
                   " ON CONFLICT(grp, topic, retry, qid) DO UPDATE SET ack_off = excluded.ack_off,"
                   " next_off = excluded.next_off, journal_off = excluded.journal_off,"
                   " entries = excluded.entries",
    [ST_POP_DEL] = "DELETE FROM pop_state WHERE grp = ?1 AND topic = ?2 AND retry = ?3 AND qid = ?4",
    [ST_POP_DEL_TOPIC] = "DELETE FROM pop_state WHERE topic = ?1",
    [ST_POP_DEL_GROUP] = "DELETE FROM pop_state WHERE grp = ?1",
    [ST_POP_LOAD] = "SELECT grp, topic, retry, qid, ack_off, next_off, journal_off, entries"
                    " FROM pop_state",
    [ST_TXN_PUT] = "INSERT INTO txn(" TXN_COLS ") VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9,"
                   " ?10, ?11, ?12, ?13, ?14)",
    [ST_TXN_SET] = "UPDATE txn SET state = ?2, check_times = ?3, next_check_ms = ?4,"
                   " updated_ms = ?5, real_off = ?6, real_qoff = ?7, resolved_by = ?8"
                   " WHERE id = ?1",
    [ST_TXN_GET] = "SELECT " TXN_COLS " FROM txn WHERE id = ?1",
    [ST_TXN_DUE] = "SELECT " TXN_COLS " FROM txn WHERE state = 0 AND next_check_ms <= ?1"
                   " ORDER BY next_check_ms LIMIT ?2",
    [ST_TXN_LOG] = "INSERT INTO txn_op(id, op, source, detail, at_ms) VALUES(?1, ?2, ?3, ?4, ?5)",
    [ST_TXN_PURGE] = "DELETE FROM txn WHERE state <> 0 AND updated_ms < ?1",
    [ST_TXN_PURGE_LOG] = "DELETE FROM txn_op WHERE at_ms < ?1"
                         " AND id NOT IN (SELECT id FROM txn WHERE state = 0)",
    [ST_TXN_COUNT] = "SELECT count(*) FROM txn WHERE state = 0",
    [ST_TXN_LIST] = "SELECT " TXN_COLS " FROM txn WHERE state = 0"
                    " ORDER BY next_check_ms, id LIMIT ?1",
};

/* Schema 2 added pop_state; a version-1 database gets it at open. */
#define POP_STATE_SQL                                                                \
    "CREATE TABLE pop_state (\n"                                                     \
    "    grp         TEXT NOT NULL,\n"                                               \
    "    topic       TEXT NOT NULL,\n"                                               \
    "    retry       INTEGER NOT NULL CHECK (retry IN (0, 1)),\n"                    \
    "    qid         INTEGER NOT NULL CHECK (qid BETWEEN 0 AND 4294967295),\n"       \
    "    ack_off     INTEGER NOT NULL CHECK (ack_off >= 0),\n"                       \
    "    next_off    INTEGER NOT NULL CHECK (next_off >= ack_off),\n"                \
    "    journal_off INTEGER NOT NULL,\n"                                            \
    "    entries     BLOB NOT NULL,\n"                                               \
    "    PRIMARY KEY (grp, topic, retry, qid)\n"                                     \
    ") WITHOUT ROWID;\n"

/* Schema 3 added the transaction tables; older databases get them at open. */
#define TXN_SQL                                                                      \
    "CREATE TABLE txn (\n"                                                          \
    "    id            TEXT PRIMARY KEY,\n"                                         \
    "    topic         TEXT NOT NULL,\n"                                            \
    "    qid           INTEGER NOT NULL CHECK (qid BETWEEN 0 AND 4294967295),\n"    \
    "    half_off      INTEGER NOT NULL CHECK (half_off >= 0),\n"                   \
    "    msg_id        TEXT NOT NULL,\n"                                            \
    "    check_url     TEXT NOT NULL,\n"                                            \
    "    state         INTEGER NOT NULL CHECK (state BETWEEN 0 AND 2),\n"              \
    "    check_times   INTEGER NOT NULL CHECK (check_times >= 0),\n"                \
    "    created_ms    INTEGER NOT NULL,\n"                                         \
    "    next_check_ms INTEGER NOT NULL,\n"                                         \
    "    updated_ms    INTEGER NOT NULL,\n"                                         \
    "    real_off      INTEGER NOT NULL,\n"                                         \
    "    real_qoff     INTEGER NOT NULL,\n"                                         \
    "    resolved_by   TEXT NOT NULL\n"                                             \
    ") WITHOUT ROWID;\n"                                                            \
    "CREATE INDEX txn_due ON txn(next_check_ms) WHERE state = 0;\n"                         \
    "CREATE TABLE txn_op (\n"                                                       \
    "    seq    INTEGER PRIMARY KEY,\n"                                             \
    "    id     TEXT NOT NULL,\n"                                                   \
    "    op     TEXT NOT NULL,\n"                                                   \
    "    source TEXT NOT NULL,\n"                                                   \
    "    detail TEXT NOT NULL,\n"                                                   \
    "    at_ms  INTEGER NOT NULL\n"                                                 \
    ");\n"

/* The schema of META_SCHEMA_VERSION, created in one transaction together
 * with its meta_info rows.  Keep in step with FORMAT.md "meta.db". */
static const char schema_sql[] =
    "CREATE TABLE meta_info (\n"
    "    key   TEXT PRIMARY KEY,\n"
    "    value TEXT NOT NULL\n"
    ") WITHOUT ROWID;\n"
    "CREATE TABLE topic (\n"
    "    name         TEXT PRIMARY KEY,\n"
    "    read_queues  INTEGER NOT NULL CHECK (read_queues BETWEEN 0 AND 4294967295),\n"
    "    write_queues INTEGER NOT NULL CHECK (write_queues BETWEEN 0 AND 4294967295),\n"
    "    perm         INTEGER NOT NULL CHECK (perm BETWEEN 0 AND 4294967295),\n"
    "    ordered      INTEGER NOT NULL CHECK (ordered IN (0, 1)),\n"
    "    created_ms   INTEGER NOT NULL,\n"
    "    updated_ms   INTEGER NOT NULL\n"
    ") WITHOUT ROWID;\n"
    "CREATE TABLE subscription_group (\n"
    "    name             TEXT PRIMARY KEY,\n"
    "    consume_enable   INTEGER NOT NULL CHECK (consume_enable IN (0, 1)),\n"
    "    broadcast        INTEGER NOT NULL CHECK (broadcast IN (0, 1)),\n"
    "    orderly          INTEGER NOT NULL CHECK (orderly IN (0, 1)),\n"
    "    retry_max_times  INTEGER NOT NULL CHECK (retry_max_times BETWEEN 0 AND 4294967295),\n"
    "    retry_queue_nums INTEGER NOT NULL CHECK (retry_queue_nums BETWEEN 0 AND 4294967295),\n"
    "    created_ms       INTEGER NOT NULL,\n"
    "    updated_ms       INTEGER NOT NULL\n"
    ") WITHOUT ROWID;\n"
    "CREATE TABLE consumer_offset (\n"
    "    grp   TEXT NOT NULL,\n"
    "    topic TEXT NOT NULL,\n"
    "    qid   INTEGER NOT NULL CHECK (qid BETWEEN 0 AND 4294967295),\n"
    "    off   INTEGER NOT NULL CHECK (off >= 0),\n"
    "    PRIMARY KEY (grp, topic, qid)\n"
    ") WITHOUT ROWID;\n"
    "CREATE TABLE kv (\n"
    "    key   TEXT PRIMARY KEY,\n"
    "    value TEXT NOT NULL\n"
    ") WITHOUT ROWID;\n" POP_STATE_SQL TXN_SQL;

/* ---- state ---------------------------------------------------------------*/

/* One consumer offset.  Key fields are immutable after insertion; a row is
 * freed only while both db_mu and off_mu are held (topic/group delete,
 * close), so a holder of db_mu may read a row's key without off_mu. */
typedef struct OffRow OffRow;
struct OffRow {
    OffRow *next;       /* next row of the same bucket */
    uint64_t hash;      /* off_key hash of (group, topic, qid) */
    uint64_t off;       /* next offset to consume (<= INT64_MAX); off_mu */
    uint32_t qid;       /* queue id */
    bool dirty;         /* set since a flush last copied it out; off_mu */
    uint16_t group_len; /* bytes, without the NUL */
    uint16_t topic_len; /* bytes, without the NUL */
    char names[];       /* group NUL topic NUL */
};

/* A lookup key for the offset table. */
typedef struct OffKey {
    const char *group;
    size_t group_len; /* bytes, 1..META_NAME_MAX */
    const char *topic;
    size_t topic_len; /* bytes, 1..META_NAME_MAX */
    uint32_t qid;
    uint64_t hash; /* mq_hash64 of "group NUL topic NUL qid(u32 LE)" */
} OffKey;

struct Meta {
    char *path;                     /* database file, for messages */
    pthread_mutex_t db_mu;          /* guards 'db', 'st' and row lifetimes */
    sqlite3 *db;                    /* the one connection (NOMUTEX) */
    sqlite3_stmt *st[ST_COUNT];     /* prepared statements, NULL until prepared */
    int last_code;                  /* primary sqlite code of the last failure */
    pthread_mutex_t off_mu;         /* guards the offset table below */
    OffRow **buckets;               /* chained hash table of offsets */
    size_t nbuckets;                /* power of 2 */
    size_t nrows;                   /* rows in the table */
    size_t ndirty;                  /* rows with 'dirty' set */
    uint32_t flush_ms;              /* flusher period; 0 = no flusher thread */
    bool flusher_running;           /* 'flusher' was started and not joined */
    bool ckpt_running;              /* 'ckpt' was started and not joined */
    pthread_t ckpt;                 /* checkpoints the WAL every META_CKPT_MS */
    sqlite3 *ckpt_db;               /* the checkpointer's own connection */
    pthread_t flusher;              /* calls meta_offsets_flush every flush_ms */
    pthread_mutex_t stop_mu;        /* guards 'stopping' */
    pthread_cond_t stop_cv;         /* CLOCK_MONOTONIC; signalled by meta_close */
    bool stopping;                  /* meta_close asked the flusher to exit */
};

/* ---- small helpers -------------------------------------------------------*/

/* name_ok: 's' is a usable topic/group/key name (1..META_NAME_MAX bytes).
 * Reads at most META_NAME_MAX + 1 bytes, so a full unterminated name field
 * of MetaTopic/MetaGroup is rejected safely. */
static bool name_ok(const char *s) {
    if (!s) return false;
    size_t len = strnlen(s, META_NAME_MAX + 1);
    return len > 0 && len <= META_NAME_MAX;
}

/* copy_name copies a column's text into a name field, truncating. */
static void copy_name(char dst[META_NAME_MAX + 1], sqlite3_stmt *st, int col) {
    const unsigned char *s = sqlite3_column_text(st, col);
    size_t len = s ? (size_t)sqlite3_column_bytes(st, col) : 0;
    if (len > META_NAME_MAX) len = META_NAME_MAX;
    if (len) memcpy(dst, s, len);
    dst[len] = '\0';
}

/* db_fail logs the connection's last error about 'subject' and returns
 * MQ_ERR_DB.  Caller holds db_mu (or is meta_open). */
static int db_fail(Meta *m, const char *what, const char *subject) {
    m->last_code = sqlite3_errcode(m->db) & 0xff;
    MQ_ERROR("%s '%s': %s", what, subject, sqlite3_errmsg(m->db));
    return MQ_ERR_DB;
}

static int bind_text(sqlite3_stmt *st, int idx, const char *s, int len) {
    return sqlite3_bind_text(st, idx, s, len, SQLITE_TRANSIENT);
}

static int bind_i64(sqlite3_stmt *st, int idx, int64_t v) {
    return sqlite3_bind_int64(st, idx, (sqlite3_int64)v);
}

/* step_done runs the bound statement 'st' that returns no rows, then resets
 * it.  MQ_OK or MQ_ERR_DB (logged). */
static int step_done(Meta *m, sqlite3_stmt *st, const char *what, const char *subject) {
    int rc = sqlite3_step(st);
    int err = rc == SQLITE_DONE ? MQ_OK : db_fail(m, what, subject);
    sqlite3_reset(st);
    return err;
}

static int tx_begin(Meta *m) {
    return step_done(m, m->st[ST_BEGIN], "cannot begin a write transaction on", m->path);
}

static int tx_commit(Meta *m) {
    return step_done(m, m->st[ST_COMMIT], "cannot commit to", m->path);
}

/* tx_rollback ends a failed write transaction, if sqlite has not already
 * rolled it back.  The failure itself was logged by the caller. */
static void tx_rollback(Meta *m) {
    if (sqlite3_get_autocommit(m->db)) return;
    sqlite3_stmt *st = m->st[ST_ROLLBACK];
    if (sqlite3_step(st) != SQLITE_DONE)
        MQ_WARN("cannot roll back '%s': %s", m->path, sqlite3_errmsg(m->db));
    sqlite3_reset(st);
}

/* write_tx runs the bound write statement 'st' in its own BEGIN IMMEDIATE
 * ... COMMIT.  Caller holds db_mu.  MQ_OK or MQ_ERR_DB (logged). */
static int write_tx(Meta *m, sqlite3_stmt *st, const char *what, const char *subject) {
    int rc = tx_begin(m);
    if (rc != MQ_OK) return rc;
    rc = step_done(m, st, what, subject);
    if (rc == MQ_OK) rc = tx_commit(m);
    if (rc != MQ_OK) tx_rollback(m);
    return rc;
}

/* ---- offset table --------------------------------------------------------
 * Chained hash of (group, topic, qid) -> OffRow, guarded by off_mu.
 * Invariant: 'ndirty' equals the number of rows with 'dirty' set. */

static void off_key(OffKey *k, const char *group, const char *topic, uint32_t qid) {
    uint8_t buf[2 * (META_NAME_MAX + 1) + 4];
    k->group = group;
    k->group_len = strlen(group);
    k->topic = topic;
    k->topic_len = strlen(topic);
    k->qid = qid;
    memcpy(buf, group, k->group_len + 1);
    memcpy(buf + k->group_len + 1, topic, k->topic_len + 1);
    mq_put_u32(buf + k->group_len + k->topic_len + 2, qid);
    k->hash = mq_hash64(buf, k->group_len + k->topic_len + 6);
}

static const char *row_topic(const OffRow *r) {
    return r->names + r->group_len + 1;
}

static OffRow *off_find(const Meta *m, const OffKey *k) {
    for (OffRow *r = m->buckets[k->hash & (m->nbuckets - 1)]; r; r = r->next) {
        if (r->hash == k->hash && r->qid == k->qid && r->group_len == k->group_len &&
            r->topic_len == k->topic_len && memcmp(r->names, k->group, k->group_len) == 0 &&
            memcmp(row_topic(r), k->topic, k->topic_len) == 0)
            return r;
    }
    return NULL;
}

/* off_grow doubles the bucket array; on allocation failure the table stays
 * as it is (correct, only with longer chains). */
static void off_grow(Meta *m) {
    size_t n = m->nbuckets * 2;
    OffRow **b = calloc(n, sizeof(*b));
    if (!b) return;
    for (size_t i = 0; i < m->nbuckets; i++) {
        OffRow *r = m->buckets[i];
        while (r) {
            OffRow *next = r->next;
            r->next = b[r->hash & (n - 1)];
            b[r->hash & (n - 1)] = r;
            r = next;
        }
    }
    free(m->buckets);
    m->buckets = b;
    m->nbuckets = n;
}

/* off_insert adds a clean row for 'k' (not yet present) with offset 0.
 * Returns the row, or NULL when out of memory. */
static OffRow *off_insert(Meta *m, const OffKey *k) {
    OffRow *r = calloc(1, sizeof(*r) + k->group_len + k->topic_len + 2);
    if (!r) return NULL;
    r->hash = k->hash;
    r->qid = k->qid;
    r->group_len = (uint16_t)k->group_len;
    r->topic_len = (uint16_t)k->topic_len;
    memcpy(r->names, k->group, k->group_len + 1);
    memcpy(r->names + k->group_len + 1, k->topic, k->topic_len + 1);
    if (m->nrows >= m->nbuckets) off_grow(m);
    OffRow **head = &m->buckets[r->hash & (m->nbuckets - 1)];
    r->next = *head;
    *head = r;
    m->nrows++;
    return r;
}

static void off_mark_dirty(Meta *m, OffRow *r) {
    if (r->dirty) return;
    r->dirty = true;
    m->ndirty++;
}

/* off_drop frees every row whose group (by_topic false) or topic (true)
 * is 'name'.  Caller holds db_mu and off_mu. */
static void off_drop(Meta *m, bool by_topic, const char *name) {
    size_t len = strlen(name);
    for (size_t i = 0; i < m->nbuckets; i++) {
        OffRow **pp = &m->buckets[i];
        while (*pp) {
            OffRow *r = *pp;
            const char *s = by_topic ? row_topic(r) : r->names;
            size_t slen = by_topic ? r->topic_len : r->group_len;
            if (slen == len && memcmp(s, name, len) == 0) {
                *pp = r->next;
                if (r->dirty) m->ndirty--;
                m->nrows--;
                free(r);
            } else {
                pp = &r->next;
            }
        }
    }
}

static void off_free_all(Meta *m) {
    for (size_t i = 0; m->buckets && i < m->nbuckets; i++) {
        OffRow *r = m->buckets[i];
        while (r) {
            OffRow *next = r->next;
            free(r);
            r = next;
        }
    }
    free(m->buckets);
    m->buckets = NULL;
    m->nrows = 0;
    m->ndirty = 0;
}

/* off_load reads every consumer_offset row into the (empty) table, clean.
 * MQ_OK, MQ_ERR_NOMEM, MQ_ERR_CORRUPT (a row out of range) or MQ_ERR_DB. */
static int off_load(Meta *m) {
    sqlite3_stmt *st = m->st[ST_OFF_LOAD];
    int rc;
    int err = MQ_OK;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *g = (const char *)sqlite3_column_text(st, 0);
        const char *t = (const char *)sqlite3_column_text(st, 1);
        sqlite3_int64 qid = sqlite3_column_int64(st, 2);
        sqlite3_int64 off = sqlite3_column_int64(st, 3);
        if (!name_ok(g) || !name_ok(t) || strlen(g) != (size_t)sqlite3_column_bytes(st, 0) ||
            strlen(t) != (size_t)sqlite3_column_bytes(st, 1) || qid < 0 || qid > UINT32_MAX ||
            off < 0) {
            MQ_ERROR("bad consumer_offset row in '%s'", m->path);
            err = MQ_ERR_CORRUPT;
            break;
        }
        OffKey k;
        off_key(&k, g, t, (uint32_t)qid);
        OffRow *r = off_find(m, &k);
        if (!r) r = off_insert(m, &k);
        if (!r) {
            err = MQ_ERR_NOMEM;
            break;
        }
        r->off = (uint64_t)off;
    }
    if (err == MQ_OK && rc != SQLITE_DONE) err = db_fail(m, "cannot read offsets from", m->path);
    sqlite3_reset(st);
    return err;
}

/* ---- open, schema and close ----------------------------------------------*/

/* parse_version reads a decimal schema version; -1 if 's' is not one. */
static long parse_version(const char *s) {
    if (!s || !*s || strlen(s) > 9) return -1;
    long v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9') return -1;
        v = v * 10 + (*p - '0');
    }
    return v;
}

/* exec_sql runs 'sql' (no rows wanted) on the connection. */
static int exec_sql(Meta *m, const char *sql, const char *what) {
    if (sqlite3_exec(m->db, sql, NULL, NULL, NULL) == SQLITE_OK) return MQ_OK;
    return db_fail(m, what, m->path);
}

/* schema_read_version checks the existing meta_info: MQ_OK when its
 * schema_version is one this build reads, else MQ_ERR_CORRUPT. */
static int schema_read_version(Meta *m, long *version) {
    sqlite3_stmt *st = NULL;
    const char *sql = "SELECT value FROM meta_info WHERE key = 'schema_version'";
    if (sqlite3_prepare_v2(m->db, sql, -1, &st, NULL) != SQLITE_OK)
        return db_fail(m, "cannot read the schema version of", m->path);
    int err = MQ_OK;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const char *text = (const char *)sqlite3_column_text(st, 0);
        long v = parse_version(text);
        if (v < 1 || v > META_SCHEMA_VERSION) {
            MQ_ERROR("unknown schema version '%s' in '%s' (this build reads %d)",
                     text ? text : "", m->path, META_SCHEMA_VERSION);
            err = MQ_ERR_CORRUPT;
        }
        *version = v;
    } else if (rc == SQLITE_DONE) {
        MQ_ERROR("no schema version in '%s'", m->path);
        err = MQ_ERR_CORRUPT;
    } else {
        err = db_fail(m, "cannot read the schema version of", m->path);
    }
    sqlite3_finalize(st);
    return err;
}

/* schema_create makes the tables of an empty database and records the
 * version.  Caller is inside a write transaction. */
static int schema_create(Meta *m) {
    char sql[160];
    int rc = exec_sql(m, schema_sql, "cannot create the schema in");
    if (rc != MQ_OK) return rc;
    snprintf(sql, sizeof(sql),
             "INSERT INTO meta_info(key, value) VALUES('schema_version', '%d'),"
             " ('created_ms', '%lld')",
             META_SCHEMA_VERSION, (long long)mq_now_ms());
    return exec_sql(m, sql, "cannot create the schema in");
}

/* schema_upgrade_to_2 adds pop_state to a version-1 database.  Caller is
 * inside a write transaction. */
static int schema_upgrade_to_2(Meta *m) {
    int rc = exec_sql(m, "DROP TABLE IF EXISTS pop_state;" POP_STATE_SQL,
                      "cannot upgrade the schema of");
    if (rc != MQ_OK) return rc;
    return exec_sql(m, "UPDATE meta_info SET value = '2' WHERE key = 'schema_version'",
                    "cannot upgrade the schema of");
}

/* schema_upgrade_to_3 adds the transaction tables.  Caller is inside a
 * write transaction. */
static int schema_upgrade_to_3(Meta *m) {
    int rc = exec_sql(m, "DROP TABLE IF EXISTS txn; DROP TABLE IF EXISTS txn_op;" TXN_SQL,
                      "cannot upgrade the schema of");
    if (rc != MQ_OK) return rc;
    return exec_sql(m, "UPDATE meta_info SET value = '3' WHERE key = 'schema_version'",
                    "cannot upgrade the schema of");
}

/* schema_open creates the schema in an empty database or checks the one
 * present, in one BEGIN IMMEDIATE transaction.  A database holding other
 * tables but no meta_info is not ours: MQ_ERR_CORRUPT. */
static int schema_open(Meta *m) {
    int rc = exec_sql(m, "BEGIN IMMEDIATE", "cannot begin a write transaction on");
    if (rc != MQ_OK) return rc;
    sqlite3_stmt *st = NULL;
    const char *sql = "SELECT name FROM sqlite_master WHERE type = 'table'"
                      " AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'";
    bool has_info = false;
    int others = 0;
    if (sqlite3_prepare_v2(m->db, sql, -1, &st, NULL) != SQLITE_OK) {
        rc = db_fail(m, "cannot read the schema of", m->path);
        goto err_rollback;
    }
    int step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(st, 0);
        if (name && strcmp(name, "meta_info") == 0)
            has_info = true;
        else
            others++;
    }
    if (step != SQLITE_DONE) rc = db_fail(m, "cannot read the schema of", m->path);
    sqlite3_finalize(st);
    if (rc != MQ_OK) goto err_rollback;

    if (has_info) {
        long version = 0;
        rc = schema_read_version(m, &version);
        if (rc == MQ_OK && version < 2) rc = schema_upgrade_to_2(m);
        if (rc == MQ_OK && version < 3) rc = schema_upgrade_to_3(m);
    } else if (others == 0) {
        rc = schema_create(m);
    } else {
        MQ_ERROR("'%s' is not a petrel metadata database", m->path);
        rc = MQ_ERR_CORRUPT;
    }
    if (rc != MQ_OK) goto err_rollback;
    return exec_sql(m, "COMMIT", "cannot commit to");

err_rollback:
    if (!sqlite3_get_autocommit(m->db)) sqlite3_exec(m->db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

/* set_pragmas: busy timeout, WAL, synchronous=NORMAL, foreign keys. */
static int set_pragmas(Meta *m) {
    if (sqlite3_busy_timeout(m->db, 2000) != SQLITE_OK)
        return db_fail(m, "cannot set the busy timeout of", m->path);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(m->db, "PRAGMA journal_mode=WAL", -1, &st, NULL) != SQLITE_OK)
        return db_fail(m, "cannot set the journal mode of", m->path);
    int rc = sqlite3_step(st);
    int err = MQ_OK;
    if (rc == SQLITE_ROW) {
        const char *mode = (const char *)sqlite3_column_text(st, 0);
        if (!mode || strcmp(mode, "wal") != 0)
            MQ_WARN("'%s' stays in journal mode '%s', not wal", m->path, mode ? mode : "");
    } else {
        err = db_fail(m, "cannot set the journal mode of", m->path);
    }
    sqlite3_finalize(st);
    if (err != MQ_OK) return err;
    return exec_sql(m, "PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;",
                    "cannot set pragmas on");
}

static int prepare_all(Meta *m) {
    for (int i = 0; i < ST_COUNT; i++) {
        if (sqlite3_prepare_v3(m->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &m->st[i],
                               NULL) != SQLITE_OK)
            return db_fail(m, "cannot prepare statements on", m->path);
    }
    return MQ_OK;
}

/* meta_free releases whatever meta_open got as far as creating.  The
 * flusher must not be running. */
static void meta_free(Meta *m) {
    if (m->ckpt_db) sqlite3_close(m->ckpt_db);
    for (int i = 0; i < ST_COUNT; i++) sqlite3_finalize(m->st[i]);
    if (m->db && sqlite3_close(m->db) != SQLITE_OK)
        MQ_ERROR("cannot close '%s': %s", m->path, sqlite3_errmsg(m->db));
    off_free_all(m);
    pthread_cond_destroy(&m->stop_cv);
    pthread_mutex_destroy(&m->stop_mu);
    pthread_mutex_destroy(&m->off_mu);
    pthread_mutex_destroy(&m->db_mu);
    free(m->path);
    free(m);
}

/* flusher_main: every 'flush_ms' (monotonic) flush the dirty offsets, until
 * meta_close sets 'stopping'.  Flush errors are logged by the flush. */
/* wait_or_stop sleeps 'ms' (monotonic) unless meta_close asks to stop;
 * true when it does.  Caller holds stop_mu. */
static bool wait_or_stop(Meta *m, int64_t ms) {
    return mq_wait_stop(&m->stop_cv, &m->stop_mu, &m->stopping, ms);
}

static void *flusher_main(void *arg) {
    Meta *m = arg;
    pthread_mutex_lock(&m->stop_mu);
    while (!wait_or_stop(m, m->flush_ms)) {
        pthread_mutex_unlock(&m->stop_mu);
        (void)meta_offsets_flush(m);
        pthread_mutex_lock(&m->stop_mu);
    }
    pthread_mutex_unlock(&m->stop_mu);
    return NULL;
}

/* ckpt_main: the WAL checkpoints.  The writing connection has
 * wal_autocheckpoint off, so no COMMIT ever runs a checkpoint (and its
 * fdatasyncs: tens of ms on a slow disk) on the thread that writes, which
 * may be serving requests in batches (core/txn.c) while holding db_mu.
 * This thread checkpoints from a connection of its own every META_CKPT_MS
 * in PASSIVE mode: it copies what no reader still needs and never blocks
 * the writer, which goes on appending to the WAL meanwhile. */
static void *ckpt_main(void *arg) {
    Meta *m = arg;
    pthread_setname_np(pthread_self(), "petrel-ckpt");
    pthread_mutex_lock(&m->stop_mu);
    while (!wait_or_stop(m, META_CKPT_MS)) {
        pthread_mutex_unlock(&m->stop_mu);
        int frames = 0, done = 0;
        int rc = sqlite3_wal_checkpoint_v2(m->ckpt_db, "main", SQLITE_CHECKPOINT_PASSIVE,
                                           &frames, &done);
        /* A writer that never pauses long enough keeps the WAL from
         * starting over (a PASSIVE checkpoint lets it go on appending):
         * past META_WAL_MAX_FRAMES, one TRUNCATE checkpoint waits for the
         * writer's current transaction, holds the next one for the few
         * frames left, and empties the file. */
        if (rc == SQLITE_OK && frames > META_WAL_MAX_FRAMES)
            rc = sqlite3_wal_checkpoint_v2(m->ckpt_db, "main", SQLITE_CHECKPOINT_TRUNCATE,
                                           &frames, &done);
        if (rc != SQLITE_OK && rc != SQLITE_BUSY)
            MQ_WARN("cannot checkpoint '%s': %s", m->path, sqlite3_errmsg(m->ckpt_db));
        pthread_mutex_lock(&m->stop_mu);
    }
    pthread_mutex_unlock(&m->stop_mu);
    return NULL;
}

/* Opens the checkpointer's connection and turns automatic checkpoints
 * off on the writing one; then starts ckpt_main.  Without it (failure)
 * sqlite's automatic checkpoints stay on: slower commits, same data. */
static void ckpt_start(Meta *m) {
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX;
    /* A connection finds the WAL only once it reads: the read below. */
    if (sqlite3_open_v2(m->path, &m->ckpt_db, flags, NULL) != SQLITE_OK ||
        sqlite3_busy_timeout(m->ckpt_db, 2000) != SQLITE_OK ||
        sqlite3_exec(m->ckpt_db, "SELECT count(*) FROM meta_info", NULL, NULL, NULL) !=
            SQLITE_OK) {
        MQ_WARN("'%s': no checkpointer connection (%s); checkpoints stay automatic", m->path,
                m->ckpt_db ? sqlite3_errmsg(m->ckpt_db) : "out of memory");
        sqlite3_close(m->ckpt_db);
        m->ckpt_db = NULL;
        return;
    }
    if (exec_sql(m, "PRAGMA wal_autocheckpoint=0", "cannot set pragmas on") != MQ_OK) return;
    if (pthread_create(&m->ckpt, NULL, ckpt_main, m) != 0) {
        (void)exec_sql(m, "PRAGMA wal_autocheckpoint=1000", "cannot set pragmas on");
        return;
    }
    m->ckpt_running = true;
}

static int init_sync(Meta *m) {
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) != 0) return MQ_ERR_NOMEM;
    int rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (rc == 0) rc = pthread_cond_init(&m->stop_cv, &ca);
    pthread_condattr_destroy(&ca);
    if (rc != 0) return MQ_ERR_NOMEM;
    pthread_mutex_init(&m->db_mu, NULL);
    pthread_mutex_init(&m->off_mu, NULL);
    pthread_mutex_init(&m->stop_mu, NULL);
    return MQ_OK;
}

int meta_open(const char *path, uint32_t offset_flush_ms, Meta **out) {
    if (!path || !*path || !out) return MQ_ERR_INVAL;
    *out = NULL;
    Meta *m = calloc(1, sizeof(*m));
    if (!m) return MQ_ERR_NOMEM;
    int rc = init_sync(m);
    if (rc != MQ_OK) {
        free(m);
        return rc;
    }
    m->flush_ms = offset_flush_ms;
    m->path = strdup(path);
    m->nbuckets = OFF_BUCKETS_MIN;
    m->buckets = calloc(m->nbuckets, sizeof(*m->buckets));
    if (!m->path || !m->buckets) {
        rc = MQ_ERR_NOMEM;
        goto err_free;
    }

    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
    if (sqlite3_open_v2(path, &m->db, flags, NULL) != SQLITE_OK) {
        if (!m->db) {
            rc = MQ_ERR_NOMEM;
            goto err_free;
        }
        rc = db_fail(m, "cannot open", path);
        goto err_free;
    }
    rc = set_pragmas(m);
    if (rc == MQ_OK) rc = schema_open(m);
    if (rc == MQ_OK) rc = prepare_all(m);
    if (rc == MQ_OK) rc = off_load(m);
    if (rc != MQ_OK) {
        /* A file that is not sqlite, or a damaged one, is corrupt data. */
        if (rc == MQ_ERR_DB && (m->last_code == SQLITE_NOTADB || m->last_code == SQLITE_CORRUPT))
            rc = MQ_ERR_CORRUPT;
        goto err_free;
    }

    if (offset_flush_ms > 0) {
        int e = pthread_create(&m->flusher, NULL, flusher_main, m);
        if (e != 0) {
            MQ_ERROR("cannot start the offset flusher of '%s': %s", path, strerror(e));
            rc = MQ_ERR_NOMEM;
            goto err_free;
        }
        m->flusher_running = true;
    }
    ckpt_start(m);
    *out = m;
    return MQ_OK;

err_free:
    meta_free(m);
    return rc;
}

void meta_close(Meta *m) {
    if (!m) return;
    mq_stop_signal(&m->stop_cv, &m->stop_mu, &m->stopping);
    if (m->flusher_running) {
        pthread_join(m->flusher, NULL);
        m->flusher_running = false;
    }
    if (m->ckpt_running) {
        pthread_join(m->ckpt, NULL);
        m->ckpt_running = false;
    }
    if (meta_offsets_flush(m) < 0)
        MQ_WARN("closing '%s' with consumer offsets not saved", m->path);
    meta_free(m);
}

/* ---- topics --------------------------------------------------------------*/

static void row_to_topic(sqlite3_stmt *st, MetaTopic *t) {
    memset(t, 0, sizeof(*t));
    copy_name(t->name, st, 0);
    t->read_queues = (uint32_t)sqlite3_column_int64(st, 1);
    t->write_queues = (uint32_t)sqlite3_column_int64(st, 2);
    t->perm = (uint32_t)sqlite3_column_int64(st, 3);
    t->order = sqlite3_column_int64(st, 4) != 0;
    t->created_ms = sqlite3_column_int64(st, 5);
    t->updated_ms = sqlite3_column_int64(st, 6);
}

/* The caller's created_ms/updated_ms are ignored: both are set here. */
int meta_topic_put(Meta *m, const MetaTopic *t) {
    if (!m || !t || !name_ok(t->name)) return MQ_ERR_INVAL;
    int64_t now = mq_now_ms();
    pthread_mutex_lock(&m->db_mu);
    sqlite3_stmt *st = m->st[ST_TOPIC_PUT];
    int rc;
    if (bind_text(st, 1, t->name, -1) || bind_i64(st, 2, t->read_queues) ||
        bind_i64(st, 3, t->write_queues) || bind_i64(st, 4, t->perm) ||
        bind_i64(st, 5, t->order) || bind_i64(st, 6, now))
        rc = db_fail(m, "cannot write topic", t->name);
    else
        rc = write_tx(m, st, "cannot write topic", t->name);
    pthread_mutex_unlock(&m->db_mu);
    return rc;
}

int meta_topic_get(Meta *m, const char *name, MetaTopic *out) {
    if (!m || !name_ok(name) || !out) return MQ_ERR_INVAL;
    pthread_mutex_lock(&m->db_mu);
    sqlite3_stmt *st = m->st[ST_TOPIC_GET];
    int rc = bind_text(st, 1, name, -1) == SQLITE_OK ? sqlite3_step(st) : SQLITE_ERROR;
    if (rc == SQLITE_ROW) {
        row_to_topic(st, out);
        rc = MQ_OK;
    } else if (rc == SQLITE_DONE) {
        rc = MQ_ERR_NOTFOUND;
    } else {
        rc = db_fail(m, "cannot read topic", name);
    }
    sqlite3_reset(st);
    pthread_mutex_unlock(&m->db_mu);
    return rc;
}

/* del_with_offsets deletes the row 'name' with 'del' and the offsets with
 * 'del_off' in one transaction, then the offsets in memory.  Caller holds
 * db_mu, so no flush can write a dropped offset back afterwards. */
static int del_with_offsets(Meta *m, int del, int del_off, bool by_topic, const char *name,
                            const char *what) {
    sqlite3_stmt *st = m->st[del];
    sqlite3_stmt *st_off = m->st[del_off];
    int rc = tx_begin(m);
    if (rc != MQ_OK) return rc;
    if (bind_text(st, 1, name, -1) || bind_text(st_off, 1, name, -1)) {
        rc = db_fail(m, what, name);
        goto err_rollback;
    }
    rc = step_done(m, st, what, name);
    if (rc != MQ_OK) goto err_rollback;
    if (sqlite3_changes(m->db) == 0) {
        rc = MQ_ERR_NOTFOUND;
        goto err_rollback;
    }
    rc = step_done(m, st_off, what, name);
    if (rc != MQ_OK) goto err_rollback;
    sqlite3_stmt *st_pop = m->st[by_topic ? ST_POP_DEL_TOPIC : ST_POP_DEL_GROUP];
    if (bind_text(st_pop, 1, name, -1)) {
        rc = db_fail(m, what, name);
        goto err_rollback;
    }
    rc = step_done(m, st_pop, what, name);
    if (rc != MQ_OK) goto err_rollback;
    rc = tx_commit(m);
    if (rc != MQ_OK) goto err_rollback;
    pthread_mutex_lock(&m->off_mu);
    off_drop(m, by_topic, name);
    pthread_mutex_unlock(&m->off_mu);
    return MQ_OK;

err_rollback:
    tx_rollback(m);
    return rc;
}

int meta_topic_delete(Meta *m, const char *name) {
    if (!m || !name_ok(name)) return MQ_ERR_INVAL;
    pthread_mutex_lock(&m->db_mu);
    int rc = del_with_offsets(m, ST_TOPIC_DEL, ST_OFF_DEL_TOPIC, true, name,
                              "cannot delete topic");
    pthread_mutex_unlock(&m->db_mu);
    return rc;
}

/* collect_rows runs the list statement 'which' under the db lock and copies
 * every row out with 'conv' into a malloc'd array of 'elem'-byte items
 * (caller frees '*out'), so that callbacks later run with no lock held. */
static int collect_rows(Meta *m, int which, size_t elem, void (*conv)(sqlite3_stmt *, void *),
                        const char *what, void **out, size_t *n_out) {
    char *v = NULL;
    size_t n = 0;
    size_t cap = 0;
    int err = MQ_OK;
    int rc;
    pthread_mutex_lock(&m->db_mu);
    sqlite3_stmt *st = m->st[which];
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            char *nv = realloc(v, ncap * elem);
            if (!nv) {
                err = MQ_ERR_NOMEM;
                break;
            }
            v = nv;
            cap = ncap;
        }
        conv(st, v + n++ * elem);
    }
    if (err == MQ_OK && rc != SQLITE_DONE) err = db_fail(m, what, m->path);
    sqlite3_reset(st);
    pthread_mutex_unlock(&m->db_mu);
    *out = v;
    *n_out = n;
    return err;
}

static void conv_topic(sqlite3_stmt *st, void *out) { row_to_topic(st, out); }

/* Rows are copied out first and 'fn' runs with no lock held, so it may
 * call back into meta.  Returns MQ_OK also when 'fn' stopped early. */
int meta_topic_list(Meta *m, int (*fn)(void *arg, const MetaTopic *t), void *arg) {
    if (!m || !fn) return MQ_ERR_INVAL;
    void *rows = NULL;
    size_t n = 0;
    int err = collect_rows(m, ST_TOPIC_LIST, sizeof(MetaTopic), conv_topic,
                           "cannot list topics of", &rows, &n);
    const MetaTopic *v = rows;
    for (size_t i = 0; err == MQ_OK && i < n; i++)
        if (fn(arg, &v[i]) != 0) break;
    free(rows);
    return err;
}

/* ---- groups --------------------------------------------------------------*/

/* A NULL or too long 'name' leaves the name empty, which put rejects. */
void meta_group_defaults(MetaGroup *g, const char *name) {
    if (!g) return;
    memset(g, 0, sizeof(*g));
    if (name_ok(name)) memcpy(g->name, name, strlen(name) + 1);
    g->consume_enable = true;
    g->broadcast = false;
    g->orderly = false;
    g->retry_max_times = 16;
    g->retry_queue_nums = 1;
}

static void row_to_group(sqlite3_stmt *st, MetaGroup *g) {
    memset(g, 0, sizeof(*g));
    copy_name(g->name, st, 0);
    g->consume_enable = sqlite3_column_int64(st, 1) != 0;
    g->broadcast = sqlite3_column_int64(st, 2) != 0;
    g->orderly = sqlite3_column_int64(st, 3) != 0;
    g->retry_max_times = (uint32_t)sqlite3_column_int64(st, 4);
    g->retry_queue_nums = (uint32_t)sqlite3_column_int64(st, 5);
    g->created_ms = sqlite3_column_int64(st, 6);
    g->updated_ms = sqlite3_column_int64(st, 7);
}

/* The caller's created_ms/updated_ms are ignored: both are set here. */
int meta_group_put(Meta *m, const MetaGroup *g) {
    if (!m || !g || !name_ok(g->name)) return MQ_ERR_INVAL;
    int64_t now = mq_now_ms();
    pthread_mutex_lock(&m->db_mu);
    sqlite3_stmt *st = m->st[ST_GROUP_PUT];
    int rc;
    if (bind_text(st, 1, g->name, -1) || bind_i64(st, 2, g->consume_enable) ||
        bind_i64(st, 3, g->broadcast) || bind_i64(st, 4, g->orderly) ||
        bind_i64(st, 5, g->retry_max_times) || bind_i64(st, 6, g->retry_queue_nums) ||
        bind_i64(st, 7, now))
        rc = db_fail(m, "cannot write group", g->name);
    else
        rc = write_tx(m, st, "cannot write group", g->name);
    pthread_mutex_unlock(&m->db_mu);
    return rc;
}

int meta_group_get(Meta *m, const char *name, MetaGroup *out) {
    if (!m || !name_ok(name) || !out) return MQ_ERR_INVAL;
    pthread_mutex_lock(&m->db_mu);
    sqlite3_stmt *st = m->st[ST_GROUP_GET];
    int rc = bind_text(st, 1, name, -1) == SQLITE_OK ? sqlite3_step(st) : SQLITE_ERROR;
    if (rc == SQLITE_ROW) {
        row_to_group(st, out);
        rc = MQ_OK;
    } else if (rc == SQLITE_DONE) {
        rc = MQ_ERR_NOTFOUND;
    } else {
        rc = db_fail(m, "cannot read group", name);
    }
    sqlite3_reset(st);
    pthread_mutex_unlock(&m->db_mu);
    return rc;
}

int meta_group_delete(Meta *m, const char *name) {
    if (!m || !name_ok(name)) return MQ_ERR_INVAL;
    pthread_mutex_lock(&m->db_mu);
    int rc = del_with_offsets(m, ST_GROUP_DEL, ST_OFF_DEL_GROUP, false, name,
                              "cannot delete group");
    pthread_mutex_unlock(&m->db_mu);
    return rc;
}

static void conv_group(sqlite3_stmt *st, void *out) { row_to_group(st, out); }

/* As meta_topic_list: copied out, 'fn' runs unlocked, MQ_OK on early stop. */
int meta_group_list(Meta *m, int (*fn)(void *arg, const MetaGroup *g), void *arg) {
    if (!m || !fn) return MQ_ERR_INVAL;
    void *rows = NULL;
    size_t n = 0;
    int err = collect_rows(m, ST_GROUP_LIST, sizeof(MetaGroup), conv_group,
                           "cannot list groups of", &rows, &n);
    const MetaGroup *v = rows;
    for (size_t i = 0; err == MQ_OK && i < n; i++)
        if (fn(arg, &v[i]) != 0) break;
    free(rows);
    return err;
}

/* ---- offsets -------------------------------------------------------------*/

/* Offsets are stored as sqlite's signed INTEGER, so 'offset' must be at
 * most INT64_MAX (MQ_ERR_INVAL otherwise).  MQ_ERR_NOMEM for a new row. */
int meta_offset_set(Meta *m, const char *group, const char *topic, uint32_t queue_id,
                    uint64_t offset) {
    if (!m || !name_ok(group) || !name_ok(topic) || offset > (uint64_t)INT64_MAX)
        return MQ_ERR_INVAL;
    OffKey k;
    off_key(&k, group, topic, queue_id);
    pthread_mutex_lock(&m->off_mu);
    OffRow *r = off_find(m, &k);
    if (!r) r = off_insert(m, &k);
    if (r) {
        r->off = offset;
        off_mark_dirty(m, r);
    }
    pthread_mutex_unlock(&m->off_mu);
    return r ? MQ_OK : MQ_ERR_NOMEM;
}

int meta_offset_get(Meta *m, const char *group, const char *topic, uint32_t queue_id,
                    uint64_t *out) {
    if (!m || !name_ok(group) || !name_ok(topic) || !out) return MQ_ERR_INVAL;
    OffKey k;
    off_key(&k, group, topic, queue_id);
    pthread_mutex_lock(&m->off_mu);
    const OffRow *r = off_find(m, &k);
    if (r) *out = r->off;
    pthread_mutex_unlock(&m->off_mu);
    return r ? MQ_OK : MQ_ERR_NOTFOUND;
}

/* One offset row copied out of the table (names into the snapshot's
 * arena), so callbacks run without off_mu. */
typedef struct ListItem {
    const char *group;
    const char *topic;
    uint32_t qid;
    uint64_t off;
} ListItem;

static int cmp_item(const void *a, const void *b) {
    const ListItem *x = a;
    const ListItem *y = b;
    int c = strcmp(x->topic, y->topic);
    if (c != 0) return c;
    return x->qid < y->qid ? -1 : x->qid > y->qid;
}

/* (group, topic) order, queues ignored. */
static int cmp_pair(const void *a, const void *b) {
    const ListItem *x = a;
    const ListItem *y = b;
    int c = strcmp(x->group, y->group);
    return c != 0 ? c : strcmp(x->topic, y->topic);
}

/* A row matches a NULL 'group' (every group) or its own; a NULL 'topic'
 * or its own. */
static bool row_matches(const OffRow *r, const char *group, size_t glen, const char *topic,
                        size_t tlen) {
    if (group && (r->group_len != glen || memcmp(r->names, group, glen) != 0)) return false;
    return !topic || (r->topic_len == tlen && memcmp(row_topic(r), topic, tlen) == 0);
}

/* Copies the rows matching 'group' and 'topic' (either NULL: all) into
 * '*out' (one allocation, items then names; free() it; NULL when none)
 * under off_mu, in table order.  MQ_OK or MQ_ERR_NOMEM. */
static int off_snapshot(Meta *m, const char *group, const char *topic, ListItem **out,
                        size_t *count) {
    size_t glen = group ? strlen(group) : 0;
    size_t tlen = topic ? strlen(topic) : 0;
    pthread_mutex_lock(&m->off_mu);
    size_t n = 0;
    size_t bytes = 0;
    for (size_t i = 0; i < m->nbuckets; i++) {
        for (const OffRow *r = m->buckets[i]; r; r = r->next) {
            if (!row_matches(r, group, glen, topic, tlen)) continue;
            n++;
            bytes += (size_t)r->group_len + r->topic_len + 2u;
        }
    }
    ListItem *items = n > 0 ? malloc(n * sizeof(*items) + bytes) : NULL;
    if (!items) {
        pthread_mutex_unlock(&m->off_mu);
        *out = NULL;
        *count = 0;
        return n > 0 ? MQ_ERR_NOMEM : MQ_OK;
    }
    char *arena = (char *)(items + n);
    size_t k = 0;
    for (size_t i = 0; i < m->nbuckets; i++) {
        for (const OffRow *r = m->buckets[i]; r; r = r->next) {
            if (!row_matches(r, group, glen, topic, tlen)) continue;
            size_t len = (size_t)r->group_len + r->topic_len + 2u; /* group NUL topic NUL */
            memcpy(arena, r->names, len);
            items[k++] = (ListItem){arena, arena + r->group_len + 1u, r->qid, r->off};
            arena += len;
        }
    }
    pthread_mutex_unlock(&m->off_mu);
    MQ_ASSERT(k == n);
    *out = items;
    *count = n;
    return MQ_OK;
}

int meta_offset_list(Meta *m, const char *group, const char *topic,
                     int (*fn)(void *arg, const char *topic, uint32_t queue_id, uint64_t off),
                     void *arg) {
    if (!m || !name_ok(group) || (topic && !name_ok(topic)) || !fn) return MQ_ERR_INVAL;
    ListItem *items = NULL;
    size_t n = 0;
    int rc = off_snapshot(m, group, topic, &items, &n);
    if (rc != MQ_OK) return rc;
    if (n > 1) qsort(items, n, sizeof(*items), cmp_item);
    for (size_t i = 0; i < n; i++)
        if (fn(arg, items[i].topic, items[i].qid, items[i].off) != 0) break;
    free(items);
    return MQ_OK;
}

int meta_offset_pairs(Meta *m, int (*fn)(void *arg, const char *group, const char *topic),
                      void *arg) {
    if (!m || !fn) return MQ_ERR_INVAL;
    ListItem *items = NULL;
    size_t n = 0;
    int rc = off_snapshot(m, NULL, NULL, &items, &n);
    if (rc != MQ_OK) return rc;
    if (n > 1) qsort(items, n, sizeof(*items), cmp_pair);
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && cmp_pair(&items[i], &items[i - 1]) == 0) continue; /* another queue */
        if (fn(arg, items[i].group, items[i].topic) != 0) break;
    }
    free(items);
    return MQ_OK;
}

typedef struct FlushItem {
    const OffRow *row; /* stays valid: the flush holds db_mu */
    uint64_t off;      /* the value copied out */
} FlushItem;

/* write_offsets upserts 'n' copied rows in one transaction.  Caller holds
 * db_mu.  MQ_OK or MQ_ERR_DB (logged, rolled back). */
static int write_offsets(Meta *m, const FlushItem *items, size_t n) {
    sqlite3_stmt *st = m->st[ST_OFF_PUT];
    int rc = tx_begin(m);
    if (rc != MQ_OK) return rc;
    for (size_t i = 0; i < n; i++) {
        const OffRow *r = items[i].row;
        if (bind_text(st, 1, r->names, r->group_len) ||
            bind_text(st, 2, row_topic(r), r->topic_len) || bind_i64(st, 3, r->qid) ||
            bind_i64(st, 4, (int64_t)items[i].off)) {
            rc = db_fail(m, "cannot write offsets to", m->path);
            break;
        }
        rc = step_done(m, st, "cannot write offsets to", m->path);
        if (rc != MQ_OK) break;
    }
    if (rc == MQ_OK) rc = tx_commit(m);
    if (rc != MQ_OK) tx_rollback(m);
    return rc;
}

/*
 * Assumes: db_mu is held for the whole flush, so flushes are serialized,
 *   no row is freed meanwhile, and a topic/group delete runs entirely
 *   before or after (a dropped offset is never written back).
 * Ensures: a row's dirty flag is cleared when its value is copied out,
 *   under off_mu; a set() after that marks it dirty again, so a value that
 *   arrives while the transaction runs is written by the next flush, never
 *   lost.  On failure every copied row is marked dirty again.
 */
int meta_offsets_flush(Meta *m) {
    if (!m) return MQ_ERR_INVAL;
    pthread_mutex_lock(&m->db_mu);
    pthread_mutex_lock(&m->off_mu);
    size_t n = m->ndirty;
    if (n == 0) {
        pthread_mutex_unlock(&m->off_mu);
        pthread_mutex_unlock(&m->db_mu);
        return 0;
    }
    FlushItem *items = malloc(n * sizeof(*items));
    if (!items) {
        pthread_mutex_unlock(&m->off_mu);
        pthread_mutex_unlock(&m->db_mu);
        return MQ_ERR_NOMEM;
    }
    size_t k = 0;
    for (size_t i = 0; i < m->nbuckets; i++) {
        for (OffRow *r = m->buckets[i]; r; r = r->next) {
            if (!r->dirty) continue;
            MQ_ASSERT(k < n);
            items[k++] = (FlushItem){r, r->off};
            r->dirty = false;
        }
    }
    MQ_ASSERT(k == n);
    m->ndirty = 0;
    pthread_mutex_unlock(&m->off_mu);

    int rc = write_offsets(m, items, n);
    if (rc != MQ_OK) {
        pthread_mutex_lock(&m->off_mu);
        for (size_t i = 0; i < n; i++) off_mark_dirty(m, (OffRow *)items[i].row);
        pthread_mutex_unlock(&m->off_mu);
    }
    pthread_mutex_unlock(&m->db_mu);
    free(items);
    if (rc != MQ_OK) return rc;
    return n > INT_MAX ? INT_MAX : (int)n;
}

/* ---- settings ------------------------------------------------------------*/

/* 'key' follows the name rules (1..META_NAME_MAX bytes); 'value' any text. */
int meta_kv_put(Meta *m, const char *key, const char *value) {
    if (!m || !name_ok(key) || !value) return MQ_ERR_INVAL;
    pthread_mutex_lock(&m->db_mu);
    sqlite3_stmt *st = m->st[ST_KV_PUT];
    int rc;
    if (bind_text(st, 1, key, -1) || bind_text(st, 2, value, -1))
        rc = db_fail(m, "cannot write setting", key);
    else
        rc = write_tx(m, st, "cannot write setting", key);
    pthread_mutex_unlock(&m->db_mu);
    return rc;
}

/* A longer value is truncated to 'cap'-1 bytes (still MQ_OK). */
int meta_kv_get(Meta *m, const char *key, char *buf, size_t cap) {
    if (!m || !name_ok(key) || !buf || cap == 0) return MQ_ERR_INVAL;
    pthread_mutex_lock(&m->db_mu);
    sqlite3_stmt *st = m->st[ST_KV_GET];
    int rc = bind_text(st, 1, key, -1) == SQLITE_OK ? sqlite3_step(st) : SQLITE_ERROR;
    if (rc == SQLITE_ROW) {
        const unsigned char *v = sqlite3_column_text(st, 0);
        size_t len = v ? (size_t)sqlite3_column_bytes(st, 0) : 0;
        if (len > cap - 1) len = cap - 1;
        if (len) memcpy(buf, v, len);
        buf[len] = '\0';
        rc = MQ_OK;
    } else if (rc == SQLITE_DONE) {
        rc = MQ_ERR_NOTFOUND;
    } else {
        rc = db_fail(m, "cannot read setting", key);
    }
    sqlite3_reset(st);
    pthread_mutex_unlock(&m->db_mu);
    return rc;
}

/* ---- receive state (pop) -------------------------------------------------*/

/* pop_write upserts or deletes one row.  Caller holds db_mu inside a
 * transaction. */
static int pop_write(Meta *m, const MetaPopRow *r) {
    sqlite3_stmt *st = m->st[r->drop ? ST_POP_DEL : ST_POP_PUT];
    if (bind_text(st, 1, r->group, -1) || bind_text(st, 2, r->topic, -1) ||
        bind_i64(st, 3, r->retry ? 1 : 0) || bind_i64(st, 4, r->queue_id))
        return db_fail(m, "cannot write receive state to", m->path);
    if (!r->drop) {
        if (r->ack_off > INT64_MAX || r->next_off > INT64_MAX || r->entries_len > INT_MAX ||
            bind_i64(st, 5, (int64_t)r->ack_off) || bind_i64(st, 6, (int64_t)r->next_off) ||
            bind_i64(st, 7, r->journal_off) ||
            sqlite3_bind_blob(st, 8, r->entries ? (const void *)r->entries : (const void *)"",
                              (int)r->entries_len, SQLITE_STATIC) != SQLITE_OK) {
            sqlite3_reset(st);
            return db_fail(m, "cannot write receive state to", m->path);
        }
    }
    return step_done(m, st, "cannot write receive state to", m->path);
}

int meta_pop_save(Meta *m, const MetaPopRow *rows, size_t n, int64_t replay_from) {
    if (!m || (n && !rows)) return MQ_ERR_INVAL;
    for (size_t i = 0; i < n; i++)
        if (!name_ok(rows[i].group) || !rows[i].topic || !*rows[i].topic) return MQ_ERR_INVAL;
    char value[24];
    snprintf(value, sizeof(value), "%lld", (long long)replay_from);
    pthread_mutex_lock(&m->db_mu);
    int rc = tx_begin(m);
    for (size_t i = 0; rc == MQ_OK && i < n; i++) rc = pop_write(m, &rows[i]);
    if (rc == MQ_OK) {
        sqlite3_stmt *st = m->st[ST_KV_PUT];
        if (bind_text(st, 1, META_POP_REPLAY_KEY, -1) || bind_text(st, 2, value, -1))
            rc = db_fail(m, "cannot write receive state to", m->path);
        else
            rc = step_done(m, st, "cannot write receive state to", m->path);
    }
    if (rc == MQ_OK) rc = tx_commit(m);
    if (rc != MQ_OK) tx_rollback(m);
    pthread_mutex_unlock(&m->db_mu);
    return rc;
}

int meta_pop_load(Meta *m, int (*fn)(void *arg, const MetaPopRow *row), void *arg,
                  int64_t *replay_from) {
    if (!m || !fn || !replay_from) return MQ_ERR_INVAL;
    char value[24];
    int rc = meta_kv_get(m, META_POP_REPLAY_KEY, value, sizeof(value));
    if (rc == MQ_ERR_NOTFOUND) {
        *replay_from = -1;
    } else if (rc != MQ_OK) {
        return rc;
    } else {
        char *end = NULL;
        long long ll = strtoll(value, &end, 10);
        if (!end || *end || ll < -1) {
            MQ_ERROR("bad %s '%s' in '%s'", META_POP_REPLAY_KEY, value, m->path);
            return MQ_ERR_CORRUPT;
        }
        *replay_from = ll;
    }
    pthread_mutex_lock(&m->db_mu);
    sqlite3_stmt *st = m->st[ST_POP_LOAD];
    int step;
    rc = MQ_OK;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        char group[META_NAME_MAX + 1];
        char topic[META_NAME_MAX + 1];
        copy_name(group, st, 0);
        copy_name(topic, st, 1);
        MetaPopRow r = {
            .group = group,
            .topic = topic,
            .retry = sqlite3_column_int64(st, 2) != 0,
            .queue_id = (uint32_t)sqlite3_column_int64(st, 3),
            .ack_off = (uint64_t)sqlite3_column_int64(st, 4),
            .next_off = (uint64_t)sqlite3_column_int64(st, 5),
            .journal_off = sqlite3_column_int64(st, 6),
            .entries = sqlite3_column_blob(st, 7),
            .entries_len = (size_t)sqlite3_column_bytes(st, 7),
        };
        /* The callback must not call meta (db_mu is held). */
        rc = fn(arg, &r);
        if (rc != MQ_OK) break;
    }
    if (rc == MQ_OK && step != SQLITE_DONE) rc = db_fail(m, "cannot read receive state of", m->path);
    sqlite3_reset(st);
    pthread_mutex_unlock(&m->db_mu);
    return rc;
}

/* ---- transactions --------------------------------------------------------*/

int meta_txn_begin(Meta *m) {
    if (!m) return MQ_ERR_INVAL;
    pthread_mutex_lock(&m->db_mu);
    int rc = tx_begin(m);
    if (rc != MQ_OK) pthread_mutex_unlock(&m->db_mu);
    return rc;
}

int meta_txn_end(Meta *m, bool commit) {
    int rc = commit ? tx_commit(m) : MQ_OK;
    if (!commit || rc != MQ_OK) tx_rollback(m);
    pthread_mutex_unlock(&m->db_mu);
    return commit ? rc : MQ_OK;
}

static void copy_text(char *dst, size_t cap, sqlite3_stmt *st, int col) {
    const unsigned char *t = sqlite3_column_text(st, col);
    snprintf(dst, cap, "%s", t ? (const char *)t : "");
}

static void row_to_txn(sqlite3_stmt *st, MetaTxn *t) {
    copy_text(t->id, sizeof(t->id), st, 0);
    copy_text(t->topic, sizeof(t->topic), st, 1);
    t->queue_id = (uint32_t)sqlite3_column_int64(st, 2);
    t->half_off = (uint64_t)sqlite3_column_int64(st, 3);
    copy_text(t->msg_id, sizeof(t->msg_id), st, 4);
    copy_text(t->check_url, sizeof(t->check_url), st, 5);
    t->state = (MetaTxnState)sqlite3_column_int64(st, 6);
    t->check_times = (uint32_t)sqlite3_column_int64(st, 7);
    t->created_ms = sqlite3_column_int64(st, 8);
    t->next_check_ms = sqlite3_column_int64(st, 9);
    t->updated_ms = sqlite3_column_int64(st, 10);
    t->real_off = sqlite3_column_int64(st, 11);
    t->real_qoff = sqlite3_column_int64(st, 12);
    copy_text(t->resolved_by, sizeof(t->resolved_by), st, 13);
}

int meta_txn_put(Meta *m, const MetaTxn *t) {
    if (!m || !t || !t->id[0] || !name_ok(t->topic)) return MQ_ERR_INVAL;
    sqlite3_stmt *st = m->st[ST_TXN_PUT];
    if (bind_text(st, 1, t->id, -1) || bind_text(st, 2, t->topic, -1) ||
        bind_i64(st, 3, t->queue_id) || bind_i64(st, 4, (int64_t)t->half_off) ||
        bind_text(st, 5, t->msg_id, -1) || bind_text(st, 6, t->check_url, -1) ||
        bind_i64(st, 7, t->state) || bind_i64(st, 8, t->check_times) ||
        bind_i64(st, 9, t->created_ms) || bind_i64(st, 10, t->next_check_ms) ||
        bind_i64(st, 11, t->updated_ms) || bind_i64(st, 12, t->real_off) ||
        bind_i64(st, 13, t->real_qoff) || bind_text(st, 14, t->resolved_by, -1))
        return db_fail(m, "cannot write transaction", t->id);
    int rc = sqlite3_step(st);
    int err = MQ_OK;
    if (rc == SQLITE_CONSTRAINT)
        err = MQ_ERR_EXISTS;
    else if (rc != SQLITE_DONE)
        err = db_fail(m, "cannot write transaction", t->id);
    sqlite3_reset(st);
    return err;
}

int meta_txn_set(Meta *m, const MetaTxn *t) {
    if (!m || !t || !t->id[0]) return MQ_ERR_INVAL;
    sqlite3_stmt *st = m->st[ST_TXN_SET];
    if (bind_text(st, 1, t->id, -1) || bind_i64(st, 2, t->state) ||
        bind_i64(st, 3, t->check_times) || bind_i64(st, 4, t->next_check_ms) ||
        bind_i64(st, 5, t->updated_ms) || bind_i64(st, 6, t->real_off) ||
        bind_i64(st, 7, t->real_qoff) || bind_text(st, 8, t->resolved_by, -1))
        return db_fail(m, "cannot update transaction", t->id);
    return step_done(m, st, "cannot update transaction", t->id);
}

int meta_txn_get(Meta *m, const char *id, MetaTxn *out) {
    if (!m || !id || !out) return MQ_ERR_INVAL;
    sqlite3_stmt *st = m->st[ST_TXN_GET];
    if (bind_text(st, 1, id, -1)) return db_fail(m, "cannot read transaction", id);
    int step = sqlite3_step(st);
    int rc = MQ_OK;
    if (step == SQLITE_ROW)
        row_to_txn(st, out);
    else if (step == SQLITE_DONE)
        rc = MQ_ERR_NOTFOUND;
    else
        rc = db_fail(m, "cannot read transaction", id);
    sqlite3_reset(st);
    return rc;
}

int meta_txn_pending_list(Meta *m, size_t limit, int (*fn)(void *arg, const MetaTxn *t),
                          void *arg) {
    if (!m || !fn) return MQ_ERR_INVAL;
    MetaTxn *t = malloc(sizeof(*t));
    if (!t) return MQ_ERR_NOMEM;
    pthread_mutex_lock(&m->db_mu);
    sqlite3_stmt *st = m->st[ST_TXN_LIST];
    int rc = MQ_OK, step = SQLITE_DONE;
    if (bind_i64(st, 1, (int64_t)limit)) rc = db_fail(m, "cannot list transactions of", m->path);
    while (rc == MQ_OK && (step = sqlite3_step(st)) == SQLITE_ROW) {
        row_to_txn(st, t);
        rc = fn(arg, t);
    }
    if (rc == MQ_OK && step != SQLITE_DONE) rc = db_fail(m, "cannot list transactions of", m->path);
    sqlite3_reset(st);
    pthread_mutex_unlock(&m->db_mu);
    free(t);
    return rc;
}

int meta_txn_read(Meta *m, const char *id, MetaTxn *out) {
    if (!m) return MQ_ERR_INVAL;
    pthread_mutex_lock(&m->db_mu);
    int rc = meta_txn_get(m, id, out);
    pthread_mutex_unlock(&m->db_mu);
    return rc;
}

int meta_txn_log(Meta *m, const char *id, const char *op, const char *source,
                 const char *detail, int64_t at_ms) {
    if (!m || !id || !op || !source) return MQ_ERR_INVAL;
    sqlite3_stmt *st = m->st[ST_TXN_LOG];
    if (bind_text(st, 1, id, -1) || bind_text(st, 2, op, -1) || bind_text(st, 3, source, -1) ||
        bind_text(st, 4, detail ? detail : "", -1) || bind_i64(st, 5, at_ms))
        return db_fail(m, "cannot log transaction", id);
    return step_done(m, st, "cannot log transaction", id);
}

int meta_txn_due(Meta *m, int64_t now_ms, size_t limit,
                 int (*fn)(void *arg, const MetaTxn *t), void *arg) {
    if (!m || !fn) return MQ_ERR_INVAL;
    sqlite3_stmt *st = m->st[ST_TXN_DUE];
    if (bind_i64(st, 1, now_ms) || bind_i64(st, 2, (int64_t)limit))
        return db_fail(m, "cannot read due transactions of", m->path);
    int rc = MQ_OK, step;
    MetaTxn *t = malloc(sizeof(*t));
    if (!t) {
        sqlite3_reset(st);
        return MQ_ERR_NOMEM;
    }
    while (rc == MQ_OK && (step = sqlite3_step(st)) == SQLITE_ROW) {
        row_to_txn(st, t);
        rc = fn(arg, t);
    }
    if (rc == MQ_OK && step != SQLITE_DONE) rc = db_fail(m, "cannot read due transactions of", m->path);
    sqlite3_reset(st);
    free(t);
    return rc;
}

int meta_txn_purge(Meta *m, int64_t before_ms) {
    if (!m) return MQ_ERR_INVAL;
    sqlite3_stmt *a = m->st[ST_TXN_PURGE], *b = m->st[ST_TXN_PURGE_LOG];
    if (bind_i64(a, 1, before_ms) || bind_i64(b, 1, before_ms))
        return db_fail(m, "cannot purge transactions of", m->path);
    int rc = step_done(m, a, "cannot purge transactions of", m->path);
    if (rc == MQ_OK) rc = step_done(m, b, "cannot purge transactions of", m->path);
    return rc;
}

int meta_txn_pending(Meta *m, uint64_t *count) {
    if (!m || !count) return MQ_ERR_INVAL;
    sqlite3_stmt *st = m->st[ST_TXN_COUNT];
    int rc = MQ_OK;
    if (sqlite3_step(st) == SQLITE_ROW)
        *count = (uint64_t)sqlite3_column_int64(st, 0);
    else
        rc = db_fail(m, "cannot count transactions of", m->path);
    sqlite3_reset(st);
    return rc;
}

int meta_txn_set_scan_from(Meta *m, uint64_t off) {
    if (!m) return MQ_ERR_INVAL;
    char value[24];
    snprintf(value, sizeof(value), "%llu", (unsigned long long)off);
    sqlite3_stmt *st = m->st[ST_KV_PUT];
    if (bind_text(st, 1, META_TXN_SCAN_KEY, -1) || bind_text(st, 2, value, -1))
        return db_fail(m, "cannot write", META_TXN_SCAN_KEY);
    return step_done(m, st, "cannot write", META_TXN_SCAN_KEY);
}

int meta_txn_get_scan_from(Meta *m, uint64_t *off) {
    if (!m || !off) return MQ_ERR_INVAL;
    sqlite3_stmt *st = m->st[ST_KV_GET];
    if (bind_text(st, 1, META_TXN_SCAN_KEY, -1)) return db_fail(m, "cannot read", META_TXN_SCAN_KEY);
    int step = sqlite3_step(st);
    int rc = MQ_OK;
    if (step == SQLITE_ROW) {
        const char *v = (const char *)sqlite3_column_text(st, 0);
        char *end = NULL;
        errno = 0;
        unsigned long long x = v ? strtoull(v, &end, 10) : 0;
        if (!v || end == v || *end || errno) {
            MQ_ERROR("bad %s '%s' in '%s'", META_TXN_SCAN_KEY, v ? v : "", m->path);
            rc = MQ_ERR_CORRUPT;
        } else {
            *off = x;
        }
    } else if (step == SQLITE_DONE) {
        rc = MQ_ERR_NOTFOUND;
    } else {
        rc = db_fail(m, "cannot read", META_TXN_SCAN_KEY);
    }
    sqlite3_reset(st);
    return rc;
}
