//! The architecture families of the JigsawServe paper's applications, at their published sizes.

use crate::graph::Builder;
use crate::onnx::Model;

/// ResNet-18/34/50/101/152 (He et al. 2016), 224×224 RGB in, 1000 classes out. Batch normalisation is folded
/// into the convolutions' biases, as an inference export does.
pub fn resnet(depth: u32) -> anyhow::Result<Model> {
    let (blocks, bottleneck): ([usize; 4], bool) = match depth {
        18 => ([2, 2, 2, 2], false),
        34 => ([3, 4, 6, 3], false),
        50 => ([3, 4, 6, 3], true),
        101 => ([3, 4, 23, 3], true),
        152 => ([3, 8, 36, 3], true),
        _ => anyhow::bail!("ResNet-{depth} is not a standard depth (18, 34, 50, 101, 152)"),
    };
    let name = format!("resnet{depth}");
    let mut g = Builder::new(&name);
    let stem = g.conv("x", 3, 64, 7, 2, 1);
    let stem = g.relu(&stem);
    let mut x = g.max_pool(&stem, 3, 2);
    let expansion = if bottleneck { 4 } else { 1 };
    let mut channels = 64;
    for (stage, &count) in blocks.iter().enumerate() {
        let width = 64 << stage;
        for block in 0..count {
            let stride = if stage > 0 && block == 0 { 2 } else { 1 };
            let out = width * expansion;
            let y = if bottleneck {
                let a = g.conv(&x, channels, width, 1, 1, 1);
                let a = g.relu(&a);
                let b = g.conv(&a, width, width, 3, stride, 1);
                let b = g.relu(&b);
                g.conv(&b, width, out, 1, 1, 1)
            } else {
                let a = g.conv(&x, channels, width, 3, stride, 1);
                let a = g.relu(&a);
                g.conv(&a, width, out, 3, 1, 1)
            };
            let shortcut = if stride != 1 || channels != out { g.conv(&x, channels, out, 1, stride, 1) } else { x };
            let sum = g.add(&y, &shortcut);
            x = g.relu(&sum);
            channels = out;
        }
    }
    let features = g.pool_flatten(&x);
    let logits = g.linear(&features, channels, 1000);
    Ok(g.finish(&name, ("x", &[3, 224, 224]), (&logits, &[1000])))
}

/// VGG-11/13/16/19 (Simonyan and Zisserman 2015), 224×224 RGB in, 1000 classes out.
pub fn vgg(depth: u32) -> anyhow::Result<Model> {
    let convs: [usize; 5] = match depth {
        11 => [1, 1, 2, 2, 2],
        13 => [2, 2, 2, 2, 2],
        16 => [2, 2, 3, 3, 3],
        19 => [2, 2, 4, 4, 4],
        _ => anyhow::bail!("VGG-{depth} is not a standard depth (11, 13, 16, 19)"),
    };
    let name = format!("vgg{depth}");
    let mut g = Builder::new(&name);
    let mut x = "x".to_string();
    let mut channels = 3;
    for (stage, &count) in convs.iter().enumerate() {
        let width = (64 << stage).min(512);
        for _ in 0..count {
            let c = g.conv(&x, channels, width, 3, 1, 1);
            x = g.relu(&c);
            channels = width;
        }
        x = g.op(
            "MaxPool",
            &[&x],
            vec![
                ("kernel_shape", crate::onnx::Attr::Ints(vec![2, 2])),
                ("strides", crate::onnx::Attr::Ints(vec![2, 2])),
            ],
        );
    }
    let flat = g.op("Flatten", &[&x], vec![("axis", crate::onnx::Attr::Int(1))]);
    let a = g.linear(&flat, 512 * 7 * 7, 4096);
    let a = g.relu(&a);
    let b = g.linear(&a, 4096, 4096);
    let b = g.relu(&b);
    let logits = g.linear(&b, 4096, 1000);
    Ok(g.finish(&name, ("x", &[3, 224, 224]), (&logits, &[1000])))
}

