//! A small builder over [`crate::onnx`]: layers as method calls, weights filled deterministically.

use jig_policy::rng::SplitMix64;

use crate::onnx::{Attr, Dim, ElemType, Initializer, Model, Node, ValueInfo};

/// Builds one model's graph. Weights come from a generator seeded by the model's name, so the same name
/// always gives the same bytes.
pub struct Builder {
    nodes: Vec<Node>,
    initializers: Vec<Initializer>,
    rng: SplitMix64,
    next: usize,
}

impl Builder {
    pub fn new(name: &str) -> Self {
        // FNV-1a of the name seeds splitmix64.
        let seed = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
        Builder { nodes: Vec::new(), initializers: Vec::new(), rng: SplitMix64::new(seed), next: 0 }
    }

    fn fresh(&mut self, prefix: &str) -> String {
        self.next += 1;
        format!("{prefix}{}", self.next)
    }

    /// Uniform in [-1, 1), from the top 24 bits (an f32's precision) of the next draw: the published models'
    /// weights are these exact values.
    fn uniform(&mut self) -> f32 {
        (self.rng.next_u64() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    }

    /// A weight tensor of `dims`, uniform in ±√(3 / fan_in): activations keep their scale through the layer.
    pub fn weight(&mut self, dims: &[i64], fan_in: i64) -> String {
        let count: i64 = dims.iter().product();
        let bound = (3.0 / fan_in.max(1) as f32).sqrt();
        let mut data = Vec::with_capacity(count as usize * 4);
        for _ in 0..count {
            data.extend_from_slice(&(self.uniform() * bound).to_le_bytes());
        }
        self.constant(dims, ElemType::F32, data)
    }

    /// A tensor of zeros (biases).
    pub fn zeros(&mut self, dims: &[i64]) -> String {
        let count: i64 = dims.iter().product();
        self.constant(dims, ElemType::F32, vec![0; count as usize * 4])
    }

    /// An `i64` constant (shapes, axes).
    pub fn ints(&mut self, values: &[i64]) -> String {
        let data = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.constant(&[values.len() as i64], ElemType::I64, data)
    }

    fn constant(&mut self, dims: &[i64], elem: ElemType, data: Vec<u8>) -> String {
        let name = self.fresh("w");
        self.initializers.push(Initializer { name: name.clone(), dims: dims.to_vec(), elem, data });
        name
    }

    /// A node of `op` over `inputs`; returns its (only) output.
    pub fn op(&mut self, op: &str, inputs: &[&str], attrs: Vec<(&str, Attr)>) -> String {
        let output = self.fresh("t");
        self.nodes.push(Node {
            op: op.into(),
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            outputs: vec![output.clone()],
            attrs: attrs.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        });
        output
    }

    /// A `k`×`k` convolution with bias and "same" padding.
    pub fn conv(&mut self, x: &str, cin: i64, cout: i64, k: i64, stride: i64, groups: i64) -> String {
        let w = self.weight(&[cout, cin / groups, k, k], cin / groups * k * k);
        let b = self.zeros(&[cout]);
        let p = (k - 1) / 2;
        self.op(
            "Conv",
            &[x, &w, &b],
            vec![
                ("kernel_shape", Attr::Ints(vec![k, k])),
                ("strides", Attr::Ints(vec![stride, stride])),
                ("pads", Attr::Ints(vec![p, p, p, p])),
                ("group", Attr::Int(groups)),
            ],
        )
    }

    /// SiLU (x · sigmoid(x)), the activation of EfficientNet and YOLOv5.
    pub fn silu(&mut self, x: &str) -> String {
        let s = self.op("Sigmoid", &[x], vec![]);
        self.op("Mul", &[x, &s], vec![])
    }

    /// Convolution followed by SiLU.
    pub fn conv_silu(&mut self, x: &str, cin: i64, cout: i64, k: i64, stride: i64, groups: i64) -> String {
        let c = self.conv(x, cin, cout, k, stride, groups);
        self.silu(&c)
    }

    pub fn concat(&mut self, parts: &[&str], axis: i64) -> String {
        self.op("Concat", parts, vec![("axis", Attr::Int(axis))])
    }

    /// Nearest-neighbour upsampling by 2 in height and width.
    pub fn upsample2(&mut self, x: &str) -> String {
        let scales = self.floats(&[1.0, 1.0, 2.0, 2.0]);
        self.op("Resize", &[x, "", &scales], vec![])
    }

    /// An `f32` constant.
    pub fn floats(&mut self, values: &[f32]) -> String {
        let data = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.constant(&[values.len() as i64], ElemType::F32, data)
    }

    /// A linear layer over the last axis of a `[N, T, cin]` tensor.
    pub fn dense(&mut self, x: &str, cin: i64, cout: i64) -> String {
        let w = self.weight(&[cin, cout], cin);
        let b = self.zeros(&[cout]);
        let y = self.op("MatMul", &[x, &w], vec![]);
        self.op("Add", &[&y, &b], vec![])
    }

    pub fn layer_norm(&mut self, x: &str, dim: i64) -> String {
        let scale = self.floats(&vec![1.0; dim as usize]);
        let bias = self.zeros(&[dim]);
        self.op(
            "LayerNormalization",
            &[x, &scale, &bias],
            vec![("axis", Attr::Int(-1)), ("epsilon", Attr::Float(1e-5))],
        )
    }

    /// GELU, as x · sigmoid(1.702 x).
    pub fn gelu(&mut self, x: &str) -> String {
        let k = self.floats(&[1.702]);
        let scaled = self.op("Mul", &[x, &k], vec![]);
        let s = self.op("Sigmoid", &[&scaled], vec![]);
        self.op("Mul", &[x, &s], vec![])
    }

    /// A pre-norm transformer layer over `[N, T, dim]`: multi-head self-attention, then a GELU MLP of
    /// `mlp` hidden units, each with a residual connection.
    pub fn transformer_layer(&mut self, x: &str, dim: i64, heads: i64, mlp: i64) -> String {
        let head_dim = dim / heads;
        let h = self.layer_norm(x, dim);
        let split = self.ints(&[0, 0, heads, head_dim]);
        let project = |g: &mut Builder, perm: Vec<i64>| {
            let p = g.dense(&h, dim, dim);
            let p = g.op("Reshape", &[&p, &split], vec![]);
            g.op("Transpose", &[&p], vec![("perm", Attr::Ints(perm))])
        };
        let q = project(self, vec![0, 2, 1, 3]);
        let k = project(self, vec![0, 2, 3, 1]);
        let v = project(self, vec![0, 2, 1, 3]);
        let scores = self.op("MatMul", &[&q, &k], vec![]);
        let scale = self.floats(&[1.0 / (head_dim as f32).sqrt()]);
        let scores = self.op("Mul", &[&scores, &scale], vec![]);
        let weights = self.op("Softmax", &[&scores], vec![("axis", Attr::Int(-1))]);
        let attended = self.op("MatMul", &[&weights, &v], vec![]);
        let attended = self.op("Transpose", &[&attended], vec![("perm", Attr::Ints(vec![0, 2, 1, 3]))]);
        let merge = self.ints(&[0, 0, dim]);
        let attended = self.op("Reshape", &[&attended, &merge], vec![]);
        let out = self.dense(&attended, dim, dim);
        let x = self.add(x, &out);
        let h = self.layer_norm(&x, dim);
        let h = self.dense(&h, dim, mlp);
        let h = self.gelu(&h);
        let h = self.dense(&h, mlp, dim);
        self.add(&x, &h)
    }

    /// A 1-D convolution over `[N, cin, 1, T]` (time along the last axis), with bias and "same" padding.
    pub fn conv1d(&mut self, x: &str, cin: i64, cout: i64, k: i64, dilation: i64) -> String {
        let w = self.weight(&[cout, cin, 1, k], cin * k);
        let b = self.zeros(&[cout]);
        let p = dilation * (k - 1) / 2;
        self.op(
            "Conv",
            &[x, &w, &b],
            vec![
                ("kernel_shape", Attr::Ints(vec![1, k])),
                ("dilations", Attr::Ints(vec![1, dilation])),
                ("pads", Attr::Ints(vec![0, p, 0, p])),
            ],
        )
    }

    /// A 1-D transposed convolution over `[N, cin, 1, T]` that upsamples time by `stride`.
    pub fn upsample1d(&mut self, x: &str, cin: i64, cout: i64, k: i64, stride: i64) -> String {
        let w = self.weight(&[cin, cout, 1, k], cin * k / stride);
        let b = self.zeros(&[cout]);
        let p = (k - stride) / 2;
        self.op(
            "ConvTranspose",
            &[x, &w, &b],
            vec![
                ("kernel_shape", Attr::Ints(vec![1, k])),
                ("strides", Attr::Ints(vec![1, stride])),
                ("pads", Attr::Ints(vec![0, p, 0, p])),
            ],
        )
    }

    pub fn leaky_relu(&mut self, x: &str) -> String {
        self.op("LeakyRelu", &[x], vec![("alpha", Attr::Float(0.1))])
    }

    pub fn relu(&mut self, x: &str) -> String {
        self.op("Relu", &[x], vec![])
    }

    pub fn add(&mut self, a: &str, b: &str) -> String {
        self.op("Add", &[a, b], vec![])
    }

    pub fn max_pool(&mut self, x: &str, k: i64, stride: i64) -> String {
        let p = (k - 1) / 2;
        self.op(
            "MaxPool",
            &[x],
            vec![
                ("kernel_shape", Attr::Ints(vec![k, k])),
                ("strides", Attr::Ints(vec![stride, stride])),
                ("pads", Attr::Ints(vec![p, p, p, p])),
            ],
        )
    }

    /// Global average pooling and flattening: `[N, C, H, W]` → `[N, C]`.
    pub fn pool_flatten(&mut self, x: &str) -> String {
        let pooled = self.op("GlobalAveragePool", &[x], vec![]);
        self.op("Flatten", &[&pooled], vec![("axis", Attr::Int(1))])
    }

    /// A fully connected layer `[N, cin]` → `[N, cout]`.
    pub fn linear(&mut self, x: &str, cin: i64, cout: i64) -> String {
        let w = self.weight(&[cout, cin], cin);
        let b = self.zeros(&[cout]);
        self.op("Gemm", &[x, &w, &b], vec![("transB", Attr::Int(1))])
    }

    /// The model: `input` (f32 `[N, input_dims...]`, N dynamic) to `output` (f32 `[N, output_dims...]`).
    pub fn finish(mut self, name: &str, input: (&str, &[i64]), output: (&str, &[i64])) -> Model {
        let dims = |fixed: &[i64]| -> Vec<Dim> {
            std::iter::once(Dim::Named("N".into())).chain(fixed.iter().map(|&d| Dim::Fixed(d))).collect()
        };
        // Name the graph's output as asked.
        if let Some(last) = self.nodes.iter_mut().rev().find(|n| n.outputs[0] == output.0) {
            last.outputs[0] = "y".into();
        }
        Model {
            name: name.into(),
            nodes: self.nodes,
            initializers: self.initializers,
            inputs: vec![ValueInfo { name: input.0.into(), elem: ElemType::F32, dims: dims(input.1) }],
            outputs: vec![ValueInfo { name: "y".into(), elem: ElemType::F32, dims: dims(output.1) }],
            metadata: vec![(
                "jig.synthetic".into(),
                "weights are deterministic pseudo-random numbers: for timing, profiling and planning only".into(),
            )],
        }
    }
}
