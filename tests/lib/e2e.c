/*
 * e2e.c - see e2e.h.  Processes are handled by pid only; every wait has a
 * deadline so that a hung server fails a test instead of the whole run.
 */
#define _GNU_SOURCE
#include "e2e.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#define MAX_ARGS 64

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

void e2e_sleep_ms(int ms) {
    sleep_ms(ms);
}

long long e2e_now_ms(void) {
    return now_ms();
}

long long e2e_wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

const char *e2e_bin(void) {
    const char *b = getenv("PETREL_BIN");
    return b && *b ? b : "bin/petrel";
}

int e2e_exit_status(int ws) {
    if (WIFEXITED(ws)) return WEXITSTATUS(ws);
    if (WIFSIGNALED(ws)) return 128 + WTERMSIG(ws);
    return -1;
}

/* Waits up to 'ms' for 'pid'; the status, or -2 if it is still running. */
static int wait_for(pid_t pid, int ms) {
    long long deadline = now_ms() + ms;
    for (;;) {
        int ws = 0;
        pid_t r = waitpid(pid, &ws, WNOHANG);
        if (r == pid) return e2e_exit_status(ws);
        if (r < 0 && errno != EINTR) return -1;
        if (now_ms() >= deadline) return -2;
        sleep_ms(10);
    }
}

/* fork + exec of the binary with 'argv' (argv[0] included); the child's
 * stdout and stderr go to 'out_fd'. */
static pid_t spawn(char *const *argv, int out_fd) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid != 0) return pid;
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    dup2(out_fd, STDOUT_FILENO);
    dup2(out_fd, STDERR_FILENO);
    execv(argv[0], argv);
    fprintf(stderr, "e2e: cannot run '%s': %s\n", argv[0], strerror(errno));
    _exit(127);
}

static const char *web_root(void) {
    static char buf[PATH_MAX];
    const char *w = getenv("PETREL_WEB_ROOT");
    if (w && *w) return w;
    return realpath("web", buf) ? buf : NULL;
}

int e2e_read_port(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int port = 0;
    if (fscanf(f, "%d", &port) != 1) port = 0;
    fclose(f);
    return port;
}

int e2e_start(E2eServer *s, const char *dir, const char *const *extra) {
    return e2e_start_cmd(s, dir, "standalone", extra);
}

int e2e_start_cmd(E2eServer *s, const char *dir, const char *cmd, const char *const *extra) {
    memset(s, 0, sizeof(*s));
    snprintf(s->dir, sizeof(s->dir), "%s", dir);
    snprintf(s->data, sizeof(s->data), "%s/data", dir);
    snprintf(s->port_file, sizeof(s->port_file), "%s/port", dir);
    snprintf(s->log, sizeof(s->log), "%s/server.log", dir);
    unlink(s->port_file);

    char web[PATH_MAX + 16] = "";
    const char *root = web_root();
    if (root) snprintf(web, sizeof(web), "--webRoot=%s", root);
    const char *argv[MAX_ARGS];
    int n = 0;
    argv[n++] = e2e_bin();
    argv[n++] = cmd;
    argv[n++] = "--listen";
    argv[n++] = "127.0.0.1:0";
    argv[n++] = "--data";
    argv[n++] = s->data;
    argv[n++] = "--port-file";
    argv[n++] = s->port_file;
    argv[n++] = "--mappedFileSizeCommitLog=1m";
    argv[n++] = "--mappedFileSizeConsumeQueue=6000";
    argv[n++] = "--maxHashSlotNum=1024";
    argv[n++] = "--maxIndexNum=4096";
    if (root) argv[n++] = web;
    for (size_t i = 0; extra && extra[i] && n < MAX_ARGS - 1; i++) argv[n++] = extra[i];
    argv[n] = NULL;

    int log_fd = open(s->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) {
        fprintf(stderr, "e2e: cannot open '%s': %s\n", s->log, strerror(errno));
        return -1;
    }
    pid_t pid = spawn((char *const *)argv, log_fd);
    close(log_fd);
    if (pid < 0) return -1;
    s->pid = pid;

    long long deadline = now_ms() + E2E_WAIT_MS;
    while (now_ms() < deadline) {
        int port = e2e_read_port(s->port_file);
        if (port > 0) {
            s->port = port;
            snprintf(s->base, sizeof(s->base), "http://127.0.0.1:%d", port);
            return 0;
        }
        int st = wait_for(pid, 0);
        if (st != -2) {
            fprintf(stderr, "e2e: server exited with status %d before listening (see %s)\n",
                    st, s->log);
            s->pid = 0;
            return -1;
        }
        sleep_ms(20);
    }
    fprintf(stderr, "e2e: no port file after %d ms (see %s)\n", E2E_WAIT_MS, s->log);
    e2e_kill9(s);
    return -1;
}

