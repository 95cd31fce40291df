/*
 * consumequeue.c - the consume queue of one (topic, queue id): fixed 20-byte
 * entries in a run of equal-size mapped files (see consumequeue.h).
 *
 * Owns the MappedFiles of its directory (one ref each, in 'files', sorted by
 * first entry).  Calls mfile.c for every byte on disk and mq.h for the codecs.
 * FORMAT.md section "Consume queue".
 *
 * Threads: the writer-side calls (cq_put from the dispatcher, cq_truncate_phys
 * in recovery, cq_delete_below_phys from retention) serialize on 'write_lock',
 * so retention may run on the housekeeper thread.  cq_sync may run on yet
 * another thread: it takes 'files_lock' only to pick a file, never across a
 * sync.  Readers (cq_get, cq_read, the offset getters) never read at or past
 * the published max offset and copy entries out of a file they hold a ref
 * on, so files may be added or deleted under them.  Rewrites below max
 * (re-dispatch after a crash) and truncation are not atomic for a reader
 * looking at the same slot: they happen during recovery, before readers.
 */
#include "consumequeue.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mfile.h"
#include "mq.h"

_Static_assert(CQ_ENTRY_SIZE == 8 + 4 + 8, "entry layout is u64 + u32 + u64");

#define CQ_PATH_MAX 4096

typedef struct CqFile {
    MappedFile *mf; /* one ref, owned by the array */
    uint64_t first; /* queue offset of the file's entry 0 */
    int dirty;      /* atomic; 1 = written since the last cq_sync */
} CqFile;

struct ConsumeQueue {
    pthread_mutex_t files_lock; /* guards files/n_files/cap_files (held briefly) */
    pthread_mutex_t write_lock; /* serializes the writer-side calls */
    CqFile *files;              /* sorted by 'first'; gaps allowed */
    size_t n_files;             /* entries used in 'files' */
    size_t cap_files;           /* entries allocated in 'files' */
    uint32_t file_entries;      /* entries per file */
    size_t file_size;           /* bytes per file: file_entries * CQ_ENTRY_SIZE */
    uint64_t min_off;           /* atomic; first readable queue offset */
    uint64_t max_off;           /* atomic; one past the last entry (release-published) */
    char dir[];                 /* NUL-terminated */
};

/* ---- entry codec ---------------------------------------------------------
 *
 *   0               8          12              20
 *   +---------------+----------+---------------+
 *   | phys_off u64  | size u32 | tag_hash u64  |   all little-endian
 *   +---------------+----------+---------------+
 *   size 0 = empty slot (never written, or wiped by cq_truncate_phys)
 */
void cq_encode(uint8_t *p, const CqEntry *e) {
    mq_put_u64(p, e->phys_off);
    mq_put_u32(p + 8, e->size);
    mq_put_u64(p + 12, e->tag_hash);
}

void cq_decode(const uint8_t *p, CqEntry *e) {
    e->phys_off = mq_get_u64(p);
    e->size = mq_get_u32(p + 8);
    e->tag_hash = mq_get_u64(p + 12);
}

/* ---- file array ----------------------------------------------------------*/

static uint64_t load_min(ConsumeQueue *cq) {
    return __atomic_load_n(&cq->min_off, __ATOMIC_ACQUIRE);
}

static uint64_t load_max(ConsumeQueue *cq) {
    return __atomic_load_n(&cq->max_off, __ATOMIC_ACQUIRE);
}

/* Index of the first file whose first entry is > 'off' (upper bound).
 * Assumes: the caller holds files_lock or is the writer. */
static size_t upper_bound(const ConsumeQueue *cq, uint64_t off) {
    size_t lo = 0;
    size_t hi = cq->n_files;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cq->files[mid].first <= off) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

/* The file holding entry 'off', or NULL.  Same assumption as upper_bound. */
static CqFile *file_for(ConsumeQueue *cq, uint64_t off) {
    if (cq->n_files > 0) {
        CqFile *tail = &cq->files[cq->n_files - 1];
        if (off >= tail->first) return off - tail->first < cq->file_entries ? tail : NULL;
    }
    size_t i = upper_bound(cq, off);
    if (i == 0) return NULL;
    CqFile *f = &cq->files[i - 1];
    return off - f->first < cq->file_entries ? f : NULL;
}

