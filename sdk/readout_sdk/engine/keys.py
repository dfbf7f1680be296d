"""What an engine keys caches on (`readout_sdk.release.identity`) and the vector forms it declares."""
from __future__ import annotations

from typing import Any

from readout_sdk.artifact import Artifact, ArtifactError
from readout_sdk.errors import WrongCall
from readout_sdk.families import Context, Family
from readout_sdk.release.identity import cache_key
from readout_sdk.roles import Role, input_policy
from readout_sdk.vector_forms import VectorForm


def layer_key(artifact: Artifact, target: Any, family: Family, role: Role | None, output_name: str | None,
              layer: str, form: str | None) -> str:
    """The cache key of ``layer`` made by ``target`` under ``role`` (by what the role does to the input), for
    one readout (``output_name``) of a multi-output artifact, in a vector ``form``."""
    if artifact.identity is None:
        raise ArtifactError(f"{artifact.path}: built before readout-identity/1, so it has no layer "
                            "digests to key a cache on; rebuild it with this readout-export")
    effect = input_policy(role)
    name = target.name if effect is None else f"{target.name}:input={effect}"
    if output_name is not None:  # one readout of several: its values are not its siblings'
        name += f":output={output_name}"
    return cache_key(artifact.identity, layer, name, family.vector_layer, form)


def declared_form(context: Context, form: str | None) -> VectorForm | None:
    """The declared vector form named ``form`` (None: the full vector); refused, naming the declared ones."""
    if form is None:
        return None
    if form not in context.forms:
        said = f"its forms are {list(context.forms)}" if context.forms else "it declares none"
        raise WrongCall(f"vector form {form!r} is not declared by this artifact; {said}")
    return context.forms[form]
