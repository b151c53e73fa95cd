//! Just enough of the ONNX protobuf format to write a model: a graph of nodes over named tensors, with
//! initializers (weights) and typed inputs and outputs. Written by hand (the wire format is a few varints and
//! length-prefixed fields) so the generator needs no protobuf toolchain.
//!
//! Field numbers are those of `onnx.proto` (IR version 8, default opset 17).

/// An element type (`TensorProto.DataType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElemType {
    F32 = 1,
    I64 = 7,
}

/// A dimension of an input or output: fixed, or named (dynamic).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dim {
    Fixed(i64),
    Named(String),
}

/// A node attribute.
#[derive(Debug, Clone, PartialEq)]
pub enum Attr {
    Int(i64),
    Float(f32),
    Ints(Vec<i64>),
}

/// A protobuf message being written.
#[derive(Default)]
struct Message(Vec<u8>);

impl Message {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }
    fn tag(&mut self, field: u32, wire: u8) {
        self.varint(u64::from(field) << 3 | u64::from(wire));
    }
    fn int(&mut self, field: u32, v: i64) {
        self.tag(field, 0);
        self.varint(v as u64);
    }
    fn float(&mut self, field: u32, v: f32) {
        self.tag(field, 5);
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn bytes(&mut self, field: u32, b: &[u8]) {
        self.tag(field, 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
    }
    fn string(&mut self, field: u32, s: &str) {
        self.bytes(field, s.as_bytes());
    }
    fn message(&mut self, field: u32, m: Message) {
        self.bytes(field, &m.0);
    }
}

/// A tensor of weights.
pub struct Initializer {
    pub name: String,
    pub dims: Vec<i64>,
    pub elem: ElemType,
    /// Little-endian raw data.
    pub data: Vec<u8>,
}

impl Initializer {
    fn encode(&self) -> Message {
        let mut m = Message::default();
        for &d in &self.dims {
            m.int(1, d);
        }
        m.int(2, self.elem as i64);
        m.string(8, &self.name);
        m.bytes(9, &self.data);
        m
    }
}

/// A node: `op_type` over named inputs, producing named outputs.
pub struct Node {
    pub op: String,
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
    pub attrs: Vec<(String, Attr)>,
}

impl Node {
    fn encode(&self, name: &str) -> Message {
        let mut m = Message::default();
        for i in &self.inputs {
            m.string(1, i);
        }
        for o in &self.outputs {
            m.string(2, o);
        }
        m.string(3, name);
        m.string(4, &self.op);
        for (key, value) in &self.attrs {
            let mut a = Message::default();
            a.string(1, key);
            match value {
                Attr::Float(f) => {
                    a.float(2, *f);
                    a.int(20, 1);
                }
                Attr::Int(i) => {
                    a.int(3, *i);
                    a.int(20, 2);
                }
                Attr::Ints(ints) => {
                    for &i in ints {
                        a.int(8, i);
                    }
                    a.int(20, 7);
                }
            }
            m.message(5, a);
        }
        m
    }
}

/// A typed graph input or output.
pub struct ValueInfo {
    pub name: String,
    pub elem: ElemType,
    pub dims: Vec<Dim>,
}

impl ValueInfo {
    fn encode(&self) -> Message {
        let mut shape = Message::default();
        for d in &self.dims {
            let mut dim = Message::default();
            match d {
                Dim::Fixed(v) => dim.int(1, *v),
                Dim::Named(n) => dim.string(2, n),
            }
            shape.message(1, dim);
        }
        let mut tensor = Message::default();
        tensor.int(1, self.elem as i64);
        tensor.message(2, shape);
        let mut ty = Message::default();
        ty.message(1, tensor);
        let mut m = Message::default();
        m.string(1, &self.name);
        m.message(2, ty);
        m
    }
}

/// A whole model.
pub struct Model {
    pub name: String,
    pub nodes: Vec<Node>,
    pub initializers: Vec<Initializer>,
    pub inputs: Vec<ValueInfo>,
    pub outputs: Vec<ValueInfo>,
    /// `(key, value)` metadata, e.g. that the weights are synthetic.
    pub metadata: Vec<(String, String)>,
}

impl Model {
    /// The serialized `ModelProto`.
    pub fn encode(&self) -> Vec<u8> {
        let mut graph = Message::default();
        for (i, n) in self.nodes.iter().enumerate() {
            graph.message(1, n.encode(&format!("{}_{i}", n.op)));
        }
        graph.string(2, &self.name);
        for init in &self.initializers {
            graph.message(5, init.encode());
        }
        for v in &self.inputs {
            graph.message(11, v.encode());
        }
        for v in &self.outputs {
            graph.message(12, v.encode());
        }
        let mut model = Message::default();
        model.int(1, 8); // ir_version
        model.string(2, "jig-synth");
        let mut opset = Message::default();
        opset.string(1, "");
        opset.int(2, 17);
        model.message(8, opset);
        model.message(7, graph);
        for (key, value) in &self.metadata {
            let mut entry = Message::default();
            entry.string(1, key);
            entry.string(2, value);
            model.message(14, entry);
        }
        model.0
    }

    /// Parameters: elements of all initializers.
    pub fn parameters(&self) -> u64 {
        self.initializers.iter().map(|i| i.dims.iter().product::<i64>() as u64).sum()
    }
}
