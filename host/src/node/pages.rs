//! This member's side of other members' SQL pages (in a cluster): the
//! executor serves them over the node's fragments, admitted by the node's
//! gate like any request.

use std::sync::{Arc, Weak};

use ebb_proto::query::v1 as pb;
use futures::future::BoxFuture;

use super::Node;
use super::inner::NodeInner;
use crate::cluster::{ClusterError, PageServer};
use crate::exec::{PinnedScans, serve_page};

/// The node as a [`PageServer`]. It holds the node weakly (the cluster it
/// is registered with belongs to the node), and the scans it pinned.
pub(crate) struct NodePages {
    node: Weak<NodeInner>,
    pinned: PinnedScans,
}

impl NodePages {
    /// Serve pages over `node`.
    pub(crate) fn new(node: &Arc<NodeInner>) -> Self {
        Self {
            node: Arc::downgrade(node),
            pinned: PinnedScans::default(),
        }
    }
}

fn unavailable(message: String) -> ClusterError {
    ClusterError::Refused {
        code: "unavailable".into(),
        message,
    }
}

impl PageServer for NodePages {
    fn pinned(&self) -> usize {
        self.pinned.len()
    }

    fn serve(
        &self,
        request: pb::PageRequest,
    ) -> BoxFuture<'_, Result<pb::PageResponse, ClusterError>> {
        Box::pin(async move {
            let Some(inner) = self.node.upgrade() else {
                return Err(unavailable("the node is shutting down".into()));
            };
            let node = Node { inner };
            let _admitted = node
                .inner
                .gate
                .admit()
                .ok_or_else(|| unavailable("the node is shutting down".into()))?;
            let router = node.inner.router;
            let fragment_of = move |key: &str| router.fragment_of(key);
            Ok(serve_page(&node.exec_context(&fragment_of), &self.pinned, request).await)
        })
    }
}
