/*
 * fuzz_request.c - request decoding on arbitrary bytes.  The first byte
 * picks the decoder, the rest is its input:
 *   'm'   a message id (msg_id_decode): accepted exactly when it is 32 hex
 *         digits, and then it re-encodes to the same id in upper case;
 *   't'   a pull's tag expression (msg_tag_expr_parse): accepted tags are
 *         non-empty, trimmed, distinct slices of the input without '|',
 *         and joining them with "||" parses back to the same tags;
 *   'r'   the raw produce form (pr_decode_raw): a presence byte, then the
 *         present query parameters each ended by '\n', then the body;
 *   other a JSON produce body, one message or a batch (pr_decode_json);
 *         what the fast path (pr_decode_json_fast) accepts, the jansson
 *         path must accept as the same messages.
 * A decoded produce request must hold 1..PR_BATCH_MAX messages with bodies
 * of 1..FUZZ_MAX_BODY bytes equal to what was sent and valid tags and
 * keys; each property block must decode back to the same properties, and
 * the commit-log record built from the message must decode to the same
 * body and properties.  A refusal must be a 400, 413 or 503 with a code
 * and a message.  Any violation aborts.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "commitlog.h"
#include "json.h"
#include "msg.h"
#include "produce_req.h"

#define FUZZ_MAX_BODY 256 /* maxMessageSize of the decoder under test */
#define FUZZ_TAGS_CAP 32  /* h_message.c's PULL_TAGS_MAX */

#define CHECK(cond)                                                                              \
    do {                                                                                         \
        if (!(cond)) {                                                                           \
            fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond);         \
            abort();                                                                             \
        }                                                                                        \
    } while (0)

static const uint8_t IP[4] = {127, 0, 0, 1};
static const uint8_t HOST[8] = {127, 0, 0, 1, 0x90, 0x1f, 0, 0};

static bool slice_is(MqSlice s, const void *p, size_t len) {
    return s.len == len && (len == 0 || memcmp(s.ptr, p, len) == 0);
}

static bool slice_is_str(MqSlice s, const char *str) { return slice_is(s, str, strlen(str)); }

/* A refused request: one of the statuses API.md allows for bad input. */
static void check_problem(const GwProblem *p) {
    CHECK(p->status == 400 || p->status == 413 || p->status == 503);
    CHECK(p->code != NULL && p->code[0] != '\0');
    CHECK((p->status == 413) == (strcmp(p->code, "PAYLOAD_TOO_LARGE") == 0));
    CHECK(p->msg[0] != '\0');
    CHECK(memchr(p->msg, '\0', sizeof(p->msg)) != NULL);
}

/* The rules of produce_req.c's text_problem for a tag, key or sharding key. */
static bool text_ok(MqSlice s, bool space_ok) {
    const unsigned char *c = s.ptr;
    if (s.len == 0 || s.len > PR_TEXT_MAX) return false;
    for (size_t i = 0; i < s.len; i++) {
        if (c[i] < 0x20 || c[i] == 0x7f || (c[i] == ' ' && !space_ok)) return false;
    }
    return c[0] != ' ' && c[s.len - 1] != ' ';
}

/* Checks the fields every decoded message must satisfy. */
static void check_fields(const ProduceMsg *m) {
    CHECK(m->body.len >= 1 && m->body.len <= FUZZ_MAX_BODY);
    CHECK(m->body.ptr != NULL);
    CHECK(!m->body_owned || m->body.ptr == m->body_owned);
    CHECK(m->queue_id >= -1);
    if (m->tags.len) {
        CHECK(text_ok(m->tags, true));
        CHECK(!memchr(m->tags.ptr, '|', m->tags.len));
    }
    if (m->sharding_key.len) CHECK(text_ok(m->sharding_key, true));
    if (m->keys) {
        size_t n = 0;
        for (const char *k = m->keys;;) {
            const char *sp = strchr(k, ' ');
            size_t len = sp ? (size_t)(sp - k) : strlen(k);
            CHECK(text_ok(mq_slice(k, len), false));
            n++;
            if (!sp) break;
            k = sp + 1;
        }
        CHECK(n >= 1 && n <= PR_KEYS_MAX);
    }
    CHECK(m->uniq[0] == '\0' && !m->props_buf && m->props_len == 0);
}

