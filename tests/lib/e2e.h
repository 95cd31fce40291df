/*
 * e2e.h - end-to-end helpers: start the real petrel binary on a free
 * port with its data in a test's temporary directory, talk HTTP to it with
 * libcurl, stop it with SIGTERM or kill -9.  Every wait is bounded.
 *
 * The binary is $PETREL_BIN (default bin/petrel); the console files are
 * $PETREL_WEB_ROOT (default ./web when it exists), passed as --webRoot.
 * It includes testutil.h (cmocka) for the test programs; a program without
 * cmocka (a benchmark) defines E2E_NO_CMOCKA before including it and gets
 * everything but the cmocka case helpers at the end.
 */
#ifndef PETREL_E2E_H
#define PETREL_E2E_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#ifndef E2E_NO_CMOCKA
#include "testutil.h" /* cmocka, for the static inline case helpers */
#endif

#define E2E_WAIT_MS 10000 /* start (port file) and stop (exit) deadlines */

typedef struct E2eServer {
    pid_t pid;           /* running child, 0 = none */
    char dir[1024];      /* the test's directory (given to e2e_start) */
    char data[1100];     /* <dir>/data */
    char port_file[1100];/* <dir>/port */
    char log[1100];      /* <dir>/server.log: the child's stdout and stderr */
    int port;            /* bound port */
    char base[64];       /* "http://127.0.0.1:<port>" */
} E2eServer;

/* e2e_bin returns the binary under test ($PETREL_BIN or "bin/petrel"). */
const char *e2e_bin(void);

/* e2e_start runs `petrel standalone --listen 127.0.0.1:0 --data <dir>/data
 * --port-file <dir>/port` with small store files (1 MiB commit log
 * segments, small queue and index files), --webRoot, then 'extra' (NULL or
 * a NULL-terminated list; later flags win), and waits for the port file.
 * Returns 0, or -1 when the child exits or the wait times out (the child
 * is then killed; its log stays in <dir>/server.log). */
int e2e_start(E2eServer *s, const char *dir, const char *const *extra);

/* e2e_start_cmd is e2e_start with another server command ("broker"). */
int e2e_start_cmd(E2eServer *s, const char *dir, const char *cmd, const char *const *extra);

/* e2e_stop sends SIGTERM and waits up to E2E_WAIT_MS for the exit, then
 * kill -9.  Returns the exit status (0..255), 128 + signal number when the
 * child died of a signal, or -1 if none was running. */
int e2e_stop(E2eServer *s);

/* e2e_kill9 kills the child with SIGKILL and reaps it. */
void e2e_kill9(E2eServer *s);

typedef struct E2eRequest {
    const char *method;       /* "GET" when NULL */
    const char *path;         /* sent as is: no dot-segment squashing */
    const void *body;         /* NULL = no body */
    size_t body_len;
    bool chunked;             /* send the body with Transfer-Encoding: chunked */
    const char *content_type; /* Content-Type header, or NULL */
    const char *const *headers; /* more "Name: value" lines, NULL-terminated; or NULL */
} E2eRequest;

typedef struct E2eResponse {
    long status;    /* HTTP status, 0 when the transfer failed */
    char *body;     /* NUL-terminated copy of the body (malloc'd) */
    size_t len;     /* body bytes */
    char *headers;  /* header lines of the final response (malloc'd) */
    int curl_code;  /* CURLcode of the transfer */
} E2eResponse;

/* e2e_http performs 'req' against 's' and fills 'out' (free it with
 * e2e_response_free).  Returns 0 when a response arrived, else -1 ('out'
 * then holds only curl_code: nothing to free).
 * When $PETREL_E2E_RECORD names a file, every exchange that got a response
 * is appended to it as one JSON line {"method","path","status",
 * "contentType","body"} (plus the request's Content-Type and the start of
 * its body), for tests/schema/validate.mjs to check against openapi.yaml;
 * every helper below goes through here. */
int e2e_http(const E2eServer *s, const E2eRequest *req, E2eResponse *out);

/* e2e_get is e2e_http with a GET of 'path'. */
int e2e_get(const E2eServer *s, const char *path, E2eResponse *out);

/* e2e_send is e2e_http with 'method', 'path', a Content-Type (NULL: none)
 * and the NUL-terminated 'body' (NULL: no body). */
int e2e_send(const E2eServer *s, const char *method, const char *path, const char *content_type,
             const char *body, E2eResponse *out);

/* A request running on its own thread (long polls, requests a test wants
 * to see suspended): start it, watch 'done', join it. */
typedef struct E2eCall {
    const E2eServer *srv;
    const char *method;
    char path[256];
    char body[256];     /* JSON body, "" = none */
    long long start_ms; /* e2e_now_ms() just before the request was sent */
    long long end_ms;   /* when the answer had arrived */
    long status;        /* HTTP status, 0 when the transfer failed */
    json_t *json;       /* the answer's body (owned), NULL when empty */
    atomic_bool done;   /* the answer arrived */
    pthread_t th;
} E2eCall;

