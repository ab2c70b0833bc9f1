//! Text and JSON output of the store subcommands (store_ops.rs), the same for every
//! backend.

use serde_json::json;
use tensorvault_store::{StoreStats, TensorInfo, Tier, VerifyReport};

use crate::report::{self, Table};
use crate::store_backend::Extra;

fn print_json(v: &serde_json::Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(v).expect("JSON values serialize")
    );
}

/// Blocks per tier as `t0/t1/t2/t3`.
pub fn tier_cells(b: &[u64; 4]) -> String {
    b.iter().map(u64::to_string).collect::<Vec<_>>().join("/")
}

/// A collection's tensors as a table or JSON.
pub fn print_tensors(tensors: &[TensorInfo], json: bool) {
    if json {
        let v: Vec<_> = tensors
            .iter()
            .map(|t| {
                json!({"name": t.name, "tensor_id": format!("{:032x}", t.tensor_id), "dtype": t.dtype.name(),
                    "shape": t.shape, "blocks": t.blocks, "expected_blocks": t.expected_blocks,
                    "tier_blocks": t.tier_blocks, "stored_bytes": t.stored_bytes, "raw_bytes": t.raw_bytes})
            })
            .collect();
        print_json(&json!(v));
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

/// Every collection with its tensor and block counts, as a table or JSON.
pub fn print_collections(rows: &[(String, String, StoreStats)], json: bool) {
    if json {
        let v: Vec<_> = rows
            .iter()
            .map(|(t, c, s)| json!({"tenant": t, "collection": c, "tensors": s.tensors, "blocks": s.blocks}))
            .collect();
        print_json(&json!(v));
        return;
    }
    let mut table = Table::new(&[
        "tenant",
        "collection",
        "tensors",
        "blocks t0/t1/t2/t3",
        "stored",
    ]);
    for (t, c, s) in rows {
        table.row(vec![
            t.clone(),
            c.clone(),
            s.tensors.to_string(),
            tier_cells(&s.blocks),
            report::size(s.payload_bytes.iter().sum()),
        ]);
    }
    print!("{}", table.render());
}

fn stats_json(s: &StoreStats) -> serde_json::Value {
    json!({"tensors": s.tensors, "blocks": s.blocks, "payload_bytes": s.payload_bytes, "raw_bytes": s.raw_bytes,
        "file_bytes": s.usage.map(|u| u.bytes), "allocated_bytes": s.usage.map(|u| u.allocated_bytes),
        "slot_len": s.usage.map(|u| u.slot_len), "alloc_unit": s.usage.map(|u| u.alloc_unit),
        "live_bytes": s.usage.map(|u| u.live_bytes),
        "free_slots": s.usage.map(|u| u.free_slots), "log_records": s.log_records,
        "step_median": s.step_median,
        "replay_ms": s.replay_nanos as f64 / 1e6, "replay_skipped": s.replay_skipped,
        "replay_ignored": s.replay_ignored})
}

/// `store stats`: the total per tier, then one line per collection (text), or every
/// collection's figures and the total (JSON).
pub fn print_stats(per: &[(String, String, StoreStats, Extra)], total: &StoreStats, json: bool) {
    if json {
        let v: Vec<_> = per
            .iter()
            .map(|(t, c, s, extra)| {
                let mut stats = stats_json(s);
                if let Some(m) = stats.as_object_mut() {
                    m.extend(extra.json.clone());
                }
                json!({"tenant": t, "collection": c, "stats": stats})
            })
            .collect();
        print_json(&json!({"collections": v, "total": stats_json(total)}));
        return;
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
        "live",
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
            report::size(total.usage[i].live_bytes),
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
    for (t, c, s, extra) in per {
        println!(
            "{t}/{c}: {} tensors, blocks {}, log {} records, replay {:.2} ms{}{}",
            s.tensors,
            tier_cells(&s.blocks),
            s.log_records,
            s.replay_nanos as f64 / 1e6,
            if s.replay_skipped > 0 {
                format!(", {} corrupt log records skipped", s.replay_skipped)
            } else {
                String::new()
            },
            extra.text
        );
    }
}

/// What `store verify` found in one collection.
#[derive(Debug)]
pub struct Verified {
    /// Tenant.
    pub tenant: String,
    /// Collection.
    pub collection: String,
    /// The blocks' checks.
    pub report: VerifyReport,
    /// Metadata log records skipped on replay (corrupt).
    pub log_skipped: u64,
    /// Bytes at the log's end that are not valid records.
    pub log_tail: u64,
}

impl Verified {
    /// Number of defects: corrupt or lost blocks, valid log records replay could not use,
    /// skipped log and names records, an invalid log tail.
    #[must_use]
    pub fn defects(&self) -> usize {
        self.report.defects() as usize
            + self.log_skipped as usize
            + usize::from(self.log_tail > 0)
            + self.report.catalog_skipped as usize
    }
}

/// `store verify`'s findings, one block of lines per collection (text) or a JSON array.
pub fn print_verify(results: &[Verified], log_name: &str, json: bool) {
    if json {
        let v: Vec<_> = results
            .iter()
            .map(|v| {
                let r = &v.report;
                json!({"tenant": v.tenant, "collection": v.collection, "blocks": r.checked, "bytes": r.bytes,
                    "log_records_skipped": v.log_skipped, "log_tail_bytes_invalid": v.log_tail,
                    "names_records_skipped": r.catalog_skipped,
                    "replay_defects_total": r.replay_defects_total,
                    "replay_defects": r.replay_defects.iter().map(|d| json!({"log_offset": d.log_offset,
                        "record": d.record, "block": d.key.to_string(), "reason": d.reason})).collect::<Vec<_>>(),
                    "problems": r.problems.iter().map(|p| json!({"block": p.key.to_string(), "tensor": p.tensor,
                        "tier": p.tier as u8, "offset": p.offset, "error": p.error})).collect::<Vec<_>>()})
            })
            .collect();
        print_json(&json!(v));
        return;
    }
    for v in results {
        let r = &v.report;
        let status = if v.defects() == 0 { "ok" } else { "CORRUPT" };
        println!(
            "{}/{}: {} blocks, {} checked: {status}",
            v.tenant,
            v.collection,
            r.checked,
            report::size(r.bytes)
        );
        if v.log_skipped > 0 {
            println!(
                "  {log_name}: {} corrupt records skipped on replay",
                v.log_skipped
            );
        }
        if r.catalog_skipped > 0 {
            println!(
                "  names.log: {} corrupt records skipped (those tensors are listed without a name)",
                r.catalog_skipped
            );
        }
        if v.log_tail > 0 {
            println!(
                "  {log_name}: the last {} bytes are not valid records (a torn write or a \
                 corrupt last record); left in place, cut by the next write",
                v.log_tail
            );
        }
        if r.replay_defects_total > 0 {
            println!(
                "  {log_name}: {} valid records replay could not use",
                r.replay_defects_total
            );
        }
        for d in &r.replay_defects {
            let at = d
                .log_offset
                .map_or_else(|| "?".to_owned(), |o| o.to_string());
            println!(
                "  {log_name} record at offset {at} ({} of block {}): {}",
                d.record, d.key, d.reason
            );
        }
        if r.replay_defects_total > r.replay_defects.len() as u64 {
            println!(
                "  ... {} more",
                r.replay_defects_total - r.replay_defects.len() as u64
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