static uint8_t *slot_of(const ConsumeQueue *cq, const CqFile *f, uint64_t off) {
    (void)cq;
    return mf_data(f->mf) + (size_t)(off - f->first) * CQ_ENTRY_SIZE;
}

/* Reader view of the file holding 'off': a ref on it and its first entry.
 * When no file holds 'off', '*mf' = NULL and '*first' = the first entry of
 * the next file (UINT64_MAX if none), so a scan can skip the gap. */
static void reader_file(ConsumeQueue *cq, uint64_t off, MappedFile **mf, uint64_t *first) {
    pthread_mutex_lock(&cq->files_lock);
    size_t i = upper_bound(cq, off);
    if (i > 0 && off - cq->files[i - 1].first < cq->file_entries) {
        *mf = cq->files[i - 1].mf;
        *first = cq->files[i - 1].first;
        mf_ref(*mf);
    } else {
        *mf = NULL;
        *first = i < cq->n_files ? cq->files[i].first : UINT64_MAX;
    }
    pthread_mutex_unlock(&cq->files_lock);
}

/* Inserts 'mf' (first entry 'first') in order.  Writer only.  The only
 * allocation on the put path, and only when a file is created. */
static int insert_file(ConsumeQueue *cq, MappedFile *mf, uint64_t first) {
    size_t at = upper_bound(cq, first);
    pthread_mutex_lock(&cq->files_lock);
    if (cq->n_files == cq->cap_files) {
        size_t cap = cq->cap_files ? cq->cap_files * 2 : 8;
        CqFile *grown = realloc(cq->files, cap * sizeof(*grown));
        if (!grown) {
            pthread_mutex_unlock(&cq->files_lock);
            return MQ_ERR_NOMEM;
        }
        cq->files = grown;
        cq->cap_files = cap;
    }
    memmove(&cq->files[at + 1], &cq->files[at], (cq->n_files - at) * sizeof(*cq->files));
    cq->files[at] = (CqFile){.mf = mf, .first = first, .dirty = 0};
    cq->n_files++;
    pthread_mutex_unlock(&cq->files_lock);
    return MQ_OK;
}

/* Removes file 'i' from the array and returns its ref.  Writer only. */
static MappedFile *remove_file(ConsumeQueue *cq, size_t i) {
    pthread_mutex_lock(&cq->files_lock);
    MappedFile *mf = cq->files[i].mf;
    memmove(&cq->files[i], &cq->files[i + 1], (cq->n_files - i - 1) * sizeof(*cq->files));
    cq->n_files--;
    pthread_mutex_unlock(&cq->files_lock);
    return mf;
}

/* Unlinks and releases a file already removed from the array.  If it cannot
 * be unlinked its entries are zeroed instead so a reopen does not see them. */
static int drop_file(MappedFile *mf) {
    int rc = mf_mark_delete(mf);
    if (rc != MQ_OK && mf_zero(mf, 0, mf_size(mf)) == MQ_OK) mf_sync(mf);
    mf_unref(&mf);
    return rc;
}

static void file_path(const ConsumeQueue *cq, uint64_t first, char *buf) {
    char name[21];
    mf_name_for(first * CQ_ENTRY_SIZE, name);
    snprintf(buf, CQ_PATH_MAX, "%s/%s", cq->dir, name);
}

/* ---- open / close --------------------------------------------------------*/

/* Reads the 20-digit names in the directory into a sorted malloc'd array of
 * byte offsets (mf_list), each a multiple of the file size. */
static int list_files(ConsumeQueue *cq, uint64_t **out, size_t *n_out) {
    int rc = mf_list(cq->dir, out, n_out);
    if (rc == MQ_ERR_NOTFOUND) rc = MQ_ERR_IO; /* cq_open made the directory */
    for (size_t i = 0; rc == MQ_OK && i < *n_out; i++) {
        if ((*out)[i] % cq->file_size != 0) {
            MQ_ERROR("consume-queue file '%s/%020ju' does not start at a multiple of %zu bytes",
                     cq->dir, (uintmax_t)(*out)[i], cq->file_size);
            rc = MQ_ERR_CORRUPT;
        }
    }
    if (rc != MQ_OK) {
        free(*out);
        *out = NULL;
        *n_out = 0;
    }
    return rc;
}

