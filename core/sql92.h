/*
 * sql92.h - RocketMQ's SQL92 message selector (REFERENCE A5,
 * SelectorParser.jj): a boolean expression over message properties such
 * as "region = 'eu' AND price BETWEEN 10 AND 20 AND TAGS IN ('a', 'b')".
 *
 * sql92_parse compiles the text once into an immutable program (one
 * malloc'd block); sql92_match evaluates it against one message with SQL's
 * three-valued logic.  The grammar, the NULL rules and the limits are
 * described for users in docs/filters.md.  Calls only mq.h and libc.
 */
#ifndef PETREL_SQL92_H
#define PETREL_SQL92_H

#include <stdbool.h>
#include <stddef.h>

#include "mq.h"

#define SQL92_EXPR_MAX 4096  /* longest expression, bytes */
#define SQL92_DEPTH_MAX 64   /* deepest nesting of '(' */
#define SQL92_IN_MAX 256     /* items of one IN list */
#define SQL92_NODES_MAX 1024 /* predicates, operators and operands of one expression */
#define SQL92_NUM_MAX 128    /* longest number, literal or property value, bytes */

/* A compiled expression: immutable, one malloc'd block. */
typedef struct Sql92 Sql92;

/* Why an expression was refused. */
typedef struct Sql92Error {
    size_t pos;    /* 0-based byte offset of the offending token (len at the end) */
    char msg[160]; /* short lowercase explanation, NUL-terminated, no position */
} Sql92Error;

/* Sql92GetFn looks up the property 'name' (NUL-terminated, case-sensitive)
 * of the message being matched: true with '*value' set (borrowed, valid
 * until sql92_match returns) when present, false when absent.  It is
 * called from sql92_match's thread and must not call back into it. */
typedef bool (*Sql92GetFn)(void *arg, const char *name, MqSlice *value);

/* sql92_parse compiles the 'len' bytes at 'expr' ('expr' need not be
 * NUL-terminated; it is not kept).  Returns MQ_OK with '*out' set (caller
 * owns it: sql92_free), MQ_ERR_INVAL when the text is not a valid
 * expression or exceeds a limit above (then '*err', when not NULL, says
 * where and why; a NULL 'expr' with a non-zero 'len' or a NULL 'out' is
 * MQ_ERR_INVAL at position 0), or MQ_ERR_NOMEM.  '*out' is written only on
 * MQ_OK.  Any thread. */
int sql92_parse(const char *expr, size_t len, Sql92 **out, Sql92Error *err);

/* sql92_free releases 'q'.  NULL ok. */
void sql92_free(Sql92 *q);

/* sql92_match is true when 'q' is TRUE for the message whose properties
 * 'get' (called with 'arg') returns; FALSE and UNKNOWN both give false.
 * Property values are strings: they are converted to numbers strictly
 * (the whole value must be an integer or a decimal, at most SQL92_NUM_MAX
 * bytes) where the comparison is numeric, and a value that does not
 * convert makes that comparison UNKNOWN, as does a missing property.
 * Pure: no allocation, no state, bounded stack (no recursion).  Any
 * number of threads may match one 'q' at once. */
bool sql92_match(const Sql92 *q, Sql92GetFn get, void *arg);

#endif
