//! `jig-synth OUT_DIR [NAME...]`: write the synthetic models (all of them, or those named) as
//! `OUT_DIR/NAME.onnx`, skipping those already there.

use std::path::PathBuf;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let Some(out) = args.next().map(PathBuf::from) else {
        anyhow::bail!("usage: jig-synth OUT_DIR [NAME...]; names: {}", jig_synth::MODELS.join(", "));
    };
    let names: Vec<String> = args.collect();
    let names: Vec<&str> =
        if names.is_empty() { jig_synth::MODELS.to_vec() } else { names.iter().map(String::as_str).collect() };
    std::fs::create_dir_all(&out)?;
    for name in names {
        let path = out.join(format!("{name}.onnx"));
        if path.exists() {
            continue;
        }
        let model = jig_synth::model(name)?;
        let tmp = path.with_extension("onnx.tmp");
        std::fs::write(&tmp, model.encode())?;
        std::fs::rename(&tmp, &path)?;
        eprintln!("jig-synth: wrote {} ({:.1} M parameters)", path.display(), model.parameters() as f64 / 1e6);
    }
    Ok(())
}
