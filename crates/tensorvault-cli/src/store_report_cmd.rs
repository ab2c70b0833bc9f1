//! `tensorvault store report`: one self-contained HTML file with inline SVG charts of a
//! store's tiers (blocks and bytes per tier, the distribution of migration scores), and,
//! given the history of a KV-cache simulation (`kv_sim --history`), blocks per tier,
//! bytes on disk and read latency over time plus the reconstruction error per tier.
//!
//! Scores are computed at the collection's last recorded tick (the latest creation,
//! access or tier change of any block), not at the wall clock: a store written under a
//! manual clock (the simulation) and one written under the system clock both get the
//! scores they had when last used.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;
use serde_json::Value;
use tensorvault_store::fs::list_collections;
use tensorvault_store::tiering::TierPolicy;
use tensorvault_store::{DirStore, ManualClock, StoreConfig, StoreStats, Tier};

use crate::error::CliError;
use crate::report::size;
use crate::svg_charts::{self, Series, TIER_COLORS};

/// Arguments of `store report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Store root directory.
    pub root: PathBuf,
    /// Tenant (with COLLECTION: report that collection only; default: every collection
    /// under ROOT).
    pub tenant: Option<String>,
    /// Collection.
    pub collection: Option<String>,
    /// Output HTML file (written atomically).
    #[arg(long)]
    pub out: PathBuf,
    /// History of a KV-cache simulation (JSON written by `kv_sim --history`), for the
    /// charts over time.
    #[arg(long)]
    pub history: Option<PathBuf>,
}

/// Upper edges of the score histogram's bins (the last bin is open).
const SCORE_EDGES: [f32; 13] = [
    0.01, 0.1, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0,
];

/// One collection, as the report shows it.
struct CollectionView {
    tenant: String,
    collection: String,
    stats: StoreStats,
    /// The tick the scores were computed at.
    tick: u64,
    /// Blocks per score bin and tier.
    bins: Vec<[u64; 4]>,
    /// Lowest, median and highest score.
    score_range: Option<(f32, f32, f32)>,
}

/// The time series of a simulation history.
#[derive(Default)]
struct History {
    config: Vec<(String, String)>,
    steps: Vec<f64>,
    blocks: [Vec<f64>; 4],
    disk_mib: Vec<f64>,
    payload_mib: Vec<f64>,
    f16_mib: Vec<f64>,
    p50_us: Vec<f64>,
    p99_us: Vec<f64>,
    /// (kind, tier, block checks, max abs, RMSE, relative RMSE).
    errors: Vec<(String, u64, u64, f64, f64, f64)>,
}

/// Run `store report`; returns the exit code.
///
/// # Errors
/// [`CliError::Usage`] for a half-given TENANT COLLECTION or a history that is not a
/// simulation history; store errors opening a collection; I/O errors.
pub fn run(a: &ReportArgs) -> Result<i32, CliError> {
    let cols = match (&a.tenant, &a.collection) {
        (Some(t), Some(c)) => vec![(t.clone(), c.clone())],
        (None, None) => list_collections(&a.root)?,
        _ => {
            return Err(CliError::Usage {
                arg: "TENANT COLLECTION",
                reason: "give both or neither".into(),
            })
        }
    };
    let views = cols
        .iter()
        .map(|(t, c)| gather(&a.root, t, c))
        .collect::<Result<Vec<_>, _>>()?;
    let history = match &a.history {
        Some(p) => Some(load_history(p)?),
        None => None,
    };
    let html = render(&a.root, &views, history.as_ref()).map_err(|e| CliError::Io {
        op: "draw a chart for",
        path: a.out.display().to_string(),
        source: std::io::Error::other(e),
    })?;
    tensorvault_core::atomic::write_atomic(&a.out, html.as_bytes())?;
    let blocks: u64 = views
        .iter()
        .map(|v| v.stats.blocks.iter().sum::<u64>())
        .sum();
    println!(
        "{}: {} collections, {blocks} blocks{} -> {} ({})",
        a.root.display(),
        views.len(),
        if history.is_some() {
            ", simulation history"
        } else {
            ""
        },
        a.out.display(),
        size(html.len() as u64)
    );
    Ok(0)
}