int e2e_stop(E2eServer *s) {
    if (s->pid <= 0) return -1;
    kill(s->pid, SIGTERM);
    int st = wait_for(s->pid, E2E_WAIT_MS);
    if (st == -2) {
        fprintf(stderr, "e2e: server %d ignored SIGTERM for %d ms; killing it\n", (int)s->pid,
                E2E_WAIT_MS);
        kill(s->pid, SIGKILL);
        int ws = 0;
        waitpid(s->pid, &ws, 0);
        st = e2e_exit_status(ws);
    }
    s->pid = 0;
    if (st != 0) { /* show why: the tail of the server's log */
        fprintf(stderr, "e2e: server exited with status %d; end of %s:\n", st, s->log);
        FILE *f = fopen(s->log, "r");
        if (f) {
            char line[512];
            char tail[40][512];
            int n = 0;
            while (fgets(line, sizeof(line), f)) memcpy(tail[n++ % 40], line, sizeof(line));
            for (int i = n > 40 ? n - 40 : 0; i < n; i++) fprintf(stderr, "    %s", tail[i % 40]);
            fclose(f);
        }
    }
    return st;
}

void e2e_kill9(E2eServer *s) {
    if (s->pid <= 0) return;
    kill(s->pid, SIGKILL);
    int ws = 0;
    while (waitpid(s->pid, &ws, 0) < 0 && errno == EINTR) {
    }
    s->pid = 0;
}

/* ---- HTTP ----------------------------------------------------------------*/

typedef struct Buf {
    char *p;
    size_t len;
} Buf;

static void buf_add(Buf *b, const char *data, size_t len) {
    char *np = realloc(b->p, b->len + len + 1);
    if (!np) abort();
    memcpy(np + b->len, data, len);
    b->len += len;
    np[b->len] = '\0';
    b->p = np;
}

static size_t on_body(char *data, size_t size, size_t n, void *arg) {
    buf_add(arg, data, size * n);
    return size * n;
}

/* Keeps only the header block of the last response (after a 100). */
static size_t on_header(char *data, size_t size, size_t n, void *arg) {
    Buf *b = arg;
    if (size * n >= 5 && strncmp(data, "HTTP/", 5) == 0) b->len = 0;
    buf_add(b, data, size * n);
    return size * n;
}

typedef struct Upload {
    const char *p;
    size_t left;
} Upload;

static size_t on_read(char *dst, size_t size, size_t n, void *arg) {
    Upload *u = arg;
    size_t k = size * n < u->left ? size * n : u->left;
    if (k > 65536) k = 65536; /* several chunks */
    memcpy(dst, u->p, k);
    u->p += k;
    u->left -= k;
    return k;
}

/* ---- recording (PETREL_E2E_RECORD) ---------------------------------------*/

/* A JSON string of 'len' bytes at 'p', or, when they are not valid UTF-8,
 * of the same bytes with every byte >= 0x80 percent-encoded ('pct', for
 * paths: equivalent once decoded) or NULL. */
