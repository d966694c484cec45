#!/bin/sh
# The pipeline's profile shards on a real Slurm: a private single-node cluster on
# localhost (munged, slurmctld, slurmd started here, with every file in a
# temporary directory, and stopped at exit whatever happens), then
# scripts/pipeline.sh --slurm and make model LAUNCH=slurm profile the synthetic
# model in 4 shards through it: the merged statistics and the .gpuidx equal the
# local single run byte for byte; a failing shard, a failing merge and a task
# that dies without its exit status are named with their logs; a rerun submits
# only the missing shards; an interrupted run cancels its jobs. Needs root
# (slurmd) and Debian's slurm-wlm and munge; otherwise it reports skip.
. tests/lib.sh
ROOT=$(pwd)
need_programs slurm hc-gguf hc-convert hc-quantize hc-profile hc-solve hc-run
if [ "$(id -u)" -ne 0 ]; then skip slurm "needs root (slurmd runs jobs as their user)"; finish; fi
for p in munged mungekey slurmctld slurmd sbatch squeue scancel sinfo; do
    if ! command -v $p >/dev/null; then
        skip slurm "$p not installed (scripts/install-deps.sh installs slurm-wlm and munge)"; finish
    fi
done

# ------------------------------------------------------------ the cluster
# Nothing of this environment's Slurm settings leaks in (a test run inside a job).
for v in $(env | sed -n 's/^\(SLURM_[A-Za-z0-9_]*\|SBATCH_[A-Za-z0-9_]*\|SQUEUE_[A-Za-z0-9_]*\)=.*/\1/p'); do
    unset "$v"
