//! One open collection on an object store, shared by its [`crate::ObjectBlockIO`] and
//! [`crate::ObjectMetaLog`]: the client, the tokio runtime the synchronous traits block
//! on, the manifest as last read or committed (with its ETag), the objects waiting to be
//! deleted once a commit makes their removal safe, and request counters.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use object_store::path::Path as OsPath;
use object_store::{ObjectStore, PutMode, PutOptions, PutPayload, UpdateVersion};

use crate::error::{OResult, ObjectErr};
use crate::manifest::Manifest;

/// Name of the manifest object inside the collection directory.
pub const MANIFEST: &str = "manifest";

/// Requests sent to the object store since open (for stats and benchmarks).
#[derive(Debug, Default)]
pub struct RequestCounters {
    /// GET requests (whole or ranged).
    pub gets: AtomicU64,
    /// PUT requests (conditional or not).
    pub puts: AtomicU64,
    /// DELETE requests.
    pub deletes: AtomicU64,
    /// LIST / HEAD requests.
    pub lists: AtomicU64,
    /// Bytes received by GETs.
    pub bytes_in: AtomicU64,
    /// Bytes sent by PUTs.
    pub bytes_out: AtomicU64,
}

/// A snapshot of [`RequestCounters`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Requests {
    /// GET requests.
    pub gets: u64,
    /// PUT requests.
    pub puts: u64,
    /// DELETE requests.
    pub deletes: u64,
    /// LIST / HEAD requests.
    pub lists: u64,
    /// Bytes received.
    pub bytes_in: u64,
    /// Bytes sent.
    pub bytes_out: u64,
}

impl RequestCounters {
    /// Current values.
    pub fn snapshot(&self) -> Requests {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Requests {
            gets: g(&self.gets),
            puts: g(&self.puts),
            deletes: g(&self.deletes),
            lists: g(&self.lists),
            bytes_in: g(&self.bytes_in),
            bytes_out: g(&self.bytes_out),
        }
    }
}

/// The manifest as this session last saw it, and the ETag a commit must match.
pub(crate) struct ManifestState {
    pub manifest: Manifest,
    pub e_tag: Option<String>,
    pub version: Option<String>,
}

/// Shared state of one open collection.
pub struct Collection {
    pub(crate) rt: tokio::runtime::Runtime,
    pub(crate) store: Arc<dyn ObjectStore>,
    /// `scheme://bucket` (for messages).
    pub(crate) url_base: String,
    /// `<prefix>/<tenant>/<collection>`.
    pub(crate) dir: String,
    /// Random id of this open (names the objects this session writes).
    pub(crate) session: u64,
    pub(crate) read_only: bool,
    pub(crate) state: Mutex<ManifestState>,
    /// Block objects freed by the store, deleted after the next successful commit.
    pub(crate) freed: Mutex<Vec<String>>,
    /// Unique suffix for objects this session writes.
    seq: AtomicU64,
    pub(crate) requests: Arc<RequestCounters>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A random-enough u64 (session ids, incarnations): std's randomly keyed hasher over
/// the time and the process id.
pub(crate) fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    h.write_u128(nanos);
    h.write_u32(std::process::id());
    h.finish()
}

impl Collection {
    pub(crate) fn new(
        rt: tokio::runtime::Runtime,
        store: Arc<dyn ObjectStore>,
        url_base: String,
        dir: String,
        read_only: bool,
        manifest: Manifest,
    ) -> Self {
        Self {
            rt,
            store,
            url_base,
            dir,
            session: random_u64(),
            read_only,
            state: Mutex::new(ManifestState {
                manifest,
                e_tag: None,
                version: None,
            }),
            freed: Mutex::new(Vec::new()),
            seq: AtomicU64::new(0),
            requests: Arc::new(RequestCounters::default()),
        }
    }

    /// Full object path of `rel` (relative to the collection directory).
    pub(crate) fn path(&self, rel: &str) -> OsPath {
        OsPath::from(format!("{}/{rel}", self.dir))
    }

    /// `scheme://bucket/<dir>/<rel>`, for messages.
    pub(crate) fn url(&self, rel: &str) -> String {
        format!("{}/{}/{rel}", self.url_base, self.dir)
    }

    /// A fresh key `<kind>-<session>-<n>` under `dir` for an object this session writes.
    pub(crate) fn fresh_key(&self, dir: &str, kind: &str) -> String {
        let n = self.seq.fetch_add(1, Ordering::Relaxed);
        format!("{dir}/{kind}-{:016x}-{n:08x}", self.session)
    }

    /// The manifest as last read or committed.
    pub fn manifest(&self) -> Manifest {
        lock(&self.state).manifest.clone()
    }

    /// Install the manifest read from (or created in) the store, with its version.
    pub(crate) fn set_manifest(
        &self,
        manifest: Manifest,
        e_tag: Option<String>,
        version: Option<String>,
    ) {
        *lock(&self.state) = ManifestState {
            manifest,
            e_tag,
            version,
        };
    }

    /// The manifest object, with its ETag and version.
    pub(crate) async fn get_manifest(&self) -> OResult<(Manifest, Option<String>, Option<String>)> {
        self.requests.gets.fetch_add(1, Ordering::Relaxed);
        let url = self.url(MANIFEST);
        let r = self
            .store
            .get(&self.path(MANIFEST))
            .await
            .map_err(|e| ObjectErr::from_os("get", url.clone(), e))?;
        let (e_tag, version) = (r.meta.e_tag.clone(), r.meta.version.clone());
        let b = r
            .bytes()
            .await
            .map_err(|e| ObjectErr::from_os("get", url.clone(), e))?;
        self.requests
            .bytes_in
            .fetch_add(b.len() as u64, Ordering::Relaxed);
        Ok((Manifest::decode(&b, &url)?, e_tag, version))
    }

