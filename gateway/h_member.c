/*
 * h_member.c - classic-pull membership of a consumer group: heartbeats
 * (POST /v1/groups/{group}/consumers/{clientId}/heartbeat), which register
 * a client with its subscriptions and allocation strategy and answer the
 * queues it reads now (the broker computes the rebalance, core/members.h
 * and core/rebalance.h); unregistering (DELETE .../consumers/{clientId});
 * and the orderly-consumption queue locks (POST and DELETE
 * /v1/groups/{group}/locks).  Clients and locks live in memory only
 * (MbTable); every call here is memory work on the MHD worker, except the
 * auto-creation of a group by its first heartbeat, which writes sqlite and
 * so runs on the job runner (jobs.h).  docs/groups.md.
 */
#include "handlers.h"
#include "req.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "filter.h"
#include "json.h"
#include "members.h"
#include "msg.h"
#include "rebalance.h"
#include "topic.h"

#define LOCK_QUEUES_MAX TOPIC_QUEUES_MAX /* queue ids of one lock or unlock request */

/* ======================================================================
 * Shared checks
 * ====================================================================== */

#define CLIENT_ID_RULE "1..255 characters of [A-Za-z0-9_.:@-]"

/* The {group} of 'm' if it is a valid, unreserved name; else answers 400
 * INVALID_NAME into '*ret' and returns NULL. */
static const char *group_param(GwRequest *r, const RtMatch *m, enum MHD_Result *ret) {
    const char *group = rt_param(m, "group");
    const char *why = msg_name_problem(group, strlen(group));
    if (!why) return group;
    *ret = gw_reply_error(r, 400, "INVALID_NAME", "group '%.200s': %s", group, why);
    return NULL;
}

/* The {clientId} of 'm' if valid; else answers 400 INVALID_PARAMETER. */
static const char *client_param(GwRequest *r, const RtMatch *m, enum MHD_Result *ret) {
    const char *id = rt_param(m, "clientId");
    if (mb_client_id_valid(id)) return id;
    *ret = gw_reply_error(r, 400, "INVALID_PARAMETER", "clientId '%.200s' must be "
                          CLIENT_ID_RULE, id);
    return NULL;
}

/* Answers 404 GROUP_NOT_FOUND or the registry's error for 'rc'. */
static enum MHD_Result reply_group_err(GwRequest *r, int rc, const char *group) {
    if (rc == MQ_ERR_NOTFOUND) {
        bool auto_create = broker_config(gw_broker(r))->auto_create_group;
        return gw_reply_error(r, 404, "GROUP_NOT_FOUND", "group '%s' does not exist%s", group,
                              auto_create ? "" : " (autoCreateSubscriptionGroup is off)");
    }
    return gw_reply_err(r, rc, group);
}

/* Reads the integer array 'v' (named 'what') of 'min'..'max' entries, each
 * in [0, 'limit'), into 'out' (room for 'max') and '*n'. */
static bool decode_queue_ids(json_t *v, const char *what, size_t min, size_t max, uint32_t limit,
                             uint32_t *out, size_t *n, GwProblem *p) {
    if (!json_is_array(v)) return gw_fail(p, 400, "INVALID_FIELD", "%s must be an array", what);
    size_t count = json_array_size(v);
    if (count < min || count > max) {
        return gw_fail(p, 400, "INVALID_FIELD", "%s must hold %zu to %zu queue ids, not %zu",
                       what, min, max, count);
    }
    for (size_t i = 0; i < count; i++) {
        json_t *q = json_array_get(v, i);
        if (!json_is_integer(q) || json_integer_value(q) < 0 ||
            json_integer_value(q) >= (json_int_t)limit) {
            return gw_fail(p, 400, "INVALID_FIELD", "%s[%zu] must be an integer from 0 to %u",
                           what, i, limit - 1);
        }
        out[i] = (uint32_t)json_integer_value(q);
    }
    *n = count;
    return true;
}

