#!/usr/bin/env python3
"""Renders BENCHMARKS.md's tables from sigbench's JSON outputs.

    python3 benches/results/render.py > BENCHMARKS.md

Inputs: benches/results/h200-runs/run1.json to run5.json (five sigbench
runs on the H200, see docs/device-runs.md; the first is the full table)
and long-waits.json (the 1 ms rows with 1000 calls), seed-table.md
(`sigbench --seed-table`),
benches/results/sigbench-sim.json
(`cargo run --release -p sigbench -- --backend sim --json ...`), and the
hand-copied figures in benches/results/extra.json (callgrind counts,
the sync-contention example, fuzz throughput)."""
import json, os
here = os.path.dirname(os.path.abspath(__file__))
runs = [json.load(open(os.path.join(here, 'h200-runs', f'run{i}.json'))) for i in range(1, 6)]
h = runs[0]
lw = json.load(open(os.path.join(here, 'h200-runs', 'long-waits.json')))
seed_table = open(os.path.join(here, 'seed-table.md')).read()
# The seed table's own title becomes a section of this page.
seed_table = seed_table.replace('# The simulator', '## The simulator', 1).replace('\n## ', '\n### ')
# The bars' verdicts, as the seed table states them, for the summary below it.
_bars = [l[2:] for l in seed_table.splitlines()
         if l.startswith('- fitted table:') or l.startswith('- unseen table:')]
assert len(_bars) == 2, "seed-table.md has no Bars section"
seed_bars_summary = "The seed table's bars: " + "; ".join(
    b.split(':', 1)[0] + ": " + b.split(':', 1)[1].strip().replace("; every", ", every") for b in _bars) + "."
s = json.load(open(os.path.join(here, 'sigbench-sim.json')))
x = json.load(open(os.path.join(here, 'extra.json')))
waits_sim = open(os.path.join(here, 'waits-sim.md')).read()
scaling_sim = open(os.path.join(here, 'wait-scaling-sim.md')).read()

def cpu_cells(r):
    """The waiting thread's cost: CPU us per call, whether it slept (the
    median call had a voluntary context switch), its voluntary switches and
    the wait's polls per call; 'pending' where the JSON predates them."""
    if 'cpu_us_per_op' not in r:
        return ["pending"] * 4
    polls = r.get('polls_per_op')
    return [f"{r['cpu_us_per_op']:.2f}", 'yes' if r['slept'] else 'no',
            f"{r['voluntary_switches_per_op']:.2f}",
            '-' if polls is None else f"{polls:.2f}"]

