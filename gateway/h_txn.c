/*
 * h_txn.c - transactional messages over HTTP (API.md "Transactional
 * messages"; core/txn.h has the model).
 *
 *   POST /v1/topics/{topic}/transactions        store a half message
 *   POST /v1/transactions/{transactionId}/commit
 *   POST /v1/transactions/{transactionId}/rollback
 *   GET  /v1/transactions/{transactionId}       its state
 *
 * The worker checks the request, appends the half record (a memory copy:
 * the commit log never waits for the disk on append) and hands a TxnOp to
 * the transaction engine's thread, which does the sqlite work and, under
 * SYNC_FLUSH, waits for the flush; the connection is suspended meanwhile
 * and answered from the op by the resumed call.  The transaction id is the
 * message's unique id (RocketMQ's transactionId is its UNIQ_KEY too).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "broker.h"
#include "handlers.h"
#include "http.h"
#include "jw.h"
#include "produce_req.h"
#include "req.h"

/* A commit, rollback or read: the op and the request it answers. */
typedef struct TxnCtx {
    TxnOp op;
    GwRequest *req;
} TxnCtx;

/* A transactional produce waiting for its flush (SYNC_FLUSH). */
typedef struct PrepCtx {
    GwRequest *req;
    ClFlushWaiter waiter;
    atomic_int flush_status;
    char id[META_TXN_ID_MAX + 1];
    char msg_id[MSG_ID_LEN + 1];
    uint32_t queue_id;  /* the real queue */
    uint64_t half_qoff; /* the half record's queue offset */
} PrepCtx;

static void on_done(TxnOp *op) {
    TxnCtx *c = op->done_arg;
    gw_resume(c->req);
}

/* Suspends 'r' and hands the op of 'c' (r->ctx, freed by 'ctx_free') to
 * the engine; 'resumed' answers. */
static enum MHD_Result submit(GwRequest *r, TxnCtx *c, RtHandler resumed,
                              void (*ctx_free)(void *)) {
    c->req = r;
    c->op.done = on_done;
    c->op.done_arg = c;
    r->ctx = c;
    r->ctx_free = ctx_free;
    r->resume = resumed;
    gw_suspend(r);
    if (txn_submit(broker_txn(gw_broker(r)), &c->op) != MQ_OK) {
        c->op.rc = MQ_ERR_STATE; /* closing */
        gw_resume(r);
    }
    return MHD_YES;
}

/* The engine's failures that are not about the transaction itself. */
static enum MHD_Result reply_op_err(GwRequest *r, const TxnOp *op) {
    if (op->rc == MQ_ERR_NOTFOUND) {
        return gw_reply_error(r, 404, "TRANSACTION_NOT_FOUND", "no transaction '%s' on this "
                              "broker (unknown, or resolved more than "
                              "transactionResolvedKeepTime ago)", op->id);
    }
    if (op->rc == MQ_ERR_STATE && op->why) {
        return gw_reply_error(r, 409, "TRANSACTION_CONFLICT", "transaction '%s': %s", op->id,
                              op->why);
    }
    if (op->rc == MQ_ERR_STATE) {
        return gw_reply_error(r, 503, "SHUTTING_DOWN", "the broker is shutting down");
    }
    return gw_reply_err(r, op->rc, "transaction");
}

/* ---- produce --------------------------------------------------------------*/

/* Appends the NUL-terminated 's' as a JSON string. */
static void put_str(JsonW *w, const char *s) {
    jw_str(w, s, strlen(s));
}

