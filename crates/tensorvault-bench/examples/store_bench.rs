//! The temporal tensor store side by side with redb, in one run (issue 5, "Performance").
//!
//! `cargo run --release -p tensorvault-bench --example store_bench -- [ROUNDS] [DIR]`
//!
//! Every figure is measured `ROUNDS` times (default 5); each round measures ours and
//! redb back to back on fresh files, so the ratios are same-run ratios. The table shows
//! the median over rounds of each round's p50 / p99 (per-operation timings) and the
//! median of the per-round ratios ours / redb. Blocks are 16 KiB (4096 f32 values).
//!
//! - put: one block per call; ours `put_block` with `Durability::Os` (no fsync) vs a
//!   redb write transaction per block with `Durability::None`; and ours
//!   `Durability::EveryWrite` vs redb `Durability::Immediate` (fsync per commit).
//! - get (warm): ours `get_block` (index, CRC32C check, decode into the caller's Vec,
//!   access tracking) vs redb `begin_read` + `open_table` + `get` + copy into a Vec
//!   (and, as redb's best case, `get` + copy in one long-lived read transaction).
//! - index lookup `meta()`, CRC32C of 16 KiB, migration Tier1 -> Tier3.
//! - reader throughput with 1 and 2 threads (random warm gets).
//! - once: open (= MetaLog replay) of a collection whose log holds 1M records, bytes of
//!   index per block (counting allocator), bytes on disk per tier vs raw f32.

use std::alloc::{GlobalAlloc, Layout, System};
use std::error::Error;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use redb::{ReadableDatabase, TableDefinition};
use tensorvault_store::{
    tensor_id, BlockIndex, BlockInfo, BlockKey, BlockMeta, CollectionConfig, DType, DirStore,
    Durability, FileMetaLog, MetaLog, MetaRecord, ReconstructPolicy, StoreConfig, Tier,
};

type Res<T> = Result<T, Box<dyn Error>>;

// ------------------------------------------------------------------ counting allocator

/// Counts live heap bytes while `COUNTING` is set (a relaxed load otherwise).
struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        // SAFETY: same contract as ours.
        let p = unsafe { System.alloc(l) };
        if !p.is_null() && COUNTING.load(Ordering::Relaxed) {
            LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        // SAFETY: same contract as ours.
        let p = unsafe { System.alloc_zeroed(l) };
        if !p.is_null() && COUNTING.load(Ordering::Relaxed) {
            LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(p, l) };
        if COUNTING.load(Ordering::Relaxed) {
            LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        // SAFETY: same contract as ours.
        let q = unsafe { System.realloc(p, l, new) };
        if !q.is_null() && COUNTING.load(Ordering::Relaxed) {
            LIVE.fetch_add(new as isize - l.size() as isize, Ordering::Relaxed);
        }
        q
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Live heap bytes `f` leaves allocated (what it returns, kept alive until measured).
fn heap_bytes_of<T>(f: impl FnOnce() -> T) -> (T, isize) {
    LIVE.store(0, Ordering::SeqCst);
    COUNTING.store(true, Ordering::SeqCst);
    let v = f();
    COUNTING.store(false, Ordering::SeqCst);
    (v, LIVE.load(Ordering::SeqCst))
}

// ------------------------------------------------------------------ helpers

const BLOCK_ELEMS: usize = 4096;
/// Blocks written and read per round.
const N_BLOCKS: usize = 2048;
/// Timed gets per round and store.
const N_GETS: usize = 20_000;
/// fsync-per-write puts per round.
const N_SYNC_PUTS: usize = 40;
/// Gets per thread in the throughput runs.
const N_TPUT_GETS: usize = 60_000;
/// Records in the replay log.
const REPLAY_RECORDS: u64 = 1_000_000;
/// Blocks that fill a 2^20-bucket hash table to its 7/8 load limit.
const FULL_TABLE: u64 = 917_504;

const REDB_TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("blocks");

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    /// Roughly normal values (sum of 4 uniforms) scaled like weights.
    fn weight(&mut self) -> f32 {
        let s: f32 = (0..4)
            .map(|_| (self.next() >> 40) as f32 / (1u64 << 24) as f32 - 0.5)
            .sum();
        s * 0.05
    }
}

fn keys(n: usize) -> Vec<BlockKey> {
    // 64 blocks (1 MiB) per tensor, ids as the store derives them.
    (0..n)
        .map(|i| {
            let id = tensor_id("bench", "c", &format!("layer{}.weight", i / 64), 0);
            BlockKey::new(id, (i % 64) as u32)
        })
        .collect()
}

fn blocks(n: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut r = Rng(seed | 1);
    (0..n)
        .map(|_| {
            (0..BLOCK_ELEMS)
                .flat_map(|_| r.weight().to_le_bytes())
                .collect()
        })
        .collect()
}

fn redb_key(k: &BlockKey) -> [u8; 20] {
    let mut b = [0u8; 20];
    b[..16].copy_from_slice(&k.tensor_id.to_be_bytes());
    b[16..].copy_from_slice(&k.block_index.to_be_bytes());
    b
}

/// (p50, p99) of nanosecond samples.
fn pct(mut v: Vec<u64>) -> (f64, f64) {
    v.sort_unstable();
    let at = |q: f64| v[((v.len() as f64 - 1.0) * q).round() as usize] as f64;
    (at(0.50), at(0.99))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn time_each(n: usize, mut f: impl FnMut(usize) -> Res<()>) -> Res<Vec<u64>> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        f(i)?;
        out.push(t.elapsed().as_nanos() as u64);
    }
    Ok(out)
}

