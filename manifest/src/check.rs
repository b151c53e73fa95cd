//! The checks [`Bundle::open`] runs on a manifest: its version, names ([`check_name`]), bounds on its size,
//! the planner's settings, objectives and limits, paths that stay inside the bundle and exist, and the graph (one
//! entry task, edges between declared tasks, no cycles, one task per slot).

use std::collections::{HashMap, HashSet};
use std::path::Path;

use jig_wire::DType;

use crate::bundle::{Bundle, is_inside};
use crate::error::InvalidName;
use crate::manifest::MANIFEST_VERSION;
use crate::planner::{IPA_VARIANTS, IpaSettings, PLANNERS};

/// The most tasks an app declares.
pub const MAX_TASKS: usize = 256;
/// The most edges an app declares.
pub const MAX_EDGES: usize = 1024;
/// The most variants an app declares, all slots together.
pub const MAX_VARIANTS: usize = 1024;

impl Bundle {
    /// The checks [`Bundle::open`] runs, in order; the first problem found is the error, naming its field.
    pub(crate) fn check(&self) -> std::result::Result<(), String> {
        let m = &self.manifest;
        if m.manifest_version != MANIFEST_VERSION {
            return Err(format!(
                "`manifest_version = {}`: this jig reads version {MANIFEST_VERSION}; upgrade jig, or write the \
                 manifest for version {MANIFEST_VERSION}",
                m.manifest_version
            ));
        }
        check_name("app name", &m.name).map_err(|e| e.0)?;
        // A graph is planned as a whole: a bound keeps one manifest from taking the gateway's memory.
        for (what, count, max) in [
            ("tasks", m.tasks.len(), MAX_TASKS),
            ("edges", m.edges.len(), MAX_EDGES),
            ("variants", m.variants.len(), MAX_VARIANTS),
        ] {
            if count > max {
                return Err(format!("{count} {what}: an app has at most {max}; split it into apps"));
            }
        }
        if let Some(planner) = &m.planner
            && !PLANNERS.contains(&planner.as_str())
        {
            return Err(format!("`planner = \"{planner}\"`: jig's planners are {}", PLANNERS.join(", ")));
        }
        let compass = m.planner.as_deref() == Some("compass");
        if compass && m.classes.is_empty() {
            return Err("`planner = \"compass\"` plans query classes: declare them in `classes = [{ name, \
                        latency_ms, accuracy, share }, …]`"
                .into());
        }
        if !compass && !m.classes.is_empty() {
            return Err("`classes` are Compass's query classes: add `planner = \"compass\"`, or remove them".into());
        }
        if let Some(ipa) = &m.ipa {
            if m.planner.as_deref() != Some("ipa") {
                return Err("`[ipa]` sets IPA's planner: add `planner = \"ipa\"`, or remove it".into());
            }
            for (key, value) in
                [("alpha", ipa.alpha), ("beta", ipa.beta), ("delta", ipa.delta), ("threshold_rps", ipa.threshold_rps)]
            {
                if let Some(v) = value
                    && !(v.is_finite() && v >= 0.0)
                {
                    return Err(format!("`ipa.{key}` is {v}; give a non-negative number"));
                }
            }
            if let Some(v) = &ipa.variants
                && !IPA_VARIANTS.contains(&v.as_str())
            {
                return Err(format!("`ipa.variants = \"{v}\"`: say one of {}", IPA_VARIANTS.join(", ")));
            }
            if let Some(v) = ipa.interval_s
                && !(1.0..=IpaSettings::MAX_INTERVAL_S).contains(&v)
            {
                return Err(format!(
                    "`ipa.interval_s` is {v}; give IPA's adaptation interval in seconds, 1 to {}",
                    IpaSettings::MAX_INTERVAL_S
                ));
            }
        }
        if let Some(tensors) = &m.tensors {
            for (key, t) in [("input", &tensors.input), ("output", &tensors.output)] {
                if t.name.is_empty() {
                    return Err(format!("`tensors.{key}` has no name; give the name v2 clients call it by"));
                }
                if DType::from_oip_name(&t.datatype).is_none() {
                    return Err(format!(
                        "`tensors.{key}.datatype = \"{}\"`: say one of {}",
                        t.datatype,
                        DType::OIP_NAMES.join(", ")
                    ));
                }
                if let Some(d) = t.shape.iter().find(|&&d| d < -1) {
                    return Err(format!("`tensors.{key}.shape` has {d}: give sizes, or -1 where any size goes"));
                }
            }
        }
        let mut names = HashSet::new();
        for c in &m.classes {
            check_name("class name", &c.name).map_err(|e| e.0)?;
            if !names.insert(c.name.as_str()) {
                return Err(format!("class `{}` is declared twice", c.name));
            }
            if c.latency_ms == 0 || !(c.accuracy > 0.0 && c.accuracy <= 1.0) || !(c.share.is_finite() && c.share > 0.0)
            {
                return Err(format!(
                    "class `{}`: give a positive `latency_ms`, an `accuracy` in (0, 1] and a positive `share`",
                    c.name
                ));
            }
        }
        if let Some(slo) = &m.slo {
            if slo.latency_ms == 0 {
                return Err("`slo.latency_ms` must be positive".into());
            }
            if let Some(a) = slo.accuracy
                && !(a > 0.0 && a <= 1.0)
            {
                return Err(format!("`slo.accuracy` is {a}; give a fraction of the best accuracy in (0, 1]"));
            }
        }
        if m.limits.max_inflight == 0 {
            return Err("`limits.max_inflight` must be positive".into());
        }
        if !(m.demand.rps.is_finite() && m.demand.rps >= 0.0) {
            return Err(format!("`demand.rps` is {}; give a non-negative rate", m.demand.rps));
        }

        let mut tasks = HashSet::new();
        for t in &m.tasks {
            check_name("task name", &t.name).map_err(|e| e.0)?;
            if !tasks.insert(t.name.as_str()) {
                return Err(format!("task `{}` is declared twice", t.name));
            }
            if let Some(workdir) = t.build.as_ref().and_then(|b| b.workdir.as_ref())
                && !is_inside(workdir)
            {
                return Err(format!(
                    "task `{}`: `build.workdir` is {}, which leaves the bundle; give a directory relative to it",
                    t.name,
                    workdir.display()
                ));
            }
            self.check_file(&format!("task `{}`: `glue`", t.name), &t.glue).map_err(|e| match &t.build {
                Some(_) if !self.dir.join(&t.glue).exists() => format!("{e}: run `jig build` (its `build` makes it)"),
                _ => e,
            })?;
            for (key, path) in &t.config_files {
                if t.config.contains_key(key) {
                    return Err(format!("task `{}`: `{key}` is in both `config` and `config_files`", t.name));
                }
                self.check_file(&format!("task `{}`: `config_files.{key}`", t.name), path)?;
            }
            let l = &t.limits;
            if l.memory_mib == Some(0) || l.timeout_ms == Some(0) || l.concurrency == 0 {
                return Err(format!("task `{}`: `limits` must all be positive", t.name));
            }
            if let Some(ms) = t.cpu_ms.filter(|ms| !(ms.is_finite() && *ms >= 0.0)) {
                return Err(format!(
                    "task `{}`: `cpu_ms` is {ms}; give the milliseconds of CPU an invocation costs",
                    t.name
                ));
            }
        }
        let mut next: HashMap<&str, Vec<&str>> = HashMap::new();
        for e in &m.edges {
            let Some((from, port)) = e.source().filter(|(t, p)| !t.is_empty() && !p.is_empty()) else {
                return Err(format!("edge from `{}`: write `from = \"TASK.PORT\"`", e.from));
            };
            for task in [from, e.to.as_str()] {
                if !tasks.contains(task) {
                    return Err(format!("edge `{}` → `{}` names task `{task}`, which is not declared", e.from, e.to));
                }
            }
            if port.contains('.') {
                return Err(format!("edge from `{}`: a port name may not contain `.`", e.from));
            }
            next.entry(from).or_default().push(&e.to);
        }
        if !m.tasks.is_empty() {
            let targets: HashSet<&str> = m.edges.iter().map(|e| e.to.as_str()).collect();
            let roots: Vec<&str> = m.tasks.iter().map(|t| t.name.as_str()).filter(|t| !targets.contains(t)).collect();
            match roots.as_slice() {
                [_] => {}
                [] => return Err("every task has an incoming edge; an app needs one entry task".into()),
                many => {
                    return Err(format!(
                        "tasks {} have no incoming edge; an app has exactly one entry task",
                        many.iter().map(|t| format!("`{t}`")).collect::<Vec<_>>().join(", ")
                    ));
                }
            }
            if let Some(task) = find_cycle(&next) {
                return Err(format!("the edges form a cycle through task `{task}`; the graph must be acyclic"));
            }
        }

        let mut seen = HashSet::new();
        for v in &m.variants {
            if !seen.insert((&v.slot, &v.name)) {
                return Err(format!("variant `{}` of slot `{}` is declared twice", v.name, v.slot));
            }
            if v.name.contains(',') || v.slot.contains(',') {
                return Err(format!("slot and variant names may not contain commas (`{}`/`{}`)", v.slot, v.name));
            }
            self.check_file(&format!("variant `{}` of slot `{}`: `model`", v.name, v.slot), &v.model)?;
            if let Some(task) = v.factors.keys().find(|t| !tasks.contains(t.as_str())) {
                return Err(format!(
                    "variant `{}` of slot `{}`: `factors` names task `{task}`, which is not declared",
                    v.name, v.slot
                ));
            }
        }
        let mut claimed = HashMap::new();
        for t in &m.tasks {
            let Some(slot) = &t.slot else { continue };
            if !m.variants.iter().any(|v| &v.slot == slot) {
                return Err(format!("task `{}`: `slot` is `{slot}`, which no [[variants]] entry fills", t.name));
            }
            if let Some(other) = claimed.insert(slot, &t.name) {
                return Err(format!(
                    "tasks `{other}` and `{}` both name slot `{slot}`; a slot belongs to one task",
                    t.name
                ));
            }
        }
        Ok(())
    }

