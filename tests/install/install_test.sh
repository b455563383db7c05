#!/usr/bin/env bash
# Install cairn into a scratch prefix, then build the quickstart example against it twice, with
# find_package(cairn) and with pkg-config, and run both builds on 2 ranks.
set -euo pipefail
src=$1 build=$2
work=$(mktemp -d /tmp/cairn-install-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$src/tests/install" -B "$work/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" \
      -DQUICKSTART_SOURCE="$src/examples/quickstart/quickstart.c" >/dev/null
cmake --build "$work/consumer" >/dev/null
libdir=$(ls -d "$work"/prefix/lib*/ | head -1)
export PKG_CONFIG_PATH="$libdir/pkgconfig"
cc -std=c99 -o "$work/quickstart-pc" "$src/examples/quickstart/quickstart.c" $(pkg-config --cflags --libs cairn)
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for exe in "$work/consumer/quickstart" "$work/quickstart-pc"; do
  out=$(cd "$work" && CAIRN_PREFIX="$work/ckpt" CAIRN_JOB="install-test-$$" CAIRN_CACHE_DIR="$work/cache" \
        ${CAIRN_MPIRUN:-mpirun} ${CAIRN_MPIRUN_ARGS---oversubscribe} -np 2 "$exe")
  echo "$out"
  grep -q "quickstart: step 300" <<<"$out"
  rm -rf "$work/ckpt" "$work/cache"
done
echo "install test: find_package and pkg-config builds ran"
