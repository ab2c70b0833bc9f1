//! `tensorvault store maintain`: run the store's tiering scheduler on a collection from
//! the command line (one or more steps), optionally with per-tier capacity limits, and
//! print what moved and why.

use std::path::PathBuf;

use clap::Args;
use serde_json::json;
use tensorvault_store::tiering::Reason;
use tensorvault_store::{DirStore, StoreConfig, Tier};

use crate::error::CliError;
use crate::report::Table;

/// Arguments of `store maintain`.
#[derive(Debug, Args)]
pub struct MaintainArgs {
    /// Store root directory.
    pub root: PathBuf,
    /// Tenant name.
    pub tenant: String,
    /// Collection name.
    pub collection: String,
    /// Most block moves per step.
    #[arg(long, default_value_t = 1024)]
    pub budget: usize,
    /// Steps to run (each step re-scores every block).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub steps: u32,
    /// Live blocks allowed per tier for this run, four comma-separated counts (tiers 0-3;
    /// `-` = unlimited), e.g. `--max-blocks 100,-,-,-`: the coldest blocks of a full tier
    /// move down.
    #[arg(long, allow_hyphen_values = true)]
    pub max_blocks: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

fn limits(raw: &str) -> Result<[usize; 4], CliError> {
    let parts: Vec<&str> = raw.split(',').map(str::trim).collect();
    if parts.len() != 4 {
        return Err(CliError::Usage {
            arg: "--max-blocks",
            reason: format!("{raw:?} must be four comma-separated counts (tiers 0-3)"),
        });
    }
    let mut out = [usize::MAX; 4];
    for (o, v) in out.iter_mut().zip(parts) {
        if v != "-" {
            *o = v.parse().map_err(|_| CliError::Usage {
                arg: "--max-blocks",
                reason: format!("{v:?} is not a block count or '-'"),
            })?;
        }
    }
    Ok(out)
}

fn reason_name(r: Reason) -> &'static str {
    match r {
        Reason::Capacity => "capacity",
        Reason::Cold => "cold",
        Reason::Hot => "hot",
    }
}

/// Run `store maintain`; returns the exit code.
///
/// # Errors
/// Any [`CliError`]; the caller prints it on one line and exits with code 2.
pub fn run(a: &MaintainArgs) -> Result<i32, CliError> {
    let mut cfg = StoreConfig::default();
    if let Some(raw) = &a.max_blocks {
        cfg.max_blocks_per_tier = limits(raw)?;
    }
    let s = DirStore::open_path(&a.root, &a.tenant, &a.collection, cfg, false)?;
    let before = s.tier_counts()?;
    // (tier from, tier to, reason) -> blocks
    let mut moved: std::collections::BTreeMap<(u8, u8, &'static str), usize> = Default::default();
    let (mut deferred, mut over, mut scored) = (0, 0, 0);
    for _ in 0..a.steps {
        let r = s.maintain(a.budget)?;
        for m in &r.moves {
            *moved
                .entry((m.from as u8, m.to as u8, reason_name(m.reason)))
                .or_default() += 1;
        }
        (deferred, over, scored) = (r.deferred, r.over_capacity, r.scored);
        if r.moves.is_empty() {
            break;
        }
    }
    let after = s.tier_counts()?;
    s.close()?;
    let total: usize = moved.values().sum();
    if a.json {
        let moves: Vec<_> = moved
            .iter()
            .map(|((f, t, why), n)| json!({"from_tier": f, "to_tier": t, "reason": why, "blocks": n}))
            .collect();
        let v = json!({"tenant": a.tenant, "collection": a.collection, "scored": scored,
                       "moved": total, "moves": moves, "deferred": deferred,
                       "over_capacity": over, "blocks_before": before, "blocks_after": after});
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        return Ok(0);
    }
    println!(
        "{}/{}: {scored} blocks scored, {total} moved, {deferred} deferred, {over} over capacity",
        a.tenant, a.collection
    );
    let mut t = Table::new(&["from", "to", "reason", "blocks"]);
    for ((f, to, why), n) in &moved {
        t.row(vec![
            Tier::ALL[usize::from(*f)].to_string(),
            Tier::ALL[usize::from(*to)].to_string(),
            (*why).to_owned(),
            n.to_string(),
        ]);
    }
    if total > 0 {
        print!("{}", t.render());
    }
    println!(
        "blocks per tier: {} -> {}",
        before.map(|n| n.to_string()).join("/"),
        after.map(|n| n.to_string()).join("/")
    );
    Ok(0)
}
