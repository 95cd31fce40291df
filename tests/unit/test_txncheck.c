/*
 * test_txncheck.c - the transaction check-back client (core/txncheck.c)
 * against an in-process libmicrohttpd server on 127.0.0.1 (port 0, one
 * thread per connection so a held answer blocks no other): each verdict,
 * the exact request sent, every kind of wrong answer (status, redirect
 * not followed, garbage, missing or lower-case state, oversized body),
 * timeouts, an unreachable port, many checks through few slots, the
 * queue limit, close with checks in flight, and the url policy.
 */
#include "testutil.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "mq.h"
#include "txncheck.h"
#include "version.h"

#define SLOW_MS 3000    /* how long /slow holds its answer (unless the server stops) */
#define PAUSE_MS 20     /* how long /pause holds its answer */
#define WAIT_MS 10000   /* longest wait for callbacks before a test fails */
#define MAX_RESULTS 256 /* callbacks one test records */
#define BIG_LEN (100 * 1024)

/* ======================================================================
 * The producer's side: a small check-back server
 * ====================================================================== */

typedef struct Server {
    struct MHD_Daemon *d; /* the running daemon */
    uint16_t port;        /* its bound port */
    pthread_mutex_t mu;   /* guards the fields below but 'quit' */
    char last_method[16]; /* of the last request */
    char last_path[64];   /* of the last request */
    char last_ctype[128]; /* its Content-Type, "" if none */
    char last_ua[128];    /* its User-Agent, "" if none */
    char last_body[1024]; /* its body, cut to fit, NUL-terminated */
    size_t last_body_len; /* bytes received (may exceed the copy) */
    int commit_hits;      /* requests to /commit */
    int held;             /* requests being held now (/slow, /pause) */
    int max_held;         /* most held at once */
    atomic_bool quit;     /* teardown: held answers return at once */
} Server;

/* Per-request state: the uploaded body. */
typedef struct Req {
    char *body; /* malloc'd, NULL until data arrives */
    size_t len; /* bytes */
} Req;

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Holds the answer 'ms' milliseconds, or until the server stops. */
static void hold(Server *s, int ms) {
    pthread_mutex_lock(&s->mu);
    s->held++;
    if (s->held > s->max_held) s->max_held = s->held;
    pthread_mutex_unlock(&s->mu);
    for (int t = 0; t < ms && !atomic_load(&s->quit); t += 5) sleep_ms(5);
    pthread_mutex_lock(&s->mu);
    s->held--;
    pthread_mutex_unlock(&s->mu);
}

static enum MHD_Result answer(struct MHD_Connection *conn, unsigned status, const char *body,
                              size_t len, const char *location) {
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", "application/json");
    if (location) MHD_add_response_header(r, "Location", location);
    enum MHD_Result ret = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ret;
}

/* A JSON object with state COMMIT padded to exactly 'len' bytes. */
static char *padded_commit(size_t len) {
    static const char head[] = "{\"state\":\"COMMIT\",\"pad\":\"";
    static const char tail[] = "\"}";
    char *p = malloc(len + 1);
    if (!p) return NULL;
    size_t h = sizeof(head) - 1, t = sizeof(tail) - 1;
    memcpy(p, head, h);
    memset(p + h, 'x', len - h - t);
    memcpy(p + len - t, tail, t);
    p[len] = '\0';
    return p;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
    (void)version;
    Server *s = cls;
    Req *rq = *con_cls;
    if (!rq) { /* headers only: never answer here (NOTES-libs.md) */
        rq = calloc(1, sizeof(*rq));
        if (!rq) return MHD_NO;
        *con_cls = rq;
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        char *p = realloc(rq->body, rq->len + *upload_data_size);
        if (!p) return MHD_NO;
        memcpy(p + rq->len, upload_data, *upload_data_size);
        rq->body = p;
        rq->len += *upload_data_size;
        *upload_data_size = 0;
        return MHD_YES;
    }

    const char *ctype = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type");
    const char *ua = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "User-Agent");
    pthread_mutex_lock(&s->mu);
    snprintf(s->last_method, sizeof(s->last_method), "%s", method);
    snprintf(s->last_path, sizeof(s->last_path), "%s", url);
    snprintf(s->last_ctype, sizeof(s->last_ctype), "%s", ctype ? ctype : "");
    snprintf(s->last_ua, sizeof(s->last_ua), "%s", ua ? ua : "");
    size_t n = rq->len < sizeof(s->last_body) - 1 ? rq->len : sizeof(s->last_body) - 1;
    if (n) memcpy(s->last_body, rq->body, n);
    s->last_body[n] = '\0';
    s->last_body_len = rq->len;
    if (strcmp(url, "/commit") == 0) s->commit_hits++;
    pthread_mutex_unlock(&s->mu);

