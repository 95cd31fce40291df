/*
 * h_consume.c - receive/ack consumption of a group (core/pop.h):
 *   POST /v1/groups/{group}/receive   hand out visible messages, hide them
 *   POST /v1/groups/{group}/ack       done for good
 *   POST /v1/groups/{group}/nack      back later (retry ladder or delayMs)
 *   GET  /v1/groups/{group}/stream    the same deliveries as Server-Sent
 *                                     Events, each still to be acked
 *
 * Waiting.  A receive that finds nothing, and a stream with nothing to
 * send, suspend their connection and wait for any arrival on the topic
 * and on the group's retry topic (two LP_ANY_QUEUE waiters of the
 * long-polling registry: core/longpoll.h), for their deadline, or for the
 * broker to stop.  The first waiter to fire resumes the connection; the
 * resumed call cancels the other.  An orderly queue that frees up (ack)
 * or a redelivery that falls due also wakes the topic's waiters.
 *
 * A group that does not exist is created on the job thread when
 * autoCreateSubscriptionGroup is on (receive and stream), else 404.
 */
#include "handlers.h"
#include "ack_req.h"
#include "req.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "broker.h"
#include "jw.h"
#include "msg.h"

#define RECEIVE_DEFAULT_MAX 16
#define INVISIBLE_MIN_MS 1000
#define INVISIBLE_MAX_MS 43200000 /* 12 h, RocketMQ's maxInvisibleTimeMills */
#define INVISIBLE_DEFAULT_MS 30000
#define WAIT_MAX_MS 30000
#define WAIT_DEFAULT_MS 15000
#define NACK_DELAY_MAX_MS 43200000
#define STREAM_DEFAULT_MAX 32    /* messages fetched per stream read */
#define STREAM_BLOCK 65536       /* MHD's buffer for the stream */
#define SCAN_ROUNDS 16           /* pop_receive calls of one turn while only filtered-out
                                  * messages are found */

/* ======================================================================
 * Shared request parts
 * ====================================================================== */

/* The {group} of 'm' if valid and unreserved; else answers 400. */
static const char *group_param(GwRequest *r, const RtMatch *m, enum MHD_Result *ret) {
    const char *group = rt_param(m, "group");
    const char *why = msg_name_problem(group, strlen(group));
    if (!why) return group;
    *ret = gw_reply_error(r, 400, "INVALID_NAME", "group '%.200s': %s", group, why);
    return NULL;
}

/* What receive and stream both need, checked. */
typedef struct ConsumeArgs {
    const char *topic;      /* borrowed (JSON tree or query) */
    FilterType filter_type;
    const char *expression; /* "*" by default */
    size_t expression_len;
    int64_t max_messages;
    int64_t invisible_ms;
    int64_t wait_ms;
    const char *client_id;  /* NULL: none */
} ConsumeArgs;

/* Resolved for one run: the group, the topic and the compiled filter
 * (a reference: filter_unref). */
typedef struct ConsumeTarget {
    MetaGroup group;
    MetaTopic topic;
    Filter *filter;
} ConsumeTarget;

/* Context kept across suspensions of a receive or a stream. */
typedef struct ConsumeCtx {
    GwRequest *req;
    LpRegistry *reg;
    LpWaiter waiters[2];     /* the topic, the retry topic */
    atomic_int fired;        /* a waiter resumed the connection */
    atomic_int reason;       /* its LpReason */
    int64_t deadline_ns;     /* receive: end of waitMs */
    bool waiting;            /* waiters registered (until cancelled) */
    /* group auto-create job */
    GroupRegistry *groups;
    char group[MSG_NAME_MAX + 1];
    int create_rc;
    bool created;
    /* stream */
    bool stream;
    ConsumeArgs args;        /* stream: copies below own the strings */
    char topic[MSG_NAME_MAX + 1];
    char *expression;
    char *client;
    char *buf;               /* events not yet handed to MHD */
    size_t len, pos;
    int64_t next_ping_ns;
    uint64_t sent;           /* messages written to the stream */
    /* stream: the deliveries in 'buf', each with the buffer position its
     * event ends at; those not yet handed to MHD when the stream ends are
     * given back (nack) instead of waiting out their invisibility */
    char (*unsent)[RECEIPT_LEN + 1];
    size_t *unsent_end;
    size_t n_unsent;
} ConsumeCtx;

static void stop_waiting(ConsumeCtx *c) {
    if (!c->waiting) return;
    lp_cancel(c->reg, &c->waiters[0]);
    lp_cancel(c->reg, &c->waiters[1]);
    c->waiting = false;
}

/* Gives back the deliveries still in the stream buffer (the client went
 * away or the stream ended before MHD took them). */