/* Finds min and max from the loaded files.
 * Ensures: max = one past the last non-empty entry (scanning the files from
 * the last one backwards, so empty tail files are passed over); min = the
 * first non-empty entry; with no entry at all, min = max = the first entry
 * of the first file (0 without files), so stale re-puts below it are
 * ignored. */
static void find_bounds(ConsumeQueue *cq) {
    uint64_t min = 0;
    uint64_t max = 0;
    bool found = false;
    for (size_t i = cq->n_files; i-- > 0 && !found;) {
        const uint8_t *data = mf_data(cq->files[i].mf);
        for (size_t k = cq->file_entries; k-- > 0;) {
            if (mq_get_u32(data + k * CQ_ENTRY_SIZE + 8) != 0) {
                max = cq->files[i].first + k + 1;
                found = true;
                break;
            }
        }
    }
    if (!found) {
        min = max = cq->n_files > 0 ? cq->files[0].first : 0;
    } else {
        found = false;
        for (size_t i = 0; i < cq->n_files && !found; i++) {
            const uint8_t *data = mf_data(cq->files[i].mf);
            for (size_t k = 0; k < cq->file_entries; k++) {
                if (mq_get_u32(data + k * CQ_ENTRY_SIZE + 8) != 0) {
                    min = cq->files[i].first + k;
                    found = true;
                    break;
                }
            }
        }
    }
    cq->min_off = min;
    cq->max_off = max;
}

int cq_open(const char *dir, uint32_t file_entries, ConsumeQueue **out) {
    if (file_entries == 0) return MQ_ERR_INVAL;
    size_t dlen = strlen(dir);
    if (dlen == 0 || dlen + 22 > CQ_PATH_MAX) return MQ_ERR_INVAL;
    int rc = mq_mkdirs(dir);
    if (rc != MQ_OK) return rc;

    ConsumeQueue *cq = calloc(1, sizeof(*cq) + dlen + 1);
    if (!cq) return MQ_ERR_NOMEM;
    memcpy(cq->dir, dir, dlen + 1);
    cq->file_entries = file_entries;
    cq->file_size = (size_t)file_entries * CQ_ENTRY_SIZE;
    pthread_mutex_init(&cq->files_lock, NULL);
    pthread_mutex_init(&cq->write_lock, NULL);

    uint64_t *bases = NULL;
    size_t n = 0;
    rc = list_files(cq, &bases, &n);
    if (rc != MQ_OK) goto err_close;
    for (size_t i = 0; i < n; i++) {
        uint64_t first = bases[i] / CQ_ENTRY_SIZE;
        char path[CQ_PATH_MAX];
        file_path(cq, first, path);
        MappedFile *mf = NULL;
        rc = mf_open(path, bases[i], cq->file_size, false, &mf);
        if (rc == MQ_OK) rc = insert_file(cq, mf, first);
        if (rc != MQ_OK) {
            mf_unref(&mf);
            goto err_free_bases;
        }
    }
    free(bases);
    find_bounds(cq);
    *out = cq;
    return MQ_OK;

err_free_bases:
    free(bases);
err_close:
    cq_close(cq);
    return rc;
}

void cq_close(ConsumeQueue *cq) {
    if (!cq) return;
    for (size_t i = 0; i < cq->n_files; i++) mf_unref(&cq->files[i].mf);
    free(cq->files);
    pthread_mutex_destroy(&cq->files_lock);
    pthread_mutex_destroy(&cq->write_lock);
    free(cq);
}

int cq_destroy(ConsumeQueue *cq) {
    if (!cq) return MQ_OK;
    int rc = MQ_OK;
    for (size_t i = 0; i < cq->n_files; i++) {
        if (mf_mark_delete(cq->files[i].mf) != MQ_OK) rc = MQ_ERR_IO;
        mf_unref(&cq->files[i].mf);
    }
    cq->n_files = 0;
    if (rmdir(cq->dir) != 0 && errno != ENOENT) {
        MQ_ERROR("cannot remove directory '%s': %s", cq->dir, strerror(errno));
        rc = MQ_ERR_IO;
    }
    cq_close(cq);
    return rc;
}

