/*
 * schedule.h - delayed delivery: by delay level (RocketMQ's schedule
 * topic) and at any time (RocketMQ 5 timer messages, deliverAt/delayMs).
 *
 * Delay levels.  A produce with delayLevel L is stored in the system topic
 * SCHEDULE_TOPIC_XXXX, queue L-1, with its real topic, queue and level in
 * properties (sched_wrap).  Each level's queue is a FIFO: a message is due
 * at its store time + the level's delay; when due it is put again on its
 * real topic and queue (the same body, tags, keys and user properties,
 * plus __DELAY_SRC "<level>:<schedule offset>"), and the level's position
 * moves on.
 *
 * Timers: a hierarchical timing wheel whose cascade is a re-put.  The
 * system topic RMQ_SYS_WHEEL_TIMER has SCHED_TIMER_LANES queues, "lanes",
 * each with a fixed hop (sched_timer_hop_ms: d x 16^k ms), so each lane is
 * a FIFO exactly like a level.  A timer is stored (sched_timer_wrap) in
 * the lane of the largest hop not past its remaining time, with its real
 * topic, queue and absolute deliver time (TIMER_DELIVER_MS).  When a lane
 * head is due it is delivered if its time has come, else put again into
 * the lane for what remains (a hop), its __DELAY_SRC "t<lane>:<offset>".
 * Positions are all the state: no per-timer memory, no scan.
 *
 * One thread runs both, lane by lane.  Exactly once across crashes: every
 * second the thread saves, in meta.db (kv "delay_progress" and
 * "timer_progress"), each lane's position together with the commit log's
 * write position W taken just before: every re-put of a record at or past
 * a saved position is written by this thread after that moment, so at or
 * after W.  At open the log is scanned from W for __DELAY_SRC properties
 * and each lane's position is moved past the re-puts (deliveries and hops)
 * found there: a record re-put just before a crash is not put again, and
 * one not yet re-put is.  Positions of levels no longer configured are
 * kept (and saved), so configuring them again later does not deliver
 * their messages twice.  store/FORMAT.md "Schedule topic" and "Timer
 * wheel topic"; docs/delay.md.
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

#define SCHED_PROGRESS_KEY "delay_progress"       /* kv key of the levels' positions */
#define SCHED_TIMER_PROGRESS_KEY "timer_progress" /* kv key of the timer lanes' positions */
#define SCHED_SAVE_INTERVAL_MS 1000               /* how often they are saved */
#define SCHED_TICK_MS 100                         /* longest sleep while no head is due */
/* Most bytes sched_wrap adds to a message's properties: REAL_TOPIC with a
 * topic of CL_TOPIC_MAX bytes, REAL_QID and DELAY with their separators. */
#define SCHED_WRAP_EXTRA (sizeof(MSG_PROP_REAL_TOPIC) + 255 + sizeof(MSG_PROP_REAL_QID) + 10 + \
                          sizeof(MSG_PROP_DELAY) + 10 + 6)

/* The timer wheel.  Lane q (0..SCHED_TIMER_LANES-1) of SCHED_TIMER_TOPIC
 * waits d x 16^k ms with k = q / 15 and d = q % 15 + 1: lanes 0..14 wait
 * 1..15 ms, 15..29 wait 16..240 ms, ... 90..94 wait 1..5 x 16^6 ms (the
 * last 83,886,080 ms, 23.3 h).  Persisted records depend on this table:
 * it never changes (store/FORMAT.md "Timer wheel topic"). */
#define SCHED_TIMER_TOPIC "RMQ_SYS_WHEEL_TIMER"
#define SCHED_TIMER_LANES 95
#define SCHED_TIMER_HOP_MAX_MS (5LL << 24) /* hop of the last lane */
/* Most bytes sched_timer_wrap adds to a message's properties: REAL_TOPIC
 * with a topic of CL_TOPIC_MAX bytes, REAL_QID and TIMER_DELIVER_MS with
 * their separators. */
#define SCHED_TIMER_WRAP_EXTRA (sizeof(MSG_PROP_REAL_TOPIC) + 255 + sizeof(MSG_PROP_REAL_QID) + \
                                10 + sizeof(MSG_PROP_TIMER_DELIVER_MS) + 20 + 6)

