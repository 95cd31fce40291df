/*
 * h_topic.c - topic admin: list, create/update, get (configuration and
 * per-queue offsets), delete, and the queue list of a topic.  Topics live
 * in the broker's TopicRegistry (core/topic.h), written through to
 * meta.db; a delete also drops the topic's consume queues in the store.
 * Reads are answered on the MHD worker from memory; writes block on
 * sqlite and the file system, so they run on the job runner (jobs.h).
 */
#include "handlers.h"
#include "req.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "broker.h"
#include "json.h"
#include "metrics.h"
#include "msg.h"
#include "topic.h"

/* The "perm" text of META_PERM_* bits. */
static const char *perm_name(uint32_t perm) {
    switch (perm & (META_PERM_READ | META_PERM_WRITE)) {
    case META_PERM_READ | META_PERM_WRITE: return "RW";
    case META_PERM_READ: return "R";
    case META_PERM_WRITE: return "W";
    default: return "NONE";
    }
}

bool h_topic_name_ok(GwRequest *r, const char *topic, enum MHD_Result *ret) {
    const char *why = msg_name_problem(topic, strlen(topic));
    if (!why) return true;
    *ret = gw_reply_error(r, 400, "INVALID_NAME", "topic '%.200s': %s", topic, why);
    return false;
}

bool h_topic_any_name_ok(GwRequest *r, const char *topic, enum MHD_Result *ret) {
    size_t n = strlen(topic);
    bool group_topic = (strncmp(topic, MSG_RETRY_PREFIX, strlen(MSG_RETRY_PREFIX)) == 0 ||
                        strncmp(topic, MSG_DLQ_PREFIX, strlen(MSG_DLQ_PREFIX)) == 0) &&
                       msg_system_name_valid(topic, n);
    return group_topic || h_topic_name_ok(r, topic, ret);
}

/* The topic object: configuration only. */
static json_t *topic_json(const MetaTopic *t) {
    return json_pack("{s:s, s:I, s:I, s:I, s:s, s:b, s:I, s:I}", "topic", t->name, "queues",
                     (json_int_t)t->write_queues, "readQueues", (json_int_t)t->read_queues,
                     "writeQueues", (json_int_t)t->write_queues, "perm", perm_name(t->perm),
                     "order", (int)t->order, "createdTimestamp", (json_int_t)t->created_ms,
                     "updatedTimestamp", (json_int_t)t->updated_ms);
}

/* [{"queueId","minOffset","maxOffset","lastUpdateTimestamp"}] for every
 * queue of 't' (the larger of its read and write counts). */
