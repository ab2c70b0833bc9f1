//! `tensorvault kv ls|stats|verify|evict ROOT` on prefix caches written through the
//! library: text and JSON, read-only verbs leave every byte of ROOT as it was, damage is
//! reported with exit 1, eviction by size and whole, bad arguments and a damaged manifest
//! are one-line errors.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{ok, s, tv};
use half::f16;
use tensorvault_store::prefix::{collection_name, KvData, PrefixConfig};
use tensorvault_store::{BlockKey, PrefixCache};

const L: u32 = 2;
const H: u32 = 2;
const D: u32 = 16;
const CHUNK: u32 = 8;

fn cfg() -> PrefixConfig {
    PrefixConfig {
        chunk_tokens: CHUNK,
        ..PrefixConfig::default()
    }
}

fn toks(n: usize, salt: u32) -> Vec<u32> {
    (0..n as u32).map(|i| i * 13 + salt).collect()
}

fn store(c: &PrefixCache, t: &[u32]) {
    let mk = |k: u32| -> Vec<Vec<f16>> {
        (0..L)
            .map(|l| {
                (0..H as usize * t.len() * D as usize)
                    .map(|i| f16::from_f32(((i as u32 + l * 7 + k * 3) % 50) as f32 / 10.0))
                    .collect()
            })
            .collect()
    };
    let (k, v) = (mk(0), mk(1));
    let kd: Vec<KvData> = k.iter().map(|x| KvData::F16(x)).collect();
    let vd: Vec<KvData> = v.iter().map(|x| KvData::F16(x)).collect();
    c.store(t, &kd, &vd).unwrap();
}

/// Model "alpha": 4 chunks, loaded once (4 hit chunks) and missed once (2 miss chunks);
/// model "beta": 2 chunks.
fn setup(root: &Path) {
    let a = PrefixCache::open(root, "alpha", L, H, D, cfg()).unwrap();
    let t = toks(32, 1);
    store(&a, &t);
    assert_eq!(a.load(&t, None).unwrap().tokens, 32);
    assert_eq!(a.lookup(&toks(16, 99)).unwrap(), 0);
    a.close().unwrap();
    let b = PrefixCache::open(root, "beta", L, H, D, cfg()).unwrap();
    store(&b, &toks(16, 2));
    b.close().unwrap();
}

fn json(out: &str) -> serde_json::Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// Every file under `dir` with its bytes and modification time.
fn snapshot(dir: &Path) -> BTreeMap<String, (Vec<u8>, std::time::SystemTime)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            if m.is_dir() {
                stack.push(e.path());
            } else {
                out.insert(
                    e.path().display().to_string(),
                    (std::fs::read(e.path()).unwrap(), m.modified().unwrap()),
                );
            }
        }
    }
    out
}

#[test]
fn ls_and_stats_per_model_in_text_and_json() {
    let dir = tempfile::tempdir().unwrap();
    setup(dir.path());
    let text = ok(&tv(&["kv", "ls", s(dir.path())]));
    assert!(text.contains("alpha") && text.contains("beta"), "{text}");
    assert!(text.contains("2x2x16"), "{text}");
    let v = json(&ok(&tv(&["kv", "ls", s(dir.path()), "--json"])));
    let models = v["models"].as_array().unwrap();
    assert_eq!(models.len(), 2);
    let alpha = models.iter().find(|m| m["model"] == "alpha").unwrap();
    assert_eq!(
        (alpha["chunks"].as_u64(), alpha["tokens"].as_u64()),
        (Some(4), Some(32))
    );
    let chunk_bytes = u64::from(2 * L * H * CHUNK * D * 2);
    assert_eq!(alpha["bytes"].as_u64(), Some(4 * chunk_bytes));

    let v = json(&ok(&tv(&[
        "kv",
        "stats",
        s(dir.path()),
        "--model",
        "alpha",
        "--json",
    ])));
    let m = &v["models"][0];
    assert_eq!(v["models"].as_array().unwrap().len(), 1);
    assert_eq!(m["tier_chunks"][0].as_u64(), Some(4));
    assert_eq!(m["tier_bytes"][0].as_u64(), Some(4 * chunk_bytes));
    assert_eq!(m["f16_bytes"].as_u64(), Some(4 * chunk_bytes));
    assert_eq!(m["uses"]["hit_chunks"].as_u64(), Some(4));
    assert_eq!(m["uses"]["miss_chunks"].as_u64(), Some(2));
    assert_eq!(m["uses"]["stored_chunks"].as_u64(), Some(4));
    assert_eq!(m["uses"]["lookups"].as_u64(), Some(2));
    let rate = m["hit_rate"].as_f64().unwrap();
    assert!((rate - 4.0 / 6.0).abs() < 1e-9, "{rate}");
    let text = ok(&tv(&["kv", "stats", s(dir.path())]));
    assert!(text.contains("4 / 2 (66.7% hits)"), "{text}");
    assert!(text.contains("T0 4, T1 0"), "{text}");
}

#[test]
fn read_only_verbs_never_write() {
    let dir = tempfile::tempdir().unwrap();
    setup(dir.path());
    let before = snapshot(dir.path());
    for verb in ["ls", "stats", "verify"] {
        ok(&tv(&["kv", verb, s(dir.path())]));
        ok(&tv(&["kv", verb, s(dir.path()), "--json"]));
    }
    assert_eq!(snapshot(dir.path()), before);
}

