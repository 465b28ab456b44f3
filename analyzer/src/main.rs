//! `gpuleak`: the command line over the analyzer library.
//!
//! Exit codes: 0 clean, 1 findings, 2 error; `run` passes the command's through (127: not
//! found, 126: cannot run).

use std::io::Write;
use std::os::unix::process::CommandExt;
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
    /// Report leaks (live at exit or at context teardown), bad frees and stream-ordering
    /// mistakes; with --memory, where the memory went (timeline, growth, fragmentation).
    Report(ReportArgs),
    /// Gate CI: exit 1 on leaks over the limits, new or grown leak sites, or findings.
    Check(CheckArgs),
    /// Compare two runs (or two snapshots of one) site by site: new, grown, shrunk and gone
    /// leak sites, peak and growth; exit 1 when a site is new or grew.
    Diff(DiffArgs),
    /// Run a command with libgpuleak.so preloaded (one trace per process), then summarize.
    Run(RunArgs),
    /// Merge JSON reports made where the traces are (gpuleak report --format json on each
    /// node of a job) into the report of every trace at once.
    Merge(MergeArgs),
}

#[derive(clap::Args)]
struct MergeArgs {
    /// Write the merged report to FILE instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// Reports written by `gpuleak report --format json` (without --top), in the order of
    /// their traces.
    #[arg(required = true, value_name = "REPORT")]
    reports: Vec<PathBuf>,
}

