/*
 * txn.c - transactional messages (see txn.h): the engine thread, its
 * batches, commit/rollback, check-back scheduling and crash recovery.
 */
#define _GNU_SOURCE
#include "txn.h"

#include <errno.h>
#include <stddef.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "txncheck.h"

#define PURGE_INTERVAL_MS 60000 /* resolved rows are purged this often */
#define IDLE_WAIT_MS 1000       /* longest sleep of the thread; the idle flush period */
#define PROPS_MAX_PAIRS 64      /* properties of a half message handled at most */
#define OVERLAY_BUCKETS 2048    /* hash buckets of the changed rows (a power of 2) */

/* A row changed since the last flush (the write-behind overlay). */
typedef struct Row {
    struct Row *next; /* bucket chain */
    bool in_db;       /* meta.db has a row of this id (flush: update, else insert) */
    MetaTxn t;
} Row;

/* An op-log line waiting for the next flush. */
typedef struct LogLine {
    char id[META_TXN_ID_MAX + 1];
    const char *op, *source; /* static strings */
    char detail[96];
    int64_t at_ms;
} LogLine;

/* A check to send once the batch that counted it is committed. */
typedef struct PendingCheck {
    char id[META_TXN_ID_MAX + 1];
    char *url;  /* owned */
    char *body; /* owned */
} PendingCheck;

struct TxnEngine {
    TxnConfig cfg;
    char *allowed_hosts;       /* owned copy of cfg.check_allowed_hosts */
    TxcChecker *checker;

    pthread_mutex_t mu;        /* guards the queue and 'stopping' */
    pthread_cond_t cv;
    TxnOp *head, *tail;
    bool stopping;
    bool running;
    pthread_t thread;

    /* the thread's own (or txn_run_once's caller's) */
    pthread_mutex_t run_mu;    /* one pass at a time */
    uint64_t saved_scan_from;  /* last META_TXN_SCAN_KEY written */
    uint64_t w_applied;        /* replay position of the ops applied so far */
    int64_t last_flush_ns;
    int64_t last_purge_ms;
    Row *buckets[OVERLAY_BUCKETS]; /* rows changed since the last flush */
    size_t n_rows;
    uint8_t *props_buf;        /* CL_PROPS_MAX bytes: a commit's properties */
    LogLine *logs;             /* op-log lines since the last flush */
    size_t n_logs, cap_logs;
    int64_t next_due_ms;       /* earliest check due seen by the last pass */
    uint64_t flush_upto;       /* the batch's last byte that must be durable */
    PendingCheck *checks;      /* the flush's checks to send */
    size_t n_checks, cap_checks;

    _Atomic uint64_t pending, committed, rolled_back, sent;
};

static int64_t now_ms(const TxnEngine *e) {
    return e->cfg.clock ? e->cfg.clock(e->cfg.clock_arg) : mq_now_ms();
}

static bool name_is(MqSlice n, const char *s) {
    return n.len == strlen(s) && memcmp(n.ptr, s, n.len) == 0;
}

void txn_op_init(TxnOp *op, TxnOpKind kind, const char *id) {
    memset(op, 0, offsetof(TxnOp, prep));
    op->kind = kind;
    snprintf(op->id, sizeof(op->id), "%s", id ? id : "");
    op->prep.topic[0] = op->prep.msg_id[0] = op->prep.check_url[0] = '\0';
    op->prep.queue_id = 0;
    op->prep.half_off = 0;
}

const char *txn_state_name(MetaTxnState s) {
    switch (s) {
    case META_TXN_PREPARED: return "PREPARED";
    case META_TXN_COMMITTED: return "COMMITTED";
    case META_TXN_ROLLED_BACK: return "ROLLED_BACK";
    }
    return "UNKNOWN";
}

/* ---- the half record ------------------------------------------------------*/

static const MqSlice HALF_TOPIC = {TXN_HALF_TOPIC, sizeof(TXN_HALF_TOPIC) - 1};

int txn_wrap_half(const ClMessage *in, const char *id, const char *check_url, uint8_t *buf,
                  size_t cap, ClMessage *out) {
    if (!in || !id || !*id || strlen(id) > META_TXN_ID_MAX || !check_url ||
        strlen(check_url) > META_TXN_URL_MAX || !buf || !out)
        return MQ_ERR_INVAL;
    char qid[16];
    snprintf(qid, sizeof(qid), "%u", in->queue_id);
    MsgProp add[5] = {
        {mq_slice(MSG_PROP_REAL_TOPIC, strlen(MSG_PROP_REAL_TOPIC)), in->topic},
        {mq_slice(MSG_PROP_REAL_QID, strlen(MSG_PROP_REAL_QID)), mq_slice(qid, strlen(qid))},
        {mq_slice(MSG_PROP_TRAN_MSG, strlen(MSG_PROP_TRAN_MSG)), mq_slice("true", 4)},
        {mq_slice(TXN_PROP_ID, strlen(TXN_PROP_ID)), mq_slice(id, strlen(id))},
        {mq_slice(MSG_PROP_TXN_CHECK_URL, strlen(MSG_PROP_TXN_CHECK_URL)),
         mq_slice(check_url, strlen(check_url))},
    };
    size_t n_add = *check_url ? 5 : 4;
    size_t extra = 0;
    int rc = msg_props_encode(add, n_add, NULL, 0, &extra);
    if (rc != MQ_OK) return rc;
    if (in->props.len + extra > cap || in->props.len + extra > CL_PROPS_MAX) return MQ_ERR_FULL;
    if (in->props.len) memcpy(buf, in->props.ptr, in->props.len);
    size_t n = 0;
    rc = msg_props_encode(add, n_add, buf + in->props.len, cap - in->props.len, &n);
    if (rc != MQ_OK) return rc;
    *out = *in;
    out->topic = HALF_TOPIC;
    out->queue_id = 0;
    out->props = mq_slice(buf, in->props.len + n);
    return MQ_OK;
}

