#!/usr/bin/env bash
# A Slurm cluster on this machine, for testing `cairn run` under Slurm (docs/launcher.md): one host on
# 127.0.0.1, or a cluster of hosts made of namespaces (--hosts N).
#
#   scripts/slurm-cluster.sh start DIR [--hosts N] [--share PATH]...
#        install slurm-wlm and munge if missing (apt-get), write a munge key and a slurm.conf under DIR,
#        start munged, slurmctld and the slurmd(s), and wait until every node is idle
#   scripts/slurm-cluster.sh stop DIR     cancel the cluster's jobs, stop every daemon and process it
#                                         started, remove the namespaces it made
#   scripts/slurm-cluster.sh status DIR   the daemons' pids and `sinfo`
#   scripts/slurm-cluster.sh env DIR      the line to paste into a shell: export SLURM_CONF=DIR/etc/slurm.conf
#   scripts/slurm-cluster.sh kill-host DIR HOST    lose HOST: every process in it (its slurmd, its job
#                                         steps' tasks) SIGKILLed at once, its /dev/shm and /tmp gone
#   scripts/slurm-cluster.sh revive-host DIR HOST  HOST back, empty: fresh /dev/shm and /tmp, its slurmd
#   scripts/slurm-cluster.sh exec DIR CMD...       CMD on the cluster's login node (salloc, srun, sinfo,
#                                         scontrol, cairn run: the hosts' network is reachable only there)
#   scripts/slurm-cluster.sh on DIR HOST CMD...    CMD as on HOST (its network, hostname and mounts)
#
# One host (the default): the node is this machine's hostname at 127.0.0.1; the daemons run in the
# machine's own namespaces on two free ports (or CAIRN_SLURM_PORTS="CTLD_PORT SLURMD_PORT").
#
# A cluster of hosts (--hosts N): hosts n1..nN, each its own network namespace (one veth, eth0, at
# 10.213.0.<10+i>), its own hostname (UTS namespace) and its own mount namespace in which /dev/shm and
# /tmp are private tmpfs file systems (its node-local storage really is local), with its own slurmd
# (NodeName=n<i>, NodeAddr=its address). A login node "head" is one more network namespace holding the
# bridge the hosts' veths are plugged into, at 10.213.0.1, where slurmctld runs; munged runs once (its
# socket is a file under DIR, which every host reaches). Every host sees DIR (the cluster's "parallel
# file system": put job prefixes under it) and the paths given with --share (or CAIRN_SLURM_SHARE, separated
# by spaces); paths outside /tmp are the machine's own and seen by all anyway. Addresses exist only inside
# these namespaces: nothing is routed to or from the machine's own network. Slurm commands must run in
# the login node's network namespace (the `exec` action, or `ip netns exec $CAIRN_SLURM_LOGIN_NETNS`).
# A lost host (kill-host) is noticed by slurmctld within SlurmdTimeout (CAIRN_SLURM_DOWN_AFTER, default
# 6 s) and set DOWN; a revived one returns to service when its slurmd registers (ReturnToService=2).
#
# Everything lives under DIR (config, key, sockets, pid files, state, spool, logs); nothing is written to
# /etc and no system service is touched, so it works in a container where systemd is not running. It
# needs root (slurmd starts jobs as their users; namespaces). Each node declares CAIRN_SLURM_CPUS CPUs
# (default 16), whatever the machine has, so 8 ranks fit on a 2-core machine.
set -euo pipefail