/// EfficientNet-B0…B4 (Tan and Le 2019): MBConv blocks with squeeze-and-excitation, width, depth and
/// resolution scaled per variant; 1000 classes out. Every variant takes 224×224 and resizes to its own
/// resolution first, so one glue serves them all and each still pays for its resolution.
pub fn efficientnet(variant: u32) -> anyhow::Result<Model> {
    let (width, depth, resolution) = match variant {
        0 => (1.0, 1.0, 224),
        1 => (1.0, 1.1, 240),
        2 => (1.1, 1.2, 260),
        3 => (1.2, 1.4, 300),
        4 => (1.4, 1.8, 380),
        _ => anyhow::bail!("EfficientNet-B{variant} is not generated (B0 to B4)"),
    };
    // Channels scaled and rounded to a multiple of 8, never down by more than 10%.
    let scale = |c: i64| -> i64 {
        let c = c as f64 * width;
        let r = ((c + 4.0) / 8.0).floor().max(1.0) * 8.0;
        (if r < 0.9 * c { r + 8.0 } else { r }) as i64
    };
    // (expansion, kernel, stride, output channels, repeats) of B0.
    let stages: [(i64, i64, i64, i64, u32); 7] = [
        (1, 3, 1, 16, 1),
        (6, 3, 2, 24, 2),
        (6, 5, 2, 40, 2),
        (6, 3, 2, 80, 3),
        (6, 5, 1, 112, 3),
        (6, 5, 2, 192, 4),
        (6, 3, 1, 320, 1),
    ];
    let name = format!("efficientnet-b{variant}");
    let mut g = Builder::new(&name);
    let mut channels = scale(32);
    let input = if resolution == 224 {
        "x".to_string()
    } else {
        let f = resolution as f32 / 224.0;
        let scales = g.floats(&[1.0, 1.0, f, f]);
        g.op("Resize", &["x", "", &scales], vec![])
    };
    let mut x = g.conv_silu(&input, 3, channels, 3, 2, 1);
    for (expansion, k, stride, out, repeats) in stages {
        let out = scale(out);
        for i in 0..(f64::from(repeats) * depth).ceil() as u32 {
            let stride = if i == 0 { stride } else { 1 };
            let hidden = channels * expansion;
            let mut y = if expansion == 1 { x.clone() } else { g.conv_silu(&x, channels, hidden, 1, 1, 1) };
            y = g.conv_silu(&y, hidden, hidden, k, stride, hidden);
            // Squeeze and excitation, reduced to a quarter of the block's input channels.
            let squeezed = (channels / 4).max(1);
            let pooled = g.op("GlobalAveragePool", &[&y], vec![]);
            let s = g.conv_silu(&pooled, hidden, squeezed, 1, 1, 1);
            let e = g.conv(&s, squeezed, hidden, 1, 1, 1);
            let gate = g.op("Sigmoid", &[&e], vec![]);
            y = g.op("Mul", &[&y, &gate], vec![]);
            y = g.conv(&y, hidden, out, 1, 1, 1);
            x = if stride == 1 && channels == out { g.add(&y, &x) } else { y };
            channels = out;
        }
    }
    let head = scale(1280);
    let h = g.conv_silu(&x, channels, head, 1, 1, 1);
    let features = g.pool_flatten(&h);
    let logits = g.linear(&features, head, 1000);
    Ok(g.finish(&name, ("x", &[3, 224, 224]), (&logits, &[1000])))
}

