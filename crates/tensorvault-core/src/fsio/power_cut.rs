//! A simulated power cut (feature `fault-injection`, for tests): an [`Observer`] that
//! counts every operation of the file layer under a root directory, lets the first `N`
//! through and, before operation `N + 1`, computes what a disk would hold after losing
//! power at that moment; that operation and every later one fail.
//!
//! The model (the weakest the POSIX promises allow, as RocksDB's FaultInjectionTestFS
//! and redb's crash tests assume):
//! - A file's contents are durable up to its last completed fsync/fdatasync. What was
//!   written since may be lost, kept, or kept in part: any subset of the 512-byte sectors
//!   that differ from the durable image (so a write can be torn at a sector boundary, and
//!   later writes can survive where earlier ones did not), with the length either the
//!   durable one or the current one.
//! - A directory's entries (creations, renames, links, removals) are durable up to its
//!   last completed fsync; after the cut a directory holds either its durable entries or
//!   all of its current ones (a rename is atomic, it is never half done).
//! - Directories themselves, once created, survive.
//!
//! Syncs are not performed for real ([`Verdict::Skip`]): the simulation decides what is
//! durable, which also makes thousands of cut points cheap.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use super::{observe, Observer, ObserverGuard, Op, Verdict};

/// Sector size: the unit a cut keeps or loses whole.
pub const SECTOR: usize = 512;

/// What the disk keeps of the writes that no sync covered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loss {
    /// Nothing: only synced data and synced directory entries.
    AllUnsynced,
    /// Each unsynced sector independently (one in two), each directory's unsynced
    /// entries all or none, each file's length durable or current; drawn from `seed`.
    Random {
        /// Seed of the draw.
        seed: u64,
    },
    /// Everything written (as after a process kill: the page cache survives).
    Nothing,
}

/// The files a cut left, by path relative to the root.
pub type Image = BTreeMap<PathBuf, Vec<u8>>;

type Inode = u64;

#[derive(Default)]
struct State {
    ops: u64,
    cut_at: Option<u64>,
    loss: Option<Loss>,
    image: Option<Image>,
    next_inode: Inode,
    /// Name -> file, as the directories hold them now.
    current: BTreeMap<PathBuf, Inode>,
    /// Name -> file, as the directories hold them durably.
    durable: BTreeMap<PathBuf, Inode>,
    /// Contents covered by a completed sync.
    synced: HashMap<Inode, Vec<u8>>,
    /// Contents of files whose last name went away (renamed over, removed) before the cut.
    orphans: HashMap<Inode, Vec<u8>>,
    /// Directory renames `(from, to)` not yet made durable by an fsync of `to`'s parent.
    dir_renames: Vec<(PathBuf, PathBuf)>,
    /// A log of operation kinds, for reports.
    kinds: BTreeMap<&'static str, u64>,
}

/// A power-cut simulator for everything under one root directory.
pub struct PowerCut {
    root: PathBuf,
    state: Mutex<State>,
}

fn cut_error() -> io::Error {
    io::Error::other("simulated power cut")
}

/// splitmix64: a tiny deterministic generator for the loss draw.
struct Draw(u64);

impl Draw {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn coin(&mut self) -> bool {
        self.next() & 1 == 1
    }
}

