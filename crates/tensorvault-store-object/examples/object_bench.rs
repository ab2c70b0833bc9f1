//! Benchmarks of the object-store backend against an S3 endpoint (bench/object_store/run.sh
//! starts a loopback moto_server and runs this in release mode).
//!
//! Environment: `TV_S3_ENDPOINT` (required), `TV_S3_BUCKET` (existing bucket),
//! `TV_BENCH_BLOCKS` (16 KB blocks in the put/get runs, default 2000),
//! `TV_BENCH_REOPEN_BLOCKS` (blocks in the reopen run, default 1000000).
//! Prints a Markdown report on stdout.

use std::time::{Duration, Instant};

use bytes::Bytes;
use object_store::path::Path as OsPath;
use object_store::{ObjectStore, PutPayload};
use tensorvault_store::{
    BlockInfo, BlockKey, BlockMeta, CollectionConfig, DType, Durability, MemMetaLog, MetaLog,
    MetaRecord, ReconstructPolicy, StoreConfig, SystemClock, Tier,
};
use tensorvault_store_object::manifest::{Layout, Manifest, ObjRef, MANIFEST_FORMAT};
use tensorvault_store_object::{
    connect_s3, frame, open_store, requests, ObjectLocation, ObjectOptions, ObjectTensorStore,
    MANIFEST,
};

fn env_usize(k: &str, d: usize) -> usize {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(d)
}

/// CPU seconds (user + system) of this process so far, from /proc/self/stat (Linux;
/// 0 elsewhere).
fn cpu_secs() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = after.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // Fields 14 and 15 of stat (utime, stime) are 11 and 12 after the ')'.
    (tick(11) + tick(12)) / 100.0
}

fn pct(v: &mut [Duration], p: f64) -> f64 {
    v.sort();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i].as_secs_f64() * 1e3
}

fn block(seed: u32) -> Vec<u8> {
    (0..4096u32)
        .flat_map(|i| {
            ((i.wrapping_mul(2_654_435_761) ^ seed) as f32 / u32::MAX as f32).to_le_bytes()
        })
        .collect()
}

fn opts(endpoint: &str, cache: Option<&std::path::Path>) -> ObjectOptions {
    ObjectOptions {
        endpoint: Some(endpoint.into()),
        credentials: Some(("bench".into(), "bench".into())),
        cache_dir: cache.map(std::path::Path::to_owned),
        write_through: false,
        create: true,
        ..ObjectOptions::default()
    }
}

fn open(
    loc: &ObjectLocation,
    coll: &str,
    o: &ObjectOptions,
    cfg: StoreConfig,
) -> ObjectTensorStore {
    let s3 = connect_s3(loc, o).expect("client");
    open_store(s3, loc, "bench", coll, SystemClock::new(), cfg, o).expect("open")
}

