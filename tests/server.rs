//! End-to-end tests of `ebb serve` processes and the CLI, linked as one
//! binary (one link instead of one per file); each file is a module and
//! its tests are named after it (`cargo test --release -p ebb-server
//! --test server cluster::`). The fuzz tests stay a binary of their own
//! (`--test fuzz`), run longer by `make fuzz-soak`.

mod common;

#[path = "backup.rs"]
mod backup;
#[path = "cli.rs"]
mod cli;
#[path = "cluster.rs"]
mod cluster;
#[path = "conditional.rs"]
mod conditional;
#[path = "console.rs"]
mod console;
#[path = "expiry.rs"]
mod expiry;
#[path = "expiry_limits.rs"]
mod expiry_limits;
#[path = "expiry_threads.rs"]
mod expiry_threads;
#[path = "http.rs"]
mod http;
#[path = "http_limits.rs"]
mod http_limits;
#[path = "memory.rs"]
mod memory;
#[path = "plugins_cli.rs"]
mod plugins_cli;
#[path = "plugins_hostile.rs"]
mod plugins_hostile;
#[path = "prompt.rs"]
mod prompt;
#[path = "security.rs"]
mod security;
#[path = "shutdown.rs"]
mod shutdown;
#[path = "sql_http.rs"]
mod sql_http;
#[path = "sync_durability.rs"]
mod sync_durability;
#[path = "tls.rs"]
mod tls;
#[path = "triggers.rs"]
mod triggers;
