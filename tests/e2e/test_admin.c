/*
 * test_admin.c - end-to-end tests of `petrel admin` against a real petrel:
 * every command in both output forms (the aligned table or key: value
 * lines, and --json), the broker's refusals (exit 1 with its message),
 * an unreachable broker or name server, usage errors (exit 2), -b / -n
 * precedence and PETREL_ADDR.
 * Each case starts its own server in its own temporary directory.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <jansson.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "e2e.h"

#define MAX_ARGS 32

static int setup(void **state) {
    return e2e_case_setup(state, "e2e-admin");
}

/* Runs `petrel admin <args...> <flag> 127.0.0.1:<port of c>` ('args'
 * NULL-terminated; 'flag' -b or -n, NULL: no address added) and asserts
 * exit status 'want' (printing the output otherwise); returns stdout and
 * stderr together (caller frees). */
#define ADMIN_OK(c, ...) admin_expect((c), 0, "-b", __VA_ARGS__, NULL)
#define ADMIN_FAILS(c, st, ...) admin_expect((c), (st), "-b", __VA_ARGS__, NULL)
#define ADMIN_N(c, st, ...) admin_expect((c), (st), "-n", __VA_ARGS__, NULL)
#define ADMIN_RAW(c, st, ...) admin_expect((c), (st), NULL, __VA_ARGS__, NULL)
static char *admin_expect(E2eCase *c, int want, const char *flag, ...) {
    const char *args[MAX_ARGS];
    char addr[64];
    int n = 0;
    args[n++] = "admin";
    va_list ap;
    va_start(ap, flag);
    for (const char *a = va_arg(ap, const char *); a && n < MAX_ARGS - 3;
         a = va_arg(ap, const char *)) {
        args[n++] = a;
    }
    va_end(ap);
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", c->srv.port);
    if (flag) {
        args[n++] = flag;
        args[n++] = addr;
    }
    args[n] = NULL;
    char *out = NULL;
    int st = e2e_run(args, &out);
    assert_non_null(out);
    if (st != want) fprintf(stderr, "petrel admin %s: exit %d\n%s", args[1], st, out);
    assert_int_equal(st, want);
    return out;
}

/* The --json output parsed (one document), asserted to be JSON. */
static json_t *parse(const char *out) {
    json_error_t err;
    json_t *root = json_loads(out, 0, &err);
    if (!root) fprintf(stderr, "not one JSON document (%s):\n%s", err.text, out);
    assert_non_null(root);
    return root;
}

/* Whether 'out' has a line whose whitespace-separated fields are those of
 * 'row' (runs of spaces compared as one); with 'prefix', whose first fields
 * are. */
static bool match_row(const char *out, const char *row, bool prefix) {
    char want[512];
    char line[1024];
    size_t n = 0;
    for (const char *p = row; *p && n < sizeof(want) - 1; p++) {
        if (*p == ' ' && (n == 0 || want[n - 1] == ' ')) continue;
        want[n++] = *p;
    }
    want[n] = '\0';
    const char *p = out;
    while (*p) {
        size_t k = 0;
        for (; *p && *p != '\n'; p++) {
            if (k >= sizeof(line) - 1) continue;
            if (*p == ' ' && (k == 0 || line[k - 1] == ' ')) continue;
            line[k++] = *p;
        }
        while (k > 0 && line[k - 1] == ' ') k--;
        line[k] = '\0';
        if (strcmp(line, want) == 0) return true;
        if (prefix && strncmp(line, want, n) == 0 && line[n] == ' ') return true;
        if (*p) p++;
    }
    return false;
}

static bool has_row(const char *out, const char *row) {
    return match_row(out, row, false);
}

static void assert_row_prefix(const char *out, const char *row) {
    if (!match_row(out, row, true)) fprintf(stderr, "no row '%s ...' in:\n%s", row, out);
    assert_true(match_row(out, row, true));
}

static void assert_row(const char *out, const char *row) {
    if (!has_row(out, row)) fprintf(stderr, "no row '%s' in:\n%s", row, out);
    assert_true(has_row(out, row));
}

static void assert_contains(const char *out, const char *s) {
    if (!strstr(out, s)) fprintf(stderr, "no '%s' in:\n%s", s, out);
    assert_non_null(strstr(out, s));
}

/* Column of the first character of field 'field' (0-based) of the line
 * starting with 'start'; -1 when absent. */
