//! ONNX Runtime: finding the library, loading models, running them on [`Tensor`]s.
//!
//! `ort` loads `libonnxruntime` at run time (`load-dynamic`); no binary is downloaded. [`library_path`] finds
//! it: `JIG_ORT_LIB`, else `ORT_DYLIB_PATH`, else the `onnxruntime` wheel that `make setup` installs into
//! `.jig/python`, looked for from the working directory and from the executable upwards. One ONNX Runtime
//! environment serves the whole process ([`environment`]).

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use ort::session::Session;
use ort::session::builder::GraphOptimizationLevel;

use crate::{DType, Tensor};

mod values;

pub use values::{TensorView, TensorViewMut};
use values::{from_ort, ort_input, ort_tensor, ort_view, tensor_data, tensor_spec, value_over};

/// The ONNX Runtime version `make setup` installs and `ort` is built against.
pub const ORT_VERSION: &str = "1.31.1";

/// Where the set-up puts the library, relative to the project root.
const WHEEL_LIBRARY: &str = ".jig/python/onnxruntime/capi";

/// What fixes a missing or unusable library.
const FIX: &str = "run `make setup` in the jig checkout (it installs the `onnxruntime` wheel into .jig/python), \
                   or set JIG_ORT_LIB to a libonnxruntime.so of version 1.31";

/// Why a model could not be loaded or run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// The ONNX Runtime library was not found, or did not load or start.
    #[error("ONNX Runtime is not available: {detail}; {FIX}")]
    Library {
        /// Where it was looked for, or what loading it said.
        detail: String,
    },
    /// The model file could not be read.
    #[error("model `{model}`: cannot read {path}: {detail}")]
    Read {
        /// The model's name.
        model: String,
        /// The file.
        path: PathBuf,
        /// The system's answer.
        detail: String,
    },
    /// ONNX Runtime refused to build a session from the model.
    #[error("model `{model}` ({path}) is not a valid ONNX model: {detail}")]
    Invalid {
        /// The model's name.
        model: String,
        /// The file, or `<memory>` for [`Model::from_bytes`].
        path: PathBuf,
        /// ONNX Runtime's message.
        detail: String,
    },
    /// An input or output is not a tensor of a [`DType`] jig knows.
    #[error("model `{model}`: {io} `{name}` has type {ty}, which jig cannot pass through `infer`")]
    UnsupportedType {
        /// The model's name.
        model: String,
        /// `input` or `output`.
        io: &'static str,
        /// The input's or output's name.
        name: String,
        /// Its type, as ONNX Runtime prints it.
        ty: String,
    },
    /// The tensors given do not fit the model's declared inputs (count, element type, rank or a fixed
    /// dimension), or profiling inputs could not be made for them.
    #[error("model `{model}`: {detail}")]
    Input {
        /// The model's name.
        model: String,
        /// What does not fit, and what the model expects.
        detail: String,
    },
    /// The session could not be set up (its options, the CUDA execution provider), or a run failed: in this
    /// process, or in a worker ([`crate::worker::WorkerError`] converts to this).
    #[error("model `{model}` failed: {detail}")]
    Run {
        /// The model's name.
        model: String,
        /// What failed: ONNX Runtime's message, what was wrong with an output, or a worker's error.
        detail: String,
    },
}

/// The library to load: see the module documentation.
pub fn library_path() -> Result<PathBuf, ModelError> {
    for var in ["JIG_ORT_LIB", "ORT_DYLIB_PATH"] {
        if let Some(path) = std::env::var_os(var).filter(|v| !v.is_empty()) {
            return Ok(PathBuf::from(path));
        }
    }
    let file = format!("libonnxruntime.so.{ORT_VERSION}");
    let mut roots: Vec<PathBuf> = Vec::new();
    if let Ok(dir) = std::env::current_dir() {
        roots.extend(dir.ancestors().map(Path::to_path_buf));
    }
    if let Some(exe) = std::env::current_exe().ok().and_then(|e| e.canonicalize().ok()) {
        roots.extend(exe.ancestors().skip(1).map(Path::to_path_buf));
    }
    let candidates: Vec<PathBuf> = roots.iter().map(|r| r.join(WHEEL_LIBRARY).join(&file)).collect();
    candidates.iter().find(|p| p.is_file()).cloned().ok_or_else(|| ModelError::Library {
        detail: format!(
            "{file} not found under {WHEEL_LIBRARY} of the working directory, the executable's folder or their parents"
        ),
    })
}

