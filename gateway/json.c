/*
 * json.c - error bodies, status mapping, serialization, base64 and the
 * message encoder: see json.h.
 */
#include "json.h"

#include <stdlib.h>
#include <string.h>

#include "msg.h"
#include "mq.h"

/* Length of the valid UTF-8 sequence at 'p' (1..4), or 0 when it is not
 * one (bad lead or continuation byte, overlong form, surrogate, beyond
 * U+10FFFF: what jansson refuses). */
static size_t utf8_seq(const unsigned char *p) {
    unsigned c = p[0];
    if (c < 0x80) return 1;
    size_t n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 0;
    if (n == 0 || c > 0xf4) return 0;
    unsigned cp = c & (0x7f >> n);
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (p[i] & 0x3f);
    }
    static const unsigned min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return n;
}

void js_utf8_clean(const char *in, char *out, size_t cap) {
    const unsigned char *p = (const unsigned char *)in;
    size_t o = 0;
    while (*p && o + 1 < cap) {
        size_t n = utf8_seq(p);
        if (n == 0) { /* also a sequence cut short by a %.Ns */
            out[o++] = '?';
            p++;
            continue;
        }
        if (o + n >= cap) break;
        memcpy(out + o, p, n);
        o += n;
        p += n;
    }
    out[o] = '\0';
}

json_t *js_error(const char *code, const char *message, unsigned status) {
    json_t *msg = json_string(message);
    if (!msg) {
        /* Messages quote client input, which may be cut inside a UTF-8
         * sequence or not be UTF-8 at all: keep the words, mark the bytes. */
        char clean[1024];
        js_utf8_clean(message, clean, sizeof(clean));
        msg = json_string(clean);
    }
    if (!msg) msg = json_string("the request could not be processed");
    json_t *root = json_pack("{s:{s:s, s:o, s:i}}", "error", "code", code, "message", msg,
                             "status", (int)status);
    return root;
}

const char *js_code_for_status(unsigned status) {
    switch (status) {
    case 400: return "BAD_REQUEST";
    case 401: return "UNAUTHORIZED";
    case 403: return "FORBIDDEN";
    case 404: return "NOT_FOUND";
    case 405: return "METHOD_NOT_ALLOWED";
    case 409: return "CONFLICT";
    case 413: return "PAYLOAD_TOO_LARGE";
    case 415: return "UNSUPPORTED_MEDIA_TYPE";
    case 429: return "BUSY";
    case 503: return "SERVICE_UNAVAILABLE";
    case 507: return "DISK_FULL";
    default: return "INTERNAL_ERROR";
    }
}

unsigned gw_status_for(int err) {
    switch (err) {
    case MQ_ERR_INVAL: return 400;
    case MQ_ERR_NOTFOUND: return 404;
    case MQ_ERR_EXISTS:
    case MQ_ERR_STATE: return 409;
    case MQ_ERR_BUSY: return 429;
    case MQ_ERR_FULL: return 507;
    case MQ_ERR_RDONLY: return 503;
    default: return 500;
    }
}

char *js_dump(const json_t *v, size_t *len) {
    size_t need = json_dumpb(v, NULL, 0, JSON_COMPACT);
    if (need == 0) return NULL;
    char *buf = malloc(need);
    if (!buf) return NULL;
    *len = json_dumpb(v, buf, need, JSON_COMPACT);
    return buf;
}