static int field_col(const char *out, const char *start, int field) {
    const char *line = out;
    size_t len = strlen(start);
    while (line && strncmp(line, start, len) != 0) {
        line = strchr(line, '\n');
        if (line) line++;
    }
    if (!line) return -1;
    int f = 0;
    for (const char *p = line; *p && *p != '\n'; p++) {
        if (*p != ' ' && (p == line || p[-1] == ' ')) {
            if (f == field) return (int)(p - line);
            f++;
        }
    }
    return -1;
}

/* The message of the broker's error answer to GET 'path' (caller frees). */
static char *server_message(E2eCase *c, const char *path) {
    E2eResponse r;
    assert_int_equal(e2e_get(&c->srv, path, &r), 0);
    json_t *root = e2e_json(&r);
    const char *m = json_string_value(json_object_get(json_object_get(root, "error"), "message"));
    assert_non_null(m);
    char *copy = strdup(m);
    json_decref(root);
    e2e_response_free(&r);
    return copy;
}

/* Asserts that 'out' (freed) has the broker's message for GET 'path' and
 * the error 'code' ("404 TOPIC_NOT_FOUND"). */
static void assert_refused(E2eCase *c, char *out, const char *path, const char *code) {
    char *msg = server_message(c, path);
    assert_contains(out, msg);
    assert_contains(out, code);
    free(msg);
    free(out);
}

/* ---- cases ---------------------------------------------------------------*/

static void test_admin_topic_commands(void **state) {
    E2eCase *c = *state;
    e2e_case_start(c, NULL);
    char *out = ADMIN_OK(c, "updateTopic", "-t", "Orders", "-w", "3", "-p", "6", "-o", "true");
    assert_contains(out, "created topic 'Orders'");
    assert_row(out, "queues: 3");
    assert_row(out, "perm: RW");
    assert_row(out, "order: true");
    free(out);

    out = ADMIN_OK(c, "updateTopic", "-t", "Orders", "-r", "4", "-p", "R", "--json");
    json_t *j = parse(out);
    assert_string_equal(e2e_str(j, "topic"), "Orders");
    assert_int_equal(e2e_num(j, "queues"), 4);
    assert_string_equal(e2e_str(j, "perm"), "R");
    assert_true(json_is_true(json_object_get(j, "order")));
    json_decref(j);
    free(out);
    json_decref(e2e_call(c, "PUT", "/v1/topics/A", E2E_JSON, "{\"queues\":2}", 201));

    out = ADMIN_OK(c, "topicList");
    assert_row(out, "topic queues readQueues writeQueues perm order");
    assert_row(out, "A 2 2 2 RW false");
    assert_row(out, "Orders 4 4 4 R true");
    /* Aligned: the second column starts at the same place on every line. */
    int col = field_col(out, "topic ", 1);
    assert_true(col > (int)strlen("Orders"));
    assert_int_equal(field_col(out, "A ", 1), col);
    assert_int_equal(field_col(out, "Orders ", 1), col);
    free(out);
    out = ADMIN_OK(c, "topicList", "--json");
    j = parse(out);
    assert_int_equal(json_array_size(j), 2);
    assert_string_equal(e2e_str(json_array_get(j, 1), "topic"), "Orders");
    json_decref(j);
    free(out);

    out = ADMIN_OK(c, "topicStatus", "-t", "Orders");
    assert_row(out, "queueId minOffset maxOffset lastUpdate");
    assert_row(out, "0 0 0 -");
    assert_row(out, "3 0 0 -");
    assert_false(has_row(out, "4 0 0 -"));
    free(out);
    out = ADMIN_OK(c, "topicStatus", "-t", "Orders", "--json");
    j = parse(out);
    assert_int_equal(json_array_size(j), 4);
    assert_int_equal(e2e_num(json_array_get(j, 3), "queueId"), 3);
    json_decref(j);
    free(out);

    out = ADMIN_OK(c, "deleteTopic", "-t", "Orders");
    assert_contains(out, "deleted topic 'Orders'");
    free(out);
    /* The unknown topic now: exit 1 with the broker's own message. */
    char *msg = server_message(c, "/v1/topics/Orders/queues");
    out = ADMIN_FAILS(c, 1, "topicStatus", "-t", "Orders");
    assert_contains(out, msg);
    assert_contains(out, "404");
    free(out);
    out = ADMIN_FAILS(c, 1, "deleteTopic", "-t", "Orders", "--json");
    assert_contains(out, msg);
    free(out);
    free(msg);
    /* A value the broker refuses (perm) is its message, exit 1. */
    out = ADMIN_FAILS(c, 1, "updateTopic", "-t", "A", "-p", "X");
    assert_contains(out, "400");
    free(out);
    e2e_stop_ok(c);
}