/// The `LD_LIBRARY_PATH` of a process that runs ONNX Runtime on CUDA (a worker on a GPU segment, `jig profile
/// --counters`' child): the CUDA and cuDNN libraries that the `onnxruntime-gpu[cuda,cudnn]` wheel's
/// dependencies install beside it (`nvidia/*/lib` of the same package directory), which its CUDA provider
/// loads by name, then this process's own `LD_LIBRARY_PATH`.
pub fn cuda_library_path() -> Option<std::ffi::OsString> {
    // The library sits in PACKAGES/onnxruntime/capi/.
    let packages = library_path().ok().and_then(|lib| lib.ancestors().nth(3).map(Path::to_path_buf));
    let mut dirs: Vec<PathBuf> = packages
        .and_then(|packages| std::fs::read_dir(packages.join("nvidia")).ok())
        .into_iter()
        .flatten()
        .filter_map(|entry| Some(entry.ok()?.path().join("lib")))
        .filter(|lib| lib.is_dir())
        .collect();
    dirs.sort();
    dirs.extend(std::env::var_os("LD_LIBRARY_PATH").iter().flat_map(std::env::split_paths));
    std::env::join_paths(dirs).ok()
}

/// Why the CUDA provider did not load, and what installs it: the CPU build of ONNX Runtime lacks the provider
/// library; the CUDA build lacks a CUDA or cuDNN library when ONNX Runtime's error names one.
fn cuda_unavailable(error: &str) -> String {
    let install = format!(
        "install ONNX Runtime's CUDA build with the CUDA and cuDNN libraries it loads: `python3 -m pip install \
         --target .jig/python 'onnxruntime-gpu[cuda,cudnn]=={ORT_VERSION}'` (in a jig checkout, `JIG_ORT_GPU=1 make \
         setup`); or point JIG_ORT_LIB at a CUDA build's libonnxruntime.so, with the system's CUDA 13 and cuDNN 9 \
         libraries on LD_LIBRARY_PATH"
    );
    let library = library_path().map(|p| p.display().to_string()).unwrap_or_else(|_| "?".into());
    let provider = Path::new(&library).with_file_name("libonnxruntime_providers_cuda.so");
    if !provider.is_file() {
        return format!(
            "the CUDA execution provider is unavailable: the ONNX Runtime at {library} is a CPU build (no {} beside \
             it); {install}",
            provider.display()
        );
    }
    match missing_library(error) {
        Some(lib) => format!(
            "the CUDA execution provider is unavailable: {lib} is missing (searched {}); {install}",
            std::env::var("LD_LIBRARY_PATH").unwrap_or_default()
        ),
        _ => format!("the CUDA execution provider is unavailable ({error}); {install}"),
    }
}

/// The library a dynamic loader's error says it did not find ("LIB: cannot open shared object file").
fn missing_library(error: &str) -> Option<&str> {
    let (before, _) = error.split_once("cannot open shared object")?;
    before.split(|c: char| c.is_whitespace() || c == ':' || c == '\'' || c == '"').rfind(|w| w.contains(".so"))
}

/// The process's ONNX Runtime environment, loaded on first use.
pub fn environment() -> Result<&'static ort::environment::Environment, ModelError> {
    static ENV: OnceLock<Result<ort::environment::Environment, String>> = OnceLock::new();
    ENV.get_or_init(|| {
        let path = library_path().map_err(|e| match e {
            ModelError::Library { detail } => detail,
            other => other.to_string(),
        })?;
        let builder = ort::init_from(&path).map_err(|e| format!("cannot load {}: {e}", path.display()))?;
        builder.with_name("jig").build().map_err(|e| format!("{} loaded but failed to start: {e}", path.display()))
    })
    .as_ref()
    .map_err(|detail| ModelError::Library { detail: detail.clone() })
}

