/*
 * filter.h - compiled subscription filters for the receive path: a TAG
 * expression ("*", "TagA || TagB") or an SQL92 selector over message
 * properties (core/sql92.h).  REFERENCE A5; docs/filters.md is the user
 * guide.
 *
 * A Filter is compiled once per distinct (type, expression), is immutable
 * afterwards and is shared across threads with an atomic reference count.
 * A FilterCache keeps the recently used ones so that a subscription is
 * parsed once, not on every receive.  Calls msg.h (tag parsing, property
 * lookup, tag hash) and sql92.h.
 */
#ifndef PETREL_FILTER_H
#define PETREL_FILTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "commitlog.h"
#include "mq.h"
#include "sql92.h"

#define FILTER_EXPR_MAX SQL92_EXPR_MAX /* longest expression of either type, bytes */
#define FILTER_TAGS_MAX 64             /* distinct tags of one TAG expression */

typedef enum FilterType {
    FILTER_TAG = 0,   /* "*", "" or tags joined by "||" */
    FILTER_SQL92 = 1, /* an SQL92 selector over properties */
} FilterType;

/* A compiled filter: immutable after filter_compile, atomic refcount. */
typedef struct Filter Filter;

/* filter_type_parse reads "TAG" or "SQL92" (NUL-terminated, any letter
 * case) into '*out': true on success, false (and '*out' untouched) for
 * anything else or a NULL argument.  Any thread. */
bool filter_type_parse(const char *s, FilterType *out);

/* filter_compile compiles the 'len' bytes at 'expr' ('expr' need not be
 * NUL-terminated; it is copied).  FILTER_TAG: msg_tag_expr_parse rules
 * ("*", empty or blank = every message; at most FILTER_TAGS_MAX distinct
 * tags).  FILTER_SQL92: sql92_parse.  Either type: at most
 * FILTER_EXPR_MAX bytes.  Returns MQ_OK with '*out' set (caller owns one
 * reference: filter_unref), MQ_ERR_INVAL for a bad expression, an unknown
 * 'type' or a NULL 'out' (then '*err', when not NULL, holds the byte
 * position and a short lowercase reason; for TAG the position of the
 * offending '||', '|', '*' or tag), or MQ_ERR_NOMEM.  Any thread. */
int filter_compile(FilterType type, const char *expr, size_t len, Filter **out, Sql92Error *err);

/* filter_ref adds a reference to 'f' and returns 'f'.  Any thread. */
Filter *filter_ref(Filter *f);

/* filter_unref drops one reference; the last one frees 'f'.  NULL ok.
 * Any thread (the caller's pointer is invalid afterwards). */
void filter_unref(Filter *f);

/* filter_matches_all is true for a TAG filter of "*" (or empty/blank):
 * every message passes and no commit-log read is needed.  Any thread. */
bool filter_matches_all(const Filter *f);

/* filter_tag_hashes returns the msg_tag_hash of each distinct tag of a TAG
 * filter (borrowed, valid while the caller holds its reference) with the
 * count in '*n', for the consume-queue prefilter: an entry whose tag hash
 * is not among them cannot match.  NULL with '*n' = 0 for an SQL92 filter
 * or one that matches all.  Any thread. */
const uint64_t *filter_tag_hashes(const Filter *f, size_t *n);

/* filter_match is the exact check on a decoded commit-log record: TAG =
 * the record's TAGS property equals one of the tags (a record without one
 * matches only "*"); SQL92 = sql92_match over rec->props, where "TAGS" is
 * the tag like any property.  Pure, no allocation.  Any thread. */
bool filter_match(const Filter *f, const ClRecord *rec);

/* filter_type returns the type 'f' was compiled with.  Any thread. */
FilterType filter_type(const Filter *f);

/* filter_expression returns the expression text 'f' was compiled from
 * (borrowed NUL-terminated copy, valid while the reference is held; a NUL
 * inside the text shortens it for C string use).  Any thread. */
const char *filter_expression(const Filter *f);

/* ---- cache ---------------------------------------------------------------
 * Keyed by (type, expression bytes); least recently used goes first when
 * 'cap' entries are held.  One mutex, held for the map work only, never
 * while compiling or freeing a filter.  Any thread. */

typedef struct FilterCache FilterCache;

/* filter_cache_open makes an empty cache of at most 'cap' filters
 * (1..1048576).  Returns MQ_OK with '*out' (caller owns:
 * filter_cache_close), MQ_ERR_INVAL (a bad 'cap' or NULL 'out') or
 * MQ_ERR_NOMEM. */
int filter_cache_open(size_t cap, FilterCache **out);

/* filter_cache_close drops the cache's references (filters still held by
 * callers stay valid) and frees it.  NULL ok.  No other thread may be
 * using the cache. */
void filter_cache_close(FilterCache *c);

/* filter_cache_get returns in '*out' a new reference (caller
 * filter_unref's it) to the filter of ('type', the 'len' bytes at 'expr'):
 * the cached one, or one compiled now and cached (evicting the least
 * recently used at 'cap').  Two threads missing on the same key at once
 * may both compile; both get the one that was cached first.  Returns what
 * filter_compile returns; parse errors are not cached. */
int filter_cache_get(FilterCache *c, FilterType type, const char *expr, size_t len, Filter **out,
                     Sql92Error *err);

#endif
