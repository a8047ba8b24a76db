//! The engine's side-by-side benchmarks in one binary, so the engine is
//! compiled and linked once for all of them rather than once each (about a
//! minute of a 2-core build per binary, in every `make test`):
//! `cargo bench -p ebb-host --bench engine -- NAME` runs one, NAME `sql`
//! (`make bench-sql`), `plugins` (`make bench-plugins`), `expiry`
//! (`make bench-expiry`) or `kv` (`make bench`, criterion's point
//! operations); without a name, all four in that order. Under `cargo test`
//! the first three only say how they are run and criterion runs each `kv`
//! benchmark once.

mod common;
mod expiry;
mod kv;
mod plugins;
mod sql_vs_sqlite;

fn main() {
    let benches: [(&str, fn()); 4] = [
        ("sql", sql_vs_sqlite::main),
        ("plugins", plugins::main),
        ("expiry", expiry::main),
        ("kv", kv::main),
    ];
    let name = std::env::args().skip(1).find(|arg| !arg.starts_with('-'));
    let Some(name) = name else {
        for (_, bench) in benches {
            bench();
        }
        return;
    };
    match benches.iter().find(|(known, _)| *known == name) {
        Some((_, bench)) => bench(),
        None => {
            let known: Vec<&str> = benches.iter().map(|(known, _)| *known).collect();
            eprintln!("no benchmark {name:?}; one of {}", known.join(", "));
            std::process::exit(2);
        }
    }
}