static void release_unsent(ConsumeCtx *c) {
    if (c->n_unsent == 0) return;
    Broker *b = gw_broker(c->req);
    MetaGroup g;
    if (group_get(broker_groups(b), c->group, &g) == MQ_OK) {
        for (size_t i = 0; i < c->n_unsent; i++) {
            if (c->unsent_end[i] <= c->pos) continue; /* with MHD already */
            PopResult res;
            (void)pop_nack(broker_pop(b), &g, c->topic, c->unsent[i], RECEIPT_LEN, 0, &res);
        }
    }
    c->n_unsent = 0;
}

static void consume_ctx_free(void *p) {
    ConsumeCtx *c = p;
    stop_waiting(c);
    if (c->stream) release_unsent(c);
    free(c->unsent);
    free(c->unsent_end);
    free(c->expression);
    free(c->client);
    free(c->buf);
    free(c);
}

static ConsumeCtx *ctx_of(GwRequest *r) {
    ConsumeCtx *c = r->ctx;
    if (c) return c;
    c = calloc(1, sizeof(*c));
    if (!c) return NULL;
    c->req = r;
    c->reg = broker_longpoll(gw_broker(r));
    lp_waiter_init(&c->waiters[0]);
    lp_waiter_init(&c->waiters[1]);
    atomic_init(&c->fired, 0);
    atomic_init(&c->reason, 0);
    r->ctx = c;
    r->ctx_free = consume_ctx_free;
    return c;
}

/* Waiter callback (dispatcher, timer, or a stopping thread; registry
 * mutex held): the first one resumes the connection. */
static void on_wake(void *arg, LpReason reason) {
    ConsumeCtx *c = arg;
    if (atomic_exchange(&c->fired, 1) != 0) return;
    atomic_store(&c->reason, (int)reason);
    gw_resume(c->req);
}

/* The group's retry topic, named into 'name', and how many of its queues
 * a receive reads: 0 for an orderly group (its retries stay in place) or
 * while the retry topic does not exist yet. */
static uint32_t retry_source(Broker *b, const MetaGroup *g, char name[MSG_SYSTEM_NAME_MAX + 1]) {
    group_retry_topic(g->name, name, MSG_SYSTEM_NAME_MAX + 1);
    MetaTopic rt;
    if (g->orderly || topic_get(broker_topics(b), name, &rt) != MQ_OK) return 0;
    return rt.read_queues;
}

/* Sum of the max offsets of every source queue: a cheap "did anything
 * arrive" check around the registration of the waiters. */
static uint64_t arrivals(Store *st, const ConsumeTarget *t, const char *retry_topic,
                         uint32_t retry_queues) {
    uint64_t sum = 0, qmin = 0, qmax = 0;
    for (uint32_t q = 0; q < t->topic.read_queues; q++) {
        store_queue_range(st, mq_slice(t->topic.name, strlen(t->topic.name)), q, &qmin, &qmax);
        sum += qmax;
    }
    for (uint32_t q = 0; q < retry_queues; q++) {
        store_queue_range(st, mq_slice(retry_topic, strlen(retry_topic)), q, &qmin, &qmax);
        sum += qmax;
    }
    return sum;
}

/* Suspends 'r' until an arrival on the topic or its retry topic, the
 * deadline 'deadline_ns', or shutdown.  'seen' is arrivals() before the
 * receive that found nothing: anything since wakes at once.  False (not
 * suspended) when the broker is stopping. */
static bool wait_for_messages(GwRequest *r, ConsumeCtx *c, const ConsumeTarget *t,
                              int64_t deadline_ns, uint64_t seen) {
    Broker *b = gw_broker(r);
    char retry[MSG_SYSTEM_NAME_MAX + 1];
    uint32_t retry_queues = retry_source(b, &t->group, retry);
    atomic_store(&c->fired, 0);
    atomic_store(&c->reason, 0);
    gw_suspend(r);
    int rc = lp_add(c->reg, &c->waiters[0], mq_slice(t->topic.name, strlen(t->topic.name)),
                    LP_ANY_QUEUE, 0, deadline_ns, on_wake, c);
    if (rc == MQ_OK) {
        c->waiting = true;
        rc = lp_add(c->reg, &c->waiters[1], mq_slice(retry, strlen(retry)), LP_ANY_QUEUE, 0,
                    deadline_ns, on_wake, c);
    }
    if (rc != MQ_OK) {
        /* Stopping (or no memory): answer now. */
        if (atomic_exchange(&c->fired, 1) == 0) {
            atomic_store(&c->reason, rc == MQ_ERR_STATE ? (int)LP_STOPPING : (int)LP_TIMEOUT);
            gw_resume(r);
        }
        return true;
    }
    if (arrivals(broker_store(b), t, retry, retry_queues) != seen &&
        atomic_exchange(&c->fired, 1) == 0) {
        atomic_store(&c->reason, (int)LP_ARRIVAL);
        gw_resume(r);
    }
    return true;
}

