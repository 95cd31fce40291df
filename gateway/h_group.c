/*
 * h_group.c - broker-kept consumer offsets of a group: list
 * (GET /v1/groups/{group}/offsets), set one or a batch
 * (PUT /v1/groups/{group}/offsets) and reset by time
 * (POST /v1/groups/{group}/offsets/reset).  Offsets live in meta's
 * in-memory table (store/meta.h) and reach meta.db in batches every
 * offsetFlushInterval and at shutdown: a request never writes sqlite.
 * Groups are not a resource yet: any valid, unreserved name is accepted.
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
    const char *bad = gw_query_unknown(r, known);
    if (bad) {
        return gw_reply_error(r, 400, "INVALID_PARAMETER", "unknown query parameter '%.64s'",
                              bad);
    }
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

/* Stores the 'n' checked entries and answers them in request order. */
static enum MHD_Result store_entries(GwRequest *r, const char *group, const OffEntry *es,
                                     size_t n) {
    Meta *meta = broker_meta(gw_broker(r));
    json_t *arr = json_array();
    if (!arr) return gw_reply_err(r, MQ_ERR_NOMEM, group);
    for (size_t i = 0; i < n; i++) {
        int rc = meta_offset_set(meta, group, es[i].topic, es[i].queue_id, es[i].offset);
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
