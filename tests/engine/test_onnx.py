"""The onnx back-end on random-tiny (CPU provider): graphs export once and load; decode-step logits of every code
head, a forced-length segment's tokens and Decoder+Vocos output against our torch engine; batched == alone;
the engine version names the back-end.  Skipped (one reason) without the onnx extra; a failure under CI=true."""
from __future__ import annotations

import pytest

from engine.api import EngineOptions, Request, onnx_missing
from tests.conftest import unavailable

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
pytest.importorskip("ChatTTS")

TEXTS = ["你好。", "今天天气很好，我们去公园散步吧。", "一二三四五六七八九十。", "春眠不觉晓，处处闻啼鸟。",
         "道可道，非常道。"]
COSINE_MIN = 0.99999               # fp32 decode-step logits, per code head
LOGITS_ATOL = 1e-4                 # max abs diff of the logits (random-tiny measures ~2e-7)
SNR_MIN_DB = 60.0                  # Decoder + Vocos graph vs torch (random-tiny measures ~117 dB)
MAX_BATCH = 3                      # rows decoded together (both engines, and the sampled-codes comparison)


@pytest.fixture(scope="module", autouse=True)
def _onnx():
    if missing := onnx_missing():
        unavailable(f"the onnx extra is not installed ({', '.join(missing)}): pip install 'chattts-render[onnx]'")
    torch.set_num_threads(1)


@pytest.fixture(scope="module")
def engines():
    """(onnx engine, torch engine) on random-tiny, both fp32: the onnx one exports into the model cache once."""
    from engine.engine import Engine

    return (Engine.load(EngineOptions(model="random-tiny", backend="onnx", max_batch=MAX_BATCH, threads=1)),
            Engine.load(EngineOptions(model="random-tiny", max_batch=MAX_BATCH, threads=1, dtype="fp32")))


@pytest.fixture(scope="module")
def requests(engines):
    voice = engines[1].sample_voice(7)
    return [Request(key=f"s{i}", text=t, spk_emb=voice, seed=500 + i) for i, t in enumerate(TEXTS)]


def test_export_is_cached_atomic_and_typed(engines, tmp_path):
    import onnx

    from engine.onnxgraph import INFO_FILE, NAMES, complete, export_graphs, graph_dir

    loaded = engines[0].loaded
    paths = export_graphs(loaded)                                   # the engine's export, reused as it is
    assert set(paths) == set(NAMES) and paths["decode"].parent == graph_dir(loaded.fingerprint, "fp32")
    stamp = {n: p.stat().st_mtime_ns for n, p in paths.items()}
    assert export_graphs(loaded) == paths and {n: p.stat().st_mtime_ns for n, p in paths.items()} == stamp
    assert complete(paths["decode"].parent) and (paths["decode"].parent / INFO_FILE).is_file()
    assert not list(paths["decode"].parent.parent.glob(".tmp-*"))   # no half-written export left beside it
    decode = onnx.load(str(paths["decode"]), load_external_data=False)
    ins = {i.name: i.type.tensor_type for i in decode.graph.input}
    assert ins["pos"].elem_type == onnx.TensorProto.INT64            # positions stay integer
    assert [d.dim_param for d in ins["past_k_0"].shape.dim][0:3:2] == ["batch", "cache"]
    half = tmp_path / "half"
    half.mkdir()
    (half / "prefill.onnx").write_bytes(b"")                         # an incomplete folder is never used
    assert not complete(half)


def _step_logits(model, rows: list[tuple[torch.Tensor, int]]):
    """Prefill each (prompt embedding [1, L, C], slot) alone, then one decode step of all rows together: the
    logits [B, Q, V] of that step, through `model` (a CodeModel or OrtCodeModel)."""
    from engine.llama import KVCache

    s = model.llama.s
    cache = KVCache(s, len(rows) + 1, 128, model.device, model.dtype)
    for x, slot in rows:
        L = x.shape[1]
        model.llama(x, model.llama.attention.begin(cache, torch.arange(L)[None], torch.tensor([slot]), [L]))   # prefill
    gen = torch.Generator().manual_seed(3)
    tok = torch.randint(0, model.V - 1, (len(rows), model.Q), generator=gen)
    pos = torch.tensor([[x.shape[1]] for x, _ in rows])
    slots, ends = torch.tensor([s for _, s in rows]), [x.shape[1] + 1 for x, _ in rows]
    call = model.llama.attention.begin(cache, pos, slots, ends)
    h = model.llama(model.code_embedding(tok), call)
    return model.logits(h[:, 0])


def test_decode_step_logits_of_every_head_match_torch(engines):
    from engine.codemodel import CodeModel

    ort_engine, torch_engine = engines
    loaded = torch_engine.loaded
    ref = CodeModel.from_chattts(loaded.chat.gpt, loaded.embed, loaded.tokenizer.spk_emb_ids, "cpu", torch.float32)
    spk = torch_engine._speaker_vector(torch_engine.sample_voice(3))
    rows = [(ref.prompt_embedding(torch.tensor(torch_engine.prompt_ids(t)), spk), slot)
            for slot, t in enumerate(TEXTS[:3])]
    with torch.no_grad():
        a, b = _step_logits(ort_engine.model, rows), _step_logits(ref, rows)
    cos = torch.nn.functional.cosine_similarity(a, b, dim=-1)           # [B, Q]: every row, every head
    assert a.shape == b.shape == (3, ref.Q, ref.V)
    assert float(cos.min()) >= COSINE_MIN and float((a - b).abs().max()) < LOGITS_ATOL, (cos.min(), (a - b).abs().max())