static void test_admin_send_and_query(void **state) {
    E2eCase *c = *state;
    e2e_case_start(c, NULL);
    e2e_create_topic(c, "T", 1);
    char *out = ADMIN_OK(c, "sendMessage", "-t", "T", "-p", "hello world", "-c", "TagA", "-k",
                         "k1,k2");
    assert_row(out, "status: SEND_OK");
    assert_row(out, "queueId: 0");
    assert_row(out, "queueOffset: 0");
    assert_contains(out, "msgId:");
    free(out);
    out = ADMIN_OK(c, "sendMessage", "-t", "T", "-p", "second", "-k", "k2", "--json");
    json_t *j = parse(out);
    assert_string_equal(e2e_str(j, "status"), "SEND_OK");
    assert_int_equal(e2e_num(j, "queueOffset"), 1);
    char id[64];
    snprintf(id, sizeof(id), "%s", e2e_str(j, "msgId"));
    json_decref(j);
    free(out);
    e2e_wait_queue(c, "T", 0, 2);

    out = ADMIN_OK(c, "queryMsgById", "-i", id);
    char row[128];
    snprintf(row, sizeof(row), "msgId: %s", id);
    assert_row(out, row);
    assert_row(out, "topic: T");
    assert_row(out, "body: second");
    assert_row(out, "keys: k2");
    free(out);
    out = ADMIN_OK(c, "queryMsgById", "-i", id, "--json");
    j = parse(out);
    assert_string_equal(e2e_str(j, "msgId"), id);
    assert_string_equal(e2e_str(j, "body"), "second");
    json_decref(j);
    free(out);
    out = ADMIN_FAILS(c, 1, "queryMsgById", "-i", "nothex");
    assert_contains(out, "INVALID_MSG_ID");
    free(out);

    out = ADMIN_OK(c, "queryMsgByKey", "-t", "T", "-k", "k1");
    assert_contains(out, "msgId");
    assert_contains(out, "TagA");
    assert_contains(out, "k1,k2");
    assert_null(strstr(out, id)); /* the second message has no k1 */
    free(out);
    out = ADMIN_OK(c, "queryMsgByKey", "-t", "T", "-k", "k2", "--json");
    j = parse(out);
    json_t *ms = json_object_get(j, "messages");
    assert_int_equal(json_array_size(ms), 2);
    assert_string_equal(e2e_str(json_array_get(ms, 1), "msgId"), id);
    json_decref(j);
    free(out);
    out = ADMIN_FAILS(c, 1, "queryMsgByKey", "-t", "Nope", "-k", "k1");
    assert_contains(out, "TOPIC_NOT_FOUND");
    free(out);
    out = ADMIN_FAILS(c, 1, "sendMessage", "-t", "T", "-p", "x", "-c", "a|b");
    assert_contains(out, "400");
    free(out);
    e2e_stop_ok(c);
}