fn store_cfg(durability: Durability) -> StoreConfig {
    StoreConfig {
        durability,
        ..StoreConfig::default()
    }
}

fn open_ours(dir: &Path, coll: &str, durability: Durability) -> Res<DirStore> {
    Ok(DirStore::open_path(
        dir,
        "bench",
        coll,
        store_cfg(durability),
        true,
    )?)
}

fn open_redb(path: &Path) -> Res<redb::Database> {
    Ok(redb::Database::create(path)?)
}

fn redb_put(db: &redb::Database, key: &[u8], val: &[u8], d: redb::Durability) -> Res<()> {
    let mut tx = db.begin_write()?;
    tx.set_durability(d)?;
    {
        let mut t = tx.open_table(REDB_TABLE)?;
        t.insert(key, val)?;
    }
    tx.commit()?;
    Ok(())
}

fn redb_get(db: &redb::Database, key: &[u8], out: &mut Vec<u8>) -> Res<()> {
    let rx = db.begin_read()?;
    let t = rx.open_table(REDB_TABLE)?;
    let v = t.get(key)?.ok_or("redb: missing key")?;
    out.clear();
    out.extend_from_slice(v.value());
    Ok(())
}

/// Nanoseconds this thread has run on a CPU (Linux; 0 elsewhere), so a figure can be
/// read apart from time spent waiting for a CPU on a loaded machine.
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn file_len(p: &Path) -> u64 {
    std::fs::metadata(p).map_or(0, |m| m.len())
}

// ------------------------------------------------------------------ one round