/* ======================================================================
 * POST /v1/groups/{group}/consumers/{clientId}/heartbeat
 * ====================================================================== */

/* A decoded heartbeat.  Strings are borrowed from the JSON tree. */
typedef struct Heartbeat {
    RbStrategy strategy;
    size_t n_subs;
    MbSubscription subs[MB_SUBS_MAX];
    uint32_t *queues[MB_SUBS_MAX]; /* CONFIG: each subscription's queueIds (malloc'd) */
} Heartbeat;

static void heartbeat_free(Heartbeat *h) {
    for (size_t i = 0; i < MB_SUBS_MAX; i++) free(h->queues[i]);
}

/* Decodes subscription 'i' ('o'): topic (a valid user name), type (TAG
 * default, or SQL92), expression ("*" default; compiled to check it) and,
 * only under CONFIG and there required, queueIds. */
static bool decode_sub(GwRequest *r, json_t *o, size_t i, Heartbeat *h, GwProblem *p) {
    if (!json_is_object(o)) {
        return gw_fail(p, 400, "INVALID_FIELD", "subscriptions[%zu] must be an object", i);
    }
    char where[48];
    snprintf(where, sizeof(where), "subscriptions[%zu].", i);
    static const char *const names[] = {"topic", "type", "expression", "queueIds", NULL};
    json_t *f[4];
    if (!gw_json_fields(o, names, f, where, p)) return false;
    MbSubscription *s = &h->subs[i];
    if (!json_is_string(f[0])) {
        return gw_fail(p, 400, "INVALID_FIELD", "%stopic is required and must be a string",
                       where);
    }
    s->topic = json_string_value(f[0]);
    const char *why = msg_name_problem(s->topic, strlen(s->topic));
    if (why) return gw_fail(p, 400, "INVALID_NAME", "%stopic '%.200s': %s", where, s->topic, why);
    for (size_t k = 0; k < i; k++) {
        if (strcmp(h->subs[k].topic, s->topic) == 0) {
            return gw_fail(p, 400, "INVALID_FIELD", "%stopic '%s' is already subscribed by "
                           "subscriptions[%zu]", where, s->topic, k);
        }
    }
    FilterType type = FILTER_TAG;
    if (f[1] && (!json_is_string(f[1]) || !filter_type_parse(json_string_value(f[1]), &type))) {
        return gw_fail(p, 400, "INVALID_FIELD", "%stype must be \"TAG\" or \"SQL92\"", where);
    }
    s->filter_type = type == FILTER_SQL92 ? "SQL92" : "TAG";
    s->expression = "*";
    size_t len = 1;
    if (f[2]) {
        if (!json_is_string(f[2]))
            return gw_fail(p, 400, "INVALID_FIELD", "%sexpression must be a string", where);
        s->expression = json_string_value(f[2]);
        len = json_string_length(f[2]);
        if (len > MB_EXPR_MAX || strlen(s->expression) != len) {
            return gw_fail(p, 400, "INVALID_FIELD", "%sexpression must be at most %d bytes "
                           "without NUL", where, MB_EXPR_MAX);
        }
    }
    Filter *flt = NULL;
    Sql92Error err = {0};
    int rc = filter_cache_get(broker_filters(gw_broker(r)), type, s->expression, len, &flt, &err);
    filter_unref(flt);
    if (rc == MQ_ERR_INVAL) {
        return gw_fail(p, 400, "INVALID_FILTER", "%sexpression: position %zu: %s", where,
                       err.pos, err.msg);
    }
    if (rc != MQ_OK) {
        return gw_fail(p, gw_status_for(rc), NULL, "%sexpression: %s", where, mq_strerror(rc));
    }
    if (h->strategy != RB_CONFIG) {
        if (f[3]) {
            return gw_fail(p, 400, "INVALID_FIELD", "%squeueIds is only allowed with strategy "
                           "CONFIG", where);
        }
        return true;
    }
    char what[64];
    snprintf(what, sizeof(what), "%squeueIds", where);
    if (!f[3]) {
        return gw_fail(p, 400, "INVALID_FIELD", "%s is required with strategy CONFIG", what);
    }
    size_t n = json_is_array(f[3]) ? json_array_size(f[3]) : 0;
    h->queues[i] = malloc((n ? n : 1) * sizeof(*h->queues[i]));
    if (!h->queues[i]) return gw_fail(p, 503, "OUT_OF_MEMORY", "heartbeat: out of memory");
    if (!decode_queue_ids(f[3], what, 0, MB_CONFIG_QUEUES_MAX, TOPIC_QUEUES_MAX, h->queues[i],
                          &s->n_config_queues, p)) {
        return false;
    }
    s->config_queues = h->queues[i];
    return true;
}

