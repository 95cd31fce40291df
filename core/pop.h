/*
 * pop.h - receive/ack consumption of a consumer group (RocketMQ 5's POP,
 * the "simple consumer"): receive hands out visible messages with a
 * receipt handle and hides them for an invisibility time; ack removes
 * them for good; nack, or the end of the invisibility time, brings them
 * back later - through the group's retry topic "%RETRY%<group>" with
 * reconsumeTimes + 1, or, past the group's retryMaxTimes, to its
 * dead-letter topic "%DLQ%<group>", never delivered again.  An orderly
 * group delivers a queue's messages strictly in order: nothing of a queue
 * while any earlier message of it is in flight, and its retries stay in
 * place (the queue waits) instead of going to the retry topic.
 *
 * State.  For each (group, subscribed topic, source queue) - the source
 * being a queue of the topic or of the group's retry topic - a PopQueue
 * holds 'ack_off' (every message below it is done), 'next_off' (the next
 * message never handed out) and an entry per message handed out in
 * between and not yet done (offset, invisible-until, delivery number,
 * reconsume count).  Filtered-out messages are simply passed over.
 * 'ack_off' is also the group's consumer offset of a topic queue
 * (meta_offset_set), so progress and lag read the same number as for pull
 * consumers.
 *
 * Durability.  Every change is first appended to the pop journal - the
 * system topic RMQ_SYS_POP_LOG in the commit log, so it is crash-safe as
 * any message is (written before the answer; survives a killed process,
 * and a power loss once flushed) - and then applied in memory.  The
 * keeper thread saves the changed queues to meta.db (table pop_state)
 * every snapshot interval with the journal position they reflect; at open
 * the saved rows are loaded and the journal is replayed from that
 * position.  So after a crash: an acked message is not delivered again, a
 * message received and not acked is delivered again once its
 * invisibility ends, and nack/retry counts are kept.  store/FORMAT.md
 * "pop journal" and "pop_state" give the bytes.
 *
 * Threads.  Receive, ack, nack and the offset/drop calls run on HTTP
 * workers: they lock one PopQueue at a time for memory work plus one
 * journal append (a copy into the commit log's page cache, as a produce
 * does) and never wait on sqlite or another client.  The keeper thread
 * (started by pop_open) moves expired messages to the retry or dead-
 * letter topic (creating those topics in meta.db as needed: the sqlite
 * work happens with no queue locked) and writes the snapshots.
 */
#ifndef PETREL_POP_H
#define PETREL_POP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "filter.h"
#include "group.h"
#include "longpoll.h"
#include "meta.h"
#include "mq.h"
#include "receipt.h"
#include "schedule.h"
#include "store.h"
#include "topic.h"

#define POP_JOURNAL_TOPIC "RMQ_SYS_POP_LOG" /* system topic of the journal, queue 0 */
#define POP_MAX_MESSAGES 1000               /* most messages of one receive */

typedef struct PopConfig {
    Store *store;             /* borrowed: all of these outlive the engine */
    Meta *meta;
    TopicRegistry *topics;    /* retry and DLQ topics are created here */
    GroupRegistry *groups;    /* settings read by the keeper */
    LpRegistry *longpoll;     /* woken when an orderly queue frees up */
    const int64_t *delay_levels_ms; /* messageDelayLevel: the retry ladder (copied) */
    size_t n_delay_levels;
    uint32_t inflight_max;    /* most messages in flight per source queue */
    uint32_t revive_interval_ms;   /* keeper: expiry scan period */
    uint32_t snapshot_interval_ms; /* keeper: pop_state save period; 0 = at close only */
    int64_t orderly_retry_delay_ms; /* nack of an orderly message without delayMs */
    const uint8_t *store_host; /* 8 bytes: born host of retry/DLQ messages */
    Scheduler *sched;         /* delays a nacked message's retry (delay level or timer
                               * lane); NULL: the retry waits in flight instead */
    bool keeper;              /* start the keeper thread (unit tests call pop_keep) */
    MqClockFn clock;          /* wall clock; NULL = mq_now_ms */
    void *clock_arg;
} PopConfig;

typedef struct PopEngine PopEngine;

/* pop_open loads the saved state of meta.db, replays the journal after
 * it (the store must be open and recovered), and starts the keeper when
 * cfg->keeper.  The receipt-handle key is made at the first open and kept
 * in meta.db (kv "pop_receipt_key"), so handles stay valid across
 * restarts.  Caller owns '*out'.  MQ_ERR_NOMEM, MQ_ERR_DB, MQ_ERR_CORRUPT
 * (a journal record that does not decode), MQ_ERR_IO. */
int pop_open(const PopConfig *cfg, PopEngine **out);

/* pop_close stops the keeper, saves the state once more and frees.  Call
 * it before closing the store and meta.  NULL ok. */
void pop_close(PopEngine *e);

/* One receive. */
typedef struct PopRequest {
    const MetaGroup *group;   /* its settings (orderly) */
    const char *topic;        /* subscribed topic; exists, readable */
    uint32_t read_queues;     /* of that topic */
    const Filter *filter;     /* compiled subscription */
    uint32_t max_messages;    /* 1..POP_MAX_MESSAGES */
    int64_t invisible_ms;     /* > 0 */
    bool *more;               /* out, may be NULL: set when a queue was left with
                               * messages this call did not look at (its scan
                               * budget ran out on filtered-out messages):
                               * nothing handed out then does not mean nothing
                               * is there, receive again at once */
} PopRequest;

