#!/bin/sh
# The whole hotcold chain for one model:
#   convert -> quantize -> profile -> solve -> run (dense, and hybrid where hc-run has it)
# Prints each step's command and what it wrote; stops at the first failing step
# with that step's error and exit status. See docs/pipeline.md.
set -u

usage() {
    cat <<'EOF'
usage: scripts/pipeline.sh [options]

  -s, --src SRC          synth (default: hc-convert synth, a ReLU model with a planted
                         hot set), a llama2.c checkpoint (.bin), a Hugging Face
                         directory, or a GGUF (used as is)
      --tokenizer FILE   llama2.c tokenizer (default: tokenizer.bin beside the checkpoint)
      --synth "OPTS"     hc-convert synth options
                         (default: --act relu --hot-fraction 0.1 --hot-skew 2)
  -q, --quant TYPE       Q4_0 (default), Q8_0, F16, BF16, F32, GPTQ, or none
  -f, --corpus FILE      profiling text, also GPTQ's calibration text
                         (default: models/synth-corpus.txt)
      --vram-budget SIZE GPU memory budget for hc-solve, bytes or K/M/G/T[iB] (default
                         4GiB; -b and --budget are its old spellings)
  -p, --prompt TEXT      prompt for hc-run (default: "Once upon a time")
  -n, --n-predict N      tokens to generate, greedy (default 32)
  -o, --out DIR          output folder (default: build/pipeline)
  -t, --threads N        threads for every step (default: each program's default)
      --shards N         profile N corpus shards in parallel and merge them (default 1;
                         the merged file is byte-identical to a single run)
      --slurm            profile the shards as a Slurm job array and merge them in a
                         Slurm job (scripts/slurm-profile.sh; docs/slurm.md)
      --sbatch-opts S    extra sbatch options with --slurm (e.g. "--partition=cpu --time=2-0")
      --convert-opts S   extra hc-convert options (llama2c/hf)
      --quant-opts S     extra hc-quantize options
      --profile-opts S   extra hc-profile options (e.g. "--tokens 20000 -c 256")
      --solve-opts S     extra hc-solve options (e.g. "--min-layer-neurons 0 --ctx 256")
      --run-opts S       extra hc-run options
      --no-run           stop after the solver
  -h, --help             this help

Writes in DIR: model.gguf (converted), model-quant.gguf, stats.gguf, model.gpuidx,
solve.json (hc-solve's report), profile.json (hc-profile show --json),
run-dense.txt, run-sparse.txt, run-hybrid.txt (generated text; sparse and hybrid
when hc-run offers them) and logs/ (each step's output).
Programs come from $HC_BIN (default: bin/ of this checkout).
EOF
}

here=$(cd "$(dirname "$0")/.." && pwd)
HC_BIN=${HC_BIN:-$here/bin}

src=synth tokenizer='' synth_opts="--act relu --hot-fraction 0.1 --hot-skew 2"
quant=Q4_0 corpus=$here/models/synth-corpus.txt budget=4GiB
prompt="Once upon a time" npredict=32 out=build/pipeline threads='' shards=1
convert_opts='' quant_opts='' profile_opts='' solve_opts='' run_opts='' do_run=1 slurm=0 sbatch_opts=''

die() { echo "pipeline: $*" >&2; exit 2; }
need() { [ $# -ge 2 ] || die "$1 needs a value (--help)"; }
while [ $# -gt 0 ]; do
    case $1 in
        -s|--src)        need "$@"; src=$2; shift ;;
        --tokenizer)     need "$@"; tokenizer=$2; shift ;;
        --synth)         need "$@"; synth_opts=$2; shift ;;
        -q|--quant)      need "$@"; quant=$2; shift ;;
        -f|--corpus)     need "$@"; corpus=$2; shift ;;
        --vram-budget|-b|--budget) need "$@"; budget=$2; shift ;;
        -p|--prompt)     need "$@"; prompt=$2; shift ;;
        -n|--n-predict)  need "$@"; npredict=$2; shift ;;
        -o|--out)        need "$@"; out=$2; shift ;;
        -t|--threads)    need "$@"; threads=$2; shift ;;
        --shards)        need "$@"; shards=$2; shift ;;
        --slurm)         slurm=1 ;;
        --sbatch-opts)   need "$@"; sbatch_opts=$2; shift ;;
        --convert-opts)  need "$@"; convert_opts=$2; shift ;;
        --quant-opts)    need "$@"; quant_opts=$2; shift ;;
        --profile-opts)  need "$@"; profile_opts=$2; shift ;;
        --solve-opts)    need "$@"; solve_opts=$2; shift ;;
        --run-opts)      need "$@"; run_opts=$2; shift ;;
        --no-run)        do_run=0 ;;
        -h|--help)       usage; exit 0 ;;
        *)               die "unknown option '$1' (--help)" ;;
    esac
    shift
done
case $shards in ''|*[!0-9]*|0) die "--shards $shards: not a positive integer" ;; esac
[ -z "$sbatch_opts" ] || [ $slurm = 1 ] || die "--sbatch-opts needs --slurm"
for p in hc-gguf hc-convert hc-quantize hc-profile hc-solve hc-run; do
    [ -x "$HC_BIN/$p" ] || die "$HC_BIN/$p: not found (build with make, or set HC_BIN)"
