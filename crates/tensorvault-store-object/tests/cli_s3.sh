#!/usr/bin/env bash
# The `tensorvault store` CLI on an s3:// root, against a moto_server this script starts
# on a free loopback port: put from one process, then get / ls / verify / stats / rm from
# others, bit-exact round trip, and a damaged block object reported by verify (exit 1).
# Usage: cli_s3.sh TENSORVAULT_BINARY MOTO_SERVER_BINARY. Prints "N passed, 0 failed".
set -euo pipefail
tv=$1
moto=$2
work=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$moto" -H 127.0.0.1 -p "$port" > "$work/moto.log" 2>&1 &
moto_pid=$!
trap 'kill "$moto_pid" 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 1 300); do
  curl -s -o /dev/null "http://127.0.0.1:$port/moto-api/data.json" && break
  sleep 0.1
done
curl -sf -X PUT "http://127.0.0.1:$port/cli-bucket" > /dev/null
export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_REGION=us-east-1
ep=(--endpoint "http://127.0.0.1:$port")
url=s3://cli-bucket/stores
passed=0
check() { passed=$((passed + 1)); echo "ok: $1"; }

# A float32 .npy of shape (100, 300) written with the standard library only.
python3 - "$work/in.npy" <<'PY'
import struct, sys
rows, cols = 100, 300
hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (rows, cols)
hdr += " " * (63 - (10 + len(hdr)) % 64) + "\n"
with open(sys.argv[1], "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode())
    f.write(b"".join(struct.pack("<f", ((i * 2654435761) % 1000) / 1000.0 - 0.5) for i in range(rows * cols)))
PY

"$tv" -q store put "$url" acme emb weights "$work/in.npy" --tier 0 "${ep[@]}" > /dev/null
check "put (tier 0) to $url"
"$tv" -q store get "$url" acme emb weights "$work/out.npy" "${ep[@]}" > /dev/null
cmp <(tail -c 120000 "$work/in.npy") <(tail -c 120000 "$work/out.npy")
[[ "$(head -c 128 "$work/out.npy" | tr -d "\0")" == *"(100, 300"* ]]
check "get from another process is bit-exact"
"$tv" -q store put "$url" acme emb small "$work/in.npy" --tier 3 "${ep[@]}" --cache-dir "$work/cache" > /dev/null
"$tv" -q store ls "$url" acme emb --json "${ep[@]}" > "$work/ls.json"
grep -q '"weights"' "$work/ls.json" && grep -q '"small"' "$work/ls.json"
check "ls lists both tensors by name"
"$tv" -q store ls "$url" "${ep[@]}" | grep -q "emb"
check "ls lists the collection"
"$tv" -q store verify "$url" acme emb "${ep[@]}" | grep -q ": ok"
check "verify: ok"
"$tv" -q store stats "$url" --json "${ep[@]}" | grep -q '"tensors": 2'
check "stats"
# Damage one block's bytes (entry 0 of a pack object) behind the store's back: verify exits 1 and names the block.
listing=$(curl -s "http://127.0.0.1:$port/cli-bucket?list-type=2&prefix=stores/acme/emb/packs/t0/")
key=$(grep -o '<Key>[^<]*</Key>' <<< "$listing" | sed -E 's#</?Key>##g' | sed -n 1p)
sig=(--aws-sigv4 "aws:amz:us-east-1:s3" --user testing:testing)
curl -sf "${sig[@]}" "http://127.0.0.1:$port/cli-bucket/$key" -o "$work/blk"
python3 -c 'import sys; b=bytearray(open(sys.argv[1],"rb").read()); b[17]^=4; open(sys.argv[1],"wb").write(b)' "$work/blk"
curl -sf "${sig[@]}" -X PUT --data-binary @"$work/blk" "http://127.0.0.1:$port/cli-bucket/$key" > /dev/null
set +e
"$tv" -q store verify "$url" acme emb "${ep[@]}" > "$work/verify.txt"
code=$?
set -e
[ "$code" = 1 ] && grep -q CORRUPT "$work/verify.txt"
check "verify reports the damaged block object (exit 1)"
"$tv" -q store rm "$url" acme emb small "${ep[@]}" > /dev/null
# Into a file, not a pipe: grep -q would close the pipe early (the CLI then fails on
# EPIPE under pipefail), and the listing must not name the removed tensor at all.
"$tv" -q store ls "$url" acme emb --json "${ep[@]}" > "$work/ls-after.json"
grep -q '"weights"' "$work/ls-after.json" && ! grep -q '"small"' "$work/ls-after.json"
check "rm"
set +e
"$tv" -q store get "$url" acme nope weights "$work/x.npy" "${ep[@]}" 2> "$work/err.txt"
code=$?
set -e
[ "$code" = 2 ] && grep -q "not found" "$work/err.txt"
check "a missing collection is a one-line error (exit 2)"
echo "$passed passed, 0 failed"