def table(rep):
    lines = ["| api | tracker | signals | p50 us | p10 us | p90 us | CPU us/op | slept | sleeps/op | polls/op | device loads/op | fences/op | flushes/op | signals created |",
             "|---|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
    for r in rep['rows']:
        cpu = " | ".join(cpu_cells(r))
        lines.append(f"| {r['api']} | {r['tracker']} | {r['signals']} | {r['p50_us']:.2f} | {r['p10_us']:.2f} | {r['p90_us']:.2f} | {cpu} | {r['device_loads_per_op']:.3f} | {r['fences_per_op']:.3f} | {r['flushes_per_op']:.3f} | {r['signals_created']} |")
    return "\n".join(lines)

def row(rep, api, tracker, signals):
    return [r for r in rep['rows'] if r['api'] == api and r['tracker'] == tracker and r['signals'] == signals][0]

def cpu(rep, api, tracker, signals):
    return row(rep, api, tracker, signals)['cpu_us_per_op']

def polls(rep, api, tracker, signals):
    return row(rep, api, tracker, signals)['polls_per_op']

def sleeps(rep, api, tracker, signals):
    return row(rep, api, tracker, signals)['voluntary_switches_per_op']

def slept_rows(rep, slept):
    """The wait rows (those with a submission) that slept, or did not."""
    waits = {'event_synchronize', 'event_synchronize_blocking', 'stream_synchronize',
             'device_synchronize', 'event_synchronize_long', 'event_synchronize_blocking_long'}
    names = []
    for r in rep['rows']:
        if r['api'] in waits and r.get('slept') == slept and r['api'] not in names:
            names.append(r['api'])
    return ", ".join(f"`{n}`" for n in names) or "none"

def p50(rep, api, tracker, signals):
    return [r for r in rep['rows'] if r['api'] == api and r['tracker'] == tracker and r['signals'] == signals][0]['p50_us']

def steady(rep):
    out = ["| tracker | signals | loads per retired use (runtime loop) | same, saturated | waits' polls per use | flushes per re-arm | fences per re-arm | signals created after warm-up | heap allocations per use |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for k in ['retiring', 'baseline']:
        t = rep['steady_state'][k]
        out.append(f"| {k} | {t['signals']} | {t['device_loads_per_retired_use']:.4f} | {t['saturated_device_loads_per_retired_use']:.4f} | {t['device_polls_per_use']:.3f} | {t['flushes_per_rearm']:.4f} | {t['fences_per_rearm']:.4f} | {t['signals_created_after_warmup']} | {t['allocations_per_use']:.4f} |")
    return "\n".join(out)

def dev_loads(rep, api, tracker, signals):
    return [r for r in rep['rows'] if r['api'] == api and r['tracker'] == tracker and r['signals'] == signals][0]['device_loads_per_op']

def with_submission(rep, api, tracker, signals):
    row = [r for r in rep['rows'] if r['api'] == api and r['tracker'] == tracker and r['signals'] == signals][0]
    return row.get('with_submission_p50_us')

def five_runs():
    """Ours against CUDA's own in each of the five H200 runs: the
    submission plus the call for the waits, the call alone for every row,
    with the floor (an empty kernel writing a pinned word, the host
    spinning) beside them."""
    def get(rep, api, tracker):
        return [r for r in rep['rows'] if r['api'] == api and r['tracker'] == tracker][0]
    def span(values, fmt="{:.2f}"):
        lo, hi = min(values), max(values)
        return fmt.format(lo) if fmt.format(lo) == fmt.format(hi) else f"{fmt.format(lo)}-{fmt.format(hi)}"
    floors = [get(r, 'floor_empty_kernel_host_spin', 'floor')['with_submission_p50_us'] for r in runs]
    waits = ['event_synchronize', 'event_synchronize_blocking', 'stream_synchronize', 'device_synchronize',
             'event_synchronize_long', 'event_synchronize_blocking_long']
    calls = ['event_synchronize', 'event_synchronize_blocking', 'event_query', 'stream_synchronize',
             'stream_synchronize_completed', 'device_synchronize', 'event_record', 'event_elapsed_time',
             'event_synchronize_long', 'event_synchronize_blocking_long']
    lines = ["| sequence | ours (p50 us) | CUDA (p50 us) | ratio, each run | runs at or below 1.0 |",
             "|---|---:|---:|---|---:|"]
    def line(name, key, api):
        ours = [get(r, api, 'retiring')[key] for r in runs]
        cuda = [get(r, api, 'native')[key] for r in runs]
        ratios = [o / c for o, c in zip(ours, cuda)]
        at_or_below = sum(1 for r in ratios if r <= 1.0)
        return f"| {name} | {span(ours)} | {span(cuda)} | {', '.join(f'{r:.3f}' for r in ratios)} | {at_or_below} of 5 |"
    for api in waits:
        lines.append(line(f"{api}, with its submission", 'with_submission_p50_us', api))
    for api in calls:
        lines.append(line(f"{api}, the call", 'p50_us', api))
    lines.append(f"| floor: empty kernel writing a pinned word, host spinning | {span(floors)} | | | |")
    return "\n".join(lines)

def slept_word(rep, api, tracker, signals):
    """Whether the row's median call slept, in words."""
    row = [r for r in rep['rows'] if r['api'] == api and r['tracker'] == tracker and r['signals'] == signals][0]
    if row['slept']:
        return 'the thread slept'
    return ('the median call had no voluntary context switch, so the table '
            'says it did not sleep')

def submission_gap(api):
    """How much longer ours takes than CUDA's to submit a row's work (the
    row with its submission less the call alone), lowest to highest run."""
    def part(rep, tracker):
        row = [r for r in rep['rows'] if r['api'] == api and r['tracker'] == tracker][0]
        return row['with_submission_p50_us'] - row['p50_us']
    gaps = [round(part(r, 'retiring') - part(r, 'native'), 1) + 0.0 for r in runs]
    return f"{min(gaps):.1f} to {max(gaps):.1f}"

def long_blocking():
    """The 1 ms blocking-sync wait, ours over CUDA's, run by run and over
    the five runs' mean p50."""
    api = 'event_synchronize_blocking_long'
    def get(rep, tracker):
        return [r for r in rep['rows'] if r['api'] == api and r['tracker'] == tracker][0]
    parts = []
    for key, what in [('p50_us', 'the wait'), ('with_submission_p50_us', 'with its submission')]:
        ours = [get(r, 'retiring')[key] for r in runs]
        cuda = [get(r, 'native')[key] for r in runs]
        ratios = ', '.join(f'{o / c:.3f}' for o, c in zip(ours, cuda))
        mean = (sum(ours) / len(ours)) / (sum(cuda) / len(cuda))
        parts.append(f"{what} {ratios} x (mean {sum(ours) / len(ours):.1f} against {sum(cuda) / len(cuda):.1f} us, {mean:.3f} x)")
    cpu_ours = [get(r, 'retiring')['cpu_us_per_op'] / get(r, 'retiring')['p50_us'] for r in runs]
    cpu_cuda = [get(r, 'native')['cpu_us_per_op'] / get(r, 'native')['p50_us'] for r in runs]
    parts.append(f"CPU {100 * min(cpu_ours):.1f}-{100 * max(cpu_ours):.1f} % of the wait against CUDA's {100 * min(cpu_cuda):.1f}-{100 * max(cpu_cuda):.1f} %")
    return "; ".join(parts)

def bar(name, api, limit):
    ours, native = p50(h, api, 'retiring', 'host'), p50(h, api, 'native', 'native')
    r = ours / native
    return f"| {name} | {ours:.2f} us | {native:.2f} us | {r:.2f} | <= {limit} | {'yes' if r <= limit else 'no'} |"

crit_use = "\n".join(f"| {r['in_flight']} | {r['retiring']:.1f} | {r['baseline']:.1f} | {r['retiring'] / r['baseline']:.2f} |" for r in x['criterion']['per_use_ns'])
crit_batch = "\n".join(f"| {r['n']} | {r['probe']:.1f} ns | {r['reclaim'] / 1000:.2f} us |" for r in x['criterion']['batch_ns'])
instr = "\n".join(f"| {row['in_flight']} | {row['retiring']:.1f} | {row['baseline']:.1f} | {row['retiring'] / row['baseline']:.2f} |" for row in x['instructions'])

print(f"""# Benchmarks

The latest figures, the machines they came from, and the commands that
produce them. Ratios are measured side by side in one run; absolute times
only mean something on a GPU. Raw outputs are in `benches/results/`;
`python3 benches/results/render.py > BENCHMARKS.md` rebuilds this page.

## The main job: `sigbench`

```sh
cargo run --release -p sigbench                      # the best backend present
cargo run --release -p sigbench -- --backend sim --json out.json --markdown
cargo run --release -p sigbench -- --seed-table           # the simulator against the seed's MI300X tables
```

Every cell times the API call alone (the seed's "host time per call"),
after the work it needs was submitted: p50/p10/p90 over 2000 calls after 100
of warm-up, with the tracker's counters over the timed calls. "device
loads/op" counts every read across PCIe: the tracker's proofs, the waits'
polls, and timestamp pairs (one 16-byte read each). The two `*_long` rows are
`event_synchronize` and `event_synchronize_blocking` with a kernel of about
1 ms before the event instead of empty work (on the simulator and the ROCr
stand-in a registered `Kernel::Duration(1 ms)`, on CUDA the backend's busy
kernel for ours and for CUDA's own event alike): 200 calls after 20 of
warm-up (`--long-iterations`), so that the wait is mostly waiting.

What the wait costs the machine, next to how long it takes, measured on the
thread that makes the call, around the same window as the latency:

- **CPU us/op**: the mean CPU time of the calling (waiting) thread per
  call, `clock_gettime(CLOCK_THREAD_CPUTIME_ID)` before and after each timed
  call, less what the readings themselves put inside the window (the
  report's `cpu_floor_us`, calibrated after every cell: a median of
  {s['cpu_floor_us']:.2f} us on the simulator run below; figures under about 0.05 us
  are within its noise). A thread that spins or yields for the whole wait
  shows about its latency; one that sleeps shows much less.
- **slept**: whether the waiting thread slept in the kernel. The rule: yes
  when the median call had at least one voluntary context switch of that
  thread (`getrusage(RUSAGE_THREAD)`, the `ru_nvcsw` delta over the call).
  A `sched_yield` that hands the core over is an involuntary switch on
  Linux, so yielding is not sleeping. **sleeps/op** is the mean of the same
  delta.
- **polls/op**: the wait's loads of the completion signal per call, from
  the tracker's `polls` counter (both placements); `-` where nothing counts
  them (CUDA's own calls).

JSON: every row has `cpu_us_per_op`, `slept`, `voluntary_switches_per_op`
and `polls_per_op` (`null` where not counted); the report has
`cpu_floor_us`, `long_iterations`, `long_work_us` and `long_rows_skipped`
(why a backend has no `*_long` rows, `null` when it has them; real ROCr has
no kernel of a given length without a code object, so it skips them).

The blocking-sync rows' wait sleeps in the kernel until the GPU wakes it
(`WaitPolicy::blocking()`, whose `interrupt` flag the queue layer honours,
`fences/src/sleep.rs`): the waiter publishes a barrier-AND on the use's
signal that completes one of the queue's wake signals (made with the queue:
ROCr interrupt signals, the simulator's event mailboxes, CUDA pinned signals
whose completion runs a driver host function), then sleeps on it, and looks
at the use after every wake and at least every 1 ms (the error-check
interval). On the simulator a blocking-sync wait for a 1 ms kernel costs
{cpu(s,'event_synchronize_blocking_long','retiring','device'):.0f} us of CPU against the spinning wait's {cpu(s,'event_synchronize_long','retiring','device'):.0f} us (device signals, ours),
polls the signal {polls(s,'event_synchronize_blocking_long','retiring','device'):.1f} times per call against {polls(s,'event_synchronize_long','retiring','device'):.0f}, and returns
{p50(s,'event_synchronize_blocking_long','retiring','device') - p50(s,'event_synchronize_long','retiring','device'):.0f} us later (p50: the wake packet and this machine's wake-up of a
sleeping thread; the profile adds nothing for the interrupt itself, which
no AMD measurement gives), reading device memory {dev_loads(s,'event_synchronize_blocking_long','retiring','device'):.0f} times per call (its two
polls and the timed event's stamp pair, one 16-byte read). A blocking-sync
wait first spins 10 us on host-memory signals and not at all on device
memory, where each poll is a PCIe read (`WaitPolicy::device_spin`, zero in
`blocking()`; a runtime that prefers CLR's spin sets it): after empty work with host signals it
ends in the spin ({p50(s,'event_synchronize_blocking','retiring','host'):.1f} us, no sleep); with device signals it
publishes a wake packet and waits for its signal, so it pays the packet
for a kernel that was nearly done and is slower than a spinning wait
({p50(s,'event_synchronize_blocking','retiring','device'):.1f} against {p50(s,'event_synchronize','retiring','device'):.1f} us), and its CPU is {cpu(s,'event_synchronize_blocking','retiring','device'):.1f} us: {slept_word(s,'event_synchronize_blocking','retiring','device')}.

The completion thread (which completes batches closed at their size limit)
sleeps the same way on every queue, whatever its wait policy: a wake packet
behind each closed batch's fence, one of the queue's wake signals (five,
made with the queue; `wake_signals: 0` spends none, and the thread then
polls). On CUDA the whole wake runs on a relay stream of the queue's,
which waits for the awaited signal itself, so nothing of it is in the
queue's stream: there a host function would hold all later work until the
driver had run it (80-280 us of idle GPU per host function on the H200:
`cargo run --release --example host_function_stall -p sigbench`,
`benches/results/h200-runs/host-function-stall.txt`), and even the wake's
memory operations held the next kernel about 5 us.
No table row times it: it is off every call's path.

### NVIDIA H200 (CUDA backend, measured in the same process as CUDA's own calls)

Machine: {h['machine']}. Run on the device machine with the release binary
built here (`docs/device-runs.md` has the command).

Bars of docs/design.md section 7 (p50, ours / the CUDA driver API, the
first of the five runs below):

| bar | ours | CUDA | ratio | bar | met |
|---|---:|---:|---:|---:|---|
{bar('event synchronize after an empty kernel', 'event_synchronize', 0.95)}
{bar('event query on a completed event', 'event_query', 0.2)}
{bar('stream synchronize on completed work', 'stream_synchronize_completed', 0.1)}

**End to end, five runs** (`for i in 1 2 3 4 5; do ./sigbench --backend cuda
--long-iterations 1000 --json run$i.json; done` on the device machine: 2000
calls per cell, 1000 for the 1 ms rows; the release binary built
here; `benches/results/h200-runs/`). A user pays the whole sequence: the
waits' rows are timed from before the empty work (or the 1 ms kernel) is
submitted to the wait's return, the counters' snapshot between them taken
out; CUDA's rows run the same sequence with `cuLaunchKernel`,
`cuEventRecord` and `cuEventSynchronize`, `cuStreamSynchronize` or
`cuCtxSynchronize`, in the same process. The floor is what a launch and a
completion seen on the host cost with nothing tracked.

{five_runs()}

What closed the gap (it was 1.10-1.17 x for launch + record + event
synchronize, 1.16-1.20 x for launch + stream synchronize, about 3 x for a
timed event record): an event, a synchronize or a cross-queue wait right
after a command shares that command's completion instead of publishing a
marker (every publication is a fence, so the marker would complete with
it; `QueueStats::shared_completions`), on queues that run only what the
library publishes (an adopted stream still gets its marker). A timed event
shares a command still running, whose kernel writes its stamps (so the
event is stamped when the work before it ended, as CUDA's would be);
after finished work it launches its own stamping kernel, as before. A
blocking-sync wait spins 10 us before it sleeps (host-memory signals only),
so a wait for work that was nearly done pays no wake-up.

Where we do not win: the 1 ms rows are at parity, within the runs' noise
(the kernel is the wait); a blocking-sync wait for a 1 ms kernel is woken
by the host function the driver runs after the completion, one thread hop
more than CUDA's own blocking-sync event, and lands within a few percent
of it either way (below); a device synchronize with its submission is at
parity: its two launches take {submission_gap('device_synchronize')} us longer than CUDA's two bare
`cuLaunchKernel` calls (the row's submission part, ours against CUDA's,
run by run: the tracker's acquire, the command's record, and a kernel
that also writes the completion, its stamps and the progress word), which
eats most of what our wait saves.

The 1 ms blocking-sync wait over the five runs, each p50 of 1000 calls:
{long_blocking()}.

The same rows from the build before (host function against CUDA's
blocking-sync event, `sigbench --backend cuda --iterations 300
--long-iterations 1000`, `benches/results/h200-runs/long-waits.json`): ours
{p50(lw,'event_synchronize_blocking_long','retiring','host'):.1f} us against CUDA's {p50(lw,'event_synchronize_blocking_long','native','native'):.1f} us ({p50(lw,'event_synchronize_blocking_long','retiring','host') / p50(lw,'event_synchronize_blocking_long','native','native'):.3f} x), with the submission
{with_submission(lw,'event_synchronize_blocking_long','retiring','host'):.1f} against {with_submission(lw,'event_synchronize_blocking_long','native','native'):.1f} us ({with_submission(lw,'event_synchronize_blocking_long','retiring','host') / with_submission(lw,'event_synchronize_blocking_long','native','native'):.3f} x); CPU {cpu(lw,'event_synchronize_blocking_long','retiring','host'):.1f} against {cpu(lw,'event_synchronize_blocking_long','native','native'):.1f} us.

A blocking-sync event synchronize for a 1 ms kernel (first run): ours
{p50(h,'event_synchronize_blocking_long','retiring','host'):.0f} us and {cpu(h,'event_synchronize_blocking_long','retiring','host'):.1f} us of CPU ({100 * cpu(h,'event_synchronize_blocking_long','retiring','host') / p50(h,'event_synchronize_blocking_long','retiring','host'):.1f} % of the wait), CUDA's blocking-sync event {p50(h,'event_synchronize_blocking_long','native','native'):.0f} us and
{cpu(h,'event_synchronize_blocking_long','native','native'):.1f} us of CPU: both threads sleep ({sleeps(h,'event_synchronize_blocking_long','retiring','host'):.2f} and {sleeps(h,'event_synchronize_blocking_long','native','native'):.2f} voluntary
switches per call). After empty work ours spins and returns in
{p50(h,'event_synchronize_blocking','retiring','host'):.1f} us with {cpu(h,'event_synchronize_blocking','retiring','host'):.1f} us of CPU; CUDA's sleeps, {p50(h,'event_synchronize_blocking','native','native'):.1f} us with {cpu(h,'event_synchronize_blocking','native','native'):.1f} us of CPU.
The spinning waits burn their whole latency in CPU, as CUDA's spinning
event does. CUDA signals live in pinned host memory: no column reads
device memory.

The full table of the first run:

{table(h)}

Steady state (docs/design.md section 7). The runtime loop synchronizes every 64
uses, as a stream synchronize would; the saturated loop never does and lives
under back-pressure:

{steady(h)}

### Simulator (MI300X-like costs) on this project's 2-core machine

Machine: {s['machine']}.

The seed's shape, and our improvement on it: with device-memory signals the
baseline pays PCIe reads to answer a completed event's query
({p50(s,'event_query','baseline','device'):.2f} us) and its elapsed time ({p50(s,'event_elapsed_time','baseline','device'):.2f} us), ours pays none
({p50(s,'event_query','retiring','device'):.2f} us and {p50(s,'event_elapsed_time','retiring','device'):.2f} us); recording an event costs the baseline a fence and
{dev_loads(s,'event_record','baseline','device'):.1f} loads ({p50(s,'event_record','baseline','device'):.2f} us), ours
{dev_loads(s,'event_record','retiring','device'):.2f} loads, amortised ({p50(s,'event_record','retiring','device'):.2f} us). Waits poll the signal as CLR's do, so
the synchronize rows read device memory for both.

A blocking-sync event synchronize with device signals, timed alone, costs
us {p50(s,'event_synchronize_blocking','retiring','device'):.2f} us against the baseline's {p50(s,'event_synchronize_blocking','baseline','device'):.2f} us (with the submission {with_submission(s, 'event_synchronize_blocking', 'retiring', 'device'):.2f} against
{with_submission(s, 'event_synchronize_blocking', 'baseline', 'device'):.2f} us); both sleep the same way, in the queue layer.

Which waits slept (the median call had a voluntary context switch):
{slept_rows(s, True)}. Which did not: {slept_rows(s, False)}. The
blocking-sync rows sleep on a wake signal; the others spin or yield for
the whole wait, and their CPU time per call is about their latency. Both
trackers wait the same way (outside any lock), so their CPU columns differ
only by how long they wait.

{table(s)}

Steady state:

{steady(s)}

{seed_table}
{seed_bars_summary}
(`sim/src/profile.rs` cites a source for every figure of the profile, and
`benches/src/seed_table.rs` for CLR's per-call host cost; "What the model
leaves out" above says where and why a prediction misses.) The rows of this
page measured on the simulator use that profile and are no MI300X
measurement.

## Host instructions per use (callgrind)

```sh
benches/instructions.sh        # 8192 measured uses per run
```

Counted by valgrind's callgrind inside the harness's `acquire_one` (the
tracker's acquire, which retires and re-arms as needed) on the zero-cost
simulator; two runs per configuration, whose difference cancels set-up and
warm-up. The harness calls each tracker as the queue layer does (statically,
so the fast path may be inlined), with the request and the result behind
`black_box` so that neither is folded away:

| in flight | retiring | baseline | ratio |
|---:|---:|---:|---:|
{instr}

Flat within {x['spread_percent']}% from 64 to 16384 in flight (bar: 20%, met), and at
most 0.5 x the baseline at every size (bar met). Against the previous
table (195.6, 198.3 and 201.1 for ours; 490 and 422 for the baseline) both
rose: ours by 2.5 % (the tracker split into components that own their
state, and the stamp history of a timed use; a window scan that back-pressure's
fix added to every full ring, 41 instructions per use, was replaced by a
look at the one use back-pressure named), the baseline by 3.5 to 5 % (it
now checks AQL order and releases pins when it learns a consumer done).
What made the difference once (0.55 at 1024 in flight before that): a request carries its slot flags ready-made
(the builders work them out, so the fast path tests one byte to know it
applies and copies it into the slot); the reclaim walk bounds itself once by
the proven fence's sequence number instead of comparing every use's AQL
index, and a batch takes one placement up front; the fast path compares a
signal's arming store with one "visible through" number. Where the
instructions go at 1024 in flight (callgrind's inclusive counts, difference
of two runs, per use): ours is the acquire fast path ~65, the reclaim walk
~48, its fence probe ~14 and the slow path's own ~6 (amortised), and the
simulator's per-signal bookkeeping in the batched re-arm ~29; the baseline
is ~237 of its own and ~149 in the simulator (store 80, load 36, store
fence 33); both pay the harness's ~36 (the request, the `black_box`es, the
result). Outside the simulator and the harness, ours is about 0.56 x the
baseline; on hardware the larger gain is still the memory operations (2
loads and a fence per use for the baseline, each a PCIe round trip).

`cargo bench -p sigbench -- --quick` runs the criterion benches (per use at 64, 1024 and 16384 in
flight, one probe, one reclaim batch). Wall-clock, so noisier than the counts
above; the latest quick run on this machine (criterion's time per burst of
32 uses, divided by 32):

| in flight | retiring ns/use | baseline ns/use | ratio |
|---:|---:|---:|---:|
{crit_use}

| batch of completed fences | one probe | one reclaim walk |
|---:|---:|---:|
{crit_batch}

## Waits at the floor: `sigbench --waits`

```sh
cargo run --release -p sigbench -- --waits --json waits.json             # CUDA if present, else the simulator
cargo run --release -p sigbench -- --waits --backend sim --markdown
```

How late a wait returns after its kernel's end, and what the waiting
thread burns meanwhile, for kernels of 20 us, 100 us, 1 ms and 10 ms: the
queue layer's launch, event record and event synchronize under our three
policies (`WaitPolicy::spin`, `WaitPolicy::blocking`, today's sleeping
wait, and `WaitPolicy::hybrid`, which dozes until shortly before the
queue's usual completion time, learned from its recent waits, then spins),
and on an NVIDIA GPU CUDA's own `cuEventSynchronize` on a default
(spinning) and on a blocking-sync event after the same kernel. 200 timed
waits per cell after 10 untimed (`--wait-samples`; 50 for 10 ms kernels).
Then the wrong guess: each of 20 samples follows 8 waits on 1 ms kernels,
then times one far shorter (20 us) or far longer (10 ms) kernel.

- **late**: on the simulator, its GPU clock when the wait returned less
  the kernel's own end stamp (ground truth, 10 ns ticks); on a GPU, the
  wait's return less the moment an observer thread, spinning on a pinned
  word that a one-thread kernel launched right after the work writes, saw
  the word change (the end as the host first can see it; that kernel's own
  few microseconds are in every row alike). p50 and p99, and the excess
  over our spin's p50.
- **CPU**: the waiting thread's own time per wait
  (`CLOCK_THREAD_CPUTIME_ID` around the wait), its share of the wait's
  wall time, and its ratio to CUDA's blocking-sync event's (without CUDA,
  to our blocking wait's).

About 5 s on the simulator, about 15 s on a GPU. On this project's shared
2-core VM, run to run, the figures swing widely: a sleep there costs its
thread 12-17 us of CPU and overruns by about 18 us even with a 1 us timer
slack (70 us with the default 50 us), and the simulated GPU's thread
competes with the waiter for the two cores; the simulator's sleeping wait
is woken at once by the simulated interrupt, with none of the 100 us a
real one takes. One run (`benches/results/waits-sim.md`):

{waits_sim}
Three more runs on this machine, late p50 / CPU per wait in us (spin,
blocking, hybrid): 100 us kernel 4-9 / 123-138, 15 / 16-19, 27-40 / 45-51;
1 ms 62-64 / 615-682 (the spin policy yields after 50 us), 16 / 19-24,
5-24 / 125-173; 10 ms 183-399 / 1054-1174, 23-34 / 159-206, 26-43 /
1381-1490; far shorter than guessed (20 us) 4-6, 15-28, 93-104 (a
recheck, plus the doze's overrun); far longer (10 ms) 317-445, 26-41,
29-63. Here the hybrid's CPU is mostly its rechecks (one every 100 us,
each a sleep costing this VM's thread 12-17 us); the simulator's sleeping
wait pays no interrupt latency, so it is faster here than the hybrid's
recheck on a wrong guess, which on real hardware it is not.

The H200's figures: to come.

### Waiting beside submission, and many queues: `sigbench --wait-scaling`

```sh
cargo run --release -p sigbench -- --wait-scaling --json scaling.json   # CUDA if present, else the simulator
```

One thread submits in bursts of 64 (launch + event record, and launch
alone; a synchronize between bursts, untimed) for 200 ms per cell
(`--cell-ms`) while K = 0, 1, 4, 16 other threads, each on its own queue,
loop on a 1 ms kernel, an event and its synchronize: ours spinning and
hybrid, and on CUDA its own (`cuLaunchKernel` + `cuEventRecord` while the
waiters loop on `cuEventSynchronize` or poll `cuEventQuery`). Then 1, 8
and 64 queues of one device, one thread each, looping launch + record +
synchronize: the cost per operation (a thread's time over its
operations), ours spinning and blocking and CUDA's with a default event.
Each row's "x first" is its cost over the same series' at K = 0 (or one
queue). About 3 s on the simulator, 8 s on a GPU. On this project's 2-core
machine the figures say little (sixteen waiters and the simulated GPU
share two cores); one run (`benches/results/wait-scaling-sim.md`):

{scaling_sim}
The H200's figures: to come.

## The sync-contention example (docs/design.md section 4)

```sh
cargo run --release -p sigretire-queue --example sync_contention -- --json FILE
```

8 threads over 8 queues on the threaded simulator (MI300X-like costs,
device signals, a 20 ms kernel per synchronize): the longest any
non-synchronize call was blocked, in one run on this machine: fixed
{x['contention']['fixed']['max_blocked_ms']:.3f} ms ({x['contention']['fixed']['calls']} calls), old {x['contention']['old']['max_blocked_ms']:.1f} ms ({x['contention']['old']['calls']} calls).

## Proofs

- `SCENARIO_CASES=3000 cargo test --release -p sigretire-scenarios --test property`:
  both trackers, every invariant after every step, about 3 s per seed.
- `FUZZ_SECONDS=240 .ci/fuzz`: {x['fuzz']['ops_per_second']} ops/s per target; {x['fuzz']['ops_without_violation']}
  operations without a violation in this session.
""")
