//! The sign reader (examples/sign-reader) as a user runs it: `jig up`, `jig deploy`, invocations with the
//! rendered sample signs of `make setup`, real PP-OCRv4 and Piper weights.

use std::path::Path;

use base64::Engine as _;
use jig_test_support::{Gateway, bundle, component, root};

fn sign_reader(dir: &Path) {
    let manifest = std::fs::read_to_string(root().join("examples/sign-reader/jig.toml")).unwrap();
    let models = root().join(".jig/models");
    bundle(
        dir,
        &manifest,
        &[
            ("glue/ocr_detect.wasm", &component("ocr_detect")),
            ("glue/ocr_recognize.wasm", &component("ocr_recognize")),
            ("glue/tts_frame.wasm", &component("tts_frame")),
            ("models/ppocr-det.onnx", &models.join("ppocr-det.onnx")),
            ("models/ppocr-det-640.onnx", &models.join("ppocr-det-640.onnx")),
            ("models/ppocr-det-480.onnx", &models.join("ppocr-det-480.onnx")),
            ("models/ppocr-det-int8.onnx", &models.join("ppocr-det-int8.onnx")),
            ("models/ppocr-rec.onnx", &models.join("ppocr-rec.onnx")),
            ("models/ppocr-rec-int8.onnx", &models.join("ppocr-rec-int8.onnx")),
            ("profiles.csv", &root().join("examples/sign-reader/profiles.csv")),
            ("models/ppocr-rec.charset.txt", &models.join("ppocr-rec.charset.txt")),
            ("models/piper-joe.onnx", &models.join("piper-joe.onnx")),
            ("models/piper-joe-int8.onnx", &models.join("piper-joe-int8.onnx")),
            ("models/piper-joe.phonemes.json", &models.join("piper-joe.phonemes.json")),
            ("models/cmudict.txt", &models.join("cmudict.txt")),
        ],
    );
}

/// The samples of a 16-bit mono WAV, checking its header.
fn samples(wav: &[u8]) -> Vec<i16> {
    assert_eq!((&wav[0..4], &wav[8..16]), (&b"RIFF"[..], &b"WAVEfmt "[..]), "not a WAV");
    wav[44..].chunks_exact(2).map(|s| i16::from_le_bytes([s[0], s[1]])).collect()
}

/// The seconds and RMS (of full scale) of a 16-bit mono WAV.
fn wav_stats(wav: &[u8]) -> (f64, f64) {
    let samples: Vec<f64> = samples(wav).into_iter().map(|s| f64::from(s) / 32768.0).collect();
    let rate = u32::from_le_bytes(wav[24..28].try_into().unwrap());
    let rms = (samples.iter().map(|s| s * s).sum::<f64>() / samples.len().max(1) as f64).sqrt();
    (samples.len() as f64 / f64::from(rate), rms)
}

/// Text without spaces: the recognizer is not reliable about the width of a space.
fn squeeze(text: &str) -> String {
    text.chars().filter(|c| !c.is_whitespace()).collect()
}

