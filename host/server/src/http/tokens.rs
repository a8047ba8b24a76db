//! Scoped tokens: which bearer tokens the server accepts, and what each may
//! do (scopes `read`, `write`, `admin`, optionally only on some tables).
//! Tokens are kept as SHA-256 hashes: the tokens file holds no token, and
//! neither does memory. See docs/security.md.
//!
//! The file is JSON, `{"tokens": [{"name", "sha256", "scopes", "tables"?}]}`;
//! `ebb token new` writes an entry. A file that does not parse, names an
//! unknown scope or repeats a hash is refused as a whole (at start: the
//! server does not start; on reload: the tokens in force stay).

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::path::Path;
use std::str::FromStr;

use ebb_host::names::TableName;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Reads: get a key, SQL, list tables and plugins, handler status and
    /// dead letters, cluster status, `/metrics` (when protected).
    Read,
    /// Writes: put, delete, TTL changes, batches.
    Write,
    /// Administration: upload and remove plugins, bind and unbind handlers,
    /// redrive dead letters, backups.
    Admin,
}

impl Scope {
    /// `read`, `write` or `admin`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Write => "write",
            Scope::Admin => "admin",
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Scope {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "read" => Ok(Scope::Read),
            "write" => Ok(Scope::Write),
            "admin" => Ok(Scope::Admin),
            other => Err(format!("unknown scope {other:?}; use read, write or admin")),
        }
    }
}

/// What one token may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The token's name (for logs and errors; never the token).
    pub name: String,
    /// Its scopes.
    pub scopes: BTreeSet<Scope>,
    /// The tables it may touch; `None`: every table.
    pub tables: Option<BTreeSet<TableName>>,
}

impl Grant {
    /// Every scope on every table: what `--auth-token` grants.
    pub fn everything(name: &str) -> Self {
        Self {
            name: name.to_string(),
            scopes: [Scope::Read, Scope::Write, Scope::Admin].into(),
            tables: None,
        }
    }

    /// Whether the grant covers `table` (any table when unlimited).
    pub fn covers(&self, table: &str) -> bool {
        self.tables
            .as_ref()
            .is_none_or(|tables| TableName::new(table).is_ok_and(|table| tables.contains(&table)))
    }
}

/// One entry of the tokens file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenEntry {
    /// A name for the token.
    pub name: String,
    /// SHA-256 of the token, 64 hex digits.
    pub sha256: String,
    /// Its scopes.
    pub scopes: Vec<Scope>,
    /// Tables it may touch; absent: every table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tables: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TokensFile {
    tokens: Vec<TokenEntry>,
}

/// The accepted tokens, by the SHA-256 of the token.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tokens {
    by_hash: HashMap<[u8; 32], Grant>,
}