/* The auto-create job (job thread). */
static void create_group_job(void *arg) {
    ConsumeCtx *c = arg;
    MetaGroup g;
    c->create_rc = group_for_consume(c->groups, c->group, true, &g);
    c->created = true;
}

/* Resolves group, topic and filter for 'a'.  Returns true with 't' filled
 * (t->filter referenced); false when it answered (an error, or the group
 * auto-create job was started: '*ret' then says MHD_YES and 'resume' runs
 * later). */
static bool resolve(GwRequest *r, const char *group, const ConsumeArgs *a, RtHandler resume,
                    ConsumeTarget *t, enum MHD_Result *ret) {
    Broker *b = gw_broker(r);
    const Config *conf = broker_config(b);
    int rc = group_get(broker_groups(b), group, &t->group);
    if (rc == MQ_ERR_NOTFOUND && conf->auto_create_group) {
        ConsumeCtx *c = ctx_of(r);
        if (!c) {
            *ret = gw_reply_err(r, MQ_ERR_NOMEM, group);
            return false;
        }
        if (!c->created) {
            c->groups = broker_groups(b);
            snprintf(c->group, sizeof(c->group), "%s", group);
            *ret = gw_offload(r, create_group_job, resume);
            return false;
        }
        rc = c->create_rc == MQ_OK ? group_get(broker_groups(b), group, &t->group) : c->create_rc;
    }
    if (rc == MQ_ERR_NOTFOUND) {
        *ret = gw_reply_error(r, 404, "GROUP_NOT_FOUND", "group '%s' does not exist%s", group,
                              conf->auto_create_group ? "" : " (autoCreateSubscriptionGroup is "
                                                             "off)");
        return false;
    }
    if (rc != MQ_OK) {
        *ret = gw_reply_err(r, rc, group);
        return false;
    }
    if (!t->group.consume_enable) {
        *ret = gw_reply_error(r, 403, "CONSUME_DISABLED", "group '%s' has consumeEnable off",
                              group);
        return false;
    }
    if (t->group.broadcast) {
        *ret = gw_reply_error(r, 409, "BROADCAST_GROUP", "group '%s' is a broadcast group: "
                              "its consumers pull every queue with their own offsets "
                              "(GET /v1/topics/{topic}/queues/{queueId}/messages)", group);
        return false;
    }
    rc = topic_get(broker_topics(b), a->topic, &t->topic);
    if (rc == MQ_ERR_NOTFOUND) {
        *ret = gw_reply_error(r, 404, "TOPIC_NOT_FOUND", "topic '%s' does not exist", a->topic);
        return false;
    }
    if (rc != MQ_OK) {
        *ret = gw_reply_err(r, rc, a->topic);
        return false;
    }
    if (!(t->topic.perm & META_PERM_READ)) {
        *ret = gw_reply_error(r, 403, "TOPIC_NOT_READABLE", "topic '%s' is not readable (perm)",
                              a->topic);
        return false;
    }
    Sql92Error err = {0};
    rc = filter_cache_get(broker_filters(b), a->filter_type, a->expression, a->expression_len,
                          &t->filter, &err);
    if (rc == MQ_ERR_INVAL) {
        *ret = gw_reply_error(r, 400, "INVALID_FILTER", "filter: position %zu: %s", err.pos,
                              err.msg);
        return false;
    }
    if (rc != MQ_OK) {
        *ret = gw_reply_err(r, rc, "filter");
        return false;
    }
    if (a->client_id) mb_touch(broker_members(b), group, a->client_id, a->topic, mq_now_ms());
    return true;
}

/* Hands out up to 'max' messages of target 't' into 'ds' ('*n'), as
 * pop_receive.  Filtered-out messages are passed over SCAN_MAX per queue
 * at a time: it goes on while that is all that happened, at most
 * SCAN_ROUNDS times; '*more' then says some are still left to look at. */
static int receive_some(Broker *b, const ConsumeTarget *t, int64_t max, int64_t invisible_ms,
                        PopDelivery *ds, size_t *n, bool *more) {
    PopRequest req = {.group = &t->group,
                      .topic = t->topic.name,
                      .read_queues = t->topic.read_queues,
                      .filter = t->filter,
                      .max_messages = (uint32_t)max,
                      .invisible_ms = invisible_ms,
                      .more = more};
    int rc = MQ_OK;
    for (int round = 0; round < SCAN_ROUNDS; round++) {
        *more = false;
        rc = pop_receive(broker_pop(b), &req, ds, n);
        if (rc != MQ_OK || *n > 0 || !*more) break;
    }
    return rc;
}

/* Appends the message object of delivery 'd' (API.md's message plus
 * "receiptHandle"; a retry shows its subscribed topic; a retry or a
 * resent message shows, as "originMsgId", the id of the message first
 * delivered).  False when the
 * record is gone (aged out). */
