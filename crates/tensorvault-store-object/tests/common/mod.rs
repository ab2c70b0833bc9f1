//! A loopback S3 server for the tests: `moto_server` (PyPI `moto[server]`), started and
//! stopped by the test itself on a free port of 127.0.0.1.
//!
//! The binary is `$TV_MOTO_SERVER`, else `target/s3-venv/bin/moto_server` (what
//! scripts/test.sh installs), else `moto_server` on PATH. If none starts, a test prints
//! `SKIPPED: ...` and returns, unless `TV_S3_REQUIRED=1` (CI), where it fails.

#![allow(dead_code, reason = "each test binary uses a different subset")]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use object_store::ObjectStore;
use tensorvault_store::{StoreConfig, SystemClock};
use tensorvault_store_object::{
    connect_s3, open_store, ObjectLocation, ObjectOptions, ObjectTensorStore,
};

/// A running moto server.
pub struct Server {
    child: Child,
    pub port: u16,
    pub endpoint: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn moto_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("TV_MOTO_SERVER") {
        return PathBuf::from(p);
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/s3-venv/bin/moto_server");
    if venv.is_file() {
        return venv;
    }
    PathBuf::from("moto_server")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind an ephemeral loopback port")
}

/// Raw HTTP request to the server (bucket creation, moto's control API): returns the
/// status code.
pub fn http(port: u16, method: &str, path: &str) -> std::io::Result<u16> {
    http_full(port, method, path).map(|(c, _)| c)
}

/// [`http`] with the response text.
pub fn http_full(port: u16, method: &str, path: &str) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(120)))?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let resp = String::from_utf8_lossy(&raw).into_owned();
    let code = resp
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| {
            std::io::Error::other(format!("bad HTTP response {:?}", resp.lines().next()))
        })?;
    Ok((code, resp))
}

impl Server {
    /// Start moto on a free port; with `recording`, every request is appended to that
    /// file (moto's recorder), so a later server can replay the state.
    pub fn start(recording: Option<&Path>) -> Result<Self, String> {
        let port = free_port();
        let bin = moto_bin();
        let mut cmd = Command::new(&bin);
        cmd.args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(r) = recording {
            cmd.env("MOTO_ENABLE_RECORDING", "True")
                .env("MOTO_RECORDER_FILEPATH", r);
            if let Ok(log) = std::fs::File::create(r.with_extension(format!("{port}.log"))) {
                cmd.stderr(log);
            }
        }
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
        let mut server = Server {
            child,
            port,
            endpoint: format!("http://127.0.0.1:{port}"),
        };
        let t = Instant::now();
        loop {
            if let Ok(Some(status)) = server.child.try_wait() {
                return Err(format!("{} exited with {status}", bin.display()));
            }
            if http(port, "GET", "/moto-api/data.json").is_ok() {
                return Ok(server);
            }
            if t.elapsed() > Duration::from_secs(60) {
                return Err(format!(
                    "{} did not answer on port {port} within 60 s",
                    bin.display()
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Kill the server at once (SIGKILL).
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Create `bucket`.
    pub fn create_bucket(&self, bucket: &str) {
        let code = http(self.port, "PUT", &format!("/{bucket}")).expect("create bucket");
        assert_eq!(code, 200, "creating bucket {bucket}");
    }

    /// Options that reach this server.
    pub fn options(&self) -> ObjectOptions {
        ObjectOptions {
            endpoint: Some(self.endpoint.clone()),
            credentials: Some(("testing".into(), "testing".into())),
            region: Some("us-east-1".into()),
            create: true,
            max_retries: 2,
            retry_timeout: Duration::from_secs(3),
            request_timeout: Duration::from_secs(20),
            ..ObjectOptions::default()
        }
    }
}

/// Start a server, or report why the test is skipped (panics instead under
/// `TV_S3_REQUIRED=1`).
pub fn server_or_skip(test: &str, recording: Option<&Path>) -> Option<Server> {
    match Server::start(recording) {
        Ok(s) => Some(s),
        Err(why) => {
            if std::env::var_os("TV_S3_REQUIRED").is_some_and(|v| v == "1") {
                panic!("{test}: the loopback S3 server is required (TV_S3_REQUIRED=1) but did not start: {why}");
            }
            eprintln!("SKIPPED {test}: no loopback S3 server ({why}); install moto[server] or set TV_MOTO_SERVER");
            None
        }
    }
}

/// A fresh bucket on `server` and a location in it.
pub fn location(server: &Server, bucket: &str) -> ObjectLocation {
    server.create_bucket(bucket);
    ObjectLocation::parse(&format!("s3://{bucket}/stores")).expect("location")
}

/// The raw client (to damage objects behind the store's back).
pub fn client(server: &Server, loc: &ObjectLocation) -> Arc<dyn ObjectStore> {
    connect_s3(loc, &server.options()).expect("client")
}

/// Open `acme/<collection>` with `opts`.
pub fn open(
    server: &Server,
    loc: &ObjectLocation,
    collection: &str,
    opts: &ObjectOptions,
    cfg: StoreConfig,
) -> tensorvault_store::Result<ObjectTensorStore> {
    open_store(
        connect_s3(loc, opts).expect("client"),
        loc,
        "acme",
        collection,
        SystemClock::new(),
        cfg,
        opts,
    )
    .inspect(|_| {
        let _ = server;
    })
}

/// Deterministic f32 test data as little-endian bytes.
pub fn f32_bytes(n: usize, seed: u32) -> Vec<u8> {
    (0..n)
        .flat_map(|i| {
            let x = ((i as u32).wrapping_mul(2_654_435_761) ^ seed) as f32 / u32::MAX as f32 - 0.5;
            x.to_le_bytes()
        })
        .collect()
}

/// Run `f` on a throwaway tokio runtime (for the raw client).
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(f)
}
