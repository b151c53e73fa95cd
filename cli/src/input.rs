//! Reading what the user gives on the command line: payload files, `KEY=VALUE` pairs; writing files with
//! errors that name them.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use anyhow::{Context, bail};
use jig_manifest::Bundle;

/// The payload in `path`, or standard input for `-`.
pub fn read_input(path: &Path) -> anyhow::Result<Vec<u8>> {
    if path == Path::new("-") {
        let mut buf = Vec::new();
        std::io::stdin().read_to_end(&mut buf).context("reading the payload from standard input")?;
        Ok(buf)
    } else {
        std::fs::read(path).with_context(|| format!("reading the payload from {}", path.display()))
    }
}

/// The bundle in `dir`. The manifest's errors name files as the bundle does (`jig.toml`, `glue/…`), for a gateway
/// as much as for this machine; here the error also names the directory.
pub fn open_bundle(dir: &Path) -> anyhow::Result<Bundle> {
    Bundle::open(dir).with_context(|| format!("bundle {}", dir.display()))
}

/// `KEY=VALUE` pairs as a map; an error names the pair that is not one.
pub fn parse_config(pairs: &[String]) -> anyhow::Result<BTreeMap<String, String>> {
    pairs
        .iter()
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => bail!("--config {pair:?} is not KEY=VALUE"),
        })
        .collect()
}

/// `name` (a task or port name from a guest or a gateway) as a file-name stem that cannot leave its directory:
/// letters, digits, `-` and `_` kept, anything else `_`.
pub fn safe_stem(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect()
}

/// Write `bytes` to `path`; an error names the file.
pub fn write_file(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))
}