static bool write_delivery(JsonW *w, Store *st, const char *topic, const PopDelivery *d,
                           uint64_t *bytes) {
    ClRecord rec;
    MappedFile *ref = NULL;
    if (store_read_msg(st, d->phys_off, &rec, &ref) != MQ_OK) {
        mf_unref(&ref);
        return false;
    }
    MqSlice origin = {"", 0};
    bool has_origin = msg_prop_get(rec.props, MSG_PROP_ORIGIN_MSG_ID, &origin) &&
                      origin.len == MSG_ID_LEN && jw_utf8_valid(origin.ptr, origin.len);
    ClRecord shown = rec;
    shown.topic = mq_slice(topic, strlen(topic));
    shown.reconsume_times = d->reconsume_times;
    jw_message(w, &shown);
    *bytes += rec.body.len;
    mf_unref(&ref);
    if (w->failed || w->len == 0) return true;
    w->len--; /* reopen the object: drop its '}' */
    jw_lit(w, ",\"receiptHandle\":\"");
    jw_raw(w, d->handle, RECEIPT_LEN);
    jw_lit(w, "\"");
    if (has_origin) {
        jw_lit(w, ",\"originMsgId\":\"");
        jw_raw(w, origin.ptr, origin.len);
        jw_lit(w, "\"");
    }
    jw_lit(w, "}");
    return true;
}

/* ======================================================================
 * POST /v1/groups/{group}/receive
 * ====================================================================== */

/* Reads an optional integer member 'v' named 'name' within [lo, hi]. */
static bool int_field(json_t *v, const char *name, int64_t lo, int64_t hi, int64_t *out,
                      GwProblem *p) {
    if (!v) return true;
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
        return gw_fail(p, 400, "INVALID_FIELD", "'%s' must be an integer in %lld..%lld", name,
                       (long long)lo, (long long)hi);
    }
    *out = json_integer_value(v);
    return true;
}

static bool topic_field(json_t *v, const char **out, GwProblem *p) {
    if (!v || !json_is_string(v))
        return gw_fail(p, 400, "INVALID_FIELD", "'topic' is required: a topic name");
    const char *s = json_string_value(v);
    const char *why = msg_name_problem(s, json_string_length(v));
    if (why) return gw_fail(p, 400, "INVALID_NAME", "topic '%.200s': %s", s, why);
    *out = s;
    return true;
}

/* The {"type","expression"} filter object. */
static bool filter_field(json_t *v, ConsumeArgs *a, GwProblem *p) {
    a->filter_type = FILTER_TAG;
    a->expression = "*";
    a->expression_len = 1;
    if (!v) return true;
    if (!json_is_object(v))
        return gw_fail(p, 400, "INVALID_FIELD", "'filter' must be an object "
                       "{\"type\":\"TAG\"|\"SQL92\",\"expression\":\"...\"}");
    static const char *const names[] = {"type", "expression", NULL};
    json_t *f[2];
    if (!gw_json_fields(v, names, f, "filter: ", p)) return false;
    if (f[0] && (!json_is_string(f[0]) || !filter_type_parse(json_string_value(f[0]),
                                                             &a->filter_type)))
        return gw_fail(p, 400, "INVALID_FIELD", "filter: 'type' must be \"TAG\" or \"SQL92\"");
    if (f[1]) {
        if (!json_is_string(f[1]) || json_string_length(f[1]) > 4096)
            return gw_fail(p, 400, "INVALID_FIELD", "filter: 'expression' must be a string of "
                           "at most 4096 bytes");
        a->expression = json_string_value(f[1]);
        a->expression_len = json_string_length(f[1]);
    } else if (a->filter_type == FILTER_SQL92) {
        return gw_fail(p, 400, "INVALID_FIELD", "filter: an SQL92 filter needs 'expression'");
    }
    return true;
}

static bool client_field(json_t *v, const char **out, GwProblem *p) {
    if (!v) return true;
    if (!json_is_string(v) || !mb_client_id_valid(json_string_value(v)))
        return gw_fail(p, 400, "INVALID_FIELD", "'clientId' must be 1..255 characters of "
                       "[A-Za-z0-9_.:@-]");
    *out = json_string_value(v);
    return true;
}

static bool receive_args(json_t *root, ConsumeArgs *a, GwProblem *p) {
    static const char *const names[] = {"topic",   "filter", "maxMessages", "invisibleMs",
                                        "waitMs",  "clientId", NULL};
    json_t *v[6];
    memset(a, 0, sizeof(*a));
    a->max_messages = RECEIVE_DEFAULT_MAX;
    a->invisible_ms = INVISIBLE_DEFAULT_MS;
    a->wait_ms = WAIT_DEFAULT_MS;
    return gw_json_fields(root, names, v, "", p) && topic_field(v[0], &a->topic, p) &&
           filter_field(v[1], a, p) &&
           int_field(v[2], "maxMessages", 1, POP_MAX_MESSAGES, &a->max_messages, p) &&
           int_field(v[3], "invisibleMs", INVISIBLE_MIN_MS, INVISIBLE_MAX_MS, &a->invisible_ms,
                     p) &&
           int_field(v[4], "waitMs", 0, WAIT_MAX_MS, &a->wait_ms, p) &&
           client_field(v[5], &a->client_id, p);
}

