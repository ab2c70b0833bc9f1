//! KV-cache simulation (issue 6 item 4): a decoder's attention KV cache kept in the
//! temporal tensor store, on a directory store, with a manual clock that ticks once per
//! decode step.
//!
//! Every (layer, head) has a key and a value tensor of `head_dim` f16 values per token
//! (`L{l}.H{h}.{k|v}`, 32 KiB blocks of 128 positions at head_dim 128). The run prefills
//! a prompt, then decodes: each step, layer by layer, appends one token to every head's
//! tail block (Tier0) and reads what attention reads: a sliding window of recent tokens
//! every step, the first few tokens (attention sinks) every step, and now and then an
//! older range (a retrieval head). `maintain(budget)` runs every K steps and moves blocks
//! by their access scores; the log is compacted every C steps.
//!
//! Reported over time: bytes on disk (payload and tier files), blocks per tier, read
//! latency (p50/p99); at the end: reconstruction error per tier against the original f16
//! values, and disk bytes against the same cache kept entirely in f16.
//!
//! ```text
//! cargo run --release -p tensorvault-store --example kv_sim -- [--history out.json] [--quick]
//!   [--layers N] [--heads N] [--head-dim N] [--prompt N] [--steps N] [--window N]
//!   [--sinks N] [--old-read-every N] [--old-read-tokens N] [--maintain-every N]
//!   [--budget N] [--compact-every N] [--sample-every N] [--seed N] [--dir DIR] [--keep]
//! ```
//! Defaults: the full size, 32 layers x 8 heads, head_dim 128, a 512-token prompt and
//! 3584 decode steps (4096 tokens; about a minute on 2 cores). `--quick` is 8 layers x 8
//! heads; `--steps` makes the context longer.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use half::f16;
use tensorvault_store::{
    Clock, CollectionConfig, DirStore, Durability, KvCache, KvKind, KvSlot, ManualClock,
    StoreConfig, Tier,
};

type Store = DirStore<Arc<ManualClock>>;

#[derive(Clone, Debug)]
struct Opts {
    layers: u32,
    heads: u32,
    head_dim: u32,
    prompt: u64,
    steps: u64,
    window: u64,
    sinks: u64,
    old_read_every: u64,
    old_read_tokens: u64,
    maintain_every: u64,
    budget: usize,
    compact_every: u64,
    sample_every: u64,
    seed: u64,
    dir: Option<PathBuf>,
    keep: bool,
    history: Option<PathBuf>,
}

impl Default for Opts {
    fn default() -> Self {
        Self {
            layers: 32,
            heads: 8,
            head_dim: 128,
            prompt: 512,
            steps: 3584,
            window: 256,
            sinks: 4,
            old_read_every: 64,
            old_read_tokens: 64,
            maintain_every: 16,
            budget: 4096,
            compact_every: 256,
            sample_every: 64,
            seed: 0x5eed,
            dir: None,
            keep: false,
            history: None,
        }
    }
}

fn usage() -> ! {
    eprintln!(
        "usage: kv_sim [--history FILE] [--quick] [--layers N] [--heads N] [--head-dim N] \
         [--prompt N] [--steps N] [--window N] [--sinks N] [--old-read-every N] \
         [--old-read-tokens N] [--maintain-every N] [--budget N] [--compact-every N] \
         [--sample-every N] [--seed N] [--dir DIR] [--keep]"
    );
    std::process::exit(2)
}

