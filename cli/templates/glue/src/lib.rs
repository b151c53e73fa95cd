//! `{{name}}`: a jig glue function. Each request's payload comes in (UTF-8 text here), the answer goes out;
//! `jig_sdk` also gives it models (`infer`), fan-out (`emit`), its configuration (`config`) and the time left.

use jig_sdk::{Error, Function, Result};

pub struct Greet;

impl Function for Greet {
    fn handle(payload: Vec<u8>) -> Result<Vec<u8>> {
        let name = String::from_utf8(payload).map_err(|e| Error::invalid_input(format!("not UTF-8 text: {e}")))?;
        let greeting = jig_sdk::config("greeting").unwrap_or_else(|| "hello".into());
        Ok(format!("{greeting}, {}!", name.trim()).into_bytes())
    }
}

jig_sdk::export!(Greet);

/// Run natively with `cargo test`: the handler in-process, with the configuration it is given.
#[cfg(test)]
mod tests {
    use super::*;
    use jig_sdk::native::Invocation;

    #[test]
    fn it_greets_whom_it_is_given() {
        let outcome = Invocation::new().config("greeting", "hi").run::<Greet>(b"jig\n".to_vec());
        assert_eq!(outcome.output.unwrap(), b"hi, jig!");
    }

    #[test]
    fn bytes_that_are_not_text_are_the_callers_error() {
        let outcome = Invocation::new().run::<Greet>(vec![0xff, 0xfe]);
        assert!(matches!(outcome.output, Err(Error::InvalidInput(_))));
    }
}
