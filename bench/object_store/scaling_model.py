#!/usr/bin/env python3
"""Scaling model for the object-store backend (docs/scaling.md), standard library only.

Inputs are either measured in this repo (bench/object_store/run.sh -> bench/RESULTS.md
"Object store"; the store's index bytes per block from the "Store" section) or named
assumptions, passed as flags. Outputs: the layout of a store of --raw-tb of f32 data,
request counts, a cache-size simulation (LRU over a seeded Zipf block stream), what one
machine serves, how many machines a workload needs, and a sharding simulation
(rendezvous hashing of collections onto machines: balance and movement on growth).

    python3 bench/object_store/scaling_model.py            # the figures in docs/scaling.md
"""
import argparse
import bisect
import hashlib
import math
import random
from collections import OrderedDict

KIB = 1024
TRAILER = 16          # object trailer (docs/formats/store-object.md)
RECORD = 128          # MetaLog record
# Payload bytes of a 4096-element block per tier (docs/formats/store.md; RESULTS "Store").
PAYLOAD = {"tier0 f32": 16384, "tier1 8-bit": 4185, "tier2 5-bit": 2585, "tier3 3-bit": 1577}


def zipf_cdf(n, s):
    w = [1.0 / (i + 1) ** s for i in range(n)]
    tot = sum(w)
    acc, cdf = 0.0, []
    for x in w:
        acc += x / tot
        cdf.append(acc)
    return cdf


def lru_hit_rates(n_blocks, s, fractions, accesses, seed):
    """Hit rate of an LRU cache holding each fraction of the blocks, for a Zipf(s) stream
    over n_blocks blocks whose popularity ranks are shuffled (seeded)."""
    rng = random.Random(seed)
    cdf = zipf_cdf(n_blocks, s)
    perm = list(range(n_blocks))
    rng.shuffle(perm)
    stream = [perm[min(bisect.bisect_left(cdf, rng.random()), n_blocks - 1)] for _ in range(accesses)]
    out = {}
    for f in fractions:
        cap = max(1, int(n_blocks * f))
        lru, hits = OrderedDict(), 0
        warm = accesses // 5          # first 20% warms the cache, not counted
        for i, b in enumerate(stream):
            if b in lru:
                lru.move_to_end(b)
                if i >= warm:
                    hits += 1
            else:
                lru[b] = None
                if len(lru) > cap:
                    lru.popitem(last=False)
        out[f] = hits / (accesses - warm)
    return out


