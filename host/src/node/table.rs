//! The embedded table API: put, get, delete and batches on one table of a
//! node.

use super::error::Error;
use super::inner::Node;
use super::router::key_hash;
use crate::clock::now_ms;
use crate::cluster::check_staleness;
use crate::fragment::state::{Mutation, WriteOutcome};
use crate::names::{TableName, validate_key};
use crate::record::Version;
use bytes::Bytes;
use futures::StreamExt;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::write::{
    BatchItem, BatchOp, BatchOutcome, Condition, Durability, Entry, Expiry, Origin, PutOptions,
    Read, WriteOptions,
};

/// Most items of one batch being submitted at once. Each item in flight
/// holds its submission's state (and a `high` admission slot until it
/// applies). With this bound and the HTTP batch parser's lighter items,
/// a 1 M-record load in batches of 10 000 peaked about 45 MiB lower than
/// with every item started at once (BENCHMARKS.md).
/// Items still start in input order, so writes of one key in a batch apply
/// in order.
const BATCH_IN_FLIGHT: usize = 256;

/// A handle on one table of a node. Cheap to clone.
///
/// Puts through a client handle are checked against the node's memory
/// bound ([`super::memory`]) before anything is applied; deletes never are.
#[derive(Clone)]
pub struct Table {
    node: Node,
    name: TableName,
    /// Whether puts are checked against `max_memory`.
    bounded: bool,
    /// Who writes through this handle.
    origin: Origin,
}

impl Table {
    pub(crate) fn new(node: Node, name: TableName) -> Self {
        Self {
            node,
            name,
            bounded: true,
            origin: Origin::Client,
        }
    }

    /// This handle writing as a change handler: its writes produce no
    /// change events (the rule that keeps handlers from triggering
    /// themselves; docs/triggers.md).
    pub(crate) fn writing_as_change_handler(mut self) -> Self {
        self.origin = Origin::ChangeHandler;
        self
    }

    /// This handle with puts exempt from the memory bound: for the node's
    /// own writes (expiry handler actions) that must keep working on a
    /// full node so that expiry can go on freeing memory.
    pub(crate) fn exempt_from_memory_bound(mut self) -> Self {
        self.bounded = false;
        self
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
        self.put_if(key, value, options, Condition::Always).await
    }

    /// [`Table::put`] only if `condition` holds for the key's visible
    /// record, judged atomically with the write; otherwise nothing is
    /// written and the error is [`Error::PreconditionFailed`].
    pub async fn put_if(
        &self,
        key: &str,
        value: impl Into<Bytes>,
        options: PutOptions,
        condition: Condition,
    ) -> Result<Version, Error> {
        let _admitted = self.node.inner.gate.admit().ok_or(Error::ShuttingDown)?;
        let mutation = self.put_mutation(key, value.into(), options.expiry)?;
        let written = self
            .write_one(key, mutation, condition, options.durability)
            .await?;
        Ok(written.expect("a put writes unless its condition fails"))
    }

    /// The visible record at `key`: `None` when absent, deleted or expired
    /// (an expired record is invisible at once, converted or not). Served
    /// from memory on the caller's task; linearizable in a cluster.
    pub async fn get(&self, key: &str) -> Result<Option<Entry>, Error> {
        Ok(self.get_within(key, None).await?.entry)
    }

    /// [`Table::get`], allowing the answer to be up to `max_staleness` old
    /// (at most [`crate::cluster::MAX_STALENESS`]; `None` for a linearizable read). In a
    /// cluster a member holding a replica of the key's fragment then
    /// answers from it without asking the leader while it applied a read
    /// index confirmed within the bound; a single node is always current.
    /// The answer says how old its data may be.
    pub async fn get_within(
        &self,
        key: &str,
        max_staleness: Option<Duration>,
    ) -> Result<Read, Error> {
        let _admitted = self.node.inner.gate.admit().ok_or(Error::ShuttingDown)?;
        validate_key(key)?;
        check_staleness(max_staleness).map_err(Error::InvalidStaleness)?;
        let fragment = self.node.inner.router.fragment_of(key);
        let mut staleness = Duration::ZERO;
        if let Some(cluster) = &self.node.inner.cluster {
            if !cluster.holds(fragment) {
                let found =
                    Box::pin(cluster.get_remote(fragment, &self.name, &Arc::from(key))).await?;
                let entry = found.map(|(value, version, expires_at_ms)| Entry {
                    value,
                    version,
                    expires_at_ms,
                });
                return Ok(Read { entry, staleness });
            }
            staleness = match max_staleness {
                Some(bound) => Box::pin(cluster.read_within(fragment, bound)).await?,
                None => {
                    Box::pin(cluster.linearize(fragment)).await?;
                    Duration::ZERO
                }
            };
        }
        let record =
            self.node.inner.fragments[fragment as usize]
                .state()
                .get(&self.name, key, now_ms());
        let entry = record.map(|record| Entry {
            value: record.value,
            version: record.version,
            expires_at_ms: record.expires_at_ms,
        });
        Ok(Read { entry, staleness })
    }

