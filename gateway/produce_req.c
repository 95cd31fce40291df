/*
 * produce_req.c - decoding and checking produce request bodies (see
 * produce_req.h).  Calls jansson, req.c (GwProblem, the batch form),
 * json.c (base64) and core/msg.c (property codec, unique ids); keeps no
 * state of its own.
 */
#define _GNU_SOURCE
#include "produce_req.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "jw.h"

/* ======================================================================
 * Field checks
 * ====================================================================== */

/* Why 'len' bytes at 's' cannot be a tag, key, sharding key or property
 * name: NULL when they can.  'space_ok': spaces allowed inside. */
static const char *text_problem(const char *s, size_t len, bool space_ok) {
    if (len == 0) return "is empty";
    if (len > PR_TEXT_MAX) return "is longer than 255 bytes";
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

/* Appends key number 'idx' to m->keys (space-joined). */
static bool add_key(ProduceMsg *m, const char *k, size_t len, size_t idx, GwProblem *p) {
    const char *why = text_problem(k, len, false);
    if (why) return gw_fail(p, 400, "INVALID_FIELD", "%skeys[%zu] %s", m->where, idx, why);
    if (idx >= PR_KEYS_MAX) {
        return gw_fail(p, 400, "INVALID_FIELD", "%skeys has more than %d keys", m->where,
                       PR_KEYS_MAX);
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

/* The rule that a message is delayed one way at most. */
static bool check_one_delay(const ProduceMsg *m, GwProblem *p) {
    if (m->has_delay_level + m->has_delay_ms + m->has_deliver_at > 1) {
        return gw_fail(p, 400, "INVALID_FIELD",
                       "%sat most one of delayLevel, deliverAt and delayMs may be given",
                       m->where);
    }
    return true;
}

/* The body size rule, for both forms. */
static bool check_body_size(const ProduceMsg *m, size_t max_body, GwProblem *p) {
    if (m->body.len == 0) return gw_fail(p, 400, "INVALID_FIELD", "%sbody is empty", m->where);
    if (m->body.len > max_body) {
        return gw_fail(p, 413, "PAYLOAD_TOO_LARGE",
                       "%sbody of %zu bytes is over maxMessageSize (%zu bytes)", m->where,
                       m->body.len, max_body);
    }
    return true;
}

/* Allocates the 'count' messages of 'out' (zeroed, no queue given). */
static bool req_alloc(ProduceReq *out, size_t count, GwProblem *p) {
    memset(out, 0, sizeof(*out));
    out->msgs = calloc(count, sizeof(*out->msgs));
    if (!out->msgs) return gw_fail(p, 503, "OUT_OF_MEMORY", "out of memory");
    out->count = count;
    for (size_t i = 0; i < count; i++) out->msgs[i].queue_id = -1;
    return true;
}

/* ======================================================================
 * JSON form
 * ====================================================================== */

/* Decodes one JSON message object 'o' into 'm' (m->where already set). */
static bool decode_json_msg(json_t *o, ProduceMsg *m, size_t max_body, GwProblem *p) {
    const char *where = m->where;
    if (!json_is_object(o)) {
        return gw_fail(p, 400, "INVALID_FIELD", "%smessage must be an object", where);
    }
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
                    return gw_fail(p, 400, "INVALID_FIELD", "%skeys[%zu] must be a string",
                                   where, i);
                }
                if (!add_key(m, json_string_value(k), json_string_length(k), i, p)) return false;
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
        } else if (strcmp(key, "delayLevel") == 0) {
            m->has_delay_level = true;
            m->delay_level = json_is_integer(v) ? json_integer_value(v) : PR_DELAY_LEVEL_BAD;
        } else if (strcmp(key, "delayMs") == 0) {
            if (!json_is_integer(v) || json_integer_value(v) < 0) {
                return gw_fail(p, 400, "INVALID_FIELD",
                               "%sdelayMs must be a non-negative integer (milliseconds)", where);
            }
            m->has_delay_ms = true;
            m->delay_ms = json_integer_value(v);
        } else if (strcmp(key, "deliverAt") == 0) {
            if (!json_is_integer(v) || json_integer_value(v) < 0) {
                return gw_fail(p, 400, "INVALID_FIELD",
                               "%sdeliverAt must be a non-negative integer (epoch milliseconds)",
                               where);
            }
            m->has_deliver_at = true;
            m->deliver_at_ms = json_integer_value(v);
        } else {
            return gw_fail(p, 400, "UNKNOWN_FIELD", "%sunknown field '%.64s'", where, key);
        }
    }
    if (!check_one_delay(m, p)) return false;
    if (!body) return gw_fail(p, 400, "INVALID_FIELD", "%sbody is required", where);
    const char *s = json_string_value(body);
    size_t len = json_string_length(body);
    if (strcmp(enc, "base64") == 0) {
        size_t n = 0;
        int rc = js_b64_decode(s, len, &m->body_owned, &n);
        if (rc == MQ_ERR_NOMEM) return gw_fail(p, 503, "OUT_OF_MEMORY", "out of memory");
        if (rc != MQ_OK) {
            return gw_fail(p, 400, "INVALID_FIELD",
                           "%sbody is not valid base64 (standard alphabet, padded)", where);
        }
        m->body = mq_slice(m->body_owned, n);
    } else {
        m->body = mq_slice(s, len);
    }
    return check_body_size(m, max_body, p);
}

