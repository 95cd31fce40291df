/*
 * json.c - error bodies, status mapping and serialization: see json.h.
 */
#include "json.h"

#include <stdlib.h>

#include "mq.h"

json_t *js_error(const char *code, const char *message, unsigned status) {
    json_t *msg = json_string(message);
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
