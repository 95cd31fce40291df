#!/bin/bash
# Runs each test binary given, collects cmocka's per-binary summary and
# ends with one line "N passed, N failed".  Exit status 1 if any failed.
# Each binary's full output goes to build/test-logs/<unit|e2e>-<name>.log; a failing
# binary's log is printed.
#
# The e2e binaries record every HTTP exchange (PETREL_E2E_RECORD, see
# tests/lib/e2e.h) into <build>/e2e-responses.jsonl, <build> being the tree the
# e2e binaries were built in (build/ or build/san/, so `make test` and `make
# check` never mix); the file is removed first.  Two more cases follow the
# binaries: "openapi-lint" (redocly lint of openapi.yaml) and, when e2e
# binaries ran, "openapi-responses" (tests/schema/validate.mjs: the recorded
# responses against openapi.yaml).  Their logs are build/test-logs/schema-*.log.
# Last, with the e2e binaries, "console-browser": the web console in headless
# chromium (tests/browser/*.test.mjs).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
logdir=${TEST_LOG_DIR:-build/test-logs}
mkdir -p "$logdir"
passed=0
failed=0
bad=()

unset PETREL_E2E_RECORD
record=""
for t in "$@"; do
    case "$t" in
    */tests/e2e/*) record="${t%/tests/e2e/*}/e2e-responses.jsonl"; break ;;
    tests/e2e/*) record="$logdir/e2e-responses.jsonl"; break ;;
    esac
done
[ -n "$record" ] && rm -f "$record"

# report NAME LOG RC P F MS: adds to the totals and prints the line (and the
# log's tail when the case failed).
report() {
    local name=$1 log=$2 rc=$3 p=$4 f=$5 ms=$6
    local secs
    secs=$(printf '%d.%d' $((ms / 1000)) $((ms % 1000 / 100)))
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
}

for t in "$@"; do
    name=$(basename "$t")
    kind=$(basename "$(dirname "$t")") # unit or e2e: tests/unit/x and tests/e2e/x may share a name
    log="$logdir/$kind-$name.log"
    start=$(date +%s%N)
    if [ "$kind" = e2e ] && [ -n "$record" ]; then
        PETREL_E2E_RECORD="$record" "$t" >"$log" 2>&1
    else
        "$t" >"$log" 2>&1
    fi
    rc=$?
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    p=$(grep -a -E '^\[  PASSED  \] [0-9]+ test' "$log" | tail -1 | grep -o -E '[0-9]+' | head -1)
    f=$(grep -a -E '^\[  FAILED  \] [0-9]+ test' "$log" | tail -1 | grep -o -E '[0-9]+' | head -1)
    report "$name" "$log" "$rc" "${p:-0}" "${f:-0}" "$ms"
done

# node_case NAME CMD...: one case passed when CMD (run in the project root)
# exits 0.
node_case() {
    local name=$1
    shift
    local log="$logdir/schema-$name.log"
    local start rc ms
    start=$(date +%s%N)
    (cd "$root" && "$@") >"$log" 2>&1
    rc=$?
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    if [ "$rc" -eq 0 ]; then report "$name" "$log" 0 1 0 "$ms"; else report "$name" "$log" "$rc" 0 1 "$ms"; fi
}

abs_record=$record
case "$record" in /*) ;; ?*) abs_record="$PWD/$record" ;; esac
# Offline and quiet: no telemetry, no update check (config: redocly.yaml).
node_case openapi-lint env REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true \
    npx --no-install redocly lint openapi.yaml
if [ -n "$record" ]; then
    node_case openapi-responses node tests/schema/validate.mjs "$abs_record"
fi

# The console's browser tests (tests/browser, node --test driving Debian's
# chromium through playwright-core) against the same bin/petrel, when e2e
# binaries ran: one line with node's pass/fail counts; screenshots and
# timings.json go to <logdir>/console.
if [ -n "$record" ] && compgen -G "$root/tests/browser/*.test.mjs" >/dev/null; then
    log="$logdir/browser-console.log"
    start=$(date +%s%N)
    (cd "$root" && TEST_OUTPUT_DIR="$(cd "$logdir" && pwd)/console" \
        node --test --test-reporter=tap tests/browser/) >"$log" 2>&1
    rc=$?
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    p=$(grep -a -E '^# pass [0-9]+' "$log" | tail -1 | grep -o -E '[0-9]+')
    f=$(grep -a -E '^# fail [0-9]+' "$log" | tail -1 | grep -o -E '[0-9]+')
    report console-browser "$log" "$rc" "${p:-0}" "${f:-0}" "$ms"
    grep -a -E '^# *console-timing|^console-timing' "$log" | sed 's/^# *//; s/^/     /'
fi

[ ${#bad[@]} -gt 0 ] && echo "failing: ${bad[*]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