static json_t *record_string(const char *p, size_t len, bool pct) {
    json_t *v = json_stringn(p ? p : "", p ? len : 0);
    if (v || !pct) return v;
    static const char hex[] = "0123456789ABCDEF";
    char *enc = malloc(len * 3 + 1);
    if (!enc) return NULL;
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c >= 0x80) {
            enc[n++] = '%';
            enc[n++] = hex[c >> 4];
            enc[n++] = hex[c & 15];
        } else {
            enc[n++] = (char)c;
        }
    }
    v = json_stringn(enc, n);
    free(enc);
    return v;
}

/* Standard base64 of 'len' bytes at 'p' (malloc'd, NUL-terminated). */
static char *record_base64(const char *p, size_t len) {
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *u = (const unsigned char *)p;
    char *out = malloc((len + 2) / 3 * 4 + 1);
    if (!out) return NULL;
    size_t n = 0;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t w = (uint32_t)u[i] << 16;
        if (i + 1 < len) w |= (uint32_t)u[i + 1] << 8;
        if (i + 2 < len) w |= u[i + 2];
        out[n++] = b64[w >> 18];
        out[n++] = b64[(w >> 12) & 63];
        out[n++] = i + 1 < len ? b64[(w >> 6) & 63] : '=';
        out[n++] = i + 2 < len ? b64[w & 63] : '=';
    }
    out[n] = '\0';
    return out;
}

/* Appends one exchange to the file named by $PETREL_E2E_RECORD, if set, as
 * one JSON line {"method","path","status","contentType","body"} with one
 * write(2) on an O_APPEND descriptor, so that concurrent requests (threads
 * of one test) never interleave.  A body that is not valid UTF-8 is
 * recorded as "bodyBase64" instead.  The request's Content-Type and the
 * first 200 bytes of its body ("requestContentType", "requestBody") help
 * to read a failure.  tests/schema/validate.mjs checks the lines against
 * openapi.yaml.  Failures to record are reported, never fatal. */
