//! Locations, options, connecting to S3, and opening (or creating) a collection.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use object_store::aws::{AmazonS3Builder, S3ConditionalPut};
use object_store::path::Path as OsPath;
use object_store::{BackoffConfig, ClientOptions, ObjectStore, RetryConfig};
use tensorvault_core::checksum::crc32c;
use tensorvault_store::fs::validate_component;
use tensorvault_store::meta_log::encode_header;
use tensorvault_store::{Catalog, Clock, Result, StoreConfig, StoreErr, SystemClock, TensorStore};

use crate::block_io::ObjectBlockIO;
use crate::cache::BlockCache;
use crate::collection::{random_u64, Collection, MANIFEST};
use crate::error::{OResult, ObjectErr};
use crate::frame;
use crate::manifest::{Manifest, ObjRef, MANIFEST_FORMAT};
use crate::meta_log::ObjectMetaLog;

/// A store on an object store: blocks as objects, the MetaLog as snapshot + segments.
pub type ObjectTensorStore<C = SystemClock> = TensorStore<C, ObjectBlockIO, ObjectMetaLog>;

/// Where stores live: `s3://bucket/prefix` (the prefix may be empty).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectLocation {
    /// The bucket.
    pub bucket: String,
    /// Key prefix without leading or trailing `/` (may be empty).
    pub prefix: String,
}

impl ObjectLocation {
    /// Parse `s3://bucket[/prefix...]`.
    ///
    /// # Errors
    /// [`ObjectErr::Config`] for another scheme, an empty bucket, or a prefix with empty,
    /// `.` or `..` components.
    pub fn parse(url: &str) -> OResult<Self> {
        let bad = |reason: &str| ObjectErr::Config {
            field: "url",
            reason: format!("{url:?}: {reason}"),
        };
        let rest = url
            .strip_prefix("s3://")
            .ok_or_else(|| bad("expected s3://bucket/prefix"))?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(bad("empty bucket"));
        }
        let prefix = prefix.trim_matches('/');
        if !prefix.is_empty()
            && prefix
                .split('/')
                .any(|c| c.is_empty() || c == "." || c == "..")
        {
            return Err(bad("empty, '.' or '..' component in the prefix"));
        }
        Ok(Self {
            bucket: bucket.to_owned(),
            prefix: prefix.to_owned(),
        })
    }

    /// `s3://bucket`.
    #[must_use]
    pub fn url_base(&self) -> String {
        format!("s3://{}", self.bucket)
    }

    /// `<prefix>/<tenant>/<collection>` (no leading `/`).
    #[must_use]
    pub fn collection_dir(&self, tenant: &str, collection: &str) -> String {
        if self.prefix.is_empty() {
            format!("{tenant}/{collection}")
        } else {
            format!("{}/{tenant}/{collection}", self.prefix)
        }
    }
}

