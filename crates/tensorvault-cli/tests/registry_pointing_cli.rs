//! Issue 25 classes 3 and 5 through the CLI, registry side: `registry verify` of a FuseMoE
//! version compares the checksum `registry.json` lists (exit 1 naming the version, the
//! file and both checksums); a bad source file at `registry save` is named by its own path
//! with the field and offset; a version whose metadata does not read is that error, not
//! "version <any FuseMoE version> not found".

use std::fs;
use std::path::Path;
use std::process::Command;

fn tv(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tensorvault"))
        .arg("-q")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn ok(args: &[&str]) -> String {
    let (code, out, err) = tv(args);
    assert_eq!(code, 0, "{args:?}: {err}");
    out
}

fn listed_checksum(root: &Path, version: &str) -> String {
    let out = ok(&["registry", "ls", root.to_str().unwrap(), "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["version"] == version)
        .unwrap()["checksum"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn fusemoe_verify_compares_the_listed_checksum() {
    let tmp = tempfile::tempdir().unwrap();
    let (root, other) = (tmp.path().join("reg"), tmp.path().join("other"));
    let r = root.to_str().unwrap();
    ok(&["registry", "init", r, "--tiny"]);
    ok(&[
        "registry",
        "init",
        other.to_str().unwrap(),
        "--tiny",
        "--seed",
        "7",
    ]);
    let src = other.join("versions/0.0.0-init");
    ok(&[
        "registry",
        "save",
        r,
        "0.0.1",
        "--from",
        src.to_str().unwrap(),
    ]);
    let (a, b) = (
        listed_checksum(&root, "0.0.0-init"),
        listed_checksum(&root, "0.0.1"),
    );
    assert_ne!(a, b);
    ok(&["registry", "verify", r, "0.0.1"]);
    // 0.0.1's directory replaced by 0.0.0-init's: intact by its own metadata.json.
    for f in ["metadata.json", "weights.safetensors"] {
        fs::copy(
            root.join("versions/0.0.0-init").join(f),
            root.join("versions/0.0.1").join(f),
        )
        .unwrap();
    }
    let (code, _, err) = tv(&["registry", "verify", r, "0.0.1"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.starts_with("CORRUPT: version 0.0.1: ") && err.lines().count() == 1,
        "{err}"
    );
    assert!(
        err.contains("versions/0.0.1/metadata.json")
            && err.contains(&format!(
                "checksum {a} differs from {b} listed in registry.json"
            )),
        "{err}"
    );
    ok(&["registry", "verify", r, "0.0.0-init"]);
}

#[test]
fn a_bad_source_file_is_named_not_the_destination() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("reg");
    let r = root.to_str().unwrap();
    ok(&["registry", "init", r, "--tiny"]);
    let bad = tmp.path().join("bad.safetensors");
    let mut b = 1_000_000u64.to_le_bytes().to_vec();
    b.extend_from_slice(b"{}");
    fs::write(&bad, &b).unwrap();
    // A truncated copy of a real checkpoint: its tensors' data_offsets run past the end.
    let real = fs::read(root.join("versions/0.0.0-init/weights.safetensors")).unwrap();
    let cut = tmp.path().join("cut.safetensors");
    fs::write(&cut, &real[..real.len() - 100]).unwrap();
    for (file, needle) in [
        (
            &bad,
            "field header length at offset 0: claims a 1000000-byte header; the file has 10 bytes",
        ),
        (&cut, "field data_offsets at offset"),
    ] {
        let (code, out, err) = tv(&[
            "registry",
            "save",
            r,
            "1.0.0",
            "--from",
            file.to_str().unwrap(),
        ]);
        assert_eq!(code, 2, "{out}{err}");
        assert!(
            err.starts_with(&format!(
                "error: invalid safetensors file {}: ",
                file.display()
            )) && err.contains(needle)
                && !err.contains("versions/"),
            "{err}"
        );
    }
    let dirs: Vec<_> = fs::read_dir(root.join("versions")).unwrap().collect();
    assert_eq!(dirs.len(), 1, "nothing but the first version");
}

#[test]
fn unreadable_metadata_is_reported_not_version_not_found() {
    let tmp = tempfile::tempdir().unwrap();
    let (seed, root) = (tmp.path().join("seed"), tmp.path().join("reg"));
    ok(&["registry", "init", seed.to_str().unwrap(), "--tiny"]);
    let ckpt = seed.join("versions/0.0.0-init");
    let (c, r) = (ckpt.to_str().unwrap(), root.to_str().unwrap());
    // A registry made by saving a checkpoint has no current version: the shapes for the
    // next save come from the newest FuseMoE version's metadata.
    ok(&["registry", "save", r, "1.0.0", "--from", c]);
    let meta = root.join("versions/1.0.0/metadata.json");
    fs::write(&meta, b"{\"format\": 7").unwrap();
    for args in [
        vec!["registry", "save", r, "1.0.1", "--from", c],
        vec![
            "registry",
            "save",
            r,
            "1.0.1",
            "--from",
            ckpt.join("weights.safetensors").to_str().unwrap(),
            "--preset",
            "fusemoe",
        ],
    ] {
        let (code, _, err) = tv(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(
            err.starts_with(&format!("error: JSON error in {}", meta.display()))
                && !err.contains("not found"),
            "{args:?}: {err}"
        );
    }
    assert!(!root.join("versions/1.0.1").exists());
}

#[test]
fn a_newer_checkpoint_format_is_refused_naming_the_field() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("reg");
    let r = root.to_str().unwrap();
    ok(&["registry", "init", r, "--tiny"]);
    let meta = root.join("versions/0.0.0-init/metadata.json");
    let text = fs::read_to_string(&meta).unwrap();
    fs::write(
        &meta,
        text.replacen("\"format_version\": 1", "\"format_version\": 9", 1),
    )
    .unwrap();
    for args in [
        vec!["registry", "verify", r, "0.0.0-init"],
        vec!["registry", "save", r, "0.0.1"],
    ] {
        let (code, _, err) = tv(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(
            err.starts_with(&format!(
                "error: {}: field format_version: 9 is newer",
                meta.display()
            )),
            "{args:?}: {err}"
        );
    }
}
