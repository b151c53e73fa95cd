//! Why a worker could not start or run a batch ([`WorkerError`]), how that reads to callers that speak
//! [`ModelError`], and the hint added to a batch that ran out of GPU memory.

use std::path::PathBuf;
use std::time::Duration;

use crate::onnx::{self, GPU_MEMORY_EXHAUSTED, ModelError, SessionOptions};

/// Why a worker could not start or run a batch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkerError {
    /// The worker process could not be spawned, exited before connecting, or its socket could not be set up.
    #[error(
        "instance `{instance}`: cannot start worker {program} for model `{model}`: {detail}; check that the \
         program exists and runs (`{program} --socket PATH`)"
    )]
    Spawn {
        /// The instance the worker serves.
        instance: String,
        /// The model's name.
        model: String,
        /// The worker's executable.
        program: PathBuf,
        /// What went wrong.
        detail: String,
    },
    /// The worker answered `LoadFailed`, answered wrongly, or ended while loading; or a restarted worker found
    /// the model's inputs or outputs changed.
    #[error("instance `{instance}`: the worker could not load model `{model}`: {detail}")]
    Load {
        /// The instance the worker serves.
        instance: String,
        /// The model's name.
        model: String,
        /// The worker's error, or what went wrong.
        detail: String,
    },
    /// The worker did not connect, or did not load the model, within
    /// [`WorkerSpec::load_timeout`](super::WorkerSpec::load_timeout).
    #[error(
        "instance `{instance}`: the worker for model `{model}` did not {stage} within {after:?}; it was killed \
         (a slow GPU initialisation or a large model may need a longer load timeout)"
    )]
    Timeout {
        /// The instance the worker serves.
        instance: String,
        /// The model's name.
        model: String,
        /// What it did not finish: `connect` or `load the model`.
        stage: &'static str,
        /// The load timeout.
        after: Duration,
    },
    /// The batch does not fit the model's declared inputs; checked before anything is sent.
    #[error("instance `{instance}`: {source}")]
    Model {
        /// The instance the worker serves.
        instance: String,
        /// What does not fit.
        source: ModelError,
    },
    /// The model failed on this batch; the worker is healthy and serves the next one.
    #[error("instance `{instance}`: {detail}")]
    Run {
        /// The instance the worker serves.
        instance: String,
        /// The model's name.
        model: String,
        /// The worker's error.
        detail: String,
    },
    /// The worker process died during the batch; it is being restarted in the background.
    #[error(
        "instance `{instance}`: the worker for model `{model}` died during the batch ({detail}); the batch \
         failed and the worker is being restarted, so the next batch goes to a fresh process"
    )]
    Died {
        /// The instance the worker serves.
        instance: String,
        /// The model's name.
        model: String,
        /// How it ended: its exit status or signal, as far as the parent could tell.
        detail: String,
    },
    /// The worker did not answer a batch within [`WorkerSpec::batch_timeout`](super::WorkerSpec::batch_timeout);
    /// it was killed and is being restarted.
    #[error(
        "instance `{instance}`: the worker for model `{model}` did not answer the batch within {after:?}, so it \
         was taken for hung (a stopped GPU or MPS server), killed and is being restarted; the batch failed"
    )]
    Hung {
        /// The instance the worker serves.
        instance: String,
        /// The model's name.
        model: String,
        /// The batch timeout.
        after: Duration,
    },
    /// The worker sent a malformed or unexpected message; it was killed and is being restarted.
    #[error(
        "instance `{instance}`: the worker for model `{model}` broke the protocol ({detail}); it was killed and \
         is being restarted (are the worker and this host from the same build?)"
    )]
    Protocol {
        /// The instance the worker serves.
        instance: String,
        /// The model's name.
        model: String,
        /// What was wrong with the message.
        detail: String,
    },
    /// The worker's [start check](super::WorkerSpec::check) refused: its device is not on the machine as
    /// placed. No process was started; each later batch checks again (cheaply: see `launch`) and fails the same
    /// way until the app is redeployed.
    #[error("instance `{instance}`: cannot start the worker for model `{model}`: {detail}")]
    Device {
        /// The instance the worker serves.
        instance: String,
        /// The model's name.
        model: String,
        /// Why, from the check.
        detail: String,
    },
    /// The parent could not create or grow the shared region.
    #[error("instance `{instance}`: shared memory for model `{model}`: {detail}; check free space in /dev/shm")]
    Memory {
        /// The instance the worker serves.
        instance: String,
        /// The model's name.
        model: String,
        /// The system's answer.
        detail: String,
    },
}

