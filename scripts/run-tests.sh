#!/bin/bash
# Runs each test binary given, collects cmocka's per-binary summary and
# ends with one line "N passed, N failed".  Exit status 1 if any failed.
# Each binary's full output goes to build/test-logs/<unit|e2e>-<name>.log; a failing
# binary's log is printed.
set -u
logdir=${TEST_LOG_DIR:-build/test-logs}
mkdir -p "$logdir"
passed=0
failed=0
bad=()
for t in "$@"; do
    name=$(basename "$t")
    kind=$(basename "$(dirname "$t")") # unit or e2e: tests/unit/x and tests/e2e/x may share a name
    log="$logdir/$kind-$name.log"
    start=$(date +%s%N)
    "$t" >"$log" 2>&1
    rc=$?
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    secs=$(printf '%d.%d' $((ms / 1000)) $((ms % 1000 / 100)))
    p=$(grep -a -E '^\[  PASSED  \] [0-9]+ test' "$log" | tail -1 | grep -o -E '[0-9]+' | head -1)
    f=$(grep -a -E '^\[  FAILED  \] [0-9]+ test' "$log" | tail -1 | grep -o -E '[0-9]+' | head -1)
    p=${p:-0}
    f=${f:-0}
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi  # crashed before its summary
    passed=$((passed + p))
    failed=$((failed + f))
    if [ "$f" -ne 0 ]; then
        bad+=("$name")
        printf 'FAIL %-28s %3d passed %3d failed  %6ss  (exit %d)\n' "$name" "$p" "$f" "$secs" "$rc"
        sed 's/^/    /' "$log" | tail -60
    else
        printf 'ok   %-28s %3d passed  %6ss\n' "$name" "$p" "$secs"
    fi
done
[ ${#bad[@]} -gt 0 ] && echo "failing: ${bad[*]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
