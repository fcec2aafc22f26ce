"""What XLA is given: a recorder of every compile JAX starts (tests that compare the
programs x64guard.jit and jax.jit hand XLA). It patches a private JAX function, seen in
jax 0.10.2, 0.11.2 and 0.12.0.1 (compiler.compile_or_get_cached)."""

from __future__ import annotations


def recording_compiles():
    """A context manager yielding a list that receives (module name, serialized
    CompileOptions) of every XLA compile JAX starts inside it (jax.jit's and x64guard.jit's:
    both go through compiler.compile_or_get_cached; seen in jax 0.10.2). For tests that
    compare what XLA is given."""
    import contextlib

    from jax._src import compiler
    from jax._src.lib.mlir import ir

    @contextlib.contextmanager
    def recording():
        original = compiler.compile_or_get_cached
        records: list = []

        def compile_or_get_cached(backend, computation, devices, compile_options, *args, **kwargs):
            name = ir.StringAttr(computation.operation.attributes["sym_name"]).value
            records.append((name, compile_options.SerializeAsString()))
            return original(backend, computation, devices, compile_options, *args, **kwargs)

        compiler.compile_or_get_cached = compile_or_get_cached
        try:
            yield records
        finally:
            compiler.compile_or_get_cached = original

    return recording()


