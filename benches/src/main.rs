//! `sigbench`: the event and synchronize latency table of the seed, for the
//! retiring tracker and the baseline side by side (and the backend's own
//! API where it has one), on the best backend the machine has, with the
//! steady-state counters of docs/design.md section 7.
//!
//! ```text
//! cargo run --release -p sigbench -- [--backend auto|sim|rocr|cuda] [--iterations N]
//!     [--long-iterations N] [--warmup N] [--steady-uses N] [--json FILE] [--markdown]
//! cargo run --release -p sigbench -- --seed-table [--iterations N] [--warmup N] [--rounds N]
//! cargo run --release -p sigbench -- --waits [--backend auto|sim|cuda] [--wait-samples N]
//!     [--json FILE] [--markdown]
//! cargo run --release -p sigbench -- --wait-scaling [--backend auto|sim|cuda] [--cell-ms N]
//!     [--json FILE] [--markdown]
//! cargo run --release -p sigbench -- --callbacks [--backend auto|sim|cuda]
//!     [--callback-samples N] [--release-values N] [--json FILE] [--markdown]
//! ```

use sigretire_bench::measure::{self, Api, LONG_WORK, Row, Steady};
use sigretire_bench::platform::{Platform, Skipped};
use sigretire_bench::platforms::{cuda::CudaBench, rocr::RocrBench, sim::SimBench};
use sigretire_bench::report::{Report, SteadyState};
use sigretire_bench::seed_table;
use sigretire_bench::{callbacks, scaling, waits};
use sigretire_tracker::{Config, Placement};
use std::time::{Duration, Instant};

#[global_allocator]
static ALLOCATOR: sigretire_bench::alloc::Counting = sigretire_bench::alloc::Counting;

const USAGE: &str = "usage: sigbench [--backend auto|sim|rocr|cuda] [--iterations N] \
                     [--long-iterations N] [--warmup N] [--steady-uses N] [--json FILE] [--markdown]
       sigbench --seed-table [--iterations N] [--warmup N] [--rounds N]
       sigbench --waits [--backend auto|sim|cuda] [--wait-samples N] [--json FILE] [--markdown]
       sigbench --wait-scaling [--backend auto|sim|cuda] [--cell-ms N] [--json FILE] [--markdown]
       sigbench --callbacks [--backend auto|sim|cuda] [--callback-samples N] [--release-values N]
                [--json FILE] [--markdown]";

const HELP: &str = "\
Event and synchronize latency of the retiring tracker and the baseline (and,
on an NVIDIA GPU, CUDA's own calls), with the tracker's memory traffic per
call and the calling thread's CPU time, context switches and polls per call,
then the steady-state counters.

  --backend B          auto (default: ROCr, then CUDA, then the simulator),
                       sim, rocr or cuda (on the ROCr stand-in: --backend rocr
                       with SIGRETIRE_HSA_LIBRARY naming its library)
  --iterations N       timed calls per cell (default 2000, at least 1)
  --long-iterations N  timed calls per cell of the *_long rows, which wait for
                       a 1 ms kernel (default 200, at least 1)
  --warmup N           untimed calls before them (default 100; at most 20 for
                       the *_long rows)
  --steady-uses N      uses measured in the steady-state loops (default 20000)
  --json FILE          also write the report as JSON
  --markdown           print the tables as Markdown
  --seed-table         instead: the CLR change's two MI300X tables beside the
                       simulator's predictions (legacy tracker with host
                       signals, CLR's retiring behaviour and ours with device
                       signals), with each prediction's error, as Markdown
  --rounds N           seed table: measure every cell N times, round after
                       round, and take each cell's median (default 3)
  --waits              instead: how late a wait returns after its kernel's
                       end (p50, p99) and the CPU it burns, for kernels of
                       20 us, 100 us, 1 ms and 10 ms: our spin, blocking and
                       hybrid waits, and on CUDA its spinning and
                       blocking-sync cuEventSynchronize; then wrong guesses
                       (trained on 1 ms kernels, a 20 us or a 10 ms one).
                       Backends: cuda, else the simulator
  --wait-samples N     waits: timed waits per cell (default 200; a quarter
                       for 10 ms kernels, a tenth for wrong guesses)
  --wait-scaling       instead: one thread's submissions per second (launch
                       + record, launch alone) while K = 0, 1, 4, 16 threads
                       wait, ours and on CUDA its own event loops; then 1, 8
                       and 64 queues, one thread each, launch + record +
                       synchronize: the cost per operation
  --cell-ms N          wait scaling: milliseconds per cell (default 200)
  --callbacks          instead: how late a completion callback runs after its
                       kernel's end (p50, p99) and how much later the next
                       kernel ends when the callback holds its thread 200 us,
                       ours (on_complete) and on CUDA cuLaunchHostFunc; then
                       deferred release at 1, 64 and 4096 blocks in flight:
                       host time and signal loads per released value, ours
                       (release_after), and on CUDA the caching allocator's
                       event per block, queried in order (host time and
                       driver calls per value). Backends: cuda, else the
                       simulator (signals in device memory)
  --callback-samples N callbacks: timed callbacks per row (default 100)
  --release-values N   callbacks: released values per cell (default 8192)";

