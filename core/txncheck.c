/*
 * txncheck.c - the transaction check-back client: see txncheck.h.  Submits
 * go, under one mutex, onto a FIFO of jobs (one allocation each: the job
 * and its three strings).  The checker thread moves jobs from there into
 * libcurl's multi handle while fewer than max_parallel run, drives the
 * transfers, turns each finished one into a verdict and calls back.
 * curl_multi_wakeup (from txc_submit and txc_close) cuts its
 * curl_multi_poll short.  Calls libcurl and jansson only.
 */
#define _GNU_SOURCE
#include "txncheck.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>
#include <jansson.h>

#include "version.h"

/* CURLOPT_PROTOCOLS_STR (7.85) and curl_multi_wakeup (7.68). */
#if LIBCURL_VERSION_NUM < 0x075500
#error "txncheck.c needs libcurl 7.85 or later"
#endif

#define POLL_MAX_MS 1000  /* longest curl_multi_poll wait; a wakeup cuts it short */
#define ANSWER_FIRST 1024 /* first answer buffer, bytes; doubled up to TXC_ANSWER_MAX */
#define DETAIL_MAX 160    /* detail text handed to the callback, bytes with the NUL */

/* One check-back, from txc_submit until its callback returned. */
typedef struct TxcJob {
    struct TxcJob *next;          /* queue order, then the running list */
    struct TxcJob *prev;          /* running list only */
    CURL *easy;                   /* NULL until started */
    char *answer;                 /* answer body so far (not NUL-terminated) */
    size_t answer_len;            /* bytes in 'answer' */
    size_t answer_cap;            /* bytes allocated */
    bool too_large;               /* the answer passed TXC_ANSWER_MAX: aborted */
    bool nomem;                   /* the answer buffer could not grow: aborted */
    char errbuf[CURL_ERROR_SIZE]; /* libcurl's message for a failed transfer */
    const char *url;              /* normalised url, after 'txn_id' */
    const char *body;             /* request body, after 'url' */
    size_t body_len;              /* bytes */
    char txn_id[];                /* txn_id NUL url NUL body NUL */
} TxcJob;

struct TxcChecker {
    TxcConfig cfg;              /* copy; timeouts and limits defaulted */
    char *allowed_hosts;        /* owned copy of cfg.allowed_hosts, NULL = any */
    CURLM *multi;               /* used by the checker thread; curl_multi_wakeup by others */
    struct curl_slist *headers; /* request headers shared by every transfer (read-only) */
    pthread_t thread;           /* the checker thread */
    pthread_mutex_t mu;         /* guards the fields down to 'stopping' */
    TxcJob *q_head;             /* jobs waiting for a transfer slot, oldest first */
    TxcJob *q_tail;             /* newest waiting job, NULL when none */
    size_t n_pending;           /* accepted and not yet reported: queued + running */
    bool stopping;              /* txc_close began: submits refused, the thread exits */
    TxcJob *running;            /* started transfers (checker thread only) */
    size_t n_running;           /* entries in 'running' (checker thread only) */
};

/* ======================================================================
 * libcurl's one-time initialisation
 * ====================================================================== */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_FAILED_INIT;

