/*
 * admin.c - `petrel admin`: mqadmin-style commands over the broker's REST
 * API (openapi.yaml).  Each run parses its flags, sends one request
 * (consumeMessage: receive, then ack) with libcurl (easy interface,
 * connect 3 s, total 30 s), parses the answer with jansson and prints it
 * as an aligned table or key: value lines, or with --json the answer
 * unchanged (topicRoute, consumeMessage: the part they show).  Owns
 * nothing beyond one run.
 * docs/admin.md lists the commands, flags and exit statuses.
 */
#include "admin.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>
#include <jansson.h>

#define ADMIN_DEFAULT_ADDR "127.0.0.1:8080"
#define ADMIN_CONNECT_TIMEOUT_MS 3000L
#define ADMIN_TIMEOUT_MS 30000L
#define ADMIN_MAX_ANSWER (64u * 1024 * 1024) /* bytes of an answer kept */
#define ADMIN_BODY_CELL 40u                  /* bytes of a body shown in a table */
#define ADMIN_CONSUME_MAX 1000               /* consumeMessage -c at most (maxMessages) */
#define ADMIN_CONSUME_WAIT_MS 3000           /* consumeMessage -w by default */

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

struct AdminCmd;

typedef struct Admin {
    const char *addr;           /* HOST:PORT (or a URL) the request goes to */
    const char *peer;           /* what 'addr' is, for errors: "broker" or "name server" */
    const char *broker_addr;    /* -b; NULL = absent */
    const char *namesrv_addr;   /* -n; NULL = absent */
    bool json;                  /* --json: print the broker's answer as is */
    const char *opt[128];       /* value of each -X flag given; NULL = absent */
    const struct AdminCmd *cmd; /* the command being run */
} Admin;

typedef struct AdminCmd {
    const char *name;     /* mqadmin command name */
    const char *flags;    /* letters of the flags it takes, each with a value */
    const char *required; /* letters of the flags it needs */
    const char *args;     /* its flags, for the usage line */
    const char *summary;  /* one line */
    int (*run)(Admin *a); /* returns the exit status */
    bool namesrv;         /* a name-server command: -n wins over -b */
} AdminCmd;

typedef struct Reply {
    long status; /* HTTP status */
    char *body;  /* NUL-terminated answer (malloc'd); NULL when empty */
    size_t len;  /* body bytes */
} Reply;

/* ---- strings ---------------------------------------------------------------*/

/* Returns a malloc'd string printed from 'fmt' (NULL when out of memory). */
static char *str_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *str_printf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return NULL;
    char *s = malloc((size_t)n + 1);
    if (!s) return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

/* Percent-encodes 's' for a path segment or query value (caller frees with
 * curl_free; NULL when out of memory). */
static char *escape(const char *s) {
    return curl_easy_escape(NULL, s, 0);
}

static bool parse_int(const char *s, long long *out) {
    char *end = NULL;
    if (!s || !*s) return false;
    *out = strtoll(s, &end, 10);
    return *end == '\0';
}

static bool parse_bool(const char *s, bool *out) {
    if (strcmp(s, "true") == 0) {
        *out = true;
    } else if (strcmp(s, "false") == 0) {
        *out = false;
    } else {
        return false;
    }
    return true;
}

/* ---- tables ----------------------------------------------------------------
 * Cells are added row by row, left to right; the printer pads every column
 * to its widest cell.  Key: value output is a two-column table. */

typedef struct Table {
    size_t cols;  /* cells per row */
    size_t count; /* cells added */
    size_t cap;   /* cells allocated */
    char **cells; /* malloc'd strings; NULL = out of memory, printed empty */
} Table;

static void tab_init(Table *t, size_t cols) {
    memset(t, 0, sizeof(*t));
    t->cols = cols;
}

static void tab_free(Table *t) {
    for (size_t i = 0; i < t->count; i++) free(t->cells[i]);
    free(t->cells);
    memset(t, 0, sizeof(*t));
}

static void tab_take(Table *t, char *cell) {
    if (t->count == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        char **p = realloc(t->cells, cap * sizeof(*p));
        if (!p) {
            free(cell);
            return;
        }
        t->cells = p;
        t->cap = cap;
    }
    t->cells[t->count++] = cell;
}

