//! A KV prefix cache (issue 24): reuse a prompt's attention KV across requests and
//! processes. A prompt's tokens are cut into chunks of `chunk_tokens`; each full chunk is
//! named by a BLAKE3 hash chain over the model identity, the chunk size and every token
//! up to and including it ([`chain`]), so a chunk is found only after exactly the same
//! prefix. Chunks live in the store: one collection per model (tenant [`TENANT`],
//! collection `m` + 32 hex digits of the model identity's hash), one tensor per chunk
//! named `c.{id}.{parent}` of shape `[2, layers, kv_heads, chunk_tokens, head_dim]` f16
//! whose blocks (one per key|value, layer and head) use the KV layout, so chunks get the
//! store's tiers, checksums, crash safety and space reclamation. The model's identity and
//! geometry are kept in `prefix.model` beside the store's files ([`manifest`]).
//!
//! * `store` encodes each missing chunk, then writes them in one *commit*: the
//!   collection's writer lock is taken (a bounded wait for another writer), the chunk
//!   table is rebuilt under it so a chunk another process stored meanwhile is skipped,
//!   each chunk is written as one batch of the store (its name first), the lock is
//!   released. A chunk is visible only when every block of it is present, so a process
//!   killed mid-store leaves nothing half-visible (the next commit deletes the leftovers).
//! * `lookup` and `load` read through a snapshot of the collection that takes no lock
//!   (reopened when the collection's logs changed), so readers never wait for writers.
//!   `lookup` walks the chain through the snapshot's table of chunks, reading no KV data.
//! * `load` reads and checks every block; a damaged chunk ends the load there (the
//!   result is shorter, never wrong), is counted in [`PrefixStats::damaged_chunks`] and,
//!   in a writable cache, dropped with its descendants at the next commit so the next
//!   `store` rewrites it. Uses seen by a writable handle are recorded at its next commit
//!   (for LRU eviction and tiering); use counters are summed into `prefix.stats`.
//! * `maintain` moves chunks to colder tiers by idle time ([`AgeTiers`]) and enforces
//!   the byte budget; `store` enforces the budget too. Eviction takes the least recently
//!   used chunk among those no other stored chunk extends (suffixes before prefixes).
//!
//! Processes: any number of processes read and write one root at once; commits are
//! serialized by the collection's lock, readers take none. `read_only` caches never
//! write anything.
//!
//! Without the `mmap` feature only the formats ([`chain`], [`manifest`]) are built.
//!
//! Spec: docs/formats/store.md, "Prefix cache".

#[cfg(feature = "mmap")]
mod cache;
pub mod chain;
pub mod counts;
#[cfg(feature = "mmap")]
mod evict;
#[cfg(feature = "mmap")]
pub mod kv_io;
pub mod manifest;

#[cfg(feature = "mmap")]
pub use cache::{
    PrefixCache, PrefixConfig, PrefixMaintainReport, PrefixStats, PrefixVerifyReport, SharedClock,
};
pub use counts::ModelCounts;
#[cfg(feature = "mmap")]
pub use evict::AgeTiers;
#[cfg(feature = "mmap")]
pub use kv_io::{KvData, LoadedKv};
pub use manifest::ModelManifest;

/// The tenant every prefix-cache collection lives under.
pub const TENANT: &str = "prefix";

/// The collection directories of every model's prefix cache under `root` (collections of
/// tenant [`TENANT`] whose name is `m` + 32 hex digits), sorted; read their
/// [`ModelManifest::read`] for the model each holds.
///
/// # Errors
/// [`crate::StoreErr::Io`] if `root` cannot be listed.
#[cfg(feature = "mmap")]
pub fn model_dirs(root: &std::path::Path) -> crate::Result<Vec<std::path::PathBuf>> {
    Ok(crate::fs::list_collections(root)?
        .into_iter()
        .filter(|(t, c)| {
            t == TENANT
                && c.len() == 33
                && c.starts_with('m')
                && c[1..].bytes().all(|b| b.is_ascii_hexdigit())
        })
        .map(|(t, c)| root.join(t).join(c))
        .collect())
}

/// The collection of `model`: `m` + the first 16 bytes of `blake3(model)` in hex.
#[must_use]
pub fn collection_name(model: &str) -> String {
    let h = blake3::hash(model.as_bytes());
    let mut s = String::with_capacity(33);
    s.push('m');
    for b in &h.as_bytes()[..16] {
        s.push_str(&format!("{b:02x}"));
    }
    s
}
