#!/bin/bash
# Builds each libFuzzer harness given (tests/fuzz/fuzz_<name>.c) with clang
# and ASan/UBSan, then runs it for SECONDS seconds over a working copy of
# tests/fuzz/corpus/<name>/.  Crashers are written to build/fuzz/ and make
# the script fail.  Usage: scripts/fuzz.sh SECONDS tests/fuzz/fuzz_*.c
#
# A harness is linked with store/ and core/; one that includes a gateway/
# header also gets gateway/ (all but main.c) and libmicrohttpd, which the
# gateway objects reference although the harness never starts a daemon.
set -u
secs=${1:-60}
shift
out=build/fuzz
mkdir -p "$out"
srcs=$(ls store/*.c core/*.c 2>/dev/null)
gw_srcs=$(ls gateway/*.c 2>/dev/null | grep -v '^gateway/main\.c$')
cflags="-g -O1 -std=c11 -D_POSIX_C_SOURCE=200809L -fsanitize=fuzzer,address,undefined
        -fno-sanitize-recover=all -Istore -Icore -Igateway -Itests/lib -pthread
        $(pkg-config --cflags jansson sqlite3 libcurl 2>/dev/null)"
libs="$(pkg-config --libs jansson sqlite3 libcurl 2>/dev/null) -lm"
gw_cflags=$(pkg-config --cflags libmicrohttpd 2>/dev/null)
gw_libs=$(pkg-config --libs libmicrohttpd 2>/dev/null)

# True when harness $1 includes a header of gateway/.
uses_gateway() {
    local inc
    for inc in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$1"); do
        [ -f "gateway/$inc" ] && return 0
    done
    return 1
}

failed=0
ran=0
for h in "$@"; do
    name=$(basename "$h" .c)
    name=${name#fuzz_}
    bin="$out/fuzz_$name"
    hsrcs=$srcs
    hcflags=$cflags
    hlibs=$libs
    if uses_gateway "$h"; then
        hsrcs="$srcs $gw_srcs"
        hcflags="$cflags $gw_cflags"
        hlibs="$gw_libs $libs"
    fi
    # shellcheck disable=SC2086
    if ! clang $hcflags "$h" $hsrcs -o "$bin" $hlibs; then
        echo "fuzz: cannot build $h"
        failed=$((failed + 1))
        continue
    fi
    work="$out/corpus-$name"
    mkdir -p "$work"
    [ -d "tests/fuzz/corpus/$name" ] && cp -n "tests/fuzz/corpus/$name"/* "$work"/ 2>/dev/null
    dict=""
    [ -f "tests/fuzz/$name.dict" ] && dict="-dict=tests/fuzz/$name.dict"
    echo "fuzz: $name for ${secs}s"
    if "$bin" -max_total_time="$secs" -print_final_stats=1 -artifact_prefix="$out/$name-" \
        $dict "$work" > "$out/$name.log" 2>&1; then
        echo "ok   fuzz_$name: $(grep -a -E '^stat::number_of_executed_units' "$out/$name.log" |
            awk '{print $2}') runs, no crash"
        ran=$((ran + 1))
    else
        echo "FAIL fuzz_$name: see $out/$name.log"
        tail -30 "$out/$name.log"
        failed=$((failed + 1))
    fi
done
echo "$ran passed, $failed failed"
[ "$failed" -eq 0 ]
