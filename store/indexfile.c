/*
 * indexfile.c - the hash index from "topic#key" to commit-log offsets (see
 * indexfile.h; layout in FORMAT.md section "Index file").
 *
 * Owns the index files of one directory, each a MappedFile (mfile.c).  One
 * writer (ix_put) appends to the newest file; queries, ix_end_phys, ix_sync
 * and ix_delete_below_phys may run on other threads.  The file list is
 * guarded by 'lock', held only to pick a file and take a ref on it; the
 * bytes of a file are shared through release/acquire stores on its slots
 * and header counters, never under the lock.
 */
#include "indexfile.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io.h"
#include "mfile.h"

/* Longest topic and key accepted in a "topic#key" hash key, bytes. */
#define IX_MAX_TOPIC_LEN 255
#define IX_MAX_KEY_LEN 4096
/* How many following milliseconds ix_put tries when a file name is taken. */
#define IX_NAME_TRIES 1000

/* Header field offsets (indexfile.h draws the layout). */
enum {
    H_MAGIC = 0,
    H_VERSION = 4,
    H_BEGIN_TS = 8,
    H_END_TS = 16,
    H_BEGIN_PHYS = 24,
    H_END_PHYS = 32,
    H_SLOTS_USED = 40,
    H_INDEX_COUNT = 44,
    H_SLOT_NUM = 48,
    H_MAX_ENTRIES = 52,
    H_CREATED_MS = 56,
};

/* Entry field offsets. */
enum {
    E_KEY_HASH = 0,
    E_PHYS_OFF = 4,
    E_TIME_DIFF = 12,
    E_PREV = 16,
};

_Static_assert(H_CREATED_MS + 8 == IX_HEADER_SIZE, "index header is 64 bytes");
_Static_assert(E_PREV + 4 == IX_ENTRY_SIZE, "index entry is 20 bytes");
_Static_assert(H_BEGIN_TS % 8 == 0 && H_END_TS % 8 == 0 && H_END_PHYS % 8 == 0,
               "64-bit header counters are 8-aligned for atomic access");

typedef struct IxFile {
    MappedFile *mf;       /* the store's ref; queries take their own */
    uint8_t *data;        /* mf_data(mf) */
    uint64_t name;        /* creation ms from the file name; increases along the list */
    uint32_t slot_num;    /* hash slots, from the header (immutable) */
    uint32_t max_entries; /* entry capacity, from the header (immutable) */
    int dirty;            /* atomic: 1 = written since the last ix_sync */
} IxFile;

struct IndexStore {
    char *dir;             /* directory of the files, owned */
    uint32_t slot_num;     /* for new files */
    uint32_t max_entries;  /* for new files */
    MqClockFn clock;       /* wall clock for new file names; NULL = mq_now_ms */
    void *clock_arg;       /* passed to 'clock' */
    pthread_mutex_t lock;  /* guards 'files', 'count', 'cap' */
    IxFile **files;        /* oldest first, strictly increasing names */
    size_t count;          /* files in use */
    size_t cap;            /* slots allocated in 'files' */
    IxFile *cur;           /* newest file, NULL = none; writer only (set under lock) */
    uint64_t last_name;    /* largest file name seen; writer only */
};

/* A query's private view of one file: a ref and the immutable geometry. */
typedef struct FileView {
    MappedFile *mf;       /* own ref */
    const uint8_t *data;  /* the mapping */
    uint64_t name;        /* file name */
    uint32_t slot_num;    /* hash slots */
    uint32_t max_entries; /* entry capacity */
} FileView;

/* ---- byte access ------------------------------------------------------------
 * Entries are written byte-wise (mq_put_*) before they are published; slots
 * and the header counters that readers poll are accessed with atomics on
 * the little-endian value, at 4- or 8-aligned offsets of a page-aligned
 * mapping. */

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define LE32(v) __builtin_bswap32(v)
#define LE64(v) __builtin_bswap64(v)
#else
#define LE32(v) (v)
#define LE64(v) (v)
#endif

static uint32_t load32(const uint8_t *p, int order) {
    return LE32(__atomic_load_n((const uint32_t *)(const void *)p, order));
}

static void store32(uint8_t *p, uint32_t v, int order) {
    __atomic_store_n((uint32_t *)(void *)p, LE32(v), order);
}

