//! `tensorvault store stats --prometheus` and `tensorvault store serve-metrics`, scraped
//! with a plain HTTP GET on loopback.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{ok, s, store_put, tv, write_npy};

/// Store `n` f32 values as tensor `name` of collection t/c, in `tier`.
fn put(root: &Path, name: &str, n: usize, tier: &str) {
    let npy = root.with_extension(format!("{name}.npy"));
    let vals: Vec<f32> = (0..n).map(|i| (i as f32 * 0.01).sin()).collect();
    write_npy(&npy, &[vals.len() as u64], &vals);
    ok(&store_put(root, ["t", "c", name], &npy, tier, &[]));
}

/// The value of the sample `series` (name and labels, exactly) in an exposition.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// Kills the server when the test ends, however it ends.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start `serve-metrics` on a free loopback port; returns it and its address.
fn serve(root: &Path) -> (Server, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tensorvault"))
        .args(["store", "serve-metrics", s(root), "--addr", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tensorvault store serve-metrics");
    let stdout = child.stdout.take().unwrap();
    let server = Server(child);
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    let addr = line
        .trim()
        .strip_prefix("serving http://")
        .and_then(|r| r.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    (server, addr)
}

/// One HTTP/1.1 GET; returns (status line, headers, body).
fn get(addr: &str, path: &str, accept: Option<&str>) -> (String, String, String) {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let accept = accept.map_or(String::new(), |a| format!("Accept: {a}\r\n"));
    write!(
        c,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{accept}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut resp = String::new();
    c.read_to_string(&mut resp).unwrap();
    let (head, body) = resp.split_once("\r\n\r\n").expect("a header block");
    let (status, headers) = head.split_once("\r\n").unwrap_or((head, ""));
    let len: usize = headers
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .expect("Content-Length")
        .parse()
        .unwrap();
    assert_eq!(len, body.len(), "Content-Length matches the body");
    (status.to_owned(), headers.to_owned(), body.to_owned())
}

const BLOCKS_T1: &str = r#"tensorvault_store_blocks{tenant="t",collection="c",tier="1"}"#;
const UP: &str = r#"tensorvault_store_up{tenant="t",collection="c"}"#;

#[test]
fn stats_prometheus_prints_every_collection() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    put(&root, "w", 10_000, "1"); // 3 blocks of 4096
    let out = ok(&tv(&["store", "stats", s(&root), "--prometheus"]));
    assert_eq!(sample(&out, UP), Some(1.0), "{out}");
    assert_eq!(sample(&out, BLOCKS_T1), Some(3.0), "{out}");
    assert_eq!(
        sample(
            &out,
            r#"tensorvault_store_tensors{tenant="t",collection="c"}"#
        ),
        Some(1.0)
    );
    assert!(out.contains("# TYPE tensorvault_store_reads_total counter\n"));
    assert!(!out.contains("# EOF"));
    for line in out.lines() {
        assert!(
            line.starts_with('#')
                || line
                    .rsplit_once(' ')
                    .is_some_and(|(_, v)| v.parse::<f64>().is_ok()),
            "{line}"
        );
    }
    // --json and --prometheus exclude each other.
    let o = tv(&["store", "stats", s(&root), "--prometheus", "--json"]);
    assert!(!o.status.success());
}

#[test]
fn serve_metrics_answers_a_scrape_and_refreshes() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    put(&root, "w", 10_000, "1");
    let (_server, addr) = serve(&root);

    let (status, headers, body) = get(&addr, "/metrics", None);
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(
        headers.contains("Content-Type: text/plain; version=0.0.4"),
        "{headers}"
    );
    assert_eq!(sample(&body, UP), Some(1.0), "{body}");
    assert_eq!(sample(&body, BLOCKS_T1), Some(3.0), "{body}");

    // What Prometheus sends: OpenMetrics preferred.
    let (status, headers, body) = get(
        &addr,
        "/metrics",
        Some("application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"),
    );
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(
        headers.contains("Content-Type: application/openmetrics-text; version=1.0.0"),
        "{headers}"
    );
    assert!(body.ends_with("# EOF\n"));
    assert_eq!(sample(&body, BLOCKS_T1), Some(3.0), "{body}");

    let (status, _, _) = get(&addr, "/", None);
    assert_eq!(status, "HTTP/1.1 404 Not Found");
    let (status, _, _) = get(&addr, "/metricsx", None);
    assert_eq!(status, "HTTP/1.1 404 Not Found");

    // Each scrape reads the store anew: a tensor written meanwhile shows up.
    put(&root, "v", 4096, "1");
    let (_, _, body) = get(&addr, "/metrics", None);
    assert_eq!(sample(&body, BLOCKS_T1), Some(4.0), "{body}");

    // A collection a writer holds open is still read (a snapshot, no lock), at once.
    let held = tensorvault_store::DirStore::open_path(
        &root,
        "t",
        "c",
        tensorvault_store::StoreConfig::default(),
        false,
    )
    .unwrap();
    let t = std::time::Instant::now();
    let (status, _, body) = get(&addr, "/metrics", None);
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "waited {:?}",
        t.elapsed()
    );
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(sample(&body, UP), Some(1.0), "{body}");
    assert_eq!(sample(&body, BLOCKS_T1), Some(4.0), "{body}");
    held.close().unwrap();
    // One that cannot be read is down (a meta.log that is a directory), the rest is up.
    let bad = root.join("t").join("broken");
    std::fs::create_dir_all(bad.join("meta.log")).unwrap();
    let (_, _, body) = get(&addr, "/metrics", None);
    assert_eq!(sample(&body, UP), Some(1.0), "{body}");
    assert_eq!(
        sample(
            &body,
            r#"tensorvault_store_up{tenant="t",collection="broken"}"#
        ),
        Some(0.0),
        "{body}"
    );
}

/// Send `request` as it is (then close the write side); returns the whole response.
fn raw(addr: &str, request: &[u8]) -> String {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    c.write_all(request).unwrap();
    c.shutdown(std::net::Shutdown::Write).unwrap();
    let mut resp = String::new();
    c.read_to_string(&mut resp).unwrap();
    resp
}

#[test]
fn serve_metrics_answers_bad_requests_with_their_status() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    put(&root, "w", 10_000, "1");
    let (_server, addr) = serve(&root);
    let status = |resp: &str| resp.lines().next().unwrap_or("").to_owned();

    let r = raw(&addr, b"POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(status(&r), "HTTP/1.1 405 Method Not Allowed", "{r}");
    // HEAD: the headers of a scrape, no body.
    let r = raw(&addr, b"HEAD /metrics?x=1 HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(status(&r), "HTTP/1.1 200 OK", "{r}");
    let (head, body) = r.split_once("\r\n\r\n").unwrap();
    assert!(head.contains("Content-Length: ") && !head.contains("Content-Length: 0\r"));
    assert_eq!(body, "");
    // Not HTTP, or a head cut off by the client: 400.
    let r = raw(&addr, b"hello there\r\n\r\n");
    assert_eq!(status(&r), "HTTP/1.1 400 Bad Request", "{r}");
    let r = raw(&addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n");
    assert_eq!(status(&r), "HTTP/1.1 400 Bad Request", "{r}");
    // A head over 8 KiB, or with too many headers: 431, without reading it all.
    let mut big = b"GET /metrics HTTP/1.1\r\nX-Long: ".to_vec();
    big.extend(std::iter::repeat_n(b'a', 9000));
    big.extend_from_slice(b"\r\n\r\n");
    let r = raw(&addr, &big);
    assert_eq!(
        status(&r),
        "HTTP/1.1 431 Request Header Fields Too Large",
        "{r}"
    );
    let mut many = b"GET /metrics HTTP/1.1\r\n".to_vec();
    for i in 0..100 {
        many.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
    }
    many.extend_from_slice(b"\r\n");
    let r = raw(&addr, &many);
    assert_eq!(
        status(&r),
        "HTTP/1.1 431 Request Header Fields Too Large",
        "{r}"
    );
    // The server still answers a good scrape afterwards.
    let (status, _, body) = get(&addr, "/metrics", None);
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(sample(&body, BLOCKS_T1), Some(3.0), "{body}");
}

#[test]
fn serve_metrics_refuses_non_loopback_without_allow_remote() {
    let dir = tempfile::tempdir().unwrap();
    let o = tv(&[
        "store",
        "serve-metrics",
        s(dir.path()),
        "--addr",
        "0.0.0.0:0",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--allow-remote"), "{err}");
    // A root that cannot be listed fails at start, not on the first scrape.
    let missing = dir.path().join("missing");
    let o = tv(&[
        "store",
        "serve-metrics",
        s(&missing),
        "--addr",
        "127.0.0.1:0",
    ]);
    assert_eq!(o.status.code(), Some(2));
}
