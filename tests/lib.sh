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
# same_logits NAME A B [TOL]: two logit files agree to TOL (default 1e-6) of the largest
same_logits() {
    if python3 - "$2" "$3" "${4:-1e-6}" >"$T/why" <<'PY'
import sys
a = [float(x) for x in open(sys.argv[1])]
b = [float(x) for x in open(sys.argv[2])]
d = max(abs(x - y) for x, y in zip(a, b)) / max(abs(x) for x in a) if len(a) == len(b) and a else float("inf")
print("max difference %.3g of the largest" % d)
sys.exit(0 if d <= float(sys.argv[3]) else 1)
PY
    then ok "$1"; else fail "$1" "$(cat "$T/why")"; fi
}
# need_programs NAME PROGRAM...: make $HC_BIN absolute; if a program is not built
# there, skip NAME and end the test
need_programs() {
    name=$1; shift
    HC_BIN=$(cd "$HC_BIN" 2>/dev/null && pwd) || HC_BIN=$(pwd)/bin
    for p; do
        if [ ! -x "$HC_BIN/$p" ]; then skip "$name" "$HC_BIN/$p not built"; finish; fi
    done
}
