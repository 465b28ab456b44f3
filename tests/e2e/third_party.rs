//! Real third-party CUDA clients on the simulated driver, alone and under the shim: cudarc
//! (dlopen, then one plain `dlsym` per function), NVIDIA's cuda-bindings (ctypes, then
//! `cuGetProcAddress_v2` for 500+ names) and cuda-core on top of it.
//!
//! Each program prints one line per allocation it makes,
//! `alloc call=NAME memory=device|host ptr=0x... size=N freed|leaked`; the trace must hold
//! exactly those allocations, with the driver entry point the client really reached, each freed
//! one freed once and each leaked one never. The programs live in `examples/cudarc-leak/` (built
//! by `cargo build --release --workspace`) and `tests/python/` (run by `target/pyenv`, which
//! `scripts/python-env` installs from PyPI). cuda-bindings also builds and launches a graph with
//! memory nodes (`tests/python/cuda_bindings_graphs.py`) and orders two streams by a memory
//! value (`tests/python/cuda_bindings_memops.py`), both checked through the report.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use gpuleak_e2e::{example, shim_command, sim_command, TempDir};
use serde_json::Value;

use crate::trace::{assert_ok, dump, hex};

mod graphs;

/// The versions `scripts/python-env` pins; a stale environment fails with a pointer to it.
const PYTHON_PACKAGES: &str = "cuda-bindings==13.5.0 cuda-core==1.2.2";

/// One allocation a client printed.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Printed {
    /// What the program called (a driver function or a library method).
    call: String,
    /// A host address: it moves with the address-space layout, unlike the simulator's device
    /// addresses.
    host: bool,
    ptr: u64,
    size: u64,
    leaked: bool,
}

impl std::fmt::Display for Printed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let fate = if self.leaked { "leaked" } else { "freed" };
        write!(f, "{} ptr={:#x} size={} ({fate})", self.call, self.ptr, self.size)
    }
}

/// A client program and what its calls must look like in the trace.
struct Client {
    name: &'static str,
    command: fn() -> Command,
    /// Printed `call` to the exact driver entry point the trace must name.
    apis: &'static [(&'static str, &'static str)],
    /// How many allocations the program makes, and how many of them it leaks.
    allocations: usize,
    leaks: usize,
}

const CUDARC: Client = Client {
    name: "cudarc (examples/cudarc-leak)",
    command: cudarc_command,
    // cudarc's own stream allocates stream-ordered when the device has memory pools.
    apis: &[
        ("CudaStream::clone_htod", "cuMemAllocAsync"),
        ("CudaStream::alloc_zeros", "cuMemAllocAsync"),
    ],
    allocations: 6,
    leaks: 3,
};

const CUDA_BINDINGS: Client = Client {
    name: "cuda-bindings (tests/python/cuda_bindings_client.py)",
    command: cuda_bindings_command,
    // The resolver hands out the newest ABI of each name for the version cuda-bindings asks.
    apis: &[
        ("cuMemAlloc", "cuMemAlloc_v2"),
        ("cuMemAllocAsync", "cuMemAllocAsync"),
        ("cuMemHostAlloc", "cuMemHostAlloc"),
    ],
    allocations: 5,
    leaks: 1,
};

const CUDA_CORE: Client = Client {
    name: "cuda-core (tests/python/cuda_core_client.py)",
    command: cuda_core_command,
    apis: &[
        ("DeviceMemoryResource.allocate", "cuMemAllocFromPoolAsync"),
        ("LegacyPinnedMemoryResource.allocate", "cuMemAllocHost_v2"),
    ],
    allocations: 6,
    leaks: 0,
};

fn cudarc_command() -> Command {
    Command::new(example("gpuleak-example-cudarc"))
}

/// [`gpuleak_e2e::python`], checked to hold the pinned packages.
fn python() -> PathBuf {
    let python = gpuleak_e2e::python();
    let fix = format!(
        "run scripts/python-env, which installs {PYTHON_PACKAGES} from PyPI into target/pyenv \
         (scripts/test-aarch64 installs them into its sysroot)"
    );
    let probe = "from importlib.metadata import version as v; \
                 print(f\"cuda-bindings=={v('cuda-bindings')} cuda-core=={v('cuda-core')}\")";
    let out = sim_command(&python).args(["-I", "-c", probe]).output();
    let found = match &out {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).trim().to_string(),
        Ok(out) => String::from_utf8_lossy(&out.stderr).trim().to_string(),
        Err(e) => e.to_string(),
    };
    assert_eq!(
        found,
        PYTHON_PACKAGES,
        "{} does not hold the pinned packages: {fix}",
        python.display()
    );
    python
}

