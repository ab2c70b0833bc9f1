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

    // One flipped byte -> verify fails with exit code 2.
    let w = ckpt.join("weights.safetensors");
    let mut b = std::fs::read(&w).unwrap();
    let i = b.len() - 1;
    b[i] ^= 1;
    std::fs::write(&w, b).unwrap();
    let (code, _, err) = tv(&["registry", "verify", r, "0.0.0-init"]);
    assert_eq!(code, 2);
    assert!(err.contains("checksum mismatch"), "{err}");
    assert_eq!(tv(&["registry", "ls", "/nonexistent/registry"]).0, 2);
}