/// Every per-round figure, by name: (p50 ns, p99 ns) or a single value in `.0`.
type Figures = Vec<(&'static str, (f64, f64))>;

fn round(dir: &Path, r: usize, data: &[Vec<u8>], ks: &[BlockKey]) -> Res<Figures> {
    let mut fig: Figures = Vec::new();
    let shape = [BLOCK_ELEMS as u32];
    let info = BlockInfo::new(DType::F32, &shape);
    let rdir = dir.join(format!("round{r}"));
    std::fs::create_dir_all(&rdir)?;
    let rkeys: Vec<[u8; 20]> = ks.iter().map(redb_key).collect();
    let mut rng = Rng(0x9e37_79b9 + r as u64);
    let order: Vec<usize> = (0..N_GETS).map(|_| rng.below(ks.len())).collect();

    // put, fsync off: ours Tier0 and redb None
    let ours = open_ours(&rdir, "t0", Durability::Os)?;
    let t = time_each(ks.len(), |i| {
        Ok(ours.put_block(ks[i], Tier::Tier0, &info, &data[i])?)
    })?;
    fig.push(("put_os_ours", pct(t)));
    let db = open_redb(&rdir.join("redb.db"))?;
    let t = time_each(ks.len(), |i| {
        redb_put(&db, &rkeys[i], &data[i], redb::Durability::None)
    })?;
    fig.push(("put_os_redb", pct(t)));
    // Make redb's data durable once so it is on disk for the size figure.
    redb_put(&db, &rkeys[0], &data[0], redb::Durability::Immediate)?;

    // get, warm (one untimed pass first)
    let mut out = Vec::with_capacity(BLOCK_ELEMS * 4);
    for k in ks {
        ours.get_block(k, &mut out)?;
    }
    let t = time_each(N_GETS, |i| {
        ours.get_block(&ks[order[i]], &mut out)?;
        Ok(())
    })?;
    if out != data[order[N_GETS - 1]] {
        return Err("ours: block read back differs".into());
    }
    fig.push(("get_t0_ours", pct(t)));
    for k in &rkeys {
        redb_get(&db, k, &mut out)?;
    }
    let t = time_each(N_GETS, |i| redb_get(&db, &rkeys[order[i]], &mut out))?;
    if out != data[order[N_GETS - 1]] {
        return Err("redb: block read back differs".into());
    }
    fig.push(("get_redb", pct(t)));
    {
        let rx = db.begin_read()?;
        let tb = rx.open_table(REDB_TABLE)?;
        let t = time_each(N_GETS, |i| {
            let v = tb.get(&rkeys[order[i]][..])?.ok_or("redb: missing key")?;
            out.clear();
            out.extend_from_slice(v.value());
            Ok(())
        })?;
        fig.push(("get_redb_txn", pct(t)));
    }

    // index lookup, CRC32C (batch-timed: ns per call)
    let lookups = 1_000_000;
    let t0 = Instant::now();
    let mut found = 0usize;
    for i in 0..lookups {
        found += usize::from(ours.meta(&ks[order[i % N_GETS]])?.is_some());
    }
    let ns = t0.elapsed().as_nanos() as f64 / lookups as f64;
    if found != lookups {
        return Err("meta() missed a key".into());
    }
    fig.push(("meta", (ns, 0.0)));
    let crcs = 20_000;
    let t0 = Instant::now();
    let mut acc = 0u32;
    for i in 0..crcs {
        acc ^= tensorvault_core::checksum::crc32c(std::hint::black_box(&data[i % data.len()]));
    }
    std::hint::black_box(acc);
    fig.push(("crc", (t0.elapsed().as_nanos() as f64 / crcs as f64, 0.0)));
    // A plain copy of a random 16 KiB block into a reused Vec: the floor of any get.
    let t0 = Instant::now();
    for i in 0..crcs {
        out.clear();
        out.extend_from_slice(std::hint::black_box(&data[order[i % N_GETS]]));
        std::hint::black_box(&out);
    }
    fig.push(("copy", (t0.elapsed().as_nanos() as f64 / crcs as f64, 0.0)));

    // throughput: 1 and 2 reader threads
    let ours = Arc::new(ours);
    let db = Arc::new(db);
    for threads in [1usize, 2] {
        let run = |which: usize| -> Res<f64> {
            let t0 = Instant::now();
            std::thread::scope(|s| -> Res<()> {
                let hs: Vec<_> = (0..threads)
                    .map(|th| {
                        let (ours, db, ks, rkeys) = (&ours, &db, ks, &rkeys);
                        s.spawn(move || -> Result<(), String> {
                            let mut rng = Rng(0x1234 + th as u64 * 77);
                            let mut out = Vec::with_capacity(BLOCK_ELEMS * 4);
                            for _ in 0..N_TPUT_GETS {
                                let i = rng.below(ks.len());
                                if which == 0 {
                                    ours.get_block(&ks[i], &mut out)
                                        .map_err(|e| e.to_string())?;
                                } else {
                                    redb_get(db, &rkeys[i], &mut out).map_err(|e| e.to_string())?;
                                }
                            }
                            Ok(())
                        })
                    })
                    .collect();
                for h in hs {
                    h.join().map_err(|_| "reader panicked")??;
                }
                Ok(())
            })?;
            Ok((threads * N_TPUT_GETS) as f64 / t0.elapsed().as_secs_f64())
        };
        let o = run(0)?;
        let d = run(1)?;
        fig.push((
            if threads == 1 {
                "tput1_ours"
            } else {
                "tput2_ours"
            },
            (o, 0.0),
        ));
        fig.push((
            if threads == 1 {
                "tput1_redb"
            } else {
                "tput2_redb"
            },
            (d, 0.0),
        ));
    }
    let ours = Arc::into_inner(ours).ok_or("store still shared")?;
    ours.close()?;
    drop(db);

    // put with fsync per write: ours EveryWrite vs redb Immediate. The earlier phases
    // left tens of MiB dirty in the page cache; whoever syncs first would pay for writing
    // them back (ext4 commits them with the first journal transaction), so the file
    // system is synced before each side, and the order alternates by round.
    let settle = || std::process::Command::new("sync").status().map(|_| ());
    let mut sync_figs = Vec::new();
    for side in if r.is_multiple_of(2) { [0, 1] } else { [1, 0] } {
        settle()?;
        if side == 0 {
            let ours = open_ours(&rdir, "sync", Durability::EveryWrite)?;
            let t = time_each(N_SYNC_PUTS, |i| {
                Ok(ours.put_block(ks[i], Tier::Tier0, &info, &data[i])?)
            })?;
            sync_figs.push(("put_sync_ours", pct(t)));
            ours.close()?;
        } else {
            let db = open_redb(&rdir.join("redb_sync.db"))?;
            let t = time_each(N_SYNC_PUTS, |i| {
                redb_put(&db, &rkeys[i], &data[i], redb::Durability::Immediate)
            })?;
            sync_figs.push(("put_sync_redb", pct(t)));
            drop(db);
        }
    }
    sync_figs.sort_by_key(|(name, _)| *name != "put_sync_ours");
    fig.extend(sync_figs);

    // Tier1: put (quantize), get (dequantize), migrate Tier1 -> Tier3, get Tier3
    let ours = open_ours(&rdir, "t1", Durability::Os)?;
    let t = time_each(ks.len(), |i| {
        Ok(ours.put_block(ks[i], Tier::Tier1, &info, &data[i])?)
    })?;
    fig.push(("put_t1_ours", pct(t)));
    for k in ks {
        ours.get_block(k, &mut out)?;
    }
    let t = time_each(N_GETS, |i| {
        ours.get_block(&ks[order[i]], &mut out)?;
        Ok(())
    })?;
    fig.push(("get_t1_ours", pct(t)));
    let t = time_each(ks.len(), |i| Ok(ours.migrate_block(&ks[i], Tier::Tier3)?))?;
    fig.push(("migrate_ours", pct(t)));
    let t = time_each(N_GETS, |i| {
        ours.get_block(&ks[order[i]], &mut out)?;
        Ok(())
    })?;
    fig.push(("get_t3_ours", pct(t)));
    ours.close()?;

    std::fs::remove_dir_all(&rdir)?;
    Ok(fig)
}

// ------------------------------------------------------------------ once

/// Bytes on disk per block per tier, vs raw f32 (16 KiB): slot bytes and whole files
/// (tier file + log) after writing `N_BLOCKS` blocks.
fn disk_sizes(dir: &Path, data: &[Vec<u8>], ks: &[BlockKey]) -> Res<Vec<(String, f64, f64)>> {
    let shape = [BLOCK_ELEMS as u32];
    let info = BlockInfo::new(DType::F32, &shape);
    let mut rows = Vec::new();
    for tier in Tier::ALL {
        let coll = format!("size{}", tier.index());
        let s = open_ours(dir, &coll, Durability::Os)?;
        for (k, d) in ks.iter().zip(data) {
            s.put_block(*k, tier, &info, d)?;
        }
        let slot = f64::from(s.geometry().slot_len(tier));
        s.close()?;
        let cdir = dir.join("bench").join(&coll);
        let files = file_len(&cdir.join(tier.file_name())) + file_len(&cdir.join("meta.log"));
        rows.push((format!("{tier}"), slot, files as f64 / ks.len() as f64));
    }
    // redb, same blocks, committed durably.
    let p = dir.join("size.redb");
    let db = open_redb(&p)?;
    let tx = db.begin_write()?;
    {
        let mut t = tx.open_table(REDB_TABLE)?;
        for (k, d) in ks.iter().zip(data) {
            t.insert(&redb_key(k)[..], &d[..])?;
        }
    }
    tx.commit()?;
    drop(db);
    rows.push((
        "redb (one txn)".into(),
        f64::NAN,
        file_len(&p) as f64 / ks.len() as f64,
    ));
    Ok(rows)
}

fn replay_record(i: u64, geo: &CollectionConfig) -> MetaRecord {
    let slot = u64::from(geo.slot_len(Tier::Tier1));
    MetaRecord::Create {
        meta: BlockMeta {
            key: BlockKey::new(
                u128::from(i / 64) * 0x9e37_79b9_7f4a_7c15_f39c,
                (i % 64) as u32,
            ),
            shape: [1 << 20, 4096, 0, 0, 0, 0, 0, 0],
            shape_ndim: 2,
            dtype: DType::F32,
            tier: Tier::Tier1,
            bits: 8,
            scale: 0.01,
            zero_point: 0,
            created_at: i,
            last_access_at: i,
            access_count: 0,
            ema_access_rate: 0.0,
            access_window: 1,
            checksum: i as u32,
            lineage_parent: 0,
            reconstruct: ReconstructPolicy::None,
            kind: tensorvault_store::TensorKind::Generic,
            tier_since: i,
            data_offset: i * slot,
            data_len: geo.max_payload_len(Tier::Tier1) as u32,
            centre: None,
        },
    }
}

struct Once {
    open_ms: Vec<f64>,
    open_cpu_ms: Vec<f64>,
    index_bytes: isize,
    index_full_bytes: isize,
    store_bytes: isize,
    meta_size: usize,
}

/// Write a collection whose log holds `REPLAY_RECORDS` Create records (1M live Tier1
/// blocks over a sparse tier file), then time `DirStore::open` on it, and count the
/// heap bytes of an index of that many blocks.
fn replay_and_memory(dir: &Path, opens: usize) -> Res<Once> {
    let geo = CollectionConfig::default();
    let cdir = dir.join("bench").join("replay");
    std::fs::create_dir_all(&cdir)?;
    let mut log = FileMetaLog::create(cdir.join("meta.log"), &geo)?;
    let mut batch = Vec::with_capacity(4096);
    for i in 0..REPLAY_RECORDS {
        batch.push(replay_record(i, &geo));
        if batch.len() == batch.capacity() {
            log.append(&batch)?;
            batch.clear();
        }
    }
    log.append(&batch)?;
    // Ended as a clean close ends it: nothing to check for an unfinished last commit.
    log.append(&[tensorvault_store::MetaRecord::commit_mark()])?;
    log.sync()?;
    drop(log);
    let tier1 = std::fs::File::create(cdir.join(Tier::Tier1.file_name()))?;
    tier1.set_len(REPLAY_RECORDS * u64::from(geo.slot_len(Tier::Tier1)))?;
    drop(tier1);

    // First open: count the heap it leaves allocated (not timed); then time `opens`.
    let (s0, store_bytes) = heap_bytes_of(|| open_ours(dir, "replay", Durability::Os));
    if s0?.tier_counts()?[1] != REPLAY_RECORDS as usize {
        return Err("replay lost blocks".into());
    }
    let mut open_ms = Vec::new();
    let mut open_cpu_ms = Vec::new();
    for _ in 0..opens {
        let (t0, c0) = (Instant::now(), thread_cpu_ns());
        let s = open_ours(dir, "replay", Durability::Os)?;
        open_ms.push(t0.elapsed().as_secs_f64() * 1e3);
        open_cpu_ms.push((thread_cpu_ns() - c0) as f64 / 1e6);
        drop(s);
    }
    let index_of = |n: u64| -> Res<isize> {
        let (idx, bytes) = heap_bytes_of(|| {
            let mut idx = BlockIndex::default();
            for i in 0..n {
                let _ = idx.apply(replay_record(i, &geo), &geo);
            }
            idx
        });
        if idx.len() != n as usize {
            return Err("index lost blocks".into());
        }
        Ok(bytes)
    };
    let index_bytes = index_of(REPLAY_RECORDS)?;
    // The same table at its fullest (7/8 of 2^20 buckets) instead of just after growing.
    let index_full_bytes = index_of(FULL_TABLE)?;
    std::fs::remove_dir_all(&cdir)?;
    Ok(Once {
        open_ms,
        open_cpu_ms,
        index_bytes,
        index_full_bytes,
        store_bytes,
        meta_size: std::mem::size_of::<BlockMeta>(),
    })
}

// ------------------------------------------------------------------ report

fn us(ns: f64) -> String {
    format!("{:.2} us", ns / 1e3)
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "**not met**"
    }
}