/// `python -I tests/python/<script>`: isolated from the caller's `PYTHON*` variables, and
/// without the `CUDA_PYTHON_*` switches that would change which entry points it asks for.
fn python_command(script: &str) -> Command {
    let mut cmd = Command::new(python());
    cmd.arg("-I")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("python").join(script));
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("CUDA_PYTHON_") {
            cmd.env_remove(&key);
        }
    }
    cmd
}

fn cuda_bindings_command() -> Command {
    python_command("cuda_bindings_client.py")
}

fn cuda_core_command() -> Command {
    python_command("cuda_core_client.py")
}

/// `command` rebuilt through `wrap` (`sim_command` or `shim_command`), keeping its arguments
/// and environment changes.
fn wrapped(command: Command, wrap: impl FnOnce(&Path) -> Command) -> Command {
    let mut cmd = wrap(Path::new(command.get_program()));
    cmd.args(command.get_args());
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => cmd.env(key, value),
            None => cmd.env_remove(key),
        };
    }
    cmd
}

fn run_plain(client: &Client) -> Output {
    let mut cmd = wrapped((client.command)(), |p| sim_command(p));
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert_ok(&out);
    out
}

fn run_traced(client: &Client, trace: &Path) -> Output {
    let mut cmd = wrapped((client.command)(), |p| shim_command(p, trace));
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert_ok(&out);
    out
}

/// `gpuleak report --format json TRACE`, which must succeed.
fn report_json(trace: &Path) -> Value {
    let out = gpuleak_e2e::gpuleak_report(&["--format", "json"], &[trace]);
    assert_ok(&out);
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON: {e}"))
}

/// The allocation lines of a client's stdout; any other `alloc` line is a test bug.
fn printed(stdout: &[u8]) -> Vec<Printed> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter(|line| line.starts_with("alloc "))
        .map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let field = |i: usize, key: &str| {
                fields
                    .get(i)
                    .and_then(|f| f.strip_prefix(key))
                    .unwrap_or_else(|| panic!("no {key} as field {i} of {line:?}"))
            };
            let ptr = field(3, "ptr=0x");
            let fate = *fields.get(5).unwrap_or_else(|| panic!("no fate in {line:?}"));
            assert!(
                fields.len() == 6 && ["freed", "leaked"].contains(&fate),
                "bad allocation line {line:?}"
            );
            Printed {
                call: field(1, "call=").to_string(),
                host: match field(2, "memory=") {
                    "host" => true,
                    "device" => false,
                    other => panic!("memory={other} in {line:?}"),
                },
                ptr: u64::from_str_radix(ptr, 16).unwrap_or_else(|e| panic!("ptr in {line:?}: {e}")),
                size: field(4, "size=")
                    .parse()
                    .unwrap_or_else(|e| panic!("size in {line:?}: {e}")),
                leaked: fate == "leaked",
            }
        })
        .collect()
}

