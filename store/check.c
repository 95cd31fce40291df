/*
 * check.c - offline verify and dump of a data directory (see check.h).
 * Reads the files directly with the record and entry codecs of
 * commitlog.c and consumequeue.c; never writes.
 */
#define _GNU_SOURCE
#include "check.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoint.h"
#include "commitlog.h"
#include "consumequeue.h"
#include "mfile.h"
#include "mq.h"

typedef struct Log {
    MappedFile **segs; /* contiguous, oldest first */
    size_t n;
    uint64_t seg_size;
} Log;

static void log_close(Log *lg) {
    for (size_t i = 0; i < lg->n; i++) mf_unref(&lg->segs[i]);
    free(lg->segs);
}

static int log_open(const char *dir, uint64_t seg_size, FILE *out, Log *lg) {
    memset(lg, 0, sizeof(*lg));
    char path[4096];
    snprintf(path, sizeof(path), "%s/commitlog", dir);
    uint64_t *bases = NULL;
    size_t n = 0;
    int rc = mf_list(path, &bases, &n);
    if (rc == MQ_ERR_NOTFOUND) return MQ_OK;
    if (rc != MQ_OK) return rc;
    if (n && seg_size == 0) {
        char p0[4200];
        struct stat st;
        snprintf(p0, sizeof(p0), "%s/%020" PRIu64, path, bases[0]);
        seg_size = stat(p0, &st) == 0 ? (uint64_t)st.st_size : 0;
    }
    lg->seg_size = seg_size;
    lg->segs = calloc(n ? n : 1, sizeof(*lg->segs));
    for (size_t i = 0; rc == MQ_OK && i < n; i++) {
        if (i && bases[i] != bases[i - 1] + seg_size) {
            if (out) fprintf(out, "commit log: gap before segment %020" PRIu64 "\n", bases[i]);
            rc = MQ_ERR_CORRUPT;
            break;
        }
        char p[4200];
        snprintf(p, sizeof(p), "%s/%020" PRIu64, path, bases[i]);
        rc = mf_open(p, bases[i], seg_size, false, &lg->segs[i]);
        if (rc == MQ_OK) lg->n++;
    }
    free(bases);
    return rc;
}

static const uint8_t *log_at(const Log *lg, uint64_t off, size_t *avail) {
    if (!lg->n || off < mf_base(lg->segs[0])) return NULL;
    uint64_t idx = (off - mf_base(lg->segs[0])) / lg->seg_size;
    if (idx >= lg->n) return NULL;
    size_t in = (size_t)(off - mf_base(lg->segs[idx]));
    *avail = (size_t)lg->seg_size - in;
    return mf_data(lg->segs[idx]) + in;
}

/* check_queue verifies the entries of one queue directory. */
static void check_queue(const Log *lg, const char *qdir, const char *topic, uint32_t qid,
                        FILE *out, CheckReport *rep) {
    uint64_t *names = NULL;
    size_t n = 0;
    if (mf_list(qdir, &names, &n) != MQ_OK) return;
    rep->queues++;
    for (size_t i = 0; i < n; i++) {
        char p[4800];
        struct stat st;
        snprintf(p, sizeof(p), "%s/%020" PRIu64, qdir, names[i]);
        if (stat(p, &st) != 0 || st.st_size == 0 || st.st_size % CQ_ENTRY_SIZE) continue;
        MappedFile *mf = NULL;
        if (mf_open(p, names[i], (size_t)st.st_size, false, &mf) != MQ_OK) continue;
        uint64_t first = names[i] / CQ_ENTRY_SIZE;
        for (size_t k = 0; k < (size_t)st.st_size / CQ_ENTRY_SIZE; k++) {
            CqEntry e;
            cq_decode(mf_data(mf) + k * CQ_ENTRY_SIZE, &e);
            if (e.size == 0) continue;
            rep->entries++;
            uint64_t qoff = first + k;
            if (e.phys_off + e.size > rep->log_end) {
                rep->entries_past_end++;
                continue;
            }
            size_t avail = 0;
            const uint8_t *rp = log_at(lg, e.phys_off, &avail);
            ClRecord rec;
            bool ok = rp && cl_decode(rp, avail, false, &rec) == CL_REC_OK &&
                      rec.total_size == e.size && rec.queue_id == qid &&
                      rec.queue_off == qoff && rec.topic.len == strlen(topic) &&
                      memcmp(rec.topic.ptr, topic, rec.topic.len) == 0;
            if (!ok) {
                rep->bad_entries++;
                if (out && rep->bad_entries <= 20)
                    fprintf(out, "queue %s/%u: entry %" PRIu64 " -> offset %" PRIu64
                                 " does not match its record\n",
                            topic, qid, qoff, e.phys_off);
            }
        }
        mf_unref(&mf);
    }
    free(names);
}

