/*
 * h_message.c - messages: produce (POST /v1/topics/{topic}/messages, one
 * JSON message, a JSON batch or a raw body), get by offset message id
 * (GET /v1/messages/{msgId}) and classic pull
 * (GET /v1/topics/{topic}/queues/{queueId}/messages) with long polling
 * ('waitMs': suspended, resumed by the broker's long-polling registry).
 *
 * Produce decodes and checks every message before anything is created or
 * stored, then appends them with one store_put.  Under SYNC_FLUSH the
 * connection is suspended and resumed by the commit log's flush callback
 * (flusher or completer thread); no MHD worker waits for the disk.
 */
#define _GNU_SOURCE
#include "handlers.h"
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
#include "longpoll.h"
#include "msg.h"
#include "topic.h"

#define BATCH_MAX 1000     /* messages in one batch request */
#define TEXT_MAX 255       /* bytes of a tag, key, sharding key, property name */
#define KEYS_MAX 32        /* keys of one message */
#define PULL_MAX 1000      /* largest 'max' of a pull */
#define PULL_DEFAULT 32    /* 'max' of a pull by default */
#define PULL_SCAN 16384    /* queue entries one filtered pull looks at, at most */
#define PULL_TAGS_MAX 32   /* tags in a pull's 'tags' expression */
#define PULL_WAIT_MAX_MS 30000 /* longest long poll ('waitMs') */
#define AUTO_QUEUES 4      /* queues of an auto-created topic */

/* ======================================================================
 * Decoding produce requests
 * ====================================================================== */

/* One message as decoded from the request.  Slices borrow from the JSON
 * tree or the request body; the '*_owned' buffers belong to it. */
typedef struct InMsg {
    MqSlice body;
    uint8_t *body_owned;   /* base64-decoded body, or NULL */
    MqSlice tags;          /* empty = none */
    char *keys;            /* space-joined keys, malloc'd; NULL = none */
    MqSlice sharding_key;  /* empty = none */
    int64_t queue_id;      /* -1 = not given */
    json_t *props;         /* "properties" object (borrowed), or NULL */
    const char *raw_keys;  /* raw form: the comma-separated 'keys' parameter */
    uint8_t *props_buf;    /* encoded properties, malloc'd */
    size_t props_len;
    uint32_t queue;        /* the queue chosen */
    char uniq[MSG_ID_LEN + 1];
} InMsg;

static void in_msg_clear(InMsg *m) {
    free(m->body_owned);
    free(m->keys);
    free(m->props_buf);
}

/* Why 'len' bytes at 's' cannot be a tag, key, sharding key or property
 * name: NULL when they can.  'space_ok': spaces allowed inside. */
static const char *text_problem(const char *s, size_t len, bool space_ok) {
    if (len == 0) return "is empty";
    if (len > TEXT_MAX) return "is longer than 255 bytes";
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f) return "contains a control character";
        if (c == ' ' && !space_ok) return "contains a space";
    }
    if (s[0] == ' ' || s[len - 1] == ' ') return "starts or ends with a space";
    return NULL;
}

static bool check_tags(MqSlice tags, const char *where, GwProblem *p) {
    const char *why = text_problem(tags.ptr, tags.len, true);
    if (!why && memchr(tags.ptr, '|', tags.len)) why = "contains '|'";
    if (why) return gw_fail(p, 400, "INVALID_FIELD", "%stags %s", where, why);
    return true;
}

static bool check_sharding_key(MqSlice key, const char *where, GwProblem *p) {
    const char *why = text_problem(key.ptr, key.len, true);
    if (why) return gw_fail(p, 400, "INVALID_FIELD", "%sshardingKey %s", where, why);
    return true;
}

