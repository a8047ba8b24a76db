//! Checks built plugin modules against ABI v1: imports and export signatures.
//!
//! Needs the wasm build first (`make plugins`; `make test` does it):
//! `cargo build --release --target wasm32-unknown-unknown -p ebb-plugin-json -p ebb-plugin-stats`.

use std::path::PathBuf;

const I32: u8 = 0x7f;
const I64: u8 = 0x7e;

/// A function type: (params, results) as value-type bytes.
type FuncType = (Vec<u8>, Vec<u8>);

#[derive(Debug, Default)]
struct Module {
    /// (module, name, kind, function type if kind is a function)
    imports: Vec<(String, String, u8, Option<FuncType>)>,
    /// (name, kind, function type if kind is a function)
    exports: Vec<(String, u8, Option<FuncType>)>,
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn byte(&mut self) -> u8 {
        let b = self.bytes[self.at];
        self.at += 1;
        b
    }

    fn leb(&mut self) -> u64 {
        let (mut value, mut shift) = (0u64, 0);
        loop {
            let b = self.byte();
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return value;
            }
            shift += 7;
        }
    }

    fn name(&mut self) -> String {
        let len = self.leb() as usize;
        let s = String::from_utf8(self.bytes[self.at..self.at + len].to_vec()).unwrap();
        self.at += len;
        s
    }

    fn limits(&mut self) {
        let flags = self.byte();
        self.leb();
        if flags & 1 != 0 {
            self.leb();
        }
    }

    fn vec_of_bytes(&mut self) -> Vec<u8> {
        let n = self.leb();
        (0..n).map(|_| self.byte()).collect()
    }
}

/// Parses the type, import, function and export sections of a core module.
fn parse(bytes: &[u8]) -> Module {
    assert_eq!(
        &bytes[..8],
        b"\0asm\x01\0\0\0",
        "not a wasm core module (v1)"
    );
    let mut r = Reader { bytes, at: 8 };
    let mut types: Vec<FuncType> = Vec::new();
    let mut funcs: Vec<FuncType> = Vec::new();
    let mut raw_imports = Vec::new();
    let mut raw_exports = Vec::new();
    while r.at < bytes.len() {
        let id = r.byte();
        let size = r.leb() as usize;
        let end = r.at + size;
        match id {
            1 => {
                for _ in 0..r.leb() {
                    assert_eq!(r.byte(), 0x60, "only plain function types expected");
                    types.push((r.vec_of_bytes(), r.vec_of_bytes()));
                }
            }
            2 => {
                for _ in 0..r.leb() {
                    let (module, name, kind) = (r.name(), r.name(), r.byte());
                    let ty = match kind {
                        0 => {
                            let ty = types[r.leb() as usize].clone();
                            funcs.push(ty.clone());
                            Some(ty)
                        }
                        1 => {
                            r.byte();
                            r.limits();
                            None
                        }
                        2 => {
                            r.limits();
                            None
                        }
                        3 => {
                            r.byte();
                            r.byte();
                            None
                        }
                        other => panic!("unexpected import kind {other}"),
                    };
                    raw_imports.push((module, name, kind, ty));
                }
            }
            3 => {
                for _ in 0..r.leb() {
                    funcs.push(types[r.leb() as usize].clone());
                }
            }
            7 => {
                for _ in 0..r.leb() {
                    raw_exports.push((r.name(), r.byte(), r.leb() as usize));
                }
            }
            _ => {}
        }
        r.at = end;
    }
    Module {
        imports: raw_imports,
        exports: raw_exports
            .into_iter()
            .map(|(name, kind, index)| {
                let ty = (kind == 0).then(|| funcs[index].clone());
                (name, kind, ty)
            })
            .collect(),
    }
}

fn wasm_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    target.join("wasm32-unknown-unknown/release")
}

#[test]
fn bundled_plugins_import_only_ebb_log_and_export_the_abi() {
    let expected: [(&str, Option<FuncType>); 6] = [
        ("memory", None),
        ("ebb_abi_version", Some((vec![], vec![I32]))),
        ("ebb_alloc", Some((vec![I32], vec![I32]))),
        ("ebb_dealloc", Some((vec![I32, I32], vec![]))),
        ("ebb_manifest", Some((vec![], vec![I64]))),
        ("ebb_call", Some((vec![I32, I32], vec![I64]))),
    ];
    for plugin in ["ebb_plugin_json", "ebb_plugin_stats"] {
        let path = wasm_dir().join(format!("{plugin}.wasm"));
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let module = parse(&bytes);
        for (module_name, name, kind, ty) in &module.imports {
            assert_eq!(
                (module_name.as_str(), name.as_str(), *kind, ty.clone()),
                ("ebb", "log", 0, Some((vec![I32, I32, I32], vec![]))),
                "{plugin}: unexpected import"
            );
        }
        for (name, ty) in &expected {
            let export = module.exports.iter().find(|(n, ..)| n == name);
            let (_, kind, actual) = export.unwrap_or_else(|| panic!("{plugin}: no export {name}"));
            assert_eq!(
                *kind,
                if ty.is_some() { 0 } else { 2 },
                "{plugin}: kind of {name}"
            );
            assert_eq!(actual, ty, "{plugin}: signature of {name}");
        }
        println!(
            "{plugin}: imports {:?}, exports {:?}",
            module
                .imports
                .iter()
                .map(|(m, n, ..)| format!("{m}.{n}"))
                .collect::<Vec<_>>(),
            module
                .exports
                .iter()
                .map(|(n, ..)| n.as_str())
                .collect::<Vec<_>>()
        );
    }
}
