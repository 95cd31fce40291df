/*
 * mq.h - the base every layer shares: error codes, assertions, logging,
 * byte slices, clocks and little-endian integer codecs.
 *
 * Nothing here allocates or owns state except the log level.  Every other
 * header of store/, core/ and gateway/ may include it; it includes only libc.
 */
#ifndef PETREL_MQ_H
#define PETREL_MQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- errors --------------------------------------------------------------
 * Commands return an int that is one of these: MQ_OK or a negative code.
 * The gateway maps them to HTTP statuses in one table (gw_status_for). */
typedef enum mq_err {
    MQ_OK = 0,
    MQ_ERR_NOMEM = -1,     /* allocation failed */
    MQ_ERR_INVAL = -2,     /* bad argument or input */
    MQ_ERR_NOTFOUND = -3,  /* no such object */
    MQ_ERR_EXISTS = -4,    /* already exists */
    MQ_ERR_IO = -5,        /* an I/O call failed (errno was logged) */
    MQ_ERR_CORRUPT = -6,   /* on-disk data failed a check */
    MQ_ERR_FULL = -7,      /* disk (or a fixed-size structure) is full */
    MQ_ERR_BUSY = -8,      /* try again later */
    MQ_ERR_TIMEOUT = -9,   /* a deadline passed */
    MQ_ERR_STATE = -10,    /* operation not allowed in the current state */
    MQ_ERR_DB = -11,       /* sqlite reported an error */
    MQ_ERR_RDONLY = -12,   /* store is not writable (after an I/O error, or a slave) */
} mq_err;

/* mq_strerror returns a static lowercase name for 'err' ("io", "full"...). */
const char *mq_strerror(int err);

/* ---- assertions ----------------------------------------------------------
 * MQ_ASSERT checks internal invariants, never input.  It stays on in release
 * builds and aborts with file:line:expression. */
#define MQ_ASSERT(expr) \
    ((expr) ? (void)0 : mq_assert_fail(__FILE__, __LINE__, #expr))
_Noreturn void mq_assert_fail(const char *file, int line, const char *expr);

/* ---- logging -------------------------------------------------------------
 * One line per call on stderr: "2026-11-29T19:30:01.123Z E message".
 * Messages are lowercase with no full stop; quote the subject: 'name'. */
enum { MQ_LOG_ERROR = 0, MQ_LOG_WARN = 1, MQ_LOG_INFO = 2, MQ_LOG_DEBUG = 3 };
extern int mq_log_level; /* messages above this level are dropped; default INFO */
void mq_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define MQ_ERROR(...) mq_log(MQ_LOG_ERROR, __VA_ARGS__)
#define MQ_WARN(...) mq_log(MQ_LOG_WARN, __VA_ARGS__)
#define MQ_INFO(...) mq_log(MQ_LOG_INFO, __VA_ARGS__)
#define MQ_DEBUG(...) mq_log(MQ_LOG_DEBUG, __VA_ARGS__)

/* ---- slices --------------------------------------------------------------*/
typedef struct MqSlice {
    const void *ptr; /* borrowed bytes, not NUL-terminated */
    size_t len;      /* bytes */
} MqSlice;

static inline MqSlice mq_slice(const void *ptr, size_t len) {
    return (MqSlice){ptr, len};
}

/* ---- clocks --------------------------------------------------------------*/
int64_t mq_now_ms(void);   /* wall clock, epoch milliseconds */
int64_t mq_mono_ns(void);  /* monotonic clock, nanoseconds */
static inline int64_t mq_mono_ms(void) { return mq_mono_ns() / 1000000; }

/* A wall clock that tests can replace: NULL means mq_now_ms. */
typedef int64_t (*MqClockFn)(void *arg);

/* ---- little-endian codecs ------------------------------------------------
 * Every on-disk integer goes through these; never write a struct. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
/* Little-endian host: a fixed-size memcpy is a single unaligned load/store. */
static inline void mq_put_u16(uint8_t *p, uint16_t v) { __builtin_memcpy(p, &v, 2); }
static inline void mq_put_u32(uint8_t *p, uint32_t v) { __builtin_memcpy(p, &v, 4); }
static inline void mq_put_u64(uint8_t *p, uint64_t v) { __builtin_memcpy(p, &v, 8); }
static inline uint16_t mq_get_u16(const uint8_t *p) {
    uint16_t v;
    __builtin_memcpy(&v, p, 2);
    return v;
}
static inline uint32_t mq_get_u32(const uint8_t *p) {
    uint32_t v;
    __builtin_memcpy(&v, p, 4);
    return v;
}
static inline uint64_t mq_get_u64(const uint8_t *p) {
    uint64_t v;
    __builtin_memcpy(&v, p, 8);
    return v;
}
#else
static inline void mq_put_u16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline void mq_put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void mq_put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t mq_get_u16(const uint8_t *p) {
    return (uint16_t)(p[0] | (p[1] << 8));
}
static inline uint32_t mq_get_u32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static inline uint64_t mq_get_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
#endif

/* ---- small helpers -------------------------------------------------------*/
/* mq_mkdirs creates 'path' and its missing parents (mode 0755). */
int mq_mkdirs(const char *path);
/* mq_fsync_dir fsyncs the directory 'path' so that renames/creates in it last. */
int mq_fsync_dir(const char *path);
/* mq_rmtree removes 'path' and everything under it; missing is not an error. */
int mq_rmtree(const char *path);
/* mq_cond_init_mono initialises 'c' to time its waits on CLOCK_MONOTONIC
 * (so that wall-clock steps never stretch or cut a timed wait). */
#include <pthread.h>
void mq_cond_init_mono(pthread_cond_t *c);
/* mq_deadline_mono sets '*ts' to 'ms' from now on CLOCK_MONOTONIC: the
 * deadline for a timed wait on a mq_cond_init_mono condition. */
#include <time.h>
void mq_deadline_mono(struct timespec *ts, int64_t ms);
/* mq_wait_stop waits on 'cv' (mq_cond_init_mono; 'mu' held) until
 * '*stop' is set or 'ms' have passed, whichever is first; returns '*stop'.
 * The sleep of every background thread that a close must wake. */
bool mq_wait_stop(pthread_cond_t *cv, pthread_mutex_t *mu, const bool *stop, int64_t ms);
/* mq_stop_signal sets '*stop' under 'mu' and wakes every waiter of 'cv':
 * the other half of mq_wait_stop, before the close joins the thread. */
void mq_stop_signal(pthread_cond_t *cv, pthread_mutex_t *mu, bool *stop);
/* mq_hash64 is FNV-1a over 'len' bytes: stable across runs and builds
 * (it is stored on disk as the consume-queue tag hash). */
uint64_t mq_hash64(const void *p, size_t len);

#endif
