"""Calibration accuracy on held-out measured data: uncalibrated vs calibrated, side by side.

Run: ``.venv/bin/python benchmarks/accuracy.py`` (about 70 s on 2 cores). Writes
``benchmarks/results/accuracy.md``. Only the measured data in ``benchmarks/data`` (sources in
its README) is used, and every calibrated number is measured on data left out of the fit that
produced it.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration_data import (
    SERVING_FILES,
    accelerators,
    models,
    serving_runs,
)
from heldout.coverage import GROUPS, coverage_section, group_coverage_section, spreads_section
from heldout.diagnostics import (
    eager_floor_section,
    kernel_tables_section,
    prompt_cost_section,
    prompts_ahead_section,
    sequence_cost_section,
    sharded_cost_section,
    spec_sheet_section,
    static_ttft_section,
    ttft_signature_section,
)
from heldout.kernels import gemm_section, kernel_cv_section, kernel_table_section
from heldout.protocols import (
    concurrency_section,
    leave_model_out_section,
    serving_section,
    static_section,
    static_serving_section,
    timing_section,
    transfer_section,
)
from heldout.report import CHECKS, FAILURES, RESULT, lines, out, table

from service.engine.calibration.run_predictor import RunPredictor

# What changed for issue 11 and which choices were made after seeing which held-out numbers:
# prose, kept as markdown beside this script and copied into the result file as it stands.
ISSUE_11_NOTES = Path(__file__).resolve().parent / "accuracy_notes.md"


def summary_section() -> None:
    """Every number with a target: met or missed."""
    out("## 13. Targets")
    out()
    rows = [
        [
            what,
            f"{value:.{decimals}f}",
            f"{low:g}–{high:g}",
            "met" if low <= value <= high else "**missed**",
        ]
        for what, value, low, high, decimals in CHECKS
    ]
    table(["what", "value", "target", ""], rows)
    out(
        f"Held-out cells (group × metric) where calibrated is worse than the spec sheet (bold "
        f"FAIL above): "
        f"{len(FAILURES)}."
    )
    out()
    out(ISSUE_11_NOTES.read_text(encoding="utf-8").rstrip("\n"))
    out()
    out(
        "Serving model (`service/engine/serving.py`): the running batch R decodes R tokens per "
        "step; a prompt runs as whole chunks beside them (engines never spread a prompt over "
        "the decode steps as slivers) and adds `prompt_s`; per cycle of one slot the other "
        "R − 1 prompts run either before a new request's first token (`prefill_queue_share` · "
        "(R − 1), in its TTFT) or while it decodes (the rest, in its TPOT, which excludes the "
        "first token): 0 for arrivals spread over the decode cycle, ½ for lockstep waves of "
        "equal-length closed-loop clients, which prefill-first schedulers (SGLang by default) "
        "keep in step. TTFT = admission wait + prompts ahead + its own chunks. The serving fit "
        "is staged: host overheads on TPOT (and static runs), then the admission wait and queue "
        "share on TTFT with the overheads fixed, alternating until the share settles (TPOT "
        "depends on it). "
        "**Model selection:** this serving structure was revised after seeing the "
        "cross-validated results of section 4, so its held-out figures carry that "
        "model-selection bias. The previous structure amortised R·S_in/S_out prefill tokens "
        "into every step and also counted the prompts ahead in TTFT; its held-out MdAPE was "
        "TPOT 9.6 / 11.1 / 7.2% and TTFT 17.7 / 16.3 / 21.7% (vLLM / SGLang / TensorRT-LLM), "
        "with SGLang's TPOT error growing with R·S_in/S_out (26.9% at 128 output tokens, "
        "19.5% at concurrency 128). The revision lowered every backend's TPOT error and vLLM's "
        "and SGLang's TTFT error, and raised TensorRT-LLM's TTFT error, the vLLM tp1 run's "
        "errors and SGLang tp1's TPOT error (see the table above). Splits, rows, bounds and "
        "priors were not changed. "
        "What limits the misses, and the weakest figures: "
        "held-out (backend, tp) groups with one or a few rows (vLLM tp1 is a single fp8 run; "
        "SGLang tp1 is another release, 0.5.8, at concurrency 16 only, whose measured TPOT of "
        "25–27 ms at every length is at or below the predicted decode-only step, leaving no "
        "room for the prompts that the share of about ½ fitted at tp2–8 puts in the decode "
        "window) cannot be predicted from the other layouts; TensorRT-LLM's TTFT is about 4–7 "
        "prompts' prefill at concurrency 8 to 64 and proportional to the prompt length, a "
        "shape neither the admission wait (in decode steps) nor the queue share (in prompts per "
        "running request) reproduces; "
        "per-step overheads fitted on two TP sizes extrapolate imperfectly to the third; "
        "Mixtral-8x7B is the only MoE model, so leaving it out extrapolates from dense models; "
        "the A100 memory size is not stated by the source (section 5 infers the 40 GB part from "
        "the data); the transfer widening is one measured spread (intervals.py), not one per "
        "target, so it over-covers where the transfer is accurate and under-covers where it "
        "is not. "
        "No parameter was tuned on a test split."
    )
    out()


def main() -> None:
    """Run every section and write the result file."""
    started = time.perf_counter()
    accs = accelerators()
    shapes, aliases = models()
    GROUPS.shapes = shapes
    h100 = accs["h100-sxm"]
    all_serving = serving_runs(aliases, SERVING_FILES)
    running = RunPredictor(all_serving, h100, shapes).running_batches()
    GROUPS.running = dict(zip(all_serving, running.tolist(), strict=True))
    out("# Calibration accuracy (held-out data only)")
    out()
    out(
        "Generated by `benchmarks/accuracy.py` from `benchmarks/data` (sources in its "
        "README.md). Uncalibrated = spec-sheet roofline (`spec_sheet_efficiency`) with the runs' "
        "backend's engine priors, as `calibration: none` answers a request naming that backend; "
        "calibrated "
        "= the profile fitted by `service.engine.calibration.fit` on data that excludes the "
        "test rows. APE = |predicted / measured − 1|."
    )
    out()
    gemm_section(h100)
    kernel_cv_section(h100)
    kernel_table_section(h100)
    static_section(h100, shapes, aliases)
    serving_section(h100, shapes, aliases)
    transfer_section(accs, shapes, aliases)
    coverage_section()
    leave_model_out_section(h100, shapes, all_serving)
    ttft_signature_section(all_serving)
    sequence_cost_section(h100, shapes, all_serving)
    prompt_cost_section(h100, shapes, all_serving)
    eager_floor_section(h100, shapes, all_serving)
    kernel_tables_section(h100, shapes, all_serving)
    prompts_ahead_section(h100, shapes, all_serving)
    sharded_cost_section(h100, shapes, all_serving)
    concurrency_section(h100, shapes, all_serving)
    static_serving_section(h100, shapes, aliases, all_serving)
    static_ttft_section(accs, shapes, aliases, all_serving)
    spec_sheet_section(h100, shapes, aliases, all_serving)
    spreads_section()
    group_coverage_section()
    timing_section(accs, shapes, aliases)
    summary_section()
    out(f"Total benchmark time: {time.perf_counter() - started:.0f} s.")
    RESULT.parent.mkdir(parents=True, exist_ok=True)
    RESULT.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