/* Reads the half record of 'row' into '*rec' (keep '*ref' until done:
 * mf_unref).  False when it is gone (retention) or is not this
 * transaction's. */
static bool read_half(TxnEngine *e, const MetaTxn *row, ClRecord *rec, MappedFile **ref) {
    MqSlice v;
    if (store_read_msg(e->cfg.store, row->half_off, rec, ref) == MQ_OK &&
        rec->phys_off == row->half_off && name_is(rec->topic, TXN_HALF_TOPIC) &&
        msg_prop_get(rec->props, TXN_PROP_ID, &v) && name_is(v, row->id))
        return true;
    mf_unref(ref);
    return false;
}

/* ---- the rows: meta.db behind a write-behind overlay --------------------------
 * Ops change rows in memory (the overlay); flush() writes them to meta.db
 * in one transaction every TXN_FLUSH_MS while there are changes (and at
 * once past TXN_OVERLAY_MAX rows), together with the replay position they
 * reflect.  A crash loses nothing: what the overlay held is in the log
 * (txn.h), and the replay at open rebuilds it.  Reads look in the overlay
 * first. */

static Row **bucket_of(TxnEngine *e, const char *id) {
    return &e->buckets[mq_hash64(id, strlen(id)) & (OVERLAY_BUCKETS - 1)];
}

static Row *overlay_find(TxnEngine *e, const char *id) {
    for (Row *r = *bucket_of(e, id); r; r = r->next)
        if (strcmp(r->t.id, id) == 0) return r;
    return NULL;
}

/* Transaction 'id' into '*out': the overlay's row, else meta.db's (never
 * called during a flush, which holds the connection).  MQ_ERR_NOTFOUND. */
static int row_read(TxnEngine *e, const char *id, MetaTxn *out) {
    Row *r = overlay_find(e, id);
    if (r) {
        *out = r->t;
        return MQ_OK;
    }
    return meta_txn_read(e->cfg.meta, id, out);
}

/* Records 'row' as changed ('fresh': not in meta.db yet). */
static int row_changed(TxnEngine *e, const MetaTxn *row, bool fresh) {
    Row *r = overlay_find(e, row->id);
    if (!r) {
        r = malloc(sizeof(*r));
        if (!r) return MQ_ERR_NOMEM;
        Row **b = bucket_of(e, row->id);
        r->next = *b;
        *b = r;
        r->in_db = !fresh;
        e->n_rows++;
    }
    r->t = *row;
    return MQ_OK;
}

static void log_line(TxnEngine *e, const char *id, const char *op, const char *source,
                     const char *detail, int64_t now) {
    if (e->n_logs == e->cap_logs) {
        size_t cap = e->cap_logs ? e->cap_logs * 2 : 16;
        LogLine *l = realloc(e->logs, cap * sizeof(*l));
        if (!l) return; /* the audit line is lost, not the state */
        e->logs = l;
        e->cap_logs = cap;
    }
    LogLine *l = &e->logs[e->n_logs++];
    snprintf(l->id, sizeof(l->id), "%s", id);
    l->op = op;
    l->source = source;
    snprintf(l->detail, sizeof(l->detail), "%s", detail ? detail : "");
    l->at_ms = now;
}

static void overlay_clear(TxnEngine *e) {
    for (size_t i = 0; i < OVERLAY_BUCKETS; i++) {
        for (Row *r = e->buckets[i], *next; r; r = next) {
            next = r->next;
            free(r);
        }
        e->buckets[i] = NULL;
    }
    e->n_rows = 0;
    e->n_logs = 0;
}

/* ---- state changes (engine thread) ------------------------------------------*/

static void resolve(TxnEngine *e, MetaTxn *row, MetaTxnState to, const char *by, int64_t now) {
    row->state = to;
    row->updated_ms = now;
    snprintf(row->resolved_by, sizeof(row->resolved_by), "%s", by);
    atomic_fetch_sub(&e->pending, 1);
    atomic_fetch_add(to == META_TXN_COMMITTED ? &e->committed : &e->rolled_back, 1);
}

static const MqSlice OP_TOPIC = {TXN_OP_TOPIC, sizeof(TXN_OP_TOPIC) - 1};

/* Rolls back the PREPARED 'row': the op record (what replay finds), then
 * the row; 'detail' (automatic rollbacks) goes to the op-log table. */
static int do_rollback(TxnEngine *e, MetaTxn *row, const char *by, const char *detail,
                       int64_t now) {
    MsgProp p[2] = {
        {mq_slice(MSG_PROP_TAGS, strlen(MSG_PROP_TAGS)), mq_slice("d", 1)},
        {mq_slice(TXN_PROP_ID, strlen(TXN_PROP_ID)), mq_slice(row->id, strlen(row->id))},
    };
    uint8_t buf[META_TXN_ID_MAX + 64];
    size_t plen = 0;
    int rc = msg_props_encode(p, 2, buf, sizeof(buf), &plen);
    if (rc == MQ_OK) {
        ClMessage m = {.topic = OP_TOPIC,
                       .queue_id = 0,
                       .born_ts = now,
                       .body = mq_slice(row->id, strlen(row->id)),
                       .props = mq_slice(buf, plen)};
        ClAppendResult res;
        rc = store_put_lazy(e->cfg.store, &m, 1, &res, true); /* nobody reads it */
    }
    if (rc != MQ_OK) return rc;
    resolve(e, row, META_TXN_ROLLED_BACK, by, now);
    if (detail) log_line(e, row->id, "rollback", by, detail, now);
    return row_changed(e, row, false);
}

