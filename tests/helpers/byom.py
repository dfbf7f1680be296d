"""Models a team brings that no stock layout describes, made at test time (nothing downloaded).

- Adapters: a `peft` LoRA adapter made by peft itself (get_peft_model + save_pretrained) over the REAL
  all-MiniLM-L6-v2 backbone; its lora_B matrices are set to seeded non-zero values (peft starts them at zero, which
  would leave the outputs unchanged), and a modules_to_save classifier copy to other seeded values than the base's.
  The classifier's base head is SYNTHETIC: seeded weights over the real backbone.
- Remote code: a tiny SYNTHETIC BERT whose configuration_tiny.py / modeling_tiny.py live in the model directory and
  are registered through config.json's auto_map (model_type "tiny-remote"); its forward scales the contextual rows,
  so it is not plain BERT.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch

from helpers import synthetic

SENTIMENT = ["negative", "neutral", "positive"]


def make_minilm_classifier(out: Path, labels: list[str] = SENTIMENT, seed: int = 0) -> Path:
    """The REAL MiniLM backbone with a seeded sequence-classification head, saved with its tokenizer."""
    import transformers

    model = transformers.AutoModelForSequenceClassification.from_pretrained(
        str(synthetic.minilm_path()), local_files_only=True, num_labels=len(labels),
        id2label=dict(enumerate(labels)), label2id={v: i for i, v in enumerate(labels)})
    torch.manual_seed(seed)
    with torch.no_grad():
        model.classifier.weight.normal_(0, 0.2)
        model.classifier.bias.normal_(0, 0.1)
    model.save_pretrained(str(out))
    transformers.AutoTokenizer.from_pretrained(str(synthetic.minilm_path())).save_pretrained(str(out))
    return out


def make_lora(base: Path, out: Path, auto_class: str = "AutoModel", modules_to_save: list[str] | None = None,
              seed: int = 1, targets: tuple[str, ...] = ("query", "value"), **load_kwargs) -> Path:
    """A LoRA adapter over the model in ``base`` (loaded with ``auto_class``), made and saved by peft; lora_B (and
    a modules_to_save copy) seeded so that the adapter changes the outputs."""
    import peft
    import transformers

    model = getattr(transformers, auto_class).from_pretrained(str(base), local_files_only=True, **load_kwargs)
    config = peft.LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=list(targets),
                             modules_to_save=modules_to_save)
    wrapped = peft.get_peft_model(model, config)
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in wrapped.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.05)
            elif "modules_to_save" in name:
                p.add_(torch.randn_like(p) * 0.1)
    wrapped.save_pretrained(str(out))
    return out


def edit_adapter_tensors(adapter: Path, which: str, scale: float = 1.5) -> None:
    """Rewrite the adapter's weights with the ``which`` tensors ('lora' or 'head': the modules_to_save copy)
    scaled, everything else as it was."""
    from safetensors.torch import load_file, save_file

    path = adapter / "adapter_model.safetensors"
    state = load_file(str(path))
    hit = 0
    for name in list(state):
        is_lora = "lora_" in name
        if (which == "lora") == is_lora:
            state[name] = state[name] * scale
            hit += 1
    assert hit, f"no {which} tensors in {path}"
    save_file(state, str(path), metadata={"format": "pt"})


def peft_eager(base: Path, adapter: Path, auto_class: str = "AutoModel"):
    """The oracle: the base with the adapter applied by peft, unmerged, in eval mode."""
    import peft
    import transformers

    model = getattr(transformers, auto_class).from_pretrained(str(base), local_files_only=True)
    return peft.PeftModel.from_pretrained(model, str(adapter)).eval()


CONFIGURATION = '''
from transformers import BertConfig


class TinyConfig(BertConfig):
    model_type = "tiny-remote"

    def __init__(self, scale=1.5, **kwargs):
        super().__init__(**kwargs)
        self.scale = scale
'''

MODELING = '''
from transformers import BertModel

from .configuration_tiny import TinyConfig


class TinyModel(BertModel):
    """BERT whose contextual rows are scaled by config.scale: not what plain BERT computes."""

    config_class = TinyConfig

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, **kwargs):
        out = super().forward(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                              **kwargs)
        out.last_hidden_state = out.last_hidden_state * self.config.scale{twist}
        return out
'''


def make_remote_code_model(out: Path, scale: float = 1.5, seed: int = 0) -> Path:
    """A tiny SYNTHETIC BERT saved with its own code (configuration_tiny.py, modeling_tiny.py) and config.json's
    auto_map pointing to it; the MiniLM WordPiece tokenizer."""
    import transformers

    tok = synthetic.make_tokenizer("bert")
    config = synthetic.make_config("bert", len(tok))
    torch.manual_seed(seed)
    transformers.BertModel(config).eval().save_pretrained(str(out))
    tok.save_pretrained(str(out))
    (out / "configuration_tiny.py").write_text(CONFIGURATION)
    (out / "modeling_tiny.py").write_text(MODELING.format(twist=""))
    doc = json.loads((out / "config.json").read_text())
    doc.update(model_type="tiny-remote", architectures=["TinyModel"], scale=scale,
               auto_map={"AutoConfig": "configuration_tiny.TinyConfig", "AutoModel": "modeling_tiny.TinyModel"})
    (out / "config.json").write_text(json.dumps(doc, indent=2))
    return out


def edit_modeling(model: Path) -> None:
    """Change what the model's own code computes (a shift after the scale)."""
    (model / "modeling_tiny.py").write_text(MODELING.format(twist=" + 0.25"))


def copy_model(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def refused(tmp_path: Path, doc: dict, path: str, words: str, command: str = "validate") -> str:
    """Run ``command`` on ``doc`` (written as tmp_path/manifest.json) as a user does: exit 2, one line
    ``error: PATH: ...`` holding ``words``, and nothing written beside the manifest. Returns the line."""
    from click.testing import CliRunner

    from readout_export.cli import main

    (tmp_path / "manifest.json").write_text(json.dumps(doc))
    result = CliRunner().invoke(main, [command, str(tmp_path / "manifest.json")])
    message = result.stderr.strip()
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert message.count("\n") == 0, f"expected one line, got: {message!r}"
    assert message.startswith(f"error: {path}:"), message
    assert words in message, message
    assert [p.name for p in tmp_path.iterdir()] == ["manifest.json"]  # nothing written
    return message
