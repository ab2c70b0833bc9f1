//! Issue 25 class 5: an error about an input file's content names that file (format
//! errors carry the field and offset, not which of a command's files was bad).

use std::path::Path;
use std::process::Command;

fn fails_naming(args: &[&str], path: &Path) {
    fails_naming_what(args, path, "offset");
}

fn fails_naming_what(args: &[&str], path: &Path, what: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_tensorvault"))
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    let line = err.lines().next().unwrap_or("");
    let want = format!("error: {}: ", path.display());
    assert!(line.starts_with(&want), "{args:?}: {err}");
    assert!(line.contains(what), "{args:?}: {err}");
    assert_eq!(
        err.matches(&*path.display().to_string()).count(),
        1,
        "{err}"
    );
}

#[test]
fn content_errors_name_the_input_file() {
    let dir = tempfile::tempdir().unwrap();
    let bad = |name: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, b"garbage").unwrap();
        p
    };
    let (cvc, mobi, cgeb, onnx) = (bad("v.cvc"), bad("m.mobi"), bad("r.cgeb"), bad("n.onnx"));
    let out = dir.path().join("out");
    let s = |p: &Path| p.to_str().unwrap().to_owned();
    let (c, m, g, o) = (s(&cvc), s(&mobi), s(&cgeb), s(&out));
    fails_naming(&["cvc", "inspect", &c], &cvc);
    fails_naming(&["cvc", "load", &c, &o], &cvc);
    fails_naming(&["mobi", "inspect", &m], &mobi);
    fails_naming(&["mobi", "graph", &m], &mobi);
    fails_naming(&["mobi", "quantize", &m, &o, "--to", "int8"], &mobi);
    fails_naming(
        &["mobi", "run", &m, "--input", &c, "--output-dir", &o],
        &mobi,
    );
    fails_naming(&["cgeb", "inspect", &g], &cgeb);
    fails_naming(&["cgeb", "get", &g], &cgeb);
    let n = s(&onnx);
    fails_naming_what(&["mobi", "convert", &n, &o], &onnx, "protobuf");
    assert!(!out.exists(), "a failed command wrote its output");
}

#[test]
fn errors_that_name_their_path_are_not_prefixed_again() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("absent.cvc");
    let out = Command::new(env!("CARGO_BIN_EXE_tensorvault"))
        .args(["cvc", "inspect", missing.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches("absent.cvc").count(), 1, "{err}");
}
