/*
 * config.c - the table of known configuration keys and its parsers: see
 * config.h.  Every default is text parsed by the same code as a user's
 * value, so the table, the help and the behaviour cannot disagree.
 */
#define _GNU_SOURCE
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "consumequeue.h"
#include "delay.h"
#include "mq.h"

#define FIELD(f) offsetof(Config, f)
#define STR(f, name_, def_, help_)                                                       \
    {.name = name_, .type = CONF_STRING, .offset = FIELD(f),                             \
     .cap = sizeof(((Config *)0)->f), .def = def_, .help = help_}
#define INT(f, name_, lo, hi, def_, help_)                                               \
    {.name = name_, .type = CONF_INT, .offset = FIELD(f), .min = lo, .max = hi,          \
     .def = def_, .help = help_}
#define SIZE(f, name_, lo, hi, def_, help_)                                              \
    {.name = name_, .type = CONF_SIZE, .offset = FIELD(f), .min = lo, .max = hi,         \
     .def = def_, .help = help_}
#define BOOL(f, name_, def_, help_) \
    {.name = name_, .type = CONF_BOOL, .offset = FIELD(f), .def = def_, .help = help_}
#define ENUM(f, name_, choices_, def_, help_)                                            \
    {.name = name_, .type = CONF_ENUM, .offset = FIELD(f), .choices = choices_,          \
     .def = def_, .help = help_}

static bool valid_delete_when(const char *s);
static bool valid_delay_levels(const char *s);

#define U32_MAX_ ((int64_t)UINT32_MAX)
#define GIB ((int64_t)1 << 30)

