//! EXPLAIN: the plan as text lines.

use super::{Plan, Shape};

impl Plan {
    /// The plan as text lines, for EXPLAIN.
    pub fn explain_lines(&self, fragments: &str) -> Vec<String> {
        let mut lines = vec![format!("table: {}", self.table)];
        let ranges = if self.ranges.is_all() {
            "all keys".to_string()
        } else if self.ranges.0.is_empty() {
            "none (the filter is never true)".to_string()
        } else {
            self.ranges
                .0
                .iter()
                .map(|r| format!("{:?}..{:?}", r.start, r.end))
                .collect::<Vec<_>>()
                .join(", ")
        };
        lines.push(format!("key ranges: {ranges}"));
        lines.push(format!("fragments: {fragments}"));
        lines.push(format!(
            "pushed down: {}",
            if self.pushed.is_empty() {
                "nothing".to_string()
            } else {
                self.pushed.join(" AND ")
            }
        ));
        if let Some(join) = &self.join {
            lines.push(format!(
                "join: {} {} ON {}.key = {} (one point read per record of {}, batched per page)",
                if join.outer { "LEFT JOIN" } else { "JOIN" },
                join.table,
                join.table,
                join.key,
                self.table
            ));
            lines.push(format!(
                "filter per record before the join: {}",
                join.before
                    .as_ref()
                    .map_or("none".to_string(), ToString::to_string)
            ));
        }
        lines.push(format!(
            "filter per record: {}",
            self.filter
                .as_ref()
                .map_or("none".to_string(), ToString::to_string)
        ));
        match &self.shape {
            Shape::Rows { projection } => {
                let items: Vec<String> = projection.iter().map(ToString::to_string).collect();
                lines.push(format!("project: {}", items.join(", ")));
            }
            Shape::Aggregate {
                group_by,
                aggregates,
                having,
                ..
            } => {
                let groups: Vec<String> = group_by.iter().map(ToString::to_string).collect();
                let aggs: Vec<String> = aggregates.iter().map(ToString::to_string).collect();
                lines.push(format!(
                    "aggregate: {} (partial per partition, merged)",
                    aggs.join(", ")
                ));
                if !groups.is_empty() {
                    lines.push(format!("group by: {}", groups.join(", ")));
                }
                if let Some(having) = having {
                    lines.push(format!("having: {having}"));
                }
            }
        }
        if !self.order_by.is_empty() {
            let keys: Vec<String> = self
                .order_by
                .iter()
                .map(|k| format!("{}{}", k.expr, if k.descending { " DESC" } else { "" }))
                .collect();
            lines.push(format!("order by: {}", keys.join(", ")));
        }
        if self.limit.is_some() || self.offset > 0 {
            lines.push(format!(
                "limit: {}, offset: {}",
                self.limit.map_or("none".to_string(), |l| l.to_string()),
                self.offset
            ));
        }
        let plugins = self.plugin_calls();
        lines.push(format!(
            "plugin calls: {}",
            if plugins.is_empty() {
                "none".to_string()
            } else {
                plugins.join(", ")
            }
        ));
        lines
    }
}
