#!/bin/bash
# Runs each bench binary given, one after the other, passing its output
# through, and keeps a copy in build/bench-logs/<name>.log.  Benchmarks
# never fail the build: this script exits 0 even when a figure misses its
# target or a binary fails; the last line sums up every binary's
# "bench: N figures, M targets met, K missed" line.
set -u
logdir=${BENCH_LOG_DIR:-build/bench-logs}
mkdir -p "$logdir"
ran=0
broken=()
figures=0
met=0
missed=0
for b in "$@"; do
    name=$(basename "$b")
    log="$logdir/$name.log"
    echo "==== $name"
    if [ ! -x "$b" ]; then
        echo "run-bench: '$b' is not an executable" | tee "$log"
        broken+=("$name")
        continue
    fi
    "$b" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    ran=$((ran + 1))
    sum=$(grep -a -E '^bench: [0-9]+ figures' "$log" | tail -1)
    if [ -n "$sum" ]; then
        read -r f m k < <(echo "$sum" | grep -o -E '[0-9]+' | head -3 | tr '\n' ' ')
        figures=$((figures + f))
        met=$((met + m))
        missed=$((missed + k))
    fi
    if [ "$rc" -ne 0 ] || [ -z "$sum" ]; then
        broken+=("$name (exit $rc)")
    fi
    echo
done
line="run-bench: $ran binaries, $figures figures, $met targets met, $missed missed"
[ ${#broken[@]} -gt 0 ] && line="$line; did not complete cleanly: ${broken[*]}"
echo "$line (logs in $logdir)"
exit 0