/// How to reach the object store and how the backends behave.
#[derive(Clone, Debug)]
pub struct ObjectOptions {
    /// Endpoint of a self-hosted S3 (`http://127.0.0.1:9000`); `None`: AWS (or
    /// `AWS_ENDPOINT` from the environment). Plain http is allowed for an explicit
    /// endpoint.
    pub endpoint: Option<String>,
    /// Region; `None`: `AWS_REGION` / `AWS_DEFAULT_REGION`, else `us-east-1`.
    pub region: Option<String>,
    /// Local block cache directory (`None`: no cache).
    pub cache_dir: Option<PathBuf>,
    /// Bound of the cache in bytes.
    pub cache_bytes: u64,
    /// With packs and a cache: blocks fetched per cache miss (the missed one and the
    /// ones after it in its pack, which go into the cache), so reading a tensor costs
    /// about one GET per `readahead_blocks` blocks. 1: no read-ahead.
    pub readahead_blocks: u32,
    /// Put freshly written blocks into the cache.
    pub write_through: bool,
    /// Open without ever changing the collection: reads only; access statistics stay
    /// in memory; writes fail with [`ObjectErr::ReadOnly`].
    pub read_only: bool,
    /// Create the collection (with `StoreConfig::collection` as its geometry) if it has
    /// no manifest yet.
    pub create: bool,
    /// Block packaging of a NEW collection (an existing one keeps its own). Default
    /// [`crate::manifest::Layout::Packs`]: on the loopback benchmark it writes 256-block
    /// batches ~20x faster with 1/60 of the requests, and reads within ~15% of one object
    /// per block (bench/RESULTS.md, "Object store").
    pub layout: crate::manifest::Layout,
    /// Merge segments into one when a sync leaves more than this many.
    pub max_segments: usize,
    /// Block uploads in flight at once.
    pub put_concurrency: usize,
    /// Worker threads of the backend's tokio runtime.
    pub threads: usize,
    /// Retries of a failed request (object_store's retry policy).
    pub max_retries: usize,
    /// Give up retrying a request after this long.
    pub retry_timeout: Duration,
    /// Per-request timeout.
    pub request_timeout: Duration,
    /// Access key id and secret; `None`: from the environment.
    pub credentials: Option<(String, String)>,
    /// Allow credentials from the instance metadata service when no access key is set
    /// in the environment (off: a missing key is an error, and nothing is sent to the
    /// metadata address).
    pub allow_instance_credentials: bool,
}

impl Default for ObjectOptions {
    fn default() -> Self {
        Self {
            endpoint: None,
            region: None,
            cache_dir: None,
            cache_bytes: 1 << 30,
            readahead_blocks: 64,
            write_through: true,
            read_only: false,
            create: false,
            layout: crate::manifest::Layout::Packs,
            max_segments: 32,
            put_concurrency: 32,
            threads: 2,
            max_retries: 3,
            retry_timeout: Duration::from_secs(15),
            request_timeout: Duration::from_secs(30),
            credentials: None,
            allow_instance_credentials: false,
        }
    }
}

/// Build an S3 client for `loc` from `opts` and the usual AWS environment variables
/// (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION`,
/// `AWS_ENDPOINT`, ...). Conditional puts use If-Match / If-None-Match.
///
/// # Errors
/// [`ObjectErr::Config`] without credentials (unless `allow_instance_credentials`) or
/// when the client cannot be built.
pub fn connect_s3(loc: &ObjectLocation, opts: &ObjectOptions) -> OResult<Arc<dyn ObjectStore>> {
    let has_key = opts.credentials.is_some() || std::env::var_os("AWS_ACCESS_KEY_ID").is_some();
    if !has_key && !opts.allow_instance_credentials {
        return Err(ObjectErr::Config {
            field: "credentials",
            reason: "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY".into(),
        });
    }
    let mut b = AmazonS3Builder::from_env()
        .with_bucket_name(&loc.bucket)
        .with_conditional_put(S3ConditionalPut::ETagMatch)
        .with_retry(RetryConfig {
            backoff: BackoffConfig {
                init_backoff: Duration::from_millis(50),
                max_backoff: Duration::from_secs(2),
                base: 2.0,
            },
            max_retries: opts.max_retries,
            retry_timeout: opts.retry_timeout,
        })
        .with_client_options(
            ClientOptions::new()
                .with_timeout(opts.request_timeout)
                .with_connect_timeout(Duration::from_secs(5)),
        );
    let region = opts
        .region
        .clone()
        .or_else(|| std::env::var("AWS_REGION").ok())
        .or_else(|| std::env::var("AWS_DEFAULT_REGION").ok())
        .unwrap_or_else(|| "us-east-1".into());
    b = b.with_region(region);
    if let Some((id, secret)) = &opts.credentials {
        b = b.with_access_key_id(id).with_secret_access_key(secret);
    }
    if let Some(ep) = &opts.endpoint {
        b = b
            .with_endpoint(ep)
            .with_allow_http(ep.starts_with("http://"))
            .with_virtual_hosted_style_request(false);
    }
    let s = b.build().map_err(|e| ObjectErr::Config {
        field: "s3",
        reason: e.to_string(),
    })?;
    Ok(Arc::new(s))
}

