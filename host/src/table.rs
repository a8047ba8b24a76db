//! The embedded table API: put, get, delete and batches with TTL and
//! durability options.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::Node;
use crate::clock::now_ms;
use crate::error::Error;
use crate::fragment::state::{Mutation, WriteOutcome};
use crate::names::{TableName, validate_key};
use crate::node::router::key_hash;
pub use crate::record::MAX_EXPIRES_AT_MS;
use crate::record::Version;

/// When a write is acknowledged.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Durability {
    /// After the in-memory apply; reaches the store within the flush interval.
    Memory,
    /// After the write is in the store's write-ahead log: a killed process
    /// loses nothing acknowledged. The default.
    #[default]
    Wal,
    /// After the log is fsynced: survives power loss.
    Sync,
}

impl Durability {
    /// `memory`, `wal` or `sync`.
    pub fn as_str(self) -> &'static str {
        match self {
            Durability::Memory => "memory",
            Durability::Wal => "wal",
            Durability::Sync => "sync",
        }
    }
}

impl fmt::Display for Durability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown durability name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown durability {0:?}; use memory, wal or sync")]
pub struct UnknownDurability(pub String);

impl FromStr for Durability {
    type Err = UnknownDurability;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "memory" => Ok(Durability::Memory),
            "wal" => Ok(Durability::Wal),
            "sync" => Ok(Durability::Sync),
            other => Err(UnknownDurability(other.to_string())),
        }
    }
}

/// When a record expires.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Expiry {
    /// Never.
    #[default]
    Never,
    /// This long after the write.
    After(Duration),
    /// At this Unix time in milliseconds (a past time expires at once).
    At(u64),
}

impl Expiry {
    /// The deadline in Unix ms for a write at `now_ms` (`None`: no TTL).
    /// Refuses a zero TTL and deadlines after year 9999.
    pub fn resolve(self, now_ms: u64) -> Result<Option<u64>, Error> {
        let deadline = match self {
            Expiry::Never => return Ok(None),
            Expiry::After(ttl) => {
                let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
                if ttl_ms == 0 {
                    return Err(Error::InvalidTtl(
                        "ttl must be at least 1 ms; omit it for no expiry".into(),
                    ));
                }
                now_ms.saturating_add(ttl_ms)
            }
            Expiry::At(at) => at,
        };
        if deadline > MAX_EXPIRES_AT_MS {
            return Err(Error::InvalidTtl(format!(
                "deadline {deadline} ms is after year 9999 (max expires_at_ms {MAX_EXPIRES_AT_MS})"
            )));
        }
        Ok(Some(deadline))
    }
}

/// Options of a put.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PutOptions {
    /// When the record expires. Default: never.
    pub expiry: Expiry,
    /// When the put is acknowledged. Default: `wal`.
    pub durability: Durability,
}

impl PutOptions {
    /// Expire `ttl` after the write.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.expiry = Expiry::After(ttl);
        self
    }

    /// Expire at a Unix time in milliseconds.
    pub fn expires_at_ms(mut self, at: u64) -> Self {
        self.expiry = Expiry::At(at);
        self
    }

    /// Acknowledge at `durability`.
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }
}

/// A visible record as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The value.
    pub value: Bytes,
    /// Its version.
    pub version: Version,
    /// Its deadline, if it has a TTL.
    pub expires_at_ms: Option<u64>,
}

/// One operation of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchOp {
    /// Store `value` at `key`.
    Put {
        /// The key.
        key: String,
        /// The value.
        value: Bytes,
        /// Its expiry.
        expiry: Expiry,
    },
    /// Delete `key`.
    Delete {
        /// The key.
        key: String,
    },
}

/// What one batch item did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchOutcome {
    /// Written with this version.
    Written(Version),
    /// A delete of an absent key; nothing written.
    NotFound,
}

/// A handle on one table of a node. Cheap to clone.
#[derive(Clone)]
pub struct Table {
    node: Node,
    name: TableName,
}

impl Table {
    pub(crate) fn new(node: Node, name: TableName) -> Self {
        Self { node, name }
    }

    /// The table's name.
    pub fn name(&self) -> &TableName {
        &self.name
    }

    /// Store `value` at `key`; returns the new version once the write meets
    /// `options.durability`.
    pub async fn put(
        &self,
        key: &str,
        value: impl Into<Bytes>,
        options: PutOptions,
    ) -> Result<Version, Error> {
        let _admitted = self.node.inner.gate.admit().ok_or(Error::ShuttingDown)?;
        let mutation = self.put_mutation(key, value.into(), options.expiry)?;
        let (fragment, outcome) = self.submit(key, mutation).await?;
        match outcome {
            WriteOutcome::Applied { version, seq } => {
                self.wait_durable(fragment, seq, options.durability).await?;
                Ok(version)
            }
            WriteOutcome::NotFound => unreachable!("a put always writes"),
        }
    }

