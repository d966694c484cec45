#!/bin/sh
# End to end: scripts/pipeline.sh on a small synthetic model (artefacts valid,
# a second run byte-identical, stops at the failing step), `make model`'s
# dependencies (what a new budget / corpus / quant type rebuilds, shards in
# parallel under -j), and `make gpuidx-check` on the committed manifest.
. tests/lib.sh
ROOT=$(pwd)
need_programs pipeline hc-gguf hc-convert hc-quantize hc-profile hc-solve hc-run
# a fresh make, whatever make runs this test (its jobserver and variables stay out)
MK="env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory -C $ROOT"
cp models/synth-corpus.txt "$T/corpus.txt"
# a different, older corpus for make model (created before any artefact)
head -c 3000 models/synth-corpus.txt >"$T/c2.txt"
mkdir -p "$T/c1"; cp models/synth-corpus.txt "$T/c1/corpus.txt"

# ------------------------------------------------------------ scripts/pipeline.sh
pipe() { out=$1; shift; sh scripts/pipeline.sh -o "$out" --corpus "$T/corpus.txt" --vram-budget 340K \
             --solve-opts "--min-layer-neurons 0" -p "It's a \$test" -n 16 -t 1 "$@"; }
ARTS="model.gguf model-quant.gguf stats.gguf model.gpuidx"

