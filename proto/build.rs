//! Compiles the .proto files with protox (pure Rust), so no system protoc is
//! needed; only with the `engine` feature (the plugin ABI is checked in).

#[cfg(not(feature = "engine"))]
fn main() {}

#[cfg(feature = "engine")]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [
        "proto/ebb/record/v1/record.proto",
        "proto/ebb/query/v1/query.proto",
        "proto/ebb/plugin/v1/plugin.proto",
        "proto/ebb/expiry/v1/expiry.proto",
        "proto/ebb/raft/v1/raft.proto",
        "proto/ebb/raft/v1/rpc.proto",
        "proto/ebb/fragment/v1/command.proto",
        "proto/ebb/cluster/v1/cluster.proto",
        "proto/ebb/cluster/v1/meta.proto",
    ];
    for file in files {
        println!("cargo:rerun-if-changed={file}");
    }
    let descriptors = protox::compile(files, ["proto"])?;
    prost_build::Config::new()
        .bytes(["."])
        .compile_fds(descriptors)?;
    Ok(())
}
