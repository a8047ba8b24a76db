//! ebb's protobuf messages, generated from `proto/` at build time (the
//! `engine` feature), and the plugin ABI, checked in.
//!
//! `record::v1` is the persisted record envelope (its field numbers are part
//! of the on-disk format); `query::v1` is the SQL page protocol and the
//! cursor format; `plugin::v1` is the WASM plugin ABI; `expiry::v1` is an
//! expiry event at rest (outbox and dead letters); `raft::v1` is a Raft
//! group's log and vote at rest; `fragment::v1` the commands a fragment's
//! log carries; `cluster::v1` the client requests members forward to each
//! other and the metadata group's commands. Field numbers never change
//! meaning. `wire` reads and writes the ABI's per-row messages by hand for
//! the hot path of plugin calls.

/// The persisted record envelope (`ebb.record.v1`).
#[cfg(feature = "engine")]
pub mod record {
    /// Version 1 of the record envelope.
    pub mod v1 {
        include!(concat!(env!("OUT_DIR"), "/ebb.record.v1.rs"));
    }
}

/// The page protocol and cursors of the SQL executor (`ebb.query.v1`).
#[cfg(feature = "engine")]
pub mod query {
    /// Version 1 of the query messages.
    pub mod v1 {
        include!(concat!(env!("OUT_DIR"), "/ebb.query.v1.rs"));
    }
}

/// Plugin ABI v1 (`ebb.plugin.v1`), shared by the host and the guest SDK.
/// Checked in (`src/generated/`) rather than generated at build time, so a
/// plugin's build needs no protobuf compiler; a test of the `engine`
/// feature checks it against `plugin.proto`.
pub mod plugin {
    /// Version 1 of the plugin ABI.
    pub mod v1 {
        include!("generated/ebb.plugin.v1.rs");
    }
}

/// Fragment commands, the payload of a fragment group's log
/// (`ebb.fragment.v1`).
#[cfg(feature = "engine")]
pub mod fragment {
    /// Version 1 of the fragment commands.
    pub mod v1 {
        include!(concat!(env!("OUT_DIR"), "/ebb.fragment.v1.rs"));
    }
}

/// Expiry events at rest (`ebb.expiry.v1`).
#[cfg(feature = "engine")]
pub mod expiry {
    /// Version 1 of the stored expiry event.
    pub mod v1 {
        include!(concat!(env!("OUT_DIR"), "/ebb.expiry.v1.rs"));
    }
}

/// Raft state at rest: log entries, votes, log markers (`ebb.raft.v1`).
#[cfg(feature = "engine")]
pub mod raft {
    /// Version 1 of the Raft log format.
    pub mod v1 {
        include!(concat!(env!("OUT_DIR"), "/ebb.raft.v1.rs"));
    }
}

pub mod wire;

pub use prost::Message;

/// Client requests forwarded between members of a cluster (`ebb.cluster.v1`).
#[cfg(feature = "engine")]
pub mod cluster {
    /// Version 1 of the forwarded requests.
    pub mod v1 {
        include!(concat!(env!("OUT_DIR"), "/ebb.cluster.v1.rs"));
    }
}

#[cfg(all(test, feature = "engine"))]
mod tests {
    /// The checked-in plugin ABI is what `plugin.proto` generates now.
    #[test]
    fn the_checked_in_plugin_abi_matches_plugin_proto() {
        let generated = include_str!(concat!(env!("OUT_DIR"), "/ebb.plugin.v1.rs"));
        let checked_in = include_str!("generated/ebb.plugin.v1.rs");
        assert!(
            generated == checked_in,
            "proto/src/generated/ebb.plugin.v1.rs is stale: after changing plugin.proto, copy ebb.plugin.v1.rs from ebb-proto's OUT_DIR over it (see proto/src/lib.rs)"
        );
    }
}
