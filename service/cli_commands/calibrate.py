"""``ridgeline calibrate FILE...``: fit one profile from benchmark CSVs or harness result files."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from itertools import chain
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from service.api.schemas.calibrations import ParameterShiftOut
from service.cli_commands.connection import ApiKeyOption, UrlOption, open_client
from service.cli_commands.errors import reported
from service.cli_commands.output import CsvOption, JsonOption, emit, flatten, number, table
from service.client.measurement_files import (
    MeasurementFile,
    calibration_body,
    read_measurement_files,
)
from service.client.measurement_files import (
    Progress as ProgressCallback,
)
from service.client.types import CalibrationProfile

LARGE_FILE_BYTES = 256 * 1024


@contextmanager
def progress_bar(path: Path) -> Iterator[ProgressCallback | None]:
    """A rich progress bar on stderr for files over LARGE_FILE_BYTES (rows read of total)."""
    if path.stat().st_size <= LARGE_FILE_BYTES:
        yield None
        return
    columns = (TextColumn("reading {task.description}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(path.name, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


def profile_rows(profile: CalibrationProfile) -> Iterable[Mapping[str, Any]]:
    """One CSV row per fitted parameter."""
    for name, value in flatten(profile.parameters).items():
        yield {"profile": profile.id, "parameter": name, "value": value}


def profile_tables(profile: CalibrationProfile, measured: MeasurementFile) -> Iterable[Any]:
    """The stored profile's parameters and fit quality."""
    fit = profile.fit.model_dump(mode="json", exclude={"parameter_shifts"})
    engine = f", backend {profile.backend}" if profile.backend else ", no backend"
    title = (
        f"calibration {profile.id} '{profile.name}' for "
        f"{profile.accelerator}{engine}: {len(measured.measurements)} measurements "
        f"({measured.format}), {profile.fit.n_measurements} used"
    )
    rows = [[k, str(v)] for k, v in flatten(profile.parameters).items()]
    yield table(title, ["parameter", "value"], rows)
    if profile.fit.parameter_shifts:
        yield shift_table(profile.fit.prior_backend, profile.fit.parameter_shifts)
    quality = [[k, str(v)] for k, v in flatten(fit).items() if k != "n_measurements"]
    if quality:
        yield table("fit", ["metric", "value"], quality)


def shift_table(prior_backend: str | None, shifts: Mapping[str, ParameterShiftOut]) -> Any:
    """How far the end-to-end runs moved each engine parameter from its backend's prior."""
    rows = [
        [
            name,
            f"{number(s.prior, 3)} ± {number(s.prior_sd, 3)}",
            number(s.fitted, 3)
            + ("" if s.standard_error is None else f" ± {number(s.standard_error, 3)}"),
            number(s.shift_prior_sd, 2),
        ]
        for name, s in shifts.items()
    ]
    title = f"what the runs moved (priors: {prior_backend or 'generic'})"
    return table(title, ["parameter", "prior ± sd", "fitted ± se", "shift, prior sds"], rows)


def fit_warnings(profiles: Iterable[CalibrationProfile]) -> list[str]:
    """The stored profiles' own warnings (a backend taken from the runs, kernel groups built on
    other profiles, runs left out), each named by its profile when there are several."""
    stored = list(profiles)
    return [
        f"{p.backend or p.id}: {w}" if len(stored) > 1 else w for p in stored for w in p.warnings
    ]


def calibrate(
    files: Annotated[
        list[Path],
        typer.Argument(
            exists=True,
            dir_okay=False,
            help="Benchmark CSVs, or result files of vllm bench serve, SGLang bench_serving, "
            "genai-perf, trtllm-bench or guidellm (docs/measurement-formats.md); several "
            "files make one profile (kernel tables beside the serving or static runs).",
        ),
    ],
    accelerator: Annotated[str, typer.Option("--accelerator", "-a", help="Accelerator id.")],
    name: Annotated[str | None, typer.Option(help="Profile name (default: the file).")] = None,
    backend: Annotated[str | None, typer.Option(help="Backend (default: the file's).")] = None,
    backend_version: Annotated[str | None, typer.Option(help="Backend version.")] = None,
    tp: Annotated[int, typer.Option(min=1, help="TP of a run whose file does not say.")] = 1,
    weights_dtype: Annotated[
        str, typer.Option(help="Weights dtype of a run whose file does not say.")
    ] = "bf16",
    model: Annotated[
        str, typer.Option(help="Model of a run whose file does not name it (SGLang).")
    ] = "",
    concurrency: Annotated[
        int | None,
        typer.Option(min=1, help="Concurrency limit the file does not record (trtllm-bench)."),
    ] = None,
    file_format: Annotated[
        str | None,
        typer.Option(
            "--format",
            help="Harness format instead of detecting it: "
            "vllm_bench_json, sglang_bench_serving, genai_perf, trtllm_bench, guidellm.",
        ),
    ] = None,
    split_by_backend: Annotated[
        bool,
        typer.Option(
            "--split-by-backend",
            help="Store one profile per backend the runs name (files that mix engines), "
            "each profile taking its backend from its runs.",
        ),
    ] = False,
    as_json: JsonOption = False,
    as_csv: CsvOption = False,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
) -> None:
    """Fit and store one calibration profile from measured benchmarks (POST /v1/calibrations);
    with --split-by-backend, one per backend."""
    with reported():
        measured, source = read_measurement_files(
            files,
            accelerator=accelerator,
            progress=progress_bar,
            tp=tp,
            weights_dtype=weights_dtype,
            model=model,
            concurrency=concurrency,
            file_format=file_format,
        )
        body = calibration_body(measured, accelerator, name, source)
        if backend:
            body["backend"] = backend
        if backend_version:
            body["backend_version"] = backend_version
        with open_client(url, api_key) as client, Console(stderr=True).status("fitting"):
            if split_by_backend:
                profiles = client.calibrate_per_backend(body)
            else:
                profiles = [client.calibrate(body)]
    emit(
        profiles if split_by_backend else profiles[0],
        as_json=as_json,
        as_csv=as_csv,
        rows=lambda: (row for p in profiles for row in profile_rows(p)),
        render=lambda: chain(
            (item for p in profiles for item in profile_tables(p, measured)),
            # what reading the files found, then what the fit said (each once)
            (f"warning: {w}" for w in dict.fromkeys([*measured.warnings, *fit_warnings(profiles)])),
        ),
    )