fn parse_args() -> Opts {
    let mut o = Opts::default();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().unwrap_or_else(|| usage());
        let mut num = |what: &str| -> u64 {
            let v = val();
            v.parse().unwrap_or_else(|_| {
                eprintln!("{what}: not a number: {v}");
                usage()
            })
        };
        match a.as_str() {
            "--quick" => o.layers = 8,
            "--layers" => o.layers = num("--layers") as u32,
            "--heads" => o.heads = num("--heads") as u32,
            "--head-dim" => o.head_dim = num("--head-dim") as u32,
            "--prompt" => o.prompt = num("--prompt"),
            "--steps" => o.steps = num("--steps"),
            "--window" => o.window = num("--window"),
            "--sinks" => o.sinks = num("--sinks"),
            "--old-read-every" => o.old_read_every = num("--old-read-every"),
            "--old-read-tokens" => o.old_read_tokens = num("--old-read-tokens"),
            "--maintain-every" => o.maintain_every = num("--maintain-every").max(1),
            "--budget" => o.budget = num("--budget") as usize,
            "--compact-every" => o.compact_every = num("--compact-every"),
            "--sample-every" => o.sample_every = num("--sample-every").max(1),
            "--seed" => o.seed = num("--seed"),
            "--dir" => o.dir = Some(PathBuf::from(val())),
            "--keep" => o.keep = true,
            "--history" => o.history = Some(PathBuf::from(val())),
            _ => usage(),
        }
    }
    if o.layers == 0 || o.heads == 0 || o.prompt + o.steps == 0 {
        usage();
    }
    o
}

// ------------------------------------------------------------------ synthetic K/V data

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The original f16 values of one token position of one tensor: a pure function of
/// (seed, tensor, token), so the error check can regenerate them instead of keeping the
/// whole cache in memory. Keys get RoPE-like rotating channel pairs with a few outlier
/// channels (as real keys have); values are roughly normal.
fn token_values(seed: u64, tensor: u64, token: u64, head_dim: usize, out: &mut Vec<f16>) {
    out.clear();
    let mut s = splitmix(seed ^ tensor.wrapping_mul(0x1000_0000_01b3) ^ (token << 20));
    let mut normal = || {
        // Irwin-Hall(4), rescaled: close enough to a normal for quantization error.
        let mut acc = 0.0f32;
        for _ in 0..4 {
            s = splitmix(s);
            acc += (s >> 40) as f32 / (1u64 << 24) as f32;
        }
        (acc - 2.0) * 1.732
    };
    let is_key = tensor.is_multiple_of(2);
    for c in 0..head_dim {
        let x = if is_key {
            let pair = (c / 2) as f32;
            let freq = 10_000f32.powf(-2.0 * pair / head_dim as f32);
            let angle = token as f32 * freq;
            let rot = if c % 2 == 0 { angle.cos() } else { angle.sin() };
            let outlier = if c % 32 == 5 { 6.0 } else { 1.0 };
            outlier * (0.8 * rot + 0.6 * normal())
        } else {
            0.5 * normal()
        };
        out.push(f16::from_f32(x));
    }
}

// ------------------------------------------------------------------ measurements

#[derive(Clone, Debug, Default)]
struct Sample {
    step: u64,
    tick: u64,
    tokens: u64,
    blocks: [u64; 4],
    payload_bytes: [u64; 4],
    tier_file_bytes: [u64; 4],
    log_bytes: u64,
    disk_bytes: u64,
    allocated_bytes: u64,
    f16_bytes: u64,
    window_p50_us: f64,
    window_p99_us: f64,
    old_p50_us: f64,
    old_p99_us: f64,
    reads: u64,
    moves: u64,
    maintain_ms: f64,
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i] as f64 / 1e3
}

/// Apparent and allocated bytes of every file in `dir`, and of `meta.log`.
fn dir_bytes(dir: &Path) -> (u64, u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let (mut apparent, mut allocated, mut log) = (0, 0, 0);
    for e in std::fs::read_dir(dir)
        .expect("read the collection dir")
        .flatten()
    {
        if let Ok(m) = e.metadata() {
            apparent += m.len();
            allocated += m.blocks() * 512;
            if e.file_name() == "meta.log" {
                log = m.len();
            }
        }
    }
    (apparent, allocated, log)
}

#[derive(Clone, Debug, Default)]
struct TierError {
    blocks: u64,
    values: u64,
    max_abs: f64,
    sum_sq: f64,
    sum_sq_ref: f64,
}

