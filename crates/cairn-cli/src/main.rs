//! The `cairn` binary; see `cairn --help` and the `cairn_cli` library.

fn main() -> std::process::ExitCode {
    cairn_cli::main()
}
