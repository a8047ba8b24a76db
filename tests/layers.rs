//! The engine's dependency direction: no import cycle between its source
//! files, and none between its top-level modules.
//!
//! The check reads the engine's sources (`host/src`) as text. A file depends
//! on the file that defines each item it names through a `crate::`,
//! `super::` or `self::` path, or through a `use` of a child module. A
//! `pub use` re-export is followed to the file that defines the item and is
//! not a dependency of the file that re-exports it; code under
//! `#[cfg(test)]` is ignored. docs/architecture.md explains the layers.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One source file of the crate: its module path and its text with comments,
/// strings and test-only items removed.
struct SourceFile {
    module: Vec<String>,
    code: String,
}

/// The crate's module tree, read from `lib.rs` down.
struct Crate {
    files: Vec<SourceFile>,
    by_module: BTreeMap<Vec<String>, usize>,
}

impl Crate {
    fn read(src: &Path) -> Crate {
        let mut krate = Crate {
            files: Vec::new(),
            by_module: BTreeMap::new(),
        };
        krate.load(src.join("lib.rs"), src.to_path_buf(), Vec::new());
        krate
    }

    /// Loads `file` as `module`; its children live in `dir`.
    fn load(&mut self, file: PathBuf, dir: PathBuf, module: Vec<String>) {
        let text =
            std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let code = strip_test_items(&strip_comments_and_strings(&text));
        let children = child_modules(&code);
        self.by_module.insert(module.clone(), self.files.len());
        self.files.push(SourceFile {
            module: module.clone(),
            code,
        });
        for child in children {
            let mut child_module = module.clone();
            child_module.push(child.clone());
            let flat = dir.join(format!("{child}.rs"));
            if flat.exists() {
                self.load(flat, dir.join(&child), child_module);
            } else {
                let nested = dir.join(&child).join("mod.rs");
                self.load(nested, dir.join(&child), child_module);
            }
        }
    }

    fn is_module(&self, module: &[String]) -> bool {
        self.by_module.contains_key(module)
    }

    /// The file that defines the item `path` names, seen from `from`. `None`
    /// for paths outside the crate (other crates, std).
    fn resolve(&self, from: &[String], path: &[String], depth: usize) -> Option<usize> {
        if depth > 16 || path.is_empty() {
            return None;
        }
        let (mut module, rest): (Vec<String>, &[String]) = match path[0].as_str() {
            "crate" => (Vec::new(), &path[1..]),
            "self" => (from.to_vec(), &path[1..]),
            "super" => {
                let mut module = from.to_vec();
                let mut rest = path;
                while rest.first().is_some_and(|s| s == "super") {
                    module.pop();
                    rest = &rest[1..];
                }
                (module, rest)
            }
            first => {
                let mut child = from.to_vec();
                child.push(first.to_string());
                if !self.is_module(&child) {
                    return None;
                }
                (from.to_vec(), path)
            }
        };
        let mut rest = rest;
        while let Some(next) = rest.first() {
            let mut child = module.clone();
            child.push(next.clone());
            if !self.is_module(&child) {
                break;
            }
            module = child;
            rest = &rest[1..];
        }
        let file = self.by_module[&module];
        let Some(item) = rest.first() else {
            return Some(file);
        };
        // An item re-exported by `pub use` lives in the file the re-export names.
        for statement in use_statements(&self.files[file].code)
            .into_iter()
            .filter(|s| s.public)
        {
            for target in &statement.paths {
                if target.alias == *item && target.path.last().map(String::as_str) != Some("self") {
                    return self
                        .resolve(&module, &target.path, depth + 1)
                        .or(Some(file));
                }
            }
        }
        Some(file)
    }

    /// Each file's dependencies on other files of the crate.
    fn file_edges(&self) -> BTreeMap<usize, BTreeSet<usize>> {
        let mut edges: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
        for (index, file) in self.files.iter().enumerate() {
            let mut targets = BTreeSet::new();
            for statement in use_statements(&file.code).into_iter().filter(|s| !s.public) {
                for target in statement.paths {
                    targets.extend(self.resolve(&file.module, &target.path, 0));
                }
            }
            for path in inline_paths(&file.code) {
                targets.extend(self.resolve(&file.module, &path, 0));
            }
            targets.remove(&index);
            edges.insert(index, targets);
        }
        edges
    }

    fn name(&self, index: usize) -> String {
        let module = &self.files[index].module;
        if module.is_empty() {
            "lib.rs".to_string()
        } else {
            module.join("/")
        }
    }
}

/// One `use` statement, expanded: each imported path and the name it binds.
struct UseStatement {
    public: bool,
    paths: Vec<Imported>,
}

struct Imported {
    path: Vec<String>,
    alias: String,
}

