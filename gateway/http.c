/*
 * http.c - the libmicrohttpd daemon: listening socket, per-request state,
 * body collection with the size limit, dispatch through the route table,
 * response helpers and an orderly stop.  See http.h.
 *
 * Model: MHD's internal epoll thread pool (2 workers).  Handlers never
 * block on the disk: a SYNC_FLUSH produce suspends its connection and the
 * flush callback resumes it, a long poll is resumed by the long-polling
 * registry (gw_suspend / gw_resume), and sqlite writes and file removals
 * run on the daemon's job runner (gw_offload, jobs.h).  docs/gateway.md.
 */
#define _GNU_SOURCE
#include "http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "handlers.h"
#include "json.h"
#include "metrics.h"
#include "mq.h"

#define STOP_GRACE_MS 2000 /* longest wait for requests in progress at stop */

struct Gw {
    struct MHD_Daemon *daemon;
    Broker *broker;       /* borrowed */
    int web_fd;           /* O_PATH directory fd of the web root, -1 = none */
    size_t max_body;      /* bytes */
    unsigned max_headers; /* more request headers: 431 */
    GwMetrics *metrics;   /* per-route counters */
    int64_t started_ms;   /* wall clock at gw_start */
    char listen_addr[32]; /* "ip:port" actually bound, for /v1/cluster */
    atomic_int in_flight; /* requests between first call and completion */
    atomic_int suspended; /* requests suspended and not yet resumed */
    int64_t suspend_grace_ms; /* longest wait for suspended ones at stop */
    atomic_bool stopping; /* gw_stop has begun */
    GwJobs *jobs;         /* blocking work of handlers (gw_offload) */
};

/* ---- route table ---------------------------------------------------------*/

static const RtRoute routes[] = {
    {"GET", "/healthz", h_admin_healthz},
    {"GET", "/metrics", h_admin_metrics},
    {"GET", "/v1/broker", h_admin_broker},
    {"GET", "/v1/broker/rates", h_admin_rates},
    {"GET", "/v1/delays", h_admin_delays},
    {"GET", "/v1/cluster", h_admin_cluster},
    {"GET", "/", h_admin_root},
    {"GET", "/console/{path*}", h_static_get},
    {"GET", "/v1/topics", h_topic_list},
    {"GET", "/v1/topics/{topic}", h_topic_get},
    {"PUT", "/v1/topics/{topic}", h_topic_put},
    {"DELETE", "/v1/topics/{topic}", h_topic_delete},
    {"GET", "/v1/topics/{topic}/queues", h_topic_queues},
    {"POST", "/v1/topics/{topic}/messages", h_message_produce},
    {"POST", "/v1/topics/{topic}/transactions", h_txn_produce},
    {"GET", "/v1/transactions", h_txn_list},
    {"GET", "/v1/transactions/{transactionId}", h_txn_get},
    {"POST", "/v1/transactions/{transactionId}/commit", h_txn_commit},
    {"POST", "/v1/transactions/{transactionId}/rollback", h_txn_rollback},
    {"GET", "/v1/topics/{topic}/messages", h_query_messages},
    {"GET", "/v1/topics/{topic}/queues/{queueId}/messages", h_message_pull},
    {"GET", "/v1/messages/{msgId}", h_message_get},
    {"GET", "/v1/groups/{group}/offsets", h_group_offsets_get},
    {"PUT", "/v1/groups/{group}/offsets", h_group_offsets_put},
    {"POST", "/v1/groups/{group}/offsets/reset", h_group_offsets_reset},
    {"POST", "/v1/messages/{msgId}/resend", h_message_resend},
    {"GET", "/v1/messages/{msgId}/track", h_message_track},
    {"GET", "/v1/topics/{topic}/groups", h_topic_groups},
    {"GET", "/v1/groups", h_group_list},
    {"GET", "/v1/groups/{group}", h_group_get},
    {"PUT", "/v1/groups/{group}", h_group_put},
    {"DELETE", "/v1/groups/{group}", h_group_delete},
    {"GET", "/v1/groups/{group}/progress", h_group_progress},
    {"POST", "/v1/groups/{group}/receive", h_consume_receive},
    {"POST", "/v1/groups/{group}/ack", h_consume_ack},
    {"POST", "/v1/groups/{group}/nack", h_consume_nack},
    {"GET", "/v1/groups/{group}/stream", h_consume_stream},
    {"POST", "/v1/groups/{group}/consumers/{clientId}/heartbeat", h_member_heartbeat},
    {"DELETE", "/v1/groups/{group}/consumers/{clientId}", h_member_unregister},
    {"POST", "/v1/groups/{group}/locks", h_member_lock},
    {"DELETE", "/v1/groups/{group}/locks", h_member_unlock},
};