/* e2e_call_start sends 'method' to the path printed from 'fmt' with the
 * JSON 'body' (NULL: none) on a new thread.  Returns pthread_create's. */
int e2e_call_start(E2eCall *c, const E2eServer *s, const char *method, const char *body,
                   const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* e2e_call_join waits for the answer; c->json stays the caller's. */
void e2e_call_join(E2eCall *c);

/* e2e_header copies the value of header 'name' (case-insensitive) of 'r'
 * into 'buf'; returns 'buf', or NULL when absent. */
const char *e2e_header(const E2eResponse *r, const char *name, char *buf, size_t cap);

void e2e_response_free(E2eResponse *r);

/* e2e_json parses the body of 'r' as JSON (caller owns; json_decref), or
 * prints it and returns NULL when it is not JSON. */
json_t *e2e_json(const E2eResponse *r);

/* e2e_read_port reads the port that a server wrote to its --port-file
 * 'path': the port, or 0 while the file is missing or partial. */
int e2e_read_port(const char *path);

/* e2e_exit_status decodes a waitpid() status word as e2e_stop reports it:
 * the exit status (0..255), 128 + signal number, or -1. */
int e2e_exit_status(int ws);

/* e2e_run runs the binary with 'args' (NULL-terminated, after argv[0]) to
 * completion, at most E2E_WAIT_MS; '*output' gets its stdout and stderr
 * (malloc'd, NUL-terminated).  Returns the exit status as e2e_stop. */
int e2e_run(const char *const *args, char **output);

/* ---- cmocka test cases ----------------------------------------------------
 * One case = one server in its own temporary directory.  e2e_case_start,
 * e2e_call, e2e_expect_error and e2e_wait_queue use cmocka assertions (a
 * failed check fails the running test), so they are static inline at the
 * end of this header: e2e.o is also linked into programs without cmocka
 * (the benchmarks) and must not depend on it. */

#define E2E_JSON "application/json"

typedef struct E2eCase {
    char *dir;     /* the case's temporary directory (malloc'd) */
    E2eServer srv; /* its server; pid 0 until e2e_case_start */
} E2eCase;

/* e2e_case_setup is a cmocka setup: a new E2eCase in '*state' with a fresh
 * directory petrel-<tag>-XXXXXX.  Returns 0, or -1 when out of memory.
 * Use it from a one-line setup function that names the tag. */
int e2e_case_setup(void **state, const char *tag);

/* e2e_case_teardown is a cmocka teardown: kill -9 of the server (if any),
 * removes the directory and frees the case.  Returns 0. */
int e2e_case_teardown(void **state);

/* e2e_case_print_log copies <dir>/server.log to stderr, each line prefixed
 * "server: " (nothing when there is no log). */
void e2e_case_print_log(const E2eCase *c);

/* e2e_sleep_ms sleeps 'ms' milliseconds. */
void e2e_sleep_ms(int ms);

/* e2e_now_ms is the monotonic clock in milliseconds (for durations). */
long long e2e_now_ms(void);

/* e2e_wall_ms is the real-time clock in milliseconds since the epoch
 * (comparable with the server's timestamps). */
long long e2e_wall_ms(void);

/* e2e_num is the integer member 'k' of object 'o' (0 when absent or not
 * an integer; 'o' may be NULL). */
long long e2e_num(const json_t *o, const char *k);

/* e2e_str is the string member 'k' of object 'o' (borrowed from 'o'; NULL
 * when absent or not a string; 'o' may be NULL). */
const char *e2e_str(const json_t *o, const char *k);

#ifndef E2E_NO_CMOCKA
/* e2e_case_start starts the case's server (e2e_start with 'extra') and
 * asserts that it started; prints the server's log when it did not. */
static inline void e2e_case_start(E2eCase *c, const char *const *extra) {
    int rc = e2e_start(&c->srv, c->dir, extra);
    if (rc != 0) e2e_case_print_log(c);
    assert_int_equal(rc, 0);
}

/* e2e_call sends 'method' 'path' with the Content-Type 'content_type'
 * (NULL: none) and the NUL-terminated 'body' (NULL: none), asserts the
 * answer's status is 'expected_status' (printing the answer otherwise) and
 * returns the parsed JSON body: owned by the caller (json_decref), NULL
 * when the body is empty; a non-empty body that is not JSON fails. */
static inline json_t *e2e_call(E2eCase *c, const char *method, const char *path,
                               const char *content_type, const char *body,
                               long expected_status) {
    E2eResponse r;
    assert_int_equal(e2e_send(&c->srv, method, path, content_type, body, &r), 0);
    if (r.status != expected_status) {
        fprintf(stderr, "%s %s: %ld %.*s\n", method, path, r.status, (int)r.len, r.body);
    }
    assert_int_equal(r.status, expected_status);
    json_t *root = r.len ? e2e_json(&r) : NULL;
    if (r.len) assert_non_null(root);
    e2e_response_free(&r);
    return root;
}

/* e2e_expect_error sends the request as e2e_call does and asserts the
 * API.md error answer: HTTP status 'status', a JSON body whose "error" has
 * "code" 'code', "status" 'status' and a non-empty "message".  Prints the
 * answer when the status or the code differ. */
static inline void e2e_expect_error(E2eCase *c, const char *method, const char *path,
                                    const char *content_type, const char *body, long status,
                                    const char *code) {
    E2eResponse r;
    assert_int_equal(e2e_send(&c->srv, method, path, content_type, body, &r), 0);
    json_t *root = e2e_json(&r);
    json_t *err = json_object_get(root, "error");
    const char *got = json_string_value(json_object_get(err, "code"));
    if (r.status != status || !got || strcmp(got, code) != 0) {
        fprintf(stderr, "%s %s %.100s: %ld %.*s\n", method, path, body ? body : "", r.status,
                (int)r.len, r.body);
    }
    assert_int_equal(r.status, status);
    assert_non_null(root);
    assert_non_null(got);
    assert_string_equal(got, code);
    assert_int_equal(json_integer_value(json_object_get(err, "status")), status);
    assert_true(strlen(json_string_value(json_object_get(err, "message"))) > 0);
    json_decref(root);
    e2e_response_free(&r);
}

/* e2e_create_topic creates 'topic' with 'queues' queues (PUT, expects 201). */
static inline void e2e_create_topic(E2eCase *c, const char *topic, int queues) {
    char path[160];
    char body[64];
    snprintf(path, sizeof(path), "/v1/topics/%s", topic);
    snprintf(body, sizeof(body), "{\"queues\":%d}", queues);
    json_decref(e2e_call(c, "PUT", path, E2E_JSON, body, 201));
}

/* e2e_wait_queue waits (up to 5 s) until queue 'q' of 'topic' has a
 * maxOffset of at least 'n' (the messages are dispatched); fails the test
 * otherwise. */
static inline void e2e_wait_queue(E2eCase *c, const char *topic, int q, long long n) {
    char path[256];
    snprintf(path, sizeof(path), "/v1/topics/%s/queues", topic);
    for (int tries = 0; tries < 500; tries++) {
        json_t *qs = e2e_call(c, "GET", path, NULL, NULL, 200);
        long long max = e2e_num(json_array_get(qs, (size_t)q), "maxOffset");
        json_decref(qs);
        if (max >= n) return;
        e2e_sleep_ms(10);
    }
    fail_msg("queue %s/%d never reached %lld messages", topic, q, n);
}
/* e2e_stop_ok stops the case's server with SIGTERM and asserts exit status
 * 0 (printing its log otherwise). */
static inline void e2e_stop_ok(E2eCase *c) {
    int st = e2e_stop(&c->srv);
    if (st != 0) e2e_case_print_log(c);
    assert_int_equal(st, 0);
}

/* e2e_check_data runs `petrel check` on the case's data directory (the
 * server stopped) and asserts exit 0, printing its output otherwise. */
static inline void e2e_check_data(E2eCase *c) {
    const char *args[] = {"check", c->srv.data, NULL};
    char *out = NULL;
    int st = e2e_run(args, &out);
    if (st != 0) fprintf(stderr, "petrel check %s: exit %d\n%s", c->srv.data, st, out);
    assert_int_equal(st, 0);
    free(out);
}

/* e2e_metric is the value of the unlabelled sample 'name' on /metrics
 * (-1 when missing). */
static inline long long e2e_metric(E2eCase *c, const char *name) {
    E2eResponse mr;
    assert_int_equal(e2e_get(&c->srv, "/metrics", &mr), 0);
    assert_int_equal(mr.status, 200);
    char key[128];
    snprintf(key, sizeof(key), "\n%s ", name);
    const char *p = strstr(mr.body, key);
    long long v = p ? strtoll(p + strlen(key), NULL, 10) : -1;
    e2e_response_free(&mr);
    return v;
}

/* e2e_metric_until waits up to ~1 s (the store dispatches queue entries
 * in the background) for 'name' to read 'want'; returns what it read last. */
static inline long long e2e_metric_until(E2eCase *c, const char *name, long long want) {
    long long v = -1;
    for (int i = 0; i < 100 && (v = e2e_metric(c, name)) != want; i++) e2e_sleep_ms(10);
    return v;
}
#endif /* E2E_NO_CMOCKA */

#endif
