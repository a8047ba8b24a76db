//! The `ebb` binary: see `ebb --help`.

/// mimalloc: per-thread free lists without glibc's consolidation pauses,
/// which showed up as 10% of a scan-heavy query's time (BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    ebb_server::cli::main()
}