fn runtime(threads: usize) -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.max(1))
        .thread_name("tv-object-store")
        .enable_all()
        .build()
        .map_err(|e| StoreErr::io("start runtime", "tokio", e))
}

/// Open the collection `<prefix>/<tenant>/<collection>/` in `store`, creating it with
/// `cfg.collection` as its geometry if `opts.create` and it has no manifest yet. Costs one
/// manifest GET, then the snapshot, segment and names GETs issued concurrently.
///
/// # Errors
/// [`StoreErr::InvalidName`]; a [`StoreErr::Backend`] carrying an [`ObjectErr`]
/// ([`ObjectErr::NotFound`] for a missing collection without `opts.create`,
/// [`ObjectErr::Checksum`] / [`ObjectErr::Malformed`] for a damaged object,
/// [`ObjectErr::Unavailable`]); the store's replay errors.
pub fn open_store<C: Clock>(
    store: Arc<dyn ObjectStore>,
    loc: &ObjectLocation,
    tenant: &str,
    collection: &str,
    clock: C,
    cfg: StoreConfig,
    opts: &ObjectOptions,
) -> Result<ObjectTensorStore<C>> {
    validate_component("tenant", tenant)?;
    validate_component("collection", collection)?;
    let dir = loc.collection_dir(tenant, collection);
    let placeholder = Manifest {
        format: MANIFEST_FORMAT,
        incarnation: 0,
        commit: 0,
        writer: 0,
        snapshot: ObjRef {
            key: "log/none".into(),
            bytes: 0,
        },
        segments: Vec::new(),
        names: None,
        next_slot: [0; 4],
        layout: crate::manifest::Layout::Objects,
    };
    let coll = Arc::new(Collection::new(
        runtime(opts.threads)?,
        store,
        loc.url_base(),
        dir.clone(),
        opts.read_only,
        placeholder,
    ));
    let (image, names) = coll
        .rt
        .block_on(load(&coll, &cfg, opts))
        .map_err(|e| e.into_store("open"))?;
    let m = coll.manifest();
    let scratch = opts.cache_dir.clone().unwrap_or_else(std::env::temp_dir);
    std::fs::create_dir_all(&scratch).map_err(|e| StoreErr::io("create dir", &scratch, e))?;
    let names_file = scratch.join(format!("tv-names-{:016x}.log", coll.session));
    if let Some(n) = &names {
        std::fs::write(&names_file, n).map_err(|e| StoreErr::io("write", &names_file, e))?;
    }
    let catalog = Catalog::open(&names_file)?;
    let cache = match &opts.cache_dir {
        Some(d) => {
            let sub = d.join(format!(
                "{:016x}-{:08x}",
                m.incarnation,
                crc32c(coll.url("").as_bytes())
            ));
            Some(
                BlockCache::open(&sub, opts.cache_bytes)
                    .map_err(|e| StoreErr::io("open cache", &sub, e))?,
            )
        }
        None => None,
    };
    let log = ObjectMetaLog::new(
        Arc::clone(&coll),
        image,
        Some(names_file),
        opts.max_segments,
    )?;
    let geo = tensorvault_store::MetaLog::collection(&log);
    let io = ObjectBlockIO::new(
        Arc::clone(&coll),
        &geo,
        cache,
        opts.write_through,
        opts.put_concurrency,
        opts.readahead_blocks,
    );
    TensorStore::open(tenant, collection, clock, io, log, catalog, cfg)
}