/* The produce answer; 'flush_status' as for a plain produce. */
static enum MHD_Result answer_prepared(GwRequest *r, const PrepCtx *c, int flush_status) {
    if (flush_status != MQ_OK && flush_status != MQ_ERR_TIMEOUT) {
        return gw_reply_error(r, 503, "FLUSH_FAILED", "the half message was written but the "
                              "disk flush failed (%s); the store is now read-only",
                              mq_strerror(flush_status));
    }
    JsonW w;
    jw_init(&w, 256);
    jw_lit(&w, "{\"status\":");
    put_str(&w, flush_status == MQ_OK ? "SEND_OK" : "FLUSH_DISK_TIMEOUT");
    jw_lit(&w, ",\"msgId\":");
    put_str(&w, c->msg_id);
    jw_lit(&w, ",\"queueId\":");
    jw_int(&w, c->queue_id);
    jw_lit(&w, ",\"queueOffset\":");
    jw_int(&w, (int64_t)c->half_qoff);
    jw_lit(&w, ",\"transactionId\":");
    put_str(&w, c->id);
    jw_lit(&w, ",\"uniqueId\":");
    put_str(&w, c->id);
    jw_lit(&w, "}");
    size_t len = 0;
    char *text = jw_take(&w, &len);
    if (!text) return gw_reply_err(r, MQ_ERR_NOMEM, "answer");
    return gw_reply_json_text(r, 200, text, len);
}

static void on_flushed(void *arg, int status) {
    PrepCtx *c = arg;
    atomic_store(&c->flush_status, status);
    gw_resume(c->req);
}

static enum MHD_Result prepared_resumed(GwRequest *r, const RtMatch *m) {
    (void)m;
    PrepCtx *c = r->ctx;
    return answer_prepared(r, c, atomic_load(&c->flush_status));
}

/* Takes "checkUrl" out of 'root' into 'out' ("" when absent), checked
 * against the broker's policy; refuses the fields a transactional message
 * cannot have. */
static bool take_txn_fields(TxnEngine *e, json_t *root, char *out, size_t cap, GwProblem *p) {
    static const char *const refused[] = {"messages", "delayLevel", "deliverAt", "delayMs"};
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        if (json_object_get(root, refused[i])) {
            return gw_fail(p, 400, "INVALID_FIELD", "%s: a transactional message is one "
                           "message, sent now (no batch, no delay)", refused[i]);
        }
    }
    out[0] = '\0';
    json_t *u = json_object_get(root, "checkUrl");
    if (!u) return true;
    if (!json_is_string(u) || json_string_length(u) == 0 || json_string_length(u) >= cap) {
        return gw_fail(p, 400, "INVALID_FIELD", "checkUrl must be an http or https URL of at "
                       "most %zu bytes", cap - 1);
    }
    char why[160];
    if (!txn_check_url_ok(e, json_string_value(u), why, sizeof(why))) {
        return gw_fail(p, 400, "INVALID_FIELD", "checkUrl: %s", why);
    }
    snprintf(out, cap, "%s", json_string_value(u));
    json_object_del(root, "checkUrl");
    return true;
}

/* A decoded message that a transactional produce cannot take (the fast
 * path decodes these fields too). */
static bool refuse_fast(const ProduceReq *req) {
    const ProduceMsg *pm = &req->msgs[0];
    return req->batch || req->count != 1 || pm->has_delay_level || pm->has_delay_ms ||
           pm->has_deliver_at;
}