/// Untimed calls before the `*_long` rows' timed ones, at most.
const LONG_WARMUP: usize = 20;

struct Options {
    backend: String,
    iterations: usize,
    long_iterations: usize,
    warmup: usize,
    steady_uses: usize,
    json: Option<String>,
    markdown: bool,
    seed_table: bool,
    rounds: usize,
    waits: bool,
    wait_samples: usize,
    wait_scaling: bool,
    cell_ms: usize,
    callbacks: bool,
    callback_samples: usize,
    release_values: usize,
}

fn parse() -> Result<Options, String> {
    let mut o = Options {
        backend: "auto".into(),
        iterations: 2000,
        long_iterations: 200,
        warmup: 100,
        steady_uses: 20_000,
        json: None,
        markdown: false,
        seed_table: false,
        rounds: seed_table::Plan::default().rounds,
        waits: false,
        wait_samples: 200,
        wait_scaling: false,
        cell_ms: 200,
        callbacks: false,
        callback_samples: 100,
        release_values: 8192,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .ok_or_else(|| format!("{arg} needs a value\n{USAGE}"))
        };
        let number = |v: String| {
            v.parse::<usize>()
                .map_err(|_| format!("not a number: {v}\n{USAGE}"))
        };
        let positive = |v: String| match number(v.clone())? {
            0 => Err(format!("{arg} must be at least 1, not {v}\n{USAGE}")),
            n => Ok(n),
        };
        match arg.as_str() {
            "--backend" => o.backend = value()?,
            "--iterations" => o.iterations = positive(value()?)?,
            "--long-iterations" => o.long_iterations = positive(value()?)?,
            "--warmup" => o.warmup = number(value()?)?,
            "--steady-uses" => o.steady_uses = positive(value()?)?,
            "--json" => o.json = Some(value()?),
            "--markdown" => o.markdown = true,
            "--seed-table" => o.seed_table = true,
            "--rounds" => o.rounds = positive(value()?)?,
            "--waits" => o.waits = true,
            "--wait-samples" => o.wait_samples = positive(value()?)?,
            "--wait-scaling" => o.wait_scaling = true,
            "--cell-ms" => o.cell_ms = positive(value()?)?,
            "--callbacks" => o.callbacks = true,
            "--callback-samples" => o.callback_samples = positive(value()?)?,
            "--release-values" => o.release_values = positive(value()?)?,
            "-h" | "--help" => {
                println!("{USAGE}\n\n{HELP}");
                std::process::exit(0);
            }
            _ => return Err(format!("unknown option {arg}\n{USAGE}")),
        }
    }
    if !["auto", "sim", "rocr", "cuda"].contains(&o.backend.as_str()) {
        return Err(format!("unknown backend {}\n{USAGE}", o.backend));
    }
    // Find out now, not after a run of minutes, that the report has nowhere
    // to go.
    if let Some(path) = &o.json {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| format!("cannot write {path}: {e}"))?;
    }
    Ok(o)
}

fn main() {
    let options = match parse() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    if options.seed_table {
        let plan = seed_table::Plan {
            iterations: options.iterations,
            warmup: options.warmup,
            rounds: options.rounds,
            ..seed_table::Plan::default()
        };
        match seed_table::measure(plan) {
            Ok(table) => print!("{}", table.markdown()),
            Err(e) => {
                eprintln!("sigbench: {e}");
                std::process::exit(1);
            }
        }
        return;
    }
    if options.waits || options.wait_scaling || options.callbacks {
        waits(&options);
        return;
    }
    let mut skipped: Vec<Skipped> = Vec::new();
    let want = |name: &str| options.backend == "auto" || options.backend == name;
    let result = 'chosen: {
        if want("rocr") {
            match RocrBench::open() {
                Ok(p) => {
                    break 'chosen run(&p, &options, reason("an AMD GPU through ROCr", &skipped));
                }
                Err(s) => skipped.push(s),
            }
        }
        if want("cuda") {
            match CudaBench::open() {
                Ok(p) => {
                    break 'chosen run(
                        &p,
                        &options,
                        reason("an NVIDIA GPU through CUDA", &skipped),
                    );
                }
                Err(s) => skipped.push(s),
            }
        }
        if want("sim") {
            let chosen = if options.backend == "sim" {
                "the simulator with the MI300X-like profile (asked for)"
            } else {
                "the simulator with the MI300X-like profile (no GPU backend available)"
            };
            let why = reason(chosen, &skipped);
            break 'chosen run(&SimBench::new(), &options, why);
        }
        Err(format!(
            "the backend asked for is not available: {}",
            skipped
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        ))
    };
    match result {
        Ok(report) => {
            print!("{}", report.table(options.markdown));
            if let Some(path) = &options.json {
                let json = serde_json::to_string_pretty(&report).expect("the report serializes");
                if let Err(e) = std::fs::write(path, json + "\n") {
                    eprintln!("cannot write {path}: {e}");
                    std::process::exit(1);
                }
                eprintln!("wrote {path}");
            }
        }
        Err(e) => {
            eprintln!("sigbench: {e}");
            std::process::exit(1);
        }
    }
}

