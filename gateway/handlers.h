/*
 * handlers.h - the REST handlers, one file per resource (h_<resource>.c),
 * and the route table that http.c dispatches through.  Each handler runs
 * on an MHD worker with the body complete and queues one response.
 */
#ifndef PETREL_HANDLERS_H
#define PETREL_HANDLERS_H

#include <stdbool.h>
#include <stddef.h>

#include "http.h"
#include "router.h"

/* h_admin.c: operations. */
enum MHD_Result h_admin_healthz(GwRequest *r, const RtMatch *m); /* GET /healthz */
enum MHD_Result h_admin_root(GwRequest *r, const RtMatch *m);    /* GET / -> /console/ */
enum MHD_Result h_admin_metrics(GwRequest *r, const RtMatch *m); /* GET /metrics */
enum MHD_Result h_admin_broker(GwRequest *r, const RtMatch *m);  /* GET /v1/broker */
enum MHD_Result h_admin_rates(GwRequest *r, const RtMatch *m);   /* GET /v1/broker/rates */
enum MHD_Result h_admin_delays(GwRequest *r, const RtMatch *m);  /* GET /v1/delays */
enum MHD_Result h_admin_cluster(GwRequest *r, const RtMatch *m); /* GET /v1/cluster */

/* h_message.c: produce, get by id, classic pull. */
enum MHD_Result h_message_produce(GwRequest *r, const RtMatch *m); /* POST .../messages */
enum MHD_Result h_message_get(GwRequest *r, const RtMatch *m);     /* GET /v1/messages/{id} */
enum MHD_Result h_message_pull(GwRequest *r, const RtMatch *m);    /* GET .../{q}/messages */
enum MHD_Result h_message_resend(GwRequest *r, const RtMatch *m);  /* POST .../{id}/resend */
enum MHD_Result h_message_track(GwRequest *r, const RtMatch *m);   /* GET .../{id}/track */
/* h_message_produce_topic looks up 'topic' for a produce handler 'again'.
 * When it does not exist and autoCreateTopicEnable is on, its creation is
 * handed to the job runner and 'again' is called anew once it is made
 * (the caller must then return '*ret' at once, holding nothing; the
 * resumed call finds r->ctx set and consumes it here).  True with '*t'
 * and the client's address as a record's born host; false when it
 * answered or suspended ('*ret'). */
bool h_message_produce_topic(GwRequest *r, const char *topic, RtHandler again, MetaTopic *t,
                             uint8_t born_host[8], enum MHD_Result *ret);

/* h_txn.c: transactional messages (core/txn.h). */
enum MHD_Result h_txn_produce(GwRequest *r, const RtMatch *m);  /* POST .../transactions */
enum MHD_Result h_txn_commit(GwRequest *r, const RtMatch *m);   /* POST /v1/transactions/{id}/commit */
enum MHD_Result h_txn_rollback(GwRequest *r, const RtMatch *m); /* .../rollback */
enum MHD_Result h_txn_get(GwRequest *r, const RtMatch *m);      /* GET /v1/transactions/{id} */
enum MHD_Result h_txn_list(GwRequest *r, const RtMatch *m);     /* GET /v1/transactions */

/* h_topic.c: topic admin. */
enum MHD_Result h_topic_list(GwRequest *r, const RtMatch *m);   /* GET /v1/topics */
enum MHD_Result h_topic_get(GwRequest *r, const RtMatch *m);    /* GET /v1/topics/{topic} */
enum MHD_Result h_topic_put(GwRequest *r, const RtMatch *m);    /* PUT /v1/topics/{topic} */
enum MHD_Result h_topic_delete(GwRequest *r, const RtMatch *m); /* DELETE /v1/topics/{t} */
enum MHD_Result h_topic_queues(GwRequest *r, const RtMatch *m); /* GET .../{topic}/queues */

/* h_topic_name_ok is true when 'topic' (a {topic} path parameter) is a
 * valid, unreserved user topic name; otherwise it has answered 400
 * INVALID_NAME and put MHD's result in '*ret'.  MHD worker. */
bool h_topic_name_ok(GwRequest *r, const char *topic, enum MHD_Result *ret);
/* h_topic_any_name_ok is h_topic_name_ok that also accepts the retry and
 * dead-letter topics of groups ("%RETRY%<group>", "%DLQ%<group>"): the
 * read-only routes (topic detail, queues, pull, queries) and DELETE serve
 * them, so operators can inspect a DLQ, resend from it and drop it. */
bool h_topic_any_name_ok(GwRequest *r, const char *topic, enum MHD_Result *ret);

/* h_group.c: subscription groups (admin, progress) and their consumer
 * offsets. */
enum MHD_Result h_group_list(GwRequest *r, const RtMatch *m);     /* GET /v1/groups */
enum MHD_Result h_group_get(GwRequest *r, const RtMatch *m);      /* GET /v1/groups/{g} */
enum MHD_Result h_group_put(GwRequest *r, const RtMatch *m);      /* PUT /v1/groups/{g} */
enum MHD_Result h_group_delete(GwRequest *r, const RtMatch *m);   /* DELETE /v1/groups/{g} */
enum MHD_Result h_group_progress(GwRequest *r, const RtMatch *m); /* GET .../progress */
enum MHD_Result h_topic_groups(GwRequest *r, const RtMatch *m);   /* GET /v1/topics/{t}/groups */
/* gw_topic_readers calls 'fn' for each group reading 'topic' (it has
 * offsets there or a live consumer subscribed to it), in name order,
 * until 'fn' returns non-zero.  MQ_OK, or MQ_ERR_NOMEM.  MHD worker. */
int gw_topic_readers(Broker *b, const char *topic, int (*fn)(void *arg, const MetaGroup *g),
                     void *arg);
/* h_consume.c: receive / ack / nack and the SSE stream of a group. */
enum MHD_Result h_consume_receive(GwRequest *r, const RtMatch *m); /* POST .../receive */
enum MHD_Result h_consume_ack(GwRequest *r, const RtMatch *m);     /* POST .../ack */
enum MHD_Result h_consume_nack(GwRequest *r, const RtMatch *m);    /* POST .../nack */
enum MHD_Result h_consume_stream(GwRequest *r, const RtMatch *m);  /* GET .../stream */
/* h_member.c: classic-pull membership: heartbeats (rebalance) and locks. */
enum MHD_Result h_member_heartbeat(GwRequest *r, const RtMatch *m);  /* POST .../heartbeat */
enum MHD_Result h_member_unregister(GwRequest *r, const RtMatch *m); /* DELETE .../{clientId} */
enum MHD_Result h_member_lock(GwRequest *r, const RtMatch *m);       /* POST .../locks */
enum MHD_Result h_member_unlock(GwRequest *r, const RtMatch *m);     /* DELETE .../locks */
enum MHD_Result h_group_offsets_get(GwRequest *r, const RtMatch *m);   /* GET .../offsets */
enum MHD_Result h_group_offsets_put(GwRequest *r, const RtMatch *m);   /* PUT .../offsets */
enum MHD_Result h_group_offsets_reset(GwRequest *r, const RtMatch *m); /* POST .../reset */

/* h_query.c: GET /v1/topics/{topic}/messages?key=K or ?begin=..&end=.. */
enum MHD_Result h_query_messages(GwRequest *r, const RtMatch *m);

/* static.c: the console, files under the web root. */
enum MHD_Result h_static_get(GwRequest *r, const RtMatch *m); /* GET /console/{path*} */

/* gw_routes returns the route table (static) and its length. */
const RtRoute *gw_routes(size_t *count);

#endif
