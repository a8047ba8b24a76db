//! ebb's openraft type configuration: node ids, group ids, and the opaque
//! command and reply every group's log carries.

use std::fmt;

use bytes::Bytes;

use crate::store::FragmentId;

openraft::declare_raft_types!(
    /// The type configuration shared by every Raft group of a node (the
    /// fragments' and the metadata group's): `u64` node ids, nodes known by
    /// their cluster address, and commands as bytes each group's state
    /// machine encodes and decodes itself.
    pub TypeConfig:
        D = Command,
        R = Reply,
        NodeId = u64,
        Node = openraft::BasicNode,
);

/// A node's id in the cluster (`--node-id`).
pub type NodeId = u64;

/// A log entry of any group.
pub type Entry = openraft::type_config::alias::EntryOf<TypeConfig>;
/// An entry's payload.
pub type Payload = openraft::EntryPayload<Command, NodeId, openraft::BasicNode>;
/// A log id of any group: the proposing leader (term and node) and the index.
pub type LogId = openraft::type_config::alias::LogIdOf<TypeConfig>;
/// A vote of any group.
pub type Vote = openraft::type_config::alias::VoteOf<TypeConfig>;
/// A group's membership.
pub type Membership = openraft::Membership<NodeId, openraft::BasicNode>;
/// A membership with the log entry that holds it.
pub type StoredMembership = openraft::type_config::alias::StoredMembershipOf<TypeConfig>;

/// An application command in a log entry. The log stores and ships it as
/// bytes; the state machine of its group encodes it when proposing and
/// decodes it when applying, so the log layer knows no command type.
/// `sync` asks every replica to fsync its log before it counts the entry
/// as appended (a `sync` write); otherwise the write-ahead log suffices.
#[derive(Clone, PartialEq, Eq)]
pub struct Command {
    /// The encoded command.
    pub bytes: Bytes,
    /// Fsync the log on every replica before acknowledging the append.
    pub sync: bool,
}

impl Command {
    /// A command of `bytes`, fsynced on append when `sync`.
    pub fn new(bytes: impl Into<Bytes>, sync: bool) -> Self {
        Self {
            bytes: bytes.into(),
            sync,
        }
    }
}

impl fmt::Debug for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Command({} bytes, sync: {})",
            self.bytes.len(),
            self.sync
        )
    }
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "command of {} bytes", self.bytes.len())
    }
}

/// What applying a command answered, encoded by the group's state machine.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reply(pub Bytes);

/// Which Raft group: one per fragment, and the metadata group. Its 4-byte
/// big-endian form prefixes every key the group keeps in the store, so each
/// group's log is one contiguous range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupId(u32);

impl GroupId {
    /// The group holding the cluster's metadata (members, placement,
    /// tables, plugins, bindings).
    pub const META: GroupId = GroupId(u32::MAX);

    /// The group replicating fragment `id`.
    pub fn fragment(id: FragmentId) -> Self {
        debug_assert!(id != u32::MAX, "u32::MAX is the metadata group");
        GroupId(id)
    }

    /// The fragment this group replicates, or `None` for the metadata group.
    pub fn as_fragment(self) -> Option<FragmentId> {
        (self != Self::META).then_some(self.0)
    }

    /// The group of its wire form ([`GroupId::to_wire`]); every `u32` is a
    /// group, `u32::MAX` the metadata group.
    pub fn from_wire(raw: u32) -> Self {
        GroupId(raw)
    }

    /// This group's id in Raft messages between nodes: the fragment
    /// number, or `u32::MAX` for the metadata group.
    pub fn to_wire(self) -> u32 {
        self.0
    }

    /// The key prefix of this group's entries.
    pub(crate) fn prefix(self) -> [u8; 4] {
        self.0.to_be_bytes()
    }
}

impl fmt::Display for GroupId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.as_fragment() {
            Some(id) => write!(f, "fragment {id}"),
            None => f.write_str("metadata"),
        }
    }
}