/// The program's stdout with host addresses blanked: they come from `mmap`, so they move with
/// ASLR and with the mappings any preloaded library adds, while everything else must not.
fn comparable(stdout: &[u8]) -> String {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|line| match line.find(" memory=host ptr=") {
            Some(at) => {
                let start = at + " memory=host ptr=".len();
                let end = line[start..].find(' ').map_or(line.len(), |n| start + n);
                format!("{}HOST{}", &line[..start], &line[end..])
            }
            None => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The driver entry point that frees what `alloc_api` allocated.
fn free_api(alloc_api: &str) -> &'static str {
    match alloc_api {
        "cuMemAlloc_v2" => "cuMemFree_v2",
        "cuMemAllocAsync" | "cuMemAllocFromPoolAsync" => "cuMemFreeAsync",
        "cuMemHostAlloc" | "cuMemAllocHost_v2" => "cuMemFreeHost",
        other => panic!("no free API known for {other}"),
    }
}

fn seq(record: &Value) -> u64 {
    record["seq"]
        .as_u64()
        .unwrap_or_else(|| panic!("record without seq: {record}"))
}

/// Checks the trace against what the program printed, one for one.
fn assert_trace_matches(client: &Client, shown: &[Printed], records: &[Value]) {
    let name = client.name;
    let mut ordered: Vec<&Value> = records.iter().collect();
    ordered.sort_by_key(|r| seq(r));
    let allocs: Vec<&Value> = ordered.iter().copied().filter(|r| r["type"] == "Alloc").collect();
    let frees: Vec<&Value> = ordered.iter().copied().filter(|r| r["type"] == "Free").collect();
    for r in allocs.iter().chain(&frees) {
        assert_eq!(
            r["result"], 0,
            "{name}: the program makes no failing call, yet the trace has {r}"
        );
        assert_eq!(
            r["via"], "-",
            "{name}: no CUDA runtime is involved, yet the trace has {r}"
        );
    }
    assert_eq!(
        allocs.len(),
        shown.len(),
        "{name}: the program printed {} allocations, the trace holds {}:\n{}",
        shown.len(),
        allocs.len(),
        allocs.iter().map(|r| r.to_string()).collect::<Vec<_>>().join("\n")
    );

    let mut used_frees = 0;
    // The program prints each allocation right after the call returns, on one thread, so the
    // records come in the printed order.
    for (p, alloc) in shown.iter().zip(&allocs) {
        let api = client
            .apis
            .iter()
            .find(|(call, _)| *call == p.call)
            .unwrap_or_else(|| panic!("{name}: no expected API for call {}", p.call))
            .1;
        assert_eq!(alloc["api"], api, "{name}: {p} recorded as {alloc}");
        assert_eq!(hex(&alloc["ptr"]), p.ptr, "{name}: {p} recorded as {alloc}");
        assert_eq!(alloc["size"], p.size, "{name}: {p} recorded as {alloc}");
        assert_ne!(alloc["stack"], 0, "{name}: an allocation without a stack: {alloc}");

        // The allocation's life ends at the first free of its address; the simulator may hand
        // the address out again only after that.
        let after = seq(alloc);
        let free = frees
            .iter()
            .copied()
            .find(|f| seq(f) > after && hex(&f["ptr"]) == p.ptr);
        let next_alloc = allocs.iter().find(|a| seq(a) > after && hex(&a["ptr"]) == p.ptr);
        if let Some(next) = next_alloc {
            let free = free.unwrap_or_else(|| panic!("{name}: {p} allocated again without a free: {next}"));
            assert!(
                seq(free) < seq(next),
                "{name}: {p} allocated again ({next}) before its free ({free})"
            );
        }
        if p.leaked {
            assert!(free.is_none(), "{name}: the leaked {p} was freed: {}", free.unwrap());
        } else {
            let free = free.unwrap_or_else(|| panic!("{name}: no free recorded for {p}"));
            assert_eq!(free["api"], free_api(api), "{name}: {p} freed as {free}");
            used_frees += 1;
        }
    }
    assert_eq!(
        frees.len(),
        used_frees,
        "{name}: the trace holds frees the program did not make:\n{}",
        frees.iter().map(|r| r.to_string()).collect::<Vec<_>>().join("\n")
    );
    assert_eq!(
        records.iter().filter(|r| r["type"] == "Exit").count(),
        1,
        "{name}: one Exit record"
    );
}

/// The client's allocations as it printed them, checked against what it is known to do.
fn shown_allocations(client: &Client, out: &Output) -> Vec<Printed> {
    let shown = printed(&out.stdout);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        shown.len(),
        client.allocations,
        "{}: allocation lines in\n{stdout}",
        client.name
    );
    assert_eq!(
        shown.iter().filter(|p| p.leaked).count(),
        client.leaks,
        "{}: leaks in\n{stdout}",
        client.name
    );
    assert!(
        stdout.lines().any(|l| l.starts_with("done")),
        "{}: did not finish:\n{stdout}",
        client.name
    );
    shown
}

/// What a client did under the shim.
struct Traced {
    stdout: String,
    shown: Vec<Printed>,
    records: Vec<Value>,
}

/// Runs the client with and without the shim, requires the same output from both, and checks
/// the trace against the allocations the program printed.
fn check_client(client: &Client) -> Traced {
    let plain = run_plain(client);
    let dir = TempDir::new();
    let trace = dir.path().join("client.gltrace");
    let traced = run_traced(client, &trace);
    assert_eq!(
        comparable(&plain.stdout),
        comparable(&traced.stdout),
        "{}: the program's output differs under the shim",
        client.name
    );
    assert_eq!(
        String::from_utf8_lossy(&plain.stderr),
        String::from_utf8_lossy(&traced.stderr),
        "{}: the program's stderr differs under the shim",
        client.name
    );
    let shown = shown_allocations(client, &traced);
    let records = dump(&trace);
    assert_trace_matches(client, &shown, &records);
    Traced {
        stdout: String::from_utf8_lossy(&traced.stdout).into_owned(),
        shown,
        records,
    }
}

