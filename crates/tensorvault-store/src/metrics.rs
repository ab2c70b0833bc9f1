//! Prometheus metrics (feature `metrics`, on by default): a store's counters and gauges
//! in the Prometheus / OpenMetrics text exposition format, built with `prometheus-client`.
//!
//! Every series carries `tenant` and `collection` labels, so one [`StoreMetrics`] can
//! combine many collections in one exposition; per-tier series add `tier` ("0".."3"),
//! migrations add `from_tier` and `to_tier`. All names start with
//! `tensorvault_store_`; counters end in `_total` (OpenMetrics). The metric names are
//! listed in the crate README, section "Metrics".
//!
//! Counters count since the [`TensorStore`] was opened (they are not persisted): a
//! process that opens a store only to scrape it sees zeros there and meaningful gauges.
//! Reading them takes relaxed atomic loads; the gauges take the index read lock once for
//! a pass over the live blocks, and the writer lock briefly for the log's record count.
//!
//! ```
//! use tensorvault_store::metrics::StoreMetrics;
//! use tensorvault_store::{BlockIO, BufferBlockIO, Catalog, CollectionConfig, ManualClock};
//! use tensorvault_store::{MemMetaLog, StoreConfig, TensorStore};
//!
//! let geo = CollectionConfig::default();
//! let log = MemMetaLog::new(geo);
//! let io = BufferBlockIO::new(&geo);
//! let store = TensorStore::open(
//!     "acme", "kv", ManualClock::new(0), io, log, Catalog::in_memory(), StoreConfig::default(),
//! )?;
//! let mut m = StoreMetrics::new();
//! m.add(&store)?;
//! let mut text = String::new();
//! m.encode(&mut text);
//! assert!(text.contains("tensorvault_store_up{tenant=\"acme\",collection=\"kv\"} 1\n"));
//! assert!(text.ends_with("# EOF\n"));
//! # Ok::<(), tensorvault_store::StoreErr>(())
//! ```

use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

/// Prefix of every metric name (followed by `_`).
pub const PREFIX: &str = "tensorvault_store";

/// `Content-Type` of [`StoreMetrics::encode`]'s output for a client that asked for
/// OpenMetrics.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// `Content-Type` of [`StoreMetrics::encode_classic`]'s output.
pub const PROMETHEUS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// One collection's numbers at one instant.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MetricsSnapshot {
    /// Block reads since open.
    pub reads: u64,
    /// Block writes since open.
    pub writes: u64,
    /// Stored (encoded) payload bytes read by `get_block` since open.
    pub read_bytes: u64,
    /// Encoded payload bytes written since open.
    pub written_bytes: u64,
    /// Migrations since open, indexed `[from tier][to tier]`.
    pub migrations: [[u64; 4]; 4],
    /// Blocks deleted since open.
    pub deletes: u64,
    /// Checksum mismatches seen since open.
    pub checksum_failures: u64,
    /// Blocks rehydrated from their lineage and repaired in place since open.
    pub repairs: u64,
    /// How long the metadata log replay took on open, seconds.
    pub replay_seconds: f64,
    /// Corrupt log records skipped by replay.
    pub replay_skipped: u64,
    /// Valid log records replay ignored (stale or impossible slots).
    pub replay_ignored: u64,
    /// Tensors with at least one live block.
    pub tensors: u64,
    /// Live blocks per tier.
    pub blocks: [u64; 4],
    /// Stored payload bytes per tier.
    pub payload_bytes: [u64; 4],
    /// Tier file length per tier.
    pub file_bytes: [u64; 4],
    /// Slots (live + free) per tier file.
    pub slots: [u64; 4],
    /// Free slots per tier file.
    pub free_slots: [u64; 4],
    /// Records in the metadata log.
    pub log_records: u64,
    /// Blocks tiering holds in their tier because a colder tier cannot encode their
    /// values (NaN or infinity; `crate::finite`).
    pub held_blocks: u64,
}

#[derive(Clone, Debug)]
struct Entry {
    tenant: String,
    collection: String,
    /// `None`: the collection could not be read (exported as `up 0`).
    snap: Option<MetricsSnapshot>,
}

/// Metrics of several collections, encoded together. Also a `prometheus-client`
/// [`Collector`], so it can join an application's own [`Registry`].
#[derive(Clone, Debug, Default)]
pub struct StoreMetrics {
    /// Sorted by (tenant, collection), unique.
    entries: Vec<Entry>,
}

/// A counter or gauge family: name (without prefix and `_total`), help, type, labels
/// beyond tenant/collection and the values of one snapshot.
struct Family {
    name: &'static str,
    help: &'static str,
    kind: MetricType,
    rows: fn(&MetricsSnapshot) -> Rows,
}