enum MHD_Result h_txn_produce(GwRequest *r, const RtMatch *m) {
    Broker *b = gw_broker(r);
    TxnEngine *e = broker_txn(b);
    const Config *conf = broker_config(b);
    const char *topic = rt_param(m, "topic");
    enum MHD_Result ret;
    if (!h_topic_name_ok(r, topic, &ret)) return ret;
    GwProblem prob = {0};
    json_t *root = NULL;
    ProduceReq req = {0};
    TxnOp *op = malloc(sizeof(*op)); /* the engine's once queued */
    PrepCtx *c = calloc(1, sizeof(*c));
    uint8_t *wbuf = NULL;
    if (!op || !c) {
        ret = gw_reply_err(r, MQ_ERR_NOMEM, "transaction");
        goto out;
    }
    txn_op_init(op, TXN_OP_PREPARE, NULL);
    const char *ct = gw_header(r, MHD_HTTP_HEADER_CONTENT_TYPE);
    bool json_ct = ct && strncasecmp(ct, "application/json", 16) == 0 &&
                   (ct[16] == '\0' || ct[16] == ';' || ct[16] == ' ');
    /* The plain form (no checkUrl) decodes without a jansson tree, as a
     * produce does; anything else, and every error, takes the tree. */
    if (!(json_ct && pr_decode_json_fast(r->body, r->body_len, (size_t)conf->max_message_size,
                                         &req) && !refuse_fast(&req))) {
        pr_req_clear(&req);
        memset(&req, 0, sizeof(req));
        if (!gw_json_object(r, true, &root, &prob) ||
            !take_txn_fields(e, root, op->prep.check_url, sizeof(op->prep.check_url), &prob) ||
            !pr_decode_json(root, (size_t)conf->max_message_size, &req, &prob)) {
            ret = gw_reply_problem(r, &prob);
            goto out;
        }
    }
    if (!pr_encode_props(&req.msgs[0], broker_store_host(b), &prob)) {
        ret = gw_reply_problem(r, &prob);
        goto out;
    }
    MetaTopic t;
    uint8_t born[8];
    if (!h_message_produce_topic(r, topic, h_txn_produce, &t, born, &ret)) goto out;
    ProduceMsg *pm = &req.msgs[0];
    uint32_t queue = 0;
    if (topic_select_queue(broker_topics(b), &t, pm->queue_id, pm->sharding_key, &queue) !=
        MQ_OK) {
        ret = gw_reply_error(r, 400, "INVALID_FIELD", "queueId %lld is out of range: topic "
                             "'%s' has %u write queues", (long long)pm->queue_id, topic,
                             t.write_queues);
        goto out;
    }
    ClMessage real = {.topic = mq_slice(topic, strlen(topic)),
                      .queue_id = queue,
                      .born_ts = mq_now_ms(),
                      .body = pm->body,
                      .props = mq_slice(pm->props_buf, pm->props_len)};
    memcpy(real.born_host, born, 8);
    ClMessage half;
    size_t wcap = pm->props_len + TXN_WRAP_EXTRA;
    wbuf = malloc(wcap);
    if (!wbuf) {
        ret = gw_reply_err(r, MQ_ERR_NOMEM, "transaction");
        goto out;
    }
    if (txn_wrap_half(&real, pm->uniq, op->prep.check_url, wbuf, wcap, &half) != MQ_OK) {
        ret = gw_reply_error(r, 400, "INVALID_FIELD", "properties too large for a "
                             "transactional message");
        goto out;
    }
    snprintf(op->id, sizeof(op->id), "%s", pm->uniq);
    snprintf(op->prep.topic, sizeof(op->prep.topic), "%s", topic);
    op->prep.queue_id = queue;
    ClAppendResult res;
    int rc = txn_prepare(e, &half, op, &res);
    if (rc != MQ_OK) {
        ret = rc == MQ_ERR_STATE
                  ? gw_reply_error(r, 503, "SHUTTING_DOWN", "the broker is shutting down")
                  : gw_reply_err(r, rc, "append");
        goto out;
    }
    op = NULL; /* the engine's now (it may be freed already) */
    snprintf(c->id, sizeof(c->id), "%s", pm->uniq);
    msg_id_encode(broker_store_host(b), res.phys_off, c->msg_id);
    c->queue_id = queue;
    c->half_qoff = res.queue_off;
    if (broker_config(b)->flush_disk_type != CONF_SYNC_FLUSH) {
        ret = answer_prepared(r, c, MQ_OK);
        goto out;
    }
    c->req = r;
    atomic_init(&c->flush_status, MQ_OK);
    r->ctx = c;
    r->ctx_free = free;
    r->resume = prepared_resumed;
    gw_suspend(r); /* before registering: the callback may run at once */
    rc = store_wait_flush(broker_store(b), &c->waiter, res.phys_off + res.size, on_flushed, c);
    if (rc != 1) {
        atomic_store(&c->flush_status, rc == 0 ? MQ_OK : rc);
        gw_resume(r);
    }
    c = NULL; /* r->ctx */
    ret = MHD_YES;
out:
    free(op);
    free(c);
    free(wbuf);
    pr_req_clear(&req);
    json_decref(root);
    return ret;
}

