//! The metadata group's replicated state: plugins (their module bytes),
//! expiry bindings and the cluster's layout as commands in the group's log,
//! applied on every member (plugins and bindings through the node's
//! [`Metadata`], the layout in the store's metadata family), with
//! `ebb.cluster.v1` as their encoding.
//!
//! Every command sets or removes a whole plugin or binding, or records the
//! layout only when none is recorded, so applying a run of commands to a
//! state at or past their start ends in the same state: a snapshot may be
//! encoded later than it was captured, and a member that restarts behind
//! its durable position applies nothing twice that matters.

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};

use bytes::Bytes;
use ebb_proto::Message;
use ebb_proto::cluster::v1 as pb;

use super::config::ClusterConfig;
use super::error::ClusterError;
use super::layout::Layout;
use crate::raft::{
    AppendDurability, Group, GroupId, GroupMachine, GroupTiming, LogRetention, LogStore, LogWriter,
    NodeId, Position, StateMachine, Transport,
};
use crate::store::{Family, FamilyWrite, KvStore, StoreError};

/// A change to the cluster's metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetaCommand {
    /// Install (or replace) plugin `name` with `module`.
    InstallPlugin {
        /// The plugin's name.
        name: String,
        /// The wasm core module.
        module: Bytes,
    },
    /// Remove plugin `name`.
    RemovePlugin {
        /// The plugin's name.
        name: String,
    },
    /// Bind `table`'s expiries to a handler.
    BindExpiry {
        /// The table.
        table: String,
        /// The binding as a member stores it (JSON).
        binding: Bytes,
    },
    /// Remove `table`'s binding.
    UnbindExpiry {
        /// The table.
        table: String,
    },
    /// Member `proposer` started with `layout`: recorded when the cluster
    /// has none, otherwise checked against it.
    RecordLayout {
        /// The member whose flags give it.
        proposer: NodeId,
        /// The layout.
        layout: Layout,
    },
}

/// What applying a [`MetaCommand`] did on one member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetaOutcome {
    /// The plugin is at `version` (`unchanged`: the bytes were the
    /// current version's).
    Installed {
        /// The member's version number of the plugin.
        version: u32,
        /// SHA-256 of the module, hex.
        sha256: String,
        /// Nothing new was stored.
        unchanged: bool,
    },
    /// The plugin was removed.
    Removed,
    /// The binding now in force (JSON, as stored).
    Bound(Bytes),
    /// The binding removed (JSON, as stored).
    Unbound(Bytes),
    /// The proposed layout is the cluster's (`first`: it was recorded
    /// now). A different one fails with code `layout_conflict`.
    LayoutRecorded {
        /// This command recorded it.
        first: bool,
    },
    /// The command failed with an error of the HTTP contract.
    Failed {
        /// Its code (`invalid_plugin`, `not_found`, `conflict`, ...).
        code: String,
        /// What was wrong, for people.
        message: String,
    },
}

/// Bytes that are not a metadata command, outcome or snapshot.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed metadata {what}: {reason}")]
pub struct MalformedMeta {
    what: &'static str,
    reason: String,
}

fn malformed(what: &'static str, reason: impl ToString) -> MalformedMeta {
    MalformedMeta {
        what,
        reason: reason.to_string(),
    }
}

impl MetaCommand {
    /// The `ebb.cluster.v1.MetaCommand` bytes.
    pub fn encode(&self) -> Bytes {
        let command = match self {
            MetaCommand::InstallPlugin { name, module } => {
                pb::meta_command::Command::InstallPlugin(pb::InstallPlugin {
                    name: name.clone(),
                    module: module.clone(),
                })
            }
            MetaCommand::RemovePlugin { name } => {
                pb::meta_command::Command::RemovePlugin(pb::RemovePlugin { name: name.clone() })
            }
            MetaCommand::BindExpiry { table, binding } => {
                pb::meta_command::Command::BindExpiry(pb::BindExpiry {
                    table: table.clone(),
                    binding: binding.clone(),
                })
            }
            MetaCommand::UnbindExpiry { table } => {
                pb::meta_command::Command::UnbindExpiry(pb::UnbindExpiry {
                    table: table.clone(),
                })
            }
            MetaCommand::RecordLayout { proposer, layout } => {
                pb::meta_command::Command::RecordLayout(pb::RecordLayout {
                    proposer: *proposer,
                    layout: Some(layout.to_proto()),
                })
            }
        };
        pb::MetaCommand {
            command: Some(command),
        }
        .encode_to_vec()
        .into()
    }

