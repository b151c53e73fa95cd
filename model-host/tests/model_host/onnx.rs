//! ONNX Runtime through `onnx::Model` on the models `make setup` generates into .jig/models.

use jig_test_support::{f32s, i64s, mixed_two_rows, model};

use jig_model_host::onnx::{Model, ModelError, SessionOptions};
use jig_model_host::{DType, Tensor};

fn load(name: &str) -> Model {
    Model::load(name, &model(name), &SessionOptions::default()).unwrap()
}

#[test]
fn runs_a_model_and_reports_its_signature() {
    let model = load("mixed");
    assert_eq!(model.inputs().len(), 2);
    assert_eq!(model.inputs()[0].name, "x");
    assert_eq!(model.inputs()[0].dtype, DType::F32);
    assert_eq!(model.inputs()[1].shape, vec![None, Some(4)]);
    assert!(model.batchable());
    let (inputs, want) = mixed_two_rows();
    let out = model.run(&inputs).unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].shape(), &[2, 4]);
    assert_eq!(f32s(&out[0]), want);
}

#[test]
fn outputs_are_written_into_their_places_and_a_wrong_place_is_refused() {
    use jig_model_host::onnx::{TensorView, TensorViewMut};
    let model = load("mixed");
    let (inputs, want) = mixed_two_rows();
    let views: Vec<TensorView> = inputs.iter().map(TensorView::of).collect();
    let mut place = vec![0u8; 2 * 4 * 4];
    let shape = [2u64, 4];
    let written = model.run_into(&views, &mut [TensorViewMut::new(DType::F32, &shape, &mut place).unwrap()]).unwrap();
    assert!(written[0].is_none(), "written in place");
    let got: Vec<f32> = place.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
    assert_eq!(got, want);

    let mut wrong = vec![0u8; 3 * 4 * 4];
    let shape = [3u64, 4];
    let err = model.run_into(&views, &mut [TensorViewMut::new(DType::F32, &shape, &mut wrong).unwrap()]).unwrap_err();
    assert!(matches!(err, ModelError::Run { .. }), "{err}");
    assert_eq!(f32s(&model.run(&inputs).unwrap()[0]), want, "the model runs unplaced after");
}

/// A run bound once to its memory runs again over whatever that memory holds then, writing into the same place;
/// here `x` lies one byte off its elements' alignment, so ONNX Runtime reads a copy, made again before each run.
#[test]
fn a_bound_run_reads_its_inputs_anew_each_time_it_runs() {
    use jig_model_host::onnx::{TensorView, TensorViewMut};
    let model = load("mixed");
    let shape = [2u64, 4];
    // Bytes of u32 words, one byte in: `x` lies off the alignment of its f32 elements.
    let mut words = [0u32; 2 * 4 + 1];
    let x = &mut bytemuck::cast_slice_mut::<u32, u8>(&mut words)[1..2 * 4 * 4 + 1];
    let mut ids = vec![0u8; 2 * 4 * 8];
    let mut place = vec![0u8; 2 * 4 * 4];
    let bound = {
        let views =
            [TensorView::new(DType::F32, &shape, x).unwrap(), TensorView::new(DType::I64, &shape, &ids).unwrap()];
        // SAFETY: x, ids and place outlive `bound`, and are written and read here only between its runs.
        unsafe { model.bind(&views, &mut [TensorViewMut::new(DType::F32, &shape, &mut place).unwrap()]) }.unwrap()
    };
    for turn in 0..3 {
        let (inputs, want) = mixed_two_rows();
        let scaled: Vec<f32> = f32s(&inputs[0]).iter().map(|v| v * (turn + 1) as f32).collect();
        for (to, from) in x.chunks_exact_mut(4).zip(&scaled) {
            to.copy_from_slice(&from.to_le_bytes());
        }
        ids.copy_from_slice(inputs[1].data());
        let written = model.run_bound(&bound).unwrap();
        assert!(written[0].is_none(), "turn {turn}: written in place");
        let got: Vec<f32> = place.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        assert_eq!(got, want.iter().map(|v| v * (turn + 1) as f32).collect::<Vec<_>>(), "turn {turn}");
    }
}

#[test]
fn a_real_model_runs() {
    let model = load("ppocr-rec");
    let x = Tensor::from_f32(vec![1, 3, 48, 320], &vec![0.1; 3 * 48 * 320]).unwrap();
    let out = model.run(&[x]).unwrap();
    assert_eq!(out[0].shape()[0], 1);
    assert_eq!(out[0].shape()[2], 6625, "PP-OCRv4 recognizer: 6623 characters + blank + space");
}

#[test]
fn mismatched_inputs_name_the_model_and_input() {
    let model = load("mixed");
    let x = Tensor::from_f32(vec![1, 4], &[1.0; 4]).unwrap();
    let err = model.run(std::slice::from_ref(&x)).unwrap_err().to_string();
    assert!(err.contains("mixed") && err.contains("expects 2 inputs"), "{err}");

    let wrong_dtype = Tensor::from_f32(vec![1, 4], &[1.0; 4]).unwrap();
    let err = model.run(&[x.clone(), wrong_dtype]).unwrap_err();
    assert!(
        matches!(&err, ModelError::Input { model, detail } if model == "mixed" && detail.contains("`ids`") && detail.contains("FP32")),
        "{err}"
    );

    let wrong_shape = i64s(vec![1, 3], &[1, 2, 3]);
    let err = model.run(&[x, wrong_shape]).unwrap_err().to_string();
    assert!(err.contains("`ids`") && err.contains("[1, 3]"), "{err}");
}

#[test]
fn corrupt_and_non_onnx_files_are_refused_with_their_path() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.onnx");
    std::fs::write(&garbage, b"this is not a model").unwrap();
    let err = Model::load("garbage", &garbage, &SessionOptions::default()).unwrap_err();
    assert!(matches!(&err, ModelError::Invalid { model, path, .. } if model == "garbage" && path == &garbage), "{err}");

    let truncated = dir.path().join("truncated.onnx");
    let bytes = std::fs::read(model("mlp")).unwrap();
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    let err = Model::load("truncated", &truncated, &SessionOptions::default()).unwrap_err();
    assert!(matches!(err, ModelError::Invalid { .. }), "{err}");

    let missing = Model::load("missing", &dir.path().join("nope.onnx"), &SessionOptions::default()).unwrap_err();
    assert!(matches!(missing, ModelError::Read { .. }), "{missing}");
    // The process is unharmed: a good model still runs.
    assert!(load("mlp").run(&[Tensor::from_f32(vec![3, 64], &[0.5; 192]).unwrap()]).is_ok());
}
