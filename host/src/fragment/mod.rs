//! The per-fragment runtime: a fragment's partitions and write buffer, the
//! actors that work on them (supervisor, dispatcher, workers, cleaner,
//! snapshotter) and the handle the node uses to reach them.
//!
//! This file only declares the modules and re-exports what the rest of the
//! crate uses. Lower files never name higher ones:
//!
//! - leaves: `error` (the runtime's errors), `pool` (priorities and
//!   admission), `key_order` (how the index compares keys), `entry` (one
//!   record in one allocation), then `partition` (one table's records);
//! - `flush` (the write buffer on its way to the store), then `state` (the
//!   fragment's partitions and buffer), `expiry` (due-record conversion)
//!   and `purge` (removing old tombstones);
//! - `worker`, then `runtime` (what the actors share), then the actors:
//!   `periodic` with `cleaner` and `snapshotter`, `dispatcher`, and the
//!   `health` report;
//! - `supervisor`, then `handle` (the node's [`Fragment`]).

mod cleaner;
pub(crate) mod command;
mod dispatcher;
pub(crate) mod entry;
mod error;
mod expiry;
pub(crate) mod flush;
mod handle;
mod health;
mod key_order;
pub(crate) mod partition;
mod periodic;
pub(crate) mod pool;
mod purge;
mod replica;
pub(crate) mod runtime;
pub(crate) mod settle;
mod snapshotter;
pub(crate) mod state;
mod supervisor;
mod turn;
mod worker;

pub use error::{BacklogFull, FragmentShutdownError, Shed, SubmitError};
pub use flush::FlushStats;
pub(crate) use handle::Fragment;
pub use health::{FragmentHealth, PoolHealth};
pub use pool::PoolConfig;
pub(crate) use runtime::Replicator;
pub use supervisor::Child;