/// Series of one family for one collection: extra labels and value.
type Rows = Vec<(Vec<(&'static str, &'static str)>, Value)>;

#[derive(Clone, Copy)]
enum Value {
    Int(u64),
    Float(f64),
}

const TIER_LABELS: [&str; 4] = ["0", "1", "2", "3"];

fn one(v: u64) -> Rows {
    vec![(Vec::new(), Value::Int(v))]
}

fn per_tier(v: &[u64; 4]) -> Rows {
    TIER_LABELS
        .iter()
        .zip(v)
        .map(|(&t, &n)| (vec![("tier", t)], Value::Int(n)))
        .collect()
}

const FAMILIES: &[Family] = &[
    Family {
        name: "reads",
        help: "Block reads since the store was opened",
        kind: MetricType::Counter,
        rows: |s| one(s.reads),
    },
    Family {
        name: "writes",
        help: "Block writes since the store was opened",
        kind: MetricType::Counter,
        rows: |s| one(s.writes),
    },
    Family {
        name: "read_bytes",
        help: "Stored (encoded) payload bytes read since the store was opened",
        kind: MetricType::Counter,
        rows: |s| one(s.read_bytes),
    },
    Family {
        name: "written_bytes",
        help: "Encoded payload bytes written since the store was opened",
        kind: MetricType::Counter,
        rows: |s| one(s.written_bytes),
    },
    Family {
        name: "migrations",
        help: "Blocks moved between tiers since the store was opened",
        kind: MetricType::Counter,
        rows: |s| {
            let mut v = Vec::new();
            for (from, row) in s.migrations.iter().enumerate() {
                for (to, &n) in row.iter().enumerate().filter(|&(to, _)| to != from) {
                    v.push((
                        vec![
                            ("from_tier", TIER_LABELS[from]),
                            ("to_tier", TIER_LABELS[to]),
                        ],
                        Value::Int(n),
                    ));
                }
            }
            v
        },
    },
    Family {
        name: "deletes",
        help: "Blocks deleted since the store was opened",
        kind: MetricType::Counter,
        rows: |s| one(s.deletes),
    },
    Family {
        name: "checksum_failures",
        help: "Block checksum mismatches seen since the store was opened",
        kind: MetricType::Counter,
        rows: |s| one(s.checksum_failures),
    },
    Family {
        name: "repairs",
        help:
            "Corrupt blocks rehydrated from their lineage and repaired since the store was opened",
        kind: MetricType::Counter,
        rows: |s| one(s.repairs),
    },
    Family {
        name: "replay_seconds",
        help: "Duration of the metadata log replay when the store was opened",
        kind: MetricType::Gauge,
        rows: |s| vec![(Vec::new(), Value::Float(s.replay_seconds))],
    },
    Family {
        name: "replay_skipped_records",
        help: "Corrupt metadata log records skipped by replay on open",
        kind: MetricType::Gauge,
        rows: |s| one(s.replay_skipped),
    },
    Family {
        name: "replay_ignored_records",
        help: "Valid metadata log records replay ignored on open (stale or impossible slots)",
        kind: MetricType::Gauge,
        rows: |s| one(s.replay_ignored),
    },
    Family {
        name: "held_blocks",
        help: "Blocks held in their tier because a colder tier cannot encode their values (NaN or infinity)",
        kind: MetricType::Gauge,
        rows: |s| one(s.held_blocks),
    },
    Family {
        name: "tensors",
        help: "Tensors with at least one live block",
        kind: MetricType::Gauge,
        rows: |s| one(s.tensors),
    },
    Family {
        name: "blocks",
        help: "Live blocks per tier",
        kind: MetricType::Gauge,
        rows: |s| per_tier(&s.blocks),
    },
    Family {
        name: "payload_bytes",
        help: "Stored (encoded) payload bytes of the live blocks per tier",
        kind: MetricType::Gauge,
        rows: |s| per_tier(&s.payload_bytes),
    },
    Family {
        name: "tier_file_bytes",
        help: "Length of each tier's data file",
        kind: MetricType::Gauge,
        rows: |s| per_tier(&s.file_bytes),
    },
    Family {
        name: "tier_slots",
        help: "Slots (live and free) in each tier's data file",
        kind: MetricType::Gauge,
        rows: |s| per_tier(&s.slots),
    },
    Family {
        name: "free_slots",
        help: "Free slots in each tier's data file",
        kind: MetricType::Gauge,
        rows: |s| per_tier(&s.free_slots),
    },
    Family {
        name: "log_records",
        help: "Records in the metadata log",
        kind: MetricType::Gauge,
        rows: |s| one(s.log_records),
    },
];

