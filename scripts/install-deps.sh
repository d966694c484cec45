#!/bin/sh
# Install hotcold's build and run dependencies (Debian/Ubuntu packages).
#   scripts/install-deps.sh              install them all (needs root)
#   scripts/install-deps.sh --if-missing install only when something is missing;
#                                        without root, print the command instead
#   scripts/install-deps.sh --help       this text
# OPTIONAL packages serve one test only and the programs do not need them:
# slurm-wlm and munge for tests/test_slurm.sh (a private single-node Slurm; it
# reports skip without them). Without root a missing optional package is named
# but does not stop `make test`. Debian enables their system services (munge,
# slurmctld, slurmd) on install; the test uses none of them, it runs its own.
set -eu
usage() {
    cat <<'EOF'
usage: sh scripts/install-deps.sh [--if-missing | --list | --help]

Installs the Debian/Ubuntu packages hotcold needs to build, test and run
(apt-get, as root).
  (no option)    install them all
  --if-missing   install only when something is missing; without root, print
                 the apt-get command to run instead (what make test/demo do)
  --list         print the package names, one per line, and exit
  -h, --help     this help
EOF
}
PKGS="build-essential pkg-config clang libclang-rt-dev libglpk-dev zlib1g-dev libzip-dev libopenblas-dev
ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo libcjson-dev libpcre2-dev libunistring-dev valgrind"
OPTIONAL="slurm-wlm munge"

case ${1:-} in
    -h|--help) usage; exit 0 ;;
    --list) printf '%s\n' $PKGS $OPTIONAL; exit 0 ;;
    ''|--if-missing) ;;
    *) echo "install-deps: unknown option '$1' (see --help)" >&2; exit 1 ;;
esac

# absent PKG...: those not installed
absent() {
    for p; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || printf ' %s' "$p"
    done
}
# shellcheck disable=SC2086 # one argument per package
missing=$(absent $PKGS) optional=$(absent $OPTIONAL)

if [ "${1:-}" = "--if-missing" ] && [ -z "$missing$optional" ]; then
    exit 0
fi
[ -n "$missing$optional" ] || missing=" $PKGS $OPTIONAL"

if [ "$(id -u)" -ne 0 ]; then
    if [ -z "$missing" ] && [ "${1:-}" = "--if-missing" ]; then
        echo "hotcold: optional packages missing (some tests will skip):$optional" >&2
        exit 0
    fi
    echo "hotcold: missing packages:$missing$optional" >&2
    echo "hotcold: run as root: apt-get install -y$missing$optional  (or: sudo sh scripts/install-deps.sh)" >&2
    exit 1
fi
echo "hotcold: installing:$missing$optional" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing$optional >/dev/null
