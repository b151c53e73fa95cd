//! The worker's side of [`crate::worker`]: the process `jig worker --socket PATH` runs, serving one model for
//! its parent over the socket and the shared region.

use std::collections::{HashMap, HashSet};
use std::io::{self, BufReader};
use std::os::unix::net::UnixStream;
use std::path::Path;

use super::mailbox::{Mailbox, SPIN};
use super::pin::HostPin;
use super::protocol::{Region, Reply, Request, Slot, read_frame, write_frame};
use super::shm::Shm;
use crate::Tensor;
use crate::onnx::{Model, TensorView, TensorViewMut};

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

/// The parent's regions as this process maps them.
struct Mapped {
    regions: HashMap<u64, Shm>,
    /// Whether ONNX Runtime writes outputs into their places; off once a run that places them failed where
    /// the same run unplaced succeeded (an execution provider that cannot, an output whose shape varies).
    bind_outputs: bool,
    /// For a model on CUDA: page-locks each region while it is mapped, and the ids of those it locked.
    pin: Option<(HostPin, HashSet<u64>)>,
}

impl Mapped {
    fn new(pin: Option<HostPin>) -> Mapped {
        Mapped { regions: HashMap::new(), bind_outputs: true, pin: pin.map(|p| (p, HashSet::new())) }
    }

    fn update(&mut self, open: &[Region], close: &[u64]) -> Result<(), String> {
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

    /// The bytes of `slot`, as a raw range: inputs and outputs lie in different regions, borrowed together.
    fn bytes(&mut self, slot: &Slot, what: &str) -> Result<*mut [u8], String> {
        let shm = self
            .regions
            .get_mut(&slot.region)
            .ok_or_else(|| format!("{what} lies in unknown region {}", slot.region))?;
        let range = slot
            .range(shm.len())
            .ok_or_else(|| format!("{what} {slot:?} lies outside its {}-byte region", shm.len()))?;
        Ok(&mut shm.bytes_mut()[range] as *mut [u8])
    }

    /// Run the model on the inputs where they lie. With `places`, it writes the outputs there and answers
    /// `None`; else (or when they do not fit) it answers the outputs, to be placed.
    fn run(&mut self, model: &Model, inputs: &[Slot], places: Option<&[Slot]>) -> Result<Option<Vec<Tensor>>, String> {
        let input_bytes = inputs.iter().map(|s| self.bytes(s, "an input")).collect::<Result<Vec<_>, _>>()?;
        let place_bytes =
            places.unwrap_or(&[]).iter().map(|s| self.bytes(s, "an output")).collect::<Result<Vec<_>, _>>()?;
        // SAFETY: each pointer is a range of a mapping that lives in `self.regions` for this whole call. The
        // parent gives every output its own region, apart from the inputs', so the shared and the mutable
        // borrows below do not overlap; and the parent touches none of them until this run is answered.
        let views = inputs
            .iter()
            .zip(&input_bytes)
            .map(|(slot, &bytes)| {
                TensorView::new(slot.dtype, &slot.shape, unsafe { &*bytes })
                    .ok_or_else(|| format!("input {slot:?} does not hold its shape's elements"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let Some(places) = places.filter(|_| self.bind_outputs) else {
            return model.run_views(&views).map(Some).map_err(|e| e.to_string());
        };
        let mut targets = places
            .iter()
            .zip(&place_bytes)
            .map(|(slot, &bytes)| {
                TensorViewMut::new(slot.dtype, &slot.shape, unsafe { &mut *bytes })
                    .ok_or_else(|| format!("output place {slot:?} does not hold its shape's elements"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let written = match model.run_into(&views, &mut targets) {
            Ok(written) => written,
            Err(bound) => {
                drop(targets);
                let outputs = model.run_views(&views).map_err(|e| e.to_string())?;
                eprintln!("jig worker: outputs go through a copy from now on: placing them failed ({bound})");
                self.bind_outputs = false;
                return Ok(Some(outputs));
            }
        };
        if written.iter().all(Option::is_none) {
            return Ok(None);
        }
        // Some output came out another shape than the parent expected: every output goes back to be placed.
        let outputs = written
            .into_iter()
            .zip(places)
            .zip(&place_bytes)
            .map(|((tensor, slot), &bytes)| match tensor {
                Some(tensor) => Ok(tensor),
                // SAFETY: as above; the run is over, so this only reads what it wrote.
                None => {
                    Tensor::new(slot.dtype, slot.shape.clone(), unsafe { (*bytes).to_vec() }).map_err(|e| e.to_string())
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(outputs))
    }

    /// Copy `outputs` to where the parent placed them.
    fn place(&mut self, outputs: &[Tensor], places: &[Slot]) -> Result<(), String> {
        if outputs.len() != places.len() {
            return Err(format!("{} places for {} outputs", places.len(), outputs.len()));
        }
        for (tensor, slot) in outputs.iter().zip(places) {
            let bytes = self.bytes(slot, "an output")?;
            // SAFETY: a range of a live mapping, borrowed alone.
            let bytes = unsafe { &mut *bytes };
            if bytes.len() != tensor.data().len() {
                return Err(format!("output place {slot:?} is not the output's {} bytes", tensor.data().len()));
            }
            bytes.copy_from_slice(tensor.data());
        }
        Ok(())
    }
}
