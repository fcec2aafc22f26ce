"""docs/design-process.md's table "what moved to a public path": each public name x64guard
now uses is the very object of JAX's that the private import gave, on the JAX this runs on
(the matrix runs it on every supported JAX). Where a JAX no longer has the private path,
the public one must still exist."""

from __future__ import annotations

import importlib

import pytest

# (private, public): "module:attribute.attribute". jax.extend.mlir's submodules re-export
# jaxlib's, so their classes are compared, not the module objects.
MOVED = [
    ("jax._src.lib.mlir:ir.Module", "jax.extend.mlir:ir.Module"),
    ("jax._src.lib.mlir:ir.RankedTensorType", "jax.extend.mlir:ir.RankedTensorType"),
    ("jax._src.lib.mlir:passmanager.PassManager", "jax.extend.mlir:passmanager.PassManager"),
    ("jax._src.lib.mlir.dialects:func.FuncOp", "jax.extend.mlir.dialects:func.FuncOp"),
    ("jax._src.core:Jaxpr", "jax.extend.core:Jaxpr"),
    ("jax._src.core:ClosedJaxpr", "jax.extend.core:ClosedJaxpr"),
    ("jax._src.core:Var", "jax.extend.core:Var"),
    ("jax._src.core:DropVar", "jax.extend.core:DropVar"),
    ("jax._src.core:Literal", "jax.extend.core:Literal"),
    ("jax._src.core:new_jaxpr_eqn", "jax.extend.core:new_jaxpr_eqn"),
    ("jax._src.core:Primitive", "jax.extend.core:Primitive"),
    ("jax._src.core:Tracer", "jax.core:Tracer"),
    ("jax._src.core:AbstractValue", "jax.core:AbstractValue"),
    ("jax._src.lax.lax:convert_element_type_p", "jax.extend.core.primitives:convert_element_type_p"),
    ("jax._src.linear_util:WrappedFun", "jax.extend.linear_util:WrappedFun"),
    ("jax._src.source_info_util:summarize", "jax.extend.source_info_util:summarize"),
    ("jax._src.source_info_util:register_exclusion", "jax.extend.source_info_util:register_exclusion"),
    ("jax._src.stages:Traced", "jax.stages:Traced"),
    ("jax._src.dtypes:issubdtype", "jax.dtypes:issubdtype"),
    ("jax._src.dtypes:extended", "jax.dtypes:extended"),
    ("jax._src.interpreters.mlir:register_lowering", "jax.interpreters.mlir:register_lowering"),
    ("jax._src.interpreters.mlir:merge_mlir_modules", "jax.interpreters.mlir:merge_mlir_modules"),
    ("jax._src.interpreters.mlir:TokenSet", "jax.interpreters.mlir:TokenSet"),
    ("jax._src.interpreters.batching:primitive_batchers", "jax.interpreters.batching:primitive_batchers"),
    ("jax._src.config:enable_x64", "jax:enable_x64"),
]


def resolve(path: str):
    """The object at "module:a.b"; a missing attribute may be a submodule not yet imported."""
    module, _, attributes = path.partition(":")
    found = importlib.import_module(module)
    for name in attributes.split("."):
        if not hasattr(found, name):
            importlib.import_module(f"{found.__name__}.{name}")
        found = getattr(found, name)
    return found


@pytest.mark.parametrize("private, public", MOVED, ids=[public for _, public in MOVED])
def test_the_public_path_is_the_object_the_private_one_gave(private, public):
    public_object = resolve(public)
    try:
        private_object = resolve(private)
    except (ImportError, AttributeError):
        return  # this JAX moved its private path; the public one, which x64guard uses, is here
    assert public_object is private_object


def test_resolve_fails_on_a_path_that_does_not_exist():
    with pytest.raises((ImportError, AttributeError)):
        resolve("jax.extend.core:NoSuchThing")
