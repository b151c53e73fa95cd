//! What `nvidia-smi` says of the GPUs (their MIG mode, the MIG instances that exist), read within a timeout: a
//! wedged GPU can hang it.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{Gpu, MigInstance};

/// `nvidia-smi ARGS`' standard output; `None` when it is missing, fails or does not answer in time.
pub(super) fn nvidia_smi(args: &[&str]) -> Option<String> {
    let mut command = Command::new("nvidia-smi");
    command.args(args);
    let out = output_within(command, NVIDIA_SMI_TIMEOUT);
    if out.is_none() {
        tracing::debug!(
            "`nvidia-smi {}` did not answer (missing, failed, or over {NVIDIA_SMI_TIMEOUT:?})",
            args.join(" ")
        );
    }
    out
}

/// How long one `nvidia-smi` call may take: deploys list the GPUs with it (a query, then `-L` on a machine in MIG
/// mode: 10 s at most in all), and a wedged GPU can hang it.
const NVIDIA_SMI_TIMEOUT: Duration = Duration::from_secs(5);

/// `command`'s standard output when it succeeds within `timeout`; `None` when it cannot start, fails, or takes
/// longer (it is then killed, and reaped on a thread of its own: a process stuck in the kernel may not die).
fn output_within(mut command: Command, timeout: Duration) -> Option<String> {
    use std::io::Read;
    let mut child = command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().ok()?;
    let mut stdout = child.stdout.take()?;
    let reader = std::thread::spawn(move || {
        let mut text = Vec::new();
        stdout.read_to_end(&mut text).map(|_| String::from_utf8_lossy(&text).into_owned())
    });
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return reader.join().ok()?.ok().filter(|_| status.success()),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            _ => {
                let _ = child.kill();
                std::thread::spawn(move || child.wait());
                return None;
            }
        }
    }
}

/// The GPUs `nvidia-smi`'s query lists (see [`Devices::from_nvidia_smi`]), without their MIG instances; `None`
/// when it does not answer.
pub(super) fn query_gpus() -> Option<Vec<Gpu>> {
    let query = format!("--query-gpu={}", GPU_QUERY.join(","));
    nvidia_smi(&[&query, "--format=csv,noheader,nounits"]).map(|query| parse_gpu_query(&query))
}

/// Give each GPU in MIG mode the MIG instances `nvidia-smi -L`'s `list` shows on it.
pub(super) fn attach_mig_instances(gpus: &mut [Gpu], list: &str) {
    for (index, instance) in parse_mig_list(list) {
        if let Some(gpu) = gpus.iter_mut().find(|g| g.index == index && g.mig_enabled) {
            gpu.mig_instances.push(instance);
        }
    }
}

/// The columns jig asks `nvidia-smi --query-gpu` for, in order.
const GPU_QUERY: [&str; 5] = ["index", "name", "uuid", "memory.total", "mig.mode.current"];

/// Parse `nvidia-smi --query-gpu=index,name,uuid,memory.total,mig.mode.current --format=csv,noheader,nounits`.
/// A line that does not read as a GPU (`[N/A]` for its memory, a driver's new format) leaves that GPU out, with
/// a warning that names the line: the machine's other GPUs and its CPU cores still serve.
pub fn parse_gpu_query(text: &str) -> Vec<Gpu> {
    read_gpu_query(text).filter_map(|gpu| gpu.inspect_err(|e| tracing::warn!("{e}")).ok()).collect()
}

/// A line of `nvidia-smi`'s GPU query that is not a GPU.
#[derive(Debug, thiserror::Error)]
#[error(
    "line {line} of `nvidia-smi --query-gpu={}`: {detail}; the GPU is left out (is the driver's `nvidia-smi` one \
     jig knows?)",
    GPU_QUERY.join(",")
)]
struct GpuQueryError {
    line: u64,
    detail: String,
}

/// One line of the GPU query, its columns in [`GPU_QUERY`]'s order.
#[derive(serde::Deserialize)]
struct GpuRow {
    index: u32,
    name: String,
    uuid: String,
    memory_mib: u64,
    mig_mode: String,
}

/// Each GPU of `nvidia-smi`'s GPU query, or why its line is not one. Blank lines are skipped, fields trimmed.
fn read_gpu_query(text: &str) -> impl Iterator<Item = Result<Gpu, GpuQueryError>> + '_ {
    let mut reader =
        csv::ReaderBuilder::new().has_headers(false).flexible(true).trim(csv::Trim::All).from_reader(text.as_bytes());
    let mut record = csv::StringRecord::new();
    std::iter::from_fn(move || {
        loop {
            let read = reader.read_record(&mut record);
            // csv's own `Position::line` miscounts after blank lines (BurntSushi/rust-csv#208); the offset where
            // the record ends is exact.
            let end = text.as_bytes().get(..reader.position().byte() as usize).unwrap_or_default();
            let line = end.trim_ascii_end().iter().filter(|&&b| b == b'\n').count() as u64 + 1;
            let error = |detail: String| Some(Err(GpuQueryError { line, detail }));
            match read {
                Ok(false) => return None,
                Err(e) => return error(e.to_string()),
                Ok(true) if record.len() == 1 && record[0].is_empty() => continue,
                Ok(true) if record.len() != GPU_QUERY.len() => {
                    return error(format!("{} fields, not {}", record.len(), GPU_QUERY.len()));
                }
                Ok(true) => {}
            }
            let row: GpuRow = match record.deserialize(None) {
                Ok(row) => row,
                Err(e) => {
                    let field = match e.kind() {
                        csv::ErrorKind::Deserialize { err, .. } => err.field(),
                        _ => None,
                    };
                    let column = field.and_then(|i| GPU_QUERY.get(i as usize)).unwrap_or(&"a field");
                    let value = field.and_then(|i| record.get(i as usize)).unwrap_or_default();
                    return error(format!("`{column}` is `{value}`, not a whole number"));
                }
            };
            return Some(Ok(Gpu {
                index: row.index,
                name: row.name,
                uuid: row.uuid,
                memory_mib: row.memory_mib,
                sms: None,
                mig_enabled: row.mig_mode == "Enabled",
                mig_instances: Vec::new(),
            }));
        }
    })
}

