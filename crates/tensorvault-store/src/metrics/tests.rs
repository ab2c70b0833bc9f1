//! Unit tests of `metrics.rs`.

use std::collections::BTreeMap;

use super::*;
use crate::types::Tier;
use crate::{
    BlockInfo, BlockKey, BufferBlockIO, Catalog, CollectionConfig, DType, ManualClock, MemMetaLog,
    StoreConfig, TensorStore,
};

type MemStore = TensorStore<ManualClock, BufferBlockIO, MemMetaLog>;

fn store(tenant: &str, collection: &str) -> MemStore {
    let geo = CollectionConfig::with_block_elems(256);
    let cfg = StoreConfig {
        collection: geo,
        ..StoreConfig::default()
    };
    TensorStore::open(
        tenant,
        collection,
        ManualClock::new(1),
        BufferBlockIO::new(&geo),
        MemMetaLog::new(geo),
        Catalog::in_memory(),
        cfg,
    )
    .unwrap()
}

fn block(seed: f32) -> Vec<u8> {
    (0..256)
        .flat_map(|i| ((i as f32 * 0.37 + seed).sin()).to_le_bytes())
        .collect()
}

/// Check that every line is a `#` comment or `name{labels} value`, that every sample
/// belongs to a declared family (in the classic format: by its exact name; in
/// OpenMetrics: counters by `name_total`), and return the samples as
/// "name{labels}" -> value.
fn parse(text: &str, openmetrics: bool) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    let mut types = BTreeMap::new();
    assert_eq!(text.ends_with("# EOF\n"), openmetrics);
    for line in text.lines() {
        if line.starts_with('#') {
            let w: Vec<&str> = line.splitn(4, ' ').collect();
            assert_eq!(w[0], "#", "{line}");
            match w[1] {
                "EOF" => assert!(openmetrics),
                "HELP" => assert!(w[2].starts_with(PREFIX), "{line}"),
                "TYPE" => {
                    assert!(matches!(w[3], "counter" | "gauge"), "{line}");
                    assert!(types.insert(w[2].to_owned(), w[3].to_owned()).is_none());
                }
                _ => panic!("unexpected comment {line}"),
            }
            continue;
        }
        let (series, value) = line.rsplit_once(' ').expect("name{labels} value");
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("value of {line}"));
        let name_end = series.find('{').unwrap_or(series.len());
        let name = &series[..name_end];
        assert!(
            name.starts_with(PREFIX)
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'),
            "{line}"
        );
        let declared = if openmetrics {
            types.contains_key(name)
                || name
                    .strip_suffix("_total")
                    .is_some_and(|n| types.get(n).is_some_and(|t| t == "counter"))
        } else {
            types.contains_key(name)
        };
        assert!(declared, "{line} has no # TYPE");
        if name_end < series.len() {
            let labels = &series[name_end..];
            assert!(labels.starts_with('{') && labels.ends_with('}'), "{line}");
            for pair in labels[1..labels.len() - 1].split(',') {
                let (k, v) = pair.split_once('=').expect("key=value");
                assert!(k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'));
                assert!(
                    v.len() >= 2 && v.starts_with('"') && v.ends_with('"'),
                    "{line}"
                );
            }
        }
        assert!(
            out.insert(series.to_owned(), value).is_none(),
            "duplicate {series}"
        );
    }
    out
}

