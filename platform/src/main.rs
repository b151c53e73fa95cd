//! The `jig` binary; see [`jig_platform::cli`].

fn main() -> std::process::ExitCode {
    jig_platform::cli::main()
}
