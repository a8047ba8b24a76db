//! Event ids as text: the hex form the HTTP API, the CLI and dead-letter
//! paging use. The events themselves, their keys and their stored encoding
//! are the store's ([`crate::store::PendingEvent`]).

use crate::store::outbox::ID_LEN;

/// Parse a hex id; `None` unless it is exactly [`ID_LEN`] bytes of hex.
pub(crate) fn parse_hex_id(text: &str) -> Option<Vec<u8>> {
    crate::hex::decode(text).filter(|id| id.len() == ID_LEN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_through_hex() {
        let id: Vec<u8> = (0..ID_LEN as u8).collect();
        assert_eq!(parse_hex_id(&crate::hex::encode(&id)), Some(id));
        assert_eq!(parse_hex_id("abc"), None);
        assert_eq!(parse_hex_id(&"zz".repeat(ID_LEN)), None);
    }
}
