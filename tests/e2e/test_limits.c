/*
 * test_limits.c - end-to-end tests of the HTTP limits against a real
 * petrel, over raw sockets (curl would not send such requests): too many
 * headers (431 JSON), a header block larger than a connection's memory,
 * a client that stalls mid-request or idles (closed after
 * httpConnectionTimeout), a Content-Length over the limit (413 before any
 * body byte is sent), a chunked upload over the limit (413, and the
 * broker does not buffer it).  After each, the broker still answers.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "e2e.h"

static int setup(void **state) {
    return e2e_case_setup(state, "e2e-limits");
}

static int connect_to(const E2eCase *f) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)f->srv.port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    return fd;
}

/* Sends all of 'p'; false when the peer closed meanwhile. */
static bool send_all(int fd, const void *p, size_t len) {
    const char *c = p;
    while (len > 0) {
        ssize_t n = send(fd, c, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        c += n;
        len -= (size_t)n;
    }
    return true;
}

/* Reads until the peer closes, 'timeout_ms' passes, or a whole response
 * (headers + Content-Length body) is in 'buf'.  Returns the bytes read;
 * '*closed' says whether the peer closed. */
static size_t read_response(int fd, char *buf, size_t cap, int timeout_ms, bool *closed) {
    size_t len = 0;
    *closed = false;
    long long deadline = e2e_now_ms() + timeout_ms;
    while (len + 1 < cap) {
        long long left = deadline - e2e_now_ms();
        if (left <= 0) break;
        struct pollfd pfd = {fd, POLLIN, 0};
        if (poll(&pfd, 1, (int)left) <= 0) break;
        ssize_t n = recv(fd, buf + len, cap - 1 - len, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            *closed = true;
            break;
        }
        len += (size_t)n;
        buf[len] = '\0';
        const char *end = strstr(buf, "\r\n\r\n");
        const char *cl = strcasestr(buf, "\r\nContent-Length:");
        if (end && cl && cl < end && len >= (size_t)(end + 4 - buf) + strtoul(cl + 17, NULL, 10))
            break;
    }
    buf[len] = '\0';
    return len;
}

/* The status code of a raw response, 0 if none. */
static int status_of(const char *resp) {
    int st = 0;
    return sscanf(resp, "HTTP/1.%*d %d", &st) == 1 ? st : 0;
}

/* Asserts that a raw response is the API.md error body with 'status' and
 * 'code'. */
static void expect_raw_error(const char *resp, int status, const char *code) {
    assert_int_equal(status_of(resp), status);
    const char *body = strstr(resp, "\r\n\r\n");
    assert_non_null(body);
    json_error_t je;
    json_t *root = json_loads(body + 4, 0, &je);
    if (!root) fail_msg("not JSON: %s", body + 4);
    json_t *err = json_object_get(root, "error");
    assert_string_equal(json_string_value(json_object_get(err, "code")), code);
    assert_int_equal(json_integer_value(json_object_get(err, "status")), status);
    json_decref(root);
}

static void expect_healthy(E2eCase *f) {
    json_t *h = e2e_call(f, "GET", "/healthz", NULL, NULL, 200);
    assert_string_equal(e2e_str(h, "status"), "UP");
    json_decref(h);
}

static void test_too_many_headers(void **state) {
    E2eCase *f = *state;
    const char *extra[] = {"--httpMaxHeaders=20", NULL};
    e2e_case_start(f, extra);
    char req[4096];
    size_t n = (size_t)snprintf(req, sizeof(req), "GET /healthz HTTP/1.1\r\nHost: t\r\n");
    for (int i = 0; i < 25; i++) n += (size_t)snprintf(req + n, sizeof(req) - n, "X-H%d: v\r\n", i);
    n += (size_t)snprintf(req + n, sizeof(req) - n, "\r\n");
    int fd = connect_to(f);
    assert_true(send_all(fd, req, n));
    char resp[8192];
    bool closed;
    read_response(fd, resp, sizeof(resp), 5000, &closed);
    close(fd);
    expect_raw_error(resp, 431, "TOO_MANY_HEADERS");
    /* exactly at the limit is fine (Host + 19) */
    n = (size_t)snprintf(req, sizeof(req), "GET /healthz HTTP/1.1\r\nHost: t\r\n");
    for (int i = 0; i < 19; i++) n += (size_t)snprintf(req + n, sizeof(req) - n, "X-H%d: v\r\n", i);
    n += (size_t)snprintf(req + n, sizeof(req) - n, "\r\n");
    fd = connect_to(f);
    assert_true(send_all(fd, req, n));
    read_response(fd, resp, sizeof(resp), 5000, &closed);
    close(fd);
    assert_int_equal(status_of(resp), 200);
    expect_healthy(f);
}

static void test_header_block_over_connection_memory(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    /* One 100 KiB header: more than the 64 KiB a connection may use.
     * libmicrohttpd answers this itself (431, its own body) and closes. */
    size_t big = 100 * 1024;
    char *req = malloc(big + 256);
    assert_non_null(req);
    size_t n = (size_t)sprintf(req, "GET /healthz HTTP/1.1\r\nHost: t\r\nX-Big: ");
    memset(req + n, 'a', big);
    n += big;
    n += (size_t)sprintf(req + n, "\r\n\r\n");
    int fd = connect_to(f);
    send_all(fd, req, n); /* may fail half-way: the server closes early */
    char resp[8192];
    bool closed;
    read_response(fd, resp, sizeof(resp), 5000, &closed);
    close(fd);
    free(req);
    int st = status_of(resp);
    assert_true(st == 431 || st == 0); /* 0: closed before we read the answer */
    expect_healthy(f);
}

static void test_stalled_and_idle_clients_are_closed(void **state) {
    E2eCase *f = *state;
    const char *extra[] = {"--httpConnectionTimeout=1", NULL};
    e2e_case_start(f, extra);
    /* stalled in the middle of the headers */
    int stalled = connect_to(f);
    assert_true(send_all(stalled, "GET /healthz HTTP/1.1\r\nHost: t\r\n", 33));
    /* stalled in the middle of a body */
    int slow_body = connect_to(f);
    const char *partial = "POST /v1/topics/Lim/messages HTTP/1.1\r\nHost: t\r\n"
                          "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"bo";
    assert_true(send_all(slow_body, partial, strlen(partial)));
    /* idle after one complete request (keep-alive) */
    int idle = connect_to(f);
    const char *get = "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n";
    assert_true(send_all(idle, get, strlen(get)));
    char resp[8192];
    bool closed;
    read_response(idle, resp, sizeof(resp), 5000, &closed);
    assert_int_equal(status_of(resp), 200);
    assert_false(closed);

    long long t0 = e2e_now_ms();
    int fds[3] = {stalled, slow_body, idle};
    for (int i = 0; i < 3; i++) {
        read_response(fds[i], resp, sizeof(resp), 6000, &closed);
        if (!closed) fail_msg("connection %d was not closed by the timeout", i);
        close(fds[i]);
    }
    long long waited = e2e_now_ms() - t0;
    assert_true(waited < 6000);
    /* the half-sent message was not stored */
    json_t *topics = e2e_call(f, "GET", "/v1/topics", NULL, NULL, 200);
    json_t *list = json_is_array(topics) ? topics : json_object_get(topics, "topics");
    assert_int_equal(json_array_size(list), 0);
    json_decref(topics);
    expect_healthy(f);
}

static void test_content_length_over_limit_is_refused_before_the_body(void **state) {
    E2eCase *f = *state;
    const char *extra[] = {"--maxMessageSize=1024", NULL};
    e2e_case_start(f, extra);
    int fd = connect_to(f);
    /* announce 50 MB and send none of it: the answer must not wait */
    const char *hdr = "POST /v1/topics/Lim/messages HTTP/1.1\r\nHost: t\r\n"
                      "Content-Type: application/octet-stream\r\nContent-Length: 50000000\r\n\r\n";
    assert_true(send_all(fd, hdr, strlen(hdr)));
    char resp[8192];
    bool closed;
    long long t0 = e2e_now_ms();
    read_response(fd, resp, sizeof(resp), 5000, &closed);
    close(fd);
    assert_true(e2e_now_ms() - t0 < 2000);
    expect_raw_error(resp, 413, "PAYLOAD_TOO_LARGE");
    expect_healthy(f);
}

static void test_chunked_upload_over_limit(void **state) {
    E2eCase *f = *state;
    const char *extra[] = {"--maxMessageSize=65536", NULL};
    e2e_case_start(f, extra);
    json_t *b = e2e_call(f, "GET", "/v1/broker", NULL, NULL, 200);
    long long rss_before = e2e_num(b, "rssAnonBytes");
    json_decref(b);
    int fd = connect_to(f);
    const char *hdr = "POST /v1/topics/Lim/messages HTTP/1.1\r\nHost: t\r\n"
                      "Content-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
    assert_true(send_all(fd, hdr, strlen(hdr)));
    /* 32 MiB in 64 KiB chunks: far over the limit; the broker drops it
     * as it arrives instead of buffering it */
    enum { CHUNK = 64 * 1024 };
    char *chunk = malloc(CHUNK + 32);
    assert_non_null(chunk);
    int head = sprintf(chunk, "%x\r\n", CHUNK);
    memset(chunk + head, 'z', CHUNK);
    memcpy(chunk + head + CHUNK, "\r\n", 2);
    for (int i = 0; i < 512; i++) assert_true(send_all(fd, chunk, (size_t)head + CHUNK + 2));
    free(chunk);
    b = e2e_call(f, "GET", "/v1/broker", NULL, NULL, 200);
    long long rss_during = e2e_num(b, "rssAnonBytes");
    json_decref(b);
    assert_true(send_all(fd, "0\r\n\r\n", 5));
    char resp[8192];
    bool closed;
    read_response(fd, resp, sizeof(resp), 5000, &closed);
    close(fd);
    expect_raw_error(resp, 413, "PAYLOAD_TOO_LARGE");
    assert_true(rss_during - rss_before < 8 * 1024 * 1024);
    /* nothing was stored */
    e2e_expect_error(f, "GET", "/v1/topics/Lim", NULL, NULL, 404, "TOPIC_NOT_FOUND");
    expect_healthy(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_too_many_headers, setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_header_block_over_connection_memory, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_stalled_and_idle_clients_are_closed, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_content_length_over_limit_is_refused_before_the_body,
                                        setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_chunked_upload_over_limit, setup, e2e_case_teardown),
    };
    return cmocka_run_group_tests_name("e2e-limits", tests, NULL, NULL);
}
