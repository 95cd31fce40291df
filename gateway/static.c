/*
 * static.c - serves the console: GET /console/{path*} reads files under
 * the web root.  Paths with '.'-prefixed segments (so '..'), a leading '/'
 * or symlinks leaving the root get 404; a directory without its trailing
 * slash is redirected to it, and a directory serves its index.html.
 *
 * Files are small and sent with MHD_create_response_from_fd64 (sendfile),
 * so a worker never copies them through user space.
 */
#define _GNU_SOURCE
#include "handlers.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mq.h"

static const struct {
    const char *ext;
    const char *type;
} content_types[] = {
    {".html", "text/html; charset=utf-8"},
    {".css", "text/css; charset=utf-8"},
    {".js", "text/javascript; charset=utf-8"},
    {".json", "application/json"},
    {".svg", "image/svg+xml"},
    {".png", "image/png"},
    {".ico", "image/x-icon"},
    {".txt", "text/plain; charset=utf-8"},
};

static const char *content_type_for(const char *path) {
    const char *dot = strrchr(path, '.');
    if (dot && !strchr(dot, '/')) {
        for (size_t i = 0; i < sizeof(content_types) / sizeof(content_types[0]); i++) {
            if (strcmp(dot, content_types[i].ext) == 0) return content_types[i].type;
        }
    }
    return "application/octet-stream";
}

/* A relative path is served only if no segment starts with '.' (this
 * rejects '..' and hidden files) and it does not start with '/'. */
static bool safe_relative(const char *rel) {
    if (rel[0] == '/') return false;
    for (const char *s = rel; *s;) {
        if (*s == '.') return false;
        const char *slash = strchr(s, '/');
        if (!slash) break;
        s = slash + 1;
    }
    return true;
}

/* Opens 'rel' beneath 'dirfd' without following links out of it. */
static int open_beneath(int dirfd, const char *rel) {
    struct open_how how;
    memset(&how, 0, sizeof(how));
    how.flags = O_RDONLY | O_CLOEXEC;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    int fd = (int)syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));
    if (fd < 0 && errno == ENOSYS) {
        /* Kernels before 5.6: '..' is already refused; refuse a final link. */
        fd = openat(dirfd, rel, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    }
    return fd;
}

/* Percent-encodes 'rel' for a Location header: all but unreserved and '/'. */
static void url_encode(const char *rel, char *out, size_t cap) {
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)rel; *p && n + 4 < cap; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            strchr("-._~/", *p)) {
            out[n++] = (char)*p;
        } else {
            out[n++] = '%';
            out[n++] = hex[*p >> 4];
            out[n++] = hex[*p & 15];
        }
    }
    out[n] = '\0';
}

static enum MHD_Result not_found(GwRequest *r) {
    return gw_reply_error(r, MHD_HTTP_NOT_FOUND, NULL, "no such file in the console");
}

enum MHD_Result h_static_get(GwRequest *r, const RtMatch *m) {
    const char *rel = rt_param(m, "path");
    int dirfd = gw_web_dirfd(r);
    if (!rel || dirfd < 0 || !safe_relative(rel)) return not_found(r);

    char path[RT_BUF_MAX + 16];
    size_t len = strlen(rel);
    snprintf(path, sizeof(path), "%s%s", rel, (len == 0 || rel[len - 1] == '/') ? "index.html"
                                                                                 : "");
    int fd = open_beneath(dirfd, path);
    if (fd < 0) return not_found(r);
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return not_found(r);
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        char enc[3 * RT_BUF_MAX];
        url_encode(rel, enc, sizeof(enc));
        char loc[sizeof(enc) + 16];
        snprintf(loc, sizeof(loc), "/console/%s/", enc);
        struct MHD_Response *resp =
            MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
        if (!resp) return MHD_NO;
        MHD_add_response_header(resp, MHD_HTTP_HEADER_LOCATION, loc);
        return gw_reply(r, MHD_HTTP_FOUND, resp);
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return not_found(r);
    }
    /* MHD owns 'fd' from here and closes it. */
    struct MHD_Response *resp = MHD_create_response_from_fd64((uint64_t)st.st_size, fd);
    if (!resp) {
        close(fd);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type_for(path));
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_X_CONTENT_TYPE_OPTIONS, "nosniff");
    return gw_reply(r, MHD_HTTP_OK, resp);
}
