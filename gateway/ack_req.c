/*
 * ack_req.c - the ack body decoders (see ack_req.h).
 */
#include "ack_req.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- fast path -------------------------------------------------------------*/

typedef struct Scan {
    const char *p;
    const char *end;
} Scan;

static void skip_ws(Scan *s) {
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
        s->p++;
}

static bool eat(Scan *s, char c) {
    skip_ws(s);
    if (s->p >= s->end || *s->p != c) return false;
    s->p++;
    return true;
}

/* A string of printable ASCII without escapes: its bytes in '*v', '*n'. */
static bool plain_string(Scan *s, const char **v, size_t *n) {
    if (!eat(s, '"')) return false;
    const char *start = s->p;
    while (s->p < s->end && *s->p != '"') {
        unsigned char c = (unsigned char)*s->p;
        if (c < 0x20 || c >= 0x7f || c == '\\') return false;
        s->p++;
    }
    if (s->p >= s->end) return false;
    *v = start;
    *n = (size_t)(s->p - start);
    s->p++;
    return true;
}

static bool grow(AckReq *a, size_t *cap) {
    size_t c = *cap ? *cap * 2 : 64;
    const char **h = realloc(a->handles, c * sizeof(*h));
    if (!h) return false;
    a->handles = h;
    size_t *l = realloc(a->lens, c * sizeof(*l));
    if (!l) return false;
    a->lens = l;
    *cap = c;
    return true;
}

static bool handle_array(Scan *s, AckReq *a) {
    if (!eat(s, '[')) return false;
    size_t cap = 0;
    skip_ws(s);
    if (s->p < s->end && *s->p == ']') return false; /* empty: the slow path words it */
    do {
        if (a->n == ACK_HANDLES_MAX) return false;
        if (a->n == cap && !grow(a, &cap)) return false;
        if (!plain_string(s, &a->handles[a->n], &a->lens[a->n])) return false;
        a->n++;
    } while (eat(s, ','));
    return eat(s, ']');
}

bool ack_decode_fast(const char *body, size_t len, AckReq *out) {
    memset(out, 0, sizeof(*out));
    if (!body) return false;
    Scan s = {body, body + len};
    bool has_topic = false, has_handles = false;
    if (!eat(&s, '{')) goto fail;
    do {
        const char *key;
        size_t klen;
        if (!plain_string(&s, &key, &klen) || !eat(&s, ':')) goto fail;
        if (klen == 5 && memcmp(key, "topic", 5) == 0 && !has_topic) {
            const char *t;
            size_t tn;
            if (!plain_string(&s, &t, &tn) || msg_name_problem(t, tn)) goto fail;
            memcpy(out->topic, t, tn);
            out->topic[tn] = '\0';
            has_topic = true;
        } else if (klen == 14 && memcmp(key, "receiptHandles", 14) == 0 && !has_handles) {
            if (!handle_array(&s, out)) goto fail;
            has_handles = true;
        } else {
            goto fail;
        }
    } while (eat(&s, ','));
    if (!eat(&s, '}') || !has_topic || !has_handles) goto fail;
    skip_ws(&s);
    if (s.p != s.end) goto fail;
    return true;
fail:
    ack_req_free(out);
    return false;
}

/* ---- jansson path ----------------------------------------------------------*/

bool ack_decode_json(const char *body, size_t len, AckReq *out, GwProblem *p) {
    memset(out, 0, sizeof(*out));
    json_error_t jerr;
    json_t *root = json_loadb(body ? body : "", len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        return gw_fail(p, 400, "INVALID_JSON", "malformed JSON at line %d column %d: %s",
                       jerr.line, jerr.column, jerr.text);
    }
    out->root = root;
    if (!json_is_object(root)) {
        ack_req_free(out);
        return gw_fail(p, 400, "INVALID_JSON", "the body must be a JSON object");
    }
    static const char *const names[] = {"topic", "receiptHandles", NULL};
    json_t *v[2];
    if (!gw_json_fields(root, names, v, "", p)) goto fail;
    if (!v[0] || !json_is_string(v[0])) {
        gw_fail(p, 400, "INVALID_FIELD", "'topic' is required: a topic name");
        goto fail;
    }
    const char *t = json_string_value(v[0]);
    const char *why = msg_name_problem(t, json_string_length(v[0]));
    if (why) {
        gw_fail(p, 400, "INVALID_NAME", "topic '%.200s': %s", t, why);
        goto fail;
    }
    snprintf(out->topic, sizeof(out->topic), "%s", t);
    size_t n = json_is_array(v[1]) ? json_array_size(v[1]) : 0;
    if (n == 0 || n > ACK_HANDLES_MAX) {
        gw_fail(p, 400, "INVALID_FIELD", "'receiptHandles' must be an array of 1..%d receipt "
                "handles", ACK_HANDLES_MAX);
        goto fail;
    }
    out->handles = malloc(n * sizeof(*out->handles));
    out->lens = malloc(n * sizeof(*out->lens));
    if (!out->handles || !out->lens) {
        gw_fail(p, 503, "OUT_OF_MEMORY", "no memory for the ack");
        goto fail;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *h = json_array_get(v[1], i);
        if (!json_is_string(h)) {
            gw_fail(p, 400, "INVALID_FIELD", "receiptHandles[%zu] must be a string", i);
            goto fail;
        }
        out->handles[i] = json_string_value(h);
        out->lens[i] = json_string_length(h);
    }
    out->n = n;
    return true;
fail:
    ack_req_free(out);
    return false;
}

void ack_req_free(AckReq *a) {
    free(a->handles);
    free(a->lens);
    json_decref(a->root);
    a->handles = NULL;
    a->lens = NULL;
    a->root = NULL;
    a->n = 0;
}
