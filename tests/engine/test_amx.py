"""engine/kernels.c's AMX kinds ("amx_bf16", "amx_i8") and how they are offered, on any CPU.

The kinds themselves run only on a CPU with AMX (tests/engine/test_kernels.py's kind-parametrized tests cover them
there, and skip naming the missing flags elsewhere).  What runs everywhere:
- their C — the layouts, the padding of rows and K to whole tiles, the epilogues, the thread split — through a
  build that emulates the tile instructions in C (CHATTTS_AMX_EMULATE, the ISA reference's pseudo-code), offered
  to this process as if the CPU had AMX: the child-process self-check passes it for real, and the kinds give the
  reference's results, the W8A8 bits, a row's bits alone, and a whole decode step;
- the self-check's own logic (kernels.kind_problem) on injected multiplies, each wrong in one way;
- the parent's handling of its child: killed by SIGILL, garbage, a refused permission, a failed kind, a timeout —
  each leaves the AMX kinds out and the others in.
"""
from __future__ import annotations

import json
import logging
import sys

import pytest

torch = pytest.importorskip("torch")

from engine import kernelbuild, kernels  # noqa: E402
from tests.conftest import unavailable  # noqa: E402
from tests.engine.kinds import reference  # noqa: E402

AMX_FLAGS = {"amx_tile", "amx_bf16", "amx_int8"}


@pytest.fixture(scope="module")
def emulated_lib(tmp_path_factory):
    """engine/kernels.c built with the tile instructions emulated (strict flags)."""
    if not kernelbuild.cpu_ok() or kernelbuild._compiler() is None:
        unavailable("engine/kernels.c cannot be built here (no AVX2/FMA or no C compiler)")
    return kernelbuild.build(tmp_path_factory.mktemp("amx"), strict=True, extra=("-DCHATTTS_AMX_EMULATE",))


@pytest.fixture
def fresh(monkeypatch):
    """kernels' memory of its library and kinds cleared for the test and restored after it."""
    lib, found = list(kernels._LIB), list(kernels._KINDS)
    kernels._LIB.clear()
    kernels._KINDS.clear()
    monkeypatch.delenv(kernels.ENV, raising=False)
    yield monkeypatch
    kernels._LIB[:] = lib
    kernels._KINDS[:] = found


def _on_emulated(monkeypatch, lib_path) -> None:
    monkeypatch.setenv(kernelbuild.LIB_ENV, str(lib_path))
    flags = kernelbuild.cpu_flags() | AMX_FLAGS
    monkeypatch.setattr(kernels, "cpu_flags", lambda: flags)


@pytest.fixture(scope="module")
def emulated_kinds(emulated_lib):
    """(the emulated library, the kinds a process on it finds when its CPU reports AMX: the real child check, once)."""
    lib, found = list(kernels._LIB), list(kernels._KINDS)
    with pytest.MonkeyPatch.context() as m:
        m.delenv(kernels.ENV, raising=False)
        _on_emulated(m, emulated_lib)
        kernels._LIB.clear()
        kernels._KINDS.clear()
        try:
            yield kernels.library(), kernels.kinds()
        finally:
            kernels._LIB[:] = lib
            kernels._KINDS[:] = found


@pytest.fixture
def emulated(emulated_lib, emulated_kinds, fresh):
    """This process on the emulated library, its CPU reporting AMX, its kinds as the child check found them."""
    _on_emulated(fresh, emulated_lib)
    kernels._LIB.append(emulated_kinds[0])
    kernels._KINDS.append(emulated_kinds[1])
    return kernels


@pytest.fixture
def emulated_unchecked(emulated):
    """As `emulated`, the kinds not found yet: the next kinds() runs the tile check's child again."""
    kernels._KINDS.clear()
    return kernels


def test_the_emulated_tiles_pass_the_child_check_and_are_offered(emulated):
    found = emulated.kinds()
    assert {"f32", "q8", "amx_bf16", "amx_i8"} <= set(found)
    assert emulated.library().chattts_amx_enable() == 0