    /// Delete `key`: writes a tombstone and returns its version, or `None`
    /// (writing nothing) when the key has no visible record.
    pub async fn delete(
        &self,
        key: &str,
        durability: Durability,
    ) -> Result<Option<Version>, Error> {
        self.delete_with(key, WriteOptions::default().durability(durability))
            .await
    }

    /// [`Table::delete`] with a condition: when it does not hold, nothing
    /// is written and the error is [`Error::PreconditionFailed`] (checked
    /// before whether there is anything to delete).
    pub async fn delete_with(
        &self,
        key: &str,
        options: WriteOptions,
    ) -> Result<Option<Version>, Error> {
        let _admitted = self.node.inner.gate.admit().ok_or(Error::ShuttingDown)?;
        validate_key(key)?;
        self.write_one(key, Mutation::Delete, options.condition, options.durability)
            .await
    }

    /// Give the visible record at `key` a new deadline without sending its
    /// value again: `expiry` from now, or [`Expiry::Never`] to clear its
    /// TTL. The record keeps its value under a new version, which is
    /// returned. `None` (nothing written) when the key has no visible
    /// record: a record whose deadline passed is expired, converted yet or
    /// not, and cannot be extended. A condition is checked first.
    pub async fn set_expiry(
        &self,
        key: &str,
        expiry: Expiry,
        options: WriteOptions,
    ) -> Result<Option<Version>, Error> {
        let _admitted = self.node.inner.gate.admit().ok_or(Error::ShuttingDown)?;
        validate_key(key)?;
        let expires_at_ms = expiry.resolve(now_ms())?;
        let mutation = Mutation::Retime { expires_at_ms };
        self.write_one(key, mutation, options.condition, options.durability)
            .await
    }

    /// Apply `ops` (not as a transaction): every item is applied
    /// independently and concurrently, then each touched fragment is
    /// flushed once to meet `durability`. Returns one outcome per item, in
    /// order.
    pub async fn batch(
        &self,
        ops: Vec<BatchOp>,
        durability: Durability,
    ) -> Vec<Result<BatchOutcome, Error>> {
        self.batch_items(ops.into_iter().map(BatchItem::from).collect(), durability)
            .await
    }

