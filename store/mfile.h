/*
 * mfile.h - one preallocated, memory-mapped file of fixed size: the unit
 * of the commit log, consume queues and index files.
 *
 * A MappedFile is reference counted: readers take a ref while they look at
 * its bytes, so retention can unlink a file that is still being read; the
 * mapping goes away with the last ref.  Space is reserved with fallocate at
 * creation, so writes through the mapping never meet ENOSPC (which would be
 * SIGBUS).  All I/O goes through mq_io (io.h).
 */
#ifndef PETREL_MFILE_H
#define PETREL_MFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct MappedFile MappedFile;

/* mf_open maps the file 'path' of exactly 'size' bytes.  With 'create' the
 * file must not exist: it is created, fallocated to 'size' (MQ_ERR_FULL on
 * ENOSPC) and its directory fsynced.  Without 'create' it must exist
 * (MQ_ERR_NOTFOUND); a shorter file is extended (a crash during creation),
 * a longer one is MQ_ERR_CORRUPT.  'base_off' is the logical offset of
 * byte 0 (from the file name), kept for the caller.  Caller owns '*out'
 * (one ref); release with mf_unref. */
int mf_open(const char *path, uint64_t base_off, size_t size, bool create, MappedFile **out);

/* mf_ref adds a reference; mf_unref drops one and NULLs '*pp'.  The last
 * unref unmaps and closes (and unlinks, after mf_mark_delete).  NULL ok. */
void mf_ref(MappedFile *mf);
void mf_unref(MappedFile **pp);

/* mf_mark_delete unlinks the file now; the mapping stays readable for
 * the holders of refs.  Returns MQ_OK or MQ_ERR_IO. */
int mf_mark_delete(MappedFile *mf);

uint8_t *mf_data(const MappedFile *mf);     /* the mapping, borrowed */
size_t mf_size(const MappedFile *mf);       /* bytes */
uint64_t mf_base(const MappedFile *mf);     /* logical offset of byte 0 */
const char *mf_path(const MappedFile *mf);  /* borrowed */
int mf_fd(const MappedFile *mf);            /* read-write fd, borrowed */

/* mf_sync makes the file's written bytes durable (fdatasync).  Calling
 * thread blocks on disk: flusher threads only.  MQ_OK or MQ_ERR_IO. */
int mf_sync(MappedFile *mf);

/* mf_zero makes bytes ['from', 'to') read as zero and stay allocated
 * (memset for partial pages, FALLOC_FL_ZERO_RANGE for whole ones).  Used to
 * wipe a torn tail.  MQ_OK or MQ_ERR_IO. */
int mf_zero(MappedFile *mf, size_t from, size_t to);

/* mf_name_for formats the 20-digit file name of 'off' into 'buf' (>= 21). */
void mf_name_for(uint64_t off, char *buf);

/* mf_parse_name reads a 20-digit name; false if 'name' is not one. */
bool mf_parse_name(const char *name, uint64_t *off);

/* mf_list collects the 20-digit file names of directory 'dir' as numbers,
 * sorted ascending, ignoring other names.  Caller frees '*out' (NULL when
 * '*n' is 0).  MQ_OK, MQ_ERR_NOTFOUND (no such directory, not logged),
 * MQ_ERR_IO, MQ_ERR_NOMEM. */
int mf_list(const char *dir, uint64_t **out, size_t *n);

#endif
