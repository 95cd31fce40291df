/*
 * req.h - request validation shared by the handlers: a validation failure
 * carried to one reply, the JSON body as an object, integer query
 * parameters, and the {"<field>":[...]} batch form.  Also the job context
 * and answers of the admin writes of a named resource (PUT and DELETE of
 * a topic or a group), offloaded through jobs.h.
 */
#ifndef PETREL_REQ_H
#define PETREL_REQ_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http.h"

#define GW_PROBLEM_MAX 256 /* bytes of a validation message */

/* A validation failure: HTTP status, error code (NULL = the status's
 * default code) and message, answered later by gw_reply_problem. */
typedef struct GwProblem {
    unsigned status;
    const char *code;
    char msg[GW_PROBLEM_MAX];
} GwProblem;

/* gw_fail fills 'p' and returns false (so validators can `return gw_fail`). */
bool gw_fail(GwProblem *p, unsigned status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* gw_reply_problem answers 'p' as the JSON error body. */
enum MHD_Result gw_reply_problem(GwRequest *r, const GwProblem *p);

/* gw_parse_u63 reads a decimal integer in [0, INT64_MAX] (digits only). */
bool gw_parse_u63(const char *s, int64_t *out);

/* gw_query_known is true when every query parameter of 'r' is named in
 * the NULL-terminated 'known' (NULL: the route takes none); otherwise it
 * has answered 400 INVALID_PARAMETER naming the first other one and put
 * MHD's result in '*ret'. */
bool gw_query_known(GwRequest *r, const char *const *known, enum MHD_Result *ret);

/* gw_query_int reads the optional integer query parameter 'name' into
 * '*out' (left as is when absent) within ['lo', 'hi']; 400
 * INVALID_PARAMETER in 'p' otherwise. */
bool gw_query_int(GwRequest *r, const char *name, int64_t lo, int64_t hi, int64_t *out,
                  GwProblem *p);

/* gw_json_object parses the request body as a JSON object (duplicate keys
 * rejected).  With 'check_ct' a Content-Type other than application/json
 * is 415.  Caller owns '*out' on success. */
bool gw_json_object(GwRequest *r, bool check_ct, json_t **out, GwProblem *p);

/* gw_json_fields takes the members of object 'o' whose names are in the
 * NULL-terminated 'names' into values[i] (borrowed; NULL when absent).  A
 * member of another name is 400 UNKNOWN_FIELD ("<where>unknown field
 * 'x'"); the values themselves are the caller's to check. */
bool gw_json_fields(json_t *o, const char *const *names, json_t **values, const char *where,
                    GwProblem *p);

/* gw_json_batch looks for the batch form {"<field>":[1..'max' items]} in
 * 'root': '*batch' = the array (borrowed) and '*count' its size, or
 * '*batch' = NULL and '*count' = 1 when 'field' is absent (a single item).
 * A batch object with other fields, a non-array or a bad size is 400. */
bool gw_json_batch(json_t *root, const char *field, size_t max, json_t **batch, size_t *count,
                   GwProblem *p);

/* ---- admin writes of a named resource (jobs.h) ---------------------------
 * PUT and DELETE /v1/topics/{topic} and /v1/groups/{group} check the
 * request on the worker, put the job's inputs in a context that starts
 * with a GwNameJob (gw_name_job_new), gw_offload the sqlite write and
 * answer from the context in a resumed call: gw_name_job_put_resumed or
 * gw_name_job_delete_resumed, which the handler passes to gw_offload.
 * The job function fills 'rc' (and 'created' for a PUT). */

typedef struct GwNameJob GwNameJob;

/* What differs between the resources: constant, one per resource. */
typedef struct GwNameKind {
    const char *noun;          /* "topic": the 404 message is "<noun> '<name>' does not exist" */
    const char *notfound_code; /* the 404 code of a DELETE: "TOPIC_NOT_FOUND" */
    /* The PUT answer's object, built from the whole context (the GwNameJob
     * and what follows it) after a successful job; NULL when out of memory. */
    json_t *(*put_body)(const GwNameJob *job);
} GwNameKind;

/* The head of the context of one named-resource write (GwRequest.ctx). */
struct GwNameJob {
    const GwNameKind *kind;       /* borrowed, static */
    Broker *broker;               /* borrowed; outlives requests */
    char name[META_NAME_MAX + 1]; /* the name from the path, checked */
    int rc;                       /* the job's result: MQ_OK or an mq_err */
    bool created;                 /* PUT: the resource is new */
};

/* gw_name_job_new allocates a zeroed context of 'size' bytes (>=
 * sizeof(GwNameJob)) whose first member is a GwNameJob, fills that with
 * 'kind' (static), the daemon's broker and 'name' (checked by the caller;
 * cut at META_NAME_MAX bytes) and makes it r->ctx, freed at completion
 * (r->ctx_free = free: the context owns no pointers).  Returns the
 * context, or NULL when out of memory after answering 500 (MHD's result
 * in '*ret').  MHD worker, from a handler, before gw_offload. */
void *gw_name_job_new(GwRequest *r, size_t size, const GwNameKind *kind, const char *name,
                      enum MHD_Result *ret);

/* gw_name_job_put_resumed is the resumed call of a PUT (an RtHandler for
 * gw_offload): the job's error as gw_reply_err, else kind->put_body's
 * object with 201 when 'created', 200 when updated.  MHD worker. */
enum MHD_Result gw_name_job_put_resumed(GwRequest *r, const RtMatch *m);

/* gw_name_job_delete_resumed is the resumed call of a DELETE: 204 with no
 * body when the job succeeded, 404 kind->notfound_code on MQ_ERR_NOTFOUND,
 * else the job's error as gw_reply_err.  MHD worker. */
enum MHD_Result gw_name_job_delete_resumed(GwRequest *r, const RtMatch *m);

#endif
