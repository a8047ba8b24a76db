//! ebb's server side: the record model, storage, the per-fragment actor
//! runtime, the node and the embedded API.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use ebb_host::{Node, NodeConfig, PutOptions};
//! use std::time::Duration;
//!
//! let node = Node::open(NodeConfig::new("./ebb-data")).await?;
//! let users = node.table("users")?;
//! users.put("user:1", "Ada", PutOptions::default()).await?;
//! users.put("session:9", "token", PutOptions::default().ttl(Duration::from_secs(30))).await?;
//! assert_eq!(users.get("user:1").await?.unwrap().value, "Ada");
//! node.shutdown().await?;
//! # Ok(()) }
//! ```

pub mod alloc;
pub mod clock;
pub mod cluster;
pub mod codec;
pub mod exec;
pub mod expiry;
pub mod fragment;
pub mod hex;
pub mod metrics;
pub mod names;
pub(crate) mod native;
pub mod node;
pub mod plugin;
pub mod raft;
pub(crate) mod record;
pub mod store;
pub mod write;

pub use exec::{Consistency, QueryBudgets, QueryError, QueryOutput, QueryRequest, QueryStats};
pub use expiry::{BindRequest, Binding, ExpiryConfig, ExpiryError};
pub use native::InvalidFunctionName;
pub use node::config::NodeConfig;
pub use node::error::{Error, OpenError, ShutdownError};
pub use node::table::Table;
pub use node::{BackupError, BackupReport, BootStats, Node, NodeHealth, PluginChange, TableInfo};
pub use record::{InvalidVersion, Record, RecordKind, RecordView, Version, own_writer};
pub use write::{
    BatchItem, BatchOp, BatchOutcome, Condition, Durability, Entry, Expiry, InvalidTtl, PutOptions,
    Read, WriteOptions,
};