#define JS(lit) lit, sizeof(lit) - 1
    if (strcmp(url, "/commit") == 0) return answer(conn, 200, JS("{\"state\":\"COMMIT\"}"), NULL);
    if (strcmp(url, "/rollback") == 0)
        return answer(conn, 200, JS("{\"state\":\"ROLLBACK\"}"), NULL);
    if (strcmp(url, "/unknown") == 0) return answer(conn, 200, JS("{\"state\":\"UNKNOWN\"}"), NULL);
    if (strcmp(url, "/garbage") == 0) return answer(conn, 200, JS("not json"), NULL);
    if (strcmp(url, "/nostate") == 0) return answer(conn, 200, JS("{\"x\":1}"), NULL);
    if (strcmp(url, "/lower") == 0) return answer(conn, 200, JS("{\"state\":\"commit\"}"), NULL);
    if (strcmp(url, "/number") == 0) return answer(conn, 200, JS("{\"state\":1}"), NULL);
    if (strcmp(url, "/array") == 0) return answer(conn, 200, JS("[\"COMMIT\"]"), NULL);
    if (strcmp(url, "/empty") == 0) return answer(conn, 200, JS(""), NULL);
    if (strcmp(url, "/dup") == 0)
        return answer(conn, 200, JS("{\"state\":\"COMMIT\",\"state\":\"ROLLBACK\"}"), NULL);
    if (strcmp(url, "/trailing") == 0)
        return answer(conn, 200, JS("{\"state\":\"COMMIT\"} x"), NULL);
    /* A right body behind a wrong status still is no answer. */
    if (strcmp(url, "/500") == 0) return answer(conn, 500, JS("{\"state\":\"COMMIT\"}"), NULL);
    if (strcmp(url, "/redirect") == 0)
        return answer(conn, 302, JS("{\"state\":\"COMMIT\"}"), "/commit");
    if (strcmp(url, "/created") == 0)
        return answer(conn, 201, JS("{\"state\":\"ROLLBACK\"}"), NULL);
    if (strcmp(url, "/slow") == 0) {
        hold(s, SLOW_MS);
        return answer(conn, 200, JS("{\"state\":\"COMMIT\"}"), NULL);
    }
    if (strcmp(url, "/pause") == 0) {
        hold(s, PAUSE_MS);
        return answer(conn, 200, JS("{\"state\":\"COMMIT\"}"), NULL);
    }
    if (strcmp(url, "/big") == 0 || strcmp(url, "/edge") == 0) {
        size_t len = strcmp(url, "/big") == 0 ? BIG_LEN : TXC_ANSWER_MAX;
        char *p = padded_commit(len);
        if (!p) return MHD_NO;
        enum MHD_Result ret = answer(conn, 200, p, len, NULL);
        free(p);
        return ret;
    }
    return answer(conn, 404, JS("{}"), NULL);
#undef JS
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    (void)cls;
    (void)conn;
    (void)toe;
    Req *rq = *con_cls;
    if (rq) {
        free(rq->body);
        free(rq);
    }
    *con_cls = NULL;
}

static void server_start(Server *s) {
    pthread_mutex_init(&s->mu, NULL);
    atomic_init(&s->quit, false);
    struct sockaddr_in addr = {0};
    addr.sin_family = AF_INET;
    addr.sin_port = 0;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    s->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION, 0,
                            NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR,
                            (struct sockaddr *)&addr, MHD_OPTION_NOTIFY_COMPLETED, on_completed,
                            s, MHD_OPTION_END);
    assert_non_null(s->d);
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    assert_non_null(info);
    s->port = info->port;
    assert_true(s->port != 0);
}