/* ---- base64 --------------------------------------------------------------*/

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Value of a base64 digit, -1 for anything else ('=' included). */
static int b64_val(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

int js_b64_decode(const char *s, size_t len, uint8_t **out, size_t *out_len) {
    if (len % 4 != 0) return MQ_ERR_INVAL;
    size_t pad = 0;
    if (len >= 1 && s[len - 1] == '=') pad++;
    if (len >= 2 && s[len - 2] == '=') pad++;
    uint8_t *buf = malloc(len / 4 * 3 + 1);
    if (!buf) return MQ_ERR_NOMEM;
    size_t n = 0;
    for (size_t i = 0; i < len; i += 4) {
        bool last = i + 4 == len;
        int v[4];
        for (size_t k = 0; k < 4; k++) {
            v[k] = b64_val((unsigned char)s[i + k]);
            bool padded = last && k >= 4 - pad;
            if (padded ? s[i + k] != '=' : v[k] < 0) {
                free(buf);
                return MQ_ERR_INVAL;
            }
            if (padded) v[k] = 0;
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 |
                     (uint32_t)v[3];
        buf[n++] = (uint8_t)(w >> 16);
        if (!last || pad < 2) buf[n++] = (uint8_t)(w >> 8);
        if (!last || pad < 1) buf[n++] = (uint8_t)w;
    }
    *out = buf;
    *out_len = n;
    return MQ_OK;
}

char *js_b64_encode(const uint8_t *p, size_t len) {
    char *out = malloc((len + 2) / 3 * 4 + 1);
    if (!out) return NULL;
    size_t n = 0;
    size_t i = 0;
    for (; i + 3 <= len; i += 3) {
        uint32_t w = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        out[n++] = B64[w >> 18];
        out[n++] = B64[(w >> 12) & 63];
        out[n++] = B64[(w >> 6) & 63];
        out[n++] = B64[w & 63];
    }
    if (i < len) {
        uint32_t w = (uint32_t)p[i] << 16 | (i + 1 < len ? (uint32_t)p[i + 1] << 8 : 0);
        out[n++] = B64[w >> 18];
        out[n++] = B64[(w >> 12) & 63];
        out[n++] = i + 1 < len ? B64[(w >> 6) & 63] : '=';
        out[n++] = '=';
    }
    out[n] = '\0';
    return out;
}

/* ---- the message object --------------------------------------------------*/

int js_body(json_t *obj, MqSlice body) {
    /* json_stringn refuses invalid UTF-8: that is the test.  Bodies with a
     * NUL byte go as base64 too (many JSON readers refuse \u0000). */
    json_t *text = NULL;
    if (body.len == 0) {
        text = json_string("");
    } else if (!memchr(body.ptr, 0, body.len)) {
        text = json_stringn(body.ptr, body.len);
    }
    const char *enc = "utf8";
    if (!text) {
        char *b64 = js_b64_encode(body.ptr, body.len);
        if (!b64) return MQ_ERR_NOMEM;
        text = json_string(b64);
        free(b64);
        enc = "base64";
    }
    if (!text || json_object_set_new(obj, "body", text) != 0 ||
        json_object_set_new(obj, "bodyEncoding", json_string(enc)) != 0) {
        return MQ_ERR_NOMEM;
    }
    return MQ_OK;
}

/* A JSON string of the slice; invalid UTF-8 (not written by the gateway,
 * but possible from other producers) becomes base64 text. */
static json_t *slice_string(MqSlice s) {
    json_t *v = json_stringn(s.len ? s.ptr : "", s.len);
    if (v) return v;
    char *b64 = js_b64_encode(s.ptr, s.len);
    if (!b64) return NULL;
    v = json_string(b64);
    free(b64);
    return v;
}

/* Splits the space-separated KEYS value into 'arr'. */
static int add_keys(json_t *arr, MqSlice keys) {
    const char *p = keys.ptr;
    const char *end = p + keys.len;
    while (p < end) {
        while (p < end && *p == ' ') p++;
        const char *k = p;
        while (p < end && *p != ' ') p++;
        if (p > k && json_array_append_new(arr, slice_string(mq_slice(k, (size_t)(p - k)))))
            return MQ_ERR_NOMEM;
    }
    return MQ_OK;
}

json_t *js_message(const ClRecord *rec) {
    char id[MSG_ID_LEN + 1];
    msg_id_encode(rec->store_host, rec->phys_off, id);
    MqSlice tags = {"", 0};
    MqSlice keys = {"", 0};
    msg_prop_get(rec->props, MSG_PROP_TAGS, &tags);
    msg_prop_get(rec->props, MSG_PROP_KEYS, &keys);
    json_t *keys_arr = json_array();
    json_t *props = json_object();
    json_t *m = json_pack("{s:s, s:o, s:I, s:I, s:I, s:o}", "msgId", id, "topic",
                          slice_string(rec->topic), "queueId", (json_int_t)rec->queue_id,
                          "queueOffset", (json_int_t)rec->queue_off, "commitLogOffset",
                          (json_int_t)rec->phys_off, "tags", slice_string(tags));
    if (!m || !keys_arr || !props || add_keys(keys_arr, keys) != MQ_OK) goto err;
    MsgProp pairs[64];
    size_t n = 0;
    if (msg_props_decode(rec->props, NULL, 0, &n) == MQ_OK && n > 0) {
        MsgProp *all = n <= 64 ? pairs : calloc(n, sizeof(*all));
        if (!all) goto err;
        size_t got = 0;
        msg_props_decode(rec->props, all, n, &got);
        for (size_t i = 0; i < got; i++) {
            if (msg_prop_name_reserved(all[i].name)) continue;
            char name[256];
            size_t nl = all[i].name.len < sizeof(name) - 1 ? all[i].name.len : sizeof(name) - 1;
            memcpy(name, all[i].name.ptr, nl);
            name[nl] = '\0';
            json_t *v = slice_string(all[i].value);
            if (!v || json_object_set_new(props, name, v) != 0) {
                if (all != pairs) free(all);
                goto err;
            }
        }
        if (all != pairs) free(all);
    }
    json_object_set_new(m, "keys", keys_arr);
    json_object_set_new(m, "properties", props);
    keys_arr = props = NULL;
    if (js_body(m, rec->body) != MQ_OK) goto err;
    json_t *rest = json_pack("{s:I, s:I, s:I, s:I}", "bornTimestamp", (json_int_t)rec->born_ts,
                             "storeTimestamp", (json_int_t)rec->store_ts, "reconsumeTimes",
                             (json_int_t)rec->reconsume_times, "storeSize",
                             (json_int_t)rec->total_size);
    if (!rest || json_object_update(m, rest) != 0) {
        json_decref(rest);
        goto err;
    }
    json_decref(rest);
    return m;

err:
    json_decref(keys_arr);
    json_decref(props);
    json_decref(m);
    return NULL;
}
