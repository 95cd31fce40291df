/*
 * txn.h - transactional messages (RocketMQ's half messages, API.md
 * "Transactional messages").
 *
 * ---- the log is the truth, sqlite the index --------------------------------
 * A transactional produce appends a *half* record to the system topic
 * RMQ_SYS_TRANS_HALF_TOPIC (queue 0), which no consumer reads: the message
 * with its real topic and queue in REAL_TOPIC / REAL_QID, TRAN_MSG "true",
 * the transaction id in __transactionId__ and the check URL in
 * __TXN_CHECK_URL.  Commit appends the message to its real topic (body,
 * tags, keys and user properties, plus TRAN_MSG and __transactionId__);
 * rollback appends an op record (topic RMQ_SYS_TRANS_OP_HALF_TOPIC, tag
 * "d", the id in __transactionId__).  So every state change is a record of
 * the commit log, and the log alone says what state each transaction is
 * in: the commit log is the op log.
 *
 * meta.db holds the same state as rows (table txn: id, real topic and
 * queue, the half record's offset, check URL, state, check count, times)
 * to look transactions up and to schedule check-backs, plus the position
 * META_TXN_SCAN_KEY up to which the rows reflect the log.  At open the log
 * is replayed from that position (half records make rows, commits and op
 * records resolve them); so a crash at any moment loses nothing that was
 * answered, and nothing is applied twice (a commit is answered from the
 * row's state, which replay restores).
 *
 * ---- one thread, one order ------------------------------------------------
 * Every read and write of the rows runs on the engine's thread.  The half
 * record is appended by txn_prepare on the caller's thread, under the
 * engine's queue lock together with the queueing of its row: so when the
 * thread takes the queue, every half record below the log's write offset
 * is in this batch or an earlier one, and that offset (or the lowest half
 * record of the batch) is a valid replay position to save with the batch.
 * The produce is answered at once (after its flush under SYNC_FLUSH): a
 * later commit, rollback or read of the id is queued behind its row.
 * The thread takes all queued ops as one batch: it applies them to the
 * rows in memory (an overlay over meta.db), waits under SYNC_FLUSH for the
 * commits' records to be durable, and answers (the callbacks).  Every
 * TXN_FLUSH_MS while rows changed (at once past TXN_OVERLAY_MAX, and once
 * a second anyway) it writes them to meta.db in one sqlite transaction
 * (meta_txn_begin/end) with the replay position of the last batch applied,
 * and schedules the due check-backs.  Commit and rollback of one id never
 * race, and neither is applied twice.
 *
 * ---- check-back -----------------------------------------------------------
 * A PREPARED transaction is due for a check transactionTimeOut after it
 * was prepared and then every transactionCheckInterval (never sooner than
 * the request timeout + 1 s: one check at a time).  When due, the thread
 * counts the check (check_times+1, next check moved on) and hands
 * {"transactionId","msgId","topic","keys","properties","checkTimes"} to
 * the check-back client (core/txncheck.h: libcurl on its own thread, with
 * connect and total timeouts).  Its verdict comes back as an op: COMMIT
 * and ROLLBACK act like the endpoints; UNKNOWN, errors and timeouts are
 * logged in table txn_op.  A transaction whose transactionCheckMax-th check
 * did not resolve it is rolled back ("max_checks", logged).  With no check
 * URL (or one the allow-list no longer accepts) a check counts as
 * UNKNOWN.  Resolved rows are purged after keep_resolved_ms.  Check counts
 * are not in the log: a crash may repeat one check.
 */
#ifndef PETREL_TXN_H
#define PETREL_TXN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "meta.h"
#include "msg.h"
#include "mq.h"
#include "store.h"
#include "topic.h"

