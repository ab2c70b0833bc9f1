//! Issue 25 class 2 through the CLI: `registry.json` files that are well-formed and carry a
//! valid checksum but make no sense (a repeated version, a golden or current version that is
//! not listed, a format newer than this build). Every registry command refuses them with one
//! `error:` line naming the field, exit code 2, and leaves the manifest and every version's
//! files as they were.

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

/// `json` without whitespace outside strings: the compact serialization the checksum covers.
fn compact(json: &str) -> String {
    let (mut out, mut in_str, mut escaped) = (String::new(), false, false);
    for c in json.chars() {
        if in_str {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_str = false,
                _ => {}
            }
        } else if c == '"' {
            in_str = true;
            out.push(c);
        } else if !c.is_whitespace() {
            out.push(c);
        }
    }
    out
}

/// Rewrites `registry.json` as `edit` makes it and seals it with a valid CRC-32C, as a
/// forger who read docs/formats/registry.md would. Returns the bytes written.
fn forge(root: &Path, edit: impl FnOnce(String) -> String) -> Vec<u8> {
    let path = root.join("registry.json");
    let text = compact(&fs::read_to_string(&path).unwrap());
    let at = text
        .find(",\"manifest_crc32c\"")
        .expect("a sealed manifest");
    let body = edit(text[..at].to_owned() + "}");
    let crc = tensorvault_core::checksum::crc32c(body.as_bytes());
    let sealed = format!(
        "{},\"manifest_crc32c\":\"{crc:08x}\"}}",
        &body[..body.len() - 1]
    );
    fs::write(&path, &sealed).unwrap();
    sealed.into_bytes()
}

fn version_dirs(root: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(root.join("versions"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// A tiny registry with versions 0.0.0-init, 0.0.1, 0.0.2 (current 0.0.0-init).
fn registry(root: &Path) {
    let r = root.to_str().unwrap();
    assert_eq!(tv(&["registry", "init", r, "--tiny"]).0, 0);
    for v in ["0.0.1", "0.0.2"] {
        let (code, _, err) = tv(&["registry", "save", r, v]);
        assert_eq!(code, 0, "{err}");
    }
}

/// Runs every reading and writing registry command on the forged registry: each must fail
/// with one `error:` line containing `needle`, and nothing on disk may change.
fn every_command_refuses(root: &Path, sealed: &[u8], needle: &str) {
    let r = root.to_str().unwrap();
    let before = version_dirs(root);
    let cmds: [&[&str]; 7] = [
        &["registry", "ls", r],
        &["registry", "verify", r, "0.0.1"],
        &["registry", "save", r],
        &["registry", "save", r, "9.0.0"],
        &["registry", "rollback", r, "0.0.1"],
        &["registry", "activate", r, "0.0.2"],
        &["registry", "inspect", r, "0.0.2"],
    ];
    for args in cmds {
        let (code, _, err) = tv(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(
            err.starts_with("error: ") && err.lines().count() == 1 && err.contains(needle),
            "{args:?}: {err}"
        );
    }
    assert_eq!(version_dirs(root), before);
    assert_eq!(fs::read(root.join("registry.json")).unwrap(), sealed);
}

#[test]
fn a_repeated_version_is_refused_by_every_command() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("reg");
    registry(&root);
    let sealed = forge(&root, |body| {
        let start = body.find("{\"version\":\"0.0.2\"").unwrap();
        let end = body[start..].find('}').unwrap() + start + 1;
        let entry = body[start..end].to_owned();
        body.replacen("\"versions\":[", &format!("\"versions\":[{entry},"), 1)
    });
    every_command_refuses(&root, &sealed, "versions[3] repeats version \"0.0.2\"");
}

#[test]
fn an_unlisted_golden_or_current_is_refused_by_every_command() {
    for field in ["golden", "current"] {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("reg");
        registry(&root);
        let sealed = forge(&root, |body| {
            let from = format!("\"{field}\":");
            let at = body.find(&from).unwrap() + from.len();
            let end = at + body[at..].find([',', '}']).unwrap();
            format!("{}\"7.7.7\"{}", &body[..at], &body[end..])
        });
        every_command_refuses(
            &root,
            &sealed,
            &format!("field {field} names version \"7.7.7\""),
        );
    }
}

#[test]
fn a_newer_format_is_refused_by_every_command() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("reg");
    registry(&root);
    let sealed = forge(&root, |body| {
        body.replacen("\"format_version\":2", "\"format_version\":3", 1)
    });
    every_command_refuses(&root, &sealed, "field format_version is 3");
}

/// The forging helper itself: an unedited re-seal is accepted by every command.
#[test]
fn an_unedited_reseal_is_accepted() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("reg");
    registry(&root);
    forge(&root, |b| b);
    let r = root.to_str().unwrap();
    let (code, out, err) = tv(&["registry", "ls", r, "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["versions"].as_array().unwrap().len(), 3);
    assert_eq!(tv(&["registry", "verify", r, "0.0.2"]).0, 0);
}
