//! A group's state machine on openraft: the adapter between openraft's
//! `RaftStateMachine` and the state a group replicates, which the layers
//! above supply through [`GroupMachine`] (the fragment state for a
//! fragment's group).
//!
//! The adapter keeps the last applied log id, the last membership and the
//! current snapshot in memory: it is the "transient state machine" of
//! openraft's storage guide. A restart rebuilds the applied state from the
//! latest snapshot and the committed log (the log store persists the
//! committed id); making the applied position durable together with the
//! state it covers comes with the fragment's group.

use std::io;
use std::sync::Arc;

use bytes::Bytes;
use futures::{Stream, TryStreamExt};
use openraft::EntryPayload;
use openraft::storage::{EntryResponder, RaftSnapshotBuilder, RaftStateMachine};
use openraft::type_config::alias::{SnapshotMetaOf, SnapshotOf, StoredMembershipOf};
use parking_lot::Mutex;

use super::types::{LogId, Reply, TypeConfig};

/// What a Raft group replicates. Implemented above this layer; the group
/// calls it on its state machine task, in log order.
pub trait GroupMachine: Send + Sync + 'static {
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
    fn encode(captured: Self::Captured) -> Bytes;

    /// Replace the whole state with one [`Self::encode`] made. May take
    /// long: runs on a blocking thread while the group applies nothing.
    fn restore(&self, snapshot: &[u8]) -> Result<(), String>;
}

/// The encoded state of `machine` now: [`GroupMachine::capture`] then
/// [`GroupMachine::encode`], on the calling thread.
pub fn encoded<M: GroupMachine>(machine: &M) -> Bytes {
    M::encode(machine.capture())
}

/// A snapshot with the log position it covers.
type Current = Arc<Mutex<Option<(SnapshotMetaOf<TypeConfig>, Bytes)>>>;

/// openraft's state machine over a [`GroupMachine`].
pub struct StateMachine<M> {
    machine: Arc<M>,
    applied: Option<LogId>,
    membership: StoredMembershipOf<TypeConfig>,
    current: Current,
}

impl<M: GroupMachine> StateMachine<M> {
    /// A state machine that has applied nothing yet, over `machine`.
    pub fn new(machine: Arc<M>) -> Self {
        Self {
            machine,
            applied: None,
            membership: StoredMembershipOf::<TypeConfig>::default(),
            current: Arc::default(),
        }
    }
}

/// Builds a snapshot of the state captured when it was created, encoding
/// it on a blocking thread.
pub struct SnapshotBuilder<M: GroupMachine> {
    meta: SnapshotMetaOf<TypeConfig>,
    captured: Option<M::Captured>,
    current: Current,
}

impl<M: GroupMachine> RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder<M> {
    type SnapshotData = Bytes;

    async fn build_snapshot(&mut self) -> io::Result<SnapshotOf<TypeConfig, Bytes>> {
        let captured = self
            .captured
            .take()
            .ok_or_else(|| io::Error::other("a snapshot builder builds once"))?;
        let data = tokio::task::spawn_blocking(move || M::encode(captured))
            .await
            .map_err(io::Error::other)?;
        *self.current.lock() = Some((self.meta.clone(), data.clone()));
        Ok(SnapshotOf::<TypeConfig, Bytes> {
            meta: self.meta.clone(),
            snapshot: data,
        })
    }
}

impl<M: GroupMachine> RaftStateMachine<TypeConfig> for StateMachine<M> {
    type SnapshotData = Bytes;
    type SnapshotBuilder = SnapshotBuilder<M>;

    async fn applied_state(
        &mut self,
    ) -> io::Result<(Option<LogId>, StoredMembershipOf<TypeConfig>)> {
        Ok((self.applied, self.membership.clone()))
    }

    async fn apply<S>(&mut self, mut entries: S) -> io::Result<()>
    where
        S: Stream<Item = io::Result<EntryResponder<TypeConfig>>> + Unpin + Send,
    {
        while let Some((entry, responder)) = entries.try_next().await? {
            let reply = match entry.payload {
                EntryPayload::Blank => Bytes::new(),
                EntryPayload::Normal(command) => {
                    self.machine.apply(&command.bytes).map_err(|e| {
                        io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!("log entry {} cannot be applied: {e}", entry.log_id),
                        )
                    })?
                }
                EntryPayload::Membership(membership) => {
                    self.membership =
                        StoredMembershipOf::<TypeConfig>::new(Some(entry.log_id), membership);
                    Bytes::new()
                }
            };
            self.applied = Some(entry.log_id);
            if let Some(responder) = responder {
                responder.send(Reply(reply));
            }
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
            captured: Some(self.machine.capture()),
            current: self.current.clone(),
        }
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMetaOf<TypeConfig>,
        snapshot: Bytes,
    ) -> io::Result<()> {
        let machine = self.machine.clone();
        let data = snapshot.clone();
        tokio::task::spawn_blocking(move || machine.restore(&data))
            .await
            .map_err(io::Error::other)?
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        self.applied = meta.last_log_id;
        self.membership = meta.last_membership.clone();
        *self.current.lock() = Some((meta.clone(), snapshot));
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> io::Result<Option<SnapshotOf<TypeConfig, Bytes>>> {
        Ok(self
            .current
            .lock()
            .clone()
            .map(|(meta, snapshot)| SnapshotOf::<TypeConfig, Bytes> { meta, snapshot }))
    }
}
