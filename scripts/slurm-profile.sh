#!/bin/sh
# hc-profile's corpus shards as a Slurm job array, their merge as a job that
# depends on it; waits, shows progress, and fails naming the shard and its log.
# Used by scripts/pipeline.sh --slurm and make model LAUNCH=slurm; see docs/slurm.md.
set -u

usage() {
    cat <<'EOF'
usage: scripts/slurm-profile.sh -m MODEL -f CORPUS -o STATS [options]

  -m, --model FILE        model to profile
  -f, --corpus FILE       profiling text
  -o, --output FILE       merged statistics to write (STATS.gguf); the shards are
                          STATS.shardI-N.gguf beside it
  -n, --shards N          shards, one Slurm array task each (default 1)
  -t, --threads N         hc-profile threads per task (default: $SLURM_CPUS_PER_TASK, else 1)
      --profile-opts S    extra hc-profile options (the same for every shard)
      --sbatch-opts S     extra sbatch options for every job (--partition, --time, ...)
      --logs DIR          job scripts, logs and exit statuses (default: logs/ beside STATS)
  -h, --help              this help

Submits the shards whose files are missing as one job array (sbatch --array),
then hc-profile merge as a job with --dependency=afterok on it, and waits.
Shards made from another model, corpus, hc-profile program or options
(STATS.shards.txt) are removed first. Every path must be on a filesystem that
the compute nodes share. The program is $HC_PROFILE (default $HC_BIN/hc-profile);
$HC_SLURM_POLL is the seconds between two looks at the queue (default 10); a
task gone from the queue without its exit status fails after 6 looks.
EOF
}

here=$(cd "$(dirname "$0")/.." && pwd)
HC_BIN=${HC_BIN:-$here/bin}
HC_PROFILE=${HC_PROFILE:-$HC_BIN/hc-profile}
poll=${HC_SLURM_POLL:-10}

model='' corpus='' stats='' shards=1 threads='' profile_opts='' sbatch_opts='' logs=''
die() { echo "slurm-profile: $*" >&2; exit 2; }
need() { [ $# -ge 2 ] || die "$1 needs a value (--help)"; }
while [ $# -gt 0 ]; do
    case $1 in
        -m|--model)      need "$@"; model=$2; shift ;;
        -f|--corpus)     need "$@"; corpus=$2; shift ;;
        -o|--output)     need "$@"; stats=$2; shift ;;
        -n|--shards)     need "$@"; shards=$2; shift ;;
        -t|--threads)    need "$@"; threads=$2; shift ;;
        --profile-opts)  need "$@"; profile_opts=$2; shift ;;
        --sbatch-opts)   need "$@"; sbatch_opts=$2; shift ;;
        --logs)          need "$@"; logs=$2; shift ;;
        -h|--help)       usage; exit 0 ;;
        *)               die "unknown option '$1' (--help)" ;;
    esac
    shift
done
if [ -z "$model" ] || [ -z "$corpus" ] || [ -z "$stats" ]; then
    die "-m MODEL, -f CORPUS and -o STATS are required (--help)"
fi
case $shards in ''|*[!0-9]*|0) die "--shards $shards: not a positive integer" ;; esac
case $threads in *[!0-9]*|0) die "--threads $threads: not a positive integer" ;; esac
case $poll in ''|*[!0-9]*|0) die "HC_SLURM_POLL=$poll: not a positive integer" ;; esac
# seconds a task may be gone from the queue without its exit status before it
# counts as failed (a shared filesystem may show a new file late)
grace=$((6 * poll))
for o in $sbatch_opts; do
    case $o in -a|--array*|-d|--dependency*|-o|--output*|-e|--error*)
        die "--sbatch-opts: $o is set by slurm-profile (the shards' array, the merge's dependency, the logs)" ;;
    esac
done
for c in sbatch squeue scancel; do
    command -v $c >/dev/null || die "$c not found: Slurm's client commands must be on PATH"
done
for f in "$model" "$corpus"; do [ -f "$f" ] || die "$f: no such file"; done
[ -x "$HC_PROFILE" ] || die "$HC_PROFILE: not found (build with make, or set HC_BIN)"

# abs FILE: the absolute path (the jobs run elsewhere)
abs() { (cd "$(dirname "$1")" && printf '%s/%s\n' "$(pwd)" "$(basename "$1")"); }
mkdir -p "$(dirname "$stats")" || exit 1
model=$(abs "$model") corpus=$(abs "$corpus") stats=$(abs "$stats") HC_PROFILE=$(abs "$HC_PROFILE")
dir=$(dirname "$stats") base=${stats%.gguf}
logs=${logs:-$dir/logs}
mkdir -p "$logs" || exit 1
logs=$(cd "$logs" && pwd)
# q WORD: WORD quoted for sh
q() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }
shard() { printf '%s.shard%s-%s.gguf' "$base" "$1" "$shards"; }

