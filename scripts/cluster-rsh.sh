#!/usr/bin/env bash
# An rsh agent for Open MPI's mpirun on a cluster of hosts made of namespaces (scripts/slurm-cluster.sh
# start DIR --hosts N): it does what ssh would, entering the host's network, hostname and mount namespaces
# instead of logging in.
#
#   scripts/cluster-rsh.sh DIR [OPTIONS...] HOST COMMAND...
#
# OPTIONS (words before HOST that begin with '-', e.g. ssh's -x) are ignored. COMMAND's words are joined
# with spaces and run by sh on HOST, as ssh runs its remote command. Exit status: COMMAND's; 255 (ssh's
# "could not connect") when HOST is not the cluster's or is down (kill-host), with one line on stderr.
#
# Give it to mpirun, which must itself run on the cluster's login node (`slurm-cluster.sh exec DIR ...`:
# the hosts' daemons connect back to it at 10.213.0.1):
#   export OMPI_MCA_plm_rsh_agent="$PWD/scripts/cluster-rsh.sh DIR"   (or --mca plm_rsh_agent "...")
# Open MPI splits the agent on spaces (and alternatives on ':'), so neither path may contain them.
set -u
[ $# -ge 1 ] || { echo "usage: cluster-rsh.sh DIR [OPTIONS...] HOST COMMAND..." >&2; exit 255; }
DIR=$1
shift
while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do shift; done
[ $# -ge 1 ] || { echo "cluster-rsh: no host given" >&2; exit 255; }
host=$1
shift
case $host in *[!A-Za-z0-9._-]* | '') echo "cluster-rsh: '$host' is not a host name" >&2; exit 255 ;; esac
# A host of the cluster is up while its slurmd runs (slurm-cluster.sh writes its pid; kill-host removes it).
pidfile=$DIR/run/slurmd-$host.pid
pid=$( { tr -dc '0-9' <"$pidfile"; } 2>/dev/null)
if [ -z "$pid" ] || [ "$(cat "/proc/$pid/comm" 2>/dev/null)" != slurmd ]; then
  echo "cluster-rsh: host $host is down or not a host of the cluster in $DIR (no slurmd)" >&2
  exit 255
fi
[ $# -ge 1 ] || set -- true
exec nsenter -t "$pid" -n -u -m -- sh -c "$*"