    /// `path` is relative, stays inside the bundle and names a file.
    fn check_file(&self, field: &str, path: &Path) -> std::result::Result<(), String> {
        if !is_inside(path) {
            return Err(format!(
                "{field} is {}, which leaves the bundle; give a path relative to the bundle directory, without `..`",
                path.display()
            ));
        }
        if !self.dir.join(path).is_file() {
            return Err(format!("{field} names {}, which does not exist in the bundle", path.display()));
        }
        Ok(())
    }
}

/// Letters, digits, `-` and `_`, 1 to 64 of them: safe in URLs, file names and metric labels.
pub fn check_name(what: &str, name: &str) -> std::result::Result<(), InvalidName> {
    let ok =
        !name.is_empty() && name.len() <= 64 && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok { Ok(()) } else { Err(InvalidName(format!("{what} `{name}`: use 1 to 64 letters, digits, `-` or `_`"))) }
}

/// A task on a cycle of `next`, if any.
fn find_cycle<'a>(next: &HashMap<&'a str, Vec<&'a str>>) -> Option<&'a str> {
    // Depth-first search; 1 = on the current path, 2 = done.
    fn visit<'a>(
        task: &'a str,
        next: &HashMap<&'a str, Vec<&'a str>>,
        state: &mut HashMap<&'a str, u8>,
    ) -> Option<&'a str> {
        match state.get(task) {
            Some(1) => return Some(task),
            Some(_) => return None,
            None => {}
        }
        state.insert(task, 1);
        for &to in next.get(task).into_iter().flatten() {
            if let Some(t) = visit(to, next, state) {
                return Some(t);
            }
        }
        state.insert(task, 2);
        None
    }
    let mut state = HashMap::new();
    let mut starts: Vec<&str> = next.keys().copied().collect();
    starts.sort_unstable();
    starts.into_iter().find_map(|t| visit(t, next, &mut state))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{TWO_TASKS, write};

    #[test]
    fn the_manifest_version_is_1_by_default_and_others_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), TWO_TASKS);
        assert_eq!(Bundle::open(dir.path()).unwrap().manifest.manifest_version, 1);
        write(dir.path(), &format!("manifest_version = 1\n{TWO_TASKS}"));
        assert!(Bundle::open(dir.path()).is_ok());
        write(dir.path(), &format!("manifest_version = 2\n{TWO_TASKS}"));
        let error = Bundle::open(dir.path()).unwrap_err().0;
        assert!(error.contains("jig.toml") && error.contains("reads version 1"), "{error}");
    }

    #[test]
    fn query_classes_belong_to_compass_and_are_checked_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let class = |name: &str, latency: u64, accuracy: f64| {
            format!("{{ name = \"{name}\", latency_ms = {latency}, accuracy = {accuracy}, share = 1 }}")
        };
        let open = |planner: &str, classes: &[String]| {
            write(dir.path(), &format!("{planner}classes = [{}]\n{TWO_TASKS}", classes.join(", ")));
            Bundle::open(dir.path()).map(|b| b.manifest.classes.len()).map_err(|e| e.0)
        };
        let compass = "planner = \"compass\"\n";
        assert_eq!(open(compass, &[class("fast", 60, 0.5), class("best", 2000, 1.0)]), Ok(2));
        for (planner, classes, says) in [
            (compass, vec![], "declare them in `classes"),
            ("", vec![class("fast", 60, 0.5)], "add `planner = \"compass\"`"),
            (compass, vec![class("fast", 60, 0.5), class("fast", 70, 0.5)], "class `fast` is declared twice"),
            (compass, vec![class("fast", 0, 0.5)], "class `fast`: give a positive `latency_ms`"),
            (compass, vec![class("fast", 60, 1.5)], "an `accuracy` in (0, 1]"),
            (compass, vec![class("no way", 60, 0.5)], "class name"),
        ] {
            let error = open(planner, &classes).unwrap_err();
            assert!(error.contains("jig.toml") && error.contains(says), "{error}");
        }
    }

    #[test]
    fn ipa_settings_belong_to_ipa_and_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let open = |planner: &str, ipa: &str| {
            write(dir.path(), &format!("{planner}{TWO_TASKS}\n[ipa]\n{ipa}\n"));
            Bundle::open(dir.path()).map(|b| b.manifest.ipa.unwrap_or_default()).map_err(|e| e.0)
        };
        let ipa = "planner = \"ipa\"\n";
        let read = open(ipa, "alpha = 0.1\nvariants = \"lightest\"\nreplicas = 2").unwrap();
        assert_eq!(
            (read.alpha, read.variants.as_deref(), read.replicas, read.beta),
            (Some(0.1), Some("lightest"), Some(2), None)
        );
        assert_eq!(read.interval(), std::time::Duration::from_secs(10), "IPA's adaptation interval by default");
        assert_eq!(open(ipa, "interval_s = 2.5").unwrap().interval(), std::time::Duration::from_millis(2500));
        for (planner, table, says) in [
            ("", "alpha = 1", "add `planner = \"ipa\"`"),
            (ipa, "variants = \"light\"", "`ipa.variants = \"light\"`: say one of switch, lightest, heaviest"),
            (ipa, "beta = -1", "`ipa.beta` is -1"),
            (ipa, "gamma = 1", "unknown field `gamma`"),
            (ipa, "interval_s = 0.5", "`ipa.interval_s` is 0.5; give IPA's adaptation interval in seconds, 1 to 120"),
        ] {
            let error = open(planner, table).unwrap_err();
            assert!(error.contains("jig.toml") && error.contains(says), "{error}");
        }
    }

    #[test]
    fn tensors_declare_an_app_as_a_v2_model_and_bad_ones_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let open = |tensors: &str| {
            write(dir.path(), &format!("{TWO_TASKS}\n[tensors]\n{tensors}\n"));
            Bundle::open(dir.path()).map(|b| b.manifest.tensors.unwrap()).map_err(|e| e.0)
        };
        let good = "input = { name = \"x\", datatype = \"FP32\", shape = [-1, 4] }\n\
                    output = { name = \"y\", datatype = \"INT64\" }";
        let read = open(good).unwrap();
        assert_eq!((read.input.shape, read.output.datatype.as_str()), (vec![-1, 4], "INT64"));
        for (tensors, says) in [
            (good.replace("FP32", "F32"), "`tensors.input.datatype = \"F32\"`: say one of"),
            (good.replace("[-1, 4]", "[-2]"), "`tensors.input.shape` has -2"),
            (good.replace("\"y\"", "\"\""), "`tensors.output` has no name"),
            ("input = { name = \"x\", datatype = \"FP32\" }".into(), "missing field `output`"),
        ] {
            let error = open(&tensors).unwrap_err();
            assert!(error.contains(says), "{error}");
        }
    }

    #[test]
    fn a_manifest_of_too_many_tasks_is_refused_by_count_without_server_paths() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("g.wasm"), b"").unwrap();
        let tasks: String =
            (0..=MAX_TASKS).map(|i| format!("[[tasks]]\nname = \"t{i}\"\nglue = \"g.wasm\"\n")).collect();
        let error = Bundle::with_manifest(dir.path(), &format!("name = \"big\"\n{tasks}")).unwrap_err().to_string();
        assert!(error.contains("257 tasks") && error.contains("at most 256"), "{error}");
        assert!(!error.contains(&*dir.path().to_string_lossy()), "{error}");
        let bad = Bundle::with_manifest(dir.path(), "name = ").unwrap_err().to_string();
        assert!(bad.starts_with("invalid bundle: jig.toml") || bad.contains("jig.toml is not"), "{bad}");
        assert!(!bad.contains(&*dir.path().to_string_lossy()), "{bad}");
    }

    #[test]
    fn graph_errors_name_the_tasks() {
        let cases = [
            (TWO_TASKS.replace("to = \"b\"", "to = \"c\""), "names task `c`, which is not declared"),
            (TWO_TASKS.replace("a.out", "aout"), "write `from = \"TASK.PORT\"`"),
            (TWO_TASKS.to_string() + "[[edges]]\nfrom = \"b.back\"\nto = \"a\"\n", "every task has an incoming edge"),
            (TWO_TASKS.replace("name = \"b\"", "name = \"a\""), "task `a` is declared twice"),
            (TWO_TASKS.replace("name = \"app\"", "name = \"my app\""), "app name `my app`"),
            (TWO_TASKS.replace("glue/b.wasm", "/etc/passwd"), "leaves the bundle"),
            (TWO_TASKS.to_string() + "[slo]\nlatency_ms = 0\n", "`slo.latency_ms` must be positive"),
        ];
        for (manifest, message) in cases {
            let dir = tempfile::tempdir().unwrap();
            write(dir.path(), &manifest);
            let error = Bundle::open(dir.path()).unwrap_err().0;
            assert!(error.contains(message) && error.contains("jig.toml"), "{message}: {error}");
        }
    }
}
