//! The local block cache: one file per block object (its exact bytes, trailer included)
//! in a directory, bounded in total size, evicting the least recently used. Block objects
//! are immutable (a slot number is never reused), so an entry can never go stale; every
//! hit is still checked against its trailer's CRC32C and dropped if damaged. The cache is
//! disposable: files are written with rename but never fsynced.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use lru::LruCache;

/// LRU bookkeeping: the `lru` crate's order (name -> size, unbounded by count) and the
/// total size, which bounds the cache in bytes.
struct Lru {
    order: LruCache<String, u64>,
    total: u64,
}

impl Default for Lru {
    fn default() -> Self {
        Lru {
            order: LruCache::unbounded(),
            total: 0,
        }
    }
}

impl Lru {
    /// Mark `name` most recently used; false if it is not cached.
    fn touch(&mut self, name: &str) -> bool {
        self.order.get(name).is_some()
    }

    fn insert(&mut self, name: String, size: u64) {
        if let Some(old) = self.order.put(name, size) {
            self.total -= old;
        }
        self.total += size;
    }

    fn remove(&mut self, name: &str) -> bool {
        match self.order.pop(name) {
            Some(size) => {
                self.total -= size;
                true
            }
            None => false,
        }
    }

    fn pop_oldest(&mut self) -> Option<String> {
        let (name, size) = self.order.pop_lru()?;
        self.total -= size;
        Some(name)
    }
}

/// Hit/miss counters of a [`BlockCache`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Reads served from the cache.
    pub hits: u64,
    /// Reads that went to the object store.
    pub misses: u64,
    /// Entries evicted to stay within the size bound.
    pub evictions: u64,
    /// Bytes held now.
    pub bytes: u64,
    /// Entries held now.
    pub entries: u64,
}

/// A bounded LRU directory of block objects.
pub struct BlockCache {
    dir: PathBuf,
    capacity: u64,
    lru: Mutex<Lru>,
    hits: AtomicU64,
    misses: AtomicU64,
    evictions: AtomicU64,
}

impl BlockCache {
    /// Open (or create) the cache directory `dir` holding at most `capacity` bytes.
    /// Entries already there (from an earlier run) are kept, oldest-modified first in
    /// line for eviction.
    ///
    /// # Errors
    /// The I/O error of creating or listing `dir`.
    pub fn open(dir: &Path, capacity: u64) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let mut found = Vec::new();
        for e in std::fs::read_dir(dir)?.flatten() {
            let Ok(name) = e.file_name().into_string() else {
                continue;
            };
            let Ok(md) = e.metadata() else { continue };
            if !md.is_file() {
                continue;
            }
            if name.ends_with(".tmp") {
                let _ = std::fs::remove_file(e.path());
                continue;
            }
            let mtime = md.modified().unwrap_or(std::time::UNIX_EPOCH);
            found.push((mtime, name, md.len()));
        }
        found.sort();
        let mut lru = Lru::default();
        for (_, name, len) in found {
            lru.insert(name, len);
        }
        let c = Self {
            dir: dir.to_owned(),
            capacity,
            lru: Mutex::new(lru),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
        };
        c.evict();
        Ok(c)
    }

    fn lru(&self) -> std::sync::MutexGuard<'_, Lru> {
        self.lru
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The bytes cached under `name`, if any (counts a hit or a miss).
    pub fn get(&self, name: &str) -> Option<Vec<u8>> {
        if self.lru().touch(name) {
            if let Ok(b) = std::fs::read(self.dir.join(name)) {
                self.hits.fetch_add(1, Ordering::Relaxed);
                return Some(b);
            }
            self.lru().remove(name);
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        None
    }

    /// Cache `bytes` under `name` (best effort: an I/O error just skips caching).
    pub fn put(&self, name: &str, bytes: &[u8]) {
        if bytes.len() as u64 > self.capacity {
            return;
        }
        let path = self.dir.join(name);
        let tmp = self
            .dir
            .join(format!("{name}.{:x}.tmp", crate::collection::random_u64()));
        let ok = std::fs::write(&tmp, bytes).is_ok() && std::fs::rename(&tmp, &path).is_ok();
        if !ok {
            let _ = std::fs::remove_file(&tmp);
            return;
        }
        self.lru().insert(name.to_owned(), bytes.len() as u64);
        self.evict();
    }

    /// Drop `name` (freed block, or damaged entry).
    pub fn remove(&self, name: &str) {
        if self.lru().remove(name) {
            let _ = std::fs::remove_file(self.dir.join(name));
        }
    }

    fn evict(&self) {
        loop {
            let victim = {
                let mut l = self.lru();
                if l.total <= self.capacity {
                    return;
                }
                l.pop_oldest()
            };
            let Some(v) = victim else { return };
            let _ = std::fs::remove_file(self.dir.join(&v));
            self.evictions.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counters and occupancy.
    pub fn stats(&self) -> CacheStats {
        let l = self.lru();
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
            bytes: l.total,
            entries: l.order.len() as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_evicts_the_least_recently_used_within_the_bound() {
        let d = tempfile::tempdir().unwrap();
        let c = BlockCache::open(d.path(), 300).unwrap();
        c.put("a", &[1u8; 100]);
        c.put("b", &[2u8; 100]);
        c.put("c", &[3u8; 100]);
        assert_eq!(c.get("a").unwrap(), vec![1u8; 100]); // a is now the most recent
        c.put("d", &[4u8; 100]); // evicts b
        assert!(c.get("b").is_none());
        assert!(c.get("a").is_some() && c.get("c").is_some() && c.get("d").is_some());
        let s = c.stats();
        assert_eq!((s.entries, s.bytes, s.evictions), (3, 300, 1));
        c.put("huge", &[0u8; 400]); // larger than the cache: not cached
        assert!(c.get("huge").is_none());
        c.remove("a");
        assert!(c.get("a").is_none());
        drop(c);
        // Reopen: surviving entries are found again, still bounded.
        let c = BlockCache::open(d.path(), 150).unwrap();
        let s = c.stats();
        assert_eq!(s.entries, 1);
        assert!(s.bytes <= 150);
    }

    #[test]
    fn a_replaced_entry_counts_its_new_size_once() {
        let d = tempfile::tempdir().unwrap();
        let c = BlockCache::open(d.path(), 250).unwrap();
        c.put("a", &[1u8; 100]);
        c.put("b", &[2u8; 100]);
        c.put("a", &[3u8; 40]); // replaced: 140 bytes, a most recent
        let s = c.stats();
        assert_eq!((s.entries, s.bytes, s.evictions), (2, 140, 0));
        c.put("c", &[4u8; 150]); // 290 > 250: evicts b (the oldest), not a
        assert!(c.get("b").is_none());
        assert_eq!(c.get("a").unwrap(), vec![3u8; 40]);
        let s = c.stats();
        assert_eq!((s.entries, s.bytes, s.evictions), (2, 190, 1));
    }
}
