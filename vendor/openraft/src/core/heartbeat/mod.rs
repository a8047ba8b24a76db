pub(crate) mod errors;
pub(crate) mod event;
pub(crate) mod handle;
pub(crate) mod worker;