fn main() -> Res<()> {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().map_or(Ok(5), |a| a.parse())?;
    let base: PathBuf = args.next().map_or_else(std::env::temp_dir, PathBuf::from);
    let dir = base.join(format!("tv_store_bench_{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;

    let ks = keys(N_BLOCKS);
    let data = blocks(N_BLOCKS, 2024);
    println!(
        "store_bench: {N_BLOCKS} blocks of 16 KiB (4096 f32), {N_GETS} random gets, \
         {rounds} rounds, redb 4.5, dir {}",
        dir.display()
    );

    // For profiling one part: STORE_BENCH_ONLY=replay skips the rounds.
    let only = std::env::var("STORE_BENCH_ONLY").unwrap_or_default();
    if only == "replay" {
        let once = replay_and_memory(&dir, 3)?;
        println!(
            "open ms: {:?}\ncpu ms: {:?}\nindex heap bytes/block: {:.1} (1M), {:.1} ({FULL_TABLE}); store {:.1}",
            once.open_ms,
            once.open_cpu_ms,
            once.index_bytes as f64 / REPLAY_RECORDS as f64,
            once.index_full_bytes as f64 / FULL_TABLE as f64,
            once.store_bytes as f64 / REPLAY_RECORDS as f64
        );
        std::fs::remove_dir_all(&dir)?;
        return Ok(());
    }
    let mut all: Vec<Figures> = Vec::new();
    for r in 0..rounds {
        let t0 = Instant::now();
        all.push(round(&dir, r, &data, &ks)?);
        eprintln!("round {r}: {:.1} s", t0.elapsed().as_secs_f64());
    }
    let get = |name: &str, which: usize| -> f64 {
        median(
            all.iter()
                .map(|f| {
                    let v = f.iter().find(|(n, _)| *n == name).map(|(_, v)| *v);
                    let v = v.unwrap_or((f64::NAN, f64::NAN));
                    if which == 0 {
                        v.0
                    } else {
                        v.1
                    }
                })
                .collect(),
        )
    };
    let ratio = |a: &str, b: &str| -> f64 {
        median(
            all.iter()
                .map(|f| {
                    let x = |n: &str| f.iter().find(|(m, _)| *m == n).map_or(f64::NAN, |v| v.1 .0);
                    x(a) / x(b)
                })
                .collect(),
        )
    };

    println!("\n| operation (16 KiB block) | ours p50 | ours p99 | redb p50 | redb p99 | ours/redb (p50) | target | |");
    println!("|---|---|---|---|---|---|---|---|");
    let row = |label: &str, o: &str, d: Option<&str>, target: Option<f64>| {
        let (op50, op99) = (get(o, 0), get(o, 1));
        let (dp50, dp99, rat) = match d {
            Some(d) => (us(get(d, 0)), us(get(d, 1)), format!("{:.2}", ratio(o, d))),
            None => ("-".into(), "-".into(), "-".into()),
        };
        let (tg, v) = match target {
            Some(t) => (format!("<= {}", us(t)), verdict(op50 <= t)),
            None => ("-".into(), ""),
        };
        println!(
            "| {label} | {} | {} | {dp50} | {dp99} | {rat} | {tg} | {v} |",
            us(op50),
            us(op99)
        );
    };
    row(
        "put, fsync off (ours Os, redb None)",
        "put_os_ours",
        Some("put_os_redb"),
        Some(10_000.0),
    );
    row(
        "put, fsync per write (EveryWrite / Immediate)",
        "put_sync_ours",
        Some("put_sync_redb"),
        None,
    );
    row(
        "put Tier1 (8-bit quantize), fsync off",
        "put_t1_ours",
        None,
        None,
    );
    row(
        "get warm Tier0 (redb: txn per get)",
        "get_t0_ours",
        Some("get_redb"),
        Some(2_000.0),
    );
    row(
        "get warm Tier0 (redb: one long read txn)",
        "get_t0_ours",
        Some("get_redb_txn"),
        Some(2_000.0),
    );
    row(
        "get warm Tier1 (dequantize 8-bit)",
        "get_t1_ours",
        None,
        Some(2_000.0),
    );
    row(
        "get warm Tier3 (dequantize 3-bit)",
        "get_t3_ours",
        None,
        None,
    );
    row(
        "migrate Tier1 -> Tier3",
        "migrate_ours",
        None,
        Some(30_000.0),
    );

    let best = ratio("get_t0_ours", "get_redb_txn");
    println!(
        "| get warm Tier0 vs redb's best case (one read txn), same run | ratio {best:.2} | | | | | < 1.00 | {} |",
        verdict(best < 1.0)
    );

    let meta = get("meta", 0);
    let crc = get("crc", 0);
    println!("\n| figure | ours (median of rounds) | target | |");
    println!("|---|---|---|---|");
    println!(
        "| index lookup `meta()` | {meta:.1} ns | <= 50 ns | {} |",
        verdict(meta <= 50.0)
    );
    println!(
        "| CRC32C of 16 KiB | {crc:.0} ns ({:.1} GB/s) | <= 1 us | {} |",
        16384.0 / crc,
        verdict(crc <= 1000.0)
    );
    println!(
        "| copy of 16 KiB into a Vec (floor of a get) | {:.0} ns | - | |",
        get("copy", 0)
    );

    println!("\n| warm random gets/s | ours | redb (txn per get) | ours/redb |");
    println!("|---|---|---|---|");
    for th in [1, 2] {
        let (o, d) = (format!("tput{th}_ours"), format!("tput{th}_redb"));
        println!(
            "| {th} thread{} | {:.0} | {:.0} | {:.2} |",
            if th == 1 { "" } else { "s" },
            get(&o, 0),
            get(&d, 0),
            ratio(&o, &d)
        );
    }
    println!(
        "| 2 threads / 1 thread | {:.2} | {:.2} | |",
        ratio("tput2_ours", "tput1_ours"),
        ratio("tput2_redb", "tput1_redb")
    );

    let sizes = disk_sizes(&dir, &data, &ks)?;
    println!(
        "\n| tier | slot bytes / block | files (tier + log) bytes / block | vs raw f32 (16384 B) |"
    );
    println!("|---|---|---|---|");
    for (name, slot, files) in &sizes {
        let slot_s = if slot.is_nan() {
            "-".to_string()
        } else {
            format!("{slot:.0}")
        };
        println!(
            "| {name} | {slot_s} | {files:.0} | {:.3} |",
            files / 16384.0
        );
    }

    let once = replay_and_memory(&dir, 3)?;
    let open = median(once.open_ms.clone());
    let idx_pb = once.index_bytes as f64 / REPLAY_RECORDS as f64;
    let store_pb = once.store_bytes as f64 / REPLAY_RECORDS as f64;
    println!("\n| figure | ours | target | |");
    println!("|---|---|---|---|");
    let open_cpu = median(once.open_cpu_ms.clone());
    println!(
        "| open (replay) of a log of 1M Create records (128 MB), warm cache, wall | {open:.0} ms (min {:.0}, {} opens) | <= 150 ms | {} |",
        once.open_ms.iter().copied().fold(f64::INFINITY, f64::min),
        once.open_ms.len(),
        verdict(open <= 150.0)
    );
    println!("| same, CPU time of the opening thread | {open_cpu:.0} ms | | |");
    println!(
        "| heap bytes per block, index of 1M blocks | {idx_pb:.0} B (the `BlockMeta` view is {} B, built on demand) | <= 128 B | {} |",
        once.meta_size,
        verdict(idx_pb <= 128.0)
    );
    println!(
        "| heap bytes per block, index of {FULL_TABLE} blocks (table at its fullest) | {:.0} B | <= 128 B | {} |",
        once.index_full_bytes as f64 / FULL_TABLE as f64,
        verdict((once.index_full_bytes as f64 / FULL_TABLE as f64) <= 128.0)
    );
    println!("| heap bytes per block, whole opened store of 1M blocks | {store_pb:.0} B | - | |");

    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