#[derive(clap::Args)]
struct RunArgs {
    /// Trace path: a template with %p (the pid), a directory, or a file name (.%p is added
    /// before its extension). Default: gpuleak.<program>.%p.trace here.
    #[arg(short = 'o', long = "output", value_name = "PATH")]
    output: Option<PathBuf>,
    /// Exit with N instead of the command's 0 when leaks or error findings exist.
    #[arg(long, value_name = "N")]
    error_exitcode: Option<u8>,
    /// Turn off the caching allocators of PyTorch (PYTORCH_NO_CUDA_MEMORY_CACHING=1), JAX
    /// (XLA_PYTHON_CLIENT_ALLOCATOR=platform, XLA_PYTHON_CLIENT_PREALLOCATE=false), CuPy (a
    /// sitecustomize on PYTHONPATH) and numba-cuda's deferred frees
    /// (NUMBA_CUDA_MAX_PENDING_DEALLOCS_COUNT=0), so that each tensor is a real allocation;
    /// what their modules hold then counts as leaked.
    #[arg(long)]
    no_framework_cache: bool,
    /// Say which shim is preloaded, where the traces go and which variables are set.
    #[arg(short = 'v', long)]
    verbose: bool,
    /// The command and its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    command: Vec<std::ffi::OsString>,
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
    /// Look for the traced program's files below DIR first (a trace recorded on another
    /// machine, in a container or under an emulator); default: $GPULEAK_SYSROOT.
    #[arg(long, value_name = "DIR")]
    sysroot: Option<PathBuf>,
    /// Count memory still held by caching allocators (PyTorch, XLA, CuPy, RMM) as leaks.
    #[arg(long)]
    pool_as_leak: bool,
    #[command(flatten)]
    frames: FrameArgs,
    /// Also show where the memory went: timeline, peak, growth, fragmentation, failed
    /// allocations (always on with --format html or collapsed, and with --at).
    #[arg(long)]
    memory: bool,
    /// Show the live state at the Snapshot record with id N, or what changed from N to M
    /// (N..M).
    #[arg(long, value_name = "N|N..M", value_parser = gpuleak_analyzer::report::memory::At::parse)]
    at: Option<gpuleak_analyzer::report::memory::At>,
    /// With --format collapsed: weigh stacks by leaked bytes or by bytes live at the peak.
    #[arg(long, value_enum, default_value_t = Weight::Leaked)]
    weight: Weight,
    /// Write the report to FILE instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    #[command(flatten)]
    reading: Reading,
    #[command(flatten)]
    color: ColorArg,
    /// Trace files written by libgpuleak.so (one per process), or directories of them.
    #[arg(required = true, value_name = "TRACE")]
    traces: Vec<PathBuf>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Weight {
    Leaked,
    Peak,
}

/// `--color`, for the commands that write text.
#[derive(clap::Args)]
struct ColorArg {
    /// Colour the text: auto (when stdout is a terminal, or as NO_COLOR and FORCE_COLOR say),
    /// always or never.
    #[arg(long, value_enum, value_name = "WHEN", default_value_t = Color::Auto)]
    color: Color,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Color {
    Auto,
    Always,
    Never,
}

impl ColorArg {
    /// The style of text written to stdout (`terminal`: whether stdout is a terminal) or, when
    /// `terminal` is false, to a file.
    fn style(&self, terminal: bool) -> gpuleak_analyzer::colour::Style {
        use gpuleak_analyzer::colour::{Choice, Style};
        let choice = match self.color {
            Color::Auto => Choice::Auto,
            Color::Always => Choice::Always,
            Color::Never => Choice::Never,
        };
        Style::new(choice.colour_here(terminal))
    }
}

/// Which frames name a site and which a stack shows, for `report` and `check`.
#[derive(clap::Args)]
struct FrameArgs {
    /// Take frames whose file or module path matches GLOB as the user's code (`*`, `?`; a
    /// GLOB without `/` also matches base names); repeatable.
    #[arg(long = "focus", value_name = "GLOB")]
    focus: Vec<String>,
    /// Never take frames whose file or module path matches GLOB as the user's code;
    /// repeatable, and stronger than --focus.
    #[arg(long = "hide", value_name = "GLOB")]
    hide: Vec<String>,
    /// Show every native frame of Python stacks (interpreter, bindings, libraries) instead of
    /// one line per run of them.
    #[arg(long)]
    native_frames: bool,
}

impl FrameArgs {
    fn user_code(&self) -> gpuleak_analyzer::report::user_code::UserCode {
        gpuleak_analyzer::report::user_code::UserCode::new(self.focus.clone(), self.hide.clone())
    }
}

/// How traces are read, for `report` and `check`.
#[derive(clap::Args)]
struct Reading {
    /// Read up to N traces at once (default: one per CPU); 1 reads them one after another on
    /// one thread. The output is the same either way.
    #[arg(short = 'j', long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    jobs: Option<u16>,
    /// Print nothing on stderr but errors (no progress bar).
    #[arg(short = 'q', long)]
    quiet: bool,
}

/// One thread per CPU this process may run on.
fn every_cpu() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

impl Reading {
    /// Opens every trace (a directory stands for the traces in it) and reports on each, in
    /// order, on up to `--jobs` threads, with a progress bar on stderr when `bar` allows one,
    /// stderr is a terminal and `--quiet` was not given.
    fn reports(
        &self,
        traces: &[PathBuf],
        options: &gpuleak_analyzer::report::Options,
        bar: bool,
    ) -> anyhow::Result<Vec<gpuleak_analyzer::report::ProcessReport>> {
        use gpuleak_analyzer::report::{self, progress, Progress};
        use std::io::IsTerminal;

        let jobs = self.jobs.map_or_else(every_cpu, usize::from);
        // A bounded trace still being written deletes its oldest segment as it goes: one
        // deleted while it was read may have read as zeros from some point on, so the traces
        // are read again from the segments present then (a few times at most: a process
        // rotating faster than its trace is read keeps the last reading).
        let mut tries = 0;
        let mut last = None;
        loop {
            let files = match (gpuleak_analyzer::TraceFile::open_all(traces), last) {
                (Ok(files), _) => files,
                // Gone altogether since the last reading: that reading stands.
                (Err(_), Some(reports)) => return Ok(reports),
                (Err(e), None) => return Err(e.into()),
            };
            let reports = if bar && !self.quiet && std::io::stderr().is_terminal() {
                let p = Progress::new(files.iter().map(|f| f.len()).sum(), files.len());
                progress::show(&p, || report::from_files(&files, options, jobs, Some(&p)))
            } else {
                report::from_files(&files, options, jobs, None)
            };
            tries += 1;
            if tries == 4 || !files.iter().any(|f| f.deleted_since_open()) {
                return Ok(reports);
            }
            last = Some(reports);
        }
    }
}

#[derive(clap::Args)]
struct CheckArgs {
    /// Fail a process that leaks more bytes than this, after suppressions: bytes or a size with
    /// a unit, all powers of 1024 (4096, 64KB, 1.5 MiB, 2G).
    #[arg(long, value_name = "SIZE", value_parser = gpuleak_analyzer::check::size::parse_size)]
    max_leaked_bytes: Option<u64>,
    /// Fail a process with more leaked allocations than this, after suppressions.
    #[arg(long, value_name = "N")]
    max_leaks: Option<u64>,
    /// Suppressions file, one `leak:PATTERN` or `bad-free:PATTERN` a line; repeatable.
    #[arg(long = "suppressions", value_name = "FILE")]
    suppressions: Vec<std::path::PathBuf>,
    /// JSON report of an earlier run (`gpuleak report --format json`): fail on new leak sites
    /// and on sites that grew, instead of on every leak.
    #[arg(long, value_name = "REPORT.json")]
    baseline: Option<std::path::PathBuf>,
    /// How much a site may grow over the baseline: a size as for --max-leaked-bytes (4096,
    /// 64K) or a percentage (10%).
    #[arg(long, value_name = "BYTES_OR_PERCENT", requires = "baseline",
          value_parser = gpuleak_analyzer::check::size::parse_tolerance)]
    tolerance: Option<gpuleak_analyzer::check::Tolerance>,
    /// Findings of this severity or worse fail.
    #[arg(long, value_name = "SEVERITY", value_parser = ["error", "warning", "note"], default_value = "error")]
    fail_on: String,
    /// Output format.
    #[arg(long, value_parser = ["text", "json", "junit", "sarif"], default_value = "text")]
    format: String,
    /// Write the output to FILE; with json, junit or sarif, the text still goes to stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<std::path::PathBuf>,
    /// Count memory still held by caching allocators (PyTorch, XLA, CuPy, RMM) as leaks.
    #[arg(long)]
    pool_as_leak: bool,
    /// Directory with separate debug files (searched by build id, then by name); repeatable.
    #[arg(long = "debug-dir", value_name = "DIR")]
    debug_dirs: Vec<std::path::PathBuf>,
    /// Look for the traced program's files below DIR first (a trace recorded on another
    /// machine, in a container or under an emulator); default: $GPULEAK_SYSROOT.
    #[arg(long, value_name = "DIR")]
    sysroot: Option<std::path::PathBuf>,
    /// Also run the memory pass: growth and fragmentation findings (warnings: they fail with
    /// --fail-on warning).
    #[arg(long)]
    memory: bool,
    #[command(flatten)]
    frames: FrameArgs,
    #[command(flatten)]
    reading: Reading,
    #[command(flatten)]
    color: ColorArg,
    /// Trace files written by libgpuleak.so (one per process), or directories of them.
    #[arg(required = true, value_name = "TRACE")]
    traces: Vec<std::path::PathBuf>,
}