static void test_admin_groups_and_progress(void **state) {
    E2eCase *c = *state;
    e2e_case_start(c, NULL);
    e2e_create_topic(c, "T", 2);
    char *out = ADMIN_OK(c, "updateSubGroup", "-g", "G", "-r", "3", "-o", "true", "-d", "false");
    assert_contains(out, "created group 'G'");
    assert_row(out, "retryMaxTimes: 3");
    assert_row(out, "orderly: true");
    assert_row(out, "broadcast: false");
    free(out);
    out = ADMIN_OK(c, "updateSubGroup", "-g", "G", "-q", "2", "-s", "false", "--json");
    json_t *j = parse(out);
    assert_string_equal(e2e_str(j, "name"), "G");
    assert_int_equal(e2e_num(j, "retryMaxTimes"), 3);
    assert_int_equal(e2e_num(j, "retryQueueNums"), 2);
    assert_true(json_is_false(json_object_get(j, "consumeEnable")));
    json_decref(j);
    free(out);
    out = ADMIN_FAILS(c, 1, "updateSubGroup", "-g", "G", "-r", "5000");
    assert_contains(out, "INVALID_FIELD");
    free(out);

    for (int i = 0; i < 3; i++) {
        json_decref(e2e_call(c, "POST", "/v1/topics/T/messages", E2E_JSON,
                             "{\"body\":\"m\",\"queueId\":0}", 200));
    }
    e2e_wait_queue(c, "T", 0, 3);
    json_decref(e2e_call(c, "PUT", "/v1/groups/G/offsets", E2E_JSON,
                         "{\"offsets\":[{\"topic\":\"T\",\"queueId\":0,\"offset\":1}]}", 200));

    out = ADMIN_OK(c, "consumerProgress", "-g", "G", "-t", "T");
    assert_row(out, "topic queueId brokerOffset consumerOffset lag inflight lastTimestamp");
    assert_row_prefix(out, "T 0 3 1 2 0"); /* then the time of the last message */
    assert_int_equal(field_col(out, "T ", 4), field_col(out, "topic ", 4));
    assert_row(out, "T 1 0 0 0 0 -");
    assert_row(out, "totalLag: 2");
    free(out);
    out = ADMIN_OK(c, "consumerProgress", "-g", "G", "--json");
    j = parse(out);
    assert_string_equal(e2e_str(j, "group"), "G");
    assert_int_equal(e2e_num(j, "totalLag"), 2);
    json_t *t0 = json_array_get(json_object_get(j, "topics"), 0);
    assert_string_equal(e2e_str(t0, "topic"), "T");
    json_t *q0 = json_array_get(json_object_get(t0, "queues"), 0);
    assert_int_equal(e2e_num(q0, "brokerOffset"), 3);
    assert_int_equal(e2e_num(q0, "consumerOffset"), 1);
    assert_int_equal(e2e_num(q0, "lag"), 2);
    json_decref(j);
    free(out);
    out = ADMIN_OK(c, "consumerProgress", "-g", "G");
    assert_row(out, "totalLag: 2");
    free(out);

    out = ADMIN_OK(c, "deleteSubGroup", "-g", "G");
    assert_contains(out, "deleted group 'G'");
    free(out);
    char *msg = server_message(c, "/v1/groups/G/progress");
    out = ADMIN_FAILS(c, 1, "consumerProgress", "-g", "G");
    assert_contains(out, msg);
    assert_contains(out, "404");
    free(out);
    free(msg);
    out = ADMIN_FAILS(c, 1, "deleteSubGroup", "-g", "G");
    assert_contains(out, "GROUP_NOT_FOUND");
    free(out);
    e2e_stop_ok(c);
}

static void test_admin_broker_status(void **state) {
    E2eCase *c = *state;
    e2e_case_start(c, NULL);
    char *out = ADMIN_OK(c, "brokerStatus");
    assert_row(out, "brokerName: broker-a");
    assert_row(out, "mode: standalone");
    assert_row(out, "store.writable: true");
    assert_contains(out, "commitLog.writeOffset:");
    free(out);
    out = ADMIN_OK(c, "brokerStatus", "--json");
    json_t *j = parse(out);
    assert_string_equal(e2e_str(j, "brokerName"), "broker-a");
    assert_non_null(json_object_get(j, "commitLog"));
    json_decref(j);
    free(out);

    /* PETREL_ADDR names the broker when -b is absent. */
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", c->srv.port);
    setenv("PETREL_ADDR", addr, 1);
    const char *args[] = {"admin", "brokerStatus", "--json", NULL};
    int st = e2e_run(args, &out);
    unsetenv("PETREL_ADDR");
    if (st != 0) fprintf(stderr, "%s", out);
    assert_int_equal(st, 0);
    j = parse(out);
    assert_string_equal(e2e_str(j, "mode"), "standalone");
    json_decref(j);
    free(out);
    e2e_stop_ok(c);
}

/* How many lines of 'out' contain 's'. */
static int count_lines(const char *out, const char *s) {
    int n = 0;
    for (const char *line = out; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        const char *hit = strstr(line, s);
        if (hit && hit < line + len) n++;
        line = end ? end + 1 : NULL;
    }
    return n;
}

