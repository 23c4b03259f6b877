"""Reference package, lessons 01, 02, 04, 05 (heads): embedding, positional encoding, masks, heads.

Every expected value comes from PyTorch's own modules or from the formula
written out here, never from the package itself.
"""

import math

import pytest
import torch
from torch import nn

from solutions import (
    Embedding,
    PositionalEncoding,
    causal_mask,
    decoder_mask,
    merge_heads,
    padding_mask,
    sinusoidal_encoding,
    split_heads,
)

# sinusoidal_encoding builds the table in float32: its angles pos * freq carry a
# relative rounding error of ~1e-7, i.e. ~1e-5 absolute at pos ~ 200.
PE_ATOL = 5e-5


def formula_table(max_len: int, d_model: int) -> torch.Tensor:
    """pe[pos, 2i] = sin(pos / 10000^(2i/D)), pe[pos, 2i+1] = cos(...), in float64 with plain math."""
    rows = []
    for pos in range(max_len):
        row = []
        for column in range(d_model):
            two_i = column - column % 2
            angle = pos / 10000 ** (two_i / d_model)
            row.append(math.sin(angle) if column % 2 == 0 else math.cos(angle))
        rows.append(row)
    return torch.tensor(rows, dtype=torch.float64)  # [max_len, D]


# --- 01 Embedding -----------------------------------------------------------------


@pytest.mark.parametrize(("vocab_size", "d_model"), [(11, 8), (5, 3), (40, 64)])
def test_embedding_equals_nn_embedding_times_sqrt_d_model(vocab_size, d_model):
    torch.manual_seed(0)
    theirs = nn.Embedding(vocab_size, d_model)
    ours = Embedding(vocab_size, d_model)
    ours.load_state_dict({f"lut.{key}": value for key, value in theirs.state_dict().items()}, strict=True)
    tokens = torch.randint(0, vocab_size, (3, 7))  # [B, T]
    tokens[0, 0], tokens[-1, -1] = 0, vocab_size - 1  # both ends of the range
    out = ours(tokens)  # [B, T, D]
    assert out.shape == (3, 7, d_model)
    torch.testing.assert_close(out, theirs(tokens) * math.sqrt(d_model))


def test_embedding_lut_is_an_nn_embedding_of_the_right_size():
    ours = Embedding(13, 6)
    assert isinstance(ours.lut, nn.Embedding)
    assert ours.lut.weight.shape == (13, 6)


@pytest.mark.parametrize("bad_id", [11, 100, -1])
def test_embedding_rejects_ids_outside_the_vocabulary(bad_id):
    tokens = torch.tensor([[0, 3, bad_id]])
    with pytest.raises(ValueError, match=r"\[0, 11\)"):  # the message names the valid range
        Embedding(11, 4)(tokens)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_embedding_rejects_float_token_ids_naming_the_dtype(dtype):
    tokens = torch.tensor([[0.0, 1.0, 2.0]], dtype=dtype)
    with pytest.raises(TypeError, match=str(dtype).replace(".", r"\.")):
        Embedding(11, 4)(tokens)


# --- 02 Positional encoding ---------------------------------------------------------


@pytest.mark.parametrize(("max_len", "d_model"), [(1, 2), (7, 2), (50, 4), (200, 64), (30, 510)])
def test_sinusoidal_encoding_matches_the_formula(max_len, d_model):
    pe = sinusoidal_encoding(max_len, d_model)
    assert pe.shape == (max_len, d_model)
    torch.testing.assert_close(pe.double(), formula_table(max_len, d_model), rtol=0, atol=PE_ATOL)


@pytest.mark.parametrize("d_model", [1, 3, 7, 513])
def test_sinusoidal_encoding_rejects_odd_d_model(d_model):
    with pytest.raises(ValueError, match="d_model"):
        sinusoidal_encoding(10, d_model)


def test_positional_encoding_registers_pe_as_a_buffer_of_shape_max_len_by_d():
    module = PositionalEncoding(d_model=6, max_len=20)
    buffers = dict(module.named_buffers())
    assert "pe" in buffers, f"expected a buffer named 'pe', got buffers {sorted(buffers)}"
    assert buffers["pe"].shape == (20, 6)  # [max_len, D]
    assert "pe" not in dict(module.named_parameters()), "pe must not be trained"
    assert "pe" in module.state_dict()
    torch.testing.assert_close(buffers["pe"].double(), formula_table(20, 6), rtol=0, atol=PE_ATOL)