fn gather(root: &Path, tenant: &str, collection: &str) -> Result<CollectionView, CliError> {
    let clock = Arc::new(ManualClock::new(0));
    let s = DirStore::open_dir(
        root,
        tenant,
        collection,
        Arc::clone(&clock),
        StoreConfig::default(),
        false,
    )?;
    let tick = s
        .blocks()?
        .iter()
        .map(|m| m.created_at.max(m.last_access_at).max(m.tier_since))
        .max()
        .unwrap_or(0);
    clock.set(tick);
    let stats = s.stats()?;
    let mut bins = vec![[0u64; 4]; SCORE_EDGES.len() + 1];
    let mut scores: Vec<f32> = Vec::new();
    for (score, _, tier, _) in s.scores()? {
        let bin = SCORE_EDGES
            .iter()
            .position(|&e| score < e)
            .unwrap_or(SCORE_EDGES.len());
        bins[bin][tier.index()] += 1;
        scores.push(score);
    }
    scores.sort_by(f32::total_cmp);
    let score_range = (!scores.is_empty()).then(|| {
        (
            scores[0],
            scores[scores.len() / 2],
            scores[scores.len() - 1],
        )
    });
    drop(s);
    Ok(CollectionView {
        tenant: tenant.to_owned(),
        collection: collection.to_owned(),
        stats,
        tick,
        bins,
        score_range,
    })
}

fn load_history(path: &Path) -> Result<History, CliError> {
    let text = std::fs::read_to_string(path).map_err(CliError::io("read", path.display()))?;
    let bad = |reason: String| CliError::Usage {
        arg: "--history",
        reason: format!("{}: {reason}", path.display()),
    };
    let v: Value = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    let samples = v
        .get("samples")
        .and_then(Value::as_array)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| bad("no \"samples\" array: not a kv_sim history".into()))?;
    let num = |s: &Value, field: &str| -> Result<f64, CliError> {
        s.get(field)
            .and_then(Value::as_f64)
            .ok_or_else(|| bad(format!("a sample has no number \"{field}\"")))
    };
    let mib = (1u64 << 20) as f64;
    let mut h = History::default();
    for s in samples {
        h.steps.push(num(s, "step")?);
        let blocks = s
            .get("blocks")
            .and_then(Value::as_array)
            .filter(|b| b.len() == 4)
            .ok_or_else(|| bad("a sample has no 4-tier \"blocks\" array".into()))?;
        for (t, b) in blocks.iter().enumerate() {
            h.blocks[t].push(b.as_f64().unwrap_or(0.0));
        }
        h.disk_mib.push(num(s, "disk_bytes")? / mib);
        let payload: f64 = s
            .get("payload_bytes")
            .and_then(Value::as_array)
            .map_or(0.0, |p| p.iter().filter_map(Value::as_f64).sum());
        h.payload_mib.push(payload / mib);
        h.f16_mib.push(num(s, "f16_bytes")? / mib);
        h.p50_us.push(num(s, "window_read_p50_us").unwrap_or(0.0));
        h.p99_us.push(num(s, "window_read_p99_us").unwrap_or(0.0));
    }
    if let Some(cfg) = v.get("config").and_then(Value::as_object) {
        h.config = cfg
            .iter()
            .map(|(k, v)| (k.clone(), v.to_string()))
            .collect();
    }
    for e in v
        .get("error_by_tier")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let f = |k: &str| e.get(k).and_then(Value::as_f64).unwrap_or(0.0);
        h.errors.push((
            e.get("kind")
                .and_then(Value::as_str)
                .unwrap_or("all")
                .to_owned(),
            f("tier") as u64,
            f("block_checks") as u64,
            f("max_abs"),
            f("rmse"),
            f("rel_rmse"),
        ));
    }
    Ok(h)
}

/// Escape text for HTML.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const STYLE: &str = "body{font-family:sans-serif;margin:2em auto;max-width:820px;color:#222}\
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 9px;\
text-align:right}th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}\
figure{margin:1.2em 0}figcaption{font-size:90%;color:#555}.swatch{display:inline-block;\
width:10px;height:10px;margin-right:4px}";

const TIER_NAMES: [&str; 4] = [
    "tier0 (raw)",
    "tier1 (8-bit)",
    "tier2 (5-bit)",
    "tier3 (3-bit)",
];