/* ---- commit / rollback / get ------------------------------------------------*/

/* Checks {transactionId} and an empty body (or {}); false when answered. */
static bool txn_request(GwRequest *r, const RtMatch *m, TxnCtx **out, enum MHD_Result *ret) {
    const char *id = rt_param(m, "transactionId");
    size_t n = strlen(id);
    bool ok = n > 0 && n <= META_TXN_ID_MAX;
    for (size_t i = 0; ok && i < n; i++) {
        char ch = id[i];
        ok = (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
             ch == '-' || ch == '_';
    }
    if (!ok) {
        *ret = gw_reply_error(r, 400, "INVALID_FIELD", "'%.64s' is not a transaction id "
                              "(1-%d letters, digits, '-' or '_')", id, META_TXN_ID_MAX);
        return false;
    }
    if (r->body_len > 0) {
        static const char *const none[] = {NULL};
        json_t *root = NULL, *unused[1];
        GwProblem prob = {0};
        if (!gw_json_object(r, true, &root, &prob) ||
            !gw_json_fields(root, none, unused, "", &prob)) {
            json_decref(root);
            *ret = gw_reply_problem(r, &prob);
            return false;
        }
        json_decref(root);
    }
    TxnCtx *c = malloc(sizeof(*c));
    if (!c) {
        *ret = gw_reply_err(r, MQ_ERR_NOMEM, "transaction");
        return false;
    }
    txn_op_init(&c->op, TXN_OP_GET, id);
    *out = c;
    return true;
}

/* A string field, or null when empty. */
static void put_opt(JsonW *w, const char *s) {
    if (*s)
        put_str(w, s);
    else
        jw_lit(w, "null");
}

/* Writes the transaction 't' as a JSON object (with "status" when not
 * NULL); 'host' is the broker's store host (message ids). */
static void put_row(JsonW *w, const MetaTxn *t, const char *status, const uint8_t *host) {
    jw_lit(w, "{\"transactionId\":");
    put_str(w, t->id);
    jw_lit(w, ",\"state\":");
    put_str(w, txn_state_name(t->state));
    if (status) {
        jw_lit(w, ",\"status\":");
        put_str(w, status);
    }
    jw_lit(w, ",\"topic\":");
    put_str(w, t->topic);
    jw_lit(w, ",\"queueId\":");
    jw_int(w, t->queue_id);
    jw_lit(w, ",\"halfMsgId\":");
    put_str(w, t->msg_id);
    jw_lit(w, ",\"msgId\":");
    if (t->state == META_TXN_COMMITTED && t->real_off >= 0) {
        char mid[MSG_ID_LEN + 1];
        msg_id_encode(host, (uint64_t)t->real_off, mid);
        put_str(w, mid);
        jw_lit(w, ",\"queueOffset\":");
        jw_int(w, t->real_qoff);
    } else {
        jw_lit(w, "null,\"queueOffset\":null");
    }
    jw_lit(w, ",\"checkUrl\":");
    put_opt(w, t->check_url);
    jw_lit(w, ",\"checkTimes\":");
    jw_int(w, t->check_times);
    jw_lit(w, ",\"createdAt\":");
    jw_int(w, t->created_ms);
    jw_lit(w, ",\"updatedAt\":");
    jw_int(w, t->updated_ms);
    jw_lit(w, ",\"nextCheckAt\":");
    if (t->state == META_TXN_PREPARED)
        jw_int(w, t->next_check_ms);
    else
        jw_lit(w, "null");
    jw_lit(w, ",\"resolvedBy\":");
    put_opt(w, t->resolved_by);
    jw_lit(w, "}");
}

static enum MHD_Result reply_text(GwRequest *r, JsonW *w) {
    size_t len = 0;
    char *text = jw_take(w, &len);
    if (!text) return gw_reply_err(r, MQ_ERR_NOMEM, "answer");
    return gw_reply_json_text(r, 200, text, len);
}

/* Answers the transaction 't' (with "status" when not NULL). */
static enum MHD_Result reply_row(GwRequest *r, const MetaTxn *t, const char *status) {
    JsonW w;
    jw_init(&w, 512);
    put_row(&w, t, status, broker_store_host(gw_broker(r)));
    return reply_text(r, &w);
}

static enum MHD_Result end_resumed(GwRequest *r, const RtMatch *m) {
    (void)m;
    TxnCtx *c = r->ctx;
    const TxnOp *op = &c->op;
    if (op->rc == MQ_ERR_TIMEOUT) return reply_row(r, &op->row, "FLUSH_DISK_TIMEOUT");
    if (op->rc != MQ_OK) return reply_op_err(r, op);
    return reply_row(r, &op->row, op->kind == TXN_OP_GET ? NULL : "OK");
}

static enum MHD_Result start_op(GwRequest *r, const RtMatch *m, TxnOpKind kind) {
    TxnCtx *c = NULL;
    enum MHD_Result ret;
    if (!txn_request(r, m, &c, &ret)) return ret;
    c->op.kind = kind;
    return submit(r, c, end_resumed, free);
}

enum MHD_Result h_txn_commit(GwRequest *r, const RtMatch *m) {
    return start_op(r, m, TXN_OP_COMMIT);
}

enum MHD_Result h_txn_rollback(GwRequest *r, const RtMatch *m) {
    return start_op(r, m, TXN_OP_ROLLBACK);
}

enum MHD_Result h_txn_get(GwRequest *r, const RtMatch *m) {
    return start_op(r, m, TXN_OP_GET);
}

/* ---- list ------------------------------------------------------------------*/

static void list_ctx_free(void *p) {
    TxnCtx *c = p;
    free(c->op.list_rows);
    free(c);
}

static enum MHD_Result list_resumed(GwRequest *r, const RtMatch *m) {
    (void)m;
    TxnCtx *c = r->ctx;
    const TxnOp *op = &c->op;
    if (op->rc != MQ_OK) return reply_op_err(r, op);
    const uint8_t *host = broker_store_host(gw_broker(r));
    JsonW w;
    jw_init(&w, 64 + op->list_n * 400);
    jw_lit(&w, "{\"transactions\":[");
    for (size_t i = 0; i < op->list_n; i++) {
        if (i) jw_lit(&w, ",");
        put_row(&w, &op->list_rows[i], NULL, host);
    }
    jw_lit(&w, "],\"pending\":");
    jw_int(&w, (int64_t)op->list_pending);
    jw_lit(&w, "}");
    return reply_text(r, &w);
}

/* GET /v1/transactions?limit=N: the PREPARED transactions, the next
 * check due first (for operators and the console). */
enum MHD_Result h_txn_list(GwRequest *r, const RtMatch *m) {
    (void)m;
    static const char *const known[] = {"limit", NULL};
    enum MHD_Result ret;
    if (!gw_query_known(r, known, &ret)) return ret;
    GwProblem prob = {0};
    int64_t limit = 100;
    if (!gw_query_int(r, "limit", 1, TXN_LIST_MAX, &limit, &prob)) return gw_reply_problem(r, &prob);
    TxnCtx *c = malloc(sizeof(*c));
    if (!c) return gw_reply_err(r, MQ_ERR_NOMEM, "transactions");
    txn_op_init(&c->op, TXN_OP_LIST, NULL);
    c->op.list_limit = (size_t)limit;
    return submit(r, c, list_resumed, list_ctx_free);
}
