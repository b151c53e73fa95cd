//! Slots no task names: glue calls them, so the planner never sees them. Each gets a default instance pinned to
//! a core of its own, taken out of the capacity before the tasks are planned on the rest, so that a deployment
//! holds no more cores than it may use; where no core is left, it runs unpinned and the deployment says so.

use jig_api::PlannedInstances;
use jig_manifest::Bundle;

use super::capacity::Capacity;
use super::deploy::fallback;
use super::graph::model_tasks;

/// The slots of `bundle`'s variants that no task names, in the order they are declared.
pub(super) fn untasked_slots(bundle: &Bundle) -> Vec<&str> {
    let tasked: Vec<&str> = model_tasks(bundle).into_iter().map(|(_, slot)| slot).collect();
    let mut slots: Vec<&str> = Vec::new();
    for v in &bundle.manifest.variants {
        if !tasked.contains(&v.slot.as_str()) && !slots.contains(&v.slot.as_str()) {
            slots.push(&v.slot);
        }
    }
    slots
}

/// The default instance ([`fallback`]'s variant) of each slot no task names, in [`untasked_slots`]' order, pinned
/// to a core of its own on `cpu:1`, and what `capacity` has left once they hold them; as many as `capacity` has
/// cores for. Slots whose task the plan gives no instance (no demand reaches it) are not among them: the plan
/// may give their task instances, and a core held for each up front would be taken from the tasks the demand
/// does reach; their default instances hold none and serve only glue's stray calls.
pub(super) fn pin_untasked_slots(bundle: &Bundle, capacity: &Capacity) -> (Capacity, Vec<PlannedInstances>) {
    let untasked = untasked_slots(bundle);
    let mut rest = capacity.clone();
    let mut pinned = Vec::new();
    // `fallback` keeps the variants' order of slots, as `untasked_slots` does.
    for mut instance in fallback(bundle, capacity, "").instances.into_iter().filter(|i| untasked.contains(&&*i.slot)) {
        let Some(place) = rest.take_core() else { break };
        instance.segment = "cpu:1".into();
        instance.places = vec![place];
        pinned.push(instance);
    }
    (rest, pinned)
}

