//! Logging through the `ebb.log` host import (stderr in native builds).

/// Severity of a log line, sent to the host as the `level` argument of
/// `ebb.log`: 0 error, 1 warn, 2 info, 3 debug, 4 trace (the host logs
/// trace as debug and keeps at most 4 KiB of a message).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(i32)]
pub enum Level {
    /// An error.
    Error = 0,
    /// A warning.
    Warn = 1,
    /// Informational.
    Info = 2,
    /// Debugging detail.
    Debug = 3,
    /// Fine-grained tracing.
    Trace = 4,
}

#[cfg(target_arch = "wasm32")]
#[link(wasm_import_module = "ebb")]
unsafe extern "C" {
    #[link_name = "log"]
    fn ebb_log(level: i32, ptr: i32, len: i32);
}

/// Sends one log line to the host. Used by [`log!`](crate::log!).
#[cfg(target_arch = "wasm32")]
pub fn write(level: Level, message: &str) {
    // SAFETY: `ebb.log` only reads `len` bytes at `ptr`, which `message`
    // keeps alive and unchanged for the duration of the call.
    unsafe {
        ebb_log(
            level as i32,
            message.as_ptr() as usize as i32,
            message.len() as i32,
        )
    }
}

/// Prints one log line to stderr (native builds, e.g. `cargo test`).
#[cfg(not(target_arch = "wasm32"))]
pub fn write(level: Level, message: &str) {
    eprintln!("[{level:?}] {message}");
}

/// Logs a formatted line: `ebb_guest::log!(Level::Info, "saw {} rows", n)`.
#[macro_export]
macro_rules! log {
    ($level:expr, $($arg:tt)+) => {
        $crate::log::write($level, &::std::format!($($arg)+))
    };
}
