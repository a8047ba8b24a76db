//! Cache prefetch hints for data a scan will read shortly.

/// Ask the CPU to start loading the first two cache lines of `bytes`, which
/// will be read soon. Only a hint: it changes no result, and does nothing on
/// targets without a prefetch instruction.
#[inline]
pub(crate) fn prefetch(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let start = bytes.as_ptr().cast::<i8>();
        // SAFETY: a prefetch reads nothing the program sees and never
        // faults, whatever the address; SSE is part of every x86_64.
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(start);
            if bytes.len() > 64 {
                _mm_prefetch::<_MM_HINT_T0>(start.wrapping_add(64));
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}
