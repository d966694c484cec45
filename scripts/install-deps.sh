#!/bin/sh
# Install hotcold's build and run dependencies (Debian/Ubuntu packages).
#   scripts/install-deps.sh              install them all (needs root)
#   scripts/install-deps.sh --if-missing install only when something is missing;
#                                        without root, print the command instead
set -eu
PKGS="build-essential pkg-config clang libclang-rt-dev libglpk-dev zlib1g-dev libopenblas-dev
ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo libcjson-dev libpcre2-dev libunistring-dev valgrind"

missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done

if [ "${1:-}" = "--if-missing" ] && [ -z "$missing" ]; then
    exit 0
fi
[ -n "$missing" ] || missing=" $PKGS"

if [ "$(id -u)" -ne 0 ]; then
    echo "hotcold: missing packages:$missing" >&2
    echo "hotcold: run as root: apt-get install -y$missing  (or: sudo sh scripts/install-deps.sh)" >&2
    exit 1
fi
echo "hotcold: installing:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
