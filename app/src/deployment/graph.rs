//! The app's graph as the planner sees it: only the tasks that run a model (name a `slot`), joined where
//! glue-only tasks (crop, select) lead from one to the other. The problem, the planned factors and the running
//! app's observed factors all read the graph through these two functions, so that they agree on its edges.

use std::collections::{BTreeMap, HashMap};

use jig_manifest::Bundle;
use jig_planner::spec::EdgeSpec;

/// The model tasks of a bundle: (task, slot) for every task that names a slot.
pub(super) fn model_tasks(bundle: &Bundle) -> Vec<(&str, &str)> {
    bundle.manifest.tasks.iter().filter_map(|t| Some((t.name.as_str(), t.slot.as_deref()?))).collect()
}

/// Edges between model tasks: `a → b` when a path of glue edges leads from `a` to `b` through tasks without a
/// slot only.
pub(crate) fn model_edges(bundle: &Bundle) -> Vec<EdgeSpec> {
    let m = &bundle.manifest;
    let slotted: HashMap<&str, bool> = m.tasks.iter().map(|t| (t.name.as_str(), t.slot.is_some())).collect();
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for e in &m.edges {
        if let Some((from, _)) = e.source() {
            next.entry(from).or_default().push(&e.to);
        }
    }
    let mut edges = Vec::new();
    for t in m.tasks.iter().filter(|t| t.slot.is_some()) {
        let mut stack: Vec<&str> = next.get(t.name.as_str()).cloned().unwrap_or_default();
        let mut seen = std::collections::HashSet::new();
        while let Some(task) = stack.pop() {
            if !seen.insert(task) {
                continue;
            }
            if slotted.get(task).copied().unwrap_or(false) {
                edges.push(EdgeSpec { from: t.name.clone(), to: task.into() });
            } else {
                stack.extend(next.get(task).cloned().unwrap_or_default());
            }
        }
    }
    edges
}