# ---------------------------------------------------------------- which shards to run
# The shards' identity: the contents of the model, the corpus and the program,
# and the hc-profile options. Shards made from anything else are removed, so a
# rerun never merges stale ones.
stamp=$base.shards.txt
ident=$(printf 'model %s\ncorpus %s\nprogram %s\noptions %s\n' "$(cksum <"$model")" "$(cksum <"$corpus")" \
        "$(cksum <"$HC_PROFILE")" "$profile_opts")
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$ident" ]; then
    rm -f "$base".shard*-*.gguf
    printf '%s\n' "$ident" >"$stamp.tmp" && mv "$stamp.tmp" "$stamp" || exit 1
fi
todo='' kept=0 i=0
while [ $i -lt "$shards" ]; do
    if [ -f "$(shard $i)" ]; then kept=$((kept + 1)); else todo="$todo $i"; fi
    i=$((i + 1))
done
# ranges I...: 0 1 2 5 -> 0-2,5 (sbatch --array's syntax)
ranges() {
    echo "$@" | tr ' ' '\n' | awk 'NR == 1 { a = b = $1; next }
        $1 == b + 1 { b = $1; next }
        { printf "%s%s,", a, (a == b ? "" : "-" b); a = b = $1 }
        END { printf "%s%s\n", a, (a == b ? "" : "-" b) }'
}

# ---------------------------------------------------------------- job scripts
tflag=${threads:+-t $threads}
# the extra options split into words as pipeline.sh splits them, each quoted
popts=''
for w in $profile_opts; do popts="$popts $(q "$w")"; done
cat >"$logs/profile-shard.sbatch" <<EOF
#!/bin/sh
# one hc-profile shard per array task (written by scripts/slurm-profile.sh)
i=\$SLURM_ARRAY_TASK_ID
$(q "$HC_PROFILE") -m $(q "$model") -f $(q "$corpus") -o $(q "$base").shard\$i-$shards.gguf \\
    --shard \$i/$shards ${tflag:-"-t \${SLURM_CPUS_PER_TASK:-1}"}$popts
rc=\$? s=$(q "$logs")/profile-\$i.status
echo \$rc >"\$s.tmp" && mv "\$s.tmp" "\$s"
exit \$rc
EOF
files='' i=0
while [ $i -lt "$shards" ]; do files="$files $(q "$(shard $i)")"; i=$((i + 1)); done
cat >"$logs/profile-merge.sbatch" <<EOF
#!/bin/sh
# merge the $shards shards (written by scripts/slurm-profile.sh)
$(q "$HC_PROFILE") merge$files -o $(q "$stats")
rc=\$? s=$(q "$logs")/merge.status
echo \$rc >"\$s.tmp" && mv "\$s.tmp" "\$s"
exit \$rc
EOF

# ---------------------------------------------------------------- submit
# submit WHAT SCRIPT SBATCH-OPTIONS...: print the sbatch line, run it, add the job to $jobs
submit() {
    what=$1 script=$2; shift 2
    echo "sbatch --parsable --chdir=$dir $*${sbatch_opts:+ $sbatch_opts} $script"
    # shellcheck disable=SC2086 # the user's options are split on purpose
    if ! job=$(sbatch --parsable --chdir="$dir" "$@" $sbatch_opts "$script"); then
        cancel
        echo "slurm-profile: sbatch refused the $what job (its message is above)" >&2
        exit 1
    fi
    job=${job%%;*}
    jobs="$jobs $job"
    echo "  -> job $job"
}
jobs=''
# shellcheck disable=SC2086 # one argument per job
cancel() { [ -z "$jobs" ] || scancel $jobs 2>/dev/null; }
trap 'cancel; echo "slurm-profile: interrupted: cancelled job(s)$jobs" >&2; exit 130' INT TERM HUP

rm -f "$stats" "$logs/merge.status"
[ $kept -eq 0 ] || echo "slurm-profile: $kept of $shards shards already profiled (kept)"
array='' dep=''
if [ -n "$todo" ]; then
    for i in $todo; do rm -f "$logs/profile-$i.status"; done
    # shellcheck disable=SC2086 # one argument per shard
    submit shard "$logs/profile-shard.sbatch" --job-name=hc-profile --array="$(ranges $todo)" \
        --output="$logs/profile-%a.out" --error="$logs/profile-%a.err"
    array=$job dep="--dependency=afterok:$array --kill-on-invalid-dep=yes"
