/*
 * json.h - jansson helpers of the gateway: the one place that builds the
 * error body of API.md and maps mq_err codes to HTTP statuses.
 */
#ifndef PETREL_JSON_H
#define PETREL_JSON_H

#include <stddef.h>

#include <jansson.h>

/* js_error builds {"error":{"code":'code',"message":'message',"status":N}}.
 * A 'message' that is not valid UTF-8 is replaced by a generic one.
 * Caller owns the result; NULL only when out of memory. */
json_t *js_error(const char *code, const char *message, unsigned status);

/* js_code_for_status is the default error code of an HTTP status
 * ("BAD_REQUEST", "NOT_FOUND", "METHOD_NOT_ALLOWED", ...), for errors that
 * have no more specific code. */
const char *js_code_for_status(unsigned status);

/* gw_status_for maps an mq_err to its HTTP status: INVAL 400, NOTFOUND 404,
 * EXISTS and STATE 409, BUSY 429, FULL 507, RDONLY 503, anything else 500
 * (a 500 is a bug). */
unsigned gw_status_for(int err);

/* js_dump serializes 'v' compactly into a malloc'd buffer (caller frees)
 * of '*len' bytes, not NUL-terminated.  NULL when out of memory. */
char *js_dump(const json_t *v, size_t *len);

#endif