    /// Decode [`Self::encode`]'s bytes.
    pub fn decode(bytes: &[u8]) -> Result<Self, MalformedMeta> {
        let what = "command";
        let command = pb::MetaCommand::decode(bytes).map_err(|e| malformed(what, e))?;
        Ok(
            match command
                .command
                .ok_or_else(|| malformed(what, "no command"))?
            {
                pb::meta_command::Command::InstallPlugin(install) => MetaCommand::InstallPlugin {
                    name: install.name,
                    module: install.module,
                },
                pb::meta_command::Command::RemovePlugin(remove) => {
                    MetaCommand::RemovePlugin { name: remove.name }
                }
                pb::meta_command::Command::BindExpiry(bind) => MetaCommand::BindExpiry {
                    table: bind.table,
                    binding: bind.binding,
                },
                pb::meta_command::Command::UnbindExpiry(unbind) => MetaCommand::UnbindExpiry {
                    table: unbind.table,
                },
                pb::meta_command::Command::RecordLayout(record) => MetaCommand::RecordLayout {
                    proposer: record.proposer,
                    layout: Layout::from_proto(
                        record.layout.ok_or_else(|| malformed(what, "no layout"))?,
                    )
                    .map_err(|e| malformed(what, e))?,
                },
            },
        )
    }
}

impl MetaOutcome {
    /// The `ebb.cluster.v1.MetaOutcome` bytes.
    pub fn encode(&self) -> Bytes {
        let outcome = match self {
            MetaOutcome::Installed {
                version,
                sha256,
                unchanged,
            } => pb::meta_outcome::Outcome::Installed(pb::PluginInstalled {
                version: *version,
                sha256: sha256.clone(),
                unchanged: *unchanged,
            }),
            MetaOutcome::Removed => pb::meta_outcome::Outcome::Removed(pb::PluginRemoved {}),
            MetaOutcome::Bound(binding) => pb::meta_outcome::Outcome::Bound(pb::ExpiryBinding {
                binding: binding.clone(),
            }),
            MetaOutcome::Unbound(binding) => {
                pb::meta_outcome::Outcome::Unbound(pb::ExpiryBinding {
                    binding: binding.clone(),
                })
            }
            MetaOutcome::LayoutRecorded { first } => {
                pb::meta_outcome::Outcome::Layout(pb::LayoutRecorded { first: *first })
            }
            MetaOutcome::Failed { code, message } => {
                pb::meta_outcome::Outcome::Failure(pb::MetaFailure {
                    code: code.clone(),
                    message: message.clone(),
                })
            }
        };
        pb::MetaOutcome {
            outcome: Some(outcome),
        }
        .encode_to_vec()
        .into()
    }

    /// Decode [`Self::encode`]'s bytes.
    pub fn decode(bytes: &[u8]) -> Result<Self, MalformedMeta> {
        let what = "outcome";
        let outcome = pb::MetaOutcome::decode(bytes).map_err(|e| malformed(what, e))?;
        Ok(
            match outcome
                .outcome
                .ok_or_else(|| malformed(what, "no outcome"))?
            {
                pb::meta_outcome::Outcome::Installed(installed) => MetaOutcome::Installed {
                    version: installed.version,
                    sha256: installed.sha256,
                    unchanged: installed.unchanged,
                },
                pb::meta_outcome::Outcome::Removed(_) => MetaOutcome::Removed,
                pb::meta_outcome::Outcome::Bound(bound) => MetaOutcome::Bound(bound.binding),
                pb::meta_outcome::Outcome::Unbound(unbound) => {
                    MetaOutcome::Unbound(unbound.binding)
                }
                pb::meta_outcome::Outcome::Layout(recorded) => MetaOutcome::LayoutRecorded {
                    first: recorded.first,
                },
                pb::meta_outcome::Outcome::Failure(failure) => MetaOutcome::Failed {
                    code: failure.code,
                    message: failure.message,
                },
            },
        )
    }
}

