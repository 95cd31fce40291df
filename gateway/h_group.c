/*
 * h_group.c - subscription groups: admin (GET /v1/groups, GET/PUT/DELETE
 * /v1/groups/{group}), consume progress (GET /v1/groups/{group}/progress)
 * and the group's broker-kept consumer offsets (GET/PUT
 * /v1/groups/{group}/offsets, POST .../offsets/reset).
 * Groups live in the broker's GroupRegistry (core/group.h), written through
 * to meta.db, so PUT and DELETE run on the job runner (jobs.h); reads are
 * answered on the MHD worker from memory: the registry, the live-consumer
 * table (core/members.h), the store's queue positions and meta's in-memory
 * offset table.  Offsets reach meta.db in batches every
 * offsetFlushInterval and at shutdown: an offset request never writes
 * sqlite.  The offset routes accept any valid, unreserved group name, a
 * group that does not exist (yet) included.  docs/groups.md.
 */
#include "handlers.h"
#include "req.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "broker.h"
#include "json.h"
#include "msg.h"
#include "topic.h"

#define OFFSETS_MAX 1000 /* entries of one batch PUT */

/* One offset to store, checked. */
typedef struct OffEntry {
    const char *topic; /* borrowed from the JSON tree */
    uint32_t queue_id;
    uint64_t offset;
} OffEntry;

/* The {group} of 'm' if it is a valid, unreserved name; else answers 400
 * INVALID_NAME into '*ret' and returns NULL. */
static const char *group_param(GwRequest *r, const RtMatch *m, enum MHD_Result *ret) {
    const char *group = rt_param(m, "group");
    const char *why = msg_name_problem(group, strlen(group));
    if (!why) return group;
    *ret = gw_reply_error(r, 400, "INVALID_NAME", "group '%.200s': %s", group, why);
    return NULL;
}

/* Looks the topic 'name' up for an offset: name rules, then existence. */
static bool find_topic(GwRequest *r, const char *name, const char *where, MetaTopic *t,
                       GwProblem *p) {
    const char *why = msg_name_problem(name, strlen(name));
    if (why) return gw_fail(p, 400, "INVALID_NAME", "%stopic '%.200s': %s", where, name, why);
    int rc = topic_get(broker_topics(gw_broker(r)), name, t);
    if (rc == MQ_ERR_NOTFOUND) {
        return gw_fail(p, 404, "TOPIC_NOT_FOUND", "%stopic '%s' does not exist", where, name);
    }
    if (rc != MQ_OK) {
        return gw_fail(p, gw_status_for(rc), NULL, "%stopic '%s': %s", where, name,
                    mq_strerror(rc));
    }
    return true;
}

/* Appends {"topic","queueId","offset"} to 'arr'. */
static int add_entry(json_t *arr, const char *topic, uint32_t queue_id, uint64_t off) {
    json_t *one = json_pack("{s:s, s:I, s:I}", "topic", topic, "queueId", (json_int_t)queue_id,
                            "offset", (json_int_t)off);
    if (!one || json_array_append_new(arr, one) != 0) return 1;
    return 0;
}

static int list_one(void *arg, const char *topic, uint32_t queue_id, uint64_t off) {
    return add_entry(arg, topic, queue_id, off);
}

/* ======================================================================
 * GET /v1/groups/{group}/offsets[?topic=T]
 * ====================================================================== */

enum MHD_Result h_group_offsets_get(GwRequest *r, const RtMatch *m) {
    static const char *const known[] = {"topic", NULL};
    enum MHD_Result ret;
    const char *group = group_param(r, m, &ret);
    if (!group) return ret;
    if (!gw_query_known(r, known, &ret)) return ret;
    const char *topic = gw_query(r, "topic");
    GwProblem prob = {0};
    MetaTopic t;
    if (topic && !find_topic(r, topic, "", &t, &prob)) return gw_reply_problem(r, &prob);
    json_t *arr = json_array();
    if (!arr) return gw_reply_err(r, MQ_ERR_NOMEM, group);
    int rc = meta_offset_list(broker_meta(gw_broker(r)), group, topic, list_one, arr);
    if (rc != MQ_OK) {
        json_decref(arr);
        return gw_reply_err(r, rc, group);
    }
    return gw_reply_json(r, 200, arr);
}

/* ======================================================================
 * PUT /v1/groups/{group}/offsets
 * ====================================================================== */

/* Decodes and checks one {"topic","queueId","offset"} object: the topic
 * exists, queueId is below its read queue count and offset lies in
 * [0, the queue's maxOffset].  'where' prefixes messages. */
