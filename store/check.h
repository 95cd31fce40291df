/*
 * check.h - offline verification and dumping of a data directory (the
 * store must not be open): `petrel check DIR` and `petrel dump DIR`.
 *
 * check walks every commit log segment record by record (magic, sizes,
 * position, both CRCs), then every consume queue entry (it must point at a
 * valid record of its own topic and queue, with the right size and queue
 * offset), and the checkpoint.  It changes nothing.
 */
#ifndef PETREL_CHECK_H
#define PETREL_CHECK_H

#include <stdint.h>
#include <stdio.h>

typedef struct CheckReport {
    uint64_t segments;        /* commit log segments */
    uint64_t records;         /* valid records */
    uint64_t log_end;         /* offset after the last valid record */
    uint64_t bad_offset;      /* first bad record, UINT64_MAX if none */
    uint64_t queues;          /* consume queues */
    uint64_t entries;         /* queue entries checked */
    uint64_t bad_entries;     /* entries that do not match their record */
    uint64_t entries_past_end; /* entries pointing past log_end (recovery drops them) */
    int checkpoint;           /* MQ_OK, MQ_ERR_NOTFOUND or MQ_ERR_CORRUPT */
    int abort_present;        /* 1 if the abort file exists */
} CheckReport;

/* check_dir verifies the data directory 'dir' with segments of
 * 'segment_size' bytes, printing one line per problem to 'out' (NULL =
 * silent).  Returns MQ_OK if nothing is wrong, MQ_ERR_CORRUPT if something
 * is, another error if the directory cannot be read. */
int check_dir(const char *dir, uint64_t segment_size, FILE *out, CheckReport *rep);

/* check_dump prints up to 'count' records from log offset 'from', one per
 * line (offset, size, topic, queue, queue offset, store time, properties,
 * body preview).  Returns MQ_OK or an error. */
int check_dump(const char *dir, uint64_t segment_size, uint64_t from, uint64_t count, FILE *out);

/* check_main is `petrel check|dump ...`; 'argv[0]' is "check" or "dump".
 * Returns the process exit status. */
int check_main(int argc, char **argv);

#endif