struct Sim {
    o: Opts,
    clock: Arc<ManualClock>,
    kv: KvCache<Arc<ManualClock>, tensorvault_store::MmapBlockIO, tensorvault_store::FileMetaLog>,
    dir: PathBuf,
    slots: Vec<KvSlot>,
    window_ns: Vec<u64>,
    old_ns: Vec<u64>,
    /// Every read latency of the run (window and sink reads; old reads).
    all_window_ns: Vec<u64>,
    all_old_ns: Vec<u64>,
    moves: u64,
    maintain_ns: u64,
    rng: u64,
    /// Layer 0's slots, whose moved blocks are checked after every `maintain`.
    layer0: Vec<KvSlot>,
    /// Reconstruction error per kind (keys, values) and tier.
    errors: [[TierError; 4]; 2],
}

impl Sim {
    fn slot_index(&self, s: KvSlot) -> u64 {
        (u64::from(s.layer) * u64::from(self.o.heads) + u64::from(s.head)) * 2
            + u64::from(s.kind == KvKind::Value)
    }

    fn append_tokens(&self, layer: u32, first: u64, count: u64) {
        let hd = self.o.head_dim as usize;
        let mut vals: Vec<Vec<f16>> = Vec::new();
        let mut tok = Vec::with_capacity(hd);
        let layer_slots: Vec<KvSlot> = self
            .slots
            .iter()
            .copied()
            .filter(|s| s.layer == layer)
            .collect();
        for s in &layer_slots {
            let mut v = Vec::with_capacity(count as usize * hd);
            for t in first..first + count {
                token_values(self.o.seed, self.slot_index(*s), t, hd, &mut tok);
                v.extend_from_slice(&tok);
            }
            vals.push(v);
        }
        let items: Vec<(KvSlot, &[f16])> = layer_slots
            .iter()
            .copied()
            .zip(vals.iter().map(Vec::as_slice))
            .collect();
        self.kv.append_batch(&items).expect("append");
    }

    fn next_rand(&mut self) -> u64 {
        self.rng = splitmix(self.rng);
        self.rng
    }

    /// What attention reads for one layer at one step.
    fn attend(&mut self, layer: u32, tokens: u64, buf: &mut Vec<f16>) {
        let w0 = tokens.saturating_sub(self.o.window);
        let slots: Vec<KvSlot> = self
            .slots
            .iter()
            .copied()
            .filter(|s| s.layer == layer)
            .collect();
        for s in slots {
            let t = Instant::now();
            self.kv.read_into(s, w0..tokens, buf).expect("window read");
            self.window_ns.push(t.elapsed().as_nanos() as u64);
            if self.o.sinks > 0 && w0 > 0 {
                let t = Instant::now();
                self.kv
                    .read_into(s, 0..self.o.sinks.min(w0), buf)
                    .expect("sink read");
                self.window_ns.push(t.elapsed().as_nanos() as u64);
            }
            let old_lo = self.o.sinks;
            let old_hi = w0;
            if self.o.old_read_every > 0
                && old_hi > old_lo + self.o.old_read_tokens
                && self.next_rand().is_multiple_of(self.o.old_read_every)
            {
                let span = old_hi - old_lo - self.o.old_read_tokens;
                let start = old_lo + self.next_rand() % span;
                let t = Instant::now();
                self.kv
                    .read_into(s, start..start + self.o.old_read_tokens, buf)
                    .expect("old read");
                self.old_ns.push(t.elapsed().as_nanos() as u64);
            }
        }
    }

    fn sample(&mut self, step: u64, tokens: u64) -> Sample {
        let st = self.kv.store().stats().expect("stats");
        let (disk, allocated, log) = dir_bytes(&self.dir);
        self.all_window_ns.extend_from_slice(&self.window_ns);
        self.all_old_ns.extend_from_slice(&self.old_ns);
        self.window_ns.sort_unstable();
        self.old_ns.sort_unstable();
        let s = Sample {
            step,
            tick: self.clock.now_ticks(),
            tokens,
            blocks: st.blocks,
            payload_bytes: st.payload_bytes,
            tier_file_bytes: st.usage.map(|u| u.bytes),
            log_bytes: log,
            disk_bytes: disk,
            allocated_bytes: allocated,
            f16_bytes: tokens * u64::from(self.o.head_dim) * 2 * self.slots.len() as u64,
            window_p50_us: percentile(&self.window_ns, 0.5),
            window_p99_us: percentile(&self.window_ns, 0.99),
            old_p50_us: percentile(&self.old_ns, 0.5),
            old_p99_us: percentile(&self.old_ns, 0.99),
            reads: (self.window_ns.len() + self.old_ns.len()) as u64,
            moves: self.moves,
            maintain_ms: self.maintain_ns as f64 / 1e6,
        };
        self.window_ns.clear();
        self.old_ns.clear();
        self.moves = 0;
        self.maintain_ns = 0;
        s
    }

