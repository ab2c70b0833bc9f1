#!/usr/bin/env bash
# MOBI file sizes per weights mode for the LeNet-5 and CIFAR-10 fixture models, and the
# per-file overhead (file bytes minus tensor payload bytes), side by side with an older
# tensorvault binary that writes MOBI v1 (optional).
#
#   bench/mobi/format_sizes.sh [OLD_TENSORVAULT]
#
# e.g. OLD_TENSORVAULT = a build of main before MOBI v2. Uses $TV, default
# target/release/tensorvault (built if missing). Prints a Markdown table.
set -euo pipefail
cd "$(dirname "$0")/../.."
new=${TV:-target/release/tensorvault}
[ -x "$new" ] || cargo build -q --release -p tensorvault-cli
old=${1:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# size and payload bytes of a file: "SIZE PAYLOAD"
measure() {
  "$1" mobi inspect "$2" --json | python3 -c '
import json, sys
v = json.load(sys.stdin)
print(v["file_size"], sum(t["bytes"] for t in v["tensors"] if not t["gzip"]))'
}

echo "| model | mode | writer | file bytes | % of f32 | overhead bytes (file - payloads) |"
echo "|---|---|---|---|---|---|"
for model in lenet5 cifar10; do
  for tool in new old; do
    bin=$new; [ "$tool" = old ] && bin=$old
    [ -n "$bin" ] || continue
    d="$work/$tool-$model"; mkdir -p "$d"
    "$bin" mobi example "$model" "$d/f32.mobi" >/dev/null
    read -r f32size f32payload < <(measure "$bin" "$d/f32.mobi")
    modes="f32 fp16 int16 int8"
    [ "$tool" = new ] && modes="f32 fp16 int16 int8-per-tensor int8"
    for mode in $modes; do
      for gz in "" "--gzip"; do
        [ "$mode" = int16 ] && [ -n "$gz" ] && continue
        [ "$mode" = f32 ] && [ -n "$gz" ] && continue
        f="$d/$mode$gz.mobi"
        if [ "$mode" = f32 ] && [ -z "$gz" ]; then
          :
        else
          "$bin" mobi quantize "$d/f32.mobi" "$f" --to "$mode" $gz >/dev/null
        fi
        read -r size payload < <(measure "$bin" "$f")
        ver=$(head -c 6 "$f" | tail -c 2 | od -An -tu2 | tr -d ' ')
        label=$mode; [ "$mode" = int8 ] && [ "$tool" = new ] && label="int8 per-channel"
        [ "$mode" = int8 ] && [ "$tool" = old ] && label="int8 per-tensor (all tensors)"
        over="-"; [ -z "$gz" ] && over=$((size - payload))
        pct=$(python3 -c "print(f'{100*$size/$f32size:.1f}%')")
        echo "| $model | $label${gz:+ + gzip} | v$ver | $size | $pct | $over |"
      done
    done
  done
done
