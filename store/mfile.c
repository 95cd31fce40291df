/*
 * mfile.c - preallocated memory-mapped files (see mfile.h).
 */
#define _GNU_SOURCE
#include "mfile.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io.h"
#include "mq.h"

struct MappedFile {
    int refs;          /* atomic reference count */
    int fd;            /* open read-write */
    uint8_t *data;     /* MAP_SHARED mapping of 'size' bytes */
    size_t size;       /* bytes */
    uint64_t base;     /* logical offset of byte 0 */
    bool deleted;      /* unlinked by mf_mark_delete */
    char path[];       /* NUL-terminated */
};

static int dir_of(const char *path, char *buf, size_t cap) {
    size_t len = strlen(path);
    if (len >= cap) return MQ_ERR_INVAL;
    memcpy(buf, path, len + 1);
    char *d = dirname(buf);
    if (d != buf) memmove(buf, d, strlen(d) + 1);
    return MQ_OK;
}

int mf_open(const char *path, uint64_t base_off, size_t size, bool create, MappedFile **out) {
    MQ_ASSERT(size > 0);
    int rc;
    size_t plen = strlen(path);
    MappedFile *mf = calloc(1, sizeof(*mf) + plen + 1);
    if (!mf) return MQ_ERR_NOMEM;
    memcpy(mf->path, path, plen + 1);
    mf->size = size;
    mf->base = base_off;
    mf->refs = 1;

    int flags = O_RDWR | (create ? O_CREAT | O_EXCL : 0);
    mf->fd = mq_io->open(path, flags, 0644);
    if (mf->fd < 0) {
        rc = errno == ENOENT ? MQ_ERR_NOTFOUND : errno == EEXIST ? MQ_ERR_EXISTS : MQ_ERR_IO;
        if (rc == MQ_ERR_IO) MQ_ERROR("cannot open '%s': %s", path, strerror(errno));
        goto err_free;
    }
    struct stat st;
    if (fstat(mf->fd, &st) != 0) {
        MQ_ERROR("cannot stat '%s': %s", path, strerror(errno));
        rc = MQ_ERR_IO;
        goto err_close;
    }
    if ((uint64_t)st.st_size > size) {
        MQ_ERROR("file '%s' is %jd bytes, expected %zu", path, (intmax_t)st.st_size, size);
        rc = MQ_ERR_CORRUPT;
        goto err_close;
    }
    if ((uint64_t)st.st_size < size || create) {
        if (mq_io->fallocate(mf->fd, 0, 0, (off_t)size) != 0) {
            int e = errno;
            MQ_ERROR("cannot allocate %zu bytes for '%s': %s", size, path, strerror(e));
            rc = (e == ENOSPC || e == EDQUOT) ? MQ_ERR_FULL : MQ_ERR_IO;
            goto err_unlink;
        }
    }
    mf->data = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, mf->fd, 0);
    if (mf->data == MAP_FAILED) {
        MQ_ERROR("cannot map '%s': %s", path, strerror(errno));
        rc = MQ_ERR_IO;
        goto err_unlink;
    }
    if (create) {
        char dir[4096];
        if (dir_of(path, dir, sizeof(dir)) == MQ_OK && mq_fsync_dir(dir) != MQ_OK) {
            rc = MQ_ERR_IO;
            goto err_unmap;
        }
    }
    *out = mf;
    return MQ_OK;

err_unmap:
    munmap(mf->data, size);
err_unlink:
    if (create) mq_io->unlink(path);
err_close:
    mq_io->close(mf->fd);
err_free:
    free(mf);
    return rc;
}

void mf_ref(MappedFile *mf) {
    int old = __atomic_fetch_add(&mf->refs, 1, __ATOMIC_RELAXED);
    MQ_ASSERT(old > 0);
}

void mf_unref(MappedFile **pp) {
    MappedFile *mf = *pp;
    if (!mf) return;
    *pp = NULL;
    int old = __atomic_fetch_sub(&mf->refs, 1, __ATOMIC_ACQ_REL);
    MQ_ASSERT(old > 0);
    if (old > 1) return;
    munmap(mf->data, mf->size);
    mq_io->close(mf->fd);
    free(mf);
}

int mf_mark_delete(MappedFile *mf) {
    if (mf->deleted) return MQ_OK;
    if (mq_io->unlink(mf->path) != 0 && errno != ENOENT) {
        MQ_ERROR("cannot delete '%s': %s", mf->path, strerror(errno));
        return MQ_ERR_IO;
    }
    mf->deleted = true;
    return MQ_OK;
}

uint8_t *mf_data(const MappedFile *mf) { return mf->data; }
size_t mf_size(const MappedFile *mf) { return mf->size; }
uint64_t mf_base(const MappedFile *mf) { return mf->base; }
const char *mf_path(const MappedFile *mf) { return mf->path; }
int mf_fd(const MappedFile *mf) { return mf->fd; }

int mf_sync(MappedFile *mf) {
    if (mq_io->fdatasync(mf->fd) != 0) {
        MQ_ERROR("cannot sync '%s': %s", mf->path, strerror(errno));
        return MQ_ERR_IO;
    }
    return MQ_OK;
}

int mf_zero(MappedFile *mf, size_t from, size_t to) {
    MQ_ASSERT(from <= to && to <= mf->size);
    const size_t page = 4096;
    size_t a = (from + page - 1) / page * page; /* first whole page */
    size_t b = to / page * page;                /* end of the last whole page */
    if (a >= b) {
        memset(mf->data + from, 0, to - from);
        return MQ_OK;
    }
    memset(mf->data + from, 0, a - from);
    memset(mf->data + b, 0, to - b);
    if (mq_io->fallocate(mf->fd, FALLOC_FL_ZERO_RANGE, (off_t)a, (off_t)(b - a)) != 0) {
        if (errno != EOPNOTSUPP) {
            MQ_ERROR("cannot zero '%s' [%zu,%zu): %s", mf->path, a, b, strerror(errno));
            return MQ_ERR_IO;
        }
        memset(mf->data + a, 0, b - a); /* filesystems without ZERO_RANGE */
    }
    return MQ_OK;
}

void mf_name_for(uint64_t off, char *buf) { snprintf(buf, 21, "%020" PRIu64, off); }

bool mf_parse_name(const char *name, uint64_t *off) {
    if (strlen(name) != 20) return false;
    uint64_t v = 0;
    for (int i = 0; i < 20; i++) {
        if (name[i] < '0' || name[i] > '9') return false;
        uint64_t d = (uint64_t)(name[i] - '0');
        if (v > (UINT64_MAX - d) / 10) return false;
        v = v * 10 + d;
    }
    *off = v;
    return true;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a;
    uint64_t y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

int mf_list(const char *dir, uint64_t **out, size_t *n) {
    *out = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT) return MQ_ERR_NOTFOUND;
        MQ_ERROR("cannot open directory '%s': %s", dir, strerror(errno));
        return MQ_ERR_IO;
    }
    uint64_t *names = NULL;
    size_t count = 0;
    size_t cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        uint64_t v;
        if (!mf_parse_name(de->d_name, &v)) continue;
        if (count == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            uint64_t *grown = realloc(names, ncap * sizeof(*grown));
            if (!grown) {
                free(names);
                closedir(d);
                return MQ_ERR_NOMEM;
            }
            names = grown;
            cap = ncap;
        }
        names[count++] = v;
    }
    closedir(d);
    if (count > 0) qsort(names, count, sizeof(*names), cmp_u64);
    *out = names;
    *n = count;
    return MQ_OK;
}
