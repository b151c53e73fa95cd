//! `jig profile BUNDLE --counters`: gpu-lets' solo utilisations (§4.4), the features its interference model is
//! fitted on: each slot's model alone on a whole GPU, one batch measured by Nsight Compute, written as the
//! `utilisation` table of a `[gpulet]` spec (`model,batch,l2,dram`, fractions of peak).
//!
//! Nsight Compute must start the process it measures, and does not measure MPS clients, so the model runs
//! in a child `jig profile` of its own (`--kernels-of SLOT`, hidden) bound to the whole GPU by its UUID, with
//! no MPS share: it loads the model on CUDA, warms it up, and runs one batch inside a CUDA profiler range,
//! which is all that `ncu --profile-from-start off` measures. Its CSV gives per kernel its time and its L2 and
//! DRAM throughput in percent of peak; the table takes their means weighted by kernel time.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use jig_manifest::{Bundle, Variant};
use jig_model_host::onnx::{Model, SessionOptions};

/// The metrics asked of Nsight Compute: each kernel's time, and its L2 and DRAM throughput.
const TIME: &str = "gpu__time_duration.sum";
const L2: &str = "lts__t_sectors.avg.pct_of_peak_sustained_elapsed";
const DRAM: &str = "dram__throughput.avg.pct_of_peak_sustained_elapsed";

/// Warm-up batches before the measured one (the first runs pick kernels and allocate).
const WARM_UP: usize = 5;

/// One batch's kernels as Nsight Compute measured them.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Kernels {
    /// How many.
    pub count: usize,
    /// Their time together, ms.
    pub ms: f64,
    /// L2 throughput, a fraction of peak, the kernels' mean weighted by their time.
    pub l2: f64,
    /// DRAM throughput, likewise.
    pub dram: f64,
}