typedef struct SchedConfig {
    Store *store;          /* borrowed: all outlive the scheduler */
    Meta *meta;
    TopicRegistry *topics; /* real topics are looked up here */
    const int64_t *levels_ms; /* messageDelayLevel (copied) */
    size_t n_levels;
    int64_t timer_max_hop_ms; /* longest hop a timer is given, ms: a waiting timer
                               * is rewritten at least this often (the broker keeps
                               * it under the retention time); 0 or more than
                               * SCHED_TIMER_HOP_MAX_MS = SCHED_TIMER_HOP_MAX_MS */
    bool thread;           /* start the scheduler thread (unit tests call sched_run_once) */
    MqClockFn clock;       /* wall clock; NULL = mq_now_ms */
    void *clock_arg;
} SchedConfig;

typedef struct Scheduler Scheduler;

/* Totals since open, for tests and monitoring. */
typedef struct SchedStats {
    uint64_t delivered; /* records put on their real topic */
    uint64_t hops;      /* timer records put into another lane */
    uint64_t dropped;   /* records dropped: topic gone, damaged properties */
} SchedStats;

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

/* sched_timer_wrap fills '*out' with the timer-wheel form of 'in' (a
 * message of its real topic and queue) to be delivered at
 * 'deliver_at_ms' (epoch ms, after 'now_ms', the time it is stored at):
 * topic RMQ_SYS_WHEEL_TIMER, the lane sched_timer_lane(deliver_at_ms -
 * now_ms, the longest hop of 's'; NULL: the table's), the properties of
 * 'in' followed by REAL_TOPIC, REAL_QID and TIMER_DELIVER_MS, written
 * into 'buf' ('cap' bytes, SCHED_TIMER_WRAP_EXTRA more than the
 * properties of 'in' is enough).  MQ_OK, MQ_ERR_FULL (the properties, with
 * the room a hop's __DELAY_SRC will take, would pass CL_PROPS_MAX, or
 * 'cap'), MQ_ERR_INVAL ('deliver_at_ms' <= 'now_ms': store it directly).
 * Any thread. */
int sched_timer_wrap(const Scheduler *s, const ClMessage *in, int64_t deliver_at_ms,
                     int64_t now_ms, uint8_t *buf, size_t cap, ClMessage *out);

/* sched_timer_hop_ms is the hop of timer lane 'lane' in ms; 0 out of
 * range.  Any thread. */
int64_t sched_timer_hop_ms(uint32_t lane);

/* sched_timer_lane is the lane with the largest hop not over
 * 'remaining_ms' nor 'max_hop_ms' (<= 0: no limit but the table's);
 * lane 0 (1 ms) when 'remaining_ms' < 1.  Any thread. */
uint32_t sched_timer_lane(int64_t remaining_ms, int64_t max_hop_ms);

/* sched_notify tells the scheduler that 'm' (a sched_wrap or
 * sched_timer_wrap result) was stored at 'store_ts' (epoch ms), so that
 * its thread wakes when it is due rather than at its next tick (a timer
 * of a few ms is otherwise up to SCHED_TICK_MS late).  Other messages are
 * ignored.  Any thread; cheap when the thread wakes earlier anyway. */
void sched_notify(Scheduler *s, const ClMessage *m, int64_t store_ts);

/* sched_run_once handles every record due at 'now_ms' (or at the clock's
 * now when 'now_ms' < 0), level and timer lanes: re-put on its real
 * topic, put into the next timer lane (a hop), or dropped; with 'save',
 * saves the positions.  Returns the number handled.  The thread calls it;
 * tests call it directly. */
size_t sched_run_once(Scheduler *s, int64_t now_ms, bool save);

/* sched_position is a level's position (next schedule-queue offset to
 * deliver), for tests and monitoring; 0 for a level out of range. */
uint64_t sched_position(Scheduler *s, uint32_t level);

/* sched_timer_position is a timer lane's position (next offset of its
 * queue to handle); 0 for a lane out of range. */
uint64_t sched_timer_position(Scheduler *s, uint32_t lane);

/* sched_pending is the number of messages waiting in all levels. */
uint64_t sched_pending(Scheduler *s);
/* sched_level_pending: the messages waiting at delay 'level' (1-based);
 * 0 for a level out of range. */
uint64_t sched_level_pending(Scheduler *s, uint32_t level);

/* sched_timer_pending is the number of timers waiting in the wheel (each
 * counted once, in the lane it waits in now).  NULL: 0. */
uint64_t sched_timer_pending(Scheduler *s);

/* sched_next_due is when the last pass expects the next record to be
 * due (epoch ms): the earliest head it saw, at most its time +
 * SCHED_TICK_MS.  For tests that step a clock from event to event. */
int64_t sched_next_due(Scheduler *s);

/* sched_stats copies the totals into '*out'.  Any thread. */
void sched_stats(Scheduler *s, SchedStats *out);

#endif