static void tab_add(Table *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tab_add(Table *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = n < 0 ? NULL : malloc((size_t)n + 1);
    if (s) {
        va_start(ap, fmt);
        vsnprintf(s, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    tab_take(t, s);
}

/* Adds 'v' as text: strings as they are, arrays of strings joined with
 * commas, null as "-", anything else as compact JSON. */
static void tab_json(Table *t, const json_t *v) {
    if (json_is_string(v)) {
        tab_add(t, "%s", json_string_value(v));
    } else if (json_is_integer(v)) {
        tab_add(t, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    } else if (json_is_null(v) || !v) {
        tab_add(t, "-");
    } else if (json_is_array(v) && json_array_size(v) == 0) {
        tab_add(t, "%s", "");
    } else {
        bool strings = json_is_array(v);
        for (size_t i = 0; strings && i < json_array_size(v); i++) {
            strings = json_is_string(json_array_get(v, i));
        }
        if (!strings) {
            tab_take(t, json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY));
            return;
        }
        size_t len = 1;
        for (size_t i = 0; i < json_array_size(v); i++) {
            len += strlen(json_string_value(json_array_get(v, i))) + 1;
        }
        char *s = calloc(1, len);
        for (size_t i = 0; s && i < json_array_size(v); i++) {
            if (i) strcat(s, ",");
            strcat(s, json_string_value(json_array_get(v, i)));
        }
        tab_take(t, s);
    }
}

/* Adds member 'k' of 'o' (see tab_json). */
static void tab_member(Table *t, const json_t *o, const char *k) {
    tab_json(t, json_object_get(o, k));
}

/* Adds epoch milliseconds 'ms' as local "YYYY-MM-DD HH:MM:SS.mmm" ("-" for 0). */
static void tab_time(Table *t, json_int_t ms) {
    if (ms <= 0) {
        tab_add(t, "-");
        return;
    }
    time_t secs = (time_t)(ms / 1000);
    struct tm tm;
    char buf[32];
    if (!localtime_r(&secs, &tm) || strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm) == 0) {
        tab_add(t, "%" JSON_INTEGER_FORMAT, ms);
        return;
    }
    tab_add(t, "%s.%03d", buf, (int)(ms % 1000));
}

/* Cell printers for Col.cell: each adds one cell showing 'v' (NULL when
 * the member is absent). */
typedef void (*CellFn)(Table *t, const json_t *v);

/* Epoch milliseconds as local time (tab_time). */
static void cell_time(Table *t, const json_t *v) {
    tab_time(t, json_integer_value(v));
}

/* A rate (messages per second) with two decimals. */
static void cell_rate(Table *t, const json_t *v) {
    if (json_is_number(v)) {
        tab_add(t, "%.2f", json_number_value(v));
    } else {
        tab_json(t, v);
    }
}

/* A message body cut to ADMIN_BODY_CELL bytes (at a UTF-8 character
 * boundary, "..." appended), control characters shown as '.'. */
static void cell_body(Table *t, const json_t *v) {
    if (!json_is_string(v)) {
        tab_json(t, v);
        return;
    }
    const char *s = json_string_value(v);
    size_t len = json_string_length(v);
    bool cut = len > ADMIN_BODY_CELL;
    if (cut) {
        len = ADMIN_BODY_CELL;
        while (len > 0 && ((unsigned char)s[len] & 0xC0) == 0x80) len--;
    }
    char *c = malloc(len + 4);
    if (c) {
        for (size_t i = 0; i < len; i++) {
            unsigned char b = (unsigned char)s[i];
            c[i] = b < 0x20 || b == 0x7F ? '.' : (char)b;
        }
        strcpy(c + len, cut ? "..." : "");
    }
    tab_take(t, c);
}

/* One column of a table of JSON objects: its header, the member it
 * shows, and how (NULL: tab_json). */
typedef struct Col {
    const char *header;
    const char *member;
    CellFn cell;
} Col;

/* Adds the cells of object 'o' under 'cols'. */
static void tab_row(Table *t, const json_t *o, const Col *cols, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_object_get(o, cols[i].member);
        if (cols[i].cell) {
            cols[i].cell(t, v);
        } else {
            tab_json(t, v);
        }
    }
}

static void tab_print(const Table *t, FILE *out);

/* Prints one row per object of the array 'rows', under 'cols'. */
static void print_rows(const json_t *rows, const Col *cols, size_t n) {
    Table t;
    tab_init(&t, n);
    for (size_t i = 0; i < n; i++) tab_add(&t, "%s", cols[i].header);
    size_t i;
    json_t *o;
    json_array_foreach(rows, i, o) tab_row(&t, o, cols, n);
    tab_print(&t, stdout);
    tab_free(&t);
}

#define N_COLS(c) (sizeof(c) / sizeof((c)[0]))

static const Col TOPIC_COLS[] = {{"topic", "topic", NULL},
                                 {"queues", "queues", NULL},
                                 {"readQueues", "readQueues", NULL},
                                 {"writeQueues", "writeQueues", NULL},
                                 {"perm", "perm", NULL},
                                 {"order", "order", NULL}};
static const Col QUEUE_COLS[] = {{"queueId", "queueId", NULL},
                                 {"minOffset", "minOffset", NULL},
                                 {"maxOffset", "maxOffset", NULL},
                                 {"lastUpdate", "lastUpdateTimestamp", cell_time}};
static const Col PROGRESS_COLS[] = {{"queueId", "queueId", NULL},
                                    {"brokerOffset", "brokerOffset", NULL},
                                    {"consumerOffset", "consumerOffset", NULL},
                                    {"lag", "lag", NULL},
                                    {"inflight", "inflight", NULL},
                                    {"lastTimestamp", "lastTimestamp", cell_time}};
static const Col MESSAGE_COLS[] = {{"msgId", "msgId", NULL},
                                   {"queueId", "queueId", NULL},
                                   {"queueOffset", "queueOffset", NULL},
                                   {"tags", "tags", NULL},
                                   {"keys", "keys", NULL},
                                   {"storeTime", "storeTimestamp", cell_time}};
static const Col CONSUME_COLS[] = {{"msgId", "msgId", NULL},
                                   {"queueId", "queueId", NULL},
                                   {"queueOffset", "queueOffset", NULL},
                                   {"tags", "tags", NULL},
                                   {"keys", "keys", NULL},
                                   {"body", "body", cell_body}};
static const Col OFFSET_COLS[] = {{"topic", "topic", NULL},
                                  {"queueId", "queueId", NULL},
                                  {"offset", "offset", NULL}};
static const Col BROKER_ADDR_COLS[] = {{"cluster", "cluster", NULL},
                                       {"brokerName", "brokerName", NULL},
                                       {"brokerId", "brokerId", NULL},
                                       {"address", "address", NULL}};
static const Col QUEUE_DATA_COLS[] = {{"brokerName", "brokerName", NULL},
                                      {"readQueueNums", "readQueueNums", NULL},
                                      {"writeQueueNums", "writeQueueNums", NULL},
                                      {"perm", "perm", NULL}};
static const Col CLUSTER_COLS[] = {{"cluster", "cluster", NULL},
                                   {"brokerName", "brokerName", NULL},
                                   {"brokerId", "brokerId", NULL},
                                   {"role", "role", NULL},
                                   {"address", "address", NULL},
                                   {"version", "version", NULL},
                                   {"produceTps", "produceTps", cell_rate},
                                   {"consumeTps", "consumeTps", cell_rate},
                                   {"lastHeartbeat", "lastHeartbeat", cell_time}};

static void tab_print(const Table *t, FILE *out) {
    size_t *width = calloc(t->cols, sizeof(*width));
    if (!width) return;
    for (size_t i = 0; i < t->count; i++) {
        size_t n = t->cells[i] ? strlen(t->cells[i]) : 0;
        if (n > width[i % t->cols]) width[i % t->cols] = n;
    }
    for (size_t i = 0; i < t->count; i++) {
        size_t col = i % t->cols;
        const char *s = t->cells[i] ? t->cells[i] : "";
        bool last = col == t->cols - 1 || i == t->count - 1;
        if (last) {
            fprintf(out, "%s\n", s);
        } else {
            fprintf(out, "%-*s  ", (int)width[col], s);
        }
    }
    free(width);
}

/* Adds one "key:" / value row per member of 'o'; nested objects become
 * dotted keys ("commitLog.writeOffset"). */
static void tab_flatten(Table *t, const char *prefix, const json_t *o) {
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)o, k, v) {
        char *name = str_printf("%s%s", prefix, k);
        if (!name) continue;
        if (json_is_object(v) && json_object_size(v) > 0) {
            char *sub = str_printf("%s.", name);
            if (sub) tab_flatten(t, sub, v);
            free(sub);
        } else {
            tab_add(t, "%s:", name);
            tab_json(t, v);
        }
        free(name);
    }
}

