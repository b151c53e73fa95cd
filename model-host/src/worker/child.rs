//! The worker's side of [`crate::worker`]: the process `jig worker --socket PATH` runs, serving one model for
//! its parent over the socket and the shared region.

use std::collections::{HashMap, HashSet};
use std::io::{self, BufReader};
use std::os::unix::net::UnixStream;
use std::path::Path;

use super::mailbox::{Mailbox, SPIN};
use super::pin::HostPin;
use super::protocol::{Reply, Request, SharedTensor, read_frame, write_frame};
use crate::Tensor;
use crate::onnx::{BoundRun, Model, ModelError, TensorView, TensorViewMut};
use crate::regions::Region;
use crate::shm::Shm;

/// The worker's side: connect to the parent's socket at `socket`, load the model the first message names,
/// open its mailbox, and serve batches from it until the parent closes the socket (then return `Ok`). A model
/// that fails to load is reported to the parent and ends the worker with `Ok`; a failed batch is answered with
/// `Failed`. Malformed messages from the parent end the worker with an `InvalidData` error.
pub fn serve(socket: &Path) -> io::Result<()> {
    let stream = UnixStream::connect(socket)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot connect to {}: {e}", socket.display())))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut buf = Vec::new();
    let mut out = Vec::new();
    let (model, pin, mut mailbox) = match read_frame::<Request>(&mut reader, &mut buf) {
        Ok(Some(Request::Load { model_name, model_path, options, mailbox })) => {
            let opened =
                Mailbox::open(&mailbox).map_err(|e| format!("cannot open the mailbox {}: {e}", mailbox.display()));
            let loaded = opened.and_then(|mailbox| {
                let model = Model::load(&model_name, &model_path, &options).map_err(|e| e.to_string())?;
                Ok((model, mailbox))
            });
            match loaded {
                Ok((model, mailbox)) => {
                    (model, options.cuda.and_then(|(device, _)| HostPin::for_device(device)), mailbox)
                }
                Err(error) => {
                    return write_frame(&stream, &mut out, &Reply::LoadFailed { error }).or_else(gone);
                }
            }
        }
        Ok(Some(_)) => return Err(io::Error::new(io::ErrorKind::InvalidData, "the parent sent a batch before Load")),
        Ok(None) => return Ok(()),
        Err(e) => return gone(e),
    };
    let loaded = Reply::Loaded { inputs: model.inputs().to_vec(), outputs: model.outputs().to_vec() };
    write_frame(&stream, &mut out, &loaded).or_else(gone)?;
    let mut regions = Mapped::new(pin);
    // Outputs of a run answered `Sized`, until the parent places them.
    let mut unplaced: Option<(u64, Vec<Tensor>)> = None;
    loop {
        let reply = match mailbox.receive::<Request>(&mut reader, &mut buf, SPIN) {
            Ok(Some(Request::Run { id, open, close, inputs, outputs })) => {
                unplaced = None;
                let ran = regions.update(&open, &close).and_then(|()| regions.run(&model, &inputs, outputs.as_deref()));
                match ran {
                    Ok(None) => Reply::Done { id },
                    Ok(Some(outputs)) => {
                        let sizes = outputs.iter().map(|t| (t.dtype(), t.shape().to_vec())).collect();
                        unplaced = Some((id, outputs));
                        Reply::Sized { id, outputs: sizes }
                    }
                    Err(error) => Reply::Failed { id, error },
                }
            }
            Ok(Some(Request::Place { id, open, outputs })) => match unplaced.take() {
                Some((ran, tensors)) if ran == id => {
                    match regions.update(&open, &[]).and_then(|()| regions.place(&tensors, &outputs)) {
                        Ok(()) => Reply::Done { id },
                        Err(error) => Reply::Failed { id, error },
                    }
                }
                _ => return Err(io::Error::new(io::ErrorKind::InvalidData, "Place for a run with no outputs held")),
            },
            Ok(Some(Request::Release { id, close })) => {
                let released =
                    regions.update(&[], &close).and_then(|()| model.release_memory().map_err(|e| e.to_string()));
                crate::instance::release_freed_memory();
                match released {
                    Ok(()) => Reply::Done { id },
                    Err(error) => Reply::Failed { id, error },
                }
            }
            Ok(Some(Request::Load { .. })) => {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "the parent sent a second Load"));
            }
            Ok(None) => return Ok(()),
            Err(e) => return gone(e),
        };
        mailbox.send(&reply, &stream).or_else(gone)?;
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        self.bound.clear();
        let ids: Vec<u64> = self.regions.keys().copied().collect();
        for id in ids {
            self.close(id);
        }
    }
}