fn use_statements(code: &str) -> Vec<UseStatement> {
    let mut statements = Vec::new();
    let bytes = code.as_bytes();
    let mut at = 0;
    while let Some(found) = code[at..].find("use ") {
        let start = at + found;
        at = start + 4;
        if start > 0 && is_ident_byte(bytes[start - 1]) {
            continue;
        }
        let line_start = code[..start]
            .rfind(['\n', ';', '{', '}'])
            .map_or(0, |i| i + 1);
        let prefix = code[line_start..start].trim();
        if !(prefix.is_empty() || prefix.starts_with("pub")) {
            continue;
        }
        let Some(end) = code[at..].find(';') else {
            break;
        };
        let body: String = code[at..at + end].split_whitespace().collect();
        at += end;
        let mut paths = Vec::new();
        expand(&body, &mut Vec::new(), &mut paths);
        statements.push(UseStatement {
            public: prefix.starts_with("pub"),
            paths,
        });
    }
    statements
}

/// Expands `a::{b, c::{d as e}}` into whole paths.
fn expand(tree: &str, prefix: &mut Vec<String>, out: &mut Vec<Imported>) {
    let tree = tree.trim_start_matches("::");
    if let Some(open) = tree.find('{') {
        let head: Vec<String> = tree[..open]
            .split("::")
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let depth = prefix.len();
        prefix.extend(head);
        for part in split_top_level(inner) {
            expand(part, prefix, out);
        }
        prefix.truncate(depth);
        return;
    }
    let (path, alias) = match tree.split_once("as") {
        Some((path, alias)) if !alias.contains("::") => (path, alias.to_string()),
        _ => (tree, String::new()),
    };
    let mut full = prefix.clone();
    full.extend(path.split("::").filter(|s| !s.is_empty()).map(String::from));
    if full.last().map(String::as_str) == Some("*") {
        full.pop();
    }
    let alias = if alias.is_empty() {
        match full.last().map(String::as_str) {
            Some("self") => full
                .get(full.len().wrapping_sub(2))
                .cloned()
                .unwrap_or_default(),
            Some(last) => last.to_string(),
            None => String::new(),
        }
    } else {
        alias
    };
    if !full.is_empty() {
        out.push(Imported { path: full, alias });
    }
}

fn split_top_level(list: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in list.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&list[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&list[start..]);
    parts.into_iter().filter(|p| !p.is_empty()).collect()
}