/// What a deployment says of the slots no task names whose default instances run unpinned, holding no core.
pub(super) fn unpinned_note(slots: &[&str], why: &str) -> String {
    let named: Vec<String> = slots.iter().map(|s| format!("`{s}`")).collect();
    let (slot, runs) = if slots.len() == 1 { ("slot", "runs") } else { ("slots", "run") };
    format!(
        "; {slot} {}, which no task names, {runs} unpinned on the planned instances' cores ({why}): the plan counts \
         {} with the CPU a request costs outside the instances",
        named.join(", "),
        if slots.len() == 1 { "its time" } else { "their time" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deployment::{Capacity, Deployment, Observations, defaults_unobserved, plan, plan_for_deploy};
    use std::path::Path;

    /// Tasks `det` → `rec` → `speak`, where `speak`'s glue calls slot `voice`, which no task names; `det` and
    /// `rec` profiled on `cpu:1` (50 req/s) and `cpu:2` (80 req/s), the demand `rps`.
    fn untasked_voice(dir: &Path, rps: f64) -> Bundle {
        let manifest = format!(
            "name = \"signs\"\n[slo]\nlatency_ms = 400\n[demand]\nrps = {rps}\n\
             [[tasks]]\nname = \"det\"\nglue = \"g.wasm\"\nslot = \"det\"\n\
             [[tasks]]\nname = \"rec\"\nglue = \"g.wasm\"\nslot = \"rec\"\n\
             [[tasks]]\nname = \"speak\"\nglue = \"g.wasm\"\n\
             [[edges]]\nfrom = \"det.boxes\"\nto = \"rec\"\n\
             [[edges]]\nfrom = \"rec.speech\"\nto = \"speak\"\n\
             [[variants]]\nslot = \"det\"\nname = \"det\"\nmodel = \"m.onnx\"\n\
             [[variants]]\nslot = \"rec\"\nname = \"rec\"\nmodel = \"m.onnx\"\n\
             [[variants]]\nslot = \"voice\"\nname = \"voice-int8\"\nmodel = \"m.onnx\"\naccuracy = 0.9\n\
             [[variants]]\nslot = \"voice\"\nname = \"voice\"\nmodel = \"m.onnx\"\naccuracy = 0.95\n"
        );
        std::fs::write(dir.join("jig.toml"), manifest).unwrap();
        std::fs::write(dir.join("g.wasm"), b"").unwrap();
        std::fs::write(dir.join("m.onnx"), b"").unwrap();
        let mut csv = String::from("slot,variant,segment,batch,p50_ms,p95_ms,throughput_rps,device\n");
        for slot in ["det", "rec", "voice"] {
            csv += &format!("{slot},{slot},cpu:1,1,20,20,50,test\n{slot},{slot},cpu:2,1,12,12,80,test\n");
        }
        std::fs::write(dir.join("profiles.csv"), csv).unwrap();
        Bundle::open(dir).unwrap()
    }

    /// The voice's default instance on `cpu:1` as observed over `requests`: `lines` a request, `mean_ms` a line on
    /// average (profiled at 20 ms).
    fn voice_seen(mean_ms: f64, lines: f64, requests: u64) -> jig_api::ObservedLatency {
        jig_api::ObservedLatency {
            slot: "voice".into(),
            variant: "voice".into(),
            segment: "cpu:1".into(),
            batch: 1,
            batches: (lines * requests as f64) as u64,
            p95_ms: mean_ms * 1.5,
            profiled_ms: Some(20.0),
            p50_ms: mean_ms,
            profiled_p50_ms: Some(20.0),
            mean_ms,
            profiled_mean_ms: Some(20.0),
            cpu_mean_ms: None,
            busy_ms_per_request: Some(mean_ms * lines),
            requests,
            host_cpu_ms: None,
        }
    }

    /// The cores each slot's instances hold.
    fn cores_of(d: &Deployment, slot: &str) -> Vec<u32> {
        d.instances
            .iter()
            .filter(|i| i.slot == slot)
            .flat_map(|i| i.places.iter().flat_map(|p| p.cores.clone()))
            .collect()
    }

    #[test]
    fn a_slot_no_task_names_holds_a_core_of_its_own_taken_before_planning() {
        // Found serving the sign reader: the voice ran unpinned on the two cores det and rec were planned on,
        // and `jig deploy` promised 26.7 req/s where 12.1 were served.
        let dir = tempfile::tempdir().unwrap();
        let bundle = untasked_voice(dir.path(), 30.0);
        let d = plan_for_deploy(&bundle, &[], &Capacity::cpu_only(3), &Observations::default()).unwrap();
        assert!(d.source.starts_with("planned") && !d.source.contains("unpinned"), "{}", d.source);
        let voice: Vec<&PlannedInstances> = d.instances.iter().filter(|i| i.slot == "voice").collect();
        assert_eq!(voice.len(), 1, "{:?}", d.instances);
        assert_eq!((voice[0].variant.as_str(), voice[0].segment.as_str(), voice[0].count), ("voice", "cpu:1", 1));
        let held = cores_of(&d, "voice");
        assert_eq!(held.len(), 1, "pinned to one core: {voice:?}");
        let planned: Vec<u32> = ["det", "rec"].iter().flat_map(|slot| cores_of(&d, slot)).collect();
        assert!(!planned.is_empty() && !planned.contains(&held[0]), "{:?}", d.instances);
        assert!(planned.len() + held.len() <= 3, "more cores than the gateway has: {:?}", d.instances);
        // Another app finds the voice's core held.
        assert_eq!(Capacity::cpu_only(3).without(&d).cores(), 3 - planned.len() as u32 - 1);
    }

    #[test]
    fn a_demand_beyond_the_cores_left_by_a_slot_no_task_names_is_planned_at_what_they_serve() {
        // 120 req/s is more than det and rec serve on the 3 cores the voice leaves (50 req/s at most: one of them
        // on cpu:1); on all 4 they would be planned for 100.
        let dir = tempfile::tempdir().unwrap();
        let bundle = untasked_voice(dir.path(), 120.0);
        let d = plan(&bundle, &[], &Capacity::cpu_only(4), &Observations::default());
        assert!(d.source.contains("the most this machine serves"), "{}", d.source);
        let voice = cores_of(&d, "voice");
        let planned: Vec<u32> = ["det", "rec"].iter().flat_map(|slot| cores_of(&d, slot)).collect();
        assert_eq!(voice.len(), 1, "{:?}", d.instances);
        assert!(planned.len() <= 3 && !planned.contains(&voice[0]), "{:?}", d.instances);
        // What the deployment says it serves is what det and rec serve on their three cores: no more than one
        // of them on cpu:2 and the other on cpu:1.
        let (demand, capacity) = (d.demand_rps.unwrap(), d.capacity_rps.unwrap());
        assert!(demand < 120.0 && capacity <= 50.0 + 1e-6 && demand <= capacity + 1e-6, "{demand} {capacity}");
    }

    #[test]
    fn once_observed_a_default_instance_caps_what_the_deployment_says_it_serves() {
        // The voice's one instance runs one line after another: observed at 80 ms a line on average, one line a
        // request, it keeps up with 12.5 req/s, whatever det and rec would serve on the cores.
        let dir = tempfile::tempdir().unwrap();
        let bundle = untasked_voice(dir.path(), 5.0);
        let uncapped = plan(&bundle, &[], &Capacity::cpu_only(4), &Observations::default());
        assert!(uncapped.capacity_rps.unwrap() > 20.0, "{uncapped:?}");
        let observed = |lines: f64, requests: u64| Observations {
            latencies: vec![voice_seen(80.0, lines, requests)],
            answered: requests,
            ..Observations::default()
        };
        let capped = plan(&bundle, &[], &Capacity::cpu_only(4), &observed(1.0, 100));
        assert!((capped.capacity_rps.unwrap() - 12.5).abs() < 1e-9, "{capped:?}");
        // Two lines a request: half as many requests.
        let two = plan(&bundle, &[], &Capacity::cpu_only(4), &observed(2.0, 100));
        assert!((two.capacity_rps.unwrap() - 6.25).abs() < 1e-9, "{two:?}");
        // Too few requests yet: no cap.
        let early = plan(&bundle, &[], &Capacity::cpu_only(4), &observed(1.0, 10));
        assert!(early.capacity_rps.unwrap() > 20.0, "{early:?}");
    }

    #[test]
    fn an_unpinned_default_instance_that_caps_the_app_gets_one_per_core_and_keeps_them_until_far_fewer_serve() {
        // Two cores: det and rec hold both, the voice runs unpinned beside them. Observed at 80 ms a line, one
        // line a request, one voice instance would cap the app at 12.5 req/s where det and rec serve more.
        let dir = tempfile::tempdir().unwrap();
        let bundle = untasked_voice(dir.path(), 30.0);
        let observed = |mean_ms: f64, current: Option<Deployment>| Observations {
            latencies: vec![voice_seen(mean_ms, 1.0, 100)],
            answered: 100,
            current,
            ..Observations::default()
        };
        let voice = |d: &Deployment| d.instances.iter().find(|i| i.slot == "voice").cloned().unwrap();
        let first = plan(&bundle, &[], &Capacity::cpu_only(2), &Observations::default());
        assert_eq!((voice(&first).count, voice(&first).segment.as_str()), (1, "cpu:1"), "{first:?}");
        assert!(voice(&first).places.is_empty(), "{first:?}");
        // Sized without its rate, and dropping only what is past its deadline, until it is observed.
        assert_eq!(voice(&first).drop_budget_ms, 0.0);
        assert!(defaults_unobserved(&first, &Observations::default()));
        let early = Observations { latencies: vec![voice_seen(80.0, 1.0, 10)], ..Observations::default() };
        assert!(defaults_unobserved(&first, &early), "too few requests yet");
        assert!(!defaults_unobserved(&first, &observed(80.0, None)));

        let slow = plan(&bundle, &[], &Capacity::cpu_only(2), &observed(80.0, Some(first.clone())));
        assert_eq!(voice(&slow).count, 2, "one per core: {slow:?}");
        assert!(voice(&slow).places.is_empty(), "{slow:?}");
        assert!((slow.capacity_rps.unwrap() - 25.0).abs() < 1e-9, "two instances of 12.5 req/s: {slow:?}");
        assert_eq!(voice(&slow).drop_budget_ms, 80.0, "a line with less left than its median batch is dropped");

        // Instances are sized to be busy 80% of the time at most. At 15 ms a line one instance keeps up with 66.7
        // req/s, 53.3 at 80%: enough for the 50 det and rec serve, but not for 25% more, so the two running keep
        // running; a deployment running one keeps one.
        let kept = plan(&bundle, &[], &Capacity::cpu_only(2), &observed(15.0, Some(slow.clone())));
        let (capacity, busy) = (kept.capacity_rps.unwrap(), 0.8 * 1000.0 / 15.0);
        assert!(capacity < busy && capacity * 1.25 > busy, "the premise: {kept:?}");
        assert_eq!(voice(&kept).count, 2, "{kept:?}");
        assert_eq!(voice(&plan(&bundle, &[], &Capacity::cpu_only(2), &observed(15.0, Some(first)))).count, 1);
        // At 10 ms a line one keeps up with 80 req/s at 80%, more than 25% over what is planned: back to one.
        assert_eq!(voice(&plan(&bundle, &[], &Capacity::cpu_only(2), &observed(10.0, Some(kept)))).count, 1);

        // Pinned to a core of its own (four cores), it stays one.
        let pinned = plan(&bundle, &[], &Capacity::cpu_only(4), &observed(80.0, None));
        assert_eq!((voice(&pinned).count, voice(&pinned).places.len()), (1, 1), "{pinned:?}");
    }

    /// Before the voice is observed, its instances are sized by the CPU a request is declared to cost outside the
    /// planned instances: `speak`'s 80 ms (the voice's lines) on two cores make two, where 5 ms make one.
    #[test]
    fn an_unobserved_default_instance_is_sized_by_the_cpu_declared_outside_the_instances() {
        let voices = |cpu_ms: u32| {
            let dir = tempfile::tempdir().unwrap();
            let bundle = untasked_voice(dir.path(), 30.0);
            let manifest = std::fs::read_to_string(dir.path().join("jig.toml")).unwrap();
            let declared = manifest.replace(
                "name = \"speak\"\nglue = \"g.wasm\"\n",
                &format!("name = \"speak\"\nglue = \"g.wasm\"\ncpu_ms = {cpu_ms}\n"),
            );
            assert_ne!(declared, manifest);
            std::fs::write(dir.path().join("jig.toml"), declared).unwrap();
            let bundle = Bundle::open(&bundle.dir).unwrap();
            let d = plan(&bundle, &[], &Capacity::cpu_only(2), &Observations::default());
            let voice = d.instances.iter().find(|i| i.slot == "voice").unwrap();
            assert!(voice.places.is_empty(), "unpinned: {d:?}");
            (voice.count, d.capacity_rps.unwrap())
        };
        // 80 ms a request outside det and rec's 40 ms: 14.5 req/s within 87% of two cores, where one voice at 80%
        // of 12.5 req/s would serve 10.
        let (count, capacity) = voices(80);
        assert_eq!(count, 2, "{capacity}");
        assert!(capacity > 10.0, "{capacity}");
        assert_eq!(voices(5).0, 1);
    }

    #[test]
    fn without_a_core_to_spare_a_slot_no_task_names_runs_unpinned_and_the_deployment_says_so() {
        // Two cores for three model slots: det and rec cannot be planned on one, so they keep both and the voice
        // runs beside them, holding none.
        let dir = tempfile::tempdir().unwrap();
        let bundle = untasked_voice(dir.path(), 30.0);
        let d = plan_for_deploy(&bundle, &[], &Capacity::cpu_only(2), &Observations::default()).unwrap();
        assert!(d.source.starts_with("planned"), "{}", d.source);
        assert!(
            d.source.contains("slot `voice`, which no task names, runs unpinned on the planned instances' cores"),
            "{}",
            d.source
        );
        let held: Vec<u32> = ["det", "rec", "voice"].iter().flat_map(|slot| cores_of(&d, slot)).collect();
        assert!(held.len() <= 2, "more cores than the gateway has: {:?}", d.instances);
        assert!(cores_of(&d, "voice").is_empty() && d.instances.iter().any(|i| i.slot == "voice"), "{d:?}");
        // One core: det alone, and the voice beside it.
        let one = tempfile::tempdir().unwrap();
        std::fs::write(
            one.path().join("jig.toml"),
            "name = \"signs\"\n[slo]\nlatency_ms = 400\n[demand]\nrps = 10\n\
             [[tasks]]\nname = \"det\"\nglue = \"g.wasm\"\nslot = \"det\"\n\
             [[variants]]\nslot = \"det\"\nname = \"det\"\nmodel = \"m.onnx\"\n\
             [[variants]]\nslot = \"voice\"\nname = \"voice\"\nmodel = \"m.onnx\"\n",
        )
        .unwrap();
        for file in ["g.wasm", "m.onnx"] {
            std::fs::write(one.path().join(file), b"").unwrap();
        }
        std::fs::write(
            one.path().join("profiles.csv"),
            "slot,variant,segment,batch,p50_ms,p95_ms,throughput_rps,device\ndet,det,cpu:1,1,20,20,50,test\n",
        )
        .unwrap();
        let d =
            plan_for_deploy(&Bundle::open(one.path()).unwrap(), &[], &Capacity::cpu_only(1), &Observations::default())
                .unwrap();
        assert!(d.source.starts_with("planned") && d.source.contains("`voice`"), "{}", d.source);
        assert_eq!((cores_of(&d, "det"), cores_of(&d, "voice")), (vec![0], vec![]), "{d:?}");
    }
}
