//! What the executor needs from the node, handed to it explicitly: the
//! executor never sees the node itself.

use std::sync::Arc;

use super::QueryBudgets;
use crate::cluster::Cluster;
use crate::fragment::Fragment;
use crate::native::NativeFunctions;
use crate::plugin::PluginRegistry;
use crate::plugin::sql::HostFunctions;

/// The node's parts one query uses. The node builds it per request (see
/// `Node::query`) after admitting the request; it borrows, so building
/// it costs nothing.
pub(crate) struct ExecContext<'a> {
    /// The node's query budgets.
    pub budgets: QueryBudgets,
    /// The data dir's key, which signs and checks cursors.
    pub cursor_key: &'a [u8; 32],
    /// The installed plugins: the functions planned with, their versions
    /// (recorded in cursors), and the query threads every page runs on.
    pub plugins: &'a Arc<PluginRegistry>,
    /// The native functions the embedding application registered.
    pub natives: &'a Arc<NativeFunctions>,
    /// The fragment a key belongs to (the node's router).
    pub fragment_of: &'a (dyn Fn(&str) -> u32 + Sync),
    /// Every fragment, by id: their partitions' snapshots, and the
    /// background pools that admit pages.
    pub fragments: &'a [Fragment],
    /// In a cluster: the partitions other members hold are read through it.
    pub cluster: Option<&'a Arc<Cluster>>,
}

impl ExecContext<'_> {
    /// The functions SQL resolves names in: natives first, then plugins.
    pub(crate) fn functions(&self) -> HostFunctions {
        HostFunctions::new(self.plugins.clone(), self.natives.clone())
    }

    /// The number of fragments.
    pub(crate) fn fragment_count(&self) -> u32 {
        self.fragments.len() as u32
    }
}
