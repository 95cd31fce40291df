/*
 * req.c - request validation shared by the handlers, and the context and
 * answers of the named-resource admin writes (see req.h).
 */
#define _GNU_SOURCE
#include "req.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

bool gw_fail(GwProblem *p, unsigned status, const char *code, const char *fmt, ...) {
    p->status = status;
    p->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->msg, sizeof(p->msg), fmt, ap);
    va_end(ap);
    return false;
}

enum MHD_Result gw_reply_problem(GwRequest *r, const GwProblem *p) {
    return gw_reply_error(r, p->status, p->code, "%s", p->msg);
}

bool gw_parse_u63(const char *s, int64_t *out) {
    if (!s || *s < '0' || *s > '9') return false;
    errno = 0;
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < 0) return false;
    *out = v;
    return true;
}

bool gw_query_int(GwRequest *r, const char *name, int64_t lo, int64_t hi, int64_t *out,
                  GwProblem *p) {
    const char *v = gw_query(r, name);
    if (!v) return true;
    int64_t x = 0;
    if (!gw_parse_u63(v, &x) || x < lo || x > hi) {
        return gw_fail(p, 400, "INVALID_PARAMETER", "%s must be an integer from %lld to %lld",
                       name, (long long)lo, (long long)hi);
    }
    *out = x;
    return true;
}

bool gw_json_object(GwRequest *r, bool check_ct, json_t **out, GwProblem *p) {
    if (check_ct) {
        const char *ct = gw_header(r, MHD_HTTP_HEADER_CONTENT_TYPE);
        if (ct && strncasecmp(ct, "application/json", 16) != 0)
            return gw_fail(p, 415, NULL, "Content-Type must be application/json");
    }
    json_error_t jerr;
    json_t *root =
        json_loadb(r->body ? r->body : "", r->body_len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        return gw_fail(p, 400, "INVALID_JSON", "malformed JSON at line %d column %d: %s",
                       jerr.line, jerr.column, jerr.text);
    }
    if (!json_is_object(root)) {
        json_decref(root);
        return gw_fail(p, 400, "INVALID_JSON", "the body must be a JSON object");
    }
    *out = root;
    return true;
}

bool gw_json_fields(json_t *o, const char *const *names, json_t **values, const char *where,
                    GwProblem *p) {
    for (size_t i = 0; names[i]; i++) values[i] = NULL;
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v) {
        size_t i = 0;
        while (names[i] && strcmp(names[i], key) != 0) i++;
        if (!names[i]) return gw_fail(p, 400, "UNKNOWN_FIELD", "%sunknown field '%.64s'", where, key);
        values[i] = v;
    }
    return true;
}

bool gw_json_batch(json_t *root, const char *field, size_t max, json_t **batch, size_t *count,
                   GwProblem *p) {
    *batch = json_object_get(root, field);
    *count = 1;
    if (!*batch) return true;
    if (json_object_size(root) != 1)
        return gw_fail(p, 400, "UNKNOWN_FIELD", "a batch has only the field \"%s\"", field);
    if (!json_is_array(*batch))
        return gw_fail(p, 400, "INVALID_FIELD", "%s must be an array", field);
    *count = json_array_size(*batch);
    if (*count == 0 || *count > max) {
        return gw_fail(p, 400, "INVALID_FIELD", "%s must hold 1 to %zu entries, not %zu", field,
                       max, *count);
    }
    return true;
}

/* ======================================================================
 * Admin writes of a named resource
 * ====================================================================== */

void *gw_name_job_new(GwRequest *r, size_t size, const GwNameKind *kind, const char *name,
                      enum MHD_Result *ret) {
    MQ_ASSERT(size >= sizeof(GwNameJob));
    GwNameJob *j = calloc(1, size);
    if (!j) {
        *ret = gw_reply_err(r, MQ_ERR_NOMEM, name);
        return NULL;
    }
    j->kind = kind;
    j->broker = gw_broker(r);
    snprintf(j->name, sizeof(j->name), "%s", name);
    r->ctx = j;
    r->ctx_free = free;
    return j;
}

enum MHD_Result gw_name_job_put_resumed(GwRequest *r, const RtMatch *m) {
    (void)m;
    const GwNameJob *j = r->ctx;
    if (j->rc != MQ_OK) return gw_reply_err(r, j->rc, j->name);
    json_t *out = j->kind->put_body(j);
    if (!out) return gw_reply_err(r, MQ_ERR_NOMEM, j->name);
    return gw_reply_json(r, j->created ? 201 : 200, out);
}

enum MHD_Result gw_name_job_delete_resumed(GwRequest *r, const RtMatch *m) {
    (void)m;
    const GwNameJob *j = r->ctx;
    if (j->rc == MQ_ERR_NOTFOUND) {
        return gw_reply_error(r, 404, j->kind->notfound_code, "%s '%s' does not exist",
                              j->kind->noun, j->name);
    }
    if (j->rc != MQ_OK) return gw_reply_err(r, j->rc, j->name);
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    if (!resp) return MHD_NO;
    return gw_reply(r, MHD_HTTP_NO_CONTENT, resp);
}

bool gw_query_known(GwRequest *r, const char *const *known, enum MHD_Result *ret) {
    static const char *const none[] = {NULL};
    const char *bad = gw_query_unknown(r, known ? known : none);
    if (!bad) return true;
    *ret = gw_reply_error(r, 400, "INVALID_PARAMETER", "unknown query parameter '%.64s'", bad);
    return false;
}
