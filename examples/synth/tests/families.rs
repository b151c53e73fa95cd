//! The generated models load and run in ONNX Runtime, have their published sizes, and are deterministic.

use jig_model_host::Tensor;
use jig_model_host::onnx::{Model, SessionOptions};

#[test]
fn resnet_and_vgg_have_their_published_parameter_counts() {
    // Published counts (torchvision, batch-norm parameters included: ours fold them into biases).
    for (model, published) in [
        (jig_synth::families::resnet(18).unwrap(), 11_689_512u64),
        (jig_synth::families::resnet(50).unwrap(), 25_557_032),
        (jig_synth::families::resnet(152).unwrap(), 60_192_808),
        (jig_synth::families::vgg(16).unwrap(), 138_357_544),
        (jig_synth::families::efficientnet(0).unwrap(), 5_288_548),
        (jig_synth::families::efficientnet(4).unwrap(), 19_341_616),
        (jig_synth::families::yolov5("n").unwrap(), 1_867_405),
        (jig_synth::families::yolov5("s").unwrap(), 7_225_885),
        (jig_synth::families::yolov5("x").unwrap(), 86_705_005),
    ] {
        let ratio = model.parameters() as f64 / published as f64;
        assert!(
            (0.98..=1.02).contains(&ratio),
            "{}: {} parameters, published {published}",
            model.name,
            model.parameters()
        );
    }
    assert!(jig_synth::families::resnet(20).is_err());
}

#[test]
fn a_generated_resnet_runs_in_onnx_runtime_and_is_deterministic() {
    let bytes = jig_synth::families::resnet(18).unwrap().encode();
    assert_eq!(bytes, jig_synth::families::resnet(18).unwrap().encode(), "same name, same bytes");
    let model = Model::from_bytes("resnet18", &bytes, &SessionOptions::default()).unwrap();
    let input: Vec<f32> = (0..2 * 3 * 224 * 224).map(|i| (i % 255) as f32 / 255.0).collect();
    let outputs = model.run(&[Tensor::from_f32(vec![2, 3, 224, 224], &input).unwrap()]).unwrap();
    assert_eq!(outputs[0].shape(), &[2, 1000]);
    let logits: Vec<f32> =
        outputs[0].data().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
    assert!(logits.iter().all(|v| v.is_finite()), "finite logits");
    assert!(logits.iter().any(|&v| v != 0.0), "the weights do something");
}

#[test]
fn efficientnet_and_yolo_run_in_onnx_runtime() {
    for (model, input, output) in [
        (jig_synth::families::efficientnet(0).unwrap(), vec![1, 3, 224, 224], vec![1, 1000]),
        (jig_synth::families::efficientnet(2).unwrap(), vec![1, 3, 224, 224], vec![1, 1000]),
        (jig_synth::families::yolov5("n").unwrap(), vec![1, 3, 640, 640], vec![1, 255, 8400]),
    ] {
        let session = Model::from_bytes(&model.name, &model.encode(), &SessionOptions::default()).unwrap();
        let count: u64 = input.iter().product();
        let x: Vec<f32> = (0..count).map(|i| (i % 251) as f32 / 251.0).collect();
        let outputs = session.run(&[Tensor::from_f32(input, &x).unwrap()]).unwrap();
        assert_eq!(outputs[0].shape(), output.as_slice(), "{}", model.name);
    }
}

#[test]
fn git_captioners_run_and_have_their_sizes() {
    let base = jig_synth::families::git("base").unwrap();
    // CLIP ViT-B/16 (86 M) + a 6-layer decoder (43 M) + the word-piece head (23 M).
    assert!((140e6..170e6).contains(&(base.parameters() as f64)), "{}", base.parameters());
    let large = jig_synth::families::git("large").unwrap();
    assert!((350e6..420e6).contains(&(large.parameters() as f64)), "{}", large.parameters());
    let session = Model::from_bytes("git-base", &base.encode(), &SessionOptions::default()).unwrap();
    let x: Vec<f32> = (0..3 * 224 * 224).map(|i| (i % 251) as f32 / 251.0).collect();
    let outputs = session.run(&[Tensor::from_f32(vec![1, 3, 224, 224], &x).unwrap()]).unwrap();
    assert_eq!(outputs[0].shape(), &[1, 20, 30522]);
}

#[test]
fn tts_models_run_and_write_audio() {
    for (name, low, high) in [("vits", 20e6, 45e6), ("glow-tts", 15e6, 40e6)] {
        let model = jig_synth::families::tts(name).unwrap();
        assert!((low..high).contains(&(model.parameters() as f64)), "{name}: {}", model.parameters());
        let session = Model::from_bytes(name, &model.encode(), &SessionOptions::default()).unwrap();
        let x: Vec<f32> = (0..192 * 64).map(|i| (i % 97) as f32 / 97.0 - 0.5).collect();
        let outputs = session.run(&[Tensor::from_f32(vec![1, 192, 64], &x).unwrap()]).unwrap();
        assert_eq!(outputs[0].shape(), &[1, 65536], "{name}");
    }
}

#[test]
fn every_named_model_is_generated() {
    for name in ["resnet34", "vgg11", "efficientnet-b2", "yolov5m", "git-base", "glow-tts"] {
        assert_eq!(jig_synth::model(name).unwrap().name, name);
    }
    let Err(e) = jig_synth::model("alexnet") else { panic!("alexnet is not generated") };
    assert!(e.to_string().contains("resnet18"), "{e}");
}