static void record_exchange(const char *method, const E2eRequest *req, const E2eResponse *out,
                            const char *content_type) {
    const char *file = getenv("PETREL_E2E_RECORD");
    if (!file || !*file || out->status == 0) return;
    json_t *line = json_object();
    if (!line) return;
    json_object_set_new(line, "method", json_string(method));
    json_object_set_new(line, "path", record_string(req->path, strlen(req->path), true));
    json_object_set_new(line, "status", json_integer(out->status));
    json_object_set_new(line, "contentType",
                        content_type ? json_string(content_type) : json_null());
    json_t *body = record_string(out->body, out->len, false);
    if (body) {
        json_object_set_new(line, "body", body);
    } else {
        char *b64 = record_base64(out->body, out->len);
        json_object_set_new(line, "bodyBase64", json_string(b64 ? b64 : ""));
        free(b64);
    }
    if (req->content_type) {
        json_object_set_new(line, "requestContentType", json_string(req->content_type));
    }
    if (req->body) {
        size_t n = req->body_len < 200 ? req->body_len : 200;
        json_t *rb = json_stringn(req->body, n);
        json_object_set_new(line, "requestBody", rb ? rb : json_string("(binary)"));
    }
    char *text = json_dumps(line, JSON_COMPACT);
    json_decref(line);
    if (!text) return;
    size_t len = strlen(text);
    text[len] = '\n'; /* json_dumps' NUL becomes the newline: one write */
    int fd = open(file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    ssize_t w = fd >= 0 ? write(fd, text, len + 1) : -1;
    if (w != (ssize_t)(len + 1)) {
        fprintf(stderr, "e2e: cannot record to '%s': %s\n", file,
                w < 0 ? strerror(errno) : "short write");
    }
    if (fd >= 0) close(fd);
    free(text);
}

int e2e_http(const E2eServer *s, const E2eRequest *req, E2eResponse *out) {
    memset(out, 0, sizeof(*out));
    static int inited;
    if (!inited) {
        curl_global_init(CURL_GLOBAL_DEFAULT);
        inited = 1;
    }
    CURL *c = curl_easy_init();
    if (!c) return -1;
    char url[2048];
    snprintf(url, sizeof(url), "%s%s", s->base, req->path);
    Buf body = {0};
    Buf hdrs = {0};
    buf_add(&body, "", 0);
    buf_add(&hdrs, "", 0);
    Upload up = {req->body, req->body_len};
    struct curl_slist *hl = NULL;
    const char *method = req->method ? req->method : "GET";

    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)E2E_WAIT_MS);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &hdrs);
    if (req->body) {
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        if (req->chunked) {
            curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
            curl_easy_setopt(c, CURLOPT_READDATA, &up);
            hl = curl_slist_append(hl, "Transfer-Encoding: chunked");
        } else {
            curl_easy_setopt(c, CURLOPT_POSTFIELDS, req->body);
            curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
        }
    }
    if (strcmp(method, "GET") != 0 && !(req->body && strcmp(method, "POST") == 0)) {
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
        if (strcmp(method, "HEAD") == 0) curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    }
    char ct[256];
    if (req->content_type) {
        snprintf(ct, sizeof(ct), "Content-Type: %s", req->content_type);
        hl = curl_slist_append(hl, ct);
    }
    for (size_t i = 0; req->headers && req->headers[i]; i++) {
        hl = curl_slist_append(hl, req->headers[i]);
    }
    if (hl) curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);

    CURLcode rc = curl_easy_perform(c);
    out->curl_code = (int)rc;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
    out->body = body.p;
    out->len = body.len;
    out->headers = hdrs.p;
    char *resp_ct = NULL;
    curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &resp_ct);
    record_exchange(method, req, out, resp_ct); /* before cleanup: 'resp_ct' is curl's */
    curl_slist_free_all(hl);
    curl_easy_cleanup(c);
    if (rc != CURLE_OK && out->status == 0) {
        fprintf(stderr, "e2e: %s %s: %s\n", method, url, curl_easy_strerror(rc));
        int code = out->curl_code;
        e2e_response_free(out); /* no answer: nothing for the caller to free */
        out->curl_code = code;
        return -1;
    }
    return 0;
}

int e2e_get(const E2eServer *s, const char *path, E2eResponse *out) {
    E2eRequest req = {.method = "GET", .path = path};
    return e2e_http(s, &req, out);
}

int e2e_send(const E2eServer *s, const char *method, const char *path, const char *content_type,
             const char *body, E2eResponse *out) {
    E2eRequest req = {.method = method,
                      .path = path,
                      .body = body,
                      .body_len = body ? strlen(body) : 0,
                      .content_type = content_type};
    return e2e_http(s, &req, out);
}

static void *call_main(void *arg) {
    E2eCall *c = arg;
    E2eResponse r;
    c->start_ms = e2e_now_ms();
    int rc = e2e_send(c->srv, c->method, c->path, c->body[0] ? E2E_JSON : NULL,
                      c->body[0] ? c->body : NULL, &r);
    c->end_ms = e2e_now_ms();
    c->status = rc == 0 ? r.status : 0;
    c->json = rc == 0 && r.len ? json_loadb(r.body, r.len, 0, NULL) : NULL;
    if (rc == 0) e2e_response_free(&r);
    atomic_store(&c->done, true);
    return NULL;
}

int e2e_call_start(E2eCall *c, const E2eServer *s, const char *method, const char *body,
                   const char *fmt, ...) {
    memset(c, 0, sizeof(*c));
    c->srv = s;
    c->method = method;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->path, sizeof(c->path), fmt, ap);
    va_end(ap);
    snprintf(c->body, sizeof(c->body), "%s", body ? body : "");
    atomic_init(&c->done, false);
    c->start_ms = e2e_now_ms();
    return pthread_create(&c->th, NULL, call_main, c);
}

