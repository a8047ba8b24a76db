//! The raw wasm32 exports' bodies: allocation, the output buffer, pointer packing.
//!
//! [`export!`](crate::export) defines the `#[unsafe(no_mangle)]` exports in the
//! plugin crate and forwards to these functions. Only compiled for wasm32,
//! where pointers and `usize` are 32 bits.

use std::alloc::Layout;
use std::cell::RefCell;

use ebb_proto::Message;

use crate::dispatch::error_response;
use crate::plugin::Plugin;

thread_local! {
    /// The last response handed to the host; valid until the next call that
    /// replaces it (the ABI promises validity until the next call into the
    /// instance).
    static OUTPUT: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Stores `bytes` as the current output (freeing the previous one) and
/// returns its packed `(ptr << 32) | len`.
fn publish(bytes: Vec<u8>) -> i64 {
    OUTPUT.with(|output| {
        let mut output = output.borrow_mut();
        *output = bytes;
        pack(output.as_ptr() as usize, output.len())
    })
}

fn pack(ptr: usize, len: usize) -> i64 {
    (((ptr as u64) << 32) | (len as u64 & 0xffff_ffff)) as i64
}

/// Body of `ebb_alloc`: `len` bytes for the host to write into; 0 when
/// `len` is negative or memory is exhausted. A zero-length request gets a
/// dangling, never-dereferenced pointer.
pub fn alloc(len: i32) -> i32 {
    let Ok(len) = usize::try_from(len) else {
        return 0;
    };
    if len == 0 {
        return std::ptr::NonNull::<u8>::dangling().as_ptr() as usize as i32;
    }
    let Ok(layout) = Layout::array::<u8>(len) else {
        return 0;
    };
    // SAFETY: `layout` has a non-zero size (checked above).
    let ptr = unsafe { std::alloc::alloc(layout) };
    ptr as usize as i32
}

/// Body of `ebb_dealloc`.
///
/// # Safety
/// `ptr` and `len` must come from one earlier [`alloc`] call that was not
/// freed yet.
pub unsafe fn dealloc(ptr: i32, len: i32) {
    let Ok(len) = usize::try_from(len) else {
        return;
    };
    if len == 0 || ptr == 0 {
        return;
    }
    let Ok(layout) = Layout::array::<u8>(len) else {
        return;
    };
    // SAFETY: the caller guarantees `ptr` was returned by `alloc(len)`, which
    // used this same layout.
    unsafe { std::alloc::dealloc(ptr as u32 as usize as *mut u8, layout) }
}

/// Body of `ebb_manifest`.
pub fn manifest(plugin: &Plugin) -> i64 {
    publish(plugin.manifest().encode_to_vec())
}

/// Body of `ebb_call`. The input buffer stays owned by the host.
///
/// # Safety
/// `ptr` must point to `len` initialized bytes (a buffer from [`alloc`]
/// that the host filled), not modified during the call.
pub unsafe fn call(plugin: &Plugin, ptr: i32, len: i32) -> i64 {
    let input: &[u8] = match usize::try_from(len) {
        Ok(0) => &[],
        Ok(len) if ptr != 0 => {
            // SAFETY: the caller guarantees `ptr..ptr + len` is an initialized
            // buffer that lives, unmodified, for this call.
            unsafe { std::slice::from_raw_parts(ptr as u32 as usize as *const u8, len) }
        }
        _ => {
            let message = format!(
                "{}: invalid input buffer (ptr {ptr}, len {len})",
                plugin.name()
            );
            return publish(error_response(message).encode_to_vec());
        }
    };
    publish(plugin.call_encoded(input))
}
