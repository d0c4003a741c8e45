"""tasks/bookengine.py: which engine renders a book — its record's, else its rows' (a book rendered before records),
else a first choice; a process without it refuses in one line unless --reengine; an explicit --dtype or --int8 that
differs wins with a note.  On an engine double (`load` records the options it was asked for): no model."""
from __future__ import annotations

from dataclasses import asdict
from types import SimpleNamespace

import pytest

import manifests
from engine.api import EngineMismatch, EngineOptions, EngineRecord
from manifests.engine import read_engine, record_engine
from tasks.bookengine import book_engine, keep_engine
from tasks.errors import RenderFailed

AVX2 = EngineRecord(path="fp32-avx2", dtype="fp32", int8=False, kind="f32", backend="kernels-aten_avx2",
                    version="ours6-fp-fp32-cpu-kernels-aten_avx2")
OFF = EngineRecord(path="off", dtype="fp32", int8=False, kind="onednn", backend="onednn-avx2-aten_avx2",
                   version="ours6-fp-fp32-cpu-onednn-avx2-aten_avx2")
INT8 = EngineRecord(path="int8-avx2", dtype="fp32", int8=True, kind="q8", backend="kernels-aten_avx2",
                    version="ours6-fp-fp32-cpu-kernels-aten_avx2+int8")


class Loader:
    """An engine double's loader: this process runs the back-ends `runs` (by tag) and chooses `own` on its own."""

    def __init__(self, own: EngineRecord, runs: tuple[EngineRecord, ...] = ()):
        self.own, self.runs, self.asked = own, {r.backend: r for r in (own, *runs)}, []

    def __call__(self, opts: EngineOptions):
        self.asked.append(opts)
        r = opts.record
        if r is None:
            return SimpleNamespace(record=self.own, version=self.own.version)
        if r.backend not in self.runs:
            raise EngineMismatch(f"this process cannot run the book's engine {r.path} ({r.version}): it runs "
                                 f"{self.own.path} ({self.own.version})")
        mine = self.runs[r.backend]
        return SimpleNamespace(record=mine, version=r.version)


def rows(book_dir, *versions: tuple[str, str]) -> None:
    """Manifest rows of these (engine version, status)."""
    manifests.commit(book_dir, [{"plan_id": "p", "chapter": 0, "segment": i, "text": "t", "source_text": "t",
                                 "pause_after": "sentence", "content_key": f"k{i}", "audio_path": f"a{i}",
                                 "status": status, "samples": 0, "duration_s": 0.0, "voice_id": "v", "spk_emb": "e",
                                 "seed": 1, "engine_version": v, "error": "", "attempts": 0}
                                for i, (v, status) in enumerate(versions)])


def test_a_book_runs_its_recorded_engine_and_a_first_render_records_its_own(tmp_path):
    load = Loader(OFF, runs=(AVX2,))
    engine = book_engine(EngineOptions(), tmp_path, False, load)              # nothing yet: this process's choice
    assert engine.record == OFF and load.asked[-1].record is None
    keep_engine(tmp_path, engine)
    assert read_engine(tmp_path) == OFF
    record_engine(tmp_path, AVX2)
    engine = book_engine(EngineOptions(), tmp_path, False, load)
    assert engine.record == AVX2 and load.asked[-1].record == AVX2           # followed, not chosen
    record_engine(tmp_path, INT8)                                            # an --int8 book without --int8
    book_engine(EngineOptions(dtype="fp32"), tmp_path, False, load)
    assert load.asked[-1].record == INT8 and load.asked[-1].int8


def test_a_book_without_a_record_takes_the_engine_its_rows_name(tmp_path):
    """The rows still to render first, then the most rows; a version this process cannot run is passed over, and
    none it can run (or none of a CPU back-end) is a first choice."""
    load = Loader(OFF, runs=(AVX2,))
    rows(tmp_path, (OFF.version, "done"), (OFF.version, "done"), (AVX2.version, "pending"))
    assert book_engine(EngineOptions(), tmp_path, False, load).record == AVX2
    assert load.asked[-1].record.backend == AVX2.backend and load.asked[-1].record.path == ""
    load = Loader(OFF)                                                       # cannot run AVX2: the next one
    assert book_engine(EngineOptions(), tmp_path, False, load).record == OFF
    assert [o.record.backend if o.record else None for o in load.asked] == [AVX2.backend, OFF.backend]
    other = tmp_path / "old"
    rows(other, ("ours5-fp-fp32-cpu", "done"))                               # before back-ends were named
    load = Loader(OFF)
    assert book_engine(EngineOptions(), other, False, load).record == OFF and load.asked[-1].record is None


def test_a_process_that_cannot_run_the_books_engine_refuses_unless_reengine(tmp_path, capsys):
    record_engine(tmp_path, AVX2)
    load = Loader(OFF)
    with pytest.raises(RenderFailed) as e:
        book_engine(EngineOptions(), tmp_path, False, load)
    line = str(e.value)
    assert "\n" not in line and line.startswith(f"{tmp_path}: this process cannot run the book's engine fp32-avx2 "
                                                f"({AVX2.version}): it runs off ({OFF.version})")
    assert "--reengine" in line
    engine = book_engine(EngineOptions(), tmp_path, True, load)
    assert engine.record == OFF
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--reengine: this process's own choice replaces the book's engine fp32-avx2" \
        in err and f"it is now off ({OFF.version})" in err


def test_an_explicit_dtype_or_int8_that_differs_wins_with_a_note(tmp_path, capsys):
    record_engine(tmp_path, AVX2)
    load = Loader(INT8, runs=(AVX2,))
    assert book_engine(EngineOptions(int8=True), tmp_path, False, load).record == INT8
    assert load.asked[-1].record is None and "--int8 asks for another engine than the book's engine fp32-avx2" \
        in capsys.readouterr().err
    bf16 = EngineRecord(**{**asdict(AVX2), "path": "bf16-avx512", "dtype": "bf16"})
    record_engine(tmp_path, bf16)
    book_engine(EngineOptions(dtype="fp32"), tmp_path, False, load)
    assert load.asked[-1].record is None and "--dtype fp32 asks for another engine" in capsys.readouterr().err
    book_engine(EngineOptions(dtype="bf16"), tmp_path, False, Loader(bf16))  # the same dtype: followed, no note
    assert capsys.readouterr().err == ""


def test_cuda_and_onnx_engines_have_no_choice_to_follow(tmp_path):
    record_engine(tmp_path, AVX2)
    load = Loader(OFF)
    book_engine(EngineOptions(backend="onnx"), tmp_path, False, load)
    assert load.asked[-1].record is None
    with pytest.raises(ValueError, match="record= is a CPU back-end's"):
        EngineOptions(device="cuda", record=AVX2)
    with pytest.raises(ValueError, match="ask for another engine than the record's"):
        EngineOptions(dtype="bf16", record=AVX2)
