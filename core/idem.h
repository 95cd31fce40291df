/*
 * idem.h - the Idempotency-Key table: a producer that retries a request
 * with the same key on the same topic within the window gets the first
 * answer again, and nothing is stored twice.
 *
 * Life of a key: idem_begin claims it (IDEM_NEW: the caller produces),
 * then idem_finish keeps the answer (status + body bytes) or idem_abort
 * forgets the claim (the request failed and stored nothing, so a retry
 * must run).  While claimed, the same key gets IDEM_PENDING: the gateway
 * answers 409 rather than produce a second time.
 *
 * Memory is bounded by a key count and a byte budget; past either, the
 * oldest entries go first (then a late retry produces again: the window
 * is a promise only within those bounds, as documented).  In memory only:
 * a restart forgets every key (the issue allows it).
 *
 * One mutex, held for hash-map work only (no I/O).  Any thread.
 */
#ifndef PETREL_IDEM_H
#define PETREL_IDEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define IDEM_KEY_MAX 255 /* bytes of an Idempotency-Key */

typedef struct IdemTable IdemTable;

typedef enum IdemState {
    IDEM_NEW,     /* claimed: produce, then idem_finish or idem_abort */
    IDEM_DONE,    /* answered before: '*out' holds that answer */
    IDEM_PENDING, /* another request with this key is in progress */
} IdemState;

/* A remembered answer; 'body' is malloc'd for the caller (free it). */
typedef struct IdemAnswer {
    unsigned status;
    char *body;
    size_t len;
} IdemAnswer;

/* idem_open makes an empty table: answers kept 'window_ms', at most
 * 'max_keys' entries and 'max_bytes' of keys and answers.  MQ_OK,
 * MQ_ERR_INVAL (a zero bound), MQ_ERR_NOMEM. */
int idem_open(int64_t window_ms, size_t max_keys, size_t max_bytes, IdemTable **out);
void idem_close(IdemTable *t); /* NULL ok */

/* idem_begin looks up ('topic', 'key') at wall time 'now_ms' (entries
 * older than the window count as absent).  Absent: claims it, IDEM_NEW.
 * On IDEM_DONE '*out' is filled (caller frees out->body); when that copy
 * cannot be allocated the result is IDEM_PENDING (the caller answers
 * busy, nothing is produced twice). */
IdemState idem_begin(IdemTable *t, const char *topic, const char *key, int64_t now_ms,
                     IdemAnswer *out);

/* idem_finish stores the answer of a claimed key (copied).  Ignored when
 * the claim is gone (evicted meanwhile).  Should the copy fail, the claim
 * is dropped as by idem_abort. */
void idem_finish(IdemTable *t, const char *topic, const char *key, unsigned status,
                 const char *body, size_t len);

/* idem_abort drops a claim (no answer to remember). */
void idem_abort(IdemTable *t, const char *topic, const char *key);

/* idem_key_valid says whether 'key' is 1..IDEM_KEY_MAX printable ASCII
 * characters without spaces (0x21..0x7e). */
bool idem_key_valid(const char *key);

/* idem_count returns the entries held (claims included). */
size_t idem_count(IdemTable *t);

#endif