static void curl_init_once(void) {
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* Initialises libcurl on the first call; false (logged) when it failed. */
static bool curl_ready(void) {
    pthread_once(&curl_once, curl_init_once);
    if (curl_init_rc != CURLE_OK) {
        MQ_ERROR("cannot initialise libcurl: %s", curl_easy_strerror(curl_init_rc));
        return false;
    }
    return true;
}

/* ======================================================================
 * URL policy
 * ====================================================================== */

static void set_why(char *why, size_t cap, const char *text) {
    if (why && cap > 0) snprintf(why, cap, "%s", text);
}

static char ascii_lower(char ch) {
    return (ch >= 'A' && ch <= 'Z') ? (char)(ch - 'A' + 'a') : ch;
}

/* True when the 'n' bytes at 'a' equal the NUL-terminated 'b' (ASCII case
 * folded), brackets around an IPv6 literal ignored on either side. */
static bool host_equal(const char *a, size_t n, const char *b) {
    size_t bn = strlen(b);
    if (n >= 2 && a[0] == '[' && a[n - 1] == ']') {
        a++;
        n -= 2;
    }
    if (bn >= 2 && b[0] == '[' && b[bn - 1] == ']') {
        b++;
        bn -= 2;
    }
    if (n != bn || n == 0) return false;
    for (size_t i = 0; i < n; i++) {
        if (ascii_lower(a[i]) != ascii_lower(b[i])) return false;
    }
    return true;
}

/* True when 'host' equals one entry of the comma-separated 'list'. */
static bool host_listed(const char *host, const char *list) {
    const char *p = list;
    while (*p) {
        const char *end = strchr(p, ',');
        if (!end) end = p + strlen(p);
        const char *s = p;
        const char *e = end;
        while (s < e && (*s == ' ' || *s == '\t')) s++;
        while (e > s && (e[-1] == ' ' || e[-1] == '\t')) e--;
        if (host_equal(s, (size_t)(e - s), host)) return true;
        p = *end ? end + 1 : end;
    }
    return false;
}

/* True when 'list' names at least one host (not only commas and blanks). */
static bool list_has_entries(const char *list) {
    if (!list) return false;
    for (const char *p = list; *p; p++) {
        if (*p != ',' && *p != ' ' && *p != '\t') return true;
    }
    return false;
}

/* txc_url_allowed as a command: MQ_OK, MQ_ERR_INVAL (refused, reason in
 * 'why') or MQ_ERR_NOMEM.  On MQ_OK with 'norm', '*norm' is libcurl's
 * normalised url, the one the transfer uses (malloc'd, caller frees). */
static int url_check(const char *url, const char *allowed, char *why, size_t cap, char **norm) {
    if (norm) *norm = NULL;
    if (!url || !*url) {
        set_why(why, cap, "empty url");
        return MQ_ERR_INVAL;
    }
    if (!curl_ready()) {
        set_why(why, cap, "libcurl unavailable");
        return MQ_ERR_INVAL;
    }
    CURLU *u = curl_url();
    if (!u) {
        set_why(why, cap, "out of memory");
        return MQ_ERR_NOMEM;
    }
    int rc = MQ_ERR_INVAL;
    char *scheme = NULL;
    char *host = NULL;
    char *part = NULL;
    CURLUcode uc = curl_url_set(u, CURLUPART_URL, url, 0);
    if (uc == CURLUE_OUT_OF_MEMORY) {
        set_why(why, cap, "out of memory");
        rc = MQ_ERR_NOMEM;
        goto out;
    }
    if (uc != CURLUE_OK) {
        if (why && cap > 0) snprintf(why, cap, "bad url: %s", curl_url_strerror(uc));
        goto out;
    }
    if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
        (strcasecmp(scheme, "http") != 0 && strcasecmp(scheme, "https") != 0)) {
        set_why(why, cap, "scheme must be http or https");
        goto out;
    }
    if (curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK || host[0] == '\0') {
        set_why(why, cap, "no host");
        goto out;
    }
    /* "http://@h/" has an empty user: any userinfo at all is refused. */
    if (curl_url_get(u, CURLUPART_USER, &part, 0) != CURLUE_NO_USER ||
        curl_url_get(u, CURLUPART_PASSWORD, &part, 0) != CURLUE_NO_PASSWORD) {
        set_why(why, cap, "user name or password in url");
        goto out;
    }
    if (list_has_entries(allowed) && !host_listed(host, allowed)) {
        set_why(why, cap, "host not in the allow-list");
        goto out;
    }
    if (norm) {
        char *full = NULL;
        uc = curl_url_get(u, CURLUPART_URL, &full, 0);
        *norm = uc == CURLUE_OK ? strdup(full) : NULL;
        curl_free(full);
        if (!*norm) {
            set_why(why, cap, "out of memory");
            rc = MQ_ERR_NOMEM;
            goto out;
        }
    }
    rc = MQ_OK;
out:
    curl_free(part); /* a user or password that got the url refused */
    curl_free(host);
    curl_free(scheme);
    curl_url_cleanup(u);
    return rc;
}

