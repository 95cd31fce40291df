/*
 * req.h - request validation shared by the handlers: a validation failure
 * carried to one reply, the JSON body as an object, integer query
 * parameters, and the {"<field>":[...]} batch form.
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

#endif