static const ConfKey keys[] = {
    STR(listen, "listen", NULL,
        "HOST:PORT to serve HTTP on (IPv4); port 0 picks a free port"),
    STR(data, "data", "./data", "data directory: commit log, queues, index, meta.db"),
    STR(broker_cluster_name, "brokerClusterName", "DefaultCluster",
        "cluster this broker group belongs to"),
    STR(broker_name, "brokerName", "broker-a", "broker group name (master and its slaves)"),
    INT(broker_id, "brokerId", 0, 1024, "0", "0 = master, > 0 = slave"),
    ENUM(broker_role, "brokerRole", "ASYNC_MASTER|SYNC_MASTER|SLAVE", "ASYNC_MASTER",
         "replication role"),
    STR(namesrv_addr, "namesrvAddr", "", "name servers, 'host:port;host:port'"),
    ENUM(flush_disk_type, "flushDiskType", "ASYNC_FLUSH|SYNC_FLUSH", "ASYNC_FLUSH",
         "answer producers before (async) or after (sync) fdatasync"),
    SIZE(segment_size, "mappedFileSizeCommitLog", 4096, 64 * GIB, "1073741824",
         "commit log segment size, bytes (k/m/g suffixes accepted)"),
    SIZE(cq_file_size, "mappedFileSizeConsumeQueue", CQ_ENTRY_SIZE,
         (int64_t)CQ_ENTRY_SIZE * U32_MAX_, "6000000",
         "consume queue file size, bytes, a multiple of 20"),
    INT(max_hash_slot_num, "maxHashSlotNum", 1, U32_MAX_ / 8, "5000000",
        "hash slots per index file"),
    INT(max_index_num, "maxIndexNum", 1, U32_MAX_ / 32, "20000000", "entries per index file"),
    INT(flush_interval_ms, "flushIntervalCommitLog", 1, U32_MAX_, "500",
        "async flush interval of the commit log, ms"),
    INT(flush_cq_interval_ms, "flushIntervalConsumeQueue", 1, U32_MAX_, "1000",
        "flush interval of consume queues and index, ms"),
    INT(flush_index_interval_ms, "flushIntervalIndex", 1, U32_MAX_, "10000",
        "flush interval of the key index, ms (recovery re-indexes from the last)"),
    INT(sync_flush_timeout_ms, "syncFlushTimeout", 1, U32_MAX_, "5000",
        "SYNC_FLUSH: longest wait for fdatasync, ms"),
    INT(file_reserved_hours, "fileReservedTime", 0, 24 * 365 * 100, "72",
        "keep commit log segments this many hours"),
    {.name = "deleteWhen", .type = CONF_STRING, .offset = FIELD(delete_when),
     .cap = sizeof(((Config *)0)->delete_when), .check = valid_delete_when,
     .expect = "hours 0-23 like '04' or '04;16'", .def = "04",
     .help = "hours at which expired files are deleted, '04' or '04;16'"},
    INT(disk_max_used_ratio, "diskMaxUsedSpaceRatio", 1, 100, "75",
        "clean expired files early above this disk use, percent"),
    INT(disk_force_clean_ratio, "diskSpaceCleanForciblyRatio", 1, 100, "85",
        "delete oldest files even if not expired above this, percent"),
    INT(disk_warning_ratio, "diskSpaceWarningLevelRatio", 1, 100, "90",
        "refuse appends above this disk use, percent"),
    INT(clean_interval_ms, "cleanResourceInterval", 1, U32_MAX_, "10000",
        "how often retention runs, ms"),
    SIZE(max_message_size, "maxMessageSize", 1, GIB, "4194304",
         "largest message body, bytes"),
    BOOL(auto_create_topic, "autoCreateTopicEnable", "true",
         "create unknown topics on first produce"),
    INT(default_topic_queue_nums, "defaultTopicQueueNums", 1, 1024, "8",
        "queues of a topic created without a count"),
    INT(offset_flush_interval_ms, "offsetFlushInterval", 0, U32_MAX_, "5000",
        "consumer offsets and receive state are persisted in batches this often, ms "
        "(0 = at exit)"),
    BOOL(auto_create_group, "autoCreateSubscriptionGroup", "true",
         "create unknown consumer groups on first receive, pull or heartbeat"),
    {.name = "messageDelayLevel", .type = CONF_STRING, .offset = FIELD(message_delay_level),
     .cap = sizeof(((Config *)0)->message_delay_level), .check = valid_delay_levels,
     .expect = "durations like '1s 5s 10s 30s 1m' (units ms, s, m, h, d)",
     .def = DELAY_DEFAULT_SPEC,
     .help = "delay levels; retry n waits level 3+n (the retry ladder)"},
    INT(timer_max_delay_sec, "timerMaxDelaySec", 1, 365 * 24 * 3600, "3456000",
        "deliverAt/delayMs: furthest a message may be scheduled ahead, s (40 days)"),
    INT(client_channel_expired_ms, "clientChannelExpiredMs", 1, U32_MAX_, "120000",
        "a consumer silent this long is dropped and its queues reassigned, ms"),
    INT(rebalance_lock_max_live_ms, "rebalanceLockMaxLiveTime", 1, U32_MAX_, "60000",
        "lease of an orderly queue lock, ms"),
    INT(pop_inflight_threshold, "popInflightMessageThreshold", 1, 1000000, "10000",
        "receive: most messages in flight per queue and group"),
    INT(revive_interval_ms, "reviveInterval", 1, 60000, "200",
        "receive: how often ended invisibility is noticed, ms"),
    INT(suspend_queue_ms, "suspendCurrentQueueTimeMillis", 0, 43200000, "1000",
        "orderly group: a nacked message is redelivered after this, ms"),
    INT(sse_keepalive_ms, "sseKeepAliveInterval", 100, 3600000, "15000",
        "stream: a comment line is sent this often when idle, ms"),
    INT(transaction_timeout_ms, "transactionTimeOut", 0, U32_MAX_, "6000",
        "a half message unresolved this long is checked back, ms"),
    INT(transaction_check_interval_ms, "transactionCheckInterval", 1, U32_MAX_, "60000",
        "then checked again this often, ms"),
    INT(transaction_check_max, "transactionCheckMax", 1, 1000000, "15",
        "checks at most; still unresolved after them: rolled back"),
    INT(transaction_check_connect_timeout_ms, "transactionCheckConnectTimeout", 1, 600000,
        "3000", "check-back: longest wait for the connection, ms"),
    INT(transaction_check_request_timeout_ms, "transactionCheckRequestTimeout", 1, 3600000,
        "10000", "check-back: longest wait for the whole answer, ms"),
    STR(transaction_check_allowed_hosts, "transactionCheckAllowedHosts", "",
        "check-back URLs may only name these hosts (comma-separated; empty: any)"),
    INT(transaction_keep_resolved_ms, "transactionResolvedKeepTime", 0, INT64_MAX / 2,
        "86400000", "committed and rolled-back transactions are remembered this long, ms"),
    INT(http_threads, "httpThreads", 1, 64, "2", "HTTP worker threads (epoll, one pool)"),
    INT(http_max_connections, "httpMaxConnections", 1, 65536, "4096",
        "concurrent HTTP connections; more wait in the listen backlog"),
    INT(http_connection_timeout_s, "httpConnectionTimeout", 1, 86400, "60",
        "close a connection idle (or a client stalled mid-request) this long, s"),
    SIZE(http_connection_memory, "httpConnectionMemory", 8192, 1 << 20, "16384",
         "memory of one HTTP connection (request headers, I/O buffers), bytes"),
    INT(http_max_headers, "httpMaxHeaders", 1, 10000, "100",
        "more request headers than this get 431"),
    INT(idempotency_window_ms, "idempotencyWindow", 1000, 7 * 24 * 3600 * 1000LL, "600000",
        "Idempotency-Key: a produce result is replayed this long, ms"),
    INT(idempotency_max_keys, "idempotencyMaxKeys", 1, 10000000, "100000",
        "Idempotency-Key: most results remembered (the oldest go first)"),
    STR(web_root, "webRoot", NULL, "directory of the console's static files"),
    ENUM(log_level, "logLevel", "error|warn|info|debug", "info", "log verbosity"),
};

