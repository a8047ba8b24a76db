//! Cache prefetch hints for data a scan will read shortly.

/// Ask the CPU to start loading `lines` cache lines from `start`. Only a
/// hint: it changes no result, the address need not be readable, and it
/// does nothing on targets without a prefetch instruction.
#[inline]
pub(crate) fn prefetch_lines(start: *const u8, lines: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        for line in 0..lines {
            // SAFETY: a prefetch reads nothing the program sees and never
            // faults, whatever the address; SSE is part of every x86_64.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(start.wrapping_add(line * 64).cast::<i8>()) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (start, lines);
}
