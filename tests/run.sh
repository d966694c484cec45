#!/bin/sh
# Run every test binary and script (--binaries: only the binaries); print each
# case and the closing count line.
HC_BIN=${HC_BIN:-$(pwd)/bin}
HC_TESTS=${HC_TESTS:-$(pwd)/build/tests}
export HC_BIN
scripts=tests/test_*.sh
[ "${1:-}" = --binaries ] && scripts=
log=$(mktemp)
for t in "$HC_TESTS"/test_* $scripts; do
    [ -e "$t" ] || continue
    case $t in *.d|*.o) continue ;; esac
    name=$(basename "$t")
    start=$(date +%s)
    if case $t in *.sh) sh "$t" ;; *) "$t" ;; esac >"$log.one" 2>"$log.err"; then rc=0; else rc=$?; fi
    sed "s/^/[$name] /" "$log.one"
    cat "$log.one" >>"$log"
    if [ $rc -ne 0 ] && ! grep -q '^FAIL ' "$log.one"; then
        # crashed or exited non-zero without naming a case: that is a failure too
        echo "FAIL $name: exited with status $rc"; echo "FAIL $name" >>"$log"
        sed 's/^/    /' "$log.err" | tail -20
    elif grep -q '^FAIL ' "$log.one"; then
        sed 's/^/    /' "$log.err" | tail -20
    fi
    echo "[$name] ($(( $(date +%s) - start ))s)"
done
passed=$(grep -c '^ok ' "$log")
failed=$(grep -c '^FAIL ' "$log")
skipped=$(grep -c '^skip ' "$log")
rm -f "$log" "$log.one" "$log.err"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
