/*
 * json.h - jansson helpers of the gateway: the one place that builds the
 * error body of API.md and maps mq_err codes to HTTP statuses, base64,
 * and the one encoder of API.md's `message` object (get, pull, queries).
 */
#ifndef PETREL_JSON_H
#define PETREL_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "commitlog.h"

/* js_utf8_clean copies the NUL-terminated 'in' to 'out' ('cap' bytes,
 * always NUL-terminated), each byte that does not start a valid UTF-8
 * sequence replaced by '?'. */
void js_utf8_clean(const char *in, char *out, size_t cap);

/* js_error builds {"error":{"code":'code',"message":'message',"status":N}}.
 * Bytes of 'message' that are not valid UTF-8 become '?' (js_utf8_clean).
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

/* js_b64_decode decodes the 'len' characters at 's' (standard alphabet,
 * '=' padding required to a multiple of 4, no whitespace) into a malloc'd
 * buffer '*out' (caller frees; non-NULL even when empty) of '*out_len'
 * bytes.  MQ_OK, MQ_ERR_INVAL (not base64), MQ_ERR_NOMEM.  Any thread. */
int js_b64_decode(const char *s, size_t len, uint8_t **out, size_t *out_len);

/* js_b64_encode returns the base64 text of the 'len' bytes at 'p' as a
 * malloc'd NUL-terminated string (caller frees), NULL when out of memory. */
char *js_b64_encode(const uint8_t *p, size_t len);

/* js_message builds API.md's message object from the record 'rec'
 * (slices borrowed for the call only): msgId (offset id of its store host
 * and position), topic, queueId, queueOffset, commitLogOffset, tags ("" =
 * none), keys [], properties {} (user properties only: the MSG_PROP_*
 * system names are left out), body, bodyEncoding, bornTimestamp,
 * storeTimestamp, reconsumeTimes, storeSize: jw_message's text, parsed.
 * Hot paths write jw_message straight into their answer instead.  Caller
 * owns the result; NULL when out of memory. */
json_t *js_message(const ClRecord *rec);

#endif
