//! `tensorvault kv ls|stats|verify|evict ROOT`: the KV prefix caches under a store root
//! (`tensorvault_store::PrefixCache`, one per model under `ROOT/prefix/`).
//!
//! `ls`, `stats` and `verify` open every cache read-only: through lock-free snapshots, so
//! they never wait for (or block) a serving process, and never write anything. `evict`
//! commits like any writer of the cache (waiting a bounded time for another writer).

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use serde_json::{json, Value};
use tensorvault_store::prefix::counts::FIELDS;
use tensorvault_store::prefix::{collection_name, model_dirs, ModelManifest, PrefixConfig, TENANT};
use tensorvault_store::{PrefixCache, StoreErr};

use crate::error::CliError;
use crate::report::{kv, Table};

/// `tensorvault kv`: KV prefix caches (reused prompt KV, one cache per model).
#[derive(Debug, Subcommand)]
pub enum KvCmd {
    /// List the models with a prefix cache under ROOT: geometry, chunks, tokens, bytes.
    /// Read-only.
    Ls(KvArgs),
    /// Per model: chunks, tokens, bytes (stored, as f16, per tier) and the use counters
    /// summed over every writer's commits (lookups, hit/miss chunks, hit rate, damaged,
    /// stored, evicted). Read-only.
    Stats(KvArgs),
    /// Check every block of every chunk (checksum and decode). Reports damaged chunks
    /// (a damaged chunk is a miss for every client, never wrong data) and exits 1 if any.
    /// Read-only: a writing client drops damaged chunks itself.
    Verify(KvArgs),
    /// Evict chunks, least recently used first and suffixes before their prefixes, down to
    /// --to-bytes N payload bytes per model, or --all of them. Waits (at most 10 s) for a
    /// writing client's commit; never for readers.
    Evict(EvictArgs),
}

/// ROOT and the model filter of the read-only verbs.
#[derive(Debug, Args)]
pub struct KvArgs {
    /// Store root directory (the caches live in ROOT/prefix/).
    pub root: PathBuf,
    /// Only this model (its identity string, as the client opened the cache with).
    #[arg(long)]
    pub model: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `kv evict`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("amount").required(true).args(["to_bytes", "all"])))]
