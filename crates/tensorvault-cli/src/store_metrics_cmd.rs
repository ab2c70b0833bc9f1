//! `tensorvault store stats ROOT --prometheus` and `tensorvault store serve-metrics`: the
//! store's counters and gauges in the Prometheus text format (version 0.0.4), printed once
//! or served on `GET /metrics` for a Prometheus scrape (as OpenMetrics when the scraper's
//! `Accept` header asks for it, as Prometheus itself does).
//!
//! Collections are opened per exposition, not held: each scrape lists the collections
//! under ROOT and opens each one as a lock-free snapshot (`DirStore::open_path_snapshot`:
//! its log replayed read-only to the end, nothing written, no lock taken), so a scrape
//! never waits for a writer (a 30 s wait per held collection would outlast Prometheus's
//! default 10 s scrape timeout) and never keeps anyone out; new collections show up by
//! themselves. A collection that cannot be read (damaged, unreadable) is exported as
//! `tensorvault_store_up{...} 0` (with the reason on stderr, once per change) and nothing
//! else. Counters count since open, so here they stay 0; the gauges (blocks, bytes, slots,
//! log records, replay time) are the useful part. A process that embeds the store exports
//! its live counters with `tensorvault_store::metrics::StoreMetrics` instead.
//!
//! The server is a small HTTP/1.1 responder on `std::net::TcpListener`, one connection at
//! a time (`Connection: close`): the request head is read into a bounded buffer (8 KiB,
//! else `431`) under a 10 s timeout and parsed by `httparse` (hyper's parser; a malformed
//! head is `400`). tiny_http would replace the loop but reads header lines without a
//! length bound and without a timeout, which this endpoint (`--allow-remote`) cannot
//! afford. It serves until it is killed: Ctrl-C or SIGTERM end it with the default signal
//! action, which is safe because no store is open between scrapes and a store that is
//! interrupted mid-open recovers on the next open (its writes are crash-safe).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use tensorvault_store::fs::list_collections;
use tensorvault_store::metrics::{StoreMetrics, OPENMETRICS_CONTENT_TYPE, PROMETHEUS_CONTENT_TYPE};
use tensorvault_store::{DirStore, StoreConfig};

use crate::error::CliError;

/// Longest request head (request line and headers) the server reads.
const MAX_REQUEST_HEAD: usize = 8 * 1024;
/// How long a client may take to send its request or read the response.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);
/// After a response: how long, and how many bytes, of unread request input are discarded
/// before the connection is closed.
const LINGER_TIMEOUT: Duration = Duration::from_secs(2);
const MAX_LINGER_BYTES: u64 = 1 << 20;

/// Arguments of `store serve-metrics`.
#[derive(Debug, Args)]
pub struct ServeMetricsArgs {
    /// Store root directory.
    pub root: PathBuf,
    /// Address to listen on (port 0 picks a free port; the address is printed on stdout).
    #[arg(long, default_value = "127.0.0.1:9464")]
    pub addr: String,
    /// Allow a non-loopback address (the endpoint has no authentication).
    #[arg(long)]
    pub allow_remote: bool,
}

/// The reason each collection could not be read at the last exposition.
type LastErrors = BTreeMap<(String, String), String>;

/// Open every collection under `root` in turn and snapshot it; collections that cannot be
/// opened are recorded as unavailable and their reason printed to stderr when it changes.
fn collect(root: &Path, last: &mut LastErrors) -> Result<StoreMetrics, CliError> {
    let mut m = StoreMetrics::new();
    let mut errors = LastErrors::new();
    for (tenant, collection) in list_collections(root)? {
        let snap = DirStore::open_path_snapshot(root, &tenant, &collection, StoreConfig::default())
            .and_then(|s| {
                m.add(&s)?;
                s.close()
            });
        if let Err(e) = snap {
            let key = (tenant, collection);
            let why = e.to_string();
            if last.get(&key) != Some(&why) {
                eprintln!("tensorvault: {}/{}: {why}", key.0, key.1);
            }
            m.add_unavailable(&key.0, &key.1);
            errors.insert(key, why);
        }
    }
    *last = errors;
    Ok(m)
}