/* One message handed out: the gateway reads the record at 'phys_off'. */
typedef struct PopDelivery {
    uint64_t phys_off;               /* the record (of the topic or the retry topic) */
    uint32_t reconsume_times;        /* deliveries before this one that failed */
    bool retry;                      /* it came through the retry topic */
    char handle[RECEIPT_LEN + 1];    /* its receipt handle */
} PopDelivery;

/* pop_receive hands out up to req->max_messages messages of req->topic
 * (and of the group's retry topic meant for it) that pass the filter and
 * are visible, into 'out' (room for max_messages), and sets '*n'.  Source
 * queues are visited round robin from a moving start, so concurrent
 * receivers spread over them.  A queue is skipped while it has
 * inflight_max messages in flight (and, in an orderly group, while any is
 * in flight).  MQ_OK with '*n' = 0 when nothing is visible; an append
 * error (MQ_ERR_FULL, MQ_ERR_RDONLY, ...) only when nothing could be
 * handed out.  HTTP worker. */
int pop_receive(PopEngine *e, const PopRequest *req, PopDelivery *out, size_t *n);

typedef enum PopResult {
    POP_OK = 0,      /* done */
    POP_EXPIRED = 1, /* a real handle, but that delivery is over (acked, nacked,
                      * invisibility ended, or redelivered since) */
    POP_INVALID = 2, /* not a handle of this group and topic */
} PopResult;

/* pop_result_name: "OK", "EXPIRED", "INVALID". */
const char *pop_result_name(PopResult r);

/* pop_ack acknowledges the 'n' handles 'handles[i]' ('lens[i]' bytes
 * each) of 'group' for 'topic': each result in 'results[i]' (a handle
 * given twice is OK once, then EXPIRED).  One journal record per source
 * queue touched.  Returns MQ_OK, or the first append error: the handles
 * of that queue are then not acked (their results say EXPIRED) and the
 * caller answers the error.  HTTP worker. */
int pop_ack(PopEngine *e, const MetaGroup *group, const char *topic, const char *const *handles,
            const size_t *lens, size_t n, PopResult *results);

/* pop_nack ends the delivery of 'handle' early.  Normal group: the
 * message goes to the retry topic with reconsumeTimes + 1 after
 * 'delay_ms' (< 0: the retry ladder, delay level 3 + reconsumeTimes), or
 * to the DLQ past retryMaxTimes.  With a scheduler the retry copy is
 * written at once through it (the ladder's delay level, or a timer lane
 * for 'delay_ms') and the delivery ends; without one, the delivery stays
 * in flight until the delay ends and the keeper moves it.  Orderly group:
 * it is delivered again in place after 'delay_ms' (< 0:
 * orderly_retry_delay_ms).  '*result' as for ack.  MQ_OK or the append
 * error. */
int pop_nack(PopEngine *e, const MetaGroup *group, const char *topic, const char *handle,
             size_t len, int64_t delay_ms, PopResult *result);

/* pop_reset_offset moves the receive position of ('group', 'topic',
 * 'queue_id') to 'offset' (an offset reset): messages in flight there are
 * forgotten and delivery restarts at 'offset'.  No-op when that queue has
 * never been received from (the next receive starts at the group's
 * consumer offset, which the caller sets).  MQ_OK or the append error. */
int pop_reset_offset(PopEngine *e, const char *group, const char *topic, uint32_t queue_id,
                     uint64_t offset);

/* pop_drop_group / pop_drop_topic forget every queue state of a deleted
 * group or topic (journaled, and removed from meta.db at the next save).
 * MQ_OK or the append error. */
int pop_drop_group(PopEngine *e, const char *group);
int pop_drop_topic(PopEngine *e, const char *topic);

/* Messages in flight (handed out, not done) of one topic queue of a
 * group, for progress; 0 when never received from. */
uint64_t pop_inflight(PopEngine *e, const char *group, const char *topic, uint32_t queue_id);

/* Where one message stands for a group, as pop_offset_state sees it. */
typedef enum PopOffsetState {
    POP_OFF_UNKNOWN = 0, /* the group never received from this queue */
    POP_OFF_DONE,        /* acked (or its retry/DLQ copy written) */
    POP_OFF_INFLIGHT,    /* handed out (or waiting in an orderly queue), not done */
    POP_OFF_NOT_YET,     /* not handed out yet */
} PopOffsetState;

/* pop_offset_state: the state of queue offset 'off' of 'topic' queue
 * 'queue_id' for 'group' (messages of the topic itself, not its retry
 * topic).  For the console's message track. */
PopOffsetState pop_offset_state(PopEngine *e, const char *group, const char *topic,
                                uint32_t queue_id, uint64_t off);

/* pop_keep runs one keeper round now: expired deliveries are moved on
 * (retry topic, orderly wait, or DLQ) and, with 'snapshot', the changed
 * queues are saved.  The keeper thread calls it; tests call it directly.
 * Returns the number of deliveries moved on. */
size_t pop_keep(PopEngine *e, bool snapshot);

/* Counters since open, for /metrics. */
typedef struct PopStats {
    uint64_t received;     /* messages handed out */
    uint64_t acked;
    uint64_t nacked;
    uint64_t expired;      /* invisibility ended without ack or nack */
    uint64_t retried;      /* written to a retry topic */
    uint64_t dead;         /* written to a DLQ */
    uint64_t inflight;     /* now, all queues */
    uint64_t queues;       /* queue states held */
    uint64_t journal_records;
} PopStats;

void pop_stats(PopEngine *e, PopStats *out);

#endif
