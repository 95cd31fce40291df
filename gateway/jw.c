/*
 * jw.c - the JSON text writer: see jw.h.
 */
#include "jw.h"

#include <stdio.h>
#include <stdlib.h>

#include "json.h"
#include "msg.h"

void jw_init(JsonW *w, size_t reserve) {
    memset(w, 0, sizeof(*w));
    if (reserve == 0) return;
    w->buf = malloc(reserve);
    if (!w->buf) {
        w->failed = true;
        return;
    }
    w->cap = reserve;
}

char *jw_take(JsonW *w, size_t *len) {
    char *b = w->failed ? NULL : w->buf;
    *len = w->failed ? 0 : w->len;
    if (w->failed) free(w->buf);
    memset(w, 0, sizeof(*w));
    return b;
}

void jw_free(JsonW *w) {
    free(w->buf);
    memset(w, 0, sizeof(*w));
}

bool jw_grow(JsonW *w, size_t n) {
    if (w->failed) return false;
    if (w->cap - w->len >= n) return true;
    size_t cap = w->cap ? w->cap : 256;
    while (cap - w->len < n) {
        if (cap > SIZE_MAX / 2) {
            w->failed = true;
            return false;
        }
        cap *= 2;
    }
    char *nb = realloc(w->buf, cap);
    if (!nb) {
        w->failed = true;
        return false;
    }
    w->buf = nb;
    w->cap = cap;
    return true;
}

/* Whether any of the 8 bytes at 's' is below 0x20, '"' or '\\' (the bit
 * tricks report existence exactly, which is all that is asked). */
static inline bool needs_escape8(const char *s) {
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    uint64_t v;
    memcpy(&v, s, 8);
    uint64_t ctl = (v - ones * 0x20) & ~v & highs;
    uint64_t q = v ^ (ones * '"');
    uint64_t bs = v ^ (ones * '\\');
    return (ctl | ((q - ones) & ~q & highs) | ((bs - ones) & ~bs & highs)) != 0;
}

void jw_str(JsonW *w, const char *s, size_t n) {
    /* Worst case: every byte a 6-byte \u00XX escape, plus the quotes. */
    if (n > (SIZE_MAX - 2) / 6 || !jw_grow(w, n * 6 + 2)) {
        w->failed = true;
        return;
    }
    static const char hex[] = "0123456789ABCDEF";
    char *o = w->buf + w->len;
    *o++ = '"';
    for (size_t i = 0; i < n; i++) {
        /* Runs of 8 bytes with nothing to escape are copied whole. */
        while (i + 8 <= n && !needs_escape8(s + i)) {
            memcpy(o, s + i, 8);
            o += 8;
            i += 8;
        }
        if (i >= n) break;
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            *o++ = (char)c;
            continue;
        }
        *o++ = '\\';
        switch (c) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '\b': *o++ = 'b'; break;
        case '\f': *o++ = 'f'; break;
        case '\n': *o++ = 'n'; break;
        case '\r': *o++ = 'r'; break;
        case '\t': *o++ = 't'; break;
        default:
            *o++ = 'u';
            *o++ = '0';
            *o++ = '0';
            *o++ = hex[c >> 4];
            *o++ = hex[c & 15];
        }
    }
    *o++ = '"';
    w->len = (size_t)(o - w->buf);
}

void jw_int(JsonW *w, int64_t v) {
    /* By hand: snprintf's format parsing cost a measurable share of a
     * pull (8 integers per message). */
    char tmp[24];
    char *end = tmp + sizeof(tmp);
    char *p = end;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0) *--p = '-';
    jw_raw(w, p, (size_t)(end - p));
}

size_t jw_utf8_len(const unsigned char *p, size_t n) {
    unsigned c = p[0];
    if (c < 0x80) return 1;
    size_t len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 0;
    if (len == 0 || c > 0xf4 || len > n) return 0;
    unsigned cp = c & (0x7fu >> len);
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (p[i] & 0x3f);
    }
    static const unsigned min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return len;
}

bool jw_utf8_valid(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        /* ASCII runs dominate: skip them 8 bytes at a time */
        while (i + 8 <= n) {
            uint64_t v;
            memcpy(&v, p + i, 8);
            if (v & 0x8080808080808080ull) break;
            i += 8;
        }
        if (i >= n) break;
        size_t k = jw_utf8_len(p + i, n - i);
        if (k == 0) return false;
        i += k;
    }
    return true;
}

/* A string field: text when valid UTF-8, else base64 text (as jansson's
 * encoder did for records written by other producers). */
static void put_text(JsonW *w, MqSlice s) {
    if (jw_utf8_valid(s.ptr, s.len)) {
        jw_str(w, s.ptr, s.len);
        return;
    }
    char *b64 = js_b64_encode(s.ptr, s.len);
    if (!b64) {
        w->failed = true;
        return;
    }
    jw_str(w, b64, strlen(b64));
    free(b64);
}

