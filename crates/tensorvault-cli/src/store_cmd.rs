//! `tensorvault store`: the temporal tensor store (ADR-018) on a local directory
//! `ROOT/<tenant>/<collection>/`, or (feature `s3`) on an object store when ROOT is an
//! `s3://bucket/prefix` URL (src/store_s3_cmd.rs).
//!
//! Exit codes: 0 success; 1 `verify` found corruption; 2 any error (one line on stderr).

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand, ValueEnum};
use serde_json::json;
use tensorvault_store::fs::list_collections;
use tensorvault_store::{
    BlockInfo, CollectionConfig, DirStore, Durability, StoreConfig, StoreStats, TensorInfo,
    TensorKind, Tier,
};

use crate::error::CliError;
use crate::npy;
use crate::report::{self, Table};

/// Temporal tensor store commands.
#[derive(Debug, Subcommand)]
pub enum StoreCmd {
    /// Store a .npy array (float32, float16, float64 -> float32, int8, uint8; any shape up
    /// to 8 dimensions) as a tensor, split into blocks in one tier. Creates the
    /// collection if needed.
    Put(PutArgs),
    /// Read a tensor back into a .npy file (its stored dtype; dequantized if its blocks
    /// are in a quantized tier).
    Get {
        /// Store root directory, or s3://bucket/prefix (feature s3).
        root: PathBuf,
        /// Tenant name.
        tenant: String,
        /// Collection name.
        collection: String,
        /// Tensor name.
        name: String,
        /// Output .npy file (written atomically).
        out: PathBuf,
    },
    /// List the collections under ROOT, or the tensors of one collection.
    Ls {
        /// Store root directory, or s3://bucket/prefix (feature s3).
        root: PathBuf,
        /// Tenant (with COLLECTION: list that collection's tensors).
        tenant: Option<String>,
        /// Collection.
        collection: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Blocks and bytes per tier, compression, log size and replay time, per collection
    /// and in total.
    Stats {
        /// Store root directory, or s3://bucket/prefix (feature s3).
        root: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Print the Prometheus text exposition of every collection instead.
        #[arg(long, conflicts_with = "json")]
        prometheus: bool,
    },
    /// Serve `GET /metrics` (Prometheus text format) for every collection under ROOT,
    /// refreshed on each scrape, until killed.
    ServeMetrics(crate::store_metrics_cmd::ServeMetricsArgs),
    /// Write a self-contained HTML report with SVG charts: blocks and bytes per tier, the
    /// migration score distribution and, with --history, a KV-cache simulation over time.
    Report(crate::store_report_cmd::ReportArgs),
    /// Read and checksum every block (of every collection under ROOT when none is named).
    /// Exit code 1 if anything is corrupt.
    Verify {
        /// Store root directory, or s3://bucket/prefix (feature s3).
        root: PathBuf,
        /// Tenant.
        tenant: Option<String>,
        /// Collection.
        collection: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Move a tensor's blocks to another tier (re-quantizing them).
    Migrate {
        /// Store root directory, or s3://bucket/prefix (feature s3).
        root: PathBuf,
        /// Tenant name.
        tenant: String,
        /// Collection name.
        collection: String,
        /// Tensor name.
        name: String,
        /// Target tier: 0 raw, 1 8-bit, 2 5-bit, 3 3-bit.
        #[arg(long, value_parser = clap::value_parser!(u8).range(0..=3))]
        tier: u8,
    },
    /// Run the tiering scheduler: demote cold blocks, promote hot ones, and with
    /// --max-blocks evict the coldest blocks of full tiers; prints what moved and why.
    Maintain(crate::store_maintain_cmd::MaintainArgs),
    /// Rewrite the metadata log as a snapshot of the live index (of every collection
    /// under ROOT when none is named).
    Compact {
        /// Store root directory, or s3://bucket/prefix (feature s3).
        root: PathBuf,
        /// Tenant.
        tenant: Option<String>,
        /// Collection.
        collection: Option<String>,
    },
    /// Delete a tensor.
    Rm {
        /// Store root directory, or s3://bucket/prefix (feature s3).
        root: PathBuf,
        /// Tenant name.
        tenant: String,
        /// Collection name.
        collection: String,
        /// Tensor name.
        name: String,
    },
}

/// Durability on the command line.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum DurabilityArg {
    /// fsync data and log before each write returns (survives power loss).
    EveryWrite,
    /// Let the OS write back (survives kill -9, not power loss).
    Os,
}

/// What a tensor holds, on the command line (picks the quantized tiers' codec layout).
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum KindArg {
    /// Anything else: groups along the values, min/max ranges (the fastest encode).
    Generic,
    /// Attention keys [tokens, head_dim]: groups per channel over tokens, first token f16.
    #[value(name = "kv_key")]
    KvKey,
    /// Attention values [tokens, head_dim]: groups along each token, first token f16.
    #[value(name = "kv_value")]
    KvValue,
    /// Weight matrices: groups along rows, clip search.
    Weight,
    /// Embedding vectors [n, dim]: groups along each vector, clip search.
    Embedding,
}

impl KindArg {
    /// The store's kind.
    #[must_use]
    pub fn kind(self) -> TensorKind {
        match self {
            KindArg::Generic => TensorKind::Generic,
            KindArg::KvKey => TensorKind::KvKey,
            KindArg::KvValue => TensorKind::KvValue,
            KindArg::Weight => TensorKind::Weight,
            KindArg::Embedding => TensorKind::Embedding,
        }
    }
}

/// Arguments of `store put`.
#[derive(Debug, Args)]
pub struct PutArgs {
    /// Store root directory (created if missing), or s3://bucket/prefix (feature s3).
    pub root: PathBuf,
    /// Tenant name: ASCII letters, digits, '.', '_', '-'.
    pub tenant: String,
    /// Collection name: ASCII letters, digits, '.', '_', '-'.
    pub collection: String,
    /// Tensor name (1-100 bytes).
    pub name: String,
    /// Input .npy file.
    pub input: PathBuf,
    /// Tier: 0 raw (bit-exact), 1 8-bit, 2 5-bit, 3 3-bit.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(0..=3))]
    pub tier: u8,
    /// What the tensor holds: quantized tiers lay their groups out by it (KV keys per
    /// channel, values and embeddings per vector, weights per row).
    #[arg(long, value_enum, default_value_t = KindArg::Generic)]
    pub kind: KindArg,
    /// Elements per block for a NEW collection (default 4096 = 16 KiB of f32).
    #[arg(long)]
    pub block_elems: Option<u32>,
    /// Create a NEW collection with the KV-cache layout: 32 KiB f16 blocks aligned to
    /// this head dimension.
    #[arg(long, conflicts_with = "block_elems")]
    pub kv_head_dim: Option<u32>,
    /// Write durability.
    #[arg(long, value_enum, default_value_t = DurabilityArg::EveryWrite)]
    pub durability: DurabilityArg,
}

/// `tensorvault store`: a subcommand, plus the object-store options (feature `s3`).
#[derive(Debug, Args)]
pub struct StoreArgs {
    #[command(subcommand)]
    cmd: StoreCmd,
    #[cfg(feature = "s3")]
    #[command(flatten)]
    s3: crate::store_s3_cmd::S3Args,
}

/// Run `tensorvault store ...`: on the object store when ROOT is an `s3://` URL
/// (feature `s3`), else on the local directory ROOT.
///
/// # Errors
/// Any [`CliError`]; the caller prints it on one line and exits with code 2.
pub fn run_args(a: StoreArgs, quiet: bool) -> Result<i32, CliError> {
    let url = root_of(&a.cmd).is_some_and(|r| r.to_str().is_some_and(|s| s.starts_with("s3://")));
    #[cfg(feature = "s3")]
    if url {
        return crate::store_s3_cmd::run(a.cmd, &a.s3);
    }
    if url {
        return Err(CliError::Usage {
            arg: "ROOT",
            reason: "s3:// stores need a tensorvault built with `--features s3`".into(),
        });
    }
    run(a.cmd, quiet)
}

fn root_of(cmd: &StoreCmd) -> Option<&Path> {
    match cmd {
        StoreCmd::Put(p) => Some(&p.root),
        StoreCmd::Get { root, .. }
        | StoreCmd::Ls { root, .. }
        | StoreCmd::Stats { root, .. }
        | StoreCmd::Verify { root, .. }
        | StoreCmd::Migrate { root, .. }
        | StoreCmd::Compact { root, .. }
        | StoreCmd::Rm { root, .. } => Some(root),
        StoreCmd::ServeMetrics(_) => None,
        StoreCmd::Report(a) => Some(&a.root),
        StoreCmd::Maintain(a) => Some(&a.root),
    }
}

/// Run a store subcommand on a local directory store; returns the exit code.
///
/// # Errors
/// Any [`CliError`]; the caller prints it on one line and exits with code 2.
pub fn run(cmd: StoreCmd, quiet: bool) -> Result<i32, CliError> {
    match cmd {
        StoreCmd::Put(a) => put(&a),
        StoreCmd::Get {
            root,
            tenant,
            collection,
            name,
            out,
        } => get(&root, &tenant, &collection, &name, &out),
        StoreCmd::Ls {
            root,
            tenant,
            collection,
            json,
        } => ls(&root, pair(tenant, collection)?, json),
        StoreCmd::Stats {
            root,
            prometheus: true,
            ..
        } => crate::store_metrics_cmd::stats_prometheus(&root),
        StoreCmd::Stats { root, json, .. } => stats(&root, json),
        StoreCmd::ServeMetrics(a) => crate::store_metrics_cmd::serve(&a),
        StoreCmd::Report(a) => crate::store_report_cmd::run(&a),
        StoreCmd::Maintain(a) => crate::store_maintain_cmd::run(&a),
        StoreCmd::Verify {
            root,
            tenant,
            collection,
            json,
        } => verify(&root, pair(tenant, collection)?, json, quiet),
        StoreCmd::Migrate {
            root,
            tenant,
            collection,
            name,
            tier,
        } => {
            let s = open(&root, &tenant, &collection)?;
            let moved = s.migrate_tensor(&name, tier_of(tier))?;
            s.close()?;
            println!("{name}: {moved} blocks moved to tier {tier}");
            Ok(0)
        }
        StoreCmd::Compact {
            root,
            tenant,
            collection,
        } => compact(&root, pair(tenant, collection)?),
        StoreCmd::Rm {
            root,
            tenant,
            collection,
            name,
        } => {
            let s = open(&root, &tenant, &collection)?;
            let n = s.delete_tensor(&name)?;
            s.close()?;
            if n == 0 {
                return Err(tensorvault_store::StoreErr::TensorNotFound { name }.into());
            }
            println!("{name}: {n} blocks deleted");
            Ok(0)
        }
    }
}

fn pair(
    tenant: Option<String>,
    collection: Option<String>,
) -> Result<Option<(String, String)>, CliError> {
    match (tenant, collection) {
        (Some(t), Some(c)) => Ok(Some((t, c))),
        (None, None) => Ok(None),
        _ => Err(CliError::Usage {
            arg: "TENANT COLLECTION",
            reason: "give both or neither".into(),
        }),
    }
}

fn tier_of(t: u8) -> Tier {
    Tier::from_u8(t).unwrap_or(Tier::Tier1)
}

fn open(root: &Path, tenant: &str, collection: &str) -> Result<DirStore, CliError> {
    Ok(DirStore::open_path(
        root,
        tenant,
        collection,
        StoreConfig::default(),
        false,
    )?)
}

/// Open a collection for reading while other readers may hold it too (ls, stats, verify):
/// waits for a writer in another process to finish, never writes.
fn open_shared(root: &Path, tenant: &str, collection: &str) -> Result<DirStore, CliError> {
    Ok(DirStore::open_path_shared(
        root,
        tenant,
        collection,
        StoreConfig::default(),
    )?)
}

fn collections(
    root: &Path,
    one: Option<(String, String)>,
) -> Result<Vec<(String, String)>, CliError> {
    Ok(match one {
        Some(p) => vec![p],
        None => list_collections(root)?,
    })
}

fn put(a: &PutArgs) -> Result<i32, CliError> {
    let (dtype, shape, data) = npy::read_tensor(&a.input)?;
    let shape32: Vec<u32> = shape
        .iter()
        .map(|&d| {
            u32::try_from(d).map_err(|_| CliError::Npy {
                path: a.input.display().to_string(),
                reason: format!("dimension {d} exceeds 2^32-1"),
            })
        })
        .collect::<Result<_, _>>()?;
    let geometry = match (a.kv_head_dim, a.block_elems) {
        (Some(h), _) => CollectionConfig::kv_cache(h)?,
        (None, Some(n)) => CollectionConfig::with_block_elems(n),
        (None, None) => CollectionConfig::default(),
    };
    let cfg = StoreConfig {
        collection: geometry,
        durability: match a.durability {
            DurabilityArg::EveryWrite => Durability::EveryWrite,
            DurabilityArg::Os => Durability::Os,
        },
        ..StoreConfig::default()
    };
    std::fs::create_dir_all(&a.root).map_err(CliError::io("create directory", a.root.display()))?;
    let s = DirStore::open_path(&a.root, &a.tenant, &a.collection, cfg, true)?;
    let t = std::time::Instant::now();
    let block = BlockInfo::new(dtype, &shape32).with_kind(a.kind.kind());
    let info = s.put_tensor_with(&a.name, &block, &data, tier_of(a.tier))?;
    s.close()?;
    let secs = t.elapsed().as_secs_f64();
    println!(
        "{}: {} {:?} -> {} blocks in tier {}, {} stored ({:.2}x smaller than {}), {:.0} MB/s",
        a.name,
        dtype,
        shape,
        info.blocks,
        a.tier,
        report::size(info.stored_bytes),
        info.raw_bytes as f64 / info.stored_bytes.max(1) as f64,
        report::size(info.raw_bytes),
        info.raw_bytes as f64 / secs / 1e6
    );
    Ok(0)
}

fn get(
    root: &Path,
    tenant: &str,
    collection: &str,
    name: &str,
    out: &Path,
) -> Result<i32, CliError> {
    let s = open(root, tenant, collection)?;
    let t = s.get_tensor(name)?;
    s.close()?;
    let shape: Vec<u64> = t.info.shape.iter().map(|&d| u64::from(d)).collect();
    npy::write_tensor(out, t.info.dtype, &shape, &t.data)?;
    println!(
        "{name}: {} {:?} ({}) -> {}",
        t.info.dtype,
        t.info.shape,
        report::size(t.data.len() as u64),
        out.display()
    );
    Ok(0)
}

pub(crate) fn tier_cells(b: &[u64; 4]) -> String {
    b.iter().map(u64::to_string).collect::<Vec<_>>().join("/")
}

/// Print a collection's tensors as a table or JSON (shared by local and S3 roots).
pub(crate) fn print_tensors(tensors: &[TensorInfo], json: bool) {
    if json {
        let v: Vec<_> = tensors
            .iter()
            .map(|t| {
                json!({"name": t.name, "tensor_id": format!("{:032x}", t.tensor_id), "dtype": t.dtype.name(),
                    "shape": t.shape, "blocks": t.blocks, "expected_blocks": t.expected_blocks,
                    "tier_blocks": t.tier_blocks, "stored_bytes": t.stored_bytes, "raw_bytes": t.raw_bytes})
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&v).expect("JSON values serialize")
        );
        return;
    }
    let mut table = Table::new(&[
        "tensor",
        "dtype",
        "shape",
        "blocks",
        "t0/t1/t2/t3",
        "stored",
        "ratio",
    ]);
    for t in tensors {
        table.row(vec![
            t.name
                .clone()
                .unwrap_or_else(|| format!("{:032x}", t.tensor_id)),
            t.dtype.to_string(),
            format!("{:?}", t.shape),
            if t.blocks == t.expected_blocks {
                t.blocks.to_string()
            } else {
                format!("{}/{} INCOMPLETE", t.blocks, t.expected_blocks)
            },
            tier_cells(&t.tier_blocks),
            report::size(t.stored_bytes),
            format!("{:.2}x", t.raw_bytes as f64 / t.stored_bytes.max(1) as f64),
        ]);
    }
    print!("{}", table.render());
}

fn ls(root: &Path, one: Option<(String, String)>, json: bool) -> Result<i32, CliError> {
    if let Some((tenant, collection)) = one {
        let s = open_shared(root, &tenant, &collection)?;
        print_tensors(&s.tensors()?, json);
        return Ok(0);
    }
    let mut rows = Vec::new();
    for (tenant, collection) in list_collections(root)? {
        let s = open_shared(root, &tenant, &collection)?;
        let st = s.stats()?;
        rows.push((tenant, collection, st));
    }
    if json {
        let v: Vec<_> = rows
            .iter()
            .map(|(t, c, s)| json!({"tenant": t, "collection": c, "tensors": s.tensors, "blocks": s.blocks}))
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&v).expect("JSON values serialize")
        );
        return Ok(0);
    }
    let mut table = Table::new(&[
        "tenant",
        "collection",
        "tensors",
        "blocks t0/t1/t2/t3",
        "stored",
    ]);
    for (t, c, s) in &rows {
        table.row(vec![
            t.clone(),
            c.clone(),
            s.tensors.to_string(),
            tier_cells(&s.blocks),
            report::size(s.payload_bytes.iter().sum()),
        ]);
    }
    print!("{}", table.render());
    Ok(0)
}

