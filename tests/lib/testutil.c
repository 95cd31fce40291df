/*
 * testutil.c - see testutil.h.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "mq.h"

char *tu_mkdtemp(const char *tag) {
    const char *base = getenv("TMPDIR");
    if (!base || !*base) base = "/tmp";
    char *path = NULL;
    if (asprintf(&path, "%s/petrel-%s-XXXXXX", base, tag) < 0) abort();
    if (!mkdtemp(path)) {
        perror("mkdtemp");
        abort();
    }
    return path;
}

void tu_rmtree(const char *path) {
    if (path) mq_rmtree(path);
}

char *tu_path(const char *dir, const char *fmt, ...) {
    char *tail = NULL;
    char *out = NULL;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&tail, fmt, ap) < 0) abort();
    va_end(ap);
    if (asprintf(&out, "%s/%s", dir, tail) < 0) abort();
    free(tail);
    return out;
}

long long tu_file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

int tu_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}