#define N_KEYS (sizeof(keys) / sizeof(keys[0]))

_Static_assert(MQ_LOG_ERROR == 0 && MQ_LOG_DEBUG == 3, "logLevel choices follow MQ_LOG_*");

const ConfKey *conf_keys(size_t *count) {
    *count = N_KEYS;
    return keys;
}

const ConfKey *conf_key_find(const char *name) {
    for (size_t i = 0; i < N_KEYS; i++) {
        if (strcmp(keys[i].name, name) == 0) return &keys[i];
    }
    return NULL;
}

static int fail(char *err, size_t cap, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(char *err, size_t cap, int rc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (cap > 0) vsnprintf(err, cap, fmt, ap);
    va_end(ap);
    return rc;
}

/* ---- value parsers -------------------------------------------------------*/

static bool parse_int(const char *s, int64_t *out) {
    if (!*s || isspace((unsigned char)*s)) return false;
    errno = 0;
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0') return false;
    *out = v;
    return true;
}

/* A byte count with an optional k/m/g (1024-based) suffix. */
static bool parse_size(const char *s, int64_t *out) {
    if (!isdigit((unsigned char)*s)) return false;
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0) return false;
    unsigned shift = 0;
    switch (tolower((unsigned char)*end)) {
    case '\0': break;
    case 'k': shift = 10; end++; break;
    case 'm': shift = 20; end++; break;
    case 'g': shift = 30; end++; break;
    default: return false;
    }
    if (*end != '\0' || v > ((unsigned long long)INT64_MAX >> shift)) return false;
    *out = (int64_t)(v << shift);
    return true;
}

static int choice_index(const char *choices, const char *s) {
    size_t len = strlen(s);
    int i = 0;
    for (const char *p = choices;; i++) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        if (n == len && strncmp(p, s, n) == 0) return i;
        if (!bar) return -1;
        p = bar + 1;
    }
}