done
CL=$T/slurm
mkdir -p "$CL/state" "$CL/spool" && mkdir -m 755 "$CL/run" && chmod 711 "$T" "$CL" || exit 1
export SLURM_CONF="$CL/slurm.conf"
# start NAME COMMAND...: run a daemon in the foreground, in the background; its
# process id in $CL/NAME.run, its output in $CL/NAME.log
start() { name=$1; shift; "$@" >>"$CL/$name.log" 2>&1 & echo $! >"$CL/$name.run"; }
# alive NAME: that daemon runs
alive() { [ -s "$CL/$1.run" ] && kill -0 "$(cat "$CL/$1.run")" 2>/dev/null; }
# stop NAME: TERM, then up to 10 s, then KILL
stop() {
    alive "$1" || return 0
    pid=$(cat "$CL/$1.run")
    kill "$pid"
    n=0
    while kill -0 "$pid" 2>/dev/null && [ $n -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
    kill -KILL "$pid" 2>/dev/null || true
}
# stop_slurm: cancel every job of this cluster, wait (10 s at most) for them to end, stop the daemons
stop_slurm() {
    if alive slurmctld; then
        timeout 10 scancel --user=root >/dev/null 2>&1
        end=$(($(date +%s) + 10))
        while [ "$(date +%s)" -lt $end ] && [ -n "$(timeout 5 squeue -h 2>/dev/null)" ]; do sleep 0.2; done
    fi
    stop slurmd; stop slurmctld; stop munged
}
trap 'stop_slurm; rm -rf "$T"' EXIT
trap 'exit 1' INT TERM HUP
# give_up WHAT LOG: Slurm could not be started here: skip, with the log's last lines
give_up() { skip slurm "$1: $(tail -n 3 "$2" 2>/dev/null | tr '\n' ' ')"; finish; }

# two free TCP ports, a pair of our own (two runs at once have different process
# ids), below the ephemeral ports that outgoing connections take (32768 and up)
port=$((20000 + $$ % 6000 * 2))
n=0
while ss -Htan "sport = :$port or sport = :$((port + 1))" 2>/dev/null | grep -q . && [ $n -lt 100 ]; do
    port=$((port + 2)) n=$((n + 1)); [ $port -lt 32766 ] || port=20000
done

mungekey -c -k "$CL/munge.key" 2>"$CL/mungekey.log" || give_up "mungekey failed" "$CL/mungekey.log"
start munged munged -F --key-file="$CL/munge.key" --socket="$CL/run/munge.sock" --pid-file="$CL/munged.pid" \
    --log-file="$CL/munged.log" --seed-file="$CL/munged.seed"
end=$(($(date +%s) + 10))
until [ -S "$CL/run/munge.sock" ]; do
    if ! alive munged || [ "$(date +%s)" -ge $end ]; then give_up "munged failed" "$CL/munged.log"; fi
    sleep 0.1
done

host=$(hostname -s)
cat >"$SLURM_CONF" <<EOF
ClusterName=hctest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$CL/run/munge.sock
StateSaveLocation=$CL/state
SlurmdSpoolDir=$CL/spool
SlurmctldPidFile=$CL/slurmctld.pid
SlurmdPidFile=$CL/slurmd.pid
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
NodeName=hcnode NodeHostname=$host NodeAddr=127.0.0.1 CPUs=$(nproc)
PartitionName=hc Nodes=hcnode Default=YES MaxTime=INFINITE State=UP
EOF
start slurmctld slurmctld -D -f "$SLURM_CONF"
start slurmd slurmd -D -N hcnode -f "$SLURM_CONF"
# the node is up and idle within 30 s
end=$(($(date +%s) + 30))
until [ "$(timeout 5 sinfo -h -n hcnode -o %t 2>/dev/null)" = idle ]; do
    alive slurmctld || give_up "slurmctld failed" "$CL/slurmctld.log"
    alive slurmd || give_up "slurmd failed" "$CL/slurmd.log"
    [ "$(date +%s)" -lt $end ] || give_up "the node is not idle after 30 s" "$CL/slurmd.log"
    sleep 0.2
done
ok slurm_cluster_up
export HC_SLURM_POLL=1
# every run through Slurm ends within 2 minutes (timeout's TERM makes slurm-profile cancel its jobs)
TO="timeout 120"

# ------------------------------------------------------------ scripts/pipeline.sh --slurm
cp models/synth-corpus.txt "$T/corpus.txt"
pipe() { out=$1; shift; $TO sh scripts/pipeline.sh -o "$out" --corpus "$T/corpus.txt" -b 340K \
             --solve-opts "--min-layer-neurons 0" -t 1 --no-run "$@"; }
check pipeline_local pipe "$T/local"
check pipeline_slurm pipe "$T/sl" --slurm --shards 4 --sbatch-opts "--partition=hc"
cp "$T/out" "$T/sl.out"
check pipeline_slurm_identical_stats cmp "$T/local/stats.gguf" "$T/sl/stats.gguf"
check pipeline_slurm_identical_gpuidx cmp "$T/local/model.gpuidx" "$T/sl/model.gpuidx"
# one job array of the 4 shards with the user's options, the merge after it
check pipeline_slurm_array grep -q "^sbatch --parsable .*--array=0-3 .*--partition=hc .*profile-shard.sbatch$" "$T/sl.out"
check pipeline_slurm_merge_after grep -q "^sbatch .*--dependency=afterok:[0-9]* .*profile-merge.sbatch$" "$T/sl.out"
check pipeline_slurm_progress grep -q "^slurm-profile: shards 4/4 done, 0 running, 0 pending, 0 failed; merge done" "$T/sl.out"
for i in 0 1 2 3; do check "pipeline_slurm_shard_log_$i" grep -q "stats.shard$i-4.gguf: [0-9]* tokens" "$T/sl/logs/profile-$i.out"; done

# a rerun submits only the shards whose files are missing, and keeps the others
rm "$T/sl/stats.shard1-4.gguf" "$T/sl/stats.shard3-4.gguf"
stat -c '%i %y' "$T/sl/stats.shard0-4.gguf" "$T/sl/stats.shard2-4.gguf" >"$T/kept.before"
check pipeline_slurm_rerun pipe "$T/sl" --slurm --shards 4
cp "$T/out" "$T/run.out"
check pipeline_slurm_rerun_array grep -q "^sbatch .*--array=1,3 " "$T/run.out"
check pipeline_slurm_rerun_says_kept grep -q "2 of 4 shards already profiled" "$T/run.out"
stat -c '%i %y' "$T/sl/stats.shard0-4.gguf" "$T/sl/stats.shard2-4.gguf" >"$T/kept.after"
check pipeline_slurm_rerun_kept_shards cmp "$T/kept.before" "$T/kept.after"
check pipeline_slurm_rerun_identical cmp "$T/local/stats.gguf" "$T/sl/stats.gguf"

# ------------------------------------------------------------ make model LAUNCH=slurm
# shard 2 fails (while $T/fail exists) once the other three have written their files;
# the merge fails while $T/failmerge exists
cat >"$T/prof" <<EOF
#!/bin/sh
[ "\$1" = merge ] && [ -f "$T/failmerge" ] && { echo "hc-profile: merge broke on purpose" >&2; exit 4; }
case "\$*" in *"--shard 2/4"*) if [ -f "$T/fail" ]; then
    i=0; while [ "\$(ls "$T"/m/stats.shard*-4.gguf 2>/dev/null | wc -l)" -lt 3 ] && [ \$i -lt 300 ]; do
        sleep 0.1; i=\$((i + 1)); done
    echo "hc-profile: shard 2 broke on purpose" >&2; exit 3; fi ;;
esac
exec "$HC_BIN/hc-profile" "\$@"
EOF
chmod +x "$T/prof"
MK="$TO env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory -C $ROOT"
A="SRC=synth OUT=$T/m HC_BIN=$HC_BIN HC_PROFILE=$T/prof CORPUS=$T/corpus.txt BUDGET=340K THREADS=1 LAUNCH=slurm SHARDS=4"
SF="SOLVE_FLAGS=--min-layer-neurons 0"
touch "$T/fail"
check_fails make_slurm_failing_shard "shard 2/4 failed (Slurm job [0-9]*_2, exit status 3); its log: $T/m/logs/profile-2.err" \
    $MK model $A "$SF" SBATCH_OPTS=--time=10
