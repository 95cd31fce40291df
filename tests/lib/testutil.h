/*
 * testutil.h - helpers shared by the unit, end-to-end and bench programs:
 * temporary directories, file helpers and a cmocka include block.
 */
#ifndef PETREL_TESTUTIL_H
#define PETREL_TESTUTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

/* tu_mkdtemp makes a fresh directory under $TMPDIR (or /tmp) named
 * petrel-<tag>-XXXXXX; returns a malloc'd path (caller frees) or aborts. */
char *tu_mkdtemp(const char *tag);

/* tu_rmtree removes 'path' recursively (ignores errors). */
void tu_rmtree(const char *path);

/* tu_path joins 'dir' and a printf-style suffix into a static-free malloc'd
 * string (caller frees). */
char *tu_path(const char *dir, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* tu_file_size returns the size of 'path' or -1. */
long long tu_file_size(const char *path);

/* tu_exists is 1 when 'path' exists. */
int tu_exists(const char *path);

#endif
