#!/usr/bin/env bash
# A one-host Slurm cluster on 127.0.0.1, for testing `cairn run` under Slurm (docs/launcher.md).
#
#   scripts/slurm-cluster.sh start DIR    install slurm-wlm and munge if missing (apt-get), write a munge
#                                         key and a slurm.conf under DIR, start munged, slurmctld and
#                                         slurmd, and wait until the node is idle
#   scripts/slurm-cluster.sh stop DIR     cancel the cluster's jobs, stop the three daemons it started
#   scripts/slurm-cluster.sh status DIR   the daemons' pids and `sinfo`
#   scripts/slurm-cluster.sh env DIR      the line to paste into a shell: export SLURM_CONF=DIR/etc/slurm.conf
#
# Everything lives under DIR (config, key, sockets, pid files, state, spool, logs); nothing is written to
# /etc and no system service is touched, so it works in a container where systemd is not running. It
# needs root (slurmd starts jobs as their users). The node declares CAIRN_SLURM_CPUS CPUs (default 16),
# whatever the machine has, so 8 ranks fit on a 2-core machine. Ports: two free ones on 127.0.0.1, or
# CAIRN_SLURM_PORTS="CTLD_PORT SLURMD_PORT". Commands need SLURM_CONF=DIR/etc/slurm.conf (see `env`).
set -euo pipefail

usage() {
  echo "usage: $0 start|stop|status|env DIR" >&2
  exit 2
}
[ $# -eq 2 ] || usage
action=$1
case $action in start | stop | status | env) ;; *) usage ;; esac
mkdir -p "$2"
DIR=$(cd "$2" && pwd)
CONF=$DIR/etc/slurm.conf
export SLURM_CONF=$CONF
TIMEOUT=${CAIRN_SLURM_TIMEOUT:-60}  # seconds for the node to become idle

say() { echo "slurm-cluster: $*"; }
die() {
  echo "slurm-cluster: error: $*" >&2
  exit 1
}

# ---- installing --------------------------------------------------------------------------------------
install_packages() {
  local pkgs=(slurm-wlm munge) missing=() p
  for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  command -v apt-get >/dev/null || die "missing packages ${missing[*]} and no apt-get to install them; install Slurm and munge by hand"
  say "installing missing packages: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  # Their maintainer scripts would start the system's munged/slurmd from /etc; keep them from doing so
  # (Debian's documented switch), unless the system already has a policy of its own.
  local policy=/usr/sbin/policy-rc.d added_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\n# written by cairn scripts/slurm-cluster.sh during apt-get install\nexit 101\n' | $sudo tee "$policy" >/dev/null
    $sudo chmod 755 "$policy"
    added_policy=1
  fi
  local rc=0
  (
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq && $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
  ) || rc=$?
  [ "$added_policy" = 1 ] && $sudo rm -f "$policy"
  [ "$rc" = 0 ] || die "apt-get install ${missing[*]} failed (status $rc)"
}

# ---- the daemons ---------------------------------------------------------------------------------------
# pid_of NAME: the pid in DIR/run/NAME.pid if that process is alive and is our NAME (its command line
# names DIR), else nothing.
pid_of() {
  local name=$1 file=$DIR/run/$1.pid pid
  [ -r "$file" ] || return 0
  pid=$(tr -dc '0-9' <"$file")
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 0
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$name" ] || return 0
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$DIR/" || return 0
  echo "$pid"
}

