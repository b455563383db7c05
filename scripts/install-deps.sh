#!/usr/bin/env bash
# Installs, with apt-get, every Debian package cairn needs to build and test, skipping those present.
set -euo pipefail
pkgs=(cmake ninja-build g++ make pkg-config
      openmpi-bin libopenmpi-dev
      libisal-dev libxxhash-dev libzstd-dev
      libtomlplusplus-dev libcli11-dev nlohmann-json3-dev libfmt-dev libpng-dev
      libgtest-dev python3
      gfortran)
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
