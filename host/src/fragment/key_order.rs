//! The order of keys in a partition's index: byte-wise, as `str` orders
//! them, compared eight bytes at a time (a leaf: entries and lookups both
//! use it).
//!
//! Every descent of the index (a point read, a write, the seek that opens a
//! range) compares the key it looks for with a few entries' keys per level.
//! `str`'s own order calls `memcmp` for each, which costs a call and a
//! length dispatch for keys a few dozen bytes long. [`compare_keys`] reads
//! both keys as big-endian words instead, inline, so the first differing
//! word decides. The order is exactly `str`'s (tests check it against
//! `Ord for str`), so nothing persisted or paged changes.

use std::cmp::Ordering;

/// `a.cmp(b)` for byte strings, comparing eight bytes at a time.
#[inline]
pub fn compare_keys(a: &[u8], b: &[u8]) -> Ordering {
    let n = a.len().min(b.len());
    if n >= 8 {
        let mut i = 0;
        while i + 8 <= n {
            let order = word(a, i).cmp(&word(b, i));
            if order != Ordering::Equal {
                return order;
            }
            i += 8;
        }
        if i < n {
            // The last eight bytes of the common length: the bytes before
            // `i` are equal, so the overlap does not change the order.
            let order = word(a, n - 8).cmp(&word(b, n - 8));
            if order != Ordering::Equal {
                return order;
            }
        }
    } else {
        let order = short(&a[..n]).cmp(&short(&b[..n]));
        if order != Ordering::Equal {
            return order;
        }
    }
    a.len().cmp(&b.len())
}

/// The eight bytes of `s` at `at`, big-endian, so integer order is byte order.
#[inline(always)]
fn word(s: &[u8], at: usize) -> u64 {
    let bytes: [u8; 8] = s[at..at + 8].try_into().expect("eight bytes");
    u64::from_be_bytes(bytes)
}

/// Up to seven bytes as one big-endian integer, zero-padded on the right:
/// equal lengths compare in byte order.
#[inline(always)]
fn short(s: &[u8]) -> u64 {
    let mut value = 0u64;
    for (i, byte) in s.iter().enumerate() {
        value |= u64::from(*byte) << (56 - 8 * i);
    }
    value
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn orders_as_str_does_at_every_length() {
        let keys = [
            "",
            "a",
            "ab",
            "abc",
            "abcdefg",
            "abcdefgh",
            "abcdefgi",
            "abcdefgh\0",
            "abcdefghij",
            "order:00500000",
            "order:00499999",
            "order:005",
            "order:0050000",
            "zz",
            "\u{7f}",
            "é",
            "éa",
            "abcdefghijklmnop",
            "abcdefghijklmnoq",
            "abcdefghijklmnopq",
        ];
        for a in keys {
            for b in keys {
                assert_eq!(
                    compare_keys(a.as_bytes(), b.as_bytes()),
                    a.cmp(b),
                    "{a:?} against {b:?}"
                );
            }
        }
    }

    proptest! {
        #[test]
        fn orders_as_str_does(
            prefix in "[a-c]{0,20}",
            a in "[a-c\u{0}\u{ff}]{0,20}",
            b in "[a-c\u{0}\u{ff}]{0,20}",
        ) {
            let a = format!("{prefix}{a}");
            let b = format!("{prefix}{b}");
            prop_assert_eq!(compare_keys(a.as_bytes(), b.as_bytes()), a.cmp(&b));
        }
    }
}