/* Writes choice 'idx' of 'choices' into 'buf'. */
static const char *choice_name(const char *choices, int idx, char *buf, size_t cap) {
    const char *p = choices;
    for (int i = 0; i < idx && p; i++) {
        p = strchr(p, '|');
        if (p) p++;
    }
    if (!p) p = "?";
    size_t n = strcspn(p, "|");
    if (n >= cap) n = cap - 1;
    memcpy(buf, p, n);
    buf[n] = '\0';
    return buf;
}

/* deleteWhen: one or more hours 0..23 separated by ';'. */
static bool valid_delay_levels(const char *s) {
    int64_t levels[DELAY_LEVELS_MAX];
    size_t n = 0;
    return delay_levels_parse(s, levels, DELAY_LEVELS_MAX, &n) == MQ_OK;
}

static bool valid_delete_when(const char *s) {
    for (;;) {
        int digits = 0;
        int hour = 0;
        while (isdigit((unsigned char)*s) && digits < 3) {
            hour = hour * 10 + (*s++ - '0');
            digits++;
        }
        if (digits == 0 || digits > 2 || hour > 23) return false;
        if (*s == '\0') return true;
        if (*s++ != ';') return false;
    }
}

/* ---- setting and formatting ----------------------------------------------*/

static int set_key(Config *c, const ConfKey *k, const char *value, char *err, size_t cap) {
    char *field = (char *)c + k->offset;
    int64_t v = 0;
    switch (k->type) {
    case CONF_INT:
    case CONF_SIZE: {
        bool ok = k->type == CONF_INT ? parse_int(value, &v) : parse_size(value, &v);
        if (!ok) {
            return fail(err, cap, MQ_ERR_INVAL, "bad value '%s' for '%s': expected %s", value,
                        k->name, k->type == CONF_INT ? "an integer" : "a byte count");
        }
        if (v < k->min || v > k->max) {
            return fail(err, cap, MQ_ERR_INVAL,
                        "bad value '%s' for '%s': must be between %" PRId64 " and %" PRId64,
                        value, k->name, k->min, k->max);
        }
        if (k->type == CONF_INT) {
            memcpy(field, &v, sizeof(int64_t));
        } else {
            uint64_t u = (uint64_t)v;
            memcpy(field, &u, sizeof(uint64_t));
        }
        return MQ_OK;
    }
    case CONF_BOOL: {
        bool b;
        if (strcmp(value, "true") == 0 || strcmp(value, "1") == 0) {
            b = true;
        } else if (strcmp(value, "false") == 0 || strcmp(value, "0") == 0) {
            b = false;
        } else {
            return fail(err, cap, MQ_ERR_INVAL, "bad value '%s' for '%s': expected true or false",
                        value, k->name);
        }
        memcpy(field, &b, sizeof(bool));
        return MQ_OK;
    }
    case CONF_STRING: {
        size_t len = strlen(value);
        if (len >= k->cap) {
            return fail(err, cap, MQ_ERR_INVAL, "value for '%s' is too long (%zu bytes, max %zu)",
                        k->name, len, k->cap - 1);
        }
        if (k->check && !k->check(value)) {
            return fail(err, cap, MQ_ERR_INVAL, "bad value '%s' for '%s': expected %s", value,
                        k->name, k->expect);
        }
        memcpy(field, value, len + 1);
        return MQ_OK;
    }
    case CONF_ENUM: {
        int idx = choice_index(k->choices, value);
        if (idx < 0) {
            return fail(err, cap, MQ_ERR_INVAL, "bad value '%s' for '%s': expected one of %s",
                        value, k->name, k->choices);
        }
        memcpy(field, &idx, sizeof(int));
        return MQ_OK;
    }
    }
    return fail(err, cap, MQ_ERR_INVAL, "key '%s' has no type", k->name);
}