/// Names of every metric family, as they appear after `# TYPE` (with [`PREFIX`], without
/// `_total`), `up` first.
#[must_use]
pub fn family_names() -> Vec<String> {
    std::iter::once("up")
        .chain(FAMILIES.iter().map(|f| f.name))
        .map(|n| format!("{PREFIX}_{n}"))
        .collect()
}

impl StoreMetrics {
    /// No collections yet.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Collections added so far (readable or not).
    #[must_use]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no collection was added.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn put(&mut self, tenant: &str, collection: &str, snap: Option<MetricsSnapshot>) {
        let key = (tenant, collection);
        match self
            .entries
            .binary_search_by(|e| (e.tenant.as_str(), e.collection.as_str()).cmp(&key))
        {
            Ok(i) => self.entries[i].snap = snap,
            Err(i) => self.entries.insert(
                i,
                Entry {
                    tenant: tenant.to_owned(),
                    collection: collection.to_owned(),
                    snap,
                },
            ),
        }
    }

    /// Add a snapshot taken elsewhere.
    pub fn add_snapshot(&mut self, tenant: &str, collection: &str, snap: MetricsSnapshot) {
        self.put(tenant, collection, Some(snap));
    }

    /// Record that a collection exists but could not be read (e.g. it is open in another
    /// process): it is exported as `tensorvault_store_up 0` and nothing else.
    pub fn add_unavailable(&mut self, tenant: &str, collection: &str) {
        self.put(tenant, collection, None);
    }

    /// Append the complete exposition (every family, then `# EOF`) to `out`.
    pub fn encode(&self, out: &mut String) {
        let mut registry = Registry::with_prefix(PREFIX);
        registry.register_collector(Box::new(self.clone()));
        // Writing to a String cannot fail, and the collector only forwards the writer's
        // errors, so there is no error to report.
        let _ = prometheus_client::encoding::text::encode(out, &registry);
    }

    /// Append the exposition in the classic Prometheus text format (version 0.0.4) to
    /// `out`: the same samples as [`StoreMetrics::encode`], with counter `# HELP` and
    /// `# TYPE` lines naming the `_total` series and without the OpenMetrics `# EOF`.
    pub fn encode_classic(&self, out: &mut String) {
        let mut om = String::new();
        self.encode(&mut om);
        out.push_str(&openmetrics_to_classic(&om));
    }
}

/// Rewrite OpenMetrics text into the classic Prometheus text format: counter families
/// are named after their `_total` samples, `# UNIT` and `# EOF` lines are dropped.
/// (`prometheus-client`, 0.25 included, encodes OpenMetrics only; the crates that write the
/// classic format are whole metrics libraries with their own registries. This renames
/// lines of our own encoder's output and parses nothing from outside.)
fn openmetrics_to_classic(om: &str) -> String {
    let counters: std::collections::HashSet<&str> = om
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(om.len());
    for line in om.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let meta = ["# HELP ", "# TYPE "]
            .into_iter()
            .find_map(|p| line.strip_prefix(p).map(|rest| (p, rest)));
        if let Some((p, rest)) = meta {
            let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
            if counters.contains(name) {
                out.push_str(&format!("{p}{name}_total {tail}\n"));
                continue;
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

fn encode_value(
    v: Value,
    kind: MetricType,
    e: prometheus_client::encoding::MetricEncoder<'_>,
) -> fmt::Result {
    match (kind, v) {
        (MetricType::Counter, Value::Int(n)) => ConstCounter::new(n).encode(e),
        (MetricType::Counter, Value::Float(x)) => ConstCounter::new(x).encode(e),
        (_, Value::Int(n)) => ConstGauge::new(n).encode(e),
        (_, Value::Float(x)) => ConstGauge::new(x).encode(e),
    }
}

impl Collector for StoreMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        {
            let mut fam = encoder.encode_descriptor(
                "up",
                "1 if the collection could be opened and read for this exposition, 0 if not (e.g. it is open in another process)",
                None,
                MetricType::Gauge,
            )?;
            for e in &self.entries {
                let labels = [
                    ("tenant", e.tenant.as_str()),
                    ("collection", e.collection.as_str()),
                ];
                ConstGauge::new(i64::from(e.snap.is_some())).encode(fam.encode_family(&labels)?)?;
            }
        }
        for f in FAMILIES {
            let mut fam = encoder.encode_descriptor(f.name, f.help, None, f.kind)?;
            for e in &self.entries {
                let Some(snap) = &e.snap else {
                    continue;
                };
                for (extra, v) in (f.rows)(snap) {
                    let mut labels = vec![
                        ("tenant", e.tenant.as_str()),
                        ("collection", e.collection.as_str()),
                    ];
                    labels.extend(extra);
                    encode_value(v, f.kind, fam.encode_family(&labels)?)?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