/// A declared model input or output: name, element type, and shape with `None` for dynamic dimensions.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TensorSpec {
    /// The name the model declares it by.
    pub name: String,
    /// The element type.
    pub dtype: DType,
    /// One entry per dimension: its fixed size, or `None` where any size goes (usually the batch dimension).
    pub shape: Vec<Option<u64>>,
}

impl TensorSpec {
    /// Whether the first dimension is dynamic, so requests can be stacked along it into one batch.
    pub fn batchable(&self) -> bool {
        matches!(self.shape.first(), Some(None))
    }
}

impl std::fmt::Display for TensorSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let dims: Vec<String> = self.shape.iter().map(|d| d.map_or("?".into(), |d| d.to_string())).collect();
        write!(f, "`{}`: {} [{}]", self.name, self.dtype.oip_name(), dims.join(", "))
    }
}

/// How a session is built.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SessionOptions {
    /// Intra-op threads (the cores of a CPU segment).
    pub threads: usize,
    /// Run on this CUDA device (`CUDA_VISIBLE_DEVICES` already narrows what the process sees) with at most
    /// this many bytes of GPU memory; `None` runs on the CPU.
    pub cuda: Option<(i32, Option<usize>)>,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions { threads: 1, cuda: None }
    }
}

/// A loaded ONNX model with its declared inputs and outputs. Runs one call at a time.
pub struct Model {
    name: String,
    session: Mutex<Session>,
    /// The CUDA arena's limit in bytes, for the error of a run that exhausts it.
    gpu_memory: Option<usize>,
    inputs: Vec<TensorSpec>,
    outputs: Vec<TensorSpec>,
    /// The shapes of the last run's inputs, cut to one row: what [`Model::release_memory`] runs.
    last_row: Mutex<Vec<Vec<u64>>>,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model").field("name", &self.name).field("inputs", &self.inputs).finish_non_exhaustive()
    }
}

impl Model {
    /// Load the model at `path`, calling it `name` in errors.
    pub fn load(name: &str, path: &Path, options: &SessionOptions) -> Result<Model, ModelError> {
        let bytes = std::fs::read(path).map_err(|e| ModelError::Read {
            model: name.into(),
            path: path.into(),
            detail: e.to_string(),
        })?;
        Self::from_bytes(name, &bytes, options).map_err(|e| {
            if let ModelError::Invalid { model, detail, .. } = e {
                ModelError::Invalid { model, path: path.into(), detail }
            } else {
                e
            }
        })
    }

