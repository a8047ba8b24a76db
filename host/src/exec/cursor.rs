//! Query cursors: self-contained, signed tokens that continue a query in a
//! later request without server-side state.

use base64::Engine as _;
use ebb_proto::Message;
use ebb_proto::query::v1 as pb;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// Format of the cursors this build writes and reads. 2: `ORDER BY key
/// [DESC]` continues the key-order merge (format 1 recomputed it sorted,
/// so its positions mean something else).
const FORMAT: u32 = 2;
/// Longest cursor accepted, in characters.
pub(crate) const MAX_CURSOR_CHARS: usize = 64 * 1024;

/// Why a cursor was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid cursor: {0}")]
pub struct InvalidCursor(pub String);

fn mac(key: &[u8; 32], bytes: &[u8]) -> Hmac<Sha256> {
    let mut mac =
        <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(bytes);
    mac
}

/// The cursor key of every member of a cluster started with `secret`
/// (HMAC-SHA-256 of a fixed label under it), in place of each data dir's
/// own: a cursor one member issued then continues on any member.
pub(crate) fn shared_key(secret: &str) -> [u8; 32] {
    let mut mac =
        <Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes()).expect("any key length");
    mac.update(b"ebb cursor key v1");
    mac.finalize().into_bytes().into()
}

/// Encode and sign `cursor` with the node's cursor key.
pub(crate) fn seal(key: &[u8; 32], mut cursor: pb::Cursor) -> String {
    cursor.format = FORMAT;
    let bytes = cursor.encode_to_vec();
    let tag = mac(key, &bytes).finalize().into_bytes().to_vec();
    let signed = pb::SignedCursor {
        cursor: bytes.into(),
        mac: tag.into(),
    };
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(signed.encode_to_vec())
}

/// A query's cursor before its positions are known: everything but where
/// the partitions stand and how many rows were returned, which
/// [`Sealer::seal`] fills in when a response ends early.
pub(crate) struct Sealer<'a> {
    key: &'a [u8; 32],
    /// Borrowed: most responses end without a cursor, and only sealing
    /// one copies it.
    template: &'a pb::Cursor,
}

impl<'a> Sealer<'a> {
    /// Seal cursors of `template` (its positions are replaced) with `key`.
    pub(crate) fn new(key: &'a [u8; 32], template: &'a pb::Cursor) -> Self {
        Self { key, template }
    }

    /// The cursor continuing after `emitted` rows, with the partitions at
    /// `partitions`.
    pub(crate) fn seal(&self, partitions: Vec<pb::PartitionCursor>, emitted: u64) -> String {
        seal(
            self.key,
            pb::Cursor {
                partitions,
                emitted,
                ..self.template.clone()
            },
        )
    }
}

/// Check and decode a cursor; anything not sealed by this data dir's key
/// (garbage, tampering, another server) is refused.
pub(crate) fn open(key: &[u8; 32], token: &str) -> Result<pb::Cursor, InvalidCursor> {
    if token.len() > MAX_CURSOR_CHARS {
        return Err(InvalidCursor(format!(
            "longer than {MAX_CURSOR_CHARS} characters"
        )));
    }
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token.trim())
        .map_err(|_| InvalidCursor("not a cursor returned by this server".into()))?;
    let signed = pb::SignedCursor::decode(raw.as_slice())
        .map_err(|_| InvalidCursor("not a cursor returned by this server".into()))?;
    mac(key, &signed.cursor)
        .verify_slice(&signed.mac)
        .map_err(|_| {
            InvalidCursor("its signature does not match (altered, or from another server)".into())
        })?;
    let cursor = pb::Cursor::decode(signed.cursor.as_ref())
        .map_err(|_| InvalidCursor("undecodable contents".into()))?;
    if cursor.format != FORMAT {
        return Err(InvalidCursor(format!(
            "format {} is another release's (this one reads {FORMAT}); run the query again",
            cursor.format
        )));
    }
    Ok(cursor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_cursors_open_and_tampered_ones_do_not() {
        let key = [7u8; 32];
        let cursor = pb::Cursor {
            sql: "SELECT key FROM t".into(),
            emitted: 5,
            ..Default::default()
        };
        let token = seal(&key, cursor.clone());
        let opened = open(&key, &token).unwrap();
        assert_eq!(
            (opened.sql.as_str(), opened.emitted),
            ("SELECT key FROM t", 5)
        );
        assert!(open(&[8u8; 32], &token).is_err(), "another server's key");
        let mut bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(&token)
            .unwrap();
        let last = bytes.len() - 40;
        bytes[last] ^= 1;
        let tampered = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
        assert!(open(&key, &tampered).is_err());
        assert!(open(&key, "garbage!").is_err());
        assert!(open(&key, "").is_err());
    }
}