/* Puts the half record of the PREPARED 'row' on its real topic and marks
 * the row COMMITTED.  MQ_OK; MQ_ERR_STATE with '*why' when the message
 * cannot be delivered any more (the row is then rolled back); the append
 * error otherwise (the row stays PREPARED). */
static int do_commit(TxnEngine *e, MetaTxn *row, const char *by, int64_t now, const char **why) {
    ClRecord rec;
    MappedFile *ref = NULL;
    if (!read_half(e, row, &rec, &ref)) {
        MQ_WARN("transaction %s: its half message is gone; rolled back", row->id);
        *why = "its half message is gone (retention); the transaction was rolled back";
        int rc = do_rollback(e, row, "lost", "half message gone", now);
        return rc == MQ_OK ? MQ_ERR_STATE : rc;
    }
    MetaTopic t;
    if (topic_get(e->cfg.topics, row->topic, &t) != MQ_OK || t.write_queues == 0) {
        mf_unref(&ref);
        MQ_WARN("transaction %s: topic '%s' is gone; rolled back", row->id, row->topic);
        *why = "its topic no longer exists; the transaction was rolled back";
        int rc = do_rollback(e, row, "lost", "topic gone", now);
        return rc == MQ_OK ? MQ_ERR_STATE : rc;
    }
    /* The properties without REAL_TOPIC and REAL_QID; TRAN_MSG and the
     * transaction id stay (the id is what recovery looks for). */
    MsgProp props[PROPS_MAX_PAIRS];
    size_t n = 0, k = 0;
    int rc = msg_props_decode(rec.props, props, PROPS_MAX_PAIRS, &n);
    for (size_t i = 0; rc == MQ_OK && i < n; i++)
        if (!name_is(props[i].name, MSG_PROP_REAL_TOPIC) &&
            !name_is(props[i].name, MSG_PROP_REAL_QID))
            props[k++] = props[i];
    uint8_t *buf = e->props_buf;
    size_t plen = 0;
    if (rc == MQ_OK) rc = msg_props_encode(props, k, buf, CL_PROPS_MAX, &plen);
    ClAppendResult res;
    if (rc == MQ_OK) {
        ClMessage m = {0};
        m.topic = mq_slice(row->topic, strlen(row->topic));
        m.queue_id = row->queue_id % t.write_queues;
        m.flag = rec.flag;
        m.born_ts = rec.born_ts;
        memcpy(m.born_host, rec.born_host, 8);
        m.reconsume_times = rec.reconsume_times;
        m.body = rec.body;
        m.props = mq_slice((const char *)buf, plen);
        rc = store_put(e->cfg.store, &m, 1, &res);
    }
    mf_unref(&ref);
    if (rc == MQ_ERR_CORRUPT || (rc == MQ_ERR_FULL && plen == 0)) {
        MQ_WARN("transaction %s: damaged half message; rolled back", row->id);
        *why = "its half message is damaged; the transaction was rolled back";
        rc = do_rollback(e, row, "lost", "half message damaged", now);
        return rc == MQ_OK ? MQ_ERR_STATE : rc;
    }
    if (rc != MQ_OK) return rc;
    if (res.phys_off + res.size > e->flush_upto) e->flush_upto = res.phys_off + res.size;
    resolve(e, row, META_TXN_COMMITTED, by, now);
    row->real_off = (int64_t)res.phys_off;
    row->real_qoff = (int64_t)res.queue_off;
    return row_changed(e, row, false);
}

/* Applies a COMMIT or ROLLBACK asked by 'by' to the transaction of 'op'. */
static void end_txn(TxnEngine *e, TxnOp *op, bool commit, const char *by, int64_t now) {
    MetaTxn *row = &op->row;
    op->rc = row_read(e, op->id, row);
    if (op->rc != MQ_OK) return;
    MetaTxnState want = commit ? META_TXN_COMMITTED : META_TXN_ROLLED_BACK;
    if (row->state == want) return; /* again: the same answer */
    if (row->state != META_TXN_PREPARED) {
        op->rc = MQ_ERR_STATE;
        op->why = commit ? "the transaction was rolled back" : "the transaction was committed";
        return;
    }
    op->rc = commit ? do_commit(e, row, by, now, &op->why) : do_rollback(e, row, by, NULL, now);
}

/* The row of a new half record.  'created' is its store time. */
static void new_row(TxnEngine *e, MetaTxn *row, const char *id, const char *topic,
                    uint32_t queue_id, uint64_t half_off, const char *msg_id,
                    const char *check_url, int64_t created) {
    memset(row, 0, offsetof(MetaTxn, check_url));
    snprintf(row->id, sizeof(row->id), "%s", id);
    snprintf(row->topic, sizeof(row->topic), "%s", topic);
    row->queue_id = queue_id;
    row->half_off = half_off;
    snprintf(row->msg_id, sizeof(row->msg_id), "%s", msg_id);
    snprintf(row->check_url, sizeof(row->check_url), "%s", check_url);
    row->state = META_TXN_PREPARED;
    row->check_times = 0;
    row->created_ms = row->updated_ms = created;
    row->next_check_ms = created + e->cfg.timeout_ms;
    row->real_off = row->real_qoff = -1;
    row->resolved_by[0] = '\0';
}

static void do_prepare(TxnEngine *e, TxnOp *op, int64_t now) {
    new_row(e, &op->row, op->id, op->prep.topic, op->prep.queue_id, op->prep.half_off,
            op->prep.msg_id, op->prep.check_url, now);
    op->rc = row_changed(e, &op->row, true);
    if (op->rc == MQ_OK) atomic_fetch_add(&e->pending, 1);
}