static uint64_t load64(const uint8_t *p, int order) {
    return LE64(__atomic_load_n((const uint64_t *)(const void *)p, order));
}

static void store64(uint8_t *p, uint64_t v, int order) {
    __atomic_store_n((uint64_t *)(void *)p, LE64(v), order);
}

static size_t slot_at(uint32_t slot) {
    return IX_HEADER_SIZE + (size_t)slot * 4;
}

static size_t entry_at(uint32_t slot_num, uint32_t n) {
    return IX_HEADER_SIZE + (size_t)slot_num * 4 + (size_t)(n - 1) * IX_ENTRY_SIZE;
}

static uint64_t file_size_for(uint32_t slot_num, uint32_t max_entries) {
    return IX_HEADER_SIZE + (uint64_t)slot_num * 4 + (uint64_t)max_entries * IX_ENTRY_SIZE;
}

/* geometry_ok: a file of this geometry can be mapped and index_count
 * (max_entries + 1 when full) fits in a u32. */
static bool geometry_ok(uint32_t slot_num, uint32_t max_entries) {
    return slot_num > 0 && max_entries > 0 && max_entries < UINT32_MAX &&
           file_size_for(slot_num, max_entries) <= SIZE_MAX;
}

/* ---- keys and times --------------------------------------------------------*/

/* key_hash sets '*out' to the low 32 bits of mq_hash64("topic#key").
 * MQ_ERR_INVAL for an empty key or a topic/key over the limits. */
static int key_hash(MqSlice topic, MqSlice key, uint32_t *out) {
    uint8_t buf[IX_MAX_TOPIC_LEN + 1 + IX_MAX_KEY_LEN];
    if (key.len == 0 || key.len > IX_MAX_KEY_LEN || topic.len > IX_MAX_TOPIC_LEN)
        return MQ_ERR_INVAL;
    if (topic.len > 0) memcpy(buf, topic.ptr, topic.len);
    buf[topic.len] = '#';
    memcpy(buf + topic.len + 1, key.ptr, key.len);
    *out = (uint32_t)mq_hash64(buf, topic.len + 1 + key.len);
    return MQ_OK;
}

static int64_t sat_add(int64_t a, int64_t b) {
    int64_t r;
    if (__builtin_add_overflow(a, b, &r)) return b > 0 ? INT64_MAX : INT64_MIN;
    return r;
}

/* time_diff_of is the entry's whole seconds after the file's begin_ts;
 * a store time before begin_ts (clock stepped back) counts as 0. */
static uint32_t time_diff_of(int64_t begin_ts, int64_t store_ts) {
    if (store_ts <= begin_ts) return 0;
    uint64_t secs = ((uint64_t)store_ts - (uint64_t)begin_ts) / 1000;
    return secs > UINT32_MAX ? UINT32_MAX : (uint32_t)secs;
}

/* overlaps: [lo, hi] and [begin_ms, end_ms] share a millisecond. */
static bool overlaps(int64_t lo, int64_t hi, int64_t begin_ms, int64_t end_ms) {
    return lo <= end_ms && hi >= begin_ms;
}

/* ---- file list ---------------------------------------------------------------*/

static void path_for(const IndexStore *ix, uint64_t name, char *buf, size_t cap) {
    char base[21];
    mf_name_for(name, base);
    snprintf(buf, cap, "%s/%s", ix->dir, base);
}

/* lower_bound returns the index of the first file named 'name' or above
 * ('count' if none).  Caller holds the lock. */
static size_t lower_bound(const IndexStore *ix, uint64_t name) {
    size_t lo = 0;
    size_t hi = ix->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ix->files[mid]->name < name) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static void free_file(IxFile *f) {
    if (!f) return;
    mf_unref(&f->mf);
    free(f);
}

/* ensure_cap makes room for one more file.  Caller holds the lock. */
static int ensure_cap(IndexStore *ix) {
    if (ix->count < ix->cap) return MQ_OK;
    size_t cap = ix->cap ? ix->cap * 2 : 8;
    IxFile **files = realloc(ix->files, cap * sizeof(*files));
    if (!files) return MQ_ERR_NOMEM;
    ix->files = files;
    ix->cap = cap;
    return MQ_OK;
}

/* ---- open --------------------------------------------------------------------*/

static bool all_zero(const uint8_t *p, size_t len) {
    for (size_t i = 0; i < len; i++)
        if (p[i] != 0) return false;
    return true;
}

