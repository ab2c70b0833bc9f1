#!/usr/bin/env bash
# Object-store backend benchmark against a loopback S3 server (moto_server, started here
# on a free 127.0.0.1 port and stopped at exit). Prints the Markdown table that
# bench/RESULTS.md's "Object store" section quotes.
#   bash bench/object_store/run.sh            # 2000 16 KiB blocks, reopen of 1M blocks
#   TV_BENCH_BLOCKS=500 TV_BENCH_REOPEN_BLOCKS=100000 bash bench/object_store/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=target/s3-venv
if [ ! -x "$venv/bin/moto_server" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "moto[server]"
fi
cargo build -q --release -p tensorvault-store-object --example object_bench
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$venv/bin/moto_server" -H 127.0.0.1 -p "$port" > /dev/null 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true' EXIT
for _ in $(seq 1 300); do
  curl -s -o /dev/null "http://127.0.0.1:$port/moto-api/data.json" && break
  sleep 0.1
done
curl -sf -X PUT "http://127.0.0.1:$port/bench" > /dev/null
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); server: moto $("$venv/bin/pip" show moto | sed -n 's/^Version: //p') on 127.0.0.1"
TV_S3_ENDPOINT="http://127.0.0.1:$port" TV_S3_BUCKET=bench target/release/examples/object_bench