const RtRoute *gw_routes(size_t *count) {
    *count = sizeof(routes) / sizeof(routes[0]);
    return routes;
}

/* ---- responses -----------------------------------------------------------*/

enum MHD_Result gw_reply(GwRequest *r, unsigned status, struct MHD_Response *resp) {
    if (!resp) return MHD_NO;
    if (atomic_load(&r->gw->stopping)) {
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    }
    enum MHD_Result ret = MHD_queue_response(r->conn, status, resp);
    if (ret == MHD_YES) r->status = status;
    MHD_destroy_response(resp);
    return ret;
}

enum MHD_Result gw_reply_json(GwRequest *r, unsigned status, json_t *root) {
    if (!root) return MHD_NO;
    size_t len = 0;
    char *buf = js_dump(root, &len);
    json_decref(root);
    if (!buf) return MHD_NO;
    return gw_reply_json_text(r, status, buf, len);
}

enum MHD_Result gw_reply_json_text(GwRequest *r, unsigned status, char *text, size_t len) {
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    return gw_reply(r, status, resp);
}

/* Builds the error response without queueing it (callers add headers). */
static struct MHD_Response *error_response(unsigned status, const char *code, const char *msg) {
    json_t *root = js_error(code ? code : js_code_for_status(status), msg, status);
    if (!root) return NULL;
    size_t len = 0;
    char *buf = js_dump(root, &len);
    json_decref(root);
    if (!buf) return NULL;
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, buf, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(buf);
        return NULL;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    return resp;
}

enum MHD_Result gw_reply_error(GwRequest *r, unsigned status, const char *code,
                               const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return gw_reply(r, status, error_response(status, code, msg));
}

enum MHD_Result gw_reply_err(GwRequest *r, int err, const char *what) {
    return gw_reply_error(r, gw_status_for(err), NULL, "'%s': %s", what, mq_strerror(err));
}

/* ---- accessors -----------------------------------------------------------*/

Broker *gw_broker(const GwRequest *r) {
    return r->gw->broker;
}

int gw_web_dirfd(const GwRequest *r) {
    return r->gw->web_fd;
}

bool gw_is_stopping(const GwRequest *r) {
    return atomic_load(&r->gw->stopping);
}

GwJobs *gw_jobs(const GwRequest *r) {
    return r->gw->jobs;
}

GwMetrics *gw_metrics(const GwRequest *r) {
    return r->gw->metrics;
}

void gw_runtime(const GwRequest *r, GwRuntime *out) {
    out->in_flight = atomic_load(&r->gw->in_flight);
    out->suspended = atomic_load(&r->gw->suspended);
    out->started_ms = r->gw->started_ms;
    out->listen_addr = r->gw->listen_addr;
}

const char *gw_query(const GwRequest *r, const char *name) {
    const char *v = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
    if (v) return v;
    /* "?name" without '=': MHD stores the key with a NULL value. */
    return MHD_lookup_connection_value_n(r->conn, MHD_GET_ARGUMENT_KIND, name, strlen(name),
                                         NULL, NULL) == MHD_YES ? "" : NULL;
}

typedef struct ArgScan {
    const char *const *known;
    const char **values; /* NULL = only look for unknown names */
    const char *first;   /* first unknown name, NULL = none yet */
} ArgScan;

static enum MHD_Result scan_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                const char *value) {
    (void)kind;
    ArgScan *u = cls;
    for (size_t i = 0; u->known[i]; i++) {
        if (strcmp(u->known[i], key) == 0) {
            /* the first occurrence wins, as with gw_query; "?name" has no value */
            if (u->values && !u->values[i]) u->values[i] = value ? value : "";
            return MHD_YES;
        }
    }
    u->first = key;
    return MHD_NO;
}

const char *gw_query_collect(const GwRequest *r, const char *const *known, const char **values) {
    for (size_t i = 0; values && known[i]; i++) values[i] = NULL;
    ArgScan u = {known, values, NULL};
    MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, scan_arg, &u);
    return u.first;
}

const char *gw_query_unknown(const GwRequest *r, const char *const *known) {
    return gw_query_collect(r, known, NULL);
}

