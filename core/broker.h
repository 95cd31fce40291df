/*
 * broker.h - one broker: owns the message store and the metadata database
 * and ties them to the configuration.  Later issues hang topics, groups,
 * retry, delay and transactions off it; the gateway reaches the store and
 * the metadata only through the borrowed pointers given here.
 */
#ifndef PETREL_BROKER_H
#define PETREL_BROKER_H

#include <stdbool.h>

#include "config.h"
#include "filter.h"
#include "group.h"
#include "members.h"
#include "pop.h"
#include "rates.h"
#include "schedule.h"
#include "txn.h"
#include "idem.h"
#include "longpoll.h"
#include "meta.h"
#include "store.h"
#include "topic.h"

typedef struct Broker Broker;

/* broker_open copies 'conf', locks conf->data (flock on '<data>/lock':
 * MQ_ERR_BUSY while another process has it open), opens the store there
 * (recovering it if the last run crashed) and then '<data>/meta.db' with
 * the offset flush interval of 'conf', and last the topic registry over the
 * metadata (defaultTopicQueueNums queues for topics created without a
 * count).  Before the store it creates the long-polling registry and hooks
 * it to the store's arrival notification (StoreConfig.on_arrival).  conf->listen_port must be the bound port (it goes into every
 * record as the store host).  Caller owns '*out'.  Errors come from
 * store_open / meta_open / topic_registry_open and are logged here. */
int broker_open(const Config *conf, Broker **out);

/* broker_close closes the receive engine (saving its state), the filter
 * cache, the member table, the group registry, the topic registry, the metadata (flushing offsets), then the store
 * (flush, checkpoint, abort file removed), then the long-polling registry
 * (waiters still registered fire with LP_STOPPING), unlocks the data
 * directory and frees.  NULL ok.  Call it
 * only once no other thread uses the broker. */
void broker_close(Broker *b);

/* Borrowed, valid until broker_close. */
Store *broker_store(Broker *b);
Meta *broker_meta(Broker *b);
const Config *broker_config(const Broker *b);
TopicRegistry *broker_topics(Broker *b);

/* broker_longpoll is the registry of waiting pulls, fed by the store's
 * dispatcher.  The gateway adds waiters; at shutdown call lp_wake_all on
 * it before waiting for suspended requests.  Borrowed, valid until
 * broker_close. */
LpRegistry *broker_longpoll(Broker *b);

/* broker_store_host returns the 8-byte store host written into every record
 * (listen IPv4 in network order + the bound port as u32 little-endian),
 * the host part of every offset message id.  Borrowed, valid until
 * broker_close.  Any thread. */
const uint8_t *broker_store_host(const Broker *b);

/* Bytes of Idempotency-Key answers kept at most (idem.h): bounds the
 * table's memory whatever idempotencyMaxKeys says. */
#define BROKER_IDEM_MAX_BYTES ((size_t)16 << 20)

/* broker_idempotency is the Idempotency-Key table of produce requests
 * (in memory; forgotten at restart).  Borrowed, valid until broker_close. */
IdemTable *broker_idempotency(Broker *b);

/* Consumer side, all borrowed and valid until broker_close, any thread:
 * the subscription-group registry, the live consumers and orderly locks
 * (in memory), the cache of compiled subscriptions, the receive/ack engine
 * (its keeper thread runs from broker_open to broker_close) and the parsed
 * messageDelayLevel. */
#define BROKER_FILTER_CACHE 1024 /* distinct subscriptions kept compiled */
GroupRegistry *broker_groups(Broker *b);
MbTable *broker_members(Broker *b);
FilterCache *broker_filters(Broker *b);
PopEngine *broker_pop(Broker *b);
Scheduler *broker_scheduler(Broker *b); /* delay levels (its thread runs while open) */
TxnEngine *broker_txn(Broker *b);       /* transactions (its thread runs while open) */
RateSeries *broker_rates(Broker *b);    /* traffic per second, last 10 min (own thread) */
/* broker_traffic sums the traffic counters of every topic (system ones
 * included) since start. */
void broker_traffic(Broker *b, RateTotals *out);
const int64_t *broker_delay_levels(const Broker *b, size_t *n);

/* A snapshot for /healthz and monitoring. */
typedef struct BrokerHealth {
    StoreStats store; /* commit log positions, disk use, refusal */
    bool writable;    /* the store accepts appends (refusal == MQ_OK) */
} BrokerHealth;

/* broker_health fills 'out'.  Any thread; takes no lock for long. */
void broker_health(Broker *b, BrokerHealth *out);

#endif
