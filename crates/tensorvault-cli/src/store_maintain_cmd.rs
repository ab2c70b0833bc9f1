//! `tensorvault store maintain`: run the store's tiering scheduler from the command line
//! on one collection or every collection under ROOT (one or more steps), optionally with
//! per-tier capacity limits, and print what moved and why. `--watch SECONDS` repeats it
//! until SIGINT or SIGTERM, closing each collection after its step, so a cron job or a
//! sidecar keeps a store tiered without embedding the library. A block whose values a
//! colder tier cannot encode (NaN, infinity) stays where it is and is listed as held
//! (`tensorvault_store::finite`); the other blocks move as usual.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use serde_json::json;
use tensorvault_store::tiering::Reason;
use tensorvault_store::{BlockKey, HeldBlock, StoreConfig, Tier};

use crate::error::CliError;
use crate::report::Table;
use crate::signals;
use crate::store_args::pair;
use crate::store_backend::{Backend, Mode, Store};

/// Arguments of `store maintain`.
#[derive(Debug, Args)]
pub struct MaintainArgs {
    /// Store root directory, or s3://bucket/prefix (feature s3).
    pub root: PathBuf,
    /// Tenant name (with COLLECTION; without both, every collection under ROOT).
    pub tenant: Option<String>,
    /// Collection name.
    pub collection: Option<String>,
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
    /// Repeat every SECONDS until SIGINT or SIGTERM (then exit 0), printing each round's
    /// moves (with --json one object per collection and round, one per line). Errors of
    /// the first round stop the command; later ones are printed and retried next round.
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
    pub watch: Option<u64>,
    /// Let cold Tier0 blocks (put as exact) be re-quantized to 8 bits. Without it Tier0
    /// data stays exact unless --max-blocks limits Tier0.
    #[arg(long)]
    pub demote_tier0: bool,
    /// Print the moves one step would make, and move nothing (opens read-only; with
    /// --steps, still one step: planning alone changes nothing); planned moves are read
    /// and encoded to list the blocks that would be held (NaN, infinity).
    #[arg(long, conflicts_with = "watch")]
    pub dry_run: bool,
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

/// What the steps of one run did to one collection.
struct Run {
    tenant: String,
    collection: String,
    /// (tier from, tier to, reason) -> blocks.
    moved: BTreeMap<(u8, u8, &'static str), usize>,
    scored: usize,
    deferred: usize,
    over: usize,
    before: [usize; 4],
    after: [usize; 4],
    /// Planned moves of a dry run (block keys as "tensor_id/block", from, to, reason).
    planned: Option<Vec<(String, u8, u8, &'static str)>>,
    /// Blocks left in their tier because a colder tier cannot encode their values.
    held: Vec<Held>,
}

/// A block `maintain` held in its tier (`tensorvault_store::finite`).
struct Held {
    tensor: Option<String>,
    key: BlockKey,
    tier: Tier,
    target: Tier,
    non_finite: u64,
    reason: String,
}

impl Held {
    fn json(&self) -> serde_json::Value {
        json!({"tensor": self.tensor, "tensor_id": format!("{:032x}", self.key.tensor_id),
               "block": self.key.block_index, "tier": self.tier.index(),
               "target_tier": self.target.index(), "non_finite": self.non_finite,
               "reason": self.reason})
    }
}

impl Run {
    fn total(&self) -> usize {
        self.moved.values().sum()
    }

    fn json(&self) -> serde_json::Value {
        let moves: Vec<_> = self
            .moved
            .iter()
            .map(|((f, t, why), n)| json!({"from_tier": f, "to_tier": t, "reason": why, "blocks": n}))
            .collect();
        let mut v = json!({"tenant": self.tenant, "collection": self.collection,
               "scored": self.scored, "moved": self.total(), "moves": moves,
               "deferred": self.deferred, "over_capacity": self.over,
               "blocks_before": self.before, "blocks_after": self.after,
               "held": self.held.iter().map(Held::json).collect::<Vec<_>>()});
        if let Some(planned) = &self.planned {
            v["dry_run"] = json!(true);
            v["moved"] = json!(0);
            v["planned"] = planned
                .iter()
                .map(|(k, f, t, why)| json!({"block": k, "from_tier": f, "to_tier": t, "reason": why}))
                .collect();
        }
        v
    }

    /// The blocks held in their tier (or, in a dry run, that would be), as a table.
    fn print_held(&self) {
        if self.held.is_empty() {
            return;
        }
        println!(
            "{} blocks {} in their tier (values a colder tier cannot encode):",
            self.held.len(),
            if self.planned.is_some() {
                "would be held"
            } else {
                "held"
            }
        );
        let mut t = Table::new(&["tensor", "block", "tier", "wanted", "reason"]);
        for h in &self.held {
            t.row(vec![
                h.tensor
                    .clone()
                    .unwrap_or_else(|| format!("{:032x}", h.key.tensor_id)),
                h.key.block_index.to_string(),
                h.tier.to_string(),
                h.target.to_string(),
                h.reason.clone(),
            ]);
        }
        print!("{}", t.render());
    }

    fn print(&self) {
        let total = self.total();
        let verb = if self.planned.is_some() {
            "would move (dry run, nothing moved)"
        } else {
            "moved"
        };
        println!(
            "{}/{}: {} blocks scored, {total} {verb}, {} deferred, {} over capacity",
            self.tenant, self.collection, self.scored, self.deferred, self.over
        );
        if let Some(planned) = &self.planned {
            let mut t = Table::new(&["block", "from", "to", "reason"]);
            for (k, f, to, why) in planned {
                t.row(vec![
                    k.clone(),
                    Tier::ALL[usize::from(*f)].to_string(),
                    Tier::ALL[usize::from(*to)].to_string(),
                    (*why).to_owned(),
                ]);
            }
            if total > 0 {
                print!("{}", t.render());
            }
            self.print_held();
            return;
        }
        let mut t = Table::new(&["from", "to", "reason", "blocks"]);
        for ((f, to, why), n) in &self.moved {
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
            self.before.map(|n| n.to_string()).join("/"),
            self.after.map(|n| n.to_string()).join("/")
        );
        self.print_held();
    }
}

/// The rows of the held-blocks report, with tensor names.
fn held_rows<S: Backend>(s: &Store<S>, held: &[HeldBlock]) -> Result<Vec<Held>, CliError> {
    if held.is_empty() {
        return Ok(Vec::new());
    }
    let names: BTreeMap<u128, String> = s
        .tensors()?
        .into_iter()
        .filter_map(|t| t.name.map(|n| (t.tensor_id, n)))
        .collect();
    Ok(held
        .iter()
        .map(|h| Held {
            tensor: names.get(&h.key.tensor_id).cloned(),
            key: h.key,
            tier: h.tier,
            target: h.target,
            non_finite: h.non_finite(),
            reason: h.reason.to_string(),
        })
        .collect())
}

/// Open one collection, run up to `a.steps` scheduler steps (fewer once nothing moves)
/// and close it.
fn run_one<B: Backend>(
    b: &B,
    tenant: &str,
    collection: &str,
    cfg: &StoreConfig,
    a: &MaintainArgs,
) -> Result<Run, CliError> {
    let mode = if a.dry_run {
        Mode::Inspect
    } else {
        Mode::Write
    };
    let s = b.open(tenant, collection, cfg.clone(), mode)?;
    let before = s.tier_counts()?;
    let mut run = Run {
        tenant: tenant.to_owned(),
        collection: collection.to_owned(),
        moved: BTreeMap::new(),
        scored: 0,
        deferred: 0,
        over: 0,
        before,
        after: before,
        planned: None,
        held: Vec::new(),
    };
    if a.dry_run {
        let r = s.plan_maintain(a.budget)?;
        let mut planned = Vec::with_capacity(r.moves.len());
        for m in &r.moves {
            let why = reason_name(m.reason);
            *run.moved
                .entry((m.from as u8, m.to as u8, why))
                .or_default() += 1;
            planned.push((m.key.to_string(), m.from as u8, m.to as u8, why));
        }
        (run.deferred, run.over, run.scored) = (r.deferred, r.over_capacity, r.scored);
        run.planned = Some(planned);
        // Which planned moves would be held (values a colder tier cannot encode): read
        // and encoded here, nothing written.
        let mut held = Vec::new();
        for m in &r.moves {
            match s.would_hold(&m.key, m.to) {
                Ok(Some(h)) => held.push(h),
                Ok(None) => {}
                // A corrupt block is skipped by the real step too (`store verify` reports
                // it); the dry run still lists the plan.
                Err(e) if e.is_corruption() => {}
                Err(e) => return Err(e.into()),
            }
        }
        run.held = held_rows::<B>(&s, &held)?;
        s.close()?;
        return Ok(run);
    }
    let mut held = Vec::new();
    for _ in 0..a.steps {
        let r = s.maintain(a.budget)?;
        for m in &r.moves {
            *run.moved
                .entry((m.from as u8, m.to as u8, reason_name(m.reason)))
                .or_default() += 1;
        }
        (run.deferred, run.over, run.scored) = (r.deferred, r.over_capacity, r.scored);
        held = r.held; // every block held so far, not only this step's
        if r.moves.is_empty() {
            break;
        }
    }
    run.held = held_rows::<B>(&s, &held)?;
    run.after = s.tier_counts()?;
    s.close()?;
    Ok(run)
}

/// Run `store maintain` on backend `b`; returns the exit code.
///
/// # Errors
/// Any [`CliError`]; the caller prints it on one line and exits with code 2.
pub fn run<B: Backend>(b: &B, a: &MaintainArgs) -> Result<i32, CliError> {
    let mut cfg = StoreConfig::default();
    cfg.tiering.demote_tier0 = a.demote_tier0;
    if let Some(raw) = &a.max_blocks {
        cfg.max_blocks_per_tier = limits(raw)?;
    }
    let one = pair(a.tenant.clone(), a.collection.clone())?;
    if let Some(secs) = a.watch {
        return watch(b, a, &cfg, one, Duration::from_secs(secs));
    }
    let mut runs = Vec::new();
    for (tenant, collection) in b.collections_or(one.clone())? {
        runs.push(run_one(b, &tenant, &collection, &cfg, a)?);
    }
    if a.json {
        let v = match (&one, runs.as_slice()) {
            (Some(_), [r]) => r.json(),
            _ => runs.iter().map(Run::json).collect(),
        };
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        return Ok(0);
    }
    for r in &runs {
        r.print();
    }
    Ok(0)
}

/// `--watch`: a round over the collections every `every` until SIGINT or SIGTERM; the
/// signal is taken between steps, so every collection is closed when the command exits.
fn watch<B: Backend>(
    b: &B,
    a: &MaintainArgs,
    cfg: &StoreConfig,
    one: Option<(String, String)>,
    every: Duration,
) -> Result<i32, CliError> {
    signals::stop_gracefully();
    for round in 1u64.. {
        let cols = match b.collections_or(one.clone()) {
            Ok(c) => c,
            Err(e) if round > 1 => {
                eprintln!("error: round {round}: {e}");
                Vec::new()
            }
            Err(e) => return Err(e),
        };
        if !a.json {
            println!("round {round}:");
        }
        for (tenant, collection) in cols {
            if signals::stop_requested() {
                return Ok(0);
            }
            let r = match run_one(b, &tenant, &collection, cfg, a) {
                Ok(r) => r,
                Err(e) if round > 1 => {
                    eprintln!("error: round {round}: {tenant}/{collection}: {e}");
                    continue;
                }
                Err(e) => return Err(e),
            };
            if a.json {
                let mut v = r.json();
                v["round"] = json!(round);
                println!("{v}");
            } else {
                r.print();
            }
        }
        if signals::sleep_unless_stopped(every) {
            break;
        }
    }
    Ok(0)
}