    fn maintain(&mut self) {
        let t = Instant::now();
        let r = self.kv.store().maintain(self.o.budget).expect("maintain");
        self.maintain_ns += t.elapsed().as_nanos() as u64;
        self.moves += r.moves.len() as u64;
        // Error of every moved block of layer 0 in its new tier, so each tier a block
        // passes through is measured (at the end most blocks sit in Tier3 or Tier0).
        for m in &r.moves {
            if let Some(slot) = self
                .layer0
                .iter()
                .copied()
                .find(|s| self.kv.tensor_id(*s) == m.key.tensor_id)
            {
                let mut acc = std::mem::take(&mut self.errors);
                self.check_block(slot, m.key.block_index, &mut acc);
                self.errors = acc;
            }
        }
    }

    /// Read every block of `slots` back (without counting accesses) and add its error
    /// against the regenerated originals to `acc`, per kind (keys, values) and tier.
    fn check_errors(&self, slots: &[KvSlot], acc: &mut [[TierError; 4]; 2]) {
        let tpb = u64::from(self.kv.tokens_per_block());
        for s in slots {
            let tokens = self.kv.tokens(*s).expect("tokens");
            for b in 0..tokens.div_ceil(tpb) {
                self.check_block(*s, b as u32, acc);
            }
        }
    }

    /// Add one block's error to `acc`.
    fn check_block(&self, s: KvSlot, b: u32, acc: &mut [[TierError; 4]; 2]) {
        let hd = self.o.head_dim as usize;
        let tpb = u64::from(self.kv.tokens_per_block());
        let tokens = self.kv.tokens(s).expect("tokens");
        let mut got = Vec::new();
        let mut orig = Vec::new();
        let meta = self.kv.peek_block(s, b, &mut got).expect("read block");
        let e = &mut acc[usize::from(s.kind == KvKind::Value)][meta.tier.index()];
        e.blocks += 1;
        let first = u64::from(b) * tpb;
        for (i, t) in (first..tokens.min(first + tpb)).enumerate() {
            token_values(self.o.seed, self.slot_index(s), t, hd, &mut orig);
            for (g, want) in got[i * hd..(i + 1) * hd].iter().zip(&orig) {
                let (g, want) = (g.to_f64(), want.to_f64());
                let d = (g - want).abs();
                e.max_abs = e.max_abs.max(d);
                e.sum_sq += d * d;
                e.sum_sq_ref += want * want;
                e.values += 1;
            }
        }
    }
}

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64)
}

fn json_arr<T: std::fmt::Display>(v: &[T]) -> String {
    let items: Vec<String> = v.iter().map(ToString::to_string).collect();
    format!("[{}]", items.join(","))
}

fn sample_json(s: &Sample) -> String {
    format!(
        "{{\"step\":{},\"tick\":{},\"tokens\":{},\"blocks\":{},\"payload_bytes\":{},\
         \"tier_file_bytes\":{},\"log_bytes\":{},\"disk_bytes\":{},\"allocated_bytes\":{},\
         \"f16_bytes\":{},\"window_read_p50_us\":{:.2},\"window_read_p99_us\":{:.2},\
         \"old_read_p50_us\":{:.2},\"old_read_p99_us\":{:.2},\"reads\":{},\"moves\":{},\
         \"maintain_ms\":{:.3}}}",
        s.step,
        s.tick,
        s.tokens,
        json_arr(&s.blocks),
        json_arr(&s.payload_bytes),
        json_arr(&s.tier_file_bytes),
        s.log_bytes,
        s.disk_bytes,
        s.allocated_bytes,
        s.f16_bytes,
        s.window_p50_us,
        s.window_p99_us,
        s.old_p50_us,
        s.old_p99_us,
        s.reads,
        s.moves,
        s.maintain_ms
    )
}