static void test_admin_topic_route(void **state) {
    E2eCase *c = *state;
    e2e_case_start(c, NULL);
    e2e_create_topic(c, "T", 3);
    char *out = ADMIN_OK(c, "topicRoute", "-t", "T", "--json");
    json_t *route = parse(out);
    free(out);
    assert_null(json_object_get(route, "topic")); /* the route, not the whole topic */
    json_t *bd = json_array_get(json_object_get(route, "brokerDatas"), 0);
    assert_string_equal(e2e_str(bd, "cluster"), "DefaultCluster");
    assert_string_equal(e2e_str(bd, "brokerName"), "broker-a");
    const char *addr = e2e_str(json_object_get(bd, "brokerAddrs"), "0");
    assert_non_null(addr);
    json_t *qd = json_array_get(json_object_get(route, "queueDatas"), 0);
    assert_int_equal(e2e_num(qd, "readQueueNums"), 3);
    assert_int_equal(e2e_num(qd, "writeQueueNums"), 3);

    out = ADMIN_OK(c, "topicRoute", "-t", "T");
    assert_row(out, "brokerDatas:");
    assert_row(out, "cluster brokerName brokerId address");
    char row[160];
    snprintf(row, sizeof(row), "DefaultCluster broker-a 0 %s", addr);
    assert_row(out, row);
    assert_row(out, "queueDatas:");
    assert_row(out, "brokerName readQueueNums writeQueueNums perm");
    assert_row(out, "broker-a 3 3 RW");
    free(out);
    /* -n (the name server: standalone serves it) works as -b does. */
    out = ADMIN_N(c, 0, "topicRoute", "-t", "T");
    assert_row(out, row);
    free(out);
    json_decref(route);

    out = ADMIN_FAILS(c, 1, "topicRoute", "-t", "Nope");
    assert_refused(c, out, "/v1/topics/Nope", "(HTTP 404 TOPIC_NOT_FOUND)");
    out = ADMIN_FAILS(c, 1, "topicRoute", "-t", "Nope", "--json");
    assert_refused(c, out, "/v1/topics/Nope", "(HTTP 404 TOPIC_NOT_FOUND)");
    out = ADMIN_FAILS(c, 2, "topicRoute");
    assert_contains(out, "missing required flag '-t'");
    free(out);
    e2e_stop_ok(c);
}

static void test_admin_cluster_list(void **state) {
    E2eCase *c = *state;
    e2e_case_start(c, NULL);
    char *out = ADMIN_OK(c, "clusterList", "--json");
    json_t *j = parse(out);
    free(out);
    json_t *cl = json_array_get(json_object_get(j, "clusters"), 0);
    assert_string_equal(e2e_str(cl, "clusterName"), "DefaultCluster");
    json_t *bg = json_array_get(json_object_get(cl, "brokerGroups"), 0);
    assert_string_equal(e2e_str(bg, "brokerName"), "broker-a");
    json_t *b = json_array_get(json_object_get(bg, "brokers"), 0);
    assert_int_equal(e2e_num(b, "brokerId"), 0);
    assert_string_equal(e2e_str(b, "role"), "ASYNC_MASTER");
    assert_non_null(e2e_str(b, "address"));
    assert_non_null(e2e_str(b, "version"));
    assert_true(e2e_num(b, "lastHeartbeat") > 0);
    char row[200];
    snprintf(row, sizeof(row), "DefaultCluster broker-a 0 ASYNC_MASTER %s %s",
             e2e_str(b, "address"), e2e_str(b, "version"));

    out = ADMIN_OK(c, "clusterList");
    assert_row(out, "cluster brokerName brokerId role address version produceTps consumeTps"
                    " lastHeartbeat");
    assert_row_prefix(out, row); /* then the rates and the heartbeat's local time */
    assert_int_equal(count_lines(out, "DefaultCluster"), 1);
    assert_contains(out, "."); /* rates with two decimals */
    free(out);
    out = ADMIN_N(c, 0, "clusterList");
    assert_row_prefix(out, row);
    free(out);
    json_decref(j);
    e2e_stop_ok(c);
}

/* Local time 'ms' as mqadmin's yyyy-MM-dd#HH:mm:ss:SSS into 'buf'. */
static void mqadmin_time(long long ms, char *buf, size_t cap) {
    time_t secs = (time_t)(ms / 1000);
    struct tm tm;
    assert_non_null(localtime_r(&secs, &tm));
    char day[32];
    assert_true(strftime(day, sizeof(day), "%Y-%m-%d#%H:%M:%S", &tm) > 0);
    snprintf(buf, cap, "%s:%03d", day, (int)(ms % 1000));
}