int conf_set(Config *c, const char *key, const char *value, char *err, size_t cap) {
    const ConfKey *k = conf_key_find(key);
    if (!k) return fail(err, cap, MQ_ERR_NOTFOUND, "unknown config key '%s'", key);
    return set_key(c, k, value, err, cap);
}

const char *conf_format(const Config *c, const ConfKey *k, char *buf, size_t cap) {
    const char *field = (const char *)c + k->offset;
    int64_t v;
    uint64_t u;
    bool b;
    int idx;
    switch (k->type) {
    case CONF_INT:
        memcpy(&v, field, sizeof(v));
        snprintf(buf, cap, "%" PRId64, v);
        break;
    case CONF_SIZE:
        memcpy(&u, field, sizeof(u));
        snprintf(buf, cap, "%" PRIu64, u);
        break;
    case CONF_BOOL:
        memcpy(&b, field, sizeof(b));
        snprintf(buf, cap, "%s", b ? "true" : "false");
        break;
    case CONF_STRING:
        snprintf(buf, cap, "%s", field);
        break;
    case CONF_ENUM:
        memcpy(&idx, field, sizeof(idx));
        choice_name(k->choices, idx, buf, cap);
        break;
    }
    return buf;
}

/* <directory of the running binary>/../web, resolved when it exists. */
static void default_web_root(char *out, size_t cap) {
    char exe[CONF_PATH_MAX - 16];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0) {
        snprintf(out, cap, "web");
        return;
    }
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash) *slash = '\0';
    char joined[CONF_PATH_MAX];
    snprintf(joined, sizeof(joined), "%s/../web", exe);
    char resolved[PATH_MAX];
    if (realpath(joined, resolved)) {
        snprintf(out, cap, "%s", resolved);
    } else {
        snprintf(out, cap, "%s", joined);
    }
}

void conf_defaults(Config *c, ConfMode mode) {
    memset(c, 0, sizeof(*c));
    char err[256];
    for (size_t i = 0; i < N_KEYS; i++) {
        if (!keys[i].def) continue;
        int rc = set_key(c, &keys[i], keys[i].def, err, sizeof(err));
        MQ_ASSERT(rc == MQ_OK);
    }
    c->mode = mode;
    snprintf(c->listen, sizeof(c->listen), "%s",
             mode == CONF_MODE_BROKER ? "127.0.0.1:10911" : "127.0.0.1:8080");
    default_web_root(c->web_root, sizeof(c->web_root));
}

/* ---- file and command line -----------------------------------------------*/

static char *trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1])) s[--n] = '\0';
    return s;
}

int conf_load_file(Config *c, const char *path, char *err, size_t cap) {
    FILE *f = fopen(path, "r");
    if (!f) {
        return fail(err, cap, MQ_ERR_IO, "cannot read config file '%s': %s", path,
                    strerror(errno));
    }
    char line[CONF_PATH_MAX + 256];
    char why[512];
    int lineno = 0;
    int rc = MQ_OK;
    while (fgets(line, sizeof(line), f)) {
        lineno++;
        size_t len = strlen(line);
        if (len == sizeof(line) - 1 && line[len - 1] != '\n' && !feof(f)) {
            rc = fail(err, cap, MQ_ERR_INVAL, "%s:%d: line too long", path, lineno);
            break;
        }
        char *s = trim(line);
        if (*s == '\0' || *s == '#') continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            rc = fail(err, cap, MQ_ERR_INVAL, "%s:%d: expected key=value, got '%s'", path, lineno,
                      s);
            break;
        }
        *eq = '\0';
        char *key = trim(s);
        char *value = trim(eq + 1);
        rc = conf_set(c, key, value, why, sizeof(why));
        if (rc != MQ_OK) {
            fail(err, cap, rc, "%s:%d: %s", path, lineno, why);
            break;
        }
    }
    if (rc == MQ_OK && ferror(f)) {
        rc = fail(err, cap, MQ_ERR_IO, "cannot read config file '%s'", path);
    }
    fclose(f);
    return rc;
}