/// A parent that went away is the normal way for a worker to end.
fn gone(e: io::Error) -> io::Result<()> {
    match e.kind() {
        io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset | io::ErrorKind::UnexpectedEof => Ok(()),
        _ => Err(e),
    }
}

/// Bound runs a worker keeps (see [`Mapped::bound`]).
const BOUND_KEPT: usize = 4;

/// A run bound to the places of its inputs and outputs.
struct Bound {
    inputs: Vec<SharedTensor>,
    places: Vec<SharedTensor>,
    run: BoundRun,
}

/// The parent's regions as this process maps them.
struct Mapped {
    /// The last few batches' runs, bound to their input and output places, the latest first: a batch over the
    /// same places as one of them (a busy instance's batches take turns over a few regions) runs it again.
    /// Dropped whenever a region is mapped or unmapped, before the memory they read goes.
    bound: Vec<Bound>,
    regions: HashMap<u64, Shm>,
    /// Whether ONNX Runtime writes outputs into their places; off once a run that places them failed where
    /// the same run unplaced succeeded (an execution provider that cannot, an output whose shape varies).
    bind_outputs: bool,
    /// For a model on CUDA: page-locks each region while it is mapped, and the ids of those it locked.
    pin: Option<(HostPin, HashSet<u64>)>,
}

impl Mapped {
    fn new(pin: Option<HostPin>) -> Mapped {
        Mapped { bound: Vec::new(), regions: HashMap::new(), bind_outputs: true, pin: pin.map(|p| (p, HashSet::new())) }
    }

    fn update(&mut self, open: &[Region], close: &[u64]) -> Result<(), String> {
        if !open.is_empty() || !close.is_empty() {
            self.bound.clear();
        }
        for id in close {
            self.close(*id);
        }
        for region in open {
            self.close(region.id);
            let mut shm = Shm::open(&region.path, region.size)
                .map_err(|e| format!("cannot open the shared region {}: {e}", region.path.display()))?;
            if let Some((pin, pinned)) = &mut self.pin
                && pin.register(shm.bytes_mut())
            {
                pinned.insert(region.id);
            }
            self.regions.insert(region.id, shm);
        }
        Ok(())
    }

    fn close(&mut self, id: u64) {
        if let Some(shm) = self.regions.remove(&id) {
            self.unpin(id, shm);
        }
    }

    /// Unlock `shm` if it was locked, before it is unmapped (dropped).
    fn unpin(&mut self, id: u64, mut shm: Shm) {
        if let Some((pin, pinned)) = &mut self.pin
            && pinned.remove(&id)
        {
            pin.unregister(shm.bytes_mut());
        }
    }

    /// The bytes of `place`, as a raw range: inputs and outputs lie in different regions, borrowed together.
    fn bytes(&mut self, place: &SharedTensor, what: &str) -> Result<*mut [u8], String> {
        let shm = self
            .regions
            .get_mut(&place.region)
            .ok_or_else(|| format!("{what} lies in unknown region {}", place.region))?;
        let range = place
            .range(shm.len())
            .ok_or_else(|| format!("{what} {place:?} lies outside its {}-byte region", shm.len()))?;
        Ok(&mut shm.bytes_mut()[range] as *mut [u8])
    }

