/*
 * h_message.c - messages: produce (POST /v1/topics/{topic}/messages, one
 * JSON message, a JSON batch or a raw body), get by offset message id
 * (GET /v1/messages/{msgId}) and classic pull
 * (GET /v1/topics/{topic}/queues/{queueId}/messages) with long polling
 * ('waitMs': suspended, resumed by the broker's long-polling registry).
 *
 * Produce decodes and checks every message (produce_req.c) before anything
 * is stored, then appends them with one store_put.  Under SYNC_FLUSH the
 * connection is suspended and resumed by the commit log's flush callback
 * (flusher or completer thread); no MHD worker waits for the disk.  A
 * topic that must be auto-created is created by a job (jobs.h: a sqlite
 * write), after which the produce runs again from the top.
 */
#define _GNU_SOURCE
#include "handlers.h"
#include "produce_req.h"
#include "req.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "broker.h"
#include "config.h"
#include "json.h"
#include "jw.h"
#include "longpoll.h"
#include "msg.h"
#include "topic.h"

#define PULL_MAX 1000      /* largest 'max' of a pull */
#define PULL_DEFAULT 32    /* 'max' of a pull by default */
#define PULL_SCAN 16384    /* queue entries one filtered pull looks at, at most */
#define PULL_TAGS_MAX 32   /* tags in a pull's 'tags' expression */
#define PULL_WAIT_MAX_MS 30000 /* longest long poll ('waitMs') */
#define AUTO_QUEUES 4      /* queues of an auto-created topic */
/* Room kept at the start of a pull answer for its head,
 * {"status":"OFFSET_TOO_SMALL","messages":[ being the longest. */
#define PULL_HEAD_ROOM "                                                "

/* ======================================================================
 * Produce
 * ====================================================================== */

/* Produce state kept across suspensions (GwRequest.ctx): the auto-create
 * job, then a SYNC_FLUSH wait. */
/* What a produce answers per message (API.md SendResult), kept until the
 * answer is written: under SYNC_FLUSH only the flush decides its status. */
typedef struct SendResult {
    char msg_id[MSG_ID_LEN + 1];
    char uniq[MSG_ID_LEN + 1];
    uint32_t queue_id;
    uint64_t queue_off;
} SendResult;

typedef struct ProduceAnswer {
    SendResult *results; /* malloc'd, 'count' */
    size_t count;
    bool batch;          /* {"results":[...]} rather than one SendResult */
} ProduceAnswer;

typedef struct ProduceCtx {
    TopicRegistry *reg;            /* auto-create: the registry (borrowed) */
    char topic[META_NAME_MAX + 1]; /* auto-create: the topic, checked */
    int create_rc;                 /* auto-create: the job's topic_for_produce result */
    MetaTopic created;             /* auto-create: the topic it made or found */
    ClFlushWaiter waiter;          /* registered with the commit log; must live until
                                    * its callback has run (freed only at completion,
                                    * which follows the resume the callback does) */
    ProduceAnswer answer;          /* the 200 body, written after the flush */
    atomic_int flush_status;       /* MQ_OK, MQ_ERR_TIMEOUT, MQ_ERR_IO, MQ_ERR_RDONLY */
    GwRequest *req;                /* back pointer for the callback */
} ProduceCtx;

static void produce_ctx_free(void *p) {
    ProduceCtx *c = p;
    free(c->answer.results);
    free(c);
}

/* The media type of the request: 'J' JSON (also when absent), 'R' raw,
 * 0 anything else. */