/// `store stats ROOT --prometheus`: print the exposition of every collection.
///
/// # Errors
/// [`CliError::Store`] if ROOT cannot be listed.
pub fn stats_prometheus(root: &Path) -> Result<i32, CliError> {
    let m = collect(root, &mut LastErrors::new())?;
    let mut text = String::new();
    m.encode_classic(&mut text);
    print!("{text}");
    Ok(0)
}

fn resolve(addr: &str, allow_remote: bool) -> Result<SocketAddr, CliError> {
    let usage = |reason: String| CliError::Usage {
        arg: "--addr",
        reason,
    };
    let mut addrs = addr
        .to_socket_addrs()
        .map_err(|e| usage(format!("{addr}: {e}")))?;
    let Some(sa) = addrs.next() else {
        return Err(usage(format!("{addr} resolves to no address")));
    };
    if !allow_remote && !sa.ip().is_loopback() {
        return Err(usage(format!(
            "{sa} is not a loopback address; pass --allow-remote to serve metrics beyond this machine"
        )));
    }
    Ok(sa)
}

/// `store serve-metrics ROOT --addr HOST:PORT`: serve `GET /metrics` until killed.
///
/// # Errors
/// [`CliError::Usage`] for a bad or (without `--allow-remote`) non-loopback address;
/// [`CliError::Io`] if the address cannot be bound; [`CliError::Store`] if ROOT cannot
/// be listed at start.
pub fn serve(a: &ServeMetricsArgs) -> Result<i32, CliError> {
    let sa = resolve(&a.addr, a.allow_remote)?;
    // Fail early on a root that cannot be listed (a typo), not on the first scrape.
    list_collections(&a.root)?;
    let listener = TcpListener::bind(sa).map_err(CliError::io("bind", sa))?;
    let local = listener.local_addr().map_err(CliError::io("bind", sa))?;
    println!("serving http://{local}/metrics");
    let _ = std::io::stdout().flush();
    let mut last = LastErrors::new();
    for conn in listener.incoming() {
        match conn {
            Ok(stream) => {
                if let Err(e) = handle(stream, &a.root, &mut last) {
                    eprintln!("tensorvault: serve-metrics: {e}");
                }
            }
            Err(e) => eprintln!("tensorvault: serve-metrics: accept: {e}"),
        }
    }
    Ok(0)
}

/// Most header lines a request may have.
const MAX_HEADERS: usize = 64;

/// What the request head said.
enum Head {
    /// A complete head: method, path (query dropped), whether OpenMetrics is accepted.
    Request {
        method: String,
        path: String,
        openmetrics: bool,
    },
    /// More than [`MAX_REQUEST_HEAD`] bytes or [`MAX_HEADERS`] headers.
    TooLarge,
    /// Not an HTTP/1.x request head (or the client closed before finishing it).
    Malformed,
}

/// Parse a complete request head, or say that more bytes are needed (`None`).
fn parse_head(buf: &[u8]) -> Option<Head> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(buf) {
        Ok(httparse::Status::Complete(_)) => {
            // Prometheus asks for OpenMetrics when it can parse it; anything else gets
            // the classic text format (version 0.0.4).
            let openmetrics = req.headers.iter().any(|h| {
                h.name.eq_ignore_ascii_case("accept")
                    && std::str::from_utf8(h.value)
                        .is_ok_and(|v| v.contains("application/openmetrics-text"))
            });
            let target = req.path.unwrap_or("");
            Some(Head::Request {
                method: req.method.unwrap_or("").to_owned(),
                path: target.split('?').next().unwrap_or("").to_owned(),
                openmetrics,
            })
        }
        Ok(httparse::Status::Partial) => None,
        Err(httparse::Error::TooManyHeaders) => Some(Head::TooLarge),
        Err(_) => Some(Head::Malformed),
    }
}

/// Read the request head: at most [`MAX_REQUEST_HEAD`] bytes, parsed as they arrive.
fn read_head(stream: &mut TcpStream) -> std::io::Result<Head> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Ok(Head::Malformed);
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(head) = parse_head(&buf) {
            return Ok(head);
        }
        if buf.len() >= MAX_REQUEST_HEAD {
            return Ok(Head::TooLarge);
        }
    }
}

