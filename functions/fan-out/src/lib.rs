//! `fan-out`: send the payload, unchanged, to every port named in config `ports` (comma-separated): the
//! entry of an app whose every request goes to several tasks at once (the paper's social-media app sends
//! each image to a classifier and a captioner).
//!
//! **Returns** JSON `{"ports": <number of ports>}`.

use jig_sdk::{Error, Function, Result};

pub struct FanOut;

impl Function for FanOut {
    fn handle(payload: Vec<u8>) -> Result<Vec<u8>> {
        let ports = jig_sdk::config("ports").ok_or_else(|| {
            Error::invalid_input("config `ports` is missing: name the ports, e.g. `classify,caption`")
        })?;
        let ports: Vec<&str> = ports.split(',').map(str::trim).filter(|p| !p.is_empty()).collect();
        for port in &ports {
            jig_sdk::emit(port, &payload);
        }
        Ok(format!("{{\"ports\": {}}}", ports.len()).into_bytes())
    }
}

jig_sdk::export!(FanOut);