done
tflag=${threads:+-t $threads}
mkdir -p "$out/logs" || exit 1

# ---------------------------------------------------------------- helpers
nstep=0
total=4; [ $do_run = 1 ] && total=5
# size FILE: bytes, human-readable
size() {
    wc -c <"$1" | awk '{ b = $1; u = "B"; if (b >= 1048576) { b /= 1048576; u = "MiB" } else if (b >= 1024) { b /= 1024; u = "KiB" }
                         printf (u == "B") ? "%d %s" : "%.1f %s", b, u }'
}
# quote ARG...: the command as one would type it (paths under the current
# directory relative to it, single quotes where the shell needs them), so that
# a printed command can be pasted
quote() {
    sep=''
    for a; do
        a=${a#"$PWD"/}
        case $a in
            ''|*[!A-Za-z0-9_./:=,+@%-]*) a="'$(printf '%s' "$a" | sed "s/'/'\\\\''/g")'" ;;
        esac
        printf '%s%s' "$sep" "$a"
        sep=' '
    done
}
# step NAME CMD...: run one step; its stdout and stderr go to logs/NAME.{out,err}
# and are shown indented; a failure shows its error and ends the pipeline with its status
step() {
    name=$1; shift
    nstep=$((nstep + 1))
    echo "[$nstep/$total] $name: $(quote "$@")"
    "$@" >"$out/logs/$name.out" 2>"$out/logs/$name.err"
    rc=$?
    if [ $rc -ne 0 ]; then
        cat "$out/logs/$name.err" >&2
        echo "pipeline: step '$name' failed (exit status $rc); its output is in $out/logs/$name.*" >&2
        exit $rc
    fi
    sed 's/^/      /' "$out/logs/$name.out" "$out/logs/$name.err"
}
# wrote FILE...: name each output, its size, and hc-gguf check's verdict
wrote() {
    for f; do
        if chk=$("$HC_BIN/hc-gguf" check "$f" 2>&1); then
            printf '      -> %s  %s  (%s)\n' "$f" "$(size "$f")" "${chk#*: ok: }"
        else
            echo "$chk" >&2
            echo "pipeline: step '$name': $f is not a valid GGUF" >&2
            exit 1
        fi
    done
}

echo "pipeline: $src -> $out (quant $quant, corpus $(basename "$corpus"), budget $budget)"

# ---------------------------------------------------------------- 1. convert
if [ "$src" = synth ]; then
    # shellcheck disable=SC2086 # option strings are split on purpose
    step convert "$HC_BIN/hc-convert" synth -o "$out/model.gguf" $synth_opts
    base=$out/model.gguf
elif [ -d "$src" ]; then
    # shellcheck disable=SC2086
    step convert "$HC_BIN/hc-convert" hf "$src" -o "$out/model.gguf" $convert_opts
    base=$out/model.gguf
else
    case $src in
        *.gguf)
            nstep=$((nstep + 1))
            name=convert
            echo "[$nstep/$total] convert: $src is a GGUF already: nothing to convert"
            base=$src ;;
        *)
            tokenizer=${tokenizer:-$(dirname "$src")/tokenizer.bin}
            # shellcheck disable=SC2086
            step convert "$HC_BIN/hc-convert" llama2c "$src" "$tokenizer" -o "$out/model.gguf" $convert_opts
            base=$out/model.gguf ;;
    esac
fi
wrote "$base"

# ---------------------------------------------------------------- 2. quantize
case $quant in
    none|NONE)
        nstep=$((nstep + 1))
        echo "[$nstep/$total] quantize: none (--quant none)"
        model=$base ;;
    *)
        calib=
        case $quant in gptq|GPTQ) calib="--calib $corpus" ;; esac
        # shellcheck disable=SC2086
        step quantize "$HC_BIN/hc-quantize" -q $tflag $calib $quant_opts "$base" "$out/model-quant.gguf" "$quant"
        model=$out/model-quant.gguf
        wrote "$model" ;;
esac

# ---------------------------------------------------------------- 3. profile
if [ $slurm = 1 ]; then
    # the shards as a Slurm job array, the merge as a job after it; this waits for them
    nstep=$((nstep + 1))
    echo "[$nstep/$total] profile: $shards shards as a Slurm job array, then hc-profile merge as a Slurm job"
    name=profile
    HC_PROFILE=$HC_BIN/hc-profile sh "$here/scripts/slurm-profile.sh" -m "$model" -f "$corpus" -o "$out/stats.gguf" \
        -n "$shards" ${threads:+-t "$threads"} --profile-opts "$profile_opts" --sbatch-opts "$sbatch_opts" \
        --logs "$out/logs"
    rc=$?
    if [ $rc -ne 0 ]; then
        echo "pipeline: step 'profile' failed on Slurm (exit status $rc)" >&2
        exit $rc
    fi