/// The node's metadata as the metadata group changes it. Implemented by
/// the node over its plugin registry and store; every method may block
/// (compilation, store writes) and is called on the blocking pool.
pub trait Metadata: Send + Sync + 'static {
    /// Install `module` as plugin `name` (unchanged if it is the current
    /// version's bytes).
    fn install_plugin(&self, name: &str, module: &[u8]) -> MetaOutcome;

    /// Remove plugin `name`.
    fn remove_plugin(&self, name: &str) -> MetaOutcome;

    /// Every plugin's current module, by name; an error says why the
    /// store could not be read.
    fn plugin_modules(&self) -> Result<Vec<(String, Bytes)>, String>;

    /// Bind `table` to `binding` (JSON, as stored), checked against the
    /// plugins installed.
    fn bind_expiry(&self, table: &str, binding: &[u8]) -> MetaOutcome;

    /// Remove `table`'s binding.
    fn unbind_expiry(&self, table: &str) -> MetaOutcome;

    /// Every binding, by table (JSON, as stored).
    fn expiry_bindings(&self) -> Vec<(String, Bytes)>;

    /// Write the metadata group's applied position durably (after the
    /// changes it covers, which are durable when the calls above return).
    fn write_position(&self, position: Position) -> Result<(), String>;
}

/// The store key of the recorded layout (metadata family).
const LAYOUT_KEY: &[u8] = b"cluster/layout";

/// The metadata group's state machine over the node's [`Metadata`] and
/// the recorded layout.
pub struct MetaMachine {
    metadata: Arc<dyn Metadata>,
    /// The recorded layout, as stored.
    layout: parking_lot::Mutex<Option<Layout>>,
    /// Held weakly: the node owns the store and closes it at shutdown.
    store: Weak<dyn KvStore>,
}

impl MetaMachine {
    /// The machine applying to `metadata`, with the layout `store` holds.
    /// Fails when the stored layout cannot be read.
    pub fn open(metadata: Arc<dyn Metadata>, store: &Arc<dyn KvStore>) -> Result<Self, String> {
        let layout = store
            .read_entry(Family::Meta, LAYOUT_KEY)
            .map_err(|e| e.to_string())?
            .map(|bytes| Layout::decode(&bytes))
            .transpose()
            .map_err(|e| e.to_string())?;
        Ok(Self {
            metadata,
            layout: parking_lot::Mutex::new(layout),
            store: Arc::downgrade(store),
        })
    }

    /// The layout the cluster recorded, if any.
    pub fn layout(&self) -> Option<Layout> {
        self.layout.lock().clone()
    }

    /// Store `layout` (or remove it) durably, then hold it.
    fn store_layout(&self, layout: Option<Layout>) -> Result<(), String> {
        let store = self
            .store
            .upgrade()
            .ok_or(StoreError::Closed)
            .map_err(|e| e.to_string())?;
        let write = match &layout {
            Some(layout) => {
                FamilyWrite::Put(Family::Meta, LAYOUT_KEY.to_vec(), layout.encode().to_vec())
            }
            None => FamilyWrite::Delete(Family::Meta, LAYOUT_KEY.to_vec()),
        };
        store
            .write_entries(&[write], true)
            .map_err(|e| e.to_string())?;
        *self.layout.lock() = layout;
        Ok(())
    }

    /// Record `layout` if none is, else compare: every member answers the
    /// same, since each holds the same recorded layout at this entry. A
    /// store that cannot be written stops the group (the entry is not
    /// applied).
    fn record_layout(&self, proposer: NodeId, layout: Layout) -> Result<MetaOutcome, String> {
        let recorded = self.layout();
        Ok(match recorded {
            None => {
                self.store_layout(Some(layout))?;
                MetaOutcome::LayoutRecorded { first: true }
            }
            Some(recorded) => {
                let differences = layout.differences(&recorded);
                if differences.is_empty() {
                    MetaOutcome::LayoutRecorded { first: false }
                } else {
                    MetaOutcome::Failed {
                        code: "layout_conflict".into(),
                        message: Layout::conflict_message(proposer, &differences),
                    }
                }
            }
        })
    }
}