/* Decodes the heartbeat body {"subscriptions":[...],"strategy":"AVG"}. */
static bool decode_heartbeat(GwRequest *r, json_t *root, Heartbeat *h, GwProblem *p) {
    static const char *const names[] = {"subscriptions", "strategy", NULL};
    json_t *f[2];
    if (!gw_json_fields(root, names, f, "", p)) return false;
    h->strategy = RB_AVG;
    if (f[1] && (!json_is_string(f[1]) || !rb_strategy_parse(json_string_value(f[1]),
                                                             &h->strategy))) {
        return gw_fail(p, 400, "INVALID_FIELD", "strategy must be \"AVG\", \"AVG_BY_CIRCLE\", "
                       "\"CONSISTENT_HASH\" or \"CONFIG\"");
    }
    if (!json_is_array(f[0])) {
        return gw_fail(p, 400, "INVALID_FIELD", "subscriptions is required and must be an "
                       "array");
    }
    h->n_subs = json_array_size(f[0]);
    if (h->n_subs > MB_SUBS_MAX) {
        return gw_fail(p, 400, "INVALID_FIELD", "subscriptions must hold at most %d entries, "
                       "not %zu", MB_SUBS_MAX, h->n_subs);
    }
    for (size_t i = 0; i < h->n_subs; i++)
        if (!decode_sub(r, json_array_get(f[0], i), i, h, p)) return false;
    return true;
}

/* The heartbeat's state across the auto-create job (GwRequest.ctx). */
typedef struct HeartbeatCtx {
    GroupRegistry *groups;         /* borrowed */
    char group[META_NAME_MAX + 1]; /* the {group}, checked */
    int rc;                        /* the job's group_for_consume result */
    MetaGroup g;                   /* the group it made or found (rc MQ_OK) */
} HeartbeatCtx;

/* The auto-create job: job thread (sqlite).  An existing group, made
 * meanwhile by another request, is left alone. */
static void create_group_job(void *arg) {
    HeartbeatCtx *c = arg;
    c->rc = group_for_consume(c->groups, c->group, true, &c->g);
}

/* Finds the group for a heartbeat.  True with '*g'; false when answered
 * (404, an error) or when the auto-create job was started ('*ret' is
 * then gw_offload's and h_member_heartbeat runs again afterwards, with
 * r->ctx set). */
static bool heartbeat_group(GwRequest *r, const char *group, MetaGroup *g, enum MHD_Result *ret) {
    Broker *b = gw_broker(r);
    int rc = group_get(broker_groups(b), group, g);
    if (rc == MQ_ERR_NOTFOUND && broker_config(b)->auto_create_group) {
        HeartbeatCtx *c = r->ctx;
        if (!c) {
            c = calloc(1, sizeof(*c));
            if (!c) {
                *ret = gw_reply_err(r, MQ_ERR_NOMEM, group);
                return false;
            }
            c->groups = broker_groups(b);
            snprintf(c->group, sizeof(c->group), "%s", group); /* checked: <= MSG_NAME_MAX */
            r->ctx = c;
            r->ctx_free = free;
            *ret = gw_offload(r, create_group_job, h_member_heartbeat);
            return false;
        }
        /* Created, and deleted again since: go on with what the job made,
         * as a heartbeat racing a delete always could. */
        rc = c->rc;
        *g = c->g;
    }
    if (rc == MQ_OK) return true;
    *ret = reply_group_err(r, rc, group);
    return false;
}

