//! The `ebb` binary: see `ebb --help`.

/// mimalloc: per-thread free lists without glibc's consolidation pauses,
/// which showed up as 10% of a scan-heavy query's time (BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    tune_allocators();
    ebb_server::cli::main()
}

/// Keep the resident size close to what the node holds (BENCHMARKS.md,
/// "Memory per record"): transparent huge pages make a partly used 2 MiB
/// region count whole, so they are off for this process; glibc's malloc
/// (RocksDB's memtables and blocks) would keep freed memtables in its
/// arenas, so blocks of 128 KiB and more are mapped and unmapped directly,
/// and at most two arenas are used.
fn tune_allocators() {
    // SAFETY: prctl and mallopt with constant arguments change process
    // settings only; failures leave the defaults, which are correct too.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}