#[test]
fn the_sign_reader_reads_every_sample_sign_aloud() {
    let (state, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    sign_reader(dir.path());
    let gateway = Gateway::start(state.path(), &[]);
    let deployed = gateway.jig("deploy").arg(dir.path()).output().unwrap();
    assert!(deployed.status.success(), "{}", String::from_utf8_lossy(&deployed.stderr));
    // Planned from the bundle's profile table: the measured variants that meet the SLOs.
    let summary = String::from_utf8_lossy(&deployed.stdout);
    assert!(summary.contains("planned from profiles.csv") && summary.contains("det/ppocr-v4-det"), "{summary}");

    let samples = root().join(".jig/samples");
    let expected: serde_json::Value =
        serde_json::from_slice(&std::fs::read(samples.join("samples.json")).expect("run `make setup`")).unwrap();
    let mut durations = Vec::new();
    for (file, lines) in expected.as_object().unwrap() {
        let image = std::fs::read(samples.join(file)).unwrap();
        let reply = gateway.http("POST", "/v1/apps/sign-reader/invoke", &[], &image);
        assert_eq!(reply.status, 200, "{file}: {}", reply.text());
        let outputs = reply.json()["outputs"].as_array().unwrap().clone();
        let read: Vec<String> = outputs.iter().map(|o| squeeze(o["json"]["text"].as_str().unwrap())).collect();
        let want: Vec<String> = lines.as_array().unwrap().iter().map(|l| squeeze(l.as_str().unwrap())).collect();
        assert_eq!(read, want, "{file}: {outputs:?}");
        for o in &outputs {
            assert_eq!(o["task"], "speak");
            assert!(o["json"]["confidence"].as_f64().unwrap() > 0.8, "{file}: {o}");
            let wav = base64::engine::general_purpose::STANDARD.decode(o["base64"].as_str().unwrap()).unwrap();
            let (seconds, rms) = wav_stats(&wav);
            assert!(rms > 0.01, "{file}: the audio of {:?} is silent (RMS {rms})", o["json"]["text"]);
            durations.push((o["json"]["text"].as_str().unwrap().len(), seconds));
        }
    }
    // Longer text, longer speech: "EXIT 12" (said "exit twelve") against "STOP".
    let duration = |text_len: usize| durations.iter().find(|d| d.0 == text_len).unwrap().1;
    assert!(duration("EXIT 12".len()) > 1.3 * duration("STOP".len()), "{durations:?}");
}

/// Signs as people photograph them (`make setup` renders them into .jig/samples/photos): turned up to 10°
/// either way, serif and sans capitals, coloured panels in a grey surround. An upright box around a turned line
/// is mostly background, so before the detector turned its boxes with the lines it read about half of them.
#[test]
fn signs_photographed_askew_are_read() {
    let (state, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    sign_reader(dir.path());
    let gateway = Gateway::start(state.path(), &[]);
    assert!(gateway.jig("deploy").arg(dir.path()).output().unwrap().status.success());
    let photos = root().join(".jig/samples/photos");
    let expected: serde_json::Value =
        serde_json::from_slice(&std::fs::read(photos.join("samples.json")).expect("run `make setup`")).unwrap();
    let mut misread = Vec::new();
    for (file, lines) in expected.as_object().unwrap() {
        let reply =
            gateway.http("POST", "/v1/apps/sign-reader/invoke", &[], &std::fs::read(photos.join(file)).unwrap());
        assert_eq!(reply.status, 200, "{file}: {}", reply.text());
        let read: Vec<String> = reply.json()["outputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| squeeze(o["json"]["text"].as_str().unwrap()))
            .collect();
        let want: Vec<String> = lines.as_array().unwrap().iter().map(|l| squeeze(l.as_str().unwrap())).collect();
        if read != want {
            misread.push(format!("{file}: read {read:?}, want {want:?}"));
        }
    }
    assert_eq!(expected.as_object().unwrap().len(), 40);
    assert!(misread.is_empty(), "{} of 40 misread:\n{}", misread.len(), misread.join("\n"));
}

#[test]
fn what_is_not_an_image_gets_a_400_and_the_next_request_is_served() {
    let (state, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    sign_reader(dir.path());
    let gateway = Gateway::start(state.path(), &[]);
    assert!(gateway.jig("deploy").arg(dir.path()).output().unwrap().status.success());
    for body in [&b""[..], b"GIF89a not really", b"\x89PNG\r\n\x1a\n truncated"] {
        let reply = gateway.http("POST", "/v1/apps/sign-reader/invoke", &[], body);
        assert_eq!(reply.status, 400, "{:?}: {}", String::from_utf8_lossy(body), reply.text());
        assert!(reply.text().contains("sign-reader/detect"), "names the task: {}", reply.text());
    }
    // A huge image is refused from its header, before anything is decoded: the header of a 10000×10000 PNG
    // (signature, IHDR, an empty IDAT, IEND).
    let hex = "89504e470d0a1a0a0000000d4948445200002710000027100802000000352cf570000000004944415435af061e0000000049454e44ae426082";
    let huge: Vec<u8> = (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
    let reply = gateway.http("POST", "/v1/apps/sign-reader/invoke", &[], &huge);
    assert_eq!(reply.status, 400, "{}", reply.text());
    assert!(reply.text().contains("10000x10000"), "{}", reply.text());

    let stop = std::fs::read(root().join(".jig/samples/stop.png")).unwrap();
    let reply = gateway.http("POST", "/v1/apps/sign-reader/invoke", &[], &stop);
    assert_eq!(reply.json()["outputs"][0]["json"]["text"], "STOP");
}

#[test]
fn each_voice_variant_says_a_sign() {
    let state = tempfile::tempdir().unwrap();
    let gateway = Gateway::start(state.path(), &[]);
    let models = root().join(".jig/models");
    let mut seconds = Vec::new();
    for (variant, model) in [("piper-joe-medium", "piper-joe.onnx"), ("piper-joe-medium-int8", "piper-joe-int8.onnx")] {
        let dir = tempfile::tempdir().unwrap();
        let manifest = format!(
            "name = \"say\"\n[[tasks]]\nname = \"speak\"\nglue = \"glue/tts_frame.wasm\"\n\
             config_files = {{ phoneme-id-map = \"models/phonemes.json\", lexicon = \"models/cmudict.txt\" }}\n\
             [[variants]]\nslot = \"voice\"\nname = \"{variant}\"\nmodel = \"models/voice.onnx\"\n"
        );
        bundle(
            dir.path(),
            &manifest,
            &[
                ("glue/tts_frame.wasm", &component("tts_frame")),
                ("models/voice.onnx", &models.join(model)),
                ("models/phonemes.json", &models.join("piper-joe.phonemes.json")),
                ("models/cmudict.txt", &models.join("cmudict.txt")),
            ],
        );
        let deployed = gateway.jig("deploy").arg(dir.path()).output().unwrap();
        assert!(deployed.status.success(), "{}", String::from_utf8_lossy(&deployed.stderr));
        let reply = gateway.http("POST", "/v1/apps/say/invoke", &[], b"NO PARKING");
        assert_eq!(reply.status, 200, "{variant}: {}", reply.text());
        let wav = base64::engine::general_purpose::STANDARD
            .decode(reply.json()["outputs"][0]["base64"].as_str().unwrap())
            .unwrap();
        let (duration, rms) = wav_stats(&wav);
        assert!(rms > 0.01, "{variant}: silent (RMS {rms})");
        seconds.push(duration);
    }
    // The same words at the same rate: the int8 voice speaks as long as the fp32 one, give or take.
    assert!((seconds[0] / seconds[1] - 1.0).abs() < 0.3, "{seconds:?}");
}

#[test]
fn a_voice_cut_in_two_tasks_says_what_the_whole_voice_says() {
    let state = tempfile::tempdir().unwrap();
    let gateway = Gateway::start(state.path(), &[]);
    let models = root().join(".jig/models");
    // No noise, so that the voice says a line the same way every time.
    let config = |stage: &str| {
        format!(
            "config = {{ stage = \"{stage}\", noise-scale = \"0\", noise-w = \"0\" }}\n\
             config_files = {{ phoneme-id-map = \"models/phonemes.json\", lexicon = \"models/cmudict.txt\" }}\n"
        )
    };
    let whole = format!(
        "name = \"whole\"\n[[tasks]]\nname = \"speak\"\nglue = \"glue/tts_frame.wasm\"\nslot = \"voice\"\n{}\
         [[variants]]\nslot = \"voice\"\nname = \"piper\"\nmodel = \"models/voice.onnx\"\n",
        config("whole")
    );
    // The front on one slot, emitting each sentence's `z` to the decoder's task on another.
    let split = format!(
        "name = \"split\"\n[[tasks]]\nname = \"speak\"\nglue = \"glue/tts_frame.wasm\"\nslot = \"voice\"\n{}\
         [[tasks]]\nname = \"vocode\"\nglue = \"glue/tts_frame.wasm\"\nslot = \"vocoder\"\nconfig = {{ stage = \"vocoder\" }}\n\
         [[edges]]\nfrom = \"speak.voiced\"\nto = \"vocode\"\n\
         [[variants]]\nslot = \"voice\"\nname = \"piper-front\"\nmodel = \"models/front.onnx\"\n\
         [[variants]]\nslot = \"vocoder\"\nname = \"piper-back\"\nmodel = \"models/back.onnx\"\n",
        config("front")
    );
    for (manifest, files) in [
        (&whole, vec![("models/voice.onnx", models.join("piper-joe.onnx"))]),
        (
            &split,
            vec![
                ("models/front.onnx", models.join("piper-joe.front.onnx")),
                ("models/back.onnx", models.join("piper-joe.back.onnx")),
            ],
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut files: Vec<(&str, std::path::PathBuf)> = files;
        files.push(("glue/tts_frame.wasm", component("tts_frame")));
        files.push(("models/phonemes.json", models.join("piper-joe.phonemes.json")));
        files.push(("models/cmudict.txt", models.join("cmudict.txt")));
        let files: Vec<(&str, &Path)> = files.iter().map(|(to, from)| (*to, from.as_path())).collect();
        bundle(dir.path(), manifest, &files);
        let deployed = gateway.jig("deploy").arg(dir.path()).output().unwrap();
        assert!(deployed.status.success(), "{}", String::from_utf8_lossy(&deployed.stderr));
    }

    let line = br#"{"text": "No parking. Stop here!", "index": 0}"#;
    let reply = gateway.http("POST", "/v1/apps/whole/invoke", &[], line);
    assert_eq!(reply.status, 200, "{}", reply.text());
    let wav = |output: &serde_json::Value| {
        samples(&base64::engine::general_purpose::STANDARD.decode(output["base64"].as_str().unwrap()).unwrap())
    };
    let outputs = reply.json()["outputs"].as_array().unwrap().clone();
    assert_eq!(outputs.len(), 1, "{outputs:?}");
    let said = wav(&outputs[0]);

    let reply = gateway.http("POST", "/v1/apps/split/invoke", &[], line);
    assert_eq!(reply.status, 200, "{}", reply.text());
    let mut outputs = reply.json()["outputs"].as_array().unwrap().clone();
    assert_eq!(outputs.len(), 2, "one WAV a sentence: {outputs:?}");
    outputs.sort_by_key(|o| o["json"]["sentence"].as_u64());
    for (i, output) in outputs.iter().enumerate() {
        assert_eq!(output["json"]["sentence"], i, "{output:?}");
        assert_eq!(output["json"]["text"], "No parking. Stop here!", "the line's record is kept: {output:?}");
    }
    // The whole says the two sentences 0.2 s apart; the two tasks say the same samples, a sentence each.
    let (first, second) = (wav(&outputs[0]), wav(&outputs[1]));
    assert!(first.len() > 4410 && second.len() > 4410, "{} and {} samples", first.len(), second.len());
    let joined: Vec<i16> = first.iter().copied().chain(std::iter::repeat_n(0, 4410)).chain(second).collect();
    assert_eq!(said.len(), joined.len());
    assert!(said == joined, "the cut voice says other samples than the whole");
}
