/*
 * io.c - the default system-call table (see io.h) and helpers built on it.
 */
#define _GNU_SOURCE
#include "io.h"
#include "mq.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

static int sys_open(const char *path, int flags, mode_t mode) {
    return open(path, flags | O_CLOEXEC, mode);
}

static int sys_fallocate(int fd, int mode, off_t off, off_t len) {
    return fallocate(fd, mode, off, len);
}

const MqIo mq_io_default = {
    .open = sys_open,
    .close = close,
    .pwrite = pwrite,
    .pread = pread,
    .fsync = fsync,
    .fdatasync = fdatasync,
    .fallocate = sys_fallocate,
    .ftruncate = ftruncate,
    .rename = rename,
    .unlink = unlink,
    .statvfs = statvfs,
};

const MqIo *mq_io = &mq_io_default;

void mq_io_set(const MqIo *io) { mq_io = io ? io : &mq_io_default; }

int mq_write_all(int fd, const void *buf, size_t len, off_t off) {
    const char *p = buf;
    while (len > 0) {
        ssize_t n = mq_io->pwrite(fd, p, len, off);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (n == 0) {
            errno = ENOSPC;
            return -1;
        }
        p += n;
        len -= (size_t)n;
        off += n;
    }
    return 0;
}

int mq_disk_space(const char *path, uint64_t *total, uint64_t *avail) {
    struct statvfs st;
    if (mq_io->statvfs(path, &st) != 0) return MQ_ERR_IO;
    *total = (uint64_t)st.f_blocks * st.f_frsize;
    *avail = (uint64_t)st.f_bavail * st.f_frsize;
    return MQ_OK;
}

double mq_disk_used_ratio(const char *path) {
    struct statvfs st;
    if (mq_io->statvfs(path, &st) != 0) return -1;
    /* df's formula: used / (used + available to unprivileged users). */
    double used = (double)(st.f_blocks - st.f_bfree);
    double avail = (double)st.f_bavail;
    if (used + avail <= 0) return 0;
    return used / (used + avail);
}
