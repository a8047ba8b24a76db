//! Online backups: make every acknowledged write durable, then copy the store
//! into a new directory that appears whole or not at all.
//!
//! The copy is written into a hidden temporary directory next to the target
//! and renamed into place only once complete, so the target never holds half
//! a backup; on any failure the temporary directory is removed and the
//! source node is untouched.

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::Node;
use crate::store::{KvStore, StoreError};

/// What a backup wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupReport {
    /// The backup directory (a data directory `ebb serve --data-dir` opens).
    pub dir: PathBuf,
    /// Bytes of the files in it (table files may be hard links shared with
    /// the source's data directory).
    pub bytes: u64,
    /// Files in it.
    pub files: u64,
    /// How long the backup took, flush included.
    pub duration: Duration,
}

/// A backup was not taken. In every case nothing is left at the target path
/// (an empty directory given as target stays empty) and the source node
/// keeps serving, unchanged.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    /// The target cannot take a backup: not absolute, not empty, not a
    /// directory, inside the data directory, its parent missing, or the
    /// parent not writable.
    #[error("backup dir {path}: {reason}")]
    InvalidDir {
        /// The target as given.
        path: String,
        /// What is wrong and what to do.
        reason: String,
    },
    /// The node is shutting down.
    #[error("the node is shutting down; no backup was taken")]
    ShuttingDown,
    /// A fragment could not make its buffered writes durable first.
    #[error(
        "no backup was taken: fragment {fragment} could not make its buffered writes durable ({source}); retry once the store is healthy (see /health)"
    )]
    Flush {
        /// The fragment whose flush failed.
        fragment: u32,
        /// The store error.
        source: StoreError,
    },
    /// The store could not write its copy.
    #[error("no backup was taken into {path}: {source}")]
    Store {
        /// The target.
        path: String,
        /// The store error.
        source: StoreError,
    },
    /// A file operation on the copy failed.
    #[error("no backup was taken into {path}: {source}")]
    Io {
        /// The path the operation was on.
        path: String,
        /// The I/O error.
        source: io::Error,
    },
}

impl Node {
    /// Write a consistent copy of the whole node (records, plugins, expiry
    /// bindings, outbox, dead letters, meta) into `dir` while the node keeps
    /// serving. Every write acknowledged before the call, at any
    /// durability, is in the copy; a batch or an expiry tombstone with its
    /// event is in it entirely or not at all. `dir` must be absolute,
    /// outside the data directory, and either missing (its parent must
    /// exist) or an empty directory.
    ///
    /// The copy keeps this node's id and can be served with
    /// `ebb serve --data-dir <dir>`. Shutdown waits for a backup in progress.
    pub async fn backup(&self, dir: impl Into<PathBuf>) -> Result<BackupReport, BackupError> {
        let started = Instant::now();
        let _admitted = self.inner.gate.admit().ok_or(BackupError::ShuttingDown)?;
        let dir = dir.into();
        let target = dir.clone();
        let data_dir = self.data_dir().to_path_buf();
        blocking(&dir, move || {
            check_target(&target)?;
            check_outside(&target, &data_dir)
        })
        .await?;
        self.flush_everything().await?;
        let store = self.store().map_err(|_| BackupError::ShuttingDown)?;
        let target = dir.clone();
        let (bytes, files) = blocking(&dir, move || write_copy(&*store, &target)).await?;
        let report = BackupReport {
            dir,
            bytes,
            files,
            duration: started.elapsed(),
        };
        tracing::info!(
            dir = %report.dir.display(),
            bytes,
            files,
            ms = report.duration.as_millis() as u64,
            "backup written"
        );
        Ok(report)
    }

    /// Flush every fragment's write buffer up to now and wait: afterwards
    /// every write acknowledged before the call is in the store.
    async fn flush_everything(&self) -> Result<(), BackupError> {
        let flushes = self
            .inner
            .fragments
            .iter()
            .map(|fragment| fragment.state().persistence().clone())
            .map(|persistence| async move { persistence.flush().await });
        for (fragment, result) in futures::future::join_all(flushes)
            .await
            .into_iter()
            .enumerate()
        {
            result.map_err(|source| BackupError::Flush {
                fragment: fragment as u32,
                source,
            })?;
        }
        Ok(())
    }
}

/// Run file and store work for the backup into `dir` on a blocking thread.
async fn blocking<T: Send + 'static>(
    dir: &Path,
    work: impl FnOnce() -> Result<T, BackupError> + Send + 'static,
) -> Result<T, BackupError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| BackupError::Store {
            path: dir.display().to_string(),
            source: StoreError::Engine(format!("backup task failed: {e}")),
        })?
}