enum MHD_Result h_consume_receive(GwRequest *r, const RtMatch *m) {
    enum MHD_Result ret;
    const char *group = group_param(r, m, &ret);
    if (!group) return ret;
    ConsumeCtx *c = r->ctx; /* set when resumed */
    if (c) stop_waiting(c);
    json_t *root = NULL;
    GwProblem prob = {0};
    ConsumeArgs a;
    if (!gw_json_object(r, true, &root, &prob) || !receive_args(root, &a, &prob)) {
        json_decref(root);
        return gw_reply_problem(r, &prob);
    }
    ConsumeTarget t = {0};
    if (!resolve(r, group, &a, h_consume_receive, &t, &ret)) {
        json_decref(root);
        return ret;
    }
    Broker *b = gw_broker(r);
    Store *st = broker_store(b);
    c = r->ctx;
    if (!c || c->deadline_ns == 0) {
        c = ctx_of(r);
        if (!c) {
            filter_unref(t.filter);
            json_decref(root);
            return gw_reply_err(r, MQ_ERR_NOMEM, "receive");
        }
        c->deadline_ns = mq_mono_ns() + a.wait_ms * 1000000;
    }
    char retry[MSG_SYSTEM_NAME_MAX + 1];
    uint32_t retry_queues = retry_source(b, &t.group, retry);
    uint64_t seen = arrivals(st, &t, retry, retry_queues);

    PopDelivery *ds = malloc((size_t)a.max_messages * sizeof(*ds));
    size_t n = 0;
    bool more = false;
    int rc = ds ? receive_some(b, &t, a.max_messages, a.invisible_ms, ds, &n, &more)
                : MQ_ERR_NOMEM;
    filter_unref(t.filter);
    if (rc != MQ_OK) {
        free(ds);
        json_decref(root);
        return gw_reply_err(r, rc, "receive");
    }
    if (n == 0 && mq_mono_ns() < c->deadline_ns && !gw_is_stopping(r) &&
        atomic_load(&c->reason) != (int)LP_STOPPING) {
        free(ds);
        json_decref(root);
        r->resume = h_consume_receive;
        if (more) {
            /* Still only filtered-out messages: let other connections of
             * this worker run, then go on (suspend and resume at once). */
            atomic_store(&c->reason, (int)LP_ARRIVAL);
            gw_suspend(r);
            gw_resume(r);
            return MHD_YES;
        }
        wait_for_messages(r, c, &t, c->deadline_ns, seen);
        return MHD_YES;
    }
    JsonW w;
    jw_init(&w, 64 + n * 600);
    jw_lit(&w, "{\"messages\":[");
    uint64_t bytes = 0;
    size_t shown = 0;
    for (size_t i = 0; i < n; i++) {
        size_t before = w.len;
        if (shown > 0) jw_lit(&w, ",");
        if (!write_delivery(&w, st, t.topic.name, &ds[i], &bytes)) {
            w.len = before; /* aged out: it comes back when its invisibility ends */
            continue;
        }
        shown++;
    }
    jw_lit(&w, "]}");
    free(ds);
    json_decref(root);
    topic_count_traffic(broker_topics(b), t.topic.name, true, shown, bytes);
    size_t len = 0;
    char *text = jw_take(&w, &len);
    if (!text) return gw_reply_err(r, MQ_ERR_NOMEM, "receive");
    return gw_reply_json_text(r, 200, text, len);
}

/* ======================================================================
 * POST /v1/groups/{group}/ack and /nack
 * ====================================================================== */

/* The group for an ack or nack: it must exist (no auto-create). */
static bool ack_group(GwRequest *r, const char *group, MetaGroup *g, enum MHD_Result *ret) {
    int rc = group_get(broker_groups(gw_broker(r)), group, g);
    if (rc == MQ_OK) return true;
    if (rc == MQ_ERR_NOTFOUND)
        *ret = gw_reply_error(r, 404, "GROUP_NOT_FOUND", "group '%s' does not exist", group);
    else
        *ret = gw_reply_err(r, rc, group);
    return false;
}

