//! `tensorvault store report`: the HTML report of a small store, with and without a
//! simulation history.

mod common;

use std::path::Path;

use common::{ok, s, store_put, tv, write_npy};

/// A store with 3 blocks in tier 0 and 5 in tier 3 (blocks of 64 elements).
fn small_store(root: &Path) {
    let a = root.join("a.npy");
    let b = root.join("b.npy");
    let vals: Vec<f32> = (0..320).map(|i| (i as f32 * 0.1).sin()).collect();
    write_npy(&a, &[3, 64], &vals[..192]);
    write_npy(&b, &[5, 64], &vals);
    let store = root.join("store");
    for (name, file, tier) in [("hot", &a, "0"), ("cold", &b, "3")] {
        ok(&store_put(
            &store,
            ["acme", "kv", name],
            file,
            tier,
            &["--block-elems", "64", "--durability", "os"],
        ));
    }
}

const HISTORY: &str = r#"{"config":{"layers":2,"heads":1,"head_dim":128},
"samples":[
{"step":0,"tokens":512,"blocks":[8,0,0,0],"payload_bytes":[262144,0,0,0],"disk_bytes":300000,"f16_bytes":262144,"window_read_p50_us":5.5,"window_read_p99_us":9.25},
{"step":64,"tokens":576,"blocks":[6,2,1,0],"payload_bytes":[196608,8448,5000,0],"disk_bytes":310000,"f16_bytes":294912,"window_read_p50_us":5.0,"window_read_p99_us":8.0},
{"step":128,"tokens":640,"blocks":[10,20,30,40],"payload_bytes":[196608,8448,5000,6272],"disk_bytes":320000,"f16_bytes":327680,"window_read_p50_us":4.75,"window_read_p99_us":7.5}
],
"error_by_tier":[{"kind":"all","tier":3,"block_checks":77,"max_abs":0.4321,"rmse":0.1234,"rel_rmse":0.25}]}"#;

fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

#[test]
fn report_has_charts_and_numbers() {
    let dir = tempfile::tempdir().unwrap();
    small_store(dir.path());
    let store = dir.path().join("store");
    let hist = dir.path().join("sim.json");
    std::fs::write(&hist, HISTORY).unwrap();
    let out = dir.path().join("report.html");
    let stdout = ok(&tv(&[
        "store",
        "report",
        s(&store),
        "--out",
        s(&out),
        "--history",
        s(&hist),
    ]));
    assert!(stdout.contains("1 collections, 8 blocks"), "{stdout}");
    let html = std::fs::read_to_string(&out).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.trim_end().ends_with("</html>"));
    // Self-contained: no external scripts, styles or images.
    assert!(!html.contains("src=") && !html.contains("href="));
    // Five inline charts: blocks per tier and bytes over time, latency, the tier counts
    // and the score histogram.
    assert_eq!(count(&html, "<svg"), 5, "{html}");
    assert_eq!(count(&html, "</svg>"), 5);
    assert!(count(&html, "<polygon") >= 4, "one stacked band per tier");
    assert!(
        count(&html, "<rect") >= 2 + 2,
        "bars of two non-empty tiers, twice"
    );
    for title in [
        "KV-cache simulation",
        "Blocks per tier",
        "Bytes on disk",
        "Read latency",
        "Migration score distribution",
        "Reconstruction error by tier",
        "Collection acme/kv",
    ] {
        assert!(html.contains(title), "{title} missing");
    }
    // The numbers: per-tier blocks of the store, the last sample, the error table.
    assert!(html.contains("tier0 (raw)</td><td>3</td>"), "{html}");
    assert!(html.contains("tier3 (3-bit)</td><td>5</td>"));
    assert!(html.contains("tier1 (8-bit)</td><td>0</td>"));
    assert!(html.contains("2 tensors, 8 blocks"));
    assert!(html.contains("blocks per tier 10 / 20 / 30 / 40"));
    assert!(
        html.contains("97.7% of the same cache in f16"),
        "320000 / 327680"
    );
    assert!(html.contains("<td>77</td><td>0.4321</td><td>0.12340</td><td>25.00%</td>"));
    // The axis labels of the charts carry the data's scale: 100 blocks at the last step.
    assert!(html.contains("\n100\n</text>"), "y axis to 100");
}

#[test]
fn report_without_history_and_for_one_collection() {
    let dir = tempfile::tempdir().unwrap();
    small_store(dir.path());
    let store = dir.path().join("store");
    let out = dir.path().join("one.html");
    ok(&tv(&[
        "store",
        "report",
        s(&store),
        "acme",
        "kv",
        "--out",
        s(&out),
    ]));
    let html = std::fs::read_to_string(&out).unwrap();
    assert_eq!(count(&html, "<svg"), 2, "tier counts and scores only");
    assert!(!html.contains("KV-cache simulation"));
    assert!(html.contains("Migration score distribution"));
    // Every block was just written and never read: all eight score alike, in one bin.
    assert!(html.contains("scores at tick"));
}

#[test]
fn report_refuses_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    small_store(dir.path());
    let store = dir.path().join("store");
    let out = dir.path().join("r.html");
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, r#"{"samples": []}"#).unwrap();
    let o = tv(&[
        "store",
        "report",
        s(&store),
        "--out",
        s(&out),
        "--history",
        s(&bad),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--history"));
    assert!(!out.exists(), "no partial report");
    let o = tv(&["store", "report", s(&store), "acme", "--out", s(&out)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("give both or neither"));
    let o = tv(&[
        "store",
        "report",
        s(&store),
        "acme",
        "nope",
        "--out",
        s(&out),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(!out.exists());
}
