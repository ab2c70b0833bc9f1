//! `tensorvault registry ...` end to end on a tiny registry.

use std::process::Command;

fn tv(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tensorvault"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn registry_commands_manage_a_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("reg");
    let r = root.to_str().unwrap();
    let (code, out, err) = tv(&["registry", "init", r, "--seed", "7", "--tiny"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("0.0.0-init") && out.contains("sha256:"),
        "{out}"
    );
    let (code, _, err) = tv(&["registry", "init", r, "--tiny"]);
    assert_eq!(code, 2);
    assert!(err.contains("already exists"), "{err}");

    let (code, out, _) = tv(&["registry", "ls", r]);
    assert_eq!(code, 0);
    assert!(
        out.contains("0.0.0-init") && out.contains("current"),
        "{out}"
    );
    let (code, out, _) = tv(&["registry", "ls", r, "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["versions"][0]["version"], "0.0.0-init");

    assert_eq!(tv(&["registry", "verify", r, "0.0.0-init"]).0, 0);
    assert_eq!(tv(&["registry", "rollback", r, "0.0.0-init"]).0, 0);
    let (code, _, err) = tv(&["registry", "verify", r, "../../etc"]);
    assert_eq!(code, 2);
    assert!(err.starts_with("error: invalid version"), "{err}");
    assert_eq!(tv(&["registry", "rollback", r, "9.9.9"]).0, 2);

    let ckpt = root.join("versions/0.0.0-init");
    let (code, out, _) = tv(&["registry", "inspect", ckpt.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let temp = v
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "gating.temperature")
        .unwrap();
    assert_eq!(temp["stats"]["mean"], 1.0);

    // A tampered checkpoint is not shown as if it were the saved one (issue 16).
    let weights = ckpt.join("weights.safetensors");
    let pristine = std::fs::read(&weights).unwrap();
    let mut bad = pristine.clone();
    let n = bad.len();
    bad[n - 3] ^= 0x40;
    std::fs::write(&weights, &bad).unwrap();
    let (code, _, err) = tv(&["registry", "inspect", ckpt.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("checksum mismatch"), "{err}");
    let (code, _, err) = tv(&["registry", "inspect", ckpt.to_str().unwrap(), "--no-verify"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("not checked"), "{err}");
    std::fs::write(&weights, &pristine).unwrap();

    // One flipped byte -> verify reports the damage with exit code 1 (as every verify).
    let w = ckpt.join("weights.safetensors");
    let mut b = std::fs::read(&w).unwrap();
    let i = b.len() - 1;
    b[i] ^= 1;
    std::fs::write(&w, b).unwrap();
    let (code, _, err) = tv(&["registry", "verify", r, "0.0.0-init"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("CORRUPT") && err.contains("checksum mismatch"),
        "{err}"
    );
    // A hand-edited manifest (its checksum now stale) is damage too.
    let manifest = std::path::Path::new(r).join("registry.json");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        text.replace("\"retention\": null", "\"retention\": 5"),
    )
    .unwrap();
    let (code, _, err) = tv(&["registry", "verify", r, "0.0.0-init"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("manifest checksum mismatch"), "{err}");
    assert_eq!(tv(&["registry", "ls", "/nonexistent/registry"]).0, 2);
}

#[test]
fn registry_save_adds_versions_with_metrics() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("reg");
    let r = root.to_str().unwrap();
    assert_eq!(tv(&["registry", "init", r, "--seed", "3", "--tiny"]).0, 0);
    // Without --from: the active weights, auto version, JSON and string metrics.
    let (code, out, err) = tv(&[
        "registry",
        "save",
        r,
        "--metric",
        "loss=0.25",
        "--metric",
        "epoch=2",
        "--metric",
        "note=first save",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["version"], "0.0.1");
    assert!(v["checksum"].as_str().unwrap().starts_with("sha256:"));
    assert!(v["bytes"].as_u64().unwrap() > 0);
    // From a checkpoint directory, explicit version, table output.
    let ckpt = root.join("versions/0.0.0-init");
    let (code, out, err) = tv(&[
        "registry",
        "save",
        r,
        "--version",
        "1.0.0",
        "--from",
        ckpt.to_str().unwrap(),
        "--metric",
        "accuracy=0.9",
        "--metric",
        "tags=[\"a\",1]",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("1.0.0") && out.contains("sha256:"), "{out}");

    let (code, out, _) = tv(&["registry", "ls", r, "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let vs = v["versions"].as_array().unwrap();
    assert_eq!(vs.len(), 3, "{out}");
    assert_eq!(vs[1]["metrics"]["loss"], 0.25);
    assert_eq!(vs[1]["metrics"]["epoch"], 2);
    assert_eq!(vs[1]["metrics"]["note"], "first save");
    assert_eq!(vs[2]["version"], "1.0.0");
    assert_eq!(vs[2]["metrics"]["accuracy"], 0.9);
    assert_eq!(vs[2]["metrics"]["tags"], serde_json::json!(["a", 1]));
    // Same weights, same file bytes.
    assert_eq!(vs[0]["checksum"], vs[2]["checksum"]);
    assert_eq!(v["current"], "0.0.0-init");

    let (code, out, err) = tv(&["registry", "rollback", r, "0.0.1"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("0.0.1"), "{out}");
    assert_eq!(tv(&["registry", "verify", r, "0.0.1"]).0, 0);

    // Typed errors: one line, exit code 2.
    let (code, _, err) = tv(&["registry", "save", r, "--version", "1.0.0"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("already exists") && err.lines().count() == 1,
        "{err}"
    );
    let missing = tmp.path().join("nope");
    let (code, _, err) = tv(&["registry", "save", r, "--from", missing.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.starts_with("error:"), "{err}");
    assert_eq!(tv(&["registry", "save", r, "--metric", "epoch=x"]).0, 2);
    assert_eq!(tv(&["registry", "save", "/nonexistent/registry"]).0, 2);
}

#[test]
fn demo_json_has_a_registry_with_two_versions() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("demo");
    let d = d.to_str().unwrap();
    let args = [
        "demo",
        d,
        "--rows",
        "200",
        "--dim",
        "16",
        "--chunk-size",
        "100",
    ];
    let (code, out, err) = tv(&[&args[..], &["--json"]].concat());
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["results"].as_array().unwrap().len(), 3);
    let r = &v["registry"];
    let vs = r["versions"].as_array().unwrap();
    assert_eq!(vs.len(), 2, "{r}");
    assert!(vs.iter().all(|x| x["verified"] == true));
    assert_ne!(vs[0]["checksum"], vs[1]["checksum"]);
    assert_eq!(vs[1]["metrics"]["init_seed"], 7);
    assert_eq!(r["hot_swapped_to"], "1.1.0");
    assert_eq!(r["current"], "1.0.0");
    assert_eq!(r["old_reader_intact"], true);
    // Running again replaces the demo registry instead of failing.
    let (code, out, err) = tv(&args);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Registry:"), "{out}");
}

/// A small safetensors file of several dtypes; returns its bytes.
fn st_file(path: &std::path::Path, names: &[&str], seed: u8) -> Vec<u8> {
    use safetensors::tensor::{Dtype, TensorView};
    let data: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = names
        .iter()
        .map(|n| {
            let (d, shape) = match *n {
                "ids" => (Dtype::I64, vec![3]),
                "a.half" => (Dtype::F16, vec![10]),
                _ => (Dtype::F32, vec![4, 6]),
            };
            let len = shape.iter().product::<usize>() * d.size();
            let b = (0..len)
                .map(|j| (j as u8).wrapping_mul(31) ^ seed)
                .collect();
            ((*n).to_owned(), d, shape, b)
        })
        .collect();
    let views: Vec<(String, TensorView<'_>)> = data
        .iter()
        .map(|(n, d, s, b)| (n.clone(), TensorView::new(*d, s.clone(), b).unwrap()))
        .collect();
    let out = safetensors::serialize(views, &None).unwrap();
    std::fs::write(path, &out).unwrap();
    out
}

#[test]
fn registry_takes_any_safetensors_checkpoint() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("models");
    let r = root.to_str().unwrap();
    // A single file into a registry that does not exist yet.
    let single = tmp.path().join("m.safetensors");
    let original = st_file(&single, &["a.weight", "a.half", "ids"], 1);
    let (code, out, err) = tv(&[
        "registry",
        "save",
        r,
        "--from-safetensors",
        single.to_str().unwrap(),
        "--version",
        "1.0.0",
        "--metric",
        "loss=0.5",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["version"], "1.0.0");
    assert_eq!(v["files"][0]["path"], "model.safetensors");
    let saved = root.join("versions/1.0.0/model.safetensors");
    assert_eq!(
        std::fs::read(&saved).unwrap(),
        original,
        "copied bit-exactly"
    );
    // A sharded Hugging Face directory.
    let hf = tmp.path().join("hf");
    std::fs::create_dir_all(&hf).unwrap();
    st_file(
        &hf.join("model-00001-of-00002.safetensors"),
        &["a.weight", "a.half"],
        2,
    );
    st_file(&hf.join("model-00002-of-00002.safetensors"), &["ids"], 2);
    let index = serde_json::json!({"metadata": {}, "weight_map": {
        "a.weight": "model-00001-of-00002.safetensors",
        "a.half": "model-00001-of-00002.safetensors",
        "ids": "model-00002-of-00002.safetensors"}});
    std::fs::write(hf.join("model.safetensors.index.json"), index.to_string()).unwrap();
    let (code, out, err) = tv(&[
        "registry",
        "save",
        r,
        "--from-safetensors",
        hf.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("1.0.1"), "{out}");
    let (code, out, _) = tv(&["registry", "ls", r, "--json"]);
    assert_eq!(code, 0);
    let ls: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(ls["versions"].as_array().unwrap().len(), 2);
    let (code, out, err) = tv(&["registry", "verify", r, "1.0.1"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("OK 1.0.1 sha256:") && out.contains("3 files"),
        "{out}"
    );
    let (code, out, err) = tv(&["registry", "rollback", r, "1.0.1"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("now 1.0.1"), "{out}");
    let (_, out, _) = tv(&["registry", "ls", r, "--json"]);
    let ls: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(ls["current"], "1.0.1");
    let vdir = root.join("versions/1.0.1");
    let (code, out, err) = tv(&["registry", "inspect", vdir.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{err}");
    let rows: serde_json::Value = serde_json::from_str(&out).unwrap();
    let dtypes: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["dtype"].as_str().unwrap())
        .collect();
    assert_eq!(
        dtypes,
        ["F16", "F32", "I64"],
        "sorted by name: a.half, a.weight, ids"
    );
    // The bare directory inspects too, with a note that nothing covers it.
    let (code, _, err) = tv(&["registry", "inspect", hf.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("no checksum covers it"), "{err}");

    // Damage in a shard: verify exits 1 naming the bytes.
    let shard = vdir.join("model-00002-of-00002.safetensors");
    let mut b = std::fs::read(&shard).unwrap();
    let n = b.len();
    b[n - 2] ^= 1;
    std::fs::write(&shard, &b).unwrap();
    let (code, _, err) = tv(&["registry", "verify", r, "1.0.1"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.starts_with("CORRUPT:") && err.contains("bytes 0.."),
        "{err}"
    );
    assert_eq!(tv(&["registry", "rollback", r, "1.0.1"]).0, 2);

    // An index whose shard path climbs out of its directory: a typed error, nothing saved.
    let evil = tmp.path().join("evil");
    std::fs::create_dir_all(&evil).unwrap();
    let index = serde_json::json!({"weight_map": {"ids": "../m.safetensors"}});
    std::fs::write(evil.join("model.safetensors.index.json"), index.to_string()).unwrap();
    let (code, _, err) = tv(&[
        "registry",
        "save",
        r,
        "--from-safetensors",
        evil.to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("unsafe file name \"../m.safetensors\""),
        "{err}"
    );
    let (_, out, _) = tv(&["registry", "ls", r, "--json"]);
    let ls: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(ls["versions"].as_array().unwrap().len(), 2);
    // --preset fusemoe refuses other tensors.
    let (code, _, err) = tv(&[
        "registry",
        "save",
        r,
        "--from-safetensors",
        single.to_str().unwrap(),
        "--preset",
        "fusemoe",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("unexpected tensor"), "{err}");
}
