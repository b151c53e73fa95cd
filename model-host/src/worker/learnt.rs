//! What a parent learns from the batches of one input shape: the outputs' types and shapes, so that it can lend
//! regions for them up front, and how long the last batch took, so that it knows how long to poll for the next
//! answer before it sleeps.

use std::time::Duration;

use super::mailbox::SPIN;
use crate::DType;

/// Input shapes whose batches a worker remembers; past this many, it forgets them all.
pub(super) const REMEMBERED_SHAPES: usize = 64;

/// The longest batch a parent polls for throughout; the answer to a longer one is slept for after [`SPIN`], and
/// waking costs it under 2%.
const LONGEST_SPIN: Duration = Duration::from_millis(1);

/// What the batches of one input shape showed: their outputs' element types and shapes, and how long the last
/// one took to be answered.
#[derive(Debug)]
pub(super) struct Learnt {
    pub(super) outputs: Vec<(DType, Vec<u64>)>,
    pub(super) took: Duration,
}

impl Learnt {
    /// How long to poll for the next answer before sleeping: through a quarter more than the last took, if
    /// that is within [`LONGEST_SPIN`], so that an answer on time finds the parent awake (Add at b = 2, 130–150
    /// µs, lost a tenth of its ratio to the wake-up after [`SPIN`]); else [`SPIN`].
    pub(super) fn spin(&self) -> Duration {
        let expected = self.took * 5 / 4;
        if expected <= LONGEST_SPIN { expected.max(SPIN) } else { SPIN }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parent_polls_through_a_short_batch_and_sleeps_through_a_long_one() {
        let spin = |micros| Learnt { outputs: Vec::new(), took: Duration::from_micros(micros) }.spin();
        assert_eq!(spin(20), SPIN, "a short batch is polled for at least SPIN");
        assert_eq!(spin(400), Duration::from_micros(500), "a quarter more than the last took");
        assert_eq!(spin(800), LONGEST_SPIN);
        assert_eq!(spin(900), SPIN, "past LONGEST_SPIN the parent sleeps after SPIN");
    }
}