    /// The visible record at `key`: `None` when absent, deleted or expired
    /// (an expired record is invisible at once, converted or not). Served
    /// from memory on the caller's task.
    pub async fn get(&self, key: &str) -> Result<Option<Entry>, Error> {
        let _admitted = self.node.inner.gate.admit().ok_or(Error::ShuttingDown)?;
        validate_key(key)?;
        let fragment = self.node.inner.router.fragment_of(key);
        let record =
            self.node.inner.fragments[fragment as usize]
                .state()
                .get(&self.name, key, now_ms());
        Ok(record.map(|record| Entry {
            value: record.value,
            version: record.version,
            expires_at_ms: record.expires_at_ms,
        }))
    }

    /// Delete `key`: writes a tombstone and returns its version, or `None`
    /// (writing nothing) when the key has no visible record.
    pub async fn delete(
        &self,
        key: &str,
        durability: Durability,
    ) -> Result<Option<Version>, Error> {
        let _admitted = self.node.inner.gate.admit().ok_or(Error::ShuttingDown)?;
        validate_key(key)?;
        let (fragment, outcome) = self.submit(key, Mutation::Delete).await?;
        match outcome {
            WriteOutcome::Applied { version, seq } => {
                self.wait_durable(fragment, seq, durability).await?;
                Ok(Some(version))
            }
            WriteOutcome::NotFound => Ok(None),
        }
    }

    /// Apply `ops` (not as a transaction): every item is applied
    /// independently and concurrently, then each touched fragment is flushed
    /// once to meet `durability`. Returns one outcome per item, in order.
    pub async fn batch(
        &self,
        ops: Vec<BatchOp>,
        durability: Durability,
    ) -> Vec<Result<BatchOutcome, Error>> {
        let Some(_admitted) = self.node.inner.gate.admit() else {
            return ops.iter().map(|_| Err(Error::ShuttingDown)).collect();
        };
        let applied = futures::future::join_all(ops.into_iter().map(|op| async move {
            let (key, mutation) = match op {
                BatchOp::Put { key, value, expiry } => {
                    let mutation = self.put_mutation(&key, value, expiry)?;
                    (key, mutation)
                }
                BatchOp::Delete { key } => {
                    validate_key(&key)?;
                    (key, Mutation::Delete)
                }
            };
            self.submit(&key, mutation).await
        }))
        .await;
        let mut highest: HashMap<u32, u64> = HashMap::new();
        for (fragment, outcome) in applied.iter().flatten() {
            if let WriteOutcome::Applied { seq, .. } = outcome {
                let entry = highest.entry(*fragment).or_default();
                *entry = (*entry).max(*seq);
            }
        }
        let flushes = highest.into_iter().map(|(fragment, seq)| async move {
            (fragment, self.wait_durable(fragment, seq, durability).await)
        });
        let durable: HashMap<u32, Result<(), Error>> = futures::future::join_all(flushes)
            .await
            .into_iter()
            .collect();
        applied
            .into_iter()
            .map(|result| {
                let (fragment, outcome) = result?;
                match outcome {
                    WriteOutcome::Applied { version, .. } => {
                        durable[&fragment].clone()?;
                        Ok(BatchOutcome::Written(version))
                    }
                    WriteOutcome::NotFound => Ok(BatchOutcome::NotFound),
                }
            })
            .collect()
    }

    fn put_mutation(&self, key: &str, value: Bytes, expiry: Expiry) -> Result<Mutation, Error> {
        validate_key(key)?;
        let limit = self.node.inner.config.max_value_bytes;
        if value.len() > limit {
            return Err(Error::ValueTooLarge {
                len: value.len(),
                limit,
            });
        }
        Ok(Mutation::Put {
            value,
            expires_at_ms: expiry.resolve(now_ms())?,
        })
    }

    async fn submit(&self, key: &str, mutation: Mutation) -> Result<(u32, WriteOutcome), Error> {
        let hash = key_hash(key);
        let fragment_id = self.node.inner.router.fragment_of_hash(hash);
        let fragment = &self.node.inner.fragments[fragment_id as usize];
        let reply = fragment
            .submit_write(self.name.clone(), Arc::from(key), mutation, hash)
            .await?;
        let outcome = reply.await.map_err(|_| Error::Interrupted {
            fragment: fragment_id,
        })??;
        Ok((fragment_id, outcome))
    }

    async fn wait_durable(
        &self,
        fragment: u32,
        seq: u64,
        durability: Durability,
    ) -> Result<(), Error> {
        let persistence = self.node.inner.fragments[fragment as usize]
            .state()
            .persistence();
        let result = match durability {
            Durability::Memory => return Ok(()),
            Durability::Wal => persistence.flush_through(seq, false).await,
            Durability::Sync => persistence.flush_through(seq, true).await,
        };
        result.map_err(|source| Error::NotDurable { fragment, source })
    }
}