static void check_queues(const Log *lg, const char *dir, FILE *out, CheckReport *rep) {
    char cq[4096];
    snprintf(cq, sizeof(cq), "%s/consumequeue", dir);
    DIR *d = opendir(cq);
    if (!d) return;
    struct dirent *te;
    while ((te = readdir(d))) {
        if (te->d_name[0] == '.') continue;
        char tdir[4400];
        snprintf(tdir, sizeof(tdir), "%s/%s", cq, te->d_name);
        DIR *qd = opendir(tdir);
        if (!qd) continue;
        struct dirent *qe;
        while ((qe = readdir(qd))) {
            char *end = NULL;
            if (qe->d_name[0] < '0' || qe->d_name[0] > '9') continue;
            unsigned long qid = strtoul(qe->d_name, &end, 10);
            if (*end || qid > UINT32_MAX) continue;
            char qdir[4700];
            snprintf(qdir, sizeof(qdir), "%s/%s", tdir, qe->d_name);
            check_queue(lg, qdir, te->d_name, (uint32_t)qid, out, rep);
        }
        closedir(qd);
    }
    closedir(d);
}

int check_dir(const char *dir, uint64_t segment_size, FILE *out, CheckReport *rep) {
    memset(rep, 0, sizeof(*rep));
    rep->bad_offset = UINT64_MAX;
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        if (out) fprintf(out, "'%s' is not a directory\n", dir);
        return MQ_ERR_NOTFOUND;
    }
    Log lg;
    int rc = log_open(dir, segment_size, out, &lg);
    if (rc != MQ_OK && rc != MQ_ERR_CORRUPT) return rc;
    bool bad = rc == MQ_ERR_CORRUPT;
    rep->segments = lg.n;
    uint64_t off = lg.n ? mf_base(lg.segs[0]) : 0;
    for (;;) {
        size_t avail = 0;
        const uint8_t *p = log_at(&lg, off, &avail);
        if (!p) break;
        ClRecord rec;
        ClRecKind k = cl_decode(p, avail, true, &rec);
        if (k == CL_REC_OK && rec.phys_off == off) {
            rep->records++;
            off += rec.total_size;
        } else if (k == CL_REC_BLANK) {
            off += avail;
        } else {
            if (k != CL_REC_EMPTY) {
                rep->bad_offset = off;
                bad = true;
                if (out) fprintf(out, "commit log: bad record at offset %" PRIu64 "\n", off);
            }
            break;
        }
    }
    rep->log_end = off;
    check_queues(&lg, dir, out, rep);
    if (rep->bad_entries) bad = true;
    char path[4200];
    snprintf(path, sizeof(path), "%s/checkpoint", dir);
    Checkpoint ck;
    rep->checkpoint = ckpt_read(path, &ck);
    if (rep->checkpoint == MQ_ERR_CORRUPT) bad = true;
    snprintf(path, sizeof(path), "%s/abort", dir);
    rep->abort_present = stat(path, &st) == 0;
    log_close(&lg);
    return bad ? MQ_ERR_CORRUPT : MQ_OK;
}

static void print_escaped(FILE *out, MqSlice s, size_t max) {
    const unsigned char *p = s.ptr;
    for (size_t i = 0; i < s.len && i < max; i++) {
        if (p[i] == 1)
            fputc('=', out);
        else if (p[i] == 2)
            fputc(i + 1 < s.len ? ';' : ' ', out);
        else if (p[i] >= 32 && p[i] < 127 && p[i] != '\\')
            fputc(p[i], out);
        else
            fprintf(out, "\\x%02x", p[i]);
    }
    if (s.len > max) fputs("...", out);
}