/* Flags that take their value as the next word (or after '='). */
static const char *const word_flags[][2] = {
    {"--listen", "listen"},
    {"--data", "data"},
    {"--port-file", NULL},
};

static int set_flag(Config *c, const char *key, const char *value, char *err, size_t cap) {
    if (!key) {
        size_t len = strlen(value);
        if (len == 0 || len >= sizeof(c->port_file)) {
            return fail(err, cap, MQ_ERR_INVAL, "bad value for '--port-file'");
        }
        memcpy(c->port_file, value, len + 1);
        return MQ_OK;
    }
    return conf_set(c, key, value, err, cap);
}

int conf_parse_args(Config *c, int argc, char **argv, char *err, size_t cap) {
    /* Pass 1: the config file, so that every flag wins over it. */
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "-c") != 0) continue;
        if (i + 1 >= argc) return fail(err, cap, MQ_ERR_INVAL, "option '-c' needs a file");
        int rc = conf_load_file(c, argv[i + 1], err, cap);
        if (rc != MQ_OK) return rc;
        i++;
    }
    /* Pass 2: flags, in order; a later one wins over an earlier one. */
    char why[512];
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-c") == 0) {
            i++;
            continue;
        }
        bool handled = false;
        for (size_t w = 0; w < sizeof(word_flags) / sizeof(word_flags[0]); w++) {
            const char *flag = word_flags[w][0];
            size_t fl = strlen(flag);
            if (strncmp(a, flag, fl) != 0 || (a[fl] != '\0' && a[fl] != '=')) continue;
            const char *value = a[fl] == '=' ? a + fl + 1 : NULL;
            if (!value) {
                if (i + 1 >= argc) {
                    return fail(err, cap, MQ_ERR_INVAL, "option '%s' needs a value", flag);
                }
                value = argv[++i];
            }
            int rc = set_flag(c, word_flags[w][1], value, why, sizeof(why));
            if (rc != MQ_OK) return fail(err, cap, rc, "%s (option '%s')", why, flag);
            handled = true;
            break;
        }
        if (handled) continue;
        if (strncmp(a, "--", 2) != 0 || !strchr(a, '=')) {
            return fail(err, cap, MQ_ERR_INVAL,
                        "unexpected argument '%s' (options are --key=value)", a);
        }
        char key[128];
        size_t kl = (size_t)(strchr(a, '=') - (a + 2));
        if (kl == 0 || kl >= sizeof(key)) {
            return fail(err, cap, MQ_ERR_NOTFOUND, "unknown config key in '%s'", a);
        }
        memcpy(key, a + 2, kl);
        key[kl] = '\0';
        int rc = conf_set(c, key, a + 2 + kl + 1, why, sizeof(why));
        if (rc != MQ_OK) return fail(err, cap, rc, "%s (option '%s')", why, a);
    }
    return conf_validate(c, err, cap);
}

/* "A.B.C.D:PORT" (or "localhost:PORT") into 'ip' (network order) and 'port'. */
static bool parse_listen(const char *s, uint8_t ip[4], uint16_t *port) {
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s) return false;
    int64_t p;
    if (!parse_int(colon + 1, &p) || p < 0 || p > 65535) return false;
    size_t hl = (size_t)(colon - s);
    if (hl == 9 && strncmp(s, "localhost", 9) == 0) {
        ip[0] = 127, ip[1] = 0, ip[2] = 0, ip[3] = 1;
        *port = (uint16_t)p;
        return true;
    }
    const char *q = s;
    for (int i = 0; i < 4; i++) {
        int digits = 0;
        unsigned v = 0;
        while (q < colon && isdigit((unsigned char)*q) && digits < 4) {
            v = v * 10 + (unsigned)(*q++ - '0');
            digits++;
        }
        if (digits == 0 || digits > 3 || v > 255) return false;
        ip[i] = (uint8_t)v;
        if (i < 3 && (q >= colon || *q++ != '.')) return false;
    }
    if (q != colon) return false;
    *port = (uint16_t)p;
    return true;
}

