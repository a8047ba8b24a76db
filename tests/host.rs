//! ebb-host's in-process integration tests, linked as one binary (one
//! link of the engine instead of one per file); each file is a module and
//! its tests are named after it (`cargo test --release -p ebb-host --test
//! host sql_paging::`).

#[path = "durability.rs"]
mod durability;
#[path = "examples.rs"]
mod examples;
#[path = "in_process.rs"]
mod in_process;
#[path = "layers.rs"]
mod layers;
#[path = "plugins_sql.rs"]
mod plugins_sql;
#[path = "purge.rs"]
mod purge;
#[path = "runtime.rs"]
mod runtime;
#[path = "sql_differential.rs"]
mod sql_differential;
#[path = "sql_paging.rs"]
mod sql_paging;