fn main() {
    let endpoint = std::env::var("TV_S3_ENDPOINT").expect("TV_S3_ENDPOINT");
    let bucket = std::env::var("TV_S3_BUCKET").unwrap_or_else(|_| "bench".into());
    let n = env_usize("TV_BENCH_BLOCKS", 2000);
    let reopen_blocks = env_usize("TV_BENCH_REOPEN_BLOCKS", 1_000_000);
    let loc = ObjectLocation::parse(&format!("s3://{bucket}/bench")).expect("url");
    let cache = std::env::temp_dir().join(format!("tv-object-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);
    let info = BlockInfo::new(DType::F32, &[4096]);
    let data: Vec<Vec<u8>> = (0..64).map(block).collect();
    println!("| measurement | value |\n|---|---|");

    let per = 256usize;
    // TV_BENCH_REOPEN_ONLY=1: only section 5.
    let only_reopen = std::env::var_os("TV_BENCH_REOPEN_ONLY").is_some();
    let calls = (n / per).max(2);
    let tensor: Vec<u8> = (0..per).flat_map(|i| data[i % 64].clone()).collect();
    let layouts = if only_reopen {
        Vec::new()
    } else {
        vec![(Layout::Objects, "objects"), (Layout::Packs, "packs")]
    };
    for (layout, lname) in layouts {
        let _ = std::fs::remove_dir_all(&cache);
        // 1. Single-block puts, durability EveryWrite: block PUT, then segment PUT and
        //    conditional manifest PUT, before the call returns.
        let cfg = StoreConfig {
            durability: Durability::EveryWrite,
            ..StoreConfig::default()
        };
        let o = ObjectOptions {
            layout,
            ..opts(&endpoint, None)
        };
        let s = open(&loc, &format!("put1-{lname}"), &o, cfg.clone());
        let mut lat = Vec::new();
        let t = Instant::now();
        let singles = n.min(500);
        for i in 0..singles {
            let t0 = Instant::now();
            s.put_block(
                BlockKey::new(1, i as u32),
                Tier::Tier0,
                &info,
                &data[i % 64],
            )
            .expect("put");
            lat.push(t0.elapsed());
        }
        let secs = t.elapsed().as_secs_f64();
        let r = requests(&s);
        println!(
            "| {lname}: put_block, 1 x 16 KiB per call, EveryWrite ({singles} calls) | p50 {:.2} ms, p99 {:.2} ms, {:.0} blocks/s, {:.2} MB/s, {:.2} requests/put |",
            pct(&mut lat, 0.5),
            pct(&mut lat, 0.99),
            singles as f64 / secs,
            singles as f64 * 16384.0 / secs / 1e6,
            (r.puts as f64) / singles as f64
        );
        drop(s);

        // 2. Batched puts: put_tensor of 256 blocks (4 MiB) per call.
        let s = open(&loc, &format!("putn-{lname}"), &o, cfg.clone());

        let mut lat = Vec::new();
        let before = requests(&s);
        let t = Instant::now();
        for c in 0..calls {
            let t0 = Instant::now();
            s.put_tensor(
                &format!("t{c}"),
                DType::F32,
                &[(per * 4096) as u32],
                &tensor,
                Tier::Tier0,
            )
            .expect("put_tensor");
            lat.push(t0.elapsed());
        }
        let secs = t.elapsed().as_secs_f64();
        let r = requests(&s);
        println!(
            "| {lname}: put_tensor, 256 x 16 KiB per call ({calls} calls) | p50 {:.1} ms, p99 {:.1} ms per call, {:.0} blocks/s, {:.1} MB/s, {:.3} requests/block |",
            pct(&mut lat, 0.5),
            pct(&mut lat, 0.99),
            (calls * per) as f64 / secs,
            (calls * per * 16384) as f64 / secs / 1e6,
            (r.puts - before.puts) as f64 / (calls * per) as f64
        );
        s.close().expect("close");

        // 3. Gets of single 16 KiB blocks: without a cache (one ranged GET each), then with a
        //    cache, cold (GET + cache fill) and warm (local file).
        for (label, cache_dir) in [
            ("no cache", None),
            ("cache, cold", Some(cache.as_path())),
            ("cache, warm", Some(cache.as_path())),
        ] {
            let o = ObjectOptions {
                read_only: true,
                create: false,
                ..opts(&endpoint, cache_dir)
            };
            let s = open(&loc, &format!("putn-{lname}"), &o, cfg.clone());
            let mut out = Vec::new();
            let mut lat = Vec::new();
            let before = requests(&s);
            let cpu0 = cpu_secs();
            let t = Instant::now();
            // Blocks of every tensor but the last, which get_tensor reads below.
            let gets = n.min((calls - 1) * per);
            for i in 0..gets {
                let key = BlockKey::new(
                    tensorvault_store::tensor_id(
                        "bench",
                        &format!("putn-{lname}"),
                        &format!("t{}", i / per),
                        0,
                    ),
                    (i % per) as u32,
                );
                let t0 = Instant::now();
                s.get_block(&key, &mut out).expect("get");
                lat.push(t0.elapsed());
            }
            let secs = t.elapsed().as_secs_f64();
            let cpu_us = (cpu_secs() - cpu0) * 1e6 / gets as f64;
            let r = requests(&s);
            println!(
                "| {lname}: get_block 16 KiB, {label} ({gets} gets) | p50 {:.3} ms, p99 {:.3} ms, {:.0} blocks/s, {:.1} MB/s, {:.2} GETs/block, client CPU {cpu_us:.0} us/get |",
                pct(&mut lat, 0.5),
                pct(&mut lat, 0.99),
                gets as f64 / secs,
                gets as f64 * 16384.0 / secs / 1e6,
                (r.gets - before.gets) as f64 / gets as f64
            );
            // Requests per get_tensor (256 blocks).
            let before = requests(&s);
            let t0 = Instant::now();
            let got = s
                .get_tensor(&format!("t{}", calls - 1))
                .expect("get_tensor");
            let ms = t0.elapsed().as_secs_f64() * 1e3;
            assert_eq!(got.data, tensor);
            let r = requests(&s);
            println!(
                "| {lname}: get_tensor of 256 blocks (4 MiB), {label} | {} GETs, {ms:.1} ms |",
                r.gets - before.gets
            );
        }
    }
    // 4. Packed vs per-block objects, raw: 256 x 16 KiB PUTs (32 in flight) vs one 4 MiB
    //    PUT; a 16 KiB GET vs a 16 KiB ranged GET from the pack.
    let raw = connect_s3(&loc, &opts(&endpoint, None)).expect("client");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("rt");
    let blk = Bytes::from(data[0].clone());
    let pack = Bytes::from(tensor.clone());
    let reps = if only_reopen { 0 } else { 5 };
    let mut per_obj = Vec::new();
    let mut packed = Vec::new();
    for r in 0..reps {
        let t0 = Instant::now();
        rt.block_on(async {
            use futures::StreamExt;
            futures::stream::iter(0..per)
                .map(|i| {
                    let raw = raw.clone();
                    let b = blk.clone();
                    async move {
                        raw.put(
                            &OsPath::from(format!("bench/raw/obj-{r}-{i}")),
                            PutPayload::from_bytes(b),
                        )
                        .await
                        .expect("put")
                    }
                })
                .buffer_unordered(32)
                .collect::<Vec<_>>()
                .await
        });
        per_obj.push(t0.elapsed());
        let t0 = Instant::now();
        rt.block_on(raw.put(
            &OsPath::from(format!("bench/raw/pack-{r}")),
            PutPayload::from_bytes(pack.clone()),
        ))
        .expect("put pack");
        packed.push(t0.elapsed());
    }
    if !only_reopen {
        println!(
            "| write 256 x 16 KiB: 256 objects (32 in flight) vs 1 packed 4 MiB object | {:.1} ms vs {:.1} ms (median of {reps}); 256 vs 1 PUT requests |",
            pct(&mut per_obj, 0.5),
            pct(&mut packed, 0.5)
        );
    }
    let (mut g_obj, mut g_pack) = (Vec::new(), Vec::new());
    for i in 0..if only_reopen { 0 } else { 200usize } {
        let t0 = Instant::now();
        rt.block_on(raw.get_range(
            &OsPath::from(format!("bench/raw/obj-0-{}", i % per)),
            0..16384,
        ))
        .expect("get");
        g_obj.push(t0.elapsed());
        let off = (i % per) as u64 * 16384;
        let t0 = Instant::now();
        rt.block_on(raw.get_range(&OsPath::from("bench/raw/pack-0"), off..off + 16384))
            .expect("get");
        g_pack.push(t0.elapsed());
    }
    if !only_reopen {
        println!(
            "| read 16 KiB: own object vs range of a 4 MiB pack | p50 {:.3} ms vs {:.3} ms |",
            pct(&mut g_obj, 0.5),
            pct(&mut g_pack, 0.5)
        );
    }

    // 5. Reopen a collection of `reopen_blocks` blocks from its snapshot (+ 32 segments of
    //    1000 records): the log objects are built directly (no block objects needed: open
    //    reads no block).
    let geo = CollectionConfig::default();
    let mut log = MemMetaLog::new(geo);
    let sl = u64::from(geo.slot_len(Tier::Tier1));
    let meta = |i: u64| BlockMeta {
        key: BlockKey::new(u128::from(i / 1024) + 1, (i % 1024) as u32),
        shape: [1024 * 4096, 0, 0, 0, 0, 0, 0, 0],
        shape_ndim: 1,
        dtype: DType::F32,
        tier: Tier::Tier1,
        bits: 8,
        scale: 0.01,
        zero_point: 0,
        created_at: 1,
        last_access_at: 1,
        access_count: 0,
        ema_access_rate: 0.0,
        access_window: 1,
        checksum: i as u32,
        lineage_parent: 0,
        reconstruct: ReconstructPolicy::None,
        kind: tensorvault_store::TensorKind::Generic,
        tier_since: 1,
        data_offset: i * sl,
        data_len: 4185,
        centre: None,
    };
    let total = reopen_blocks as u64;
    let seg_recs = 1000u64;
    let nseg = 32u64;
    let snap_blocks = total - seg_recs * nseg;
    let recs: Vec<MetaRecord> = (0..snap_blocks)
        .map(|i| MetaRecord::Create { meta: meta(i) })
        .collect();
    log.append(&recs).expect("append");
    drop(recs);
    let snap = frame::seal(log.to_bytes());
    let dir = "bench/bench/reopen";
    let mut m = Manifest {
        format: MANIFEST_FORMAT,
        incarnation: 1,
        commit: 1,
        writer: 1,
        snapshot: ObjRef {
            key: "log/snap-bench".into(),
            bytes: snap.len() as u64,
        },
        segments: Vec::new(),
        names: None,
        next_slot: [0, total, 0, 0],
        layout: Layout::Objects,
    };
    let snap_mb = snap.len() as f64 / 1e6;
    rt.block_on(raw.put(
        &OsPath::from(format!("{dir}/log/snap-bench")),
        PutPayload::from(snap),
    ))
    .expect("put snapshot");
    for sgi in 0..nseg {
        let mut seg = MemMetaLog::new(geo);
        let recs: Vec<MetaRecord> = (0..seg_recs)
            .map(|k| MetaRecord::Create {
                meta: meta(snap_blocks + sgi * seg_recs + k),
            })
            .collect();
        seg.append(&recs).expect("append");
        let body = frame::seal(seg.as_bytes()[128..].to_vec());
        let key = format!("log/seg-bench-{sgi:04}");
        m.segments.push(ObjRef {
            key: key.clone(),
            bytes: body.len() as u64,
        });
        rt.block_on(raw.put(
            &OsPath::from(format!("{dir}/{key}")),
            PutPayload::from(body),
        ))
        .expect("put segment");
    }
    rt.block_on(raw.put(
        &OsPath::from(format!("{dir}/{MANIFEST}")),
        PutPayload::from(m.encode()),
    ))
    .expect("put manifest");
    let ro = ObjectOptions {
        read_only: true,
        create: false,
        ..opts(&endpoint, None)
    };
    let mut times = Vec::new();
    let mut replay = Vec::new();
    let mut gets = 0;
    for _ in 0..3 {
        let t0 = Instant::now();
        let s = open(&loc, "reopen", &ro, StoreConfig::default());
        times.push(t0.elapsed());
        assert_eq!(s.blocks().expect("blocks").len() as u64, total);
        replay.push(Duration::from_nanos(s.stats().expect("stats").replay_nanos));
        gets = requests(&s).gets;
    }
    println!(
        "| reopen {total} blocks: snapshot {snap_mb:.0} MB + {nseg} segments | {:.0} ms median of 3 (replay {:.0} ms), {gets} GETs (manifest + snapshot + {nseg} segments) |",
        pct(&mut times, 0.5),
        pct(&mut replay, 0.5)
    );
    let _ = std::fs::remove_dir_all(&cache);
}