const char *gw_header(const GwRequest *r, const char *name) {
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

void gw_suspend(GwRequest *r) {
    atomic_fetch_add(&r->gw->suspended, 1);
    MHD_suspend_connection(r->conn);
}

void gw_resume(GwRequest *r) {
    /* Read everything first: once resumed, 'r' may complete and be freed.
     * The count drops only after MHD is done with the call: gw_stop waits
     * for it to reach 0 before it stops the daemon and frees 'gw'. */
    Gw *gw = r->gw;
    struct MHD_Connection *conn = r->conn;
    MHD_resume_connection(conn);
    atomic_fetch_sub(&gw->suspended, 1);
}

/* ---- request life --------------------------------------------------------*/

/* The path as shown in messages: at most 200 bytes. */
static int shown_len(const char *path) {
    size_t n = strlen(path);
    return n > 200 ? 200 : (int)n;
}

static enum MHD_Result reply_too_big(GwRequest *r) {
    return gw_reply_error(r, MHD_HTTP_CONTENT_TOO_LARGE, NULL,
                          "request body larger than %zu bytes", r->gw->max_body);
}

/* Final call: the body is complete; route and answer. */
static enum MHD_Result dispatch(GwRequest *r) {
    if (r->resume) {
        /* Resumed after a suspension: the handler answers, even when the
         * broker is stopping (its work, e.g. an append, is done). */
        RtHandler h = r->resume;
        r->resume = NULL;
        return h(r, &r->match);
    }
    if (r->too_big) return reply_too_big(r);
    if (atomic_load(&r->gw->stopping)) {
        return gw_reply_error(r, MHD_HTTP_SERVICE_UNAVAILABLE, "SHUTTING_DOWN",
                              "the broker is shutting down");
    }
    size_t count = 0;
    const RtRoute *table = gw_routes(&count);
    switch (rt_match(table, count, r->method, r->path, &r->match)) {
    case RT_FOUND:
        return r->match.route->handler(r, &r->match);
    case RT_METHOD_NOT_ALLOWED: {
        char msg[320];
        snprintf(msg, sizeof(msg), "method %s not allowed on '%.*s' (allowed: %s)", r->method,
                 shown_len(r->path), r->path, r->match.allow);
        struct MHD_Response *resp = error_response(MHD_HTTP_METHOD_NOT_ALLOWED, NULL, msg);
        if (resp) MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, r->match.allow);
        return gw_reply(r, MHD_HTTP_METHOD_NOT_ALLOWED, resp);
    }
    case RT_NOT_FOUND:
        break;
    }
    return gw_reply_error(r, MHD_HTTP_NOT_FOUND, NULL, "no such path '%.*s'", shown_len(r->path),
                          r->path);
}

/* Marks the request too big: the rest of the body is read and discarded,
 * then 413 is answered. */
static void drop_body(GwRequest *r) {
    r->too_big = true;
    free(r->body);
    r->body = NULL;
    r->body_len = r->body_cap = 0;
}

/* Appends a body chunk.  The buffer doubles as it fills (a claimed
 * Content-Length reserves nothing, so idle clients cannot pin memory). */