/// Refuse a target inside the node's own data directory (the copy would
/// sit among the files it copies). A data dir that cannot be resolved (an
/// in-memory store's placeholder) has nothing inside it.
fn check_outside(dir: &Path, data_dir: &Path) -> Result<(), BackupError> {
    let (Ok(parent), Ok(data_dir)) = (
        std::fs::canonicalize(parent_of(dir)?),
        std::fs::canonicalize(data_dir),
    ) else {
        return Ok(());
    };
    if parent.starts_with(&data_dir) {
        return Err(invalid(
            dir,
            format!(
                "is inside the node's data directory {}; name a directory outside it",
                data_dir.display()
            ),
        ));
    }
    Ok(())
}

fn invalid(dir: &Path, reason: impl Into<String>) -> BackupError {
    BackupError::InvalidDir {
        path: dir.display().to_string(),
        reason: reason.into(),
    }
}

/// The target's parent, which must be an existing directory.
fn parent_of(dir: &Path) -> Result<&Path, BackupError> {
    let parent = dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .ok_or_else(|| invalid(dir, "has no parent directory; name a directory below one"))?;
    match std::fs::metadata(parent) {
        Ok(meta) if meta.is_dir() => Ok(parent),
        Ok(_) => Err(invalid(
            dir,
            format!(
                "its parent {} is not a directory; name a directory below an existing directory",
                parent.display()
            ),
        )),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(invalid(
            dir,
            format!(
                "its parent {} does not exist; create it first",
                parent.display()
            ),
        )),
        Err(e) => Err(invalid(
            dir,
            format!(
                "its parent {} cannot be used ({e}); name a directory below an existing directory",
                parent.display()
            ),
        )),
    }
}

/// Refuse a target that is relative, exists and is not an empty directory,
/// or whose parent is not an existing directory.
fn check_target(dir: &Path) -> Result<(), BackupError> {
    if !dir.is_absolute() {
        return Err(invalid(
            dir,
            "is not an absolute path; give the full path of a directory on the server",
        ));
    }
    parent_of(dir)?;
    match std::fs::symlink_metadata(dir) {
        Ok(meta) if meta.is_dir() => {
            let mut entries = std::fs::read_dir(dir)
                .map_err(|e| invalid(dir, format!("cannot be listed ({e})")))?;
            if entries.next().is_some() {
                return Err(invalid(
                    dir,
                    "is not empty; a backup never overwrites: name a new or empty directory",
                ));
            }
            Ok(())
        }
        Ok(_) => Err(invalid(
            dir,
            "exists and is not a directory; name a new or empty directory",
        )),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(invalid(dir, format!("cannot be used ({e})"))),
    }
}

/// A temporary directory next to `dir`, named after it, the process and the
/// time, so concurrent backups never share one.
fn temporary_sibling(dir: &Path, parent: &Path) -> PathBuf {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "backup".into());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    parent.join(format!(".{name}.ebb-backup-{}-{nanos}", std::process::id()))
}

/// Checkpoint `store` into a temporary sibling of `dir`, then rename it into
/// place and fsync the parent. Returns the bytes and files written. On
/// failure the temporary directory is removed.
fn write_copy(store: &dyn KvStore, dir: &Path) -> Result<(u64, u64), BackupError> {
    let parent = parent_of(dir)?;
    let temporary = temporary_sibling(dir, parent);
    // Creating the temporary directory also proves the parent writable.
    std::fs::create_dir(&temporary).map_err(|e| {
        invalid(
            dir,
            format!(
                "cannot create a directory in {} ({e}); name a writable location",
                parent.display()
            ),
        )
    })?;
    let result = checkpoint_and_rename(store, dir, parent, &temporary);
    // The checkpoint went into `temporary/data`, renamed away on success.
    let _ = std::fs::remove_dir_all(&temporary);
    result
}

fn checkpoint_and_rename(
    store: &dyn KvStore,
    dir: &Path,
    parent: &Path,
    temporary: &Path,
) -> Result<(u64, u64), BackupError> {
    let copy = temporary.join("data");
    let io_error = |path: &Path| {
        let path = path.display().to_string();
        move |source| BackupError::Io { path, source }
    };
    store
        .checkpoint(&copy)
        .map_err(|source| BackupError::Store {
            path: dir.display().to_string(),
            source,
        })?;
    let (bytes, files) = measure(&copy).map_err(io_error(&copy))?;
    // Replaces a missing or empty target only (rename(2) refuses a
    // non-empty directory, so a file appearing meanwhile is not lost).
    std::fs::rename(&copy, dir).map_err(|e| {
        if e.kind() == io::ErrorKind::DirectoryNotEmpty || e.kind() == io::ErrorKind::NotADirectory
        {
            invalid(
                dir,
                format!(
                    "changed while the backup was written ({e}); name a new or empty directory"
                ),
            )
        } else {
            BackupError::Io {
                path: dir.display().to_string(),
                source: e,
            }
        }
    })?;
    sync_dir(dir).map_err(io_error(dir))?;
    sync_dir(parent).map_err(io_error(parent))?;
    Ok((bytes, files))
}