/* Appends one key to m->keys (space-joined). */
static bool add_key(InMsg *m, const char *k, size_t len, size_t idx, const char *where,
                    GwProblem *p) {
    const char *why = text_problem(k, len, false);
    if (why) return gw_fail(p, 400, "INVALID_FIELD", "%skeys[%zu] %s", where, idx, why);
    if (idx >= KEYS_MAX) {
        return gw_fail(p, 400, "INVALID_FIELD", "%skeys has more than %d keys", where, KEYS_MAX);
    }
    size_t old = m->keys ? strlen(m->keys) : 0;
    char *nk = realloc(m->keys, old + len + 2);
    if (!nk) return gw_fail(p, 503, "OUT_OF_MEMORY", "out of memory");
    if (old) nk[old++] = ' ';
    memcpy(nk + old, k, len);
    nk[old + len] = '\0';
    m->keys = nk;
    return true;
}

static bool is_delay_field(const char *name) {
    return strcmp(name, "delayLevel") == 0 || strcmp(name, "deliverAt") == 0 ||
           strcmp(name, "delayMs") == 0;
}

static bool unsupported_delay(const char *where, const char *name, GwProblem *p) {
    return gw_fail(p, 400, "UNSUPPORTED_FIELD",
                "%s%s: delayed messages are not supported yet (they come in a later release)",
                where, name);
}

/* Decodes one JSON message object into 'm'. 'where' prefixes messages
 * ("" or "messages[3]."). */
static bool decode_json_msg(json_t *o, InMsg *m, const char *where, size_t max_body,
                            GwProblem *p) {
    m->queue_id = -1;
    if (!json_is_object(o)) return gw_fail(p, 400, "INVALID_FIELD", "%smessage must be an "
                                        "object", where);
    json_t *body = NULL;
    const char *enc = "utf8";
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v) {
        if (strcmp(key, "body") == 0) {
            if (!json_is_string(v))
                return gw_fail(p, 400, "INVALID_FIELD", "%sbody must be a string", where);
            body = v;
        } else if (strcmp(key, "bodyEncoding") == 0) {
            enc = json_string_value(v);
            if (!enc || (strcmp(enc, "utf8") != 0 && strcmp(enc, "base64") != 0)) {
                return gw_fail(p, 400, "INVALID_FIELD",
                            "%sbodyEncoding must be \"utf8\" or \"base64\"", where);
            }
        } else if (strcmp(key, "tags") == 0) {
            if (!json_is_string(v))
                return gw_fail(p, 400, "INVALID_FIELD", "%stags must be a string", where);
            m->tags = mq_slice(json_string_value(v), json_string_length(v));
            if (!check_tags(m->tags, where, p)) return false;
        } else if (strcmp(key, "keys") == 0) {
            if (!json_is_array(v)) {
                return gw_fail(p, 400, "INVALID_FIELD", "%skeys must be an array of strings",
                            where);
            }
            size_t i;
            json_t *k;
            json_array_foreach(v, i, k) {
                if (!json_is_string(k)) {
                    return gw_fail(p, 400, "INVALID_FIELD", "%skeys[%zu] must be a string", where,
                                i);
                }
                if (!add_key(m, json_string_value(k), json_string_length(k), i, where, p))
                    return false;
            }
        } else if (strcmp(key, "properties") == 0) {
            if (!json_is_object(v)) {
                return gw_fail(p, 400, "INVALID_FIELD", "%sproperties must be an object", where);
            }
            m->props = v;
        } else if (strcmp(key, "shardingKey") == 0) {
            if (!json_is_string(v))
                return gw_fail(p, 400, "INVALID_FIELD", "%sshardingKey must be a string", where);
            m->sharding_key = mq_slice(json_string_value(v), json_string_length(v));
            if (!check_sharding_key(m->sharding_key, where, p)) return false;
        } else if (strcmp(key, "queueId") == 0) {
            if (!json_is_integer(v) || json_integer_value(v) < 0) {
                return gw_fail(p, 400, "INVALID_FIELD",
                            "%squeueId must be a non-negative integer", where);
            }
            m->queue_id = json_integer_value(v);
        } else if (is_delay_field(key)) {
            return unsupported_delay(where, key, p);
        } else {
            return gw_fail(p, 400, "UNKNOWN_FIELD", "%sunknown field '%.64s'", where, key);
        }
    }
    if (!body) return gw_fail(p, 400, "INVALID_FIELD", "%sbody is required", where);
    const char *s = json_string_value(body);
    size_t len = json_string_length(body);
    if (strcmp(enc, "base64") == 0) {
        size_t n = 0;
        int rc = js_b64_decode(s, len, &m->body_owned, &n);
        if (rc == MQ_ERR_NOMEM) return gw_fail(p, 503, "OUT_OF_MEMORY", "out of memory");
        if (rc != MQ_OK) {
            return gw_fail(p, 400, "INVALID_FIELD", "%sbody is not valid base64 (standard "
                        "alphabet, padded)", where);
        }
        m->body = mq_slice(m->body_owned, n);
    } else {
        m->body = mq_slice(s, len);
    }
    if (m->body.len == 0) return gw_fail(p, 400, "INVALID_FIELD", "%sbody is empty", where);
    if (m->body.len > max_body) {
        return gw_fail(p, 413, "PAYLOAD_TOO_LARGE", "%sbody of %zu bytes is over maxMessageSize "
                    "(%zu bytes)", where, m->body.len, max_body);
    }
    return true;
}