/// YOLOv5 n/s/m/l/x (release 6, Ultralytics): CSP backbone with SPPF, PANet neck, three detection heads for
/// the 80 COCO classes; 640×640 RGB in, out `[N, 255, 8400]` (3 anchors × 85 values per cell of the three
/// grids, concatenated).
pub fn yolov5(size: &str) -> anyhow::Result<Model> {
    let (depth, width) = match size {
        "n" => (0.33, 0.25),
        "s" => (0.33, 0.50),
        "m" => (0.67, 0.75),
        "l" => (1.0, 1.0),
        "x" => (1.33, 1.25),
        _ => anyhow::bail!("YOLOv5{size} is not a standard size (n, s, m, l, x)"),
    };
    let ch = |c: i64| ((c as f64 * width / 8.0).ceil() * 8.0) as i64;
    let n = |r: u32| ((f64::from(r) * depth).round() as u32).max(1);
    let name = format!("yolov5{size}");
    let mut g = Builder::new(&name);

    fn c3(g: &mut Builder, x: &str, c1: i64, c2: i64, n: u32, shortcut: bool) -> String {
        let h = c2 / 2;
        let mut a = g.conv_silu(x, c1, h, 1, 1, 1);
        let b = g.conv_silu(x, c1, h, 1, 1, 1);
        for _ in 0..n {
            let y = g.conv_silu(&a, h, h, 1, 1, 1);
            let y = g.conv_silu(&y, h, h, 3, 1, 1);
            a = if shortcut { g.add(&a, &y) } else { y };
        }
        let cat = g.concat(&[&a, &b], 1);
        g.conv_silu(&cat, 2 * h, c2, 1, 1, 1)
    }

    // Backbone.
    let x = g.conv_silu("x", 3, ch(64), 6, 2, 1);
    let x = g.conv_silu(&x, ch(64), ch(128), 3, 2, 1);
    let x = c3(&mut g, &x, ch(128), ch(128), n(3), true);
    let x = g.conv_silu(&x, ch(128), ch(256), 3, 2, 1);
    let p3 = c3(&mut g, &x, ch(256), ch(256), n(6), true);
    let x = g.conv_silu(&p3, ch(256), ch(512), 3, 2, 1);
    let p4 = c3(&mut g, &x, ch(512), ch(512), n(9), true);
    let x = g.conv_silu(&p4, ch(512), ch(1024), 3, 2, 1);
    let x = c3(&mut g, &x, ch(1024), ch(1024), n(3), true);
    // SPPF: three chained 5×5 max pools, concatenated.
    let half = ch(1024) / 2;
    let a = g.conv_silu(&x, ch(1024), half, 1, 1, 1);
    let p1 = g.max_pool(&a, 5, 1);
    let p2 = g.max_pool(&p1, 5, 1);
    let p3_ = g.max_pool(&p2, 5, 1);
    let cat = g.concat(&[&a, &p1, &p2, &p3_], 1);
    let p5 = g.conv_silu(&cat, 4 * half, ch(1024), 1, 1, 1);
    // Neck, top-down then bottom-up.
    let h10 = g.conv_silu(&p5, ch(1024), ch(512), 1, 1, 1);
    let up = g.upsample2(&h10);
    let cat = g.concat(&[&up, &p4], 1);
    let h13 = c3(&mut g, &cat, ch(1024), ch(512), n(3), false);
    let h14 = g.conv_silu(&h13, ch(512), ch(256), 1, 1, 1);
    let up = g.upsample2(&h14);
    let cat = g.concat(&[&up, &p3], 1);
    let out3 = c3(&mut g, &cat, ch(512), ch(256), n(3), false);
    let d = g.conv_silu(&out3, ch(256), ch(256), 3, 2, 1);
    let cat = g.concat(&[&d, &h14], 1);
    let out4 = c3(&mut g, &cat, ch(512), ch(512), n(3), false);
    let d = g.conv_silu(&out4, ch(512), ch(512), 3, 2, 1);
    let cat = g.concat(&[&d, &h10], 1);
    let out5 = c3(&mut g, &cat, ch(1024), ch(1024), n(3), false);
    // Detection heads: 3 anchors × (4 box + 1 objectness + 80 classes) per grid cell.
    let shape = g.ints(&[0, 255, -1]);
    let mut maps = Vec::new();
    for (feature, c) in [(&out3, ch(256)), (&out4, ch(512)), (&out5, ch(1024))] {
        let m = g.conv(feature, c, 255, 1, 1, 1);
        maps.push(g.op("Reshape", &[&m, &shape], vec![]));
    }
    let out = g.concat(&[&maps[0], &maps[1], &maps[2]], 2);
    Ok(g.finish(&name, ("x", &[3, 640, 640]), (&out, &[255, 8400])))
}

