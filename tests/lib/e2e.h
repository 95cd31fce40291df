/*
 * e2e.h - end-to-end helpers: start the real petrel binary on a free
 * port with its data in a test's temporary directory, talk HTTP to it with
 * libcurl, stop it with SIGTERM or kill -9.  Every wait is bounded.
 *
 * The binary is $PETREL_BIN (default bin/petrel); the console files are
 * $PETREL_WEB_ROOT (default ./web when it exists), passed as --webRoot.
 */
#ifndef PETREL_E2E_H
#define PETREL_E2E_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

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
} E2eRequest;

typedef struct E2eResponse {
    long status;    /* HTTP status, 0 when the transfer failed */
    char *body;     /* NUL-terminated copy of the body (malloc'd) */
    size_t len;     /* body bytes */
    char *headers;  /* header lines of the final response (malloc'd) */
    int curl_code;  /* CURLcode of the transfer */
} E2eResponse;

/* e2e_http performs 'req' against 's' and fills 'out' (free it with
 * e2e_response_free).  Returns 0 when a response arrived, else -1. */
int e2e_http(const E2eServer *s, const E2eRequest *req, E2eResponse *out);

/* e2e_get is e2e_http with a GET of 'path'. */
int e2e_get(const E2eServer *s, const char *path, E2eResponse *out);

/* e2e_send is e2e_http with 'method', 'path', a Content-Type (NULL: none)
 * and the NUL-terminated 'body' (NULL: no body). */
int e2e_send(const E2eServer *s, const char *method, const char *path, const char *content_type,
             const char *body, E2eResponse *out);

/* e2e_header copies the value of header 'name' (case-insensitive) of 'r'
 * into 'buf'; returns 'buf', or NULL when absent. */
const char *e2e_header(const E2eResponse *r, const char *name, char *buf, size_t cap);

void e2e_response_free(E2eResponse *r);

struct json_t;

/* e2e_json parses the body of 'r' as JSON (caller owns; json_decref), or
 * prints it and returns NULL when it is not JSON. */
struct json_t *e2e_json(const E2eResponse *r);

/* e2e_run runs the binary with 'args' (NULL-terminated, after argv[0]) to
 * completion, at most E2E_WAIT_MS; '*output' gets its stdout and stderr
 * (malloc'd, NUL-terminated).  Returns the exit status as e2e_stop. */
int e2e_run(const char *const *args, char **output);

#endif