/* Prints the members of 'o' as aligned key: value lines. */
static void print_kv(const json_t *o) {
    Table t;
    tab_init(&t, 2);
    tab_flatten(&t, "", o);
    tab_print(&t, stdout);
    tab_free(&t);
}

/* ---- HTTP ------------------------------------------------------------------*/

static void reply_free(Reply *r) {
    free(r->body);
    memset(r, 0, sizeof(*r));
}

static size_t on_data(char *p, size_t size, size_t n, void *ud) {
    Reply *r = ud;
    size_t k = size * n;
    if (r->len + k > ADMIN_MAX_ANSWER) return 0;
    char *q = realloc(r->body, r->len + k + 1);
    if (!q) return 0;
    memcpy(q + r->len, p, k);
    r->len += k;
    q[r->len] = '\0';
    r->body = q;
    return k;
}

/* Sends 'method' 'path' (percent-encoded already) with the JSON 'body'
 * (NULL: none).  Returns 0 with the answer in 'out' (free with
 * reply_free), or EXIT_FAIL after printing why no answer came. */
static int request(const Admin *a, const char *method, const char *path, const char *body,
                   Reply *out) {
    memset(out, 0, sizeof(*out));
    char *url = strstr(a->addr, "://") ? str_printf("%s%s", a->addr, path)
                                       : str_printf("http://%s%s", a->addr, path);
    CURL *h = curl_easy_init();
    struct curl_slist *hdrs = curl_slist_append(NULL, "Accept: application/json");
    if (body) hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
    if (!url || !h || !hdrs) {
        fprintf(stderr, "petrel admin: out of memory\n");
        goto err_free;
    }
    char errbuf[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    if (body) curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, ADMIN_CONNECT_TIMEOUT_MS);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, ADMIN_TIMEOUT_MS);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "petrel-admin");
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
    CURLcode cc = curl_easy_perform(h);
    if (cc != CURLE_OK) {
        fprintf(stderr, "petrel admin: cannot reach %s at %s: %s\n", a->peer, a->addr,
                errbuf[0] ? errbuf : curl_easy_strerror(cc));
        reply_free(out);
        goto err_free;
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &out->status);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    free(url);
    return 0;

err_free:
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    free(url);
    return EXIT_FAIL;
}

/* Prints a refused request: the error body's message (API.md), else the
 * start of whatever came back. */
static void print_refusal(const Reply *r) {
    json_t *root = r->body ? json_loads(r->body, 0, NULL) : NULL;
    json_t *err = json_object_get(root, "error");
    const char *msg = json_string_value(json_object_get(err, "message"));
    const char *code = json_string_value(json_object_get(err, "code"));
    if (msg) {
        fprintf(stderr, "petrel admin: %s (HTTP %ld %s)\n", msg, r->status, code ? code : "");
    } else {
        fprintf(stderr, "petrel admin: HTTP %ld: %.200s\n", r->status,
                r->body ? r->body : "(empty answer)");
    }
    json_decref(root);
}

/* Runs one request and judges the answer.  On a 2xx answer: with 'echo'
 * prints the body as is and leaves '*root' NULL; else parses it into
 * '*root' (caller owns; NULL when the body is empty).  Returns 0, or
 * EXIT_FAIL after printing the broker's refusal or why it failed.  When
 * 'status' is not NULL it gets the HTTP status. */
static int call_as(const Admin *a, bool echo, const char *method, const char *path,
                   const char *body, json_t **root, long *status) {
    *root = NULL;
    Reply r;
    int rc = request(a, method, path, body, &r);
    if (rc != 0) return rc;
    if (status) *status = r.status;
    if (r.status < 200 || r.status > 299) {
        print_refusal(&r);
        reply_free(&r);
        return EXIT_FAIL;
    }
    if (echo) {
        if (r.len) fprintf(stdout, "%s%s", r.body, r.body[r.len - 1] == '\n' ? "" : "\n");
    } else if (r.len) {
        json_error_t jerr;
        *root = json_loads(r.body, 0, &jerr);
        if (!*root) {
            fprintf(stderr, "petrel admin: the broker's answer is not JSON: %s\n", jerr.text);
            rc = EXIT_FAIL;
        }
    }
    reply_free(&r);
    return rc;
}

/* call_as, echoing the answer with --json. */
static int call(const Admin *a, const char *method, const char *path, const char *body,
                json_t **root, long *status) {
    return call_as(a, a->json, method, path, body, root, status);
}

/* Sends 'body' (a JSON object, consumed; NULL: none) with 'method' to
 * 'path' (consumed; NULL: out of memory) through call_as.  With 'echo'
 * --json output is the answer as is; without, the answer is always parsed
 * into '*root' for the caller to print.  0, or the exit status of the
 * failure (the error is printed). */