/* The delay fields of a decoded message: at most one of the three, the
 * timer ones non-negative. */
static void check_delays(const ProduceMsg *m) {
    CHECK(m->has_delay_level + m->has_delay_ms + m->has_deliver_at <= 1);
    CHECK(!m->has_delay_ms || m->delay_ms >= 0);
    CHECK(!m->has_deliver_at || m->deliver_at_ms >= 0);
    CHECK(m->has_delay_ms || m->delay_ms == 0);
    CHECK(m->has_deliver_at || m->deliver_at_ms == 0);
}

/* Encodes the property block of 'm' and checks it against the message:
 * the user properties of 'user' (NULL = none) in order, then TAGS, KEYS,
 * UNIQ_KEY and __SHARDINGKEY; then round-trips a whole record. */
static void check_props(ProduceMsg *m, json_t *user) {
    GwProblem p = {0};
    if (!pr_encode_props(m, IP, &p)) {
        check_problem(&p);
        CHECK(p.status != 413);
        return;
    }
    CHECK(m->props_len <= CL_PROPS_MAX);
    CHECK(strlen(m->uniq) == MSG_ID_LEN);
    size_t want = (user ? json_object_size(user) : 0) + (m->tags.len > 0) + (m->keys != NULL) +
                  1 + (m->sharding_key.len > 0);
    MqSlice block = mq_slice(m->props_buf, m->props_len);
    size_t n = 0;
    CHECK(msg_props_decode(block, NULL, 0, &n) == MQ_OK);
    CHECK(n == want);
    MsgProp *got = calloc(n, sizeof(*got));
    CHECK(got != NULL);
    CHECK(msg_props_decode(block, got, n, &n) == MQ_OK && n == want);
    size_t i = 0;
    if (user) {
        const char *name;
        json_t *v;
        json_object_foreach(user, name, v) {
            CHECK(slice_is_str(got[i].name, name));
            CHECK(!msg_prop_name_reserved(got[i].name));
            CHECK(slice_is(got[i].value, json_string_value(v), json_string_length(v)));
            i++;
        }
    }
    if (m->tags.len) {
        CHECK(slice_is_str(got[i].name, MSG_PROP_TAGS));
        CHECK(slice_is(got[i++].value, m->tags.ptr, m->tags.len));
    }
    if (m->keys) {
        CHECK(slice_is_str(got[i].name, MSG_PROP_KEYS));
        CHECK(slice_is_str(got[i++].value, m->keys));
    }
    CHECK(slice_is_str(got[i].name, MSG_PROP_UNIQ_KEY));
    CHECK(slice_is_str(got[i++].value, m->uniq));
    if (m->sharding_key.len) {
        CHECK(slice_is_str(got[i].name, MSG_PROP_SHARDING_KEY));
        CHECK(slice_is(got[i++].value, m->sharding_key.ptr, m->sharding_key.len));
    }
    CHECK(i == n);
    free(got);
    /* Lookups see the system values: no user property shadows them. */
    MqSlice v = {"", 0};
    CHECK(msg_prop_get(block, MSG_PROP_TAGS, &v) == (m->tags.len > 0));
    if (m->tags.len) CHECK(slice_is(v, m->tags.ptr, m->tags.len));
    CHECK(msg_prop_get(block, MSG_PROP_UNIQ_KEY, &v) && slice_is_str(v, m->uniq));

    /* The record the broker would append decodes to the same message. */
    ClMessage cm = {.topic = mq_slice("FuzzTopic", 9),
                    .queue_id = 3,
                    .born_ts = 1767225600000,
                    .body = m->body,
                    .props = block};
    size_t size = cl_record_size(&cm);
    CHECK(size > m->body.len + m->props_len);
    uint8_t *rec = malloc(size);
    CHECK(rec != NULL);
    cl_encode(rec, size, &cm, 4096, 7, 1767225600001, HOST);
    ClRecord out;
    CHECK(cl_decode(rec, size, true, &out) == CL_REC_OK);
    CHECK(out.total_size == size);
    CHECK(slice_is(out.body, m->body.ptr, m->body.len));
    CHECK(slice_is(out.props, block.ptr, block.len));
    free(rec);
}

