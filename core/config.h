/*
 * config.h - RocketMQ-style configuration: one table of known keys (name,
 * type, default, one-line help) filled from a `key=value` file (-c FILE)
 * and then from `--key=value` flags, which win.  Also the short forms
 * `--listen HOST:PORT`, `--data DIR` and the flag `--port-file PATH`.
 *
 * A Config is a plain struct of fixed-size fields: copy it by value.  It
 * knows nothing of HTTP; conf_store_config() derives the store's settings.
 */
#ifndef PETREL_CONFIG_H
#define PETREL_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "store.h"

#define CONF_STR_MAX 256   /* longest name-like value, bytes with the NUL */
#define CONF_PATH_MAX 4096 /* longest path value, bytes with the NUL */

/* Which process reads the config: only the listen default differs. */
typedef enum ConfMode {
    CONF_MODE_STANDALONE, /* listen 127.0.0.1:8080 */
    CONF_MODE_BROKER,     /* listen 127.0.0.1:10911 */
} ConfMode;

/* brokerRole values, in the order of the key's choices. */
enum { CONF_ASYNC_MASTER = 0, CONF_SYNC_MASTER = 1, CONF_SLAVE = 2 };
/* flushDiskType values. */
enum { CONF_ASYNC_FLUSH = 0, CONF_SYNC_FLUSH = 1 };

typedef struct Config {
    ConfMode mode;                         /* set by conf_defaults, not a key */
    char listen[CONF_STR_MAX];             /* listen: "HOST:PORT" as given */
    uint8_t listen_ip[4];                  /* parsed IPv4, network order */
    uint16_t listen_port;                  /* parsed port; 0 = any free port */
    char data[CONF_PATH_MAX];              /* data: data directory */
    char port_file[CONF_PATH_MAX];         /* --port-file; "" = none */
    char broker_cluster_name[CONF_STR_MAX];
    char broker_name[CONF_STR_MAX];
    int64_t broker_id;                     /* 0 = master, > 0 = slave */
    int broker_role;                       /* CONF_ASYNC_MASTER .. CONF_SLAVE */
    char namesrv_addr[CONF_PATH_MAX];      /* "host:port;host:port"; "" = none */
    int flush_disk_type;                   /* CONF_ASYNC_FLUSH or CONF_SYNC_FLUSH */
    uint64_t segment_size;                 /* mappedFileSizeCommitLog, bytes */
    uint64_t cq_file_size;                 /* mappedFileSizeConsumeQueue, bytes */
    int64_t max_hash_slot_num;             /* index hash slots per file */
    int64_t max_index_num;                 /* index entries per file */
    int64_t flush_interval_ms;             /* flushIntervalCommitLog */
    int64_t flush_cq_interval_ms;          /* flushIntervalConsumeQueue */
    int64_t flush_index_interval_ms;       /* flushIntervalIndex */
    int64_t sync_flush_timeout_ms;         /* syncFlushTimeout */
    int64_t file_reserved_hours;           /* fileReservedTime */
    char delete_when[64];                  /* deleteWhen: "04" or "04;16" */
    int64_t disk_max_used_ratio;           /* percent */
    int64_t disk_force_clean_ratio;        /* percent */
    int64_t disk_warning_ratio;            /* percent; appends refused above */
    int64_t clean_interval_ms;             /* cleanResourceInterval */
    uint64_t max_message_size;             /* body bytes */
    bool auto_create_topic;                /* autoCreateTopicEnable */
    int64_t default_topic_queue_nums;
    int64_t offset_flush_interval_ms;      /* offsetFlushInterval; 0 = only at close */
    bool auto_create_group;                /* autoCreateSubscriptionGroup */
    char message_delay_level[CONF_STR_MAX]; /* messageDelayLevel (delay.h) */
    int64_t timer_max_delay_sec;           /* timerMaxDelaySec: deliverAt/delayMs limit, s */
    int64_t client_channel_expired_ms;     /* consumer heartbeat expiry */
    int64_t rebalance_lock_max_live_ms;    /* orderly lock lease */
    int64_t pop_inflight_threshold;        /* per queue and group */
    int64_t revive_interval_ms;            /* receive keeper period */
    int64_t suspend_queue_ms;              /* orderly nack default delay */
    int64_t sse_keepalive_ms;              /* stream keep-alive comments */
    int64_t transaction_timeout_ms;        /* transactionTimeOut: first check-back */
    int64_t transaction_check_interval_ms; /* transactionCheckInterval */
    int64_t transaction_check_max;         /* transactionCheckMax, then rollback */
    int64_t transaction_check_connect_timeout_ms;
    int64_t transaction_check_request_timeout_ms;
    char transaction_check_allowed_hosts[CONF_STR_MAX]; /* "" = any */
    int64_t transaction_keep_resolved_ms;  /* resolved transactions kept this long */
    int64_t http_threads;                  /* MHD worker threads */
    int64_t http_max_connections;
    int64_t http_connection_timeout_s;     /* idle or stalled connection, s */
    int64_t http_max_headers;              /* more: 431 */
    uint64_t http_connection_memory;       /* MHD per-connection pool, bytes */
    int64_t idempotency_window_ms;         /* Idempotency-Key replay window */
    int64_t idempotency_max_keys;          /* results remembered at most */
    char web_root[CONF_PATH_MAX];          /* console files */
    int log_level;                         /* MQ_LOG_ERROR .. MQ_LOG_DEBUG */
} Config;