/// Paths written in code (not in `use`): `crate::a::b`, `super::x`.
fn inline_paths(code: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    let bytes = code.as_bytes();
    for root in ["crate::", "super::", "self::"] {
        let mut at = 0;
        while let Some(found) = code[at..].find(root) {
            let start = at + found;
            at = start + root.len();
            if start > 0 && (is_ident_byte(bytes[start - 1]) || bytes[start - 1] == b':') {
                continue;
            }
            let mut end = start;
            while end < bytes.len() && (is_ident_byte(bytes[end]) || bytes[end] == b':') {
                end += 1;
            }
            let path: Vec<String> = code[start..end]
                .split("::")
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect();
            paths.push(path);
        }
    }
    paths
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Names of the child modules a file declares (`mod x;`).
fn child_modules(code: &str) -> Vec<String> {
    let mut children = Vec::new();
    for statement in code.split([';', '{', '}']) {
        let words: Vec<&str> = statement.split_whitespace().collect();
        if let Some(at) = words.iter().position(|w| *w == "mod")
            && at + 2 == words.len()
            && words[..at]
                .iter()
                .all(|w| w.starts_with("pub") || w.starts_with("#["))
            && code.contains(&format!("{};", statement.trim_end()))
        {
            children.push(words[at + 1].to_string());
        }
    }
    children
}

/// Replaces comments and the contents of string and char literals with spaces.
fn strip_comments_and_strings(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c == 'r' && (next == Some('"') || next == Some('#')) && !prev_is_ident(&chars, i)
        {
            let mut j = i + 1;
            let mut hashes = 0;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            let closing: String = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            let closing: Vec<char> = closing.chars().collect();
            while j < chars.len() && chars[j..].iter().take(closing.len()).ne(closing.iter()) {
                j += 1;
            }
            i = j + closing.len();
            out.push_str("\"\"");
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' && is_char_literal(&chars, i) {
            i += 1;
            while i < chars.len() && chars[i] != '\'' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("' '");
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn prev_is_ident(chars: &[char], i: usize) -> bool {
    i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')
}

/// `'x'` or `'\n'` rather than a lifetime `'a`.
fn is_char_literal(chars: &[char], i: usize) -> bool {
    match chars.get(i + 1) {
        Some('\\') => true,
        Some(_) => chars.get(i + 2) == Some(&'\''),
        None => false,
    }
}

/// Removes every item that follows a `#[cfg(test)]` attribute.
fn strip_test_items(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let item = &rest[at + "#[cfg(test)]".len()..];
        let (mut depth, mut end) = (0usize, item.len());
        for (i, c) in item.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                ';' if depth == 0 => {
                    end = i + 1;
                    break;
                }
                _ => {}
            }
        }
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// Strongly connected components with more than one member (Tarjan).
fn cycles<N: Ord + Copy>(edges: &BTreeMap<N, BTreeSet<N>>) -> Vec<Vec<N>> {
    struct Walk<'a, N> {
        edges: &'a BTreeMap<N, BTreeSet<N>>,
        index: BTreeMap<N, usize>,
        low: BTreeMap<N, usize>,
        stack: Vec<N>,
        on_stack: BTreeSet<N>,
        found: Vec<Vec<N>>,
    }
    impl<N: Ord + Copy> Walk<'_, N> {
        fn visit(&mut self, node: N) {
            let next = self.index.len();
            self.index.insert(node, next);
            self.low.insert(node, next);
            self.stack.push(node);
            self.on_stack.insert(node);
            for &to in self.edges.get(&node).into_iter().flatten() {
                if !self.index.contains_key(&to) {
                    self.visit(to);
                    let low = self.low[&node].min(self.low[&to]);
                    self.low.insert(node, low);
                } else if self.on_stack.contains(&to) {
                    let low = self.low[&node].min(self.index[&to]);
                    self.low.insert(node, low);
                }
            }
            if self.low[&node] == self.index[&node] {
                let mut component = Vec::new();
                while let Some(member) = self.stack.pop() {
                    self.on_stack.remove(&member);
                    component.push(member);
                    if member == node {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for &node in edges.keys() {
        if !walk.index.contains_key(&node) {
            walk.visit(node);
        }
    }
    walk.found
}

/// Every edge inside a cycle, for the failure message.
fn describe(
    krate: &Crate,
    edges: &BTreeMap<usize, BTreeSet<usize>>,
    component: &[usize],
    name: impl Fn(usize) -> String,
) -> String {
    let members: BTreeSet<usize> = component.iter().copied().collect();
    let mut lines = Vec::new();
    for &from in component {
        for to in edges[&from].iter().filter(|to| members.contains(to)) {
            lines.push(format!("    {} -> {}", name(from), name(*to)));
        }
    }
    let _ = krate;
    lines.join("\n")
}

fn engine() -> Crate {
    Crate::read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))
}

#[test]
fn engine_files_have_no_import_cycle() {
    let krate = engine();
    assert!(
        krate.files.len() > 20,
        "read only {} files",
        krate.files.len()
    );
    let edges = krate.file_edges();
    let found = cycles(&edges);
    let report: Vec<String> = found
        .iter()
        .map(|component| describe(&krate, &edges, component, |i| krate.name(i)))
        .collect();
    assert!(
        found.is_empty(),
        "import cycles between engine files (docs/architecture.md):\n{}",
        report.join("\n\n")
    );
}

#[test]
fn engine_modules_have_no_import_cycle() {
    let krate = engine();
    let file_edges = krate.file_edges();
    let top = |i: usize| {
        krate.files[i]
            .module
            .first()
            .cloned()
            .unwrap_or_else(|| "lib.rs".to_string())
    };
    let mut edges: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
    let mut representative: BTreeMap<String, usize> = BTreeMap::new();
    for i in 0..krate.files.len() {
        representative.entry(top(i)).or_insert(i);
    }
    for (&from, targets) in &file_edges {
        let from_top = representative[&top(from)];
        for &to in targets {
            let to_top = representative[&top(to)];
            if from_top != to_top {
                edges.entry(from_top).or_default().insert(to_top);
            }
        }
        edges.entry(from_top).or_default();
    }
    let found = cycles(&edges);
    let report: Vec<String> = found
        .iter()
        .map(|component| {
            let members: BTreeSet<usize> = component.iter().copied().collect();
            let mut lines = Vec::new();
            for (&from, targets) in &file_edges {
                for &to in targets {
                    let (a, b) = (representative[&top(from)], representative[&top(to)]);
                    if a != b && members.contains(&a) && members.contains(&b) {
                        lines.push(format!("    {} -> {}", krate.name(from), krate.name(to)));
                    }
                }
            }
            lines.join("\n")
        })
        .collect();
    assert!(
        found.is_empty(),
        "import cycles between engine modules (docs/architecture.md):\n{}",
        report.join("\n\n")
    );
}

#[test]
fn the_checker_finds_a_cycle() {
    let mut edges: BTreeMap<u8, BTreeSet<u8>> = BTreeMap::new();
    edges.insert(1, [2].into());
    edges.insert(2, [3].into());
    edges.insert(3, [1].into());
    edges.insert(4, [1].into());
    assert_eq!(cycles(&edges), vec![vec![1, 2, 3]]);
    edges.insert(3, BTreeSet::new());
    assert!(cycles(&edges).is_empty());
}

#[test]
fn the_checker_reads_use_trees_and_skips_tests() {
    let code = strip_test_items(&strip_comments_and_strings(
        "use crate::a::{b::C, d as e};\n// use crate::x;\nlet s = \"crate::y\";\n#[cfg(test)]\nmod tests { use crate::z; }\npub use super::f::G;\n",
    ));
    let statements = use_statements(&code);
    let private: Vec<Vec<String>> = statements
        .iter()
        .filter(|s| !s.public)
        .flat_map(|s| s.paths.iter().map(|p| p.path.clone()))
        .collect();
    assert_eq!(
        private,
        vec![vec!["crate", "a", "b", "C"], vec!["crate", "a", "d"]]
    );
    assert_eq!(statements.iter().filter(|s| s.public).count(), 1);
    assert!(!code.contains("crate::x") && !code.contains("crate::y") && !code.contains("crate::z"));
}
