/*
 * jw.h - a JSON text writer for the hot answers (pull, produce results,
 * the message object): appends to one growing buffer, no tree.  jansson
 * builds and then walks a tree of objects per answer; profiles of pull
 * and batch produce showed two thirds of their CPU there (docs/bench.md).
 *
 * The writer puts no separators itself: callers write literals such as
 * ",\"queueId\":" with jw_lit.  Output is compact JSON as jansson's
 * JSON_COMPACT would write it (same escapes), so clients see no change.
 * An allocation failure sets 'failed'; later calls then do nothing.
 */
#ifndef PETREL_JW_H
#define PETREL_JW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "commitlog.h"

typedef struct JsonW {
    char *buf;   /* malloc'd, 'len' bytes used */
    size_t len;
    size_t cap;
    bool failed; /* out of memory: the text is incomplete */
} JsonW;

/* jw_init starts an empty writer with 'reserve' bytes allocated. */
void jw_init(JsonW *w, size_t reserve);

/* jw_take hands over the buffer ('*len' bytes, not NUL-terminated;
 * caller frees) and resets 'w'.  NULL when the writer failed. */
char *jw_take(JsonW *w, size_t *len);

void jw_free(JsonW *w);

/* jw_grow makes room for 'n' more bytes: true, or false with 'failed' set. */
bool jw_grow(JsonW *w, size_t n);

/* jw_raw appends 'n' bytes as they are (JSON punctuation, names).  Inline:
 * it runs a dozen times per message of a pull. */
static inline void jw_raw(JsonW *w, const char *s, size_t n) {
    if (w->cap - w->len < n && !jw_grow(w, n)) return;
    if (w->failed) return;
    memcpy(w->buf + w->len, s, n);
    w->len += n;
}
#define jw_lit(w, s) jw_raw((w), (s), sizeof(s) - 1)

/* jw_str appends 's' as a quoted JSON string.  's' must be valid UTF-8
 * (jw_utf8_valid); NUL bytes are written as \u0000. */
void jw_str(JsonW *w, const char *s, size_t n);

void jw_int(JsonW *w, int64_t v);

/* jw_utf8_len is the length of the valid UTF-8 sequence at 'p' ('n' bytes
 * left), 0 when there is none (bad lead or continuation byte, overlong
 * form, surrogate, beyond U+10FFFF: exactly what jansson refuses). */
size_t jw_utf8_len(const unsigned char *p, size_t n);

/* jw_utf8_valid is true when all of 's' is valid UTF-8. */
bool jw_utf8_valid(const char *s, size_t n);

/* jw_message appends the API.md message object of 'rec':
 * {"msgId","topic","queueId","queueOffset","commitLogOffset","tags",
 * "keys":[...],"properties":{...},"body","bodyEncoding","bornTimestamp",
 * "storeTimestamp","reconsumeTimes","storeSize"}.  The body goes as text
 * ("utf8") when it is valid UTF-8 without NUL bytes, else as base64; other
 * strings that are not valid UTF-8 (never written by the gateway) go as
 * base64 text.  Reserved properties (TAGS, KEYS, ...) are not listed. */
void jw_message(JsonW *w, const ClRecord *rec);

#endif
