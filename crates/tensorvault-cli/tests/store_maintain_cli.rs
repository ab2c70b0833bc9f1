//! `tensorvault store maintain` over every collection under ROOT, and `--watch` run as a
//! child process until SIGTERM.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use common::{ok, s, store_put, tv, write_npy};

/// Four blocks (4 x 4096 f32) as tensor `x` of `tenant/collection`, in tier 1.
fn put4(root: &Path, tenant: &str, collection: &str) {
    let npy = root.with_extension(format!("{tenant}.{collection}.npy"));
    let vals: Vec<f32> = (0..4 * 4096).map(|i| (i as f32 * 0.01).sin()).collect();
    write_npy(&npy, &[vals.len() as u64], &vals);
    ok(&store_put(root, [tenant, collection, "x"], &npy, "1", &[]));
}

fn json(out: &str) -> serde_json::Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

#[test]
fn maintain_without_a_collection_runs_on_every_collection() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("r");
    put4(&root, "acme", "emb");
    put4(&root, "beta", "kv");
    let v = json(&ok(&tv(&[
        "store",
        "maintain",
        s(&root),
        "--max-blocks=-,1,-,-",
        "--json",
    ])));
    let runs = v.as_array().expect("one object per collection");
    assert_eq!(runs.len(), 2, "{v}");
    for (r, (t, c)) in runs.iter().zip([("acme", "emb"), ("beta", "kv")]) {
        assert_eq!(
            (r["tenant"].as_str(), r["collection"].as_str()),
            (Some(t), Some(c))
        );
        assert_eq!(r["moved"], 3, "{r}");
        assert_eq!(r["moves"][0]["reason"], "capacity");
        assert_eq!(r["blocks_after"], serde_json::json!([0, 1, 3, 0]));
    }
    // The moves are in the logs: a second run over both finds nothing to do.
    let text = ok(&tv(&["store", "maintain", s(&root)]));
    assert!(
        text.contains("acme/emb: 4 blocks scored, 0 moved"),
        "{text}"
    );
    assert!(text.contains("beta/kv: 4 blocks scored, 0 moved"), "{text}");
    assert_eq!(
        text.matches("blocks per tier: 0/1/3/0 -> 0/1/3/0").count(),
        2
    );
    // A tenant without a collection is a usage error.
    let bad = tv(&["store", "maintain", s(&root), "acme"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("give both or neither"));
}

#[test]
fn dry_run_prints_the_planned_moves_and_moves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("r");
    put4(&root, "acme", "emb");
    let maintain = |extra: &[&str]| {
        let mut args = vec!["store", "maintain", s(&root), "acme", "emb"];
        args.extend_from_slice(extra);
        ok(&tv(&args))
    };
    let v = json(&maintain(&["--max-blocks=-,1,-,-", "--dry-run", "--json"]));
    assert_eq!(v["dry_run"], true, "{v}");
    assert_eq!(v["moved"], 0, "{v}");
    let planned = v["planned"].as_array().expect("planned moves");
    assert_eq!(planned.len(), 3, "{v}");
    assert!(planned
        .iter()
        .all(|m| m["from_tier"] == 1 && m["to_tier"] == 2 && m["reason"] == "capacity"));
    assert_eq!(v["blocks_after"], serde_json::json!([0, 4, 0, 0]));
    let text = maintain(&["--max-blocks=-,1,-,-", "--dry-run"]);
    assert!(
        text.contains("3 would move (dry run, nothing moved)"),
        "{text}"
    );
    let rows = text
        .lines()
        .filter(|l| l.contains("tier1  tier2  capacity"));
    assert_eq!(rows.count(), 3, "{text}");
    // Nothing moved: the real run still finds all three.
    let v = json(&maintain(&["--max-blocks=-,1,-,-", "--json"]));
    assert_eq!(v["moved"], 3, "{v}");
    assert_eq!(v["blocks_after"], serde_json::json!([0, 1, 3, 0]));
    // --dry-run with --watch is a usage error.
    let bad = tv(&["store", "maintain", s(&root), "--dry-run", "--watch", "5"]);
    assert_eq!(bad.status.code(), Some(2));
}

/// Kills the child when the test ends early, however it ends.
struct Watcher(Child);

impl Drop for Watcher {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[cfg(unix)]
#[test]
fn watch_repeats_until_sigterm_then_exits_0_with_the_store_closed() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("r");
    put4(&root, "acme", "emb");
    put4(&root, "beta", "kv");
    let mut child = Command::new(env!("CARGO_BIN_EXE_tensorvault"))
        .args([
            "-q",
            "store",
            "maintain",
            s(&root),
            "--watch",
            "1",
            "--json",
        ])
        .arg("--max-blocks=-,1,-,-")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tensorvault store maintain --watch");
    let stdout = child.stdout.take().unwrap();
    let mut w = Watcher(child);
    // Three rounds over both collections: one JSON object per collection and round.
    let mut lines = BufReader::new(stdout).lines();
    let mut seen = Vec::new();
    while seen.len() < 6 {
        let line = lines
            .next()
            .expect("the watcher exited early")
            .expect("read stdout");
        seen.push(json(&line));
    }
    for (i, v) in seen.iter().enumerate() {
        let round = i / 2 + 1;
        assert_eq!(v["round"], round, "{v}");
        assert_eq!(v["tenant"], ["acme", "beta"][i % 2], "{v}");
        // The first round moves the blocks over capacity; later rounds find none.
        assert_eq!(v["moved"], if round == 1 { 3 } else { 0 }, "{v}");
        assert_eq!(v["blocks_after"], serde_json::json!([0, 1, 3, 0]), "{v}");
    }
    let pid = w.0.id().to_string();
    let kill = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(kill.success());
    let status = w.0.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{status:?}");
    let mut err = String::new();
    std::io::Read::read_to_string(&mut w.0.stderr.take().unwrap(), &mut err).unwrap();
    assert!(err.is_empty(), "{err}");
    // Closed properly: nothing locked, every block and log record checks out, and the
    // moves are durable.
    let out = ok(&tv(&["store", "verify", s(&root)]));
    assert_eq!(out.matches(": ok").count(), 2, "{out}");
    let v = json(&ok(&tv(&["store", "ls", s(&root), "--json"])));
    for c in v.as_array().unwrap() {
        assert_eq!(c["blocks"], serde_json::json!([0, 1, 3, 0]), "{c}");
    }
}