@pytest.mark.parametrize("seq_len", [1, 5, 20])
def test_positional_encoding_adds_the_first_t_rows_of_the_table(seq_len):
    torch.manual_seed(1)
    x = torch.randn(3, seq_len, 8, dtype=torch.float64)  # [B, T, D]
    module = PositionalEncoding(d_model=8, max_len=20).double()
    expected = x + formula_table(20, 8)[:seq_len]  # [B, T, D] + [T, D]
    torch.testing.assert_close(module(x), expected, rtol=0, atol=PE_ATOL)


def test_positional_encoding_in_eval_mode_applies_no_dropout():
    torch.manual_seed(2)
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    module = PositionalEncoding(d_model=8, max_len=10, dropout=0.5).double().eval()
    torch.testing.assert_close(module(x), x + formula_table(10, 8)[:5], rtol=0, atol=PE_ATOL)


def test_positional_encoding_rejects_a_sequence_longer_than_max_len():
    module = PositionalEncoding(d_model=4, max_len=6)
    module(torch.zeros(1, 6, 4))  # T == max_len is fine
    with pytest.raises(ValueError, match="max_len"):
        module(torch.zeros(1, 7, 4))


# --- 04 Masks -------------------------------------------------------------------------


@pytest.mark.parametrize("size", [1, 2, 5])
def test_causal_mask_is_true_where_key_index_at_most_query_index(size):
    mask = causal_mask(size)
    assert mask.dtype == torch.bool
    assert mask.shape == (size, size)
    expected = torch.tensor([[key <= query for key in range(size)] for query in range(size)])
    assert torch.equal(mask, expected), f"rows are queries, columns keys; got\n{mask.int()}"
    assert torch.equal(mask, torch.tril(torch.ones(size, size, dtype=torch.bool)))


def test_causal_mask_accepts_a_device():
    assert causal_mask(3, device="cpu").device.type == "cpu"


@pytest.mark.parametrize("pad_id", [0, 3])
def test_padding_mask_is_true_at_real_tokens_with_shape_b_1_1_t(pad_id):
    tokens = torch.tensor([[5, 6, 7, pad_id, pad_id], [pad_id, 1, 2, 4, 9], [8, pad_id, 8, 8, pad_id]])
    mask = padding_mask(tokens, pad_id)
    assert mask.dtype == torch.bool
    assert mask.shape == (3, 1, 1, 5)  # [B, 1, 1, T]
    for b in range(3):
        for t in range(5):
            assert bool(mask[b, 0, 0, t]) == (int(tokens[b, t]) != pad_id), f"batch {b}, position {t}"


def test_decoder_mask_is_padding_and_causal_with_shape_b_1_t_t():
    pad_id = 0
    tokens = torch.tensor([[4, 5, 6, 0], [0, 2, 3, 1], [7, 0, 7, 0]])  # [B=3, T=4]
    mask = decoder_mask(tokens, pad_id)
    assert mask.dtype == torch.bool
    assert mask.shape == (3, 1, 4, 4)  # [B, 1, T, T]
    for b in range(3):
        for query in range(4):
            for key in range(4):
                expected = key <= query and int(tokens[b, key]) != pad_id
                assert bool(mask[b, 0, query, key]) == expected, f"batch {b}, query {query}, key {key}"


# --- 05 Splitting and merging heads --------------------------------------------------


@pytest.mark.parametrize(("n_heads", "d_model"), [(1, 4), (3, 12), (4, 8)])
def test_split_heads_puts_the_ith_block_of_d_k_columns_in_head_i(n_heads, d_model):
    torch.manual_seed(3)
    x = torch.randn(2, 5, d_model)  # [B, T, D]
    d_k = d_model // n_heads
    heads = split_heads(x, n_heads)
    assert heads.shape == (2, n_heads, 5, d_k)  # [B, h, T, d_k]
    for i in range(n_heads):
        assert torch.equal(heads[:, i], x[..., i * d_k : (i + 1) * d_k]), f"head {i}"


@pytest.mark.parametrize(("n_heads", "d_model"), [(1, 4), (3, 12), (4, 8)])
def test_merge_heads_concatenates_heads_along_the_model_dimension(n_heads, d_model):
    torch.manual_seed(4)
    d_k = d_model // n_heads
    heads = torch.randn(2, n_heads, 5, d_k)  # [B, h, T, d_k]
    merged = merge_heads(heads)
    assert merged.shape == (2, 5, d_model)  # [B, T, D]
    torch.testing.assert_close(merged, torch.cat(heads.unbind(dim=1), dim=-1), rtol=0, atol=0)


def test_merge_heads_undoes_split_heads():
    torch.manual_seed(5)
    x = torch.randn(3, 7, 12)
    assert torch.equal(merge_heads(split_heads(x, 4)), x)