usage() {
  cat >&2 <<EOF
usage: $0 start DIR [--hosts N] [--share PATH]...
       $0 stop|status|env DIR
       $0 kill-host|revive-host DIR HOST      (a cluster of hosts)
       $0 exec DIR CMD [ARGS...]              (on the login node: salloc, srun, sinfo, cairn run)
       $0 on DIR HOST CMD [ARGS...]           (as on HOST: its network, hostname and mounts)
EOF
  exit 2
}
[ $# -ge 2 ] || usage
action=$1
case $action in start | stop | status | env | kill-host | revive-host | exec | on) ;; *) usage ;; esac
mkdir -p "$2"
DIR=$(cd "$2" && pwd)
shift 2
CONF=$DIR/etc/slurm.conf
export SLURM_CONF=$CONF
TIMEOUT=${CAIRN_SLURM_TIMEOUT:-60}  # seconds for the node(s) to become idle
NHOSTS=0                            # 0: the one-host cluster on 127.0.0.1
SHARE=()
# shellcheck disable=SC2206
[ -z "${CAIRN_SLURM_SHARE:-}" ] || SHARE=($CAIRN_SLURM_SHARE)
case $action in
  start)
    while [ $# -gt 0 ]; do
      case $1 in
        --hosts) [ $# -ge 2 ] || usage; NHOSTS=$2; shift 2 ;;
        --hosts=*) NHOSTS=${1#--hosts=}; shift ;;
        --share) [ $# -ge 2 ] || usage; SHARE+=("$2"); shift 2 ;;
        *) usage ;;
      esac
    done
    case $NHOSTS in '' | *[!0-9]*) echo "slurm-cluster: error: --hosts '$NHOSTS': a number of hosts, 1..40" >&2; exit 2 ;; esac
    [ "$NHOSTS" -le 40 ] || { echo "slurm-cluster: error: --hosts $NHOSTS: at most 40 hosts" >&2; exit 2; }
    ;;
  stop | status | env) [ $# -eq 0 ] || usage ;;
  kill-host | revive-host) [ $# -eq 1 ] || usage ;;
  exec) [ $# -ge 1 ] || usage ;;
  on) [ $# -ge 2 ] || usage ;;
esac

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
# names DIR; slurmd-<host> is a slurmd), else nothing.
pid_of() {
  local name=$1 file=$DIR/run/$1.pid pid
  [ -r "$file" ] || return 0
  pid=$(tr -dc '0-9' <"$file")
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 0
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "${name%%-*}" ] || return 0  # slurmd-n1: a slurmd
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

# DIR's directories and the munge key.
prepare_dir() {
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
}

# The slurm.conf lines both modes share: munge authentication as root, and the plugins (no cgroups:
# processes are tracked by their parentage, tasks are not bound; no accounting).
conf_auth() {
  printf '%s\n' AuthType=auth/munge "AuthInfo=socket=$DIR/run/munge.socket" CredType=cred/munge SlurmUser=root SlurmdUser=root
}
conf_plugins() {
  printf '%s\n' ProctrackType=proctrack/linuxproc TaskPlugin=task/none JobAcctGatherType=jobacct_gather/none \
    AccountingStorageType=accounting_storage/none JobCompType=jobcomp/none SwitchType=switch/none MpiDefault=none \
    SelectType=select/cons_tres SelectTypeParameters=CR_Core SchedulerType=sched/backfill
}

write_single_config() {
  local host ports ctld_port slurmd_port cpus=${CAIRN_SLURM_CPUS:-16}
  host=$(hostname -s)
  ports=$(free_ports)
  read -r ctld_port slurmd_port <<<"$ports"
  prepare_dir
  cat >"$CONF" <<EOF
# A one-host cluster on 127.0.0.1 written by cairn's scripts/slurm-cluster.sh; everything under $DIR.
ClusterName=cairn
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
$(conf_auth)
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# No cgroups: processes are tracked by their parentage, tasks are not bound.
$(conf_plugins)
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

start_single() {
  install_packages
  [ ! -s "$DIR/etc/hosts.env" ] || die "$DIR holds a cluster of hosts; run: $0 stop $DIR (or use another DIR)"
  for name in munged slurmctld slurmd; do
    [ -z "$(pid_of "$name")" ] || die "$name of $DIR is already running (pid $(pid_of "$name")); run: $0 stop $DIR"
  done
  # A unix socket's path has at most 107 bytes: munged's and slurmd's (spool/stepd.slurm.pmix.<job>.<step>).
  [ "${#DIR}" -le 64 ] || die "$DIR is too long a path for the daemons' sockets under it (at most 64 characters); use a shorter DIR"
  write_single_config
  rm -f "$DIR"/log/*
  local host
  host=$(hostname -s)
  # The daemons detach; their output goes to files, never to the caller's pipes (a test runner
  # would wait for those to close).
  munged --socket="$DIR/run/munge.socket" --key-file="$DIR/etc/munge.key" --pid-file="$DIR/run/munged.pid" \
    --seed-file="$DIR/run/munged.seed" --log-file="$DIR/log/munged.log" </dev/null >"$DIR/log/munged.out" 2>&1 ||
    { show_logs; die "munged did not start (logs above)"; }
  slurmctld -f "$CONF" -i </dev/null >"$DIR/log/slurmctld.out" 2>&1 ||
    { show_logs; stop_single; die "slurmctld did not start (logs above)"; }
  slurmd -f "$CONF" -N "$host" </dev/null >"$DIR/log/slurmd.out" 2>&1 ||
    { show_logs; stop_single; die "slurmd did not start (logs above)"; }
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
      stop_single
      die "the cluster in $DIR did not come up; the daemons were stopped"
    fi
    sleep 0.2
    waited=$((waited + 1))
  done
  say "up: node $host ($(sinfo -h -N -n "$host" -o %c) CPUs) idle; daemons' logs in $DIR/log"
  say "use it with: export SLURM_CONF=$CONF"
}

stop_single() {
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

status_single() {
  local name pid rc=0
  for name in munged slurmctld slurmd; do
    pid=$(pid_of "$name")
    if [ -n "$pid" ]; then say "$name: running (pid $pid)"; else say "$name: not running"; rc=1; fi
  done
  [ -r "$CONF" ] && sinfo 2>&1 || true
  return $rc
}

# ---- a cluster of hosts made of namespaces ------------------------------------------------------------
# DIR/etc/hosts.env (written at start) says which: TAG (the namespaces' prefix), HOSTS, SHARE.
SUBNET=10.213.0   # inside the cluster's namespaces only
TAG=c$(printf %s "$DIR" | md5sum | cut -c1-6)
HEAD_NS=$TAG-head
HOSTS=()
if [ -s "$DIR/etc/hosts.env" ]; then
  # shellcheck source=/dev/null
  . "$DIR/etc/hosts.env"
fi
export CAIRN_SLURM_LOGIN_NETNS=$HEAD_NS
host_ns() { echo "$TAG-$1"; }
host_index() {  # n3 -> 3, or an error for a host that is not the cluster's
  local h
  for h in "${HOSTS[@]}"; do [ "$h" = "$1" ] && { echo "${1#n}"; return 0; }; done
  die "no host '$1' in the cluster of $DIR (hosts: ${HOSTS[*]:-none})"
}
in_head() { ip netns exec "$HEAD_NS" "$@"; }
# The pids of every process in a namespace made by this cluster (none when it does not exist).
ns_pids() { ip netns pids "$1" 2>/dev/null || true; }

write_cluster_config() {
  local cpus=${CAIRN_SLURM_CPUS:-16} i nodes="" down_after=${CAIRN_SLURM_DOWN_AFTER:-6}
  prepare_dir
  mkdir -p "$DIR/hosts"
  {
    echo "# written by scripts/slurm-cluster.sh start --hosts $NHOSTS"
    printf 'HOSTS=('; for ((i = 1; i <= NHOSTS; i++)); do printf ' n%d' "$i"; done; echo ' )'
    printf 'SHARE=('; for i in "${SHARE[@]}"; do printf ' %q' "$i"; done; echo ' )'
  } >"$DIR/etc/hosts.env"
  . "$DIR/etc/hosts.env"
  cat >"$CONF" <<EOF
# A cluster of $NHOSTS hosts made of namespaces, written by cairn's scripts/slurm-cluster.sh; everything
# under $DIR. slurmctld runs on the login node "head" ($SUBNET.1, network namespace $HEAD_NS).
ClusterName=cairn
SlurmctldHost=head($SUBNET.1)
SlurmctldPort=6817
SlurmdPort=6818
$(conf_auth)
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/hosts/%n/spool
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
$(conf_plugins)
# A host that stops answering is DOWN after SlurmdTimeout; it returns to service when its slurmd
# registers again (revive-host).
SlurmdTimeout=$down_after
ReturnToService=2
MessageTimeout=5
KillWait=5
InactiveLimit=0
MinJobAge=60
MailProg=/bin/true
SlurmdParameters=config_overrides
EOF
  for ((i = 1; i <= NHOSTS; i++)); do
    echo "NodeName=n$i NodeHostname=n$i NodeAddr=$SUBNET.$((10 + i)) CPUs=$cpus State=UNKNOWN" >>"$CONF"
    nodes=$nodes${nodes:+,}n$i
  done
  echo "PartitionName=cairn Nodes=$nodes Default=YES MaxTime=INFINITE State=UP" >>"$CONF"
  # What runs inside a host's fresh network namespace: its own hostname and mount namespace with private
  # /dev/shm and /tmp (the paths under /tmp that every host sees bound back in), then its slurmd.
  cat >"$DIR/etc/host-init.sh" <<EOF
#!/bin/bash
# Run by slurm-cluster.sh in host \$1's network, UTS and (private) mount namespaces; ends as its slurmd.
set -eu
host=\$1
hostname "\$host"
mount -t tmpfs -o mode=1777 cairn-\$host-shm /dev/shm
hold=$DIR/hosts/\$host/tmp
mkdir -p "\$hold"
mount -t tmpfs -o mode=1777 cairn-\$host-tmp "\$hold"
for path in $(printf '%q ' "$DIR" "${SHARE[@]}"); do
  case \$path in
    /tmp/*) mkdir -p "\$hold/\${path#/tmp/}"; mount --bind "\$path" "\$hold/\${path#/tmp/}" ;;
  esac
done
mount --move "\$hold" /tmp
exec slurmd -D -f "$CONF" -N "\$host"
EOF
  chmod 755 "$DIR/etc/host-init.sh"
}

make_network() {
  local i h ns
  ip netns add "$HEAD_NS"
  in_head ip link set lo up
  in_head ip link add br0 type bridge
  in_head ip addr add "$SUBNET.1/24" dev br0
  in_head ip link set br0 up
  for ((i = 1; i <= NHOSTS; i++)); do
    h=n$i ns=$(host_ns "n$i")
    ip netns add "$ns"
    ip link add "${TAG}p$i" type veth peer name "${TAG}q$i"
    ip link set "${TAG}p$i" netns "$HEAD_NS"
    ip link set "${TAG}q$i" netns "$ns"
    in_head ip link set "${TAG}p$i" name "$h"
    in_head ip link set "$h" master br0
    in_head ip link set "$h" up
    ip -n "$ns" link set "${TAG}q$i" name eth0
    ip -n "$ns" addr add "$SUBNET.$((10 + i))/24" dev eth0
    ip -n "$ns" link set lo up
    ip -n "$ns" link set eth0 up
  done
}

start_slurmd() {  # HOST: its fresh hostname and mounts, and its slurmd (detached; it writes its pid file)
  local h=$1
  rm -f "$DIR/run/slurmd-$h.pid"
  mkdir -p "$DIR/hosts/$h/spool"
  # nsenter, not `ip netns exec`: that one mounts a sysfs of its own, without the cgroup file system slurmd needs.
  setsid nsenter --net="/run/netns/$(host_ns "$h")" unshare --uts --mount --propagation private \
    "$DIR/etc/host-init.sh" "$h" </dev/null >>"$DIR/log/host-$h.out" 2>&1 &
}

# wait_nodes STATE_RE HOST...: until sinfo shows every HOST in a state matching STATE_RE; false after TIMEOUT s.
wait_nodes() {
  local want=$1 h state waited=0 missing
  shift
  while :; do
    missing=""
    for h in "$@"; do
      state=$(in_head sinfo -h -N -n "$h" -o %T 2>/dev/null | head -n 1 || true)
      [[ $state =~ ^($want)$ ]] && continue
      missing="$missing $h(${state:-?})"
      if [ "$waited" -ge 10 ] && [ -z "$(ns_pids "$(host_ns "$h")")" ]; then
        echo "slurm-cluster: the slurmd of host $h ended (its log: $DIR/log/slurmd-$h.log)" >&2
        return 1
      fi
    done
    [ -z "$missing" ] && return 0
    if [ "$waited" -ge "$((TIMEOUT * 5))" ]; then
      echo "slurm-cluster: after ${TIMEOUT} s, not $want:$missing" >&2
      return 1
    fi
    sleep 0.2
    waited=$((waited + 1))
  done
}

start_cluster() {
  install_packages
  command -v unshare >/dev/null && command -v nsenter >/dev/null || die "unshare and nsenter (util-linux) are needed for a cluster of hosts"
  command -v ip >/dev/null || die "ip (iproute2) is needed for a cluster of hosts"
  [ "$(id -u)" -eq 0 ] || die "a cluster of hosts needs root (network and mount namespaces)"
  [ "${#DIR}" -le 56 ] || die "$DIR is too long a path for the daemons' sockets under it (at most 56 characters); use a shorter DIR"
  if ip netns list | grep -q "^$HEAD_NS\b"; then
    [ -z "$(pid_of slurmctld)" ] || die "the cluster of $DIR is already running; run: $0 stop $DIR"
    stop_cluster >/dev/null 2>&1 || true  # left by a start or stop that was killed
  fi
  [ -z "$(pid_of munged)" ] || die "munged of $DIR is already running (pid $(pid_of munged)); run: $0 stop $DIR"
  local p
  for p in "${SHARE[@]}"; do [ -d "$p" ] || die "--share $p: no such directory"; done
  # Anything that fails from here stops what was started and removes the namespaces.
  trap 'rc=$?; trap - ERR EXIT; if [ $rc -ne 0 ]; then show_logs; stop_cluster >/dev/null 2>&1 || true; fi; exit $rc' EXIT
  write_cluster_config
  rm -f "$DIR"/log/*
  make_network
  munged --socket="$DIR/run/munge.socket" --key-file="$DIR/etc/munge.key" --pid-file="$DIR/run/munged.pid" \
    --seed-file="$DIR/run/munged.seed" --log-file="$DIR/log/munged.log" </dev/null >"$DIR/log/munged.out" 2>&1 ||
    die "munged did not start (logs above)"
  in_head unshare --uts sh -c 'hostname head && exec slurmctld -f "$0" -i' "$CONF" </dev/null >"$DIR/log/slurmctld.out" 2>&1 ||
    die "slurmctld did not start (logs above)"
  local h
  for h in "${HOSTS[@]}"; do start_slurmd "$h"; done
  wait_nodes 'idle' "${HOSTS[@]}" || die "the cluster in $DIR did not come up (logs above)"
  trap - EXIT
  say "up: ${#HOSTS[@]} hosts ${HOSTS[*]} idle (${SUBNET}.11-$((10 + ${#HOSTS[@]})), each $(in_head sinfo -h -N -n n1 -o %c) CPUs); slurmctld on the login node head ($SUBNET.1, network namespace $HEAD_NS); logs in $DIR/log"
  say "use it with: export SLURM_CONF=$CONF; then run Slurm commands with: $0 exec $DIR CMD..."
}

kill_ns() {  # NS: SIGKILL to every process in it, until none is left
  local ns=$1 pids i
  for ((i = 0; i < 50; i++)); do
    pids=$(ns_pids "$ns")
    [ -n "$pids" ] || return 0
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null || true
    sleep 0.1
  done
  say "warning: processes left in $ns: $(ns_pids "$ns" | tr '\n' ' ')"
}

kill_host() {
  local h=$1 i
  i=$(host_index "$h")
  ip netns list | grep -q "^$(host_ns "$h")\b" || die "the cluster of $DIR is not running"
  local n
  n=$(ns_pids "$(host_ns "$h")" | wc -l)
  kill_ns "$(host_ns "$h")"
  rm -f "$DIR/run/slurmd-$h.pid"
  say "killed host $h ($SUBNET.$((10 + i))): $n processes, its slurmd among them; its /dev/shm and /tmp are gone"
}

revive_host() {
  local h=$1
  host_index "$h" >/dev/null
  [ -z "$(ns_pids "$(host_ns "$h")")" ] || die "host $h is running; kill it first: $0 kill-host $DIR $h"
  start_slurmd "$h"
  # A DOWN node returns once its slurmd registers; one never seen down is just idle again.
  wait_nodes 'idle|mixed|allocated|completing' "$h" || { show_logs; die "host $h did not come back (logs above)"; }
  say "host $h is back (empty /dev/shm and /tmp), $(in_head sinfo -h -N -n "$h" -o %T)"
}

stop_cluster() {
  local h ns pid
  if [ -n "$(pid_of slurmctld)" ]; then
    timeout 10 ip netns exec "$HEAD_NS" scancel --full --quiet --user="$(id -un)" 2>/dev/null || true
  fi
  for h in "${HOSTS[@]}"; do
    ns=$(host_ns "$h")
    [ -n "$(ns_pids "$ns")" ] && { kill_ns "$ns"; say "stopped host $h"; }
    ip netns del "$ns" 2>/dev/null || true
  done
  pid=$(pid_of slurmctld)
  if [ -n "$pid" ]; then kill -TERM "$pid" 2>/dev/null || true; fi
  for _ in $(seq 50); do [ -z "$(pid_of slurmctld)" ] && break; sleep 0.1; done
  kill_ns "$HEAD_NS"  # slurmctld if it did not stop, and anything started on the login node
  [ -n "$pid" ] && say "stopped slurmctld (pid $pid)"
  ip netns del "$HEAD_NS" 2>/dev/null || true
  pid=$(pid_of munged)
  if [ -n "$pid" ]; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    say "stopped munged (pid $pid)"
  fi
  rm -f "$DIR"/run/*.pid "$DIR/etc/hosts.env"
  rm -rf "$DIR/hosts"
}

status_cluster() {
  local h rc=0 pid
  for name in munged slurmctld; do
    pid=$(pid_of "$name")
    if [ -n "$pid" ]; then say "$name: running (pid $pid)"; else say "$name: not running"; rc=1; fi
  done
  for h in "${HOSTS[@]}"; do
    pid=$(pid_of "slurmd-$h")
    if [ -n "$pid" ]; then say "host $h: slurmd running (pid $pid), $(ns_pids "$(host_ns "$h")" | wc -l) processes"
    else say "host $h: down (no slurmd)"; fi
  done
  [ -n "$(pid_of slurmctld)" ] && in_head sinfo -N 2>&1 || true
  return $rc
}

on_host() {
  local h=$1 pid
  shift
  host_index "$h" >/dev/null
  pid=$(pid_of "slurmd-$h")
  [ -n "$pid" ] || die "host $h is down (no slurmd; $0 revive-host $DIR $h)"
  exec nsenter -t "$pid" -n -u -m -- sh -c 'cd "$0" 2>/dev/null || cd /; exec "$@"' "$PWD" "$@"
}

case $action in
  start) if [ "$NHOSTS" -gt 0 ]; then start_cluster; else start_single; fi ;;
  stop) if [ ${#HOSTS[@]} -gt 0 ] || ip netns list 2>/dev/null | grep -q "^$HEAD_NS\b"; then stop_cluster; else stop_single; fi ;;
  status) if [ ${#HOSTS[@]} -gt 0 ]; then status_cluster; else status_single; fi ;;
  env)
    echo "export SLURM_CONF=$CONF"
    [ ${#HOSTS[@]} -eq 0 ] || echo "export CAIRN_SLURM_LOGIN_NETNS=$HEAD_NS  # Slurm commands: ip netns exec $HEAD_NS CMD"
    ;;
  kill-host) [ ${#HOSTS[@]} -gt 0 ] || die "$DIR is not a cluster of hosts (start it with --hosts N)"; kill_host "$1" ;;
  revive-host) [ ${#HOSTS[@]} -gt 0 ] || die "$DIR is not a cluster of hosts (start it with --hosts N)"; revive_host "$1" ;;
  exec) if [ ${#HOSTS[@]} -gt 0 ]; then exec ip netns exec "$HEAD_NS" "$@"; else exec "$@"; fi ;;
  on) [ ${#HOSTS[@]} -gt 0 ] || die "$DIR is not a cluster of hosts (start it with --hosts N)"; on_host "$@" ;;
esac