#[test]
fn cudarc_runs_on_the_simulator_alone() {
    let out = run_plain(&CUDARC);
    let shown = shown_allocations(&CUDARC, &out);
    assert!(
        shown.iter().all(|p| !p.host && p.ptr != 0),
        "device pointers: {shown:?}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("device simcuda"));
}

#[test]
fn cudarc_allocations_reached_through_dlsym_are_recorded_and_its_loop_leak_shows() {
    let Traced { shown, records, .. } = check_client(&CUDARC);
    let leaked: Vec<u64> = shown.iter().filter(|p| p.leaked).map(|p| p.size).collect();
    assert_eq!(leaked, [1 << 20; 3], "one 1 MiB buffer per iteration");
    // cudarc's input buffers reuse one address: three separate lives, three frees.
    let input = shown[0].ptr;
    let lives = records
        .iter()
        .filter(|r| r["type"] == "Alloc" && hex(&r["ptr"]) == input)
        .count();
    assert_eq!(lives, 3, "the reused input address");
}

#[test]
fn cuda_bindings_runs_on_the_simulator_alone() {
    let out = run_plain(&CUDA_BINDINGS);
    shown_allocations(&CUDA_BINDINGS, &out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("\nround trip ok\n"));
}

#[test]
fn cuda_bindings_allocations_reached_through_the_resolver_are_recorded_and_its_leak_shows() {
    let Traced { shown, records, .. } = check_client(&CUDA_BINDINGS);
    let leak = shown.iter().find(|p| p.leaked).expect("one leak");
    assert_eq!((leak.call.as_str(), leak.size), ("cuMemAlloc", 1 << 20));
    // The stream-ordered allocations carry the program's stream, the others none.
    let stream = records
        .iter()
        .find(|r| r["type"] == "StreamCreate")
        .map(|r| r["stream"].clone())
        .expect("a StreamCreate record");
    for r in records.iter().filter(|r| r["type"] == "Alloc") {
        let want = if r["api"] == "cuMemAllocAsync" {
            stream.clone()
        } else {
            Value::from("0x0")
        };
        assert_eq!(r["stream"], want, "stream of {r}");
    }
}

#[test]
fn cuda_core_runs_on_the_simulator_alone() {
    let out = run_plain(&CUDA_CORE);
    shown_allocations(&CUDA_CORE, &out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("\nround trip ok\n"));
}

#[test]
fn cuda_core_pool_allocations_are_recorded_and_all_freed() {
    let Traced { stdout, records, .. } = check_client(&CUDA_CORE);
    // Pool allocations name their pool: the device's default pool, which the program printed.
    let pool = stdout
        .lines()
        .find_map(|l| l.strip_prefix("pool 0x"))
        .map(|h| u64::from_str_radix(h, 16).expect("pool handle"))
        .unwrap_or_else(|| panic!("no pool line in\n{stdout}"));
    let pooled: Vec<&Value> = records
        .iter()
        .filter(|r| r["api"] == "cuMemAllocFromPoolAsync")
        .collect();
    assert_eq!(pooled.len(), 4);
    for r in pooled {
        assert_eq!(r["aux"], pool, "pool of {r}");
    }
}

/// cuda-core's memory resources that own a pool (created through cuda-bindings' resolver
/// table) destroy it when closed, or at interpreter shutdown when kept: no `pool-leak`. A process
/// that ends with `os._exit` runs no finalizer: its three pools are one `pool-leak` at the
/// Python line that made them.
#[test]
fn cuda_core_pools_leak_only_when_no_finalizer_runs() {
    let dir = TempDir::new();
    let run = |mode: &str| {
        let trace = dir.path().join(format!("{mode}.trace"));
        let mut cmd = wrapped(python_command("cuda_core_pools.py"), |p| shim_command(p, &trace));
        let out = cmd
            .arg(mode)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
        assert_ok(&out);
        assert_eq!(String::from_utf8_lossy(&out.stdout), "done\n");
        let records = dump(&trace);
        let count = |ty: &str| records.iter().filter(|r| r["type"] == ty && r["result"] == 0).count();
        let r = report_json(&trace);
        let leaks: Vec<Value> = r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["check"] == "pool-leak")
            .cloned()
            .collect();
        (count("PoolCreate"), count("PoolDestroy"), leaks)
    };
    for mode in ["close", "keep"] {
        let (created, destroyed, leaks) = run(mode);
        assert_eq!((created, destroyed), (3, 3), "{mode}");
        assert!(leaks.is_empty(), "{mode}: {leaks:#?}");
    }
    let (created, destroyed, leaks) = run("exit");
    assert_eq!((created, destroyed), (3, 0));
    assert_eq!(leaks.len(), 1, "{leaks:#?}");
    let f = &leaks[0];
    assert_eq!(
        (f["severity"].as_str(), f["count"].as_u64()),
        (Some("warning"), Some(3))
    );
    assert!(
        f["stack"]
            .as_array()
            .unwrap()
            .iter()
            .any(|fr| fr["function"] == "make_resource" && fr["module"] == "python"),
        "{f:#}"
    );
}
