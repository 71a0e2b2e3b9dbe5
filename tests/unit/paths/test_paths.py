"""Path evaluation (the paper's Fig. 4 protocol): the batched evaluator against slow and hand-written references."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from san.core.attention import MultiHeadSelfAttention
from san.models.entries import depth_and_heads
from san.paths import evaluate
from san.paths.evaluate import prefix_tree, sample_path_sets, sample_paths
from san.paths.model import SAN, SANConfig
from san.paths.spec import PAD, SKIP, path_counts, path_length_shares

from reference import reference_path_set_accuracy, reference_path_set_logits

torch.set_num_threads(1)

TOKENS = SANConfig("tokens", n_layers=4, n_heads=3, dim=12, n_classes=5, vocab_size=9, max_len=7)
POINTS = SANConfig("points", n_layers=3, n_heads=2, dim=8, n_classes=2, point_mlp=True)


def random_model(cfg: SANConfig, seed: int = 0, seeds: list[int] | None = None) -> SAN:
    """A float64 SAN (one seed unless ``seeds``) with every parameter random (biases and LayerNorms included), so no
    term can hide."""
    gen = torch.Generator().manual_seed(seed)
    model = SAN(cfg, seeds or [seed]).double()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * 0.5)
    return model.eval()


def _one(t: torch.Tensor | None) -> torch.Tensor | None:
    return None if t is None else t[None]


def fwd(model: SAN, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """A one-seed network's logits on its inputs ``(b, n, ...)``."""
    return model(x[None], _one(mask))[0]


def path_set_logits(model: SAN, x: torch.Tensor, sets, mask: torch.Tensor | None = None) -> torch.Tensor:
    return evaluate.path_set_logits(model, x[None], sets, _one(mask))[0]


def evaluate_path_sets(model: SAN, x, y, mask, sets, memory_mb: float = 32.0) -> torch.Tensor:
    return evaluate.evaluate_path_sets(model, x[None], y[None], _one(mask), sets, memory_mb)[0]


