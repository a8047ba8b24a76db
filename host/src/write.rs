//! What a write asks for and what it gets back: durability, expiry, put
//! options, batch operations and their outcomes.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use bytes::Bytes;

use crate::record::Version;

/// A TTL or deadline that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidTtl {
    /// A TTL of zero.
    #[error("invalid TTL: ttl must be at least 1 ms; omit it for no expiry")]
    Zero,
    /// A deadline past the last one accepted.
    #[error(
        "invalid TTL: deadline {deadline} ms is after year 9999 (max expires_at_ms {MAX_EXPIRES_AT_MS})"
    )]
    AfterYear9999 {
        /// The refused deadline, in Unix ms.
        deadline: u64,
    },
}

pub use crate::record::MAX_EXPIRES_AT_MS;

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
    pub fn resolve(self, now_ms: u64) -> Result<Option<u64>, InvalidTtl> {
        let deadline = match self {
            Expiry::Never => return Ok(None),
            Expiry::After(ttl) => {
                let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
                if ttl_ms == 0 {
                    return Err(InvalidTtl::Zero);
                }
                now_ms.saturating_add(ttl_ms)
            }
            Expiry::At(at) => at,
        };
        if deadline > MAX_EXPIRES_AT_MS {
            return Err(InvalidTtl::AfterYear9999 { deadline });
        }
        Ok(Some(deadline))
    }
}

/// What a conditional write requires of the key's current record, checked
/// atomically with the write (in a cluster, where the write is applied, so
/// every replica judges it alike). A write whose condition does not hold
/// changes nothing and fails with [`crate::Error::PreconditionFailed`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub enum Condition {
    /// No condition. The default.
    #[default]
    Always,
    /// The key's visible record has this version. An absent, deleted or
    /// expired key does not match.
    Version(Version),
    /// The key has no visible record: absent, deleted or expired.
    Absent,
}

impl Condition {
    /// `Always` unless `version` is given.
    pub fn if_version(version: Option<Version>) -> Self {
        version.map_or(Condition::Always, Condition::Version)
    }
}

/// Who makes a write, for the one rule that depends on it: the writes of
/// change handlers' actions produce no change events, so no handler (nor
/// chain of handlers) can trigger itself forever. See docs/triggers.md.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub(crate) enum Origin {
    /// A client, the embedded API or an expiry handler's action.
    #[default]
    Client,
    /// A change handler's action.
    ChangeHandler,
}

/// Options of a put (its condition, if any, is an argument of
/// [`crate::Table::put_if`]).
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

/// Options of a delete or a TTL change.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// When the write is acknowledged. Default: `wal`.
    pub durability: Durability,
    /// What the key's current record must be. Default: anything.
    pub condition: Condition,
}

impl WriteOptions {
    /// Acknowledge at `durability`.
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// Write only if the key's record is (or is not) as `condition` says.
    pub fn condition(mut self, condition: Condition) -> Self {
        self.condition = condition;
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

/// A key read that may allow staleness: the record, and how old the data
/// it was read from may be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Read {
    /// The visible record, `None` when absent, deleted or expired.
    pub entry: Option<Entry>,
    /// Upper bound on the data's age: every write acknowledged longer ago
    /// than this is reflected. Zero for a linearizable read.
    pub staleness: std::time::Duration,
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

/// One operation of a batch with the condition it makes; a [`BatchOp`]
/// converts into an unconditional item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchItem {
    /// The operation.
    pub op: BatchOp,
    /// What the key's current record must be.
    pub condition: Condition,
}

impl From<BatchOp> for BatchItem {
    fn from(op: BatchOp) -> Self {
        BatchItem {
            op,
            condition: Condition::Always,
        }
    }
}

impl BatchOp {
    /// This operation, made only if `condition` holds.
    pub fn when(self, condition: Condition) -> BatchItem {
        BatchItem {
            op: self,
            condition,
        }
    }

    /// The key the operation writes.
    pub fn key(&self) -> &str {
        match self {
            BatchOp::Put { key, .. } | BatchOp::Delete { key } => key,
        }
    }
}

/// What one batch item did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchOutcome {
    /// Written with this version.
    Written(Version),
    /// A delete of an absent key; nothing written.
    NotFound,
}
