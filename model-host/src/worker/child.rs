//! The worker's side of [`crate::worker`]: the process `jig worker --socket PATH` runs, serving one model for
//! its parent over the socket and the shared region.

use std::io::{self, BufReader};
use std::os::unix::net::UnixStream;
use std::path::Path;

use super::ALIGN;
use super::protocol::{Reply, Request, Slot, read_frame, write_frame};
use super::shm::Shm;
use crate::onnx::{Model, TensorView};

/// The worker's side: connect to the parent's socket at `socket`, load the model the first message names,
/// and serve batches until the parent closes the socket (then return `Ok`). A model that fails to load is
/// reported to the parent and ends the worker with `Ok`; a failed batch is answered with `Failed`. Malformed
/// messages from the parent end the worker with an `InvalidData` error.
pub fn serve(socket: &Path) -> io::Result<()> {
    let stream = UnixStream::connect(socket)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot connect to {}: {e}", socket.display())))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut buf = Vec::new();
    let mut out = Vec::new();
    let (model, mut shm) = match read_frame::<Request>(&mut reader, &mut buf) {
        Ok(Some(Request::Load { model_name, model_path, options, shm_path, shm_size })) => {
            let loaded = Shm::open(&shm_path, shm_size)
                .map_err(|e| format!("cannot open the shared region {}: {e}", shm_path.display()))
                .and_then(|shm| Ok((Model::load(&model_name, &model_path, &options).map_err(|e| e.to_string())?, shm)));
            match loaded {
                Ok(loaded) => loaded,
                Err(error) => return write_frame(&stream, &mut out, &Reply::LoadFailed { error }).or_else(gone),
            }
        }
        Ok(Some(Request::Run { .. })) => {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "the parent sent Run before Load"));
        }
        Ok(None) => return Ok(()),
        Err(e) => return gone(e),
    };
    let loaded = Reply::Loaded { inputs: model.inputs().to_vec(), outputs: model.outputs().to_vec() };
    write_frame(&stream, &mut out, &loaded).or_else(gone)?;
    loop {
        let reply = match read_frame::<Request>(&mut reader, &mut buf) {
            Ok(Some(Request::Run { id, shm_size, inputs, output_offset })) => {
                match run_batch(&model, &mut shm, shm_size, &inputs, output_offset) {
                    Ok(outputs) => Reply::Done { id, shm_size: shm.len() as u64, outputs },
                    Err(error) => Reply::Failed { id, error },
                }
            }
            Ok(Some(Request::Load { .. })) => {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "the parent sent a second Load"));
            }
            Ok(None) => return Ok(()),
            Err(e) => return gone(e),
        };
        write_frame(&stream, &mut out, &reply).or_else(gone)?;
    }
}

/// A parent that went away is the normal way for a worker to end.
fn gone(e: io::Error) -> io::Result<()> {
    match e.kind() {
        io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset | io::ErrorKind::UnexpectedEof => Ok(()),
        _ => Err(e),
    }
}

fn run_batch(
    model: &Model,
    shm: &mut Shm,
    shm_size: u64,
    inputs: &[Slot],
    output_offset: u64,
) -> Result<Vec<Slot>, String> {
    shm.remap(shm_size).map_err(|e| format!("shared region: {e}"))?;
    let region = shm.bytes();
    // ONNX Runtime reads the inputs where the parent wrote them.
    let views = inputs
        .iter()
        .map(|slot| {
            let range = slot
                .range(region.len())
                .ok_or_else(|| format!("input {slot:?} lies outside the {}-byte shared region", region.len()))?;
            TensorView::new(slot.dtype, &slot.shape, &region[range])
                .ok_or_else(|| format!("input {slot:?} does not hold its shape's elements"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let outputs = model.run_views(&views).map_err(|e| e.to_string())?;
    drop(views);

    let mut at = usize::try_from(output_offset).map_err(|_| "output offset out of range".to_string())?;
    let mut slots = Vec::with_capacity(outputs.len());
    let mut placed = Vec::with_capacity(outputs.len());
    for tensor in &outputs {
        at = at.next_multiple_of(ALIGN);
        placed.push(at);
        at = at.checked_add(tensor.data().len()).ok_or("outputs too large")?;
    }
    shm.ensure(at).map_err(|e| format!("cannot make room for the outputs: {e}"))?;
    let region = shm.bytes_mut();
    for (tensor, start) in outputs.into_iter().zip(placed) {
        let (dtype, shape, data) = tensor.into_parts();
        region[start..start + data.len()].copy_from_slice(&data);
        slots.push(Slot { dtype, shape, offset: start as u64, len: data.len() as u64 });
    }
    Ok(slots)
}