static json_t *queues_json(Store *st, const MetaTopic *t) {
    json_t *arr = json_array();
    if (!arr) return NULL;
    uint32_t n = t->read_queues > t->write_queues ? t->read_queues : t->write_queues;
    MqSlice name = mq_slice(t->name, strlen(t->name));
    for (uint32_t q = 0; q < n; q++) {
        uint64_t min = 0;
        uint64_t max = 0;
        store_queue_range(st, name, q, &min, &max);
        int64_t ts = store_queue_last_ts(st, name, q);
        json_t *one = json_pack("{s:I, s:I, s:I, s:I}", "queueId", (json_int_t)q, "minOffset",
                                (json_int_t)min, "maxOffset", (json_int_t)max,
                                "lastUpdateTimestamp", (json_int_t)(ts > 0 ? ts : 0));
        if (!one || json_array_append_new(arr, one) != 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

/* Looks the {topic} of 'm' up: MQ_OK with '*t', or the answer was sent. */
static bool find_topic(GwRequest *r, const RtMatch *m, MetaTopic *t, enum MHD_Result *ret) {
    const char *name = rt_param(m, "topic");
    if (!h_topic_any_name_ok(r, name, ret)) return false;
    int rc = topic_get(broker_topics(gw_broker(r)), name, t);
    if (rc == MQ_OK) return true;
    if (rc == MQ_ERR_NOTFOUND) {
        *ret = gw_reply_error(r, 404, "TOPIC_NOT_FOUND", "topic '%s' does not exist", name);
    } else {
        *ret = gw_reply_err(r, rc, name);
    }
    return false;
}

static int list_one(void *arg, const MetaTopic *t) {
    json_t *arr = arg;
    if (msg_name_reserved(t->name, strlen(t->name))) return 0; /* the broker's own */
    json_t *one = topic_json(t);
    if (!one || json_array_append_new(arr, one) != 0) return 1;
    return 0;
}

/* GET /v1/topics */
enum MHD_Result h_topic_list(GwRequest *r, const RtMatch *m) {
    (void)m;
    json_t *arr = json_array();
    if (!arr) return gw_reply_err(r, MQ_ERR_NOMEM, "topics");
    int rc = topic_list(broker_topics(gw_broker(r)), list_one, arr);
    if (rc != MQ_OK) {
        json_decref(arr);
        return gw_reply_err(r, rc, "topics");
    }
    return gw_reply_json(r, 200, arr);
}

/* GET /v1/topics/{topic} */
/* The route of 't' in RocketMQ's TopicRouteData shape: the broker groups
 * serving it with their addresses by broker id, and its queues on each.
 * Until name servers aggregate routes, that is this broker alone. */
static json_t *route_json(GwRequest *r, const MetaTopic *t) {
    const Config *c = broker_config(gw_broker(r));
    GwRuntime rt;
    gw_runtime(r, &rt);
    char id[24];
    snprintf(id, sizeof(id), "%lld", (long long)c->broker_id);
    return json_pack("{s:[{s:s, s:s, s:{s:s}}], s:[{s:s, s:I, s:I, s:s}]}", "brokerDatas",
                     "cluster", c->broker_cluster_name, "brokerName", c->broker_name,
                     "brokerAddrs", id, rt.listen_addr ? rt.listen_addr : "", "queueDatas",
                     "brokerName", c->broker_name, "readQueueNums", (json_int_t)t->read_queues,
                     "writeQueueNums", (json_int_t)t->write_queues, "perm", perm_name(t->perm));
}

enum MHD_Result h_topic_get(GwRequest *r, const RtMatch *m) {
    MetaTopic t;
    enum MHD_Result ret;
    if (!find_topic(r, m, &t, &ret)) return ret;
    json_t *root = topic_json(&t);
    json_t *queues = queues_json(broker_store(gw_broker(r)), &t);
    json_t *route = route_json(r, &t);
    bool ok = root && queues && route;
    if (ok) ok = json_object_set_new(root, "queueStats", queues) == 0;
    else json_decref(queues);
    if (ok) ok = json_object_set_new(root, "route", route) == 0;
    else json_decref(route);
    if (!ok) {
        json_decref(root);
        return gw_reply_err(r, MQ_ERR_NOMEM, t.name);
    }
    return gw_reply_json(r, 200, root);
}

/* GET /v1/topics/{topic}/queues */
enum MHD_Result h_topic_queues(GwRequest *r, const RtMatch *m) {
    MetaTopic t;
    enum MHD_Result ret;
    if (!find_topic(r, m, &t, &ret)) return ret;
    json_t *queues = queues_json(broker_store(gw_broker(r)), &t);
    if (!queues) return gw_reply_err(r, MQ_ERR_NOMEM, t.name);
    return gw_reply_json(r, 200, queues);
}

/* ----------------------------------------------------------------------
 * Writes: PUT and DELETE check the request on the worker, then hand the
 * sqlite write (and for DELETE the removal of the consume-queue files) to
 * the job runner (gw_offload, jobs.h); the resumed call answers from the
 * TopicJob (req.h's named-resource writes).  All topic writes of the
 * gateway run on that one thread, in order, so a PUT's read of the old
 * settings and its write are atomic with respect to the other PUTs.
 * ---------------------------------------------------------------------- */

/* A topic write across its job (GwRequest.ctx). */
typedef struct TopicJob {
    GwNameJob head;                 /* broker, the {topic} (checked), result; first */
    bool has_queues;                /* PUT: the body gave "queues" ... */
    bool has_perm;                  /* ... "perm" ... */
    bool has_order;                 /* ... "order" */
    uint32_t queues;                /* PUT: the values given (else unused) */
    uint32_t perm;                  /* ... META_PERM_* bits ... */
    bool order;                     /* ... ordered topic */
    MetaTopic t;                    /* PUT: the topic as stored (head.rc MQ_OK) */
} TopicJob;

static json_t *put_body(const GwNameJob *head) {
    return topic_json(&((const TopicJob *)head)->t);
}

static const GwNameKind topic_kind = {"topic", "TOPIC_NOT_FOUND", put_body};

/* Job thread: fields left out keep their value (a new topic: the
 * broker's defaultTopicQueueNums, RW, not ordered); sqlite write under the
 * registry's write_mu; the stored topic read back. */
static void put_job(void *arg) {
    TopicJob *j = arg;
    GwNameJob *h = &j->head;
    TopicRegistry *reg = broker_topics(h->broker);
    MetaTopic old;
    bool exists = topic_get(reg, h->name, &old) == MQ_OK;
    uint32_t queues = exists ? old.write_queues : topic_default_queues(reg);
    uint32_t perm = exists ? old.perm : (META_PERM_READ | META_PERM_WRITE);
    bool order = exists ? old.order : false;
    if (j->has_queues) queues = j->queues;
    if (j->has_perm) perm = j->perm;
    if (j->has_order) order = j->order;
    h->rc = topic_put(reg, h->name, queues, perm, order, &h->created);
    if (h->rc == MQ_OK) h->rc = topic_get(reg, h->name, &j->t);
}

/* PUT /v1/topics/{topic} {"queues":8,"perm":"RW","order":false}: fields
 * left out keep their value (a new topic: defaultTopicQueueNums, RW,
 * false).  201 created, 200 updated; the body is the topic object.  The
 * body is checked here; the write is a job. */
enum MHD_Result h_topic_put(GwRequest *r, const RtMatch *m) {
    const char *name = rt_param(m, "topic");
    enum MHD_Result ret;
    if (!h_topic_name_ok(r, name, &ret)) return ret;
    const char *ct = gw_header(r, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (ct && strncasecmp(ct, "application/json", 16) != 0) {
        return gw_reply_error(r, 415, NULL, "Content-Type must be application/json");
    }
    TopicJob *j = gw_name_job_new(r, sizeof(*j), &topic_kind, name, &ret);
    if (!j) return ret;
    json_t *root = NULL;
    GwProblem prob = {0};
    /* An empty body keeps every setting (or the defaults of a new topic). */
    if (r->body_len > 0 && !gw_json_object(r, false, &root, &prob)) {
        return gw_reply_problem(r, &prob);
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (strcmp(key, "queues") == 0) {
            if (!json_is_integer(v) || json_integer_value(v) < 1 ||
                json_integer_value(v) > TOPIC_QUEUES_MAX) {
                json_decref(root);
                return gw_reply_error(r, 400, "INVALID_FIELD", "queues must be an integer "
                                      "from 1 to %d", TOPIC_QUEUES_MAX);
            }
            j->has_queues = true;
            j->queues = (uint32_t)json_integer_value(v);
        } else if (strcmp(key, "perm") == 0) {
            const char *p = json_string_value(v);
            if (p && strcmp(p, "RW") == 0) {
                j->perm = META_PERM_READ | META_PERM_WRITE;
            } else if (p && strcmp(p, "R") == 0) {
                j->perm = META_PERM_READ;
            } else if (p && strcmp(p, "W") == 0) {
                j->perm = META_PERM_WRITE;
            } else {
                json_decref(root);
                return gw_reply_error(r, 400, "INVALID_FIELD", "perm must be \"RW\", \"R\" "
                                      "or \"W\"");
            }
            j->has_perm = true;
        } else if (strcmp(key, "order") == 0) {
            if (!json_is_boolean(v)) {
                json_decref(root);
                return gw_reply_error(r, 400, "INVALID_FIELD", "order must be a boolean");
            }
            j->has_order = true;
            j->order = json_is_true(v);
        } else {
            ret = gw_reply_error(r, 400, "UNKNOWN_FIELD", "unknown field '%.64s'", key);
            json_decref(root);
            return ret;
        }
    }
    json_decref(root);
    return gw_offload(r, put_job, gw_name_job_put_resumed);
}

/* Job thread: the row in meta.db (with the topic's offsets) and the map
 * entry, then the consume-queue files. */
static void delete_job(void *arg) {
    GwNameJob *j = arg; /* the head of a TopicJob */
    j->rc = topic_delete(broker_topics(j->broker), j->name);
    if (j->rc != MQ_OK) return;
    /* Receive state of every group for it goes too: a topic made again
     * under the name starts from its new queues' beginning. */
    int prc = pop_drop_topic(broker_pop(j->broker), j->name);
    if (prc != MQ_OK)
        MQ_WARN("topic '%s' deleted, but its receive state was not: %s", j->name,
                mq_strerror(prc));
    int rc = store_delete_topic(broker_store(j->broker), mq_slice(j->name, strlen(j->name)));
    if (rc != MQ_OK && rc != MQ_ERR_NOTFOUND) {
        MQ_WARN("topic '%s' deleted, but its queues could not be removed: %s", j->name,
                mq_strerror(rc));
    }
}

/* DELETE /v1/topics/{topic}: 204.  The name is checked here; the delete
 * is a job. */
enum MHD_Result h_topic_delete(GwRequest *r, const RtMatch *m) {
    const char *name = rt_param(m, "topic");
    enum MHD_Result ret;
    if (!h_topic_any_name_ok(r, name, &ret)) return ret;
    if (!gw_name_job_new(r, sizeof(TopicJob), &topic_kind, name, &ret)) return ret;
    return gw_offload(r, delete_job, gw_name_job_delete_resumed);
}