bool pr_decode_json(json_t *root, size_t max_body, ProduceReq *out, GwProblem *p) {
    memset(out, 0, sizeof(*out));
    json_t *batch = NULL;
    size_t count = 1;
    if (!gw_json_batch(root, "messages", PR_BATCH_MAX, &batch, &count, p)) return false;
    if (!req_alloc(out, count, p)) return false;
    out->batch = batch != NULL;
    for (size_t i = 0; i < count; i++) {
        ProduceMsg *m = &out->msgs[i];
        if (batch) snprintf(m->where, sizeof(m->where), "messages[%zu].", i);
        if (!decode_json_msg(batch ? json_array_get(batch, i) : root, m, max_body, p)) {
            pr_req_clear(out);
            return false;
        }
    }
    return true;
}

/* ======================================================================
 * JSON form, fast path
 *
 * Most produce bodies are plain: one object (or the batch form) with a
 * body, maybe tags, keys, a sharding key, a queue id or one delay field,
 * strings without escapes.  Those are decoded here straight from the
 * request bytes, with no jansson tree (parsing and freeing the tree was a
 * third of a batch's CPU, docs/bench.md).  Anything else -- escapes,
 * properties, unknown or repeated fields, numbers that are not plain
 * non-negative integers, bad values of any kind, more than one delay
 * field -- makes the fast path give up, and the jansson path
 * decides (and words every error).  So the fast path only has to be right
 * about what it accepts: fuzz_request checks that jansson's path accepts
 * the same and decodes it to the same messages.
 * ====================================================================== */

typedef struct Scan {
    const char *p;
    const char *end;
} Scan;

static void skip_ws(Scan *sc) {
    while (sc->p < sc->end &&
           (*sc->p == ' ' || *sc->p == '\n' || *sc->p == '\r' || *sc->p == '\t'))
        sc->p++;
}

static bool eat(Scan *sc, char c) {
    skip_ws(sc);
    if (sc->p >= sc->end || *sc->p != c) return false;
    sc->p++;
    return true;
}

/* A string without escapes or control characters, valid UTF-8. */
static bool plain_string(Scan *sc, MqSlice *out) {
    if (!eat(sc, '"')) return false;
    const char *start = sc->p;
    while (sc->p < sc->end) {
        unsigned char c = (unsigned char)*sc->p;
        if (c == '"') break;
        if (c == '\\' || c < 0x20) return false;
        sc->p++;
    }
    if (sc->p >= sc->end) return false;
    *out = mq_slice(start, (size_t)(sc->p - start));
    sc->p++; /* the closing quote */
    return jw_utf8_valid(start, out->len);
}

/* A non-negative integer without sign, fraction or exponent, no leading
 * zero, at most 18 digits (so it fits jansson's json_int_t too). */
static bool plain_uint(Scan *sc, int64_t *out) {
    skip_ws(sc);
    const char *start = sc->p;
    int64_t v = 0;
    while (sc->p < sc->end && *sc->p >= '0' && *sc->p <= '9') {
        if (sc->p - start >= 18) return false; /* before it could overflow */
        v = v * 10 + (*sc->p - '0');
        sc->p++;
    }
    size_t n = (size_t)(sc->p - start);
    if (n == 0 || n > 18 || (n > 1 && *start == '0')) return false;
    if (sc->p < sc->end && (*sc->p == '.' || *sc->p == 'e' || *sc->p == 'E')) return false;
    *out = v;
    return true;
}

enum {
    F_BODY = 1,
    F_ENC = 2,
    F_TAGS = 4,
    F_KEYS = 8,
    F_SHARD = 16,
    F_QUEUE = 32,
    F_DELAY = 64,
    F_DELAY_MS = 128,
    F_DELIVER_AT = 256
};