fn tier_series(values: [Vec<f64>; 4]) -> Vec<Series<'static>> {
    values
        .into_iter()
        .enumerate()
        .map(|(t, values)| Series {
            label: TIER_NAMES[t],
            color: TIER_COLORS[t],
            values,
        })
        .collect()
}

fn figure(html: &mut String, svg: &str, caption: &str) {
    let _ = writeln!(
        html,
        "<figure>{svg}<figcaption>{}</figcaption></figure>",
        esc(caption)
    );
}

fn render(root: &Path, views: &[CollectionView], h: Option<&History>) -> Result<String, String> {
    let mut html = String::new();
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>tensorvault store report</title><style>{STYLE}</style></head><body>\n\
         <h1>tensorvault store report</h1>\n<p>Store root <code>{}</code>: {} collection(s).</p>\n",
        esc(&root.display().to_string()),
        views.len()
    );
    if let Some(h) = h {
        render_history(&mut html, h)?;
    }
    for v in views {
        render_collection(&mut html, v)?;
    }
    html.push_str("</body></html>\n");
    Ok(html)
}

fn render_history(html: &mut String, h: &History) -> Result<(), String> {
    html.push_str("<h2>KV-cache simulation</h2>\n");
    if !h.config.is_empty() {
        let cfg: Vec<String> = h
            .config
            .iter()
            .map(|(k, v)| format!("{}&nbsp;{}", esc(k), esc(v)))
            .collect();
        let _ = writeln!(html, "<p>Configuration: {}.</p>", cfg.join(", "));
    }
    let last = h.steps.len() - 1;
    let _ = writeln!(
        html,
        "<p>At step {}: blocks per tier {} / {} / {} / {}; on disk {:.1} MiB, {:.1}% of the \
         same cache in f16 ({:.1} MiB); payload {:.1} MiB.</p>",
        h.steps[last],
        h.blocks[0][last],
        h.blocks[1][last],
        h.blocks[2][last],
        h.blocks[3][last],
        h.disk_mib[last],
        100.0 * h.disk_mib[last] / h.f16_mib[last].max(f64::MIN_POSITIVE),
        h.f16_mib[last],
        h.payload_mib[last]
    );
    let svg = svg_charts::stacked_area(
        "Blocks per tier",
        "decode step",
        "blocks",
        &h.steps,
        &tier_series(h.blocks.clone()),
    )?;
    figure(
        html,
        &svg,
        "Blocks per tier over the run, stacked (tier0 at the bottom).",
    );
    let bytes = [
        Series {
            label: "same cache in f16",
            color: RGBA_GREY,
            values: h.f16_mib.clone(),
        },
        Series {
            label: "on disk (all files)",
            color: TIER_COLORS[0],
            values: h.disk_mib.clone(),
        },
        Series {
            label: "payload of live blocks",
            color: TIER_COLORS[3],
            values: h.payload_mib.clone(),
        },
    ];
    let svg = svg_charts::lines("Bytes on disk", "decode step", "MiB", &h.steps, &bytes)?;
    figure(
        html,
        &svg,
        "Bytes on disk over the run against the same cache kept in f16.",
    );
    if h.p99_us.iter().any(|&x| x > 0.0) {
        let lat = [
            Series {
                label: "p50",
                color: TIER_COLORS[3],
                values: h.p50_us.clone(),
            },
            Series {
                label: "p99",
                color: TIER_COLORS[0],
                values: h.p99_us.clone(),
            },
        ];
        let svg = svg_charts::lines(
            "Read latency (recent window + sinks, one head)",
            "decode step",
            "microseconds",
            &h.steps,
            &lat,
        )?;
        figure(html, &svg, "Read latency per sample interval.");
    }
    if !h.errors.is_empty() {
        html.push_str(
            "<h3>Reconstruction error by tier</h3>\n<table><tr><th>values</th><th>tier</th>\
             <th>block checks</th><th>max abs</th><th>RMSE</th><th>relative RMSE</th></tr>\n",
        );
        for (kind, tier, checks, max_abs, rmse, rel) in &h.errors {
            let kind = match kind.as_str() {
                "k" => "keys",
                "v" => "values",
                _ => "all",
            };
            let _ = writeln!(
                html,
                "<tr><td>{kind}</td><td>{}</td><td>{checks}</td><td>{max_abs:.4}</td>\
                 <td>{rmse:.5}</td><td>{:.2}%</td></tr>",
                TIER_NAMES.get(*tier as usize).copied().unwrap_or("?"),
                100.0 * rel
            );
        }
        html.push_str("</table>\n");
    }
    Ok(())
}