static bool decode_entry(GwRequest *r, json_t *o, const char *where, OffEntry *e, GwProblem *p) {
    if (!json_is_object(o)) return gw_fail(p, 400, "INVALID_FIELD", "%sentry must be an object",
                                        where);
    static const char *const names[] = {"topic", "queueId", "offset", NULL};
    json_t *f[3];
    if (!gw_json_fields(o, names, f, where, p)) return false;
    json_t *topic = f[0];
    json_t *qid = f[1];
    json_t *off = f[2];
    if (!json_is_string(topic)) {
        return gw_fail(p, 400, "INVALID_FIELD", "%stopic is required and must be a string", where);
    }
    if (!json_is_integer(qid) || json_integer_value(qid) < 0) {
        return gw_fail(p, 400, "INVALID_FIELD", "%squeueId is required and must be a "
                    "non-negative integer", where);
    }
    if (!json_is_integer(off) || json_integer_value(off) < 0) {
        return gw_fail(p, 400, "INVALID_FIELD", "%soffset is required and must be a "
                    "non-negative integer", where);
    }
    e->topic = json_string_value(topic);
    MetaTopic t;
    if (!find_topic(r, e->topic, where, &t, p)) return false;
    json_int_t q = json_integer_value(qid);
    if (q >= (json_int_t)t.read_queues) {
        return gw_fail(p, 400, "INVALID_FIELD", "%squeueId %lld is out of range: topic '%s' has "
                    "%u read queues", where, (long long)q, e->topic, t.read_queues);
    }
    e->queue_id = (uint32_t)q;
    e->offset = (uint64_t)json_integer_value(off);
    uint64_t qmin = 0;
    uint64_t qmax = 0;
    store_queue_range(broker_store(gw_broker(r)), mq_slice(e->topic, strlen(e->topic)),
                      e->queue_id, &qmin, &qmax);
    if (e->offset > qmax) {
        return gw_fail(p, 400, "INVALID_FIELD", "%soffset %llu is past the end of queue %u of "
                    "topic '%s' (maxOffset %llu)", where, (unsigned long long)e->offset,
                    e->queue_id, e->topic, (unsigned long long)qmax);
    }
    return true;
}

/* Stores the 'n' checked entries and answers them in request order.  A
 * queue the group receives from (pop.h) restarts there too. */
static enum MHD_Result store_entries(GwRequest *r, const char *group, const OffEntry *es,
                                     size_t n) {
    /* A broadcast group's consumers keep their own offsets (RocketMQ's
     * LocalFileOffsetStore): the broker keeps none for it. */
    MetaGroup g;
    if (group_get(broker_groups(gw_broker(r)), group, &g) == MQ_OK && g.broadcast) {
        return gw_reply_error(r, 409, "BROADCAST_GROUP", "group '%s' is a broadcast group: its "
                              "consumers keep their own offsets", group);
    }
    Meta *meta = broker_meta(gw_broker(r));
    PopEngine *pop = broker_pop(gw_broker(r));
    json_t *arr = json_array();
    if (!arr) return gw_reply_err(r, MQ_ERR_NOMEM, group);
    for (size_t i = 0; i < n; i++) {
        int rc = pop_reset_offset(pop, group, es[i].topic, es[i].queue_id, es[i].offset);
        if (rc == MQ_OK)
            rc = meta_offset_set(meta, group, es[i].topic, es[i].queue_id, es[i].offset);
        if (rc != MQ_OK) {
            json_decref(arr);
            return gw_reply_err(r, rc, group);
        }
        if (add_entry(arr, es[i].topic, es[i].queue_id, es[i].offset) != 0) {
            json_decref(arr);
            return gw_reply_err(r, MQ_ERR_NOMEM, group);
        }
    }
    return gw_reply_json(r, 200, arr);
}

enum MHD_Result h_group_offsets_put(GwRequest *r, const RtMatch *m) {
    enum MHD_Result ret;
    const char *group = group_param(r, m, &ret);
    if (!group) return ret;
    GwProblem prob = {0};
    json_t *root = NULL;
    if (!gw_json_object(r, true, &root, &prob)) return gw_reply_problem(r, &prob);
    json_t *batch = NULL;
    size_t count = 1;
    if (!gw_json_batch(root, "offsets", OFFSETS_MAX, &batch, &count, &prob)) {
        json_decref(root);
        return gw_reply_problem(r, &prob);
    }
    OffEntry *es = calloc(count, sizeof(*es));
    if (!es) {
        json_decref(root);
        return gw_reply_err(r, MQ_ERR_NOMEM, group);
    }
    /* Every entry is checked before any is stored: all or none. */
    for (size_t i = 0; i < count; i++) {
        char where[32] = "";
        if (batch) snprintf(where, sizeof(where), "offsets[%zu].", i);
        if (!decode_entry(r, batch ? json_array_get(batch, i) : root, where, &es[i], &prob)) {
            free(es);
            json_decref(root);
            return gw_reply_problem(r, &prob);
        }
    }
    ret = store_entries(r, group, es, count);
    free(es);
    json_decref(root);
    return ret;
}

/* ======================================================================
 * POST /v1/groups/{group}/offsets/reset
 * ====================================================================== */

enum MHD_Result h_group_offsets_reset(GwRequest *r, const RtMatch *m) {
    enum MHD_Result ret;
    const char *group = group_param(r, m, &ret);
    if (!group) return ret;
    GwProblem prob = {0};
    json_t *root = NULL;
    if (!gw_json_object(r, true, &root, &prob)) return gw_reply_problem(r, &prob);
    static const char *const names[] = {"topic", "timestamp", NULL};
    json_t *f[2];
    if (!gw_json_fields(root, names, f, "", &prob)) {
        json_decref(root);
        return gw_reply_problem(r, &prob);
    }
    json_t *topic = f[0];
    json_t *ts = f[1];
    if (!json_is_string(topic)) {
        json_decref(root);
        return gw_reply_error(r, 400, "INVALID_FIELD", "topic is required and must be a "
                              "string");
    }
    if (!json_is_integer(ts) || json_integer_value(ts) < 0) {
        json_decref(root);
        return gw_reply_error(r, 400, "INVALID_FIELD", "timestamp is required and must be a "
                              "non-negative integer (epoch ms)");
    }
    MetaTopic t;
    if (!find_topic(r, json_string_value(topic), "", &t, &prob)) {
        json_decref(root);
        return gw_reply_problem(r, &prob);
    }
    int64_t ts_ms = (int64_t)json_integer_value(ts);
    json_decref(root);