void e2e_call_join(E2eCall *c) {
    pthread_join(c->th, NULL);
}

const char *e2e_header(const E2eResponse *r, const char *name, char *buf, size_t cap) {
    size_t nl = strlen(name);
    for (const char *line = r->headers; line && *line;) {
        const char *end = strstr(line, "\r\n");
        size_t len = end ? (size_t)(end - line) : strlen(line);
        if (len > nl && line[nl] == ':' && strncasecmp(line, name, nl) == 0) {
            const char *v = line + nl + 1;
            while (*v == ' ' || *v == '\t') v++;
            size_t vl = (size_t)(line + len - v);
            if (vl >= cap) vl = cap - 1;
            memcpy(buf, v, vl);
            buf[vl] = '\0';
            return buf;
        }
        if (!end) break;
        line = end + 2;
    }
    return NULL;
}

void e2e_response_free(E2eResponse *r) {
    free(r->body);
    free(r->headers);
    memset(r, 0, sizeof(*r));
}

json_t *e2e_json(const E2eResponse *r) {
    json_error_t err;
    json_t *root = json_loadb(r->body ? r->body : "", r->len, 0, &err);
    if (!root) fprintf(stderr, "e2e: not JSON (%s): %.*s\n", err.text, (int)r->len, r->body);
    return root;
}

/* ---- one-shot runs -------------------------------------------------------*/

int e2e_run(const char *const *args, char **output) {
    *output = NULL;
    const char *argv[MAX_ARGS];
    int n = 0;
    argv[n++] = e2e_bin();
    for (size_t i = 0; args[i] && n < MAX_ARGS - 1; i++) argv[n++] = args[i];
    argv[n] = NULL;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return -1;
    pid_t pid = spawn((char *const *)argv, fds[1]);
    close(fds[1]);
    if (pid < 0) {
        close(fds[0]);
        return -1;
    }
    Buf b = {0};
    buf_add(&b, "", 0);
    long long deadline = now_ms() + E2E_WAIT_MS;
    for (;;) {
        long long left = deadline - now_ms();
        if (left <= 0) break;
        struct pollfd pfd = {fds[0], POLLIN, 0};
        int pr = poll(&pfd, 1, (int)left);
        if (pr < 0 && errno == EINTR) continue;
        if (pr <= 0) break;
        char chunk[4096];
        ssize_t k = read(fds[0], chunk, sizeof(chunk));
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        buf_add(&b, chunk, (size_t)k);
    }
    close(fds[0]);
    *output = b.p;
    int st = wait_for(pid, (int)(deadline > now_ms() ? deadline - now_ms() : 0));
    if (st == -2) {
        kill(pid, SIGKILL);
        int ws = 0;
        waitpid(pid, &ws, 0);
        st = e2e_exit_status(ws);
    }
    return st;
}

/* ---- cmocka test cases ---------------------------------------------------*/

int e2e_case_setup(void **state, const char *tag) {
    E2eCase *c = calloc(1, sizeof(*c));
    if (!c) return -1;
    c->dir = tu_mkdtemp(tag);
    *state = c;
    return 0;
}

int e2e_case_teardown(void **state) {
    E2eCase *c = *state;
    e2e_kill9(&c->srv);
    tu_rmtree(c->dir);
    free(c->dir);
    free(c);
    return 0;
}

void e2e_case_print_log(const E2eCase *c) {
    char *log = tu_path(c->dir, "server.log");
    FILE *fp = fopen(log, "r");
    char line[512];
    while (fp && fgets(line, sizeof(line), fp)) fprintf(stderr, "server: %s", line);
    if (fp) fclose(fp);
    free(log);
}

long long e2e_num(const json_t *o, const char *k) {
    return json_integer_value(json_object_get(o, k));
}

const char *e2e_str(const json_t *o, const char *k) {
    return json_string_value(json_object_get(o, k));
}