/// What a metadata snapshot is encoded from.
pub struct MetaCaptured {
    metadata: Arc<dyn Metadata>,
    layout: Option<Layout>,
}

impl GroupMachine for MetaMachine {
    /// Installing compiles a module and every change writes the store.
    const BLOCKING: bool = true;

    /// A command that cannot be decoded stops the group; one that fails
    /// (an invalid module, a plugin in use) answers its failure: every
    /// member fails it alike, since the proposer checked it first.
    fn apply(&self, command: &[u8]) -> Result<Bytes, String> {
        let outcome = match MetaCommand::decode(command).map_err(|e| e.to_string())? {
            MetaCommand::InstallPlugin { name, module } => {
                self.metadata.install_plugin(&name, &module)
            }
            MetaCommand::RemovePlugin { name } => self.metadata.remove_plugin(&name),
            MetaCommand::BindExpiry { table, binding } => {
                self.metadata.bind_expiry(&table, &binding)
            }
            MetaCommand::UnbindExpiry { table } => self.metadata.unbind_expiry(&table),
            MetaCommand::RecordLayout { proposer, layout } => {
                self.record_layout(proposer, layout)?
            }
        };
        if let MetaOutcome::Failed { code, message } = &outcome {
            tracing::warn!(%code, %message, "a metadata command failed on this member");
        }
        Ok(outcome.encode())
    }

    /// The metadata itself: a snapshot reads the plugins when it is
    /// encoded (see the module docs for why later is as good); the layout
    /// as it is now.
    type Captured = MetaCaptured;

    fn capture(&self) -> Self::Captured {
        MetaCaptured {
            metadata: self.metadata.clone(),
            layout: self.layout(),
        }
    }

    /// Plugins in name order. A store that cannot be read fails the
    /// snapshot (its sending is retried), never sends an empty one.
    fn encode(captured: Self::Captured) -> Result<Bytes, String> {
        let MetaCaptured { metadata, layout } = captured;
        let mut modules = metadata.plugin_modules()?;
        modules.sort_by(|a, b| a.0.cmp(&b.0));
        let mut bindings = metadata.expiry_bindings();
        bindings.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(pb::MetaSnapshot {
            plugins: modules
                .into_iter()
                .map(|(name, module)| pb::InstallPlugin { name, module })
                .collect(),
            bindings: bindings
                .into_iter()
                .map(|(table, binding)| pb::BindExpiry { table, binding })
                .collect(),
            layout: layout.as_ref().map(Layout::to_proto),
        }
        .encode_to_vec()
        .into())
    }

    /// Make the layout, plugins and bindings exactly the snapshot's:
    /// store its layout, unbind the tables it does not bind, install each
    /// plugin, remove the rest, then bind its tables.
    fn restore(&self, snapshot: &[u8]) -> Result<(), String> {
        let snapshot =
            pb::MetaSnapshot::decode(snapshot).map_err(|e| malformed("snapshot", e).to_string())?;
        let layout = snapshot
            .layout
            .map(Layout::from_proto)
            .transpose()
            .map_err(|e| e.to_string())?;
        if layout != self.layout() {
            self.store_layout(layout)?;
        }
        let kept: std::collections::BTreeSet<String> = snapshot
            .plugins
            .iter()
            .map(|p| p.name.to_ascii_lowercase())
            .collect();
        let bound: std::collections::BTreeSet<&str> =
            snapshot.bindings.iter().map(|b| b.table.as_str()).collect();
        for (table, _) in self.metadata.expiry_bindings() {
            if !bound.contains(table.as_str())
                && let MetaOutcome::Failed { message, .. } = self.metadata.unbind_expiry(&table)
            {
                return Err(format!("binding of {table}: {message}"));
            }
        }
        for plugin in &snapshot.plugins {
            if let MetaOutcome::Failed { message, .. } =
                self.metadata.install_plugin(&plugin.name, &plugin.module)
            {
                return Err(format!("plugin {}: {message}", plugin.name));
            }
        }
        for (name, _) in self.metadata.plugin_modules()? {
            if !kept.contains(&name.to_ascii_lowercase())
                && let MetaOutcome::Failed { message, .. } = self.metadata.remove_plugin(&name)
            {
                return Err(format!("plugin {name}: {message}"));
            }
        }
        for binding in &snapshot.bindings {
            if let MetaOutcome::Failed { message, .. } =
                self.metadata.bind_expiry(&binding.table, &binding.binding)
            {
                return Err(format!("binding of {}: {message}", binding.table));
            }
        }
        Ok(())
    }

