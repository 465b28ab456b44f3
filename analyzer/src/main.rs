//! `gpuleak`: the command line over the analyzer library.
//!
//! Exit codes: 0 clean, 1 findings, 2 error.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "gpuleak",
    version,
    about = "Find GPU memory leaks: record with libgpuleak.so, report with gpuleak"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print every record of a trace as one JSON object per line.
    Dump {
        /// Trace file written by libgpuleak.so.
        trace: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("gpuleak: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Dump { trace } => {
            let file = gpuleak_analyzer::TraceFile::open(&trace)?;
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            let errors = match gpuleak_analyzer::dump::write(&file, &mut out) {
                Ok(e) => e,
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(ExitCode::SUCCESS),
                Err(e) => return Err(e.into()),
            };
            let _ = out.flush();
            for e in &errors {
                eprintln!("gpuleak: {}: {e}", trace.display());
            }
            Ok(if errors.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(2)
            })
        }
    }
}