static void test_admin_reset_offset_by_time(void **state) {
    E2eCase *c = *state;
    e2e_case_start(c, NULL);
    e2e_create_topic(c, "T", 2);
    json_decref(e2e_call(c, "PUT", "/v1/groups/G", E2E_JSON, "{}", 201));
    const char *q0 = "{\"body\":\"m\",\"queueId\":0}";
    json_decref(e2e_call(c, "POST", "/v1/topics/T/messages", E2E_JSON, q0, 200));
    json_decref(e2e_call(c, "POST", "/v1/topics/T/messages", E2E_JSON, q0, 200));
    json_decref(e2e_call(c, "POST", "/v1/topics/T/messages", E2E_JSON,
                         "{\"body\":\"m\",\"queueId\":1}", 200));
    e2e_sleep_ms(50);
    char when[40];
    mqadmin_time(e2e_wall_ms(), when, sizeof(when));
    e2e_sleep_ms(50);
    json_decref(e2e_call(c, "POST", "/v1/topics/T/messages", E2E_JSON, q0, 200));
    e2e_wait_queue(c, "T", 0, 3);

    char *out = ADMIN_OK(c, "resetOffsetByTime", "-g", "G", "-t", "T", "-s", "0");
    assert_row(out, "topic queueId offset");
    assert_row(out, "T 0 0");
    assert_row(out, "T 1 0");
    free(out);
    /* Local time: queue 0's third message is the first at or after it. */
    out = ADMIN_OK(c, "resetOffsetByTime", "-g", "G", "-t", "T", "-s", when);
    assert_row(out, "T 0 2");
    assert_row(out, "T 1 1");
    free(out);
    out = ADMIN_OK(c, "resetOffsetByTime", "-g", "G", "-t", "T", "-s", "now", "--json");
    json_t *j = parse(out);
    assert_int_equal(json_array_size(j), 2);
    assert_string_equal(e2e_str(json_array_get(j, 0), "topic"), "T");
    assert_int_equal(e2e_num(json_array_get(j, 0), "offset"), 3);
    assert_int_equal(e2e_num(json_array_get(j, 1), "offset"), 1);
    json_decref(j);
    free(out);
    out = ADMIN_OK(c, "consumerProgress", "-g", "G", "-t", "T");
    assert_row(out, "totalLag: 0");
    free(out);

    out = ADMIN_FAILS(c, 1, "resetOffsetByTime", "-g", "G", "-t", "Nope", "-s", "now");
    assert_refused(c, out, "/v1/topics/Nope", "(HTTP 404 TOPIC_NOT_FOUND)");
    const char *bad[] = {"yesterday", "-5", "2026-02-30#10:00:00:000", "2026-01-01 10:00:00",
                         "2026-01-01#10:00:00", "2026-01-01#10:00:00:0000"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        out = ADMIN_FAILS(c, 2, "resetOffsetByTime", "-g", "G", "-t", "T", "-s", bad[i]);
        assert_contains(out, "usage: petrel admin resetOffsetByTime");
        assert_contains(out, bad[i]);
        free(out);
    }
    out = ADMIN_FAILS(c, 2, "resetOffsetByTime", "-t", "T", "-s", "now");
    assert_contains(out, "missing required flag '-g'");
    free(out);
    e2e_stop_ok(c);
}

