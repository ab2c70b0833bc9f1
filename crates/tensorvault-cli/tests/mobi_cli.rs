//! End-to-end tests of `tensorvault mobi` on real files.

use std::process::Output;

mod common;
use common::{s, tv};

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_str(&ok(out)).unwrap()
}

#[test]
fn example_inspect_quantize_validate_graph() {
    let dir = tempfile::tempdir().unwrap();
    let f32p = dir.path().join("lenet.mobi");
    let q8 = dir.path().join("lenet8.mobi");
    ok(&tv(&["mobi", "example", "lenet5", s(&f32p)]));
    let v = json(&tv(&["mobi", "inspect", s(&f32p), "--json"]));
    assert_eq!(v["parameters"], 61_706);
    assert_eq!(v["name"], "lenet5-mnist");
    assert_eq!(v["tensors"].as_array().unwrap().len(), 10);
    assert_eq!(v["operators"][0]["op"], "Conv2D");
    let text = ok(&tv(&["mobi", "inspect", s(&f32p)]));
    assert!(text.contains("MOBI v2") && text.contains("Softmax"));
    assert_eq!(v["format_version"], 2);
    assert_eq!(v["tensors"][0]["quantization"]["kind"], "none");
    assert_eq!(v["operators"][0]["op_version"], 1);
    assert!(v["operators"][0]["op_version_supported"].as_u64().unwrap() >= 1);
    assert!(text.contains("op version"), "{text}");

    let q = json(&tv(&[
        "mobi",
        "quantize",
        s(&f32p),
        s(&q8),
        "--to",
        "int8",
        "--json",
    ]));
    assert!(q["ratio"].as_f64().unwrap() <= 0.30, "{q}");
    assert!(q["max_abs_error"].as_f64().unwrap() < 0.01);
    let v = json(&tv(&["mobi", "validate", s(&q8), "--json"]));
    assert_eq!(v["ok"], true);
    // Per-channel int8 for every conv and FC weight (conv1 has 150, fc3 840: both above
    // the 32-element floor); the biases stay f32.
    let v = json(&tv(&["mobi", "inspect", s(&q8), "--json"]));
    let t = v["tensors"].as_array().unwrap();
    let kinds: Vec<&str> = t
        .iter()
        .map(|t| t["quantization"]["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "per-axis", "none", "per-axis", "none", "per-axis", "none", "per-axis", "none",
            "per-axis", "none"
        ]
    );
    let conv2 = &t[2]["quantization"];
    assert_eq!(
        (conv2["axis"].clone(), conv2["channels"].clone()),
        (0.into(), 16.into())
    );
    assert!(conv2["scale_min"].as_f64().unwrap() > 0.0);
    assert!(conv2["scale_max"].as_f64().unwrap() >= conv2["scale_min"].as_f64().unwrap());
    let text = ok(&tv(&["mobi", "inspect", s(&q8)]));
    assert!(text.contains("per-axis axis 0 x16 scale "), "{text}");

    let dot = ok(&tv(&["mobi", "graph", s(&q8), "--dot"]));
    assert!(dot.starts_with("digraph mobi {") && dot.contains("-> out0"));

    let gz = dir.path().join("c16.mobi");
    let c = dir.path().join("cifar.mobi");
    ok(&tv(&["mobi", "example", "cifar10", s(&c)]));
    let q = json(&tv(&[
        "mobi",
        "quantize",
        s(&c),
        s(&gz),
        "--to",
        "fp16",
        "--gzip",
        "--json",
    ]));
    assert!(q["ratio"].as_f64().unwrap() < 0.5);
}

#[test]
fn validate_lists_every_problem_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("m.mobi");
    ok(&tv(&["mobi", "example", "lenet5", s(&p)]));
    let mut b = std::fs::read(&p).unwrap();
    b[6] = 1; // reserved field (also breaks the header checksum)
    let mid = b.len() / 2;
    b[mid] ^= 4; // a weight bit (file checksum)
    std::fs::write(&p, &b).unwrap();
    let out = tv(&["mobi", "validate", s(&p), "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["problems"].as_array().unwrap().len() >= 3, "{v}");
    let out = tv(&["mobi", "inspect", s(&p)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("checksum"));
}

/// Names come from the file: printed raw, an escape sequence in one could clear the
/// terminal or forge lines of output (issue 16). Text output escapes control characters.
#[test]
fn control_characters_in_names_are_escaped() {
    use tensorvault_formats::mobi::{models, WriteOptions};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("evil.mobi");
    let mut m = models::lenet5(1).unwrap();
    m.metadata.name = "evil\u{1b}[2J\nFAKE LINE".into();
    m.inputs[0].name = "in\u{1b}]0;pwned\u{7}".into();
    m.save(&path, &WriteOptions::default()).unwrap();
    for args in [
        vec!["mobi", "inspect", s(&path)],
        vec!["mobi", "graph", s(&path)],
        vec!["mobi", "graph", "--dot", s(&path)],
        vec!["mobi", "validate", s(&path)],
    ] {
        let out = ok(&tv(&args));
        assert!(
            !out.contains('\u{1b}') && !out.contains('\u{7}'),
            "{args:?}: {out:?}"
        );
        assert!(
            !out.lines().any(|l| l.starts_with("FAKE")),
            "{args:?}: {out}"
        );
    }
    let text = ok(&tv(&["mobi", "inspect", s(&path)]));
    assert!(text.contains(r"evil\u{1b}[2J\nFAKE LINE"), "{text}");
    // JSON output keeps the exact name (serde escapes control characters itself).
    assert_eq!(
        json(&tv(&["mobi", "inspect", s(&path), "--json"]))["name"],
        "evil\u{1b}[2J\nFAKE LINE"
    );
}
