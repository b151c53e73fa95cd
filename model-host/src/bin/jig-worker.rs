//! `jig-worker --socket PATH`: run one model for a parent `jig` process (see `jig_model_host::worker`).

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let mut socket = None;
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("--socket") => socket = args.next().map(PathBuf::from),
            Some("-h" | "--help") => {
                println!("usage: jig-worker --socket PATH\n\nServes one model for the jig process listening on PATH.");
                return ExitCode::SUCCESS;
            }
            _ => {
                eprintln!("jig-worker: unexpected argument {arg:?}; usage: jig-worker --socket PATH");
                return ExitCode::from(2);
            }
        }
    }
    let Some(socket) = socket else {
        eprintln!("jig-worker: missing --socket PATH (jig starts workers itself; this is not run by hand)");
        return ExitCode::from(2);
    };
    match jig_model_host::worker::serve(&socket) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("jig-worker: {err}");
            ExitCode::FAILURE
        }
    }
}
