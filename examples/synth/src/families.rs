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
