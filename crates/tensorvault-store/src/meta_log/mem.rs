//! In-memory MetaLog: the exact bytes of a `meta.log` file kept in a `Vec<u8>`, so replay
//! runs the same decoder as the file log and a WASM host can persist the bytes as they
//! are (`to_bytes` / `from_bytes`, or the persistence hook).

use super::layout::RECORD_LEN;
use super::record::{decode_header, encode_checked, encode_header};
use super::replayer::Replayer;
use super::{MetaLog, MetaRecord, ReplayStats};
use crate::config::{CollectionConfig, RecoveryMode};
use crate::error::{Result, StoreErr};

/// Called with the whole log (header and records, the same bytes as a `meta.log` file)
/// whenever it must become durable.
type Hook = Box<dyn FnMut(&[u8]) + Send>;

/// In-memory log, byte-compatible with [`super::FileMetaLog`].
///
/// The persistence hook (see [`MemMetaLog::set_persist_hook`]) receives the whole log on
/// [`MetaLog::sync`], after [`MetaLog::compact`] and after replay cut a torn tail, so a
/// host that stores those bytes atomically has the same guarantees as the file log.
pub struct MemMetaLog {
    /// Header followed by records (possibly with a torn tail until replay cut it).
    buf: Vec<u8>,
    config: CollectionConfig,
    generation: u64,
    /// Appends are allowed: the log is new, or replay has cut any torn tail.
    replayed: bool,
    hook: Option<Hook>,
}

impl std::fmt::Debug for MemMetaLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemMetaLog")
            .field("len", &self.buf.len())
            .field("config", &self.config)
            .field("generation", &self.generation)
            .field("replayed", &self.replayed)
            .field("hook", &self.hook.is_some())
            .finish()
    }
}

impl MemMetaLog {
    /// An empty log (header only, generation 0) for `config`, ready for appends.
    ///
    /// `config` should be valid ([`CollectionConfig::validate`]); [`MemMetaLog::try_new`]
    /// checks it. A log made with an invalid geometry does not load back with
    /// [`MemMetaLog::from_bytes`].
    #[must_use]
    pub fn new(config: CollectionConfig) -> Self {
        Self {
            buf: encode_header(&config, 0).to_vec(),
            config,
            generation: 0,
            replayed: true,
            hook: None,
        }
    }

    /// [`MemMetaLog::new`] after validating `config`.
    ///
    /// # Errors
    /// [`StoreErr::InvalidArgument`] naming the bad geometry field.
    pub fn try_new(config: CollectionConfig) -> Result<Self> {
        config.validate()?;
        Ok(Self::new(config))
    }

    /// A log from the bytes of a `meta.log` file (or of [`MemMetaLog::to_bytes`]). Only
    /// the header is checked here; records are checked by [`MetaLog::replay`], which
    /// must run before the first append.
    ///
    /// # Errors
    /// [`StoreErr::BadHeader`] if the header is missing or invalid.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Self> {
        let (config, generation) = decode_header(&bytes)?;
        Ok(Self {
            buf: bytes,
            config,
            generation,
            replayed: false,
            hook: None,
        })
    }

    /// The log's bytes: identical to the `meta.log` file a [`super::FileMetaLog`] would
    /// hold after the same operations.
    #[must_use]
    pub fn to_bytes(&self) -> Vec<u8> {
        self.buf.clone()
    }

    /// The log's bytes, borrowed.
    #[must_use]
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf
    }

    /// Install the persistence hook, called with the whole log on sync, after compaction
    /// and after replay cut a torn tail. Replaces any previous hook.
    pub fn set_persist_hook(&mut self, hook: impl FnMut(&[u8]) + Send + 'static) {
        self.hook = Some(Box::new(hook));
    }

    /// Builder form of [`MemMetaLog::set_persist_hook`].
    #[must_use]
    pub fn with_persist_hook(mut self, hook: impl FnMut(&[u8]) + Send + 'static) -> Self {
        self.hook = Some(Box::new(hook));
        self
    }

    /// Generation of the header: the number of compactions this log went through.
    #[must_use]
    pub fn generation(&self) -> u64 {
        self.generation
    }

    fn persist(&mut self) {
        if let Some(h) = self.hook.as_mut() {
            h(&self.buf);
        }
    }
}

impl MetaLog for MemMetaLog {
    fn collection(&self) -> CollectionConfig {
        self.config
    }

    fn append(&mut self, recs: &[MetaRecord]) -> Result<()> {
        if !self.replayed {
            return Err(StoreErr::InvalidArgument {
                field: "append",
                reason: "the log must be replayed (torn tail cut) before the first append".into(),
            });
        }
        // Encode (and check) everything before touching the log: all or nothing.
        let mut out = Vec::new();
        encode_checked(recs, self.buf.len() as u64, &mut out)?;
        self.buf.extend_from_slice(&out);
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        self.persist();
        Ok(())
    }

    fn replay(
        &mut self,
        mode: RecoveryMode,
        visit: &mut dyn FnMut(MetaRecord) -> Result<()>,
    ) -> Result<ReplayStats> {
        self.replay_at(mode, &mut |_, rec| visit(rec))
    }

    fn replay_at(
        &mut self,
        mode: RecoveryMode,
        visit: &mut dyn FnMut(Option<u64>, MetaRecord) -> Result<()>,
    ) -> Result<ReplayStats> {
        let visit = &mut |at: u64, rec| visit(Some(at), rec);
        let mut r = Replayer::new(mode);
        let body = self.buf.get(RECORD_LEN..).unwrap_or_default();
        r.feed(body, RECORD_LEN as u64, visit)?;
        let (stats, cut) = r.finish(self.buf.len() as u64);
        if stats.truncated_bytes > 0 {
            // `cut` <= len, so it fits in usize.
            self.buf
                .truncate(usize::try_from(cut).unwrap_or(self.buf.len()));
            self.persist();
        }
        self.replayed = true;
        Ok(stats)
    }

    fn compact(&mut self, snapshot: &mut dyn Iterator<Item = MetaRecord>) -> Result<()> {
        let generation = self.generation + 1;
        let mut buf = encode_header(&self.config, generation).to_vec();
        for r in snapshot {
            let at = buf.len() as u64;
            encode_checked(std::slice::from_ref(&r), at, &mut buf)?;
        }
        self.buf = buf;
        self.generation = generation;
        self.replayed = true;
        self.persist();
        Ok(())
    }

    fn record_count(&self) -> u64 {
        (self.buf.len().saturating_sub(RECORD_LEN) / RECORD_LEN) as u64
    }
}