fn stats_json(s: &StoreStats) -> serde_json::Value {
    json!({"tensors": s.tensors, "blocks": s.blocks, "payload_bytes": s.payload_bytes, "raw_bytes": s.raw_bytes,
        "file_bytes": s.usage.map(|u| u.bytes), "allocated_bytes": s.usage.map(|u| u.allocated_bytes),
        "slot_len": s.usage.map(|u| u.slot_len),
        "free_slots": s.usage.map(|u| u.free_slots), "log_records": s.log_records,
        "step_median": s.step_median,
        "replay_ms": s.replay_nanos as f64 / 1e6, "replay_skipped": s.replay_skipped,
        "replay_ignored": s.replay_ignored})
}

fn stats(root: &Path, json: bool) -> Result<i32, CliError> {
    let mut per = Vec::new();
    let mut total = StoreStats::default();
    for (tenant, collection) in list_collections(root)? {
        let s = open_shared(root, &tenant, &collection)?;
        let st = s.stats()?;
        total.tensors += st.tensors;
        total.log_records += st.log_records;
        for i in 0..4 {
            total.blocks[i] += st.blocks[i];
            total.payload_bytes[i] += st.payload_bytes[i];
            total.raw_bytes[i] += st.raw_bytes[i];
            total.usage[i].bytes += st.usage[i].bytes;
            total.usage[i].allocated_bytes += st.usage[i].allocated_bytes;
            total.usage[i].slots += st.usage[i].slots;
            total.usage[i].free_slots += st.usage[i].free_slots;
            // Across collections: the largest of their medians.
            total.step_median[i] = total.step_median[i].max(st.step_median[i]);
        }
        per.push((tenant, collection, st));
    }
    if json {
        let v: Vec<_> = per
            .iter()
            .map(|(t, c, s)| json!({"tenant": t, "collection": c, "stats": stats_json(s)}))
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({"collections": v, "total": stats_json(&total)}))
                .expect("JSON values serialize")
        );
        return Ok(0);
    }
    println!(
        "{} collections, {} tensors, {} log records\n",
        per.len(),
        total.tensors,
        total.log_records
    );
    let mut table = Table::new(&[
        "tier",
        "bits",
        "blocks",
        "raw",
        "stored",
        "ratio",
        "file",
        "on disk",
        "free slots",
        "step (median)",
    ]);
    for (i, tier) in Tier::ALL.iter().enumerate() {
        table.row(vec![
            tier.to_string(),
            ["raw", "8", "5", "3"][i].to_owned(),
            total.blocks[i].to_string(),
            report::size(total.raw_bytes[i]),
            report::size(total.payload_bytes[i]),
            format!(
                "{:.2}x",
                total.raw_bytes[i] as f64 / total.payload_bytes[i].max(1) as f64
            ),
            report::size(total.usage[i].bytes),
            report::size(total.usage[i].allocated_bytes),
            total.usage[i].free_slots.to_string(),
            match (i, total.blocks[i]) {
                (0, _) => "exact".to_owned(),
                (_, 0) => "-".to_owned(),
                _ => format!("{:.3e}", total.step_median[i]),
            },
        ]);
    }
    print!("{}", table.render());
    for (t, c, s) in &per {
        println!(
            "{t}/{c}: {} tensors, blocks {}, log {} records, replay {:.2} ms{}",
            s.tensors,
            tier_cells(&s.blocks),
            s.log_records,
            s.replay_nanos as f64 / 1e6,
            if s.replay_skipped > 0 {
                format!(", {} corrupt log records skipped", s.replay_skipped)
            } else {
                String::new()
            }
        );
    }
    Ok(0)
}