/* The space-separated KEYS value as a JSON array. */
static void put_keys(JsonW *w, MqSlice keys) {
    jw_lit(w, "[");
    const char *p = keys.ptr;
    const char *end = p + keys.len;
    bool first = true;
    while (p < end) {
        while (p < end && *p == ' ') p++;
        const char *k = p;
        while (p < end && *p != ' ') p++;
        if (p == k) continue;
        if (!first) jw_lit(w, ",");
        first = false;
        put_text(w, mq_slice(k, (size_t)(p - k)));
    }
    jw_lit(w, "]");
}

/* The user properties of 'pairs' ('n'); a name given twice keeps its last
 * value (as a JSON object would). */
static void put_props(JsonW *w, const MsgProp *pairs, size_t n) {
    jw_lit(w, "{");
    bool first = true;
    for (size_t i = 0; i < n; i++) {
        if (msg_prop_name_reserved(pairs[i].name)) continue;
        bool later = false;
        for (size_t j = i + 1; j < n && !later; j++) {
            later = pairs[j].name.len == pairs[i].name.len &&
                    memcmp(pairs[j].name.ptr, pairs[i].name.ptr, pairs[i].name.len) == 0;
        }
        if (later) continue;
        if (!first) jw_lit(w, ",");
        first = false;
        put_text(w, pairs[i].name);
        jw_lit(w, ":");
        put_text(w, pairs[i].value);
    }
    jw_lit(w, "}");
}

static bool name_is(MqSlice name, const char *want) {
    size_t n = strlen(want);
    return name.len == n && memcmp(name.ptr, want, n) == 0;
}

static void put_body(JsonW *w, MqSlice body) {
    /* Bodies with a NUL byte go as base64 (many JSON readers refuse
     * \u0000), as do bodies that are not UTF-8 text. */
    if (!memchr(body.ptr ? body.ptr : "", 0, body.len) && jw_utf8_valid(body.ptr, body.len)) {
        jw_lit(w, "\"body\":");
        jw_str(w, body.ptr, body.len);
        jw_lit(w, ",\"bodyEncoding\":\"utf8\"");
        return;
    }
    char *b64 = js_b64_encode(body.ptr, body.len);
    if (!b64) {
        w->failed = true;
        return;
    }
    jw_lit(w, "\"body\":");
    jw_str(w, b64, strlen(b64));
    free(b64);
    jw_lit(w, ",\"bodyEncoding\":\"base64\"");
}

void jw_message(JsonW *w, const ClRecord *rec) {
    /* The properties are split once; TAGS and KEYS come from the same
     * pass.  Damaged properties (never written by this broker) show as
     * none, with tags and keys looked up directly. */
    MsgProp stack[32];
    MsgProp *pairs = stack;
    size_t n = 0;
    int rc = msg_props_decode(rec->props, stack, 32, &n);
    if (rc == MQ_ERR_FULL && msg_props_decode(rec->props, NULL, 0, &n) == MQ_OK) {
        pairs = calloc(n, sizeof(*pairs));
        if (!pairs) {
            w->failed = true;
            return;
        }
        rc = msg_props_decode(rec->props, pairs, n, &n);
    }
    MqSlice tags = {"", 0};
    MqSlice keys = {"", 0};
    if (rc != MQ_OK) {
        n = 0;
        msg_prop_get(rec->props, MSG_PROP_TAGS, &tags);
        msg_prop_get(rec->props, MSG_PROP_KEYS, &keys);
    }
    for (size_t i = 0; i < n; i++) {
        if (name_is(pairs[i].name, MSG_PROP_TAGS)) tags = pairs[i].value;
        if (name_is(pairs[i].name, MSG_PROP_KEYS)) keys = pairs[i].value;
    }
    char id[MSG_ID_LEN + 1];
    msg_id_encode(rec->store_host, rec->phys_off, id);
    jw_lit(w, "{\"msgId\":\"");
    jw_raw(w, id, MSG_ID_LEN);
    jw_lit(w, "\",\"topic\":");
    put_text(w, rec->topic);
    jw_lit(w, ",\"queueId\":");
    jw_int(w, rec->queue_id);
    jw_lit(w, ",\"queueOffset\":");
    jw_int(w, (int64_t)rec->queue_off);
    jw_lit(w, ",\"commitLogOffset\":");
    jw_int(w, (int64_t)rec->phys_off);
    jw_lit(w, ",\"tags\":");
    put_text(w, tags);
    jw_lit(w, ",\"keys\":");
    put_keys(w, keys);
    jw_lit(w, ",\"properties\":");
    put_props(w, pairs, n);
    if (pairs != stack) free(pairs);
    jw_lit(w, ",");
    put_body(w, rec->body);
    jw_lit(w, ",\"bornTimestamp\":");
    jw_int(w, rec->born_ts);
    jw_lit(w, ",\"storeTimestamp\":");
    jw_int(w, rec->store_ts);
    jw_lit(w, ",\"reconsumeTimes\":");
    jw_int(w, rec->reconsume_times);
    jw_lit(w, ",\"storeSize\":");
    jw_int(w, rec->total_size);
    jw_lit(w, "}");
}