/// `--counters`: each slot's first variant measured under `ncu` on GPU `gpu`, written to `output`.
pub(super) fn counters(bundle: &Bundle, gpu: u32, batch: u32, output: &Path) -> anyhow::Result<()> {
    let devices = jig_model_host::device::Devices::discover();
    let Some(device) = devices.gpus.iter().find(|g| g.index == gpu) else {
        bail!(
            "--counters: this machine has no GPU {gpu} (nvidia-smi lists {}); Nsight Compute's counters need an NVIDIA \
             GPU",
            if devices.gpus.is_empty() { "none".to_string() } else { format!("{} of them", devices.gpus.len()) }
        );
    };
    let ncu = find_on_path("ncu").context(
        "--counters: Nsight Compute's `ncu` is not on PATH; install it (the CUDA toolkit's `nsight-compute` package) \
         or add its directory to PATH",
    )?;
    let exe = std::env::current_exe().context("--counters: cannot find the running jig executable")?;
    let mut rows = vec!["model,batch,l2,dram".to_string()];
    for variant in super::one_per_slot(bundle, "--counters") {
        let log = tempfile::Builder::new().prefix("jig-ncu-").suffix(".csv").tempfile()?.into_temp_path();
        let mut command = Command::new(&ncu);
        command
            .args(["--profile-from-start", "off", "--csv", "--print-units", "base", "--metrics"])
            .arg([TIME, L2, DRAM].join(","))
            .arg("--log-file")
            .arg(&*log)
            .arg(&exe)
            .arg("profile")
            .arg(&bundle.dir)
            .args(["--kernels-of", &variant.slot, "--batch", &batch.to_string()])
            // The whole GPU, by UUID, outside any MPS daemon.
            .env("CUDA_VISIBLE_DEVICES", &device.uuid)
            .env_remove("CUDA_MPS_PIPE_DIRECTORY")
            .env_remove("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
        if let Some(path) = jig_model_host::onnx::cuda_library_path() {
            command.env("LD_LIBRARY_PATH", path);
        }
        eprintln!("profile: {} on GPU {gpu} ({}): batch {batch} under ncu", variant.slot, device.uuid);
        let status = command.status().with_context(|| format!("--counters: cannot run {}", ncu.display()))?;
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let kernels = parse_ncu_csv(&text).map_err(|why| {
            let lines: Vec<&str> = text.lines().collect();
            let tail = lines[lines.len().saturating_sub(15)..].join("\n");
            let exit = if status.success() { "ncu exited 0".to_string() } else { format!("ncu {status}") };
            let permission = if text.contains("ERR_NVGPUCTRPERM") {
                "; the GPU's performance counters are restricted to administrators: run as root, or load the driver \
                 with NVreg_RestrictProfilingToAdminUsers=0"
            } else {
                ""
            };
            anyhow::anyhow!(
                "--counters: slot `{}` on GPU {gpu}: {why} ({exit}; if an MPS daemon runs on the GPU, ncu does not \
                 see its clients){permission}\n{tail}",
                variant.slot
            )
        })?;
        eprintln!(
            "profile: {}: {} kernels, {:.2} ms, L2 {:.1}%, DRAM {:.1}%",
            variant.slot,
            kernels.count,
            kernels.ms,
            100.0 * kernels.l2,
            100.0 * kernels.dram
        );
        rows.push(format!("{},{batch},{:.4},{:.4}", variant.slot, kernels.l2, kernels.dram));
    }
    std::fs::write(output, rows.join("\n") + "\n")
        .with_context(|| format!("writing the utilisation table to {}", output.display()))?;
    eprintln!("profile: wrote {} rows to {}", rows.len() - 1, output.display());
    Ok(())
}

/// `--kernels-of SLOT`, the process `ncu` starts: the slot's first variant on CUDA device 0 (the GPU
/// `CUDA_VISIBLE_DEVICES` names), warmed up, then one batch inside a profiler range.
pub(super) fn kernels_of(bundle: &Bundle, slot: &str, batch: u32) -> anyhow::Result<()> {
    let variant: &Variant = bundle
        .manifest
        .variants
        .iter()
        .find(|v| v.slot == slot)
        .with_context(|| format!("--kernels-of: the bundle has no variant of slot `{slot}`"))?;
    let options = SessionOptions { threads: 1, cuda: Some((0, None)) };
    let model = Model::load(&variant.name, &bundle.model_path(variant), &options)?;
    let samples = super::samples_for(variant)(model.inputs());
    let inputs = jig_model_host::sweep::sample_inputs(&variant.name, model.inputs(), &samples, u64::from(batch))?;
    for _ in 0..WARM_UP {
        model.run(&inputs)?;
    }
    jig_model_host::device::in_profiler_range(0, || model.run(&inputs))??;
    Ok(())
}

/// The measured kernels in what `ncu --csv --print-units base` wrote: one row per kernel and metric (`ID`,
/// `Metric Name`, `Metric Value`, …), after lines of its own that are not CSV.
pub(super) fn parse_ncu_csv(text: &str) -> Result<Kernels, String> {
    let table: Vec<&str> = text.lines().filter(|l| l.starts_with('"')).collect();
    if table.is_empty() {
        return Err("ncu wrote no table".into());
    }
    let table = table.join("\n");
    let mut reader = csv::Reader::from_reader(table.as_bytes());
    let headers = reader.headers().map_err(|e| format!("ncu's table: {e}"))?.clone();
    let column =
        |name: &str| headers.iter().position(|h| h == name).ok_or(format!("ncu's table has no `{name}` column"));
    let (id, metric, value) = (column("ID")?, column("Metric Name")?, column("Metric Value")?);
    // Per kernel: time, L2, DRAM.
    let mut kernels: std::collections::BTreeMap<u64, [Option<f64>; 3]> = std::collections::BTreeMap::new();
    for record in reader.records() {
        let record = record.map_err(|e| format!("ncu's table: {e}"))?;
        let Some(k) = [TIME, L2, DRAM].iter().position(|m| Some(*m) == record.get(metric)) else { continue };
        let kernel = record.get(id).and_then(|v| v.parse().ok()).ok_or("ncu's table: a row without a kernel ID")?;
        let number = record.get(value).unwrap_or_default().replace(',', "");
        let number: f64 = number.parse().map_err(|_| format!("ncu's table: `{number}` is not a number"))?;
        kernels.entry(kernel).or_default()[k] = Some(number);
    }
    let measured: Vec<[f64; 3]> = kernels.values().filter_map(|k| Some([k[0]?, k[1]?, k[2]?])).collect();
    let ns: f64 = measured.iter().map(|k| k[0]).sum();
    if measured.is_empty() || ns <= 0.0 {
        return Err("ncu measured no kernel".into());
    }
    let weighted = |i: usize| measured.iter().map(|k| k[0] * k[i]).sum::<f64>() / ns / 100.0;
    Ok(Kernels { count: measured.len(), ms: ns / 1e6, l2: weighted(1), dram: weighted(2) })
}

/// The first `name` among the directories of `PATH` that is a file.
fn find_on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").iter().flat_map(std::env::split_paths).map(|dir| dir.join(name)).find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What ncu 2025 writes with `--csv --print-units base --log-file`: its own lines, then a row per kernel
    /// and metric, quoted, kernel names with commas in them.
    const NCU: &str = r#"==PROF== Connected to process 4242 (/usr/local/bin/jig)
==PROF== Profiling "sm90_xmma_fprop" - 0: 0%....50%....100% - 9 passes
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","4242","jig","127.0.0.1","void conv<float, 4>(Params)","1","7","(128, 1, 1)","(80, 1, 1)","0","9.0","Command line profiler metrics","dram__throughput.avg.pct_of_peak_sustained_elapsed","%","20.5"
"0","4242","jig","127.0.0.1","void conv<float, 4>(Params)","1","7","(128, 1, 1)","(80, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","ns","3,000"
"0","4242","jig","127.0.0.1","void conv<float, 4>(Params)","1","7","(128, 1, 1)","(80, 1, 1)","0","9.0","Command line profiler metrics","lts__t_sectors.avg.pct_of_peak_sustained_elapsed","%","30"
"1","4242","jig","127.0.0.1","relu","1","7","(256, 1, 1)","(40, 1, 1)","0","9.0","Command line profiler metrics","dram__throughput.avg.pct_of_peak_sustained_elapsed","%","60.5"
"1","4242","jig","127.0.0.1","relu","1","7","(256, 1, 1)","(40, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","ns","1000"
"1","4242","jig","127.0.0.1","relu","1","7","(256, 1, 1)","(40, 1, 1)","0","9.0","Command line profiler metrics","lts__t_sectors.avg.pct_of_peak_sustained_elapsed","%","10"
==PROF== Disconnected from process 4242
"#;

    #[test]
    fn kernels_are_weighted_by_their_time() {
        let k = parse_ncu_csv(NCU).unwrap();
        assert_eq!(k.count, 2);
        assert!((k.ms - 0.004).abs() < 1e-12, "{k:?}");
        // (3000·30 + 1000·10) / 4000 = 25%; (3000·20.5 + 1000·60.5) / 4000 = 30.5%.
        assert!((k.l2 - 0.25).abs() < 1e-12 && (k.dram - 0.305).abs() < 1e-12, "{k:?}");
    }

    #[test]
    fn a_run_that_measured_nothing_says_so() {
        let nothing = "==PROF== Connected to process 1\n==ERROR== ERR_NVGPUCTRPERM - no permission\n";
        assert_eq!(parse_ncu_csv(nothing).unwrap_err(), "ncu wrote no table");
        let header_only = NCU.lines().filter(|l| l.starts_with("\"ID\"")).collect::<String>();
        assert_eq!(parse_ncu_csv(&header_only).unwrap_err(), "ncu measured no kernel");
        let partial: String = NCU.lines().filter(|l| !l.contains("gpu__time")).map(|l| format!("{l}\n")).collect();
        assert_eq!(parse_ncu_csv(&partial).unwrap_err(), "ncu measured no kernel", "a kernel needs all three");
    }
}
