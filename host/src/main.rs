//! The `ebb` binary: see `ebb --help`.

fn main() -> std::process::ExitCode {
    ebb_host::cli::main()
}