    /// Load a model from its bytes.
    pub fn from_bytes(name: &str, bytes: &[u8], options: &SessionOptions) -> Result<Model, ModelError> {
        let env = environment()?;
        let invalid =
            |detail: String| ModelError::Invalid { model: name.into(), path: PathBuf::from("<memory>"), detail };
        let mut builder = Session::builder(env)
            .and_then(|b| Ok(b.with_optimization_level(GraphOptimizationLevel::All)?))
            .and_then(|b| Ok(b.with_intra_threads(options.threads.max(1))?))
            .and_then(|b| Ok(b.with_inter_threads(1)?))
            .map_err(|e| ModelError::Run { model: name.into(), detail: format!("session options: {e}") })?;
        if let Some((device, memory_limit)) = options.cuda {
            crate::device::sleep_while_waiting(device);
            // cuDNN's algorithm for each convolution is chosen by its heuristics, not by ONNX Runtime's default
            // exhaustive search, which times every algorithm at each new input shape: a voice's decoder meets a
            // new length with almost every line and a detector a new size with each image, so the search would
            // run on the serving path (the voice took 120-140 ms a line on an H200 under it).
            let mut cuda = ort::ep::CUDA::default()
                .with_device_id(device)
                .with_conv_algorithm_search(ort::ep::cuda::ConvAlgorithmSearch::Heuristic);
            if let Some(limit) = memory_limit {
                cuda = cuda.with_memory_limit(limit);
            }
            builder = builder
                .with_execution_providers([cuda.build().error_on_failure()])
                .map_err(|e| ModelError::Run { model: name.into(), detail: cuda_unavailable(&e.to_string()) })?;
        }
        let gpu_memory = options.cuda.and_then(|(_, limit)| limit);
        let session = builder.commit_from_memory(bytes).map_err(|e| match explain_load_error(&e, gpu_memory) {
            Some(detail) => ModelError::Run { model: name.into(), detail },
            None => invalid(e.to_string()),
        })?;
        let specs = |io: &'static str, outlets: &[ort::value::Outlet]| -> Result<Vec<TensorSpec>, ModelError> {
            outlets.iter().map(|o| tensor_spec(name, io, o.name(), o.dtype())).collect()
        };
        let inputs = specs("input", session.inputs())?;
        let outputs = specs("output", session.outputs())?;
        Ok(Model {
            name: name.into(),
            session: Mutex::new(session),
            gpu_memory,
            inputs,
            outputs,
            last_row: Mutex::default(),
        })
    }

    /// The name it was loaded under, as errors give it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The declared inputs, in the order [`Model::run`] takes them.
    pub fn inputs(&self) -> &[TensorSpec] {
        &self.inputs
    }

    /// The declared outputs, in the order [`Model::run`] returns them.
    pub fn outputs(&self) -> &[TensorSpec] {
        &self.outputs
    }

    /// Whether every input's first dimension is dynamic, so that requests can be batched.
    pub fn batchable(&self) -> bool {
        self.inputs.iter().all(TensorSpec::batchable)
    }

    /// Check `inputs` against the declared inputs: count, element types, ranks and fixed dimensions.
    pub fn check(&self, inputs: &[Tensor]) -> Result<(), ModelError> {
        check_inputs(&self.name, &self.inputs, inputs)
    }

    /// Run the model on `inputs` (in declared order; checked first) and return its outputs in declared order.
    ///
    /// No copy either way: ONNX Runtime reads each input in place, and each output is the buffer ONNX Runtime
    /// wrote, shared into the returned tensor.
    pub fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>, ModelError> {
        let views: Vec<TensorView<'_>> = inputs.iter().map(TensorView::of).collect();
        self.run_views(&views)
    }

    /// [`Model::run`] on borrowed bytes, such as a worker's shared region.
    pub fn run_views(&self, inputs: &[TensorView<'_>]) -> Result<Vec<Tensor>, ModelError> {
        check_parts(&self.name, &self.inputs, inputs.iter().map(|v| (v.dtype, v.shape)))?;
        self.remember_row(inputs.iter().map(|v| v.shape));
        let failed = |detail: String| ModelError::Run { model: self.name.clone(), detail };
        let values = inputs
            .iter()
            .map(ort_input)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| failed(format!("cannot create an input tensor: {e}")))?;
        let mut session = self.session.lock().unwrap_or_else(|p| p.into_inner());
        let outputs =
            session.run(values.as_slice()).map_err(|e| failed(explain_run_error(e.to_string(), self.gpu_memory)))?;
        outputs.into_iter().map(|(_, v)| from_ort(&self.name, v)).collect()
    }

    /// [`Model::run_views`] with ONNX Runtime writing each output into `places` (one per declared output, in
    /// order), such as a worker's shared region: no allocation and no copy out. Per output, `None` when it was
    /// written in place, else the output where ONNX Runtime put it. ONNX Runtime refuses a place whose shape
    /// is not the output's: the run then fails, and [`Model::run_views`] is the way to run it.
    pub fn run_into(
        &self,
        inputs: &[TensorView<'_>],
        places: &mut [TensorViewMut<'_>],
    ) -> Result<Vec<Option<Tensor>>, ModelError> {
        // SAFETY: the run is dropped before the borrows of `inputs` and `places` end.
        let bound = unsafe { self.bind(inputs, places) }?;
        self.run_bound(&bound)
    }

    /// [`Model::run_into`] prepared to run again: ONNX Runtime's values over `inputs` and `places` and the run
    /// options that bind the outputs, made once for batches that keep their memory and shapes (a worker's, in
    /// its shared regions), which [`Model::run_bound`] then runs over whatever that memory holds, with no value
    /// to create (1.4 µs of a worker's batch before, on the machine of BENCHMARKS.md).
    ///
    /// # Safety
    /// The bytes of `inputs` and `places` must stay mapped until the [`BoundRun`] is dropped, and nothing else may
    /// write them, or read `places`, while it runs.
    pub unsafe fn bind(
        &self,
        inputs: &[TensorView<'_>],
        places: &mut [TensorViewMut<'_>],
    ) -> Result<BoundRun, ModelError> {
        check_parts(&self.name, &self.inputs, inputs.iter().map(|v| (v.dtype, v.shape)))?;
        self.remember_row(inputs.iter().map(|v| v.shape));
        let failed = |detail: String| ModelError::Run { model: self.name.clone(), detail };
        if places.len() != self.outputs.len() {
            return Err(failed(format!("{} places for {} outputs", places.len(), self.outputs.len())));
        }
        let mut values = Vec::with_capacity(inputs.len());
        let mut copies = Vec::new();
        for view in inputs {
            // SAFETY: the caller keeps the bytes mapped for as long as the run lives; the shape is read only while
            // the value is created.
            let (data, shape): (&'static [u8], &'static [u64]) = unsafe {
                (
                    std::slice::from_raw_parts(view.data.as_ptr(), view.data.len()),
                    std::slice::from_raw_parts(view.shape.as_ptr(), view.shape.len()),
                )
            };
            let input = TensorView { dtype: view.dtype, shape, data };
            let cannot = |e: ort::Error| failed(format!("cannot create an input tensor: {e}"));
            match ort_view(&input).map_err(cannot)? {
                Some(value) => values.push(value),
                None => {
                    // Filled by `run_bound` before each run.
                    let mut copy = ort_tensor(&input).map_err(cannot)?;
                    copies.push(InputCopy { from: data.as_ptr(), to: copy.data_ptr_mut().cast(), len: data.len() });
                    values.push(copy.into_dyn().into());
                }
            }
        }
        let mut selector = ort::session::OutputSelector::default();
        let mut places_at = Vec::with_capacity(places.len());
        for (spec, place) in self.outputs.iter().zip(places.iter_mut()) {
            places_at.push(place.data.as_ptr());
            if place.dtype == spec.dtype && !place.data.is_empty() {
                // SAFETY: the caller keeps `place`'s bytes for the run, which holds the value, and writes or reads
                // them only between runs.
                let value = unsafe { value_over(place) }.map_err(|e| failed(format!("cannot bind an output: {e}")))?;
                selector = selector.preallocate(spec.name.as_str(), value);
            }
        }
        let options =
            ort::session::RunOptions::new().map_err(|e| failed(format!("run options: {e}")))?.with_outputs(selector);
        Ok(BoundRun { values, copies, options, places_at })
    }

    /// Run `bound` (see [`Model::bind`]) on what its inputs hold now; per output as [`Model::run_into`] answers.
    pub fn run_bound(&self, bound: &BoundRun) -> Result<Vec<Option<Tensor>>, ModelError> {
        let failed = |detail: String| ModelError::Run { model: self.name.clone(), detail };
        for copy in bound.copies.iter().filter(|c| c.len > 0) {
            // SAFETY: `from` is an input's bytes, kept by `bind`'s caller; `to` is the CPU buffer of the value made
            // to hold their copy, as long (same element type and shape), owned by `bound`; the two cannot overlap.
            unsafe { std::ptr::copy_nonoverlapping(copy.from, copy.to, copy.len) };
        }
        let mut session = self.session.lock().unwrap_or_else(|p| p.into_inner());
        let outputs = session
            .run_with_options(bound.values.as_slice(), &bound.options)
            .map_err(|e| failed(explain_run_error(e.to_string(), self.gpu_memory)))?;
        outputs
            .into_iter()
            .zip(&bound.places_at)
            .map(|((_, value), &place)| {
                if tensor_data(&value) == Some(place) && !place.is_null() {
                    Ok(None)
                } else {
                    from_ort(&self.name, value).map(Some)
                }
            })
            .collect()
    }

    /// Hand back the memory its CPU arena grew to: ONNX Runtime keeps the arena at its peak (the activations of
    /// the largest batch it ran) and shrinks it only at the end of a run that asks for it. This is such a run, of
    /// one row of zeros shaped as the last run's inputs, for an instance that went idle; it costs that run. Its
    /// own outputs take the smallest free chunks, so the regions a burst added are free and go back. Nothing to
    /// release before a first run.
    pub fn release_memory(&self) -> Result<(), ModelError> {
        let failed = |detail: String| ModelError::Run { model: self.name.clone(), detail };
        let row = self.last_row.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if row.is_empty() {
            return Ok(());
        }
        let zeros: Vec<Vec<u8>> = self
            .inputs
            .iter()
            .zip(&row)
            .map(|(spec, shape)| vec![0; spec.dtype.bytes_for(shape).unwrap_or(0)])
            .collect();
        let mut values = Vec::with_capacity(zeros.len());
        for ((spec, shape), data) in self.inputs.iter().zip(&row).zip(&zeros) {
            let view = TensorView::new(spec.dtype, shape, data)
                .ok_or_else(|| failed(format!("input `{}` of shape {shape:?} overflows memory", spec.name)))?;
            values.push(ort_input(&view).map_err(|e| failed(format!("cannot create an input tensor: {e}")))?);
        }
        let mut options = ort::session::RunOptions::new().map_err(|e| failed(format!("run options: {e}")))?;
        options
            .set("memory.enable_memory_arena_shrinkage", "cpu:0")
            .map_err(|e| failed(format!("run options: {e}")))?;
        let mut session = self.session.lock().unwrap_or_else(|p| p.into_inner());
        session.run_with_options(values.as_slice(), &options).map_err(|e| failed(e.to_string()))?;
        Ok(())
    }

    /// Keep the shapes of a run's inputs, at one row where an input has a batch dimension.
    fn remember_row<'a>(&self, shapes: impl Iterator<Item = &'a [u64]>) {
        let mut row = self.last_row.lock().unwrap_or_else(|p| p.into_inner());
        row.resize(self.inputs.len(), Vec::new());
        for ((kept, shape), spec) in row.iter_mut().zip(shapes).zip(&self.inputs) {
            let one_row = shape.iter().enumerate().map(|(i, &d)| if i == 0 && spec.batchable() { 1 } else { d });
            if !kept.iter().copied().eq(one_row.clone()) {
                *kept = one_row.collect();
            }
        }
    }
}

/// A run bound to the memory of its inputs and outputs (see [`Model::bind`]).
pub struct BoundRun {
    values: Vec<ort::session::SessionInputValue<'static>>,
    /// Inputs ONNX Runtime cannot read in place (unaligned, or `f16`), copied into their values before each run.
    copies: Vec<InputCopy>,
    options: ort::session::RunOptions<ort::session::HasSelectedOutputs>,
    /// Where each output's place starts.
    places_at: Vec<*const u8>,
}

impl std::fmt::Debug for BoundRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoundRun").field("inputs", &self.values.len()).field("places_at", &self.places_at).finish()
    }
}

