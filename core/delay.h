/*
 * delay.h - RocketMQ delay levels: the broker setting messageDelayLevel
 * (a space-separated list of durations, level 1 first) parsed into
 * milliseconds, and the retry ladder that picks a level for each
 * redelivery of a failed message.  Pure functions over caller buffers: no
 * state, no allocation, thread-safe.  The scheduler that holds delayed
 * messages until due is elsewhere; this module only does the arithmetic.
 */
#ifndef PETREL_DELAY_H
#define PETREL_DELAY_H

#include <stddef.h>
#include <stdint.h>

#include "mq.h"

#define DELAY_LEVELS_MAX 64                      /* most levels a spec may list */
#define DELAY_LEVEL_MAX_MS (40LL * 24 * 3600000) /* longest level: 40 days, ms */
#define DELAY_RETRY_FIRST_LEVEL 3                /* level of the first retry (10 s) */

/* RocketMQ's default messageDelayLevel: 18 levels, 1 s to 2 h. */
#define DELAY_DEFAULT_SPEC "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"

/* delay_levels_parse parses 'spec', durations separated by one or more
 * spaces or tabs (leading and trailing ones ignored), into 'levels_ms'
 * (level 1 at index 0) and their number into '*n'.  A duration is decimal
 * digits (no sign) followed by a unit: "ms" (a Petrel extension, for
 * tests), "s", "m", "h" or "d" (RocketMQ's), lowercase.  Each must be 1 ms
 * .. DELAY_LEVEL_MAX_MS; levels need not ascend.  Returns MQ_OK, or
 * MQ_ERR_INVAL (NULL argument; no level; more than DELAY_LEVELS_MAX or
 * more than 'cap' levels; a bad number or unit; a duration out of range),
 * in which case neither 'levels_ms' nor '*n' changed.  Any thread. */
int delay_levels_parse(const char *spec, int64_t *levels_ms, size_t cap, size_t *n);

/* delay_format writes 'ms' as the shortest duration delay_levels_parse
 * reads back exactly ("10s", "2h", "1d", "1500ms") into 'buf'. */
void delay_format(int64_t ms, char *buf, size_t cap);

/* delay_retry_ms returns the delay in ms before redelivering a message
 * that has already been redelivered 'reconsume_times' times, by
 * RocketMQ's rule (SendMessageProcessor's consumer send-back): level
 * DELAY_RETRY_FIRST_LEVEL + 'reconsume_times' (1-based) of the 'n' levels
 * in 'levels_ms', clamped to the last level.  With the default levels:
 * 10 s, 30 s, 1 m, 2 m, ... 30 m, 1 h, then 2 h from the 16th retry
 * ('reconsume_times' 15) on.  MQ_ERR_INVAL (negative) when 'levels_ms' is
 * NULL or 'n' is 0.  Any thread. */
int64_t delay_retry_ms(const int64_t *levels_ms, size_t n, uint32_t reconsume_times);

#endif
