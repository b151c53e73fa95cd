//! `jig new NAME`: a bundle to start from, as `spin new` gives one: a Rust glue crate with native tests, its
//! `jig.toml` with the task's `build` command, and (`--template model`) a stand-in model the glue calls.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};

/// What a new bundle starts from.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum Template {
    /// A function of text, no model.
    Glue,
    /// A function that calls the model in slot `model` (a stand-in ONNX model until you put yours there).
    Model,
}

#[derive(clap::Args, Debug)]
pub struct NewCommand {
    /// The app's name (letters, digits, `-` and `_`, a letter first): of the directory made, the app and its
    /// task.
    name: String,
    /// What to start from.
    #[arg(long, value_enum, default_value_t = Template::Glue)]
    template: Template,
    /// The directory to make (default: ./NAME); it must not exist, or be empty.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The `jig-sdk` the glue depends on: a jig checkout's `sdk` directory, or a git URL of the jig repository
    /// (default: the `sdk` directory of the checkout this `jig` was built from, when it is still there).
    #[arg(long)]
    sdk: Option<String>,
}

/// A template's files, by their path in the new bundle.
fn files(template: Template) -> &'static [(&'static str, &'static str)] {
    match template {
        Template::Glue => &[
            ("jig.toml", include_str!("../../templates/glue/jig.toml")),
            ("Cargo.toml", include_str!("../../templates/glue/Cargo.toml")),
            ("src/lib.rs", include_str!("../../templates/glue/src/lib.rs")),
            (".gitignore", include_str!("../../templates/glue/.gitignore")),
            (".cargo/config.toml", include_str!("../../templates/cargo-config.toml")),
        ],
        Template::Model => &[
            ("jig.toml", include_str!("../../templates/model/jig.toml")),
            ("Cargo.toml", include_str!("../../templates/model/Cargo.toml")),
            ("src/lib.rs", include_str!("../../templates/model/src/lib.rs")),
            (".gitignore", include_str!("../../templates/model/.gitignore")),
            (".cargo/config.toml", include_str!("../../templates/cargo-config.toml")),
        ],
    }
}

impl NewCommand {
    /// Write the bundle and say what to do next.
    pub fn run(self) -> anyhow::Result<ExitCode> {
        let name = &self.name;
        jig_manifest::check_name("app name", name).map_err(|e| anyhow::anyhow!("{e}"))?;
        if !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
            bail!("app name `{name}`: start it with a letter (it names the glue's Rust crate too)");
        }
        let dir = self.dir.clone().unwrap_or_else(|| PathBuf::from(name));
        if dir.read_dir().is_ok_and(|mut entries| entries.next().is_some()) {
            bail!("{} exists and is not empty: choose another name, or --dir", dir.display());
        }
        let (sdk, checkout) = sdk_dependency(self.sdk.as_deref())?;
        let crate_file = name.replace('-', "_");
        for (path, text) in files(self.template) {
            let text = text.replace("{{name}}", name).replace("{{crate_file}}", &crate_file).replace("{{sdk}}", &sdk);
            let path = dir.join(path);
            std::fs::create_dir_all(path.parent().unwrap_or(&dir))
                .and_then(|()| std::fs::write(&path, text))
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        // The checkout's lock file pins what the glue builds with to the versions jig was tested with; cargo
        // keeps of it what the crate uses.
        if let Some(lock) = checkout.map(|c| c.join("Cargo.lock")).filter(|l| l.is_file()) {
            std::fs::copy(&lock, dir.join("Cargo.lock")).with_context(|| format!("cannot copy {}", lock.display()))?;
        }
        if let Template::Model = self.template {
            let path = dir.join("models/model.onnx");
            std::fs::create_dir_all(dir.join("models"))
                .and_then(|()| std::fs::write(&path, stand_in_model()))
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        let cd = dir.display();
        println!(
            "made app `{name}` in {cd}: jig.toml, its glue (Cargo.toml, src/lib.rs, .cargo/config.toml){}",
            match self.template {
                Template::Glue => "",
                Template::Model => " and a stand-in model (models/model.onnx)",
            }
        );
        let payload = match self.template {
            Template::Glue => "echo world",
            Template::Model => r#"echo '{"x": [[1, 2, 3, 4]]}'"#,
        };
        println!("next:");
        for (step, why) in [
            (format!("cd {cd} && cargo test"), "the glue's tests, natively"),
            ("jig build".into(), "its component (once: rustup target add wasm32-wasip2)"),
            ("jig deploy .".into(), "to the gateway (`jig up` in another terminal)"),
            (format!("{payload} | jig invoke {name}"), "a request"),
        ] {
            println!("  {step:<36} # {why}");
        }
        Ok(ExitCode::SUCCESS)
    }
}

/// The `jig-sdk = …` line of the glue's Cargo.toml: from `given` (a directory or a git URL), or the checkout
/// this `jig` was built from; and the checkout, when the SDK is a directory of one.
fn sdk_dependency(given: Option<&str>) -> anyhow::Result<(String, Option<PathBuf>)> {
    if let Some(url) = given.filter(|g| g.contains("://") || g.starts_with("git@")) {
        return Ok((format!("jig-sdk = {{ git = {url:?} }}"), None));
    }
    let built_from = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk");
    let dir = match given {
        Some(dir) => PathBuf::from(dir),
        None if built_from.join("Cargo.toml").is_file() => built_from,
        None => bail!(
            "this jig was built from {}, which is gone: give --sdk, a jig checkout's `sdk` directory or the jig \
             repository's git URL",
            built_from.display()
        ),
    };
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap_or_default();
    if !manifest.contains("name = \"jig-sdk\"") {
        bail!("--sdk {}: no jig-sdk crate there (give a jig checkout's `sdk` directory)", dir.display());
    }
    let dir = dir.canonicalize().with_context(|| format!("--sdk {}", dir.display()))?;
    Ok((format!("jig-sdk = {{ path = {:?} }}", dir.display().to_string()), dir.parent().map(Path::to_path_buf)))
}

/// A small model for the `model` template to run until the user's own replaces it: `x` f32 `[N, 4]` to `y`
/// f32 `[N, 3]`, the softmax of one dense layer of pseudo-random weights.
fn stand_in_model() -> Vec<u8> {
    use jig_synth::onnx::Attr;
    let mut g = jig_synth::graph::Builder::new("jig-new");
    let dense = g.linear("x", 4, 3);
    let y = g.op("Softmax", &[&dense], vec![("axis", Attr::Int(1))]);
    g.finish("model", ("x", &[4]), (&y, &[3])).encode()
}