/* Appends {"topic","queueId"} for each queue of subscription 's' that the
 * client reads now: nothing when the topic does not exist (yet) or is not
 * readable. */
static int add_assignments(Broker *b, const char *group, const char *client_id,
                           const MbSubscription *s, bool broadcast, json_t *arr) {
    MetaTopic t;
    int rc = topic_get(broker_topics(b), s->topic, &t);
    if (rc == MQ_ERR_NOTFOUND) return MQ_OK;
    if (rc != MQ_OK) return rc;
    if (!(t.perm & META_PERM_READ) || t.read_queues == 0) return MQ_OK;
    uint32_t queues[TOPIC_QUEUES_MAX];
    size_t n = 0;
    uint32_t nq = t.read_queues < TOPIC_QUEUES_MAX ? t.read_queues : TOPIC_QUEUES_MAX;
    rc = mb_assignment(broker_members(b), group, client_id, s->topic, nq, broadcast, queues, &n);
    if (rc == MQ_ERR_NOTFOUND) return MQ_OK; /* dropped meanwhile (group deleted) */
    if (rc != MQ_OK) return rc;
    for (size_t i = 0; i < n; i++) {
        json_t *one = json_pack("{s:s, s:I}", "topic", s->topic, "queueId",
                                (json_int_t)queues[i]);
        if (!one || json_array_append_new(arr, one) != 0) return MQ_ERR_NOMEM;
    }
    return MQ_OK;
}

/* POST /v1/groups/{group}/consumers/{clientId}/heartbeat.  Also the
 * resumed call after the group's auto-create job: the body is decoded
 * and checked again (CPU only) and the heartbeat goes on. */
enum MHD_Result h_member_heartbeat(GwRequest *r, const RtMatch *m) {
    enum MHD_Result ret;
    const char *group = group_param(r, m, &ret);
    if (!group) return ret;
    const char *client_id = client_param(r, m, &ret);
    if (!client_id) return ret;
    Broker *b = gw_broker(r);
    GwProblem prob = {0};
    json_t *root = NULL;
    if (!gw_json_object(r, true, &root, &prob)) return gw_reply_problem(r, &prob);
    Heartbeat h = {0};
    json_t *arr = NULL;
    if (!decode_heartbeat(r, root, &h, &prob)) {
        ret = gw_reply_problem(r, &prob);
        goto out;
    }
    MetaGroup g;
    if (!heartbeat_group(r, group, &g, &ret)) goto out;

    MbTable *mb = broker_members(b);
    int64_t now = mq_now_ms();
    mb_expire(mb, now); /* silent clients leave before the allocation */
    int rc = mb_heartbeat(mb, group, client_id, h.strategy, h.subs, h.n_subs, now);
    if (rc == MQ_ERR_FULL) {
        ret = gw_reply_error(r, 429, "TOO_MANY_CONSUMERS", "group '%s' has too many consumers "
                             "(at most %d)", group, MB_CLIENTS_MAX);
        goto out;
    }
    if (rc != MQ_OK) {
        ret = gw_reply_err(r, rc, client_id);
        goto out;
    }
    arr = json_array();
    rc = arr ? MQ_OK : MQ_ERR_NOMEM;
    for (size_t i = 0; rc == MQ_OK && i < h.n_subs; i++)
        rc = add_assignments(b, group, client_id, &h.subs[i], g.broadcast, arr);
    if (rc != MQ_OK) {
        ret = gw_reply_err(r, rc, client_id);
        goto out;
    }
    json_t *answer = json_pack("{s:O, s:b, s:I}", "assignments", arr, "broadcast",
                               (int)g.broadcast, "expireMs",
                               (json_int_t)broker_config(b)->client_channel_expired_ms);
    ret = answer ? gw_reply_json(r, 200, answer) : gw_reply_err(r, MQ_ERR_NOMEM, client_id);
out:
    json_decref(arr);
    heartbeat_free(&h);
    json_decref(root);
    return ret;
}