bool txc_url_allowed(const char *url, const char *allowed_hosts, char *why, size_t cap) {
    return url_check(url, allowed_hosts, why, cap, NULL) == MQ_OK;
}

/* ======================================================================
 * Transfers (checker thread)
 * ====================================================================== */

/* CURLOPT_WRITEFUNCTION: keeps up to TXC_ANSWER_MAX bytes of the answer;
 * returning short aborts the transfer (CURLE_WRITE_ERROR). */
static size_t on_answer(char *data, size_t size, size_t nmemb, void *arg) {
    TxcJob *j = arg;
    size_t n = size * nmemb;
    if (n > TXC_ANSWER_MAX - j->answer_len) {
        j->too_large = true;
        return 0;
    }
    if (j->answer_len + n > j->answer_cap) {
        size_t cap = j->answer_cap ? j->answer_cap : ANSWER_FIRST;
        while (cap < j->answer_len + n) cap *= 2;
        if (cap > TXC_ANSWER_MAX) cap = TXC_ANSWER_MAX;
        char *p = realloc(j->answer, cap);
        if (!p) {
            j->nomem = true;
            return 0;
        }
        j->answer = p;
        j->answer_cap = cap;
    }
    memcpy(j->answer + j->answer_len, data, n);
    j->answer_len += n;
    return n;
}

/* Creates the easy handle of 'j' and hands it to the multi handle.
 * MQ_OK or MQ_ERR_NOMEM (nothing left attached). */
static int start_job(TxcChecker *c, TxcJob *j) {
    MQ_ASSERT(j->easy == NULL);
    CURL *e = curl_easy_init();
    if (!e) return MQ_ERR_NOMEM;
    CURLcode rc = CURLE_OK;
    /* Stop at the first failing option: each can fail only for lack of
     * memory (all values are valid for this libcurl). */
#define SETOPT(opt, val) \
    if (rc == CURLE_OK) rc = curl_easy_setopt(e, opt, val)
    SETOPT(CURLOPT_URL, j->url);
    SETOPT(CURLOPT_PROTOCOLS_STR, "http,https");
    SETOPT(CURLOPT_FOLLOWLOCATION, 0L); /* a redirect could leave the allow-list */
    SETOPT(CURLOPT_NOSIGNAL, 1L);
    SETOPT(CURLOPT_CONNECTTIMEOUT_MS, (long)c->cfg.connect_timeout_ms);
    SETOPT(CURLOPT_TIMEOUT_MS, (long)c->cfg.total_timeout_ms);
    SETOPT(CURLOPT_USERAGENT, "petrel/" PETREL_VERSION);
    SETOPT(CURLOPT_HTTPHEADER, c->headers);
    SETOPT(CURLOPT_POST, 1L);
    SETOPT(CURLOPT_POSTFIELDS, j->body);
    SETOPT(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)j->body_len);
    SETOPT(CURLOPT_WRITEFUNCTION, on_answer);
    SETOPT(CURLOPT_WRITEDATA, j);
    SETOPT(CURLOPT_ERRORBUFFER, j->errbuf);
    SETOPT(CURLOPT_PRIVATE, j);
#undef SETOPT
    if (rc != CURLE_OK) {
        curl_easy_cleanup(e);
        return MQ_ERR_NOMEM;
    }
    if (curl_multi_add_handle(c->multi, e) != CURLM_OK) {
        curl_easy_cleanup(e);
        return MQ_ERR_NOMEM;
    }
    j->easy = e;
    j->prev = NULL;
    j->next = c->running;
    if (c->running) c->running->prev = j;
    c->running = j;
    c->n_running++;
    return MQ_OK;
}

/* Detaches a started 'j' from the multi handle and the running list. */
static void stop_job(TxcChecker *c, TxcJob *j) {
    MQ_ASSERT(j->easy != NULL && c->n_running > 0);
    curl_multi_remove_handle(c->multi, j->easy);
    curl_easy_cleanup(j->easy);
    j->easy = NULL;
    if (j->prev) {
        j->prev->next = j->next;
    } else {
        c->running = j->next;
    }
    if (j->next) j->next->prev = j->prev;
    c->n_running--;
}