/* Raw form: the body is the message; the rest comes from the query. */
static bool decode_raw(GwRequest *r, InMsg *m, size_t max_body, GwProblem *p) {
    static const char *const known[] = {"tags", "keys", "shardingKey", "queueId",
                                        "delayLevel", "delayMs", "deliverAt", NULL};
    m->queue_id = -1;
    const char *bad = gw_query_unknown(r, known);
    if (bad) return gw_fail(p, 400, "UNKNOWN_FIELD", "unknown query parameter '%.64s'", bad);
    for (size_t i = 4; known[i]; i++) {
        if (gw_query(r, known[i])) return unsupported_delay("", known[i], p);
    }
    const char *v = gw_query(r, "tags");
    if (v) {
        m->tags = mq_slice(v, strlen(v));
        if (!check_tags(m->tags, "", p)) return false;
    }
    v = gw_query(r, "keys");
    if (v) {
        size_t idx = 0;
        const char *s = v;
        for (;;) {
            const char *comma = strchr(s, ',');
            size_t len = comma ? (size_t)(comma - s) : strlen(s);
            if (!add_key(m, s, len, idx++, "", p)) return false;
            if (!comma) break;
            s = comma + 1;
        }
    }
    v = gw_query(r, "shardingKey");
    if (v) {
        m->sharding_key = mq_slice(v, strlen(v));
        if (!check_sharding_key(m->sharding_key, "", p)) return false;
    }
    v = gw_query(r, "queueId");
    if (v && !gw_parse_u63(v, &m->queue_id)) {
        return gw_fail(p, 400, "INVALID_FIELD", "queueId must be a non-negative integer");
    }
    m->body = mq_slice(r->body ? r->body : "", r->body_len);
    if (m->body.len == 0) return gw_fail(p, 400, "INVALID_FIELD", "body is empty");
    if (m->body.len > max_body) {
        return gw_fail(p, 413, "PAYLOAD_TOO_LARGE", "body of %zu bytes is over maxMessageSize "
                    "(%zu bytes)", m->body.len, max_body);
    }
    return true;
}

/* Encodes the properties of 'm': user properties, then TAGS, KEYS,
 * UNIQ_KEY, __SHARDINGKEY. */
