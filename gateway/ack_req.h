/*
 * ack_req.h - decoding of the ack request body
 * {"topic":"T","receiptHandles":["...", ...]}: a fast path over the
 * request bytes for the plain form every client sends, and the jansson
 * path for everything else, which also words every error.  Profiles of
 * receive+ack showed jansson parsing the ack body as the largest single
 * cost (docs/bench.md).  fuzz_ack checks the two paths agree.
 */
#ifndef PETREL_ACK_REQ_H
#define PETREL_ACK_REQ_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "msg.h"
#include "req.h"

#define ACK_HANDLES_MAX 1000 /* receipt handles of one ack */

typedef struct AckReq {
    char topic[MSG_NAME_MAX + 1]; /* a valid, unreserved topic name */
    const char **handles;         /* malloc'd; each points into the body or 'root' */
    size_t *lens;                 /* malloc'd; bytes of each handle */
    size_t n;                     /* 1..ACK_HANDLES_MAX */
    json_t *root;                 /* the jansson tree behind 'handles', or NULL */
} AckReq;

/* ack_decode_fast decodes the 'len' bytes at 'body' when they are the
 * plain form: one object with exactly the members "topic" (a valid,
 * unreserved name) and "receiptHandles" (1..ACK_HANDLES_MAX strings), in
 * either order, strings of printable ASCII without escapes, JSON
 * whitespace anywhere.  True with '*out' filled (handles point into
 * 'body', which must outlive it); false for anything else, valid or not,
 * with '*out' empty: use ack_decode_json then. */
bool ack_decode_fast(const char *body, size_t len, AckReq *out);

/* ack_decode_json decodes any body with jansson: true with '*out' filled,
 * or false with the 400 in 'p' (INVALID_JSON, INVALID_FIELD, UNKNOWN_FIELD,
 * INVALID_NAME). */
bool ack_decode_json(const char *body, size_t len, AckReq *out, GwProblem *p);

/* ack_req_free releases what a decode allocated (safe on an empty one). */
void ack_req_free(AckReq *a);

#endif
