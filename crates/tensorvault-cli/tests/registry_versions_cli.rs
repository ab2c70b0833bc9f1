//! Issue 26 item 1 through the CLI: `registry save ROOT [VERSION] --from PATH` uses the
//! version asked for (taken or invalid: one error line from the library, nothing written),
//! one `--from` takes this registry's checkpoint layout and any safetensors model
//! (`--from-safetensors` is an alias), saving never moves the current pointer and
//! `registry activate ROOT VERSION` does, forward and back.

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

fn fails(args: &[&str], needle: &str) {
    let (code, _, err) = tv(args);
    assert_eq!(code, 2, "{args:?}: {err}");
    assert!(
        err.starts_with("error: ") && err.lines().count() == 1 && err.contains(needle),
        "{args:?}: {err}"
    );
}

fn ls(root: &str) -> serde_json::Value {
    serde_json::from_str(&ok(&["registry", "ls", root, "--json"])).unwrap()
}

fn listed(root: &str) -> Vec<String> {
    ls(root)["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["version"].as_str().unwrap().to_owned())
        .collect()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn versions_are_what_the_user_asked_for() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("reg");
    let r = s(&root);
    ok(&["registry", "init", r, "--tiny"]);
    let native = root.join("versions/0.0.0-init");
    let file = native.join("weights.safetensors");
    // A FuseMoE checkpoint directory through --from, positional VERSION.
    let out = ok(&[
        "registry",
        "save",
        r,
        "1.0.0",
        "--from",
        s(&native),
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["version"], "1.0.0");
    assert_eq!(v["current"], "0.0.0-init", "a save is not an activation");
    // Taken, invalid: the library's errors, nothing written.
    let manifest = std::fs::read(root.join("registry.json")).unwrap();
    fails(
        &["registry", "save", r, "1.0.0"],
        "version 1.0.0 already exists",
    );
    fails(
        &[
            "registry",
            "save",
            r,
            "--version",
            "1.0.0",
            "--from",
            s(&file),
        ],
        "version 1.0.0 already exists",
    );
    for bad in ["../../etc", "bad version", "1.0"] {
        fails(&["registry", "save", r, bad], "invalid version string");
        fails(
            &["registry", "save", r, bad, "--from", s(&file)],
            "invalid version string",
        );
    }
    assert_eq!(std::fs::read(root.join("registry.json")).unwrap(), manifest);
    assert!(!tmp.path().join("etc").exists());
    // Any safetensors model through the same --from, no version: the next patch number.
    let out = ok(&["registry", "save", r, "--from", s(&file), "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["version"], "1.0.1");
    assert_eq!(v["current"], "0.0.0-init");
    // The old flag is an alias; a model version directory is a model too.
    ok(&[
        "registry",
        "save",
        r,
        "2.0.0",
        "--from-safetensors",
        s(&file),
    ]);
    let model_dir = root.join("versions/2.0.0");
    ok(&["registry", "save", r, "3.0.0", "--from", s(&model_dir)]);
    assert_eq!(
        listed(r),
        ["0.0.0-init", "1.0.0", "1.0.1", "2.0.0", "3.0.0"]
    );
    assert_eq!(ls(r)["current"], "0.0.0-init");
    // activate: forward to a model version, back to a FuseMoE one; rollback stays.
    assert!(ok(&["registry", "activate", r, "3.0.0"]).contains("current version is now 3.0.0"));
    assert_eq!(ls(r)["current"], "3.0.0");
    ok(&["registry", "activate", r, "1.0.0"]);
    assert_eq!(ls(r)["current"], "1.0.0");
    ok(&["registry", "rollback", r, "0.0.0-init"]);
    assert_eq!(ls(r)["current"], "0.0.0-init");
    fails(
        &["registry", "activate", r, "9.9.9"],
        "version 9.9.9 not found",
    );
    fails(
        &["registry", "activate", r, "../x"],
        "invalid version string",
    );
    assert_eq!(ls(r)["current"], "0.0.0-init");
    // inspect takes ROOT VERSION like the others (and still a path).
    let by_version: serde_json::Value =
        serde_json::from_str(&ok(&["registry", "inspect", r, "2.0.0", "--json"])).unwrap();
    let by_path: serde_json::Value =
        serde_json::from_str(&ok(&["registry", "inspect", s(&model_dir), "--json"])).unwrap();
    assert_eq!(by_version, by_path);
    assert!(!by_version.as_array().unwrap().is_empty());
    fails(
        &["registry", "inspect", r, "9.9.9"],
        "version 9.9.9 not found",
    );
    // A FuseMoE checkpoint into a registry that does not exist yet: its own shapes.
    let other = tmp.path().join("other");
    ok(&["registry", "save", s(&other), "5.0.0", "--from", s(&native)]);
    assert_eq!(listed(s(&other)), ["5.0.0"]);
    assert_eq!(ls(s(&other))["current"], serde_json::Value::Null);
    ok(&["registry", "verify", s(&other), "5.0.0"]);
}
