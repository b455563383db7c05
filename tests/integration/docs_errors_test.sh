#!/usr/bin/env bash
# docs/errors.md's table is what `cairn strerror --markdown` prints from the one error list.
set -euo pipefail
cairn=$1 doc=$2
want=$("$cairn" strerror --markdown)
have=$(sed -n '/<!-- errors:begin -->/,/<!-- errors:end -->/p' "$doc" | sed '1d;$d')
if [ "$want" != "$have" ]; then
  echo "docs/errors.md is out of date; regenerate the table with: cairn strerror --markdown"
  diff <(echo "$have") <(echo "$want") || true
  exit 1
fi
echo "docs/errors.md matches the error list"
