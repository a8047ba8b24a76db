//! The cluster port (`--cluster-listen`): Raft messages and forwarded
//! requests between members as protobuf bodies over HTTP/2 (h2c), one
//! connection per pair of members shared by every group. See
//! docs/cluster.md, "Transport".

mod listener;
mod transport;

pub use listener::{ClusterListener, serve_cluster};
pub use transport::HttpTransport;

/// Path of Raft messages (`ebb.raft.v1.RaftRequest` bodies).
const RAFT_PATH: &str = "/internal/v1/raft";
/// Path of batches of Raft messages (`ebb.raft.v1.RaftBatch` bodies).
const RAFT_BATCH_PATH: &str = "/internal/v1/raft-batch";
/// Path of forwarded requests (`ebb.cluster.v1.ForwardRequest` bodies).
const FORWARD_PATH: &str = "/internal/v1/forward";
/// Path of batches of short forwarded requests (writes and reads, in an
/// `ebb.raft.v1.RaftBatch` envelope: one `ForwardRequest` per message,
/// answered by one `ForwardAnswer` per message in the same order).
const FORWARD_BATCH_PATH: &str = "/internal/v1/forward-batch";
/// The sender's node id, on every internal request.
const NODE_HEADER: &str = "x-ebb-node";
/// The cluster secret, on every internal request when one is set.
const SECRET_HEADER: &str = "x-ebb-cluster-secret";
/// Largest internal message body: a fragment snapshot travels in one.
pub const MAX_MESSAGE_BYTES: usize = 1 << 30;