cp "$T/err" "$T/run.err"
check make_slurm_failing_shard_log grep -q "| hc-profile: shard 2 broke on purpose" "$T/run.err"
check make_slurm_failing_no_stats test ! -e "$T/m/stats.gguf" -a ! -e "$T/m/model.gpuidx"
rm "$T/fail"
check make_slurm_rerun $MK model $A "$SF" SBATCH_OPTS=--time=10
cp "$T/out" "$T/run.out"
check make_slurm_rerun_only_failed grep -q "^sbatch .*--array=2 .*--time=10 " "$T/run.out"
check make_slurm_identical_stats cmp "$T/local/stats.gguf" "$T/m/stats.gguf"
check make_slurm_identical_gpuidx cmp "$T/local/model.gpuidx" "$T/m/model.gpuidx"
check make_slurm_up_to_date $MK -q model $A "$SF"
# other profiling options: none of the old shards is reused
check make_slurm_new_options $MK model $A "$SF" "PROFILE_FLAGS=--tokens 2000"
cp "$T/out" "$T/run.out"
check make_slurm_new_options_all_shards grep -q "^sbatch .*--array=0-3 " "$T/run.out"
check make_slurm_new_options_stats sh -c "'$HC_BIN/hc-profile' show '$T/m/stats.gguf' | grep -q ' 2000 tokens'"

# ------------------------------------------------------------ scripts/slurm-profile.sh
SP="sh scripts/slurm-profile.sh -f $T/corpus.txt -n 4"
# a failing merge is named with its log (every shard of make's last run is there: only the merge job runs)
touch "$T/failmerge"
HC_PROFILE=$T/prof $TO $SP -m "$T/m/model-quant.gguf" -o "$T/m/stats.gguf" --profile-opts "--tokens 2000" \
    >"$T/run.out" 2>"$T/run.err"; rc=$?
if [ $rc -eq 4 ] && grep -q "^slurm-profile: 4 of 4 shards already profiled" "$T/run.out" &&
   ! grep -q -- "--array" "$T/run.out" && grep -q "| hc-profile: merge broke on purpose" "$T/run.err" &&
   grep -q "the merge failed (Slurm job [0-9]*, exit status 4); its log: $T/m/logs/merge.err" "$T/run.err"; then
    ok slurm_failing_merge
else fail slurm_failing_merge "rc=$rc: $(cat "$T/run.out" "$T/run.err")"; fi
printf '#!/bin/sh\nsleep 60\n' >"$T/slow"
chmod +x "$T/slow"
# running_task: the id of one running array task (JOB_TASK), after up to 60 s
running_task() {
    end=$(($(date +%s) + 60))
    until squeue -h -t R -o %i | grep -q _ || [ "$(date +%s)" -ge $end ]; do sleep 0.2; done
    squeue -h -t R -o %i | grep _ | head -n 1
}
# empty_queue: wait (20 s at most) until no job is left
empty_queue() {
    end=$(($(date +%s) + 20))
    while [ -n "$(squeue -h)" ] && [ "$(date +%s)" -lt $end ]; do sleep 0.2; done
    [ -z "$(squeue -h)" ]
}
# a task that ends without writing its exit status (its job script killed, as on a
# lost node) fails after 6 looks at the queue, named
printf '#!/bin/sh\ncase "$*" in *"--shard 1/4"*) kill -KILL $PPID; exit 0 ;; esac\nsleep 60\n' >"$T/vanish"
chmod +x "$T/vanish"
HC_PROFILE=$T/vanish $TO $SP -m "$T/m/model-quant.gguf" -o "$T/lost/stats.gguf" >"$T/lost.out" 2>&1; rc=$?
if [ $rc -eq 1 ] && empty_queue && grep -q "shard 1/4 failed (Slurm job [0-9]*_1, ended without an exit status: cancelled, out of time or memory, or its node failed); its log: $T/lost/logs/profile-1.err" "$T/lost.out"; then
    ok slurm_task_without_status_fails
else fail slurm_task_without_status_fails "rc=$rc: $(cat "$T/lost.out")"; fi
# interrupted while its shards run, it cancels its jobs
HC_PROFILE=$T/slow $SP -m "$T/m/model-quant.gguf" -o "$T/int/stats.gguf" >"$T/int.out" 2>&1 &
sp=$!
running_task >/dev/null
kill -TERM $sp; wait $sp; rc=$?
empty_queue
if [ $rc -eq 130 ] && grep -q "^slurm-profile: interrupted: cancelled job(s) [0-9]* [0-9]*$" "$T/int.out" &&
   [ -z "$(squeue -h)" ]; then ok slurm_interrupt_cancels
else fail slurm_interrupt_cancels "rc=$rc, queue: $(squeue -h | head -3): $(cat "$T/int.out")"; fi
check_fails slurm_refuses_array_option "--array=7 is set by slurm-profile" \
    $SP -m "$T/local/model-quant.gguf" -o "$T/x.gguf" --sbatch-opts "--array=7"
finish