show_logs() {
  local f
  for f in "$DIR"/log/*; do
    [ -s "$f" ] || continue
    echo "---- $f (last 30 lines) ----" >&2
    tail -n 30 "$f" >&2
  done
}

free_ports() {
  if [ -n "${CAIRN_SLURM_PORTS:-}" ]; then
    echo "$CAIRN_SLURM_PORTS"
    return
  fi
  python3 - <<'EOF'
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])
EOF
}

write_config() {
  local host ports ctld_port slurmd_port cpus=${CAIRN_SLURM_CPUS:-16}
  host=$(hostname -s)
  ports=$(free_ports)
  read -r ctld_port slurmd_port <<<"$ports"
  mkdir -p "$DIR/etc" "$DIR/run" "$DIR/log" "$DIR/state" "$DIR/spool"
  # munged wants its key private and every directory above its socket searchable by all.
  chmod 700 "$DIR/etc" "$DIR/log"
  chmod 755 "$DIR/run"
  chmod a+x "$DIR"
  local d=$DIR
  while d=$(dirname "$d") && [ "$d" != / ]; do
    [ "$(( $(stat -c '%#a' "$d") & 1 ))" = 1 ] ||
      die "munged needs every directory above its socket searchable by all, and $d is not (chmod a+x $d, or use another DIR)"
  done
  if [ ! -s "$DIR/etc/munge.key" ]; then
    (umask 077 && head -c 1024 /dev/urandom >"$DIR/etc/munge.key")
  fi
  cat >"$CONF" <<EOF
# A one-host cluster on 127.0.0.1 written by cairn's scripts/slurm-cluster.sh; everything under $DIR.
ClusterName=cairn
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
AuthInfo=socket=$DIR/run/munge.socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# No cgroups: processes are tracked by their parentage, tasks are not bound.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
ReturnToService=2
# The node declares $cpus CPUs whatever the machine has: slurmd reports the configured figures.
SlurmdParameters=config_overrides
KillWait=5
InactiveLimit=0
MinJobAge=60
MailProg=/bin/true
NodeName=$host NodeHostname=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=cairn Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
}

start() {
  install_packages
  for name in munged slurmctld slurmd; do
    [ -z "$(pid_of "$name")" ] || die "$name of $DIR is already running (pid $(pid_of "$name")); run: $0 stop $DIR"
  done
  # A unix socket's path has at most 107 bytes: munged's and slurmd's (spool/stepd.slurm.pmix.<job>.<step>).
  [ "${#DIR}" -le 64 ] || die "$DIR is too long a path for the daemons' sockets under it (at most 64 characters); use a shorter DIR"
  write_config
  rm -f "$DIR"/log/*
  local host
  host=$(hostname -s)
  # The daemons detach; their output goes to files, never to the caller's pipes (a test runner
  # would wait for those to close).
  munged --socket="$DIR/run/munge.socket" --key-file="$DIR/etc/munge.key" --pid-file="$DIR/run/munged.pid" \
    --seed-file="$DIR/run/munged.seed" --log-file="$DIR/log/munged.log" </dev/null >"$DIR/log/munged.out" 2>&1 ||
    { show_logs; die "munged did not start (logs above)"; }
  slurmctld -f "$CONF" -i </dev/null >"$DIR/log/slurmctld.out" 2>&1 ||
    { show_logs; stop; die "slurmctld did not start (logs above)"; }
  slurmd -f "$CONF" -N "$host" </dev/null >"$DIR/log/slurmd.out" 2>&1 ||
    { show_logs; stop; die "slurmd did not start (logs above)"; }
  local waited=0 state=""
  while :; do
    state=$(sinfo -h -N -n "$host" -o %T 2>/dev/null || true)
    case $state in
      idle | idle\* | mixed | allocated) break ;;
    esac
    if [ "$waited" -ge "$((TIMEOUT * 5))" ]; then
      echo "slurm-cluster: the node is '${state:-not reported}' after ${TIMEOUT} s, not idle:" >&2
      sinfo -R 2>&1 | sed 's/^/  /' >&2 || true
      for name in munged slurmctld slurmd; do
        [ -n "$(pid_of "$name")" ] || echo "slurm-cluster: $name is not running" >&2
      done
      show_logs
      stop
      die "the cluster in $DIR did not come up; the daemons were stopped"
    fi
    sleep 0.2
    waited=$((waited + 1))
  done
  say "up: node $host ($(sinfo -h -N -n "$host" -o %c) CPUs) idle; daemons' logs in $DIR/log"
  say "use it with: export SLURM_CONF=$CONF"
}

stop() {
  if [ -n "$(pid_of slurmctld)" ]; then
    scancel --full --quiet --user="$(id -un)" 2>/dev/null || true
  fi
  local name pid i
  for name in slurmd slurmctld munged; do
    pid=$(pid_of "$name")
    [ -n "$pid" ] || continue
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
      [ -d "/proc/$pid" ] || break
      sleep 0.1
    done
    if [ -d "/proc/$pid" ]; then
      say "$name (pid $pid) did not stop in 10 s; killing it"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    say "stopped $name (pid $pid)"
  done
  rm -f "$DIR"/run/*.pid
}

status() {
  local name pid rc=0
  for name in munged slurmctld slurmd; do
    pid=$(pid_of "$name")
    if [ -n "$pid" ]; then say "$name: running (pid $pid)"; else say "$name: not running"; rc=1; fi
  done
  [ -r "$CONF" ] && sinfo 2>&1 || true
  return $rc
}

case $action in
  start) start ;;
  stop) stop ;;
  status) status ;;
  env) echo "export SLURM_CONF=$CONF" ;;
esac