/* ======================================================================
 * DELETE /v1/groups/{group}/consumers/{clientId}
 * ====================================================================== */

enum MHD_Result h_member_unregister(GwRequest *r, const RtMatch *m) {
    enum MHD_Result ret;
    const char *group = group_param(r, m, &ret);
    if (!group) return ret;
    const char *client_id = client_param(r, m, &ret);
    if (!client_id) return ret;
    MetaGroup g;
    int rc = group_get(broker_groups(gw_broker(r)), group, &g);
    if (rc != MQ_OK) return reply_group_err(r, rc, group);
    rc = mb_unregister(broker_members(gw_broker(r)), group, client_id);
    if (rc == MQ_ERR_NOTFOUND) {
        return gw_reply_error(r, 404, "CONSUMER_NOT_FOUND", "client '%s' is not a consumer of "
                              "group '%s'", client_id, group);
    }
    if (rc != MQ_OK) return gw_reply_err(r, rc, client_id);
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    if (!resp) return MHD_NO;
    return gw_reply(r, MHD_HTTP_NO_CONTENT, resp);
}

/* ======================================================================
 * POST and DELETE /v1/groups/{group}/locks {"clientId","topic","queueIds"}
 * ====================================================================== */

/* A decoded lock or unlock request.  Strings are borrowed from the tree. */
typedef struct LockReq {
    const char *client_id;
    MetaTopic topic;
    uint32_t qids[LOCK_QUEUES_MAX];
    size_t n;
} LockReq;

/* Decodes and checks a lock body: the fields, the group (it must exist:
 * no auto-create here), the topic (it must exist) and every queue id
 * (below its read queue count).  False when answered. */
static bool decode_lock(GwRequest *r, const char *group, LockReq *q, json_t **root,
                        enum MHD_Result *ret) {
    GwProblem prob = {0};
    if (!gw_json_object(r, true, root, &prob)) goto err;
    static const char *const names[] = {"clientId", "topic", "queueIds", NULL};
    json_t *f[3];
    if (!gw_json_fields(*root, names, f, "", &prob)) goto err;
    if (!json_is_string(f[0]) || !mb_client_id_valid(json_string_value(f[0]))) {
        gw_fail(&prob, 400, "INVALID_FIELD", "clientId is required and must be "
                CLIENT_ID_RULE);
        goto err;
    }
    q->client_id = json_string_value(f[0]);
    if (!json_is_string(f[1])) {
        gw_fail(&prob, 400, "INVALID_FIELD", "topic is required and must be a string");
        goto err;
    }
    const char *topic = json_string_value(f[1]);
    const char *why = msg_name_problem(topic, strlen(topic));
    if (why) {
        gw_fail(&prob, 400, "INVALID_NAME", "topic '%.200s': %s", topic, why);
        goto err;
    }
    if (!f[2]) {
        gw_fail(&prob, 400, "INVALID_FIELD", "queueIds is required");
        goto err;
    }
    /* Shape first (400), existence next (404), ranges last (they need
     * the topic). */
    if (!decode_queue_ids(f[2], "queueIds", 1, LOCK_QUEUES_MAX, TOPIC_QUEUES_MAX, q->qids, &q->n,
                          &prob)) {
        goto err;
    }
    MetaGroup g;
    int rc = group_get(broker_groups(gw_broker(r)), group, &g);
    if (rc != MQ_OK) {
        *ret = reply_group_err(r, rc, group);
        return false;
    }
    rc = topic_get(broker_topics(gw_broker(r)), topic, &q->topic);
    if (rc == MQ_ERR_NOTFOUND) {
        gw_fail(&prob, 404, "TOPIC_NOT_FOUND", "topic '%s' does not exist", topic);
        goto err;
    }
    if (rc != MQ_OK) {
        *ret = gw_reply_err(r, rc, topic);
        return false;
    }
    for (size_t i = 0; i < q->n; i++) {
        if (q->qids[i] >= q->topic.read_queues) {
            gw_fail(&prob, 400, "INVALID_FIELD", "queueIds[%zu]: queue %u is out of range: "
                    "topic '%s' has %u read queues", i, q->qids[i], topic,
                    q->topic.read_queues);
            goto err;
        }
    }
    return true;
err:
    *ret = gw_reply_problem(r, &prob);
    return false;
}

