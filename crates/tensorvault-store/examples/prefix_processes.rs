//! Many processes on one prefix cache (issue 24 item 6): one writer process stores
//! prompts (a shared 512-token system prompt + 512 tokens of its own) while N reader
//! processes load random stored prompts through read-only handles and check every value
//! against what the writer stored, for a fixed time; then prints per-process throughput.
//!
//! `cargo run --release -p tensorvault-store --example prefix_processes -- [--secs 60]
//! [--readers 4] [--budget-mb 768] [--root DIR]` (bench/kv_prefix/processes.sh). The
//! geometry is SmolLM2-135M's: 30 layers, 3 KV heads, head_dim 64, 256-token chunks.
//! Exit status 1 if any process saw an error or a wrong value.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use half::f16;
use tensorvault_store::prefix::{KvData, PrefixConfig};
use tensorvault_store::{Durability, PrefixCache, StoreConfig};

const LAYERS: u32 = 30;
const HEADS: u32 = 3;
const DIM: u32 = 64;
const CHUNK: u32 = 256;
const SYSTEM: usize = 512;
const PROMPT: usize = 1024;
const MODEL: &str = "SmolLM2-135M-geometry/processes-bench";

fn prompt(i: u64) -> Vec<u32> {
    (0..PROMPT as u64)
        .map(|p| {
            if (p as usize) < SYSTEM {
                (p * 7 + 1) as u32
            } else {
                ((i * 1_000_003 + p * 31) % 49_152) as u32
            }
        })
        .collect()
}

/// Per-position seeds that depend on every earlier token (as a model's KV does).
fn seeds(tokens: &[u32]) -> Vec<u32> {
    let mut h = 0u32;
    tokens
        .iter()
        .map(|&t| {
            h = h.wrapping_mul(2_654_435_761).wrapping_add(t);
            h
        })
        .collect()
}

/// The value at (kind, layer, head, position seed, d): exactly representable in f16.
fn val(kind: u32, l: u32, h: u32, seed: u32, d: u32) -> f16 {
    let k = (seed ^ (kind << 29) ^ (l << 20) ^ (h << 16))
        .wrapping_add(d.wrapping_mul(2_246_822_519))
        >> 21;
    f16::from_f32((k as f32 - 1024.0) / 64.0)
}

fn layer_kv(kind: u32, l: u32, s: &[u32]) -> Vec<f16> {
    let mut v = Vec::with_capacity(HEADS as usize * s.len() * DIM as usize);
    for h in 0..HEADS {
        for &seed in s {
            v.extend((0..DIM).map(|d| val(kind, l, h, seed, d)));
        }
    }
    v
}

fn cfg(read_only: bool, budget: Option<u64>) -> PrefixConfig {
    PrefixConfig {
        chunk_tokens: CHUNK,
        read_only,
        budget_bytes: budget,
        store: StoreConfig {
            durability: Durability::Os,
            lock_wait: Duration::from_secs(30),
            ..StoreConfig::default()
        },
        ..PrefixConfig::default()
    }
}

fn open(root: &Path, read_only: bool, budget: Option<u64>) -> PrefixCache {
    PrefixCache::open(root, MODEL, LAYERS, HEADS, DIM, cfg(read_only, budget))
        .unwrap_or_else(|e| panic!("open: {e}"))
}

fn arg(args: &[String], name: &str, default: u64) -> u64 {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map_or(default, |v| v.parse().expect(name))
}

fn writer(root: &Path, secs: u64, budget: u64) -> String {
    let c = open(root, false, Some(budget));
    let start = Instant::now();
    let (mut prompts, mut tokens, mut errors) = (0u64, 0u64, 0u64);
    let mut commit_ms = Vec::new();
    while start.elapsed() < Duration::from_secs(secs) {
        let t = prompt(prompts);
        let s = seeds(&t);
        let k: Vec<Vec<f16>> = (0..LAYERS).map(|l| layer_kv(0, l, &s)).collect();
        let v: Vec<Vec<f16>> = (0..LAYERS).map(|l| layer_kv(1, l, &s)).collect();
        let kd: Vec<KvData> = k.iter().map(|x| KvData::F16(x)).collect();
        let vd: Vec<KvData> = v.iter().map(|x| KvData::F16(x)).collect();
        let t0 = Instant::now();
        match c.store(&t, &kd, &vd) {
            Ok(n) => tokens += n,
            Err(e) => {
                eprintln!("writer: {e}");
                errors += 1;
            }
        }
        commit_ms.push(t0.elapsed().as_secs_f64() * 1e3);
        prompts += 1;
        // Publish how many prompts are stored (readers pick among them).
        let tmp = root.join("stored.tmp");
        std::fs::write(&tmp, prompts.to_string()).unwrap();
        std::fs::rename(&tmp, root.join("stored")).unwrap();
    }
    let secs_f = start.elapsed().as_secs_f64();
    let st = c.stats().unwrap();
    c.close().unwrap();
    commit_ms.sort_by(f64::total_cmp);
    let med = commit_ms.get(commit_ms.len() / 2).copied().unwrap_or(0.0);
    let f16_mb = tokens as f64 * f64::from(2 * LAYERS * HEADS * DIM * 2) / 1e6;
    format!(
        "writer: {prompts} prompts stored ({tokens} new tokens, {f16_mb:.0} MB f16) in {secs_f:.1} s: \
         {:.2} prompts/s, {:.1} MB/s; store median {med:.0} ms; {} chunks evicted by the budget; \
         errors {errors}",
        prompts as f64 / secs_f,
        f16_mb / secs_f,
        st.evicted_chunks
    )
}

