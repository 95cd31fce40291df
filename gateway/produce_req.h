/*
 * produce_req.h - decoding and checking the body of a produce request
 * (POST /v1/topics/{topic}/messages, API.md "Produce"): one JSON message,
 * the {"messages":[...]} batch, or the raw form (body + query parameters),
 * into a list of messages, and the property block of each (store/FORMAT.md
 * "Commit log", props).  No MHD connection, topic or store is involved, so
 * the handler (h_message.c) and the fuzz target (tests/fuzz) share it.
 *
 * Failures are answered through a GwProblem (req.h): 400 INVALID_FIELD or
 * UNKNOWN_FIELD, 413 PAYLOAD_TOO_LARGE, 503
 * OUT_OF_MEMORY; the messages are prefixed "messages[N]." in a batch.
 */
#ifndef PETREL_PRODUCE_REQ_H
#define PETREL_PRODUCE_REQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "msg.h"
#include "mq.h"
#include "req.h"

#define PR_BATCH_MAX 1000 /* messages in one batch request */
#define PR_TEXT_MAX 255   /* bytes of a tag, key, sharding key, property name */
#define PR_KEYS_MAX 32    /* keys of one message */

/* One message of a request, decoded and checked.  Slices borrow from the
 * JSON tree or the raw request's parameters and body; the '*_owned',
 * 'keys' and 'props_buf' buffers belong to it (pr_req_clear). */
#define PR_DELAY_LEVEL_BAD INT64_MIN /* ProduceMsg.delay_level that is not an integer */

typedef struct ProduceMsg {
    char where[32];            /* prefix of its error messages: "" or "messages[N]." */
    MqSlice body;              /* 1..max_body bytes */
    uint8_t *body_owned;       /* base64-decoded body behind 'body', or NULL */
    MqSlice tags;              /* empty = none */
    char *keys;                /* space-joined keys, malloc'd; NULL = none */
    MqSlice sharding_key;      /* empty = none */
    int64_t queue_id;          /* -1 = not given */
    bool has_delay_level;      /* "delayLevel" given */
    int64_t delay_level;       /* its value as given (PR_DELAY_LEVEL_BAD: not an
                                * integer); the range (1..levels) is the caller's
                                * to check, it knows messageDelayLevel */
    bool has_delay_ms;         /* "delayMs" given */
    int64_t delay_ms;          /* its value, >= 0 (checked); 0 = not delayed; the
                                * maximum (timerMaxDelaySec) is the caller's */
    bool has_deliver_at;       /* "deliverAt" given */
    int64_t deliver_at_ms;     /* its value, epoch ms >= 0 (checked); past = now;
                                * the maximum is the caller's */
    json_t *props;             /* "properties" object (borrowed), or NULL; checked
                                * by pr_encode_props */
    uint8_t *props_buf;        /* pr_encode_props: the property block, malloc'd */
    size_t props_len;          /* bytes in 'props_buf' */
    char uniq[MSG_ID_LEN + 1]; /* pr_encode_props: its UNIQ_KEY; "" before */
} ProduceMsg;

/* The messages of one request. */
typedef struct ProduceReq {
    ProduceMsg *msgs; /* 'count' messages, malloc'd */
    size_t count;     /* 1..PR_BATCH_MAX */
    bool batch;       /* the {"messages":[...]} form: answered with "results" */
} ProduceReq;

/* The query parameters of the raw form, each NUL-terminated and
 * percent-decoded, or NULL when absent. */
typedef struct ProduceRawParams {
    const char *tags;
    const char *keys; /* comma-separated */
    const char *sharding_key;
    const char *queue_id;
    const char *delay_level;
    const char *delay_ms;
    const char *deliver_at;
} ProduceRawParams;

/* pr_decode_json decodes 'root', a JSON object (the whole request body),
 * as one message or as the batch form into 'out' (zeroed first), checking
 * every field except "properties" (see pr_encode_props): bodies of 1 to
 * 'max_body' bytes after base64, tags, keys, shardingKey, queueId,
 * delayLevel (an integer; its range is the caller's), delayMs and
 * deliverAt (non-negative integers; their maximum is the caller's), at
 * most one of those three.  The first problem found goes in 'p' and
 * false is returned ('out' then holds nothing to clear).  On success the
 * caller owns 'out' (pr_req_clear); its slices borrow from 'root', which
 * must outlive it.  Any thread. */
bool pr_decode_json(json_t *root, size_t max_body, ProduceReq *out, GwProblem *p);

/* pr_decode_json_fast decodes the 'len' bytes of JSON at 'json' as
 * pr_decode_json would, but only for plain requests (no escapes, no
 * "properties", known fields once each, valid values); for anything else
 * it returns false and the caller parses with jansson and calls
 * pr_decode_json, which also words the errors.  On true the caller owns
 * 'out' (pr_req_clear); its slices borrow from 'json'.  Any thread. */
bool pr_decode_json_fast(const char *json, size_t len, size_t max_body, ProduceReq *out);

/* pr_decode_raw decodes the raw form: 'body' ('len' bytes) is the one
 * message, 'q' its parameters.  The checks and ownership are those of
 * pr_decode_json; the slices borrow from 'q' and 'body'.  Unknown query
 * parameters are the caller's to reject first.  Any thread. */
bool pr_decode_raw(const ProduceRawParams *q, const void *body, size_t len, size_t max_body,
                   ProduceReq *out, GwProblem *p);

/* pr_encode_props checks the user properties of 'm' and builds its
 * property block in m->props_buf: user properties in request order, then
 * TAGS, KEYS, UNIQ_KEY (a new msg_uniq_id for 'ip', also in m->uniq) and
 * __SHARDINGKEY.  400 when a property name or value is invalid or the
 * block is over CL_PROPS_MAX bytes.  Call once per message, after
 * pr_decode_*.  Any thread. */
bool pr_encode_props(ProduceMsg *m, const uint8_t ip[4], GwProblem *p);

/* pr_req_clear frees what 'req' owns and zeroes it.  NULL ok. */
void pr_req_clear(ProduceReq *req);

#endif