fn main() {
    let o = parse_args();
    let tmp;
    let root = match &o.dir {
        Some(d) => d.clone(),
        None => {
            tmp = std::env::temp_dir().join(format!("tv-kv-sim-{}", std::process::id()));
            tmp.clone()
        }
    };
    std::fs::create_dir_all(&root).expect("create the store root");
    let dir = root.join("sim").join("kv");
    if dir.exists() {
        std::fs::remove_dir_all(&dir).expect("remove an old simulation collection");
    }
    let clock = Arc::new(ManualClock::new(1));
    let cfg = StoreConfig {
        collection: CollectionConfig::kv_cache(o.head_dim).expect("head_dim"),
        // A KV cache is rebuilt from the prompt after a crash: no fsync.
        durability: Durability::Os,
        // Access statistics reach the log with each compaction (a snapshot), not per read.
        access_flush_every: 0,
        ..StoreConfig::default()
    };
    let store: Store = DirStore::open_dir(&root, "sim", "kv", Arc::clone(&clock), cfg, true)
        .expect("open the store");
    let policy = store.geometry().to_owned();
    let kv = KvCache::new(store, o.head_dim).expect("kv cache");
    let mut slots = Vec::new();
    for l in 0..o.layers {
        for h in 0..o.heads {
            for k in KvKind::BOTH {
                slots.push(KvSlot::new(l, h, k));
            }
        }
    }
    println!(
        "== kv_sim: {} layers x {} heads x 2 (k, v) = {} tensors, head_dim {}, f16, {} tokens/block \
         ({} KiB blocks); prompt {} + {} decode steps; window {}, {} sinks, an old read of {} tokens \
         per head every ~{} steps; maintain every {} steps (budget {}), compact every {}; \
         tier bits raw/{}/{}/{}",
        o.layers,
        o.heads,
        slots.len(),
        o.head_dim,
        kv.tokens_per_block(),
        policy.block_elems * 2 / 1024,
        o.prompt,
        o.steps,
        o.window,
        o.sinks,
        o.old_read_tokens,
        o.old_read_every,
        o.maintain_every,
        o.budget,
        o.compact_every,
        policy.tier_bits[0],
        policy.tier_bits[1],
        policy.tier_bits[2]
    );
    let mut sim = Sim {
        rng: splitmix(o.seed ^ 0xa77e),
        o: o.clone(),
        clock,
        kv,
        dir: dir.clone(),
        slots,
        window_ns: Vec::new(),
        old_ns: Vec::new(),
        all_window_ns: Vec::new(),
        all_old_ns: Vec::new(),
        moves: 0,
        maintain_ns: 0,
        layer0: Vec::new(),
        errors: Default::default(),
    };
    sim.layer0 = sim.slots.iter().copied().filter(|s| s.layer == 0).collect();
    let started = Instant::now();
    let mut samples = Vec::new();
    let mut buf = Vec::new();
    // Prefill: the whole prompt in one append per tensor, then one full attention pass.
    sim.clock.advance(1);
    if o.prompt > 0 {
        for l in 0..o.layers {
            sim.append_tokens(l, 0, o.prompt);
            sim.attend(l, o.prompt, &mut buf);
        }
    }
    samples.push(sim.sample(0, o.prompt));
    let mut tokens = o.prompt;
    for step in 1..=o.steps {
        sim.clock.advance(1);
        for l in 0..o.layers {
            sim.append_tokens(l, tokens, 1);
            sim.attend(l, tokens + 1, &mut buf);
        }
        tokens += 1;
        if step % o.maintain_every == 0 {
            sim.maintain();
        }
        if o.compact_every > 0 && step % o.compact_every == 0 {
            sim.kv.store().compact().expect("compact");
        }
        if step % o.sample_every == 0 || step == o.steps {
            let s = sim.sample(step, tokens);
            if step % (o.sample_every * 8) == 0 || step == o.steps {
                println!(
                    "step {:>5}  tokens {:>5}  blocks t0/t1/t2/t3 {:>5}/{:>5}/{:>5}/{:>5}  \
                     disk {:>10} ({:>5.1}% of f16)  window read p50 {:>6.1} us p99 {:>7.1} us",
                    s.step,
                    s.tokens,
                    s.blocks[0],
                    s.blocks[1],
                    s.blocks[2],
                    s.blocks[3],
                    mib(s.disk_bytes),
                    100.0 * s.disk_bytes as f64 / s.f16_bytes as f64,
                    s.window_p50_us,
                    s.window_p99_us
                );
            }
            samples.push(s);
        }
    }
    let run_secs = started.elapsed().as_secs_f64();
    // Steady state: log compacted, as after every compaction during the run.
    sim.kv.store().compact().expect("compact");
    let last = sim.sample(o.steps, tokens);
    let all = sim.slots.clone();
    let mut errors = std::mem::take(&mut sim.errors);
    sim.check_errors(&all, &mut errors);
    sim.all_window_ns.sort_unstable();
    sim.all_old_ns.sort_unstable();
    let lat = [
        percentile(&sim.all_window_ns, 0.5),
        percentile(&sim.all_window_ns, 0.99),
        percentile(&sim.all_old_ns, 0.5),
        percentile(&sim.all_old_ns, 0.99),
    ];
    print_summary(&o, &samples, &last, &errors, lat, run_secs);
    if let Some(path) = &o.history {
        let mut j = String::new();
        j.push_str(&format!(
            "{{\"config\":{{\"layers\":{},\"heads\":{},\"head_dim\":{},\"tokens_per_block\":{},\
             \"prompt\":{},\"steps\":{},\"window\":{},\"sinks\":{},\"old_read_every\":{},\
             \"old_read_tokens\":{},\"maintain_every\":{},\"budget\":{},\"compact_every\":{},\
             \"seed\":{}}},\n\"samples\":[\n",
            o.layers,
            o.heads,
            o.head_dim,
            sim.kv.tokens_per_block(),
            o.prompt,
            o.steps,
            o.window,
            o.sinks,
            o.old_read_every,
            o.old_read_tokens,
            o.maintain_every,
            o.budget,
            o.compact_every,
            o.seed
        ));
        let lines: Vec<String> = samples.iter().map(sample_json).collect();
        j.push_str(&lines.join(",\n"));
        j.push_str(&format!(
            "\n],\n\"final\":{},\n\"error_by_tier\":[",
            sample_json(&last)
        ));
        let mut errs: Vec<String> = Vec::new();
        for (kind, row) in
            ["all", "k", "v"]
                .iter()
                .zip([merged(&errors), errors[0].clone(), errors[1].clone()])
        {
            for (t, e) in row.iter().enumerate() {
                errs.push(format!(
                    "{{\"kind\":\"{kind}\",\"tier\":{t},\"block_checks\":{},\"values\":{},\"max_abs\":{:.6},\"rmse\":{:.6},\"rel_rmse\":{:.6}}}",
                    e.blocks,
                    e.values,
                    e.max_abs,
                    rmse(e),
                    rel(e)
                ));
            }
        }
        j.push_str(&errs.join(","));
        j.push_str(&format!(
            "],\n\"latency_us\":{{\"window_p50\":{:.2},\"window_p99\":{:.2},\"old_p50\":{:.2},\"old_p99\":{:.2}}},\n\"run_seconds\":{run_secs:.2}}}\n",
            lat[0], lat[1], lat[2], lat[3]
        ));
        std::fs::write(path, j).expect("write the history");
        println!("history: {}", path.display());
    }
    let kv = sim.kv;
    kv.into_store().close().expect("close");
    if o.keep {
        println!("store kept: {} (tenant sim, collection kv)", root.display());
    } else if o.dir.is_none() {
        let _ = std::fs::remove_dir_all(&root);
    }
}