/// GIT base/large (Wang et al. 2022), the captioner: a CLIP ViT image encoder (B/16 or L/14 at 224×224) whose
/// patch tokens, projected, are joined by `CAPTION_TOKENS` text positions in a 6-layer transformer decoder,
/// which predicts a vocabulary of 30 522 word pieces at each text position. The decoder runs once over all
/// text positions, in place of generating them one by one: the same layers and weights, close in time to
/// a cached greedy decode. Out: `[N, CAPTION_TOKENS, 30522]` logits.
pub fn git(size: &str) -> anyhow::Result<Model> {
    let (dim, layers, heads, patch, decoder_dim) = match size {
        "base" => (768, 12, 12, 16, 768),
        "large" => (1024, 24, 16, 14, 1024),
        _ => anyhow::bail!("GIT-{size} is not generated (base, large)"),
    };
    const VOCAB: i64 = 30_522;
    let name = format!("git-{size}");
    let mut g = Builder::new(&name);
    let grid = 224 / patch;
    // Image encoder: patches, positions, transformer layers.
    let patches = g.conv("x", 3, dim, patch, patch, 1);
    let flat = g.ints(&[0, dim, grid * grid]);
    let tokens = g.op("Reshape", &[&patches, &flat], vec![]);
    let tokens = g.op("Transpose", &[&tokens], vec![("perm", crate::onnx::Attr::Ints(vec![0, 2, 1]))]);
    let positions = g.weight(&[1, grid * grid, dim], dim);
    let mut x = g.add(&tokens, &positions);
    for _ in 0..layers {
        x = g.transformer_layer(&x, dim, heads, 4 * dim);
    }
    let x = g.layer_norm(&x, dim);
    let image = g.dense(&x, dim, decoder_dim);
    // Text positions, broadcast over the batch: zero times the image's mean, plus learned embeddings.
    let mean = g.op("ReduceMean", &[&image], vec![("axes", crate::onnx::Attr::Ints(vec![1, 2]))]);
    let zero = g.floats(&[0.0]);
    let nothing = g.op("Mul", &[&mean, &zero], vec![]);
    let text = g.weight(&[1, CAPTION_TOKENS, decoder_dim], decoder_dim);
    let text = g.add(&nothing, &text);
    let mut y = g.concat(&[&image, &text], 1);
    for _ in 0..6 {
        y = g.transformer_layer(&y, decoder_dim, decoder_dim / 64, 4 * decoder_dim);
    }
    let starts = g.ints(&[grid * grid]);
    let ends = g.ints(&[grid * grid + CAPTION_TOKENS]);
    let axes = g.ints(&[1]);
    let text = g.op("Slice", &[&y, &starts, &ends, &axes], vec![]);
    let text = g.layer_norm(&text, decoder_dim);
    let logits = g.dense(&text, decoder_dim, VOCAB);
    Ok(g.finish(&name, ("x", &[3, 224, 224]), (&logits, &[CAPTION_TOKENS, VOCAB])))
}

/// Text positions GIT decodes: a caption of up to 20 word pieces.
pub const CAPTION_TOKENS: i64 = 20;

/// Phoneme positions a TTS model reads (one short sentence), and audio samples it writes per position.
pub const TTS_PHONEMES: i64 = 64;
pub const TTS_SAMPLES_PER_PHONEME: i64 = 1024;