static int fetch(const Admin *a, const char *method, char *path, json_t *body, bool echo,
                 json_t **root) {
    *root = NULL;
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    bool no_mem = !path || (body && !text);
    json_decref(body);
    int rc = EXIT_FAIL;
    if (no_mem) {
        fprintf(stderr, "petrel admin: out of memory\n");
    } else {
        rc = call_as(a, echo, method, path, text, root, NULL);
    }
    free(path);
    free(text);
    return rc;
}

/* Prints 'v' as one compact JSON document (what --json prints of a part
 * of an answer). */
static void print_json(const json_t *v) {
    if (v) json_dumpf(v, stdout, JSON_COMPACT | JSON_ENCODE_ANY);
    printf("%s\n", v ? "" : "null");
}

/* Builds "/v1/<kind>/<escaped name><rest>" (caller frees; NULL when out of
 * memory). */
static char *name_path(const char *kind, const char *name, const char *rest) {
    char *e = escape(name);
    char *p = e ? str_printf("/v1/%s/%s%s", kind, e, rest) : NULL;
    curl_free(e);
    return p;
}

/* Sends 'body' (a JSON object; consumed) with 'method' to 'path' (consumed)
 * and prints what the answer says: "<verb> <what> '<name>'" plus the answer
 * as key: value lines, or with --json the answer. */
static int send_and_show(const Admin *a, const char *method, char *path, json_t *body,
                         const char *what, const char *name) {
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (!path || (body && !text)) {
        fprintf(stderr, "petrel admin: out of memory\n");
        free(path);
        free(text);
        return EXIT_FAIL;
    }
    json_t *root = NULL;
    long status = 0;
    int rc = call(a, method, path, text, &root, &status);
    free(path);
    free(text);
    if (rc != 0 || a->json) return rc;
    const char *verb = strcmp(method, "DELETE") == 0 ? "deleted"
                       : status == 201               ? "created"
                                                     : "updated";
    printf("%s %s '%s'\n", verb, what, name);
    if (root) print_kv(root);
    json_decref(root);
    return 0;
}

/* ---- flags -----------------------------------------------------------------*/

static void usage_cmd(FILE *out, const AdminCmd *c) {
    fprintf(out, "usage: petrel admin %s %s%s[-b HOST:PORT | -n HOST:PORT] [--json]\n  %s\n",
            c->name, c->args, c->args[0] ? " " : "", c->summary);
}

/* Prints "'msg'" (then " 'arg'" when not NULL) and the command's usage on
 * stderr; returns EXIT_USAGE. */
static int bad_flags(const Admin *a, const char *msg, const char *arg) {
    fprintf(stderr, "petrel admin %s: %s", a->cmd->name, msg);
    if (arg) fprintf(stderr, " '%s'", arg);
    fprintf(stderr, "\n");
    usage_cmd(stderr, a->cmd);
    return EXIT_USAGE;
}

/* Reads an integer flag 'letter' into '*out' when given.  Returns 0,
 * 1 when absent, or EXIT_USAGE (printed) when it is not an integer. */
static int int_flag(const Admin *a, char letter, long long *out) {
    const char *v = a->opt[(int)letter];
    if (!v) return 1;
    if (parse_int(v, out)) return 0;
    char flag[3] = {'-', letter, '\0'};
    fprintf(stderr, "petrel admin %s: %s needs an integer, not '%s'\n", a->cmd->name, flag, v);
    usage_cmd(stderr, a->cmd);
    return EXIT_USAGE;
}

/* Sets the boolean member 'key' of 'body' from flag 'letter' when given.
 * Returns 0, or EXIT_USAGE (printed) when it is not true or false. */
static int bool_member(const Admin *a, char letter, json_t *body, const char *key) {
    const char *v = a->opt[(int)letter];
    bool b = false;
    if (!v) return 0;
    if (!parse_bool(v, &b)) {
        char flag[3] = {'-', letter, '\0'};
        fprintf(stderr, "petrel admin %s: %s needs true or false, not '%s'\n", a->cmd->name,
                flag, v);
        usage_cmd(stderr, a->cmd);
        return EXIT_USAGE;
    }
    json_object_set_new(body, key, json_boolean(b));
    return 0;
}

/* Sets the integer member 'key' of 'body' from flag 'letter' when given.
 * Returns 0 or EXIT_USAGE (printed). */
static int int_member(const Admin *a, char letter, json_t *body, const char *key) {
    long long n = 0;
    int rc = int_flag(a, letter, &n);
    if (rc == EXIT_USAGE) return rc;
    if (rc == 0) json_object_set_new(body, key, json_integer(n));
    return 0;
}

/* ---- commands --------------------------------------------------------------*/

/* RocketMQ's numeric perms (2 R, 4 W, 6 RW) map to Petrel's names; anything
 * else goes to the broker as is, which judges it. */
static const char *perm_name(const char *p) {
    if (strcmp(p, "6") == 0) return "RW";
    if (strcmp(p, "4") == 0) return "W";
    if (strcmp(p, "2") == 0) return "R";
    return p;
}

static int cmd_update_topic(Admin *a) {
    long long r = 0;
    long long w = 0;
    int has_r = int_flag(a, 'r', &r);
    int has_w = int_flag(a, 'w', &w);
    if (has_r == EXIT_USAGE || has_w == EXIT_USAGE) return EXIT_USAGE;
    if (has_r == 0 && has_w == 0 && r != w) {
        return bad_flags(a, "-r and -w must be equal: a topic has one queue count", NULL);
    }
    json_t *body = json_object();
    if (has_w == 0 || has_r == 0) json_object_set_new(body, "queues", json_integer(has_w ? r : w));
    if (a->opt['p']) json_object_set_new(body, "perm", json_string(perm_name(a->opt['p'])));
    if (bool_member(a, 'o', body, "order") != 0) {
        json_decref(body);
        return EXIT_USAGE;
    }
    const char *t = a->opt['t'];
    return send_and_show(a, "PUT", name_path("topics", t, ""), body, "topic", t);
}