/* Which known field 'name' is (0: none the fast path handles). */
static int field_of(MqSlice name) {
    static const struct {
        const char *name;
        int bit;
    } fields[] = {{"body", F_BODY},   {"bodyEncoding", F_ENC}, {"tags", F_TAGS},
                  {"keys", F_KEYS},   {"shardingKey", F_SHARD}, {"queueId", F_QUEUE},
                  {"delayLevel", F_DELAY}, {"delayMs", F_DELAY_MS}, {"deliverAt", F_DELIVER_AT}};
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        if (name.len == strlen(fields[i].name) && memcmp(name.ptr, fields[i].name, name.len) == 0)
            return fields[i].bit;
    }
    return 0;
}

/* One message object into 'm'; false = give up. */
static bool fast_msg(Scan *sc, ProduceMsg *m, size_t max_body) {
    GwProblem scratch;
    if (!eat(sc, '{')) return false;
    int seen = 0;
    MqSlice body = {NULL, 0};
    bool base64 = false;
    skip_ws(sc);
    if (sc->p < sc->end && *sc->p == '}') return false; /* no body: jansson words it */
    for (;;) {
        MqSlice name;
        if (!plain_string(sc, &name) || !eat(sc, ':')) return false;
        int f = field_of(name);
        if (f == 0 || (seen & f)) return false;
        seen |= f;
        MqSlice v;
        switch (f) {
        case F_BODY:
            if (!plain_string(sc, &body)) return false;
            break;
        case F_ENC:
            if (!plain_string(sc, &v)) return false;
            if (v.len == 6 && memcmp(v.ptr, "base64", 6) == 0) {
                base64 = true;
            } else if (!(v.len == 4 && memcmp(v.ptr, "utf8", 4) == 0)) {
                return false;
            }
            break;
        case F_TAGS:
            if (!plain_string(sc, &m->tags) || !check_tags(m->tags, "", &scratch)) return false;
            break;
        case F_SHARD:
            if (!plain_string(sc, &m->sharding_key) ||
                !check_sharding_key(m->sharding_key, "", &scratch))
                return false;
            break;
        case F_QUEUE:
            if (!plain_uint(sc, &m->queue_id)) return false;
            break;
        case F_DELAY: /* its range is the caller's, as in pr_decode_json */
            if (!plain_uint(sc, &m->delay_level)) return false;
            m->has_delay_level = true;
            break;
        case F_DELAY_MS: /* so is the maximum of these two */
            if (!plain_uint(sc, &m->delay_ms)) return false;
            m->has_delay_ms = true;
            break;
        case F_DELIVER_AT:
            if (!plain_uint(sc, &m->deliver_at_ms)) return false;
            m->has_deliver_at = true;
            break;
        case F_KEYS:
            if (!eat(sc, '[')) return false;
            skip_ws(sc);
            if (sc->p < sc->end && *sc->p == ']') {
                sc->p++;
                break;
            }
            for (size_t i = 0;; i++) {
                if (!plain_string(sc, &v) || !add_key(m, v.ptr, v.len, i, &scratch)) return false;
                if (eat(sc, ']')) break;
                if (!eat(sc, ',')) return false;
            }
            break;
        }
        if (eat(sc, '}')) break;
        if (!eat(sc, ',')) return false;
    }
    if (!(seen & F_BODY) || !check_one_delay(m, &scratch)) return false;
    if (base64) {
        size_t n = 0;
        if (js_b64_decode(body.ptr, body.len, &m->body_owned, &n) != MQ_OK) return false;
        m->body = mq_slice(m->body_owned, n);
    } else {
        m->body = body;
    }
    return check_body_size(m, max_body, &scratch);
}

/* Counts the objects of a batch array without decoding them: the number
 * of '{' at depth 1, strings skipped; 0 when the shape is not plain. */
static size_t count_batch(Scan sc) {
    size_t n = 0;
    int depth = 0;
    while (sc.p < sc.end) {
        char c = *sc.p++;
        if (c == '"') {
            while (sc.p < sc.end && *sc.p != '"') {
                if (*sc.p == '\\') return 0;
                sc.p++;
            }
            if (sc.p >= sc.end) return 0;
            sc.p++;
        } else if (c == '{' || c == '[') {
            if (depth == 0 && c == '{') n++;
            depth++;
        } else if (c == '}' || c == ']') {
            if (depth == 0) return c == ']' ? n : 0;
            depth--;
        }
    }
    return 0;
}

