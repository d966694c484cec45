# Shell test helpers: source from tests/test_*.sh. Each case prints
# "ok NAME", "FAIL NAME: why" or "skip NAME: why", like the C harness.
set -u
HC_BIN=${HC_BIN:-$(pwd)/bin}
HC_FIXTURES=${HC_FIXTURES:-../shared/fixtures}
T=$(mktemp -d "${TMPDIR:-/tmp}/hctest.XXXXXX")
trap 'rm -rf "$T"' EXIT
_failed=0

have_fixtures() { [ -d "$HC_FIXTURES" ]; }
ok()   { echo "ok $1"; }
fail() { echo "FAIL $1: $2"; _failed=1; }
skip() { echo "skip $1: $2"; }
# check NAME COMMAND...: the command must exit 0
check() { name=$1; shift; if "$@" >"$T/out" 2>"$T/err"; then ok "$name"; else fail "$name" "$* -> $(head -c 300 "$T/err")"; fi; }
# check_fails NAME PATTERN COMMAND...: must exit non-zero with PATTERN on stderr
check_fails() {
    name=$1; pat=$2; shift 2
    if "$@" >"$T/out" 2>"$T/err"; then fail "$name" "succeeded: $*"
    elif grep -q -- "$pat" "$T/err"; then ok "$name"
    else fail "$name" "stderr lacks '$pat': $(head -c 300 "$T/err")"; fi
}
finish() { exit $_failed; }
# need_programs NAME PROGRAM...: make $HC_BIN absolute; if a program is not built
# there, skip NAME and end the test
need_programs() {
    name=$1; shift
    HC_BIN=$(cd "$HC_BIN" 2>/dev/null && pwd) || HC_BIN=$(pwd)/bin
    for p; do
        if [ ! -x "$HC_BIN/$p" ]; then skip "$name" "$HC_BIN/$p not built"; finish; fi
    done
}