fn verify(
    root: &Path,
    one: Option<(String, String)>,
    json: bool,
    quiet: bool,
) -> Result<i32, CliError> {
    let cols = collections(root, one)?;
    let bar = report::bar(cols.len() as u64, "verify", quiet || json);
    let mut results = Vec::new();
    let mut corrupt = 0usize;
    for (tenant, collection) in cols {
        let s = open_shared(root, &tenant, &collection)?;
        let r = s.verify()?;
        let (skipped, tail) = {
            let st = s.replay_stats().0;
            (st.skipped_total, st.truncated_bytes)
        };
        corrupt += r.problems.len()
            + skipped as usize
            + usize::from(tail > 0)
            + r.catalog_skipped as usize;
        results.push((tenant, collection, r, skipped, tail));
        bar.inc(1);
    }
    bar.finish_and_clear();
    if json {
        let v: Vec<_> = results
            .iter()
            .map(|(t, c, r, skipped, tail)| {
                json!({"tenant": t, "collection": c, "blocks": r.checked, "bytes": r.bytes,
                    "log_records_skipped": skipped, "log_tail_bytes_invalid": tail,
                    "names_records_skipped": r.catalog_skipped,
                    "problems": r.problems.iter().map(|p| json!({"block": p.key.to_string(), "tensor": p.tensor,
                        "tier": p.tier as u8, "offset": p.offset, "error": p.error})).collect::<Vec<_>>()})
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&v).expect("JSON values serialize")
        );
    } else {
        for (t, c, r, skipped, tail) in &results {
            let status =
                if r.problems.is_empty() && *skipped == 0 && *tail == 0 && r.catalog_skipped == 0 {
                    "ok"
                } else {
                    "CORRUPT"
                };
            println!(
                "{t}/{c}: {} blocks, {} checked: {status}",
                r.checked,
                report::size(r.bytes)
            );
            if *skipped > 0 {
                println!("  meta.log: {skipped} corrupt records skipped on replay");
            }
            if r.catalog_skipped > 0 {
                println!(
                    "  names.log: {} corrupt records skipped (those tensors are listed without a name)",
                    r.catalog_skipped
                );
            }
            if *tail > 0 {
                println!(
                    "  meta.log: the last {tail} bytes are not valid records (a torn write or a \
                     corrupt last record); left in place, cut by the next write"
                );
            }
            for p in &r.problems {
                println!(
                    "  block {} ({}) in {} at offset {}: {}",
                    p.key,
                    p.tensor.as_deref().unwrap_or("?"),
                    p.tier,
                    p.offset,
                    p.error
                );
            }
        }
    }
    Ok(i32::from(corrupt > 0))
}

fn compact(root: &Path, one: Option<(String, String)>) -> Result<i32, CliError> {
    for (tenant, collection) in collections(root, one)? {
        let s = open(root, &tenant, &collection)?;
        let before = s.log_records()?;
        s.compact()?;
        let after = s.log_records()?;
        s.close()?;
        println!("{tenant}/{collection}: meta.log {before} -> {after} records");
    }
    Ok(0)
}
