/*
 * io.h - the table of system calls through which store/ touches files.
 *
 * Every open, write, sync, allocate, rename and unlink of the store goes
 * through 'mq_io' so that tests can swap in a table that fails on purpose
 * (ENOSPC, EIO, short writes) or fakes disk usage.  The functions keep the
 * system-call convention: -1 (or NULL/MAP_FAILED) with errno set.
 */
#ifndef PETREL_IO_H
#define PETREL_IO_H

#include <stdint.h>
#include <stddef.h>
#include <sys/statvfs.h>
#include <sys/types.h>

typedef struct MqIo {
    int (*open)(const char *path, int flags, mode_t mode);
    int (*close)(int fd);
    ssize_t (*pwrite)(int fd, const void *buf, size_t len, off_t off);
    ssize_t (*pread)(int fd, void *buf, size_t len, off_t off);
    int (*fsync)(int fd);
    int (*fdatasync)(int fd);
    int (*fallocate)(int fd, int mode, off_t off, off_t len); /* fallocate(2) */
    int (*ftruncate)(int fd, off_t len);
    int (*rename)(const char *from, const char *to);
    int (*unlink)(const char *path);
    int (*statvfs)(const char *path, struct statvfs *out);
} MqIo;

/* The table in use.  Tests replace it with mq_io_set() and restore it with
 * mq_io_set(&mq_io_default); production code never changes it. */
extern const MqIo *mq_io;
extern const MqIo mq_io_default;
void mq_io_set(const MqIo *io);

/* mq_write_all pwrites all 'len' bytes of 'buf' at 'off', looping over
 * short writes that make progress.  Returns 0, or -1 with errno (a write
 * returning 0 is reported as ENOSPC). */
int mq_write_all(int fd, const void *buf, size_t len, off_t off);

/* mq_disk_used_ratio returns the used fraction (0..1) of the filesystem
 * holding 'path', as df counts it, or -1 on error. */
double mq_disk_used_ratio(const char *path);

/* mq_disk_space fills the size of the filesystem holding 'path' and the
 * bytes available to unprivileged users.  MQ_OK or MQ_ERR_IO. */
int mq_disk_space(const char *path, uint64_t *total, uint64_t *avail);

#endif