enum MHD_Result h_consume_ack(GwRequest *r, const RtMatch *m) {
    enum MHD_Result ret;
    const char *group = group_param(r, m, &ret);
    if (!group) return ret;
    const char *ct = gw_header(r, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (ct && strncasecmp(ct, "application/json", 16) != 0)
        return gw_reply_error(r, 415, NULL, "Content-Type must be application/json");
    AckReq a;
    GwProblem prob = {0};
    if (!ack_decode_fast(r->body, r->body_len, &a) &&
        !ack_decode_json(r->body, r->body_len, &a, &prob))
        return gw_reply_problem(r, &prob);
    MetaGroup g;
    if (!ack_group(r, group, &g, &ret)) {
        ack_req_free(&a);
        return ret;
    }
    PopResult *res = malloc(a.n * sizeof(*res));
    int rc = res ? pop_ack(broker_pop(gw_broker(r)), &g, a.topic, a.handles, a.lens, a.n, res)
                 : MQ_ERR_NOMEM;
    JsonW w;
    jw_init(&w, 32 + a.n * 96);
    jw_lit(&w, "{\"results\":[");
    for (size_t i = 0; rc == MQ_OK && i < a.n; i++) {
        if (i) jw_lit(&w, ",");
        jw_lit(&w, "{\"receiptHandle\":");
        jw_str(&w, a.handles[i], a.lens[i]);
        jw_lit(&w, ",\"status\":\"");
        const char *name = pop_result_name(res[i]);
        jw_raw(&w, name, strlen(name));
        jw_lit(&w, "\"}");
    }
    jw_lit(&w, "]}");
    free(res);
    ack_req_free(&a);
    if (rc != MQ_OK) {
        jw_free(&w);
        return gw_reply_err(r, rc, "ack");
    }
    size_t len = 0;
    char *text = jw_take(&w, &len);
    if (!text) return gw_reply_err(r, MQ_ERR_NOMEM, "ack");
    return gw_reply_json_text(r, 200, text, len);
}

enum MHD_Result h_consume_nack(GwRequest *r, const RtMatch *m) {
    enum MHD_Result ret;
    const char *group = group_param(r, m, &ret);
    if (!group) return ret;
    json_t *root = NULL;
    GwProblem prob = {0};
    static const char *const names[] = {"topic", "receiptHandle", "delayMs", NULL};
    json_t *v[3];
    const char *topic = NULL;
    int64_t delay_ms = -1;
    if (!gw_json_object(r, true, &root, &prob) || !gw_json_fields(root, names, v, "", &prob) ||
        !topic_field(v[0], &topic, &prob) ||
        !int_field(v[2], "delayMs", 0, NACK_DELAY_MAX_MS, &delay_ms, &prob)) {
        json_decref(root);
        return gw_reply_problem(r, &prob);
    }
    if (!json_is_string(v[1])) {
        json_decref(root);
        return gw_reply_error(r, 400, "INVALID_FIELD", "'receiptHandle' is required: a string");
    }
    MetaGroup g;
    if (!ack_group(r, group, &g, &ret)) {
        json_decref(root);
        return ret;
    }
    PopResult res = POP_INVALID;
    int rc = pop_nack(broker_pop(gw_broker(r)), &g, topic, json_string_value(v[1]),
                      json_string_length(v[1]), delay_ms, &res);
    if (rc != MQ_OK) {
        json_decref(root);
        return gw_reply_err(r, rc, "nack");
    }
    JsonW w;
    jw_init(&w, 128);
    jw_lit(&w, "{\"receiptHandle\":");
    jw_str(&w, json_string_value(v[1]), json_string_length(v[1]));
    jw_lit(&w, ",\"status\":\"");
    const char *name = pop_result_name(res);
    jw_raw(&w, name, strlen(name));
    jw_lit(&w, "\"}");
    json_decref(root);
    size_t len = 0;
    char *text = jw_take(&w, &len);
    if (!text) return gw_reply_err(r, MQ_ERR_NOMEM, "nack");
    return gw_reply_json_text(r, 200, text, len);
}

/* ======================================================================
 * GET /v1/groups/{group}/stream?topic=T
 * ====================================================================== */

/* Appends 'n' bytes to the stream buffer. */
static bool buf_add(ConsumeCtx *c, const char *s, size_t n) {
    if (n == 0) return true; /* realloc(p, 0) would free 'p' */
    char *nb = realloc(c->buf, c->len + n);
    if (!nb) return false;
    c->buf = nb;
    memcpy(c->buf + c->len, s, n);
    c->len += n;
    return true;
}

/* Fetches deliveries into the buffer as events:
 *   id: <receipt handle>
 *   event: message
 *   data: <message object>
 * Returns the number written; < 0 on an error (also written, as an
 * "event: error" with the code). */
static long fill_stream(ConsumeCtx *c, ConsumeTarget *t) {
    GwRequest *r = c->req;
    Broker *b = gw_broker(r);
    Store *st = broker_store(b);
    PopDelivery *ds = malloc((size_t)c->args.max_messages * sizeof(*ds));
    size_t n = 0;
    bool more = false;
    int rc = ds ? receive_some(b, t, c->args.max_messages, c->args.invisible_ms, ds, &n, &more)
                : MQ_ERR_NOMEM;
    if (rc == MQ_OK && n == 0 && more) {
        /* Only filtered-out messages so far: write a comment (MHD sends
         * it and calls again), so this worker serves others meanwhile. */
        static const char scan[] = ": scanning\n\n";
        free(ds);
        return buf_add(c, scan, sizeof(scan) - 1) ? 1 : -1;
    }
    if (rc != MQ_OK) {
        free(ds);
        char ev[160];
        int k = snprintf(ev, sizeof(ev), "event: error\ndata: {\"code\":\"%s\"}\n\n",
                         mq_strerror(rc));
        buf_add(c, ev, (size_t)k);
        return -1;
    }
    JsonW w;
    jw_init(&w, n * 700 + 64);
    size_t shown = 0;
    uint64_t bytes = 0;
    /* Room to remember each delivery until MHD has taken it (n > 0 here:
     * realloc to 0 bytes would free).  Without it they just wait out
     * their invisibility if the client goes away. */
    size_t *ends = NULL;
    if (n > 0) {
        char(*handles)[RECEIPT_LEN + 1] =
            realloc(c->unsent, (c->n_unsent + n) * sizeof(*handles));
        if (handles) c->unsent = handles;
        ends = handles ? realloc(c->unsent_end, (c->n_unsent + n) * sizeof(*ends)) : NULL;
        if (ends) c->unsent_end = ends;
    }
    for (size_t i = 0; i < n; i++) {
        size_t before = w.len;
        jw_lit(&w, "id: ");
        jw_raw(&w, ds[i].handle, RECEIPT_LEN);
        jw_lit(&w, "\nevent: message\ndata: ");
        if (!write_delivery(&w, st, t->topic.name, &ds[i], &bytes)) {
            w.len = before;
            continue;
        }
        jw_lit(&w, "\n\n");
        shown++;
        if (ends) {
            memcpy(c->unsent[c->n_unsent], ds[i].handle, RECEIPT_LEN + 1);
            c->unsent_end[c->n_unsent++] = c->len + w.len;
        }
    }
    free(ds);
    if (w.failed) {
        jw_free(&w);
        return -1;
    }
    bool ok = buf_add(c, w.buf, w.len);
    jw_free(&w);
    if (!ok) return -1;
    c->sent += shown;
    topic_count_traffic(broker_topics(b), t->topic.name, true, shown, bytes);
    return (long)shown;
}

/* Resolves the stream's target again (settings may have changed). */
static bool stream_target(ConsumeCtx *c, ConsumeTarget *t) {
    Broker *b = gw_broker(c->req);
    if (group_get(broker_groups(b), c->group, &t->group) != MQ_OK) return false;
    if (!t->group.consume_enable || t->group.broadcast) return false;
    if (topic_get(broker_topics(b), c->topic, &t->topic) != MQ_OK) return false;
    Sql92Error err;
    return filter_cache_get(broker_filters(b), c->args.filter_type, c->expression,
                            c->args.expression_len, &t->filter, &err) == MQ_OK;
}

/* MHD's content reader, on the connection's worker. */
static ssize_t stream_read(void *cls, uint64_t pos, char *out, size_t max) {
    (void)pos;
    ConsumeCtx *c = cls;
    GwRequest *r = c->req;
    stop_waiting(c);
    for (;;) {
        if (c->pos < c->len) {
            size_t n = c->len - c->pos;
            if (n > max) n = max;
            memcpy(out, c->buf + c->pos, n);
            c->pos += n;
            if (c->pos == c->len) c->pos = c->len = c->n_unsent = 0;
            return (ssize_t)n;
        }
        if (gw_is_stopping(r) || atomic_load(&c->reason) == (int)LP_STOPPING)
            return MHD_CONTENT_READER_END_OF_STREAM;
        ConsumeTarget t = {0};
        if (!stream_target(c, &t)) {
            static const char gone[] = "event: end\ndata: {\"reason\":\"the group or topic "
                                       "is gone or no longer consumable\"}\n\n";
            if (c->len == 0 && buf_add(c, gone, sizeof(gone) - 1)) {
                c->next_ping_ns = INT64_MAX; /* ends after this */
                continue;
            }
            return MHD_CONTENT_READER_END_OF_STREAM;
        }
        if (c->next_ping_ns == INT64_MAX) {
            filter_unref(t.filter);
            return MHD_CONTENT_READER_END_OF_STREAM;
        }
        Store *st = broker_store(gw_broker(r));
        char retry[MSG_SYSTEM_NAME_MAX + 1];
        uint32_t retry_queues = retry_source(gw_broker(r), &t.group, retry);
        uint64_t seen = arrivals(st, &t, retry, retry_queues);
        long got = fill_stream(c, &t);
        if (got != 0) {
            filter_unref(t.filter);
            if (got < 0 && c->len == 0) return MHD_CONTENT_READER_END_WITH_ERROR;
            continue;
        }
        int64_t now = mq_mono_ns();
        if (now >= c->next_ping_ns) {
            filter_unref(t.filter);
            static const char ping[] = ": keep-alive\n\n";
            c->next_ping_ns = now + broker_config(gw_broker(r))->sse_keepalive_ms * 1000000;
            if (!buf_add(c, ping, sizeof(ping) - 1)) return MHD_CONTENT_READER_END_WITH_ERROR;
            continue;
        }
        /* Nothing to send: wait (suspended) for an arrival or the next
         * keep-alive; MHD calls this again once resumed. */
        wait_for_messages(r, c, &t, c->next_ping_ns, seen);
        filter_unref(t.filter);
        return 0;
    }
}

static bool query_int(const char *s, const char *name, int64_t lo, int64_t hi, int64_t *out,
                      GwProblem *p) {
    if (!s) return true;
    int64_t v = 0;
    if (!gw_parse_u63(s, &v) || v < lo || v > hi)
        return gw_fail(p, 400, "INVALID_PARAMETER", "'%s' must be an integer in %lld..%lld",
                       name, (long long)lo, (long long)hi);
    *out = v;
    return true;
}

enum MHD_Result h_consume_stream(GwRequest *r, const RtMatch *m) {
    enum MHD_Result ret;
    const char *group = group_param(r, m, &ret);
    if (!group) return ret;
    static const char *const known[] = {"topic",       "type",        "expression",
                                        "maxMessages", "invisibleMs", "clientId", NULL};
    const char *q[6];
    const char *bad = gw_query_collect(r, known, q);
    if (bad) {
        return gw_reply_error(r, 400, "INVALID_PARAMETER", "unknown query parameter '%.64s'",
                              bad);
    }
    GwProblem prob = {0};
    ConsumeArgs a = {.topic = q[0],
                     .filter_type = FILTER_TAG,
                     .expression = q[2] ? q[2] : "*",
                     .max_messages = STREAM_DEFAULT_MAX,
                     .invisible_ms = INVISIBLE_DEFAULT_MS,
                     .client_id = q[5]};
    a.expression_len = strlen(a.expression);
    if (!a.topic) {
        return gw_reply_error(r, 400, "INVALID_PARAMETER", "'topic' is required: "
                              "?topic=<topic name>");
    }
    const char *why = msg_name_problem(a.topic, strlen(a.topic));
    if (why) return gw_reply_error(r, 400, "INVALID_NAME", "topic '%.200s': %s", a.topic, why);
    if (q[1] && !filter_type_parse(q[1], &a.filter_type))
        return gw_reply_error(r, 400, "INVALID_PARAMETER", "'type' must be TAG or SQL92");
    if (a.filter_type == FILTER_SQL92 && !q[2])
        return gw_reply_error(r, 400, "INVALID_PARAMETER", "an SQL92 filter needs 'expression'");
    if (a.expression_len > 4096)
        return gw_reply_error(r, 400, "INVALID_PARAMETER", "'expression' is longer than 4096 "
                              "bytes");
    if (!query_int(q[3], "maxMessages", 1, POP_MAX_MESSAGES, &a.max_messages, &prob) ||
        !query_int(q[4], "invisibleMs", INVISIBLE_MIN_MS, INVISIBLE_MAX_MS, &a.invisible_ms,
                   &prob))
        return gw_reply_problem(r, &prob);
    if (a.client_id && !mb_client_id_valid(a.client_id))
        return gw_reply_error(r, 400, "INVALID_PARAMETER", "'clientId' must be 1..255 "
                              "characters of [A-Za-z0-9_.:@-]");
    ConsumeTarget t = {0};
    if (!resolve(r, group, &a, h_consume_stream, &t, &ret)) return ret;
    filter_unref(t.filter);

    ConsumeCtx *c = ctx_of(r);
    if (!c) return gw_reply_err(r, MQ_ERR_NOMEM, "stream");
    c->stream = true;
    c->args = a;
    snprintf(c->group, sizeof(c->group), "%s", group);
    snprintf(c->topic, sizeof(c->topic), "%s", a.topic);
    c->expression = strdup(a.expression);
    c->client = a.client_id ? strdup(a.client_id) : NULL;
    if (!c->expression || (a.client_id && !c->client)) return gw_reply_err(r, MQ_ERR_NOMEM, "stream");
    c->args.topic = c->topic;
    c->args.expression = c->expression;
    c->args.client_id = c->client;
    /* A first comment right away, so clients see the stream is open. */
    static const char hello[] = ": stream open\n\n";
    if (!buf_add(c, hello, sizeof(hello) - 1)) return gw_reply_err(r, MQ_ERR_NOMEM, "stream");
    c->next_ping_ns = mq_mono_ns() + broker_config(gw_broker(r))->sse_keepalive_ms * 1000000;
    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, STREAM_BLOCK, stream_read, c, NULL);
    if (!resp) return gw_reply_err(r, MQ_ERR_NOMEM, "stream");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    return gw_reply(r, 200, resp);
}
