/*
 * fuzz_checkpoint.c - the checkpoint decoder on arbitrary 64-byte blocks:
 * never crashes, and whatever it accepts re-encodes to the same bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "mq.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size != CKPT_SIZE) return 0;
    Checkpoint ck;
    if (ckpt_decode(data, &ck) != MQ_OK) return 0;
    uint8_t again[CKPT_SIZE];
    ckpt_encode(again, &ck);
    if (memcmp(again, data, CKPT_SIZE) != 0) abort();
    return 0;
}