/// Parse `nvidia-smi -L`: `GPU 0: … (UUID: GPU-…)` lines, each followed by its
/// `  MIG 3g.40gb     Device  0: (UUID: MIG-…)` lines.
pub fn parse_mig_list(text: &str) -> Vec<(u32, MigInstance)> {
    let mut gpu = None;
    let mut out = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim_start();
        if let Some(rest) = trimmed.strip_prefix("GPU ") {
            gpu = rest.split(':').next().and_then(|i| i.trim().parse().ok());
        } else if let (Some(rest), Some(gpu)) = (trimmed.strip_prefix("MIG "), gpu) {
            // `MIG 3g.40gb Device 0: …`; a line that names no profile starts with `Device`.
            let profile = rest.split_whitespace().next().filter(|w| *w != "Device").map(str::to_string);
            let uuid = rest.split("UUID:").nth(1).map(|u| u.trim().trim_end_matches(')').to_string());
            if let Some(uuid) = uuid {
                out.push((gpu, MigInstance { uuid, profile }));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::segment::MigProfile;

    /// A listing tool that hangs is given up on (and killed) rather than hanging the deploy that asked.
    #[test]
    fn a_tool_that_does_not_answer_in_time_is_given_up_on() {
        let run = |script: &str, timeout| {
            let mut command = Command::new("sh");
            command.args(["-c", script]);
            output_within(command, timeout)
        };
        assert_eq!(run("echo listed", Duration::from_secs(10)).as_deref(), Some("listed\n"));
        assert_eq!(run("echo listed; exit 3", Duration::from_secs(10)), None, "a failure lists nothing");
        let started = Instant::now();
        assert_eq!(run("sleep 30", Duration::from_millis(200)), None);
        assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    }

    #[test]
    fn parses_nvidia_smi_output() {
        let gpus = parse_gpu_query(
            "0, NVIDIA H100 80GB HBM3, GPU-5e3c, 81559, Enabled\n1, NVIDIA H100, GPU-77aa, 81559, Disabled\n",
        );
        assert_eq!(gpus.len(), 2);
        assert_eq!((gpus[0].memory_mib, gpus[0].mig_enabled, gpus[1].mig_enabled), (81559, true, false));
        assert_eq!((gpus[0].name.as_str(), gpus[1].uuid.as_str()), ("NVIDIA H100 80GB HBM3", "GPU-77aa"));

        let list = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-5e3c)\n  MIG 3g.40gb     Device  0: (UUID: MIG-aaaa)\n  MIG 1g.10gb     Device  1: (UUID: MIG-bbbb)\nGPU 1: NVIDIA H100 (UUID: GPU-77aa)\n";
        let migs = parse_mig_list(list);
        assert_eq!(migs.len(), 2);
        assert_eq!(migs[0].0, 0);
        assert_eq!(migs[0].1.uuid, "MIG-aaaa");
        assert_eq!(migs[1].1.profile_on("NVIDIA H100 80GB HBM3"), Some(MigProfile::G1_10));
        // The same name is another shape on an A100 40GB; an H200 lists its own names.
        assert_eq!(migs[1].1.profile_on("NVIDIA A100-SXM4-40GB"), Some(MigProfile::G1_20));
        let h200 = parse_mig_list("GPU 0: NVIDIA H200 (UUID: GPU-1)\n  MIG 3g.71gb     Device  0: (UUID: MIG-cccc)\n");
        assert_eq!(h200[0].1.profile_on("NVIDIA H200"), Some(MigProfile::G3_40));
        assert_eq!(migs[0].1.profile_on("NVIDIA A30"), None, "a model jig does not know");
    }

    /// A line of the GPU query that is not a GPU is left out, and said so by its line; the others are read.
    #[test]
    fn a_malformed_gpu_query_line_is_named_and_left_out() {
        let query =
            "0, NVIDIA H100, GPU-5e3c, 81559, Enabled\n\n1, NVIDIA H100, GPU-77aa, [N/A], Disabled\n2, GPU-88bb\n";
        let read: Vec<_> = read_gpu_query(query).collect();
        assert_eq!(read.len(), 3);
        assert_eq!(read[0].as_ref().map(|g| g.index).ok(), Some(0));
        let err = read[1].as_ref().unwrap_err().to_string();
        assert!(err.starts_with("line 3 of `nvidia-smi --query-gpu=index,name,uuid,memory.total,mig.mode.current`"));
        assert!(err.contains("`memory.total` is `[N/A]`, not a whole number"), "{err}");
        assert!(read[2].as_ref().unwrap_err().to_string().contains("line 4 of"), "{:?}", read[2]);
        assert_eq!(parse_gpu_query(query).len(), 1);
    }
}
