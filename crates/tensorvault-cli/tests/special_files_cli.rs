//! Issue 25 class 1 through the CLI: a FIFO wherever a command reads a file (a checkpoint
//! or shard, `meta.log`, `names.log`, a tier file, a CVC/CGEB/MOBI/npy input) is refused at
//! once with one `error:` line naming the path and "FIFO", exit code 2. Each command runs
//! under a 20 s watchdog: before the fix, several blocked forever in `open(2)`.
#![cfg(unix)]

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tensorvault_core::regular::mkfifo;

/// Runs `tensorvault -q ARGS`, killing it after 20 s; returns (exit code, stderr).
fn tv_timed(args: &[&str]) -> (i32, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tensorvault"))
        .arg("-q")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
            return (status.code().unwrap_or(-1), err);
        }
        if start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{args:?} blocked for 20 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn ok(args: &[&str]) {
    let (code, err) = tv_timed(args);
    assert_eq!(code, 0, "{args:?}: {err}");
}

fn refuses_fifo(args: &[&str], fifo: &Path) {
    let (code, err) = tv_timed(args);
    assert_eq!(code, 2, "{args:?}: {err}");
    let line = err.trim_end();
    assert!(
        err.starts_with("error: ")
            && err.lines().count() == 1
            && line.contains(fifo.to_str().unwrap())
            && line.contains("FIFO"),
        "{args:?}: {err}"
    );
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Replaces `path` (if any) with a FIFO.
fn fifo_at(path: &Path) {
    let _ = fs::remove_file(path);
    mkfifo(path).unwrap();
}

#[test]
fn registry_inputs_that_are_fifos() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = tmp.path().join("reg");
    // A single checkpoint file that is a FIFO (used to say "no such file or directory").
    let single = tmp.path().join("x.safetensors");
    fifo_at(&single);
    refuses_fifo(
        &["registry", "save", s(&reg), "--from", s(&single)],
        &single,
    );
    // A sharded model directory with a FIFO shard (used to hang).
    ok(&["registry", "init", s(&reg), "--tiny"]);
    let real = reg.join("versions/0.0.0-init/weights.safetensors");
    let hf = tmp.path().join("hf");
    fs::create_dir(&hf).unwrap();
    fs::copy(&real, hf.join("a.safetensors")).unwrap();
    fifo_at(&hf.join("b.safetensors"));
    fs::write(
        hf.join("model.safetensors.index.json"),
        r#"{"weight_map": {"gating.linear.weight": "a.safetensors", "x": "b.safetensors"}}"#,
    )
    .unwrap();
    refuses_fifo(
        &["registry", "save", s(&reg), "--from-safetensors", s(&hf)],
        &hf.join("b.safetensors"),
    );
    refuses_fifo(&["registry", "inspect", s(&hf)], &hf.join("b.safetensors"));
    // The weights file of a version.
    let weights = reg.join("versions/0.0.0-init/weights.safetensors");
    fifo_at(&weights);
    let (code, err) = tv_timed(&["registry", "verify", s(&reg), "0.0.0-init"]);
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("FIFO"), "{err}");
}

#[test]
fn store_files_that_are_fifos() {
    let tmp = tempfile::tempdir().unwrap();
    let st = tmp.path().join("st");
    let npy = tmp.path().join("x.npy");
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4), }";
    let pad = 64 - (10 + header.len() + 1) % 64;
    let h = format!("{header}{}\n", " ".repeat(pad));
    bytes.extend_from_slice(&(h.len() as u16).to_le_bytes());
    bytes.extend_from_slice(h.as_bytes());
    bytes.extend(std::iter::repeat_n(0u8, 32));
    fs::write(&npy, &bytes).unwrap();
    ok(&[
        "store",
        "put",
        s(&st),
        "t",
        "c",
        "x",
        s(&npy),
        "--tier",
        "0",
    ]);
    let coll = st.join("t/c");
    for name in ["meta.log", "names.log"] {
        let path = coll.join(name);
        let saved = fs::read(&path).unwrap();
        fifo_at(&path);
        // Read-only commands must not block (the issue's `store ls` hang).
        refuses_fifo(&["store", "ls", s(&st)], &path);
        refuses_fifo(&["store", "ls", s(&st), "t", "c"], &path);
        refuses_fifo(
            &[
                "store",
                "get",
                s(&st),
                "t",
                "c",
                "x",
                s(&tmp.path().join("o.npy")),
            ],
            &path,
        );
        fs::remove_file(&path).unwrap();
        fs::write(&path, saved).unwrap();
    }
    let tier = fs::read_dir(&coll)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("tier0")
        })
        .expect("a tier-0 file");
    fifo_at(&tier);
    refuses_fifo(
        &[
            "store",
            "get",
            s(&st),
            "t",
            "c",
            "x",
            s(&tmp.path().join("o.npy")),
        ],
        &tier,
    );
    // An npy input that is a FIFO.
    fifo_at(&npy);
    refuses_fifo(&["store", "put", s(&st), "t", "d", "y", s(&npy)], &npy);
}

#[test]
fn format_inputs_that_are_fifos() {
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("in");
    fifo_at(&f);
    let o = tmp.path().join("out");
    for args in [
        vec!["cvc", "inspect", s(&f)],
        vec!["cvc", "verify", s(&f)],
        vec!["cvc", "load", s(&f), s(&o)],
        vec!["cvc", "pack", s(&f), s(&o)],
        vec!["cgeb", "inspect", s(&f)],
        vec!["cgeb", "pack", s(&f), s(&o)],
        vec!["mobi", "inspect", s(&f)],
        vec!["mobi", "validate", s(&f)],
        vec!["quant", "eval", s(&f), "--bits", "8"],
    ] {
        refuses_fifo(&args, &f);
    }
    // A CGEB batch whose data file or index is a FIFO.
    let b = tmp.path().join("b");
    fifo_at(&b.with_extension("cgeb"));
    fs::write(b.with_extension("cgei"), b"not an index").unwrap();
    for cmd in ["inspect", "verify"] {
        let (code, err) = tv_timed(&["cgeb", cmd, s(&b.with_extension("cgeb"))]);
        assert_eq!(code, 2, "{err}");
    }
    fs::remove_file(b.with_extension("cgei")).unwrap();
    fifo_at(&b.with_extension("cgei"));
    refuses_fifo(&["cgeb", "verify", s(&b)], &b.with_extension("cgei"));
}
