/*
 * fuzz_loaders.c - opening damaged consume queue and index files.  The
 * first input byte picks the kind; the rest becomes the file's content in a
 * scratch directory; then the loader runs and, if it accepts the file, a
 * read or query walks it.  Nothing may crash, hang or read out of bounds.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "consumequeue.h"
#include "indexfile.h"
#include "mq.h"

static char dir[64];

static void cleanup(void) { mq_rmtree(dir); }

static void write_file(const char *path, const uint8_t *p, size_t n) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) abort();
    if (n && write(fd, p, n) != (ssize_t)n) abort();
    close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 1 << 16) return 0;
    if (!dir[0]) {
        snprintf(dir, sizeof(dir), "/tmp/petrel-fuzz-XXXXXX");
        if (!mkdtemp(dir)) abort();
        atexit(cleanup);
        mq_log_level = -1; /* damaged files are expected: keep quiet */
    }
    char sub[128];
    char path[256];
    mq_rmtree(dir);
    mq_mkdirs(dir);
    if (data[0] & 1) {
        snprintf(sub, sizeof(sub), "%s/index", dir);
        mq_mkdirs(sub);
        snprintf(path, sizeof(path), "%s/00000001767225600000", sub);
        write_file(path, data + 1, size - 1);
        IndexConfig cfg = {.dir = sub, .slot_num = 8, .max_entries = 4};
        IndexStore *ix = NULL;
        if (ix_open(&cfg, &ix) == MQ_OK) {
            uint64_t offs[16];
            size_t n = 0;
            ix_query(ix, mq_slice("orders", 6), mq_slice("order-1", 7), 0, INT64_MAX, 16, offs,
                     &n);
            ix_end_phys(ix);
            ix_close(ix);
        }
    } else {
        snprintf(sub, sizeof(sub), "%s/cq", dir);
        mq_mkdirs(sub);
        snprintf(path, sizeof(path), "%s/00000000000000000000", sub);
        write_file(path, data + 1, size - 1);
        ConsumeQueue *cq = NULL;
        if (cq_open(sub, 4, &cq) == MQ_OK) {
            CqEntry e[8];
            uint64_t offs[8];
            size_t n = 0;
            uint64_t next = 0;
            cq_read(cq, 0, 8, 64, NULL, 0, e, offs, &n, &next);
            cq_truncate_phys(cq, 1000);
            cq_close(cq);
        }
    }
    return 0;
}
