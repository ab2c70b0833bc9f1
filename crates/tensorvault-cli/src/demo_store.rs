//! The demo's store step (issue 5): the first embedding rows as a tensor in each tier of
//! the temporal tensor store, then a demotion, a reopen (log replay) and a full verify.

use std::path::Path;
use std::time::Instant;

use serde_json::json;
use tensorvault_store::{DType, DirStore, StoreConfig, Tier};

use crate::demo_common::{error_stats, step};
use crate::error::CliError;
use crate::report::{self, Table};

/// Rows stored per tier by the demo (bounded so the step stays a few seconds).
const STORE_ROWS: usize = 20_000;

fn f32_le(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn from_le(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Put the first rows of `data` into `dir/store` once per tier, read them back, demote
/// the 8-bit copy to 3 bits, reopen and verify.
///
/// # Errors
/// Store and I/O errors.
pub fn store_step(
    dir: &Path,
    data: &[f32],
    dim: usize,
    quiet: bool,
) -> Result<serde_json::Value, CliError> {
    let root = dir.join("store");
    if root.exists() {
        std::fs::remove_dir_all(&root).map_err(CliError::io("remove", root.display()))?;
    }
    let rows = (data.len() / dim).min(STORE_ROWS);
    let vals = &data[..rows * dim];
    let bytes = f32_le(vals);
    let shape = [rows as u32, dim as u32];
    let raw = bytes.len() as u64;
    let mut tiers = Vec::new();
    let s = DirStore::open_path(&root, "demo", "embeddings", StoreConfig::default(), true)?;
    for tier in Tier::ALL {
        let name = format!("emb.{tier}");
        step(quiet, &format!("store: put {rows} x {dim} in {tier} ..."));
        let t = Instant::now();
        let info = s.put_tensor(&name, DType::F32, &shape, &bytes, tier)?;
        let put_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let back = s.get_tensor(&name)?;
        let get_s = t.elapsed().as_secs_f64();
        let err = error_stats(vals, &from_le(&back.data), dim);
        tiers.push(json!({"tier": tier as u8, "tensor": name, "blocks": info.blocks,
            "stored_bytes": info.stored_bytes, "ratio_vs_f32": raw as f64 / info.stored_bytes as f64,
            "put_mb_per_s": raw as f64 / put_s / 1e6, "get_mb_per_s": raw as f64 / get_s / 1e6,
            "max_abs_error": err.max_abs, "rmse": err.rmse, "mean_cosine": err.mean_cos}));
    }
    step(quiet, "store: demote the 8-bit copy to 3 bits ...");
    let t = Instant::now();
    let moved = s.migrate_tensor("emb.tier1", Tier::Tier3)?;
    let migrate_us = t.elapsed().as_secs_f64() * 1e6 / moved.max(1) as f64;
    let after = s.stats()?;
    let files: Vec<u64> = after.usage.iter().map(|u| u.bytes).collect();
    // Space follows live data: the emptied tier-1 file is truncated, freed slots inside a
    // file are punched out.
    let space: Vec<serde_json::Value> = Tier::ALL
        .iter()
        .map(|t| {
            let i = t.index();
            json!({"tier": i, "blocks": after.blocks[i], "live_bytes": after.payload_bytes[i],
                "file_bytes": after.usage[i].bytes, "allocated_bytes": after.usage[i].allocated_bytes})
        })
        .collect();
    s.close()?;
    step(
        quiet,
        "store: reopen (replay the metadata log) and verify every block ...",
    );
    let t = Instant::now();
    let s = DirStore::open_path(&root, "demo", "embeddings", StoreConfig::default(), false)?;
    let open_ms = t.elapsed().as_secs_f64() * 1e3;
    let stats = s.stats()?;
    let t = Instant::now();
    let report = s.verify()?;
    let verify_ms = t.elapsed().as_secs_f64() * 1e3;
    Ok(
        json!({"root": root.display().to_string(), "rows": rows, "dimension": dim, "raw_bytes": raw,
        "tiers": tiers, "migrated_blocks": moved, "migrate_us_per_block": migrate_us,
        "tier_file_bytes": files, "space_after_demotion": space, "log_records": stats.log_records, "reopen_ms": open_ms,
        "replay_ms": stats.replay_nanos as f64 / 1e6, "blocks": stats.blocks,
        "verified_blocks": report.checked, "corrupt_blocks": report.problems.len(), "verify_ms": verify_ms}),
    )
}

/// Print the store step's table.
pub fn print_store(r: &serde_json::Value) {
    println!(
        "\nStore: {} x {} f32 ({}) per tier in {}, blocks of 4096 values",
        r["rows"],
        r["dimension"],
        report::size(r["raw_bytes"].as_u64().unwrap_or_default()),
        r["root"].as_str().unwrap_or_default()
    );
    let mut table = Table::new(&[
        "tier",
        "bits",
        "blocks",
        "stored",
        "ratio",
        "put MB/s",
        "get MB/s",
        "max |err|",
        "RMSE",
        "mean cos",
    ]);
    for t in r["tiers"].as_array().into_iter().flatten() {
        let f = |k: &str| t[k].as_f64().unwrap_or_default();
        let tier = t["tier"].as_u64().unwrap_or_default() as usize;
        table.row(vec![
            format!("tier{tier}"),
            ["f32", "8", "5", "3"]
                .get(tier)
                .copied()
                .unwrap_or("?")
                .to_owned(),
            t["blocks"].to_string(),
            report::size(t["stored_bytes"].as_u64().unwrap_or_default()),
            format!("{:.2}x", f("ratio_vs_f32")),
            format!("{:.0}", f("put_mb_per_s")),
            format!("{:.0}", f("get_mb_per_s")),
            format!("{:.2e}", f("max_abs_error")),
            format!("{:.2e}", f("rmse")),
            format!("{:.6}", f("mean_cosine")),
        ]);
    }
    print!("{}", table.render());
    let f = |k: &str| r[k].as_f64().unwrap_or_default();
    println!(
        "Store: demoted {} blocks tier1 -> tier3 at {:.1} us/block; reopen {:.1} ms (replay of {} log records {:.1} ms); \
         verify {} blocks {:.0} ms: {}",
        r["migrated_blocks"],
        f("migrate_us_per_block"),
        f("reopen_ms"),
        r["log_records"],
        f("replay_ms"),
        r["verified_blocks"],
        f("verify_ms"),
        if r["corrupt_blocks"].as_u64() == Some(0) { "ok" } else { "CORRUPT" }
    );
    let space: Vec<String> = r["space_after_demotion"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            let b = |k: &str| report::size(t[k].as_u64().unwrap_or_default());
            format!(
                "tier{} {} live / {} file / {} on disk",
                t["tier"],
                b("live_bytes"),
                b("file_bytes"),
                b("allocated_bytes")
            )
        })
        .collect();
    println!("Space after the demotion: {}", space.join("; "));
    println!("(put includes fsync of data and log per 512-block batch; get = read + CRC32C + dequantize)");
}