/// The speech synthesizers of the AR assistant: VITS (Kim et al. 2021) and Glow-TTS (Kim et al. 2020), each
/// as text encoder (6 transformer layers, 192 wide) → length expansion (4 frames per phoneme) → normalising
/// flow (coupling layers of dilated 1-D convolutions) → HiFi-GAN waveform decoder (transposed convolutions
/// upsampling 256× with multi-receptive-field residual blocks). Glow-TTS has the deeper flow and, standing
/// in for its separate vocoder, a narrower decoder. In: `[N, 192, 64]` phoneme embeddings; out:
/// `[N, 65536]` samples. The inference path only: VITS comes to 24 M parameters, against 36 M with the
/// posterior encoder it needs only for training.
pub fn tts(name: &str) -> anyhow::Result<Model> {
    let (flows, decoder_width) = match name {
        "vits" => (4, 512),
        "glow-tts" => (12, 256),
        _ => anyhow::bail!("TTS model `{name}` is not generated (vits, glow-tts)"),
    };
    let mut g = Builder::new(name);
    let (dim, t) = (192, TTS_PHONEMES);
    // Text encoder over [N, T, dim].
    let mut x = g.op("Transpose", &["x"], vec![("perm", crate::onnx::Attr::Ints(vec![0, 2, 1]))]);
    for _ in 0..6 {
        x = g.transformer_layer(&x, dim, 2, 4 * dim);
    }
    // To [N, dim, 1, T] for 1-D convolutions, then 4 frames per phoneme.
    let x = g.op("Transpose", &[&x], vec![("perm", crate::onnx::Attr::Ints(vec![0, 2, 1]))]);
    let as_2d = g.ints(&[0, dim, 1, t]);
    let x = g.op("Reshape", &[&x, &as_2d], vec![]);
    let scales = g.floats(&[1.0, 1.0, 1.0, 4.0]);
    let mut x = g.op("Resize", &[&x, "", &scales], vec![]);
    // Flow: coupling layers, each a 4-layer stack of dilated convolutions (WaveNet-style) on half the channels.
    for _ in 0..flows {
        let mut h = g.conv1d(&x, dim, dim, 1, 1);
        for layer in 0..4 {
            let c = g.conv1d(&h, dim, 2 * dim, 5, 1 << layer);
            let c = g.conv1d(&c, 2 * dim, dim, 1, 1);
            let c = g.op("Tanh", &[&c], vec![]);
            h = g.add(&h, &c);
        }
        let shift = g.conv1d(&h, dim, dim, 1, 1);
        x = g.add(&x, &shift);
    }
    // HiFi-GAN: upsample 8, 8, 2, 2 (256 samples a frame), halving channels, residual blocks of kernels 3, 7, 11.
    let mut channels = decoder_width;
    let mut y = g.conv1d(&x, dim, channels, 7, 1);
    for (rate, kernel) in [(8, 16), (8, 16), (2, 4), (2, 4)] {
        let a = g.leaky_relu(&y);
        y = g.upsample1d(&a, channels, channels / 2, kernel, rate);
        channels /= 2;
        let mut sum: Option<String> = None;
        for k in [3, 7, 11] {
            let mut r = y.clone();
            for dilation in [1, 3, 5] {
                let a = g.leaky_relu(&r);
                let c = g.conv1d(&a, channels, channels, k, dilation);
                let a = g.leaky_relu(&c);
                let c = g.conv1d(&a, channels, channels, k, 1);
                r = g.add(&r, &c);
            }
            sum = Some(match sum {
                None => r,
                Some(s) => g.add(&s, &r),
            });
        }
        let third = g.floats(&[1.0 / 3.0]);
        y = g.op("Mul", &[&sum.expect("three blocks"), &third], vec![]);
    }
    let a = g.leaky_relu(&y);
    let audio = g.conv1d(&a, channels, 1, 7, 1);
    let audio = g.op("Tanh", &[&audio], vec![]);
    let flat = g.ints(&[0, -1]);
    let audio = g.op("Reshape", &[&audio, &flat], vec![]);
    Ok(g.finish(name, ("x", &[dim, t]), (&audio, &[t * TTS_SAMPLES_PER_PHONEME])))
}
