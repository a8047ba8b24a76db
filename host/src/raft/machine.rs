//! A group's state machine on openraft: the adapter between openraft's
//! `RaftStateMachine` and the state a group replicates, which the layers
//! above supply through [`GroupMachine`] (the fragment state for a
//! fragment's group).
//!
//! A durable machine ([`StateMachine::open`]) keeps its applied position
//! (the last entry applied, and the last membership among the entries) in
//! the store with the state it covers, so a restart resumes applying after
//! it. A snapshot is a view captured between applies and encoded only when
//! a follower needs it; building one first makes the state it covers
//! durable, which is what lets openraft purge the log behind it. A
//! transient machine ([`StateMachine::new`], tests) keeps its position in
//! memory only.

use std::io;
use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::{Stream, TryStreamExt};
use openraft::EntryPayload;
use openraft::storage::{EntryResponder, RaftSnapshotBuilder, RaftStateMachine};
use openraft::type_config::alias::{SnapshotMetaOf, SnapshotOf};

use super::codec::encode_position;
use super::log_store::{position_key, read_position};
use super::types::{GroupId, LogId, Reply, StoredMembership, TypeConfig};
use crate::store::KvStore;

/// What a Raft group replicates. Implemented above this layer; the group
/// calls it on its state machine task, in log order.
pub trait GroupMachine: Send + Sync + 'static {
    /// Whether [`Self::apply`] and [`Self::record_position`] may block (a
    /// plugin compiles, a store write waits for the disk): the adapter then
    /// calls them on the blocking pool, one at a time, in log order. `false`
    /// (the default) calls them on the group's task: in-memory work only.
    const BLOCKING: bool = false;

    /// Apply one committed command and answer the proposer. Must be
    /// deterministic: the same commands in the same order from the same
    /// state give the same state and answers on every replica. An error
    /// means the command cannot be applied anywhere (a corrupt entry): the
    /// group stops rather than skip it.
    fn apply(&self, command: &[u8]) -> Result<Bytes, String>;

    /// A view of the whole state as of the last command applied.
    type Captured: Send + Sync + 'static;

    /// Take a view for a snapshot. Called between applies on the group's
    /// state machine task, so it must be cheap (share structure, copy
    /// nothing per record).
    fn capture(&self) -> Self::Captured;

    /// Encode a captured view. May take long: runs on a blocking thread.
    /// An error (the state could not be read) fails the sending of this
    /// snapshot, which openraft retries later.
    fn encode(captured: Self::Captured) -> Result<Bytes, String>;

    /// Replace the whole state with one [`Self::encode`] made. May take
    /// long: runs on a blocking thread while the group applies nothing.
    fn restore(&self, snapshot: &[u8]) -> Result<(), String>;

    /// Write `position` to the store together with the state changes of
    /// every command applied (or snapshot restored) before this call: in
    /// the same store write or a later one, never an earlier one, so the
    /// store never holds a position ahead of its state. Called after each
    /// run of applies. A machine whose state is not durable ignores it
    /// (the default).
    fn record_position(&self, position: Position) {
        let _ = position;
    }

    /// Make every state change applied so far, and the last position
    /// recorded, durable; resolves once they are (or with why not). A
    /// snapshot waits for it before openraft may purge the log behind the
    /// snapshot. The default (nothing durable) resolves at once.
    fn persist(&self) -> BoxFuture<'static, Result<(), String>> {
        Box::pin(async { Ok(()) })
    }
}

/// A group's applied position as a `raft_state` entry of the store: the
/// machine writes it with the state it covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Position {
    /// The entry's key in the `raft_state` family.
    pub key: Vec<u8>,
    /// The encoded position (`ebb.raft.v1.Position`).
    pub value: Vec<u8>,
}