fn reader(root: &Path, secs: u64, id: u64) -> (String, u64) {
    while !root.join("stored").exists() {
        std::thread::sleep(Duration::from_millis(10));
    }
    let c = open(root, true, None);
    let start = Instant::now();
    let (mut loads, mut full, mut tokens, mut wrong, mut errors) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut lat = Vec::new();
    let mut rng = 0x9e37_79b9_7f4a_7c15u64 ^ id;
    while start.elapsed() < Duration::from_secs(secs) {
        let stored: u64 = std::fs::read_to_string(root.join("stored"))
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(1);
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        // Mostly recent prompts (the budget evicts old ones), sometimes any.
        let i = if rng.is_multiple_of(4) {
            rng % stored
        } else {
            stored.saturating_sub(1 + (rng >> 8) % 8)
        };
        let t = prompt(i);
        let t0 = Instant::now();
        let got = match c.load(&t, None) {
            Ok(g) => g,
            Err(e) => {
                eprintln!("reader {id}: {e}");
                errors += 1;
                continue;
            }
        };
        lat.push(t0.elapsed().as_secs_f64() * 1e3);
        loads += 1;
        tokens += got.tokens as u64;
        full += u64::from(got.tokens == PROMPT);
        let s = seeds(&t[..got.tokens]);
        for l in 0..LAYERS {
            if got.keys[l as usize] != layer_kv(0, l, &s)
                || got.values[l as usize] != layer_kv(1, l, &s)
            {
                wrong += 1;
                eprintln!("reader {id}: WRONG KV for prompt {i} layer {l}");
                break;
            }
        }
    }
    let secs_f = start.elapsed().as_secs_f64();
    let s = c.stats().unwrap();
    lat.sort_by(f64::total_cmp);
    let med = lat.get(lat.len() / 2).copied().unwrap_or(0.0);
    let gb = tokens as f64 * f64::from(2 * LAYERS * HEADS * DIM) * 4.0 / 1e9;
    (
        format!(
            "reader {id}: {loads} loads ({full} whole prompts, {tokens} tokens) in {secs_f:.1} s: \
             {:.1} loads/s, {:.2} GB/s of f32 KV; load median {med:.1} ms; hit chunks {} / miss {}; \
             damaged {}; wrong {wrong}; errors {errors}",
            loads as f64 / secs_f,
            gb / secs_f,
            s.hit_chunks,
            s.miss_chunks,
            s.damaged_chunks
        ),
        wrong + errors + s.damaged_chunks,
    )
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let secs = arg(&args, "--secs", 60);
    let readers = arg(&args, "--readers", 4);
    let budget = arg(&args, "--budget-mb", 768) * 1_000_000;
    if let Some(role) = args
        .iter()
        .position(|a| a == "--role")
        .map(|i| args[i + 1].clone())
    {
        let root = PathBuf::from(&args[args.iter().position(|a| a == "--root").unwrap() + 1]);
        let (line, bad) = if role == "writer" {
            let l = writer(&root, secs, budget);
            let bad = u64::from(!l.ends_with("errors 0"));
            (l, bad)
        } else {
            reader(&root, secs, role.parse().unwrap())
        };
        println!("{line}");
        std::process::exit(i32::from(bad > 0));
    }
    let tmp;
    let root = match args.iter().position(|a| a == "--root") {
        Some(i) => PathBuf::from(&args[i + 1]),
        None => {
            tmp = tempfile::tempdir().unwrap();
            tmp.path().to_owned()
        }
    };
    drop(open(&root, false, Some(budget))); // create the model's cache
    let _ = std::fs::remove_file(root.join("stored"));
    let exe = std::env::current_exe().unwrap();
    let spawn = |role: String| {
        Command::new(&exe)
            .args(["--role", &role, "--root"])
            .arg(&root)
            .args([
                "--secs",
                &secs.to_string(),
                "--budget-mb",
                &(budget / 1_000_000).to_string(),
            ])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap()
    };
    println!(
        "prefix cache, {readers} reader processes + 1 writer, {secs} s; geometry {LAYERS}x{HEADS}x{DIM}, \
         {CHUNK}-token chunks ({:.1} MB f16 each), prompts {SYSTEM} shared + {} own tokens, budget {} MB",
        f64::from(2 * LAYERS * HEADS * DIM * CHUNK * 2) / 1e6,
        PROMPT - SYSTEM,
        budget / 1_000_000
    );
    let mut kids = vec![spawn("writer".into())];
    kids.extend((0..readers).map(|i| spawn(i.to_string())));
    let mut failed = false;
    for k in kids {
        let out = k.wait_with_output().unwrap();
        print!("{}", String::from_utf8_lossy(&out.stdout));
        failed |= !out.status.success();
    }
    let v = open(&root, true, None).verify().unwrap();
    println!(
        "after: verify {} chunks, {} blocks, {} damaged",
        v.chunks,
        v.blocks,
        v.damaged.len()
    );
    if failed || !v.damaged.is_empty() {
        println!("FAILED");
        std::process::exit(1);
    }
}
