/*
 * mq.c - base helpers of mq.h: error names, assertion failure, logging,
 * clocks, directory helpers and the on-disk string hash.
 */
#define _GNU_SOURCE
#include "mq.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "io.h"

int mq_log_level = MQ_LOG_INFO;

const char *mq_strerror(int err) {
    switch (err) {
    case MQ_OK: return "ok";
    case MQ_ERR_NOMEM: return "out of memory";
    case MQ_ERR_INVAL: return "invalid argument";
    case MQ_ERR_NOTFOUND: return "not found";
    case MQ_ERR_EXISTS: return "already exists";
    case MQ_ERR_IO: return "i/o error";
    case MQ_ERR_CORRUPT: return "corrupt data";
    case MQ_ERR_FULL: return "disk full";
    case MQ_ERR_BUSY: return "busy";
    case MQ_ERR_TIMEOUT: return "timed out";
    case MQ_ERR_STATE: return "wrong state";
    case MQ_ERR_DB: return "database error";
    case MQ_ERR_RDONLY: return "store not writable";
    }
    return "unknown error";
}

void mq_assert_fail(const char *file, int line, const char *expr) {
    fprintf(stderr, "assertion failed: %s:%d: %s\n", file, line, expr);
    fflush(stderr);
    abort();
}

void mq_log(int level, const char *fmt, ...) {
    if (level > mq_log_level) return;
    static const char tag[] = "EWID";
    char line[1024];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %c ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                     tm.tm_sec, ts.tv_nsec / 1000000, tag[level & 3]);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = strlen(line);
    line[len++] = '\n';
    /* One write call so that lines from several threads never interleave. */
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
}

int64_t mq_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t mq_mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int mq_mkdirs(const char *path) {
    char buf[4096];
    size_t len = strlen(path);
    if (len == 0 || len >= sizeof(buf)) return MQ_ERR_INVAL;
    memcpy(buf, path, len + 1);
    for (size_t i = 1; i <= len; i++) {
        if (buf[i] != '/' && buf[i] != '\0') continue;
        char saved = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST) {
            MQ_ERROR("cannot create directory '%s': %s", buf, strerror(errno));
            return MQ_ERR_IO;
        }
        buf[i] = saved;
    }
    return MQ_OK;
}

int mq_fsync_dir(const char *path) {
    int fd = mq_io->open(path, O_RDONLY | O_DIRECTORY, 0);
    if (fd < 0) {
        MQ_ERROR("cannot open directory '%s': %s", path, strerror(errno));
        return MQ_ERR_IO;
    }
    int rc = mq_io->fsync(fd);
    int saved = errno;
    mq_io->close(fd);
    if (rc != 0) {
        MQ_ERROR("cannot fsync directory '%s': %s", path, strerror(saved));
        return MQ_ERR_IO;
    }
    return MQ_OK;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)ftw;
    int rc = (flag == FTW_DP) ? rmdir(path) : unlink(path);
    if (rc != 0 && errno != ENOENT) {
        MQ_ERROR("cannot remove '%s': %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

int mq_rmtree(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return errno == ENOENT ? MQ_OK : MQ_ERR_IO;
    return nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS) == 0 ? MQ_OK : MQ_ERR_IO;
}

uint64_t mq_hash64(const void *p, size_t len) {
    const uint8_t *b = p;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < len; i++) {
        h ^= b[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

void mq_cond_init_mono(pthread_cond_t *c) {
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(c, &a);
    pthread_condattr_destroy(&a);
}

void mq_deadline_mono(struct timespec *ts, int64_t ms) {
    int64_t t = mq_mono_ns() + ms * 1000000;
    ts->tv_sec = (time_t)(t / 1000000000);
    ts->tv_nsec = (long)(t % 1000000000);
}

void mq_stop_signal(pthread_cond_t *cv, pthread_mutex_t *mu, bool *stop) {
    pthread_mutex_lock(mu);
    *stop = true;
    pthread_cond_broadcast(cv);
    pthread_mutex_unlock(mu);
}

bool mq_wait_stop(pthread_cond_t *cv, pthread_mutex_t *mu, const bool *stop, int64_t ms) {
    struct timespec dl;
    mq_deadline_mono(&dl, ms);
    while (!*stop && pthread_cond_timedwait(cv, mu, &dl) != ETIMEDOUT) {
    }
    return *stop;
}
