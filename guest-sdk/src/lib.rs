//! Guest SDK for ebb plugins: write plain Rust functions, export them with
//! one [`export!`], and build for `wasm32-unknown-unknown`.
//!
//! The SDK implements plugin ABI v1 (see `docs/plugins.md`, "ABI v1"): the
//! exports `ebb_abi_version`, `ebb_alloc`, `ebb_dealloc`, `ebb_manifest` and
//! `ebb_call`, the protobuf encoding of every message, and the conversions
//! between SQL values and Rust types. The only import a plugin gets is
//! `ebb.log`, and only if it uses [`log!`].
//!
//! # Writing a plugin
//!
//! A plugin crate is a `cdylib` (for wasm) and an `rlib` (for native tests):
//!
//! ```toml
//! [lib]
//! crate-type = ["cdylib", "rlib"]
//!
//! [dependencies]
//! ebb-guest = { path = "../guest-sdk" }
//! ```
//!
//! Its `src/lib.rs`:
//!
//! ```
//! use ebb_guest::{
//!     Aggregate, ChangeEvent, ChangeOutcome, ExpiryEvent, ExpiryOutcome, Level, Value,
//! };
//!
//! /// Scalar: arity and conversions come from the signature. A NULL argument
//! /// makes the result NULL unless the parameter is an `Option`.
//! fn shout(text: String, times: Option<i64>) -> String {
//!     text.to_uppercase().repeat(times.unwrap_or(1).max(0) as usize)
//! }
//!
//! /// Scalar returning `Result`: an `Err` fails the call with this message.
//! fn ratio(a: f64, b: f64) -> Result<f64, String> {
//!     if b == 0.0 { Err("division by zero".into()) } else { Ok(a / b) }
//! }
//!
//! /// Aggregate: the host keeps `State` as bytes between calls.
//! struct Total;
//!
//! impl Aggregate for Total {
//!     type State = i64;
//!     fn init() -> i64 { 0 }
//!     fn update(state: &mut i64, args: &[Value]) -> Result<(), String> {
//!         *state += args[0].get::<i64>()?;
//!         Ok(())
//!     }
//!     fn merge(left: i64, right: i64) -> i64 { left + right }
//!     fn finish(state: i64) -> Value { Value::Int(state) }
//!     fn encode(state: &i64) -> Vec<u8> { state.to_le_bytes().to_vec() }
//!     fn decode(bytes: &[u8]) -> Result<i64, String> {
//!         Ok(i64::from_le_bytes(bytes.try_into().map_err(|_| "want 8 bytes")?))
//!     }
//! }
//!
//! /// Expiry handler: copy each expired record into `archive` for a day.
//! fn archive(events: &[ExpiryEvent]) -> ExpiryOutcome {
//!     let mut outcome = ExpiryOutcome::default();
//!     for (index, event) in events.iter().enumerate() {
//!         if event.value.is_empty() {
//!             outcome.retry(index);
//!             continue;
//!         }
//!         outcome.put("archive", &event.key, event.value.clone(), 86_400_000);
//!     }
//!     ebb_guest::log!(Level::Info, "archived {} records", outcome.actions.len());
//!     outcome
//! }
//!
//! /// Change handler: keep each written value's length in `sizes`. Events of a
//! /// key come in order and at least once; deletes have no value.
//! fn sizes(events: &[ChangeEvent]) -> ChangeOutcome {
//!     let mut outcome = ChangeOutcome::default();
//!     for event in events {
//!         if event.deleted {
//!             outcome.delete("sizes", &event.key);
//!         } else {
//!             let size = event.value.len().to_string().into_bytes();
//!             outcome.put("sizes", &event.key, size, 0);
//!         }
//!     }
//!     outcome
//! }
//!
//! ebb_guest::export! {
//!     name: "demo",
//!     version: "0.1.0",
//!     functions: {
//!         scalar "shout" => shout, "Upper-cases text, repeated `times` times";
//!         scalar "ratio" => ratio, "a / b; fails on division by zero";
//!         aggregate "total" => Total, "Sum of integers";
//!         expiry "archive" => archive, "Copies expired records to `archive`";
//!         change "sizes" => sizes, "Keeps each value's length in `sizes`";
//!     }
//! }
//!
//! // Native tests go through the same encoded dispatch as `ebb_call`:
//! use ebb_guest::testing;
//! let p = plugin();
//! assert_eq!(
//!     testing::scalar(p, "shout", vec![Value::Text("hi".into()), Value::Int(2)]),
//!     Ok(Value::Text("HIHI".into())),
//! );
//! assert_eq!(testing::scalar(p, "shout", vec![Value::Null, Value::Null]), Ok(Value::Null));
//! assert_eq!(
//!     testing::scalar(p, "ratio", vec![Value::Int(1), Value::Int(0)]),
//!     Err("demo.ratio: row 0: division by zero".into()),
//! );
//! let rows = |xs: &[i64]| xs.iter().map(|&x| vec![Value::Int(x)]).collect::<Vec<_>>();
//! assert_eq!(
//!     testing::aggregate(p, "total", vec![rows(&[1, 2]), rows(&[3])]),
//!     Ok(Value::Int(6)),
//! );
//! let write = ChangeEvent { key: "k".into(), value: b"abc".to_vec(), ..Default::default() };
//! let outcome = testing::change(p, "sizes", vec![write]).unwrap();
//! assert_eq!(outcome.actions.len(), 1);
//! assert_eq!(p.manifest().functions.len(), 5);
//! ```
//!
//! [`export!`] defines `pub fn plugin() -> &'static Plugin` in the calling
//! module (so a plugin crate must not define its own `plugin` item there) and,
//! on wasm32 only, the `#[unsafe(no_mangle)]` ABI exports. Build with
//! `cargo build --release --target wasm32-unknown-unknown`.
//!
//! # Failure behaviour
//!
//! Nothing a host sends makes the SDK panic: an unknown function, a wrong
//! call kind, a wrong argument count, a malformed request, a corrupt
//! aggregate state or an `Err` from the function all become a
//! `CallResponse { error: "plugin.function: ..." }`. A panic inside a plugin
//! function traps the instance; the host discards it and fails the call.