#[derive(clap::Args)]
struct DiffArgs {
    /// Output format.
    #[arg(long, value_enum, default_value_t = DiffFormat::Text)]
    format: DiffFormat,
    /// Compare the bytes live at the end (leaked at exit, and held by caching allocators)
    /// instead of the leaked bytes; a snapshot always gives its live bytes.
    #[arg(long)]
    live: bool,
    /// Count memory still held by caching allocators (PyTorch, XLA, CuPy, RMM) as leaks.
    #[arg(long)]
    pool_as_leak: bool,
    /// Directory with separate debug files (searched by build id, then by name); repeatable.
    #[arg(long = "debug-dir", value_name = "DIR")]
    debug_dirs: Vec<PathBuf>,
    /// Look for the traced program's files below DIR first; default: $GPULEAK_SYSROOT.
    #[arg(long, value_name = "DIR")]
    sysroot: Option<PathBuf>,
    #[command(flatten)]
    frames: FrameArgs,
    /// Read up to N traces at once (default: one per CPU).
    #[arg(short = 'j', long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    jobs: Option<u16>,
    /// Write the output to FILE instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// The earlier run: a trace, a directory of traces, a JSON report, or TRACE@N (the
    /// trace's snapshot N).
    #[arg(value_name = "A")]
    a: String,
    /// The later run, as A.
    #[arg(value_name = "B")]
    b: String,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum DiffFormat {
    Text,
    Json,
    /// One self-contained HTML page (both timelines on one axis, tables).
    Html,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Text,
    Json,
    /// One self-contained HTML page (charts, flame graphs, tables).
    Html,
    /// Stacks for flame graph tools, one line each (`--weight`).
    Collapsed,
}

fn merge(args: MergeArgs) -> anyhow::Result<ExitCode> {
    let merged = gpuleak_analyzer::report::merge::merge_files(&args.reports).map_err(|e| anyhow::anyhow!(e))?;
    match &args.output {
        Some(path) => std::fs::write(path, merged).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?,
        None => {
            let stdout = std::io::stdout();
            let mut out = stdout.lock();
            match out.write_all(merged.as_bytes()).and_then(|()| out.flush()) {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => return Err(e.into()),
                _ => {}
            }
        }
    }
    Ok(ExitCode::SUCCESS)
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
        Command::Check(args) => check(args),
        Command::Diff(args) => diff(args),
        Command::Run(args) => run_command(args),
        Command::Merge(args) => merge(args),
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
            let shrunk = file.missing_from();
            if let Some(at) = shrunk {
                eprintln!(
                    "gpuleak: {}: {}",
                    trace.display(),
                    gpuleak_analyzer::report::damage::shrunk(at)
                );
            }
            Ok(if errors.is_empty() && shrunk.is_none() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(2)
            })
        }
    }
}