int conf_validate(Config *c, char *err, size_t cap) {
    if (!parse_listen(c->listen, c->listen_ip, &c->listen_port)) {
        return fail(err, cap, MQ_ERR_INVAL,
                    "bad value '%s' for 'listen': expected IPv4:PORT like 127.0.0.1:8080",
                    c->listen);
    }
    if (c->data[0] == '\0') return fail(err, cap, MQ_ERR_INVAL, "'data' must not be empty");
    if (c->cq_file_size % CQ_ENTRY_SIZE != 0) {
        return fail(err, cap, MQ_ERR_INVAL,
                    "bad value '%" PRIu64 "' for 'mappedFileSizeConsumeQueue': "
                    "must be a multiple of %d",
                    c->cq_file_size, CQ_ENTRY_SIZE);
    }
    if (c->segment_size > SIZE_MAX) {
        return fail(err, cap, MQ_ERR_INVAL, "'mappedFileSizeCommitLog' is too large");
    }
    return MQ_OK;
}

void conf_print_keys(FILE *out, ConfMode mode) {
    Config d;
    conf_defaults(&d, mode);
    char val[CONF_PATH_MAX];
    for (size_t i = 0; i < N_KEYS; i++) {
        const ConfKey *k = &keys[i];
        conf_format(&d, k, val, sizeof(val));
        char left[CONF_PATH_MAX + 64];
        snprintf(left, sizeof(left), "--%s=%s", k->name, val);
        fprintf(out, "  %-44s %s", left, k->help);
        if (k->type == CONF_ENUM) fprintf(out, " (%s)", k->choices);
        fputc('\n', out);
    }
}

const char *conf_broker_role_name(int role) {
    static const char *const names[] = {"ASYNC_MASTER", "SYNC_MASTER", "SLAVE"};
    return role >= 0 && role < 3 ? names[role] : "UNKNOWN";
}

const char *conf_flush_disk_type_name(int type) {
    return type == CONF_SYNC_FLUSH ? "SYNC_FLUSH" : "ASYNC_FLUSH";
}

void conf_store_config(const Config *c, StoreConfig *out) {
    store_config_defaults(out, c->data);
    out->data_dir = c->data;
    out->segment_size = (size_t)c->segment_size;
    out->cq_file_entries = (uint32_t)(c->cq_file_size / CQ_ENTRY_SIZE);
    out->index_slots = (uint32_t)c->max_hash_slot_num;
    out->index_entries = (uint32_t)c->max_index_num;
    out->flush_interval_ms = (uint32_t)c->flush_interval_ms;
    out->flush_cq_interval_ms = (uint32_t)c->flush_cq_interval_ms;
    out->flush_index_interval_ms = (uint32_t)c->flush_index_interval_ms;
    out->sync_flush_timeout_ms = (uint32_t)c->sync_flush_timeout_ms;
    out->sync_flush = c->flush_disk_type == CONF_SYNC_FLUSH;
    out->file_reserved_hours = (uint32_t)c->file_reserved_hours;
    snprintf(out->delete_when, sizeof(out->delete_when), "%s", c->delete_when);
    out->disk_max_used_ratio = (uint32_t)c->disk_max_used_ratio;
    out->disk_force_clean_ratio = (uint32_t)c->disk_force_clean_ratio;
    out->disk_refuse_ratio = (uint32_t)c->disk_warning_ratio;
    out->clean_interval_ms = (uint32_t)c->clean_interval_ms;
    memcpy(out->store_host, c->listen_ip, 4);
    mq_put_u32(out->store_host + 4, c->listen_port);
}
