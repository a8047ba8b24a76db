//! ebb's server: the HTTP API, the command line and the `ebb` binary, over
//! the engine library `ebb-host`.

pub mod cli;
pub mod cluster;
pub mod http;