int check_dump(const char *dir, uint64_t segment_size, uint64_t from, uint64_t count, FILE *out) {
    Log lg;
    int rc = log_open(dir, segment_size, out, &lg);
    if (rc != MQ_OK) return rc;
    uint64_t off = from;
    if (lg.n && off < mf_base(lg.segs[0])) off = mf_base(lg.segs[0]);
    for (uint64_t shown = 0; shown < count;) {
        size_t avail = 0;
        const uint8_t *p = log_at(&lg, off, &avail);
        if (!p) break;
        ClRecord rec;
        ClRecKind k = cl_decode(p, avail, true, &rec);
        if (k == CL_REC_BLANK) {
            off += avail;
            continue;
        }
        if (k != CL_REC_OK) {
            if (k == CL_REC_BAD) fprintf(out, "%" PRIu64 " bad record\n", off);
            break;
        }
        fprintf(out, "%" PRIu64 " size=%u topic=", off, rec.total_size);
        print_escaped(out, rec.topic, 255);
        fprintf(out, " queue=%u qoff=%" PRIu64 " stored=%" PRId64 " props=", rec.queue_id,
                rec.queue_off, rec.store_ts);
        print_escaped(out, rec.props, 200);
        fputs(" body=", out);
        print_escaped(out, rec.body, 64);
        fputc('\n', out);
        off += rec.total_size;
        shown++;
    }
    log_close(&lg);
    return MQ_OK;
}

static int usage(FILE *out, int status) {
    fputs("usage: petrel check DIR [--segment-size BYTES]\n"
          "       petrel dump DIR [--from OFFSET] [--count N] [--segment-size BYTES]\n"
          "\n"
          "check  verifies a stopped broker's data directory offline: every commit log\n"
          "       record (magic, sizes, position, CRCs), every consume queue entry, the\n"
          "       checkpoint.  Exit 0 when clean, 1 when damage was found, 2 on bad usage.\n"
          "dump   prints commit log records, one per line (default: the first 100).\n"
          "The segment size is read from the first segment when not given.\n",
          out);
    return status;
}

int check_main(int argc, char **argv) {
    bool dump = strcmp(argv[0], "dump") == 0;
    const char *dir = NULL;
    uint64_t seg = 0;
    uint64_t from = 0;
    uint64_t count = 100;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        uint64_t *dst = NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) return usage(stdout, 0);
        if (strcmp(a, "--segment-size") == 0) dst = &seg;
        if (strcmp(a, "--from") == 0 && dump) dst = &from;
        if (strcmp(a, "--count") == 0 && dump) dst = &count;
        if (dst) {
            char *end = NULL;
            if (i + 1 >= argc) return usage(stderr, 2);
            errno = 0;
            unsigned long long v = strtoull(argv[++i], &end, 10);
            if (errno || *end || argv[i][0] == '-') return usage(stderr, 2);
            *dst = v;
        } else if (a[0] != '-' && !dir) {
            dir = a;
        } else {
            return usage(stderr, 2);
        }
    }
    if (!dir) return usage(stderr, 2);
    if (dump) return check_dump(dir, seg, from, count, stdout) == MQ_OK ? 0 : 1;
    CheckReport rep;
    int rc = check_dir(dir, seg, stdout, &rep);
    if (rc == MQ_ERR_NOTFOUND || rc == MQ_ERR_IO || rc == MQ_ERR_NOMEM) return 1;
    printf("segments %" PRIu64 ", records %" PRIu64 ", log end %" PRIu64 "\n", rep.segments,
           rep.records, rep.log_end);
    printf("queues %" PRIu64 ", entries %" PRIu64 ", mismatched %" PRIu64
           ", past the log end %" PRIu64 "\n",
           rep.queues, rep.entries, rep.bad_entries, rep.entries_past_end);
    printf("checkpoint %s, abort file %s\n",
           rep.checkpoint == MQ_OK ? "ok" : rep.checkpoint == MQ_ERR_NOTFOUND ? "missing" : "corrupt",
           rep.abort_present ? "present (not closed cleanly)" : "absent");
    printf("%s\n", rc == MQ_OK ? "clean" : "damaged");
    return rc == MQ_OK ? 0 : 1;
}