static void do_verdict(TxnEngine *e, TxnOp *op, int64_t now) {
    MetaTxn *row = &op->row;
    if (row_read(e, op->id, row) != MQ_OK) return; /* purged meanwhile */
    if (row->state != META_TXN_PREPARED) {
        log_line(e, row->id, "check", "check", op->detail, now);
        return;
    }
    const char *why = NULL;
    int rc = MQ_OK;
    if (op->verdict == TXC_COMMIT) {
        rc = do_commit(e, row, "check", now, &why);
    } else if (op->verdict == TXC_ROLLBACK) {
        rc = do_rollback(e, row, "check", "ROLLBACK", now);
    } else {
        log_line(e, row->id, "check", "check", op->detail, now);
        if (row->check_times >= e->cfg.check_max) {
            MQ_WARN("transaction %s: still unresolved after %u checks (%s); rolled back",
                    row->id, row->check_times, op->detail);
            rc = do_rollback(e, row, "max_checks", op->detail, now);
        }
    }
    if (rc != MQ_OK && rc != MQ_ERR_STATE)
        MQ_WARN("transaction %s: cannot apply the check-back answer: %s", row->id,
                mq_strerror(rc));
}

static void flush(TxnEngine *e, int64_t now);

static int list_one(void *arg, const MetaTxn *t) {
    TxnOp *op = arg;
    op->list_rows[op->list_n++] = *t;
    return MQ_OK;
}

/* The PREPARED rows, the next check due first: the overlay is flushed
 * first, so meta.db has them all. */
static void do_list(TxnEngine *e, TxnOp *op, int64_t now) {
    size_t limit = op->list_limit < 1 ? 1 : op->list_limit > TXN_LIST_MAX ? TXN_LIST_MAX
                                                                            : op->list_limit;
    op->list_n = 0;
    op->list_rows = malloc(limit * sizeof(MetaTxn));
    if (!op->list_rows) {
        op->rc = MQ_ERR_NOMEM;
        return;
    }
    flush(e, now);
    op->rc = meta_txn_pending_list(e->cfg.meta, limit, list_one, op);
    op->list_pending = atomic_load(&e->pending);
}

static void apply(TxnEngine *e, TxnOp *op, int64_t now) {
    op->rc = MQ_OK;
    op->why = NULL;
    switch (op->kind) {
    case TXN_OP_PREPARE: do_prepare(e, op, now); break;
    case TXN_OP_COMMIT: end_txn(e, op, true, "client", now); break;
    case TXN_OP_ROLLBACK: end_txn(e, op, false, "client", now); break;
    case TXN_OP_GET: op->rc = row_read(e, op->id, &op->row); break;
    case TXN_OP_LIST: do_list(e, op, now); break;
    case TXN_OP_VERDICT: do_verdict(e, op, now); break;
    }
}

/* ---- check-back ---------------------------------------------------------------*/

/* The check-back body of 'row' (caller frees), NULL when out of memory. */
static char *check_body(TxnEngine *e, const MetaTxn *row) {
    json_t *keys = json_array(), *props = json_object();
    ClRecord rec;
    MappedFile *ref = NULL;
    if (keys && props && read_half(e, row, &rec, &ref)) {
        MsgProp p[PROPS_MAX_PAIRS];
        size_t n = 0;
        if (msg_props_decode(rec.props, p, PROPS_MAX_PAIRS, &n) != MQ_OK) n = 0;
        for (size_t i = 0; i < n; i++) {
            if (name_is(p[i].name, MSG_PROP_KEYS)) {
                const char *s = p[i].value.ptr, *end = s + p[i].value.len;
                while (s < end) {
                    const char *sp = memchr(s, ' ', (size_t)(end - s));
                    if (!sp) sp = end;
                    if (sp > s) json_array_append_new(keys, json_stringn(s, (size_t)(sp - s)));
                    s = sp + 1;
                }
            } else if (!msg_prop_name_reserved(p[i].name)) {
                char name[256];
                if (p[i].name.len >= sizeof(name)) continue;
                memcpy(name, p[i].name.ptr, p[i].name.len);
                name[p[i].name.len] = '\0';
                json_object_set_new(props, name, json_stringn(p[i].value.ptr, p[i].value.len));
            }
        }
        mf_unref(&ref);
    }
    /* 'o' takes the references, also when packing fails */
    json_t *body = json_pack("{s:s, s:s, s:s, s:o, s:o, s:I}", "transactionId", row->id,
                             "msgId", row->msg_id, "topic", row->topic, "keys",
                             keys ? keys : json_array(), "properties",
                             props ? props : json_object(), "checkTimes",
                             (json_int_t)row->check_times);
    if (!body) return NULL;
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    return text;
}

static void on_verdict(void *arg, const char *id, TxcVerdict v, const char *detail) {
    TxnEngine *e = arg;
    TxnOp *op = malloc(sizeof(*op));
    if (!op) {
        MQ_WARN("transaction %s: check-back answer dropped (out of memory)", id);
        return;
    }
    txn_op_init(op, TXN_OP_VERDICT, id);
    op->verdict = (int)v;
    snprintf(op->detail, sizeof(op->detail), "%s", detail ? detail : "");
    op->done = NULL; /* the engine frees it */
    if (txn_submit(e, op) != MQ_OK) free(op);
}

/* Counts a check of the due PREPARED 'row' (meta.db's; the overlay may
 * know better) and queues its request.  During a flush. */
