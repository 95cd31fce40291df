/*
 * group.h - the subscription-group registry: every consumer group's
 * settings (MetaGroup) in an in-memory hash map, written through to the
 * metadata database (meta.h, FORMAT.md "meta.db") and loaded from it at
 * open.  The consume paths ask it on every receive and pull
 * (group_for_consume), so lookups take a read lock only and never wait on
 * sqlite.  Also names a group's retry and dead-letter topics.
 *
 * Locks: as topic.h.  'rw' (pthread rwlock) guards the map and is held
 * only to read or change it in memory; 'write_mu' serialises the writers
 * (put, delete, auto-create) across their sqlite write and map update, so
 * the map and meta.db always agree.  All functions are thread-safe.  The
 * writers block on sqlite (and on write_mu), so the gateway calls them
 * from its job thread only (gateway/jobs.h), never from an HTTP worker;
 * its workers call the readers and group_for_consume without auto-create.
 */
#ifndef PETREL_GROUP_H
#define PETREL_GROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "meta.h"
#include "mq.h"

#define GROUP_RETRY_MAX_TIMES_MAX 1000 /* most retries a group may ask for (0 = none) */
#define GROUP_RETRY_QUEUES_MAX 64      /* most queues of a group's retry topic */

typedef struct GroupRegistry GroupRegistry;

/* group_registry_open loads every group of 'meta' (borrowed: it must
 * outlive the registry) into a new registry.  Returns MQ_OK, MQ_ERR_INVAL
 * (NULL argument), MQ_ERR_NOMEM or meta_group_list's error.  Caller owns
 * '*out' (group_registry_close).  Any thread. */
int group_registry_open(Meta *meta, GroupRegistry **out);

/* group_registry_close frees the registry; meta.db is not touched (it is
 * always up to date).  NULL ok.  Call it once no other thread uses 'r'. */
void group_registry_close(GroupRegistry *r);

/* group_put creates the user group 'g->name' or replaces its settings
 * (consume_enable, broadcast, orderly, retry_max_times, retry_queue_nums;
 * the caller's created_ms/updated_ms are ignored).  The row goes to
 * meta.db first, then the map (with meta's created_ms, kept on a replace,
 * and updated_ms).  '*created' (may be NULL) says whether the group is new.
 * Returns MQ_OK; MQ_ERR_INVAL when 'g->name' fails msg_name_valid or is
 * msg_name_reserved, 'retry_max_times' is not 0..1000 or 'retry_queue_nums'
 * is not 1..64; MQ_ERR_DB / MQ_ERR_NOMEM (nothing changed).  Job thread
 * (blocks on sqlite). */
int group_put(GroupRegistry *r, const MetaGroup *g, bool *created);

/* group_get copies the group 'name' into '*out'.  MQ_OK, MQ_ERR_NOTFOUND,
 * MQ_ERR_INVAL (NULL argument).  Read lock only.  Any thread. */
int group_get(GroupRegistry *r, const char *name, MetaGroup *out);

/* group_delete removes the group 'name' from meta.db (with its consumer
 * offsets, see meta_group_delete) and from the map.  Its retry and DLQ
 * topics are left alone (RocketMQ keeps them too).  MQ_OK,
 * MQ_ERR_NOTFOUND, MQ_ERR_INVAL (NULL, empty or too long name), MQ_ERR_DB.
 * Job thread (blocks on sqlite). */
int group_delete(GroupRegistry *r, const char *name);

/* group_list calls 'fn' with a copy of each group in name order (byte-wise,
 * as meta_group_list) and stops early when 'fn' returns non-zero.  'fn'
 * runs without any registry lock held (on a snapshot), so it may call the
 * registry.  MQ_OK, MQ_ERR_INVAL, MQ_ERR_NOMEM.  Any thread. */
int group_list(GroupRegistry *r, int (*fn)(void *arg, const MetaGroup *g), void *arg);

/* group_count returns the number of groups (0 for NULL). */
size_t group_count(GroupRegistry *r);

/* group_for_consume copies the settings of 'name' into '*out' for a
 * receive or pull.  When the group does not exist and 'auto_create' is set
 * it is created with meta_group_defaults (RocketMQ's
 * autoCreateSubscriptionGroup); concurrent callers creating the same name
 * all succeed and one group results.  It does not look at consume_enable:
 * the caller refuses a disabled group.  Returns MQ_OK; MQ_ERR_INVAL (NULL
 * argument, or absent and 'name' is not a valid unreserved user name);
 * MQ_ERR_NOTFOUND (absent, valid name, no auto-create); MQ_ERR_DB /
 * MQ_ERR_NOMEM.  Existing groups need the read lock only (any thread);
 * an auto-create blocks on sqlite (job thread). */
int group_for_consume(GroupRegistry *r, const char *name, bool auto_create, MetaGroup *out);

/* group_generation returns a number that identifies the current version of
 * the group 'name': it changes on every put (create or update, auto-create
 * included) and delete of that name and is never reused within the
 * registry, so a group deleted and created again has a new one.  0 when
 * the group is absent (or 'r'/'name' is NULL).  In memory only: numbers
 * start again at each open.  Read the generation before the settings
 * (group_for_consume) and compare it again later to detect a change.
 * Read lock only.  Any thread. */
uint64_t group_generation(GroupRegistry *r, const char *name);

/* group_retry_topic and group_dlq_topic write the retry topic
 * "%RETRY%<group>" and the dead-letter topic "%DLQ%<group>" of 'group'
 * into 'buf' of 'cap' bytes, NUL-terminated; 'cap' >= MSG_SYSTEM_NAME_MAX
 * + 1 holds the name of any valid group.  A longer result is truncated;
 * NULL 'group' is the empty name; nothing is written when 'buf' is NULL
 * or 'cap' is 0.  Any thread. */
void group_retry_topic(const char *group, char *buf, size_t cap);
void group_dlq_topic(const char *group, char *buf, size_t cap);

#endif