static bool encode_props(InMsg *m, const uint8_t ip[4], const char *where, GwProblem *p) {
    size_t n_user = m->props ? json_object_size(m->props) : 0;
    MsgProp *props = calloc(n_user + 4, sizeof(*props));
    if (!props) return gw_fail(p, 503, "OUT_OF_MEMORY", "out of memory");
    size_t n = 0;
    bool ok = false;
    if (m->props) {
        const char *name;
        json_t *v;
        json_object_foreach(m->props, name, v) {
            MqSlice ns = mq_slice(name, strlen(name));
            const char *why = text_problem(name, ns.len, true);
            if (why) {
                gw_fail(p, 400, "INVALID_FIELD", "%sproperty name '%.64s' %s", where, name, why);
                goto out;
            }
            if (msg_prop_name_reserved(ns)) {
                gw_fail(p, 400, "INVALID_FIELD", "%sproperty name '%.64s' is reserved for the "
                     "broker", where, name);
                goto out;
            }
            if (!json_is_string(v)) {
                gw_fail(p, 400, "INVALID_FIELD", "%sproperty '%.64s' must be a string", where,
                     name);
                goto out;
            }
            MqSlice vs = mq_slice(json_string_value(v), json_string_length(v));
            if (memchr(vs.ptr, MSG_PROP_NAME_SEP, vs.len) ||
                memchr(vs.ptr, MSG_PROP_PAIR_SEP, vs.len) || memchr(vs.ptr, 0, vs.len)) {
                gw_fail(p, 400, "INVALID_FIELD", "%sproperty '%.64s' contains a byte 0x00, 0x01 "
                     "or 0x02", where, name);
                goto out;
            }
            props[n++] = (MsgProp){ns, vs};
        }
    }
    if (m->tags.len) props[n++] = (MsgProp){mq_slice(MSG_PROP_TAGS, 4), m->tags};
    if (m->keys) {
        props[n++] = (MsgProp){mq_slice(MSG_PROP_KEYS, 4), mq_slice(m->keys, strlen(m->keys))};
    }
    msg_uniq_id(ip, m->uniq);
    props[n++] = (MsgProp){mq_slice(MSG_PROP_UNIQ_KEY, strlen(MSG_PROP_UNIQ_KEY)),
                           mq_slice(m->uniq, MSG_ID_LEN)};
    if (m->sharding_key.len) {
        props[n++] = (MsgProp){mq_slice(MSG_PROP_SHARDING_KEY, strlen(MSG_PROP_SHARDING_KEY)),
                               m->sharding_key};
    }
    size_t need = 0;
    if (msg_props_encode(props, n, NULL, 0, &need) != MQ_OK) {
        gw_fail(p, 400, "INVALID_FIELD", "%sproperties, tags and keys together are over %d "
             "bytes", where, CL_PROPS_MAX);
        goto out;
    }
    m->props_buf = malloc(need ? need : 1);
    if (!m->props_buf) {
        gw_fail(p, 503, "OUT_OF_MEMORY", "out of memory");
        goto out;
    }
    if (msg_props_encode(props, n, m->props_buf, need, &m->props_len) != MQ_OK) {
        gw_fail(p, 400, "INVALID_FIELD", "%sproperties cannot be encoded", where);
        goto out;
    }
    ok = true;
out:
    free(props);
    return ok;
}

/* ======================================================================
 * Produce
 * ====================================================================== */

/* Produce state kept across a SYNC_FLUSH suspension (GwRequest.ctx). */
typedef struct ProduceCtx {
    ClFlushWaiter waiter;     /* registered with the commit log; must live until
                               * its callback has run (freed only at completion,
                               * which follows the resume the callback does) */
    json_t *answer;           /* the 200 body, statuses SEND_OK for now */
    atomic_int flush_status;  /* MQ_OK, MQ_ERR_TIMEOUT, MQ_ERR_IO, MQ_ERR_RDONLY */
    GwRequest *req;           /* back pointer for the callback */
} ProduceCtx;