fi
# shellcheck disable=SC2086
submit merge "$logs/profile-merge.sbatch" --job-name=hc-merge $dep \
    --output="$logs/merge.out" --error="$logs/merge.err"
merge=$job

# ---------------------------------------------------------------- wait
# look JOB: " TASK:STATE ..." of JOB's tasks in this user's queue (array tasks one
# by one, TASK N/A for a plain job); fails when squeue does (that look is skipped)
look() {
    q=$(squeue -h -r -u "$(id -un)" -o '%F %K %t' 2>/dev/null) || return 1
    printf '%s\n' "$q" | awk -v j="$1" '$1 == j { printf " %s:%s", $2, $3 } END { print " " }'
}
# state TASK STATUSFILE OUTPUT: done, failed, running, pending or gone (from
# the queue), from the status file the job writes, else from $tasks (a look)
state() {
    if [ -f "$2" ]; then
        if [ "$(cat "$2")" = 0 ] && [ -f "$3" ]; then echo "done"; else echo failed; fi
        return
    fi
    case $tasks in
        *" $1:R "*|*" $1:CG "*|*" $1:CF "*|*" $1:SO "*) echo running ;;
        *" $1:"*) echo pending ;;
        *) echo gone ;;
    esac
}
# settle NAME: $s for a task gone from the queue without an exit status: running
# for $grace s since it was first seen gone (it may be writing it), then failed
settle() {
    eval "since=\${gone_$1:-}"
    [ -n "$since" ] || { since=$(date +%s); eval "gone_$1=$since"; }
    if [ $(($(date +%s) - since)) -ge $grace ]; then s=failed; else s=running; fi
}
# why_failed STATUSFILE OUTPUT: what went wrong
why_failed() {
    st=$(cat "$1" 2>/dev/null || echo '')
    case $st in
        '') echo "ended without an exit status: cancelled, out of time or memory, or its node failed" ;;
        0) echo "exit status 0 but no $2" ;;
        *) echo "exit status $st" ;;
    esac
}
# report_failed WHAT JOB LOG STATUSFILE OUTPUT: the end of the log, then one line
# naming it; the first failure's exit status (1 when unknown) becomes ours, $rc
report_failed() {
    [ -f "$3" ] && tail -n 5 "$3" | sed 's/^/  | /' >&2
    echo "slurm-profile: $1 failed (Slurm job $2, $(why_failed "$4" "$5")); its log: $3" >&2
    [ -z "$rc" ] || return 0
    rc=$(cat "$4" 2>/dev/null || echo '')
    case $rc in ''|0|*[!0-9]*) rc=1 ;; esac
}

last='' rc=
while :; do
    sleep "$poll"
    tasks=$(look "$array") || continue
    n_done=$kept n_run=0 n_pend=0 n_bad=0 bad=''
    for i in $todo; do
        s=$(state "$i" "$logs/profile-$i.status" "$(shard "$i")")
        [ "$s" != gone ] || settle "shard$i"
        case $s in
            done) n_done=$((n_done + 1)) ;; running) n_run=$((n_run + 1)) ;;
            pending) n_pend=$((n_pend + 1)) ;; failed) n_bad=$((n_bad + 1)) bad="$bad $i" ;;
        esac
    done
    line="slurm-profile: shards $n_done/$shards done, $n_run running, $n_pend pending, $n_bad failed"
    m=''
    if [ "$n_done" -eq "$shards" ]; then
        tasks=$(look "$merge") || continue
        s=$(state N/A "$logs/merge.status" "$stats")
        [ "$s" != gone ] || settle merge
        m=$s
        line="$line; merge $m"
    fi
    [ "$line" = "$last" ] || { echo "$line"; last=$line; }
    if [ -n "$bad" ]; then
        cancel
        for i in $bad; do
            report_failed "shard $i/$shards" "${array}_$i" "$logs/profile-$i.err" "$logs/profile-$i.status" "$(shard "$i")"
        done
        echo "slurm-profile: cancelled job(s)$jobs; a rerun submits only the shards without a file" >&2
        exit "$rc"
    fi
    case $m in
        done) echo "slurm-profile: merged into $stats"; exit 0 ;;
        failed) report_failed "the merge" "$merge" "$logs/merge.err" "$logs/merge.status" "$stats"; exit "$rc" ;;
    esac
done