fn kind(op: &Op<'_>) -> &'static str {
    match op {
        Op::Write { .. } => "write",
        Op::Append { .. } => "append",
        Op::SetLen { .. } => "truncate",
        Op::Punch { .. } => "punch",
        Op::Sync { .. } => "fsync",
        Op::Rename { .. } => "rename",
        Op::HardLink { .. } => "link",
        Op::Remove { .. } => "remove",
        Op::SyncDir { .. } => "dir fsync",
    }
}

/// `p` with its prefix `from` replaced by `to` (unchanged if `p` is not under `from`).
fn rebase(p: &Path, from: &Path, to: &Path) -> PathBuf {
    match p.strip_prefix(from) {
        Ok(rest) => to.join(rest),
        Err(_) => p.to_path_buf(),
    }
}

fn parent(p: &Path) -> &Path {
    p.parent().unwrap_or(Path::new(""))
}

impl PowerCut {
    /// Start observing `root` (which must exist): every file under it now counts as
    /// durable (contents and names). The power is cut before operation `cut_at + 1`
    /// (`None`: never; then [`PowerCut::cut_now`] takes the image), losing `loss`.
    ///
    /// # Errors
    /// Reading the files under `root`.
    pub fn start(
        root: &Path,
        cut_at: Option<u64>,
        loss: Loss,
    ) -> io::Result<(Arc<Self>, ObserverGuard)> {
        let mut st = State {
            cut_at,
            loss: Some(loss),
            ..State::default()
        };
        for (rel, bytes) in read_tree(root)? {
            let ino = st.next_inode;
            st.next_inode += 1;
            st.current.insert(root.join(&rel), ino);
            st.durable.insert(root.join(&rel), ino);
            st.synced.insert(ino, bytes);
        }
        let pc = Arc::new(Self {
            root: root.to_path_buf(),
            state: Mutex::new(st),
        });
        let guard = observe(root, Arc::clone(&pc) as Arc<dyn Observer>);
        Ok((pc, guard))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Operations seen so far (the cut point's own operation included).
    #[must_use]
    pub fn ops(&self) -> u64 {
        self.lock().ops
    }

    /// Operations seen so far by kind ("write", "fsync", "rename", ...).
    #[must_use]
    pub fn op_kinds(&self) -> BTreeMap<&'static str, u64> {
        self.lock().kinds.clone()
    }

    /// Whether the power was cut.
    #[must_use]
    pub fn was_cut(&self) -> bool {
        self.lock().image.is_some()
    }

    /// Cut the power now (if it was not cut yet) and return what the disk holds.
    ///
    /// # Errors
    /// Reading the files under the root.
    pub fn cut_now(&self) -> io::Result<Image> {
        let mut st = self.lock();
        if st.image.is_none() {
            let img = self.image_of(&mut st)?;
            st.image = Some(img);
        }
        Ok(st.image.clone().unwrap_or_default())
    }

    /// Write `image` under `dir` (which must be empty), creating directories.
    ///
    /// # Errors
    /// The file system's.
    pub fn write_image(image: &Image, dir: &Path) -> io::Result<()> {
        for (rel, bytes) in image {
            let p = dir.join(rel);
            if let Some(d) = p.parent() {
                std::fs::create_dir_all(d)?;
            }
            std::fs::write(p, bytes)?;
        }
        Ok(())
    }

    fn inode_of(st: &mut State, path: &Path) -> Inode {
        if let Some(&i) = st.current.get(path) {
            return i;
        }
        let i = st.next_inode;
        st.next_inode += 1;
        st.current.insert(path.to_path_buf(), i);
        i
    }

    /// The name `path` is going away (renamed over or removed): keep its file's current
    /// contents if a durable name may still refer to it.
    fn orphan(st: &mut State, path: &Path) {
        if let Some(ino) = st.current.remove(path) {
            let still_named = st.current.values().any(|&i| i == ino);
            let durable = st.durable.values().any(|&i| i == ino);
            if !still_named && durable {
                let bytes = std::fs::read(path).unwrap_or_default();
                st.orphans.insert(ino, bytes);
            }
        }
    }

    fn apply(st: &mut State, op: &Op<'_>) -> io::Result<()> {
        match *op {
            Op::Sync { path } => {
                let ino = Self::inode_of(st, path);
                st.synced.insert(ino, std::fs::read(path)?);
            }
            Op::Rename { from, to } if from.is_dir() => {
                // Every name under the directory moves with it; durably so once the
                // parent of `to` is synced.
                st.current = std::mem::take(&mut st.current)
                    .into_iter()
                    .map(|(p, i)| (rebase(&p, from, to), i))
                    .collect();
                st.dir_renames.push((from.to_path_buf(), to.to_path_buf()));
            }
            Op::Rename { from, to } => {
                let ino = Self::inode_of(st, from);
                if st.current.get(to) != Some(&ino) {
                    Self::orphan(st, to);
                }
                st.current.remove(from);
                st.current.insert(to.to_path_buf(), ino);
            }
            Op::HardLink { from, to } => {
                let ino = Self::inode_of(st, from);
                if !st.current.contains_key(to) {
                    st.current.insert(to.to_path_buf(), ino);
                }
            }
            Op::Remove { path } => Self::orphan(st, path),
            Op::SyncDir { dir } => {
                // Directory renames into `dir` become durable.
                let (done, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut st.dir_renames)
                    .into_iter()
                    .partition(|(_, to)| parent(to) == dir);
                st.dir_renames = rest;
                for (from, to) in done {
                    st.durable = std::mem::take(&mut st.durable)
                        .into_iter()
                        .map(|(p, i)| (rebase(&p, &from, &to), i))
                        .collect();
                }
                // Files created in `dir` since the last look get their identity now.
                if let Ok(rd) = std::fs::read_dir(dir) {
                    for e in rd.flatten() {
                        if e.file_type().is_ok_and(|t| t.is_file()) {
                            Self::inode_of(st, &e.path());
                        }
                    }
                }
                st.durable.retain(|p, _| parent(p) != dir);
                let now: Vec<(PathBuf, Inode)> = st
                    .current
                    .iter()
                    .filter(|(p, _)| parent(p) == dir)
                    .map(|(p, &i)| (p.clone(), i))
                    .collect();
                st.durable.extend(now);
            }
            Op::Write { .. } | Op::Append { .. } | Op::SetLen { .. } | Op::Punch { .. } => {}
        }
        Ok(())
    }

    /// What the disk holds if the power goes now.
    fn image_of(&self, st: &mut State) -> io::Result<Image> {
        let loss = st.loss.unwrap_or(Loss::AllUnsynced);
        let mut draw = Draw(match loss {
            Loss::Random { seed } => seed ^ st.ops.wrapping_mul(0x2545_F491_4F6C_DD1D),
            _ => 0,
        });
        // Files created since the last look (never synced, never renamed) exist now.
        for (rel, _) in read_tree(&self.root)? {
            Self::inode_of(st, &self.root.join(rel));
        }
        // Directory entries: per directory, the durable set or the current one.
        let mut dirs: Vec<PathBuf> = st
            .current
            .keys()
            .chain(st.durable.keys())
            .map(|p| parent(p).to_path_buf())
            .collect();
        dirs.sort();
        dirs.dedup();
        let mut names: BTreeMap<PathBuf, Inode> = BTreeMap::new();
        for d in &dirs {
            let take_current = match loss {
                Loss::AllUnsynced => false,
                Loss::Nothing => true,
                Loss::Random { .. } => draw.coin(),
            };
            let src = if take_current {
                &st.current
            } else {
                &st.durable
            };
            names.extend(
                src.iter()
                    .filter(|(p, _)| parent(p) == d)
                    .map(|(p, &i)| (p.clone(), i)),
            );
        }
        let mut image = Image::new();
        let mut cache: HashMap<Inode, Vec<u8>> = HashMap::new();
        for (path, ino) in names {
            let contents = match cache.get(&ino) {
                Some(c) => c.clone(),
                None => {
                    let now = match st.current.iter().find(|(_, &i)| i == ino) {
                        Some((p, _)) => std::fs::read(p)?,
                        None => st.orphans.get(&ino).cloned().unwrap_or_default(),
                    };
                    let synced = st.synced.get(&ino).map_or(&[][..], Vec::as_slice);
                    let c = survive(synced, &now, loss, &mut draw);
                    cache.insert(ino, c.clone());
                    c
                }
            };
            let rel = path.strip_prefix(&self.root).unwrap_or(&path).to_path_buf();
            image.insert(rel, contents);
        }
        Ok(image)
    }
}

/// What survives of a file whose synced contents are `synced` and current ones `now`.
fn survive(synced: &[u8], now: &[u8], loss: Loss, draw: &mut Draw) -> Vec<u8> {
    match loss {
        Loss::AllUnsynced => synced.to_vec(),
        Loss::Nothing => now.to_vec(),
        Loss::Random { .. } => {
            let len = if draw.coin() { now.len() } else { synced.len() };
            let mut out = vec![0u8; len];
            let keep = synced.len().min(len);
            out[..keep].copy_from_slice(&synced[..keep]);
            for start in (0..len).step_by(SECTOR) {
                let end = (start + SECTOR).min(len);
                let old = synced.get(start..end.min(synced.len())).unwrap_or(&[]);
                let new = now.get(start..end.min(now.len())).unwrap_or(&[]);
                if old != new && draw.coin() {
                    out[start..end].fill(0);
                    out[start..start + new.len()].copy_from_slice(new);
                }
            }
            out
        }
    }
}

impl Observer for PowerCut {
    fn before(&self, op: &Op<'_>) -> io::Result<Verdict> {
        let mut st = self.lock();
        if st.image.is_some() {
            return Err(cut_error());
        }
        if st.cut_at == Some(st.ops) {
            let img = self.image_of(&mut st)?;
            st.image = Some(img);
            return Err(cut_error());
        }
        st.ops += 1;
        *st.kinds.entry(kind(op)).or_default() += 1;
        Self::apply(&mut st, op)?;
        Ok(if op.is_sync() {
            Verdict::Skip
        } else {
            Verdict::Perform
        })
    }
}

/// Every regular file under `root`, by relative path.
fn read_tree(root: &Path) -> io::Result<Vec<(PathBuf, Vec<u8>)>> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d)? {
            let e = e?;
            let t = e.file_type()?;
            if t.is_dir() {
                stack.push(e.path());
            } else if t.is_file() {
                let rel = e
                    .path()
                    .strip_prefix(root)
                    .unwrap_or(&e.path())
                    .to_path_buf();
                out.push((rel, std::fs::read(e.path())?));
            }
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fsio;
    use std::fs::OpenOptions;

    fn open(p: &Path) -> std::fs::File {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(p)
            .unwrap()
    }

    #[test]
    fn unsynced_data_and_names_are_lost_synced_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("r");
        std::fs::create_dir(&root).unwrap();
        std::fs::write(root.join("old"), b"old contents").unwrap();
        let (pc, _g) = PowerCut::start(&root, None, Loss::AllUnsynced).unwrap();
        let a = root.join("a");
        let f = open(&a);
        fsio::write_all_at(&f, &a, b"synced", 0).unwrap();
        fsio::sync_data(&f, &a).unwrap();
        fsio::sync_dir(&root).unwrap();
        fsio::write_all_at(&f, &a, b"SYNCED and more", 0).unwrap();
        let b = root.join("b");
        let g = open(&b);
        fsio::write_all_at(&g, &b, b"never synced", 0).unwrap();
        fsio::sync_data(&g, &b).unwrap(); // data synced, but the name never was
        fsio::rename(&b, &root.join("old")).unwrap();
        // A directory renamed but its parent never synced keeps its old name.
        let d = root.join("tmpdir");
        std::fs::create_dir(&d).unwrap();
        let c = d.join("c");
        let h = open(&c);
        fsio::write_all_at(&h, &c, b"in dir", 0).unwrap();
        fsio::sync_data(&h, &c).unwrap();
        fsio::sync_dir(&d).unwrap();
        fsio::rename(&d, &root.join("final")).unwrap();
        let img = pc.cut_now().unwrap();
        assert_eq!(img[Path::new("a")], b"synced");
        assert_eq!(img[Path::new("old")], b"old contents");
        assert!(!img.contains_key(Path::new("b")));
        assert_eq!(img[Path::new("tmpdir/c")], b"in dir");
        assert!(!img.contains_key(Path::new("final/c")));
        // Everything fails after the cut.
        assert!(fsio::sync_dir(&root).is_err());
    }

    #[test]
    fn a_cut_at_n_stops_before_operation_n_plus_one() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let (pc, _g) = PowerCut::start(&root, Some(2), Loss::AllUnsynced).unwrap();
        let a = root.join("a");
        let f = open(&a);
        fsio::write_all_at(&f, &a, b"x", 0).unwrap();
        fsio::sync_data(&f, &a).unwrap();
        assert!(fsio::sync_dir(&root).is_err());
        assert!(pc.was_cut());
        assert_eq!(pc.ops(), 2);
        // The name was never made durable.
        assert!(pc.cut_now().unwrap().is_empty());
    }

    #[test]
    fn random_loss_keeps_whole_sectors_of_either_version() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let a = root.join("a");
        std::fs::write(&a, vec![1u8; 4 * SECTOR]).unwrap();
        for seed in 0..32 {
            let (pc, g) = PowerCut::start(&root, None, Loss::Random { seed }).unwrap();
            let f = open(&a);
            fsio::write_all_at(&f, &a, &vec![2u8; 4 * SECTOR], 0).unwrap();
            let img = pc.cut_now().unwrap();
            let c = &img[Path::new("a")];
            assert_eq!(c.len(), 4 * SECTOR);
            for s in c.chunks(SECTOR) {
                assert!(s.iter().all(|&b| b == 1) || s.iter().all(|&b| b == 2));
            }
            drop(g);
            std::fs::write(&a, vec![1u8; 4 * SECTOR]).unwrap();
        }
    }
}
