#!/bin/sh
# Installs the Debian packages Petrel builds and tests with, if missing.
# As root it runs apt-get; otherwise it prints the exact command and fails.
set -eu
PKGS="gcc make pkg-config libmicrohttpd-dev libjansson-dev libsqlite3-dev
libcurl4-openssl-dev libcmocka-dev clang libclang-rt-14-dev curl"
missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed'; then
        missing="$missing $p"
    fi
done
[ -z "$missing" ] && exit 0
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
