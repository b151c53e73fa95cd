//! What a process has cost so far, from `/proc/PID/stat`, and what it holds, from `/proc/PID/status`.

/// The fields of `/proc/PID/stat` after the parenthesised command name (the line's 3rd field first), as
/// numbers where they are; none when the process is gone.
fn proc_stat(pid: u32) -> Vec<Option<u64>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    rest.split_whitespace().map(|f| f.parse().ok()).collect()
}

/// User plus system CPU time of a process (the line's 14th and 15th fields), in clock ticks.
pub fn cpu_ticks(pid: u32) -> u64 {
    proc_stat(pid).iter().skip(11).take(2).flatten().sum()
}

/// Minor page faults of a process so far (the line's 10th field): what touching fresh memory costs.
pub fn minor_faults(pid: u32) -> u64 {
    proc_stat(pid).get(7).copied().flatten().unwrap_or(0)
}

/// Resident memory of a process (`VmRSS`), in bytes; 0 when the process is gone.
pub fn resident_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib = status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.split_whitespace().next());
    kib.and_then(|k| k.parse::<u64>().ok()).unwrap_or(0) * 1024
}