check pipeline_runs pipe "$T/p1"
cp "$T/out" "$T/p1.out"
for f in $ARTS; do check "pipeline_artefact_valid_$f" "$HC_BIN/hc-gguf" check "$T/p1/$f"; done
# the planted hot set is found and placed: some neurons on the GPU, most activations covered
placed() { awk '/"totals":/ { t = 1 } t && /"gpu_neurons":/ { gsub(/[^0-9]/, ""); n = $0 + 0 }
                t && /"coverage":/ { gsub(/[^0-9.]/, ""); c = $0 + 0; exit !(n > 0 && n < 512 && c > 0.5) }' "$1"; }
check pipeline_places_hot_neurons placed "$T/p1/solve.json"
check pipeline_dense_text test -s "$T/p1/run-dense.txt"
# the printed commands are shell-quoted: pasting the dense run's gives its text
cmd=$(sed -n 's/^\[[0-9]*\/[0-9]*\] run: //p' "$T/p1.out")
if [ -n "$cmd" ] && eval "$cmd" 2>/dev/null | cmp -s - "$T/p1/run-dense.txt"; then ok pipeline_commands_paste
else fail pipeline_commands_paste "'$cmd' does not reproduce run-dense.txt"; fi
# with exact ReLU sparsity, sparse-CPU and hybrid runs (where hc-run has them) give the dense text
for k in sparse hybrid; do
    if [ -f "$T/p1/run-$k.txt" ]; then check "pipeline_${k}_text_is_dense" cmp "$T/p1/run-dense.txt" "$T/p1/run-$k.txt"
    elif grep -q "$k.*skipped: not available" "$T/p1.out"; then skip "pipeline_${k}_text_is_dense" "hc-run has no $k run"
    else fail "pipeline_${k}_text_is_dense" "no run-$k.txt and no 'skipped' line"; fi
done

check pipeline_second_run pipe "$T/p2"
for f in $ARTS run-dense.txt $(cd "$T/p1" && ls run-sparse.txt run-hybrid.txt 2>/dev/null); do
    check "pipeline_identical_$f" cmp "$T/p1/$f" "$T/p2/$f"
done
# shards profiled in parallel and merged give the same statistics and placement
check pipeline_shards pipe "$T/p3" --shards 3 --no-run
check pipeline_shards_identical_stats cmp "$T/p1/stats.gguf" "$T/p3/stats.gguf"
check pipeline_shards_identical_gpuidx cmp "$T/p1/model.gpuidx" "$T/p3/model.gpuidx"
# a GGUF source is used as is
check pipeline_gguf_source pipe "$T/p4" --src "$T/p1/model.gguf" --no-run
check pipeline_gguf_source_identical cmp "$T/p1/model.gpuidx" "$T/p4/model.gpuidx"

# a failing step stops the pipeline with that step's error and exit status
pipe "$T/pf" --corpus "$T/no-such-corpus.txt" >"$T/pf.out" 2>"$T/pf.err"; rc=$?
if [ $rc -eq 1 ] && grep -q '^hc-profile: ' "$T/pf.err" && grep -q "step 'profile' failed (exit status 1)" "$T/pf.err" &&
   [ -f "$T/pf/model-quant.gguf" ] && [ ! -e "$T/pf/stats.gguf" ] && [ ! -e "$T/pf/model.gpuidx" ] &&
   ! grep -q 'solve:' "$T/pf.out"; then ok pipeline_stops_at_failing_step
else fail pipeline_stops_at_failing_step "rc=$rc: $(cat "$T/pf.err")"; fi
check_fails pipeline_bad_option "unknown option" sh scripts/pipeline.sh --frobnicate

# ------------------------------------------------------------ make model
M=$T/m
A="SRC=synth OUT=$M HC_BIN=$HC_BIN"
S="SOLVE_FLAGS=--min-layer-neurons 0"
# mtimes FILE...: inode and modification time, one line per file (missing: -); the
# programs write through a rename, so a rewritten file has a new inode or time
mtimes() { for f; do stat -c "%i %y" "$M/$f" 2>/dev/null || echo -; done; }
# snap, then built NAME FILE...: since snap, exactly FILE... (of the four stages) were rewritten
STAGES="model.gguf model-quant.gguf stats.gguf model.gpuidx"
snap() { mtimes $STAGES >"$T/before"; }
built() {
    name=$1; shift
    mtimes $STAGES >"$T/after"
    got=$(paste -d'|' "$T/before" "$T/after" |
          awk -v s="$STAGES" 'BEGIN { split(s, n, " ") } { split($0, p, "|"); if (p[1] != p[2]) printf "%s ", n[NR] }')
    if [ "$got" = "${*:+$* }" ]; then ok "$name"; else fail "$name" "rebuilt '$got', expected '$*'"; fi
}

check make_model_build $MK model $A "$S" CORPUS="$T/c1/corpus.txt" BUDGET=340K
for f in $STAGES; do check "make_model_artefact_valid_$f" "$HC_BIN/hc-gguf" check "$M/$f"; done
check make_model_same_as_pipeline cmp "$T/p1/model.gpuidx" "$M/model.gpuidx"
check make_model_up_to_date $MK -q model $A "$S" CORPUS="$T/c1/corpus.txt" BUDGET=340K
snap; $MK model $A "$S" CORPUS="$T/c1/corpus.txt" BUDGET=340K >/dev/null 2>&1
built make_model_nothing_rebuilt
cp "$M/model.gpuidx" "$T/gpuidx.340K"

# a new budget re-runs only the solver
snap; $MK model $A "$S" CORPUS="$T/c1/corpus.txt" BUDGET=360K >"$T/mk.out" 2>&1
built make_budget_reruns_only_solve model.gpuidx
check make_budget_changes_placement sh -c "! cmp -s '$T/gpuidx.340K' '$M/model.gpuidx'"
check make_budget_stamp_kept $MK -q model $A "$S" CORPUS="$T/c1/corpus.txt" BUDGET=360K

# an edited corpus re-runs profile and solve
sleep 1
echo "The cat sat on the mat and the dog ran home." >>"$T/c1/corpus.txt"
snap; $MK model $A "$S" CORPUS="$T/c1/corpus.txt" BUDGET=360K >"$T/mk.out" 2>&1
built make_corpus_edit_reruns_profile_solve stats.gguf model.gpuidx
# another corpus file, older than the statistics, re-runs profile and solve too
snap; $MK model $A "$S" CORPUS="$T/c2.txt" BUDGET=360K >"$T/mk.out" 2>&1
built make_corpus_change_reruns_profile_solve stats.gguf model.gpuidx
# a new quant type re-runs quantize, profile and solve, not convert
snap; $MK model $A "$S" CORPUS="$T/c2.txt" BUDGET=360K QUANT=Q8_0 >"$T/mk.out" 2>&1
built make_quant_reruns_quantize_profile_solve model-quant.gguf stats.gguf model.gpuidx
check make_quant_q8_0 sh -c "'$HC_BIN/hc-gguf' dump '$M/model-quant.gguf' | grep -q 'ffn_up.weight.*Q8_0'"

# make -j2 SHARDS=2: both shards run at the same time (each waits, up to 20 s, until the
# other has started), and the merged statistics equal the single run's
cat >"$T/prof" <<EOF
#!/bin/sh
case "\$*" in *--shard*)
    touch "$T/rv.\$\$"; i=0
    while [ "\$(ls "$T"/rv.* | wc -l)" -lt 2 ] && [ \$i -lt 200 ]; do sleep 0.1; i=\$((i + 1)); done
    [ "\$(ls "$T"/rv.* | wc -l)" -ge 2 ] && echo together >>"$T/overlap" ;;