static void test_admin_consume_message(void **state) {
    E2eCase *c = *state;
    const char *const extra[] = {"--autoCreateSubscriptionGroup=false", NULL};
    e2e_case_start(c, extra);
    e2e_create_topic(c, "T", 1);
    json_decref(e2e_call(c, "PUT", "/v1/groups/G", E2E_JSON, "{}", 201));
    const char *long_body = "0123456789012345678901234567890123456789-and-the-rest";
    char *out = ADMIN_OK(c, "sendMessage", "-t", "T", "-p", long_body, "-c", "TagA", "-k", "k1,k2");
    free(out);
    out = ADMIN_OK(c, "sendMessage", "-t", "T", "-p", "two");
    free(out);
    out = ADMIN_OK(c, "sendMessage", "-t", "T", "-p", "three", "-c", "TagC");
    free(out);
    e2e_wait_queue(c, "T", 0, 3);

    out = ADMIN_OK(c, "consumeMessage", "-t", "T", "-g", "G", "-c", "2", "-w", "2000");
    assert_row(out, "msgId queueId queueOffset tags keys body");
    assert_contains(out, "TagA  k1,k2  0123456789012345678901234567890123456789...\n");
    assert_null(strstr(out, "and-the-rest"));
    assert_contains(out, "two");
    assert_null(strstr(out, "three"));
    free(out);
    out = ADMIN_OK(c, "consumeMessage", "-t", "T", "-g", "G", "-c", "5", "-w", "2000", "--json");
    json_t *j = parse(out);
    assert_int_equal(json_array_size(j), 1);
    assert_string_equal(e2e_str(json_array_get(j, 0), "body"), "three");
    assert_int_equal(e2e_num(json_array_get(j, 0), "queueOffset"), 2);
    json_decref(j);
    free(out);
    /* All three were acked: the group's offset moved past them, none in flight. */
    out = ADMIN_OK(c, "consumerProgress", "-g", "G", "-t", "T");
    assert_row_prefix(out, "T 0 3 3 0 0");
    free(out);
    out = ADMIN_OK(c, "consumeMessage", "-t", "T", "-g", "G", "-w", "100");
    assert_row(out, "no message");
    free(out);
    out = ADMIN_OK(c, "consumeMessage", "-t", "T", "-g", "G", "-w", "100", "--json");
    j = parse(out);
    assert_int_equal(json_array_size(j), 0);
    json_decref(j);
    free(out);
    /* The whole body in --json. */
    json_decref(e2e_call(c, "POST", "/v1/topics/T/messages", E2E_JSON,
                         "{\"body\":\"0123456789012345678901234567890123456789-and-the-rest\"}",
                         200));
    out = ADMIN_OK(c, "consumeMessage", "-t", "T", "-g", "G", "--json");
    j = parse(out);
    assert_string_equal(e2e_str(json_array_get(j, 0), "body"), long_body);
    json_decref(j);
    free(out);

    out = ADMIN_FAILS(c, 1, "consumeMessage", "-t", "T", "-g", "Nope", "-w", "0");
    assert_refused(c, out, "/v1/groups/Nope", "(HTTP 404 GROUP_NOT_FOUND)");
    out = ADMIN_FAILS(c, 1, "consumeMessage", "-t", "Nope", "-g", "G", "-w", "0", "--json");
    assert_refused(c, out, "/v1/topics/Nope", "(HTTP 404 TOPIC_NOT_FOUND)");
    out = ADMIN_FAILS(c, 2, "consumeMessage", "-t", "T");
    assert_contains(out, "missing required flag '-g'");
    free(out);
    out = ADMIN_FAILS(c, 2, "consumeMessage", "-t", "T", "-g", "G", "-c", "1001");
    assert_contains(out, "1..1000");
    free(out);
    out = ADMIN_FAILS(c, 2, "consumeMessage", "-t", "T", "-g", "G", "-w", "soon");
    assert_contains(out, "integer");
    free(out);
    e2e_stop_ok(c);
}

/* -b and -n together: -b wins for a broker command, -n for a name-server
 * one; an unreachable one is named for what it is. */
static void test_admin_broker_and_namesrv_flags(void **state) {
    E2eCase *c = *state;
    e2e_case_start(c, NULL);
    e2e_create_topic(c, "T", 1);
    char good[64];
    snprintf(good, sizeof(good), "127.0.0.1:%d", c->srv.port);
    char *out = ADMIN_RAW(c, 0, "brokerStatus", "-b", good, "-n", "127.0.0.1:1");
    assert_row(out, "brokerName: broker-a");
    free(out);
    out = ADMIN_RAW(c, 1, "brokerStatus", "-n", good, "-b", "127.0.0.1:1");
    assert_contains(out, "cannot reach broker at 127.0.0.1:1");
    free(out);
    out = ADMIN_RAW(c, 0, "-b", "127.0.0.1:1", "-n", good, "topicRoute", "-t", "T");
    assert_row(out, "broker-a 1 1 RW");
    free(out);
    out = ADMIN_RAW(c, 1, "clusterList", "-n", "127.0.0.1:1", "-b", good);
    assert_contains(out, "cannot reach name server at 127.0.0.1:1");
    free(out);
    /* -n alone serves a broker command too. */
    out = ADMIN_N(c, 0, "topicStatus", "-t", "T");
    assert_row(out, "0 0 0 -");
    free(out);
    e2e_stop_ok(c);
}