def rendezvous(collections, machines):
    def score(c, m):
        return int.from_bytes(hashlib.blake2b(f"{c}/{m}".encode(), digest_size=8).digest(), "little")
    return {c: max(machines, key=lambda m: score(c, m)) for c in collections}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--raw-tb", type=float, default=10.0, help="raw f32 data in TB (1e12 B)")
    ap.add_argument("--tier-mix", default="0.05,0.25,0.30,0.40", help="share of blocks in tiers 0..3")
    ap.add_argument("--blocks-per-collection", type=int, default=1_000_000,
                    help="collection size cap (reopen of 1M blocks measured in RESULTS)")
    ap.add_argument("--reopen-s-per-m", type=float, default=1.0,
                    help="MEASURED: reopen seconds per 1M blocks (RESULTS 'Object store')")
    ap.add_argument("--index-bytes", type=float, default=405,
                    help="MEASURED: heap bytes per block of the open index (RESULTS 'Store')")
    ap.add_argument("--cold-get-cpu-us", type=float, default=650,
                    help="MEASURED: CPU of the reading process per uncached 16 KiB get (SigV4, HTTP, CRC; /proc/self/stat), us")
    ap.add_argument("--warm-get-us", type=float, default=20, help="MEASURED: CPU per get served from the local cache, us")
    ap.add_argument("--nic-gbit", type=float, default=10, help="ASSUMED: NIC of a serving machine")
    ap.add_argument("--s3-get-ms", type=float, default=20, help="ASSUMED: S3 first-byte latency")
    ap.add_argument("--cores", type=int, default=2, help="cores of a serving machine (this one: 2)")
    ap.add_argument("--memory-gib", type=float, default=24, help="memory of a serving machine (this one: 24)")
    ap.add_argument("--reads-per-s", type=float, default=100_000, help="workload: block reads per second")
    ap.add_argument("--zipf", type=float, default=1.0, help="workload: Zipf exponent of block popularity")
    ap.add_argument("--seed", type=int, default=42)
    a = ap.parse_args()

    mix = [float(x) for x in a.tier_mix.split(",")]
    blocks = a.raw_tb * 1e12 / (4096 * 4)
    obj_bytes = [PAYLOAD[k] + TRAILER for k in PAYLOAD]
    stored = sum(blocks * m * b for m, b in zip(mix, obj_bytes))
    ncoll = math.ceil(blocks / a.blocks_per_collection)
    print("## 1. Layout")
    print(f"raw {a.raw_tb:g} TB of f32 = {blocks / 1e6:,.0f} M blocks of 16 KiB; tier mix {mix}")
    for (k, b), m in zip(PAYLOAD.items(), mix):
        print(f"  {k:12s}: {blocks * m / 1e6:8,.0f} M blocks, {b + TRAILER:6,d} B framed = {blocks * m * (b + TRAILER) / 1e12:6.2f} TB")
    print(f"stored: {stored / 1e12:.2f} TB ({stored / (a.raw_tb * 1e12):.3f} of raw) in "
          f"{blocks / 256 / 1e6:,.1f} M pack objects (layout packs, 256 entries: "
          f"{256 * (PAYLOAD['tier0 f32'] + TRAILER) / 2**20:.1f} MiB at tier0, "
          f"{256 * (PAYLOAD['tier3 3-bit'] + TRAILER) / 2**20:.2f} MiB at tier3) "
          f"or {blocks / 1e6:,.0f} M block objects (layout objects)")
    snap = a.blocks_per_collection * RECORD * 2  # Create + Access record per block, worst case
    print(f"collections of <= {a.blocks_per_collection:,} blocks: {ncoll:,}; per collection "
          f"1 manifest (~1 KB), 1 snapshot of {a.blocks_per_collection * RECORD / 1e6:.0f}-{snap / 1e6:.0f} MB, "
          f"<= 32 segments, 1 names object")
    print()
    print("## 2. Requests")
    print("  get_block, cold: 1 ranged GET of data_len + 16 B; warm: 0")
    print("  get_tensor of k blocks: packs + cache: ceil(k/64) GETs cold (read-ahead), 0 warm;"
          " objects or no cache: k GETs, issued one after the other")
    print("  put_tensor of k blocks: packs: ceil(k/256) pack PUTs; objects: k PUTs (32 in flight);"
          " + 1 segment PUT + 1 conditional manifest PUT (+1 manifest PUT per slot reservation)")
    print(f"  open: 1 manifest + 1 snapshot + <= 32 segment + 1 names GET; "
          f"{a.reopen_s_per_m * a.blocks_per_collection / 1e6:.1f} s for {a.blocks_per_collection:,} blocks (measured rate)")
    print()
    print("## 3. Cache sizing: LRU simulation, Zipf block popularity")
    n_sim = 200_000
    fr = [0.01, 0.02, 0.05, 0.10, 0.20, 0.30]
    for s in (0.8, a.zipf, 1.2):
        h = lru_hit_rates(n_sim, s, fr, 1_000_000, a.seed)
        print(f"  zipf {s:.1f}: " + ", ".join(f"{f:.0%} cached -> {h[f]:.1%} hits" for f in fr))
    h = lru_hit_rates(n_sim, a.zipf, fr, 1_000_000, a.seed)
    per_machine_cache = None
    print()
    print("## 4. One machine")
    cpu_cold = a.cores * 1e6 / a.cold_get_cpu_us
    cpu_warm = a.cores * 1e6 / a.warm_get_us
    nic = a.nic_gbit * 1e9 / 8 / (16 * KIB + TRAILER)
    idx_blocks = a.memory_gib * 0.5 * 2**30 / a.index_bytes
    print(f"  CPU: {cpu_cold:,.0f} cold gets/s, {cpu_warm:,.0f} cached gets/s ({a.cores} cores, measured per-get cost)")
    print(f"  NIC {a.nic_gbit:g} Gbit/s: {nic:,.0f} uncached 16 KiB gets/s")
    print(f"  index memory: half of {a.memory_gib:g} GiB holds {idx_blocks / 1e6:,.0f} M open blocks "
          f"= {idx_blocks / a.blocks_per_collection:,.0f} collections of {a.blocks_per_collection:,}")
    inflight = a.s3_get_ms / 1e3 * min(cpu_cold, nic)
    print(f"  at {a.s3_get_ms:g} ms S3 latency, {inflight:,.0f} GETs must be in flight to reach that rate "
          f"(get_tensor issues one at a time: use many reader threads)")
    print()
    print("## 5. Machines for the workload")
    for f in (0.05, 0.10, 0.20):
        hit = h[f]
        cold = a.reads_per_s * (1 - hit)
        warm = a.reads_per_s * hit
        cpu_s = cold * a.cold_get_cpu_us / 1e6 + warm * a.warm_get_us / 1e6
        m_cpu = cpu_s / a.cores
        m_nic = cold / nic
        m_idx = blocks / idx_blocks
        machines = math.ceil(max(m_cpu, m_nic, m_idx))
        cache_tb = f * stored / 1e12
        print(f"  cache {f:.0%} of the data ({cache_tb:.2f} TB in total, {cache_tb * 1e3 / machines:,.0f} GB/machine): "
              f"hit {hit:.1%}, {cold:,.0f} S3 GETs/s; machines: CPU {m_cpu:.1f}, NIC {m_nic:.1f}, "
              f"index {m_idx:.1f} -> {machines}")
    print()
    print("## 6. Sharding: rendezvous hashing of collections onto machines")
    colls = [f"tenant{c % 17}/coll{c}" for c in range(ncoll)]
    for nm in (4, 8, 16):
        ms = [f"m{i}" for i in range(nm)]
        asg = rendezvous(colls, ms)
        load = [sum(1 for c in colls if asg[c] == m) for m in ms]
        grown = rendezvous(colls, ms + [f"m{nm}"])
        moved = sum(1 for c in colls if asg[c] != grown[c])
        print(f"  {ncoll} collections on {nm} machines: max/mean load {max(load) / (ncoll / nm):.2f}; "
              f"adding 1 machine moves {moved} ({moved / ncoll:.1%}, ideal {1 / (nm + 1):.1%}), "
              f"all of them to the new machine: {all(grown[c] == f'm{nm}' for c in colls if asg[c] != grown[c])}")


if __name__ == "__main__":
    main()