esac
exec "$HC_BIN/hc-profile" "\$@"
EOF
chmod +x "$T/prof"
check make_shards_build $MK -j2 model SRC=synth OUT="$T/s" HC_BIN="$HC_BIN" HC_PROFILE="$T/prof" "$S" \
    CORPUS="$T/c2.txt" BUDGET=360K QUANT=Q8_0 SHARDS=2
check make_shards_files test -f "$T/s/stats.shard0-2.gguf" -a -f "$T/s/stats.shard1-2.gguf"
check make_shards_in_parallel test "$(wc -l <"$T/overlap" 2>/dev/null)" = 2
check make_shards_merged_identical cmp "$M/stats.gguf" "$T/s/stats.gguf"
check make_shards_gpuidx_identical cmp "$M/model.gpuidx" "$T/s/model.gpuidx"
check_fails make_model_needs_corpus "CORPUS=" $MK model SRC=synth OUT="$T/x" HC_BIN="$HC_BIN"

# ------------------------------------------------------------ gpuidx-check
check gpuidx_check_committed $MK gpuidx-check HC_BIN="$HC_BIN"
G=$T/models; mkdir -p "$G"; cp models/* "$G/"
off=4000
b=$(od -An -tu1 -j $off -N1 "$G/synth-relu.gpuidx" | tr -d ' ')
printf "\\$(printf %03o $(( (b + 1) % 256 )))" | dd of="$G/synth-relu.gpuidx" bs=1 seek=$off conv=notrunc 2>/dev/null
check_fails gpuidx_check_tampered "synth-relu.gpuidx differs from the regenerated file at byte offset $off" \
    $MK gpuidx-check HC_BIN="$HC_BIN" GPUIDX_MANIFEST="$G/gpuidx.manifest"
if grep -q 'synth-relu.greedy.gpuidx\|synth-relu.ctx64.gpuidx' "$T/err"; then
    fail gpuidx_check_names_only_tampered "$(cat "$T/err")"; else ok gpuidx_check_names_only_tampered; fi
check gpuidx_update_rewrites $MK gpuidx-update HC_BIN="$HC_BIN" GPUIDX_MANIFEST="$G/gpuidx.manifest"
check gpuidx_update_restored cmp models/synth-relu.gpuidx "$G/synth-relu.gpuidx"
check gpuidx_check_after_update $MK gpuidx-check HC_BIN="$HC_BIN" GPUIDX_MANIFEST="$G/gpuidx.manifest"

# ------------------------------------------------------------ stories260K (fixtures)
F=$HC_FIXTURES
if have_fixtures && [ -f "$F/stories260K.bin" ]; then
    check pipeline_stories260K sh scripts/pipeline.sh -o "$T/st" --src "$F/stories260K.bin" --tokenizer "$F/tok512.bin" \
        --corpus "$F/tinystories-calib.txt" --profile-opts "--tokens 2048" -b 800K --solve-opts "--min-layer-neurons 0" \
        -p "Once upon a time" -n 16 -t 1
    for f in $ARTS; do check "pipeline_stories260K_valid_$f" "$HC_BIN/hc-gguf" check "$T/st/$f"; done
    check pipeline_stories260K_text grep -q "^Once upon a time, there was" "$T/st/run-dense.txt"
else
    skip pipeline_stories260K "no fixtures"
fi
finish
