//! The router: which fragment (and which worker) a key belongs to.
//!
//! The hash is part of the on-disk format (fragment ids prefix stored keys):
//! FNV-1a over the key's bytes, finished with the SplitMix64 mixer so that
//! both the low and the high bits are well spread. It never changes within a
//! format version.

use crate::store::FragmentId;

/// Stable 64-bit hash of a key.
pub fn key_hash(key: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in key.as_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash ^= hash >> 30;
    hash = hash.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    hash ^= hash >> 27;
    hash = hash.wrapping_mul(0x94d0_49bb_1331_11eb);
    hash ^ (hash >> 31)
}

/// Maps keys to fragments for a fixed fragment count.
#[derive(Debug, Clone, Copy)]
pub struct Router {
    fragments: u32,
}

impl Router {
    /// A router over `fragments` fragments (at least 1).
    pub fn new(fragments: u32) -> Self {
        Self {
            fragments: fragments.max(1),
        }
    }

    /// The fragment of `key`: `hash(key) % fragments`. The same key lands on
    /// the same fragment in every table.
    pub fn fragment_of(&self, key: &str) -> FragmentId {
        self.fragment_of_hash(key_hash(key))
    }

    /// The fragment of a key whose hash is already known.
    pub fn fragment_of_hash(&self, hash: u64) -> FragmentId {
        (hash % u64::from(self.fragments)) as FragmentId
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_stable_across_builds() {
        // Stored keys are prefixed by fragment: these values must never change.
        assert_eq!(key_hash(""), 0xf52a_15e9_a9b5_e89b);
        assert_eq!(key_hash("user:1"), 0x3290bc1a92ad86c2);
        assert_eq!(Router::new(16).fragment_of("user:1"), 2);
    }

    #[test]
    fn keys_spread_over_all_fragments() {
        let router = Router::new(16);
        let mut counts = [0usize; 16];
        for i in 0..16_000 {
            counts[router.fragment_of(&format!("user:{i}")) as usize] += 1;
        }
        for count in counts {
            assert!((800..1200).contains(&count), "uneven spread: {counts:?}");
        }
    }
}