/// A snapshot's data: the bytes a leader sent, or a view of the state
/// captured between applies and encoded only when it is sent or installed
/// (building a snapshot to purge the log behind it then costs no copy of
/// the state).
pub enum SnapshotData {
    /// An encoded snapshot.
    Encoded(Bytes),
    /// A captured view and how to encode it.
    Deferred(Box<dyn FnOnce() -> Result<Bytes, String> + Send + Sync>),
}

impl SnapshotData {
    /// The encoded snapshot; a deferred view is encoded on a blocking
    /// thread.
    pub async fn into_bytes(self) -> io::Result<Bytes> {
        match self {
            SnapshotData::Encoded(bytes) => Ok(bytes),
            SnapshotData::Deferred(encode) => tokio::task::spawn_blocking(encode)
                .await
                .map_err(io::Error::other)?
                .map_err(io::Error::other),
        }
    }
}

impl std::fmt::Debug for SnapshotData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SnapshotData::Encoded(bytes) => write!(f, "Encoded({} bytes)", bytes.len()),
            SnapshotData::Deferred(_) => f.write_str("Deferred"),
        }
    }
}

/// The encoded state of `machine` now: [`GroupMachine::capture`] then
/// [`GroupMachine::encode`], on the calling thread.
pub fn encoded<M: GroupMachine>(machine: &M) -> Result<Bytes, String> {
    M::encode(machine.capture())
}

/// openraft's state machine over a [`GroupMachine`].
pub struct StateMachine<M> {
    machine: Arc<M>,
    applied: Option<LogId>,
    membership: StoredMembership,
    /// The group whose position the machine keeps durable; `None` for a
    /// transient machine.
    durable: Option<GroupId>,
}

impl<M: GroupMachine> StateMachine<M> {
    /// A transient state machine over `machine`: it starts having applied
    /// nothing and keeps its position in memory only.
    pub fn new(machine: Arc<M>) -> Self {
        Self {
            machine,
            applied: None,
            membership: StoredMembership::default(),
            durable: None,
        }
    }

    /// The state machine of `group` over `machine`, whose state is durable
    /// in `store`: it starts at the position last made durable with that
    /// state (nothing applied if there is none), and records each new
    /// position through [`GroupMachine::record_position`]. Fails if the
    /// stored position cannot be read or decoded.
    pub async fn open(
        machine: Arc<M>,
        group: GroupId,
        store: Arc<dyn KvStore>,
    ) -> io::Result<Self> {
        let (applied, membership) = match read_position(group, store).await? {
            Some((applied, membership)) => (Some(applied), membership),
            None => (None, StoredMembership::default()),
        };
        Ok(Self {
            machine,
            applied,
            membership,
            durable: Some(group),
        })
    }

    /// Hand the current position to the machine to make durable with its
    /// state (a durable machine only).
    async fn record_position(&self) -> io::Result<()> {
        let (Some(group), Some(applied)) = (self.durable, self.applied.as_ref()) else {
            return Ok(());
        };
        let position = Position {
            key: position_key(group),
            value: encode_position(applied, &self.membership),
        };
        if M::BLOCKING {
            let machine = self.machine.clone();
            tokio::task::spawn_blocking(move || machine.record_position(position))
                .await
                .map_err(io::Error::other)?;
        } else {
            self.machine.record_position(position);
        }
        Ok(())
    }

    /// A deferred snapshot of the state now.
    fn capture(&self) -> SnapshotData {
        let captured = self.machine.capture();
        SnapshotData::Deferred(Box::new(move || M::encode(captured)))
    }
}

/// Builds a snapshot of the state captured when it was created: makes that
/// state durable and hands the view on, unencoded.
pub struct SnapshotBuilder<M: GroupMachine> {
    meta: SnapshotMetaOf<TypeConfig>,
    data: Option<SnapshotData>,
    machine: Arc<M>,
}

impl<M: GroupMachine> RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder<M> {
    type SnapshotData = SnapshotData;