/// `gpuleak report`: exit 0 whenever the report was written; findings are `check`'s business.
/// `--sysroot`, else `GPULEAK_SYSROOT` when set and not empty.
fn sysroot(flag: Option<PathBuf>) -> Option<PathBuf> {
    flag.or_else(|| {
        std::env::var_os("GPULEAK_SYSROOT")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    })
}

/// Where resolved frames are kept across runs: `GPULEAK_SYMBOL_CACHE`, else the XDG cache.
fn symbol_cache() -> Option<PathBuf> {
    gpuleak_analyzer::symbolize::cache::directory(
        std::env::var_os("GPULEAK_SYMBOL_CACHE").as_deref(),
        std::env::var_os("XDG_CACHE_HOME").as_deref(),
        std::env::var_os("HOME").as_deref(),
    )
}

fn report(args: ReportArgs) -> anyhow::Result<ExitCode> {
    use gpuleak_analyzer::report::memory::{collapsed, html};
    use gpuleak_analyzer::report::{self, text, Options, Report};
    use std::io::IsTerminal;

    // --top applies once the merged view has summed every group.
    let options = Options {
        top: None,
        pool_as_leak: args.pool_as_leak,
        debug_dirs: args.debug_dirs,
        sysroot: sysroot(args.sysroot),
        symbol_cache: symbol_cache(),
        counts_only: false,
        memory: args.memory || args.at.is_some() || matches!(args.format, Format::Html | Format::Collapsed),
        at: args.at,
        user_code: args.frames.user_code(),
        native_frames: args.frames.native_frames,
    };
    let bar = matches!(args.format, Format::Text);
    let mut report = Report::new(args.reading.reports(&args.traces, &options, bar)?);
    report.native_frames = args.frames.native_frames;
    if !args.reading.quiet {
        for why in unreadable(&report) {
            eprintln!("gpuleak: warning: {why}; the report covers what could be read");
        }
    }
    if let Some(at) = args.at {
        check_snapshots(&report, at)?;
    }
    if let Some(top) = args.top {
        report.limit(top);
    }
    let to_terminal = args.output.is_none() && std::io::stdout().is_terminal();
    let mut bytes = Vec::new();
    match args.format {
        Format::Json => report::json::write(&report, &mut bytes)?,
        Format::Text => text::write(&report, args.color.style(to_terminal), &mut bytes)?,
        Format::Html => bytes = html::write(&report).into_bytes(),
        Format::Collapsed => {
            let weight = match args.weight {
                Weight::Leaked => collapsed::Weight::Leaked,
                Weight::Peak => collapsed::Weight::Peak,
            };
            bytes = collapsed::write(&report, weight).into_bytes()
        }
    }
    if let Some(path) = &args.output {
        std::fs::write(path, &bytes)
            .map_err(|e| anyhow::anyhow!("{}: cannot write the report: {e}", path.display()))?;
        return Ok(ExitCode::SUCCESS);
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match out.write_all(&bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(ExitCode::SUCCESS),
    }
}

/// `--at`: every snapshot asked for must be in at least one trace.
fn check_snapshots(
    report: &gpuleak_analyzer::report::Report,
    at: gpuleak_analyzer::report::memory::At,
) -> anyhow::Result<()> {
    if report
        .processes
        .iter()
        .any(|p| p.memory.as_ref().is_some_and(|m| m.snapshot.is_some()))
    {
        return Ok(());
    }
    let mut seen: Vec<u64> = report
        .processes
        .iter()
        .filter_map(|p| p.memory.as_ref())
        .flat_map(|m| m.replay.snapshot_ids.iter().copied())
        .collect();
    seen.sort_unstable();
    seen.dedup();
    let wanted: Vec<String> = at.ids().iter().map(u64::to_string).collect();
    let has = if seen.is_empty() {
        "the trace has no Snapshot record".to_string()
    } else {
        let ids: Vec<String> = seen.iter().map(u64::to_string).collect();
        format!("snapshots in the trace: {}", ids.join(", "))
    };
    anyhow::bail!("no trace has snapshot {} ({has})", wanted.join(" and "))
}

/// Each trace that could not be read whole (decoding errors, a file that shrank while it was
/// read, no records): `TRACE: why`, the why naming the offset.
fn unreadable(report: &gpuleak_analyzer::report::Report) -> Vec<String> {
    report
        .processes
        .iter()
        .filter_map(|p| p.damage.problem().map(|why| format!("{}: {why}", p.trace.display())))
        .collect()
}

/// `gpuleak run`: the command's own exit code passes through (128 + signal when killed), unless
/// `--error-exitcode` applies; 127 when the command is not found and 126 when it cannot be run
/// (as in a shell); gpuleak's own errors exit 2.
fn run_command(args: RunArgs) -> anyhow::Result<ExitCode> {
    use gpuleak_analyzer::report::{self, Options, Report};
    use gpuleak_analyzer::run::{self, Output};

    let exe = std::env::current_exe()?;
    let shim = run::find_shim(&exe).map_err(anyhow::Error::msg)?;
    let program = std::path::Path::new(&args.command[0])
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_else(|| "program".into());
    let output = Output::new(args.output.as_deref(), &program);
    std::fs::create_dir_all(&output.dir).map_err(|e| anyhow::anyhow!("cannot create {}: {e}", output.dir.display()))?;
    let before = output.existing();
    let preload = run::preload_value(&shim, std::env::var_os("LD_PRELOAD").as_deref());
    // Absolute: a process that changes directory must not write its trace elsewhere.
    let template = output
        .absolute_template()
        .map_err(|e| anyhow::anyhow!("cannot make {} absolute: {e}", output.template().to_string_lossy()))?;
    let mut cmd = std::process::Command::new(&args.command[0]);
    cmd.args(&args.command[1..])
        .env("LD_PRELOAD", &preload)
        .env("GPULEAK_OUTPUT", &template);
    if args.verbose {
        eprintln!("gpuleak: preloading {}", shim.display());
        eprintln!("gpuleak: GPULEAK_OUTPUT={}", template.to_string_lossy());
    }
    // Removed (with its directory) when the command has ended.
    let mut _site = None;
    if args.no_framework_cache {
        let site = run::SiteDir::create()
            .map_err(|e| anyhow::anyhow!("cannot create the sitecustomize directory for --no-framework-cache: {e}"))?;
        for e in run::framework_cache_env(site.path(), std::env::var_os("PYTHONPATH").as_deref()) {
            if args.verbose {
                eprintln!("gpuleak: {}={} ({})", e.name, e.value.to_string_lossy(), e.why);
            }
            cmd.env(e.name, e.value);
        }
        _site = Some(site);
    } else if run::frameworks_on(std::env::var_os(run::FRAMEWORKS_VAR).as_deref()) {
        // PyTorch's allocator, CuPy's pool and JAX's buffers read from inside, without a change
        // to the program.
        let site = run::SiteDir::create().map_err(|e| {
            anyhow::anyhow!("cannot create the sitecustomize directory (GPULEAK_FRAMEWORKS=0 does without): {e}")
        })?;
        let path = run::python_path(site.path(), std::env::var_os("PYTHONPATH").as_deref());
        if args.verbose {
            eprintln!(
                "gpuleak: PYTHONPATH={} (a sitecustomize that reads PyTorch's caching allocator, CuPy's memory pool or JAX's live buffers once the program imports torch, cupy or jax; {}=0 turns it off)",
                path.to_string_lossy(),
                run::FRAMEWORKS_VAR
            );
        }
        cmd.env("PYTHONPATH", path);
        _site = Some(site);
    }
    // Like time(1): Ctrl-C and Ctrl-\ go to the command; gpuleak stays to summarize.
    // SAFETY: SIG_IGN installs no handler, so no handler code has to be async-signal-safe;
    // signal only writes the process's dispositions and returns the old ones.
    let old = unsafe {
        [
            libc::signal(libc::SIGINT, libc::SIG_IGN),
            libc::signal(libc::SIGQUIT, libc::SIG_IGN),
        ]
    };
    // An ignored signal stays ignored across exec: the command gets back the dispositions
    // gpuleak was started with, so that Ctrl-C stops it (Python raises KeyboardInterrupt) as
    // it would without gpuleak, and a command started ignoring them (nohup) still does.
    let (int, quit) = (old[0], old[1]);
    // SAFETY: the closure runs in the child between fork and exec, where only
    // async-signal-safe functions may be called: it calls signal, which is one, with the
    // dispositions this process had (a handler address of this process's is replaced by exec
    // with the default, as for any caught signal; SIG_ERR is refused and changes nothing).
    unsafe {
        cmd.pre_exec(move || {
            libc::signal(libc::SIGINT, int);
            libc::signal(libc::SIGQUIT, quit);
            Ok(())
        });
    }
    let status = cmd.status();
    // SAFETY: puts back the dispositions signal returned above, which this process had
    // installed (SIG_ERR, had a call failed, is refused with EINVAL and changes nothing).
    unsafe {
        libc::signal(libc::SIGINT, old[0]);
        libc::signal(libc::SIGQUIT, old[1]);
    }
    let status = match status {
        Ok(status) => status,
        // As a shell or env(1) would: 127 when the command is not found, 126 when it cannot run.
        Err(e) => {
            let (code, why) = run::spawn_failure(&args.command[0], &e);
            eprintln!("gpuleak: {why}");
            return Ok(ExitCode::from(code));
        }
    };
    let code = run::exit_code(status);

    let traces: Vec<PathBuf> = output.existing().difference(&before).cloned().collect();
    if traces.is_empty() {
        eprintln!("gpuleak: {program} made no CUDA call; no trace written");
        return Ok(ExitCode::from(code.clamp(0, 255) as u8));
    }
    let mut opened = Vec::new();
    for t in &traces {
        match gpuleak_analyzer::TraceFile::open(t) {
            Ok(f) => opened.push(f),
            Err(e) => eprintln!("gpuleak: {e}"),
        }
    }
    // A bounded trace's segments are one process.
    let files = gpuleak_analyzer::TraceFile::group(opened).unwrap_or_else(|e| {
        eprintln!("gpuleak: {e}");
        Vec::new()
    });
    // Without the caches, what the frameworks' modules hold is tensors, not cached segments.
    // The closing line prints counts only: no frame is named, so no symbols are read.
    let options = Options {
        pool_as_leak: args.no_framework_cache,
        counts_only: true,
        ..Options::default()
    };
    let report = Report::new(report::from_files(&files, &options, every_cpu(), None));
    for why in unreadable(&report) {
        eprintln!("gpuleak: warning: {why}");
    }
    let summary = report.summary;
    let sites = summary.leaked_allocations;
    eprintln!(
        "gpuleak: {} process{} traced: {} leaked allocation{} ({}), {} finding{}, peak {}",
        files.len(),
        if files.len() == 1 { "" } else { "es" },
        sites,
        if sites == 1 { "" } else { "s" },
        run::human_bytes(summary.leaked_bytes),
        summary.findings,
        if summary.findings == 1 { "" } else { "s" },
        run::human_bytes(summary.peak_bytes),
    );
    let listed: Vec<String> = traces.iter().map(|t| run::shell_quote(&t.to_string_lossy())).collect();
    let pool = if args.no_framework_cache { "--pool-as-leak " } else { "" };
    eprintln!("gpuleak: next: gpuleak report {pool}{}", listed.join(" "));
    let found = summary.leaked_allocations > 0 || summary.findings > 0;
    let code = match args.error_exitcode {
        Some(n) if found && code == 0 => i32::from(n),
        _ => code,
    };
    Ok(ExitCode::from(code.clamp(0, 255) as u8))
}

/// `gpuleak check`: exit 0 when nothing fails, 1 on violations, 2 on errors (never 77, which
/// test runners read as "skipped").
fn check(args: CheckArgs) -> anyhow::Result<ExitCode> {
    use anyhow::Context;
    use gpuleak_analyzer::check::{self, Baseline, Config, Suppressions};
    use gpuleak_analyzer::report::{Options, Report, Severity};
    use std::io::IsTerminal;

    // Everything is read before anything is written, so an error leaves no half output.
    let mut suppressions = Suppressions::default();
    for path in &args.suppressions {
        suppressions.read(path)?;
    }
    let user_code = args.frames.user_code();
    let baseline = args
        .baseline
        .as_deref()
        .map(|path| Baseline::read_with(path, &user_code))
        .transpose()?;
    let options = Options {
        top: None,
        pool_as_leak: args.pool_as_leak,
        debug_dirs: args.debug_dirs,
        sysroot: sysroot(args.sysroot),
        symbol_cache: symbol_cache(),
        counts_only: false,
        memory: args.memory,
        at: None,
        user_code,
        native_frames: args.frames.native_frames,
    };
    let bar = args.format == "text" || args.output.is_some();
    let report = Report::new(args.reading.reports(&args.traces, &options, bar)?);
    // A trace not read whole may hide what would fail: neither pass nor fail it.
    let unreadable = unreadable(&report);
    if !unreadable.is_empty() {
        for why in &unreadable {
            eprintln!("gpuleak: {why}");
        }
        eprintln!(
            "gpuleak: check cannot pass or fail a trace it could not read whole; `gpuleak report` \
             shows what could be read"
        );
        return Ok(ExitCode::from(check::EXIT_ERROR));
    }
    let config = Config {
        max_leaked_bytes: args.max_leaked_bytes,
        max_leaks: args.max_leaks,
        fail_on: match args.fail_on.as_str() {
            "note" => Severity::Note,
            "warning" => Severity::Warning,
            _ => Severity::Error,
        },
        suppressions,
        baseline,
        tolerance: args.tolerance.unwrap_or_default(),
    };
    let outcome = check::evaluate(report, &config);

    // The text goes to stdout, unless it is the format and -o names a file.
    let text_to_file = args.format == "text" && args.output.is_some();
    let style = args.color.style(!text_to_file && std::io::stdout().is_terminal());
    let mut text = Vec::new();
    check::text::write_styled(&outcome, style, &mut text)?;
    let mut machine = Vec::new();
    match args.format.as_str() {
        "json" => check::json::write(&outcome, &mut machine)?,
        "junit" => check::junit::write(&outcome, &mut machine)?,
        "sarif" => check::sarif::write(&outcome, &mut machine)?,
        _ => machine = std::mem::take(&mut text),
    }
    let stdout = match &args.output {
        Some(path) => {
            std::fs::write(path, &machine).with_context(|| format!("{}: cannot write the output", path.display()))?;
            text
        }
        None => machine,
    };
    let mut out = std::io::stdout().lock();
    match out.write_all(&stdout).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => return Err(e.into()),
        _ => {}
    }
    Ok(ExitCode::from(outcome.exit_code()))
}

