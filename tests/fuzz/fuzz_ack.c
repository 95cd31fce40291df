/*
 * fuzz_ack.c - the ack body decoders (gateway/ack_req.c) on arbitrary
 * bytes: neither crashes, and whatever the fast path accepts the jansson
 * path accepts too, with the same topic and the same handles in the same
 * order (the fast path is only a shortcut, never a second dialect).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ack_req.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *body = (const char *)data;
    AckReq fast, slow;
    GwProblem p;
    bool f = ack_decode_fast(body, size, &fast);
    bool s = ack_decode_json(body, size, &slow, &p);
    if (f) {
        if (!s) abort();
        if (strcmp(fast.topic, slow.topic) != 0 || fast.n != slow.n) abort();
        for (size_t i = 0; i < fast.n; i++) {
            if (fast.lens[i] != slow.lens[i] ||
                memcmp(fast.handles[i], slow.handles[i], fast.lens[i]) != 0)
                abort();
        }
    } else if (fast.n != 0 || fast.handles || fast.root) {
        abort(); /* a refused fast decode leaves nothing behind */
    }
    if (!s && (p.status < 400 || p.status > 599)) abort();
    ack_req_free(&fast);
    ack_req_free(&slow);
    return 0;
}
