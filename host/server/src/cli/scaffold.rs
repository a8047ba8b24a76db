//! `ebb plugin new`: a plugin crate with an example of each function kind
//! and passing native tests, depending on this checkout's guest SDK.

use std::path::{Path, PathBuf};

const CARGO_TOML: &str = include_str!("scaffold/Cargo.toml.tmpl");
const LIB_RS: &str = include_str!("scaffold/lib.rs.tmpl");

/// Where this ebb's guest SDK was when it was built.
fn built_sdk() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../guest-sdk")
}

/// Write the crate `name` into `dir` (default `./name`), depending on the
/// guest SDK at `sdk` (default: the one this ebb was built from). Refuses a
/// bad name, a missing SDK or a directory that exists and is not empty;
/// returns the directory written.
pub fn new_plugin(
    name: &str,
    dir: Option<PathBuf>,
    sdk: Option<PathBuf>,
) -> Result<PathBuf, String> {
    let valid = !name.is_empty()
        && name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !valid || name.starts_with("ebb_") {
        return Err(format!(
            "plugin name {name:?}: use 1 to 63 of a-z, 0-9 and _, starting with a letter or _ (not ebb_)"
        ));
    }
    let sdk = sdk.unwrap_or_else(built_sdk);
    let sdk = sdk.canonicalize().map_err(|e| {
        format!(
            "the guest SDK is not at {} ({e}); pass --sdk PATH to the guest-sdk directory of an ebb checkout",
            sdk.display()
        )
    })?;
    if !sdk.join("Cargo.toml").is_file() {
        return Err(format!(
            "{} has no Cargo.toml; pass --sdk PATH to the guest-sdk directory of an ebb checkout",
            sdk.display()
        ));
    }
    let dir = dir.unwrap_or_else(|| PathBuf::from(name));
    if dir.exists()
        && std::fs::read_dir(&dir)
            .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
            .next()
            .is_some()
    {
        return Err(format!(
            "{} exists and is not empty; choose another --dir",
            dir.display()
        ));
    }
    let fill = |template: &str| {
        template
            .replace("{{name}}", name)
            .replace("{{crate}}", name)
            .replace("{{sdk}}", &sdk.display().to_string())
    };
    let write = |path: PathBuf, text: String| {
        std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
    };
    std::fs::create_dir_all(dir.join("src"))
        .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    write(dir.join("Cargo.toml"), fill(CARGO_TOML))?;
    write(dir.join("src/lib.rs"), fill(LIB_RS))?;
    write(dir.join(".gitignore"), "/target\n".into())?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_dirs_and_the_sdk_are_checked() {
        let root = tempfile::tempdir().unwrap();
        for bad in ["", "Caps", "1st", "ebb_x", "a-b"] {
            let error = new_plugin(bad, Some(root.path().join("x")), None).unwrap_err();
            assert!(error.contains("plugin name"), "{bad}: {error}");
        }
        let dir = new_plugin("greeter", Some(root.path().join("g")), None).unwrap();
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        assert!(manifest.contains("name = \"greeter\""), "{manifest}");
        assert!(!manifest.contains("{{"), "{manifest}");
        let lib = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap();
        assert!(lib.contains("name: \"greeter\"") && !lib.contains("{{"));
        let again = new_plugin("greeter", Some(dir), None).unwrap_err();
        assert!(again.contains("not empty"), "{again}");
        let nowhere = new_plugin(
            "g2",
            Some(root.path().join("h")),
            Some(root.path().join("no")),
        );
        assert!(nowhere.unwrap_err().contains("--sdk"));
    }
}
