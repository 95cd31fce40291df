/* version.h - the one place the Petrel version is written. */
#ifndef PETREL_VERSION_H
#define PETREL_VERSION_H
#define PETREL_VERSION "0.1.0"
#endif
