#!/usr/bin/env bash
# A single-node SLURM cluster on this machine, for the SLURM test (tests/integration/test_slurm.py) in CI.
#
#   bash .ci/slurm.sh start    install Debian's munge + slurm (if absent), write the config, start the daemons
#   bash .ci/slurm.sh stop     stop the daemons through their pid files
#   bash .ci/slurm.sh status   print sinfo / squeue
#
# Runs as root, without systemd. Idempotent: `start` on a running cluster and `stop` on a stopped one do nothing.
# The cluster: one node (this machine's hardware line from `slurmd -C`) with a fake GPU (gres gpu:fake:1 backed by
# /dev/null) so GPU requests (`--gpus`) are scheduled end to end, one partition `debug`, no accounting database
# (so profiles/slurm uses `slurm-status-command: squeue`). The config must live at /etc/slurm/slurm.conf: the
# executor plugin's job step strips every SLURM_* variable, SLURM_CONF included.
set -euo pipefail

STATE=/var/lib/san-slurm               # our munge key, logs, spool and pid files
CONF_DIR=/etc/slurm
MUNGE_SOCKET=/run/munge/munge.socket.2 # munge's default socket, where slurm looks for it
PARTITION=debug

log() { echo "[slurm.sh] $*" >&2; }

pid_alive() { [[ -s $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

install_packages() {
    local missing=0 bin
    for bin in munged mungekey slurmctld slurmd sinfo sbatch squeue; do
        command -v "$bin" >/dev/null || missing=1
    done
    ((missing)) || return 0
    log "installing munge and slurm from Debian"
    export DEBIAN_FRONTEND=noninteractive
    local pkgs=(munge slurmctld slurmd slurm-client)
    # Try the cached package lists first (fast); refresh them only when that fails.
    if ! apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null 2>&1; then
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
    fi
}

write_config() {
    local host hw
    host=$(hostname -s)
    # e.g. "NodeName=vm CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=24105"
    hw=$(slurmd -C | head -n 1)
    mkdir -p "$CONF_DIR" "$STATE"/{log,spool/ctld,spool/d}
    cat >"$CONF_DIR/slurm.conf.new" <<EOF
# Written by .ci/slurm.sh: a single-node test cluster (no accounting database, no cgroups, a fake GPU).
ClusterName=san-ci
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCKET
StateSaveLocation=$STATE/spool/ctld
SlurmdSpoolDir=$STATE/spool/d
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
SlurmdTimeout=60
KillWait=5
GresTypes=gpu
$hw Gres=gpu:fake:1 State=UNKNOWN
PartitionName=$PARTITION Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
    mv "$CONF_DIR/slurm.conf.new" "$CONF_DIR/slurm.conf"
    cat >"$CONF_DIR/gres.conf" <<EOF
# A fake GPU: lets jobs request --gpus=1 (or --gpus=fake:1) on a machine without one.
NodeName=$host Name=gpu Type=fake File=/dev/null
EOF
}

start_munge() {
    pid_alive "$STATE/munged.pid" && return 0
    mkdir -p "$STATE/munge" /run/munge
    chmod 0700 "$STATE/munge"
    # munged running as root refuses Debian's key (owned by the munge user): use our own, owned by root.
    [[ -s $STATE/munge/munge.key ]] || mungekey --create --keyfile "$STATE/munge/munge.key" --force
    chmod 0600 "$STATE/munge/munge.key"
    munged --force --socket="$MUNGE_SOCKET" --key-file="$STATE/munge/munge.key" \
        --log-file="$STATE/log/munged.log" --pid-file="$STATE/munged.pid" --seed-file="$STATE/munge/munged.seed"
}

wait_for_node() {
    local i state
    for i in $(seq 1 120); do
        state=$(sinfo -h -N -o %T 2>/dev/null | head -n 1 || true)
        case $state in
        idle* | mixed* | allocated*) log "node is $state"; return 0 ;;
        down* | drain*) scontrol update NodeName="$(hostname -s)" State=RESUME 2>/dev/null || true ;;
        esac
        sleep 0.5
    done
    log "the node did not come up (state: '${state:-none}'); logs in $STATE/log"
    tail -n 20 "$STATE"/log/*.log >&2 || true
    return 1
}

start() {
    if pid_alive "$STATE/slurmctld.pid" && pid_alive "$STATE/slurmd.pid" && pid_alive "$STATE/munged.pid"; then
        log "already running"
        wait_for_node
        return
    fi
    install_packages
    write_config
    start_munge
    pid_alive "$STATE/slurmctld.pid" || slurmctld
    pid_alive "$STATE/slurmd.pid" || slurmd
    wait_for_node
    sinfo
}

stop_pid() {
    local name=$1 file=$2 pid i
    [[ -s $file ]] || return 0
    pid=$(cat "$file")
    if kill -0 "$pid" 2>/dev/null; then
        kill "$pid"
        for i in $(seq 1 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
        log "stopped $name ($pid)"
    fi
    rm -f "$file"
}

stop() {
    # Cancel what is still queued or running, so that no job processes outlive slurmd.
    if pid_alive "$STATE/slurmctld.pid"; then
        local jobs
        jobs=$(squeue -h -o %i 2>/dev/null || true)
        if [[ -n $jobs ]]; then
            # shellcheck disable=SC2086
            scancel $jobs 2>/dev/null || true
            sleep 1
        fi
    fi
    stop_pid slurmd "$STATE/slurmd.pid"
    stop_pid slurmctld "$STATE/slurmctld.pid"
    stop_pid munged "$STATE/munged.pid"
}

case ${1:-} in
start) start ;;
stop) stop ;;
status) sinfo && squeue ;;
*) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