/* The "body" the JSON message 'o' sent, as bytes ('*owned' to free). */
static MqSlice sent_body(json_t *o, uint8_t **owned) {
    json_t *b = json_object_get(o, "body");
    const char *enc = json_string_value(json_object_get(o, "bodyEncoding"));
    *owned = NULL;
    if (enc && strcmp(enc, "base64") == 0) {
        size_t n = 0;
        CHECK(js_b64_decode(json_string_value(b), json_string_length(b), owned, &n) == MQ_OK);
        return mq_slice(*owned, n);
    }
    return mq_slice(json_string_value(b), json_string_length(b));
}

/* The fast path may give up on anything, but what it accepts the jansson
 * path must accept too, as the same messages. */
static void check_same_msgs(const ProduceReq *fast, const ProduceReq *slow) {
    CHECK(fast->count == slow->count && fast->batch == slow->batch);
    for (size_t i = 0; i < fast->count; i++) {
        const ProduceMsg *a = &fast->msgs[i], *b = &slow->msgs[i];
        CHECK(strcmp(a->where, b->where) == 0);
        CHECK(slice_is(a->body, b->body.ptr, b->body.len));
        CHECK(slice_is(a->tags, b->tags.ptr, b->tags.len));
        CHECK(slice_is(a->sharding_key, b->sharding_key.ptr, b->sharding_key.len));
        CHECK((a->keys == NULL) == (b->keys == NULL));
        CHECK(!a->keys || strcmp(a->keys, b->keys) == 0);
        CHECK(a->queue_id == b->queue_id);
        CHECK(a->has_delay_level == b->has_delay_level && a->delay_level == b->delay_level);
        CHECK(a->has_delay_ms == b->has_delay_ms && a->delay_ms == b->delay_ms);
        CHECK(a->has_deliver_at == b->has_deliver_at && a->deliver_at_ms == b->deliver_at_ms);
        CHECK(a->props == NULL && b->props == NULL);
    }
}

static void fuzz_json(const uint8_t *data, size_t size) {
    ProduceReq fast;
    bool fast_ok = pr_decode_json_fast((const char *)data, size, FUZZ_MAX_BODY, &fast);
    if (!fast_ok) CHECK(fast.msgs == NULL && fast.count == 0);
    json_error_t jerr;
    json_t *root = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &jerr);
    CHECK(root || !fast_ok);
    if (!root) return;
    if (!json_is_object(root)) { /* refused before decoding (gw_json_object) */
        CHECK(!fast_ok);
        json_decref(root);
        return;
    }
    ProduceReq req;
    GwProblem p = {0};
    if (!pr_decode_json(root, FUZZ_MAX_BODY, &req, &p)) {
        CHECK(!fast_ok);
        check_problem(&p);
        CHECK(req.msgs == NULL && req.count == 0);
        json_decref(root);
        return;
    }
    if (fast_ok) {
        check_same_msgs(&fast, &req);
        pr_req_clear(&fast);
    }
    json_t *batch = json_object_get(root, "messages");
    CHECK(req.batch == (batch != NULL));
    CHECK(req.count >= 1 && req.count <= PR_BATCH_MAX);
    CHECK(req.count == (batch ? json_array_size(batch) : 1));
    for (size_t i = 0; i < req.count; i++) {
        ProduceMsg *m = &req.msgs[i];
        json_t *o = batch ? json_array_get(batch, i) : root;
        char where[32] = "";
        if (batch) snprintf(where, sizeof(where), "messages[%zu].", i);
        CHECK(strcmp(m->where, where) == 0);
        check_fields(m);
        uint8_t *owned = NULL;
        MqSlice sent = sent_body(o, &owned);
        CHECK(slice_is(m->body, sent.ptr, sent.len));
        free(owned);
        json_t *qid = json_object_get(o, "queueId");
        CHECK(m->queue_id == (qid ? json_integer_value(qid) : -1));
        check_delays(m);
        json_t *dms = json_object_get(o, "delayMs");
        json_t *dat = json_object_get(o, "deliverAt");
        CHECK(m->has_delay_ms == (dms != NULL) && m->has_deliver_at == (dat != NULL));
        CHECK(!dms || m->delay_ms == json_integer_value(dms));
        CHECK(!dat || m->deliver_at_ms == json_integer_value(dat));
        json_t *user = json_object_get(o, "properties");
        CHECK(m->props == user);
        check_props(m, user);
    }
    pr_req_clear(&req);
    CHECK(req.msgs == NULL && req.count == 0);
    json_decref(root);
}