/* Reports 'j' (no longer started) through the callback, frees it, and
 * only then takes it off the pending count. */
static void report(TxcChecker *c, TxcJob *j, TxcVerdict v, const char *detail) {
    MQ_ASSERT(j->easy == NULL);
    c->cfg.done(c->cfg.done_arg, j->txn_id, v, detail);
    free(j->answer);
    free(j);
    pthread_mutex_lock(&c->mu);
    MQ_ASSERT(c->n_pending > 0);
    c->n_pending--;
    pthread_mutex_unlock(&c->mu);
}

/* The verdict of a 2xx answer body. */
static TxcVerdict parse_answer(const char *p, size_t len, char *detail, size_t cap) {
    json_error_t jerr;
    /* Duplicate keys are refused: {"state":"COMMIT","state":"ROLLBACK"}
     * must not resolve a transaction either way. */
    json_t *root = json_loadb(p ? p : "", len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        snprintf(detail, cap, "bad answer: not json");
        return TXC_ERROR;
    }
    TxcVerdict v = TXC_ERROR;
    json_t *state = json_is_object(root) ? json_object_get(root, "state") : NULL;
    if (!json_is_object(root)) {
        snprintf(detail, cap, "bad answer: not an object");
    } else if (!json_is_string(state)) {
        snprintf(detail, cap, "bad answer: no state");
    } else {
        static const struct {
            const char *name;
            TxcVerdict v;
        } states[] = {{"COMMIT", TXC_COMMIT}, {"ROLLBACK", TXC_ROLLBACK}, {"UNKNOWN", TXC_UNKNOWN}};
        const char *s = json_string_value(state);
        size_t n = json_string_length(state);
        for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++) {
            if (n == strlen(states[i].name) && memcmp(s, states[i].name, n) == 0) {
                v = states[i].v;
                snprintf(detail, cap, "%s", states[i].name);
                break;
            }
        }
        if (v == TXC_ERROR) snprintf(detail, cap, "bad answer: unknown state");
    }
    json_decref(root);
    return v;
}

/* Turns the finished transfer of 'j' (libcurl result 'res') into a
 * verdict and reports it. */
static void finish_job(TxcChecker *c, TxcJob *j, CURLcode res) {
    char detail[DETAIL_MAX];
    TxcVerdict v = TXC_ERROR;
    long status = 0;
    if (j->too_large) {
        snprintf(detail, sizeof(detail), "answer too large");
    } else if (j->nomem) {
        snprintf(detail, sizeof(detail), "out of memory");
    } else if (res == CURLE_OPERATION_TIMEDOUT) {
        snprintf(detail, sizeof(detail), "timeout");
    } else if (res != CURLE_OK) {
        snprintf(detail, sizeof(detail), "transport: %.140s",
                 j->errbuf[0] ? j->errbuf : curl_easy_strerror(res));
    } else if (curl_easy_getinfo(j->easy, CURLINFO_RESPONSE_CODE, &status) != CURLE_OK ||
               status < 200 || status > 299) {
        /* 3xx too: redirects are not followed. */
        snprintf(detail, sizeof(detail), "HTTP %ld", status);
    } else {
        v = parse_answer(j->answer, j->answer_len, detail, sizeof(detail));
    }
    stop_job(c, j);
    report(c, j, v, detail);
}

/* Reports every transfer libcurl says has ended; returns how many. */
static size_t reap(TxcChecker *c) {
    size_t n = 0;
    int left = 0;
    CURLMsg *m;
    while ((m = curl_multi_info_read(c->multi, &left)) != NULL) {
        if (m->msg != CURLMSG_DONE) continue;
        char *priv = NULL;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &priv);
        TxcJob *j = (TxcJob *)priv;
        MQ_ASSERT(j != NULL && j->easy == m->easy_handle);
        /* 'm' is invalid once the handle is removed: read it first. */
        finish_job(c, j, m->data.result);
        n++;
    }
    return n;
}

/* Ends every running transfer with 'detail' (a multi handle failure or
 * shutdown). */
