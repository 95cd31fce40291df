/*
 * schedule.h - delayed delivery by delay level (RocketMQ's schedule
 * topic).  A produce with delayLevel L is stored in the system topic
 * SCHEDULE_TOPIC_XXXX, queue L-1, with its real topic, queue and level in
 * properties (sched_wrap).  One scheduler thread walks each level's queue
 * in order: a message is due at its store time + the level's delay; when
 * due it is put again on its real topic and queue (sched_unwrap: the same
 * body, tags, keys and user properties, plus __DELAY_SRC
 * "<level>:<schedule offset>"), and the level's position moves on.
 *
 * Exactly once across crashes.  Every second the thread saves, in meta.db
 * (kv "delay_progress"), each level's position together with the commit
 * log's write position W taken just before: every re-put of a message at
 * or past a saved position is written by this thread after that moment,
 * so at or after W.  At open the log is scanned from W for __DELAY_SRC
 * properties and each level's position is moved past the re-puts found
 * there: a message re-put just before a crash is not put again, and one
 * not yet re-put is.  Positions of levels no longer configured are kept
 * (and saved), so configuring them again later does not deliver their
 * messages twice.  store/FORMAT.md "Schedule topic".
 */
#ifndef PETREL_SCHEDULE_H
#define PETREL_SCHEDULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "delay.h"
#include "longpoll.h"
#include "meta.h"
#include "msg.h"
#include "mq.h"
#include "store.h"
#include "topic.h"

#define SCHED_PROGRESS_KEY "delay_progress" /* kv key of the saved positions */
#define SCHED_SAVE_INTERVAL_MS 1000         /* how often they are saved */
#define SCHED_TICK_MS 100                   /* longest sleep while a level is empty */
/* Most bytes sched_wrap adds to a message's properties: REAL_TOPIC with a
 * topic of CL_TOPIC_MAX bytes, REAL_QID and DELAY with their separators. */
#define SCHED_WRAP_EXTRA (sizeof(MSG_PROP_REAL_TOPIC) + 255 + sizeof(MSG_PROP_REAL_QID) + 10 + \
                          sizeof(MSG_PROP_DELAY) + 10 + 6)

typedef struct SchedConfig {
    Store *store;          /* borrowed: all outlive the scheduler */
    Meta *meta;
    TopicRegistry *topics; /* real topics are looked up here */
    const int64_t *levels_ms; /* messageDelayLevel (copied) */
    size_t n_levels;
    bool thread;           /* start the scheduler thread (unit tests call sched_run_once) */
    MqClockFn clock;       /* wall clock; NULL = mq_now_ms */
    void *clock_arg;
} SchedConfig;

typedef struct Scheduler Scheduler;

/* sched_open loads the saved positions, scans the log after them for
 * re-puts (see above), and starts the thread when cfg->thread.  The store
 * must be open and recovered.  MQ_ERR_INVAL, MQ_ERR_NOMEM, MQ_ERR_DB,
 * MQ_ERR_CORRUPT (a saved value that does not parse), MQ_ERR_IO. */
int sched_open(const SchedConfig *cfg, Scheduler **out);

/* sched_close stops the thread, saves the positions and frees.  Before
 * closing the store and meta.  NULL ok. */
void sched_close(Scheduler *s);

/* sched_wrap fills '*out' with the schedule-topic form of 'in' (a message
 * of its real topic and queue) for delay level 'level' (1..n_levels of the
 * scheduler that will run it; checked by the caller): topic
 * SCHEDULE_TOPIC_XXXX, queue level-1, the properties of 'in' followed by
 * REAL_TOPIC, REAL_QID and DELAY, written into 'buf' ('cap' bytes).
 * MQ_OK, MQ_ERR_FULL (the properties would pass CL_PROPS_MAX or 'cap'),
 * MQ_ERR_INVAL.  Any thread. */
int sched_wrap(const ClMessage *in, uint32_t level, uint8_t *buf, size_t cap, ClMessage *out);

/* sched_run_once re-puts every message due at 'now_ms' (or at the clock's
 * now when 'now_ms' < 0) and, with 'save', saves the positions.  Returns
 * the number re-put.  The thread calls it; tests call it directly. */
size_t sched_run_once(Scheduler *s, int64_t now_ms, bool save);

/* sched_position is a level's position (next schedule-queue offset to
 * deliver), for tests and monitoring; 0 for a level out of range. */
uint64_t sched_position(Scheduler *s, uint32_t level);

/* sched_pending is the number of messages waiting in all levels. */
uint64_t sched_pending(Scheduler *s);

#endif