/// `--waits`, `--wait-scaling` and `--callbacks`: on CUDA, else the simulator (ROCr has
/// no kernel of a chosen length here: no code object).
fn waits(options: &Options) {
    let want = |name: &str| options.backend == "auto" || options.backend == name;
    let result = 'chosen: {
        let mut skipped = Vec::new();
        if want("cuda") {
            match CudaBench::open() {
                Ok(p) => {
                    break 'chosen report_waits(
                        &p,
                        options,
                        reason("an NVIDIA GPU through CUDA", &skipped),
                    );
                }
                Err(s) => skipped.push(s),
            }
        }
        if want("sim") {
            let why = reason("the simulator with the MI300X-like profile", &skipped);
            break 'chosen report_waits(&SimBench::new(), options, why);
        }
        Err(format!(
            "--waits, --wait-scaling and --callbacks run on cuda or sim; not available: {}",
            skipped
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        ))
    };
    if let Err(e) = result {
        eprintln!("sigbench: {e}");
        std::process::exit(1);
    }
}

fn report_waits<L: waits::WaitLab + scaling::ScalingLab + callbacks::CallbackLab>(
    lab: &L,
    options: &Options,
    why: String,
) -> Result<(), String> {
    eprintln!("sigbench: {} ({why})", lab.backend());
    let json = if options.callbacks {
        let report = callbacks::measure(lab, options.callback_samples, options.release_values)?;
        print!("{}", report.table(options.markdown));
        serde_json::to_string_pretty(&report)
    } else if options.wait_scaling {
        let cell = Duration::from_millis(options.cell_ms as u64);
        let report = scaling::measure(lab, cell)?;
        print!("{}", report.table(options.markdown));
        serde_json::to_string_pretty(&report)
    } else {
        let report = waits::measure(lab, options.wait_samples)?;
        print!("{}", report.table(options.markdown));
        serde_json::to_string_pretty(&report)
    };
    if let Some(path) = &options.json {
        let json = json.expect("the report serializes");
        std::fs::write(path, json + "\n").map_err(|e| format!("cannot write {path}: {e}"))?;
        eprintln!("wrote {path}");
    }
    Ok(())
}

fn reason(chosen: &str, skipped: &[Skipped]) -> String {
    let mut why = chosen.to_string();
    for s in skipped {
        why += &format!("; not {s}");
    }
    why
}

fn signals_name(p: Placement) -> &'static str {
    match p {
        Placement::Host => "host",
        Placement::Device => "device",
    }
}