impl WorkerError {
    fn model_name(&self) -> &str {
        match self {
            WorkerError::Model { source, .. } => match source {
                ModelError::Library { .. } => "",
                ModelError::Read { model, .. }
                | ModelError::Invalid { model, .. }
                | ModelError::UnsupportedType { model, .. }
                | ModelError::Input { model, .. }
                | ModelError::Run { model, .. } => model,
            },
            WorkerError::Spawn { model, .. }
            | WorkerError::Load { model, .. }
            | WorkerError::Timeout { model, .. }
            | WorkerError::Run { model, .. }
            | WorkerError::Died { model, .. }
            | WorkerError::Hung { model, .. }
            | WorkerError::Protocol { model, .. }
            | WorkerError::Device { model, .. }
            | WorkerError::Memory { model, .. } => model,
        }
    }
}

/// Callers that speak [`ModelError`] (the `infer` host call) get the input error as it was, and everything
/// else as a run failure whose text still names the instance.
impl From<WorkerError> for ModelError {
    fn from(err: WorkerError) -> ModelError {
        match err {
            WorkerError::Model { source, .. } => source,
            WorkerError::Run { model, detail, .. } => ModelError::Run { model, detail },
            other => ModelError::Run { model: other.model_name().to_string(), detail: other.to_string() },
        }
    }
}

/// `detail`, a failed batch's error, with what to do when it says the GPU's memory ran out: ONNX Runtime's CUDA
/// arena (`Failed to allocate memory`), CUDA or cuDNN. The worker's model explains its own runs' (then this
/// adds only that the worker serves on).
pub(super) fn with_memory_hint(detail: String, options: &SessionOptions) -> String {
    let Some((_, limit)) = options.cuda else { return detail };
    if !onnx::gpu_memory_exhausted(&detail) {
        return detail;
    }
    if detail.contains(GPU_MEMORY_EXHAUSTED) {
        return format!("{detail}; the worker serves the next batch");
    }
    let share = limit.map_or("the GPU's".into(), |bytes| format!("{} MiB,", bytes >> 20));
    format!(
        "{detail} ({GPU_MEMORY_EXHAUSTED}: this instance may use {share} its segment's share; give it a larger \
         segment or a smaller maximum batch; the worker serves the next batch)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_that_runs_out_of_gpu_memory_says_how_much_it_had_and_what_to_do() {
        let cuda = SessionOptions { threads: 1, cuda: Some((0, Some(10_000_000_000))) };
        let arena = "Failed to allocate memory for requested buffer of size 4194304000".to_string();
        let said = with_memory_hint(arena.clone(), &cuda);
        assert!(said.starts_with(&arena) && said.contains("may use 9536 MiB, its segment's share"), "{said}");
        assert!(said.contains("smaller maximum batch"), "{said}");
        let cudnn = with_memory_hint("CUDNN failure 4: CUDNN_STATUS_ALLOC_FAILED".into(), &cuda);
        assert!(cudnn.contains("GPU memory exhausted"), "{cudnn}");
        // Another failure, or a CPU session, is left as it is.
        assert_eq!(with_memory_hint("shape mismatch".into(), &cuda), "shape mismatch");
        assert_eq!(with_memory_hint(arena.clone(), &SessionOptions::default()), arena);
        // What the worker's model already explained is not explained twice.
        let explained = "GPU memory exhausted: this segment grants 815 MiB to ONNX Runtime (BFCArena …)";
        let said = with_memory_hint(explained.into(), &cuda);
        assert_eq!(said.matches("GPU memory exhausted").count(), 1, "{said}");
        assert!(said.ends_with("the worker serves the next batch"), "{said}");
    }
}
