//! The server stopped (SIGKILL) in the middle of a stream of writes: the writer gets a
//! typed error, and after a restart with the same data (moto's recorder replays every
//! request the dead server received) every acknowledged tensor reads back bit-exact, the
//! store verifies clean and takes new writes.

mod common;

use std::sync::mpsc;
use std::time::Duration;

use common::{f32_bytes, http_full, open, server_or_skip, Server};
use tensorvault_store::{DType, StoreConfig, StoreErr, Tier};
use tensorvault_store_object::manifest::Layout;
use tensorvault_store_object::{object_err, ObjectErr, ObjectLocation, ObjectOptions};

#[test]
fn server_killed_mid_write_loses_no_acknowledged_block_objects() {
    killed(Layout::Objects);
}

#[test]
fn server_killed_mid_write_loses_no_acknowledged_block_packs() {
    killed(Layout::Packs);
}

fn killed(layout: Layout) {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("moto-recording.jsonl");
    let test = format!("server_killed_mid_write_loses_no_acknowledged_block ({layout:?})");
    let Some(srv) = server_or_skip(&test, Some(&rec)) else {
        return;
    };
    srv.create_bucket("restart");
    let loc = ObjectLocation::parse("s3://restart/stores").unwrap();
    let opts = ObjectOptions {
        layout,
        ..srv.options()
    };
    let store = open(&srv, &loc, "w", &opts, StoreConfig::default()).unwrap();
    let (tx, rx) = mpsc::channel();
    // The writer: tensors of 1..=3 blocks until a put fails.
    let writer = std::thread::spawn(move || {
        let mut acked = Vec::new();
        for i in 0u32..10_000 {
            let n = 4096 * (1 + i as usize % 3) - 7 * (i as usize % 2);
            let data = f32_bytes(n, i);
            match store.put_tensor(
                &format!("t{i}"),
                DType::F32,
                &[n as u32],
                &data,
                Tier::Tier0,
            ) {
                Ok(_) => {
                    acked.push((i, n));
                    let _ = tx.send(i);
                }
                Err(e) => return (acked, Some(e)),
            }
        }
        (acked, None)
    });
    // Let some writes land, then kill the server under the writer.
    for _ in 0..8 {
        rx.recv_timeout(Duration::from_secs(120))
            .expect("writer makes progress");
    }
    srv.kill();
    let (acked, err) = writer.join().unwrap();
    let e: StoreErr = err.expect("a write must fail once the server is gone");
    assert!(
        matches!(object_err(&e), Some(ObjectErr::Unavailable { .. })),
        "typed 'unavailable' error, got {e}"
    );
    eprintln!(
        "{} puts acknowledged before the kill; then: {e}",
        acked.len()
    );
    assert!(acked.len() >= 8);
    // Restart with the same data: a new server replays the recording of the old one.
    sanitize_recording(&rec);
    let srv = Server::start(Some(&rec)).expect("restart the server");
    let (code, body) = http_full(srv.port, "POST", "/moto-api/recorder/replay-recording").unwrap();
    if code != 200 {
        let log = std::fs::read_to_string(rec.with_extension(format!("{}.log", srv.port)))
            .unwrap_or_default();
        let tail: String = log
            .lines()
            .filter(|l| !l.contains("\" 200 -") && !l.contains("\" 404 -"))
            .collect::<Vec<_>>()
            .join("\n");
        panic!(
            "replay failed with {code}: {}\nserver logs (tail): {tail}",
            &body[..body.len().min(500)]
        );
    }
    let opts = srv.options();
    let s = open(&srv, &loc, "w", &opts, StoreConfig::default()).expect("the store reopens");
    for &(i, n) in &acked {
        let got = s
            .get_tensor(&format!("t{i}"))
            .unwrap_or_else(|e| panic!("acknowledged t{i}: {e}"));
        assert_eq!(got.data, f32_bytes(n, i), "t{i}");
    }
    let v = s.verify().unwrap();
    assert!(v.problems.is_empty(), "{:?}", v.problems);
    // The unacknowledged put is all or nothing.
    let next = acked.len() as u32;
    if let Ok(t) = s.get_tensor(&format!("t{next}")) {
        let n = 4096 * (1 + next as usize % 3) - 7 * (next as usize % 2);
        assert_eq!(t.data, f32_bytes(n, next));
    }
    // And it takes new writes.
    let fresh = f32_bytes(5000, 99);
    s.put_tensor("after", DType::F32, &[5000], &fresh, Tier::Tier0)
        .unwrap();
    s.close().unwrap();
    let s = open(&srv, &loc, "w", &opts, StoreConfig::default()).unwrap();
    assert_eq!(s.get_tensor("after").unwrap().data, fresh);
}

/// moto's recorder appends `entry` and `"\n"` with two writes from each server thread, so
/// concurrent requests can share a line, and the kill can tear the last entry: rewrite
/// the file as one JSON entry per line, up to the first torn one.
fn sanitize_recording(rec: &std::path::Path) {
    let text = std::fs::read_to_string(rec).unwrap_or_default();
    let mut out = String::new();
    'lines: for line in text.lines() {
        for v in serde_json::Deserializer::from_str(line).into_iter::<serde_json::Value>() {
            match v {
                Ok(v) => {
                    out.push_str(&v.to_string());
                    out.push('\n');
                }
                Err(_) => break 'lines,
            }
        }
    }
    std::fs::write(rec, out).unwrap();
}
