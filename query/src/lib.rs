//! SQL planning for ebb: SQL text to a validated plan. The planner lands with the SQL issue.
