/*
 * http.h - the HTTP daemon (libmicrohttpd, epoll, internal thread pool)
 * and the per-request state that handlers see.
 *
 * Request life: the first MHD callback allocates a GwRequest (headers only;
 * never answered there, except an early 413 from Content-Length); body
 * chunks are appended up to GwConfig.max_body; the final callback routes
 * the request and the handler queues exactly one response.  The state is
 * freed in MHD's NOTIFY_COMPLETED callback.  Handlers run on MHD workers
 * and must not block on disk or on other clients: they suspend and are
 * resumed (sync flush, long poll) or offload blocking work to the job
 * runner (jobs.h).  docs/gateway.md says which thread runs what.
 */
#ifndef PETREL_HTTP_H
#define PETREL_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <microhttpd.h>

#include "broker.h"
#include "jobs.h"
#include "router.h"

typedef struct Gw Gw;

typedef struct GwRequest {
    Gw *gw;                      /* the daemon (borrowed) */
    struct MHD_Connection *conn; /* borrowed from MHD until completion */
    const char *method;          /* borrowed from MHD */
    const char *path;            /* percent-decoded path, no query (MHD's) */
    char *body;                  /* request body, malloc'd; NULL if none */
    size_t body_len;             /* bytes in 'body' */
    size_t body_cap;             /* bytes allocated */
    bool too_big;                /* body exceeded max_body: answer 413 */
    RtMatch match;               /* the route and its parameters */
    RtHandler resume;            /* set by a handler that suspended: called
                                  * instead of routing when MHD calls again */
    void *ctx;                   /* handler state across a suspension */
    void (*ctx_free)(void *ctx); /* frees 'ctx' at completion; NULL = free() */
    GwJob job;                   /* gw_offload's queue record (jobs.h) */
    int64_t start_ns;            /* mq_mono_ns() when the headers arrived */
    unsigned status;             /* HTTP status queued; 0 = none yet */
} GwRequest;

typedef struct GwConfig {
    int listen_fd;           /* bound, listening socket (gw_listen); adopted */
    const char *web_root;    /* console files directory, opened at start */
    size_t max_body;         /* larger request bodies get 413, bytes */
    unsigned threads;        /* MHD worker threads (2) */
    unsigned conn_limit;     /* concurrent connections */
    unsigned conn_timeout_s; /* idle connection timeout, seconds */
    size_t conn_memory;      /* per-connection MHD memory pool, bytes */
    unsigned max_headers;    /* more request headers get 431 */
} GwConfig;

/* gw_config_defaults fills 'cfg' with the defaults (2 threads, 4096
 * connections, 60 s idle timeout, 16 KiB per connection, 100 headers,
 * listen_fd -1). */
void gw_config_defaults(GwConfig *cfg);

/* gw_listen creates a TCP socket bound to 'ip' (IPv4, network order) and
 * 'port' (0 = any free port) and listening; '*fd' (caller owns) and the
 * bound port in '*bound'.  MQ_ERR_IO (logged) if the address is taken. */
int gw_listen(const uint8_t ip[4], uint16_t port, int *fd, uint16_t *bound);

/* gw_start starts the daemon on cfg->listen_fd serving 'broker' (borrowed;
 * it must outlive the daemon).  Caller owns '*out'.  MQ_ERR_IO if MHD
 * refuses to start (the fd is then closed). */
int gw_start(const GwConfig *cfg, Broker *broker, Gw **out);

/* gw_stop stops accepting, lets requests in progress finish (at most
 * ~2 s, counted from when the job runner is idle: queued jobs are always
 * run and answered), stops the job runner, then the daemon, closes the
 * listening socket and frees.  New requests on kept-alive connections
 * meanwhile get 503.  NULL ok.  Call from the main thread. */
void gw_stop(Gw *gw);

/* Accessors for handlers.  Borrowed. */
Broker *gw_broker(const GwRequest *r);
int gw_web_dirfd(const GwRequest *r); /* -1 when the web root is missing */
bool gw_is_stopping(const GwRequest *r);
GwJobs *gw_jobs(const GwRequest *r); /* the daemon's job runner (jobs.h) */
struct GwMetrics *gw_metrics(const GwRequest *r);
struct GwRuntime;
void gw_runtime(const GwRequest *r, struct GwRuntime *out); /* counters now */

/* gw_query returns the percent-decoded query parameter 'name' ("" for a
 * parameter given without a value), or NULL when absent.  Borrowed from
 * MHD until the request completes. */
const char *gw_query(const GwRequest *r, const char *name);

/* gw_query_unknown returns the name of the first query parameter of 'r'
 * that is not in the NULL-terminated list 'known', or NULL when all are
 * known.  Borrowed from MHD until the request completes. */
const char *gw_query_unknown(const GwRequest *r, const char *const *known);
/* gw_query_collect is gw_query_unknown that also fills values[i] with the
 * value of known[i] as gw_query would (NULL when absent), in one pass over
 * the query: for handlers that read several parameters per request. */
const char *gw_query_collect(const GwRequest *r, const char *const *known, const char **values);

/* gw_header returns the request header 'name' (case-insensitive), or NULL. */
const char *gw_header(const GwRequest *r, const char *name);

/* ---- suspension ----------------------------------------------------------
 * A handler that must wait (sync flush, long poll) sets r->resume (and
 * r->ctx), calls gw_suspend and returns MHD_YES without answering.
 * Exactly one gw_resume must follow, from any thread, possibly before the
 * handler has returned; MHD then calls r->resume on the connection's
 * worker, which answers.  'r' stays valid until that answer completes, so
 * the resuming thread must not touch 'r' after gw_resume.  gw_stop waits
 * for suspended requests (up to syncFlushTimeout + 1 s; with no deadline
 * while the job runner has work).  Blocking work (sqlite, unlink) goes to
 * the job runner through gw_offload (jobs.h), which suspends and resumes
 * by these rules. */
void gw_suspend(GwRequest *r);
void gw_resume(GwRequest *r);

/* ---- responses: each queues one response and destroys it ---------------*/

/* gw_reply queues 'resp' with 'status' and destroys it (NULL: MHD_NO). */
enum MHD_Result gw_reply(GwRequest *r, unsigned status, struct MHD_Response *resp);

/* gw_reply_json answers 'status' with the JSON 'root' (stolen). */
enum MHD_Result gw_reply_json(GwRequest *r, unsigned status, json_t *root);

/* gw_reply_json_text answers 'status' with 'len' bytes of JSON text at
 * 'text' (malloc'd; taken, freed by MHD or here). */
enum MHD_Result gw_reply_json_text(GwRequest *r, unsigned status, char *text, size_t len);
/* gw_reply_error answers the error body of API.md; 'code' NULL means
 * js_code_for_status(status).  'fmt' builds the message. */
enum MHD_Result gw_reply_error(GwRequest *r, unsigned status, const char *code,
                               const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* gw_reply_err answers the status gw_status_for('err') with the message
 * "'what': <mq_strerror>". */
enum MHD_Result gw_reply_err(GwRequest *r, int err, const char *what);

#endif