static char body_kind(const GwRequest *r) {
    const char *ct = gw_header(r, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (!ct) return 'J';
    while (*ct == ' ') ct++;
    size_t n = strcspn(ct, ";");
    while (n > 0 && ct[n - 1] == ' ') n--;
    if (n == 16 && strncasecmp(ct, "application/json", n) == 0) return 'J';
    if (n == 24 && strncasecmp(ct, "application/octet-stream", n) == 0) return 'R';
    if (n == 10 && strncasecmp(ct, "text/plain", n) == 0) return 'R';
    return 0;
}

/* Writes the answer text with 'status' (SEND_OK, FLUSH_DISK_TIMEOUT) in
 * every result; NULL when out of memory. */
static char *render_answer(const ProduceAnswer *a, const char *status, size_t *len) {
    JsonW w;
    jw_init(&w, a->batch ? 32 + a->count * 180 : 192);
    if (a->batch) jw_lit(&w, "{\"results\":[");
    for (size_t i = 0; i < a->count; i++) {
        const SendResult *sr = &a->results[i];
        if (i > 0) jw_lit(&w, ",");
        jw_lit(&w, "{\"status\":\"");
        jw_raw(&w, status, strlen(status));
        jw_lit(&w, "\",\"msgId\":\"");
        jw_raw(&w, sr->msg_id, MSG_ID_LEN);
        jw_lit(&w, "\",\"queueId\":");
        jw_int(&w, sr->queue_id);
        jw_lit(&w, ",\"queueOffset\":");
        jw_int(&w, (int64_t)sr->queue_off);
        jw_lit(&w, ",\"transactionId\":null,\"uniqueId\":\"");
        jw_raw(&w, sr->uniq, strlen(sr->uniq));
        jw_lit(&w, "\"}");
    }
    if (a->batch) jw_lit(&w, "]}");
    return jw_take(&w, len);
}

#define IDEM_HEADER "Idempotency-Key"

/* The produce's Idempotency-Key, when it claimed one (idem.h): the claim
 * is settled exactly once, by answer_produce or by the handler's error
 * exit. */
typedef struct IdemRef {
    IdemTable *table;
    const char *topic; /* borrowed from the request */
    const char *key;
} IdemRef;

/* Answers a produce after its flush (or at once under ASYNC_FLUSH), and
 * remembers the answer under its Idempotency-Key ('idem' NULL: none). */
static enum MHD_Result answer_produce(GwRequest *r, const ProduceAnswer *answer,
                                      int flush_status, const IdemRef *idem) {
    const char *status = "SEND_OK";
    if (flush_status == MQ_ERR_TIMEOUT) {
        status = "FLUSH_DISK_TIMEOUT";
    } else if (flush_status != MQ_OK) {
        if (idem) idem_abort(idem->table, idem->topic, idem->key);
        return gw_reply_error(r, 503, "FLUSH_FAILED", "the message was written but the disk "
                              "flush failed (%s); the store is now read-only",
                              mq_strerror(flush_status));
    }
    size_t len = 0;
    char *buf = render_answer(answer, status, &len);
    if (!buf) {
        if (idem) idem_abort(idem->table, idem->topic, idem->key);
        return gw_reply_err(r, MQ_ERR_NOMEM, "produce answer");
    }
    if (idem) idem_finish(idem->table, idem->topic, idem->key, 200, buf, len);
    return gw_reply_json_text(r, 200, buf, len);
}

/* The claim of request 'r' on 'topic', or NULL when it sent no key (a
 * request that sent one has claimed it by the time it is answered). */
static const IdemRef *idem_ref(GwRequest *r, const char *topic, IdemRef *buf) {
    const char *key = gw_header(r, IDEM_HEADER);
    if (!key) return NULL;
    *buf = (IdemRef){broker_idempotency(gw_broker(r)), topic, key};
    return buf;
}

/* Replays a remembered answer, marked with Idempotency-Replayed. */
static enum MHD_Result reply_replayed(GwRequest *r, IdemAnswer *a) {
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(a->len, a->body, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(a->body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    MHD_add_response_header(resp, "Idempotency-Replayed", "true");
    return gw_reply(r, a->status, resp);
}

/* Checks the Idempotency-Key of a produce on 'topic', if any.  Returns
 * true when the request goes on ('*claimed' says whether it holds a
 * claim to settle); false when it has been answered ('*ret'): a replay,
 * a 409 while the first is in progress, or a 400 for a malformed key. */
static bool idem_check(GwRequest *r, const char *topic, bool *claimed, enum MHD_Result *ret) {
    *claimed = false;
    const char *key = gw_header(r, IDEM_HEADER);
    if (!key) return true;
    if (!idem_key_valid(key)) {
        *ret = gw_reply_error(r, 400, "INVALID_HEADER", "%s must be 1 to %d printable ASCII "
                              "characters without spaces", IDEM_HEADER, IDEM_KEY_MAX);
        return false;
    }
    IdemAnswer a = {0};
    switch (idem_begin(broker_idempotency(gw_broker(r)), topic, key, mq_now_ms(), &a)) {
    case IDEM_NEW:
        *claimed = true;
        return true;
    case IDEM_DONE:
        *ret = reply_replayed(r, &a);
        return false;
    case IDEM_PENDING:
        break;
    }
    *ret = gw_reply_error(r, 409, "IDEMPOTENCY_KEY_IN_USE", "a request with %s '%s' on topic "
                          "'%s' is still in progress; retry later", IDEM_HEADER, key, topic);
    return false;
}

/* Flush callback: flusher or completer thread.  Touches nothing after
 * gw_resume (the request may complete and be freed at once). */
static void on_flushed(void *arg, int status) {
    ProduceCtx *c = arg;
    atomic_store(&c->flush_status, status);
    gw_resume(c->req);
}

/* The resumed call, on the connection's worker. */
static enum MHD_Result produce_resumed(GwRequest *r, const RtMatch *m) {
    (void)m;
    ProduceCtx *c = r->ctx;
    IdemRef buf;
    return answer_produce(r, &c->answer, atomic_load(&c->flush_status),
                          idem_ref(r, rt_param(&r->match, "topic"), &buf));
}

/* born_host: the client's IPv4 and port (zeros for other families). */
static void client_host(const GwRequest *r, uint8_t out[8]) {
    memset(out, 0, 8);
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (!ci || !ci->client_addr || ci->client_addr->sa_family != AF_INET) return;
    const struct sockaddr_in *sin = (const struct sockaddr_in *)ci->client_addr;
    memcpy(out, &sin->sin_addr.s_addr, 4);
    mq_put_u32(out + 4, ntohs(sin->sin_port));
}

/* Maps a topic_for_produce / topic_get failure. */
static enum MHD_Result reply_topic_err(GwRequest *r, int rc, const char *topic, bool produce) {
    if (rc == MQ_ERR_NOTFOUND) {
        return gw_reply_error(r, 404, "TOPIC_NOT_FOUND", "topic '%s' does not exist%s", topic,
                              produce ? " (autoCreateTopicEnable is off)" : "");
    }
    if (rc == MQ_ERR_STATE) {
        return gw_reply_error(r, 403, produce ? "TOPIC_NOT_WRITABLE" : "TOPIC_NOT_READABLE",
                              "topic '%s' is not %s (perm)", topic,
                              produce ? "writable" : "readable");
    }
    if (rc == MQ_ERR_INVAL) {
        return gw_reply_error(r, 400, "INVALID_NAME", "topic '%s' cannot be created", topic);
    }
    return gw_reply_err(r, rc, topic);
}

/* The auto-create job: job thread.  The sqlite write happens here, under
 * the registry's write_mu; an existing topic (made meanwhile by another
 * request) is left alone and returned. */
static void create_job(void *arg) {
    ProduceCtx *c = arg;
    c->create_rc = topic_for_produce(c->reg, c->topic, true, AUTO_QUEUES, &c->created);
}

/* Hands the creation of 'topic' to the job runner; the resumed call is
 * 'again' (h_message_produce or another produce handler: with r->ctx set,
 * it does not offload twice).  The caller holds no Idempotency-Key claim. */
static enum MHD_Result offload_create(GwRequest *r, const char *topic, RtHandler again) {
    ProduceCtx *c = calloc(1, sizeof(*c));
    if (!c) return gw_reply_err(r, MQ_ERR_NOMEM, "produce");
    c->reg = broker_topics(gw_broker(r));
    snprintf(c->topic, sizeof(c->topic), "%s", topic); /* checked: at most MSG_NAME_MAX */
    c->req = r;
    atomic_init(&c->flush_status, MQ_OK);
    r->ctx = c;
    r->ctx_free = produce_ctx_free;
    return gw_offload(r, create_job, again);
}

bool h_message_produce_topic(GwRequest *r, const char *topic, RtHandler again, MetaTopic *t,
                             uint8_t born_host[8], enum MHD_Result *ret) {
    Broker *b = gw_broker(r);
    int rc = topic_for_produce(broker_topics(b), topic, false, AUTO_QUEUES, t);
    if (rc == MQ_ERR_NOTFOUND && broker_config(b)->auto_create_topic) {
        ProduceCtx *pc = r->ctx;
        if (!pc) {
            *ret = offload_create(r, topic, again);
            return false;
        }
        rc = pc->create_rc; /* the resumed call: what the job made */
        *t = pc->created;
        produce_ctx_free(r->ctx); /* the resumed handler sets its own context */
        r->ctx = NULL;
        r->ctx_free = NULL;
    }
    if (rc != MQ_OK) {
        *ret = reply_topic_err(r, rc, topic, true);
        return false;
    }
    client_host(r, born_host);
    return true;
}

/* Raw form: the body is the message; the rest comes from the query. */
static bool decode_raw(GwRequest *r, size_t max_body, ProduceReq *out, GwProblem *p) {
    static const char *const known[] = {"tags", "keys", "shardingKey", "queueId",
                                        "delayLevel", "delayMs", "deliverAt", NULL};
    const char *v[7];
    const char *bad = gw_query_collect(r, known, v);
    if (bad) return gw_fail(p, 400, "UNKNOWN_FIELD", "unknown query parameter '%.64s'", bad);
    ProduceRawParams q = {.tags = v[0],
                          .keys = v[1],
                          .sharding_key = v[2],
                          .queue_id = v[3],
                          .delay_level = v[4],
                          .delay_ms = v[5],
                          .deliver_at = v[6]};
    return pr_decode_raw(&q, r->body, r->body_len, max_body, out, p);
}

/* POST /v1/topics/{topic}/messages.  Also the resumed call after an
 * auto-create job (r->ctx is then its ProduceCtx): the request is decoded
 * and checked again (CPU only, no I/O) and goes on with the topic made. */
enum MHD_Result h_message_produce(GwRequest *r, const RtMatch *m) {
    Broker *b = gw_broker(r);
    const Config *conf = broker_config(b);
    const char *topic = rt_param(m, "topic");
    enum MHD_Result ret;
    if (!h_topic_name_ok(r, topic, &ret)) return ret;
    char kind = body_kind(r);
    if (!kind) {
        return gw_reply_error(r, 415, NULL, "Content-Type must be application/json, "
                              "application/octet-stream or text/plain");
    }

    size_t max_body = (size_t)conf->max_message_size;
    GwProblem prob = {0};
    json_t *root = NULL;
    ProduceReq req = {0};
    if (kind == 'J' && pr_decode_json_fast(r->body, r->body_len, max_body, &req)) {
        /* plain request: decoded without a jansson tree */
    } else if (kind == 'J') {
        if (!gw_json_object(r, false, &root, &prob)) return gw_reply_problem(r, &prob);
        if (!pr_decode_json(root, max_body, &req, &prob)) {
            json_decref(root);
            return gw_reply_problem(r, &prob);
        }
    } else {
        if (!decode_raw(r, max_body, &req, &prob)) return gw_reply_problem(r, &prob);
    }

    size_t count = req.count;
    bool batch = req.batch;
    ClMessage *cms = calloc(count, sizeof(*cms));
    ClAppendResult *res = calloc(count, sizeof(*res));
    ProduceCtx *ctx = NULL;
    ProduceAnswer answer = {NULL, count, batch};
    uint8_t **wrap_bufs = NULL; /* property blocks of delayed messages and timers */
    uint32_t *real_queue = NULL; /* their real queues */
    bool claimed = false; /* holds an Idempotency-Key claim */
    bool settled = false; /* the claim is answer_produce's to settle */
    IdemRef idem_buf;
    if (!cms || !res) {
        ret = gw_reply_err(r, MQ_ERR_NOMEM, "produce");
        goto out;
    }
    /* Every message is checked (properties too) before the topic may be
     * auto-created: a rejected request leaves nothing behind. */
    const uint8_t *ip = broker_store_host(b);
    size_t n_levels = 0;
    broker_delay_levels(b, &n_levels);
    int64_t timer_max_ms = conf->timer_max_delay_sec * 1000;
    int64_t checked_at = mq_now_ms(); /* deliverAt limit; the produce's 'now' is later */
    for (size_t i = 0; i < count; i++) {
        ProduceMsg *pm = &req.msgs[i];
        if (pm->has_delay_level && (pm->delay_level < 1 || (uint64_t)pm->delay_level > n_levels)) {
            ret = gw_reply_error(r, 400, "INVALID_FIELD", "%sdelayLevel must be an integer in "
                                 "1..%zu (messageDelayLevel)", pm->where, n_levels);
            goto out;
        }
        if ((pm->has_delay_ms && pm->delay_ms > timer_max_ms) ||
            (pm->has_deliver_at && pm->deliver_at_ms - checked_at > timer_max_ms)) {
            ret = gw_reply_error(r, 400, "INVALID_FIELD", "%s%s is more than %lld ms ahead "
                                 "(timerMaxDelaySec %lld)", pm->where,
                                 pm->has_delay_ms ? "delayMs" : "deliverAt",
                                 (long long)timer_max_ms, (long long)conf->timer_max_delay_sec);
            goto out;
        }
        if (!pr_encode_props(pm, ip, &prob)) {
            ret = gw_reply_problem(r, &prob);
            goto out;
        }
    }
    if (!idem_check(r, topic, &claimed, &ret)) goto out;

    TopicRegistry *reg = broker_topics(b);
    MetaTopic t;
    uint8_t born[8];
    /* A lookup; a topic to create is a job's work (sqlite), and this call
     * runs anew once it is made.  Nothing is held across the job: a claim
     * is dropped at 'out', before the resumed call can take it again (a
     * same-key request meanwhile is a concurrent one: one stores, one gets
     * 409 or the replay). */
    if (!h_message_produce_topic(r, topic, h_message_produce, &t, born, &ret)) goto out;
    int rc = MQ_OK;
    int64_t now = mq_now_ms();
    uint64_t body_bytes = 0;
    real_queue = calloc(count, sizeof(*real_queue));
    if (!real_queue) {
        ret = gw_reply_err(r, MQ_ERR_NOMEM, "produce");
        goto out;
    }
    for (size_t i = 0; i < count; i++) {
        ProduceMsg *pm = &req.msgs[i];
        uint32_t queue = 0;
        rc = topic_select_queue(reg, &t, pm->queue_id, pm->sharding_key, &queue);
        if (rc != MQ_OK) {
            ret = gw_reply_error(r, 400, "INVALID_FIELD", "%squeueId %lld is out of range: "
                                 "topic '%s' has %u write queues", pm->where,
                                 (long long)pm->queue_id, topic, t.write_queues);
            goto out;
        }
        body_bytes += pm->body.len;
        cms[i] = (ClMessage){.topic = mq_slice(topic, strlen(topic)),
                             .queue_id = queue,
                             .born_ts = now,
                             .body = pm->body,
                             .props = mq_slice(pm->props_buf, pm->props_len)};
        memcpy(cms[i].born_host, born, 8);
        /* deliverAt or delayMs: a time already passed (or delayMs 0) is
         * stored directly.  'now' is cut to the ms: delayMs counts from
         * 1 ms later, so that a timer never comes out early. */
        int64_t deliver_at = 0;
        if (pm->has_deliver_at) deliver_at = pm->deliver_at_ms;
        else if (pm->has_delay_ms && pm->delay_ms > 0) deliver_at = now + pm->delay_ms + 1;
        if (pm->has_delay_level || deliver_at > now) {
            /* Stored in the schedule topic (a level, checked with the other
             * fields) or the timer wheel until due (core/schedule.h). */
            if (!wrap_bufs) wrap_bufs = calloc(count, sizeof(*wrap_bufs));
            /* its properties plus REAL_TOPIC, REAL_QID and DELAY or
             * TIMER_DELIVER_MS */
            size_t wcap = pm->props_len +
                          (pm->has_delay_level ? SCHED_WRAP_EXTRA : SCHED_TIMER_WRAP_EXTRA);
            uint8_t *wb = wrap_bufs ? malloc(wcap) : NULL;
            if (!wb) {
                ret = gw_reply_err(r, MQ_ERR_NOMEM, "produce");
                goto out;
            }
            wrap_bufs[i] = wb;
            ClMessage real = cms[i];
            int wrc = pm->has_delay_level
                          ? sched_wrap(&real, (uint32_t)pm->delay_level, wb, wcap, &cms[i])
                          : sched_timer_wrap(broker_scheduler(b), &real, deliver_at, now, wb,
                                             wcap, &cms[i]);
            if (wrc != MQ_OK) {
                ret = gw_reply_error(r, 400, "INVALID_FIELD", "%sproperties too large for a "
                                     "delayed message", pm->where);
                goto out;
            }
            real_queue[i] = queue;
        }
    }

    Store *st = broker_store(b);
    rc = store_put(st, cms, count, res);
    if (rc != MQ_OK) {
        ret = rc == MQ_ERR_INVAL
                  ? gw_reply_error(r, 400, "INVALID_FIELD", "the messages do not fit one "
                                   "commit log segment")
                  : gw_reply_err(r, rc, "append");
        goto out;
    }
    topic_count_traffic(reg, topic, false, count, body_bytes);
    for (size_t i = 0; wrap_bufs && i < count; i++) /* wake the scheduler in time */
        if (wrap_bufs[i]) sched_notify(broker_scheduler(b), &cms[i], res[i].store_ts);

    answer.results = calloc(count, sizeof(*answer.results));
    if (!answer.results) {
        /* Stored, but no memory to say where: the client sees 503 (a rare
         * case where a retry without Idempotency-Key stores twice). */
        ret = gw_reply_err(r, MQ_ERR_NOMEM, "produce answer");
        goto out;
    }
    for (size_t i = 0; i < count; i++) {
        SendResult *sr = &answer.results[i];
        msg_id_encode(ip, res[i].phys_off, sr->msg_id);
        memcpy(sr->uniq, req.msgs[i].uniq, sizeof(sr->uniq));
        /* A delayed message: its real queue (RocketMQ answers the same),
         * and its offset in the schedule queue. */
        sr->queue_id = wrap_bufs && wrap_bufs[i] ? real_queue[i] : cms[i].queue_id;
        sr->queue_off = res[i].queue_off;
    }

    settled = true;
    const IdemRef *idem = claimed ? idem_ref(r, topic, &idem_buf) : NULL;
    if (conf->flush_disk_type != CONF_SYNC_FLUSH) {
        ret = answer_produce(r, &answer, MQ_OK, idem);
        goto out;
    }
    ctx = r->ctx ? r->ctx : calloc(1, sizeof(*ctx)); /* set by an auto-create */
    if (!ctx) {
        /* Stored but durability unknown: say so rather than fail. */
        ret = answer_produce(r, &answer, MQ_ERR_TIMEOUT, idem);
        goto out;
    }
    ctx->answer = answer;
    ctx->req = r;
    atomic_init(&ctx->flush_status, MQ_OK);
    answer.results = NULL; /* the context owns them now */
    r->ctx = ctx;
    r->ctx_free = produce_ctx_free;
    r->resume = produce_resumed;
    /* Suspend before registering: the callback may run at once. */
    gw_suspend(r);
    uint64_t upto = res[count - 1].phys_off + res[count - 1].size;
    rc = store_wait_flush(st, &ctx->waiter, upto, on_flushed, ctx);
    if (rc != 1) {
        /* Already durable (0) or the log failed: no callback will come. */
        atomic_store(&ctx->flush_status, rc == 0 ? MQ_OK : rc);
        gw_resume(r);
    }
    ret = MHD_YES;

out:
    if (claimed && !settled) idem_abort(broker_idempotency(b), topic, gw_header(r, IDEM_HEADER));
    free(answer.results);
    for (size_t i = 0; wrap_bufs && i < count; i++) free(wrap_bufs[i]);
    free(wrap_bufs);
    free(real_queue);
    pr_req_clear(&req);
    free(cms);
    free(res);
    json_decref(root);
    return ret;
}

/* ======================================================================
 * Get by id
 * ====================================================================== */

/* GET /v1/messages/{msgId} */
/* Reads the record of the {msgId} of 'm' into '*rec' (keep '*ref' until
 * done with it: mf_unref).  False when it answered 400 or 404 ('*ret'). */
static bool read_by_id(GwRequest *r, const RtMatch *m, ClRecord *rec, MappedFile **ref,
                       enum MHD_Result *ret) {
    const char *id = rt_param(m, "msgId");
    uint8_t host[8];
    uint64_t off = 0;
    if (msg_id_decode(id, strlen(id), host, &off) != MQ_OK) {
        *ret = gw_reply_error(r, 400, "INVALID_MSG_ID", "'%.64s' is not a message id (32 hex "
                              "digits)", id);
        return false;
    }
    /* The record at that offset must carry the id's store host: an id of
     * another broker (or a position inside a record) is not found.  The
     * record's own host, not today's listen address, is compared, so ids
     * stay valid across a restart on another port. */
    int rc = store_read_msg(broker_store(gw_broker(r)), off, rec, ref);
    if (rc != MQ_OK || rec->phys_off != off || memcmp(rec->store_host, host, 8) != 0) {
        mf_unref(ref);
        *ret = gw_reply_error(r, 404, "MESSAGE_NOT_FOUND", "no message '%s' on this broker", id);
        return false;
    }
    return true;
}

enum MHD_Result h_message_get(GwRequest *r, const RtMatch *m) {
    ClRecord rec;
    MappedFile *ref = NULL;
    enum MHD_Result ret;
    if (!read_by_id(r, m, &rec, &ref, &ret)) return ret;
    json_t *msg = js_message(&rec);
    mf_unref(&ref);
    if (!msg) return gw_reply_err(r, MQ_ERR_NOMEM, "message");
    return gw_reply_json(r, 200, msg);
}

/* ======================================================================
 * Track: GET /v1/messages/{msgId}/track
 * ====================================================================== */

typedef struct TrackCtx {
    Broker *b;
    const char *topic;
    uint32_t queue_id;
    uint64_t queue_off;
    json_t *arr;
    bool failed;
} TrackCtx;

/* A group's view of the message: below its committed offset it is
 * consumed; otherwise the receive state says (acked out of order, in
 * flight, or not handed out yet). */
static int track_one(void *arg, const MetaGroup *g) {
    TrackCtx *c = arg;
    uint64_t off = 0;
    bool has = meta_offset_get(broker_meta(c->b), g->name, c->topic, c->queue_id, &off) == MQ_OK;
    if (!has) off = 0;
    const char *type = "NOT_CONSUMED_YET";
    if (has && c->queue_off < off) {
        type = "CONSUMED";
    } else {
        switch (pop_offset_state(broker_pop(c->b), g->name, c->topic, c->queue_id, c->queue_off)) {
        case POP_OFF_DONE: type = "CONSUMED"; break;
        case POP_OFF_INFLIGHT: type = "IN_FLIGHT"; break;
        default: break;
        }
    }
    json_t *one = json_pack("{s:s, s:s, s:I}", "group", g->name, "trackType", type,
                            "consumerOffset", (json_int_t)off);
    if (one && json_array_append_new(c->arr, one) == 0) return 0;
    c->failed = true;
    return 1;
}

/* {"msgId","topic","queueId","queueOffset","tracks":[{"group","trackType",
 * "consumerOffset"}]}: for each group reading the message's topic,
 * CONSUMED, IN_FLIGHT or NOT_CONSUMED_YET (RocketMQ's message track). */
enum MHD_Result h_message_track(GwRequest *r, const RtMatch *m) {
    ClRecord rec;
    MappedFile *ref = NULL;
    enum MHD_Result ret;
    if (!read_by_id(r, m, &rec, &ref, &ret)) return ret;
    char topic[MSG_SYSTEM_NAME_MAX + 1];
    size_t tlen = rec.topic.len < sizeof(topic) ? rec.topic.len : sizeof(topic) - 1;
    memcpy(topic, rec.topic.ptr, tlen);
    topic[tlen] = '\0';
    TrackCtx c = {gw_broker(r), topic, rec.queue_id, rec.queue_off, json_array(), false};
    mf_unref(&ref);
    int rc = c.arr ? gw_topic_readers(c.b, topic, track_one, &c) : MQ_ERR_NOMEM;
    json_t *root = rc == MQ_OK && !c.failed
                       ? json_pack("{s:s, s:s, s:I, s:I, s:O}", "msgId", rt_param(m, "msgId"),
                                   "topic", topic, "queueId", (json_int_t)c.queue_id,
                                   "queueOffset", (json_int_t)c.queue_off, "tracks", c.arr)
                       : NULL;
    json_decref(c.arr);
    if (!root) return gw_reply_err(r, rc != MQ_OK ? rc : MQ_ERR_NOMEM, topic);
    return gw_reply_json(r, 200, root);
}

/* ======================================================================
 * Resend: POST /v1/messages/{msgId}/resend
 * ====================================================================== */

/* The topic a message is resent to: the topic it was first sent to (its
 * RETRY_TOPIC property, set when it went to a retry or dead-letter
 * topic), else its own topic when that is a user topic.  NULL when it has
 * none (a system record). */
static const char *resend_topic(const ClRecord *rec, char *buf, size_t cap) {
    MqSlice t;
    if (!msg_prop_get(rec->props, MSG_PROP_RETRY_TOPIC, &t)) t = rec->topic;
    if (t.len >= cap || msg_name_problem(t.ptr, t.len)) return NULL;
    memcpy(buf, t.ptr, t.len);
    buf[t.len] = '\0';
    return buf;
}

/* Body, tags, keys and user properties as they were; RETRY_TOPIC goes
 * (it is a fresh delivery, reconsumeTimes 0) and ORIGIN_MESSAGE_ID names
 * the first message, so consumers can tell a resend from a new message. */
static bool name_is_prop(MqSlice name, const char *prop) {
    return name.len == strlen(prop) && memcmp(name.ptr, prop, name.len) == 0;
}

static int resend_props(const ClRecord *rec, uint8_t *buf, size_t cap, size_t *len) {
    MsgProp stack[64];
    size_t n = 0;
    int rc = msg_props_decode(rec->props, stack, 63, &n);
    if (rc != MQ_OK) return rc;
    size_t k = 0;
    bool has_origin = false;
    for (size_t i = 0; i < n; i++) {
        if (name_is_prop(stack[i].name, MSG_PROP_RETRY_TOPIC)) continue;
        if (name_is_prop(stack[i].name, MSG_PROP_ORIGIN_MSG_ID)) has_origin = true;
        stack[k++] = stack[i];
    }
    char id[MSG_ID_LEN + 1];
    if (!has_origin) {
        msg_id_encode(rec->store_host, rec->phys_off, id);
        stack[k++] = (MsgProp){mq_slice(MSG_PROP_ORIGIN_MSG_ID, strlen(MSG_PROP_ORIGIN_MSG_ID)),
                               mq_slice(id, MSG_ID_LEN)};
    }
    return msg_props_encode(stack, k, buf, cap, len);
}

enum MHD_Result h_message_resend(GwRequest *r, const RtMatch *m) {
    if (r->body_len > 0) {
        /* No options yet: an empty body or {} only. */
        json_t *root = NULL;
        GwProblem prob = {0};
        static const char *const none[] = {NULL};
        json_t *unused[1];
        if (!gw_json_object(r, true, &root, &prob) ||
            !gw_json_fields(root, none, unused, "", &prob)) {
            json_decref(root);
            return gw_reply_problem(r, &prob);
        }
        json_decref(root);
    }
    Broker *b = gw_broker(r);
    ClRecord rec;
    MappedFile *ref = NULL;
    enum MHD_Result ret;
    if (!read_by_id(r, m, &rec, &ref, &ret)) return ret;
    char tbuf[MSG_NAME_MAX + 1];
    const char *topic = resend_topic(&rec, tbuf, sizeof(tbuf));
    if (!topic) {
        mf_unref(&ref);
        return gw_reply_error(r, 400, "NOT_RESENDABLE", "message '%s' belongs to no user topic",
                              rt_param(m, "msgId"));
    }
    MetaTopic t;
    int rc = topic_for_produce(broker_topics(b), topic, false, AUTO_QUEUES, &t);
    if (rc != MQ_OK) {
        mf_unref(&ref);
        return reply_topic_err(r, rc, topic, false);
    }
    uint32_t qid = 0;
    rc = topic_select_queue(broker_topics(b), &t, -1, mq_slice("", 0), &qid);
    uint8_t *props = malloc(CL_PROPS_MAX);
    size_t plen = 0;
    if (rc == MQ_OK) rc = props ? resend_props(&rec, props, CL_PROPS_MAX, &plen) : MQ_ERR_NOMEM;
    ClAppendResult res;
    if (rc == MQ_OK) {
        ClMessage msg = {0};
        msg.topic = mq_slice(topic, strlen(topic));
        msg.queue_id = qid;
        msg.flag = rec.flag;
        msg.born_ts = mq_now_ms();
        client_host(r, msg.born_host);
        msg.body = rec.body;
        msg.props = mq_slice((const char *)props, plen);
        rc = store_put(broker_store(b), &msg, 1, &res);
    }
    uint64_t body_len = rec.body.len;
    free(props);
    mf_unref(&ref);
    if (rc != MQ_OK) return gw_reply_err(r, rc, topic);
    topic_count_traffic(broker_topics(b), topic, false, 1, body_len);
    char id[MSG_ID_LEN + 1];
    msg_id_encode(broker_store_host(b), res.phys_off, id);
    json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:I}", "status", "SEND_OK", "msgId", id, "topic",
                          topic, "queueId", (json_int_t)qid, "queueOffset",
                          (json_int_t)res.queue_off);
    return gw_reply_json(r, 200, o);
}

/* ======================================================================
 * Classic pull
 * ====================================================================== */

/* True when the record's TAGS is one of the parsed 'tags'. */
static bool tag_matches(const ClRecord *rec, const MqSlice *tags, size_t n) {
    MqSlice tag = {"", 0};
    msg_prop_get(rec->props, MSG_PROP_TAGS, &tag);
    return msg_tag_expr_match(tags, n, false, tag);
}

/* ----------------------------------------------------------------------
 * Long polling: a pull that would answer NO_NEW_MSG with waitMs > 0
 * suspends its connection and registers a waiter with the broker's
 * long-polling registry (core/longpoll.h).  The waiter fires on the
 * store's dispatcher thread when the queue grows past the offset, on the
 * registry's timer thread at the deadline, or at shutdown; its callback
 * only records why and resumes the connection.  The resumed call re-runs
 * the whole pull on the connection's worker and either answers or, after
 * an arrival that the tag filter skipped, waits again until the deadline.
 * ---------------------------------------------------------------------- */

/* Pull state kept across suspensions (GwRequest.ctx). */
typedef struct PullCtx {
    LpWaiter waiter;     /* registered while suspended; cancelled at completion */
    LpRegistry *reg;     /* the broker's registry (borrowed; outlives requests) */
    GwRequest *req;      /* back pointer for the callback */
    uint64_t from;       /* queue offset the next read starts at: the request's
                          * offset, advanced past entries the tag filter skipped */
    int64_t deadline_ns; /* mq_mono_ns() when the poll answers NO_NEW_MSG */
    atomic_int reason;   /* LpReason of the last wake-up, 0 = none yet */
} PullCtx;

static void pull_ctx_free(void *p) {
    PullCtx *c = p;
    /* Normally idle here (it fired before the resume that led to the
     * answer); cancelling also covers a connection MHD closed while it was
     * suspended. */
    lp_cancel(c->reg, &c->waiter);
    free(c);
}

/* Waiter callback: dispatcher, timer or shutdown thread, registry mutex
 * held.  Touches nothing after gw_resume. */
static void on_pull_wake(void *arg, LpReason reason) {
    PullCtx *c = arg;
    atomic_store(&c->reason, (int)reason);
    gw_resume(c->req);
}

/* Suspends 'r' until queue ('ts', 'queue_id') grows past 'from', the
 * deadline (now + 'wait_ms' on the first wait) passes or the broker stops;
 * h_message_pull then runs again.  False (nothing suspended) when the
 * state cannot be allocated. */
static bool pull_wait(GwRequest *r, Store *st, MqSlice ts, uint32_t queue_id, uint64_t from,
                      int64_t wait_ms) {
    PullCtx *c = r->ctx;
    if (!c) {
        c = calloc(1, sizeof(*c));
        if (!c) return false;
        lp_waiter_init(&c->waiter);
        c->reg = broker_longpoll(gw_broker(r));
        c->req = r;
        c->deadline_ns = mq_mono_ns() + wait_ms * 1000000;
        atomic_init(&c->reason, 0);
        r->ctx = c;
        r->ctx_free = pull_ctx_free;
    }
    c->from = from;
    atomic_store(&c->reason, 0);
    r->resume = h_message_pull;
    /* Suspend before registering: the waiter may fire at once. */
    gw_suspend(r);
    int rc = lp_add(c->reg, &c->waiter, ts, queue_id, from, c->deadline_ns, on_pull_wake, c);
    if (rc != MQ_OK) {
        /* Stopping (or no memory): answer now, as after the deadline. */
        atomic_store(&c->reason, rc == MQ_ERR_STATE ? (int)LP_STOPPING : (int)LP_TIMEOUT);
        gw_resume(r);
        return true;
    }
    /* Entries dispatched between the read and lp_add woke nobody. */
    uint64_t qmin = 0;
    uint64_t qmax = 0;
    store_queue_range(st, ts, queue_id, &qmin, &qmax);
    if (qmax > from && lp_cancel(c->reg, &c->waiter)) {
        atomic_store(&c->reason, (int)LP_ARRIVAL);
        gw_resume(r);
    }
    return true;
}

/* One read of a pull: the status, the messages and the offsets. */
typedef struct PullRead {
    const char *status; /* FOUND, NO_NEW_MSG, OFFSET_TOO_SMALL, OFFSET_OVERFLOW */
    uint64_t next;      /* nextOffset */
    uint64_t qmin;      /* the queue's min and max offsets when read */
    uint64_t qmax;
    uint64_t bytes;     /* body bytes of the messages returned */
    size_t count;       /* messages returned */
} PullRead;

/* Reads up to 'max' messages of queue ('ts', 'queue_id') from 'from' that
 * match 'tags' (all when 'all'), writing them to 'list' as the elements of
 * a JSON array, comma-separated.  MQ_ERR_NOMEM. */
static int pull_read(Store *st, MqSlice ts, uint32_t queue_id, uint64_t from, int64_t max,
                     const MqSlice *tags, size_t n_tags, bool all, JsonW *list,
                     PullRead *out) {
    store_queue_range(st, ts, queue_id, &out->qmin, &out->qmax);
    out->next = from;
    out->bytes = 0;
    out->count = 0;
    if (from < out->qmin) {
        out->status = "OFFSET_TOO_SMALL";
        out->next = out->qmin;
        return MQ_OK;
    }
    if (from > out->qmax) {
        out->status = "OFFSET_OVERFLOW";
        out->next = out->qmax;
        return MQ_OK;
    }
    if (from == out->qmax) {
        out->status = "NO_NEW_MSG";
        return MQ_OK;
    }
    uint64_t hashes[PULL_TAGS_MAX];
    for (size_t i = 0; i < n_tags; i++) hashes[i] = msg_tag_hash(tags[i]);
    CqEntry *ents = calloc((size_t)max, sizeof(*ents));
    if (!ents) return MQ_ERR_NOMEM;
    size_t n = 0;
    int rc = store_read_queue(st, ts, queue_id, from, (size_t)max, PULL_SCAN,
                              all ? NULL : hashes, all ? 0 : n_tags, ents, NULL, &n, &out->next);
    for (size_t i = 0; rc == MQ_OK && i < n; i++) {
        ClRecord rec;
        MappedFile *ref = NULL;
        if (store_read_msg(st, ents[i].phys_off, &rec, &ref) != MQ_OK) {
            /* Aged out by retention between the two reads: skip. */
            mf_unref(&ref);
            continue;
        }
        if (all || tag_matches(&rec, tags, n_tags)) {
            if (out->count > 0) jw_lit(list, ",");
            jw_message(list, &rec);
            out->count++;
            out->bytes += rec.body.len;
        }
        mf_unref(&ref);
    }
    free(ents);
    out->status = out->count > 0 ? "FOUND" : "NO_NEW_MSG";
    return MQ_OK;
}

/* GET /v1/topics/{topic}/queues/{queueId}/messages.  Also the resumed
 * call of a long poll (r->ctx is then its PullCtx): the parameters are
 * parsed again, the read starts at the saved offset. */
enum MHD_Result h_message_pull(GwRequest *r, const RtMatch *m) {
    static const char *const known[] = {"offset", "max", "tags", "waitMs", NULL};
    Broker *b = gw_broker(r);
    const char *topic = rt_param(m, "topic");
    enum MHD_Result ret;
    if (!h_topic_any_name_ok(r, topic, &ret)) return ret;
    if (!gw_query_known(r, known, &ret)) return ret;
    GwProblem prob = {0};
    int64_t queue_id = 0;
    if (!gw_parse_u63(rt_param(m, "queueId"), &queue_id)) {
        return gw_reply_error(r, 400, "INVALID_PARAMETER", "queueId must be a non-negative "
                              "integer");
    }
    int64_t offset = 0;
    int64_t max = PULL_DEFAULT;
    int64_t wait_ms = 0;
    if (!gw_query_int(r, "offset", 0, INT64_MAX, &offset, &prob) ||
        !gw_query_int(r, "max", 1, PULL_MAX, &max, &prob) ||
        !gw_query_int(r, "waitMs", 0, PULL_WAIT_MAX_MS, &wait_ms, &prob)) {
        return gw_reply_problem(r, &prob);
    }
    const char *expr = gw_query(r, "tags");
    MqSlice tags[PULL_TAGS_MAX];
    size_t n_tags = 0;
    bool all = true;
    if (expr) {
        int rc = msg_tag_expr_parse(expr, strlen(expr), tags, PULL_TAGS_MAX, &n_tags, &all);
        if (rc != MQ_OK) {
            return gw_reply_error(r, 400, "INVALID_PARAMETER", "tags must be '*' or tags "
                                  "joined by '||' (at most %d)", PULL_TAGS_MAX);
        }
    }

    MetaTopic t;
    int rc = topic_get(broker_topics(b), topic, &t);
    if (rc != MQ_OK) return reply_topic_err(r, rc, topic, false);
    if (!(t.perm & META_PERM_READ)) return reply_topic_err(r, MQ_ERR_STATE, topic, false);
    if (queue_id >= t.read_queues) {
        return gw_reply_error(r, 400, "INVALID_PARAMETER", "queueId %lld is out of range: "
                              "topic '%s' has %u read queues", (long long)queue_id, topic,
                              t.read_queues);
    }

    Store *st = broker_store(b);
    MqSlice ts = mq_slice(topic, strlen(topic));
    PullCtx *c = r->ctx; /* set on a resumed long poll */
    uint64_t from = c ? c->from : (uint64_t)offset;
    /* The answer is written as text (jw.h): the messages first, after
     * room for the head, whose status is known only after the read. */
    JsonW list;
    jw_init(&list, 4096);
    jw_raw(&list, PULL_HEAD_ROOM, sizeof(PULL_HEAD_ROOM) - 1);
    PullRead pr;
    rc = pull_read(st, ts, (uint32_t)queue_id, from, max, tags, n_tags, all, &list, &pr);
    if (rc != MQ_OK || list.failed) {
        jw_free(&list);
        return gw_reply_err(r, rc != MQ_OK ? rc : MQ_ERR_NOMEM, "pull");
    }
    /* Wait when nothing (matching) is left up to the queue's end: on the
     * first call, or after an arrival the filter skipped while time
     * remains.  A filtered scan that stopped short of the end answers at
     * once (the client pulls again from nextOffset). */
    bool wait = wait_ms > 0 && strcmp(pr.status, "NO_NEW_MSG") == 0 && pr.next == pr.qmax &&
                !gw_is_stopping(r);
    if (wait && c) {
        wait = atomic_load(&c->reason) == (int)LP_ARRIVAL && mq_mono_ns() < c->deadline_ns;
    }
    if (wait && pull_wait(r, st, ts, (uint32_t)queue_id, pr.next, wait_ms)) {
        jw_free(&list);
        return MHD_YES;
    }
    topic_count_traffic(broker_topics(b), topic, true, pr.count, pr.bytes);
    char head[sizeof(PULL_HEAD_ROOM)];
    int hl = snprintf(head, sizeof(head), "{\"status\":\"%s\",\"messages\":[", pr.status);
    MQ_ASSERT(hl > 0 && (size_t)hl < sizeof(head));
    size_t room = sizeof(PULL_HEAD_ROOM) - 1;
    memmove(list.buf + hl, list.buf + room, list.len - room);
    memcpy(list.buf, head, (size_t)hl);
    list.len -= room - (size_t)hl;
    jw_lit(&list, "],\"nextOffset\":");
    jw_int(&list, (int64_t)pr.next);
    jw_lit(&list, ",\"minOffset\":");
    jw_int(&list, (int64_t)pr.qmin);
    jw_lit(&list, ",\"maxOffset\":");
    jw_int(&list, (int64_t)pr.qmax);
    jw_lit(&list, "}");
    size_t len = 0;
    char *text = jw_take(&list, &len);
    if (!text) return gw_reply_err(r, MQ_ERR_NOMEM, "pull");
    return gw_reply_json_text(r, 200, text, len);
}