/* A port nothing listens on: bound, then closed. */
static int closed_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    socklen_t len = sizeof(sa);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    close(fd);
    return ntohs(sa.sin_port);
}

static void test_admin_unreachable_and_usage_errors(void **state) {
    E2eCase *c = *state;
    c->srv.port = closed_port(); /* no server started */
    char *out = ADMIN_FAILS(c, 1, "topicList");
    char want[96];
    snprintf(want, sizeof(want), "cannot reach broker at 127.0.0.1:%d: ", c->srv.port);
    assert_contains(out, want);
    free(out);

    /* The address of the brief: nothing listens on port 1. */
    const char *cmds[][7] = {{"consumeMessage", "-t", "T", "-g", "G", NULL},
                             {"resetOffsetByTime", "-t", "T", "-g", "G", "-s", "now"},
                             {"topicRoute", "-t", "T", NULL},
                             {"clusterList", NULL}};
    for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
        const char *args[12] = {"admin"};
        size_t n = 1;
        for (size_t k = 0; k < 7 && cmds[i][k]; k++) args[n++] = cmds[i][k];
        args[n++] = "-b";
        args[n++] = "127.0.0.1:1";
        assert_int_equal(e2e_run(args, &out), 1);
        assert_contains(out, "cannot reach broker at 127.0.0.1:1: ");
        free(out);
    }

    out = ADMIN_FAILS(c, 2, "noSuchCommand");
    assert_contains(out, "unknown command 'noSuchCommand'");
    assert_contains(out, "usage: petrel admin");
    free(out);
    out = ADMIN_FAILS(c, 2, "topicStatus");
    assert_contains(out, "missing required flag '-t'");
    assert_contains(out, "usage: petrel admin topicStatus -t TOPIC");
    free(out);
    out = ADMIN_FAILS(c, 2, "queryMsgByKey", "-t", "T");
    assert_contains(out, "'-k'");
    free(out);
    out = ADMIN_FAILS(c, 2, "topicList", "-z", "1");
    assert_contains(out, "unknown flag or argument '-z'");
    free(out);
    out = ADMIN_FAILS(c, 2, "updateTopic", "-t", "T", "-o", "maybe");
    assert_contains(out, "usage:");
    free(out);
    out = ADMIN_FAILS(c, 2, "updateTopic", "-t", "T", "-r", "x");
    assert_contains(out, "integer");
    free(out);
    out = ADMIN_FAILS(c, 2, "updateTopic", "-t", "T", "-r", "2", "-w", "3");
    assert_contains(out, "usage:");
    free(out);
    const char *no_value[] = {"admin", "deleteTopic", "-t", NULL};
    assert_int_equal(e2e_run(no_value, &out), 2);
    assert_contains(out, "missing value after '-t'");
    free(out);

    const char *help[] = {"admin", "help", NULL};
    assert_int_equal(e2e_run(help, &out), 0);
    const char *names[] = {"updateTopic", "deleteTopic", "topicList", "topicStatus",
                           "updateSubGroup", "deleteSubGroup", "consumerProgress",
                           "queryMsgById", "queryMsgByKey", "sendMessage", "brokerStatus",
                           "topicRoute", "resetOffsetByTime", "clusterList", "consumeMessage",
                           "-n HOST:PORT"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) assert_contains(out, names[i]);
    free(out);
    const char *bare[] = {"admin", NULL};
    assert_int_equal(e2e_run(bare, &out), 2);
    assert_contains(out, "consumerProgress");
    free(out);
    const char *one[] = {"admin", "sendMessage", "--help", NULL};
    assert_int_equal(e2e_run(one, &out), 0);
    assert_contains(out, "usage: petrel admin sendMessage -t TOPIC -p BODY");
    free(out);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_admin_topic_commands, setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_admin_send_and_query, setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_admin_groups_and_progress, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_admin_broker_status, setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_admin_topic_route, setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_admin_cluster_list, setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_admin_reset_offset_by_time, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_admin_consume_message, setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_admin_broker_and_namesrv_flags, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_admin_unreachable_and_usage_errors, setup,
                                        e2e_case_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
