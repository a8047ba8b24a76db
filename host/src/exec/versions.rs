//! The plugin versions a query's plan calls: recorded when it is planned
//! (and in its cursor), and checked when a cursor continues it. A
//! continuation never switches versions: the node keeps only a plugin's
//! current module, so one whose plugin was replaced or removed since the
//! first page is refused with `PluginChanged`, in either consistency.

use std::sync::Arc;

use ebb_proto::query::v1 as pb;
use ebb_query::{FunctionRegistry, Limits, Plan, Value};

use super::error::QueryError;
use super::physical::PluginUse;
use crate::plugin::{PluginRegistry, PluginVersion};

/// Plans tried while plugins keep changing under the planner.
const PLAN_ATTEMPTS: usize = 8;

fn used(version: &PluginVersion) -> PluginUse {
    PluginUse {
        name: version.name.clone(),
        version: version.info.version,
        sha256: version.info.sha256.clone(),
    }
}

/// Plan `sql` with `functions`, and the plugin versions the plan calls, by
/// name. A plugin replaced or removed while the query was planned could
/// have been resolved at the version it replaced: the query is then
/// planned again.
pub(crate) fn plan(
    sql: &str,
    params: &[Value],
    functions: &dyn FunctionRegistry,
    plugins: &PluginRegistry,
) -> Result<(Plan, Vec<PluginUse>), QueryError> {
    let mut changed = String::new();
    for _ in 0..PLAN_ATTEMPTS {
        // The versions installed before planning (shared handles: cheap).
        let before = plugins.list();
        let plan = ebb_query::plan(sql, params, functions, &Limits::default())?;
        let calls = plan.plugin_calls();
        if calls.is_empty() {
            return Ok((plan, Vec::new()));
        }
        let mut names: Vec<&str> = calls
            .iter()
            .map(|call| {
                call.split_once('.')
                    .map_or(call.as_str(), |(plugin, _)| plugin)
            })
            .collect();
        names.sort_unstable();
        names.dedup();
        let now: Vec<Option<Arc<PluginVersion>>> =
            names.iter().map(|name| plugins.get(name)).collect();
        // The same version object before and after planning: the plan
        // resolved that one.
        let steady = now.iter().all(|version| {
            version
                .as_ref()
                .is_some_and(|v| before.iter().any(|b| Arc::ptr_eq(b, v)))
        });
        if steady {
            let mut uses: Vec<PluginUse> = now.iter().flatten().map(|v| used(v)).collect();
            uses.sort();
            uses.dedup_by(|a, b| a.name == b.name);
            return Ok((plan, uses));
        }
        changed = names.join(", ");
    }
    Err(QueryError::PluginChanged {
        message: format!("plugin {changed} kept changing while the query was planned; retry"),
        plugin: changed,
    })
}

/// The versions a cursor recorded.
pub(crate) fn recorded(cursor: &pb::Cursor) -> Vec<PluginUse> {
    from_proto(&cursor.plugins)
}

/// Plugin versions as the protocol sends them (cursors, page requests).
pub(crate) fn from_proto(uses: &[pb::PluginUse]) -> Vec<PluginUse> {
    uses.iter()
        .map(|p| PluginUse {
            name: p.name.clone(),
            version: p.version,
            sha256: p.sha256.clone(),
        })
        .collect()
}

/// The versions `uses` as a cursor records them.
pub(crate) fn to_cursor(uses: &[PluginUse]) -> Vec<pb::PluginUse> {
    uses.iter()
        .map(|u| pb::PluginUse {
            name: u.name.clone(),
            version: u.version,
            sha256: u.sha256.clone(),
        })
        .collect()
}

fn plugin_changed(plugin: &str, what: String) -> QueryError {
    QueryError::PluginChanged {
        plugin: plugin.to_string(),
        message: format!(
            "{what}; rerun the query (a continuation never switches plugin versions, in either consistency)"
        ),
    }
}

/// Before a continuation is planned: a plugin it recorded that was
/// removed or replaced since (the plan would fail on a removed one, or
/// silently call the new version).
pub(crate) fn check_installed(
    recorded: &[PluginUse],
    plugins: &PluginRegistry,
) -> Result<(), QueryError> {
    let current: Vec<PluginUse> = recorded
        .iter()
        .filter_map(|r| plugins.get(&r.name).map(|v| used(&v)))
        .collect();
    match change(recorded, &current) {
        Some(error) => Err(error),
        None => Ok(()),
    }
}

/// How the versions a continuation's plan calls (`current`) differ from
/// those its first page recorded, as the error that refuses it; `None`
/// when they are the same.
pub(crate) fn change(recorded: &[PluginUse], current: &[PluginUse]) -> Option<QueryError> {
    for r in recorded {
        match current.iter().find(|c| c.name == r.name) {
            None => {
                return Some(plugin_changed(
                    &r.name,
                    format!(
                        "plugin {} was removed since the first page, which ran its version {}",
                        r.name, r.version
                    ),
                ));
            }
            Some(c) if c.version != r.version || c.sha256 != r.sha256 => {
                return Some(plugin_changed(
                    &r.name,
                    format!(
                        "plugin {} was replaced since the first page (the query ran version {}, now version {})",
                        r.name, r.version, c.version
                    ),
                ));
            }
            Some(_) => {}
        }
    }
    current
        .iter()
        .find(|c| !recorded.iter().any(|r| r.name == c.name))
        .map(|c| {
            plugin_changed(
                &c.name,
                format!(
                    "the cursor does not record which version of plugin {} the query ran (now version {})",
                    c.name, c.version
                ),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(name: &str, version: u32, sha256: &str) -> PluginUse {
        PluginUse {
            name: name.into(),
            version,
            sha256: sha256.into(),
        }
    }

    fn refused(error: Option<QueryError>) -> (String, String) {
        match error {
            Some(QueryError::PluginChanged { plugin, message }) => (plugin, message),
            other => panic!("expected PluginChanged, got {other:?}"),
        }
    }

    #[test]
    fn a_continuation_runs_only_the_versions_its_first_page_ran() {
        let json = at("json", 2, "aa");
        let stats = at("stats", 1, "bb");
        let first = vec![json.clone(), stats.clone()];
        assert!(change(&first, &first).is_none());
        assert!(change(&[], &[]).is_none());

        let (plugin, message) = refused(change(&first, &[at("json", 3, "cc"), stats.clone()]));
        assert_eq!(plugin, "json");
        assert!(
            message.contains("replaced") && message.contains("version 2, now version 3"),
            "{message}"
        );
        // Removed and installed again: the number restarts, the hash differs.
        let (plugin, _) = refused(change(&first, &[at("json", 2, "dd"), stats.clone()]));
        assert_eq!(plugin, "json");
        let (plugin, message) = refused(change(&first, std::slice::from_ref(&json)));
        assert_eq!(plugin, "stats");
        assert!(message.contains("removed"), "{message}");
        let (plugin, message) = refused(change(std::slice::from_ref(&json), &first));
        assert_eq!(plugin, "stats");
        assert!(message.contains("does not record"), "{message}");
    }

    #[test]
    fn versions_round_trip_through_the_cursor() {
        let uses = vec![at("json", 2, "aa"), at("stats", 7, "bb")];
        let cursor = pb::Cursor {
            plugins: to_cursor(&uses),
            ..Default::default()
        };
        assert_eq!(recorded(&cursor), uses);
    }
}
