#!/bin/sh
# Installs the Debian packages Petrel builds and tests with, if missing.
# As root it runs apt-get; otherwise it prints the exact command and fails.
# Then it installs the pinned Node.js tools (npm ci) when they are missing.
# With --tests (make test, make check) it also installs chromium, which the
# console's browser tests drive through playwright-core; `make run` does
# without that download.
set -eu
PKGS="gcc make pkg-config libmicrohttpd-dev libjansson-dev libsqlite3-dev
libcurl4-openssl-dev libcmocka-dev clang libclang-rt-14-dev curl wrk nodejs npm"
if [ "${1:-}" = --tests ]; then PKGS="$PKGS chromium"; fi
missing=""
for p in $PKGS; do
    # NodeSource's nodejs (on the project's machines) bundles npm and conflicts
    # with Debian's npm package: a working npm counts as installed.
    if [ "$p" = npm ] && command -v npm >/dev/null 2>&1; then continue; fi
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed'; then
        missing="$missing $p"
    fi
done
# Node.js tools of `make test` (openapi.yaml lint, live response validation,
# playwright-core for the browser tests),
# pinned by package-lock.json: `npm ci` when node_modules is missing or older
# than the lock file.  Needs the npm registry; fails with a clear message.
npm_deps() {
    cd "$(dirname "$0")/.."
    stamp=node_modules/.package-lock.json
    if [ -f "$stamp" ] && ! [ package-lock.json -nt "$stamp" ]; then return 0; fi
    if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
        echo "petrel: node and npm are needed (Node.js >= 20.19): run make deps as root" >&2
        exit 1
    fi
    if ! node -e 'const [a, b] = process.versions.node.split(".").map(Number);
                  process.exit(a > 20 || (a === 20 && b >= 19) ? 0 : 1)'; then
        echo "petrel: Node.js $(node --version) is too old: the tools need >= 20.19" >&2
        exit 1
    fi
    echo "petrel: installing the Node.js tools (npm ci)" >&2
    log=$(mktemp)
    if ! npm ci --no-audit --no-fund --loglevel=error >"$log" 2>&1; then
        cat "$log" >&2
        rm -f "$log"
        echo "petrel: npm ci failed (package.json, package-lock.json; the npm registry" \
             "must be reachable)" >&2
        exit 1
    fi
    rm -f "$log"
}
[ -z "$missing" ] && { npm_deps; exit 0; }
cmd="apt-get install -y --no-install-recommends$missing"
if [ "$(id -u)" -ne 0 ]; then
    echo "petrel: missing Debian packages:$missing" >&2
    echo "run as root:  apt-get update && $cmd" >&2
    exit 1
fi
echo "petrel: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
$cmd
npm_deps