/// The SHA-256 of `token`.
pub fn hash(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl Tokens {
    /// Only `token`, with every scope (the `--auth-token` of the server).
    pub fn single(token: &str) -> Self {
        let mut tokens = Self::default();
        tokens
            .by_hash
            .insert(hash(token), Grant::everything("--auth-token"));
        tokens
    }

    /// No token at all: whether the server asks for none.
    pub fn is_empty(&self) -> bool {
        self.by_hash.is_empty()
    }

    /// The grant of the bearer `token`, if it is one. The lookup is by the
    /// token's hash, so it takes the same time for every wrong token.
    pub fn grant(&self, token: &str) -> Option<&Grant> {
        self.by_hash.get(&hash(token))
    }

    /// Add `token` with every scope, as `--auth-token` does beside a tokens
    /// file.
    pub fn with_token(mut self, token: &str) -> Self {
        self.by_hash
            .insert(hash(token), Grant::everything("--auth-token"));
        self
    }

    /// The tokens of the JSON text of a tokens file.
    pub fn parse(text: &str) -> Result<Self, String> {
        let file: TokensFile =
            serde_json::from_str(text).map_err(|e| format!("not a tokens file: {e}"))?;
        let mut tokens = Self::default();
        for (index, entry) in file.tokens.into_iter().enumerate() {
            let at = |what: String| format!("token {} ({:?}): {what}", index + 1, entry.name);
            let digest = ebb_host::hex::decode(&entry.sha256)
                .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
                .ok_or_else(|| {
                    at("sha256 must be 64 hex digits (ebb token new writes it)".into())
                })?;
            if entry.scopes.is_empty() {
                return Err(at("no scopes; give read, write or admin".into()));
            }
            let tables = entry
                .tables
                .map(|tables| {
                    tables
                        .iter()
                        .map(|table| TableName::new(table).map_err(|e| at(e.to_string())))
                        .collect::<Result<BTreeSet<_>, _>>()
                })
                .transpose()?;
            let grant = Grant {
                name: entry.name.clone(),
                scopes: entry.scopes.into_iter().collect(),
                tables,
            };
            if tokens.by_hash.insert(digest, grant).is_some() {
                return Err(at("the same token (sha256) appears twice".into()));
            }
        }
        Ok(tokens)
    }

    /// The tokens of the file at `path`.
    pub fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read tokens file {}: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| format!("tokens file {}: {e}", path.display()))
    }
}

/// A new random token (32 random bytes as hex) and its entry for a tokens
/// file.
pub fn new_token(
    name: &str,
    scopes: Vec<Scope>,
    tables: Option<Vec<String>>,
) -> (String, TokenEntry) {
    use rand::Rng;
    let bytes: [u8; 32] = rand::rng().random();
    let token = ebb_host::hex::encode(&bytes);
    let entry = TokenEntry {
        name: name.to_string(),
        sha256: ebb_host::hex::encode(&hash(&token)),
        scopes,
        tables,
    };
    (token, entry)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_grants_each_token_its_scopes_and_tables() {
        let (reader, entry) = new_token("ci", vec![Scope::Read], Some(vec!["Users".into()]));
        let (admin, admin_entry) = new_token("ops", vec![Scope::Admin, Scope::Read], None);
        let text = serde_json::json!({ "tokens": [entry, admin_entry] }).to_string();
        let tokens = Tokens::parse(&text).unwrap();
        let grant = tokens.grant(&reader).unwrap();
        assert_eq!(grant.scopes, [Scope::Read].into());
        assert!(grant.covers("users") && grant.covers("USERS") && !grant.covers("orders"));
        assert!(tokens.grant(&admin).unwrap().covers("anything"));
        assert!(tokens.grant("not a token").is_none());
        assert!(!text.contains(&reader), "the file holds no token");
        let with = tokens.with_token("s3cret");
        assert_eq!(with.grant("s3cret").unwrap().scopes.len(), 3);
    }

    #[test]
    fn a_bad_file_is_refused_saying_what_is_wrong() {
        let entry = |scopes: &str, sha: &str| {
            format!(r#"{{"tokens": [{{"name": "a", "sha256": "{sha}", "scopes": {scopes}}}]}}"#)
        };
        let good = ebb_host::hex::encode(&hash("t"));
        for (text, says) in [
            ("{}".to_string(), "not a tokens file"),
            (entry(r#"["root"]"#, &good), "unknown variant"),
            (entry("[]", &good), "no scopes"),
            (entry(r#"["read"]"#, "abc"), "64 hex digits"),
            (
                format!(
                    r#"{{"tokens": [{{"name": "a", "sha256": "{good}", "scopes": ["read"]}}, {{"name": "b", "sha256": "{good}", "scopes": ["write"]}}]}}"#
                ),
                "twice",
            ),
        ] {
            let error = Tokens::parse(&text).unwrap_err();
            assert!(error.contains(says), "{text}: {error}");
        }
        assert_eq!("write".parse::<Scope>(), Ok(Scope::Write));
        assert!(
            "root"
                .parse::<Scope>()
                .unwrap_err()
                .contains("read, write or admin")
        );
    }
}