/// `gpuleak diff`: exit 0 when no site is new or grew, 1 when one is, 2 on errors.
fn diff(args: DiffArgs) -> anyhow::Result<ExitCode> {
    use gpuleak_analyzer::diff::{self, input, Measure};
    use gpuleak_analyzer::report::Options;

    let reading = input::Reading {
        options: Options {
            pool_as_leak: args.pool_as_leak,
            debug_dirs: args.debug_dirs,
            sysroot: sysroot(args.sysroot),
            symbol_cache: symbol_cache(),
            user_code: args.frames.user_code(),
            native_frames: args.frames.native_frames,
            ..Options::default()
        },
        jobs: args.jobs.map_or_else(every_cpu, usize::from),
        measure: if args.live { Measure::Live } else { Measure::Leaked },
    };
    // Both sides are read before anything is written, so an error leaves no half output.
    let a = input::load(&args.a, &reading)?;
    let b = input::load(&args.b, &reading)?;
    let d = diff::compare(a, b, reading.measure);
    let mut bytes = Vec::new();
    match args.format {
        DiffFormat::Text => diff::text::write(&d, args.frames.native_frames, &mut bytes)?,
        DiffFormat::Json => diff::json::write(&d, &mut bytes)?,
        DiffFormat::Html => bytes = diff::html::write(&d).into_bytes(),
    }
    match &args.output {
        Some(path) => std::fs::write(path, &bytes)
            .map_err(|e| anyhow::anyhow!("{}: cannot write the diff: {e}", path.display()))?,
        None => {
            let mut out = std::io::stdout().lock();
            match out.write_all(&bytes).and_then(|()| out.flush()) {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => return Err(e.into()),
                _ => {}
            }
        }
    }
    Ok(ExitCode::from(d.exit_code()))
}