static void server_stop(Server *s) {
    atomic_store(&s->quit, true);
    if (s->d) MHD_stop_daemon(s->d);
    s->d = NULL;
    pthread_mutex_destroy(&s->mu);
}

/* ======================================================================
 * The broker's side: recorded callbacks
 * ====================================================================== */

typedef struct Result {
    char id[32];      /* txn_id passed back */
    TxcVerdict v;     /* the verdict */
    char detail[160]; /* the detail text */
} Result;

typedef struct Fixture {
    Server srv;                   /* the producer's side */
    TxcChecker *c;                /* closed by teardown if a test left it open */
    pthread_mutex_t mu;           /* guards the fields below */
    pthread_cond_t cv;            /* a callback arrived */
    Result res[MAX_RESULTS];      /* callbacks in arrival order */
    size_t n_res;                 /* callbacks so far */
    int per_id[MAX_RESULTS];      /* callbacks per id "t<N>" */
    bool resubmit;                /* the callback calls txc_submit... */
    int resubmit_rc[MAX_RESULTS]; /* ...and records what it returned */
} Fixture;

static void on_done(void *arg, const char *txn_id, TxcVerdict v, const char *detail) {
    Fixture *f = arg; /* no cmocka asserts here: this is the checker thread */
    int rc = MQ_OK;
    if (f->resubmit) rc = txc_submit(f->c, "again", "http://127.0.0.1:1/commit", "{}");
    pthread_mutex_lock(&f->mu);
    if (f->n_res < MAX_RESULTS) {
        Result *r = &f->res[f->n_res];
        snprintf(r->id, sizeof(r->id), "%s", txn_id);
        r->v = v;
        snprintf(r->detail, sizeof(r->detail), "%s", detail);
        f->resubmit_rc[f->n_res] = rc;
    }
    f->n_res++;
    int idx = -1;
    if (sscanf(txn_id, "t%d", &idx) == 1 && idx >= 0 && idx < MAX_RESULTS) f->per_id[idx]++;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

/* Waits until 'n' callbacks arrived; false after WAIT_MS. */
static bool wait_results(Fixture *f, size_t n) {
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += WAIT_MS / 1000;
    pthread_mutex_lock(&f->mu);
    int e = 0;
    while (f->n_res < n && e == 0) e = pthread_cond_timedwait(&f->cv, &f->mu, &dl);
    bool ok = f->n_res >= n;
    pthread_mutex_unlock(&f->mu);
    return ok;
}

static size_t n_results(Fixture *f) {
    pthread_mutex_lock(&f->mu);
    size_t n = f->n_res;
    pthread_mutex_unlock(&f->mu);
    return n;
}

static int setup(void **state) {
    Fixture *f = calloc(1, sizeof(*f));
    if (!f) return -1;
    pthread_mutex_init(&f->mu, NULL);
    mq_cond_init_mono(&f->cv);
    server_start(&f->srv);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    Fixture *f = *state;
    txc_close(f->c); /* first: its callbacks write into 'f' */
    server_stop(&f->srv);
    pthread_cond_destroy(&f->cv);
    pthread_mutex_destroy(&f->mu);
    free(f);
    return 0;
}

static TxcConfig config(Fixture *f) {
    return (TxcConfig){.done = on_done, .done_arg = f};
}

static void open_checker(Fixture *f, const TxcConfig *cfg) {
    assert_int_equal(txc_open(cfg, &f->c), MQ_OK);
    assert_non_null(f->c);
}

static void close_checker(Fixture *f) {
    txc_close(f->c);
    f->c = NULL;
}

static void url_for(const Fixture *f, const char *path, char *buf, size_t cap) {
    snprintf(buf, cap, "http://127.0.0.1:%u%s", (unsigned)f->srv.port, path);
}

/* Submits one check to 'path' and waits for its answer (the next result). */
static const Result *check_one(Fixture *f, const char *path) {
    char url[128];
    url_for(f, path, url, sizeof(url));
    size_t before = n_results(f);
    assert_int_equal(txc_submit(f->c, "t0", url, "{}"), MQ_OK);
    assert_true(wait_results(f, before + 1));
    assert_int_equal(n_results(f), before + 1);
    return &f->res[before];
}

/* Waits until the checker has nothing in flight (it counts a check down
 * only after its callback returned); false after WAIT_MS. */
static bool wait_idle(Fixture *f) {
    for (int t = 0; t < WAIT_MS; t += 2) {
        if (txc_in_flight(f->c) == 0) return true;
        sleep_ms(2);
    }
    return false;
}

static int64_t elapsed_ms(int64_t start_ns) {
    return (mq_mono_ns() - start_ns) / 1000000;
}

/* ======================================================================
 * Verdicts
 * ====================================================================== */

static void test_txc_each_state_gives_its_verdict(void **state) {
    Fixture *f = *state;
    TxcConfig cfg = config(f);
    open_checker(f, &cfg);
    const Result *r = check_one(f, "/commit");
    assert_int_equal(r->v, TXC_COMMIT);
    assert_string_equal(r->detail, "COMMIT");
    assert_string_equal(r->id, "t0");
    r = check_one(f, "/rollback");
    assert_int_equal(r->v, TXC_ROLLBACK);
    assert_string_equal(r->detail, "ROLLBACK");
    r = check_one(f, "/unknown");
    assert_int_equal(r->v, TXC_UNKNOWN);
    assert_string_equal(r->detail, "UNKNOWN");
    r = check_one(f, "/created"); /* any 2xx */
    assert_int_equal(r->v, TXC_ROLLBACK);
    r = check_one(f, "/edge"); /* exactly TXC_ANSWER_MAX bytes still fits */
    assert_int_equal(r->v, TXC_COMMIT);
    assert_true(wait_idle(f));
    close_checker(f);
}

static void test_txc_posts_the_exact_body_as_json(void **state) {
    Fixture *f = *state;
    TxcConfig cfg = config(f);
    open_checker(f, &cfg);
    const char *body = "{\"transactionId\":\"tx-1\",\"msgId\":\"0A0B\",\"topic\":\"Orders\","
                       "\"keys\":\"k1 k2\",\"properties\":{\"a\":\"\\u00e9\"},\"checkTimes\":3}";
    char url[128];
    url_for(f, "/commit", url, sizeof(url));
    assert_int_equal(txc_submit(f->c, "t7", url, body), MQ_OK);
    assert_true(wait_results(f, 1));
    assert_int_equal(f->res[0].v, TXC_COMMIT);
    assert_string_equal(f->res[0].id, "t7");
    pthread_mutex_lock(&f->srv.mu);
    assert_string_equal(f->srv.last_method, "POST");
    assert_string_equal(f->srv.last_path, "/commit");
    assert_string_equal(f->srv.last_ctype, "application/json");
    assert_string_equal(f->srv.last_ua, "petrel/" PETREL_VERSION);
    assert_int_equal(f->srv.last_body_len, strlen(body));
    assert_string_equal(f->srv.last_body, body);
    pthread_mutex_unlock(&f->srv.mu);
    close_checker(f);
}

static void test_txc_wrong_answers_are_errors(void **state) {
    Fixture *f = *state;
    TxcConfig cfg = config(f);
    open_checker(f, &cfg);
    static const struct {
        const char *path;
        const char *detail;
    } cases[] = {
        {"/garbage", "bad answer: not json"},
        {"/empty", "bad answer: not json"},
        {"/trailing", "bad answer: not json"},
        {"/dup", "bad answer: not json"},
        {"/array", "bad answer: not an object"},
        {"/nostate", "bad answer: no state"},
        {"/number", "bad answer: no state"},
        {"/lower", "bad answer: unknown state"},
        {"/500", "HTTP 500"},
        {"/missing", "HTTP 404"},
        {"/redirect", "HTTP 302"},
        {"/big", "answer too large"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const Result *r = check_one(f, cases[i].path);
        if (r->v != TXC_ERROR || strcmp(r->detail, cases[i].detail) != 0)
            fail_msg("%s: verdict %d detail '%s', want error '%s'", cases[i].path, (int)r->v,
                     r->detail, cases[i].detail);
    }
    /* The 302 pointed at /commit: not followed. */
    pthread_mutex_lock(&f->srv.mu);
    assert_int_equal(f->srv.commit_hits, 0);
    pthread_mutex_unlock(&f->srv.mu);
    assert_true(wait_idle(f));
    close_checker(f);
}

/* ======================================================================
 * Time limits and transport errors
 * ====================================================================== */

static void test_txc_slow_answer_times_out(void **state) {
    Fixture *f = *state;
    TxcConfig cfg = config(f);
    cfg.total_timeout_ms = 300;
    open_checker(f, &cfg);
    int64_t t0 = mq_mono_ns();
    const Result *r = check_one(f, "/slow");
    int64_t ms = elapsed_ms(t0);
    assert_int_equal(r->v, TXC_ERROR);
    assert_string_equal(r->detail, "timeout");
    assert_true(ms >= 250);
    assert_true(ms < SLOW_MS - 500);
    close_checker(f);
}

static void test_txc_unreachable_port_fails_fast(void **state) {
    Fixture *f = *state;
    /* A port that was free a moment ago and has no listener now. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    socklen_t alen = sizeof(a);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
    close(fd);
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/commit", (unsigned)ntohs(a.sin_port));

    TxcConfig cfg = config(f);
    open_checker(f, &cfg);
    int64_t t0 = mq_mono_ns();
    assert_int_equal(txc_submit(f->c, "t1", url, "{}"), MQ_OK);
    assert_true(wait_results(f, 1));
    assert_true(elapsed_ms(t0) < 2000); /* well inside the 3 s connect timeout */
    assert_int_equal(f->res[0].v, TXC_ERROR);
    assert_memory_equal(f->res[0].detail, "transport: ", 11);
    close_checker(f);
}

/* ======================================================================
 * Many checks, limits, shutdown
 * ====================================================================== */

static void test_txc_many_checks_through_few_slots_complete_exactly_once(void **state) {
    Fixture *f = *state;
    TxcConfig cfg = config(f);
    cfg.max_parallel = 8;
    cfg.max_queued = 200;
    open_checker(f, &cfg);
    char pause_url[128], rollback_url[128];
    url_for(f, "/pause", pause_url, sizeof(pause_url));
    url_for(f, "/rollback", rollback_url, sizeof(rollback_url));
    for (int i = 0; i < 200; i++) {
        char id[16];
        snprintf(id, sizeof(id), "t%d", i);
        assert_int_equal(txc_submit(f->c, id, i % 2 ? rollback_url : pause_url, "{}"), MQ_OK);
    }
    assert_true(wait_results(f, 200));
    assert_true(wait_idle(f));
    sleep_ms(50); /* a duplicate callback would show up here */
    assert_int_equal(n_results(f), 200);
    for (int i = 0; i < 200; i++) assert_int_equal(f->per_id[i], 1);
    for (size_t i = 0; i < 200; i++) {
        int idx = atoi(f->res[i].id + 1);
        assert_int_equal(f->res[i].v, idx % 2 ? TXC_ROLLBACK : TXC_COMMIT);
    }
    pthread_mutex_lock(&f->srv.mu);
    int max_held = f->srv.max_held;
    pthread_mutex_unlock(&f->srv.mu);
    assert_true(max_held <= 8);
    assert_true(max_held >= 2); /* transfers did run side by side */
    close_checker(f);
}

static void test_txc_submit_beyond_max_queued_is_full(void **state) {
    Fixture *f = *state;
    TxcConfig cfg = config(f);
    cfg.max_parallel = 1;
    cfg.max_queued = 2;
    open_checker(f, &cfg);
    char url[128];
    url_for(f, "/slow", url, sizeof(url));
    assert_int_equal(txc_submit(f->c, "t0", url, "{}"), MQ_OK);
    assert_int_equal(txc_submit(f->c, "t1", url, "{}"), MQ_OK);
    assert_int_equal(txc_submit(f->c, "t2", url, "{}"), MQ_ERR_FULL);
    assert_int_equal(txc_in_flight(f->c), 2);
    close_checker(f);
    assert_int_equal(n_results(f), 2); /* the refused one never calls back */
    assert_int_equal(f->per_id[0], 1);
    assert_int_equal(f->per_id[1], 1);
    assert_int_equal(f->per_id[2], 0);
}

static void test_txc_close_abandons_checks_in_flight_promptly(void **state) {
    Fixture *f = *state;
    TxcConfig cfg = config(f);
    cfg.max_parallel = 4;
    open_checker(f, &cfg);
    char url[128];
    url_for(f, "/slow", url, sizeof(url));
    for (int i = 0; i < 10; i++) {
        char id[16];
        snprintf(id, sizeof(id), "t%d", i);
        assert_int_equal(txc_submit(f->c, id, url, "{}"), MQ_OK);
    }
    /* Wait until the server holds 4 requests: 4 running, 6 queued. */
    int held = 0;
    for (int t = 0; t < WAIT_MS && held < 4; t += 5) {
        pthread_mutex_lock(&f->srv.mu);
        held = f->srv.held;
        pthread_mutex_unlock(&f->srv.mu);
        if (held < 4) sleep_ms(5);
    }
    assert_int_equal(held, 4);
    assert_int_equal(txc_in_flight(f->c), 10);
    assert_int_equal(n_results(f), 0);

    f->resubmit = true; /* each callback tries to submit during the close */
    int64_t t0 = mq_mono_ns();
    close_checker(f);
    assert_true(elapsed_ms(t0) < 1000); /* /slow holds for 3 s */
    assert_int_equal(n_results(f), 10);
    for (int i = 0; i < 10; i++) {
        assert_int_equal(f->per_id[i], 1);
        assert_int_equal(f->res[i].v, TXC_ERROR);
        assert_string_equal(f->res[i].detail, "shutting down");
        assert_int_equal(f->resubmit_rc[i], MQ_ERR_STATE);
    }
}

static void test_txc_close_of_an_idle_checker_and_null(void **state) {
    Fixture *f = *state;
    txc_close(NULL);
    assert_int_equal(txc_in_flight(NULL), 0);
    TxcConfig cfg = config(f);
    open_checker(f, &cfg);
    assert_int_equal(txc_in_flight(f->c), 0);
    int64_t t0 = mq_mono_ns();
    close_checker(f);
    assert_true(elapsed_ms(t0) < 1000); /* the poll wait is cut short */
    assert_int_equal(n_results(f), 0);
}

/* ======================================================================
 * Arguments and the url policy
 * ====================================================================== */

static void test_txc_open_and_submit_reject_bad_arguments(void **state) {
    Fixture *f = *state;
    TxcChecker *c = NULL;
    TxcConfig cfg = config(f);
    assert_int_equal(txc_open(NULL, &c), MQ_ERR_INVAL);
    assert_int_equal(txc_open(&cfg, NULL), MQ_ERR_INVAL);
    TxcConfig bad = cfg;
    bad.done = NULL;
    assert_int_equal(txc_open(&bad, &c), MQ_ERR_INVAL);
    bad = cfg;
    bad.total_timeout_ms = -1;
    assert_int_equal(txc_open(&bad, &c), MQ_ERR_INVAL);
    assert_null(c);

    cfg.allowed_hosts = "producer.example, [::1]";
    open_checker(f, &cfg);
    char url[128];
    url_for(f, "/commit", url, sizeof(url));
    assert_int_equal(txc_submit(NULL, "t0", url, "{}"), MQ_ERR_INVAL);
    assert_int_equal(txc_submit(f->c, NULL, url, "{}"), MQ_ERR_INVAL);
    assert_int_equal(txc_submit(f->c, "", url, "{}"), MQ_ERR_INVAL);
    assert_int_equal(txc_submit(f->c, "t0", NULL, "{}"), MQ_ERR_INVAL);
    assert_int_equal(txc_submit(f->c, "t0", url, NULL), MQ_ERR_INVAL);
    assert_int_equal(txc_submit(f->c, "t0", "ftp://producer.example/x", "{}"), MQ_ERR_INVAL);
    /* 127.0.0.1 is not on this checker's allow-list */
    assert_int_equal(txc_submit(f->c, "t0", url, "{}"), MQ_ERR_INVAL);
    assert_int_equal(txc_in_flight(f->c), 0);
    close_checker(f);
    assert_int_equal(n_results(f), 0);

    /* The same url passes with its host listed (any case, blanks). */
    cfg.allowed_hosts = "producer.example , 127.0.0.1";
    open_checker(f, &cfg);
    const Result *r = check_one(f, "/commit");
    assert_int_equal(r->v, TXC_COMMIT);
    close_checker(f);
}

static void test_txc_url_policy(void **state) {
    (void)state;
    static const struct {
        const char *url;
        const char *allowed;
        bool ok;
    } cases[] = {
        {"http://producer.example:8080/check", NULL, true},
        {"https://producer.example/check?x=1", "", true},
        {"HTTPS://Producer.Example/check", NULL, true},
        {"http://127.0.0.1:9/x", " , ", true},     /* no entries: any host */
        {"ftp://producer.example/check", NULL, false},
        {"file:///etc/passwd", NULL, false},
        {"gopher://producer.example/", NULL, false},
        {"http://", NULL, false},
        {"http://user:pass@producer.example/", NULL, false},
        {"http://user@producer.example/", NULL, false},
        {"http://@producer.example/", NULL, false},
        {"http://:secret@producer.example/", NULL, false},
        {"http://good.example@evil.example/", "good.example", false},
        {"http://producer.example/", "producer.example", true},
        {"http://PRODUCER.example/", "producer.EXAMPLE", true},
        {"http://producer.example/", " a.example ,producer.example,b.example", true},
        {"http://producer.example/", "a.example,b.example", false},
        {"http://producer.example.evil/", "producer.example", false},
        {"http://example/", "producer.example", false},
        {"http://producer.example/", "producer.example.evil", false},
        {"http://[::1]:8080/x", "[::1]", true},
        {"http://[::1]:8080/x", "::1", true},
        {"http://[::2]:8080/x", "[::1]", false},
        {"http://0x7f.1/", "127.0.0.1", true}, /* normalised before the compare */
        {"http://ex%61mple.com/", "example.com", true},
        {"", NULL, false},
        {"garbage", NULL, false},
        {"producer.example/check", NULL, false},
        {"http://pro ducer.example/", NULL, false},
        {"http://producer.example:99999/", NULL, false},
        {"\x01\xff\xfe", NULL, false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char why[128] = "";
        bool ok = txc_url_allowed(cases[i].url, cases[i].allowed, why, sizeof(why));
        if (ok != cases[i].ok)
            fail_msg("'%s' with '%s': got %d (%s), want %d", cases[i].url,
                     cases[i].allowed ? cases[i].allowed : "(null)", ok, why, cases[i].ok);
        if (!ok) assert_true(why[0] != '\0');
    }
    /* The reasons, and a NULL or tiny reason buffer. */
    char why[128];
    assert_false(txc_url_allowed("ftp://h/", NULL, why, sizeof(why)));
    assert_string_equal(why, "scheme must be http or https");
    assert_false(txc_url_allowed("http://u:p@h/", NULL, why, sizeof(why)));
    assert_string_equal(why, "user name or password in url");
    assert_false(txc_url_allowed("http://h/", "k", why, sizeof(why)));
    assert_string_equal(why, "host not in the allow-list");
    assert_false(txc_url_allowed(NULL, NULL, NULL, 0));
    char tiny[4];
    assert_false(txc_url_allowed("ftp://h/", NULL, tiny, sizeof(tiny)));
    assert_string_equal(tiny, "sch");
}

int main(void) {
    /* Every request goes straight to 127.0.0.1, whatever the environment. */
    static const char *proxies[] = {"http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY",
                                    "all_proxy", "ALL_PROXY"};
    for (size_t i = 0; i < sizeof(proxies) / sizeof(proxies[0]); i++) unsetenv(proxies[i]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_txc_each_state_gives_its_verdict, setup, teardown),
        cmocka_unit_test_setup_teardown(test_txc_posts_the_exact_body_as_json, setup, teardown),
        cmocka_unit_test_setup_teardown(test_txc_wrong_answers_are_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_txc_slow_answer_times_out, setup, teardown),
        cmocka_unit_test_setup_teardown(test_txc_unreachable_port_fails_fast, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_txc_many_checks_through_few_slots_complete_exactly_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_txc_submit_beyond_max_queued_is_full, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_txc_close_abandons_checks_in_flight_promptly, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_txc_close_of_an_idle_checker_and_null, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_txc_open_and_submit_reject_bad_arguments, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_txc_url_policy, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