/* POST /v1/groups/{group}/locks: 200 {"clientId","topic","queueIds"} with
 * the queues of the request this client holds now (ascending; a subset
 * when others hold some). */
enum MHD_Result h_member_lock(GwRequest *r, const RtMatch *m) {
    enum MHD_Result ret;
    const char *group = group_param(r, m, &ret);
    if (!group) return ret;
    LockReq *q = calloc(1, sizeof(*q));
    uint32_t *locked = calloc(LOCK_QUEUES_MAX, sizeof(*locked));
    json_t *root = NULL;
    if (!q || !locked) {
        ret = gw_reply_err(r, MQ_ERR_NOMEM, group);
        goto out;
    }
    if (!decode_lock(r, group, q, &root, &ret)) goto out;
    MbTable *mb = broker_members(gw_broker(r));
    int64_t now = mq_now_ms();
    mb_expire(mb, now); /* locks of silent clients are free */
    size_t n = 0;
    int rc = mb_lock(mb, group, q->client_id, q->topic.name, q->qids, q->n, now, locked, &n);
    if (rc == MQ_ERR_FULL) {
        ret = gw_reply_error(r, 429, "TOO_MANY_LOCKS", "group '%s' holds too many queue locks "
                             "(at most %d)", group, MB_LOCKS_MAX);
        goto out;
    }
    if (rc != MQ_OK) {
        ret = gw_reply_err(r, rc, q->client_id);
        goto out;
    }
    json_t *ids = json_array();
    for (size_t i = 0; ids && i < n; i++) {
        if (json_array_append_new(ids, json_integer((json_int_t)locked[i])) != 0) {
            json_decref(ids);
            ids = NULL;
        }
    }
    json_t *answer = ids ? json_pack("{s:s, s:s, s:o}", "clientId", q->client_id, "topic",
                                     q->topic.name, "queueIds", ids)
                         : NULL;
    ret = answer ? gw_reply_json(r, 200, answer) : gw_reply_err(r, MQ_ERR_NOMEM, group);
out:
    json_decref(root);
    free(locked);
    free(q);
    return ret;
}

/* DELETE /v1/groups/{group}/locks: releases the queues of the request
 * that this client holds (others' locks stay); 204. */
enum MHD_Result h_member_unlock(GwRequest *r, const RtMatch *m) {
    enum MHD_Result ret;
    const char *group = group_param(r, m, &ret);
    if (!group) return ret;
    LockReq *q = calloc(1, sizeof(*q));
    json_t *root = NULL;
    if (!q) return gw_reply_err(r, MQ_ERR_NOMEM, group);
    if (!decode_lock(r, group, q, &root, &ret)) goto out;
    int rc = mb_unlock(broker_members(gw_broker(r)), group, q->client_id, q->topic.name, q->qids,
                       q->n);
    if (rc != MQ_OK) {
        ret = gw_reply_err(r, rc, q->client_id);
        goto out;
    }
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    ret = resp ? gw_reply(r, MHD_HTTP_NO_CONTENT, resp) : MHD_NO;
out:
    json_decref(root);
    free(q);
    return ret;
}
