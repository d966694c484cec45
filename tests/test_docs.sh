#!/bin/sh
# Documentation: every option of each program's --help (and its subcommands'
# helps) is on docs/hc-NAME.md and in man/hc-NAME.1, and every option the page
# lists is in --help; the pages have the manual sections; links resolve; the
# committed man pages are what `make man` makes (when pandoc is installed); the
# README stays short; no code comment points outside the repository.
. tests/lib.sh

if command -v python3 >/dev/null; then
    python3 tests/docs_check.py options "$HC_BIN" || _failed=1
    python3 tests/docs_check.py links || _failed=1
else
    skip options "no python3"
fi

n=$(wc -l < README.md)
if [ "$n" -le 200 ]; then ok "readme_short ($n lines)"; else fail readme_short "README.md has $n lines (at most 200)"; fi

if grep -rn 'shared/''reference' --include='*.c' --include='*.h' --include='*.sh' --include='*.mk' \
        --include=Makefile --include='*.py' --include='*.cl' . >"$T/refs" 2>/dev/null; then
    fail no_outside_refs "$(head -3 "$T/refs")"
else
    ok no_outside_refs
fi

if command -v pandoc >/dev/null; then
    stale=""
    for page in docs/hc-*.md; do
        p=$(basename "$page" .md)
        sh scripts/man-page.sh "$page" > "$T/$p.1" 2>"$T/err" && cmp -s "$T/$p.1" "man/$p.1" || stale="$stale $p"
    done
    if [ -z "$stale" ]; then ok man_up_to_date; else fail man_up_to_date "man pages differ from docs (make man):$stale"; fi
else
    skip man_up_to_date "pandoc not installed"
fi
finish
