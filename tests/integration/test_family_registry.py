"""The registry of model families (san.models.families): every row's class names resolve to transformers classes of
the right kind, and importing the registry imports no family's modelling code, which a fresh interpreter shows."""

import subprocess
import sys

from transformers import PretrainedConfig, PreTrainedModel

from san.models.families import FAMILIES


def test_registry_names_transformers_classes_and_imports_them_on_use():
    """Every family's class names resolve to transformers classes of the right kind, and importing the registry
    imports no family's modelling code (a job imports only the family it runs)."""
    for name, entry in FAMILIES.items():
        assert issubclass(entry.config_cls, PretrainedConfig), name
        assert issubclass(entry.model_cls, PreTrainedModel), name
        assert entry.model_cls.config_class is entry.config_cls, name
        assert entry.lm_cls is None or issubclass(entry.lm_cls, PreTrainedModel), name
    probe = (
        "import sys; from san.models.families import FAMILIES; "
        "print(sorted(m for m in sys.modules if '.modeling_' in m and '.models.' in m)); "
        "FAMILIES['bert'].model_cls; "
        "print(sorted(m for m in sys.modules if '.modeling_' in m and '.models.' in m))"
    )
    before, after = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert before == "[]"
    assert "transformers.models.bert.modeling_bert" in after and "gemma3" not in after