fn respond(
    stream: &mut TcpStream,
    status: &str,
    content_type: &str,
    body: &str,
    head_only: bool,
) -> std::io::Result<()> {
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    if !head_only {
        out.push_str(body);
    }
    stream.write_all(out.as_bytes())?;
    stream.flush()?;
    // Close gracefully: the client may still be sending (a head refused as too large);
    // closing with unread bytes would reset the connection and could drop the response
    // before the client reads it. Finish writing, then discard what is left (bounded in
    // bytes and time).
    stream.shutdown(std::net::Shutdown::Write)?;
    stream.set_read_timeout(Some(LINGER_TIMEOUT))?;
    let _ = std::io::copy(
        &mut (&mut *stream).take(MAX_LINGER_BYTES),
        &mut std::io::sink(),
    );
    Ok(())
}

fn handle(mut stream: TcpStream, root: &Path, last: &mut LastErrors) -> std::io::Result<()> {
    stream.set_read_timeout(Some(CLIENT_TIMEOUT))?;
    stream.set_write_timeout(Some(CLIENT_TIMEOUT))?;
    let plain = "text/plain; charset=utf-8";
    let (method, path, openmetrics) = match read_head(&mut stream)? {
        Head::Request {
            method,
            path,
            openmetrics,
        } => (method, path, openmetrics),
        Head::TooLarge => {
            return respond(
                &mut stream,
                "431 Request Header Fields Too Large",
                plain,
                "request head too large\n",
                false,
            )
        }
        Head::Malformed => {
            return respond(
                &mut stream,
                "400 Bad Request",
                plain,
                "not an HTTP/1.x request\n",
                false,
            )
        }
    };
    let head_only = method == "HEAD";
    if method != "GET" && !head_only {
        return respond(
            &mut stream,
            "405 Method Not Allowed",
            plain,
            "only GET and HEAD\n",
            false,
        );
    }
    if path != "/metrics" {
        return respond(
            &mut stream,
            "404 Not Found",
            plain,
            "not found: try /metrics\n",
            head_only,
        );
    }
    match collect(root, last) {
        Ok(m) => {
            let mut body = String::new();
            let ct = if openmetrics {
                m.encode(&mut body);
                OPENMETRICS_CONTENT_TYPE
            } else {
                m.encode_classic(&mut body);
                PROMETHEUS_CONTENT_TYPE
            };
            respond(&mut stream, "200 OK", ct, &body, head_only)
        }
        Err(e) => respond(
            &mut stream,
            "500 Internal Server Error",
            plain,
            &format!("{e}\n"),
            head_only,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(h: Option<Head>) -> (String, String, bool) {
        match h {
            Some(Head::Request {
                method,
                path,
                openmetrics,
            }) => (method, path, openmetrics),
            _ => panic!("expected a complete request"),
        }
    }

    #[test]
    fn a_scrape_head_parses_and_every_prefix_asks_for_more() {
        let head = b"GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nAccept: application/openmetrics-text;version=1.0.0\r\n\r\n";
        assert_eq!(
            request(parse_head(head)),
            ("GET".into(), "/metrics".into(), true)
        );
        for n in 0..head.len() {
            assert!(parse_head(&head[..n]).is_none(), "prefix of {n} bytes");
        }
        let plain = b"HEAD /metrics HTTP/1.0\r\n\r\n";
        assert_eq!(
            request(parse_head(plain)),
            ("HEAD".into(), "/metrics".into(), false)
        );
    }

    #[test]
    fn garbage_and_oversized_heads_are_refused_without_panics() {
        assert!(matches!(
            parse_head(b"hello there\r\n\r\n"),
            Some(Head::Malformed)
        ));
        let mut many = b"GET / HTTP/1.1\r\n".to_vec();
        for i in 0..=MAX_HEADERS {
            many.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
        }
        many.extend_from_slice(b"\r\n");
        assert!(matches!(parse_head(&many), Some(Head::TooLarge)));
        // Pseudo-random bytes (xorshift), with and without a valid request line in front:
        // every answer is a value, never a panic.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for round in 0..2000 {
            let mut buf = if round % 2 == 0 {
                b"GET /metrics HTTP/1.1\r\n".to_vec()
            } else {
                Vec::new()
            };
            for _ in 0..(round % 300) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                buf.push((x >> 24) as u8);
            }
            let _ = parse_head(&buf);
        }
    }
}