static int check_due(TxnEngine *e, MetaTxn *row, int64_t now) {
    Row *o = overlay_find(e, row->id);
    if (o) {
        if (o->t.state != META_TXN_PREPARED || o->t.next_check_ms > now) return MQ_OK;
        *row = o->t;
    }
    if (row->check_times >= e->cfg.check_max) {
        MQ_WARN("transaction %s: unresolved after %u checks; rolled back", row->id,
                row->check_times);
        return do_rollback(e, row, "max_checks", "no answer to the last check", now);
    }
    row->check_times++;
    /* Never sooner than a request can take: one check at a time. */
    int64_t gap = e->cfg.check_interval_ms;
    if (gap < e->cfg.check_request_timeout_ms + 1000) gap = e->cfg.check_request_timeout_ms + 1000;
    row->next_check_ms = now + gap;
    row->updated_ms = now;
    int rc = row_changed(e, row, false);
    if (rc != MQ_OK) return rc;
    atomic_fetch_add(&e->sent, 1);
    char why[128];
    if (!row->check_url[0] || !txn_check_url_ok(e, row->check_url, why, sizeof(why))) {
        /* Nobody to ask: an UNKNOWN answer. */
        if (row->check_url[0])
            MQ_WARN("transaction %s: check URL not allowed (%s)", row->id, why);
        const char *detail = row->check_url[0] ? "check URL not allowed" : "no check URL";
        log_line(e, row->id, "check", "check", detail, now);
        if (row->check_times >= e->cfg.check_max)
            rc = do_rollback(e, row, "max_checks", detail, now);
        return rc;
    }
    if (e->n_checks == e->cap_checks) {
        size_t cap = e->cap_checks ? e->cap_checks * 2 : 16;
        PendingCheck *p = realloc(e->checks, cap * sizeof(*p));
        if (!p) return MQ_OK; /* sent at its next due time */
        e->checks = p;
        e->cap_checks = cap;
    }
    PendingCheck *pc = &e->checks[e->n_checks];
    snprintf(pc->id, sizeof(pc->id), "%s", row->id);
    pc->url = strdup(row->check_url);
    pc->body = check_body(e, row);
    if (!pc->url || !pc->body) {
        free(pc->url);
        free(pc->body);
        return MQ_OK;
    }
    e->n_checks++;
    return MQ_OK;
}

typedef struct DueList {
    MetaTxn *rows;
    size_t n;
} DueList;

static int collect_due(void *arg, const MetaTxn *t) {
    DueList *d = arg;
    d->rows[d->n++] = *t;
    return MQ_OK;
}

static void drop_checks(TxnEngine *e) {
    for (size_t i = 0; i < e->n_checks; i++) {
        free(e->checks[i].url);
        free(e->checks[i].body);
    }
    e->n_checks = 0;
}

static void send_checks(TxnEngine *e) {
    if (!e->checker) { /* closing */
        drop_checks(e);
        return;
    }
    for (size_t i = 0; i < e->n_checks; i++) {
        PendingCheck *pc = &e->checks[i];
        int rc = txc_submit(e->checker, pc->id, pc->url, pc->body);
        if (rc != MQ_OK)
            MQ_WARN("transaction %s: check-back not sent: %s (counted as UNKNOWN)", pc->id,
                    mq_strerror(rc));
        free(pc->url);
        free(pc->body);
    }
    e->n_checks = 0;
}

/* ---- batches ----------------------------------------------------------------------*/

typedef struct FlushWait {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    int status;
} FlushWait;