    async fn build_snapshot(&mut self) -> io::Result<SnapshotOf<TypeConfig, SnapshotData>> {
        let data = self
            .data
            .take()
            .ok_or_else(|| io::Error::other("a snapshot builder builds once"))?;
        // openraft purges the log behind a snapshot once it is built: the
        // state (and position) it covers must be on disk first.
        self.machine.persist().await.map_err(io::Error::other)?;
        Ok(SnapshotOf::<TypeConfig, SnapshotData> {
            meta: self.meta.clone(),
            snapshot: data,
        })
    }
}

impl<M: GroupMachine> RaftStateMachine<TypeConfig> for StateMachine<M> {
    type SnapshotData = SnapshotData;
    type SnapshotBuilder = SnapshotBuilder<M>;

    async fn applied_state(&mut self) -> io::Result<(Option<LogId>, StoredMembership)> {
        Ok((self.applied, self.membership.clone()))
    }

    async fn apply<S>(&mut self, mut entries: S) -> io::Result<()>
    where
        S: Stream<Item = io::Result<EntryResponder<TypeConfig>>> + Unpin + Send,
    {
        let mut applied_any = false;
        while let Some((entry, responder)) = entries.try_next().await? {
            let reply = match entry.payload {
                EntryPayload::Blank => Bytes::new(),
                EntryPayload::Normal(command) => {
                    let applied = if M::BLOCKING {
                        let machine = self.machine.clone();
                        tokio::task::spawn_blocking(move || machine.apply(&command.bytes))
                            .await
                            .map_err(io::Error::other)?
                    } else {
                        self.machine.apply(&command.bytes)
                    };
                    applied.map_err(|e| {
                        io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!("log entry {} cannot be applied: {e}", entry.log_id),
                        )
                    })?
                }
                EntryPayload::Membership(membership) => {
                    self.membership = StoredMembership::new(Some(entry.log_id), membership);
                    Bytes::new()
                }
            };
            self.applied = Some(entry.log_id);
            applied_any = true;
            if let Some(responder) = responder {
                responder.send(Reply(reply));
            }
        }
        if applied_any {
            self.record_position().await?;
        }
        Ok(())
    }

    async fn get_snapshot_builder(&mut self) -> SnapshotBuilder<M> {
        // Captured here, between applies, so the data and the position
        // agree.
        SnapshotBuilder {
            meta: SnapshotMetaOf::<TypeConfig> {
                last_log_id: self.applied,
                last_membership: self.membership.clone(),
            },
            data: Some(self.capture()),
            machine: self.machine.clone(),
        }
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMetaOf<TypeConfig>,
        snapshot: SnapshotData,
    ) -> io::Result<()> {
        let data = snapshot.into_bytes().await?;
        let machine = self.machine.clone();
        tokio::task::spawn_blocking(move || machine.restore(&data))
            .await
            .map_err(io::Error::other)?
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        self.applied = meta.last_log_id;
        self.membership = meta.last_membership.clone();
        // openraft drops this node's log behind the snapshot next: the
        // restored state must be on disk first.
        self.record_position().await?;
        self.machine.persist().await.map_err(io::Error::other)
    }

    /// A snapshot of the state now, whatever was built before: any state
    /// at or past the last snapshot built serves a follower (openraft
    /// replicates from the position the sent snapshot names), and the
    /// log is only purged behind positions already durable. A durable
    /// machine first makes what it applied durable, so whatever the
    /// encoding reads from the store (a fragment's outbox) holds every
    /// change the captured view covers.
    async fn get_current_snapshot(
        &mut self,
    ) -> io::Result<Option<SnapshotOf<TypeConfig, SnapshotData>>> {
        if self.applied.is_none() {
            return Ok(None);
        }
        if self.durable.is_some() {
            self.machine.persist().await.map_err(io::Error::other)?;
        }
        Ok(Some(SnapshotOf::<TypeConfig, SnapshotData> {
            meta: SnapshotMetaOf::<TypeConfig> {
                last_log_id: self.applied,
                last_membership: self.membership.clone(),
            },
            snapshot: self.capture(),
        }))
    }
}
