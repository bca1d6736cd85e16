# Sourced by tests/cli/slurm.sh: a real one-node Slurm on localhost, all of it in one directory.
#   slurm_up DIR PLUGIN PLUGSTACK_ARGS   writes munge's key, slurm.conf, gres.conf, plugstack.conf
#                                        into DIR, starts munged, slurmctld and slurmd (as background
#                                        jobs of the calling shell, so lib.sh's cleanup ends them)
#                                        and waits (bounded) until the node is idle. 0, or 1 with
#                                        the reason in $slurm_why. PLUGIN "-": no plugin;
#                                        $SLURM_EXTRA_CONF: more slurm.conf lines.
#   slurm_down                           ends the daemons slurm_up started (and waits for them).
# The node has one GPU (the simulated one) as gres/gpu and as 4 gres/shard, like vgpu-slurm(7).
# Everything the daemons need comes from DIR: their own munge socket, ports, spool and state, so
# a Slurm of the machine, if any, is never touched.
slurm_port() { echo $((30000 + RANDOM % 20000)); }

slurm_wait() {  # slurm_wait SECONDS CMD...: until CMD succeeds, at most SECONDS
  local deadline=$((SECONDS + $1)); shift
  while ! "$@" >/dev/null 2>&1; do
    [ $SECONDS -ge $deadline ] && return 1
    sleep 0.2
  done
}

slurm_up() {
  local dir=$1 plugin=$2 args=$3 host; host=$(hostname -s)
  mkdir -p "$dir/ctld" "$dir/d" "$dir/dev" "$dir/munge" "$dir/log"
  chmod 0700 "$dir/munge"
  # munged: our own key (0400, owned by us, as munged checks), socket, pid and seed files.
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1 count=128 2>/dev/null && chmod 0400 "$dir/munge/munge.key"
  slurm_pids=
  munged -F --force --socket="$dir/munge/sock" --key-file="$dir/munge/munge.key" --pid-file="$dir/munge/pid" \
    --seed-file="$dir/munge/seed" --log-file="$dir/log/munged.log" 2>>"$dir/log/munged.err" &
  slurm_pids="$slurm_pids $!"
  slurm_wait 10 test -S "$dir/munge/sock" || { slurm_why="munged did not start: $(cat "$dir/log/munged"* 2>/dev/null | tail -3)"; return 1; }
  # The GPU's device file: Slurm takes the index from the name's trailing digits.
  mknod "$dir/dev/nvidia0" c 1 3 2>/dev/null || : > "$dir/dev/nvidia0"
  cat > "$dir/slurm.conf" <<EOC
ClusterName=vgputest
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/sock
CredType=cred/munge
SlurmctldPort=$(slurm_port)
SlurmdPort=$(slurm_port)
StateSaveLocation=$dir/ctld
SlurmdSpoolDir=$dir/d
SlurmctldPidFile=$dir/ctld.pid
SlurmdPidFile=$dir/d.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmdDebug=debug
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu,shard
ReturnToService=2
PlugStackConfig=$dir/plugstack.conf
${SLURM_EXTRA_CONF:-}
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=100 Gres=gpu:1,shard:4 State=UNKNOWN
PartitionName=p Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOC
  cat > "$dir/gres.conf" <<EOC
Name=gpu File=$dir/dev/nvidia0
Name=shard Count=4 File=$dir/dev/nvidia0
EOC
  if [ "$plugin" = - ]; then : > "$dir/plugstack.conf"; else echo "required $plugin $args" > "$dir/plugstack.conf"; fi
  export SLURM_CONF=$dir/slurm.conf
  slurmctld -D -i 2>>"$dir/log/slurmctld.err" &
  slurm_pids="$slurm_pids $!"
  slurm_wait 20 scontrol ping || { slurm_why="slurmctld did not answer: $(tail -5 "$dir/log/slurmctld.log" "$dir/log/slurmctld.err" 2>/dev/null)"; return 1; }
  slurmd -D 2>>"$dir/log/slurmd.err" &
  slurm_pids="$slurm_pids $!"
  slurm_wait 30 sh -c 'sinfo -h -o %t | grep -qx idle' || {
    slurm_why="the node did not become idle: $(sinfo -h -o '%t %E' 2>&1; tail -5 "$dir/log/slurmd.log" "$dir/log/slurmd.err" 2>/dev/null)"; return 1; }
  return 0
}

slurm_down() {
  local p
  for p in $slurm_pids; do kill "$p" 2>/dev/null; done
  for p in $slurm_pids; do wait "$p" 2>/dev/null; done
  slurm_pids=
}