/* ---- writer --------------------------------------------------------------*/

static bool entry_equal(const CqEntry *a, const CqEntry *b) {
    return a->phys_off == b->phys_off && a->size == b->size && a->tag_hash == b->tag_hash;
}

/* Assumes: write_lock held.  Ensures: the entry bytes are in the mapping
 * before max is published (release), so a reader that sees the new max
 * sees the whole entry. */
static int put_locked(ConsumeQueue *cq, uint64_t queue_off, const CqEntry *e) {
    uint64_t min = cq->min_off;
    uint64_t max = cq->max_off;
    if (queue_off < min) return MQ_OK;
    CqFile *f = file_for(cq, queue_off);
    if (!f) {
        uint64_t first = queue_off - queue_off % cq->file_entries;
        char path[CQ_PATH_MAX];
        file_path(cq, first, path);
        MappedFile *mf = NULL;
        int rc = mf_open(path, first * CQ_ENTRY_SIZE, cq->file_size, true, &mf);
        if (rc != MQ_OK) return rc;
        rc = insert_file(cq, mf, first);
        if (rc != MQ_OK) {
            mf_mark_delete(mf);
            mf_unref(&mf);
            return rc;
        }
        f = file_for(cq, queue_off);
        MQ_ASSERT(f != NULL);
    }
    uint8_t *slot = slot_of(cq, f, queue_off);
    if (queue_off < max) {
        CqEntry old;
        cq_decode(slot, &old);
        if (old.size != 0) {
            if (entry_equal(&old, e)) return MQ_OK;
            MQ_DEBUG("consume queue '%s' offset %" PRIu64 ": overwriting phys %" PRIu64
                     " size %" PRIu32 " with phys %" PRIu64 " size %" PRIu32,
                     cq->dir, queue_off, old.phys_off, old.size, e->phys_off, e->size);
        }
    }
    cq_encode(slot, e);
    __atomic_store_n(&f->dirty, 1, __ATOMIC_RELEASE);
    if (queue_off >= max) {
        /* A put into a queue with no entries starts it there, as a reopen
         * would find it (min = first non-empty entry). */
        if (min == max && queue_off > min) __atomic_store_n(&cq->min_off, queue_off,
                                                            __ATOMIC_RELEASE);
        __atomic_store_n(&cq->max_off, queue_off + 1, __ATOMIC_RELEASE);
    }
    return MQ_OK;
}

int cq_put(ConsumeQueue *cq, uint64_t queue_off, const CqEntry *e) {
    if (e->size == 0 || queue_off >= UINT64_MAX / CQ_ENTRY_SIZE - cq->file_entries) {
        return MQ_ERR_INVAL;
    }
    pthread_mutex_lock(&cq->write_lock);
    int rc = put_locked(cq, queue_off, e);
    pthread_mutex_unlock(&cq->write_lock);
    return rc;
}

/* Offset one past the last entry to keep: scanning back from 'max' over
 * empty slots and entries ending past 'phys_end', stopping at the first
 * entry to keep or at 'min'.  Assumes: write_lock held. */
static uint64_t truncation_point(ConsumeQueue *cq, uint64_t phys_end) {
    uint64_t min = cq->min_off;
    uint64_t off = cq->max_off;
    while (off > min) {
        size_t i = upper_bound(cq, off - 1);
        if (i == 0) return min; /* nothing on disk below */
        const CqFile *f = &cq->files[i - 1];
        if (off - 1 >= f->first + cq->file_entries) { /* a gap: no file */
            off = f->first + cq->file_entries;
            continue;
        }
        for (; off > min && off > f->first; off--) {
            CqEntry e;
            cq_decode(slot_of(cq, f, off - 1), &e);
            if (e.size != 0 && e.phys_off + e.size <= phys_end) return off;
        }
    }
    return min;
}