    Store *st = broker_store(gw_broker(r));
    MqSlice name = mq_slice(t.name, strlen(t.name));
    OffEntry *es = calloc(t.read_queues ? t.read_queues : 1, sizeof(*es));
    if (!es) return gw_reply_err(r, MQ_ERR_NOMEM, group);
    for (uint32_t q = 0; q < t.read_queues; q++) {
        uint64_t off = 0;
        int rc = store_offset_for_time(st, name, q, ts_ms, &off);
        if (rc == MQ_ERR_NOTFOUND) {
            off = 0; /* the queue never had a message */
        } else if (rc != MQ_OK) {
            free(es);
            return gw_reply_err(r, rc, t.name);
        }
        es[q] = (OffEntry){t.name, q, off};
    }
    ret = store_entries(r, group, es, t.read_queues);
    free(es);
    return ret;
}

/* ======================================================================
 * The group object and its lookups
 * ====================================================================== */

/* The group object: settings plus its retry and dead-letter topic names. */
static json_t *group_json(const MetaGroup *g) {
    char retry[MSG_SYSTEM_NAME_MAX + 1];
    char dlq[MSG_SYSTEM_NAME_MAX + 1];
    group_retry_topic(g->name, retry, sizeof(retry));
    group_dlq_topic(g->name, dlq, sizeof(dlq));
    return json_pack("{s:s, s:b, s:b, s:b, s:I, s:I, s:I, s:I, s:s, s:s}", "name", g->name,
                     "consumeEnable", (int)g->consume_enable, "broadcast", (int)g->broadcast,
                     "orderly", (int)g->orderly, "retryMaxTimes", (json_int_t)g->retry_max_times,
                     "retryQueueNums", (json_int_t)g->retry_queue_nums, "createdTimestamp",
                     (json_int_t)g->created_ms, "updatedTimestamp", (json_int_t)g->updated_ms,
                     "retryTopic", retry, "dlqTopic", dlq);
}

/* Looks the {group} of 'm' up: true with '*g', or the answer was sent
 * (400 INVALID_NAME, 404 GROUP_NOT_FOUND) and MHD's result is in '*ret'. */
static bool find_group(GwRequest *r, const RtMatch *m, MetaGroup *g, enum MHD_Result *ret) {
    const char *name = group_param(r, m, ret);
    if (!name) return false;
    int rc = group_get(broker_groups(gw_broker(r)), name, g);
    if (rc == MQ_OK) return true;
    if (rc == MQ_ERR_NOTFOUND) {
        *ret = gw_reply_error(r, 404, "GROUP_NOT_FOUND", "group '%s' does not exist", name);
    } else {
        *ret = gw_reply_err(r, rc, name);
    }
    return false;
}

/* Every (group, topic) that has offsets, sorted by group then topic:
 * built once (meta_offset_pairs, one pass over the offset table) by a
 * request that asks about every group, instead of one table scan per
 * group. */
typedef struct PairIndex {
    char **groups; /* parallel arrays of owned copies */
    char **topics;
    size_t n, cap;
    bool failed; /* out of memory while building */
} PairIndex;

static int pair_add(void *arg, const char *group, const char *topic) {
    PairIndex *x = arg;
    if (x->n == x->cap) {
        size_t cap = x->cap ? x->cap * 2 : 64;
        char **g = realloc(x->groups, cap * sizeof(*g));
        if (g) x->groups = g;
        char **t = g ? realloc(x->topics, cap * sizeof(*t)) : NULL;
        if (t) x->topics = t;
        if (!g || !t) {
            x->failed = true;
            return 1;
        }
        x->cap = cap;
    }
    x->groups[x->n] = strdup(group);
    x->topics[x->n] = strdup(topic);
    if (!x->groups[x->n] || !x->topics[x->n]) {
        free(x->groups[x->n]);
        free(x->topics[x->n]);
        x->failed = true;
        return 1;
    }
    x->n++;
    return 0;
}

static void pairs_free(PairIndex *x) {
    for (size_t i = 0; i < x->n; i++) {
        free(x->groups[i]);
        free(x->topics[i]);
    }
    free(x->groups);
    free(x->topics);
}

/* Fills '*x'; MQ_OK or MQ_ERR_NOMEM (nothing to free then). */
static int pairs_build(Broker *b, PairIndex *x) {
    memset(x, 0, sizeof(*x));
    int rc = meta_offset_pairs(broker_meta(b), pair_add, x);
    if (rc == MQ_OK && x->failed) rc = MQ_ERR_NOMEM;
    if (rc != MQ_OK) pairs_free(x);
    return rc;
}

