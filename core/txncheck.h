/*
 * txncheck.h - the transaction check-back client.  A transactional
 * producer's half message names a checkUrl; while its transaction stays
 * unresolved the broker POSTs a JSON body (built by the caller, core/txn)
 * there and reads {"state":"COMMIT"|"ROLLBACK"|"UNKNOWN"} back.  A checker
 * owns one thread that runs every transfer through libcurl's multi
 * interface, so no HTTP worker ever waits on a producer; callers only
 * queue work (txc_submit) and get each answer through a callback.
 *
 * This is the one core/ module that speaks HTTP and JSON itself (STYLE.md
 * keeps them in gateway/): the check-back is an outgoing client call with
 * no gateway request behind it.  Proxies follow libcurl's environment
 * variables (http_proxy, https_proxy, no_proxy), as for any libcurl user.
 * libcurl may raise SIGPIPE on a peer that closes a TLS connection:
 * the process must ignore it (gateway/main.c does).
 */
#ifndef PETREL_TXNCHECK_H
#define PETREL_TXNCHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mq.h"

#define TXC_CONNECT_TIMEOUT_MS 3000 /* TxcConfig.connect_timeout_ms when 0 */
#define TXC_TOTAL_TIMEOUT_MS 10000  /* TxcConfig.total_timeout_ms when 0 */
#define TXC_MAX_PARALLEL 32         /* TxcConfig.max_parallel when 0 */
#define TXC_MAX_QUEUED 1024         /* TxcConfig.max_queued when 0 */
#define TXC_ANSWER_MAX 65536        /* longest answer body read, bytes; longer is TXC_ERROR */

/* The outcome of one check-back. */
typedef enum TxcVerdict {
    TXC_COMMIT = 1,   /* 2xx with {"state":"COMMIT"} */
    TXC_ROLLBACK = 2, /* 2xx with {"state":"ROLLBACK"} */
    TXC_UNKNOWN = 3,  /* 2xx with {"state":"UNKNOWN"}: the producer does not know yet */
    TXC_ERROR = 4,    /* anything else; the transaction stays unresolved */
} TxcVerdict;

/* The answer callback.  Runs on the checker thread, exactly once per
 * check txc_submit accepted, after the transfer ended (or was abandoned
 * by txc_close).  'txn_id' is the id given to txc_submit; 'detail' is
 * short human text for logs: "COMMIT", "ROLLBACK", "UNKNOWN", "HTTP 500",
 * "timeout", "bad answer: not json", "answer too large", "transport:
 * <libcurl message>", "out of memory", "shutting down".  Both strings are
 * borrowed, valid until the callback returns.  The callback may call
 * txc_submit and txc_in_flight (not txc_close); it delays every other
 * transfer while it runs, so it must not block. */
typedef void (*TxcDoneFn)(void *arg, const char *txn_id, TxcVerdict v, const char *detail);

typedef struct TxcConfig {
    int64_t connect_timeout_ms; /* TCP + TLS connect limit; 0 = TXC_CONNECT_TIMEOUT_MS */
    int64_t total_timeout_ms;   /* whole-transfer limit; 0 = TXC_TOTAL_TIMEOUT_MS */
    size_t max_parallel;        /* transfers at once; 0 = TXC_MAX_PARALLEL.  More wait, FIFO */
    size_t max_queued;          /* checks accepted and not yet answered, running ones
                                 * included (= txc_in_flight); txc_submit beyond it is
                                 * MQ_ERR_FULL.  0 = TXC_MAX_QUEUED */
    const char *allowed_hosts;  /* comma-separated host allow-list checked by txc_submit
                                 * (see txc_url_allowed); NULL or "" = any host.  Copied */
    TxcDoneFn done;             /* answer callback, required */
    void *done_arg;             /* its first argument */
} TxcConfig;

typedef struct TxcChecker TxcChecker;

/* txc_open checks 'cfg', initialises libcurl once per process
 * (curl_global_init under pthread_once; never cleaned up) and starts the
 * checker thread.  Caller owns '*out' (txc_close).  MQ_ERR_INVAL (NULL
 * argument, no callback, negative timeout), MQ_ERR_NOMEM, MQ_ERR_IO
 * (libcurl init or thread creation failed; logged). */
int txc_open(const TxcConfig *cfg, TxcChecker **out);

/* txc_submit queues one check-back: POST 'json_body' to 'url' for
 * transaction 'txn_id'; the answer comes through the callback.  All three
 * strings are copied.  The url must pass txc_url_allowed with the
 * configured allow-list; the transfer goes to libcurl's normalised form of
 * the url that was checked.  Never blocks on I/O (it only wakes the
 * checker thread).  Any thread, the callback included.
 * Returns MQ_OK (the callback will run exactly once); MQ_ERR_INVAL (NULL
 * or empty argument, or a url the policy refuses: logged with the reason);
 * MQ_ERR_FULL (max_queued checks are waiting or running); MQ_ERR_NOMEM;
 * MQ_ERR_STATE once txc_close has begun.  On any error the callback does
 * not run.  Calls must not start after txc_close returned (the checker is
 * freed then): stop submitting first. */
int txc_submit(TxcChecker *c, const char *txn_id, const char *url, const char *json_body);

/* txc_close refuses further submits (MQ_ERR_STATE), abandons every running
 * and queued check, reporting each through the callback, on the checker
 * thread, as TXC_ERROR "shutting down" (answers that arrive from then on
 * are dropped: the caller checks again after a restart), joins the thread
 * and frees.  It returns without waiting for any producer.  Not from the
 * callback.  NULL ok. */
void txc_close(TxcChecker *c);

/* txc_in_flight is the number of checks accepted and not yet reported,
 * queued and running (metrics, tests).  Decremented after the callback
 * returned.  Any thread. */
size_t txc_in_flight(TxcChecker *c);

/* txc_url_allowed is the checkUrl policy: 'url' must parse (libcurl's URL
 * API), use http or https, name a host, carry no user name or password,
 * and, when 'allowed_hosts' is a non-empty comma-separated list, its host
 * must equal one entry, ASCII case-insensitively (blanks around entries
 * ignored; an IPv6 literal matches with or without its brackets; the host
 * compared is libcurl's normalised one, so "0x7f.1" is "127.0.0.1").  On
 * false it writes a short lowercase reason into 'why' ('cap' bytes, may be
 * NULL/0).  Any thread; txc_open need not have run. */
bool txc_url_allowed(const char *url, const char *allowed_hosts, char *why, size_t cap);

#endif