typedef enum ConfType { CONF_INT, CONF_SIZE, CONF_BOOL, CONF_STRING, CONF_ENUM } ConfType;

/* One known key.  The table is static and shared by every Config. */
typedef struct ConfKey {
    const char *name;    /* RocketMQ's name where RocketMQ has the setting */
    ConfType type;
    size_t offset;       /* offsetof(Config, field) */
    size_t cap;          /* CONF_STRING: field size in bytes */
    int64_t min;         /* CONF_INT / CONF_SIZE: inclusive bounds */
    int64_t max;
    const char *choices; /* CONF_ENUM: "A|B|C", value = index */
    bool (*check)(const char *value); /* CONF_STRING: extra syntax check, or NULL */
    const char *expect;  /* what 'check' wants, for the error message */
    const char *def;     /* default as text; NULL = computed (listen, webRoot) */
    const char *help;    /* one line */
} ConfKey;

/* conf_keys returns the table of known keys (borrowed, static) and its
 * length in '*count'. */
const ConfKey *conf_keys(size_t *count);

/* conf_key_find returns the key named 'name' (case-sensitive), or NULL. */
const ConfKey *conf_key_find(const char *name);

/* conf_defaults fills 'c' with every key's default for 'mode'.  webRoot
 * becomes <directory of the running binary>/../web. */
void conf_defaults(Config *c, ConfMode mode);

/* conf_set parses 'value' for the key 'key' into 'c'.  MQ_OK, or
 * MQ_ERR_NOTFOUND (unknown key) / MQ_ERR_INVAL (bad value) with a message
 * naming the key in 'err' ('cap' bytes, always NUL-terminated). */
int conf_set(Config *c, const char *key, const char *value, char *err, size_t cap);

/* conf_load_file applies the `key=value` lines of 'path': '#' starts a
 * comment line, blank lines are skipped, whitespace around key and value
 * is trimmed.  Errors as conf_set (plus MQ_ERR_IO), the message naming
 * the file and line. */
int conf_load_file(Config *c, const char *path, char *err, size_t cap);

/* conf_parse_args applies the options 'argv[0..argc)' (the words after the
 * subcommand): first the file of `-c FILE`, then every flag in order
 * (`--key=value`, `--listen[=| ]HOST:PORT`, `--data[=| ]DIR`,
 * `--port-file[=| ]PATH`), then conf_validate.  MQ_ERR_INVAL /
 * MQ_ERR_NOTFOUND / MQ_ERR_IO with a message in 'err'. */
int conf_parse_args(Config *c, int argc, char **argv, char *err, size_t cap);

/* conf_validate checks what no single key can: listen parses as
 * IPv4:PORT (filling listen_ip/listen_port), mappedFileSizeConsumeQueue
 * is a multiple of 20, data is not empty. */
int conf_validate(Config *c, char *err, size_t cap);

/* conf_format writes the value of 'k' in 'c' as text into 'buf' (what
 * conf_set would accept).  Returns 'buf'. */
const char *conf_format(const Config *c, const ConfKey *k, char *buf, size_t cap);

/* conf_print_keys prints one line per key (--name=default, then help) to
 * 'out', with the defaults of 'mode'. */
void conf_print_keys(FILE *out, ConfMode mode);

/* Names of enum values, for JSON and logs. */
const char *conf_broker_role_name(int role);
const char *conf_flush_disk_type_name(int type);

/* conf_store_config fills 'out' from 'c' (store_config_defaults first).
 * 'out->data_dir' borrows 'c->data'; store_host is listen_ip + listen_port,
 * so set listen_port to the bound port before calling it. */
void conf_store_config(const Config *c, StoreConfig *out);

#endif
