//! Runtime statistics for monitoring Raft operations.
//!
//! This module provides types for tracking runtime statistics such as
//! batch sizes for apply and append operations.
//!
//! # Example
//!
//! ```ignore
//! let raft = Raft::new(...).await?;
//! let stats = raft.runtime_stats().await?;
//! println!("{}", stats.display());
//! ```

pub use base2histogram::Histogram;
pub use base2histogram::PercentileStats;

pub use crate::base::range_values::RangeValues;
pub use crate::core::NotificationName;
pub use crate::core::raft_msg::ExternalCommandName;
pub use crate::core::raft_msg::RaftMsgName;
pub use crate::core::runtime_stats::RuntimeStats;
pub use crate::core::runtime_stats::RuntimeStatsDisplay;
pub use crate::core::runtime_stats::log_stage::LogStageHistograms;
pub use crate::core::runtime_stats::log_stage::LogStages;
pub use crate::engine::CommandName;
pub use crate::engine::SMCommandName;
