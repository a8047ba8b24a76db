//! The data directory's identity in the `meta` family: format version,
//! fragment count, node id and the clock's high-water mark.

use std::sync::Arc;

use super::{KvStore, StoreError};

/// On-disk format written by this build. A data dir of another format is refused.
pub(crate) const FORMAT_VERSION: u32 = 1;

const KEY_FORMAT: &str = "format_version";
const KEY_FRAGMENTS: &str = "fragment_count";
const KEY_NODE_ID: &str = "node_id";
const KEY_HLC: &str = "hlc_high_water";
const KEY_CURSOR: &str = "cursor_key";

/// Identity of an opened data directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DataDirMeta {
    /// Number of fragments, fixed when the data dir was created.
    pub fragments: u32,
    /// This node's id, stamped into every version it issues.
    pub node_id: Arc<str>,
    /// Highest `(hlc_ms, counter)` recorded at the last clean shutdown.
    pub hlc_high_water: (u64, u64),
    /// Secret key that signs query cursors (32 random bytes, created once).
    pub cursor_key: [u8; 32],
}

/// The data dir's cursor key, created (and stored) the first time.
fn cursor_key(store: &dyn KvStore) -> Result<[u8; 32], MetaError> {
    match store.read_meta(KEY_CURSOR)? {
        Some(raw) => raw
            .try_into()
            .map_err(|_| MetaError::Corrupt { key: KEY_CURSOR }),
        None => {
            let key: [u8; 32] = rand::random();
            store.write_meta(&[(KEY_CURSOR, key.to_vec())])?;
            Ok(key)
        }
    }
}

/// The data dir cannot be used as asked.
#[derive(Debug, thiserror::Error)]
pub enum MetaError {
    /// Created with a different fragment count.
    #[error(
        "data dir was created with {found} fragments but {requested} were requested; start with --fragments {found} or use a new --data-dir"
    )]
    FragmentMismatch {
        /// Fragment count recorded in the data dir.
        found: u32,
        /// Fragment count asked for.
        requested: u32,
    },
    /// Written by another on-disk format.
    #[error(
        "data dir has format version {found}; this build reads format {FORMAT_VERSION}; use a build that matches or a new --data-dir"
    )]
    FormatMismatch {
        /// Format recorded in the data dir.
        found: u32,
    },
    /// A meta entry is present but unreadable.
    #[error("data dir meta entry {key} is corrupt; the directory may not be an ebb data dir")]
    Corrupt {
        /// The unreadable entry.
        key: &'static str,
    },
    /// Storage failed while reading or writing meta.
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn read_u32(store: &dyn KvStore, key: &'static str) -> Result<Option<u32>, MetaError> {
    match store.read_meta(key)? {
        None => Ok(None),
        Some(bytes) => Ok(Some(u32::from_be_bytes(
            bytes.try_into().map_err(|_| MetaError::Corrupt { key })?,
        ))),
    }
}

impl DataDirMeta {
    /// Read the data dir's identity, or record a new one when the dir is
    /// new. `requested` is the fragment count asked for (`None` = whatever
    /// the dir has, or `default_fragments` for a new dir); a mismatch is
    /// refused, never silently re-sharded.
    pub fn open(
        store: &dyn KvStore,
        requested: Option<u32>,
        default_fragments: u32,
    ) -> Result<Self, MetaError> {
        match read_u32(store, KEY_FORMAT)? {
            Some(found) if found != FORMAT_VERSION => Err(MetaError::FormatMismatch { found }),
            Some(_) => {
                let fragments = read_u32(store, KEY_FRAGMENTS)?
                    .ok_or(MetaError::Corrupt { key: KEY_FRAGMENTS })?;
                if let Some(requested) = requested
                    && requested != fragments
                {
                    return Err(MetaError::FragmentMismatch {
                        found: fragments,
                        requested,
                    });
                }
                let node_id = store
                    .read_meta(KEY_NODE_ID)?
                    .and_then(|raw| String::from_utf8(raw).ok())
                    .ok_or(MetaError::Corrupt { key: KEY_NODE_ID })?;
                let hlc_high_water = match store.read_meta(KEY_HLC)? {
                    None => (0, 0),
                    Some(raw) if raw.len() == 16 => (
                        u64::from_be_bytes(raw[..8].try_into().expect("8 bytes")),
                        u64::from_be_bytes(raw[8..].try_into().expect("8 bytes")),
                    ),
                    Some(_) => return Err(MetaError::Corrupt { key: KEY_HLC }),
                };
                Ok(Self {
                    fragments,
                    node_id: Arc::from(node_id),
                    hlc_high_water,
                    cursor_key: cursor_key(store)?,
                })
            }
            None => {
                let fragments = requested.unwrap_or(default_fragments);
                let node_id = format!("n{:016x}", rand::random::<u64>());
                store.write_meta(&[
                    (KEY_FORMAT, FORMAT_VERSION.to_be_bytes().to_vec()),
                    (KEY_FRAGMENTS, fragments.to_be_bytes().to_vec()),
                    (KEY_NODE_ID, node_id.clone().into_bytes()),
                ])?;
                Ok(Self {
                    fragments,
                    node_id: Arc::from(node_id),
                    hlc_high_water: (0, 0),
                    cursor_key: cursor_key(store)?,
                })
            }
        }
    }

    /// Record the clock's high-water mark (at clean shutdown), so versions
    /// issued after the next boot stay above every version issued before.
    pub fn save_high_water(
        store: &dyn KvStore,
        (ms, counter): (u64, u64),
    ) -> Result<(), StoreError> {
        let mut raw = ms.to_be_bytes().to_vec();
        raw.extend_from_slice(&counter.to_be_bytes());
        store.write_meta(&[(KEY_HLC, raw)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;

    #[test]
    fn a_new_dir_records_its_identity_and_reopens_with_it() {
        let store = MemoryStore::new();
        let created = DataDirMeta::open(&store, None, 16).unwrap();
        assert_eq!(created.fragments, 16);
        let reopened = DataDirMeta::open(&store, Some(16), 4).unwrap();
        assert_eq!(reopened, created);
        assert_eq!(DataDirMeta::open(&store, None, 4).unwrap().fragments, 16);
    }

    #[test]
    fn another_fragment_count_is_refused_with_what_to_do() {
        let store = MemoryStore::new();
        DataDirMeta::open(&store, Some(8), 16).unwrap();
        let error = DataDirMeta::open(&store, Some(16), 16).unwrap_err();
        assert!(matches!(
            error,
            MetaError::FragmentMismatch {
                found: 8,
                requested: 16
            }
        ));
        assert!(error.to_string().contains("--fragments 8"), "{error}");
    }

    #[test]
    fn another_format_version_is_refused() {
        let store = MemoryStore::new();
        store
            .write_meta(&[("format_version", 99u32.to_be_bytes().to_vec())])
            .unwrap();
        assert!(matches!(
            DataDirMeta::open(&store, None, 16),
            Err(MetaError::FormatMismatch { found: 99 })
        ));
    }

    #[test]
    fn high_water_round_trips() {
        let store = MemoryStore::new();
        DataDirMeta::open(&store, None, 2).unwrap();
        DataDirMeta::save_high_water(&store, (123, 4)).unwrap();
        assert_eq!(
            DataDirMeta::open(&store, None, 2).unwrap().hlc_high_water,
            (123, 4)
        );
    }
}