static void produce_ctx_free(void *p) {
    ProduceCtx *c = p;
    json_decref(c->answer);
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

/* Sets "status" of the answer (and of each batch result) to 'status'. */
static void set_status(json_t *answer, const char *status) {
    json_t *results = json_object_get(answer, "results");
    if (results) {
        size_t i;
        json_t *v;
        json_array_foreach(results, i, v) json_object_set_new(v, "status", json_string(status));
    } else {
        json_object_set_new(answer, "status", json_string(status));
    }
}

/* Answers a produce after its flush (or at once under ASYNC_FLUSH). */
static enum MHD_Result answer_produce(GwRequest *r, json_t *answer, int flush_status) {
    if (flush_status == MQ_ERR_TIMEOUT) {
        set_status(answer, "FLUSH_DISK_TIMEOUT");
    } else if (flush_status != MQ_OK) {
        json_decref(answer);
        return gw_reply_error(r, 503, "FLUSH_FAILED", "the message was written but the disk "
                              "flush failed (%s); the store is now read-only",
                              mq_strerror(flush_status));
    }
    return gw_reply_json(r, 200, answer);
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
    json_t *answer = c->answer;
    c->answer = NULL;
    return answer_produce(r, answer, atomic_load(&c->flush_status));
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

/* POST /v1/topics/{topic}/messages */
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
    json_t *batch = NULL;
    size_t count = 1;
    if (kind == 'J') {
        if (!gw_json_object(r, false, &root, &prob)) return gw_reply_problem(r, &prob);
        if (!gw_json_batch(root, "messages", BATCH_MAX, &batch, &count, &prob)) {
            json_decref(root);
            return gw_reply_problem(r, &prob);
        }
    }

    InMsg *msgs = calloc(count, sizeof(*msgs));
    ClMessage *cms = calloc(count, sizeof(*cms));
    ClAppendResult *res = calloc(count, sizeof(*res));
    ProduceCtx *ctx = NULL;
    json_t *answer = NULL;
    if (!msgs || !cms || !res) {
        ret = gw_reply_err(r, MQ_ERR_NOMEM, "produce");
        goto out;
    }
    for (size_t i = 0; i < count; i++) {
        char where[32] = "";
        if (batch) snprintf(where, sizeof(where), "messages[%zu].", i);
        bool ok = kind == 'R' ? decode_raw(r, &msgs[i], max_body, &prob)
                              : decode_json_msg(batch ? json_array_get(batch, i) : root,
                                                &msgs[i], where, max_body, &prob);
        if (!ok) {
            ret = gw_reply_problem(r, &prob);
            goto out;
        }
    }

    TopicRegistry *reg = broker_topics(b);
    MetaTopic t;
    int rc = topic_for_produce(reg, topic, conf->auto_create_topic, AUTO_QUEUES, &t);
    if (rc != MQ_OK) {
        ret = reply_topic_err(r, rc, topic, true);
        goto out;
    }
    uint8_t born[8];
    client_host(r, born);
    const uint8_t *ip = broker_store_host(b);
    int64_t now = mq_now_ms();
    for (size_t i = 0; i < count; i++) {
        InMsg *im = &msgs[i];
        char where[32] = "";
        if (batch) snprintf(where, sizeof(where), "messages[%zu].", i);
        rc = topic_select_queue(reg, &t, im->queue_id, im->sharding_key, &im->queue);
        if (rc != MQ_OK) {
            ret = gw_reply_error(r, 400, "INVALID_FIELD", "%squeueId %lld is out of range: "
                                 "topic '%s' has %u write queues", where,
                                 (long long)im->queue_id, topic, t.write_queues);
            goto out;
        }
        if (!encode_props(im, ip, where, &prob)) {
            ret = gw_reply_problem(r, &prob);
            goto out;
        }
        cms[i] = (ClMessage){.topic = mq_slice(topic, strlen(topic)),
                             .queue_id = im->queue,
                             .born_ts = now,
                             .body = im->body,
                             .props = mq_slice(im->props_buf, im->props_len)};
        memcpy(cms[i].born_host, born, 8);
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

    json_t *results = batch ? json_array() : NULL;
    answer = batch ? json_pack("{s:o}", "results", results) : NULL;
    if (batch && !answer) {
        ret = gw_reply_err(r, MQ_ERR_NOMEM, "produce");
        goto out;
    }
    for (size_t i = 0; i < count; i++) {
        char id[MSG_ID_LEN + 1];
        msg_id_encode(ip, res[i].phys_off, id);
        json_t *one = json_pack("{s:s, s:s, s:I, s:I, s:n, s:s}", "status", "SEND_OK", "msgId",
                                id, "queueId", (json_int_t)msgs[i].queue, "queueOffset",
                                (json_int_t)res[i].queue_off, "transactionId", "uniqueId",
                                msgs[i].uniq);
        if (!batch) {
            answer = one;
        } else if (one) {
            json_array_append_new(results, one);
        }
    }
    if (!answer) {
        ret = gw_reply_err(r, MQ_ERR_NOMEM, "produce");
        goto out;
    }

    if (conf->flush_disk_type != CONF_SYNC_FLUSH) {
        ret = answer_produce(r, answer, MQ_OK);
        answer = NULL;
        goto out;
    }
    ctx = calloc(1, sizeof(*ctx));
    if (!ctx) {
        /* Stored but durability unknown: say so rather than fail. */
        ret = answer_produce(r, answer, MQ_ERR_TIMEOUT);
        answer = NULL;
        goto out;
    }
    ctx->answer = answer;
    ctx->req = r;
    atomic_init(&ctx->flush_status, MQ_OK);
    answer = NULL;
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
    json_decref(answer);
    for (size_t i = 0; msgs && i < count; i++) in_msg_clear(&msgs[i]);
    free(msgs);
    free(cms);
    free(res);
    json_decref(root);
    return ret;
}

/* ======================================================================
 * Get by id
 * ====================================================================== */

/* GET /v1/messages/{msgId} */
enum MHD_Result h_message_get(GwRequest *r, const RtMatch *m) {
    Broker *b = gw_broker(r);
    const char *id = rt_param(m, "msgId");
    uint8_t host[8];
    uint64_t off = 0;
    if (msg_id_decode(id, strlen(id), host, &off) != MQ_OK) {
        return gw_reply_error(r, 400, "INVALID_MSG_ID", "'%.64s' is not a message id (32 hex "
                              "digits)", id);
    }
    /* The record at that offset must carry the id's store host: an id of
     * another broker (or a position inside a record) is not found.  The
     * record's own host, not today's listen address, is compared, so ids
     * stay valid across a restart on another port. */
    ClRecord rec;
    MappedFile *ref = NULL;
    int rc = store_read_msg(broker_store(b), off, &rec, &ref);
    if (rc != MQ_OK || rec.phys_off != off || memcmp(rec.store_host, host, 8) != 0) {
        mf_unref(&ref);
        return gw_reply_error(r, 404, "MESSAGE_NOT_FOUND", "no message '%s' on this broker",
                              id);
    }
    json_t *msg = js_message(&rec);
    mf_unref(&ref);
    if (!msg) return gw_reply_err(r, MQ_ERR_NOMEM, "message");
    return gw_reply_json(r, 200, msg);
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
} PullRead;

/* Reads up to 'max' messages of queue ('ts', 'queue_id') from 'from' that
 * match 'tags' (all when 'all') into 'list'.  MQ_ERR_NOMEM. */
static int pull_read(Store *st, MqSlice ts, uint32_t queue_id, uint64_t from, int64_t max,
                     const MqSlice *tags, size_t n_tags, bool all, json_t *list,
                     PullRead *out) {
    store_queue_range(st, ts, queue_id, &out->qmin, &out->qmax);
    out->next = from;
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
            json_t *one = js_message(&rec);
            if (one) json_array_append_new(list, one);
        }
        mf_unref(&ref);
    }
    free(ents);
    out->status = json_array_size(list) > 0 ? "FOUND" : "NO_NEW_MSG";
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
    if (!h_topic_name_ok(r, topic, &ret)) return ret;
    const char *bad = gw_query_unknown(r, known);
    if (bad) {
        return gw_reply_error(r, 400, "INVALID_PARAMETER", "unknown query parameter '%.64s'",
                              bad);
    }
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
    json_t *list = json_array();
    if (!list) return gw_reply_err(r, MQ_ERR_NOMEM, "pull");
    PullRead pr;
    rc = pull_read(st, ts, (uint32_t)queue_id, from, max, tags, n_tags, all, list, &pr);
    if (rc != MQ_OK) {
        json_decref(list);
        return gw_reply_err(r, rc, "pull");
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
        json_decref(list);
        return MHD_YES;
    }
    json_t *root = json_pack("{s:s, s:o, s:I, s:I, s:I}", "status", pr.status, "messages", list,
                             "nextOffset", (json_int_t)pr.next, "minOffset",
                             (json_int_t)pr.qmin, "maxOffset", (json_int_t)pr.qmax);
    if (!root) return gw_reply_err(r, MQ_ERR_NOMEM, "pull");
    return gw_reply_json(r, 200, root);
}