mod aggregate;
pub mod binding;
mod change;
mod dispatch;
mod expiry;
mod fastpath;
mod plugin;
mod read;
mod registry;
mod rows;
mod scalar;
mod value;

#[cfg(target_arch = "wasm32")]
#[doc(hidden)]
pub mod abi;
pub mod log;
pub mod state;
pub mod testing;

pub use aggregate::Aggregate;
pub use change::{ChangeEvent, ChangeOutcome};
/// Protobuf encoding of the [`proto`] messages.
pub use ebb_proto::Message;
/// The ABI v1 messages, for tests and advanced use.
pub use ebb_proto::plugin::v1 as proto;
pub use expiry::{Action, Condition, ExpiryEvent, ExpiryOutcome, ExpiryOutput};
pub use log::Level;
pub use plugin::{ABI_VERSION, Plugin};
pub use read::{Record, get};
pub use scalar::{ScalarFn, ScalarOutput, Variadic};
pub use value::{EmptyValueError, FromValue, FromValueError, IntoValue, Value, ValueRef};

/// Declares a plugin's name, version and functions, and generates its ABI.
///
/// ```text
/// ebb_guest::export! {
///     name: "json",
///     version: env!("CARGO_PKG_VERSION"),
///     functions: {
///         scalar    "get"   => get,   "description";   // fn(..) -> R
///         scalar_ref(2) "at" => at,   "description";   // fn(&[ValueRef]) -> R, 2 args
///         aggregate "avg"   => Avg,   "description";   // type: Aggregate
///         expiry    "copy"  => copy,  "description";   // fn(&[ExpiryEvent]) -> R
///         change    "audit" => audit, "description";   // fn(&[ChangeEvent]) -> R
///     }
/// }
/// ```
///
/// Expands to `pub fn plugin() -> &'static Plugin` (built once) and, on
/// wasm32, the exports `ebb_abi_version`, `ebb_alloc`, `ebb_dealloc`,
/// `ebb_manifest` and `ebb_call`. A function name declared twice panics when
/// the plugin is first built.
#[macro_export]
macro_rules! export {
    (
        name: $name:expr,
        version: $version:expr,
        functions: {
            $( $kind:ident $( ( $arity:literal ) )? $fname:literal => $f:path, $desc:expr; )*
        } $(,)?
    ) => {
        /// This crate's plugin: the registry behind `ebb_manifest` and `ebb_call`.
        pub fn plugin() -> &'static $crate::Plugin {
            static PLUGIN: ::std::sync::OnceLock<$crate::Plugin> = ::std::sync::OnceLock::new();
            PLUGIN.get_or_init(|| {
                let plugin = $crate::Plugin::new($name, $version);
                $( let plugin = $crate::__export_function!(plugin, $kind $( ($arity) )?, $fname, $f, $desc); )*
                plugin
            })
        }

        #[cfg(target_arch = "wasm32")]
        #[doc(hidden)]
        mod __ebb_abi_exports {
            #[unsafe(no_mangle)]
            pub extern "C" fn ebb_abi_version() -> i32 {
                $crate::ABI_VERSION as i32
            }

            #[unsafe(no_mangle)]
            pub extern "C" fn ebb_alloc(len: i32) -> i32 {
                $crate::abi::alloc(len)
            }

            #[unsafe(no_mangle)]
            pub extern "C" fn ebb_dealloc(ptr: i32, len: i32) {
                // SAFETY: the ABI lets the host free only buffers it got from
                // `ebb_alloc`, with the same length, once.
                unsafe { $crate::abi::dealloc(ptr, len) }
            }

            #[unsafe(no_mangle)]
            pub extern "C" fn ebb_manifest() -> i64 {
                $crate::abi::manifest(super::plugin())
            }

            #[unsafe(no_mangle)]
            pub extern "C" fn ebb_call(ptr: i32, len: i32) -> i64 {
                // SAFETY: the ABI has the host pass a buffer from `ebb_alloc`
                // holding `len` request bytes, which it frees only after
                // this call returns.
                unsafe { $crate::abi::call(super::plugin(), ptr, len) }
            }
        }
    };
}

/// Registers one function of [`export!`] by kind.
#[doc(hidden)]
#[macro_export]
macro_rules! __export_function {
    ($plugin:ident, scalar, $name:literal, $f:path, $desc:expr) => {
        $plugin.scalar($name, $desc, $f)
    };
    ($plugin:ident, scalar_ref ($arity:literal), $name:literal, $f:path, $desc:expr) => {
        $plugin.scalar_ref($name, $desc, $arity, $f)
    };
    ($plugin:ident, aggregate, $name:literal, $f:path, $desc:expr) => {
        $plugin.aggregate::<$f>($name, $desc)
    };
    ($plugin:ident, expiry, $name:literal, $f:path, $desc:expr) => {
        $plugin.expiry($name, $desc, $f)
    };
    ($plugin:ident, change, $name:literal, $f:path, $desc:expr) => {
        $plugin.change($name, $desc, $f)
    };
    ($plugin:ident, $other:ident, $name:literal, $f:path, $desc:expr) => {
        ::std::compile_error!(::std::concat!(
            "unknown function kind `",
            ::std::stringify!($other),
            "`; use scalar, scalar_ref(N), aggregate, expiry or change"
        ))
    };
}