@pytest.mark.parametrize("kind", kernels.TILE_KINDS)
@pytest.mark.parametrize("n, k", [(48, 64), (40, 37), (13, 96), (72, 768), (8, 1)])
def test_the_tile_kinds_equal_their_reference(emulated, kind, n, k):
    """Blocks of 16 columns in pairs, a lone one and a last half block (40, 72, 13 -> 16), K inside one tile, odd,
    several tiles: within the fp32 sums' bound of float64 over the rounded operands; W8A8 bit for bit."""
    from engine.cpu import kind_linear

    assert kind in emulated.kinds()
    g = torch.Generator().manual_seed(n * 1000 + k)
    w, x = torch.randn(n, k, generator=g), torch.randn(37, k, generator=g)
    y = kind_linear(kind)(w)(x)
    if kind == "amx_i8":
        wq, scale = kernels.quantize_weight(w)
        assert torch.equal(y, kernels.w8a8_reference(x, wq, scale))
        ref, bound = reference(kind, x, wq, scale)
    else:
        ref, bound = reference(kind, x, w)
    assert bool(((y.double() - ref).abs() <= bound).all())


@pytest.mark.parametrize("kind", kernels.TILE_KINDS)
def test_a_rows_tile_bits_depend_on_nothing_else_in_the_call(emulated, kind):
    """Every call size 1..40 (one and two row tiles, padded), rows in other positions, 1 or 2 threads."""
    from engine.cpu import kind_linear

    assert kind in emulated.kinds()
    g = torch.Generator().manual_seed(3)
    f = kind_linear(kind)(torch.randn(56, 100, generator=g))
    x = torch.randn(40, 100, generator=g)
    old = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        ref = f(x)
        for m in range(1, 41):
            assert torch.equal(f(x[:m]), ref[:m]), m
            assert torch.equal(f(x[40 - m:]), ref[40 - m:]), m
        torch.set_num_threads(2)
        assert torch.equal(f(x), ref) and torch.equal(f(x[5:22]), ref[5:22])
    finally:
        torch.set_num_threads(old)


@pytest.mark.parametrize("kind", kernels.TILE_KINDS)
def test_a_decode_step_on_tiles_equals_the_layer_by_layer_path_and_is_row_invariant(emulated, kind):
    from engine.attention import CAttention, PerRow
    from tests.engine.test_kernels import _clone, _llama, _run, _step_inputs

    assert kind in emulated.kinds()
    model = _llama(kind)
    step = model.attention.decode
    assert step.kind == kind and step.kv_dtype == (torch.bfloat16 if kind == "amx_bf16" else torch.float32)
    x, pos, cache, slots, lens = _step_inputs(model)
    y = _run(model, x, pos, _clone(cache), slots, lens)
    ref = _run(model, x, pos, _clone(cache), slots, lens, PerRow() if kind == "amx_bf16" else CAttention())
    tol = 2e-2 if kind == "amx_bf16" else 5e-2
    torch.testing.assert_close(y, ref, atol=tol, rtol=tol / 2)
    for b in range(5):
        alone = _run(model, x[b:b + 1], pos[b:b + 1], _clone(cache), slots[b:b + 1], lens[b:b + 1])
        assert torch.equal(alone, y[b:b + 1]), b


# ------------------------------------------------------------------------------------------ the check's own logic
def _exact(kind):
    """A correct multiply for `kind`: the reference rounded to fp32 (W8A8: the exact reference's bits)."""
    def multiply(weight, scale, x):
        if kind in kernels.W8A8:
            return kernels.w8a8_reference(x, weight, scale)
        xr, wr = kernels.rounded_operands(kind, x, weight)
        return (xr @ wr.t()).float()
    return multiply


@pytest.mark.parametrize("kind", ["f32", "bf16", "amx_bf16", "i8", "amx_i8"])
def test_a_correct_multiply_passes_the_self_check(kind):
    assert kernels.kind_problem(kind, _exact(kind)) is None
    assert kernels.kind_problem(kind, _exact(kind), twin=_exact(kind)) is None


def test_the_self_check_catches_a_row_whose_bits_depend_on_its_batch():
    def batch_dependent(weight, scale, x):                 # rows of a call of 35 rounded one ulp up
        y = _exact("amx_bf16")(weight, scale, x)
        return torch.nextafter(y, torch.full_like(y, float("inf"))) if x.shape[0] > 16 else y
    assert "depend on the other rows" in kernels.kind_problem("amx_bf16", batch_dependent)