int cq_truncate_phys(ConsumeQueue *cq, uint64_t phys_end) {
    pthread_mutex_lock(&cq->write_lock);
    uint64_t old_max = cq->max_off;
    uint64_t new_max = truncation_point(cq, phys_end);
    int rc = MQ_OK;
    if (new_max == old_max) goto out_unlock;
    MQ_INFO("consume queue '%s': dropping offsets [%" PRIu64 ",%" PRIu64 ") past phys %" PRIu64,
            cq->dir, new_max, old_max, phys_end);
    /* Readers stop at the new max before anything is wiped. */
    __atomic_store_n(&cq->max_off, new_max, __ATOMIC_RELEASE);

    /* Files wholly at or past the new max are empty now: delete them. */
    while (cq->n_files > 0 && cq->files[cq->n_files - 1].first >= new_max) {
        MappedFile *mf = remove_file(cq, cq->n_files - 1);
        if (drop_file(mf) != MQ_OK) rc = MQ_ERR_IO;
    }
    /* The file holding new_max-1 keeps its head; wipe its tail. */
    CqFile *f = new_max > 0 ? file_for(cq, new_max - 1) : NULL;
    if (f && new_max - f->first < cq->file_entries) {
        size_t from = (size_t)(new_max - f->first) * CQ_ENTRY_SIZE;
        if (mf_zero(f->mf, from, cq->file_size) != MQ_OK) rc = MQ_ERR_IO;
        __atomic_store_n(&f->dirty, 1, __ATOMIC_RELEASE);
    }

out_unlock:
    pthread_mutex_unlock(&cq->write_lock);
    return rc;
}

/* True when every entry of file 'f' points below 'min_phys': its last
 * non-empty entry does (entries grow with the commit log), or it has none. */
static bool file_below(const ConsumeQueue *cq, const CqFile *f, uint64_t min_phys) {
    for (size_t k = cq->file_entries; k-- > 0;) {
        CqEntry e;
        cq_decode(mf_data(f->mf) + k * CQ_ENTRY_SIZE, &e);
        if (e.size != 0) return e.phys_off + e.size <= min_phys;
    }
    return true;
}

/* First offset in [from, max) holding an entry with phys_off >= min_phys,
 * or max.  Assumes: write_lock held. */
static uint64_t first_at_or_above(ConsumeQueue *cq, uint64_t from, uint64_t min_phys) {
    uint64_t max = cq->max_off;
    uint64_t off = from;
    while (off < max) {
        CqFile *f = file_for(cq, off);
        if (!f) {
            size_t i = upper_bound(cq, off);
            if (i == cq->n_files) return max;
            off = cq->files[i].first;
            continue;
        }
        uint64_t end = f->first + cq->file_entries;
        for (; off < end && off < max; off++) {
            CqEntry e;
            cq_decode(slot_of(cq, f, off), &e);
            if (e.size != 0 && e.phys_off >= min_phys) return off;
        }
    }
    return max;
}

int cq_delete_below_phys(ConsumeQueue *cq, uint64_t min_phys) {
    int deleted = 0;
    int rc = MQ_OK;
    for (;;) {
        pthread_mutex_lock(&cq->write_lock);
        uint64_t max = cq->max_off;
        /* Never the file holding max-1, nor any after it. */
        bool can = cq->n_files > 0 && max > 0 && cq->files[0].first + cq->file_entries < max &&
                   file_below(cq, &cq->files[0], min_phys);
        MappedFile *mf = can ? remove_file(cq, 0) : NULL;
        pthread_mutex_unlock(&cq->write_lock);
        if (!mf) break;
        MQ_DEBUG("deleting consume-queue file '%s'", mf_path(mf));
        if (drop_file(mf) != MQ_OK) rc = MQ_ERR_IO;
        deleted++;
    }

    pthread_mutex_lock(&cq->write_lock);
    uint64_t min = cq->min_off;
    if (cq->n_files > 0 && cq->files[0].first > min) min = cq->files[0].first;
    uint64_t new_min = first_at_or_above(cq, min, min_phys);
    if (new_min > cq->min_off) __atomic_store_n(&cq->min_off, new_min, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&cq->write_lock);
    return rc != MQ_OK ? rc : deleted;
}

