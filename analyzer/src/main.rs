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
    /// Report leaks (live at exit or at context teardown) and bad frees.
    Report(ReportArgs),
}

#[derive(clap::Args)]
struct ReportArgs {
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Show at most N leak groups per process (and per list).
    #[arg(long, value_name = "N")]
    top: Option<usize>,
    /// Directory with separate debug files (searched by build id, then by name); repeatable.
    #[arg(long = "debug-dir", value_name = "DIR")]
    debug_dirs: Vec<PathBuf>,
    /// Count memory still held by caching allocators (PyTorch, XLA, CuPy, RMM) as leaks.
    #[arg(long)]
    pool_as_leak: bool,
    /// Trace files written by libgpuleak.so, one per process.
    #[arg(required = true, value_name = "TRACE")]
    traces: Vec<PathBuf>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Format {
    Text,
    Json,
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
        Command::Report(args) => report(args),
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

/// `gpuleak report`: exit 0 whenever the report was written; findings are `check`'s business.
fn report(args: ReportArgs) -> anyhow::Result<ExitCode> {
    use gpuleak_analyzer::report::{self, text, Options, Report};
    use std::io::IsTerminal;

    // Every trace is opened before anything is printed, so an unreadable one stops the
    // command with nothing half-written.
    let files = args
        .traces
        .iter()
        .map(|t| gpuleak_analyzer::TraceFile::open(t))
        .collect::<Result<Vec<_>, _>>()?;
    let options = Options {
        top: args.top,
        pool_as_leak: args.pool_as_leak,
        debug_dirs: args.debug_dirs,
    };
    let report = Report::new(files.iter().map(|f| report::from_file(f, &options)).collect());
    let stdout = std::io::stdout();
    let colour = stdout.is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let mut out = std::io::BufWriter::new(stdout.lock());
    let written = match args.format {
        Format::Json => report::json::write(&report, &mut out),
        Format::Text => {
            let style = if colour {
                text::Style::COLOUR
            } else {
                text::Style::PLAIN
            };
            text::write(&report, style, &mut out)
        }
    }
    .and_then(|()| out.flush());
    match written {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(ExitCode::SUCCESS),
    }
}
