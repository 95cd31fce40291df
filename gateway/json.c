/*
 * json.c - error bodies, status mapping, serialization, base64 and the
 * message encoder: see json.h.
 */
#include "json.h"
#include "jw.h"

#include <stdlib.h>
#include <string.h>

#include "msg.h"
#include "mq.h"

void js_utf8_clean(const char *in, char *out, size_t cap) {
    const unsigned char *p = (const unsigned char *)in;
    size_t o = 0;
    size_t left = strlen(in);
    while (*p && o + 1 < cap) {
        size_t n = jw_utf8_len(p, left);
        if (n == 0) { /* also a sequence cut short by a %.Ns */
            out[o++] = '?';
            p++;
            left--;
            continue;
        }
        if (o + n >= cap) break;
        memcpy(out + o, p, n);
        o += n;
        p += n;
        left -= n;
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

json_t *js_message(const ClRecord *rec) {
    /* One encoder for the message object (jw_message); the tree form is
     * for the few answers built with jansson (get by id, queries). */
    JsonW w;
    jw_init(&w, 512);
    jw_message(&w, rec);
    size_t len = 0;
    char *text = jw_take(&w, &len);
    if (!text) return NULL;
    json_t *m = json_loadb(text, len, JSON_ALLOW_NUL, NULL);
    free(text);
    return m;
}
