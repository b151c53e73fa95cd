//! `echo`: returns its payload unchanged. The smallest possible jig function: a template for new glue and the
//! no-op the runtime's instantiation benchmark calls.

use jig_sdk::{Function, Result};

pub struct Echo;

impl Function for Echo {
    fn handle(payload: Vec<u8>) -> Result<Vec<u8>> {
        Ok(payload)
    }
}

jig_sdk::export!(Echo);