    /// Create the manifest (fails with [`ObjectErr::Conflict`] if it exists).
    pub(crate) async fn create_manifest(&self, m: &Manifest) -> OResult<()> {
        self.requests.puts.fetch_add(1, Ordering::Relaxed);
        let r = self
            .store
            .put_opts(
                &self.path(MANIFEST),
                PutPayload::from(m.encode()),
                PutOptions {
                    mode: PutMode::Create,
                    ..PutOptions::default()
                },
            )
            .await
            .map_err(|e| ObjectErr::from_os("create", self.url(MANIFEST), e))?;
        self.set_manifest(m.clone(), r.e_tag, r.version);
        Ok(())
    }

    /// Request counters.
    pub fn requests(&self) -> Requests {
        self.requests.snapshot()
    }

    /// The whole object `rel`.
    pub(crate) async fn get(&self, rel: &str) -> OResult<Bytes> {
        self.requests.gets.fetch_add(1, Ordering::Relaxed);
        let url = self.url(rel);
        let r = self
            .store
            .get(&self.path(rel))
            .await
            .map_err(|e| ObjectErr::from_os("get", url.clone(), e))?;
        let b = r
            .bytes()
            .await
            .map_err(|e| ObjectErr::from_os("get", url, e))?;
        self.requests
            .bytes_in
            .fetch_add(b.len() as u64, Ordering::Relaxed);
        Ok(b)
    }

    /// Bytes `range` of object `rel` (one ranged GET).
    pub(crate) async fn get_range(&self, rel: &str, range: Range<u64>) -> OResult<Bytes> {
        self.requests.gets.fetch_add(1, Ordering::Relaxed);
        let b = self
            .store
            .get_range(&self.path(rel), range)
            .await
            .map_err(|e| ObjectErr::from_os("get", self.url(rel), e))?;
        self.requests
            .bytes_in
            .fetch_add(b.len() as u64, Ordering::Relaxed);
        Ok(b)
    }

    /// Put `bytes` at `rel` (overwriting: every key this crate writes is fresh).
    pub(crate) async fn put(&self, rel: &str, bytes: Bytes) -> OResult<()> {
        self.put_task(rel, bytes).await
    }

    /// A self-contained future putting `bytes` at `rel`, for spawning: it holds the client
    /// and the counters but not the collection, so the runtime is never dropped from one
    /// of its own worker threads.
    pub(crate) fn put_task(
        &self,
        rel: &str,
        bytes: Bytes,
    ) -> impl std::future::Future<Output = OResult<()>> + Send + 'static {
        let store = Arc::clone(&self.store);
        let requests = Arc::clone(&self.requests);
        let path = self.path(rel);
        let url = self.url(rel);
        async move {
            requests.puts.fetch_add(1, Ordering::Relaxed);
            requests
                .bytes_out
                .fetch_add(bytes.len() as u64, Ordering::Relaxed);
            store
                .put(&path, PutPayload::from_bytes(bytes))
                .await
                .map_err(|e| ObjectErr::from_os("put", url, e))?;
            Ok(())
        }
    }

    /// Delete objects, ignoring failures (they only leave garbage behind).
    pub(crate) async fn delete_quiet(&self, rels: &[String]) {
        let futs = rels.iter().map(|r| async move {
            self.requests.deletes.fetch_add(1, Ordering::Relaxed);
            if let Err(e) = self.store.delete(&self.path(r)).await {
                tracing::debug!(object = %self.url(r), error = %e, "delete failed; object left as garbage");
            }
        });
        futures::future::join_all(futs).await;
    }

    /// Take the freed block objects.
    pub(crate) fn take_freed(&self) -> Vec<String> {
        std::mem::take(&mut *lock(&self.freed))
    }

    /// Replace the manifest by `change(current)`, conditional on the object still being
    /// the one this session last read or wrote. Returns the committed manifest.
    ///
    /// # Errors
    /// [`ObjectErr::ReadOnly`]; [`ObjectErr::Conflict`] if another writer committed
    /// since; [`ObjectErr::Unavailable`].
    pub(crate) fn commit(&self, change: impl FnOnce(&mut Manifest)) -> OResult<Manifest> {
        if self.read_only {
            return Err(ObjectErr::ReadOnly { op: "commit" });
        }
        let mut st = lock(&self.state);
        let mut next = st.manifest.clone();
        change(&mut next);
        next.commit += 1;
        next.writer = self.session;
        let bytes = next.encode();
        let mode = PutMode::Update(UpdateVersion {
            e_tag: st.e_tag.clone(),
            version: st.version.clone(),
        });
        self.requests.puts.fetch_add(1, Ordering::Relaxed);
        self.requests
            .bytes_out
            .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        let path = self.path(MANIFEST);
        let url = self.url(MANIFEST);
        let res = self.rt.block_on(self.store.put_opts(
            &path,
            PutPayload::from(bytes),
            PutOptions {
                mode,
                ..PutOptions::default()
            },
        ));
        match res {
            Ok(r) => {
                st.manifest = next.clone();
                st.e_tag = r.e_tag;
                st.version = r.version;
                Ok(next)
            }
            Err(e) => {
                let e = ObjectErr::from_os("commit", url, e);
                if matches!(e, ObjectErr::Conflict { .. }) {
                    tracing::warn!(manifest = %self.url(MANIFEST), "manifest commit lost to another writer");
                }
                Err(e)
            }
        }
    }
}