/* ======================================================================
 * GET /v1/groups and GET /v1/groups/{group}
 * ====================================================================== */

/* group_list's accumulator: it stops early but answers MQ_OK, so a
 * failure is noted here. */
typedef struct GroupListCtx {
    json_t *arr;
    Broker *lag_of;       /* ?lag=true: the broker to add each group's lag from */
    const PairIndex *idx; /* and its (group, topic) pairs */
    bool failed;          /* out of memory: the list is incomplete */
} GroupListCtx;

static bool add_group_lag(Broker *b, const PairIndex *idx, const MetaGroup *g, json_t *o);

static int group_list_one(void *arg, const MetaGroup *g) {
    GroupListCtx *c = arg;
    json_t *one = group_json(g);
    if (one && c->lag_of && !add_group_lag(c->lag_of, c->idx, g, one)) {
        json_decref(one);
        one = NULL;
    }
    if (!one || json_array_append_new(c->arr, one) != 0) {
        c->failed = true;
        return 1;
    }
    return 0;
}

/* GET /v1/groups[?lag=true]: every group; with lag, each also has
 * "totalLag" and "consumerCount" (for the console's table). */
enum MHD_Result h_group_list(GwRequest *r, const RtMatch *m) {
    (void)m;
    static const char *const known[] = {"lag", NULL};
    enum MHD_Result ret;
    if (!gw_query_known(r, known, &ret)) return ret;
    const char *lag = gw_query(r, "lag");
    if (lag && strcmp(lag, "true") != 0 && strcmp(lag, "false") != 0) {
        return gw_reply_error(r, 400, "INVALID_PARAMETER", "lag must be true or false");
    }
    GroupListCtx c = {json_array(), NULL, NULL, false};
    PairIndex idx = {0};
    int rc = c.arr ? MQ_OK : MQ_ERR_NOMEM;
    if (rc == MQ_OK && lag && strcmp(lag, "true") == 0) {
        c.lag_of = gw_broker(r);
        c.idx = &idx;
        mb_expire(broker_members(c.lag_of), mq_now_ms());
        rc = pairs_build(c.lag_of, &idx);
    }
    if (rc == MQ_OK) rc = group_list(broker_groups(gw_broker(r)), group_list_one, &c);
    if (c.idx) pairs_free(&idx);
    if (rc != MQ_OK || c.failed) {
        json_decref(c.arr);
        return gw_reply_err(r, rc != MQ_OK ? rc : MQ_ERR_NOMEM, "groups");
    }
    return gw_reply_json(r, 200, c.arr);
}

/* One subscription of a listed consumer: a pull client's {"topic","type",
 * "expression"} (+ "queueIds" under CONFIG); a pop client's topics carry
 * no filter (each receive names its own), so only {"topic"}. */