static int cmd_delete_topic(Admin *a) {
    const char *t = a->opt['t'];
    return send_and_show(a, "DELETE", name_path("topics", t, ""), NULL, "topic", t);
}

/* GETs 'path' (owned; NULL: out of memory) into '*root' (left NULL with
 * --json: call printed the answer).  0, or the exit status of the
 * failure (the error is printed). */
static int get_json(Admin *a, char *path, json_t **root) {
    return fetch(a, "GET", path, NULL, a->json, root);
}

static int cmd_topic_list(Admin *a) {
    json_t *root = NULL;
    int rc = get_json(a, strdup("/v1/topics"), &root);
    if (rc != 0 || !root) return rc;
    print_rows(root, TOPIC_COLS, N_COLS(TOPIC_COLS));
    json_decref(root);
    return 0;
}

static int cmd_topic_status(Admin *a) {
    json_t *root = NULL;
    int rc = get_json(a, name_path("topics", a->opt['t'], "/queues"), &root);
    if (rc != 0 || !root) return rc;
    print_rows(root, QUEUE_COLS, N_COLS(QUEUE_COLS));
    json_decref(root);
    return 0;
}

static int cmd_update_sub_group(Admin *a) {
    json_t *body = json_object();
    int rc = int_member(a, 'r', body, "retryMaxTimes");
    if (rc == 0) rc = int_member(a, 'q', body, "retryQueueNums");
    if (rc == 0) rc = bool_member(a, 'o', body, "orderly");
    if (rc == 0) rc = bool_member(a, 'd', body, "broadcast");
    if (rc == 0) rc = bool_member(a, 's', body, "consumeEnable");
    if (rc != 0) {
        json_decref(body);
        return rc;
    }
    const char *g = a->opt['g'];
    return send_and_show(a, "PUT", name_path("groups", g, ""), body, "group", g);
}

static int cmd_delete_sub_group(Admin *a) {
    const char *g = a->opt['g'];
    return send_and_show(a, "DELETE", name_path("groups", g, ""), NULL, "group", g);
}

/* Adds one row per queue of a TopicProgress / GroupTopicProgress object. */
static void progress_rows(Table *t, const json_t *tp) {
    const char *topic = json_string_value(json_object_get(tp, "topic"));
    size_t i;
    json_t *q;
    json_array_foreach(json_object_get(tp, "queues"), i, q) {
        tab_add(t, "%s", topic ? topic : "");
        tab_row(t, q, PROGRESS_COLS, N_COLS(PROGRESS_COLS));
    }
}

static int cmd_consumer_progress(Admin *a) {
    char *path = NULL;
    if (a->opt['t']) {
        char *topic = escape(a->opt['t']);
        path = topic ? name_path("groups", a->opt['g'], "/progress?topic=") : NULL;
        char *full = path ? str_printf("%s%s", path, topic) : NULL;
        free(path);
        curl_free(topic);
        path = full;
    } else {
        path = name_path("groups", a->opt['g'], "/progress");
    }
    json_t *root = NULL;
    int rc = get_json(a, path, &root);
    if (rc != 0 || !root) return rc;
    Table t;
    tab_init(&t, 1 + N_COLS(PROGRESS_COLS));
    tab_add(&t, "topic");
    for (size_t c = 0; c < N_COLS(PROGRESS_COLS); c++) tab_add(&t, "%s", PROGRESS_COLS[c].header);
    if (json_object_get(root, "topics")) {
        size_t i;
        json_t *tp;
        json_array_foreach(json_object_get(root, "topics"), i, tp) progress_rows(&t, tp);
    } else {
        progress_rows(&t, root);
    }
    tab_print(&t, stdout);
    tab_free(&t);
    printf("\ntotalLag: %" JSON_INTEGER_FORMAT "\n",
           json_integer_value(json_object_get(root, "totalLag")));
    json_decref(root);
    return 0;
}

static int cmd_query_msg_by_id(Admin *a) {
    json_t *root = NULL;
    int rc = get_json(a, name_path("messages", a->opt['i'], ""), &root);
    if (rc != 0 || !root) return rc;
    print_kv(root);
    json_decref(root);
    return 0;
}

static int cmd_query_msg_by_key(Admin *a) {
    char *key = escape(a->opt['k']);
    char *base = key ? name_path("topics", a->opt['t'], "/messages?key=") : NULL;
    char *path = base ? str_printf("%s%s", base, key) : NULL;
    free(base);
    curl_free(key);
    json_t *root = NULL;
    int rc = get_json(a, path, &root);
    if (rc != 0 || !root) return rc;
    print_rows(json_object_get(root, "messages"), MESSAGE_COLS, N_COLS(MESSAGE_COLS));
    json_decref(root);
    return 0;
}

/* Splits the comma-separated 'keys' into a JSON array (empty items dropped). */
static json_t *split_keys(const char *keys) {
    json_t *arr = json_array();
    const char *p = keys;
    while (arr && *p) {
        size_t n = strcspn(p, ",");
        if (n) json_array_append_new(arr, json_stringn(p, n));
        p += n;
        if (*p) p++;
    }
    return arr;
}