pub struct EvictArgs {
    /// Store root directory.
    pub root: PathBuf,
    /// Only this model (default: every model under ROOT).
    #[arg(long)]
    pub model: Option<String>,
    /// Keep at most N payload bytes of each model's chunks.
    #[arg(long, value_name = "N")]
    pub to_bytes: Option<u64>,
    /// Evict every chunk.
    #[arg(long)]
    pub all: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Run a `kv` subcommand; returns the exit code.
///
/// # Errors
/// [`CliError::Store`] for a root that cannot be listed, a damaged model manifest or a
/// store error; [`CliError::Usage`] for a `--model` without a cache under ROOT.
pub fn run(cmd: KvCmd) -> Result<i32, CliError> {
    match cmd {
        KvCmd::Ls(a) => ls(&a),
        KvCmd::Stats(a) => stats(&a),
        KvCmd::Verify(a) => verify(&a),
        KvCmd::Evict(a) => evict(&a),
    }
}

/// The models under `root` (each collection's manifest), filtered by `model`.
fn models(root: &Path, model: Option<&str>) -> Result<Vec<ModelManifest>, CliError> {
    if !root.is_dir() {
        return Err(CliError::Usage {
            arg: "ROOT",
            reason: format!("{} is not a directory", root.display()),
        });
    }
    let dirs = match model {
        // Only that model's collection: another model's damaged manifest does not matter.
        Some(want) => vec![root.join(TENANT).join(collection_name(want))],
        None => model_dirs(root)?,
    };
    let mut out = Vec::new();
    for dir in dirs {
        // A collection being created has no manifest for a moment: not a model yet.
        if let Some(m) = ModelManifest::read(&dir).map_err(|e| in_dir(&dir, e))? {
            if model.is_none_or(|want| want == m.model) {
                out.push(m);
            }
        }
    }
    if let (Some(want), true) = (model, out.is_empty()) {
        return Err(CliError::Usage {
            arg: "--model",
            reason: format!("no prefix cache of model {want:?} under {}", root.display()),
        });
    }
    Ok(out)
}

/// A store error of the collection in `dir`, naming the directory.
fn in_dir(dir: &Path, e: StoreErr) -> CliError {
    CliError::Usage {
        arg: "ROOT",
        reason: format!("{}: {e}", dir.display()),
    }
}

fn open(root: &Path, m: &ModelManifest, read_only: bool) -> Result<PrefixCache, CliError> {
    let cfg = PrefixConfig {
        chunk_tokens: m.chunk_tokens,
        read_only,
        ..PrefixConfig::default()
    };
    Ok(PrefixCache::open(
        root, &m.model, m.layers, m.kv_heads, m.head_dim, cfg,
    )?)
}

fn geometry(m: &ModelManifest) -> String {
    format!("{}x{}x{}", m.layers, m.kv_heads, m.head_dim)
}

fn print_json(v: &Value) {
    println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
}

fn ls(a: &KvArgs) -> Result<i32, CliError> {
    let mut rows = Vec::new();
    for m in models(&a.root, a.model.as_deref())? {
        let s = open(&a.root, &m, true)?.stats()?;
        rows.push((m, s));
    }
    if a.json {
        let v: Vec<Value> = rows
            .iter()
            .map(|(m, s)| {
                json!({"model": m.model, "layers": m.layers, "kv_heads": m.kv_heads,
                       "head_dim": m.head_dim, "chunk_tokens": m.chunk_tokens,
                       "chunks": s.chunks, "tokens": s.tokens, "bytes": s.stored_bytes})
            })
            .collect();
        print_json(&json!({ "models": v }));
        return Ok(0);
    }
    let mut t = Table::new(&[
        "model",
        "layers x heads x dim",
        "chunk",
        "chunks",
        "tokens",
        "bytes",
    ]);
    for (m, s) in &rows {
        t.row(vec![
            m.model.clone(),
            geometry(m),
            m.chunk_tokens.to_string(),
            s.chunks.to_string(),
            s.tokens.to_string(),
            s.stored_bytes.to_string(),
        ]);
    }
    print!("{}", t.render());
    Ok(0)
}

fn stats(a: &KvArgs) -> Result<i32, CliError> {
    let mut out = Vec::new();
    for m in models(&a.root, a.model.as_deref())? {
        let c = open(&a.root, &m, true)?;
        let s = c.stats()?;
        let counts = c.model_counts()?;
        let hits = counts.get("hit_chunks").unwrap_or(0);
        let misses = counts.get("miss_chunks").unwrap_or(0);
        let rate = if hits + misses == 0 {
            None
        } else {
            Some(hits as f64 / (hits + misses) as f64)
        };
        let mut uses = serde_json::Map::new();
        for (f, v) in FIELDS.iter().zip(counts.0) {
            uses.insert((*f).to_owned(), json!(v));
        }
        out.push(json!({
            "model": m.model, "layers": m.layers, "kv_heads": m.kv_heads,
            "head_dim": m.head_dim, "chunk_tokens": m.chunk_tokens,
            "chunks": s.chunks, "tokens": s.tokens, "stored_bytes": s.stored_bytes,
            "f16_bytes": s.f16_bytes, "tier_chunks": s.tier_chunks, "tier_bytes": s.tier_bytes,
            "uses": uses, "hit_rate": rate,
        }));
    }
    if a.json {
        print_json(&json!({ "models": out }));
        return Ok(0);
    }
    for (i, v) in out.iter().enumerate() {
        if i > 0 {
            println!();
        }
        let g = |k: &str| v[k].as_u64().unwrap_or(0);
        let tiers = |k: &str| {
            v[k].as_array()
                .map(|a| {
                    a.iter()
                        .enumerate()
                        .map(|(t, x)| format!("T{t} {}", x.as_u64().unwrap_or(0)))
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_default()
        };
        let u = |k: &str| v["uses"][k].as_u64().unwrap_or(0);
        let pct = if g("f16_bytes") == 0 {
            String::new()
        } else {
            format!(
                " ({:.1}% of f16)",
                100.0 * g("stored_bytes") as f64 / g("f16_bytes") as f64
            )
        };
        print!(
            "{}",
            kv(&[
                ("model", v["model"].as_str().unwrap_or("").to_owned()),
                (
                    "geometry",
                    format!(
                        "{} layers x {} KV heads x {} dims, {}-token chunks",
                        g("layers"),
                        g("kv_heads"),
                        g("head_dim"),
                        g("chunk_tokens")
                    )
                ),
                (
                    "chunks",
                    format!("{} ({} tokens)", g("chunks"), g("tokens"))
                ),
                ("chunks per tier", tiers("tier_chunks")),
                ("bytes", format!("{}{pct}", g("stored_bytes"))),
                ("bytes per tier", tiers("tier_bytes")),
                ("lookups", u("lookups").to_string()),
                (
                    "hit / miss chunks",
                    format!(
                        "{} / {}{}",
                        u("hit_chunks"),
                        u("miss_chunks"),
                        v["hit_rate"]
                            .as_f64()
                            .map(|r| format!(" ({:.1}% hits)", 100.0 * r))
                            .unwrap_or_default()
                    )
                ),
                (
                    "stored / evicted / damaged",
                    format!(
                        "{} / {} / {}",
                        u("stored_chunks"),
                        u("evicted_chunks"),
                        u("damaged_chunks")
                    )
                ),
            ])
        );
    }
    if out.is_empty() && !a.json {
        println!("no prefix caches under {}", a.root.display());
    }
    Ok(0)
}

fn verify(a: &KvArgs) -> Result<i32, CliError> {
    let mut out = Vec::new();
    let mut bad = 0usize;
    for m in models(&a.root, a.model.as_deref())? {
        let r = open(&a.root, &m, true)?.verify()?;
        bad += r.damaged.len();
        out.push(json!({
            "model": m.model, "chunks": r.chunks, "blocks": r.blocks,
            "damaged": r.damaged.iter().map(|id| format!("{id:032x}")).collect::<Vec<_>>(),
        }));
    }
    if a.json {
        print_json(&json!({ "models": out, "ok": bad == 0 }));
    } else {
        for v in &out {
            let damaged = v["damaged"].as_array().map_or(0, Vec::len);
            println!(
                "{}: {} chunks, {} blocks checked, {}",
                v["model"].as_str().unwrap_or(""),
                v["chunks"],
                v["blocks"],
                if damaged == 0 {
                    "ok".to_owned()
                } else {
                    format!("{damaged} damaged (misses; writers drop them)")
                }
            );
            for id in v["damaged"].as_array().into_iter().flatten() {
                println!("  damaged chunk {}", id.as_str().unwrap_or(""));
            }
        }
    }
    Ok(i32::from(bad > 0))
}

fn evict(a: &EvictArgs) -> Result<i32, CliError> {
    let target = if a.all { 0 } else { a.to_bytes.unwrap_or(0) };
    let mut out = Vec::new();
    for m in models(&a.root, a.model.as_deref())? {
        let c = open(&a.root, &m, false)?;
        let before = c.stats()?;
        let n = c.evict_to_bytes(target)?;
        let after = c.stats()?;
        c.close()?;
        out.push(json!({
            "model": m.model, "evicted_chunks": n,
            "bytes_before": before.stored_bytes, "bytes_after": after.stored_bytes,
            "chunks_after": after.chunks,
        }));
    }
    if a.json {
        print_json(&json!({ "models": out }));
    } else {
        for v in &out {
            println!(
                "{}: evicted {} chunks, {} -> {} bytes ({} chunks left)",
                v["model"].as_str().unwrap_or(""),
                v["evicted_chunks"],
                v["bytes_before"],
                v["bytes_after"],
                v["chunks_after"]
            );
        }
    }
    Ok(0)
}