bool pr_decode_json_fast(const char *json, size_t len, size_t max_body, ProduceReq *out) {
    memset(out, 0, sizeof(*out));
    Scan sc = {json ? json : "", (json ? json : "") + len};
    Scan probe = sc;
    MqSlice first;
    bool batch = eat(&probe, '{') && plain_string(&probe, &first) &&
                 first.len == 8 && memcmp(first.ptr, "messages", 8) == 0;
    size_t count = 1;
    if (batch) {
        if (!eat(&probe, ':') || !eat(&probe, '[')) return false;
        count = count_batch(probe);
        if (count == 0 || count > PR_BATCH_MAX) return false;
        sc = probe;
    }
    GwProblem scratch;
    if (!req_alloc(out, count, &scratch)) return false;
    out->batch = batch;
    for (size_t i = 0; i < count; i++) {
        ProduceMsg *m = &out->msgs[i];
        if (batch) snprintf(m->where, sizeof(m->where), "messages[%zu].", i);
        if (!fast_msg(&sc, m, max_body) || (batch && !eat(&sc, i + 1 < count ? ',' : ']'))) {
            pr_req_clear(out);
            return false;
        }
    }
    if (batch && !eat(&sc, '}')) {
        pr_req_clear(out);
        return false;
    }
    skip_ws(&sc);
    if (sc.p != sc.end) {
        pr_req_clear(out);
        return false;
    }
    return true;
}

/* ======================================================================
 * Raw form
 * ====================================================================== */

/* The raw form's checks, in the order of the JSON form's error list. */
static bool decode_raw(const ProduceRawParams *q, const void *body, size_t len, size_t max_body,
                       ProduceMsg *m, GwProblem *p) {
    if (q->delay_level) {
        int64_t lv = 0;
        m->has_delay_level = true;
        m->delay_level = gw_parse_u63(q->delay_level, &lv) ? lv : PR_DELAY_LEVEL_BAD;
    }
    if (q->delay_ms) {
        if (!gw_parse_u63(q->delay_ms, &m->delay_ms))
            return gw_fail(p, 400, "INVALID_FIELD",
                           "delayMs must be a non-negative integer (milliseconds)");
        m->has_delay_ms = true;
    }
    if (q->deliver_at) {
        if (!gw_parse_u63(q->deliver_at, &m->deliver_at_ms))
            return gw_fail(p, 400, "INVALID_FIELD",
                           "deliverAt must be a non-negative integer (epoch milliseconds)");
        m->has_deliver_at = true;
    }
    if (!check_one_delay(m, p)) return false;
    if (q->tags) {
        m->tags = mq_slice(q->tags, strlen(q->tags));
        if (!check_tags(m->tags, "", p)) return false;
    }
    if (q->keys) {
        size_t idx = 0;
        const char *s = q->keys;
        for (;;) {
            const char *comma = strchr(s, ',');
            size_t klen = comma ? (size_t)(comma - s) : strlen(s);
            if (!add_key(m, s, klen, idx++, p)) return false;
            if (!comma) break;
            s = comma + 1;
        }
    }
    if (q->sharding_key) {
        m->sharding_key = mq_slice(q->sharding_key, strlen(q->sharding_key));
        if (!check_sharding_key(m->sharding_key, "", p)) return false;
    }
    if (q->queue_id && !gw_parse_u63(q->queue_id, &m->queue_id)) {
        return gw_fail(p, 400, "INVALID_FIELD", "queueId must be a non-negative integer");
    }
    m->body = mq_slice(body ? body : "", len);
    return check_body_size(m, max_body, p);
}

bool pr_decode_raw(const ProduceRawParams *q, const void *body, size_t len, size_t max_body,
                   ProduceReq *out, GwProblem *p) {
    if (!req_alloc(out, 1, p)) return false;
    if (!decode_raw(q, body, len, max_body, &out->msgs[0], p)) {
        pr_req_clear(out);
        return false;
    }
    return true;
}

/* ======================================================================
 * Property block
 * ====================================================================== */

bool pr_encode_props(ProduceMsg *m, const uint8_t ip[4], GwProblem *p) {
    const char *where = m->where;
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
                gw_fail(p, 400, "INVALID_FIELD",
                        "%sproperty name '%.64s' is reserved for the broker", where, name);
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
                gw_fail(p, 400, "INVALID_FIELD",
                        "%sproperty '%.64s' contains a byte 0x00, 0x01 or 0x02", where, name);
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
        gw_fail(p, 400, "INVALID_FIELD", "%sproperties, tags and keys together are over %d bytes",
                where, CL_PROPS_MAX);
        goto out;
    }
    free(m->props_buf);
    m->props_buf = malloc(need ? need : 1);
    m->props_len = 0;
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

void pr_req_clear(ProduceReq *req) {
    if (!req) return;
    for (size_t i = 0; req->msgs && i < req->count; i++) {
        ProduceMsg *m = &req->msgs[i];
        free(m->body_owned);
        free(m->keys);
        free(m->props_buf);
    }
    free(req->msgs);
    memset(req, 0, sizeof(*req));
}