    /// Put first in [`Mapped::bound`] the run of `inputs` into `places`, bound now unless it is there already.
    /// A place outside the mapped regions is an error (outer); ONNX Runtime refusing to bind them is another
    /// (inner), after which the outputs go unplaced.
    fn bind(
        &mut self,
        model: &Model,
        inputs: &[SharedTensor],
        places: &[SharedTensor],
    ) -> Result<Result<(), ModelError>, String> {
        if let Some(at) = self.bound.iter().position(|b| b.inputs == inputs && b.places == places) {
            let hit = self.bound.remove(at);
            self.bound.insert(0, hit);
            return Ok(Ok(()));
        }
        let input_bytes = inputs.iter().map(|s| self.bytes(s, "an input")).collect::<Result<Vec<_>, _>>()?;
        let place_bytes = places.iter().map(|s| self.bytes(s, "an output")).collect::<Result<Vec<_>, _>>()?;
        // SAFETY: each pointer is a range of a mapping in `self.regions`, which keeps it until `update` or `drop`
        // unmaps it, and both drop the bound runs first. The parent gives every output its own region, apart from
        // the inputs', so the shared and the mutable borrows do not overlap; and it touches none of them while a
        // run is in flight.
        let views = views(inputs, &input_bytes, |bytes| unsafe { &*bytes })?;
        let mut targets = places
            .iter()
            .zip(&place_bytes)
            .map(|(place, &bytes)| {
                TensorViewMut::new(place.dtype, &place.shape, unsafe { &mut *bytes })
                    .ok_or_else(|| format!("output place {place:?} does not hold its shape's elements"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        // SAFETY: as above.
        Ok(unsafe { model.bind(&views, &mut targets) }.map(|run| {
            self.bound.truncate(BOUND_KEPT - 1);
            self.bound.insert(0, Bound { inputs: inputs.to_vec(), places: places.to_vec(), run });
        }))
    }

    /// Run the model on the inputs where they lie. With `places`, it writes the outputs there and answers
    /// `None`; else (or when they do not fit) it answers the outputs, to be placed.
    fn run(
        &mut self,
        model: &Model,
        inputs: &[SharedTensor],
        places: Option<&[SharedTensor]>,
    ) -> Result<Option<Vec<Tensor>>, String> {
        let Some(places) = places.filter(|_| self.bind_outputs) else {
            return self.run_unplaced(model, inputs).map(Some);
        };
        let written = match self.bind(model, inputs, places)? {
            Ok(()) => model.run_bound(&self.bound[0].run),
            Err(failed) => Err(failed),
        };
        let written = match written {
            Ok(written) => written,
            Err(failed) => {
                self.bound.clear();
                let outputs = self.run_unplaced(model, inputs)?;
                eprintln!("jig worker: outputs go through a copy from now on: placing them failed ({failed})");
                self.bind_outputs = false;
                return Ok(Some(outputs));
            }
        };
        if written.iter().all(Option::is_none) {
            return Ok(None);
        }
        // Some output came out another shape than the parent expected: every output goes back to be placed.
        let place_bytes = places.iter().map(|s| self.bytes(s, "an output")).collect::<Result<Vec<_>, _>>()?;
        written
            .into_iter()
            .zip(places)
            .zip(&place_bytes)
            .map(|((tensor, place), &bytes)| match tensor {
                Some(tensor) => Ok(tensor),
                // SAFETY: as above; the run is over, so this only reads what it wrote.
                None => Tensor::new(place.dtype, place.shape.clone(), unsafe { (*bytes).to_vec() })
                    .map_err(|e| e.to_string()),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    /// Run the model on the inputs where they lie, its outputs where ONNX Runtime puts them.
    fn run_unplaced(&mut self, model: &Model, inputs: &[SharedTensor]) -> Result<Vec<Tensor>, String> {
        let input_bytes = inputs.iter().map(|s| self.bytes(s, "an input")).collect::<Result<Vec<_>, _>>()?;
        // SAFETY: each pointer is a range of a mapping that lives in `self.regions` for this whole call, which the
        // parent does not touch until this run is answered.
        let views = views(inputs, &input_bytes, |bytes| unsafe { &*bytes })?;
        model.run_views(&views).map_err(|e| e.to_string())
    }

    /// Copy `outputs` to where the parent placed them.
    fn place(&mut self, outputs: &[Tensor], places: &[SharedTensor]) -> Result<(), String> {
        if outputs.len() != places.len() {
            return Err(format!("{} places for {} outputs", places.len(), outputs.len()));
        }
        for (tensor, place) in outputs.iter().zip(places) {
            let bytes = self.bytes(place, "an output")?;
            // SAFETY: a range of a live mapping, borrowed alone.
            let bytes = unsafe { &mut *bytes };
            if bytes.len() != tensor.data().len() {
                return Err(format!("output place {place:?} is not the output's {} bytes", tensor.data().len()));
            }
            bytes.copy_from_slice(tensor.data());
        }
        Ok(())
    }
}

/// Views of `inputs` over their bytes.
fn views<'a>(
    inputs: &'a [SharedTensor],
    bytes: &[*mut [u8]],
    borrow: impl Fn(*mut [u8]) -> &'a [u8],
) -> Result<Vec<TensorView<'a>>, String> {
    inputs
        .iter()
        .zip(bytes)
        .map(|(place, &bytes)| {
            TensorView::new(place.dtype, &place.shape, borrow(bytes))
                .ok_or_else(|| format!("input {place:?} does not hold its shape's elements"))
        })
        .collect()
}