/// Grey for the f16 reference line.
const RGBA_GREY: plotters::style::RGBColor = plotters::style::RGBColor(120, 120, 120);

fn render_collection(html: &mut String, v: &CollectionView) -> Result<(), String> {
    let s = &v.stats;
    let _ = writeln!(
        html,
        "<h2>Collection {}/{}</h2>\n<p>{} tensors, {} blocks, {} log records; scores at tick {}.</p>",
        esc(&v.tenant),
        esc(&v.collection),
        s.tensors,
        s.blocks.iter().sum::<u64>(),
        s.log_records,
        v.tick
    );
    html.push_str(
        "<table><tr><th>tier</th><th>blocks</th><th>raw</th><th>payload</th><th>ratio</th>\
         <th>tier file</th><th>on disk</th><th>free slots</th><th>error: median step \
         (max |err| = step / 2 inside a group's range)</th></tr>\n",
    );
    for t in Tier::ALL {
        let i = t.index();
        let c = TIER_COLORS[i];
        let _ = writeln!(
            html,
            "<tr><td><span class=\"swatch\" style=\"background:rgb({},{},{})\"></span>{}</td>\
             <td>{}</td><td>{}</td><td>{}</td><td>{:.2}x</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td></tr>",
            c.0,
            c.1,
            c.2,
            TIER_NAMES[i],
            s.blocks[i],
            size(s.raw_bytes[i]),
            size(s.payload_bytes[i]),
            s.raw_bytes[i] as f64 / s.payload_bytes[i].max(1) as f64,
            size(s.usage[i].bytes),
            size(s.usage[i].allocated_bytes),
            s.usage[i].free_slots,
            match (i, s.blocks[i]) {
                (0, _) => "exact".to_owned(),
                (_, 0) => "-".to_owned(),
                _ => format!("{:.3e}", s.step_median[i]),
            }
        );
    }
    html.push_str("</table>\n");
    let counts = tier_series(std::array::from_fn(|t| {
        let mut v = vec![0.0; 4];
        v[t] = s.blocks[t] as f64;
        v
    }));
    let cats: Vec<String> = TIER_NAMES.iter().map(|n| (*n).to_owned()).collect();
    let svg = svg_charts::stacked_bars("Blocks per tier", "tier", "blocks", &cats, &counts, false)?;
    figure(html, &svg, "Live blocks per tier now.");
    let edge = |e: f32| match e {
        e if e >= 1024.0 => format!("{}k", e / 1024.0),
        e if e < 1.0 => format!("{e}").trim_start_matches('0').to_owned(),
        e => format!("{e}"),
    };
    let bins: Vec<String> = (0..=SCORE_EDGES.len())
        .map(|i| match i {
            0 => format!("<{}", edge(SCORE_EDGES[0])),
            i if i == SCORE_EDGES.len() => format!(">={}", edge(SCORE_EDGES[i - 1])),
            i => format!("{}-{}", edge(SCORE_EDGES[i - 1]), edge(SCORE_EDGES[i])),
        })
        .collect();
    let per_tier = tier_series(std::array::from_fn(|t| {
        v.bins.iter().map(|b| b[t] as f64).collect()
    }));
    let svg = svg_charts::stacked_bars(
        "Migration score distribution",
        "score",
        "blocks",
        &bins,
        &per_tier,
        true,
    )?;
    let p = TierPolicy::default();
    let range = v.score_range.map_or(String::new(), |(lo, mid, hi)| {
        format!(" Lowest {lo:.3}, median {mid:.3}, highest {hi:.1}.")
    });
    figure(
        html,
        &svg,
        &format!(
            "Blocks by migration score, stacked by tier. The default policy demotes below {} \
             and promotes above {} (bin edges).{range}",
            p.demote_threshold, p.promote_threshold
        ),
    );
    Ok(())
}