/// Keys and values together.
fn merged(e: &[[TierError; 4]; 2]) -> [TierError; 4] {
    std::array::from_fn(|t| {
        let (k, v) = (&e[0][t], &e[1][t]);
        TierError {
            blocks: k.blocks + v.blocks,
            values: k.values + v.values,
            max_abs: k.max_abs.max(v.max_abs),
            sum_sq: k.sum_sq + v.sum_sq,
            sum_sq_ref: k.sum_sq_ref + v.sum_sq_ref,
        }
    })
}

fn rmse(e: &TierError) -> f64 {
    if e.values == 0 {
        0.0
    } else {
        (e.sum_sq / e.values as f64).sqrt()
    }
}

fn rel(e: &TierError) -> f64 {
    if e.sum_sq_ref == 0.0 {
        0.0
    } else {
        (e.sum_sq / e.sum_sq_ref).sqrt()
    }
}

fn print_summary(
    o: &Opts,
    samples: &[Sample],
    last: &Sample,
    errors: &[[TierError; 4]; 2],
    lat: [f64; 4],
    secs: f64,
) {
    let tail = &samples[samples.len() * 3 / 4..];
    let mean_ratio = tail
        .iter()
        .map(|s| s.disk_bytes as f64 / s.f16_bytes as f64)
        .sum::<f64>()
        / tail.len() as f64;
    let moves: u64 = samples.iter().map(|s| s.moves).sum();
    let maint: f64 = samples.iter().map(|s| s.maintain_ms).sum();
    println!();
    println!(
        "== summary ({:.1} s, {} layers x {} heads, {} tokens)",
        secs, o.layers, o.heads, last.tokens
    );
    println!(
        "| tier | blocks at end | payload | tier file | block checks | max abs err | RMSE | \
         rel RMSE keys | rel RMSE values |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    let all = merged(errors);
    for t in Tier::ALL {
        let i = t.index();
        let e = &all[i];
        println!(
            "| {} ({}) | {} | {} | {} | {} | {:.4} | {:.5} | {:.2}% | {:.2}% |",
            t,
            ["f16", "8-bit", "5-bit", "3-bit"][i],
            last.blocks[i],
            mib(last.payload_bytes[i]),
            mib(last.tier_file_bytes[i]),
            e.blocks,
            e.max_abs,
            rmse(e),
            100.0 * rel(&errors[0][i]),
            100.0 * rel(&errors[1][i])
        );
    }
    let payload: u64 = last.payload_bytes.iter().sum();
    println!();
    println!("| at the end | bytes | % of f16 |");
    println!("| --- | ---: | ---: |");
    let pct = |b: u64| format!("{:.1}%", 100.0 * b as f64 / last.f16_bytes as f64);
    println!("| same cache in f16 | {} | 100% |", mib(last.f16_bytes));
    println!(
        "| payload (live blocks) | {} | {} |",
        mib(payload),
        pct(payload)
    );
    println!(
        "| on disk: all files (tier files {}, meta.log {}) | {} | {} |",
        mib(last.tier_file_bytes.iter().sum()),
        mib(last.log_bytes),
        mib(last.disk_bytes),
        pct(last.disk_bytes)
    );
    println!(
        "| on disk: allocated | {} | {} |",
        mib(last.allocated_bytes),
        pct(last.allocated_bytes)
    );
    println!();
    println!(
        "disk / f16: {:.1}% at the end, {:.1}% mean over the last quarter of the run \
         (target <= 40%: {})",
        100.0 * last.disk_bytes as f64 / last.f16_bytes as f64,
        100.0 * mean_ratio,
        if last.disk_bytes as f64 <= 0.4 * last.f16_bytes as f64 {
            "met"
        } else {
            "NOT met"
        }
    );
    println!(
        "reads (one head's k or v, whole run): window + sinks p50 {:.1} us p99 {:.1} us; \
         old ranges ({} tokens) p50 {:.1} us p99 {:.1} us",
        lat[0], lat[1], o.old_read_tokens, lat[2], lat[3]
    );
    println!(
        "maintain: {} moves in {:.0} ms total ({:.1} us per move incl. scoring)",
        moves,
        maint,
        if moves > 0 {
            maint * 1e3 / moves as f64
        } else {
            0.0
        }
    );
}
