/*
 * h_query.c - message queries of a topic (GET /v1/topics/{topic}/messages):
 * by key through the store's hash index (store_query_key), or by store
 * time range, merging the topic's queues from store_offset_for_time(begin)
 * in store time order.  Both answer {"messages":[...]} with js_message.
 * The produce route (POST, h_message.c) shares the path.
 */
#include "handlers.h"
#include "req.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "json.h"
#include "msg.h"
#include "topic.h"

#define KEY_MAX_RESULTS 64    /* largest 'max' of a key query (RocketMQ's limit) */
#define TIME_MAX_RESULTS 2000 /* largest 'max' of a time range query */
#define DEFAULT_RESULTS 32    /* 'max' by default, both forms */
#define KEY_LEN_MAX 255       /* bytes of a key, as in produce */
#define SKIP_SCAN 64          /* queue entries one cursor step looks at, at most */

/* Appends the message at 'phys_off' to 'list'; one aged out meanwhile is
 * skipped.  MQ_OK or MQ_ERR_NOMEM. */
static int add_message(Store *st, uint64_t phys_off, json_t *list) {
    ClRecord rec;
    MappedFile *ref = NULL;
    if (store_read_msg(st, phys_off, &rec, &ref) != MQ_OK) {
        mf_unref(&ref);
        return MQ_OK;
    }
    json_t *one = js_message(&rec);
    mf_unref(&ref);
    if (!one || json_array_append_new(list, one) != 0) return MQ_ERR_NOMEM;
    return MQ_OK;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a;
    uint64_t y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* ======================================================================
 * By key
 * ====================================================================== */

/* The newest 'max' messages of 't' with 'key', stored in [begin, end],
 * into 'list' oldest first. */
static int query_key(Store *st, const MetaTopic *t, const char *key, int64_t begin,
                     int64_t end, size_t max, json_t *list) {
    uint64_t *offs = calloc(max, sizeof(*offs));
    if (!offs) return MQ_ERR_NOMEM;
    size_t n = 0;
    int rc = store_query_key(st, mq_slice(t->name, strlen(t->name)), mq_slice(key, strlen(key)),
                             begin, end, max, offs, &n);
    if (rc == MQ_OK) {
        /* Commit log order is store time order. */
        qsort(offs, n, sizeof(*offs), cmp_u64);
        for (size_t i = 0; rc == MQ_OK && i < n; i++) rc = add_message(st, offs[i], list);
    }
    free(offs);
    return rc;
}

/* ======================================================================
 * By time range
 * ====================================================================== */

/* One queue's position in the merge. */
typedef struct Cursor {
    uint32_t queue_id;
    uint64_t next;    /* queue offset to look at next */
    bool has;         /* 'rec' holds the queue's next message in range */
    ClRecord rec;     /* that message (slices into 'ref') */
    MappedFile *ref;  /* keeps 'rec' mapped; NULL when !has */
} Cursor;

/* Moves 'c' to the next message of its queue stored at or before 'end':
 * c->has false when there is none.  Entries whose record is gone (aged
 * out) are skipped. */
static void cursor_step(Store *st, MqSlice topic, int64_t end, Cursor *c) {
    mf_unref(&c->ref);
    c->has = false;
    for (;;) {
        CqEntry e;
        size_t n = 0;
        uint64_t next = c->next;
        int rc = store_read_queue(st, topic, c->queue_id, c->next, 1, SKIP_SCAN, NULL, 0, &e,
                                  NULL, &n, &next);
        if (rc != MQ_OK) return;
        if (n == 0) {
            if (next <= c->next) return; /* the end of the queue */
            c->next = next;
            continue;
        }
        c->next = next;
        if (store_read_msg(st, e.phys_off, &c->rec, &c->ref) != MQ_OK) {
            mf_unref(&c->ref);
            continue;
        }
        if (c->rec.store_ts > end) {
            mf_unref(&c->ref);
            return;
        }
        c->has = true;
        return;
    }
}

/* Up to 'max' messages of 't' stored in [begin, end], every queue merged
 * in store time order (commit log order on ties), into 'list'. */
static int query_time(Store *st, const MetaTopic *t, int64_t begin, int64_t end, size_t max,
                      json_t *list) {
    uint32_t nq = t->read_queues > t->write_queues ? t->read_queues : t->write_queues;
    if (nq == 0) return MQ_OK;
    Cursor *cs = calloc(nq, sizeof(*cs));
    if (!cs) return MQ_ERR_NOMEM;
    MqSlice topic = mq_slice(t->name, strlen(t->name));
    int rc = MQ_OK;
    for (uint32_t q = 0; q < nq; q++) {
        cs[q].queue_id = q;
        if (store_offset_for_time(st, topic, q, begin, &cs[q].next) != MQ_OK) continue;
        cursor_step(st, topic, end, &cs[q]);
    }
    for (size_t emitted = 0; rc == MQ_OK && emitted < max; emitted++) {
        Cursor *best = NULL;
        for (uint32_t q = 0; q < nq; q++) {
            Cursor *c = &cs[q];
            if (!c->has) continue;
            if (!best || c->rec.store_ts < best->rec.store_ts ||
                (c->rec.store_ts == best->rec.store_ts && c->rec.phys_off < best->rec.phys_off))
                best = c;
        }
        if (!best) break;
        json_t *one = js_message(&best->rec);
        if (!one || json_array_append_new(list, one) != 0) rc = MQ_ERR_NOMEM;
        cursor_step(st, topic, end, best);
    }
    for (uint32_t q = 0; q < nq; q++) mf_unref(&cs[q].ref);
    free(cs);
    return rc;
}

/* ======================================================================
 * GET /v1/topics/{topic}/messages
 * ====================================================================== */

enum MHD_Result h_query_messages(GwRequest *r, const RtMatch *m) {
    static const char *const known[] = {"key", "begin", "end", "max", NULL};
    const char *name = rt_param(m, "topic");
    enum MHD_Result ret;
    if (!h_topic_any_name_ok(r, name, &ret)) return ret;
    if (!gw_query_known(r, known, &ret)) return ret;
    const char *key = gw_query(r, "key");
    bool by_key = key != NULL;
    if (!by_key && (!gw_query(r, "begin") || !gw_query(r, "end"))) {
        return gw_reply_error(r, 400, "INVALID_PARAMETER", "give either key (with optional "
                              "begin, end, max) or both begin and end (with optional max)");
    }
    if (by_key && (key[0] == '\0' || strlen(key) > KEY_LEN_MAX)) {
        return gw_reply_error(r, 400, "INVALID_PARAMETER", "key must be 1 to %d bytes",
                              KEY_LEN_MAX);
    }
    int64_t begin = 0;
    int64_t end = by_key ? mq_now_ms() : 0;
    int64_t max = DEFAULT_RESULTS;
    GwProblem prob;
    if (!gw_query_int(r, "begin", 0, INT64_MAX, &begin, &prob) ||
        !gw_query_int(r, "end", 0, INT64_MAX, &end, &prob) ||
        !gw_query_int(r, "max", 1, by_key ? KEY_MAX_RESULTS : TIME_MAX_RESULTS, &max, &prob)) {
        ret = gw_reply_problem(r, &prob);
        return ret;
    }
    if (begin > end) {
        return gw_reply_error(r, 400, "INVALID_PARAMETER", "begin (%lld) is after end (%lld)",
                              (long long)begin, (long long)end);
    }
    MetaTopic t;
    int rc = topic_get(broker_topics(gw_broker(r)), name, &t);
    if (rc == MQ_ERR_NOTFOUND) {
        return gw_reply_error(r, 404, "TOPIC_NOT_FOUND", "topic '%s' does not exist", name);
    }
    if (rc != MQ_OK) return gw_reply_err(r, rc, name);

    json_t *list = json_array();
    if (!list) return gw_reply_err(r, MQ_ERR_NOMEM, name);
    Store *st = broker_store(gw_broker(r));
    rc = by_key ? query_key(st, &t, key, begin, end, (size_t)max, list)
                : query_time(st, &t, begin, end, (size_t)max, list);
    if (rc != MQ_OK) {
        json_decref(list);
        return gw_reply_err(r, rc, name);
    }
    json_t *root = json_pack("{s:o}", "messages", list);
    if (!root) return gw_reply_err(r, MQ_ERR_NOMEM, name);
    return gw_reply_json(r, 200, root);
}