static int cmd_send_message(Admin *a) {
    json_t *body = json_object();
    json_object_set_new(body, "body", json_string(a->opt['p']));
    if (a->opt['c']) json_object_set_new(body, "tags", json_string(a->opt['c']));
    if (a->opt['k']) json_object_set_new(body, "keys", split_keys(a->opt['k']));
    if (int_member(a, 'i', body, "queueId") != 0) {
        json_decref(body);
        return EXIT_USAGE;
    }
    if (!json_is_string(json_object_get(body, "body"))) {
        json_decref(body);
        return bad_flags(a, "-p must be UTF-8 text", NULL);
    }
    json_t *root = NULL;
    int rc = fetch(a, "POST", name_path("topics", a->opt['t'], "/messages"), body, a->json, &root);
    if (rc != 0 || !root) return rc;
    Table t;
    tab_init(&t, 2);
    tab_add(&t, "status:");
    tab_member(&t, root, "status");
    tab_add(&t, "msgId:");
    tab_member(&t, root, "msgId");
    tab_add(&t, "queueId:");
    tab_member(&t, root, "queueId");
    tab_add(&t, "queueOffset:");
    tab_member(&t, root, "queueOffset");
    tab_print(&t, stdout);
    tab_free(&t);
    json_decref(root);
    return 0;
}

static int cmd_broker_status(Admin *a) {
    json_t *root = NULL;
    int rc = get_json(a, strdup("/v1/broker"), &root);
    if (rc != 0 || !root) return rc;
    print_kv(root);
    json_decref(root);
    return 0;
}

/* Prints "'title':" and then the table of 'rows' under 'cols'. */
static void print_section(const char *title, const json_t *rows, const Col *cols, size_t n) {
    printf("%s:\n", title);
    print_rows(rows, cols, n);
}

/* Appends to 'rows' a copy of object 'o' (NULL: an empty one) with the
 * member 'k' set to 'v' (borrowed; NULL: left out). */
static json_t *row_with(json_t *rows, const json_t *o, const char *k, json_t *v) {
    json_t *row = json_is_object(o) ? json_copy((json_t *)o) : json_object();
    if (v) json_object_set(row, k, v);
    json_array_append_new(rows, row);
    return row;
}

static int cmd_topic_route(Admin *a) {
    json_t *root = NULL;
    int rc = fetch(a, "GET", name_path("topics", a->opt['t'], ""), NULL, false, &root);
    if (rc != 0) return rc;
    json_t *route = json_object_get(root, "route");
    if (!json_is_object(route)) {
        fprintf(stderr, "petrel admin: the broker's answer has no route\n");
        json_decref(root);
        return EXIT_FAIL;
    }
    if (a->json) {
        print_json(route);
        json_decref(root);
        return 0;
    }
    /* One row per broker address: brokerAddrs maps brokerId to address. */
    json_t *addrs = json_array();
    size_t i;
    json_t *bd;
    json_array_foreach(json_object_get(route, "brokerDatas"), i, bd) {
        const char *id;
        json_t *addr;
        json_object_foreach(json_object_get(bd, "brokerAddrs"), id, addr) {
            long long n = 0;
            json_t *row = row_with(addrs, NULL, "cluster", json_object_get(bd, "cluster"));
            json_object_set(row, "brokerName", json_object_get(bd, "brokerName"));
            json_object_set_new(row, "brokerId", parse_int(id, &n) ? json_integer(n)
                                                                   : json_string(id));
            json_object_set(row, "address", addr);
        }
    }
    print_section("brokerDatas", addrs, BROKER_ADDR_COLS, N_COLS(BROKER_ADDR_COLS));
    printf("\n");
    print_section("queueDatas", json_object_get(route, "queueDatas"), QUEUE_DATA_COLS,
                  N_COLS(QUEUE_DATA_COLS));
    json_decref(addrs);
    json_decref(root);
    return 0;
}

/* Reads mqadmin's time flag: epoch milliseconds, "now", or local time as
 * yyyy-MM-dd#HH:mm:ss:SSS.  Returns whether 's' is one of those. */
static bool parse_time_ms(const char *s, long long *out) {
    static const char PATTERN[] = "dddd-dd-dd#dd:dd:dd:ddd";
    if (strcmp(s, "now") == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        *out = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
        return true;
    }
    if (s[0] >= '0' && s[0] <= '9' && parse_int(s, out)) return true;
    if (strlen(s) != sizeof(PATTERN) - 1) return false;
    for (size_t i = 0; PATTERN[i]; i++) {
        bool digit = s[i] >= '0' && s[i] <= '9';
        if (PATTERN[i] == 'd' ? !digit : s[i] != PATTERN[i]) return false;
    }
    int y, mon, d, h, min, sec, ms;
    if (sscanf(s, "%d-%d-%d#%d:%d:%d:%d", &y, &mon, &d, &h, &min, &sec, &ms) != 7) return false;
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    tm.tm_year = y - 1900;
    tm.tm_mon = mon - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = min;
    tm.tm_sec = sec;
    tm.tm_isdst = -1;
    time_t secs = mktime(&tm);
    /* mktime normalises: a field out of range (Feb 30, 25:00) shows as a change. */
    if (secs == (time_t)-1 || tm.tm_year != y - 1900 || tm.tm_mon != mon - 1 ||
        tm.tm_mday != d || tm.tm_hour != h || tm.tm_min != min || tm.tm_sec != sec) {
        return false;
    }
    *out = (long long)secs * 1000 + ms;
    return true;
}

static int cmd_reset_offset_by_time(Admin *a) {
    long long ms = 0;
    if (!parse_time_ms(a->opt['s'], &ms)) {
        return bad_flags(a, "-s needs epoch milliseconds, yyyy-MM-dd#HH:mm:ss:SSS or now, not",
                         a->opt['s']);
    }
    json_t *body = json_object();
    json_object_set_new(body, "topic", json_string(a->opt['t']));
    json_object_set_new(body, "timestamp", json_integer(ms));
    json_t *root = NULL;
    int rc = fetch(a, "POST", name_path("groups", a->opt['g'], "/offsets/reset"), body, a->json,
                   &root);
    if (rc != 0 || !root) return rc;
    if (json_is_array(root)) {
        print_rows(root, OFFSET_COLS, N_COLS(OFFSET_COLS));
    } else {
        print_kv(root);
    }
    json_decref(root);
    return 0;
}

