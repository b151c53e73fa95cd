//! `jig invoke APP INPUT`: invoke an app over HTTP and print its outputs.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use base64::Engine as _;
use hyper::Method;
use jig_api::{CLASS_HEADER, InvokeResponse, TIMEOUT_HEADER};

use crate::gateway::{GatewayArgs, app_name, bytes, call, failed, print_body};

#[derive(clap::Args, Debug)]
pub struct InvokeCommand {
    /// The deployed app's name, as `jig deploy` printed it.
    app: String,
    /// The payload: a file, or `-` (the default) for standard input.
    #[arg(default_value = "-")]
    input: PathBuf,
    /// Wrap the payload in an envelope with this JSON metadata (for entry functions such as `crop`).
    #[arg(long, value_name = "JSON")]
    meta: Option<String>,
    /// The invocation's timeout in milliseconds; default: its query class's or the app's latency SLO.
    #[arg(long)]
    timeout_ms: Option<u64>,
    /// The query class, for an app planned by Compass (one of the `classes` of its jig.toml).
    #[arg(long)]
    class: Option<String>,
    /// Write each binary output part to DIR/<n>-<task>.bin (`.wav` for WAV audio) instead of summarising it.
    #[arg(long, short = 'o', value_name = "DIR")]
    output_dir: Option<PathBuf>,
    #[command(flatten)]
    target: GatewayArgs,
}

impl InvokeCommand {
    /// Invoke the app; print each output part (JSON as is, binary as its size or written to a file).
    pub fn run(self) -> anyhow::Result<ExitCode> {
        invoke(self)
    }
}

fn invoke(args: InvokeCommand) -> anyhow::Result<ExitCode> {
    app_name(&args.app)?;
    let mut payload = crate::input::read_input(&args.input)?;
    if let Some(meta) = &args.meta {
        let meta: serde_json::Value = serde_json::from_str(meta).context("--meta is not valid JSON")?;
        payload = jig_wire::Envelope { meta, body: payload }.encode();
    }
    let mut headers = Vec::new();
    if let Some(ms) = args.timeout_ms {
        headers.push((TIMEOUT_HEADER, ms.to_string()));
    }
    if let Some(class) = &args.class {
        headers.push((CLASS_HEADER, class.clone()));
    }
    let answer =
        match call(&args.target, Method::POST, &format!("/v1/apps/{}/invoke", args.app), &headers, payload.into())? {
            Err(failure) => return Ok(failed(failure)),
            Ok(answer) => answer,
        };
    if args.target.json {
        print_body(&answer)?;
        return Ok(ExitCode::SUCCESS);
    }
    let parts = answer.parse::<InvokeResponse>()?.outputs;
    if let Some(dir) = &args.output_dir {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let timing = answer.headers.get("server-timing").and_then(|v| v.to_str().ok()).unwrap_or("");
    eprintln!("{}: {} output(s) ({timing})", args.app, parts.len());
    for (i, part) in parts.iter().enumerate() {
        let from = match &part.port {
            Some(port) => format!("{}.{port}", part.task),
            None => part.task.clone(),
        };
        // A part is JSON, binary, or both (an envelope's metadata and body).
        let meta = part.json.as_ref().map(|v| v.to_string());
        let Some(data) = &part.base64 else {
            println!("[{i}] {from}: {}", meta.unwrap_or_default());
            continue;
        };
        let data = base64::engine::general_purpose::STANDARD.decode(data).context("a base64 part of the answer")?;
        let meta = meta.map(|m| format!("{m} + ")).unwrap_or_default();
        match &args.output_dir {
            Some(dir) => {
                let ext = match &data {
                    d if d.starts_with(b"RIFF") => "wav",
                    d if d.starts_with(b"\x89PNG") => "png",
                    d if as_text(d).is_some() => "txt",
                    _ => "bin",
                };
                // The task name comes from the gateway.
                let task = crate::input::safe_stem(&part.task);
                let path = dir.join(format!("{i}-{task}.{ext}"));
                std::fs::write(&path, &data).with_context(|| format!("cannot write {}", path.display()))?;
                println!("[{i}] {from}: {meta}{} written to {}", bytes(data.len() as u64), path.display());
            }
            None => println!("[{i}] {from}: {meta}{}", shown(&data)),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A part's bytes as the terminal shows them: text as it is (a greeting, a transcript), anything else (a WAV, a
/// PNG, tensors) by its size.
fn shown(data: &[u8]) -> String {
    match as_text(data) {
        Some("") => "(empty)".into(),
        Some(text) => text.trim_end().into(),
        None => format!("{} of binary data (write it out with --output-dir)", bytes(data.len() as u64)),
    }
}

/// The bytes as text, when they are UTF-8 with no control characters but whitespace: no escape sequence in an
/// answer reaches the terminal.
fn as_text(data: &[u8]) -> Option<&str> {
    let text = std::str::from_utf8(data).ok()?;
    text.chars().all(|c| !c.is_control() || c.is_whitespace()).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::shown;

    #[test]
    fn text_is_shown_as_text_and_anything_else_by_its_size() {
        assert_eq!(shown(b"hello, world!\n"), "hello, world!");
        assert_eq!(shown("línea 1\n\tlínea 2".as_bytes()), "línea 1\n\tlínea 2");
        assert_eq!(shown(b""), "(empty)");
        assert_eq!(shown(b"RIFF\x24\x00\x00\x00WAVE"), "12 B of binary data (write it out with --output-dir)");
        assert_eq!(shown(&[0xff; 2048]), "2.0 KiB of binary data (write it out with --output-dir)");
    }
}