def test_forced_segment_samples_the_same_tokens(engines, requests):
    ort_engine, torch_engine = engines
    a, b = ort_engine.sampled_codes(requests, MAX_BATCH), torch_engine.sampled_codes(requests, MAX_BATCH)
    assert a == b and all(len(v) > 5 for v in a.values())


def test_vocoder_graph_matches_torch(engines):
    from engine.units import samples_for_tokens
    from engine.vocoder import decode

    ort_engine, torch_engine = engines
    h = torch.randn(37, torch_engine.model.llama.s.hidden, generator=torch.Generator().manual_seed(5))
    got = ort_engine.model.vocode(h)
    (ref,) = decode(torch_engine.loaded, [h])
    assert got.shape == ref.shape == (samples_for_tokens(37),)
    snr = 10 * np.log10(np.sum(ref.astype(np.float64) ** 2) / np.sum((ref.astype(np.float64) - got) ** 2))
    assert snr >= SNR_MIN_DB, snr


def test_batched_equals_alone_and_repeats_bitwise(engines, requests):
    """ORT CPU (MLAS), measured: a row's audio does not depend on its batch-mates or on the cache length its step
    gathers (docs/onnx.md); the same composition twice gives the same bits too."""
    ort_engine, _ = engines
    batched = {r.key: r.audio for r in ort_engine.synthesize(requests)}
    assert ort_engine.last_batch_sizes == [3]
    again = {r.key: r.audio for r in ort_engine.synthesize(requests)}
    alone = {r.key: next(iter(ort_engine.synthesize([r]))).audio for r in requests}
    assert all(np.array_equal(batched[k], again[k]) for k in batched)
    assert all(np.array_equal(batched[k], alone[k]) for k in batched)


def test_version_names_backend_and_adopts_nothing(engines):
    import onnxruntime

    ort_engine, torch_engine = engines
    major_minor = ".".join(onnxruntime.__version__.split(".")[:2])
    assert ort_engine.version.endswith(f"-fp32-cpu-onnx-ort{major_minor}-cpu") and ort_engine.adopts == ()
    assert "onnx" not in torch_engine.version and ort_engine.version != torch_engine.version


def test_options_refuse_what_the_graphs_cannot_run():
    for bad, word in ((dict(int8=True), "int8"), (dict(dtype="bf16"), "bf16"), (dict(backend="tf"), "backend")):
        with pytest.raises(ValueError, match=word):
            EngineOptions(**{"backend": "onnx", **bad})


@pytest.mark.slow
def test_fp16_export_keeps_positions_int64_and_runs(engines, tmp_path):
    """The CUDA/TensorRT graphs (fp16): positions stay int64 inputs, the cache is fp16, hidden comes out fp32 —
    and the decode graph runs (here on the CPU provider) to finite values.  ~30 s of export: slow."""
    import onnx
    import onnxruntime as ort

    from engine.onnxgraph import export_graphs

    paths = export_graphs(engines[0].loaded, tmp_path / "fp16", dtype="fp16")
    decode = onnx.load(str(paths["decode"]))
    types = {v.name: v.type.tensor_type.elem_type for v in (*decode.graph.input, *decode.graph.output)}
    T = onnx.TensorProto
    s = engines[0].model.llama.s
    half = {f"{n}_{i}": T.FLOAT16 for n in ("past_k", "past_v", "k", "v") for i in range(s.layers)}
    assert types == {"x": T.FLOAT16, "pos": T.INT64, "hidden": T.FLOAT, **half}
    rng = np.random.default_rng(0)
    past = {f"past_{kv}_{i}": rng.standard_normal((2, s.kv_heads, 8, s.head_dim)).astype(np.float16)
            for kv in "kv" for i in range(s.layers)}
    sess = ort.InferenceSession(str(paths["decode"]), providers=["CPUExecutionProvider"])
    x = rng.standard_normal((2, 1, s.hidden)).astype(np.float16)
    hidden, k0, *_ = sess.run(None, {"x": x, "pos": np.array([[3], [8]]), **past})
    assert hidden.shape == (2, s.hidden) and np.isfinite(hidden).all() and k0.shape == (2, s.kv_heads, 1, s.head_dim)


def test_trt_profiles_cover_every_input_of_each_graph(engines):
    """The TensorRT optimization profiles name every input of each graph, min <= opt <= max on every axis."""
    import onnx

    from engine.onnxgraph import NAMES
    from engine.ortengine import trt_options

    model = engines[0].model
    for name in NAMES:
        prof = trt_options(name, model.folder, 8, 4096)
        assert prof["trt_engine_cache_path"] == str(model.folder / "trt")
        inputs = [i.name for i in onnx.load(str(model.folder / f"{name}.onnx"), load_external_data=False).graph.input]
        parsed = [dict(kv.split(":") for kv in prof[f"trt_profile_{k}_shapes"].split(","))
                  for k in ("min", "opt", "max")]
        assert all(list(p) == inputs for p in parsed), (name, inputs)
        for i in inputs:
            lo, mid, hi = ([int(d) for d in p[i].split("x")] for p in parsed)
            assert all(a <= b <= c for a, b, c in zip(lo, mid, hi)), (name, i)