static int cmd_cluster_list(Admin *a) {
    json_t *root = NULL;
    int rc = get_json(a, strdup("/v1/cluster"), &root);
    if (rc != 0 || !root) return rc;
    /* One row per broker, with its cluster's and broker group's names. */
    json_t *rows = json_array();
    size_t i;
    json_t *cl;
    json_array_foreach(json_object_get(root, "clusters"), i, cl) {
        size_t j;
        json_t *bg;
        json_array_foreach(json_object_get(cl, "brokerGroups"), j, bg) {
            size_t k;
            json_t *b;
            json_array_foreach(json_object_get(bg, "brokers"), k, b) {
                json_t *row = row_with(rows, b, "cluster", json_object_get(cl, "clusterName"));
                json_object_set(row, "brokerName", json_object_get(bg, "brokerName"));
            }
        }
    }
    print_rows(rows, CLUSTER_COLS, N_COLS(CLUSTER_COLS));
    json_decref(rows);
    json_decref(root);
    return 0;
}

/* Acknowledges the received 'msgs' of topic -t for group -g.  Returns 0,
 * or EXIT_FAIL when the ack failed or left some unacknowledged (printed). */
static int ack_messages(const Admin *a, const json_t *msgs) {
    if (json_array_size(msgs) == 0) return 0;
    json_t *handles = json_array();
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) json_array_append(handles, json_object_get(m, "receiptHandle"));
    json_t *body = json_object();
    json_object_set_new(body, "topic", json_string(a->opt['t']));
    json_object_set_new(body, "receiptHandles", handles);
    json_t *root = NULL;
    int rc = fetch(a, "POST", name_path("groups", a->opt['g'], "/ack"), body, false, &root);
    if (rc != 0) return rc;
    size_t failed = 0;
    json_t *r;
    json_array_foreach(json_object_get(root, "results"), i, r) {
        const char *st = json_string_value(json_object_get(r, "status"));
        if (!st || strcmp(st, "OK") != 0) {
            fprintf(stderr, "petrel admin: not acknowledged: %s (%s)\n",
                    json_string_value(json_object_get(r, "receiptHandle")), st ? st : "?");
            failed++;
        }
    }
    json_decref(root);
    return failed ? EXIT_FAIL : 0;
}

static int cmd_consume_message(Admin *a) {
    long long count = 1;
    long long wait_ms = ADMIN_CONSUME_WAIT_MS;
    int rc = int_flag(a, 'c', &count);
    if (rc == EXIT_USAGE) return rc;
    if (count < 1 || count > ADMIN_CONSUME_MAX) {
        return bad_flags(a, "-c must be in 1..1000, not", a->opt['c']);
    }
    rc = int_flag(a, 'w', &wait_ms);
    if (rc == EXIT_USAGE) return rc;
    if (wait_ms < 0) return bad_flags(a, "-w must be 0 or more, not", a->opt['w']);
    json_t *body = json_object();
    json_object_set_new(body, "topic", json_string(a->opt['t']));
    json_object_set_new(body, "maxMessages", json_integer(count));
    json_object_set_new(body, "waitMs", json_integer(wait_ms));
    json_t *root = NULL;
    rc = fetch(a, "POST", name_path("groups", a->opt['g'], "/receive"), body, false, &root);
    if (rc != 0) return rc;
    json_t *msgs = json_object_get(root, "messages");
    if (a->json) {
        if (msgs) {
            print_json(msgs);
        } else {
            printf("[]\n");
        }
    } else if (json_array_size(msgs) == 0) {
        printf("no message\n");
    } else {
        print_rows(msgs, CONSUME_COLS, N_COLS(CONSUME_COLS));
    }
    rc = ack_messages(a, msgs);
    json_decref(root);
    return rc;
}

static const AdminCmd commands[] = {
    {"updateTopic", "trwpo", "t", "-t TOPIC [-r N] [-w N] [-p RW|R|W|6|4|2] [-o true|false]",
     "create or update a topic (PUT /v1/topics/{topic})", cmd_update_topic, false},
    {"deleteTopic", "t", "t", "-t TOPIC", "delete a topic (DELETE /v1/topics/{topic})",
     cmd_delete_topic, false},
    {"topicList", "", "", "", "list the topics (GET /v1/topics)", cmd_topic_list, true},
    {"topicStatus", "t", "t", "-t TOPIC",
     "offsets of a topic's queues (GET /v1/topics/{topic}/queues)", cmd_topic_status, false},
    {"topicRoute", "t", "t", "-t TOPIC",
     "a topic's brokers and queue counts (GET /v1/topics/{topic}: route)",
     cmd_topic_route, true},
    {"updateSubGroup", "grqods", "g",
     "-g GROUP [-r retryMaxTimes] [-q retryQueueNums] [-o orderly] [-d broadcast]"
     " [-s consumeEnable]",
     "create or update a consumer group (PUT /v1/groups/{group})", cmd_update_sub_group, false},
    {"deleteSubGroup", "g", "g", "-g GROUP", "delete a consumer group (DELETE /v1/groups/{group})",
     cmd_delete_sub_group, false},
    {"consumerProgress", "gt", "g", "-g GROUP [-t TOPIC]",
     "consume progress and lag per queue (GET /v1/groups/{group}/progress)",
     cmd_consumer_progress, false},
    {"resetOffsetByTime", "gts", "gts", "-g GROUP -t TOPIC -s epochMs|yyyy-MM-dd#HH:mm:ss:SSS|now",
     "move a group's offsets to a time (POST /v1/groups/{group}/offsets/reset)",
     cmd_reset_offset_by_time, false},
    {"queryMsgById", "i", "i", "-i MSGID", "a message by its id (GET /v1/messages/{msgId})",
     cmd_query_msg_by_id, false},
    {"queryMsgByKey", "tk", "tk", "-t TOPIC -k KEY",
     "messages of a topic by key (GET /v1/topics/{topic}/messages?key=)", cmd_query_msg_by_key,
     false},
    {"sendMessage", "tpcki", "tp", "-t TOPIC -p BODY [-c TAG] [-k KEY,KEY] [-i queueId]",
     "send one message (POST /v1/topics/{topic}/messages)", cmd_send_message, false},
    {"consumeMessage", "tgcw", "tg", "-t TOPIC -g GROUP [-c COUNT 1..1000 (1)] [-w waitMs (3000)]",
     "receive messages, then ack them (POST /v1/groups/{group}/receive, /ack)",
     cmd_consume_message, false},
    {"brokerStatus", "", "", "", "broker identity, configuration and figures (GET /v1/broker)",
     cmd_broker_status, false},
    {"clusterList", "", "", "", "clusters, broker groups and brokers (GET /v1/cluster)",
     cmd_cluster_list, true},
};