    /// [`Table::batch`] with a condition per item: each judges its own, and
    /// an item whose condition fails is [`Error::PreconditionFailed`] and
    /// writes nothing.
    pub async fn batch_items(
        &self,
        items: Vec<BatchItem>,
        durability: Durability,
    ) -> Vec<Result<BatchOutcome, Error>> {
        let Some(_admitted) = self.node.inner.gate.admit() else {
            return items.iter().map(|_| Err(Error::ShuttingDown)).collect();
        };
        if self.node.inner.cluster.is_some() {
            return Box::pin(self.replicate_batch(items, durability)).await;
        }
        let applied: Vec<_> = futures::stream::iter(items)
            .map(|item| async move {
                let (key, mutation) = self.batch_mutation(item.op)?;
                self.submit(&key, mutation, item.condition).await
            })
            .buffered(BATCH_IN_FLIGHT)
            .collect()
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
                if matches!(outcome, WriteOutcome::Applied { .. }) {
                    durable[&fragment].clone()?;
                }
                batch_outcome(outcome)
            })
            .collect()
    }

    /// The key and mutation of a batch operation, validated.
    fn batch_mutation(&self, op: BatchOp) -> Result<(String, Mutation), Error> {
        match op {
            BatchOp::Put { key, value, expiry } => {
                let mutation = self.put_mutation(&key, value, expiry)?;
                Ok((key, mutation))
            }
            BatchOp::Delete { key } => {
                validate_key(&key)?;
                Ok((key, Mutation::Delete))
            }
        }
    }

    /// Apply one mutation, through the cluster or the local fragment, and
    /// wait for `durability`: the new version, `None` when a delete or TTL
    /// change found nothing, [`Error::PreconditionFailed`] when the
    /// condition did not hold.
    async fn write_one(
        &self,
        key: &str,
        mutation: Mutation,
        condition: Condition,
        durability: Durability,
    ) -> Result<Option<Version>, Error> {
        let outcome = if self.node.inner.cluster.is_some() {
            // Boxed, as every cluster path here: the cluster's futures are
            // large, and inline they would make every single-node write's
            // future (and each HTTP connection's) as large.
            Box::pin(self.replicate(key, mutation, &condition, durability)).await?
        } else {
            let (fragment, outcome) = self.submit(key, mutation, condition).await?;
            if let WriteOutcome::Applied { seq, .. } = &outcome {
                self.wait_durable(fragment, *seq, durability).await?;
            }
            outcome
        };
        match batch_outcome(outcome)? {
            BatchOutcome::Written(version) => Ok(Some(version)),
            BatchOutcome::NotFound => Ok(None),
        }
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
        let expires_at_ms = expiry.resolve(now_ms())?;
        if self.bounded {
            self.node.inner.memory.admit_put(key.len(), value.len())?;
        }
        Ok(Mutation::Put {
            value: owned_value(value),
            expires_at_ms,
        })
    }

    async fn submit(
        &self,
        key: &str,
        mutation: Mutation,
        condition: Condition,
    ) -> Result<(u32, WriteOutcome), Error> {
        let hash = key_hash(key);
        let fragment_id = self.node.inner.router.fragment_of_hash(hash);
        let fragment = &self.node.inner.fragments[fragment_id as usize];
        let reply = fragment
            .submit_write(
                self.name.clone(),
                Arc::from(key),
                mutation,
                condition,
                self.origin,
                hash,
            )
            .await?;
        let outcome = reply.await.map_err(|_| Error::Interrupted {
            fragment: fragment_id,
        })??;
        Ok((fragment_id, outcome))
    }

    /// In a cluster: every item through its fragment's leader, all at
    /// once, each independently (not a transaction). A committed write is as durable
    /// as the log of a majority (docs/cluster.md), so there is no flush to
    /// wait for.
    async fn replicate_batch(
        &self,
        items: Vec<BatchItem>,
        durability: Durability,
    ) -> Vec<Result<BatchOutcome, Error>> {
        futures::future::join_all(items.into_iter().map(|item| async move {
            let (key, mutation) = self.batch_mutation(item.op)?;
            let outcome = self
                .replicate(&key, mutation, &item.condition, durability)
                .await?;
            batch_outcome(outcome)
        }))
        .await
    }

    /// In a cluster: admit the write to its fragment's `high` pool and
    /// have the fragment's leader version and commit it.
    async fn replicate(
        &self,
        key: &str,
        mutation: Mutation,
        condition: &Condition,
        durability: Durability,
    ) -> Result<WriteOutcome, Error> {
        let cluster = self
            .node
            .inner
            .cluster
            .as_ref()
            .expect("called in a cluster only");
        let fragment_id = self.node.inner.router.fragment_of(key);
        let _permit = self.node.inner.fragments[fragment_id as usize].admit_write()?;
        Ok(cluster
            .write(
                fragment_id,
                &self.name,
                &Arc::from(key),
                mutation,
                condition,
                self.origin,
                durability,
            )
            .await?)
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

/// `value` copied into an allocation of exactly its size. A value can
/// arrive as a slice of a larger buffer (an HTTP request body is a slice of
/// the connection's read buffer, kilobytes for a value of a hundred
/// bytes): kept as is, it would pin that whole buffer while the write waits
/// in the fragment's write buffer, memory the backlog limit does not count,
/// and the connection would allocate a new read buffer for its next
/// request. `Bytes` cannot tell how large the allocation behind a slice
/// is, so every value is copied; the copy costs less than the allocation
/// it saves.
fn owned_value(value: Bytes) -> Bytes {
    Bytes::copy_from_slice(&value)
}

/// A write's outcome as the API reports it.
fn batch_outcome(outcome: WriteOutcome) -> Result<BatchOutcome, Error> {
    match outcome {
        WriteOutcome::Applied { version, .. } => Ok(BatchOutcome::Written(version)),
        WriteOutcome::NotFound => Ok(BatchOutcome::NotFound),
        WriteOutcome::ConditionFailed { current } => Err(Error::PreconditionFailed { current }),
    }
}