static void on_flushed(void *arg, int status) {
    FlushWait *w = arg;
    pthread_mutex_lock(&w->mu);
    w->status = status;
    w->done = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* Waits (on the engine thread, never an HTTP worker) until the log is
 * durable up to 'upto'.  MQ_OK, MQ_ERR_TIMEOUT, MQ_ERR_IO, MQ_ERR_RDONLY. */
static int wait_durable(TxnEngine *e, uint64_t upto) {
    FlushWait w = {.done = false, .status = MQ_OK};
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    ClFlushWaiter waiter;
    int rc = store_wait_flush(e->cfg.store, &waiter, upto, on_flushed, &w);
    if (rc == 1) {
        pthread_mutex_lock(&w.mu);
        while (!w.done) pthread_cond_wait(&w.cv, &w.mu);
        pthread_mutex_unlock(&w.mu);
        rc = w.status;
    }
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
    return rc;
}

static void recover_scan(TxnEngine *e, uint64_t from);

/* Writes the overlay, the op-log lines and the replay position to meta.db
 * in one transaction, after scheduling the due checks (their changes go
 * in the same transaction); then sends the checks.  A failed write is
 * repaired by a replay from the log. */
static void flush(TxnEngine *e, int64_t now) {
    Meta *meta = e->cfg.meta;
    e->last_flush_ns = mq_mono_ns();
    int rc = meta_txn_begin(meta);
    if (rc != MQ_OK) {
        MQ_ERROR("transaction state not saved (%s): replaying it from the log",
                 mq_strerror(rc));
        overlay_clear(e);
        recover_scan(e, e->saved_scan_from);
        return;
    }
    e->next_due_ms = now + IDLE_WAIT_MS;
    DueList due = {malloc(TXN_DUE_BATCH * sizeof(MetaTxn)), 0};
    if (due.rows && meta_txn_due(meta, now, TXN_DUE_BATCH, collect_due, &due) == MQ_OK) {
        for (size_t i = 0; i < due.n; i++) {
            int crc = check_due(e, &due.rows[i], now);
            if (crc != MQ_OK)
                MQ_WARN("transaction %s: check not scheduled: %s", due.rows[i].id,
                        mq_strerror(crc));
        }
        if (due.n == TXN_DUE_BATCH) e->next_due_ms = now; /* more right away */
    }
    free(due.rows);
    for (size_t i = 0; rc == MQ_OK && i < OVERLAY_BUCKETS; i++) {
        for (Row *r = e->buckets[i]; rc == MQ_OK && r; r = r->next) {
            rc = r->in_db ? MQ_ERR_EXISTS : meta_txn_put(meta, &r->t);
            if (rc == MQ_ERR_EXISTS) rc = meta_txn_set(meta, &r->t);
        }
    }
    for (size_t i = 0; rc == MQ_OK && i < e->n_logs; i++) {
        const LogLine *l = &e->logs[i];
        rc = meta_txn_log(meta, l->id, l->op, l->source, l->detail, l->at_ms);
    }
    if (rc == MQ_OK && now - e->last_purge_ms >= PURGE_INTERVAL_MS) {
        e->last_purge_ms = now;
        rc = meta_txn_purge(meta, now - e->cfg.keep_resolved_ms);
    }
    if (rc == MQ_OK && e->w_applied != e->saved_scan_from) {
        rc = meta_txn_set_scan_from(meta, e->w_applied);
        if (rc == MQ_OK) e->saved_scan_from = e->w_applied;
    }
    int end = meta_txn_end(meta, rc == MQ_OK);
    overlay_clear(e);
    if (rc != MQ_OK || end != MQ_OK) {
        MQ_ERROR("transaction state not saved (%s): replaying it from the log",
                 mq_strerror(rc != MQ_OK ? rc : end));
        drop_checks(e);
        recover_scan(e, e->saved_scan_from);
        return;
    }
    send_checks(e);
}

/* One batch: 'ops' (a list, may be empty; taken when the log's write
 * offset was 'w0'), applied to the rows in memory, answered (after the
 * flush of their commits' records under SYNC_FLUSH); then a flush when
 * one is due or 'force'. */
static void run_batch(TxnEngine *e, TxnOp *ops, uint64_t w0, int64_t now, bool force) {
    e->flush_upto = 0;
    /* The replay position of these ops: below every record they add. */
    uint64_t w_save = w0;
    for (TxnOp *op = ops; op; op = op->next)
        if (op->kind == TXN_OP_PREPARE && op->prep.half_off < w_save) w_save = op->prep.half_off;
    for (TxnOp *op = ops; op; op = op->next) apply(e, op, now);
    int durable = MQ_OK;
    if (e->cfg.sync_flush && e->flush_upto) durable = wait_durable(e, e->flush_upto);
    for (TxnOp *op = ops, *next; op; op = next) {
        next = op->next;
        if (op->kind == TXN_OP_PREPARE && op->rc != MQ_OK)
            MQ_WARN("transaction %s: not recorded (%s); it comes back from the log at the "
                    "next start", op->id, mq_strerror(op->rc));
        if (durable != MQ_OK && op->rc == MQ_OK && op->kind == TXN_OP_COMMIT)
            op->rc = durable == MQ_ERR_TIMEOUT ? MQ_ERR_TIMEOUT : durable;
        if (op->done)
            op->done(op);
        else
            free(op); /* the engine's own (prepare, verdict) */
    }
    e->w_applied = w_save;
    int64_t since = (mq_mono_ns() - e->last_flush_ns) / 1000000;
    if (force || e->n_rows >= TXN_OVERLAY_MAX || since >= IDLE_WAIT_MS ||
        ((e->n_rows || e->n_logs) && since >= TXN_FLUSH_MS) || now >= e->next_due_ms)
        flush(e, now);
}

/* ---- recovery -------------------------------------------------------------------*/

/* The transaction id of 'rec' into 'id' (META_TXN_ID_MAX + 1 bytes). */
static bool record_txn_id(const ClRecord *rec, char *id) {
    MqSlice v;
    if (!msg_prop_get(rec->props, TXN_PROP_ID, &v) || v.len == 0 || v.len > META_TXN_ID_MAX)
        return false;
    memcpy(id, v.ptr, v.len);
    id[v.len] = '\0';
    return true;
}

/* Makes the row of the half record 'rec' when it has none. */
static bool replay_half(TxnEngine *e, const ClRecord *rec, const char *id, MetaTxn *row) {
    if (meta_txn_get(e->cfg.meta, id, row) != MQ_ERR_NOTFOUND) return false;
    MqSlice topic, qid, url = {"", 0};
    char t[META_NAME_MAX + 1], q[16], u[META_TXN_URL_MAX + 1], mid[MSG_ID_LEN + 1];
    if (!msg_prop_get(rec->props, MSG_PROP_REAL_TOPIC, &topic) || topic.len == 0 ||
        topic.len > META_NAME_MAX || !msg_prop_get(rec->props, MSG_PROP_REAL_QID, &qid) ||
        qid.len == 0 || qid.len >= sizeof(q))
        return false;
    (void)msg_prop_get(rec->props, MSG_PROP_TXN_CHECK_URL, &url);
    if (url.len > META_TXN_URL_MAX) url.len = 0;
    memcpy(t, topic.ptr, topic.len);
    t[topic.len] = '\0';
    memcpy(q, qid.ptr, qid.len);
    q[qid.len] = '\0';
    memcpy(u, url.ptr, url.len);
    u[url.len] = '\0';
    msg_id_encode(rec->store_host, rec->phys_off, mid);
    new_row(e, row, id, t, (uint32_t)strtoul(q, NULL, 10), rec->phys_off, mid, u, rec->store_ts);
    if (meta_txn_put(e->cfg.meta, row) != MQ_OK) return false;
    atomic_fetch_add(&e->pending, 1);
    return true;
}

/* Brings the rows up to the log: from 'from' on, a half record without a
 * row makes one, a commit (a real-topic record with a transaction id)
 * marks its row COMMITTED, an op record marks it ROLLED_BACK. */
static void recover_scan(TxnEngine *e, uint64_t from) {
    CommitLog *cl = store_commitlog(e->cfg.store);
    uint64_t end = cl_write_offset(cl), off = from;
    MappedFile *ref = NULL;
    size_t made = 0, fixed = 0;
    if (meta_txn_begin(e->cfg.meta) != MQ_OK) return;
    int64_t now = now_ms(e);
    MetaTxn *row = malloc(sizeof(*row));
    while (row && off < end) {
        ClRecord rec;
        uint64_t next = 0;
        if (cl_next(cl, off, &rec, &next, &ref) != MQ_OK) break;
        char id[META_TXN_ID_MAX + 1];
        if (record_txn_id(&rec, id)) {
            if (name_is(rec.topic, TXN_HALF_TOPIC)) {
                made += replay_half(e, &rec, id, row);
            } else if (meta_txn_get(e->cfg.meta, id, row) == MQ_OK &&
                       row->state == META_TXN_PREPARED) {
                bool commit = !name_is(rec.topic, TXN_OP_TOPIC);
                resolve(e, row, commit ? META_TXN_COMMITTED : META_TXN_ROLLED_BACK, "recovery",
                        now);
                if (commit) {
                    row->real_off = (int64_t)rec.phys_off;
                    row->real_qoff = (int64_t)rec.queue_off;
                }
                if (meta_txn_set(e->cfg.meta, row) == MQ_OK) fixed++;
            }
        }
        off = next;
    }
    free(row);
    mf_unref(&ref);
    if (off >= end && meta_txn_set_scan_from(e->cfg.meta, end) == MQ_OK) e->saved_scan_from = end;
    if (meta_txn_end(e->cfg.meta, true) == MQ_OK && (made || fixed))
        MQ_INFO("transactions: replayed from the log: %zu prepared, %zu resolved", made, fixed);
}

/* ---- the thread ------------------------------------------------------------------*/

/* Takes up to TXN_BATCH_MAX queued ops and the log's write offset, both
 * under e->mu (see txn.h: every half record below it is queued). */
static TxnOp *take_queue(TxnEngine *e, uint64_t *w0) {
    pthread_mutex_lock(&e->mu);
    *w0 = cl_write_offset(store_commitlog(e->cfg.store));
    TxnOp *ops = e->head;
    size_t n = 0;
    TxnOp *last = NULL;
    for (TxnOp *op = ops; op && n < TXN_BATCH_MAX; op = op->next, n++) last = op;
    if (last) {
        e->head = last->next;
        if (!e->head) e->tail = NULL;
        last->next = NULL;
        /* Ops left for the next batch: their half records may lie below
         * w0; the lowest of them bounds it. */
        for (TxnOp *op = e->head; op; op = op->next)
            if (op->kind == TXN_OP_PREPARE && op->prep.half_off < *w0) *w0 = op->prep.half_off;
    }
    pthread_mutex_unlock(&e->mu);
    return last ? ops : NULL;
}

/* One pass of the thread: the queued ops, and a flush when due. */
static void run_pass(TxnEngine *e, int64_t now, bool force) {
    pthread_mutex_lock(&e->run_mu);
    uint64_t w0 = 0;
    TxnOp *ops = take_queue(e, &w0);
    run_batch(e, ops, w0, now < 0 ? now_ms(e) : now, force);
    pthread_mutex_unlock(&e->run_mu);
}

void txn_run_once(TxnEngine *e, int64_t now) {
    run_pass(e, now, true);
}

static void *txn_main(void *arg) {
    TxnEngine *e = arg;
    pthread_setname_np(pthread_self(), "petrel-txn"); /* for top -H and perf */
    for (;;) {
        pthread_mutex_lock(&e->mu);
        int64_t wait_ms = e->next_due_ms - now_ms(e);
        if (wait_ms > IDLE_WAIT_MS) wait_ms = IDLE_WAIT_MS;
        if (wait_ms > TXN_FLUSH_MS) wait_ms = TXN_FLUSH_MS; /* unsignalled prepares */
        if (!e->head && !e->stopping && wait_ms > 0) {
            struct timespec ts;
            mq_deadline_mono(&ts, wait_ms);
            while (!e->head && !e->stopping &&
                   pthread_cond_timedwait(&e->cv, &e->mu, &ts) != ETIMEDOUT) {
            }
        }
        bool stop = e->stopping && !e->head;
        pthread_mutex_unlock(&e->mu);
        if (stop) break;
        run_pass(e, -1, false);
    }
    return NULL;
}

/* Appends 'op' to the queue; caller holds e->mu.  'wake': someone waits
 * for it (a prepare's row only has to be there within TXN_FLUSH_MS, the
 * thread's longest sleep, or before the next op: no wake-up for it). */
static void enqueue(TxnEngine *e, TxnOp *op, bool wake) {
    op->next = NULL;
    if (e->tail)
        e->tail->next = op;
    else
        e->head = op;
    e->tail = op;
    if (wake) pthread_cond_signal(&e->cv);
}

int txn_prepare(TxnEngine *e, const ClMessage *half, TxnOp *op, ClAppendResult *res) {
    if (!e || !half || !op || !res || op->kind != TXN_OP_PREPARE || op->done) return MQ_ERR_INVAL;
    pthread_mutex_lock(&e->mu);
    if (e->stopping && e->running) {
        pthread_mutex_unlock(&e->mu);
        return MQ_ERR_STATE;
    }
    /* The append and the queueing under one lock: see txn.h. */
    /* Lazy: nobody reads the half topic's queue; the dispatcher gets to it
     * with the next append that wakes it. */
    int rc = store_put_lazy(e->cfg.store, half, 1, res, true);
    if (rc == MQ_OK) {
        op->prep.half_off = res->phys_off;
        char mid[MSG_ID_LEN + 1];
        msg_id_encode(e->cfg.store_host, res->phys_off, mid);
        snprintf(op->prep.msg_id, sizeof(op->prep.msg_id), "%s", mid);
        enqueue(e, op, false);
    }
    pthread_mutex_unlock(&e->mu);
    return rc;
}

int txn_submit(TxnEngine *e, TxnOp *op) {
    if (!e || !op || op->kind == TXN_OP_PREPARE) return MQ_ERR_INVAL;
    pthread_mutex_lock(&e->mu);
    if (e->stopping && e->running) {
        pthread_mutex_unlock(&e->mu);
        return MQ_ERR_STATE;
    }
    enqueue(e, op, true);
    pthread_mutex_unlock(&e->mu);
    return MQ_OK;
}

/* ---- open / close ------------------------------------------------------------------*/

bool txn_check_url_ok(TxnEngine *e, const char *url, char *why, size_t cap) {
    return txc_url_allowed(url, e->allowed_hosts, why, cap);
}

static void txn_free(TxnEngine *e) {
    txc_close(e->checker);
    overlay_clear(e);
    free(e->logs);
    free(e->props_buf);
    for (size_t i = 0; i < e->n_checks; i++) {
        free(e->checks[i].url);
        free(e->checks[i].body);
    }
    free(e->checks);
    free(e->allowed_hosts);
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
    pthread_mutex_destroy(&e->run_mu);
    free(e);
}

int txn_open(const TxnConfig *cfg, TxnEngine **out) {
    if (!cfg || !out || !cfg->store || !cfg->meta || !cfg->topics || !cfg->store_host ||
        cfg->check_max == 0 ||
        cfg->timeout_ms < 0 || cfg->check_interval_ms <= 0)
        return MQ_ERR_INVAL;
    TxnEngine *e = calloc(1, sizeof(*e));
    if (!e) return MQ_ERR_NOMEM;
    e->cfg = *cfg;
    e->allowed_hosts = strdup(cfg->check_allowed_hosts ? cfg->check_allowed_hosts : "");
    e->props_buf = malloc(CL_PROPS_MAX);
    e->cfg.check_allowed_hosts = e->allowed_hosts;
    pthread_mutex_init(&e->mu, NULL);
    pthread_mutex_init(&e->run_mu, NULL);
    mq_cond_init_mono(&e->cv);
    if (!e->allowed_hosts || !e->props_buf) {
        txn_free(e);
        return MQ_ERR_NOMEM;
    }
    TxcConfig cc = {
        .connect_timeout_ms = cfg->check_connect_timeout_ms,
        .total_timeout_ms = cfg->check_request_timeout_ms,
        .max_parallel = 32,
        .max_queued = 100000,
        .allowed_hosts = e->allowed_hosts,
        .done = on_verdict,
        .done_arg = e,
    };
    int rc = store_wait_dispatched(cfg->store, 60000);
    if (rc == MQ_OK) rc = txc_open(&cc, &e->checker);
    uint64_t from = 0;
    if (rc == MQ_OK && meta_txn_begin(cfg->meta) == MQ_OK) {
        rc = meta_txn_get_scan_from(cfg->meta, &from);
        uint64_t pending = 0;
        if (meta_txn_pending(cfg->meta, &pending) == MQ_OK) atomic_store(&e->pending, pending);
        meta_txn_end(cfg->meta, false);
        if (rc == MQ_OK) {
            e->saved_scan_from = from;
            recover_scan(e, from);
        } else if (rc == MQ_ERR_NOTFOUND) {
            /* A first start: nothing to replay, but a position from now
             * on, so that a crash before the first batch replays. */
            rc = meta_txn_begin(cfg->meta);
            if (rc == MQ_OK) {
                uint64_t w = cl_write_offset(store_commitlog(cfg->store));
                rc = meta_txn_set_scan_from(cfg->meta, w);
                int rc2 = meta_txn_end(cfg->meta, rc == MQ_OK);
                if (rc == MQ_OK) rc = rc2;
                e->saved_scan_from = w;
            }
        }
    }
    e->last_purge_ms = now_ms(e);
    e->next_due_ms = e->last_purge_ms;
    if (rc == MQ_OK && cfg->thread) {
        e->last_flush_ns = mq_mono_ns();
        int err = pthread_create(&e->thread, NULL, txn_main, e);
        if (err != 0) {
            MQ_ERROR("cannot start the transaction engine: %s", strerror(err));
            rc = MQ_ERR_IO;
        } else {
            e->running = true;
        }
    }
    if (rc != MQ_OK) {
        txn_free(e);
        return rc;
    }
    *out = e;
    return MQ_OK;
}

void txn_close(TxnEngine *e) {
    if (!e) return;
    if (e->running) {
        mq_stop_signal(&e->cv, &e->mu, &e->stopping);
        pthread_join(e->thread, NULL);
    }
    /* Verdicts that arrive while the client stops are queued and dropped
     * with it: their checks are counted and are sent again when due. */
    txc_close(e->checker);
    e->checker = NULL;
    pthread_mutex_lock(&e->mu);
    for (TxnOp *op = e->head, *next; op; op = next) {
        next = op->next;
        if (!op->done) {
            free(op); /* the engine's (a prepare's row comes back by replay) */
        } else {
            op->rc = MQ_ERR_STATE;
            op->done(op);
        }
    }
    e->head = e->tail = NULL;
    pthread_mutex_unlock(&e->mu);
    flush(e, now_ms(e)); /* the overlay and the replay position (checks due now are
                          * counted and dropped: sent again when next due) */
    txn_free(e);
}

void txn_stats(TxnEngine *e, TxnStats *out) {
    memset(out, 0, sizeof(*out));
    if (!e) return;
    out->pending = atomic_load(&e->pending);
    out->committed = atomic_load(&e->committed);
    out->rolled_back = atomic_load(&e->rolled_back);
    out->checks = atomic_load(&e->sent);
}