elif [ "$shards" -eq 1 ]; then
    # shellcheck disable=SC2086
    step profile "$HC_BIN/hc-profile" -m "$model" -f "$corpus" -o "$out/stats.gguf" $tflag $profile_opts
else
    # the shards in parallel, then merge (merging all shards gives the single-run file)
    nstep=$((nstep + 1))
    echo "[$nstep/$total] profile: $shards shards in parallel, then hc-profile merge"
    pids='' shardfiles=''
    i=0
    while [ $i -lt "$shards" ]; do
        f=$out/stats.shard$i-$shards.gguf
        shardfiles="$shardfiles $f"
        # shellcheck disable=SC2086
        "$HC_BIN/hc-profile" -m "$model" -f "$corpus" -o "$f" --shard "$i/$shards" $tflag $profile_opts \
            >"$out/logs/profile-$i.out" 2>"$out/logs/profile-$i.err" &
        pids="$pids $!"
        i=$((i + 1))
    done
    i=0 rc=0
    for pid in $pids; do
        wait "$pid" || { r=$?; [ $rc -ne 0 ] || { rc=$r; failed=$i; }; }
        i=$((i + 1))
    done
    if [ $rc -ne 0 ]; then
        cat "$out/logs/profile-$failed.err" >&2
        echo "pipeline: step 'profile' failed in shard $failed/$shards (exit status $rc)" >&2
        exit $rc
    fi
    cat "$out"/logs/profile-*.out | sed 's/^/      /'
    nstep=$((nstep - 1))
    # shellcheck disable=SC2086
    step profile "$HC_BIN/hc-profile" merge $shardfiles -o "$out/stats.gguf"
fi
wrote "$out/stats.gguf"
"$HC_BIN/hc-profile" show "$out/stats.gguf" | sed 's/^/      /'
"$HC_BIN/hc-profile" show "$out/stats.gguf" --json >"$out/profile.json" || rm -f "$out/profile.json"

# ---------------------------------------------------------------- 4. solve
# shellcheck disable=SC2086
step solve "$HC_BIN/hc-solve" -m "$model" -s "$out/stats.gguf" --vram-budget "$budget" $solve_opts \
    -o "$out/model.gpuidx" --report "$out/solve.json"
wrote "$out/model.gpuidx"
if grep -q '^placed *0 of' "$out/logs/solve.out" &&
   case " $solve_opts " in *--min-layer-neurons*) false ;; *) true ;; esac; then
    echo "      note: no neuron placed on the GPU; if the budget has room, hc-solve's per-layer"
    echo "      minimum may exceed this model's n_ff: try --solve-opts \"--min-layer-neurons 0\""
fi

# ---------------------------------------------------------------- 5. run
[ $do_run = 1 ] || { echo "pipeline: done (--no-run)"; exit 0; }
# dense; then, where this hc-run has them, sparse FFN on the CPU and hybrid (hot
# neurons on the OpenCL device per model.gpuidx). Greedy, so the texts can be compared.
run_help=$("$HC_BIN/hc-run" --help 2>&1)
has() { case $run_help in *"$1"*) return 0 ;; esac; return 1; }
noidx=''; has '--disable-gpu-index' && noidx=--disable-gpu-index
dense=''; has '--dense ' && dense=--dense
# shellcheck disable=SC2086
step run "$HC_BIN/hc-run" -m "$model" -p "$prompt" -n "$npredict" --temp 0 $dense $noidx $tflag $run_opts
cp "$out/logs/run.out" "$out/run-dense.txt"
rm -f "$out/run-sparse.txt" "$out/run-hybrid.txt"
# same_text KIND: compare run-KIND.txt with the dense text
same_text() {
    if grep -q 'running the dense FFN' "$out/logs/run-$1.err"; then
        echo "      note: hc-run has no $1 FFN for this model (e.g. an INT4-GPTQ ffn_down_t): it ran the dense FFN"; return
    fi
    if cmp -s "$out/run-dense.txt" "$out/run-$1.txt"; then echo "      $1 text = dense text"
    else echo "      note: $1 text differs from the dense text (exact only for ReLU models)"; fi
}
if has '--sparse '; then
    nstep=$((nstep - 1))
    # shellcheck disable=SC2086
    step run-sparse "$HC_BIN/hc-run" -m "$model" --sparse $noidx -p "$prompt" -n "$npredict" --temp 0 $tflag $run_opts
    cp "$out/logs/run-sparse.out" "$out/run-sparse.txt"
    same_text sparse
else
    echo "      sparse CPU run: skipped: not available (hc-run has no --sparse)"
fi
if has '--gpu-index'; then
    nstep=$((nstep - 1))
    # shellcheck disable=SC2086
    step run-hybrid "$HC_BIN/hc-run" -m "$model" --gpu-index "$out/model.gpuidx" --vram-budget "$budget" \
        -p "$prompt" -n "$npredict" --temp 0 $tflag $run_opts
    cp "$out/logs/run-hybrid.out" "$out/run-hybrid.txt"
    same_text hybrid
else
    echo "      hybrid run: skipped: not available (hc-run has no --gpu-index)"
fi
echo "pipeline: done; artefacts in $out"