#define TXN_HALF_TOPIC "RMQ_SYS_TRANS_HALF_TOPIC"
#define TXN_OP_TOPIC "RMQ_SYS_TRANS_OP_HALF_TOPIC" /* rollback records */
#define TXN_PROP_ID MSG_PROP_TRANSACTION_ID /* RocketMQ's PROPERTY_TRANSACTION_ID */
#define TXN_BATCH_MAX 1024              /* ops one batch takes at most */
#define TXN_LIST_MAX 500                /* rows one TXN_OP_LIST returns at most */
#define TXN_DUE_BATCH 256               /* due transactions one pass checks at most */
#define TXN_FLUSH_MS 20                 /* changed rows are written to meta.db this often */
#define TXN_OVERLAY_MAX 1024            /* ... or as soon as this many wait */
/* Most bytes txn_wrap_half adds to a message's properties. */
#define TXN_WRAP_EXTRA (sizeof(MSG_PROP_REAL_TOPIC) + 255 + sizeof(MSG_PROP_REAL_QID) + 10 + \
                        sizeof(MSG_PROP_TRAN_MSG) + 4 + sizeof(TXN_PROP_ID) + META_TXN_ID_MAX + \
                        sizeof(MSG_PROP_TXN_CHECK_URL) + META_TXN_URL_MAX + 10)

typedef struct TxnConfig {
    Store *store;            /* borrowed: all outlive the engine */
    Meta *meta;
    TopicRegistry *topics;
    const uint8_t *store_host; /* 8 bytes: message ids of half records (msg_id_encode) */
    bool sync_flush;         /* SYNC_FLUSH: ops complete after the log is durable */
    int64_t timeout_ms;      /* transactionTimeOut: first check this long after prepare */
    int64_t check_interval_ms; /* transactionCheckInterval */
    uint32_t check_max;      /* transactionCheckMax */
    int64_t keep_resolved_ms; /* resolved rows are purged after this */
    int64_t check_connect_timeout_ms;
    int64_t check_request_timeout_ms;
    const char *check_allowed_hosts; /* copied; "" = any host */
    bool thread;             /* start the thread (unit tests may drive txn_run_once) */
    MqClockFn clock;         /* wall clock; NULL = mq_now_ms */
    void *clock_arg;
} TxnConfig;

typedef struct TxnEngine TxnEngine;

typedef enum {
    TXN_OP_PREPARE,  /* record a half message (fields 'prep'): txn_prepare's */
    TXN_OP_COMMIT,
    TXN_OP_ROLLBACK,
    TXN_OP_GET,      /* read the row */
    TXN_OP_VERDICT,  /* a check-back answer (fields 'verdict', 'detail'); engine-made */
    TXN_OP_LIST,     /* the PREPARED transactions (fields 'list_*') */
} TxnOpKind;

/* One request to the engine.  Owned by the submitter; valid until 'done'
 * is called (on the engine thread), after which the engine never touches
 * it, so 'done' may free it.  An op with 'done' NULL belongs to the engine
 * once submitted, which frees it (free()) when applied. */
typedef struct TxnOp {
    struct TxnOp *next;           /* queue link (the engine's) */
    TxnOpKind kind;
    char id[META_TXN_ID_MAX + 1]; /* the transaction */
    int verdict;      /* TXN_OP_VERDICT: a TxcVerdict (core/txncheck.h) */
    size_t list_limit;  /* TXN_OP_LIST: rows wanted, 1..TXN_LIST_MAX */
    MetaTxn *list_rows; /* TXN_OP_LIST result: malloc'd, the submitter frees */
    size_t list_n;
    uint64_t list_pending; /* TXN_OP_LIST result: PREPARED transactions in all */
    char detail[96];  /* TXN_OP_VERDICT: the check-back client's words */
    /* results */
    int rc;          /* MQ_OK; MQ_ERR_NOTFOUND (no such transaction);
                      * MQ_ERR_STATE (already resolved the other way);
                      * MQ_ERR_TIMEOUT (done, durability not confirmed);
                      * others: failure */
    const char *why; /* static text for a failure, or NULL */
    void (*done)(struct TxnOp *op);
    void *done_arg;
    /* The large members last: txn_op_init clears only what is above. */
    struct {          /* TXN_OP_PREPARE inputs */
        char topic[META_NAME_MAX + 1];
        uint32_t queue_id;
        uint64_t half_off;
        char msg_id[META_TXN_ID_MAX + 1]; /* set by txn_prepare */
        char check_url[META_TXN_URL_MAX + 1];
    } prep;
    MetaTxn row;      /* the row after the op (COMMIT/ROLLBACK/GET/PREPARE) */
} TxnOp;