static void fail_running(TxcChecker *c, const char *detail) {
    while (c->running) {
        TxcJob *j = c->running;
        stop_job(c, j);
        report(c, j, TXC_ERROR, detail);
    }
}

/* Takes the jobs that fit in the free transfer slots off the queue (all
 * of it with 'all'); returns them as a list. */
static TxcJob *take_queued(TxcChecker *c, bool all) {
    size_t room = c->cfg.max_parallel > c->n_running ? c->cfg.max_parallel - c->n_running : 0;
    TxcJob *head = NULL;
    TxcJob **tail = &head;
    pthread_mutex_lock(&c->mu);
    while (c->q_head && (all || room > 0)) {
        TxcJob *j = c->q_head;
        c->q_head = j->next;
        j->next = NULL;
        *tail = j;
        tail = &j->next;
        if (room > 0) room--;
    }
    if (!c->q_head) c->q_tail = NULL;
    pthread_mutex_unlock(&c->mu);
    return head;
}

static bool is_stopping(TxcChecker *c) {
    pthread_mutex_lock(&c->mu);
    bool s = c->stopping;
    pthread_mutex_unlock(&c->mu);
    return s;
}

static void *checker_main(void *arg) {
    TxcChecker *c = arg;
    while (!is_stopping(c)) {
        TxcJob *start = take_queued(c, false);
        while (start) {
            TxcJob *j = start;
            start = j->next;
            j->next = NULL;
            if (start_job(c, j) != MQ_OK) report(c, j, TXC_ERROR, "out of memory");
        }
        int still = 0;
        CURLMcode mc = curl_multi_perform(c->multi, &still);
        size_t ended = reap(c);
        if (mc != CURLM_OK) {
            /* Only a broken multi handle or no memory gets here: fail what
             * runs (each check is asked again later) rather than spin. */
            MQ_WARN("check-back transfers failed: %s", curl_multi_strerror(mc));
            fail_running(c, "transport: multi handle failed");
        }
        /* A transfer that ended freed a slot: start the next at once. */
        if (ended > 0) continue;
        mc = curl_multi_poll(c->multi, NULL, 0, POLL_MAX_MS, NULL);
        if (mc != CURLM_OK) {
            MQ_WARN("check-back transfers failed: %s", curl_multi_strerror(mc));
            fail_running(c, "transport: multi handle failed");
            /* Without a working poll, do not spin. */
            struct timespec ts = {0, 100 * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    /* Shutting down: submits are refused from here, so the queue only
     * shrinks. */
    fail_running(c, "shutting down");
    TxcJob *rest = take_queued(c, true);
    while (rest) {
        TxcJob *j = rest;
        rest = j->next;
        report(c, j, TXC_ERROR, "shutting down");
    }
    return NULL;
}

/* ======================================================================
 * Public functions
 * ====================================================================== */

int txc_open(const TxcConfig *cfg, TxcChecker **out) {
    if (!cfg || !out || !cfg->done || cfg->connect_timeout_ms < 0 || cfg->total_timeout_ms < 0 ||
        cfg->connect_timeout_ms > INT32_MAX || cfg->total_timeout_ms > INT32_MAX)
        return MQ_ERR_INVAL;
    *out = NULL;
    if (!curl_ready()) return MQ_ERR_IO;
    int rc = MQ_ERR_NOMEM;
    TxcChecker *c = calloc(1, sizeof(*c));
    if (!c) return MQ_ERR_NOMEM;
    c->cfg = *cfg;
    if (c->cfg.connect_timeout_ms == 0) c->cfg.connect_timeout_ms = TXC_CONNECT_TIMEOUT_MS;
    if (c->cfg.total_timeout_ms == 0) c->cfg.total_timeout_ms = TXC_TOTAL_TIMEOUT_MS;
    if (c->cfg.max_parallel == 0) c->cfg.max_parallel = TXC_MAX_PARALLEL;
    if (c->cfg.max_queued == 0) c->cfg.max_queued = TXC_MAX_QUEUED;
    c->cfg.allowed_hosts = NULL;
    if (list_has_entries(cfg->allowed_hosts)) {
        c->allowed_hosts = strdup(cfg->allowed_hosts);
        if (!c->allowed_hosts) goto err_free;
    }
    c->multi = curl_multi_init();
    if (!c->multi) goto err_free_hosts;
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    struct curl_slist *h2 = h ? curl_slist_append(h, "Accept: application/json") : NULL;
    /* No "Expect: 100-continue" round trip for large bodies. */
    struct curl_slist *h3 = h2 ? curl_slist_append(h2, "Expect:") : NULL;
    if (!h3) {
        curl_slist_free_all(h);
        goto err_cleanup_multi;
    }
    c->headers = h3;
    int e = pthread_mutex_init(&c->mu, NULL);
    if (e != 0) goto err_free_headers;
    e = pthread_create(&c->thread, NULL, checker_main, c);
    if (e != 0) {
        MQ_ERROR("cannot start the transaction check-back thread: %s", strerror(e));
        rc = MQ_ERR_IO;
        goto err_destroy_mu;
    }
    *out = c;
    return MQ_OK;

err_destroy_mu:
    pthread_mutex_destroy(&c->mu);
err_free_headers:
    curl_slist_free_all(c->headers);
err_cleanup_multi:
    curl_multi_cleanup(c->multi);
err_free_hosts:
    free(c->allowed_hosts);
err_free:
    free(c);
    return rc;
}

int txc_submit(TxcChecker *c, const char *txn_id, const char *url, const char *json_body) {
    if (!c || !txn_id || !*txn_id || !url || !json_body) return MQ_ERR_INVAL;
    char why[96];
    char *norm = NULL;
    int rc = url_check(url, c->allowed_hosts, why, sizeof(why), &norm);
    if (rc == MQ_ERR_INVAL) MQ_WARN("transaction '%s': check url refused: %s", txn_id, why);
    if (rc != MQ_OK) return rc;
    size_t id_len = strlen(txn_id);
    size_t url_len = strlen(norm);
    size_t body_len = strlen(json_body);
    TxcJob *j = calloc(1, sizeof(*j) + id_len + url_len + body_len + 3);
    if (!j) {
        free(norm);
        return MQ_ERR_NOMEM;
    }
    char *p = j->txn_id;
    memcpy(p, txn_id, id_len + 1);
    p += id_len + 1;
    memcpy(p, norm, url_len + 1);
    j->url = p;
    p += url_len + 1;
    memcpy(p, json_body, body_len + 1);
    j->body = p;
    j->body_len = body_len;
    free(norm);

    pthread_mutex_lock(&c->mu);
    if (c->stopping) {
        rc = MQ_ERR_STATE;
    } else if (c->n_pending >= c->cfg.max_queued) {
        rc = MQ_ERR_FULL;
    } else {
        if (c->q_tail) {
            c->q_tail->next = j;
        } else {
            c->q_head = j;
        }
        c->q_tail = j;
        c->n_pending++;
        /* Under the mutex: txc_close cannot free the multi handle before
         * this returns.  It only writes a byte to a socket pair. */
        curl_multi_wakeup(c->multi);
    }
    pthread_mutex_unlock(&c->mu);
    if (rc != MQ_OK) free(j);
    return rc;
}

void txc_close(TxcChecker *c) {
    if (!c) return;
    MQ_ASSERT(!pthread_equal(pthread_self(), c->thread)); /* not from the callback */
    pthread_mutex_lock(&c->mu);
    MQ_ASSERT(!c->stopping);
    c->stopping = true;
    curl_multi_wakeup(c->multi);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->thread, NULL);
    MQ_ASSERT(c->n_pending == 0 && c->n_running == 0 && c->q_head == NULL);
    curl_multi_cleanup(c->multi);
    curl_slist_free_all(c->headers);
    pthread_mutex_destroy(&c->mu);
    free(c->allowed_hosts);
    free(c);
}

size_t txc_in_flight(TxcChecker *c) {
    if (!c) return 0;
    pthread_mutex_lock(&c->mu);
    size_t n = c->n_pending;
    pthread_mutex_unlock(&c->mu);
    return n;
}