/* read_header reads the first IX_HEADER_SIZE bytes of 'path' into 'h'
 * (zero-filled past the end of a shorter file) and its size into '*size'. */
static int read_header(const char *path, uint8_t *h, uint64_t *size) {
    int fd = mq_io->open(path, O_RDONLY, 0);
    if (fd < 0) {
        MQ_ERROR("cannot open index file '%s': %s", path, strerror(errno));
        return MQ_ERR_IO;
    }
    int rc = MQ_OK;
    struct stat st;
    memset(h, 0, IX_HEADER_SIZE);
    if (fstat(fd, &st) != 0) {
        MQ_ERROR("cannot stat index file '%s': %s", path, strerror(errno));
        rc = MQ_ERR_IO;
        goto out_close;
    }
    *size = (uint64_t)st.st_size;
    size_t want = *size < IX_HEADER_SIZE ? (size_t)*size : IX_HEADER_SIZE;
    size_t got = 0;
    while (got < want) {
        ssize_t r = mq_io->pread(fd, h + got, want - got, (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            MQ_ERROR("cannot read index file '%s': %s", path, r < 0 ? strerror(errno) : "eof");
            rc = MQ_ERR_IO;
            goto out_close;
        }
        got += (size_t)r;
    }
out_close:
    mq_io->close(fd);
    return rc;
}

/* check_header validates a header read from 'path' of 'size' bytes.
 * MQ_OK or MQ_ERR_CORRUPT (logged, naming the file). */
static int check_header(const char *path, const uint8_t *h, uint64_t size) {
    uint32_t magic = mq_get_u32(h + H_MAGIC);
    uint32_t version = mq_get_u32(h + H_VERSION);
    uint32_t slot_num = mq_get_u32(h + H_SLOT_NUM);
    uint32_t max_entries = mq_get_u32(h + H_MAX_ENTRIES);
    uint32_t count = mq_get_u32(h + H_INDEX_COUNT);
    if (magic != IX_MAGIC) {
        MQ_ERROR("index file '%s' has bad magic 0x%08" PRIx32, path, magic);
        return MQ_ERR_CORRUPT;
    }
    if (version != IX_VERSION) {
        MQ_ERROR("index file '%s' has unsupported version %" PRIu32, path, version);
        return MQ_ERR_CORRUPT;
    }
    if (!geometry_ok(slot_num, max_entries)) {
        MQ_ERROR("index file '%s' has bad geometry: %" PRIu32 " slots, %" PRIu32 " entries",
                 path, slot_num, max_entries);
        return MQ_ERR_CORRUPT;
    }
    uint64_t want = file_size_for(slot_num, max_entries);
    if (size != want) {
        MQ_ERROR("index file '%s' is %" PRIu64 " bytes, expected %" PRIu64 " for %" PRIu32
                 " slots and %" PRIu32 " entries",
                 path, size, want, slot_num, max_entries);
        return MQ_ERR_CORRUPT;
    }
    if (count < 1 || count > max_entries + 1) {
        MQ_ERROR("index file '%s' has index count %" PRIu32 ", expected 1..%" PRIu32, path,
                 count, max_entries + 1);
        return MQ_ERR_CORRUPT;
    }
    return MQ_OK;
}

/* load_file maps the index file 'name'.  A file whose header was never
 * written (crash right after creation: shorter than a header or an all-zero
 * header) is removed and '*out' is set to NULL.  MQ_OK, MQ_ERR_CORRUPT,
 * MQ_ERR_IO, MQ_ERR_NOMEM. */
static int load_file(const IndexStore *ix, uint64_t name, IxFile **out) {
    char path[4096];
    uint8_t h[IX_HEADER_SIZE];
    uint64_t size = 0;
    *out = NULL;
    path_for(ix, name, path, sizeof(path));
    int rc = read_header(path, h, &size);
    if (rc != MQ_OK) return rc;
    if (all_zero(h, sizeof(h))) {
        MQ_WARN("removing index file '%s': its header was never written", path);
        if (mq_io->unlink(path) != 0 && errno != ENOENT) {
            MQ_ERROR("cannot remove index file '%s': %s", path, strerror(errno));
            return MQ_ERR_IO;
        }
        return MQ_OK;
    }
    rc = check_header(path, h, size);
    if (rc != MQ_OK) return rc;
    IxFile *f = calloc(1, sizeof(*f));
    if (!f) return MQ_ERR_NOMEM;
    f->name = name;
    f->slot_num = mq_get_u32(h + H_SLOT_NUM);
    f->max_entries = mq_get_u32(h + H_MAX_ENTRIES);
    rc = mf_open(path, name, (size_t)size, false, &f->mf);
    if (rc != MQ_OK) {
        free(f);
        return rc;
    }
    f->data = mf_data(f->mf);
    *out = f;
    return MQ_OK;
}

/* drop_uncounted repairs the newest file after a crash inside ix_put: the
 * entry was written and its slot published, but index_count (and end_phys)
 * were not advanced, so the dispatcher will put that record again.  Each
 * slot pointing at an entry >= index_count is walked back along its chain
 * to the first counted entry; slots_used is recounted.  Open only.
 * Ensures: every slot is 0 or < index_count. */
static void drop_uncounted(IxFile *f) {
    uint8_t *d = f->data;
    uint32_t count = load32(d + H_INDEX_COUNT, __ATOMIC_RELAXED);
    uint32_t used = 0;
    uint32_t fixed = 0;
    for (uint32_t s = 0; s < f->slot_num; s++) {
        uint32_t v = load32(d + slot_at(s), __ATOMIC_RELAXED);
        uint32_t orig = v;
        while (v >= count) {
            if (v > f->max_entries) {
                v = 0;
                break;
            }
            uint32_t prev = mq_get_u32(d + entry_at(f->slot_num, v) + E_PREV);
            v = prev < v ? prev : 0;
        }
        if (v != orig) {
            store32(d + slot_at(s), v, __ATOMIC_RELAXED);
            fixed++;
        }
        if (v != 0) used++;
    }
    store32(d + H_SLOTS_USED, used, __ATOMIC_RELAXED);
    if (fixed > 0) {
        MQ_WARN("index file '%s': dropped uncounted entries from %" PRIu32 " slots",
                mf_path(f->mf), fixed);
        f->dirty = 1;
    }
}

int ix_open(const IndexConfig *cfg, IndexStore **out) {
    if (!cfg->dir || !*cfg->dir || strlen(cfg->dir) > 4000) return MQ_ERR_INVAL;
    if (!geometry_ok(cfg->slot_num, cfg->max_entries)) return MQ_ERR_INVAL;
    uint64_t *names = NULL;
    size_t n_names = 0;
    int rc = mq_mkdirs(cfg->dir);
    if (rc != MQ_OK) return rc;
    IndexStore *ix = calloc(1, sizeof(*ix));
    if (!ix) return MQ_ERR_NOMEM;
    ix->dir = strdup(cfg->dir);
    if (!ix->dir) {
        rc = MQ_ERR_NOMEM;
        goto err_free_ix;
    }
    ix->slot_num = cfg->slot_num;
    ix->max_entries = cfg->max_entries;
    ix->clock = cfg->clock;
    ix->clock_arg = cfg->clock_arg;
    if (pthread_mutex_init(&ix->lock, NULL) != 0) {
        rc = MQ_ERR_NOMEM;
        goto err_free_dir;
    }

    rc = mf_list(ix->dir, &names, &n_names);
    if (rc != MQ_OK) goto err_destroy_lock;
    for (size_t i = 0; i < n_names; i++) {
        IxFile *f = NULL;
        rc = load_file(ix, names[i], &f);
        if (rc == MQ_OK && f) {
            rc = ensure_cap(ix);
            if (rc == MQ_OK) ix->files[ix->count++] = f;
            else free_file(f);
        }
        if (rc != MQ_OK) goto err_free_files;
        ix->last_name = names[i];
    }
    free(names);
    if (ix->count > 0) {
        ix->cur = ix->files[ix->count - 1];
        drop_uncounted(ix->cur);
    }
    *out = ix;
    return MQ_OK;

err_free_files:
    free(names);
    for (size_t i = 0; i < ix->count; i++) free_file(ix->files[i]);
    free(ix->files);
err_destroy_lock:
    pthread_mutex_destroy(&ix->lock);
err_free_dir:
    free(ix->dir);
err_free_ix:
    free(ix);
    return rc;
}

void ix_close(IndexStore *ix) {
    if (!ix) return;
    for (size_t i = 0; i < ix->count; i++) free_file(ix->files[i]);
    free(ix->files);
    pthread_mutex_destroy(&ix->lock);
    free(ix->dir);
    free(ix);
}

/* ---- put ---------------------------------------------------------------------*/

/* roll creates the next index file, named by the clock but always above
 * every existing name (the next free millisecond when one is taken), and
 * makes it the newest.  The only allocations of the put path are here.
 * MQ_OK, MQ_ERR_FULL, MQ_ERR_IO, MQ_ERR_NOMEM, MQ_ERR_STATE. */
static int roll(IndexStore *ix) {
    if (ix->last_name == UINT64_MAX) {
        MQ_ERROR("no index file name left in '%s'", ix->dir);
        return MQ_ERR_STATE;
    }
    pthread_mutex_lock(&ix->lock);
    int rc = ensure_cap(ix);
    pthread_mutex_unlock(&ix->lock);
    if (rc != MQ_OK) return rc;
    IxFile *f = calloc(1, sizeof(*f));
    if (!f) return MQ_ERR_NOMEM;

    int64_t now = ix->clock ? ix->clock(ix->clock_arg) : mq_now_ms();
    uint64_t name = now > 0 && (uint64_t)now > ix->last_name ? (uint64_t)now : ix->last_name + 1;
    size_t size = (size_t)file_size_for(ix->slot_num, ix->max_entries);
    char path[4096];
    for (int tries = 0;; tries++) {
        path_for(ix, name, path, sizeof(path));
        rc = mf_open(path, name, size, true, &f->mf);
        if (rc != MQ_ERR_EXISTS) break;
        if (tries == IX_NAME_TRIES || name == UINT64_MAX) {
            MQ_ERROR("cannot find a free index file name after '%s'", path);
            rc = MQ_ERR_IO;
            break;
        }
        name++;
    }
    if (rc != MQ_OK) goto err_free; /* mf_open logged it */
    ix->last_name = name;

    f->name = name;
    f->slot_num = ix->slot_num;
    f->max_entries = ix->max_entries;
    f->data = mf_data(f->mf);
    f->dirty = 1;
    uint8_t *d = f->data; /* fresh zeros from fallocate; no reader sees it yet */
    mq_put_u32(d + H_MAGIC, IX_MAGIC);
    mq_put_u32(d + H_VERSION, IX_VERSION);
    mq_put_u32(d + H_INDEX_COUNT, 1);
    mq_put_u32(d + H_SLOT_NUM, f->slot_num);
    mq_put_u32(d + H_MAX_ENTRIES, f->max_entries);
    mq_put_u64(d + H_CREATED_MS, name);

    pthread_mutex_lock(&ix->lock);
    ix->files[ix->count++] = f; /* capacity reserved above; only roll adds */
    ix->cur = f;
    pthread_mutex_unlock(&ix->lock);
    return MQ_OK;

err_free:
    free(f);
    return rc;
}

/*
 * ix_put appends one entry to the newest file:
 *
 *   1. first entry of the file only: begin_ts, begin_phys, end_ts, end_phys
 *   2. entry bytes  [key_hash | phys_off | time_diff | prev = old slot]
 *   3. slot = n                      (release: publishes the entry)
 *   4. slots_used, index_count = n+1 (release: counts it)
 *   5. end_ts = max(end_ts, store_ts), end_phys = phys_off
 *
 * A crash between 3 and 4 leaves an uncounted entry (drop_uncounted undoes
 * it on open); after 4 and before 5 end_phys lags, so the dispatcher puts
 * the last record again and queries dedupe it.  end_phys never claims a
 * record that is not counted.
 */
int ix_put(IndexStore *ix, MqSlice topic, MqSlice key, uint64_t phys_off, int64_t store_ts) {
    uint32_t hash;
    int rc = key_hash(topic, key, &hash);
    if (rc != MQ_OK) return rc;
    IxFile *f = ix->cur;
    if (!f || load32(f->data + H_INDEX_COUNT, __ATOMIC_RELAXED) > f->max_entries) {
        rc = roll(ix);
        if (rc != MQ_OK) return rc;
        f = ix->cur;
    }
    uint8_t *d = f->data;
    uint32_t n = load32(d + H_INDEX_COUNT, __ATOMIC_RELAXED);
    MQ_ASSERT(n >= 1 && n <= f->max_entries);
    if (n == 1) {
        store64(d + H_BEGIN_TS, (uint64_t)store_ts, __ATOMIC_RELAXED);
        store64(d + H_BEGIN_PHYS, phys_off, __ATOMIC_RELAXED);
        store64(d + H_END_TS, (uint64_t)store_ts, __ATOMIC_RELAXED);
        store64(d + H_END_PHYS, phys_off, __ATOMIC_RELAXED);
    }
    int64_t begin_ts = (int64_t)load64(d + H_BEGIN_TS, __ATOMIC_RELAXED);

    uint8_t *slot = d + slot_at(hash % f->slot_num);
    uint32_t prev = load32(slot, __ATOMIC_RELAXED);
    MQ_ASSERT(prev < n); /* drop_uncounted ensures it for reopened files */
    uint8_t *e = d + entry_at(f->slot_num, n);
    mq_put_u32(e + E_KEY_HASH, hash);
    mq_put_u64(e + E_PHYS_OFF, phys_off);
    mq_put_u32(e + E_TIME_DIFF, time_diff_of(begin_ts, store_ts));
    mq_put_u32(e + E_PREV, prev);
    store32(slot, n, __ATOMIC_RELEASE);

    if (prev == 0) {
        uint32_t used = load32(d + H_SLOTS_USED, __ATOMIC_RELAXED);
        store32(d + H_SLOTS_USED, used + 1, __ATOMIC_RELAXED);
    }
    store32(d + H_INDEX_COUNT, n + 1, __ATOMIC_RELEASE);
    int64_t end_ts = (int64_t)load64(d + H_END_TS, __ATOMIC_RELAXED);
    if (store_ts > end_ts) store64(d + H_END_TS, (uint64_t)store_ts, __ATOMIC_RELEASE);
    store64(d + H_END_PHYS, phys_off, __ATOMIC_RELEASE);
    __atomic_store_n(&f->dirty, 1, __ATOMIC_RELEASE);
    return MQ_OK;
}

/* ---- query -------------------------------------------------------------------*/

static bool has_off(const uint64_t *offs, size_t n, uint64_t off) {
    for (size_t i = 0; i < n; i++)
        if (offs[i] == off) return true;
    return false;
}

/* query_file appends to 'offs' (holding 'n', capacity 'max') the offsets
 * of 'hash' entries of one file whose second overlaps the range, newest
 * first.  Returns the new count.
 * Assumes: the writer published each entry with a release store of its
 * slot, and a slot value v was written while index_count == v.
 * Ensures: visits each entry at most once (prev must decrease). */
static size_t query_file(const FileView *fv, uint32_t hash, int64_t begin_ms, int64_t end_ms,
                         size_t max, uint64_t *offs, size_t n) {
    const uint8_t *d = fv->data;
    if (load32(d + H_INDEX_COUNT, __ATOMIC_ACQUIRE) <= 1) return n;
    int64_t begin_ts = (int64_t)load64(d + H_BEGIN_TS, __ATOMIC_RELAXED);
    int64_t end_ts = (int64_t)load64(d + H_END_TS, __ATOMIC_ACQUIRE);
    if (!overlaps(begin_ts, sat_add(end_ts, 999), begin_ms, end_ms)) return n;

    uint32_t v = load32(d + slot_at(hash % fv->slot_num), __ATOMIC_ACQUIRE);
    uint32_t count = load32(d + H_INDEX_COUNT, __ATOMIC_ACQUIRE); /* >= v, read after it */
    uint32_t bound = count < fv->max_entries ? count : fv->max_entries;
    if (v > bound) return n; /* damaged slot */
    while (v != 0) {
        const uint8_t *e = d + entry_at(fv->slot_num, v);
        if (mq_get_u32(e + E_KEY_HASH) == hash) {
            int64_t lo = sat_add(begin_ts, (int64_t)mq_get_u32(e + E_TIME_DIFF) * 1000);
            uint64_t off = mq_get_u64(e + E_PHYS_OFF);
            if (overlaps(lo, sat_add(lo, 999), begin_ms, end_ms) && !has_off(offs, n, off)) {
                offs[n++] = off;
                if (n == max) return n;
            }
        }
        uint32_t prev = mq_get_u32(e + E_PREV);
        if (prev >= v) break; /* damaged chain: links only go to older entries */
        v = prev;
    }
    return n;
}

int ix_query(IndexStore *ix, MqSlice topic, MqSlice key, int64_t begin_ms, int64_t end_ms,
             size_t max, uint64_t *offs, size_t *n) {
    uint32_t hash;
    size_t got = 0;
    *n = 0;
    /* A key ix_put would reject was never indexed: no candidates. */
    if (max == 0 || begin_ms > end_ms || key_hash(topic, key, &hash) != MQ_OK) return MQ_OK;
    uint64_t cursor = 0; /* name of the file last searched */
    bool started = false;
    while (got < max) {
        FileView fv = {0};
        pthread_mutex_lock(&ix->lock);
        size_t i = started ? lower_bound(ix, cursor) : ix->count;
        if (i > 0) {
            IxFile *f = ix->files[i - 1]; /* newest file older than 'cursor' */
            mf_ref(f->mf);
            fv = (FileView){f->mf, f->data, f->name, f->slot_num, f->max_entries};
        }
        pthread_mutex_unlock(&ix->lock);
        if (!fv.mf) break;
        started = true;
        cursor = fv.name;
        got = query_file(&fv, hash, begin_ms, end_ms, max, offs, got);
        mf_unref(&fv.mf);
    }
    *n = got;
    return MQ_OK;
}

/* ---- maintenance -------------------------------------------------------------*/

uint64_t ix_end_phys(IndexStore *ix) {
    uint64_t end = 0;
    pthread_mutex_lock(&ix->lock);
    /* The newest file is empty right after a roll (or a crash after one). */
    for (size_t i = ix->count; i-- > 0;) {
        const uint8_t *d = ix->files[i]->data;
        if (load32(d + H_INDEX_COUNT, __ATOMIC_ACQUIRE) > 1) {
            end = load64(d + H_END_PHYS, __ATOMIC_ACQUIRE);
            break;
        }
    }
    pthread_mutex_unlock(&ix->lock);
    return end;
}

int ix_sync(IndexStore *ix) {
    int result = MQ_OK;
    uint64_t cursor = 0; /* name of the file last looked at */
    bool started = false;
    for (;;) {
        MappedFile *mf = NULL;
        pthread_mutex_lock(&ix->lock);
        size_t i = started ? lower_bound(ix, cursor) : 0;
        if (started && i < ix->count && ix->files[i]->name == cursor) i++;
        for (; i < ix->count && !mf; i++) {
            IxFile *f = ix->files[i];
            cursor = f->name;
            started = true;
            if (__atomic_exchange_n(&f->dirty, 0, __ATOMIC_ACQ_REL)) {
                mf = f->mf;
                mf_ref(mf);
            }
        }
        pthread_mutex_unlock(&ix->lock);
        if (!mf) break;
        int rc = mf_sync(mf); /* logs its failure */
        mf_unref(&mf);
        if (rc != MQ_OK) {
            /* Keep the file dirty so that the next ix_sync tries again. */
            pthread_mutex_lock(&ix->lock);
            i = lower_bound(ix, cursor);
            if (i < ix->count && ix->files[i]->name == cursor)
                __atomic_store_n(&ix->files[i]->dirty, 1, __ATOMIC_RELEASE);
            pthread_mutex_unlock(&ix->lock);
            if (result == MQ_OK) result = rc;
        }
    }
    return result;
}

int ix_delete_below_phys(IndexStore *ix, uint64_t min_phys) {
    int deleted = 0;
    for (;;) {
        IxFile *victim = NULL;
        pthread_mutex_lock(&ix->lock);
        for (size_t i = 0; i + 1 < ix->count; i++) {
            const uint8_t *d = ix->files[i]->data;
            if (load64(d + H_END_PHYS, __ATOMIC_ACQUIRE) < min_phys) {
                victim = ix->files[i];
                memmove(ix->files + i, ix->files + i + 1,
                        (ix->count - i - 1) * sizeof(*ix->files));
                ix->count--;
                break;
            }
        }
        pthread_mutex_unlock(&ix->lock);
        if (!victim) break;
        /* Queries holding a ref keep reading the unlinked mapping. */
        int rc = mf_mark_delete(victim->mf);
        free_file(victim);
        if (rc != MQ_OK) return rc;
        deleted++;
    }
    return deleted;
}

size_t ix_file_count(IndexStore *ix) {
    pthread_mutex_lock(&ix->lock);
    size_t n = ix->count;
    pthread_mutex_unlock(&ix->lock);
    return n;
}