def test_the_self_check_catches_products_off_the_reference():
    def unrounded(weight, scale, x):                       # fp32 operands where the kind rounds to bf16: too far
        return (x.double() @ weight.double().t() * (1 + 1e-3)).float()
    assert "off the float64 reference" in kernels.kind_problem("amx_bf16", unrounded)


def test_the_self_check_holds_the_w8a8_kinds_to_the_exact_bits():
    def one_ulp_off(weight, scale, x):                     # within the float bound, not the exact integers' bits
        y = _exact("amx_i8")(weight, scale, x)
        return torch.nextafter(y, torch.zeros_like(y))
    assert "exact reference" in kernels.kind_problem("amx_i8", one_ulp_off)
    assert "i8's bits" in kernels.kind_problem("amx_i8", _exact("amx_i8"), twin=one_ulp_off)


# ------------------------------------------------------------------------------------------ the child process
def _child(code: str):
    """A child command running `code` instead of the real check."""
    return lambda kinds: [sys.executable, "-c", code]


@pytest.mark.parametrize("code, why", [
    ("import os, signal; os.kill(os.getpid(), signal.SIGILL)", "killed by SIGILL"),
    ("print('Illegal instruction?')", "printed no verdict"),
    ("import sys; print('{}'); sys.exit(3)", "exited with status 3"),
    ('print(\'{"error": "the OS refused the tiles (arch_prctl ARCH_REQ_XCOMP_PERM: No space left on device)"}\')',
     "the OS refused the tiles"),
])
def test_a_child_that_dies_or_refuses_leaves_the_tile_kinds_out(emulated_unchecked, caplog, code, why):
    with pytest.MonkeyPatch.context() as m:
        m.setattr(kernels, "_tile_command", _child(code))
        with caplog.at_level(logging.WARNING, logger="engine.kernels"):
            found = emulated_unchecked.kinds()
    assert "f32" in found and not set(kernels.TILE_KINDS) & set(found)
    assert why in caplog.text and "AMX kinds (amx_bf16, amx_i8) are not used" in caplog.text


def test_a_kind_the_child_failed_is_left_out_alone(emulated_unchecked, caplog):
    with pytest.MonkeyPatch.context() as m:
        m.setattr(kernels, "_tile_command",
                  _child('print("noise"); print(\'{"kinds": {"amx_bf16": false, "amx_i8": true}}\')'))
        with caplog.at_level(logging.WARNING, logger="engine.kernels"):
            found = emulated_unchecked.kinds()
    assert "amx_i8" in found and "amx_bf16" not in found and "f32" in found
    assert "amx_bf16 kernel failed its self-check (in a child process)" in caplog.text


def test_a_child_that_hangs_is_given_up(emulated_unchecked, caplog):
    with pytest.MonkeyPatch.context() as m:
        m.setattr(kernels, "_tile_command", _child("import time; time.sleep(30)"))
        m.setattr(kernels, "TILE_CHECK_TIMEOUT", 2)
        with caplog.at_level(logging.WARNING, logger="engine.kernels"):
            found = emulated_unchecked.kinds()
    assert not set(kernels.TILE_KINDS) & set(found) and "took over 2 s" in caplog.text


def test_the_real_child_reports_each_kind_it_was_asked(emulated, capsys):
    """tile_child in this process (the emulated library): the permission (emulated: granted), then each kind's
    check; a kind that is not a tile kind is not passed."""
    out = kernels.tile_child(["amx_bf16", "amx_i8", "f32"])
    assert out == {"kinds": {"amx_bf16": True, "amx_i8": True, "f32": False}}
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == out       # the line the parent reads


def test_without_amx_flags_no_child_is_started(fresh, monkeypatch):
    """A CPU without AMX (this one, unless it has it): the tile kinds are not in kinds() and no child runs."""
    if not kernels.available():
        unavailable("engine/kernels.c is not available here (no AVX2/FMA or no C compiler)")
    flags = kernelbuild.cpu_flags() - AMX_FLAGS
    monkeypatch.setattr(kernels, "cpu_flags", lambda: flags)
    monkeypatch.setattr(kernels, "_tile_command", lambda kinds: pytest.fail("a child was started"))
    assert not set(kernels.TILE_KINDS) & set(kernels.kinds())
