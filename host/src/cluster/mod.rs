//! The cluster's own logic, apart from consensus: where each fragment's
//! replicas live. See docs/cluster.md.

mod placement;

pub use placement::{PlacementError, place, replicas};
