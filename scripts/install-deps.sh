#!/usr/bin/env bash
# Installs, with apt-get, every Debian package cairn needs to build and test, skipping those present.
set -euo pipefail
pkgs=(cmake ninja-build g++ make pkg-config
      openmpi-bin libopenmpi-dev
      libisal-dev libxxhash-dev libzstd-dev libfabric-dev
      libtomlplusplus-dev libcli11-dev nlohmann-json3-dev libfmt-dev
      libgtest-dev python3
      gfortran                                       # the Fortran binding and heat2d_f
      python3-dev pybind11-dev python3-pybind11      # the Python package's extension
      python3-numpy python3-mpi4py python3-matplotlib  # the Python package, heat2d.py, cairn plot
      python3-pip python3-setuptools python3-wheel   # pip install ./bindings/python (tested offline)
      iproute2)                                      # the migration test between two hosts (network namespaces)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "cairn: installing missing packages: ${missing[*]}"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