/// Bytes and files below `dir`.
fn measure(dir: &Path) -> io::Result<(u64, u64)> {
    let (mut bytes, mut files) = (0, 0);
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        if meta.is_dir() {
            let (b, f) = measure(&entry.path())?;
            bytes += b;
            files += f;
        } else {
            bytes += meta.len();
            files += 1;
        }
    }
    Ok((bytes, files))
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::NodeConfig;
    use crate::store::MemoryStore;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "ebb-backup-unit-{name}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn reason(error: BackupError) -> String {
        match error {
            BackupError::InvalidDir { reason, .. } => reason,
            other => panic!("expected InvalidDir, got {other}"),
        }
    }

    #[test]
    fn a_target_must_be_absolute_new_or_empty_below_a_directory() {
        let root = scratch("target");
        assert!(check_target(&root.join("new")).is_ok());
        assert!(
            check_target(&root).is_ok(),
            "an empty directory takes a backup"
        );
        std::fs::create_dir(root.join("empty")).unwrap();
        assert!(reason(check_target(&root).unwrap_err()).contains("not empty"));
        assert!(check_target(&root.join("empty")).is_ok());
        assert!(reason(check_target(Path::new("relative/dir")).unwrap_err()).contains("absolute"));
        std::fs::write(root.join("file"), b"x").unwrap();
        assert!(reason(check_target(&root.join("file")).unwrap_err()).contains("not a directory"));
        let below_file = check_target(&root.join("file").join("sub")).unwrap_err();
        assert!(reason(below_file).contains("is not a directory"));
        let missing_parent = check_target(&root.join("missing").join("sub")).unwrap_err();
        assert!(reason(missing_parent).contains("does not exist"));
        std::fs::create_dir(root.join("full")).unwrap();
        std::fs::write(root.join("full").join("x"), b"x").unwrap();
        assert!(reason(check_target(&root.join("full")).unwrap_err()).contains("not empty"));
        let inside = check_outside(&root.join("full").join("copy"), &root.join("full"));
        assert!(reason(inside.unwrap_err()).contains("inside the node's data directory"));
        assert!(check_outside(&root.join("copy"), &root.join("full")).is_ok());
        assert!(check_outside(&root.join("copy"), Path::new("unused")).is_ok());
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[tokio::test]
    async fn a_store_without_checkpoints_fails_typed_and_leaves_nothing() {
        let root = scratch("memory");
        let node = Node::open_with_store(NodeConfig::new("unused"), Arc::new(MemoryStore::new()))
            .await
            .unwrap();
        let error = node.backup(root.join("copy")).await.unwrap_err();
        assert!(
            matches!(
                error,
                BackupError::Store {
                    source: StoreError::Unsupported { .. },
                    ..
                }
            ),
            "{error}"
        );
        let left: Vec<_> = std::fs::read_dir(&root).unwrap().collect();
        assert!(left.is_empty(), "left behind: {left:?}");
        node.shutdown().await.unwrap();
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[tokio::test]
    async fn a_backup_serves_every_acknowledged_memory_write() {
        let root = scratch("rocks");
        let config = NodeConfig::new(root.join("source"))
            .fragments(2)
            .flush_interval(Duration::from_secs(3600));
        let node = Node::open(config).await.unwrap();
        let table = node.table("t").unwrap();
        for i in 0..100 {
            table
                .put(
                    &format!("k{i}"),
                    format!("v{i}").into_bytes(),
                    crate::PutOptions {
                        durability: crate::Durability::Memory,
                        ..Default::default()
                    },
                )
                .await
                .unwrap();
        }
        let report = node.backup(root.join("copy")).await.unwrap();
        assert!(report.bytes > 0 && report.files > 0, "{report:?}");
        let error = node.backup(root.join("copy")).await.unwrap_err();
        assert!(reason(error).contains("not empty"));
        node.shutdown().await.unwrap();
        let copy = Node::open(NodeConfig::new(root.join("copy")))
            .await
            .unwrap();
        assert_eq!(copy.fragment_count(), 2);
        let table = copy.table("t").unwrap();
        for i in 0..100 {
            let entry = table.get(&format!("k{i}")).await.unwrap().unwrap();
            assert_eq!(entry.value.as_ref(), format!("v{i}").as_bytes());
        }
        copy.shutdown().await.unwrap();
        let names: Vec<String> = std::fs::read_dir(&root)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            !names.iter().any(|n| n.starts_with('.')),
            "temporary directory left: {names:?}"
        );
        std::fs::remove_dir_all(&root).unwrap();
    }
}