#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage_all(FILE *out) {
    fprintf(out, "usage: petrel admin <command> [flags] [-b HOST:PORT | -n HOST:PORT] [--json]\n\n"
                 "commands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++) {
        fprintf(out, "  %-17s %s\n", commands[i].name, commands[i].summary);
    }
    fprintf(out, "\nThe broker is -b HOST:PORT, else -n HOST:PORT, else $PETREL_ADDR, else %s.\n"
                 "-n names the name server.  Petrel has no separate name server process yet:\n"
                 "`petrel standalone` serves the name-server and broker endpoints in one\n"
                 "process, so -n works wherever -b does.  With both, -b wins, except for\n"
                 "topicList, topicRoute and clusterList (name-server commands): -n wins.\n"
                 "--json prints the broker's JSON answer as is.\n"
                 "'petrel admin help <command>' lists the flags of a command.\n",
            ADMIN_DEFAULT_ADDR);
}

static const AdminCmd *find_cmd(const char *name) {
    for (size_t i = 0; i < N_COMMANDS; i++) {
        if (strcmp(commands[i].name, name) == 0) return &commands[i];
    }
    return NULL;
}

/* Reads -b, -n and --json at argv[*i] (advancing past a value).  Returns
 * 1 when it was one of them, 0 when not, EXIT_USAGE when -b or -n has no
 * value. */
static int common_flag(Admin *a, int argc, char **argv, int *i) {
    if (strcmp(argv[*i], "--json") == 0) {
        a->json = true;
        return 1;
    }
    bool broker = strcmp(argv[*i], "-b") == 0;
    if (!broker && strcmp(argv[*i], "-n") != 0) return 0;
    if (*i + 1 >= argc) return EXIT_USAGE;
    *(broker ? &a->broker_addr : &a->namesrv_addr) = argv[++*i];
    return 1;
}

/* Picks the address of the command's request: -b or -n (the command's
 * preference first), else $PETREL_ADDR, else the default. */
static void pick_addr(Admin *a) {
    const char *env = getenv("PETREL_ADDR");
    const char *first = a->cmd->namesrv ? a->namesrv_addr : a->broker_addr;
    const char *second = a->cmd->namesrv ? a->broker_addr : a->namesrv_addr;
    a->addr = first ? first : second ? second : env && *env ? env : ADMIN_DEFAULT_ADDR;
    a->peer = a->addr == a->namesrv_addr ? "name server" : "broker";
}

/* Parses the command's flags from 'argv'.  Returns 0, 3 for --help
 * (usage printed on stdout), or EXIT_USAGE (printed on stderr). */
static int parse_flags(Admin *a, int argc, char **argv) {
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        int rc = common_flag(a, argc, argv, &i);
        if (rc == 1) continue;
        if (rc == EXIT_USAGE) return bad_flags(a, "missing value after", arg);
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            usage_cmd(stdout, a->cmd);
            return 3;
        }
        if (arg[0] != '-' || !arg[1] || arg[2] || !strchr(a->cmd->flags, arg[1])) {
            return bad_flags(a, "unknown flag or argument", arg);
        }
        if (i + 1 >= argc) return bad_flags(a, "missing value after", arg);
        a->opt[(unsigned char)arg[1]] = argv[++i];
    }
    for (const char *r = a->cmd->required; *r; r++) {
        if (!a->opt[(unsigned char)*r]) {
            char flag[3] = {'-', *r, '\0'};
            return bad_flags(a, "missing required flag", flag);
        }
    }
    return 0;
}

int admin_main(int argc, char **argv) {
    Admin a;
    memset(&a, 0, sizeof(a));
    int i = 1;
    for (; i < argc; i++) {
        int rc = common_flag(&a, argc, argv, &i);
        if (rc == 0) break;
        if (rc == EXIT_USAGE) {
            fprintf(stderr, "petrel admin: %s needs a value\n", argv[i]);
            usage_all(stderr);
            return EXIT_USAGE;
        }
    }
    if (i >= argc) {
        usage_all(stderr);
        return EXIT_USAGE;
    }
    const char *name = argv[i];
    if (strcmp(name, "help") == 0 || strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
        const AdminCmd *about = i + 1 < argc ? find_cmd(argv[i + 1]) : NULL;
        if (i + 1 < argc && !about) {
            fprintf(stderr, "petrel admin: unknown command '%s'\n", argv[i + 1]);
            usage_all(stderr);
            return EXIT_USAGE;
        }
        if (about) {
            usage_cmd(stdout, about);
        } else {
            usage_all(stdout);
        }
        return EXIT_OK;
    }
    a.cmd = find_cmd(name);
    if (!a.cmd) {
        fprintf(stderr, "petrel admin: unknown command '%s'\n", name);
        usage_all(stderr);
        return EXIT_USAGE;
    }
    int rc = parse_flags(&a, argc - i - 1, argv + i + 1);
    if (rc == 3) return EXIT_OK;
    if (rc != 0) return rc;
    pick_addr(&a);
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "petrel admin: cannot initialise libcurl\n");
        return EXIT_FAIL;
    }
    rc = a.cmd->run(&a);
    curl_global_cleanup();
    return rc;
}