static json_t *subscription_json(const MbClientInfo *c, const MbSubscription *s) {
    if (c->kind != MB_PULL) return json_pack("{s:s}", "topic", s->topic);
    const char *expr = s->expression && s->expression[0] ? s->expression : "*";
    json_t *o = json_pack("{s:s, s:s, s:s}", "topic", s->topic, "type",
                          s->filter_type && s->filter_type[0] ? s->filter_type : "TAG",
                          "expression", expr);
    if (!o || c->strategy != RB_CONFIG) return o;
    json_t *qs = json_array();
    if (!qs || json_object_set_new(o, "queueIds", qs) != 0) {
        json_decref(o);
        return NULL;
    }
    for (size_t i = 0; i < s->n_config_queues; i++) {
        if (json_array_append_new(qs, json_integer((json_int_t)s->config_queues[i])) != 0) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

/* mb_list callback (under the table mutex: memory work only). */
static int consumer_one(void *arg, const MbClientInfo *c) {
    json_t *subs = json_array();
    json_t *one = json_pack("{s:s, s:s, s:o, s:I, s:o}", "clientId", c->client_id, "kind",
                            c->kind == MB_PULL ? "PULL" : "POP", "strategy",
                            c->kind == MB_PULL ? json_string(rb_strategy_name(c->strategy))
                                               : json_null(),
                            "lastHeartbeat", (json_int_t)c->last_seen_ms, "subscriptions",
                            json_incref(subs));
    bool ok = one && subs && json_array_append_new(arg, one) == 0;
    for (size_t i = 0; ok && i < c->n_subs; i++) {
        json_t *s = subscription_json(c, &c->subs[i]);
        ok = s && json_array_append_new(subs, s) == 0;
    }
    json_decref(subs);
    return ok ? 0 : 1;
}

/* GET /v1/groups/{group}: the group object plus "consumers", the live
 * clients (silent ones are dropped first). */
/* The messages stored in topic 'name' (all queues), as JSON; null when
 * the topic does not exist (a group's retry or DLQ topic before its first
 * message). */
static json_t *stored_count(Broker *b, const char *name) {
    MetaTopic t;
    if (topic_get(broker_topics(b), name, &t) != MQ_OK) return json_null();
    MqSlice topic = mq_slice(t.name, strlen(t.name));
    uint64_t n = 0;
    uint32_t queues = t.read_queues > t.write_queues ? t.read_queues : t.write_queues;
    for (uint32_t q = 0; q < queues; q++) {
        uint64_t min = 0, max = 0;
        store_queue_range(broker_store(b), topic, q, &min, &max);
        n += max > min ? max - min : 0;
    }
    return json_integer((json_int_t)n);
}

/* GET /v1/groups/{group}: the group object plus "consumers" (live) and
 * "retryMessages" / "dlqMessages" (stored in its retry and dead-letter
 * topics; null while a topic does not exist). */
enum MHD_Result h_group_get(GwRequest *r, const RtMatch *m) {
    MetaGroup g;
    enum MHD_Result ret;
    if (!find_group(r, m, &g, &ret)) return ret;
    Broker *b = gw_broker(r);
    MbTable *mb = broker_members(b);
    mb_expire(mb, mq_now_ms());
    char retry[MSG_SYSTEM_NAME_MAX + 1];
    char dlq[MSG_SYSTEM_NAME_MAX + 1];
    group_retry_topic(g.name, retry, sizeof(retry));
    group_dlq_topic(g.name, dlq, sizeof(dlq));
    json_t *root = group_json(&g);
    json_t *consumers = json_array();
    if (!root) json_decref(consumers);
    if (!root || !consumers || json_object_set_new(root, "consumers", consumers) != 0 ||
        json_object_set_new(root, "retryMessages", stored_count(b, retry)) != 0 ||
        json_object_set_new(root, "dlqMessages", stored_count(b, dlq)) != 0 ||
        mb_list(mb, g.name, consumer_one, consumers) != MQ_OK) {
        json_decref(root);
        return gw_reply_err(r, MQ_ERR_NOMEM, g.name);
    }
    return gw_reply_json(r, 200, root);
}

/* ======================================================================
 * PUT and DELETE /v1/groups/{group}: checked on the worker, written by a
 * job (sqlite); the resumed call answers from the GroupJob (req.h's
 * named-resource writes).  All group writes of the gateway run on that
 * one thread in order, so a PUT's read of the old settings and its write
 * are atomic with respect to the others.
 * ====================================================================== */

/* A group write across its job (GwRequest.ctx). */
typedef struct GroupJob {
    GwNameJob head;               /* broker, the {group} (checked), result; first */
    bool has[5];                  /* PUT: field i of put_fields was given */
    bool consume_enable;          /* PUT: the values given (else unused) */
    bool broadcast;
    bool orderly;
    uint32_t retry_max_times;
    uint32_t retry_queue_nums;
    MetaGroup g;                  /* PUT: the group as stored (head.rc MQ_OK) */
} GroupJob;

static const char *const put_fields[] = {"consumeEnable", "broadcast", "orderly",
                                         "retryMaxTimes", "retryQueueNums", NULL};

static json_t *put_body(const GwNameJob *head) {
    return group_json(&((const GroupJob *)head)->g);
}

static const GwNameKind group_kind = {"group", "GROUP_NOT_FOUND", put_body};

/* Job thread: fields left out keep their value (a new group: RocketMQ's
 * defaults, meta_group_defaults), then the write and the group read back. */
static void put_job(void *arg) {
    GroupJob *j = arg;
    GwNameJob *h = &j->head;
    GroupRegistry *reg = broker_groups(h->broker);
    MetaGroup g;
    if (group_get(reg, h->name, &g) != MQ_OK) meta_group_defaults(&g, h->name);
    if (j->has[0]) g.consume_enable = j->consume_enable;
    if (j->has[1]) g.broadcast = j->broadcast;
    if (j->has[2]) g.orderly = j->orderly;
    if (j->has[3]) g.retry_max_times = j->retry_max_times;
    if (j->has[4]) g.retry_queue_nums = j->retry_queue_nums;
    h->rc = group_put(reg, &g, &h->created);
    if (h->rc == MQ_OK) h->rc = group_get(reg, h->name, &j->g);
}

/* Checks the PUT body's values into 'j'. */
static bool decode_put(json_t *root, GroupJob *j, GwProblem *p) {
    json_t *f[5];
    if (!gw_json_fields(root, put_fields, f, "", p)) return false;
    bool *flags[3] = {&j->consume_enable, &j->broadcast, &j->orderly};
    for (size_t i = 0; i < 3; i++) {
        if (!f[i]) continue;
        if (!json_is_boolean(f[i]))
            return gw_fail(p, 400, "INVALID_FIELD", "%s must be a boolean", put_fields[i]);
        *flags[i] = json_is_true(f[i]);
        j->has[i] = true;
    }
    static const json_int_t lo[2] = {0, 1};
    static const json_int_t hi[2] = {GROUP_RETRY_MAX_TIMES_MAX, GROUP_RETRY_QUEUES_MAX};
    uint32_t *ints[2] = {&j->retry_max_times, &j->retry_queue_nums};
    for (size_t i = 0; i < 2; i++) {
        json_t *v = f[3 + i];
        if (!v) continue;
        if (!json_is_integer(v) || json_integer_value(v) < lo[i] ||
            json_integer_value(v) > hi[i]) {
            return gw_fail(p, 400, "INVALID_FIELD", "%s must be an integer from %lld to %lld",
                           put_fields[3 + i], (long long)lo[i], (long long)hi[i]);
        }
        *ints[i] = (uint32_t)json_integer_value(v);
        j->has[3 + i] = true;
    }
    return true;
}

/* PUT /v1/groups/{group} {"consumeEnable","broadcast","orderly",
 * "retryMaxTimes","retryQueueNums"}, every field optional (an empty body
 * too): 201 created, 200 updated, the body is the group object. */
enum MHD_Result h_group_put(GwRequest *r, const RtMatch *m) {
    enum MHD_Result ret;
    const char *name = group_param(r, m, &ret);
    if (!name) return ret;
    const char *ct = gw_header(r, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (ct && strncasecmp(ct, "application/json", 16) != 0) {
        return gw_reply_error(r, 415, NULL, "Content-Type must be application/json");
    }
    GroupJob *j = gw_name_job_new(r, sizeof(*j), &group_kind, name, &ret);
    if (!j) return ret;
    GwProblem prob = {0};
    if (r->body_len > 0) {
        json_t *root = NULL;
        if (!gw_json_object(r, false, &root, &prob)) return gw_reply_problem(r, &prob);
        bool ok = decode_put(root, j, &prob);
        json_decref(root);
        if (!ok) return gw_reply_problem(r, &prob);
    }
    return gw_offload(r, put_job, gw_name_job_put_resumed);
}

/* Job thread: the row in meta.db (with the group's offsets), then the
 * receive state and the live consumers and locks of the group. */
static void delete_job(void *arg) {
    GwNameJob *j = arg; /* the head of a GroupJob */
    j->rc = group_delete(broker_groups(j->broker), j->name);
    if (j->rc != MQ_OK) return;
    int rc = pop_drop_group(broker_pop(j->broker), j->name);
    if (rc != MQ_OK) {
        MQ_WARN("group '%s' deleted, but its receive state could not be dropped: %s", j->name,
                mq_strerror(rc));
    }
    mb_drop_group(broker_members(j->broker), j->name);
}

/* DELETE /v1/groups/{group}: 204, 404.  The name is checked here; the
 * delete is a job. */
enum MHD_Result h_group_delete(GwRequest *r, const RtMatch *m) {
    enum MHD_Result ret;
    const char *name = group_param(r, m, &ret);
    if (!name) return ret;
    if (!gw_name_job_new(r, sizeof(GroupJob), &group_kind, name, &ret)) return ret;
    return gw_offload(r, delete_job, gw_name_job_delete_resumed);
}

/* ======================================================================
 * GET /v1/groups/{group}/progress[?topic=T]
 *
 * Per read queue of a topic: brokerOffset (the queue's maxOffset),
 * minOffset, consumerOffset (the committed offset; 0 with hasOffset false
 * when the group never committed there), lag = brokerOffset -
 * max(consumerOffset, minOffset) (messages still stored and not consumed;
 * messages in flight in a receive count until acked), inflight
 * (pop_inflight) and lastTimestamp.  Without ?topic: every existing topic
 * the group has offsets in or a live consumer subscribes to.
 * ====================================================================== */

/* A growing list of topic names (owned copies). */
typedef struct NameList {
    char **names;
    size_t len;
    size_t cap;
} NameList;

static int names_add(NameList *l, const char *name) {
    if (l->len > 0 && strcmp(l->names[l->len - 1], name) == 0) return 0; /* listed in order */
    if (l->len == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        char **n = realloc(l->names, cap * sizeof(*n));
        if (!n) return 1;
        l->names = n;
        l->cap = cap;
    }
    l->names[l->len] = strdup(name);
    if (!l->names[l->len]) return 1;
    l->len++;
    return 0;
}

static void names_free(NameList *l) {
    for (size_t i = 0; i < l->len; i++) free(l->names[i]);
    free(l->names);
}

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int offset_topic(void *arg, const char *topic, uint32_t queue_id, uint64_t off) {
    (void)queue_id;
    (void)off;
    return names_add(arg, topic);
}

/* mb_list callback: the topics a live client subscribes to or pops from. */
static int consumer_topics(void *arg, const MbClientInfo *c) {
    for (size_t i = 0; i < c->n_subs; i++)
        if (names_add(arg, c->subs[i].topic) != 0) return 1;
    return 0;
}

/* The topics 'group' reads: those it has offsets in (from 'idx' when
 * given, else a scan of the offset table) and those a live consumer
 * subscribes to, sorted, each once (deleted topics included: callers look
 * each up).  MQ_OK or MQ_ERR_NOMEM; free with names_free. */
static int group_topics(Broker *b, const PairIndex *idx, const char *group, NameList *out) {
    memset(out, 0, sizeof(*out));
    int rc = MQ_OK;
    if (idx) {
        size_t lo = 0, hi = idx->n; /* the first pair of 'group' */
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (strcmp(idx->groups[mid], group) < 0) lo = mid + 1;
            else hi = mid;
        }
        for (size_t i = lo; rc == MQ_OK && i < idx->n && strcmp(idx->groups[i], group) == 0; i++)
            rc = names_add(out, idx->topics[i]) == 0 ? MQ_OK : MQ_ERR_NOMEM;
    } else {
        rc = meta_offset_list(broker_meta(b), group, NULL, offset_topic, out);
    }
    if (rc == MQ_OK) rc = mb_list(broker_members(b), group, consumer_topics, out);
    if (rc != MQ_OK) {
        names_free(out);
        return rc == 1 ? MQ_ERR_NOMEM : rc;
    }
    if (out->len > 1) qsort(out->names, out->len, sizeof(*out->names), cmp_names);
    size_t k = 0;
    for (size_t i = 0; i < out->len; i++) {
        if (k > 0 && strcmp(out->names[i], out->names[k - 1]) == 0) {
            free(out->names[i]);
        } else {
            out->names[k++] = out->names[i];
        }
    }
    out->len = k;
    return MQ_OK;
}

/* How far 'group' is in one read queue of 't'. */
typedef struct QueueProgress {
    uint64_t min, max; /* the queue's offsets now */
    uint64_t off;      /* committed offset, 0 when none */
    bool has_off;
    uint64_t lag;      /* max - max(off, min) */
    uint64_t inflight; /* handed out by receive, not acked */
    int64_t last_ts;   /* store time of the queue's last message, 0 none */
} QueueProgress;

static void queue_progress(Broker *b, const char *group, const MetaTopic *t, uint32_t q,
                           QueueProgress *p) {
    MqSlice name = mq_slice(t->name, strlen(t->name));
    store_queue_range(broker_store(b), name, q, &p->min, &p->max);
    p->has_off = meta_offset_get(broker_meta(b), group, t->name, q, &p->off) == MQ_OK;
    if (!p->has_off) p->off = 0;
    uint64_t from = p->off > p->min ? p->off : p->min;
    p->lag = p->max > from ? p->max - from : 0;
    p->inflight = pop_inflight(broker_pop(b), group, t->name, q);
    int64_t ts = store_queue_last_ts(broker_store(b), name, q);
    p->last_ts = ts > 0 ? ts : 0;
}

/* The lag and in-flight count of 'group' summed over the queues of 't'. */
static void topic_lag(Broker *b, const char *group, const MetaTopic *t, uint64_t *lag,
                      uint64_t *inflight) {
    for (uint32_t q = 0; q < t->read_queues; q++) {
        QueueProgress p;
        queue_progress(b, group, t, q, &p);
        *lag += p.lag;
        *inflight += p.inflight;
    }
}

/* {"topic","queues":[...],"totalLag"} of topic 't' for 'group'; its
 * total lag is added to '*total'. */
static json_t *topic_progress(Broker *b, const char *group, const MetaTopic *t, uint64_t *total) {
    json_t *queues = json_array();
    json_t *out = json_pack("{s:s, s:o}", "topic", t->name, "queues", json_incref(queues));
    uint64_t sum = 0;
    bool ok = out && queues;
    for (uint32_t q = 0; ok && q < t->read_queues; q++) {
        QueueProgress p;
        queue_progress(b, group, t, q, &p);
        sum += p.lag;
        json_t *one = json_pack(
            "{s:I, s:I, s:I, s:I, s:b, s:I, s:I, s:I}", "queueId", (json_int_t)q, "brokerOffset",
            (json_int_t)p.max, "minOffset", (json_int_t)p.min, "consumerOffset",
            (json_int_t)p.off, "hasOffset", (int)p.has_off, "lag", (json_int_t)p.lag,
            "inflight", (json_int_t)p.inflight, "lastTimestamp", (json_int_t)p.last_ts);
        ok = one && json_array_append_new(queues, one) == 0;
    }
    json_decref(queues);
    if (ok) ok = json_object_set_new(out, "totalLag", json_integer((json_int_t)sum)) == 0;
    if (!ok) {
        json_decref(out);
        return NULL;
    }
    *total += sum;
    return out;
}

/* Without ?topic: {"group","topics":[topic progress...],"totalLag"}. */
static enum MHD_Result all_topics_progress(GwRequest *r, const MetaGroup *g) {
    Broker *b = gw_broker(r);
    NameList names;
    mb_expire(broker_members(b), mq_now_ms());
    int rc = group_topics(b, NULL, g->name, &names);
    if (rc != MQ_OK) return gw_reply_err(r, rc, g->name);
    json_t *topics = json_array();
    uint64_t total = 0;
    bool ok = topics != NULL;
    for (size_t i = 0; ok && i < names.len; i++) {
        MetaTopic t;
        if (topic_get(broker_topics(b), names.names[i], &t) != MQ_OK) continue; /* gone */
        json_t *one = topic_progress(b, g->name, &t, &total);
        ok = one && json_array_append_new(topics, one) == 0;
    }
    names_free(&names);
    json_t *root = ok ? json_pack("{s:s, s:o, s:I}", "group", g->name, "topics", topics,
                                  "totalLag", (json_int_t)total)
                      : NULL;
    if (!root) {
        if (!ok) json_decref(topics);
        return gw_reply_err(r, MQ_ERR_NOMEM, g->name);
    }
    return gw_reply_json(r, 200, root);
}

/* Adds "totalLag" (over every topic the group reads) and "consumerCount"
 * to the group object 'o' of GET /v1/groups?lag=true.  False when out of
 * memory. */
static bool add_group_lag(Broker *b, const PairIndex *idx, const MetaGroup *g, json_t *o) {
    NameList names;
    if (group_topics(b, idx, g->name, &names) != MQ_OK) return false;
    uint64_t lag = 0;
    uint64_t inflight = 0;
    for (size_t i = 0; i < names.len; i++) {
        MetaTopic t;
        if (topic_get(broker_topics(b), names.names[i], &t) == MQ_OK)
            topic_lag(b, g->name, &t, &lag, &inflight);
    }
    names_free(&names);
    return json_object_set_new(o, "totalLag", json_integer((json_int_t)lag)) == 0 &&
           json_object_set_new(o, "consumerCount",
                               json_integer((json_int_t)mb_count(broker_members(b), g->name))) == 0;
}

/* ======================================================================
 * The groups reading one topic: GET /v1/topics/{topic}/groups, and
 * gw_topic_readers for the message track (h_message.c).
 * ====================================================================== */

typedef struct ReadersCtx {
    Broker *b;
    const PairIndex *idx;
    const char *topic;
    int (*fn)(void *arg, const MetaGroup *g);
    void *arg;
    int rc; /* MQ_ERR_NOMEM when a topic list failed */
} ReadersCtx;

static int reader_one(void *arg, const MetaGroup *g) {
    ReadersCtx *c = arg;
    NameList names;
    c->rc = group_topics(c->b, c->idx, g->name, &names);
    if (c->rc != MQ_OK) return 1;
    bool reads = names.len > 0 && /* bsearch wants a non-NULL base */
                 bsearch(&c->topic, names.names, names.len, sizeof(*names.names), cmp_names);
    names_free(&names);
    return reads ? c->fn(c->arg, g) : 0;
}

int gw_topic_readers(Broker *b, const char *topic, int (*fn)(void *arg, const MetaGroup *g),
                     void *arg) {
    mb_expire(broker_members(b), mq_now_ms());
    PairIndex idx;
    int rc = pairs_build(b, &idx);
    if (rc != MQ_OK) return rc;
    ReadersCtx c = {b, &idx, topic, fn, arg, MQ_OK};
    rc = group_list(broker_groups(b), reader_one, &c);
    pairs_free(&idx);
    return rc != MQ_OK ? rc : c.rc;
}

typedef struct TopicGroupsCtx {
    Broker *b;
    const MetaTopic *t;
    json_t *arr;
    bool failed; /* out of memory: the list is incomplete */
} TopicGroupsCtx;

static int topic_group_one(void *arg, const MetaGroup *g) {
    TopicGroupsCtx *c = arg;
    uint64_t lag = 0;
    uint64_t inflight = 0;
    topic_lag(c->b, g->name, c->t, &lag, &inflight);
    json_t *one = json_pack("{s:s, s:I, s:I, s:I}", "group", g->name, "totalLag",
                            (json_int_t)lag, "inflight", (json_int_t)inflight, "consumerCount",
                            (json_int_t)mb_count(broker_members(c->b), g->name));
    if (one && json_array_append_new(c->arr, one) == 0) return 0;
    c->failed = true;
    return 1;
}

/* GET /v1/topics/{topic}/groups: {"topic","groups":[{"group","totalLag",
 * "inflight","consumerCount"}]}, in group name order. */
enum MHD_Result h_topic_groups(GwRequest *r, const RtMatch *m) {
    enum MHD_Result ret;
    const char *name = rt_param(m, "topic");
    if (!h_topic_any_name_ok(r, name, &ret)) return ret;
    if (!gw_query_known(r, NULL, &ret)) return ret;
    GwProblem prob = {0};
    MetaTopic t;
    if (!find_topic(r, name, "", &t, &prob)) return gw_reply_problem(r, &prob);
    TopicGroupsCtx c = {gw_broker(r), &t, json_array(), false};
    int rc = c.arr ? gw_topic_readers(c.b, t.name, topic_group_one, &c) : MQ_ERR_NOMEM;
    json_t *root = rc == MQ_OK && !c.failed
                       ? json_pack("{s:s, s:O}", "topic", t.name, "groups", c.arr)
                       : NULL;
    json_decref(c.arr);
    if (!root) return gw_reply_err(r, rc != MQ_OK ? rc : MQ_ERR_NOMEM, t.name);
    return gw_reply_json(r, 200, root);
}

enum MHD_Result h_group_progress(GwRequest *r, const RtMatch *m) {
    static const char *const known[] = {"topic", NULL};
    MetaGroup g;
    enum MHD_Result ret;
    if (!group_param(r, m, &ret)) return ret;
    if (!gw_query_known(r, known, &ret)) return ret;
    const char *topic = gw_query(r, "topic");
    const char *why = topic ? msg_name_problem(topic, strlen(topic)) : NULL;
    if (why) return gw_reply_error(r, 400, "INVALID_NAME", "topic '%.200s': %s", topic, why);
    GwProblem prob = {0};
    MetaTopic t;
    if (!find_group(r, m, &g, &ret)) return ret;
    if (!topic) return all_topics_progress(r, &g);
    if (!find_topic(r, topic, "", &t, &prob)) return gw_reply_problem(r, &prob);
    uint64_t total = 0;
    json_t *root = topic_progress(gw_broker(r), g.name, &t, &total);
    if (!root || json_object_set_new(root, "group", json_string(g.name)) != 0) {
        json_decref(root);
        return gw_reply_err(r, MQ_ERR_NOMEM, g.name);
    }
    return gw_reply_json(r, 200, root);
}