/* Raw form: byte 0 says which of the seven parameters are present (bit i
 * = field i of ProduceRawParams); each present one is read up to '\n'
 * (as C strings, so a NUL ends it as it would in a query); the rest is
 * the body. */
static void fuzz_raw(const uint8_t *data, size_t size) {
    if (size < 1) return;
    unsigned present = data[0];
    size_t pos = 1;
    char *fields[7] = {0};
    for (int i = 0; i < 7; i++) {
        if (!(present & (1u << i))) continue;
        const uint8_t *nl = memchr(data + pos, '\n', size - pos);
        size_t len = nl ? (size_t)(nl - (data + pos)) : size - pos;
        fields[i] = strndup((const char *)data + pos, len);
        CHECK(fields[i] != NULL);
        pos += len + (nl ? 1 : 0);
    }
    ProduceRawParams q = {fields[0], fields[1], fields[2], fields[3],
                          fields[4], fields[5], fields[6]};
    /* An exact-size copy of the body, so that ASan sees any overread. */
    size_t blen = size - pos;
    uint8_t *body = blen ? malloc(blen) : NULL;
    if (blen) {
        CHECK(body != NULL);
        memcpy(body, data + pos, blen);
    }
    ProduceReq req;
    GwProblem p = {0};
    if (!pr_decode_raw(&q, body, blen, FUZZ_MAX_BODY, &req, &p)) {
        check_problem(&p);
        CHECK(req.msgs == NULL && req.count == 0);
    } else {
        CHECK(req.count == 1 && !req.batch);
        ProduceMsg *m = &req.msgs[0];
        CHECK(m->has_delay_level == (q.delay_level != NULL));
        CHECK(m->has_delay_ms == (q.delay_ms != NULL));
        CHECK(m->has_deliver_at == (q.deliver_at != NULL));
        check_delays(m);
        /* accepted values are plain decimal, as given */
        if (q.delay_ms) CHECK(m->delay_ms == strtoll(q.delay_ms, NULL, 10));
        if (q.deliver_at) CHECK(m->deliver_at_ms == strtoll(q.deliver_at, NULL, 10));
        if (q.delay_level) {
            /* the value as given, or the marker; its range is the caller's */
            char *end = NULL;
            long long v = strtoll(q.delay_level, &end, 10);
            bool digits = *q.delay_level >= '0' && *q.delay_level <= '9' && end && !*end;
            CHECK(m->delay_level == PR_DELAY_LEVEL_BAD || (digits && m->delay_level == v));
        }
        CHECK(m->where[0] == '\0');
        check_fields(m);
        CHECK(slice_is(m->body, body, blen));
        CHECK(q.tags ? slice_is_str(m->tags, q.tags) : m->tags.len == 0);
        CHECK(q.sharding_key ? slice_is_str(m->sharding_key, q.sharding_key)
                             : m->sharding_key.len == 0);
        CHECK((q.keys != NULL) == (m->keys != NULL));
        if (q.keys) {
            char *commas = strdup(m->keys);
            CHECK(commas != NULL);
            for (char *c = commas; *c; c++)
                if (*c == ' ') *c = ',';
            CHECK(strcmp(commas, q.keys) == 0);
            free(commas);
        }
        CHECK(q.queue_id ? m->queue_id == strtoll(q.queue_id, NULL, 10) : m->queue_id == -1);
        check_props(m, NULL);
        pr_req_clear(&req);
    }
    free(body);
    for (int i = 0; i < 7; i++) free(fields[i]);
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static void fuzz_msg_id(const uint8_t *data, size_t size) {
    char *id = malloc(size ? size : 1);
    CHECK(id != NULL);
    memcpy(id, data, size);
    bool valid = size == MSG_ID_LEN;
    for (size_t i = 0; valid && i < size; i++) valid = hex_digit(id[i]) >= 0;
    uint8_t host[8];
    uint64_t off = 0;
    int rc = msg_id_decode(id, size, host, &off);
    CHECK((rc == MQ_OK) == valid);
    CHECK(rc == MQ_OK || rc == MQ_ERR_INVAL);
    if (rc == MQ_OK) {
        char again[MSG_ID_LEN + 1];
        msg_id_encode(host, off, again);
        CHECK(strlen(again) == MSG_ID_LEN);
        for (size_t i = 0; i < MSG_ID_LEN; i++) {
            CHECK(again[i] == ((id[i] >= 'a' && id[i] <= 'f') ? id[i] - 'a' + 'A' : id[i]));
        }
    }
    free(id);
}

static bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

static void fuzz_tag_expr(const uint8_t *data, size_t size) {
    char *expr = malloc(size ? size : 1);
    CHECK(expr != NULL);
    memcpy(expr, data, size);
    MqSlice tags[FUZZ_TAGS_CAP];
    size_t n = 99;
    bool all = false;
    int rc = msg_tag_expr_parse(expr, size, tags, FUZZ_TAGS_CAP, &n, &all);
    CHECK(rc == MQ_OK || rc == MQ_ERR_INVAL || rc == MQ_ERR_FULL);
    if (rc == MQ_OK && all) {
        CHECK(n == 0);
        size_t b = 0;
        size_t e = size;
        while (b < e && is_blank(expr[b])) b++;
        while (e > b && is_blank(expr[e - 1])) e--;
        CHECK(e == b || (e == b + 1 && expr[b] == '*'));
    } else if (rc == MQ_OK) {
        CHECK(n >= 1 && n <= FUZZ_TAGS_CAP);
        size_t joined_len = 0;
        for (size_t i = 0; i < n; i++) {
            const char *t = tags[i].ptr;
            CHECK(t >= expr && t + tags[i].len <= expr + size);
            CHECK(tags[i].len > 0);
            CHECK(!is_blank(t[0]) && !is_blank(t[tags[i].len - 1]));
            CHECK(!memchr(t, '|', tags[i].len));
            CHECK(!(tags[i].len == 1 && t[0] == '*'));
            CHECK(msg_tag_expr_match(tags, n, false, tags[i]));
            for (size_t k = 0; k < i; k++) CHECK(!slice_is(tags[k], t, tags[i].len));
            joined_len += tags[i].len + 2;
        }
        /* "a||b||c" parses back to the same tags. */
        char *joined = malloc(joined_len);
        CHECK(joined != NULL);
        size_t w = 0;
        for (size_t i = 0; i < n; i++) {
            if (i) {
                joined[w++] = '|';
                joined[w++] = '|';
            }
            memcpy(joined + w, tags[i].ptr, tags[i].len);
            w += tags[i].len;
        }
        MqSlice again[FUZZ_TAGS_CAP];
        size_t n2 = 0;
        bool all2 = true;
        CHECK(msg_tag_expr_parse(joined, w, again, FUZZ_TAGS_CAP, &n2, &all2) == MQ_OK);
        CHECK(!all2 && n2 == n);
        for (size_t i = 0; i < n; i++) CHECK(slice_is(again[i], tags[i].ptr, tags[i].len));
        free(joined);
    }
    free(expr);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const uint8_t *in = data + 1;
    size_t n = size - 1;
    switch (data[0]) {
    case 'm': fuzz_msg_id(in, n); break;
    case 't': fuzz_tag_expr(in, n); break;
    case 'r': fuzz_raw(in, n); break;
    default: fuzz_json(in, n); break;
    }
    return 0;
}