static void take_chunk(GwRequest *r, const char *data, size_t len) {
    if (r->too_big) return;
    if (len > r->gw->max_body - r->body_len) {
        drop_body(r);
        return;
    }
    if (r->body_len + len > r->body_cap) {
        size_t cap = r->body_cap ? r->body_cap : 4096;
        while (cap < r->body_len + len) cap *= 2;
        if (cap > r->gw->max_body) cap = r->gw->max_body;
        char *nb = realloc(r->body, cap);
        if (!nb) {
            MQ_ERROR("cannot grow request body to %zu bytes", cap);
            drop_body(r); /* the client still gets an answer */
            return;
        }
        r->body = nb;
        r->body_cap = cap;
    }
    memcpy(r->body + r->body_len, data, len);
    r->body_len += len;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
    (void)version;
    Gw *gw = cls;
    GwRequest *r = *con_cls;
    if (!r) {
        /* Call 1 carries the headers only: set up, never answer (an answer
         * here makes MHD close the connection), except an early 413. */
        r = calloc(1, sizeof(*r));
        if (!r) return MHD_NO;
        r->gw = gw;
        r->conn = conn;
        r->method = method;
        r->path = url;
        r->start_ns = mq_mono_ns();
        *con_cls = r;
        atomic_fetch_add(&gw->in_flight, 1);
        /* Counted here, before any body arrives; MHD itself answers 431
         * (not JSON) when the headers overflow the connection's memory. */
        int nheaders = MHD_get_connection_values(conn, MHD_HEADER_KIND, NULL, NULL);
        if (nheaders < 0 || (unsigned)nheaders > gw->max_headers) {
            return gw_reply_error(r, MHD_HTTP_REQUEST_HEADER_FIELDS_TOO_LARGE,
                                  "TOO_MANY_HEADERS", "%d request headers, at most %u allowed",
                                  nheaders, gw->max_headers);
        }
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                     MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl) {
            char *end = NULL;
            errno = 0;
            unsigned long long n = strtoull(cl, &end, 10);
            if (errno == 0 && end != cl && n > gw->max_body) {
                r->too_big = true;
                return reply_too_big(r);
            }
        }
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        take_chunk(r, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }
    return dispatch(r);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    (void)conn;
    (void)toe;
    Gw *gw = cls;
    GwRequest *r = *con_cls;
    if (!r) return;
    gwm_request_done(gw->metrics, r->match.route, r->status, mq_mono_ns() - r->start_ns);
    if (r->ctx) {
        if (r->ctx_free) {
            r->ctx_free(r->ctx);
        } else {
            free(r->ctx);
        }
    }
    free(r->body);
    free(r);
    *con_cls = NULL;
    atomic_fetch_sub(&gw->in_flight, 1);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    char line[512];
    vsnprintf(line, sizeof(line), fmt, ap);
    size_t n = strlen(line);
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
    MQ_WARN("http: %s", line);
}

/* ---- daemon --------------------------------------------------------------*/

void gw_config_defaults(GwConfig *cfg) {
    memset(cfg, 0, sizeof(*cfg));
    cfg->listen_fd = -1;
    cfg->web_root = "web";
    cfg->max_body = (4u << 20) + (64u << 10);
    cfg->threads = 2;
    cfg->conn_limit = 4096;
    cfg->conn_timeout_s = 60;
    /* 16 KiB, not more: MHD clears the pool of a kept-alive connection for
     * every request, and at 64 KiB that memset was 14 % of a small
     * produce's CPU (docs/bench.md). */
    cfg->conn_memory = 16 * 1024;
    cfg->max_headers = 100;
}

int gw_listen(const uint8_t ip[4], uint16_t port, int *fd, uint16_t *bound) {
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    memcpy(&sa.sin_addr.s_addr, ip, 4);
    char shown[INET_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET, &sa.sin_addr, shown, sizeof(shown));

    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0) {
        MQ_ERROR("cannot create socket: %s", strerror(errno));
        return MQ_ERR_IO;
    }
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        MQ_ERROR("cannot listen on '%s:%u': %s", shown, port, strerror(errno));
        goto err_close;
    }
    if (listen(s, 1024) != 0) {
        MQ_ERROR("cannot listen on '%s:%u': %s", shown, port, strerror(errno));
        goto err_close;
    }
    socklen_t sl = sizeof(sa);
    if (getsockname(s, (struct sockaddr *)&sa, &sl) != 0) {
        MQ_ERROR("cannot read the bound address: %s", strerror(errno));
        goto err_close;
    }
    *fd = s;
    *bound = ntohs(sa.sin_port);
    return MQ_OK;

err_close:
    close(s);
    return MQ_ERR_IO;
}

/* MHD_PANIC ends the process; say why in our log first (the default
 * handler writes to stderr too, but without a timestamp or context). */
static void on_mhd_panic(void *cls, const char *file, unsigned int line, const char *reason) {
    (void)cls;
    MQ_ERROR("libmicrohttpd panic at %s:%u: %s", file ? file : "?", line,
             reason ? reason : "(no reason)");
    abort();
}