#[test]
fn verify_reports_a_damaged_chunk_with_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    setup(dir.path());
    assert!(ok(&tv(&["kv", "verify", s(dir.path())]))
        .contains("alpha: 4 chunks, 32 blocks checked, ok"));
    // Flip a byte of alpha's chunk 1, block 2.
    let t = toks(32, 1);
    let ids = tensorvault_store::prefix::chain::chunk_ids("alpha", CHUNK, &t);
    let c = PrefixCache::open(
        dir.path(),
        "alpha",
        L,
        H,
        D,
        PrefixConfig {
            read_only: true,
            ..cfg()
        },
    )
    .unwrap();
    let st = c.tensor_store().unwrap();
    let tid = st.tensor_id_of(&tensorvault_store::prefix::chain::chunk_name(
        ids[1].0, ids[1].1,
    ));
    let meta = st.meta(&BlockKey::new(tid, 2)).unwrap().unwrap();
    drop((st, c));
    let file = dir
        .path()
        .join("prefix")
        .join(collection_name("alpha"))
        .join(meta.tier.file_name());
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[meta.data_offset as usize + 3] ^= 0x10;
    std::fs::write(&file, bytes).unwrap();

    let o = tv(&["kv", "verify", s(dir.path())]);
    assert_eq!(o.status.code(), Some(1));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.contains("1 damaged"), "{text}");
    assert!(text.contains(&format!("{:032x}", ids[1].0)), "{text}");
    assert!(
        text.contains("beta: 2 chunks, 16 blocks checked, ok"),
        "{text}"
    );
    let o = tv(&["kv", "verify", s(dir.path()), "--json"]);
    assert_eq!(o.status.code(), Some(1));
    let v = json(&String::from_utf8(o.stdout).unwrap());
    assert_eq!(v["ok"], false);
}

#[test]
fn evict_to_a_size_then_all() {
    let dir = tempfile::tempdir().unwrap();
    setup(dir.path());
    let chunk_bytes = u64::from(2 * L * H * CHUNK * D * 2);
    let v = json(&ok(&tv(&[
        "kv",
        "evict",
        s(dir.path()),
        "--model",
        "alpha",
        "--to-bytes",
        &(2 * chunk_bytes + 1).to_string(),
        "--json",
    ])));
    let m = &v["models"][0];
    assert_eq!(m["evicted_chunks"].as_u64(), Some(2));
    assert_eq!(m["bytes_after"].as_u64(), Some(2 * chunk_bytes));
    // Suffixes went first: the prompt's first two chunks are still found.
    let c = PrefixCache::open(
        dir.path(),
        "alpha",
        L,
        H,
        D,
        PrefixConfig {
            read_only: true,
            ..cfg()
        },
    )
    .unwrap();
    assert_eq!(c.lookup(&toks(32, 1)).unwrap(), 16);
    drop(c);
    let text = ok(&tv(&["kv", "evict", s(dir.path()), "--all"]));
    assert!(text.contains("alpha: evicted 2 chunks"), "{text}");
    assert!(text.contains("beta: evicted 2 chunks"), "{text}");
    let v = json(&ok(&tv(&["kv", "ls", s(dir.path()), "--json"])));
    assert!(v["models"]
        .as_array()
        .unwrap()
        .iter()
        .all(|m| m["chunks"] == 0));
    let v = json(&ok(&tv(&[
        "kv",
        "stats",
        s(dir.path()),
        "--model",
        "alpha",
        "--json",
    ])));
    assert_eq!(v["models"][0]["uses"]["evicted_chunks"].as_u64(), Some(4));
}

#[test]
fn bad_arguments_and_a_damaged_manifest_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    setup(dir.path());
    let err = |args: &[&str]| {
        let o = tv(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        String::from_utf8(o.stderr).unwrap()
    };
    let e = err(&["kv", "stats", s(dir.path()), "--model", "gamma"]);
    assert!(e.contains("no prefix cache of model \"gamma\""), "{e}");
    assert_eq!(e.trim_end().lines().count(), 1, "{e}");
    let e = err(&["kv", "evict", s(dir.path())]);
    assert!(e.contains("--to-bytes") || e.contains("--all"), "{e}");
    let e = err(&["kv", "ls", s(&dir.path().join("missing"))]);
    assert!(e.contains("not a directory"), "{e}");
    // Damage beta's manifest: its model field's checksum no longer matches.
    let man = dir
        .path()
        .join("prefix")
        .join(collection_name("beta"))
        .join("prefix.model");
    let mut b = std::fs::read(&man).unwrap();
    b[12] ^= 1;
    std::fs::write(&man, b).unwrap();
    let e = err(&["kv", "ls", s(dir.path())]);
    assert!(e.contains("prefix.model") && e.contains("crc32c"), "{e}");
    assert_eq!(e.trim_end().lines().count(), 1, "{e}");
    // Other models stay usable with --model.
    ok(&tv(&["kv", "ls", s(dir.path()), "--model", "alpha"]));
}
