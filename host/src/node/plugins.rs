//! Plugin changes through the node's API: on a single node straight to
//! its registry, in a cluster through the metadata group, so every member
//! applies them.

use std::sync::Arc;

use bytes::Bytes;

use super::Node;
use super::error::Error;
use crate::cluster::{ClusterError, MetaCommand, MetaOutcome};
use crate::plugin::{PluginError, PluginVersion};
use crate::raft::NodeId;
use crate::store::StoreError;

/// A plugin change as the node made it.
#[derive(Clone)]
pub struct PluginChange {
    /// The plugin's version now (`None` after a removal).
    pub version: Option<Arc<PluginVersion>>,
    /// The bytes were the current version's: nothing new was stored.
    pub unchanged: bool,
    /// In a cluster: the members that applied the change, and those that
    /// had not confirmed it when the answer was given (they apply it when
    /// they catch up).
    pub members: Option<(Vec<NodeId>, Vec<NodeId>)>,
}

impl Node {
    /// Install `bytes` as the next version of plugin `name`: on this node,
    /// or in a cluster on every member through the metadata group (checked
    /// here first, so a module the members would refuse is never
    /// proposed). The answer is this node's version, which in a cluster
    /// has applied the change before it returns.
    pub async fn put_plugin(&self, name: &str, bytes: Bytes) -> Result<PluginChange, Error> {
        let admin = self.inner.admin.clone();
        let owned = name.to_string();
        let Some(cluster) = self.inner.cluster.clone() else {
            self.store()?;
            let installed = blocking(move || admin.install(&owned, &bytes)).await?;
            return Ok(PluginChange {
                version: Some(installed.version),
                unchanged: installed.unchanged,
                members: None,
            });
        };
        let module = bytes.clone();
        blocking(move || admin.validate(&owned, &module)).await?;
        let change = cluster
            .change_metadata(MetaCommand::InstallPlugin {
                name: name.to_string(),
                module: bytes,
            })
            .await?;
        let unchanged = match change.outcome {
            MetaOutcome::Installed { unchanged, .. } => unchanged,
            MetaOutcome::Failed { code, message } => {
                return Err(ClusterError::Refused { code, message }.into());
            }
            other => return Err(unexpected(&format!("an install answered {other:?}"))),
        };
        self.applied_here(&change.pending)?;
        let version = self
            .inner
            .plugins
            .get(name)
            .ok_or_else(|| unexpected("an installed plugin is missing on this member"))?;
        Ok(PluginChange {
            version: Some(version),
            unchanged,
            members: Some((change.applied, change.pending)),
        })
    }

    /// Remove plugin `name` (refused while an expiry binding uses it): on
    /// this node, or in a cluster on every member through the metadata
    /// group.
    pub async fn delete_plugin(&self, name: &str) -> Result<PluginChange, Error> {
        let admin = self.inner.admin.clone();
        let owned = name.to_string();
        let Some(cluster) = self.inner.cluster.clone() else {
            self.store()?;
            blocking(move || admin.remove(&owned)).await?;
            return Ok(PluginChange {
                version: None,
                unchanged: false,
                members: None,
            });
        };
        if self.inner.plugins.get(name).is_none() {
            return Err(PluginError::NotFound(name.to_ascii_lowercase()).into());
        }
        let change = cluster
            .change_metadata(MetaCommand::RemovePlugin {
                name: name.to_string(),
            })
            .await?;
        match change.outcome {
            MetaOutcome::Removed => {}
            MetaOutcome::Failed { code, message } => {
                return Err(ClusterError::Refused { code, message }.into());
            }
            other => return Err(unexpected(&format!("a removal answered {other:?}"))),
        }
        self.applied_here(&change.pending)?;
        Ok(PluginChange {
            version: None,
            unchanged: false,
            members: Some((change.applied, change.pending)),
        })
    }

    /// A committed change this member has not applied yet cannot be
    /// answered from here.
    fn applied_here(&self, pending: &[NodeId]) -> Result<(), Error> {
        let here = self.inner.cluster.as_ref().map(|c| c.node_id());
        if here.is_some_and(|id| pending.contains(&id)) {
            return Err(ClusterError::Refused {
                code: "unavailable".into(),
                message: "the change is committed but this member has not applied it yet; it will: read the plugin again shortly".into(),
            }
            .into());
        }
        Ok(())
    }
}

fn unexpected(what: &str) -> Error {
    ClusterError::MetaStopped {
        reason: what.to_string(),
    }
    .into()
}

/// Run plugin work on the blocking pool.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, PluginError> + Send + 'static,
) -> Result<T, Error> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| PluginError::Store(StoreError::Engine(format!("plugin task failed: {e}"))))?
        .map_err(Error::Plugin)
}