/// Read (or create) the manifest, then fetch the log image and the names.
async fn load(
    coll: &Collection,
    cfg: &StoreConfig,
    opts: &ObjectOptions,
) -> OResult<(Vec<u8>, Option<Vec<u8>>)> {
    let create = opts.create && !opts.read_only;
    let (m, e_tag, version) = match coll.get_manifest().await {
        Ok(v) => v,
        Err(ObjectErr::NotFound { .. }) if create => {
            cfg.collection.validate().map_err(|e| ObjectErr::Config {
                field: "collection",
                reason: e.to_string(),
            })?;
            let snap = frame::seal(encode_header(&cfg.collection, 0).to_vec());
            let key = coll.fresh_key("log", "snap");
            coll.put(&key, snap.clone().into()).await?;
            let m = Manifest {
                format: MANIFEST_FORMAT,
                incarnation: random_u64(),
                commit: 0,
                writer: coll.session,
                snapshot: ObjRef {
                    key: key.clone(),
                    bytes: snap.len() as u64,
                },
                segments: Vec::new(),
                names: None,
                next_slot: [0; 4],
                layout: opts.layout,
            };
            match coll.create_manifest(&m).await {
                Ok(()) => {
                    let body = frame::open(&snap, &coll.url(&key))?;
                    return Ok((body.to_vec(), None));
                }
                Err(ObjectErr::Conflict { .. }) => {
                    // Created concurrently by someone else: use theirs.
                    coll.delete_quiet(&[key]).await;
                    coll.get_manifest().await?
                }
                Err(e) => return Err(e),
            }
        }
        Err(e) => return Err(e),
    };
    coll.set_manifest(m.clone(), e_tag, version);
    let fetch = |r: ObjRef| async move {
        let b = coll.get(&r.key).await?;
        let url = coll.url(&r.key);
        if b.len() as u64 != r.bytes {
            return Err(ObjectErr::Malformed {
                path: url,
                reason: format!("{} bytes, the manifest says {}", b.len(), r.bytes),
            });
        }
        let n = frame::open(&b, &url)?.len();
        Ok::<_, ObjectErr>(b.slice(..n))
    };
    let logs = futures::future::try_join_all(
        std::iter::once(m.snapshot.clone())
            .chain(m.segments.iter().cloned())
            .map(fetch),
    );
    let names = async {
        match m.names.clone() {
            Some(r) => fetch(r).await.map(Some),
            None => Ok(None),
        }
    };
    let (parts, names) = futures::future::try_join(logs, names).await?;
    let mut image = Vec::with_capacity(parts.iter().map(bytes::Bytes::len).sum());
    for (i, p) in parts.iter().enumerate() {
        if i > 0 && p.len() % tensorvault_store::meta_log::layout::RECORD_LEN != 0 {
            let key = &m.segments[i - 1].key;
            return Err(ObjectErr::Malformed {
                path: coll.url(key),
                reason: format!(
                    "{} bytes is not a whole number of 128-byte records",
                    p.len()
                ),
            });
        }
        image.extend_from_slice(p);
    }
    Ok((image, names.map(|n| n.to_vec())))
}

/// Every `(tenant, collection)` under `loc` that has a manifest, sorted.
///
/// # Errors
/// [`ObjectErr::Unavailable`] if listing fails.
pub fn list_collections(
    store: &Arc<dyn ObjectStore>,
    loc: &ObjectLocation,
) -> OResult<Vec<(String, String)>> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| ObjectErr::Config {
            field: "runtime",
            reason: e.to_string(),
        })?;
    let root = (!loc.prefix.is_empty()).then(|| OsPath::from(loc.prefix.as_str()));
    let url = |p: &str| format!("{}/{p}", loc.url_base());
    rt.block_on(async {
        let mut out = Vec::new();
        let tenants = store
            .list_with_delimiter(root.as_ref())
            .await
            .map_err(|e| ObjectErr::from_os("list", url(&loc.prefix), e))?;
        for t in tenants.common_prefixes {
            let Some(tenant) = t.filename().map(str::to_owned) else {
                continue;
            };
            let colls = store
                .list_with_delimiter(Some(&t))
                .await
                .map_err(|e| ObjectErr::from_os("list", url(t.as_ref()), e))?;
            for c in colls.common_prefixes {
                let Some(coll) = c.filename().map(str::to_owned) else {
                    continue;
                };
                if validate_component("tenant", &tenant).is_err()
                    || validate_component("collection", &coll).is_err()
                {
                    continue;
                }
                if store.head(&c.child(MANIFEST)).await.is_ok() {
                    out.push((tenant.clone(), coll));
                }
            }
        }
        out.sort();
        Ok(out)
    })
}