fn run<P: Platform>(
    platform: &P,
    options: &Options,
    backend_reason: String,
) -> Result<Report, String> {
    eprintln!("sigbench: {} ({backend_reason})", platform.backend());
    eprintln!("machine: {}", platform.machine());
    let placements = platform.placements();
    // The *_long rows need a kernel of about 1 ms; a backend without one
    // (real ROCr: no code object here) skips them and says why.
    let (long_kernel, long_rows_skipped) = match platform.long_kernel(LONG_WORK) {
        Ok(kernel) => (kernel, None),
        Err(why) => {
            eprintln!("sigbench: no *_long rows: {why}");
            (0, Some(why))
        }
    };
    let apis: Vec<Api> = Api::ALL
        .into_iter()
        .filter(|api| !api.is_long() || long_rows_skipped.is_none())
        .collect();
    // What the CPU-time readings cost inside a window, taken off every row:
    // calibrated after each cell, as the machine is then (it drifts by a few
    // hundredths of a microsecond over a run).
    let mut floors: Vec<Duration> = Vec::new();
    let mut calibrate = || {
        let floor = measure::cpu_floor();
        floors.push(floor);
        floor
    };
    let cells = apis.len() * (2 * placements.len() + usize::from(platform.native().is_some()));
    let mut rows: Vec<Row> = Vec::new();
    let started = Instant::now();
    let progress = |rows: &Vec<Row>, what: &str| {
        eprintln!(
            "[{:>2}/{cells}] {what} ({:.1} s)",
            rows.len() + 1,
            started.elapsed().as_secs_f64()
        );
    };
    for api in apis {
        let (iterations, warmup) = if api.is_long() {
            (options.long_iterations, options.warmup.min(LONG_WARMUP))
        } else {
            (options.iterations, options.warmup)
        };
        for &placement in &placements {
            let config = Config {
                signals: placement,
                ..Config::default()
            };
            let signals = signals_name(placement);
            progress(&rows, &format!("{} retiring/{signals}", api.name()));
            let (samples, traffic) = measure::measure(
                api,
                &|| platform.retiring(config),
                iterations,
                warmup,
                long_kernel,
            )?;
            rows.push(measure::row(
                api,
                "retiring",
                signals,
                samples,
                Some(traffic),
                calibrate(),
            ));
            progress(&rows, &format!("{} baseline/{signals}", api.name()));
            let (samples, traffic) = measure::measure(
                api,
                &|| platform.baseline(config),
                iterations,
                warmup,
                long_kernel,
            )?;
            rows.push(measure::row(
                api,
                "baseline",
                signals,
                samples,
                Some(traffic),
                calibrate(),
            ));
        }
        if let Some(native) = platform.native() {
            progress(&rows, &format!("{} native", api.name()));
            let mut samples = Vec::with_capacity(iterations);
            for i in 0..warmup + iterations {
                let took = match api {
                    Api::EventSynchronize => native.event_synchronize(false),
                    Api::EventSynchronizeBlocking => native.event_synchronize(true),
                    Api::EventQuery => native.event_query(),
                    Api::StreamSynchronize => native.stream_synchronize(),
                    Api::StreamSynchronizeCompleted => native.stream_synchronize_completed(),
                    Api::DeviceSynchronize => native.device_synchronize(),
                    Api::EventRecord => native.event_record(),
                    Api::EventElapsedTime => native.event_elapsed_time(),
                    Api::EventSynchronizeLong => native.event_synchronize_after(long_kernel, false),
                    Api::EventSynchronizeBlockingLong => {
                        native.event_synchronize_after(long_kernel, true)
                    }
                    Api::Floor => unreachable!("not in Api::ALL"),
                }?;
                if i >= warmup {
                    samples.push(took);
                }
            }
            // Nothing counts the polls of CUDA's own waits.
            rows.push(measure::row(
                api,
                "native",
                "native",
                samples,
                None,
                calibrate(),
            ));
        }
    }
    // The reference every "with submission" figure is read against: what a
    // launch and a completion seen on the host cost with nothing tracked.
    // Its first probe is one more warm-up call.
    if let Some(native) = platform.native()
        && let Some(first) = native.floor()
    {
        first?;
        eprintln!("[floor] {}", Api::Floor.name());
        let mut samples = Vec::with_capacity(options.iterations);
        for i in 0..options.warmup + options.iterations {
            let took = native.floor().ok_or("the floor probe went away")??;
            if i >= options.warmup {
                samples.push(took);
            }
        }
        rows.push(measure::row(
            Api::Floor,
            "floor",
            "pinned",
            samples,
            None,
            calibrate(),
        ));
    }
    floors.sort_unstable();
    let cpu_floor = floors.get(floors.len() / 2).copied().unwrap_or_default();
    let steady_placement = *placements.last().expect("a backend offers a placement");
    // A runtime that polls after every 32 submissions: each load pays for a batch.
    let config = Config {
        signals: steady_placement,
        probe_interval: 32,
        ..Config::default()
    };
    eprintln!("steady state: retiring ({} uses)", options.steady_uses);
    let retiring = measure::steady(
        &|| platform.retiring(config),
        steady_placement,
        4096,
        options.steady_uses,
    )?;
    eprintln!("steady state: baseline ({} uses)", options.steady_uses);
    let baseline = measure::steady(
        &|| platform.baseline(config),
        steady_placement,
        4096,
        options.steady_uses,
    )?;
    let name = signals_name(steady_placement);
    let label = |s: Steady| Steady { signals: name, ..s };
    Ok(Report {
        backend: platform.backend(),
        backend_reason,
        machine: platform.machine(),
        iterations: options.iterations,
        long_iterations: options.long_iterations,
        long_work_us: LONG_WORK.as_secs_f64() * 1e6,
        long_rows_skipped,
        cpu_floor_us: cpu_floor.as_secs_f64() * 1e6,
        rows,
        steady_state: SteadyState {
            retiring: label(retiring),
            baseline: label(baseline),
        },
    })
}