/* txn_op_init readies 'op' (malloc'd or not) for 'kind' and 'id': the
 * small fields cleared, prep strings empty (a few KB are not zeroed:
 * ops are made per request). */
void txn_op_init(TxnOp *op, TxnOpKind kind, const char *id);

/* txn_open recovers (the scan above), starts the check-back client and,
 * with cfg->thread, the engine thread.  The store must be open and
 * recovered.  MQ_OK, MQ_ERR_INVAL, MQ_ERR_NOMEM, MQ_ERR_DB, MQ_ERR_IO. */
int txn_open(const TxnConfig *cfg, TxnEngine **out);

/* txn_close runs the ops still queued, stops the check-back client
 * (checks in flight are abandoned: they are sent again when due), stops
 * the thread and frees.  Before closing the store and meta.  NULL ok. */
void txn_close(TxnEngine *e);

/* txn_submit queues 'op' (COMMIT, ROLLBACK, GET).  MQ_OK ('done' will be
 * called exactly once) or MQ_ERR_STATE (closing: 'done' is not called).
 * Any thread; never blocks on I/O. */
int txn_submit(TxnEngine *e, TxnOp *op);

/* txn_wrap_half fills '*out' with the half form of 'in' (a message of its
 * real topic and queue) for transaction 'id' with check URL 'check_url'
 * ("" = none): topic TXN_HALF_TOPIC, queue 0, the properties of 'in'
 * followed by REAL_TOPIC, REAL_QID, TRAN_MSG, TXN_PROP_ID and
 * MSG_PROP_TXN_CHECK_URL, written into 'buf' ('cap' bytes).  MQ_OK,
 * MQ_ERR_FULL, MQ_ERR_INVAL.  Any thread. */
int txn_wrap_half(const ClMessage *in, const char *id, const char *check_url, uint8_t *buf,
                  size_t cap, ClMessage *out);

/* txn_prepare appends the half record 'half' (txn_wrap_half's) and queues
 * 'op' (kind TXN_OP_PREPARE, 'id' and prep.topic / queue_id / check_url
 * filled; heap-allocated, 'done' NULL: the engine frees it) in one step
 * (see above); '*res' is where the record went.  MQ_OK; the append's
 * error, or MQ_ERR_STATE when closing ('op' not taken: the caller frees
 * it).  Any thread; never waits for the disk (the caller waits for the
 * flush under SYNC_FLUSH). */
int txn_prepare(TxnEngine *e, const ClMessage *half, TxnOp *op, ClAppendResult *res);

/* txn_check_url_ok is the check-URL policy (http or https, a host, the
 * allowed hosts of the configuration); false with a reason in 'why'. */
bool txn_check_url_ok(TxnEngine *e, const char *url, char *why, size_t cap);

/* txn_run_once runs one pass of the thread's work at 'now_ms' (< 0: the
 * clock's now): queued ops, due checks, purge.  For unit tests without
 * the thread. */
void txn_run_once(TxnEngine *e, int64_t now_ms);

/* Counters for /metrics.  Any thread. */
typedef struct TxnStats {
    uint64_t pending;      /* PREPARED transactions */
    uint64_t committed;    /* since start */
    uint64_t rolled_back;
    uint64_t checks;       /* check-backs sent */
} TxnStats;
void txn_stats(TxnEngine *e, TxnStats *out);

const char *txn_state_name(MetaTxnState s); /* "PREPARED", "COMMITTED", "ROLLED_BACK" */

#endif