int cq_sync(ConsumeQueue *cq) {
    int rc = MQ_OK;
    uint64_t cursor = 0;
    for (;;) {
        MappedFile *mf = NULL;
        uint64_t first = 0;
        pthread_mutex_lock(&cq->files_lock);
        /* Files are visited in order of 'first'; 'cursor' survives the
         * array changing between rounds. */
        size_t i = cursor == 0 ? 0 : upper_bound(cq, cursor - 1);
        for (; i < cq->n_files; i++) {
            if (__atomic_exchange_n(&cq->files[i].dirty, 0, __ATOMIC_ACQ_REL)) {
                mf = cq->files[i].mf;
                first = cq->files[i].first;
                mf_ref(mf);
                break;
            }
        }
        pthread_mutex_unlock(&cq->files_lock);
        if (!mf) break;
        cursor = first + cq->file_entries;
        if (mf_sync(mf) != MQ_OK) {
            rc = MQ_ERR_IO;
            pthread_mutex_lock(&cq->files_lock); /* still unsynced: try again next time */
            size_t j = upper_bound(cq, first);
            if (j > 0 && cq->files[j - 1].mf == mf) {
                __atomic_store_n(&cq->files[j - 1].dirty, 1, __ATOMIC_RELEASE);
            }
            pthread_mutex_unlock(&cq->files_lock);
        }
        mf_unref(&mf);
    }
    return rc;
}

/* ---- readers -------------------------------------------------------------*/

uint64_t cq_min_offset(ConsumeQueue *cq) { return load_min(cq); }
uint64_t cq_max_offset(ConsumeQueue *cq) { return load_max(cq); }

int cq_get(ConsumeQueue *cq, uint64_t queue_off, CqEntry *out) {
    uint64_t max = load_max(cq);
    if (queue_off >= max || queue_off < load_min(cq)) return MQ_ERR_NOTFOUND;
    MappedFile *mf;
    uint64_t first;
    reader_file(cq, queue_off, &mf, &first);
    if (!mf) return MQ_ERR_NOTFOUND;
    CqEntry e;
    cq_decode(mf_data(mf) + (size_t)(queue_off - first) * CQ_ENTRY_SIZE, &e);
    mf_unref(&mf);
    if (e.size == 0) return MQ_ERR_NOTFOUND;
    *out = e;
    return MQ_OK;
}

uint64_t cq_last_phys_end(ConsumeQueue *cq) {
    uint64_t max = load_max(cq);
    if (max == 0) return 0;
    MappedFile *mf;
    uint64_t first;
    reader_file(cq, max - 1, &mf, &first);
    if (!mf) return 0;
    CqEntry e;
    cq_decode(mf_data(mf) + (size_t)(max - 1 - first) * CQ_ENTRY_SIZE, &e);
    mf_unref(&mf);
    return e.size != 0 ? e.phys_off + e.size : 0;
}

static bool tag_wanted(uint64_t tag_hash, const uint64_t *tags, size_t n_tags) {
    if (n_tags == 0) return true;
    for (size_t i = 0; i < n_tags; i++) {
        if (tags[i] == tag_hash) return true;
    }
    return false;
}

int cq_read(ConsumeQueue *cq, uint64_t from, size_t max, size_t max_scan,
            const uint64_t *tags, size_t n_tags, CqEntry *out, uint64_t *offs,
            size_t *n_out, uint64_t *next) {
    uint64_t end = load_max(cq);
    uint64_t min = load_min(cq);
    uint64_t off = from < min ? min : from;
    size_t n = 0;
    size_t scanned = 0;
    while (off < end && n < max && scanned < max_scan) {
        MappedFile *mf;
        uint64_t first;
        reader_file(cq, off, &mf, &first);
        if (!mf) { /* no file here (deleted or never written): skip the gap */
            off = first < end ? first : end;
            continue;
        }
        const uint8_t *data = mf_data(mf);
        uint64_t file_end = first + cq->file_entries;
        for (; off < file_end && off < end && n < max && scanned < max_scan; off++) {
            CqEntry e;
            cq_decode(data + (size_t)(off - first) * CQ_ENTRY_SIZE, &e);
            scanned++;
            if (e.size == 0 || !tag_wanted(e.tag_hash, tags, n_tags)) continue;
            out[n] = e;
            if (offs) offs[n] = off;
            n++;
        }
        mf_unref(&mf);
    }
    *n_out = n;
    *next = off;
    return MQ_OK;
}