    /// Written at once: the changes it covers are already durable.
    fn record_position(&self, position: Position) {
        if let Err(error) = self.metadata.write_position(position) {
            // The next position covers this one; a restart before it
            // applies the same commands again, which changes nothing.
            tracing::warn!(%error, "cannot write the metadata group's applied position");
        }
    }
}

/// The metadata log carries whole modules: a snapshot every 20 entries
/// (a snapshot costs no copy) with 2 kept behind it bounds it to about 22
/// modules.
const META_RETENTION: LogRetention = LogRetention {
    snapshot_every: 20,
    keep: 2,
};

/// Start this node's replica of the metadata group over `metadata`, a
/// voter on every member; the member with the lowest id forms it on the
/// first start. Also answers the group's machine, for its layout.
pub(super) async fn start_group(
    config: &ClusterConfig,
    store: &Arc<dyn KvStore>,
    writer: &LogWriter,
    transport: &Arc<dyn Transport>,
    metadata: Arc<dyn Metadata>,
) -> Result<(Group<MetaMachine>, Arc<MetaMachine>), ClusterError> {
    let stopped = |error: &dyn std::fmt::Display| ClusterError::MetaStopped {
        reason: error.to_string(),
    };
    // The stored layout is read on the blocking pool, never on a tokio worker.
    let reading = store.clone();
    let meta_machine = tokio::task::spawn_blocking(move || MetaMachine::open(metadata, &reading))
        .await
        .map_err(|e| stopped(&e))?
        .map_err(|e| stopped(&e))?;
    let meta_machine = Arc::new(meta_machine);
    let machine = StateMachine::open(meta_machine.clone(), GroupId::META, store.clone())
        .await
        .map_err(|e| stopped(&e))?;
    let group = Group::start(
        config.node_id,
        GroupId::META,
        LogStore::new(
            GroupId::META,
            store.clone(),
            writer.clone(),
            AppendDurability::Sync,
        ),
        machine,
        transport.clone(),
        GroupTiming::default(),
        META_RETENTION,
    )
    .await
    .map_err(|e| stopped(&e))?;
    if config.peers.keys().next() == Some(&config.node_id) {
        let members: BTreeMap<NodeId, String> = config.peers.clone();
        if let Err(error) = group.form(&members).await {
            group.shutdown().await;
            return Err(stopped(&error));
        }
    }
    Ok((group, meta_machine))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::place;
    use crate::store::MemoryStore;

    fn layout(replication: usize) -> Layout {
        Layout::new(
            [1, 2, 3],
            replication,
            place(4, &[1, 2, 3], replication).unwrap(),
        )
    }

    /// No plugins and no bindings: the layout is all these tests look at.
    struct NoMetadata;

    impl Metadata for NoMetadata {
        fn install_plugin(&self, _: &str, _: &[u8]) -> MetaOutcome {
            MetaOutcome::Removed
        }
        fn remove_plugin(&self, _: &str) -> MetaOutcome {
            MetaOutcome::Removed
        }
        fn plugin_modules(&self) -> Result<Vec<(String, Bytes)>, String> {
            Ok(Vec::new())
        }
        fn bind_expiry(&self, _: &str, _: &[u8]) -> MetaOutcome {
            MetaOutcome::Removed
        }
        fn unbind_expiry(&self, _: &str) -> MetaOutcome {
            MetaOutcome::Removed
        }
        fn expiry_bindings(&self) -> Vec<(String, Bytes)> {
            Vec::new()
        }
        fn write_position(&self, _: Position) -> Result<(), String> {
            Ok(())
        }
    }

    fn apply(machine: &MetaMachine, proposer: NodeId, layout: Layout) -> MetaOutcome {
        let command = MetaCommand::RecordLayout { proposer, layout }.encode();
        MetaOutcome::decode(&machine.apply(&command).unwrap()).unwrap()
    }

    #[test]
    fn the_first_layout_is_recorded_durably_and_a_different_one_conflicts() {
        let store: Arc<dyn KvStore> = Arc::new(MemoryStore::new());
        let machine = MetaMachine::open(Arc::new(NoMetadata), &store).unwrap();
        assert_eq!(machine.layout(), None);
        assert_eq!(
            apply(&machine, 1, layout(3)),
            MetaOutcome::LayoutRecorded { first: true }
        );
        assert_eq!(
            apply(&machine, 2, layout(3)),
            MetaOutcome::LayoutRecorded { first: false },
            "the same flags agree"
        );
        let MetaOutcome::Failed { code, message } = apply(&machine, 3, layout(2)) else {
            panic!("another replication factor must conflict");
        };
        assert_eq!(code, "layout_conflict");
        assert!(
            message.contains("member 3") && message.contains("--replication is 2"),
            "{message}"
        );
        assert_eq!(
            machine.layout(),
            Some(layout(3)),
            "a conflict changes nothing"
        );

        // The recorded layout survives a restart, and travels in snapshots.
        let reopened = MetaMachine::open(Arc::new(NoMetadata), &store).unwrap();
        assert_eq!(reopened.layout(), Some(layout(3)));
        let snapshot = MetaMachine::encode(reopened.capture()).unwrap();
        let other: Arc<dyn KvStore> = Arc::new(MemoryStore::new());
        let restored = MetaMachine::open(Arc::new(NoMetadata), &other).unwrap();
        restored.restore(&snapshot).unwrap();
        assert_eq!(restored.layout(), Some(layout(3)));
        assert_eq!(
            MetaMachine::open(Arc::new(NoMetadata), &other)
                .unwrap()
                .layout(),
            Some(layout(3)),
            "a restored layout is stored"
        );
    }

    #[test]
    fn commands_and_outcomes_round_trip_and_garbage_is_refused() {
        for command in [
            MetaCommand::InstallPlugin {
                name: "json".into(),
                module: Bytes::from_static(b"\0asm\x01\0\0\0"),
            },
            MetaCommand::RemovePlugin {
                name: "stats".into(),
            },
            MetaCommand::BindExpiry {
                table: "sessions".into(),
                binding: Bytes::from_static(b"{}"),
            },
            MetaCommand::UnbindExpiry {
                table: "sessions".into(),
            },
            MetaCommand::RecordLayout {
                proposer: 2,
                layout: layout(3),
            },
        ] {
            assert_eq!(MetaCommand::decode(&command.encode()).unwrap(), command);
        }
        for outcome in [
            MetaOutcome::Installed {
                version: 3,
                sha256: "ab".into(),
                unchanged: true,
            },
            MetaOutcome::Removed,
            MetaOutcome::Bound(Bytes::from_static(b"{}")),
            MetaOutcome::Unbound(Bytes::from_static(b"{}")),
            MetaOutcome::Failed {
                code: "invalid_plugin".into(),
                message: "no memory export".into(),
            },
            MetaOutcome::LayoutRecorded { first: true },
        ] {
            assert_eq!(MetaOutcome::decode(&outcome.encode()).unwrap(), outcome);
        }
        assert!(MetaCommand::decode(b"\xff\xff").is_err());
        assert!(MetaCommand::decode(&[]).is_err(), "no command");
        assert!(MetaOutcome::decode(&[]).is_err(), "no outcome");
    }
}