/// An input's bytes and the buffer of the value that holds their copy.
struct InputCopy {
    from: *const u8,
    to: *mut u8,
    len: usize,
}

/// A failed run's message, with what to do when it ran out of the GPU memory its segment grants (`gpu_memory`,
/// the CUDA arena's limit; `None` on the CPU).
fn explain_run_error(detail: String, gpu_memory: Option<usize>) -> String {
    match gpu_memory {
        Some(limit) if gpu_memory_exhausted(&detail) => format!(
            "{GPU_MEMORY_EXHAUSTED}: this segment grants {} MiB to ONNX Runtime, and this batch needs more; plan \
             smaller batches or give the model a larger segment ({detail})",
            limit >> 20
        ),
        _ => detail,
    }
}

/// A failed load's message when it ran out of the GPU memory its segment grants (`gpu_memory`): not the model's
/// fault, as other load errors are.
fn explain_load_error(error: &impl std::fmt::Display, gpu_memory: Option<usize>) -> Option<String> {
    let detail = error.to_string();
    let limit = gpu_memory.filter(|_| gpu_memory_exhausted(&detail))?;
    Some(format!(
        "{GPU_MEMORY_EXHAUSTED} while loading: this segment grants {} MiB to ONNX Runtime, and the model needs more; \
         give it a larger segment ({detail})",
        limit >> 20
    ))
}

