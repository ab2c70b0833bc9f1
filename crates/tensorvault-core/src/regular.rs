//! Opening files that must be regular files (issue 25 class 1).
//!
//! Every path the tools read can be something else: a FIFO, a socket, a character or block
//! device, a directory. `open(2)` on a FIFO blocks until a writer appears (forever, for a
//! read-only command), and a device can return endless bytes. [`open_regular`] opens with
//! `O_NONBLOCK` (so a FIFO open returns at once), checks the type of what was opened with
//! `fstat` (not of the path, which could be swapped in between), refuses anything but a
//! regular file with [`CoreError::NotRegularFile`] naming the path and its type, and then
//! clears `O_NONBLOCK` so reads behave as usual.

use std::fmt;
use std::fs::{File, FileType, OpenOptions};
use std::path::Path;

use crate::CoreError;

/// What a path is when it is not a regular file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FileKind {
    /// A directory.
    Directory,
    /// A FIFO (named pipe).
    Fifo,
    /// A Unix domain socket.
    Socket,
    /// A character device (`/dev/zero`, a terminal, ...).
    CharDevice,
    /// A block device.
    BlockDevice,
    /// A symbolic link (only seen when a link itself is examined).
    Symlink,
    /// None of the above and not a regular file.
    Unknown,
}

impl FileKind {
    /// The kind of `ft`, or `None` for a regular file.
    #[must_use]
    pub fn of(ft: FileType) -> Option<Self> {
        if ft.is_file() {
            return None;
        }
        if ft.is_dir() {
            return Some(Self::Directory);
        }
        if ft.is_symlink() {
            return Some(Self::Symlink);
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::FileTypeExt;
            if ft.is_fifo() {
                return Some(Self::Fifo);
            }
            if ft.is_socket() {
                return Some(Self::Socket);
            }
            if ft.is_char_device() {
                return Some(Self::CharDevice);
            }
            if ft.is_block_device() {
                return Some(Self::BlockDevice);
            }
        }
        Some(Self::Unknown)
    }

    /// The kind of whatever `path` names (following links), or `None` when it is a regular
    /// file or cannot be examined.
    #[must_use]
    pub fn of_path(path: &Path) -> Option<Self> {
        std::fs::metadata(path)
            .ok()
            .and_then(|m| Self::of(m.file_type()))
    }
}

impl fmt::Display for FileKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Directory => "a directory",
            Self::Fifo => "a FIFO (named pipe)",
            Self::Socket => "a socket",
            Self::CharDevice => "a character device",
            Self::BlockDevice => "a block device",
            Self::Symlink => "a symbolic link",
            Self::Unknown => "a special file",
        })
    }
}

/// Opens `path` for reading; it must be a regular file. Never blocks on a FIFO.
///
/// # Errors
/// [`CoreError::NotRegularFile`] naming the path and what it is; [`CoreError::Io`] (with
/// the `io::Error`'s kind kept, e.g. `NotFound`) when it cannot be opened.
pub fn open_regular(path: &Path) -> Result<File, CoreError> {
    open_regular_with(path, OpenOptions::new().read(true))
}

/// Opens `path` with `opts`; it must be a regular file. Never blocks on a FIFO. `opts` must
/// not carry custom flags of its own (they are replaced by `O_NONBLOCK` for the open).
///
/// # Errors
/// As [`open_regular`].
pub fn open_regular_with(path: &Path, opts: &OpenOptions) -> Result<File, CoreError> {
    let mut o = opts.clone();
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.custom_flags(libc::O_NONBLOCK);
    }
    let not_regular = |kind| CoreError::NotRegularFile {
        path: path.to_owned(),
        kind,
    };
    let file = match o.open(path) {
        Ok(f) => f,
        // A FIFO opened for writing without a reader (ENXIO), a directory opened for
        // writing (EISDIR), a socket (ENXIO): say what the path is, not the errno.
        Err(e) => {
            return Err(match FileKind::of_path(path) {
                Some(kind) => not_regular(kind),
                None => CoreError::Io {
                    op: "open",
                    path: path.display().to_string(),
                    source: e,
                },
            })
        }
    };
    let meta = file.metadata().map_err(|source| CoreError::Io {
        op: "stat",
        path: path.display().to_string(),
        source,
    })?;
    if let Some(kind) = FileKind::of(meta.file_type()) {
        return Err(not_regular(kind));
    }
    #[cfg(unix)]
    clear_nonblock(&file).map_err(|source| CoreError::Io {
        op: "fcntl",
        path: path.display().to_string(),
        source,
    })?;
    Ok(file)
}

#[cfg(unix)]
fn clear_nonblock(file: &File) -> std::io::Result<()> {
    use std::os::unix::io::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: `fd` is an open descriptor owned by `file` for the duration of both calls;
    // F_GETFL/F_SETFL only read and set its status flags.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Creates a FIFO at `path` (tests of the callers use it to build hostile inputs).
///
/// # Errors
/// The `mkfifo(3)` error.
#[cfg(unix)]
pub fn mkfifo(path: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    // SAFETY: `c` is a NUL-terminated path that lives across the call.
    if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("pipe");
        mkfifo(&p).unwrap();
        for opts in [
            OpenOptions::new().read(true).clone(),
            OpenOptions::new().read(true).write(true).clone(),
            OpenOptions::new().append(true).clone(),
        ] {
            match open_regular_with(&p, &opts) {
                Err(CoreError::NotRegularFile { path, kind }) => {
                    assert_eq!(path, p);
                    assert_eq!(kind, FileKind::Fifo);
                }
                other => panic!("expected NotRegularFile, got {other:?}"),
            }
        }
        let e = open_regular(&p).unwrap_err().to_string();
        assert!(e.contains("pipe") && e.contains("FIFO"), "{e}");
    }

    #[test]
    fn directories_and_devices_are_refused_and_missing_files_keep_their_kind() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(matches!(
            open_regular(tmp.path()),
            Err(CoreError::NotRegularFile {
                kind: FileKind::Directory,
                ..
            })
        ));
        assert!(matches!(
            open_regular_with(tmp.path(), OpenOptions::new().write(true)),
            Err(CoreError::NotRegularFile {
                kind: FileKind::Directory,
                ..
            })
        ));
        assert!(matches!(
            open_regular(Path::new("/dev/null")),
            Err(CoreError::NotRegularFile {
                kind: FileKind::CharDevice,
                ..
            })
        ));
        match open_regular(&tmp.path().join("missing")) {
            Err(CoreError::Io { source, .. }) => {
                assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
            }
            other => panic!("expected Io NotFound, got {other:?}"),
        }
    }

    #[test]
    fn a_regular_file_reads_normally() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("f");
        std::fs::File::create(&p)
            .unwrap()
            .write_all(b"abc")
            .unwrap();
        let mut s = String::new();
        open_regular(&p).unwrap().read_to_string(&mut s).unwrap();
        assert_eq!(s, "abc");
        let f = open_regular(&p).unwrap();
        use std::os::unix::io::AsRawFd;
        // SAFETY: the descriptor belongs to `f`, alive across the call.
        let flags = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_GETFL) };
        assert_eq!(flags & libc::O_NONBLOCK, 0, "O_NONBLOCK cleared");
    }
}