int gw_start(const GwConfig *cfg, Broker *broker, Gw **out) {
    MHD_set_panic_func(on_mhd_panic, NULL);
    Gw *gw = calloc(1, sizeof(*gw));
    if (!gw) {
        close(cfg->listen_fd);
        return MQ_ERR_NOMEM;
    }
    gw->broker = broker;
    gw->max_body = cfg->max_body;
    gw->max_headers = cfg->max_headers;
    gw->started_ms = mq_now_ms();
    struct sockaddr_in sa;
    socklen_t salen = sizeof(sa);
    if (getsockname(cfg->listen_fd, (struct sockaddr *)&sa, &salen) == 0 &&
        sa.sin_family == AF_INET) {
        char ip[INET_ADDRSTRLEN] = "";
        inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof(ip));
        snprintf(gw->listen_addr, sizeof(gw->listen_addr), "%s:%u", ip,
                 (unsigned)ntohs(sa.sin_port));
    }
    size_t nroutes = 0;
    const RtRoute *table = gw_routes(&nroutes);
    gw->metrics = gwm_new(table, nroutes);
    if (!gw->metrics) {
        close(cfg->listen_fd);
        free(gw);
        return MQ_ERR_NOMEM;
    }
    atomic_init(&gw->in_flight, 0);
    atomic_init(&gw->suspended, 0);
    gw->suspend_grace_ms = broker_config(broker)->sync_flush_timeout_ms + 1000;
    atomic_init(&gw->stopping, false);
    /* Before the daemon: no handler may find the runner missing. */
    int rc = gwj_start(&gw->jobs);
    if (rc != MQ_OK) {
        close(cfg->listen_fd);
        gwm_free(gw->metrics);
        free(gw);
        return rc;
    }
    gw->web_fd = open(cfg->web_root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (gw->web_fd < 0) {
        MQ_WARN("console disabled: cannot open web root '%s': %s", cfg->web_root,
                strerror(errno));
    }
    unsigned int flags =
        MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    /* Varargs: every value is cast to the exact type MHD reads. */
    gw->daemon = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, gw,
        MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL, /* first, so MHD logs through it */
        MHD_OPTION_LISTEN_SOCKET, (MHD_socket)cfg->listen_fd,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned int)cfg->threads,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned int)cfg->conn_limit,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)cfg->conn_timeout_s,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)cfg->conn_memory,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, gw,
        MHD_OPTION_END);
    if (!gw->daemon) {
        MQ_ERROR("cannot start the http daemon");
        close(cfg->listen_fd);
        if (gw->web_fd >= 0) close(gw->web_fd);
        gwj_free(gw->jobs);
        gwm_free(gw->metrics);
        free(gw);
        return MQ_ERR_IO;
    }
    *out = gw;
    return MQ_OK;
}

/* wait_requests waits until no request is in progress, or until the
 * grace periods run out: STOP_GRACE_MS for requests in progress,
 * suspend_grace_ms for suspended ones (a sync flush is resumed within
 * syncFlushTimeout).  While the job runner has work there is no deadline:
 * each pending job has a suspended request that it will resume, and MHD
 * must not be stopped before; the grace periods count from when the
 * runner was last seen busy (a resumed produce may then wait for a
 * flush). */
static void wait_requests(Gw *gw) {
    int64_t start = mq_mono_ms();
    int64_t busy_at = start; /* last time the runner had work */
    bool warned = false;
    for (;;) {
        int64_t now = mq_mono_ms();
        size_t jobs = gwj_pending(gw->jobs);
        if (jobs > 0) {
            busy_at = now;
            if (!warned && now - start >= gw->suspend_grace_ms) {
                MQ_WARN("stopping: still waiting for %zu job(s) of the gateway", jobs);
                warned = true;
            }
        }
        bool wait = jobs > 0 ||
                    (atomic_load(&gw->in_flight) > 0 && now < busy_at + STOP_GRACE_MS) ||
                    (atomic_load(&gw->suspended) > 0 && now < busy_at + gw->suspend_grace_ms);
        if (!wait) return;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

void gw_stop(Gw *gw) {
    if (!gw) return;
    atomic_store(&gw->stopping, true);
    /* No MHD_quiesce_daemon(): with a thread pool on epoll it races with
     * the workers over the listen socket and can MHD_PANIC ("Failed to
     * remove listen FD from epoll set", seen in e2e runs).  Requests that
     * arrive while stopping are answered 503 SHUTTING_DOWN instead. */
    wait_requests(gw);
    /* The runner is idle.  From now on it refuses jobs: a handler that
     * raced with the stop answers 503 through its resume.  A job queued
     * since the wait is run here; then wait for those answers too. */
    gwj_stop(gw->jobs);
    wait_requests(gw);
    int left = atomic_load(&gw->in_flight);
    if (left > 0) MQ_WARN("stopping with %d request(s) still in progress", left);
    /* The runner is freed only once the workers are gone: until then a
     * handler may still reach it (and be refused). */
    MHD_stop_daemon(gw->daemon);
    gwj_free(gw->jobs);
    if (gw->web_fd >= 0) close(gw->web_fd);
    gwm_free(gw->metrics);
    free(gw);
}
