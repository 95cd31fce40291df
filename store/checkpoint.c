/*
 * checkpoint.c - the checkpoint file (see checkpoint.h).
 */
#define _GNU_SOURCE
#include "checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "crc32c.h"
#include "io.h"
#include "mq.h"

void ckpt_encode(uint8_t *buf, const Checkpoint *ck) {
    memset(buf, 0, CKPT_SIZE);
    mq_put_u32(buf + 0, CKPT_MAGIC);
    mq_put_u32(buf + 4, CKPT_VERSION);
    mq_put_u64(buf + 8, ck->log_flushed);
    mq_put_u64(buf + 16, ck->cq_flushed);
    mq_put_u64(buf + 24, ck->index_flushed);
    mq_put_u64(buf + 32, (uint64_t)ck->log_ts);
    mq_put_u64(buf + 40, (uint64_t)ck->cq_ts);
    mq_put_u64(buf + 48, (uint64_t)ck->index_ts);
    mq_put_u32(buf + 60, mq_crc32c(buf, 60));
}

int ckpt_decode(const uint8_t *buf, Checkpoint *out) {
    if (mq_get_u32(buf) != CKPT_MAGIC || mq_get_u32(buf + 4) != CKPT_VERSION ||
        mq_get_u32(buf + 60) != mq_crc32c(buf, 60))
        return MQ_ERR_CORRUPT;
    out->log_flushed = mq_get_u64(buf + 8);
    out->cq_flushed = mq_get_u64(buf + 16);
    out->index_flushed = mq_get_u64(buf + 24);
    out->log_ts = (int64_t)mq_get_u64(buf + 32);
    out->cq_ts = (int64_t)mq_get_u64(buf + 40);
    out->index_ts = (int64_t)mq_get_u64(buf + 48);
    return MQ_OK;
}

int ckpt_read(const char *path, Checkpoint *out) {
    int fd = mq_io->open(path, O_RDONLY, 0);
    if (fd < 0) {
        if (errno == ENOENT) return MQ_ERR_NOTFOUND;
        MQ_ERROR("cannot open checkpoint '%s': %s", path, strerror(errno));
        return MQ_ERR_IO;
    }
    uint8_t buf[CKPT_SIZE + 1];
    ssize_t n = mq_io->pread(fd, buf, sizeof(buf), 0);
    mq_io->close(fd);
    if (n != CKPT_SIZE || ckpt_decode(buf, out) != MQ_OK) {
        MQ_ERROR("checkpoint '%s' is corrupt", path);
        return MQ_ERR_CORRUPT;
    }
    return MQ_OK;
}

int ckpt_write(const char *path, const Checkpoint *ck) {
    char tmp[4096];
    char dir[4096];
    if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp)) return MQ_ERR_INVAL;
    snprintf(dir, sizeof(dir), "%s", path);
    uint8_t buf[CKPT_SIZE];
    ckpt_encode(buf, ck);
    int fd = mq_io->open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        MQ_ERROR("cannot create '%s': %s", tmp, strerror(errno));
        return MQ_ERR_IO;
    }
    if (mq_write_all(fd, buf, sizeof(buf), 0) != 0 || mq_io->fsync(fd) != 0) {
        MQ_ERROR("cannot write '%s': %s", tmp, strerror(errno));
        mq_io->close(fd);
        mq_io->unlink(tmp);
        return MQ_ERR_IO;
    }
    mq_io->close(fd);
    if (mq_io->rename(tmp, path) != 0) {
        MQ_ERROR("cannot rename '%s' to '%s': %s", tmp, path, strerror(errno));
        mq_io->unlink(tmp);
        return MQ_ERR_IO;
    }
    return mq_fsync_dir(dirname(dir));
}
