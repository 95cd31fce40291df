/*
 * topic.h - the topic registry: every topic's configuration (MetaTopic) in
 * an in-memory hash map, written through to the metadata database (meta.h,
 * FORMAT.md "meta.db") and loaded from it at open.  The gateway asks it on
 * every produce (topic_for_produce, topic_select_queue), so lookups take a
 * read lock only and never wait on sqlite.
 *
 * Locks: 'rw' (pthread rwlock) guards the map and is held only to read or
 * change it in memory; 'write_mu' serialises the writers (put, delete,
 * auto-create) across their sqlite write and map update, so the map and
 * meta.db always agree.  All functions are thread-safe.  The writers
 * block on sqlite (and on write_mu), so the gateway calls them from its
 * job thread only (gateway/jobs.h), never from an HTTP worker; its
 * workers call the readers and topic_for_produce without auto-create.
 */
#ifndef PETREL_TOPIC_H
#define PETREL_TOPIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "meta.h"
#include "mq.h"

#define TOPIC_QUEUES_MAX 1024 /* most read/write queues a topic may have */

typedef struct TopicRegistry TopicRegistry;

/* topic_registry_open loads every topic of 'meta' (borrowed: it must
 * outlive the registry) into a new registry.  'default_queues' (1..1024,
 * the broker's defaultTopicQueueNums) is what topic_for_produce uses when
 * asked for 0 queues; topic_default_queues hands it to the gateway.
 * Returns MQ_OK, MQ_ERR_INVAL (NULL argument, 'default_queues' out of
 * range), MQ_ERR_NOMEM or meta_topic_list's error.  Caller owns '*out'
 * (topic_registry_close).  Any thread. */
int topic_registry_open(Meta *meta, uint32_t default_queues, TopicRegistry **out);

/* topic_registry_close frees the registry; meta.db is not touched (it is
 * always up to date).  NULL ok.  Call it once no other thread uses 'r'. */
void topic_registry_close(TopicRegistry *r);

/* topic_default_queues returns the 'default_queues' given at open. */
uint32_t topic_default_queues(const TopicRegistry *r);

/* topic_put creates the user topic 'name' or replaces its settings:
 * read_queues = write_queues = 'queues', 'perm' (META_PERM_* bits), 'order'.
 * The row goes to meta.db first, then the map (with meta's created_ms and
 * updated_ms).  '*created' (may be NULL) says whether the topic is new.
 * Returns MQ_OK; MQ_ERR_INVAL when 'name' fails msg_name_valid or is
 * msg_name_reserved, 'queues' is not 1..1024 or 'perm' is not 2, 4 or 6;
 * MQ_ERR_DB / MQ_ERR_NOMEM (nothing changed).  Any thread. */
int topic_put(TopicRegistry *r, const char *name, uint32_t queues, uint32_t perm, bool order,
              bool *created);

/* topic_put_system is topic_put for the broker's own topics (%RETRY%...,
 * %DLQ%..., RMQ_SYS_...): the name must pass msg_system_name_valid
 * ([%|a-zA-Z0-9_-], 1..255 bytes) and may be reserved.  Same errors. */
int topic_put_system(TopicRegistry *r, const char *name, uint32_t queues, uint32_t perm,
                     bool order, bool *created);

/* topic_get copies the topic 'name' into '*out'.  MQ_OK, MQ_ERR_NOTFOUND,
 * MQ_ERR_INVAL (NULL argument).  Read lock only.  Any thread. */
int topic_get(TopicRegistry *r, const char *name, MetaTopic *out);

/* topic_delete removes the topic 'name' from meta.db (with its consumer
 * offsets, see meta_topic_delete) and from the map.  It does not touch the
 * store: the caller drops the consume queues (store_delete_topic).
 * MQ_OK, MQ_ERR_NOTFOUND, MQ_ERR_INVAL (NULL or empty name), MQ_ERR_DB.
 * Any thread. */
int topic_delete(TopicRegistry *r, const char *name);

/* topic_list calls 'fn' with a copy of each topic in name order (byte-wise,
 * as meta_topic_list) and stops early when 'fn' returns non-zero.  'fn'
 * runs without any registry lock held (on a snapshot), so it may call the
 * registry.  MQ_OK, MQ_ERR_INVAL, MQ_ERR_NOMEM.  Any thread. */
int topic_list(TopicRegistry *r, int (*fn)(void *arg, const MetaTopic *t), void *arg);

/* Traffic of one topic since the broker started (not persisted): what
 * producers stored and what pulls and receives handed out, message bodies
 * in bytes. */
typedef struct TopicTraffic {
    uint64_t in_msgs, in_bytes;
    uint64_t out_msgs, out_bytes;
} TopicTraffic;

/* topic_count_traffic adds 'msgs' messages of 'bytes' body bytes to the
 * in (produced, 'out' false) or out (delivered, 'out' true) counters of
 * 'name'; nothing for an unknown topic.  Read lock + relaxed atomics.  Any
 * thread. */
void topic_count_traffic(TopicRegistry *r, const char *name, bool out, uint64_t msgs,
                         uint64_t bytes);

/* topic_traffic_list is topic_list with each topic's traffic counters. */
int topic_traffic_list(TopicRegistry *r,
                       int (*fn)(void *arg, const MetaTopic *t, const TopicTraffic *tr),
                       void *arg);

/* topic_count returns the number of topics (system ones included). */
size_t topic_count(TopicRegistry *r);

/* topic_for_produce copies the configuration of 'name' into '*out' for a
 * produce.  When the topic does not exist and 'auto_create' is set it is
 * created as by topic_put with 'auto_queues' queues (0 = the registry's
 * default_queues), perm 6 and not ordered; concurrent callers creating
 * the same name all succeed and one topic results.  Returns MQ_OK;
 * MQ_ERR_NOTFOUND (absent, no auto-create); MQ_ERR_INVAL (absent and
 * 'name' is not a valid unreserved user name, or 'auto_queues' > 1024);
 * MQ_ERR_STATE when the topic exists but lacks META_PERM_WRITE ('*out' is
 * filled; the gateway maps it to 403 or 409); MQ_ERR_DB / MQ_ERR_NOMEM.  Existing
 * topics need the read lock only.  Any thread. */
int topic_for_produce(TopicRegistry *r, const char *name, bool auto_create, uint32_t auto_queues,
                      MetaTopic *out);

/* topic_select_queue picks the write queue of topic 't' (a copy from the
 * registry) for one message into '*out':
 *   - 'queue_id' >= 0: that queue; MQ_ERR_INVAL unless < t->write_queues;
 *   - else a non-empty 'sharding_key': mq_hash64(key) % write_queues, so a
 *     key always maps to the same queue, across restarts too, while the
 *     queue count is unchanged;
 *   - else round robin over the write queues, with one atomic counter per
 *     topic (per registry for a topic no longer in it).
 * MQ_ERR_STATE when t->write_queues is 0, MQ_ERR_INVAL for NULL arguments.
 * Any thread. */
int topic_select_queue(TopicRegistry *r, const MetaTopic *t, int64_t queue_id,
                       MqSlice sharding_key, uint32_t *out);

#endif