def random_inputs(cfg: SANConfig, batch: int = 5, n: int = 6, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    if cfg.input_kind == "tokens":
        x = torch.randint(0, cfg.vocab_size, (batch, n), generator=g)
    else:
        x = torch.randn(batch, n, 2, generator=g, dtype=torch.float64)
    y = torch.randint(0, cfg.n_classes, (batch, n), generator=g)
    return x, y


def padding_mask(batch: int, n: int) -> torch.Tensor:
    mask = torch.ones(batch, n, dtype=torch.bool)
    mask[0, n - 2 :] = False
    mask[2, n - 1 :] = False
    return mask


def fwd_classifier(model: SAN, h: torch.Tensor) -> torch.Tensor:
    return model.classifier(h[None])[0]


def layer_norm_by_hand(x: torch.Tensor, eps: float) -> torch.Tensor:
    return (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + eps)


# ---------------------------------------------------------------------------------------------------------------
# Counting and sampling


def test_path_counts_are_binomial_and_exact():
    assert path_counts(2, 1) == [1, 2, 1]
    assert path_counts(3, 2) == [1, 6, 12, 8]
    for layers, heads in [(6, 12), (24, 128), (96, 96)]:
        counts = path_counts(layers, heads)
        assert sum(counts) == (heads + 1) ** layers  # exact integers, no overflow
        shares = path_length_shares(layers, heads)
        assert shares.sum() == pytest.approx(1.0)
        mean = (np.arange(layers + 1) * shares).sum()
        assert mean == pytest.approx(layers * heads / (heads + 1))
    np.testing.assert_allclose(path_length_shares(3, 2), np.array([1, 6, 12, 8]) / 27)


@pytest.mark.parametrize("length", [0, 1, 3, 4])
def test_sample_paths_have_the_requested_length(length):
    paths = sample_paths(4, 3, length, 50, np.random.default_rng(0))
    assert paths.shape == (50, 4)
    assert ((paths != SKIP).sum(1) == length).all()
    assert ((paths >= SKIP) & (paths < 3)).all()


def test_sample_paths_are_uniform_over_paths_of_a_length():
    # L=3, H=2, k=2: C(3,2) * 2^2 = 12 equally likely paths
    paths = sample_paths(3, 2, 2, 12_000, np.random.default_rng(1))
    _, counts = np.unique(paths, axis=0, return_counts=True)
    assert len(counts) == 12
    expected = 1000
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 40  # 11 degrees of freedom: P(chi2 > 40) < 1e-4


def test_path_sets_are_padded_seeded_and_fresh():
    sets = sample_path_sets(4, 3, [2, 5], 3, seed=7)
    assert sets.shape == (2, 5, 3, 5, 4)
    assert (sets[0, :, :, 2:] == PAD).all() and (sets[0, :, :, :2] != PAD).all() and (sets[1] != PAD).all()
    for k in range(5):
        assert ((sets[1, k] != SKIP).sum(-1) == k).all()
    np.testing.assert_array_equal(sets, sample_path_sets(4, 3, [2, 5], 3, seed=7))
    assert not np.array_equal(sets, sample_path_sets(4, 3, [2, 5], 3, seed=8))
    assert not np.array_equal(sets[1, 2, 0], sets[1, 2, 1])  # repeats draw fresh paths


def test_prefix_tree_shares_prefixes_and_recovers_paths():
    paths = torch.tensor([[SKIP, 0, 1], [SKIP, 0, SKIP], [SKIP, 0, 1], [2, SKIP, SKIP]])
    tree = prefix_tree(paths, n_heads=3)
    assert tree.n_nodes == [2, 2, 3]
    assert tree.leaf[0] == tree.leaf[2] and len(set(tree.leaf.tolist())) == 3
    assert tree.n_head_evaluations == 3  # (2), (skip,0), (skip,0,1): shared prefixes are evaluated once
    for p, leaf in zip(paths.tolist(), tree.leaf.tolist(), strict=True):  # walk back from the leaf
        node, rebuilt = leaf, []
        for layer in reversed(range(3)):
            rebuilt.append(int(tree.choices[layer][node]))
            node = int(tree.parents[layer][node])
        assert rebuilt[::-1] == p and node == 0
    with pytest.raises(ValueError):
        prefix_tree(torch.tensor([[0, 3]]), n_heads=3)


def test_depth_and_heads_of_configured_families():
    assert depth_and_heads("bert", {"num_hidden_layers": 12, "num_attention_heads": 12}) == (12, 12)
    assert depth_and_heads("xlnet", {"n_layer": 24, "n_head": 16}) == (24, 16)
    with pytest.raises(ValueError):
        depth_and_heads("gpt", {})


# ---------------------------------------------------------------------------------------------------------------
# Batched evaluation against references


@pytest.mark.parametrize("cfg", [TOKENS, POINTS], ids=["tokens", "points"])
@pytest.mark.parametrize("masked", [False, True], ids=["no_mask", "padding"])
def test_batched_logits_equal_the_per_path_reference(cfg, masked):
    model = random_model(cfg)
    x, _ = random_inputs(cfg)
    mask = padding_mask(*x.shape[:2]) if masked else None
    sets = sample_path_sets(cfg.n_layers, cfg.n_heads, [1, 3, 6], 2, seed=3)
    batched = path_set_logits(model, x, sets, mask)
    assert batched.shape == (*sets.shape[:3], *x.shape[:2], cfg.n_classes)
    for idx in np.ndindex(*sets.shape[:3]):
        ref = reference_path_set_logits(model, x, sets[idx], mask)
        torch.testing.assert_close(batched[idx], ref, rtol=1e-9, atol=1e-9)


def test_batched_accuracy_equals_the_reference_across_chunks():
    model = random_model(TOKENS, seed=4)
    x, y = random_inputs(TOKENS, batch=11)
    mask = padding_mask(11, x.shape[1])
    y = y.masked_fill(~mask, -100)
    sets = sample_path_sets(TOKENS.n_layers, TOKENS.n_heads, [2, 5], 3, seed=5)
    one_chunk = evaluate_path_sets(model, x, y, mask, sets, memory_mb=64)
    many_chunks = evaluate_path_sets(model, x, y, mask, sets, memory_mb=1e-3)  # one input per chunk
    ref = reference_path_set_accuracy(model, x, y, sets, mask)
    assert one_chunk.shape == sets.shape[:3]
    np.testing.assert_allclose(one_chunk.numpy(), ref, rtol=0, atol=1e-12)
    np.testing.assert_allclose(many_chunks.numpy(), ref, rtol=0, atol=1e-12)
    assert len(np.unique(ref)) > 3  # the sets genuinely differ


@pytest.mark.parametrize("cfg", [TOKENS, POINTS], ids=["tokens", "points"])
def test_seeds_evaluated_together_equal_each_seed_alone(cfg):
    """Three seeds, each on its own inputs, in one batched evaluation: every logit and accuracy equals that seed's
    own evaluation, in one chunk and across chunks of one input."""
    stack = random_model(cfg, seeds=[0, 1, 2])
    models = [stack.member(i) for i in range(3)]
    data = [random_inputs(cfg, batch=7, seed=s) for s in (3, 4, 5)]
    masks = [padding_mask(7, 6).roll(s, 0) for s in range(3)]
    ys = [y.masked_fill(~m, -100) for (_, y), m in zip(data, masks, strict=True)]
    x, y, mask = torch.stack([d[0] for d in data]), torch.stack(ys), torch.stack(masks)
    sets = sample_path_sets(cfg.n_layers, cfg.n_heads, [2, 5], 2, seed=6)
    together = evaluate.path_set_logits(stack, x, sets, mask).flatten(1, 3)
    alone = [evaluate_path_sets(m, x[s], y[s], mask[s], sets) for s, m in enumerate(models)]
    for s, m in enumerate(models):
        expected = path_set_logits(m, x[s], sets, mask[s]).reshape(together.shape[1:])
        torch.testing.assert_close(together[s], expected, rtol=1e-12, atol=1e-12)
    for memory_mb in (64, 1e-3):
        got = evaluate.evaluate_path_sets(stack, x, y, mask, sets, memory_mb)
        assert got.shape == (3, *sets.shape[:3])
        np.testing.assert_array_equal(got.numpy(), torch.stack(alone).numpy())
    assert not np.array_equal(alone[0].numpy(), alone[1].numpy())  # the seeds genuinely differ
    full = evaluate.model_accuracy(stack, x, y, mask)
    assert full.tolist() == [
        evaluate.model_accuracy(m, x[s : s + 1], y[s : s + 1], mask[s : s + 1])[0] for s, m in enumerate(models)
    ]


def test_length_zero_paths_reduce_to_the_classifier_on_the_normalised_embedding():
    model = random_model(TOKENS)
    x, _ = random_inputs(TOKENS)
    skip = np.full((1, 4, TOKENS.n_layers), SKIP)  # a set of four length-0 paths
    with torch.no_grad():
        emb = model.embedding.norm(
            model.embedding.linear(model.embedding.word(x[None]) + model.embedding.position.weight[:, None, :6])
        )[0]
        expected = fwd_classifier(model, layer_norm_by_hand(emb, TOKENS.layer_norm_eps))
    torch.testing.assert_close(path_set_logits(model, x, skip)[0], expected, rtol=1e-9, atol=1e-9)


def test_a_single_path_equals_the_chain_of_single_head_computations_by_hand():
    cfg = TOKENS
    model = random_model(cfg, seed=9)
    x, _ = random_inputs(cfg)
    mask = padding_mask(*x.shape)
    path = [1, SKIP, 2, 0]  # head 1 of layer 0, skip layer 1, head 2 of layer 2, head 0 of layer 3
    d, dh, eps = cfg.dim, cfg.dim // cfg.n_heads, cfg.layer_norm_eps
    with torch.no_grad():
        h = model.embed(x[None])[0]
        for layer, head in enumerate(path):
            if head == SKIP:
                continue
            attn = model.layers[layer].attn
            w, b = attn.qkv.weight[0], attn.qkv.bias[0]
            cols = slice(head * dh, (head + 1) * dh)
            w_q, w_k, w_v = w[:d][cols].T, w[d : 2 * d][cols].T, w[2 * d :][cols].T  # (d, d_h) each
            b_q, b_k, b_v = b[:d][cols], b[d : 2 * d][cols], b[2 * d :][cols]
            w_o = attn.out.weight[0].T[cols]  # (d_h, d): the head's rows of W^O
            new = torch.empty_like(h)
            for i in range(x.shape[0]):  # one input at a time, as in Eq. 1
                X = h[i]
                A = (X @ w_q + b_q) @ (X @ w_k + b_k).T / math.sqrt(dh)
                A[:, ~mask[i]] = -math.inf
                P = torch.softmax(A, dim=1)
                assert torch.allclose(P.sum(1), torch.ones(len(X), dtype=P.dtype))
                new[i] = P @ (X @ w_v + b_v) @ w_o + attn.out.bias[0]
            h = layer_norm_by_hand(new, eps)
        expected = fwd_classifier(model, layer_norm_by_hand(h, eps))
    got = path_set_logits(model, x, np.array([[path]]), mask)[0]
    torch.testing.assert_close(got, expected, rtol=1e-9, atol=1e-9)


def test_the_evaluation_sees_which_head_a_path_takes():
    model = random_model(POINTS)
    x, _ = random_inputs(POINTS)
    a = path_set_logits(model, x, np.array([[[0, SKIP, SKIP]], [[1, SKIP, SKIP]], [[SKIP, 0, SKIP]]]))
    assert not torch.allclose(a[0], a[1]) and not torch.allclose(a[0], a[2])


def test_head_forward_mixed_heads_equal_single_heads_and_sum_to_the_layer():
    torch.manual_seed(0)
    attn = MultiHeadSelfAttention(12, 3).double().eval()
    x = torch.randn(5, 6, 12, dtype=torch.float64)
    mask = padding_mask(5, 6)
    heads = torch.tensor([2, 0, 1, 2, 0])
    mixed = attn.head_forward(x, heads, mask)
    for i, h in enumerate(heads.tolist()):
        torch.testing.assert_close(mixed[i], attn.head_forward(x[i : i + 1], h, mask[i : i + 1])[0])
    total = sum(attn.head_forward(x, h, mask) for h in range(3)) + attn.out.bias
    torch.testing.assert_close(total, attn(x, mask))


def test_pad_rows_are_ignored_and_malformed_paths_rejected():
    model = random_model(POINTS)
    x, _ = random_inputs(POINTS)
    full = np.array([[[0, SKIP, 1], [SKIP, 1, SKIP]]])
    padded = np.array([[[0, SKIP, 1], [SKIP, 1, SKIP], [PAD, PAD, PAD]]])
    torch.testing.assert_close(path_set_logits(model, x, full), path_set_logits(model, x, padded))
    with pytest.raises(ValueError):
        path_set_logits(model, x, np.array([[[0, PAD, 1]]]))
    with pytest.raises(ValueError):
        path_set_logits(model, x, np.array([[[0, 1]]]))  # wrong number of layers


def test_model_accuracy_and_save_load_round_trip(tmp_path):
    model = random_model(TOKENS).float()
    x, y = random_inputs(TOKENS, batch=7)
    y[0, :2] = -100
    with torch.no_grad():
        pred = fwd(model, x).argmax(-1)
    valid = y >= 0
    acc = evaluate.model_accuracy(model, x[None], y[None], batch_size=3)
    assert acc.tolist() == pytest.approx([float((pred == y)[valid].float().mean())])
    model.save(str(tmp_path / "m.safetensors"), metadata={"task": "t"})
    loaded, meta = SAN.load(str(tmp_path / "m.safetensors"))
    assert meta["task"] == "t" and loaded.cfg == model.cfg and not loaded.training and loaded.seeds == model.seeds
    with torch.no_grad():
        torch.testing.assert_close(fwd(loaded, x), fwd(model, x))


def test_dropout_only_while_training():
    model = SAN(SANConfig("tokens", 2, 2, 8, 3, vocab_size=5, max_len=4, dropout=0.5), [0])
    x = torch.randint(0, 5, (1, 3, 4))
    model.eval()
    with torch.no_grad():
        assert torch.equal(model(x), model(x))
        model.train()
        assert not torch.equal(model(x), model(x))


def test_padding_keys_do_not_influence_real_tokens():
    model = random_model(TOKENS)
    x, _ = random_inputs(TOKENS)
    mask = padding_mask(*x.shape)
    x2 = x.clone()
    x2[~mask] = (x2[~mask] + 1) % TOKENS.vocab_size  # change only padding tokens
    with torch.no_grad():
        a, b = fwd(model, x, mask), fwd(model, x2, mask)
    torch.testing.assert_close(a[mask], b[mask])
    assert not torch.allclose(a[~mask], b[~mask])


def test_init_follows_the_authors_code():
    model = SAN(SANConfig("tokens", 2, 2, 64, 3, vocab_size=50, max_len=8), [0])
    attn = model.layers[0].attn
    q_std = attn.qkv.weight[0, :64].std().item()
    v_bound = attn.qkv.weight[0, 128:].abs().max().item()
    assert 0.015 < q_std < 0.025  # BERT's N(0, 0.02)
    assert 0.08 < v_bound <= 1 / math.sqrt(64)  # PyTorch's default uniform(+-1/sqrt(d)) for values and outputs
    assert attn.out.weight.abs().max() <= 1 / math.sqrt(64)
    assert torch.count_nonzero(attn.qkv.bias) == 0
    assert torch.equal(model.embedding.norm.weight, torch.ones(1, 64))