/// How jig's explanations of an error that ran out of GPU memory begin.
pub(crate) const GPU_MEMORY_EXHAUSTED: &str = "GPU memory exhausted";

/// Whether an error of ONNX Runtime (its CUDA arena), CUDA or cuDNN says the GPU's memory ran out.
pub(crate) fn gpu_memory_exhausted(detail: &str) -> bool {
    let signs = [
        "bfcarena",
        "available memory of",
        "out of memory",
        "failed to allocate memory",
        "cudaerrormemoryallocation",
        "alloc_failed",
    ];
    let lower = detail.to_lowercase();
    signs.iter().any(|sign| lower.contains(sign))
}

/// Check `inputs` against `specs` (see [`Model::check`]).
pub fn check_inputs(model: &str, specs: &[TensorSpec], inputs: &[Tensor]) -> Result<(), ModelError> {
    check_parts(model, specs, inputs.iter().map(|t| (t.dtype(), t.shape())))
}

fn check_parts<'a>(
    model: &str,
    specs: &[TensorSpec],
    inputs: impl ExactSizeIterator<Item = (DType, &'a [u64])>,
) -> Result<(), ModelError> {
    let error = |detail: String| ModelError::Input { model: model.into(), detail };
    if inputs.len() != specs.len() {
        let expected: Vec<String> = specs.iter().map(ToString::to_string).collect();
        return Err(error(format!("expects {} inputs ({}), got {}", specs.len(), expected.join("; "), inputs.len())));
    }
    for (spec, (dtype, shape)) in specs.iter().zip(inputs) {
        let shape_ok = spec.shape.len() == shape.len()
            && spec.shape.iter().zip(shape).all(|(want, got)| want.is_none_or(|w| w == *got));
        if spec.dtype != dtype || !shape_ok {
            let dtype = dtype.oip_name();
            return Err(error(format!("input {spec} cannot take a {dtype} tensor of shape {shape:?}")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exhausted_gpu_arena_says_how_much_the_segment_grants() {
        // ONNX Runtime's message on an H100 with an 815 MiB arena (`mps:0:1`), det at batch 16.
        let said = "Non-zero status code returned while running Clip node. Name:'p2o.Clip.2' Status Message: \
                    bfc_arena.cc:360 void* onnxruntime::BFCArena::AllocateRawInternal(size_t, bool, \
                    onnxruntime::Stream*) Available memory of 0 is smaller than requested bytes of 209715200";
        assert_eq!(explain_run_error(said.into(), None), said, "a CPU session has no GPU arena to blame");
        let explained = explain_run_error(said.into(), Some(815 << 20));
        assert!(explained.starts_with("GPU memory exhausted: this segment grants 815 MiB"), "{explained}");
        assert!(explained.ends_with(&format!("({said})")), "{explained}");
        assert_eq!(explain_run_error("shape mismatch".into(), Some(815 << 20)), "shape mismatch");
        let loading = explain_load_error(&"CUDA failure 2: out of memory", Some(815 << 20)).unwrap();
        assert!(loading.starts_with("GPU memory exhausted while loading: this segment grants 815 MiB"), "{loading}");
        assert_eq!(explain_load_error(&"Protobuf parsing failed", Some(815 << 20)), None, "the model's fault");
        assert_eq!(explain_load_error(&"CUDA failure 2: out of memory", None), None, "a CPU session");
        // CUDA's and cuDNN's own words for it.
        for said in ["CUDA failure 2: out of memory", "CUDNN failure 4: CUDNN_STATUS_ALLOC_FAILED"] {
            assert!(explain_run_error(said.into(), Some(1 << 30)).starts_with("GPU memory exhausted"), "{said}");
        }
    }

    #[test]
    fn a_missing_cuda_provider_says_what_to_install() {
        // The CPU wheel `make setup` installs has no CUDA provider library beside it.
        let detail = cuda_unavailable("Failed to load libonnxruntime_providers_cuda.so");
        assert!(
            detail.contains("is a CPU build") && detail.contains("'onnxruntime-gpu[cuda,cudnn]==1.31.1'"),
            "{detail}"
        );
        let loader = "Failed to load library libonnxruntime_providers_cuda.so with error: libcublasLt.so.13: \
                      cannot open shared object file: No such file or directory";
        assert_eq!(missing_library(loader), Some("libcublasLt.so.13"));
        assert_eq!(missing_library("CUDA failure 100: no CUDA-capable device is detected"), None);
    }
}