#[test]
fn exposition_parses_and_counts_a_known_sequence() {
    let s = store("acme", "kv");
    let shape = [1024u32];
    let info = BlockInfo::new(DType::F32, &shape);
    let keys: Vec<BlockKey> = (0..4).map(|i| BlockKey::new(7, i)).collect();
    for (i, k) in keys.iter().enumerate() {
        s.put_block(*k, Tier::Tier1, &info, &block(i as f32))
            .unwrap();
    }
    let mut buf = Vec::new();
    let mut read_bytes = 0u64;
    for k in [keys[0], keys[1], keys[0]] {
        read_bytes += u64::from(s.get_block(&k, &mut buf).unwrap().data_len);
    }
    s.migrate_blocks(&keys[2..4], Tier::Tier3).unwrap();
    s.migrate_block(&keys[3], Tier::Tier0).unwrap();
    assert!(s.delete_block(&keys[1]).unwrap());
    let snap = s.metrics_snapshot().unwrap();
    let mut text = String::new();
    s.encode_prometheus(&mut text).unwrap();
    let m = parse(&text, false);
    // The OpenMetrics form has the same samples.
    let mut om = String::new();
    let mut sm = StoreMetrics::new();
    sm.add(&s).unwrap();
    sm.encode(&mut om);
    let om_samples = parse(&om, true);
    assert_eq!(m, om_samples);

    for name in family_names() {
        assert!(
            om.contains(&format!("# TYPE {name} ")),
            "{name} missing:\n{om}"
        );
        assert!(
            text.contains(&format!("# TYPE {name} "))
                || text.contains(&format!("# TYPE {name}_total counter")),
            "{name} missing:\n{text}"
        );
    }
    let l = |extra: &str| format!("{{tenant=\"acme\",collection=\"kv\"{extra}}}");
    let get = |name: &str, extra: &str| {
        let k = format!("{PREFIX}_{name}{}", l(extra));
        *m.get(&k).unwrap_or_else(|| panic!("{k} missing:\n{text}"))
    };
    assert_eq!(get("up", ""), 1.0);
    assert_eq!(get("reads_total", ""), 3.0);
    assert_eq!(get("writes_total", ""), 4.0);
    assert_eq!(get("read_bytes_total", ""), read_bytes as f64);
    assert_eq!(get("written_bytes_total", ""), snap.written_bytes as f64);
    assert!(snap.written_bytes > 0);
    assert_eq!(get("deletes_total", ""), 1.0);
    assert_eq!(get("checksum_failures_total", ""), 0.0);
    assert_eq!(get("repairs_total", ""), 0.0);
    let mig = |from: &str, to: &str| {
        get(
            "migrations_total",
            &format!(",from_tier=\"{from}\",to_tier=\"{to}\""),
        )
    };
    assert_eq!(mig("1", "3"), 2.0);
    assert_eq!(mig("3", "0"), 1.0);
    assert_eq!(mig("1", "0"), 0.0);
    assert_eq!(
        m.keys().filter(|k| k.contains("_migrations_total")).count(),
        12
    );
    let tier = |name: &str, t: &str| get(name, &format!(",tier=\"{t}\""));
    // Left: keys[0] in Tier1, keys[2] in Tier3, keys[3] in Tier0.
    assert_eq!(
        ["0", "1", "2", "3"].map(|t| tier("blocks", t)),
        [1.0, 1.0, 0.0, 1.0]
    );
    assert_eq!(tier("payload_bytes", "0"), 1024.0);
    assert_eq!(tier("payload_bytes", "1"), snap.payload_bytes[1] as f64);
    assert!(snap.payload_bytes[3] > 0 && snap.payload_bytes[3] < snap.payload_bytes[1]);
    for (t, &tl) in TIER_LABELS.iter().enumerate() {
        assert_eq!(tier("tier_file_bytes", tl), snap.file_bytes[t] as f64);
        assert_eq!(tier("free_slots", tl), snap.free_slots[t] as f64);
        assert_eq!(tier("tier_slots", tl), snap.slots[t] as f64);
    }
    // Tier1 held 4 blocks; 3 left it (2 migrated, 1 deleted).
    assert_eq!(tier("tier_slots", "1"), 4.0);
    assert_eq!(tier("free_slots", "1"), 3.0);
    assert_eq!(get("tensors", ""), 1.0);
    assert_eq!(get("log_records", ""), s.log_records().unwrap() as f64);
    assert!(get("replay_seconds", "") >= 0.0);
    assert_eq!(get("replay_skipped_records", ""), 0.0);
}

#[test]
fn collections_combine_sorted_and_unavailable_ones_report_up_zero() {
    let a = store("t", "b");
    let b = store("t", "a");
    let shape = [256u32];
    a.put_block(
        BlockKey::new(1, 0),
        Tier::Tier2,
        &BlockInfo::new(DType::F32, &shape),
        &block(0.0),
    )
    .unwrap();
    let mut m = StoreMetrics::new();
    m.add(&a).unwrap();
    m.add(&b).unwrap();
    m.add(&a).unwrap(); // replaces, no duplicate series
    m.add_unavailable("s", "locked");
    assert_eq!(m.len(), 3);
    let mut text = String::new();
    m.encode(&mut text);
    let samples = parse(&text, true);
    assert_eq!(
        samples[&format!("{PREFIX}_up{{tenant=\"s\",collection=\"locked\"}}")],
        0.0
    );
    assert!(!text.contains("collection=\"locked\",tier"));
    assert_eq!(
        samples[&format!("{PREFIX}_writes_total{{tenant=\"t\",collection=\"b\"}}")],
        1.0
    );
    assert_eq!(
        samples[&format!("{PREFIX}_blocks{{tenant=\"t\",collection=\"b\",tier=\"2\"}}")],
        1.0
    );
    // Within a family, series come in (tenant, collection) order.
    let ups: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with(&format!("{PREFIX}_up{{")))
        .collect();
    assert_eq!(ups.len(), 3);
    assert!(ups[0].contains("tenant=\"s\""));
    assert!(ups[1].contains("collection=\"a\""));
    assert!(ups[2].contains("collection=\"b\""));
    // Encoding twice gives the same text.
    let mut again = String::new();
    m.encode(&mut again);
    assert_eq!(text, again);
}

#[test]
fn label_values_are_escaped() {
    // Names are validated for directory stores, not for in-memory ones.
    let mut m = StoreMetrics::new();
    m.add_snapshot("a\"b", "c\\d\ne", MetricsSnapshot::default());
    let mut text = String::new();
    m.encode(&mut text);
    assert!(
        text.contains(r#"tenant="a\"b",collection="c\\d\ne""#),
        "{text}"
    );
}
